package probe

import (
	"context"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/resolver"
)

// benchWorld is the benchmark world: 10,000 domains, 100 ms per SMTP
// round trip, STARTTLS on 30% of hosts, the usual mix of behaviours.
func benchWorld(b *testing.B) (*world.World, []world.Expectation) {
	w, exp, err := world.Generate(world.GenOptions{
		Domains: 10000, Seed: 1, CatchAll: 0.05, Greylist: 0.03, Tarpit: 0.01,
		STARTTLS: 0.3, RoleMailbox: true, Latency: world.Duration(100 * time.Millisecond),
		FirstIP: "127.64.0.1",
	})
	if err != nil {
		b.Fatal(err)
	}
	return w, exp
}

func benchEnv(b *testing.B, w *world.World) (*Engine, *world.Running) {
	run, err := world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { run.Close() })
	res, err := resolver.New(resolver.Options{Upstreams: []string{run.DNS.Addr()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(res.Close)
	var addrs []netip.Addr
	for i := 2; i < 10; i++ {
		addrs = append(addrs, netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}))
	}
	quiet := slog.New(slog.DiscardHandler)
	pool, err := egress.New(egress.Options{Addresses: addrs, MaxRatePerHost: -1, GreylistCooldown: time.Second, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	eng, err := New(Options{
		Resolver: res, Egress: pool, SMTPPort: run.SMTP.Port(), HeloName: "prober.verifyd.test",
		CommandTimeout: 2 * time.Second, StartTLS: true, Logger: quiet,
	})
	if err != nil {
		b.Fatal(err)
	}
	return eng, run
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyFresh measures fresh single probes per second (no result
// cache; the resolver and catch-all caches warm up as they would) with 2,048
// probes in flight. CPU per probe counts the whole process, the simulated
// world included.
func BenchmarkVerifyFresh(b *testing.B) {
	w, exp := benchWorld(b)
	eng, _ := benchEnv(b, w)
	var next atomic.Int64
	b.SetParallelism(1024) // × GOMAXPROCS goroutines
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) % int64(len(exp))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			eng.Verify(ctx, exp[i].Email)
			cancel()
		}
	})
	el := time.Since(t0)
	b.ReportMetric(float64(b.N)/el.Seconds(), "probes/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/probe")
}

// BenchmarkVerifyDomainBatch measures addresses per second in batch mode
// for the generated list of 100,000 addresses over 10,000 domains: domains
// in parallel, each domain's addresses in one session, greylisted addresses
// retried after their RetryAt. Peak heap is reported too.
func BenchmarkVerifyDomainBatch(b *testing.B) {
	w, exp := benchWorld(b)
	eng, _ := benchEnv(b, w)
	groups := map[string][]string{}
	var order []string
	for _, x := range exp {
		d := x.Email[len(x.Email)-len(domainOf(x.Email)):]
		if _, ok := groups[d]; !ok {
			order = append(order, d)
		}
		groups[d] = append(groups[d], x.Email)
	}
	b.ResetTimer()
	for range b.N {
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
				}
			}
		}()
		cpu0, t0 := cpuTime(), time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 2048)
		var done atomic.Int64
		for _, d := range order {
			wg.Add(1)
			sem <- struct{}{}
			go func(emails []string) {
				defer wg.Done()
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				prefer := netip.Addr{}
				for len(emails) > 0 {
					rs := eng.VerifyDomain(ctx, emails, prefer)
					var again []string
					var retryAt time.Time
					for i, r := range rs {
						if !r.RetryAt.IsZero() {
							again = append(again, emails[i])
							retryAt, prefer = r.RetryAt, r.Egress
						}
					}
					done.Add(int64(len(emails) - len(again)))
					if len(again) == 0 || !sleepUntil(ctx, time.Now, retryAt) {
						done.Add(int64(len(again)))
						break
					}
					emails = again
				}
			}(groups[d])
		}
		wg.Wait()
		el := time.Since(t0)
		close(stop)
		b.ReportMetric(float64(done.Load())/el.Seconds(), "addrs/s")
		b.ReportMetric(el.Seconds(), "s/100k")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(done.Load()), "cpu-µs/addr")
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	}
}

func domainOf(email string) string {
	for i := len(email) - 1; i >= 0; i-- {
		if email[i] == '@' {
			return email[i+1:]
		}
	}
	return ""
}
