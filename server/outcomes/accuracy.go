package outcomes

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/storage"
)

// Scanner reads stored outcomes (storage.Outcomes.ScanOutcomes).
type Scanner interface {
	ScanOutcomes(ctx context.Context, account string, since time.Time, fn func(storage.Outcome) error) error
}

// Report is the accuracy measured on outcomes (GET /v1/accuracy).
//
// An outcome is evidence the address could take mail (deliverable) when
// it is a delivery, a complaint or an unsubscribe (each needs the message
// delivered first); it is evidence it could not when it is a hard bounce.
// A soft bounce says neither.
type Report struct {
	From, To  time.Time
	Outcomes  int
	Matched   int
	Unmatched int
	// Confusion counts the matched outcomes by verdict and event.
	Confusion map[string]map[string]int
	// PrecisionValid is the share of the outcomes of valid verdicts that
	// were deliverable; PrecisionInvalid that of invalid verdicts that
	// hard-bounced. Nil without such outcomes.
	PrecisionValid, PrecisionInvalid *float64
	// CatchAll counts the outcomes of risky catch-all verdicts, and those
	// that hard-bounced.
	CatchAll, CatchAllBounced int
	// FalseNegatives are deliveries to addresses called invalid.
	FalseNegatives int
	ByProvider     []Slice
	ByReason       []Slice
	// ByDomain are the domains with the most outcomes; WorstDomains
	// those whose valid verdicts bounced most (at least 3 such outcomes).
	ByDomain, WorstDomains []Slice
	// Daily is the matched outcomes by UTC day of the outcome.
	Daily []Slice
	// Reliability is the matched outcomes by score bucket (0-9, 10-19, …
	// 90-100): the measured deliverable share against the score.
	Reliability []Bucket
}

// Slice is the accuracy of a part of the outcomes.
type Slice struct {
	Key string `json:"key"`
	// Outcomes counted; Deliverable and Bounced of them (see Report).
	Outcomes    int `json:"outcomes"`
	Deliverable int `json:"deliverable"`
	Bounced     int `json:"bounced"`
	// Valid and ValidBounced: the deliverable or bounced outcomes of valid
	// verdicts, and those that bounced; Invalid and InvalidDelivered
	// likewise.
	Valid            int      `json:"valid"`
	ValidBounced     int      `json:"valid_bounced"`
	Invalid          int      `json:"invalid"`
	InvalidDelivered int      `json:"invalid_delivered"`
	PrecisionValid   *float64 `json:"precision_valid"`
	PrecisionInvalid *float64 `json:"precision_invalid"`
}

// Bucket is a score bucket of the reliability diagram.
type Bucket struct {
	From        int `json:"from"`
	To          int `json:"to"`
	Deliverable int `json:"deliverable"`
	Bounced     int `json:"bounced"`
	// Share is Deliverable / (Deliverable + Bounced); nil when both are 0.
	Share *float64 `json:"deliverable_share"`
}

func deliverable(event string) bool {
	return event == storage.OutcomeDelivered || event == storage.OutcomeComplaint || event == storage.OutcomeUnsubscribed
}

func (s *Slice) add(o *storage.Outcome) {
	s.Outcomes++
	d, b := deliverable(o.Event), o.Event == storage.OutcomeHardBounce
	if d {
		s.Deliverable++
	}
	if b {
		s.Bounced++
	}
	switch o.Verdict.Status {
	case string(probe.StatusValid):
		if d || b {
			s.Valid++
		}
		if b {
			s.ValidBounced++
		}
	case string(probe.StatusInvalid):
		if d || b {
			s.Invalid++
		}
		if d {
			s.InvalidDelivered++
		}
	}
}

func share(part, whole int) *float64 {
	if whole == 0 {
		return nil
	}
	f := float64(part) / float64(whole)
	return &f
}

func (s *Slice) finish() {
	s.PrecisionValid = share(s.Valid-s.ValidBounced, s.Valid)
	s.PrecisionInvalid = share(s.Invalid-s.InvalidDelivered, s.Invalid)
}

