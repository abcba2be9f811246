package outcomes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// outcomeList is a Scanner over a slice.
type outcomeList []storage.Outcome

func (l outcomeList) ScanOutcomes(_ context.Context, _ string, since time.Time, fn func(storage.Outcome) error) error {
	for _, o := range l {
		if !o.At.Before(since) {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestAccuracy(t *testing.T) {
	day := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	n := 0
	o := func(email, event string, at time.Time, status, reason string, score int, catchAll bool, mx string) storage.Outcome {
		n++
		out := storage.Outcome{EventID: fmt.Sprint(n), Email: email, Event: event, At: at}
		if status != "" {
			out.Verdict = storage.Verdict{ResultID: "r" + fmt.Sprint(n), Status: status, Reason: reason, Score: score, CatchAll: catchAll, MXHost: mx}
		}
		return out
	}
	gmail := "gmail-smtp-in.l.google.com"
	var l outcomeList
	// shop.example: 4 valid delivered, 1 valid bounced (worst domain).
	for i := range 4 {
		l = append(l, o(fmt.Sprintf("u%d@shop.example", i), "delivered", day, "valid", "ok", 95, false, "mx.shop.example"))
	}
	l = append(l, o("gone@shop.example", "hard_bounce", day, "valid", "ok", 92, false, "mx.shop.example"))
	// gmail.com: 2 valid delivered (one a complaint), an invalid bounced,
	// an invalid delivered (a false negative), a soft bounce.
	l = append(l,
		o("a@gmail.com", "delivered", day.Add(24*time.Hour), "valid", "ok", 98, false, gmail),
		o("b@gmail.com", "complaint", day.Add(24*time.Hour), "valid", "ok", 98, false, gmail),
		o("c@gmail.com", "hard_bounce", day.Add(24*time.Hour), "invalid", "mailbox_not_found", 2, false, gmail),
		o("d@gmail.com", "delivered", day.Add(24*time.Hour), "invalid", "mailbox_not_found", 2, false, gmail),
		o("e@gmail.com", "soft_bounce", day.Add(24*time.Hour), "valid", "ok", 98, false, gmail),
	)
	// catch.example: 3 risky catch-all, one bounced.
	l = append(l,
		o("x@catch.example", "delivered", day, "risky", "catch_all", 55, true, "mx.catch.example"),
		o("y@catch.example", "delivered", day, "risky", "catch_all", 55, true, "mx.catch.example"),
		o("z@catch.example", "hard_bounce", day, "risky", "catch_all", 55, true, "mx.catch.example"),
	)
	// Unmatched, and one before the window.
	l = append(l, o("n@none.example", "delivered", day, "", "", 0, false, ""),
		o("old@shop.example", "hard_bounce", day.Add(-60*24*time.Hour), "valid", "ok", 95, false, "mx.shop.example"))

	r, err := Accuracy(context.Background(), l, "acct", day.Add(-30*24*time.Hour), day.Add(48*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcomes != 14 || r.Matched != 13 || r.Unmatched != 1 {
		t.Fatalf("counts %d %d %d", r.Outcomes, r.Matched, r.Unmatched)
	}
	if r.Confusion["valid"]["delivered"] != 5 || r.Confusion["valid"]["hard_bounce"] != 1 || r.Confusion["valid"]["complaint"] != 1 ||
		r.Confusion["invalid"]["hard_bounce"] != 1 || r.Confusion["invalid"]["delivered"] != 1 || r.Confusion["risky"]["hard_bounce"] != 1 ||
		r.Confusion["spamtrap"]["delivered"] != 0 {
		t.Errorf("confusion %v", r.Confusion)
	}
	// valid: 7 deliverable or bounced (soft excluded), 1 bounced.
	if f := r.PrecisionValid; f == nil || fmt.Sprintf("%.4f", *f) != fmt.Sprintf("%.4f", 6.0/7) {
		t.Errorf("precision of valid %v", deref(r.PrecisionValid))
	}
	if f := r.PrecisionInvalid; f == nil || *f != 0.5 {
		t.Errorf("precision of invalid %v", deref(r.PrecisionInvalid))
	}
	if r.CatchAll != 3 || r.CatchAllBounced != 1 || r.FalseNegatives != 1 {
		t.Errorf("catch-all %d/%d, false negatives %d", r.CatchAllBounced, r.CatchAll, r.FalseNegatives)
	}
	if len(r.ByProvider) < 2 || r.ByProvider[0].Key != "other" || r.ByProvider[0].Outcomes != 8 || r.ByProvider[1].Key != "google" {
		t.Errorf("by provider %+v", r.ByProvider)
	}
	if len(r.WorstDomains) != 1 || r.WorstDomains[0].Key != "shop.example" || r.WorstDomains[0].ValidBounced != 1 {
		t.Errorf("worst domains %+v", r.WorstDomains)
	}
	if len(r.Daily) != 2 || r.Daily[0].Key != "2026-11-20" || r.Daily[1].Key != "2026-11-21" || r.Daily[1].Outcomes != 5 {
		t.Errorf("daily %+v", r.Daily)
	}
	b9, b5, b0 := r.Reliability[9], r.Reliability[5], r.Reliability[0]
	if b9.From != 90 || b9.To != 100 || b9.Deliverable != 6 || b9.Bounced != 1 || b5.Deliverable != 2 || b5.Bounced != 1 ||
		b0.Deliverable != 1 || b0.Bounced != 1 || r.Reliability[3].Share != nil {
		t.Errorf("reliability %+v", r.Reliability)
	}
	if r, _ := Accuracy(context.Background(), l, "acct", day.Add(-30*24*time.Hour), day.Add(48*time.Hour), 1); len(r.ByDomain) != 1 {
		t.Errorf("top 1: %d domains", len(r.ByDomain))
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
