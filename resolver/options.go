package resolver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Options configures a Resolver. Call Defaults to fill the unset fields,
// then Validate; New does both on its own copy.
type Options struct {
	// Upstreams are the recursive resolvers queries are forwarded to, as
	// "ip:port" or "ip" (port 53), IPv6 in brackets with a port ("[::1]:53").
	// They are tried in this order. Empty: the nameservers of ResolvConf.
	Upstreams []string
	// ResolvConf is the file read for the upstreams when Upstreams is
	// empty; default /etc/resolv.conf. New fails if it names none: there is
	// no fallback to public resolvers.
	ResolvConf string
	// Timeout bounds one try at one upstream: the UDP exchange, and again
	// the TCP exchange after a truncated reply. Default 1s.
	Timeout time.Duration
	// Attempts is the number of passes over the upstreams before a query is
	// a temporary failure. An upstream that answered SERVFAIL is not asked
	// again in a later pass of the same query. Default 2.
	Attempts int
	// HealthFailures is the number of consecutive failures (timeouts,
	// network errors, REFUSED, malformed replies) after which an upstream is
	// skipped for HealthCooldown, unless every upstream is skipped.
	// Default 3.
	HealthFailures int
	// HealthCooldown is how long an upstream that failed HealthFailures
	// times in a row is skipped. After it, one more failure skips it again.
	// Default 30s.
	HealthCooldown time.Duration
	// MinTTL and MaxTTL clamp how long a positive answer is cached; MinTTL
	// is also the floor for negative answers. Defaults 5s and 1h.
	MinTTL, MaxTTL time.Duration
	// NegativeMaxTTL caps how long NXDOMAIN and NODATA are cached (RFC 2308
	// §5). Default 5m.
	NegativeMaxTTL time.Duration
	// CacheEntries bounds the number of cached (name, type) entries.
	// Default 100000.
	CacheEntries int
	// CacheBytes bounds the estimated memory of the cached entries; 0 for
	// no bound beyond CacheEntries. Default 64 MiB.
	CacheBytes int64
	// ServeStale keeps expired entries StaleTTL longer and answers from them
	// when every upstream fails (RFC 8767). Default off.
	ServeStale bool
	// Prefetch refreshes an entry in the background when a lookup hits it
	// in the last tenth of its TTL (Unbound's prefetch): the lookup is
	// answered from the cache at once, and a name in steady use never
	// expires under its callers, so the names a batch looked up together
	// do not all miss together one TTL later. A refresh that fails keeps
	// the entry until it expires. Default off.
	Prefetch bool
	// StaleTTL is how long past its expiry an entry may be served stale.
	// Default 24h (RFC 8767 §5 suggests 1 to 3 days).
	StaleTTL time.Duration
	// MaxIdleConns is the number of idle UDP sockets, and separately of
	// idle TCP connections, kept per upstream for reuse. Default 64.
	MaxIdleConns int
	// MaxInFlight bounds the upstream queries in flight at once, each on a
	// worker goroutine holding a socket and a read buffer; further queries
	// wait in a FIFO queue for a free worker (their callers' contexts still
	// bound the callers' waits). Thousands of queries at once, as a big
	// batch's auth signals make, answer no faster than the upstream and
	// the CPU allow, each held ~20 KB, and their bursts overflow an
	// upstream's receive buffer (lost queries, 2 s timeouts). Default 256.
	MaxInFlight int
	// ConnMaxQueries is the number of queries sent on one UDP socket before
	// it is replaced, so the source port keeps changing (RFC 5452 §4.5).
	// Default 1000.
	ConnMaxQueries int
	// Now is the clock of cache expiry and upstream cooldowns; default
	// time.Now.
	Now func() time.Time
	// Logger receives the few events worth a line (an upstream going down,
	// a recovered panic); default slog.Default().
	Logger *slog.Logger
}

// Defaults for Options.
const (
	DefaultResolvConf     = "/etc/resolv.conf"
	DefaultTimeout        = time.Second
	DefaultAttempts       = 2
	DefaultHealthFailures = 3
	DefaultHealthCooldown = 30 * time.Second
	DefaultMinTTL         = 5 * time.Second
	DefaultMaxTTL         = time.Hour
	DefaultNegativeMaxTTL = 5 * time.Minute
	DefaultCacheEntries   = 100000
	DefaultCacheBytes     = 64 << 20
	DefaultStaleTTL       = 24 * time.Hour
	DefaultMaxIdleConns   = 64
	DefaultMaxInFlight    = 256
	DefaultConnMaxQueries = 1000
)

// maxUpstreams bounds Options.Upstreams (a query remembers which upstreams
// answered SERVFAIL in a bit set).
const maxUpstreams = 64