// Accuracy measures the outcomes at or after since of the account (every
// account: ""), up to now; top bounds each list by key.
func Accuracy(ctx context.Context, db Scanner, account string, since, now time.Time, top int) (Report, error) {
	r := Report{From: since, To: now, Confusion: map[string]map[string]int{}}
	for _, st := range probe.Statuses {
		r.Confusion[string(st)] = map[string]int{}
		for _, e := range storage.OutcomeEvents {
			r.Confusion[string(st)][e] = 0
		}
	}
	var all Slice
	providers, reasons, domains, days := map[string]*Slice{}, map[string]*Slice{}, map[string]*Slice{}, map[string]*Slice{}
	var buckets [10]Bucket
	for i := range buckets {
		buckets[i].From, buckets[i].To = 10*i, 10*i+9
	}
	buckets[9].To = 100
	get := func(m map[string]*Slice, k string) *Slice {
		s := m[k]
		if s == nil {
			s = &Slice{Key: k}
			m[k] = s
		}
		return s
	}
	err := db.ScanOutcomes(ctx, account, since, func(o storage.Outcome) error {
		if o.At.After(now) {
			return nil
		}
		r.Outcomes++
		if !o.Matched() {
			r.Unmatched++
			return nil
		}
		r.Matched++
		v := &o.Verdict
		if m := r.Confusion[v.Status]; m != nil {
			m[o.Event]++
		}
		all.add(&o)
		get(providers, probe.ProviderOfMX(v.MXHost)).add(&o)
		get(reasons, v.Reason).add(&o)
		get(domains, domainOf(o.Email)).add(&o)
		get(days, o.At.UTC().Format(time.DateOnly)).add(&o)
		if v.Status == string(probe.StatusRisky) && v.CatchAll && (deliverable(o.Event) || o.Event == storage.OutcomeHardBounce) {
			r.CatchAll++
			if o.Event == storage.OutcomeHardBounce {
				r.CatchAllBounced++
			}
		}
		if v.Status == string(probe.StatusInvalid) && o.Event == storage.OutcomeDelivered {
			r.FalseNegatives++
		}
		b := &buckets[min(max(v.Score, 0)/10, 9)]
		if deliverable(o.Event) {
			b.Deliverable++
		} else if o.Event == storage.OutcomeHardBounce {
			b.Bounced++
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	all.finish()
	r.PrecisionValid, r.PrecisionInvalid = all.PrecisionValid, all.PrecisionInvalid
	list := func(m map[string]*Slice) []Slice {
		out := make([]Slice, 0, len(m))
		for _, s := range m {
			s.finish()
			out = append(out, *s)
		}
		slices.SortFunc(out, func(a, b Slice) int { return cmp.Or(cmp.Compare(b.Outcomes, a.Outcomes), cmp.Compare(a.Key, b.Key)) })
		return out
	}
	byCount := func(s []Slice) []Slice { return s[:min(len(s), top)] }
	r.ByProvider = byCount(list(providers))
	r.ByReason = byCount(list(reasons))
	doms := list(domains)
	r.ByDomain = byCount(doms)
	worst := []Slice{}
	for _, d := range doms {
		if d.Valid >= 3 && d.ValidBounced > 0 {
			worst = append(worst, d)
		}
	}
	slices.SortFunc(worst, func(a, b Slice) int {
		// The highest share of valid verdicts that bounced first.
		return cmp.Or(cmp.Compare(b.ValidBounced*a.Valid, a.ValidBounced*b.Valid), cmp.Compare(b.Valid, a.Valid), cmp.Compare(a.Key, b.Key))
	})
	r.WorstDomains = byCount(worst)
	r.Daily = list(days)
	slices.SortFunc(r.Daily, func(a, b Slice) int { return cmp.Compare(a.Key, b.Key) })
	for i := range buckets {
		buckets[i].Share = share(buckets[i].Deliverable, buckets[i].Deliverable+buckets[i].Bounced)
	}
	r.Reliability = buckets[:]
	return r, nil
}
