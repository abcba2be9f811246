package authsig

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/verifyd/verifyd/resolver"
)

// bootstrapDNS is the RFC 9224 bootstrap file shipped with the binary: the
// entries of IANA's https://data.iana.org/rdap/dns.json for common TLDs.
//
//go:embed rdap-dns.json
var bootstrapDNS []byte

// Errors of the registration-date lookups.
var (
	// ErrNotRegistered: the registry answered that it has no such domain
	// (RDAP 404, WHOIS "No match").
	ErrNotRegistered = errors.New("authsig: domain age: the registry does not know the domain")
	// ErrNoAgeSource: neither an RDAP server nor a WHOIS server is known
	// for the domain's TLD.
	ErrNoAgeSource = errors.New("authsig: domain age: no RDAP or WHOIS server for the TLD")
	// ErrAddressNotAllowed: a server's address is one AgeOptions.Allow
	// refuses (a private or loopback address by default).
	ErrAddressNotAllowed = errors.New("authsig: domain age: server address not allowed")
)

// DefaultWHOISServers are the port-43 WHOIS servers used when RDAP cannot
// answer: TLDs without an RDAP server in IANA's bootstrap file whose
// registry publishes creation dates over WHOIS (the servers of IANA's root
// zone database). .de and .eu are absent: their WHOIS shows no creation
// date, so their age stays unknown.
func DefaultWHOISServers() map[string]string {
	return map[string]string{
		"io": "whois.nic.io:43",
		"co": "whois.nic.co:43",
		"me": "whois.nic.me:43",
		"us": "whois.nic.us:43",
	}
}

// AgeOptions configures a DomainAge.
type AgeOptions struct {
	// Resolver resolves the names of RDAP and WHOIS servers, so that no
	// lookup goes through another resolver. Required.
	Resolver resolver.Interface
	// Bootstrap is an RFC 9224 DNS bootstrap file (IANA's dns.json format);
	// default the one shipped with the binary (common TLDs).
	Bootstrap []byte
	// RDAP maps a TLD (or any name suffix) to an RDAP base URL, in addition
	// to and in place of the bootstrap's. Tests point "test" at the
	// simulated world's RDAP server.
	RDAP map[string]string
	// WHOIS maps a TLD (or suffix) to a WHOIS server "host:port", tried
	// when RDAP has no server for the TLD or fails. nil: the
	// DefaultWHOISServers; an empty map: no WHOIS.
	WHOIS map[string]string
	// Allow says which server addresses may be dialled; the default,
	// PublicAddress, refuses loopback, private, link-local and other
	// special-purpose addresses, so that a DNS answer cannot turn the
	// lookups against the appliance's own network. Tests allow loopback
	// only, so that nothing can leave the machine.
	Allow func(netip.Addr) bool
	// Timeout bounds each RDAP request and each WHOIS exchange. Default 2 s.
	Timeout time.Duration
	// TTL is how long a registration date is kept; NegativeTTL how long an
	// unknown one (not registered, no server, failed) is, before the
	// domain is looked up again. Defaults 7 days and 1 h.
	TTL, NegativeTTL time.Duration
	// MaxEntries bounds the cache. Default 100,000.
	MaxEntries int
	// Workers is how many lookups run at once in the background; Queue how
	// many wait (more are dropped, and asked for again by a later probe).
	// Defaults 4 and 1,000.
	Workers, Queue int
	// Now is the clock of the cache and of the age; default time.Now.
	Now func() time.Time
	// Logger receives failed lookups at debug level; default slog.Default().
	Logger *slog.Logger
}

// Defaults of AgeOptions.
const (
	DefaultAgeTimeout     = 2 * time.Second
	DefaultAgeTTL         = 7 * 24 * time.Hour
	DefaultAgeNegativeTTL = time.Hour
	DefaultAgeWorkers     = 4
	DefaultAgeQueue       = 1000
)

