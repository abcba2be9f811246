package harness

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram records durations in log-linear buckets, the layout of HDR
// histograms: values are counted in microseconds, exactly below 128 µs, and
// above that in 64 buckets per power of two, so a quantile read back is
// within 1/64 (1.6 %) of the recorded value. It covers up to 2^45 µs (about
// a year); larger values land in the last bucket. Record is safe for
// concurrent use (atomic adds); read it after the writers are done.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Int64 // µs
	min    atomic.Int64 // µs, valid when n > 0
	max    atomic.Int64 // µs
}

const (
	histSubBits  = 6 // 64 sub-buckets per power of two
	histSub      = 1 << histSubBits
	histExact    = 2 * histSub // values below it have a bucket each
	histMaxShift = 39
	histBuckets  = histExact + histMaxShift*histSub
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

// bucketOf returns the bucket index of v µs.
func bucketOf(v int64) int {
	if v < histExact {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1) // v>>shift is in [64, 127]
	if shift > histMaxShift {
		return histBuckets - 1
	}
	return histExact + (shift-1)*histSub + int(v>>shift) - histSub
}

// bucketRange returns the smallest and largest value (µs) of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < histExact {
		return int64(i), int64(i)
	}
	shift := (i-histExact)/histSub + 1
	mant := int64((i-histExact)%histSub + histSub)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := d.Microseconds()
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Merge adds every count of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.Count() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.min.Load(); m < h.min.Load() {
		h.min.Store(m)
	}
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max is the largest recorded value (exact); 0 when empty.
func (h *Histogram) Max() time.Duration {
	return time.Duration(h.max.Load()) * time.Microsecond
}

// Min is the smallest recorded value (exact); 0 when empty.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.min.Load()) * time.Microsecond
}

// Mean is the exact mean of the recorded values; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load()/int64(n)) * time.Microsecond
}

// Quantile returns the value at quantile q (0 < q ≤ 1): the upper bound of
// the bucket holding the ceil(q·n)-th smallest value, clamped to the exact
// minimum and maximum, so it never understates a latency by more than the
// bucket's width. It returns 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketRange(i)
			if i == histBuckets-1 {
				hi = h.max.Load() // the last bucket is open-ended
			}
			hi = min(hi, h.max.Load())
			hi = max(hi, h.min.Load())
			return time.Duration(hi) * time.Microsecond
		}
	}
	return h.Max()
}
