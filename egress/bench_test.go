package egress

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// benchPool is a pool of 4 addresses with caps high enough that the
// benchmark measures the bookkeeping, not waits.
func benchPool(b *testing.B, rate float64) *Pool {
	p, err := New(Options{
		Addresses:       ips("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"),
		MaxConnsPerHost: 1 << 20,
		MaxRatePerHost:  rate,
		Logger:          quietLogger,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkAcquireRelease: parallel sessions spread over 256 MX addresses,
// with the rate limiter on (at a rate that never makes anyone wait).
func BenchmarkAcquireRelease(b *testing.B) {
	p := benchPool(b, 1e12)
	var dests [256]netip.Addr
	for i := range dests {
		dests[i] = netip.AddrFrom4([4]byte{127, 2, 0, byte(i)})
	}
	var next atomic.Uint32
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(7919)
		for pb.Next() {
			i++
			l, err := p.Acquire(ctx, dests[i%256], netip.Addr{})
			if err != nil {
				b.Error(err)
				return
			}
			l.Release(OutcomeOK)
		}
	})
}

// BenchmarkAcquireReleaseOneHost: every session to the same MX address,
// the worst case for the per-destination mutex.
func BenchmarkAcquireReleaseOneHost(b *testing.B) {
	p := benchPool(b, -1)
	dest := netip.MustParseAddr("127.2.0.1")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := p.Acquire(ctx, dest, netip.Addr{})
			if err != nil {
				b.Error(err)
				return
			}
			l.Release(OutcomeOK)
		}
	})
}

// BenchmarkAcquireWaitingForSlots: more goroutines than slots to one MX
// (4 addresses × 2), so most Acquires wait for a Release.
func BenchmarkAcquireWaitingForSlots(b *testing.B) {
	p, err := New(Options{
		Addresses:       ips("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"),
		MaxConnsPerHost: 2,
		MaxRatePerHost:  -1,
		Logger:          quietLogger,
		SaveInterval:    time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	dest := netip.MustParseAddr("127.2.0.1")
	ctx := context.Background()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := p.Acquire(ctx, dest, netip.Addr{})
			if err != nil {
				b.Error(err)
				return
			}
			l.Release(OutcomeOK)
		}
	})
}