// DomainAge finds how long ago domains were registered: over RDAP (RFC 9082
// query, RFC 9083 response: the "registration" event of the domain object)
// at the server that RFC 9224's bootstrap names for the TLD, and when RDAP
// has no server or fails, over WHOIS (RFC 3912: a "Creation Date:" line or
// one of its variants). Lookups run in the background, a few at a time,
// each bounded by AgeOptions.Timeout; results are cached for days. Days
// never waits: a probe gets the age only once it is cached. It is safe for
// concurrent use.
//
// Requests go only to the base URLs of the bootstrap file and the
// operator's overrides, and WHOIS queries only to the configured servers;
// the server names are resolved through AgeOptions.Resolver and dialled
// only at addresses AgeOptions.Allow accepts. The domain looked up is the
// organizational domain (OrgDomain), checked to be a host name before it
// goes into a URL or a WHOIS query. Redirects are not followed.
type DomainAge struct {
	opts   AgeOptions
	log    *slog.Logger
	rdap   map[string]string // suffix → base URL ending in "/"
	whois  map[string]string // suffix → host:port
	client *http.Client
	cache  *ttlCache[ageEntry]

	mu      sync.Mutex
	pending map[string]bool
	queue   chan string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type ageEntry struct {
	registered time.Time
	known      bool
}

// NewDomainAge returns a DomainAge with its background workers started, or
// an error naming every problem of opts.
func NewDomainAge(opts AgeOptions) (*DomainAge, error) {
	var errs []error
	if opts.Resolver == nil {
		errs = append(errs, errors.New("a resolver is required"))
	}
	if opts.Bootstrap == nil {
		opts.Bootstrap = bootstrapDNS
	}
	rdap, err := ParseRDAPBootstrap(opts.Bootstrap)
	if err != nil {
		errs = append(errs, err)
	}
	for suffix, base := range opts.RDAP {
		u, err := checkBaseURL(base)
		if err != nil {
			errs = append(errs, fmt.Errorf("rdap override %q: %w", suffix, err))
			continue
		}
		if rdap == nil {
			rdap = map[string]string{}
		}
		rdap[normalizeDomain(suffix)] = u
	}
	if opts.WHOIS == nil {
		opts.WHOIS = DefaultWHOISServers()
	}
	whois := map[string]string{}
	for suffix, server := range opts.WHOIS {
		if _, _, err := net.SplitHostPort(server); err != nil {
			errs = append(errs, fmt.Errorf("whois server %q of %q: want host:port", server, suffix))
			continue
		}
		whois[normalizeDomain(suffix)] = server
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", opts.Timeout}, {"ttl", opts.TTL}, {"negative ttl", opts.NegativeTTL}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if opts.MaxEntries < 0 || opts.Workers < 0 || opts.Queue < 0 {
		errs = append(errs, errors.New("max entries, workers and queue must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("authsig: domain age: %w", err)
	}
	if opts.Allow == nil {
		opts.Allow = PublicAddress
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultAgeTimeout
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultAgeTTL
	}
	if opts.NegativeTTL == 0 {
		opts.NegativeTTL = DefaultAgeNegativeTTL
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultAgeWorkers
	}
	if opts.Queue == 0 {
		opts.Queue = DefaultAgeQueue
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &DomainAge{
		opts:    opts,
		log:     opts.Logger.With("pkg", "authsig"),
		rdap:    rdap,
		whois:   whois,
		cache:   newTTLCache[ageEntry](opts.MaxEntries),
		pending: map[string]bool{},
		queue:   make(chan string, opts.Queue),
	}
	a.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // never an environment proxy
			DialContext:           a.dial,
			TLSHandshakeTimeout:   opts.Timeout,
			ResponseHeaderTimeout: opts.Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       opts.Timeout,
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	for range opts.Workers {
		a.wg.Add(1)
		go a.worker()
	}
	return a, nil
}

// Close stops the background lookups and waits for them.
func (a *DomainAge) Close() {
	a.cancel()
	a.wg.Wait()
	a.client.CloseIdleConnections()
}

// Days returns the age of domain's registration in whole days, and true,
// when it is cached. Otherwise it returns 0 and false, and queues a
// background lookup unless one is queued or running: a later call gets
// the answer. It never waits for the network.
func (a *DomainAge) Days(domain string) (int, bool) {
	org := OrgDomain(domain)
	now := a.opts.Now()
	if e, ok := a.cache.get(org, now); ok {
		if !e.known {
			return 0, false
		}
		return max(0, int(now.Sub(e.registered)/(24*time.Hour))), true
	}
	a.enqueue(org)
	return 0, false
}

func (a *DomainAge) enqueue(org string) {
	if a.ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[org] {
		return
	}
	select {
	case a.queue <- org:
		a.pending[org] = true
	default:
		ageDropped.Inc()
	}
}

func (a *DomainAge) worker() {
	defer a.wg.Done()
	for {
		select {
		case <-a.ctx.Done():
			return
		case org := <-a.queue:
			a.lookupAndCache(org)
		}
	}
}

func (a *DomainAge) lookupAndCache(org string) {
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("domain age lookup panicked", "domain", org, "panic", v)
		}
		a.mu.Lock()
		delete(a.pending, org)
		a.mu.Unlock()
	}()
	// Two protocols, each bounded by Timeout.
	ctx, cancel := context.WithTimeout(a.ctx, 2*a.opts.Timeout+time.Second)
	defer cancel()
	reg, err := a.Registered(ctx, org)
	now := a.opts.Now()
	switch {
	case err == nil:
		a.cache.put(org, ageEntry{registered: reg, known: true}, now, a.opts.TTL, false)
	case a.ctx.Err() != nil:
		// Closing: learn nothing.
	default:
		a.log.Debug("domain age unknown", "domain", org, "err", err)
		a.cache.put(org, ageEntry{}, now, a.opts.NegativeTTL, false)
	}
}

// Registered looks up when domain's organizational domain was registered,
// now, without the cache: over RDAP, then over WHOIS when RDAP has no
// server for the TLD or did not give a date (a 404 is the registry's
// answer and ends the search with ErrNotRegistered).
func (a *DomainAge) Registered(ctx context.Context, domain string) (time.Time, error) {
	org := OrgDomain(domain)
	if !validHostname(org) {
		return time.Time{}, fmt.Errorf("authsig: domain age: %q is not a host name", org)
	}
	var errs []error
	if base, ok := longestSuffix(a.rdap, org); ok {
		t, err := a.rdapLookup(ctx, base, org)
		switch {
		case err == nil:
			countAgeLookup("rdap", "found")
			return t, nil
		case errors.Is(err, ErrNotRegistered):
			countAgeLookup("rdap", "not_found")
			return time.Time{}, err
		}
		countAgeLookup("rdap", "error")
		errs = append(errs, err)
	}
	if server, ok := longestSuffix(a.whois, org); ok {
		t, err := a.whoisLookup(ctx, server, org)
		switch {
		case err == nil:
			countAgeLookup("whois", "found")
			return t, nil
		case errors.Is(err, ErrNotRegistered):
			countAgeLookup("whois", "not_found")
		default:
			countAgeLookup("whois", "error")
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return time.Time{}, ErrNoAgeSource
	}
	return time.Time{}, errors.Join(errs...)
}

// longestSuffix finds the entry of m for the longest proper suffix of name
// (RFC 9224 §4: labels matched from the right, longest match wins).
func longestSuffix(m map[string]string, name string) (string, bool) {
	for off := strings.IndexByte(name, '.'); off >= 0; {
		if v, ok := m[name[off+1:]]; ok {
			return v, true
		}
		next := strings.IndexByte(name[off+1:], '.')
		if next < 0 {
			break
		}
		off += next + 1
	}
	return "", false
}

// rdapLookup asks base for the domain object of name (RFC 9082 §3.1.3).
func (a *DomainAge) rdapLookup(ctx context.Context, base, name string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"domain/"+name, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("authsig: rdap: %w", err)
	}
	req.Header.Set("Accept", "application/rdap+json")
	resp, err := a.client.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("authsig: rdap: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return time.Time{}, fmt.Errorf("%w (rdap %s)", ErrNotRegistered, req.URL.Host)
	default:
		return time.Time{}, fmt.Errorf("authsig: rdap: %s answered %s", req.URL.Host, resp.Status)
	}
	t, err := ParseRDAPRegistration(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return time.Time{}, fmt.Errorf("authsig: rdap: %s: %w", req.URL.Host, err)
	}
	return t, nil
}

// ParseRDAPRegistration reads an RFC 9083 domain object and returns the
// date of its "registration" event (§4.5, the event action of RFC 9083
// §10.2.3).
func ParseRDAPRegistration(r io.Reader) (time.Time, error) {
	var obj struct {
		Events []struct {
			Action string `json:"eventAction"`
			Date   string `json:"eventDate"`
		} `json:"events"`
	}
	if err := json.NewDecoder(r).Decode(&obj); err != nil {
		return time.Time{}, fmt.Errorf("not an rdap domain object: %w", err)
	}
	for _, ev := range obj.Events {
		if !strings.EqualFold(ev.Action, "registration") {
			continue
		}
		t, err := time.Parse(time.RFC3339, ev.Date)
		if err != nil {
			return time.Time{}, fmt.Errorf("bad registration date %q: %w", ev.Date, err)
		}
		return t.UTC(), nil
	}
	return time.Time{}, errors.New("no registration event")
}

// whoisLookup asks server for name (RFC 3912: the query line, then the
// answer until the server closes).
func (a *DomainAge) whoisLookup(ctx context.Context, server, name string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	c, err := a.dial(ctx, "tcp", server)
	if err != nil {
		return time.Time{}, fmt.Errorf("authsig: whois: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, name+"\r\n"); err != nil {
		return time.Time{}, fmt.Errorf("authsig: whois: %s: %w", server, err)
	}
	body, err := io.ReadAll(io.LimitReader(c, 64<<10))
	if err != nil && len(body) == 0 {
		return time.Time{}, fmt.Errorf("authsig: whois: %s: %w", server, err)
	}
	t, err := ParseWHOISCreated(string(body))
	if err != nil {
		return time.Time{}, fmt.Errorf("authsig: whois: %s: %w", server, err)
	}
	return t, nil
}

// whoisCreatedKeys are the field names registries give the creation date
// (lower-case): the gTLD layout of the ICANN registry agreements first,
// then ccTLD variants.
var whoisCreatedKeys = []string{
	"creation date", "created", "created on", "registered on", "registration date",
	"registration time", "domain registration date", "registered",
}

// whoisNotFound are the answers of registries that do not know a domain
// (lower-case prefixes of a line).
var whoisNotFound = []string{"no match for", "not found", "no data found", "domain not found", "no entries found", "status: free", "status: available"}

// whoisLayouts are the date formats of creation dates.
var whoisLayouts = []string{
	time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05", "2006-01-02", "02-Jan-2006", "2006.01.02 15:04:05", "2006.01.02",
	"2006/01/02", "January 2 2006",
}

// ParseWHOISCreated finds the creation date in a WHOIS answer: the first
// "Creation Date:" line (or a variant such as "created:", "Registered
// on:"), read in one of the common date formats. It returns
// ErrNotRegistered when the answer says the registry has no such domain.
func ParseWHOISCreated(answer string) (time.Time, error) {
	for line := range strings.Lines(answer) {
		line = strings.TrimSpace(line)
		low := strings.ToLower(line)
		for _, nf := range whoisNotFound {
			if strings.HasPrefix(low, nf) {
				return time.Time{}, ErrNotRegistered
			}
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		found := false
		for _, k := range whoisCreatedKeys {
			if key == k {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		if t, ok := parseWHOISDate(strings.TrimSpace(value)); ok {
			return t, nil
		}
	}
	return time.Time{}, errors.New("no creation date in the answer")
}

func parseWHOISDate(v string) (time.Time, bool) {
	fields := strings.Fields(v)
	candidates := []string{v}
	if len(fields) > 1 {
		candidates = append(candidates, strings.Join(fields[:2], " "), fields[0])
	}
	for _, c := range candidates {
		for _, layout := range whoisLayouts {
			if t, err := time.Parse(layout, c); err == nil {
				return t.UTC(), true
			}
		}
	}
	return time.Time{}, false
}

// dial connects to addr ("host:port") for the RDAP client and WHOIS: the
// host resolved through the Resolver, only at addresses Allow accepts.
func (a *DomainAge) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		res, err := a.opts.Resolver.LookupIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %q: %w", host, err)
		}
		ips = res.IPs
	}
	var d net.Dialer
	lastErr := fmt.Errorf("%w: %s has no address", ErrAddressNotAllowed, host)
	for _, ip := range ips {
		ip = ip.Unmap()
		if !a.opts.Allow(ip) {
			lastErr = fmt.Errorf("%w: %s (%s)", ErrAddressNotAllowed, ip, host)
			continue
		}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// special are the special-purpose networks PublicAddress refuses beyond
// what netip classifies (RFC 6890 and its updates).
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space, RFC 6598
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("100::/64"),
}

// PublicAddress reports whether ip is a global unicast address outside the
// private, shared, documentation, benchmarking and reserved networks: the
// default AgeOptions.Allow.
func PublicAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range special {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// ParseRDAPBootstrap reads an RFC 9224 bootstrap file for domain names
// (§4, IANA's dns.json) and returns its entries, name suffix (lower-case)
// → the first base URL, preferring https (§3: "the HTTPS URL should be
// used"), with the trailing "/" the RFC requires.
func ParseRDAPBootstrap(b []byte) (map[string]string, error) {
	var f struct {
		Version  string       `json:"version"`
		Services [][][]string `json:"services"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("rdap bootstrap: %w", err)
	}
	m := map[string]string{}
	for i, svc := range f.Services {
		if len(svc) != 2 || len(svc[0]) == 0 || len(svc[1]) == 0 {
			return nil, fmt.Errorf("rdap bootstrap: service %d is not [[names], [urls]]", i)
		}
		var base string
		for _, u := range svc[1] {
			nu, err := checkBaseURL(u)
			if err != nil {
				continue
			}
			if base == "" || strings.HasPrefix(nu, "https:") && !strings.HasPrefix(base, "https:") {
				base = nu
			}
		}
		if base == "" {
			continue
		}
		for _, name := range svc[0] {
			m[normalizeDomain(name)] = base
		}
	}
	return m, nil
}

// checkBaseURL checks an RDAP base URL (http or https, a host, no query,
// user or fragment) and returns it ending in "/".
func checkBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("base url %q: scheme must be http or https", s)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("base url %q: want scheme://host/path/", s)
	}
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}
