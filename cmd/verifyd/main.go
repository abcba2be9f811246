// Command verifyd is the email verification appliance daemon.
//
// It reads its configuration (see package config; -config, default
// /etc/verifyd/verifyd.toml, or the embedded defaults when that file does not
// exist), opens its data directory, starts the public API, the metrics
// listener and the engine, and runs until SIGTERM or SIGINT, when it drains
// in-flight requests within http.shutdown_timeout and exits 0.
//
//	verifyd                       run (embedded defaults if no file)
//	verifyd -config FILE          run with FILE
//	verifyd -check-config [-config FILE]   validate and exit (non-zero if bad)
//	verifyd -print-config         print the effective configuration as TOML
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/pprofhandler"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/server"
	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/batch"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/outcomes"
	"github.com/verifyd/verifyd/server/outcomes/platform"
	"github.com/verifyd/verifyd/server/tlsserve"
	"github.com/verifyd/verifyd/server/typos"
	"github.com/verifyd/verifyd/server/web"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/systemd/sdnotify"
)

func main() {
	configPath := flag.String("config", "", "configuration file (default "+config.DefaultPath+" if it exists, else the embedded defaults)")
	checkConfig := flag.Bool("check-config", false, "validate the configuration and exit")
	printConfig := flag.Bool("print-config", false, "print the effective configuration as TOML and exit")
	flag.Parse()

	cfg, source, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *checkConfig {
		if cfg.HTTP.TLS() {
			// The certificate and key are read as the start would.
			if err := tlsserve.Check(cfg.HTTP.TLSCert, cfg.HTTP.TLSKey, nil); err != nil {
				fmt.Fprintf(os.Stderr, "%s: http.tls_cert: %v\n", source, err)
				os.Exit(2)
			}
		}
		fmt.Printf("%s: ok\n", source)
		return
	}
	if *printConfig {
		text, err := cfg.TOML()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(text)
		return
	}
	level := new(slog.LevelVar)
	log := newLogger(cfg, level)
	slog.SetDefault(log)
	if err := run(cfg, *configPath, source, log, level); err != nil {
		log.Error("verifyd stopped", "err", err)
		os.Exit(1)
	}
}

