package harness

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// VerifydConfig is what the harness sets in the TOML file it starts verifyd
// with; everything else keeps verifyd's default (cmd/verifyd/config). The
// harness does not import verifyd's config package, so a binary of another
// branch with the same keys works too.
type VerifydConfig struct {
	DataDir     string
	Listen      string // http.listen, e.g. 127.0.0.1:0
	AdminSocket string // admin.socket
	DNS         string // resolver.upstreams: the world's DNS server
	SMTPPort    int    // smtp.port: the world's
	HeloName    string
	// Egress are the source addresses of SMTP sessions (egress.addresses).
	Egress []netip.Addr
	// MaxConnsPerHost and MaxRatePerHost are the egress limits per MX
	// host; the world has one host per domain, so they rarely bind.
	MaxConnsPerHost int
	MaxRatePerHost  float64
	// GreylistCooldown is longer than the world's greylist delay, so the
	// real-time probe's one retry gets through. MaxCooldown caps its
	// doubling: the world's greylisting lasts seconds, not the minutes of
	// real servers, so the cooldowns are scaled down with it.
	GreylistCooldown time.Duration
	MaxCooldown      time.Duration
	CommandTimeout   time.Duration
	RealtimeWorkers  int
	BatchWorkers     int
	RealtimeBudget   time.Duration
	ShutdownTimeout  time.Duration
	LogLevel         string
	// GreetingTimeout, when set, is smtp.greeting_timeout (StartVerifyd
	// sets it to CommandTimeout for binaries that know the key).
	GreetingTimeout time.Duration
	// RetryWindow, when set, is jobs.retry_window.
	RetryWindow time.Duration
	// WebhooksAllowPrivate is webhooks.allow_private (the soak's receiver
	// is on loopback); WebhookRetrySchedule, when set, is
	// webhooks.retry_schedule.
	WebhooksAllowPrivate bool
	WebhookRetrySchedule []time.Duration
	// Metrics, when set, is metrics.listen (host:port): the harness reads
	// the probe-time breakdown there. Pprof turns metrics.pprof on, for
	// the CPU profiles of -profile.
	Metrics string
	Pprof   bool
	// DSN, when set, makes verifyd a box of a fleet on that PostgreSQL
	// database (storage.backend = "postgres"), named Box. A Follower is
	// a box started after the first: the demo account exists already,
	// so it prints no key.
	DSN      string
	Box      string
	Follower bool
	// OutcomesRefitEvery, when set, is outcomes.refit_every (scenario 9).
	OutcomesRefitEvery time.Duration
}

// DefaultVerifydConfig is the configuration of a benchmark run, missing
// only the paths and the world's addresses.
func DefaultVerifydConfig() VerifydConfig {
	return VerifydConfig{
		Listen:           "127.0.0.1:0",
		HeloName:         "verifybench.test",
		Egress:           EgressRange(netip.MustParseAddr("127.0.0.2"), 8),
		MaxConnsPerHost:  16,
		MaxRatePerHost:   10000,
		GreylistCooldown: 3 * time.Second,
		MaxCooldown:      12 * time.Second,
		CommandTimeout:   5 * time.Second,
		RealtimeWorkers:  4096,
		BatchWorkers:     1024,
		RealtimeBudget:   15 * time.Second,
		ShutdownTimeout:  5 * time.Second,
		LogLevel:         "warn",
	}
}

// EgressRange returns n consecutive addresses from first.
func EgressRange(first netip.Addr, n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for a := first; len(out) < n; a = a.Next() {
		out = append(out, a)
	}
	return out
}

// TOML returns the configuration file.
func (c VerifydConfig) TOML() string {
	var b strings.Builder
	kv := func(k string, v any) {
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(v))
		case time.Duration:
			fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(v.String()))
		case float64:
			fmt.Fprintf(&b, "%s = %s\n", k, strconv.FormatFloat(v, 'f', -1, 64))
		case bool:
			fmt.Fprintf(&b, "%s = %t\n", k, v)
		default:
			fmt.Fprintf(&b, "%s = %v\n", k, v)
		}
	}
	b.WriteString("# written by verifybench: a verifyd pointed at the simulated world\n")
	kv("data_dir", c.DataDir)
	kv("log_level", c.LogLevel)
	kv("log_format", "json")
	kv("demo_account", !c.Follower) // the account and key the load uses
	b.WriteString("\n[http]\n")
	kv("listen", c.Listen)
	kv("shutdown_timeout", c.ShutdownTimeout)
	// The load generator is one client address with up to 1,040
	// connections.
	kv("max_conns_per_ip", 0)
	kv("max_conns", 0)
	b.WriteString("\n[admin]\n")
	kv("socket", c.AdminSocket)
	b.WriteString("\n[metrics]\n")
	kv("listen", c.Metrics)
	if c.Pprof {
		kv("pprof", true)
	}
	b.WriteString("\n[resolver]\n")
	fmt.Fprintf(&b, "upstreams = [%s]\n", strconv.Quote(c.DNS))
	b.WriteString("\n[smtp]\n")
	kv("port", c.SMTPPort)
	kv("helo_name", c.HeloName)
	kv("command_timeout", c.CommandTimeout)
	if c.GreetingTimeout > 0 {
		kv("greeting_timeout", c.GreetingTimeout)
	}
	b.WriteString("\n[egress]\n")
	addrs := make([]string, len(c.Egress))
	for i, a := range c.Egress {
		addrs[i] = strconv.Quote(a.String())
	}
	fmt.Fprintf(&b, "addresses = [%s]\n", strings.Join(addrs, ", "))
	kv("max_conns_per_host", c.MaxConnsPerHost)
	kv("max_rate_per_host", c.MaxRatePerHost)
	kv("greylist_cooldown", c.GreylistCooldown)
	kv("max_cooldown", max(c.GreylistCooldown, c.MaxCooldown))
	// The world gives the egress addresses no reverse DNS: the self-check
	// would take all but one out of rotation.
	kv("self_check_interval", "0s")
	b.WriteString("\n[probe]\n")
	kv("realtime_budget", c.RealtimeBudget)
	kv("realtime_workers", c.RealtimeWorkers)
	kv("batch_workers", c.BatchWorkers)
	// The shipped lists only: no operator overrides from /etc.
	kv("lists_dir", "/nonexistent/verifybench")
	if c.RetryWindow > 0 {
		b.WriteString("\n[jobs]\n")
		kv("retry_window", c.RetryWindow)
	}
	if c.WebhooksAllowPrivate || len(c.WebhookRetrySchedule) > 0 {
		b.WriteString("\n[webhooks]\n")
		if c.WebhooksAllowPrivate {
			kv("allow_private", true)
		}
		if len(c.WebhookRetrySchedule) > 0 {
			ds := make([]string, len(c.WebhookRetrySchedule))
			for i, d := range c.WebhookRetrySchedule {
				ds[i] = strconv.Quote(d.String())
			}
			fmt.Fprintf(&b, "retry_schedule = [%s]\n", strings.Join(ds, ", "))
		}
	}
	if c.OutcomesRefitEvery > 0 {
		b.WriteString("\n[outcomes]\n")
		kv("refit_every", c.OutcomesRefitEvery)
	}
	b.WriteString("\n[rate_limits]\n")
	kv("disabled", true)
	if c.DSN != "" {
		b.WriteString("\n[storage]\n")
		kv("backend", "postgres")
		kv("dsn", c.DSN)
		kv("box", c.Box)
	}
	return b.String()
}
