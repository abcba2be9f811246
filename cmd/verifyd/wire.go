package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/probe/lists"
	"github.com/verifyd/verifyd/probe/typo"
	"github.com/verifyd/verifyd/resolver"
	"github.com/verifyd/verifyd/server/batch"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/postgres"
)

// A fleet's guard reads plans from the store's cache, not the database.
var _ httpapi.PlanReader = (*postgres.DB)(nil)

// app is verifyd's parts, wired from the configuration.
type app struct {
	// db is the shared state: local on one box, pg in a fleet.
	db storage.Store
	// local is this box's Pebble: its egress state and, on one box,
	// everything (then db is local).
	local *pebble.DB
	// pg is the fleet's database (storage.backend = "postgres"), or nil.
	pg     *postgres.DB
	keys   *receipt.KeySet
	res    *resolver.Resolver
	egress *egress.Pool
	lists  *lists.Store
	engine *probe.Engine
	pools  *probe.Pools
	auth   *authsig.Collector
	age    *authsig.DomainAge
	// egressEvents receives the pool's events once the batch scheduler
	// runs (it is started after the pool).
	egressEvents atomic.Pointer[batch.Scheduler]
}

// open builds every part in dependency order; on error it closes what it
// opened.
func open(cfg config.Config, log *slog.Logger) (_ *app, err error) {
	// a is what was built so far, closed on error: the result is nil
	// then, so the deferred close must not go through it.
	a := &app{}
	defer func() {
		if err != nil {
			a.close(log)
		}
	}()
	minFree := cfg.Storage.MinFreeBytes
	if minFree == 0 {
		minFree = -1 // no guard
	}
	if a.local, err = pebble.Open(filepath.Join(cfg.DataDir, "db"), pebble.Options{Logger: log, MinFreeBytes: minFree}); err != nil {
		return nil, fmt.Errorf("cannot open storage: %w", err)
	}
	a.local.ExportMetrics()
	a.db = a.local
	var keyStore receipt.KeyStore = receipt.NewFileStore(filepath.Join(cfg.DataDir, "signing"))
	if cfg.Storage.Backend == "postgres" {
		dsn := cmp.Or(os.Getenv("VERIFYD_PG_DSN"), cfg.Storage.DSN)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		a.pg, err = postgres.Open(ctx, dsn, postgres.Options{Box: cfg.Storage.Box, Lease: cfg.Storage.Lease, CallTimeout: cfg.Storage.CallTimeout,
			CreditLeases: cfg.Storage.CreditLeases, ChargeGather: gather(cfg.Storage.ChargeGather), Logger: log})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cannot open the fleet's database: %w", err)
		}
		a.db, keyStore = a.pg, a.pg.SigningKeys()
		log.Info("fleet mode: shared state in PostgreSQL", "box", cfg.Storage.Box, "boot", a.pg.Boot())
	}
	a.keys, err = receipt.NewKeySet(keyStore)
	if errors.Is(err, postgres.ErrKeysChanged) {
		// Another box made the fleet's first key at the same moment.
		a.keys, err = receipt.NewKeySet(keyStore)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load signing keys: %w", err)
	}
	if a.res, err = resolver.New(resolver.Options{
		Upstreams:      cfg.Resolver.Upstreams,
		Timeout:        cfg.Resolver.Timeout,
		MinTTL:         cfg.Resolver.MinTTL,
		MaxTTL:         cfg.Resolver.MaxTTL,
		NegativeMaxTTL: cfg.Resolver.NegativeMaxTTL,
		CacheEntries:   cfg.Resolver.CacheEntries,
		ServeStale:     cfg.Resolver.ServeStale,
		Prefetch:       cfg.Resolver.Prefetch,
		MaxInFlight:    cfg.Resolver.MaxInFlight,
		Logger:         log,
	}); err != nil {
		return nil, fmt.Errorf("cannot start the resolver: %w", err)
	}
	addrs, err := egressAddresses(cfg.Egress)
	if err != nil {
		log.Warn("egress addresses left out", "err", err)
	}
	heloNames, err := egressHeloNames(cfg.Egress)
	if err != nil {
		log.Warn("egress HELO names left out", "err", err)
	}
	if a.egress, err = egress.New(egress.Options{
		Addresses:        addrs,
		HeloNames:        heloNames,
		HeloName:         cfg.SMTP.HeloName,
		DefaultHeloName:  config.HostName(),
		MaxConnsPerHost:  cfg.Egress.MaxConnsPerHost,
		MaxRatePerHost:   cfg.Egress.MaxRatePerHost,
		GreylistCooldown: cfg.Egress.GreylistCooldown,
		MaxCooldown:      cfg.Egress.MaxCooldown,
		ConnectTimeout:   cfg.SMTP.ConnectTimeout,
		Store:            a.local,
		Logger:           log,
		OnEvent: func(ev egress.Event) {
			if s := a.egressEvents.Load(); s != nil {
				s.EgressEvent(ev)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("cannot start the egress pool: %w", err)
	}
	if a.lists, err = lists.NewStore(cfg.Probe.ListsDir); err != nil {
		return nil, fmt.Errorf("cannot load lists: %w", err)
	}
	if cfg.Probe.AuthSignals {
		ageOpts := authsig.AgeOptions{Resolver: a.res, RDAP: cfg.Probe.RDAPServers, WHOIS: cfg.Probe.WHOISServers}
		if cfg.Probe.RegistryAllowPrivate {
			ageOpts.Allow = func(netip.Addr) bool { return true }
		}
		if a.age, err = authsig.NewDomainAge(ageOpts); err != nil {
			return nil, fmt.Errorf("cannot start domain age lookups: %w", err)
		}
		if a.auth, err = authsig.NewCollector(authsig.CollectorOptions{
			Resolver:      a.res,
			DKIMSelectors: cfg.Probe.DKIMSelectors,
			TrustKeys:     cfg.Probe.TrustKeys,
			DNSBL:         cfg.Probe.DNSBLZones,
			DNSWL:         cfg.Probe.DNSWLZones,
			Age:           a.age,
			Concurrency:   cfg.Probe.AuthConcurrency,
			Refresh:       cfg.Resolver.Prefetch,
		}); err != nil {
			return nil, fmt.Errorf("cannot start the auth signals: %w", err)
		}
	}
	if a.engine, err = probe.New(probe.Options{
		Auth:           a.auth,
		Resolver:       a.res,
		Egress:         a.egress,
		Lists:          a.lists.Get,
		SMTPPort:       cfg.SMTP.Port,
		HeloName:       cmp.Or(cfg.SMTP.HeloName, config.HostName()), // when the pool gives none
		MailFrom:       cfg.SMTP.MailFrom,
		CommandTimeout: cfg.SMTP.CommandTimeout, GreetingTimeout: cfg.SMTP.GreetingTimeout, MaxMXHosts: cfg.SMTP.MaxMXHosts,
		BatchShare:       cfg.Probe.BatchShare,
		BatchSchedTarget: cfg.Probe.BatchSchedTarget,
		BatchQueueTarget: cfg.Probe.BatchQueueTarget,
		SessionTimeout:   cfg.SMTP.SessionTimeout,
		StartTLS:         cfg.SMTP.StartTLS,
		NoSessionReuse:   !cfg.Probe.SessionReuse,
		CatchAllTTL:      cfg.Probe.CatchAllTTL,
		Facts:            a.facts(),
		Typos:            a.typos(cfg),
		Logger:           log,
	}); err != nil {
		return nil, err
	}
	if a.pools, err = probe.NewPools(a.engine, probe.PoolOptions{
		Realtime: cfg.Probe.RealtimeWorkers,
		Batch:    cfg.Probe.BatchWorkers,
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// typos are the engine's did-you-mean targets: nil when turned off
// (probe.did_you_mean).
func (a *app) typos(cfg config.Config) *typo.Suggester {
	if !cfg.Probe.DidYouMean {
		return nil
	}
	return typo.Shipped()
}

// facts is what the engine shares with the fleet's other boxes: nil on
// one box.
func (a *app) facts() probe.Facts {
	if a.pg == nil {
		return nil
	}
	return a.pg
}

// cfgDrain bounds the wait for running probes at shutdown.
const cfgDrain = 10 * time.Second

// close stops the parts in reverse order.
// unready is /readyz's reason not to send this box requests, "" when
// it can serve them (server.Options.Unready): in a fleet, no writable
// primary (postgres.DB.Ready); on one box, a disk too full to charge.
func (a *app) unready() string {
	if a.pg != nil {
		if a.pg.Ready() != nil {
			return "database"
		}
		return ""
	}
	if a.local.Low() {
		return "storage_full"
	}
	return ""
}

func (a *app) close(log *slog.Logger) {
	if a.pools != nil {
		if err := a.pools.Close(cfgDrain); err != nil {
			log.Warn("probe pools did not drain", "err", err)
		}
	}
	if a.auth != nil {
		a.auth.Close()
	}
	if a.age != nil {
		a.age.Close()
	}
	if a.egress != nil {
		if err := a.egress.Close(); err != nil {
			log.Warn("egress close", "err", err)
		}
	}
	if a.res != nil {
		a.res.Close()
	}
	if a.pg != nil {
		if err := a.pg.Close(); err != nil {
			log.Error("fleet database close", "err", err)
		}
	}
	if a.local != nil {
		if err := a.local.Close(); err != nil {
			log.Error("storage close", "err", err)
		}
	}
}

// bootstrap creates the demo account on an empty data directory: an account
// with credits and one key with both scopes, printed once to w.
func bootstrap(ctx context.Context, db storage.Store, w io.Writer) error {
	accts, err := db.ListAccounts(ctx)
	if err != nil || len(accts) > 0 {
		return err
	}
	acct, err := db.CreateAccount(ctx, "demo", storage.PlanEnterprise)
	if err != nil {
		return err
	}
	if _, err := db.AddCredits(ctx, acct.ID, 1000, "demo account"); err != nil {
		return err
	}
	key, _, err := db.MintKey(ctx, acct.ID, []string{"validate:read", "validate:write", "outcomes:write"}, "demo")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nverifyd: created demo account %s with 1000 credits.\n", acct.ID)
	fmt.Fprintf(w, "verifyd: its API key (shown once, keep it): %s\n\n", key)
	return nil
}

// webhookResolver gives the webhook dialer verifyd's resolver.
type webhookResolver struct{ r *resolver.Resolver }

func (w webhookResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	res, err := w.r.LookupIP(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if len(res.IPs) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	return slices.Clone(res.IPs), nil
}

// gather is storage.charge_gather as postgres.Options.ChargeGather takes
// it: 0 (none) is negative there.
func gather(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