func fileExistsAt(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadConfig reads the file at path, or the default path when path is empty
// and the file exists, or else the embedded defaults.
func loadConfig(path string) (config.Config, string, error) {
	if path == "" {
		if _, err := os.Stat(config.DefaultPath); errors.Is(err, fs.ErrNotExist) {
			c := config.Defaults()
			c.DemoAccount = true // make run: a first session needs a key
			c.Derive()
			return c, "embedded defaults", c.Validate()
		}
		path = config.DefaultPath
	}
	c, err := config.Load(path)
	return c, path, err
}

func newLogger(cfg config.Config, level *slog.LevelVar) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.LogLevel))
	level.Set(lv)
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "auto" {
		format = "json"
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// keyReload is how often a box of a fleet reads the shared signing key
// set again.
const keyReload = 30 * time.Second

func run(cfg config.Config, path, source string, log *slog.Logger, level *slog.LevelVar) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("cannot create data dir: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	a, err := open(cfg, log)
	if err != nil {
		return err
	}
	defer a.close(log)
	if cfg.DemoAccount {
		if err := bootstrap(ctx, a.db, os.Stdout); err != nil {
			return fmt.Errorf("cannot create the demo account: %w", err)
		}
	}

	var proxies []netip.Prefix
	for _, p := range cfg.HTTP.TrustedProxies {
		if pfx, err := netip.ParsePrefix(p); err == nil {
			proxies = append(proxies, pfx)
		} else if ip, err := netip.ParseAddr(p); err == nil {
			proxies = append(proxies, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	limits := cfg.RateLimits
	// --- the HTTP kit (server/httpapi): the limits of spec §8 and the
	// authentication of spec §5, shared by /v1 and the dashboard.
	guard := httpapi.NewGuard(httpapi.GuardOptions{
		DB:               a.db,
		IPLimits:         httpapi.DefaultIPLimits(limits.Window, limits.Validate, limits.Batch, limits.Results, limits.Other),
		IPLimitsDisabled: limits.Disabled,
		TrustedProxies:   proxies,
		IPv6PrefixLen:    cfg.HTTP.IPv6PrefixLen,
		RequestTimeout:   cfg.HTTP.RequestTimeout,
		Logger:           log,
	})
	// --- webhooks (server/webhook): deliver the outbox's events.
	hooks, err := webhook.Start(webhook.Options{
		DB: a.db, Logger: log,
		Timeout: cfg.Webhooks.Timeout, AllowPrivate: cfg.Webhooks.AllowPrivate,
		RetrySchedule: cfg.Webhooks.RetrySchedule, GiveUpAfter: cfg.Webhooks.GiveUpAfter,
		Concurrency: cfg.Webhooks.Concurrency,
		// Webhook hosts resolve on resolver.upstreams, like every other
		// lookup of verifyd, never through the system's resolver.
		Resolver: webhookResolver{a.res},
	})
	if err != nil {
		return fmt.Errorf("cannot start webhooks: %w", err)
	}
	defer hooks.Close(context.Background()) // after an early return; a no-op after the one below
	// --- delivery outcomes (server/outcomes): matched to verdicts,
	// learned from, kept per account; the domain knowledge in this box's
	// Pebble, or shared by the fleet's PostgreSQL.
	var facts outcomes.FactStore = a.local
	if a.pg != nil {
		facts = a.pg
	}
	oc := cfg.Outcomes
	learned := outcomes.New(outcomes.Options{DB: a.db, Facts: facts, Window: oc.Window, Retention: oc.Retention,
		DomainTTL: oc.DomainTTL, MinBounces: oc.MinBounces, BounceShare: oc.BounceShare,
		Calibrate: a.db, RefitEvery: oc.RefitEvery, MinCalibration: oc.CalibrationMinOutcomes, Refresh: oc.DomainsRefresh, Logger: log})
	defer learned.Close()
	platforms, err := snsPlatforms(oc)
	if err != nil {
		return err
	}
	// --- batch jobs (server/batch): resume the jobs left queued or
	// running, and schedule them.
	var leases storage.JobLeases
	if a.pg != nil {
		leases = a.pg // a fleet: this box runs the job slices it leases
	}
	// --- each account's own domains as did-you-mean targets (server/typos)
	var accountTypos *typos.Accounts
	if cfg.Probe.DidYouMean {
		accountTypos = typos.New(a.db, typos.Options{})
	}
	jobs, err := batch.Start(batch.Options{
		DB: a.db, Leases: leases, Verifier: a.pools, Hooks: hooks, Learn: learned, Typos: accountTypos, Logger: log,
		RetryWindow: cfg.Jobs.RetryWindow, Concurrency: cfg.Jobs.Concurrency,
		DomainConcurrency: cfg.Jobs.DomainConcurrency, GroupSize: cfg.Jobs.GroupSize,
		GroupTimeout: cfg.Jobs.GroupTimeout, MaxFailures: cfg.Jobs.MaxFailures,
	})
	if err != nil {
		return fmt.Errorf("cannot start batch jobs: %w", err)
	}
	defer jobs.Close(context.Background()) // after an early return; a no-op after the one below
	// --- HTTPS (server/tlsserve), when configured
	var certs *tlsserve.Files
	var acmeCerts *tlsserve.ACME
	var tlsConf *tls.Config
	switch {
	case cfg.HTTP.TLSCert != "":
		if certs, err = tlsserve.Load(cfg.HTTP.TLSCert, cfg.HTTP.TLSKey, nil); err != nil {
			return fmt.Errorf("cannot serve HTTPS: %w", err)
		}
		tlsConf = tlsserve.Config(certs.GetCertificate)
	case len(cfg.HTTP.ACMEHosts) > 0:
		acmeCerts, err = tlsserve.NewACME(tlsserve.ACMEOptions{Hosts: cfg.HTTP.ACMEHosts, Email: cfg.HTTP.ACMEEmail,
			Directory: cfg.HTTP.ACMEDirectory, CAFile: cfg.HTTP.ACMECAFile, CacheDir: filepath.Join(cfg.DataDir, "acme")})
		if err != nil {
			return fmt.Errorf("cannot serve HTTPS: %w", err)
		}
		tlsConf = acmeCerts.Config()
	}
	// --- the /v1 API (server)
	api := server.New(server.Options{
		Outcomes:               learned,
		Platforms:              platforms,
		Typos:                  accountTypos,
		DB:                     a.db,
		Keys:                   a.keys,
		Verifier:               a.pools,
		Guard:                  guard,
		Batch:                  jobs,
		Webhooks:               hooks,
		MaxEmails:              cfg.Limits.BatchMaxEmails,
		MaxDownloads:           cfg.Limits.CSVDownloads,
		MaxDownloadsPerAccount: cfg.Limits.CSVDownloadsPerAccount,
		ReadTimeout:            cfg.HTTP.ReadTimeout,
		WriteTimeout:           cfg.HTTP.WriteTimeout,
		IdleTimeout:            cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:         cfg.HTTP.MaxHeaderBytes,
		MaxConns:               cfg.HTTP.MaxConns,
		MaxConnsPerIP:          cfg.HTTP.MaxConnsPerIP,
		LingerTimeout:          cfg.HTTP.LingerTimeout,
		LingerBytes:            cfg.HTTP.LingerBytes,
		MaxBodyBytes:           cfg.Limits.BatchMaxBodyBytes,
		MaxSmallBody:           cfg.Limits.MaxBodyBytes,
		RealtimeBudget:         cfg.Probe.RealtimeBudget,
		CacheMaxAge:            cfg.Probe.CacheMaxAge,
		TrustedProxies:         proxies,
		IPv6PrefixLen:          cfg.HTTP.IPv6PrefixLen,
		Logger:                 log,
		TLS:                    tlsConf,
		HSTS:                   tlsserve.HSTS(cfg.HTTP.HSTSMaxAge),
		Unready:                a.unready,
	})
	// --- the account surface (server/web): /auth/*
	au := cfg.Auth
	acct, err := web.New(web.Options{
		DB: a.db, Guard: guard, Logger: log,
		Registration: au.Registration, OpenPlan: storage.Plan(au.OpenPlan), OpenCredits: au.OpenCredits,
		SessionLifetime: au.SessionLifetime, SessionIdle: au.SessionIdle,
		SecureCookie:  au.SecureCookie,
		HSTS:          tlsserve.HSTS(cfg.HTTP.HSTSMaxAge),
		LinkLimit:     httpapi.Limit{N: au.LinkLimit, Window: au.LinkWindow},
		RegisterLimit: httpapi.Limit{N: au.RegisterLimit, Window: au.RegisterWindow},
		LoginLimit:    httpapi.Limit{N: au.LoginLimit, Window: au.LoginWindow},
		Argon2: web.Argon2Params{MemoryKiB: uint32(au.Argon2MemoryKiB), Iterations: uint32(au.Argon2Iterations),
			Parallelism: uint8(au.Argon2Parallelism)},
	})
	if err != nil {
		return fmt.Errorf("cannot start the account surface: %w", err)
	}
	defer acct.Close()
	// The admin socket and the dashboard share their handlers: a change
	// made in the browser runs the same code as one made with verifyctl.
	egressActions := a.egressActions(log)
	adm := admin.New(admin.Options{DB: a.db, Keys: a.keys, Logger: log, HashPassword: acct.HashPassword,
		InviteLifetime: au.InviteLifetime, Webhooks: hooks,
		Extra: a.opsRoutes(cfg.DataDir, egressActions, api.Router())})
	acct.Register(api.Router(), web.Actions{Admin: adm.Handlers(), Hooks: adm.HookHandlers(),
		Egress: egressActions, Jobs: api.AccountJobs, Accuracy: api.AccuracyOf})
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on http.listen: %w", err)
	}
	errc := make(chan error, 4)
	go func() { errc <- api.Serve(ln) }()
	scheme := "http"
	var redirectSrv *fasthttp.Server
	if tlsConf != nil {
		scheme = "https"
		if cfg.HTTP.RedirectListen != "" {
			rln, err := net.Listen("tcp", cfg.HTTP.RedirectListen)
			if err != nil {
				return fmt.Errorf("cannot listen on http.redirect_listen: %w", err)
			}
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			var claim func(*fasthttp.RequestCtx) bool
			if acmeCerts != nil {
				claim = acmeCerts.Challenge()
			}
			redirectSrv = &fasthttp.Server{Handler: tlsserve.Redirect(port, claim), Name: "verifyd",
				ReadTimeout: cfg.HTTP.ReadTimeout, WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
				MaxRequestBodySize: 1 << 10, DisableKeepalive: true}
			go func() { errc <- redirectSrv.Serve(rln) }()
			log.Info("redirecting plain HTTP to HTTPS", "listen", rln.Addr().String())
		}
		if certs != nil {
			log.Info("serving HTTPS", "cert", cfg.HTTP.TLSCert, "subject", certs.Leaf().Subject.String(),
				"not_after", certs.Leaf().NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if acmeCerts != nil {
		// The certificates are ordered now rather than at the first
		// handshake, so the log says at once whether the CA could issue
		// them; the listener serves meanwhile.
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			if err := acmeCerts.Prefetch(pctx); err != nil {
				log.Error("cannot get a certificate from the ACME CA; a handshake will try again", "directory", cfg.HTTP.ACMEDirectory, "err", err)
				return
			}
			log.Info("serving HTTPS with certificates from the ACME CA", "hosts", cfg.HTTP.ACMEHosts, "directory", cfg.HTTP.ACMEDirectory)
		}()
	}

	// The egress pool's events (cooldowns, policy blocks, reputation,
	// addresses taken out of rotation) become reputation.warning webhooks
	// of the running jobs.
	a.egressEvents.Store(jobs)
	if err := adm.Listen(cfg.Admin.Socket); err != nil {
		return fmt.Errorf("cannot listen on admin.socket: %w", err)
	}
	go func() { errc <- adm.Serve() }()

	var metricsSrv *fasthttp.Server
	metricsAddr := ""
	if cfg.Metrics.Listen != "" {
		mln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("cannot listen on metrics.listen: %w", err)
		}
		metricsAddr = mln.Addr().String()
		pprof := cfg.Metrics.Pprof
		metricsSrv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			if pprof && bytes.HasPrefix(ctx.Path(), []byte("/debug/pprof/")) {
				pprofhandler.PprofHandler(ctx)
				return
			}
			if string(ctx.Path()) != "/metrics" {
				ctx.Error("not found", fasthttp.StatusNotFound)
				return
			}
			ctx.SetContentType("text/plain; version=0.0.4")
			metrics.WritePrometheus(ctx, true)
		}}
		go func() { errc <- metricsSrv.Serve(mln) }()
	}
	log.Info("verifyd listening", "config", source, "api", scheme+"://"+ln.Addr().String(),
		"metrics", metricsAddr, "data_dir", cfg.DataDir, "admin_socket", cfg.Admin.Socket)
	fmt.Fprintf(os.Stderr, "verifyd: API on %s://%s  (health: %s://%s/healthz)\n", scheme, ln.Addr(), scheme, ln.Addr())

	selfCheck := egress.SelfCheckOptions{Resolver: a.res, Pool: a.egress,
		DNSBLZones: cfg.Probe.DNSBLZones, Enforce: cfg.Egress.SelfCheckEnforce, Logger: log}
	if cfg.Egress.SelfCheckInterval > 0 {
		// Its first run also gives each address without a configured
		// HELO name its forward-confirmed PTR name.
		go egress.RunSelfChecks(ctx, cfg.Egress.SelfCheckInterval, selfCheck)
	} else if cfg.SMTP.HeloName == "" {
		go func() {
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			egress.DiscoverHeloNames(dctx, selfCheck)
		}()
	}
	if path == "" && fileExistsAt(config.DefaultPath) {
		path = config.DefaultPath
	}
	rl := &reloader{path: path, cur: cfg, app: a, guard: guard, level: level, log: log, certs: certs}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// systemd (Type=notify): ready once storage is open and every listener
	// is up; the watchdog is fed from this loop while storage answers.
	_ = sdnotify.Ready()
	_ = sdnotify.Status("serving")
	watchdog, stopWatchdog := sdnotify.WatchdogTick()
	defer stopWatchdog()
	// In a fleet another box may rotate the signing key (verifyctl keys
	// rotate on it): every box takes the new set within keyReload.
	var keysTick <-chan time.Time
	if a.pg != nil {
		t := time.NewTicker(keyReload)
		defer t.Stop()
		keysTick = t.C
	}
wait:
	for {
		select {
		case <-ctx.Done():
			_ = sdnotify.Stopping()
			log.Info("shutting down", "timeout", cfg.HTTP.ShutdownTimeout)
			break wait
		case err := <-errc:
			return fmt.Errorf("listener failed: %w", err)
		case <-watchdog:
			if _, err := a.local.LoadEgressState(); err == nil {
				_ = sdnotify.Watchdog()
			} else {
				log.Error("storage does not answer; withholding the watchdog ping", "err", err)
			}
		case <-keysTick:
			if changed, err := a.keys.Reload(); err != nil {
				log.Warn("cannot reload the fleet's signing keys", "err", err)
			} else if changed {
				log.Info("signing key rotated by another box", "kid", a.keys.ActiveKid())
			}
		case <-hup:
			_ = sdnotify.Reloading()
			changes, err := rl.reload()
			_ = sdnotify.Ready()
			if err != nil {
				log.Error("reload", "err", err)
				_ = sdnotify.Status("serving; last reload refused: " + err.Error())
				continue
			}
			_ = sdnotify.Status("serving")
			if len(changes) == 0 {
				changes = []string{"nothing changed"}
			}
			for _, c := range changes {
				log.Info("reloaded", "change", c)
			}
		}
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := jobs.Close(sctx); err != nil { // batch jobs: results received are written; the rest resumes at the next start
		log.Warn("batch jobs shutdown", "err", err)
	}
	if err := hooks.Close(sctx); err != nil { // deliveries in flight go again after the restart
		log.Warn("webhooks shutdown", "err", err)
	}
	if err := api.Shutdown(sctx); err != nil {
		log.Warn("api shutdown", "err", err)
	}
	if err := adm.Shutdown(sctx); err != nil {
		log.Warn("admin shutdown", "err", err)
	}
	if metricsSrv != nil {
		_ = metricsSrv.ShutdownWithContext(sctx)
	}
	if redirectSrv != nil {
		_ = redirectSrv.ShutdownWithContext(sctx)
	}
	log.Info("stopped", "drain", time.Since(start).Round(time.Millisecond))
	return nil
}

// snsPlatforms makes the sending platforms' receivers; SNS's certificate
// hosts and trust from [outcomes].
func snsPlatforms(oc config.Outcomes) (*server.Platforms, error) {
	sns := &platform.SNS{AllowedHosts: oc.SNSHosts}
	if oc.SNSCAFile != "" {
		b, err := os.ReadFile(oc.SNSCAFile)
		if err != nil {
			return nil, fmt.Errorf("outcomes.sns_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("outcomes.sns_ca_file %s holds no PEM certificate", oc.SNSCAFile)
		}
		sns.Roots, sns.Intermediates = pool, pool
	}
	if err := sns.Validate(); err != nil {
		return nil, fmt.Errorf("outcomes.sns_hosts: %w", err)
	}
	return &server.Platforms{SNS: sns, SendGrid: &platform.SendGrid{}, Mailgun: &platform.Mailgun{}, Postmark: &platform.Postmark{}}, nil
}
