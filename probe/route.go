package probe

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"

	"github.com/verifyd/verifyd/resolver"
)

// route is where mail for a domain goes.
type route struct {
	outcome DNSOutcome
	// hosts are the MX hosts in preference order, or the domain itself for
	// an implicit MX (RFC 5321 §5.1).
	hosts []string
}

// route resolves the MX hosts of an A-label domain:
//
//   - NXDOMAIN: the domain does not exist;
//   - a null MX (RFC 7505): it takes no mail;
//   - MX records: their hosts, by preference;
//   - no MX but an A or AAAA record: the domain itself (implicit MX);
//   - neither: no mail route;
//   - a temporary failure anywhere: DNSTimeout or DNSFailure, never a
//     negative verdict.
func (e *Engine) route(ctx context.Context, domain string) route {
	mx, err := e.opts.Resolver.LookupMX(ctx, domain)
	switch {
	case err == nil && mx.NullMX:
		return route{outcome: DNSNoMX}
	case err == nil && len(mx.MX) > 0:
		hosts := make([]string, 0, len(mx.MX))
		for i := 0; i < len(mx.MX); {
			// A run of equal preferences, in a random order per
			// validation (RFC 5321 §5.1: spread the load).
			j := i + 1
			for j < len(mx.MX) && mx.MX[j].Pref == mx.MX[i].Pref {
				j++
			}
			start := len(hosts)
			for _, m := range mx.MX[i:j] {
				// An MX target that is an IP literal is no host name
				// (RFC 5321 §5.1); Postfix and Exim will not deliver to
				// it, so neither is it probed.
				if _, err := netip.ParseAddr(strings.TrimSuffix(m.Host, ".")); err == nil {
					continue
				}
				hosts = append(hosts, m.Host)
			}
			run := hosts[start:]
			rand.Shuffle(len(run), func(a, b int) { run[a], run[b] = run[b], run[a] })
			i = j
		}
		if len(hosts) == 0 {
			return route{outcome: DNSNoMX}
		}
		return route{outcome: DNSRouted, hosts: hosts}
	case err == nil, errors.Is(err, resolver.ErrNoData):
		// No MX records: fall back to the domain's address records.
	default:
		return route{outcome: dnsFailure(err)}
	}
	_, err = e.opts.Resolver.LookupIP(ctx, "ip", domain)
	switch {
	case err == nil:
		return route{outcome: DNSRouted, hosts: []string{domain}}
	case errors.Is(err, resolver.ErrNoData), errors.Is(err, resolver.ErrNXDomain):
		return route{outcome: DNSNoMX}
	default:
		return route{outcome: dnsFailure(err)}
	}
}

// dnsFailure maps a lookup error to the DNS outcome it means.
func dnsFailure(err error) DNSOutcome {
	var re *resolver.Error
	switch {
	case errors.Is(err, resolver.ErrNXDomain):
		return DNSNXDomain
	case errors.As(err, &re) && re.Rcode >= 0:
		return DNSFailure // SERVFAIL, REFUSED: an answer came, a failing one
	case errors.Is(err, context.Canceled):
		return DNSFailure
	default:
		return DNSTimeout
	}
}
