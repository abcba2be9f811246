package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The SSRF guard. A webhook URL is the customer's, but the request comes
// from inside the operator's network: without a guard, a webhookUrl of
// http://169.254.169.254/ or http://10.0.0.5:8500/ would make verifyd post
// to the cloud metadata service or an internal API. So:
//
//  1. At POST /v1/batch, the URL's host is read as a browser reads it
//     (webhookHost: the WHATWG host parser), so 127.1, 0x7f.1, 2130706433
//     and localhost are addresses, not names; a host that is an address
//     is checked at once (that is all that can be known then: a name may
//     resolve elsewhere at delivery time). A host that a browser would
//     not parse is refused.
//  2. At delivery, the dialer resolves the host (through verifyd's own
//     resolver, on resolver.upstreams, never the system's), drops every address the
//     guard refuses, and dials the allowed ones; the dialer's Control hook
//     checks the address of the socket actually being connected, so a
//     DNS answer that changes between the check and the connect (DNS
//     rebinding) gains nothing.
//  3. Redirects are never followed (http.ErrUseLastResponse), and no proxy
//     is used (a proxy would connect on our behalf, out of the guard's
//     sight).
//
// webhooks.allow_private lifts the refusal of internal addresses (tests,
// and appliances whose customers are on the same network). Unspecified,
// multicast and broadcast addresses are refused even then: no webhook
// receiver lives there.

// Resolver resolves a webhook URL's host: verifyd's resolver (on
// resolver.upstreams, like every other lookup of verifyd), or
// net.DefaultResolver when none is given.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ErrRefused matches every *RefusedError.
var ErrRefused = errors.New("webhook: address refused")

// RefusedError is the guard's refusal of an address.
type RefusedError struct {
	Host   string     // the URL's host, as given
	IP     netip.Addr // the address refused
	Reason string     // "loopback", "private (RFC 1918)", …
	// Always is set when webhooks.allow_private would not help.
	Always bool
}

func (e *RefusedError) Error() string {
	what := e.IP.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (%s)", e.Host, e.IP)
	}
	if e.Always {
		return fmt.Sprintf("webhook address %s refused: %s address", what, e.Reason)
	}
	return fmt.Sprintf("webhook address %s refused: %s address (webhooks.allow_private allows it)", what, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Guard checks webhook destinations.
type Guard struct {
	// AllowPrivate allows loopback, private, link-local and the other
	// internal ranges of classify.
	AllowPrivate bool
	// Resolver resolves host names at delivery; nil: net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one TCP connect (the request's own deadline, when
	// earlier, wins). Zero: 10 s.
	DialTimeout time.Duration
}

var specialPrefixes = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT, RFC 6598)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFo = netip.MustParsePrefix("2002::/16")
	// translated is RFC 2765's IPv4-translated addresses (SIIT),
	// ::ffff:0:a.b.c.d: not routed on the Internet, and a translator
	// on the path may deliver them to the embedded IPv4 address.
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// classify names why ip is not a public unicast address ("" when it is),
// and whether allow_private may not lift the refusal.
func classify(ip netip.Addr) (reason string, always bool) {
	ip = ip.Unmap().WithZone("")
	switch {
	case !ip.IsValid():
		return "invalid", true
	case ip.IsUnspecified():
		return "unspecified", true
	case ip.IsMulticast():
		return "multicast", true
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast", true
	case ip.IsLoopback():
		return "loopback", false
	case ip.IsPrivate():
		if ip.Is4() {
			return "private (RFC 1918)", false
		}
		return "unique local (fc00::/7)", false
	case ip.IsLinkLocalUnicast():
		return "link-local", false
	}
	// IPv6 forms that carry an IPv4 address: judge the embedded one.
	if nat64.Contains(ip) {
		b := ip.As16()
		if r, a := classify(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return "NAT64 of a " + r, a
		}
		return "", false
	}
	if translated.Contains(ip) {
		b := ip.As16()
		if r, a := classify(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return "IPv4-translated (RFC 2765) of a " + r, a
		}
		return "IPv4-translated (RFC 2765)", false
	}
	if sixToFo.Contains(ip) {
		b := ip.As16()
		if r, a := classify(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return "6to4 of a " + r, a
		}
		return "", false
	}
	for _, sp := range specialPrefixes {
		if sp.p.Contains(ip) {
			return sp.reason, false
		}
	}
	return "", false
}

// Check returns a *RefusedError when ip may not receive webhooks.
func (g *Guard) Check(host string, ip netip.Addr) error {
	reason, always := classify(ip)
	if reason == "" || (g.AllowPrivate && !always) {
		return nil
	}
	return &RefusedError{Host: host, IP: ip.Unmap().WithZone(""), Reason: reason, Always: always}
}

// MaxURLLength bounds a webhookUrl.
const MaxURLLength = 2048

// CheckURL validates a webhookUrl at POST time: an absolute http or https
// URL with a host, and, when the host is an IP literal, one the guard
// allows. It never resolves a name and never connects.
func (g *Guard) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("must be an absolute http or https URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "" || u.Opaque != "":
		return nil, errors.New("must be an absolute http or https URL with a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not 1 to 65535", p)
		}
	}
	_, ip, err := webhookHost(u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("host %q %w", u.Hostname(), err)
	}
	if ip.IsValid() {
		if err := g.Check(u.Hostname(), ip); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// DialContext is the webhook client's dialer: it resolves the host, drops
// the addresses the guard refuses and dials the others in turn. The
// socket's Control hook checks the very address being connected.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	name, ip, err := webhookHost(host)
	if err != nil {
		return nil, &RefusedError{Host: host, Reason: "unparsable host", Always: true}
	}
	var ips []netip.Addr
	if ip.IsValid() {
		ips = []netip.Addr{ip}
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ips, err = r.LookupNetIP(ctx, "ip", name)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
		}
	}
	timeout := g.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, Control: g.control(host)}
	var refused, last error
	for _, ip := range ips {
		if err := g.Check(host, ip); err != nil {
			refused = cmpErr(refused, err)
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrRefused) {
			refused = cmpErr(refused, err)
			continue
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case last != nil:
		return nil, last
	case refused != nil:
		return nil, refused
	}
	return nil, fmt.Errorf("no address for %s", host)
}

// control is the dialer's socket hook: it checks the address the socket
// is about to connect to, as the kernel will see it.
func (g *Guard) control(host string) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &RefusedError{Host: host, Reason: "unparsable", Always: true}
		}
		return g.Check(host, ap.Addr())
	}
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// redactURL hides a URL's password and query (which may carry tokens)
// for log lines.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return strings.Replace(u.String(), "%E2%80%A6", "…", 1)
}
