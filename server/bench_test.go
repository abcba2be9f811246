package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// instantVerifier answers at once, so that a request's latency is the API's
// own: auth, limits, idempotency, the credit hold, the synced charge with
// the result, history and cache writes, and the signature. Its results
// carry every key of the auth object, as a probed domain that publishes
// everything does, so receipts have their full size.
type instantVerifier struct{}

func (instantVerifier) Verify(_ context.Context, in address.Input) (*probe.Result, error) {
	yes, no, trust, age := true, false, 2, 3650
	return &probe.Result{
		Email: in.Email, Status: probe.StatusValid, Reason: probe.ReasonOK, Score: 90, ProbedAt: time.Now(),
		Latency: 0, Checks: probe.Checks{Syntax: true, MX: true, Domain: "bench.test", MXHost: "mx.bench.test"},
		Auth: &authsig.Signals{
			SPF: "pass", DKIM: "pass", DMARC: "pass", DMARCPolicy: "reject", SVCCertified: &yes,
			SVCTrustLevel: &trust, SVCKeyID: "svc-2026-01", MTASTS: &yes, TLSRPT: &yes, DANE: &no, DNSSEC: &yes,
			BIMI: &yes, BIMIVMC: &no, CAA: &yes, FCrDNS: &yes, PTR: "mx.bench.test",
			DMARCSubdomainPolicy: "quarantine", DMARCAlignmentSPF: "relaxed", DMARCAlignmentDKIM: "strict",
			DMARCRUASet: &yes, TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256", AbuseMailbox: &yes,
			PostmasterMailbox: &yes, HELOMatchesRDNS: &yes, DNSBLClean: &yes, DNSBLListsOn: []string{},
			DNSWLListed: &no, DomainAgeDays: &age,
		},
	}, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchServer starts the API on loopback with real storage and keys.
// BENCH_WAL_MIN_SYNC and BENCH_WAL_BUSY_RATE, when set, are the storage's
// WALMinSyncInterval (e.g. -1ns for none) and WALBusyRate (1: always), to
// compare group-commit settings.
func benchServer(b *testing.B, v Verifier) (addr, key string) {
	dir := b.TempDir()
	minSync, _ := time.ParseDuration(os.Getenv("BENCH_WAL_MIN_SYNC"))
	busyRate, _ := strconv.Atoi(os.Getenv("BENCH_WAL_BUSY_RATE"))
	db, err := pebble.Open(dir+"/db", pebble.Options{Logger: slog.New(slog.DiscardHandler),
		WALMinSyncInterval: minSync, WALBusyRate: busyRate})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	keys, err := receipt.NewKeySet(receipt.NewFileStore(dir + "/signing"))
	if err != nil {
		b.Fatal(err)
	}
	acct, err := db.CreateAccount(b.Context(), "bench", storage.PlanEnterprise)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.AddCredits(b.Context(), acct.ID, 1<<40, "bench"); err != nil {
		b.Fatal(err)
	}
	key, _, err = db.MintKey(b.Context(), acct.ID, []string{httpapi.ScopeRead, httpapi.ScopeWrite}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{DB: db, Keys: keys, Verifier: v, Logger: slog.New(slog.DiscardHandler),
		Guard: httpapi.NewGuard(httpapi.GuardOptions{DB: db, IPLimitsDisabled: true, Logger: slog.New(slog.DiscardHandler)})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	b.Cleanup(func() { s.Shutdown(context.Background()) })
	return ln.Addr().String(), key
}

// load sends n requests with conc clients and returns the latencies.
func load(b *testing.B, addr string, conc, n int, req func(i int, r *fasthttp.Request), check ...func(i int, r *fasthttp.Response)) ([]time.Duration, time.Duration) {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: conc}
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rq, rs := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(rq)
			defer fasthttp.ReleaseResponse(rs)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				rq.Reset()
				req(i, rq)
				t0 := time.Now()
				if err := c.Do(rq, rs); err != nil || rs.StatusCode() != 200 {
					b.Errorf("request %d: %v %d %s", i, err, rs.StatusCode(), rs.Body())
					return
				}
				lat[i] = time.Since(t0)
				for _, f := range check {
					f(i, rs)
				}
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(start)
}

func pct(lat []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

// validateReq makes request i a POST /v1/validate with body(i).
func validateReq(addr, key string, body func(i int) string) func(i int, r *fasthttp.Request) {
	return func(i int, r *fasthttp.Request) {
		r.SetRequestURI("http://" + addr + "/v1/validate")
		r.Header.SetMethod("POST")
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.SetContentType("application/json")
		r.SetBodyString(body(i))
	}
}

// freshBody is a validation of a new address each time.
func freshBody(i int) string { return fmt.Sprintf(`{"email":"user%d@bench.test"}`, i) }

// BenchmarkAPIOverhead measures what the API adds to a fresh validation:
// with an engine that answers at once, the request's whole latency is the
// API's (auth, limits, hold, synced charge with result, history and cache,
// signing). 64 concurrent clients, each request a new address.
func BenchmarkAPIOverhead(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			addr, key := benchServer(b, instantVerifier{})
			n := max(b.N, conc*50)
			b.ResetTimer()
			lat, el := load(b, addr, conc, n, validateReq(addr, key, freshBody))
			b.ReportMetric(float64(n)/el.Seconds(), "req/s")
			b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
		})
	}
}

