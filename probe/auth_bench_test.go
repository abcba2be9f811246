package probe

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/resolver"
)

// BenchmarkAuthAddedLatency measures what the auth signals add to a probe's
// latency, against the world with 100 ms before every SMTP reply and 20 ms
// before every DNS answer (every zone: the domains, the reverse zone, the
// DNS lists). Each iteration probes, one after the other, a cold domain
// with an engine without Options.Auth and another cold domain with it,
// then a second address of each domain (warm: the domain's signals, role
// mailboxes and DNS answers cached). Every domain publishes the full set
// of records (SPF, DKIM, DMARC, MTA-STS, TLS-RPT, BIMI, CAA, TLSA in a
// signed zone, svc), so every lookup is made.
//
// Reported: the mean latency of each kind of probe (ms) and the difference
// auth makes; how many more RCPT replies a cold probe with auth waits for
// (the postmaster@ and abuse@ probes, pipelined into one round trip, but
// the world waits its latency before every reply); what is left of the
// difference beyond those replies, in ms and in DNS round trips (20 ms) —
// the DNS lookups not hidden behind the SMTP session; and the DNS queries
// per domain.
//
//	go test -run '^$' -bench AuthAddedLatency -benchtime 20x ./probe/
func BenchmarkAuthAddedLatency(b *testing.B) {
	const smtpRTT, dnsRTT = 100 * time.Millisecond, 20 * time.Millisecond
	n := b.N
	w, exp, err := world.Generate(world.GenOptions{
		Domains: 2 * n, Seed: 9, Auth: 1, DNSBL: 0.2, DNSWL: 0.2, AddressesPerDomain: 2, MailboxesPerDomain: 2,
		Latency: world.Duration(smtpRTT), FirstIP: "127.67.0.1",
	})
	if err != nil {
		b.Fatal(err)
	}
	run, err := world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1, RDAPAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { run.Close() })
	for _, d := range w.Domains {
		run.DNS.SetDelay(d.Name, dnsRTT)
	}
	for _, z := range []string{"127.in-addr.arpa", "dnsbl.test", "dnswl.test"} {
		run.DNS.SetDelay(z, dnsRTT)
	}
	quiet := slog.New(slog.DiscardHandler)
	var addrs []netip.Addr
	for i := 2; i < 6; i++ {
		addrs = append(addrs, netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}))
	}
	pool, err := egress.New(egress.Options{Addresses: addrs, MaxRatePerHost: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	engine := func(auth bool) *Engine {
		res, err := resolver.New(resolver.Options{Upstreams: []string{run.DNS.Addr()}, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(res.Close)
		o := Options{Resolver: res, Egress: pool, SMTPPort: run.SMTP.Port(), HeloName: "prober.verifyd.test",
			CommandTimeout: 5 * time.Second, Logger: quiet}
		if auth {
			age, err := authsig.NewDomainAge(authsig.AgeOptions{Resolver: res, RDAP: map[string]string{"test": run.RDAP.URL()},
				WHOIS: map[string]string{}, Allow: netip.Addr.IsLoopback, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(age.Close)
			col, err := authsig.NewCollector(authsig.CollectorOptions{Resolver: res, TrustKeys: authsig.TrustKeys{"key1": 3},
				DNSBL: []string{"dnsbl.test"}, DNSWL: []string{"dnswl.test"}, Age: age, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(col.Close)
			o.Auth = col
		}
		eng, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		return eng
	}
	plain, withAuth := engine(false), engine(true)
	ctx := context.Background()
	probe := func(eng *Engine, email string) time.Duration {
		start := time.Now()
		r := eng.Verify(ctx, email)
		d := time.Since(start)
		if r.Status != StatusValid {
			b.Fatalf("%s: %s/%s", email, r.Status, r.Reason)
		}
		if (eng == withAuth) != (r.Auth != nil) {
			b.Fatalf("%s: auth %v", email, r.Auth)
		}
		return d
	}
	var cold, warm [2]time.Duration
	var queries [2]int64
	authHosts := map[string]bool{}
	b.ResetTimer()
	for i := range n {
		for k, eng := range []*Engine{plain, withAuth} {
			domain := 2*i + k // two expectations per domain: two known mailboxes
			if k == 1 {
				authHosts["mx."+w.Domains[domain].Name] = true
			}
			q := run.DNS.Queries()
			cold[k] += probe(eng, exp[2*domain].Email)
			warm[k] += probe(eng, exp[2*domain+1].Email)
			queries[k] += run.DNS.Queries() - q
		}
	}
	b.StopTimer()
	// The RCPT replies of each kind of probe, from the world's session log.
	run.Log().Wait(4*n, 10*time.Second)
	var rcpts [2]int
	for _, s := range run.Log().Sessions() {
		k := 0
		if authHosts[s.HostName] {
			k = 1
		}
		rcpts[k] += len(s.Rcpts)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / float64(time.Millisecond) }
	addedRcpts := float64(rcpts[1]-rcpts[0]) / float64(n) // all on the cold probe
	addedOther := ms(cold[1]-cold[0]) - addedRcpts*float64(smtpRTT/time.Millisecond)
	b.ReportMetric(ms(cold[0]), "cold-plain-ms")
	b.ReportMetric(ms(cold[1]), "cold-auth-ms")
	b.ReportMetric(ms(cold[1]-cold[0]), "cold-added-ms")
	b.ReportMetric(addedRcpts, "cold-added-rcpt-replies")
	b.ReportMetric(addedOther, "cold-added-beyond-rcpts-ms")
	b.ReportMetric(addedOther/float64(dnsRTT/time.Millisecond), "cold-added-dns-rtt")
	b.ReportMetric(ms(warm[0]), "warm-plain-ms")
	b.ReportMetric(ms(warm[1]), "warm-auth-ms")
	b.ReportMetric(ms(warm[1]-warm[0]), "warm-added-ms")
	b.ReportMetric(float64(queries[0])/float64(n), "dns-queries-plain/domain")
	b.ReportMetric(float64(queries[1])/float64(n), "dns-queries-auth/domain")
	b.ReportMetric(0, "ns/op")
}