// Defaults fills the unset (zero) fields of o with their defaults.
// Upstreams is left empty: New reads ResolvConf then.
func (o *Options) Defaults() {
	if o.ResolvConf == "" {
		o.ResolvConf = DefaultResolvConf
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultAttempts
	}
	if o.HealthFailures == 0 {
		o.HealthFailures = DefaultHealthFailures
	}
	if o.HealthCooldown == 0 {
		o.HealthCooldown = DefaultHealthCooldown
	}
	if o.MinTTL == 0 {
		o.MinTTL = DefaultMinTTL
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.NegativeMaxTTL == 0 {
		o.NegativeMaxTTL = DefaultNegativeMaxTTL
	}
	if o.CacheEntries == 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.StaleTTL == 0 {
		o.StaleTTL = DefaultStaleTTL
	}
	if o.MaxIdleConns == 0 {
		o.MaxIdleConns = DefaultMaxIdleConns
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.ConnMaxQueries == 0 {
		o.ConnMaxQueries = DefaultConnMaxQueries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem of o at once. It expects Defaults to have
// run: zero values where a positive one is needed are reported.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("resolver: "+format, a...)) }
	if len(o.Upstreams) > maxUpstreams {
		add("%d upstreams, at most %d allowed", len(o.Upstreams), maxUpstreams)
	}
	for i, u := range o.Upstreams {
		if _, err := parseUpstream(u); err != nil {
			add("upstreams[%d]: %v", i, err)
		}
	}
	if len(o.Upstreams) == 0 && o.ResolvConf == "" {
		add("no upstreams and no resolv_conf to read them from")
	}
	if o.Timeout <= 0 {
		add("timeout must be positive, not %v", o.Timeout)
	}
	if o.Attempts < 1 {
		add("attempts must be at least 1, not %d", o.Attempts)
	}
	if o.HealthFailures < 1 {
		add("health_failures must be at least 1, not %d", o.HealthFailures)
	}
	if o.HealthCooldown < 0 {
		add("health_cooldown must not be negative, not %v", o.HealthCooldown)
	}
	if o.MinTTL < 0 {
		add("min_ttl must not be negative, not %v", o.MinTTL)
	}
	if o.MaxTTL <= 0 {
		add("max_ttl must be positive, not %v", o.MaxTTL)
	} else if o.MaxTTL < o.MinTTL {
		add("max_ttl %v is below min_ttl %v", o.MaxTTL, o.MinTTL)
	}
	if o.NegativeMaxTTL < 0 {
		add("negative_max_ttl must not be negative, not %v", o.NegativeMaxTTL)
	}
	if o.CacheEntries < 1 {
		add("cache_entries must be at least 1, not %d", o.CacheEntries)
	}
	if o.CacheBytes < 0 {
		add("cache_bytes must not be negative, not %d", o.CacheBytes)
	}
	if o.StaleTTL < 0 {
		add("stale_ttl must not be negative, not %v", o.StaleTTL)
	}
	if o.MaxIdleConns < 0 {
		add("max_idle_conns must not be negative, not %d", o.MaxIdleConns)
	}
	if o.MaxInFlight < 1 {
		add("max_inflight must be at least 1, not %d", o.MaxInFlight)
	}
	if o.ConnMaxQueries < 1 {
		add("conn_max_queries must be at least 1, not %d", o.ConnMaxQueries)
	}
	if o.Now == nil {
		add("now (the clock) is not set")
	}
	return errors.Join(errs...)
}

// parseUpstream turns "ip", "ip:port" or "[ipv6]:port" into "ip:port".
// Names are refused: resolving the resolver would need a resolver.
func parseUpstream(s string) (string, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return "", fmt.Errorf("upstream %q: port 0", s)
		}
		return ap.String(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	return "", fmt.Errorf("upstream %q is not an IP address with an optional port", s)
}

// readResolvConf returns the nameservers of a resolv.conf file as
// "ip:port" strings.
func readResolvConf(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("resolver: cannot read upstreams from %s: %w", path, err)
	}
	port := 53
	if cc.Port != "" {
		p, err := strconv.Atoi(cc.Port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("resolver: %s: bad port %q", path, cc.Port)
		}
		port = p
	}
	var ups []string
	for _, s := range cc.Servers {
		u, err := parseUpstream(net.JoinHostPort(s, strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("resolver: %s: %w", path, err)
		}
		ups = append(ups, u)
	}
	if len(ups) == 0 {
		return nil, fmt.Errorf("resolver: %s names no nameserver, and no upstreams are configured", path)
	}
	return ups, nil
}