// sleepVerifier is instantVerifier after a pause, as a probe waits for a
// remote server: the API's work is spread over time as with real probes,
// not crammed into a saturated loop.
type sleepVerifier struct{ d time.Duration }

func (v sleepVerifier) Verify(ctx context.Context, in address.Input) (*probe.Result, error) {
	start := time.Now()
	time.Sleep(v.d)
	r, err := instantVerifier{}.Verify(ctx, in)
	r.Latency = time.Since(start)
	return r, err
}

// BenchmarkAPIOverheadProbing measures the API's overhead on fresh
// validations whose engine takes 20 ms, as probes of a nearby server do:
// the round trip less the engine's time, which the answer gives to the
// microsecond in its Server-Timing header. This is the issue's "added
// latency of the API over a direct engine call"; the machine is not
// saturated (16 clients: ~800 requests/s; 64: ~3,200/s).
func BenchmarkAPIOverheadProbing(b *testing.B) {
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			addr, key := benchServer(b, sleepVerifier{20 * time.Millisecond})
			n := max(b.N, conc*50)
			engine := make([]time.Duration, n)
			b.ResetTimer()
			lat, _ := load(b, addr, conc, n, validateReq(addr, key, freshBody), func(i int, rs *fasthttp.Response) {
				var ms float64
				if _, err := fmt.Sscanf(string(rs.Header.Peek("Server-Timing")), "engine;dur=%f", &ms); err != nil {
					b.Errorf("Server-Timing %q: %v", rs.Header.Peek("Server-Timing"), err)
				}
				engine[i] = time.Duration(ms * float64(time.Millisecond))
			})
			for i := range lat {
				lat[i] -= engine[i]
			}
			b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkCacheHits measures POST /v1/validate with cache: true hits
// through the whole stack (auth, limits, cache lookup, hold, synced charge
// with history, re-signing), 256 concurrent clients on 1,000 addresses.
func BenchmarkCacheHits(b *testing.B) {
	addr, key := benchServer(b, instantVerifier{})
	const addrs = 1000
	req := validateReq(addr, key, func(i int) string {
		return fmt.Sprintf(`{"email":"user%d@bench.test","cache":true}`, i%addrs)
	})
	load(b, addr, 64, addrs, req) // fill the cache
	const conc = 256
	n := max(b.N, conc*40)
	b.ResetTimer()
	cpu0 := cpuTime(b)
	lat, el := load(b, addr, conc, n, req)
	// CPU per request (server and load generator, which share the
	// process) is steadier than req/s on a shared machine.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(n), "cpu-µs/req")
	b.ReportMetric(float64(n)/el.Seconds(), "req/s")
	b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
}
