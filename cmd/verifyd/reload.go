package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/tlsserve"
)

// reloader applies a new configuration on SIGHUP. What can change live:
//
//   - the egress pool (egress.addresses and egress.addresses_dir): new
//     addresses join, removed ones drain (no new sessions, in-flight ones
//     finish);
//   - the lists (probe.lists_dir files are read again);
//   - the per source IP rate limits ([rate_limits]);
//   - the log level;
//   - the HTTPS certificate and key (http.tls_cert, http.tls_key), read
//     again whether or not their paths changed: a renewed certificate is
//     usually written over the old files.
//
// Everything else needs a restart and is reported as such. A file that does
// not load or validate is refused and the running configuration kept.
type reloader struct {
	path  string // "" for the embedded defaults
	cur   config.Config
	app   *app
	guard *httpapi.Guard
	level *slog.LevelVar
	log   *slog.Logger
	certs *tlsserve.Files // nil without TLS
}

// reload reads the configuration again and applies what it can. It returns
// one line per change.
func (r *reloader) reload() ([]string, error) {
	next, _, err := loadConfig(r.path)
	if err != nil {
		return nil, fmt.Errorf("new configuration refused, the running one is kept: %w", err)
	}
	var changes []string

	addrs, err := egressAddresses(next.Egress)
	if err != nil {
		r.log.Warn("egress addresses left out", "err", err)
	}
	added, drained, err := r.app.egress.SetAddresses(addrs)
	if err != nil {
		return changes, fmt.Errorf("egress pool: %w", err)
	}
	names, err := egressHeloNames(next.Egress)
	if err != nil {
		r.log.Warn("egress HELO names left out", "err", err)
	}
	r.app.egress.SetHeloNames(names)
	if len(added) > 0 && next.SMTP.HeloName == "" {
		// The added addresses learn their PTR names now, not at the next
		// self-check.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			egress.DiscoverHeloNames(ctx, egress.SelfCheckOptions{Resolver: r.app.res, Pool: r.app.egress})
		}()
	}
	for _, a := range added {
		changes = append(changes, "egress: added "+a.String())
	}
	for _, a := range drained {
		changes = append(changes, "egress: draining "+a.String())
	}

	if desc, err := r.app.lists.Reload(); err != nil {
		r.log.Warn("lists not reloaded, the running ones are kept", "err", err)
	} else if desc != "" {
		changes = append(changes, "lists: "+desc)
	}

	if next.RateLimits != r.cur.RateLimits {
		rl := next.RateLimits
		r.guard.SetIPLimits(httpapi.DefaultIPLimits(rl.Window, rl.Validate, rl.Batch, rl.Results, rl.Other), rl.Disabled)
		changes = append(changes, fmt.Sprintf("rate limits: %+v", rl))
	}
	if r.certs != nil && next.HTTP.TLS() {
		if err := r.certs.Reload(next.HTTP.TLSCert, next.HTTP.TLSKey); err != nil {
			r.log.Error("certificate not reloaded, the running one is kept", "err", err)
		} else {
			leaf := r.certs.Leaf()
			changes = append(changes, fmt.Sprintf("tls: certificate %s serial %s, valid until %s", leaf.Subject, leaf.SerialNumber,
				leaf.NotAfter.UTC().Format(time.RFC3339)))
		}
	}
	if next.LogLevel != r.cur.LogLevel {
		var lv slog.Level
		_ = lv.UnmarshalText([]byte(next.LogLevel))
		r.level.Set(lv)
		changes = append(changes, "log level: "+next.LogLevel)
	}
	if restart := needsRestart(r.cur, next); len(restart) > 0 {
		changes = append(changes, "needs a restart to take effect: "+strings.Join(restart, ", "))
	}
	// What was applied is now the running configuration; what needs a
	// restart keeps being reported until it happens.
	applied := r.cur
	applied.Egress, applied.Probe.ListsDir = next.Egress, next.Probe.ListsDir
	applied.RateLimits, applied.LogLevel = next.RateLimits, next.LogLevel
	if r.certs != nil && next.HTTP.TLS() {
		applied.HTTP.TLSCert, applied.HTTP.TLSKey = next.HTTP.TLSCert, next.HTTP.TLSKey
	}
	r.cur = applied
	return changes, nil
}

// needsRestart names the sections that differ in ways reload cannot apply.
func needsRestart(cur, next config.Config) []string {
	var out []string
	cmp := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	cmp("data_dir", cur.DataDir, next.DataDir)
	cmp("log_format", cur.LogFormat, next.LogFormat)
	cmp("http", cur.HTTP, next.HTTP)
	cmp("admin", cur.Admin, next.Admin)
	cmp("metrics", cur.Metrics, next.Metrics)
	cmp("resolver", cur.Resolver, next.Resolver)
	cmp("smtp", cur.SMTP, next.SMTP)
	cmp("limits", cur.Limits, next.Limits)
	cmp("webhooks", cur.Webhooks, next.Webhooks)
	cmp("demo_account", cur.DemoAccount, next.DemoAccount)
	cmp("storage", cur.Storage, next.Storage)
	cmp("jobs", cur.Jobs, next.Jobs)
	cmp("auth", cur.Auth, next.Auth)
	cmp("outcomes", cur.Outcomes, next.Outcomes)
	c, n := cur.Probe, next.Probe
	c.ListsDir, n.ListsDir = "", ""
	cmp("probe", c, n)
	ce, ne := cur.Egress, next.Egress
	ce.Addresses, ne.Addresses, ce.AddressesDir, ne.AddressesDir = nil, nil, "", ""
	cmp("egress (other than addresses)", ce, ne)
	return out
}
