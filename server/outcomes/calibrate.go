package outcomes

import (
	"fmt"
	"math"
	"time"
)

// Calibration: the score made a probability measured on the account's
// own outcomes. The engine's score orders addresses by the strength of
// the evidence for deliverability; how often mail to an address of a
// given score is delivered is a property of the account's traffic, and
// the account's outcomes measure it.
//
// The fit (Fit) is binned and isotonic. The raw scores fall into ten
// buckets (0-9, …, 90-100); in each, the deliverable share of its
// matched outcomes (deliverable: delivered, complaint, unsubscribed;
// against hard bounces), shrunk toward the raw score by priorWeight
// pseudo-outcomes, so a bucket with few outcomes moves little; then the
// pool-adjacent-violators algorithm makes the shares non-decreasing in
// the score (isotonic regression, weighted by outcomes), since a higher
// raw score must never mean a lower probability. A raw score maps to the
// linear interpolation between its bucket's share and its neighbour's,
// at the bucket midpoints, as a whole percentage.
//
// A model exists once MinOutcomes outcomes count; a provider (by MX) gets
// its own once it alone has MinOutcomes, else the account's applies.

// priorWeight is the pseudo-outcomes at the raw score a bucket's share is
// shrunk toward.
const priorWeight = 10

// Model maps raw scores to calibrated ones.
type Model struct {
	// Version names the fit: the UTC day it was fitted on and the
	// outcomes it counted ("2026-11-26/1234").
	Version string
	// Outcomes counted.
	Outcomes int
	// Share is the calibrated probability at each bucket's midpoint.
	Share [10]float64
	// Counts are each bucket's deliverable and bounced outcomes.
	Deliverable, Bounced [10]int
}

// midpoint is bucket i's score midpoint.
func midpoint(i int) float64 {
	if i == 9 {
		return 95
	}
	return float64(10*i) + 4.5
}

// Fit fits a model to buckets of outcomes (Report.Reliability's counts).
func Fit(deliverable, bounced [10]int, day time.Time) Model {
	m := Model{Deliverable: deliverable, Bounced: bounced}
	var w [10]float64
	for i := range 10 {
		n := deliverable[i] + bounced[i]
		m.Outcomes += n
		m.Share[i] = (float64(deliverable[i]) + priorWeight*midpoint(i)/100) / float64(n+priorWeight)
		w[i] = float64(n + priorWeight)
	}
	m.Share = pav(m.Share, w)
	m.Version = fmt.Sprintf("%s/%d", day.UTC().Format(time.DateOnly), m.Outcomes)
	return m
}

// pav is the weighted isotonic (non-decreasing) regression of y by the
// pool-adjacent-violators algorithm.
func pav(y, w [10]float64) [10]float64 {
	type block struct {
		v, w float64
		n    int
	}
	var bs []block
	for i := range y {
		bs = append(bs, block{y[i], w[i], 1})
		for len(bs) > 1 && bs[len(bs)-2].v > bs[len(bs)-1].v {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			bs = bs[:len(bs)-2]
			bs = append(bs, block{(a.v*a.w + b.v*b.w) / (a.w + b.w), a.w + b.w, a.n + b.n})
		}
	}
	var out [10]float64
	i := 0
	for _, b := range bs {
		for range b.n {
			out[i] = b.v
			i++
		}
	}
	return out
}

// Score is the calibrated score of a raw one, 0 to 100.
func (m *Model) Score(raw int) int {
	x := float64(min(max(raw, 0), 100))
	var p float64
	switch {
	case x <= midpoint(0):
		p = m.Share[0]
	case x >= midpoint(9):
		p = m.Share[9]
	default:
		i := 0
		for midpoint(i+1) < x {
			i++
		}
		t := (x - midpoint(i)) / (midpoint(i+1) - midpoint(i))
		p = m.Share[i] + t*(m.Share[i+1]-m.Share[i])
	}
	return int(math.Round(100 * p))
}
