package resolver

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// benchServer answers every A query with 192.0.2.1 and every MX query
// with one exchange, TTL 3600.
func benchServer(b *testing.B) *testServer {
	return startServerRecording(b, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		m := new(dns.Msg)
		m.SetReply(req)
		hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 3600}
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: []byte{192, 0, 2, 1}}}
		case dns.TypeMX:
			m.Answer = []dns.RR{&dns.MX{Hdr: hdr, Preference: 10, Mx: "mx." + q.Name}}
		}
		_ = w.WriteMsg(m)
	}, false)
}

func benchResolver(b *testing.B, s *testServer) *Resolver {
	return newTestResolver(b, Options{
		Upstreams: []string{s.addr},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// BenchmarkCachedLookup: LookupMX of a cached name.
func BenchmarkCachedLookup(b *testing.B) {
	s := benchServer(b)
	r := benchResolver(b, s)
	ctx := context.Background()
	if _, err := r.LookupMX(ctx, "example.test"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.LookupMX(ctx, "example.test")
		if err != nil || len(res.MX) != 1 {
			b.Fatal(res, err)
		}
	}
	if n := s.total(); n != 1 {
		b.Fatalf("%d upstream queries, want 1", n)
	}
}

// BenchmarkCachedLookupParallel: cached lookups from every CPU at once.
func BenchmarkCachedLookupParallel(b *testing.B) {
	s := benchServer(b)
	r := benchResolver(b, s)
	ctx := context.Background()
	names := make([]string, 1000)
	for i := range names {
		names[i] = "n" + strconv.Itoa(i) + ".example.test"
		if _, err := r.LookupMX(ctx, names[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := r.LookupMX(ctx, names[i%len(names)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkUncachedParallel: 64 concurrent callers look up names never
// seen before, each one an upstream query to a local miekg/dns server on
// the same CPUs. Reports queries/s.
func BenchmarkUncachedParallel(b *testing.B) {
	s := benchServer(b)
	r := benchResolver(b, s)
	ctx := context.Background()
	var seq atomic.Int64
	const callers = 64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := "u" + strconv.FormatInt(seq.Add(1), 10) + ".bench.test"
			res, err := r.LookupIP(ctx, "ip4", name)
			if err != nil || len(res.IPs) != 1 {
				b.Error(res, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "queries/s")
}
