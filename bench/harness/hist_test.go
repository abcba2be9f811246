package harness

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// exactQuantile is the ceil(q·n)-th smallest value.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func TestHistogramQuantilesWithinOneBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"uniform 0-10ms", func() time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Millisecond))) }},
		{"exponential mean 120ms", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(120*time.Millisecond)) }},
		{"bimodal 130ms and 5s tarpits", func() time.Duration {
			if rng.IntN(100) == 0 {
				return 5*time.Second + time.Duration(rng.Int64N(int64(20*time.Millisecond)))
			}
			return 100*time.Millisecond + time.Duration(rng.Int64N(int64(60*time.Millisecond)))
		}},
		{"sub-128µs exact", func() time.Duration { return time.Duration(rng.Int64N(128)) * time.Microsecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram()
			var all []time.Duration
			for range 20000 {
				d := tc.gen().Truncate(time.Microsecond)
				h.Record(d)
				all = append(all, d)
			}
			slices.Sort(all)
			if h.Count() != uint64(len(all)) {
				t.Fatalf("count %d, want %d", h.Count(), len(all))
			}
			if h.Max() != all[len(all)-1] || h.Min() != all[0] {
				t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), all[0], all[len(all)-1])
			}
			for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(all, q)
				// Never below the true value (upper bound of the bucket),
				// and at most one bucket (1/64) above it.
				if got < want || float64(got-want) > float64(want)/64+float64(time.Microsecond) {
					t.Errorf("q%.3f: %v, want %v (at most 1/64 above)", q, got, want)
				}
			}
		})
	}
}

func TestHistogramEmptyAndEdges(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Max() != 0 || h.Min() != 0 {
		t.Fatal("an empty histogram reports values")
	}
	h.Record(-time.Second) // clamped to 0
	h.Record(365 * 24 * time.Hour)
	h.Record(100 * 365 * 24 * time.Hour) // beyond the last bucket
	if h.Count() != 3 || h.Min() != 0 || h.Max() != 100*365*24*time.Hour {
		t.Fatalf("count %d min %v max %v", h.Count(), h.Min(), h.Max())
	}
	if got := h.Quantile(1); got != h.Max() {
		t.Errorf("q1 %v, want the max %v", got, h.Max())
	}
	if got := h.Quantile(0.01); got != 0 {
		t.Errorf("q0.01 %v, want 0", got)
	}
}

func TestHistogramBucketsContiguous(t *testing.T) {
	// Every value maps to a bucket whose range holds it, and consecutive
	// buckets tile the line with no gap.
	prevHi := int64(-1)
	for i := range histBuckets - 1 {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d is [%d, %d] after %d", i, lo, hi, prevHi)
		}
		for _, v := range []int64{lo, hi, (lo + hi) / 2} {
			if b := bucketOf(v); b != i {
				t.Fatalf("value %d in bucket %d, want %d", v, b, i)
			}
		}
		prevHi = hi
	}
}

func TestHistogramConcurrentAndMerge(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				a.Record(time.Duration(w*1000+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	for i := range 1000 {
		b.Record(time.Duration(8000+i) * time.Microsecond)
	}
	a.Merge(b)
	if a.Count() != 9000 {
		t.Fatalf("count %d", a.Count())
	}
	if a.Min() != 0 || a.Max() != 8999*time.Microsecond {
		t.Errorf("min %v max %v", a.Min(), a.Max())
	}
	if m := a.Mean(); m != 4499*time.Microsecond {
		t.Errorf("mean %v, want 4.499ms", m)
	}
	if p := a.Quantile(0.5); p < 4499*time.Microsecond || p > 4499*time.Microsecond*65/64 {
		t.Errorf("p50 %v", p)
	}
}
