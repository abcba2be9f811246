package storagetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// receiptOf is a stored receipt with the checks matching reads.
func receiptOf(status, reason string, catchAll bool, mx string) []byte {
	return fmt.Appendf(nil, `{"status":%q,"checks":{"reason":%q,"is_catch_all":%t,"mx_host":%q}}`, status, reason, catchAll, mx)
}

// testOutcomeMatching: LatestVerdicts finds an address's latest result
// at or before a time, whatever the address's case, single, cached and
// batch results alike, with the reason, catch-all flag and MX host of its
// receipt; another account's results never match; and it survives a
// restart.
func testOutcomeMatching(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 100)
	other := account(t, s, 100)
	t0 := c.Now()

	ann := storage.Result{Email: "Ann@shop.example", Status: "valid", Score: 90, LatencyMs: 5,
		Receipt: receiptOf("valid", "ok", false, "mx.shop.example")}
	first := validate(t, s, acct, ann).Result
	c.Advance(time.Hour)
	t1 := c.Now()
	// The same address an hour later, served from the cache: a verdict
	// given at that time too.
	cached := ann
	cached.CachedFrom, cached.SkipCache = first.ID, true
	cachedRow := validate(t, s, acct, cached).Result
	c.Advance(time.Hour)
	// Then a batch judges it risky.
	j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: []string{"ann@shop.example", "bob@shop.example"}})
	noErr(t, err, "CreateJob")
	_, err = s.StartJob(t.Context(), j.ID)
	noErr(t, err, "StartJob")
	c.Advance(time.Hour)
	t2 := c.Now()
	_, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{
		{Index: 0, Result: storage.Result{Email: "ann@shop.example", Status: "risky", Score: 55, Receipt: receiptOf("risky", "catch_all", true, "mx2.shop.example")}},
		{Index: 1, Result: storage.Result{Email: "bob@shop.example", Status: "invalid", Score: 2, Receipt: receiptOf("invalid", "mailbox_not_found", false, "mx.shop.example")}},
	})
	noErr(t, err, "PutJobResults")
	// Another account's result for the same address.
	c.Advance(time.Minute)
	validate(t, s, other, storage.Result{Email: "ann@shop.example", Status: "invalid", Score: 1})

	check := func(s storage.Store) {
		t.Helper()
		qs := []storage.VerdictQuery{
			{Email: "ann@shop.example", Before: t0.Add(-time.Second)}, // before any
			{Email: "ANN@SHOP.EXAMPLE", Before: t0},                   // at the first, exactly
			{Email: "ann@shop.example", Before: t1.Add(time.Minute)},  // the cached row
			{Email: "ann@shop.example", Before: t2.Add(time.Hour)},    // the batch's
			{Email: "bob@shop.example", Before: t2},
			{Email: "nobody@shop.example", Before: t2.Add(time.Hour)},
		}
		vs, ok, err := s.LatestVerdicts(t.Context(), acct, qs)
		noErr(t, err, "LatestVerdicts")
		if len(vs) != len(qs) || len(ok) != len(qs) {
			t.Fatalf("LatestVerdicts: %d answers for %d queries", len(vs), len(qs))
		}
		want := []storage.Verdict{
			{},
			{ResultID: first.ID, Status: "valid", Score: 90, Reason: "ok", MXHost: "mx.shop.example", ProbedAt: t0},
			{ResultID: cachedRow.ID, Status: "valid", Score: 90, Reason: "ok", MXHost: "mx.shop.example", ProbedAt: t1},
			{Status: "risky", Score: 55, Reason: "catch_all", CatchAll: true, MXHost: "mx2.shop.example", ProbedAt: t2},
			{Status: "invalid", Score: 2, Reason: "mailbox_not_found", MXHost: "mx.shop.example", ProbedAt: t2},
			{},
		}
		for i, w := range want {
			got := vs[i]
			if w.ResultID == "" && w.Status != "" {
				w.ResultID = got.ResultID // a batch result's id is the store's
			}
			if ok[i] != (w.Status != "") || got.ResultID != w.ResultID || got.Status != w.Status || got.Score != w.Score ||
				got.Reason != w.Reason || got.CatchAll != w.CatchAll || got.MXHost != w.MXHost || !got.ProbedAt.Equal(w.ProbedAt) {
				t.Errorf("query %d (%s before %s): %+v ok=%v; want %+v", i, qs[i].Email, qs[i].Before.Format(time.TimeOnly), got, ok[i], w)
			}
		}
		if vs[3].ResultID == "" {
			t.Error("a batch result matched without its id")
		}
	}
	check(s)
	s = b.Reopen(t, s)
	check(s)
	_, _, err = s.LatestVerdicts(t.Context(), "acct_nosuchaccount0000000", []storage.VerdictQuery{{Email: "a@b", Before: t2}})
	wantErr(t, err, storage.ErrNotFound)
}

// outcome is an outcome of the test's.
func outcome(id, email, event string, at time.Time) storage.Outcome {
	return storage.Outcome{EventID: id, Email: email, Event: event, At: at, Source: "api"}
}

// testOutcomes: PutOutcomes stores each event once (in one call and
// across calls), checks its fields, keeps the matched verdict; Scan reads
// them back by time, of one account or all; AddressEvidence is the latest
// delivery or hard bounce of an address, and EvidenceAccounts the
// accounts that have any; Delete and Purge remove outcomes, ids and
// evidence; settings round-trip; all of it survives a restart.
func testOutcomes(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	other := account(t, s, 0)
	third := account(t, s, 0)
	t0 := c.Now().Add(-48 * time.Hour)

	hard := outcome("ev-1", "Ann@shop.example", storage.OutcomeHardBounce, t0)
	hard.SMTPCode, hard.Enhanced, hard.Diagnostic = 550, "5.1.1", "550 5.1.1 <Ann@shop.example>: user unknown"
	hard.Verdict = storage.Verdict{ResultID: "r1", Status: "valid", Score: 90, Reason: "ok", MXHost: "mx.shop.example", ProbedAt: t0.Add(-time.Hour)}
	outs := []storage.Outcome{
		hard,
		outcome("ev-2", "bob@shop.example", storage.OutcomeDelivered, t0.Add(time.Hour)),
		outcome("ev-1", "Ann@shop.example", storage.OutcomeDelivered, t0.Add(2*time.Hour)), // the same event id again: not stored
		outcome("ev-3", "ann@shop.example", storage.OutcomeSoftBounce, t0.Add(3*time.Hour)),
	}
	fresh, err := s.PutOutcomes(t.Context(), acct, outs)
	noErr(t, err, "PutOutcomes")
	if !slices.Equal(fresh, []bool{true, true, false, true}) {
		t.Fatalf("fresh %v", fresh)
	}
	// A retry of the same request stores nothing; a new event does.
	fresh, err = s.PutOutcomes(t.Context(), acct, append(outs[:2:2], outcome("ev-4", "ann@shop.example", storage.OutcomeDelivered, t0.Add(4*time.Hour))))
	noErr(t, err, "PutOutcomes again")
	if !slices.Equal(fresh, []bool{false, false, true}) {
		t.Fatalf("fresh on a retry %v", fresh)
	}
	// Evidence of a third account, so that EvidenceAccounts passes over
	// one account's keys to the next.
	_, err = s.PutOutcomes(t.Context(), third, []storage.Outcome{outcome("t-1", "a@x.example", storage.OutcomeHardBounce, t0.Add(6*time.Hour)),
		outcome("t-2", "b@x.example", storage.OutcomeDelivered, t0.Add(6*time.Hour))})
	noErr(t, err, "PutOutcomes third")
	// The same event id in another account is another event.
	fresh, err = s.PutOutcomes(t.Context(), other, []storage.Outcome{outcome("ev-1", "zed@x.example", storage.OutcomeComplaint, t0)})
	noErr(t, err, "PutOutcomes other")
	if !slices.Equal(fresh, []bool{true}) {
		t.Fatalf("another account's ev-1: fresh %v", fresh)
	}
	for _, bad := range []storage.Outcome{
		outcome("", "a@b", storage.OutcomeDelivered, t0),
		outcome("x", "", storage.OutcomeDelivered, t0),
		outcome("x", "a@b", "opened", t0),
		outcome("x", "a@b", storage.OutcomeDelivered, time.Time{}),
	} {
		_, err := s.PutOutcomes(t.Context(), acct, []storage.Outcome{bad})
		wantErr(t, err, storage.ErrInvalid)
	}
	_, err = s.PutOutcomes(t.Context(), "acct_nosuchaccount0000000", outs[:1])
	wantErr(t, err, storage.ErrNotFound)

	scan := func(s storage.Store, account string, since time.Time) []storage.Outcome {
		t.Helper()
		var got []storage.Outcome
		noErr(t, s.ScanOutcomes(t.Context(), account, since, func(o storage.Outcome) error {
			got = append(got, o)
			return nil
		}), "ScanOutcomes")
		return got
	}
	check := func(s storage.Store) {
		t.Helper()
		got := scan(s, acct, time.Time{})
		var ids []string
		for _, o := range got {
			ids = append(ids, o.EventID)
		}
		if !slices.Equal(ids, []string{"ev-1", "ev-2", "ev-3", "ev-4"}) {
			t.Fatalf("ScanOutcomes: %v", ids)
		}
		g := got[0]
		if g.Account != acct || g.Email != "Ann@shop.example" || g.Event != storage.OutcomeHardBounce || !g.At.Equal(t0) || g.Source != "api" ||
			g.SMTPCode != 550 || g.Enhanced != "5.1.1" || g.Diagnostic != hard.Diagnostic || !g.ReceivedAt.Equal(c.Now()) ||
			!sameVerdict(g.Verdict, hard.Verdict) || !g.Matched() || got[1].Matched() {
			t.Errorf("the hard bounce read back %+v; stored %+v", g, hard)
		}
		if got := scan(s, acct, t0.Add(time.Hour)); len(got) != 3 || got[0].EventID != "ev-2" {
			t.Errorf("since t0+1h: %d outcomes", len(got))
		}
		if all := scan(s, "", time.Time{}); len(all) != 7 {
			t.Errorf("every account's outcomes: %d, want 7", len(all))
		}
		// A complaint is no evidence: other has none.
		if got := evidenceAccounts(t, s); !got[acct] || !got[third] || got[other] {
			t.Errorf("EvidenceAccounts %v: want %s and %s, not %s", got, acct, third, other)
		}
		// Ann's latest evidence is the delivery of ev-4 (the soft bounce
		// is not evidence); bob's, his delivery.
		if e, ok, err := s.AddressEvidence(t.Context(), acct, "ANN@shop.example"); err != nil || !ok || e.EventID != "ev-4" {
			t.Errorf("Ann's evidence %+v %v %v; want ev-4", e, ok, err)
		}
		if e, ok, err := s.AddressEvidence(t.Context(), acct, "bob@shop.example"); err != nil || !ok || e.Event != storage.OutcomeDelivered {
			t.Errorf("bob's evidence %+v %v %v", e, ok, err)
		}
		if _, ok, err := s.AddressEvidence(t.Context(), other, "ann@shop.example"); err != nil || ok {
			t.Errorf("another account sees Ann's evidence: %v %v", ok, err)
		}
	}
	check(s)
	s = b.Reopen(t, s)
	check(s)

	// An older hard bounce reported late does not replace newer evidence.
	late := outcome("ev-0", "ann@shop.example", storage.OutcomeHardBounce, t0.Add(-time.Hour))
	_, err = s.PutOutcomes(t.Context(), acct, []storage.Outcome{late})
	noErr(t, err, "late bounce")
	if e, _, _ := s.AddressEvidence(t.Context(), acct, "ann@shop.example"); e.EventID != "ev-4" {
		t.Errorf("a late, older bounce replaced the evidence: %s", e.EventID)
	}
	// A newer hard bounce does.
	newer := outcome("ev-5", "ann@shop.example", storage.OutcomeHardBounce, t0.Add(5*time.Hour))
	_, err = s.PutOutcomes(t.Context(), acct, []storage.Outcome{newer})
	noErr(t, err, "newer bounce")
	if e, _, _ := s.AddressEvidence(t.Context(), acct, "ann@shop.example"); e.EventID != "ev-5" {
		t.Errorf("a newer bounce is not the evidence: %s", e.EventID)
	}

	// Retention: what happened before t0+1h goes (ev-0, ev-1), with its
	// ids: the same event reported again is new.
	n, err := s.PurgeOutcomes(t.Context(), t0.Add(time.Hour))
	noErr(t, err, "PurgeOutcomes")
	if n != 3 { // ev-0, ev-1 of acct, ev-1 of other
		t.Errorf("purged %d, want 3", n)
	}
	if got := scan(s, acct, time.Time{}); len(got) != 4 || got[0].EventID != "ev-2" {
		t.Errorf("after the purge: %d outcomes", len(got))
	}
	fresh, err = s.PutOutcomes(t.Context(), acct, []storage.Outcome{outs[0]})
	noErr(t, err, "PutOutcomes after the purge")
	if !fresh[0] {
		t.Error("a purged event id is still known")
	}
	// Delete: the account's outcomes and evidence go, another's stay.
	n, err = s.DeleteOutcomes(t.Context(), acct)
	noErr(t, err, "DeleteOutcomes")
	if n != 5 {
		t.Errorf("deleted %d, want 5", n)
	}
	if got := scan(s, acct, time.Time{}); len(got) != 0 {
		t.Errorf("%d outcomes after DeleteOutcomes", len(got))
	}
	if _, ok, _ := s.AddressEvidence(t.Context(), acct, "ann@shop.example"); ok {
		t.Error("evidence left after DeleteOutcomes")
	}
	if got := evidenceAccounts(t, s); got[acct] || !got[third] {
		t.Errorf("EvidenceAccounts after DeleteOutcomes of %s: %v", acct, got)
	}
	_, err = s.DeleteOutcomes(t.Context(), "acct_nosuchaccount0000000")
	wantErr(t, err, storage.ErrNotFound)

	// Settings.
	if st, err := s.OutcomeSettings(t.Context(), acct); err != nil || st.MailgunKey != "" {
		t.Fatalf("settings before any: %+v %v", st, err)
	}
	set := storage.OutcomeSettings{SESTopics: []string{"arn:aws:sns:eu-west-1:123456789012:ses"}, SendGridKey: "MFkw…", MailgunKey: "key-1",
		PostmarkUser: "verifyd", PostmarkPassHash: "ab12"}
	noErr(t, s.SetOutcomeSettings(t.Context(), acct, set), "SetOutcomeSettings")
	s = b.Reopen(t, s)
	if st, err := s.OutcomeSettings(t.Context(), acct); err != nil || fmt.Sprint(st) != fmt.Sprint(set) {
		t.Fatalf("settings read back %+v %v; want %+v", st, err, set)
	}
	_, err = s.OutcomeSettings(t.Context(), "acct_nosuchaccount0000000")
	wantErr(t, err, storage.ErrNotFound)
	wantErr(t, s.SetOutcomeSettings(t.Context(), "acct_nosuchaccount0000000", set), storage.ErrNotFound)
}

func sameVerdict(a, b storage.Verdict) bool {
	pa, pb := a.ProbedAt, b.ProbedAt
	a.ProbedAt, b.ProbedAt = time.Time{}, time.Time{}
	return a == b && pa.Equal(pb)
}

// evidenceAccounts is EvidenceAccounts as a set; an account listed twice
// fails the test.
func evidenceAccounts(t *testing.T, s storage.Store) map[string]bool {
	t.Helper()
	l, err := s.EvidenceAccounts(t.Context())
	noErr(t, err, "EvidenceAccounts")
	m := map[string]bool{}
	for _, a := range l {
		if m[a] {
			t.Errorf("EvidenceAccounts lists %s twice: %v", a, l)
		}
		m[a] = true
	}
	return m
}

// testOutcomeRepeats: cache hits that repeat a verdict (Result.Repeats)
// may leave the verdict index as it is, but LatestVerdicts still gives
// the verdict last given at each time: a repeat after a verdict changed
// by what delivery outcomes taught (a learned hit, not a repeat) is the
// latest again, before and after a restart.
func testOutcomeRepeats(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 100)
	valid := storage.Result{Email: "ann@shop.example", Status: "valid", Score: 90, LatencyMs: 5,
		Receipt: receiptOf("valid", "ok", false, "mx.shop.example")}
	src := validate(t, s, acct, valid).Result
	at := map[string]time.Time{src.ID: c.Now()}
	repeat := func() storage.Result {
		t.Helper()
		c.Advance(time.Hour)
		r := valid
		r.CachedFrom, r.SkipCache, r.Repeats = src.ID, true, true
		got := validate(t, s, acct, r).Result
		at[got.ID] = c.Now()
		return got
	}
	repeat()
	// What the account's sending taught changes the verdict of the next
	// hit: not a repeat.
	c.Advance(time.Hour)
	learned := storage.Result{Email: "ann@shop.example", Status: "invalid", Score: 5, CachedFrom: src.ID, SkipCache: true,
		Receipt: receiptOf("invalid", "mailbox_not_found", false, "mx.shop.example")}
	l := validate(t, s, acct, learned).Result
	tLearned := c.Now()
	repeat()
	repeat()

	check := func(s storage.Store, last time.Time) {
		t.Helper()
		qs := []storage.VerdictQuery{
			{Email: "ann@shop.example", Before: at[src.ID].Add(90 * time.Minute)}, // after the first repeat
			{Email: "ann@shop.example", Before: tLearned.Add(time.Minute)},        // the learned hit
			{Email: "ann@shop.example", Before: tLearned.Add(90 * time.Minute)},   // the repeat after it
			{Email: "ann@shop.example", Before: last.Add(time.Minute)},            // the last repeat
		}
		vs, ok, err := s.LatestVerdicts(t.Context(), acct, qs)
		noErr(t, err, "LatestVerdicts")
		for i, v := range vs {
			switch {
			case !ok[i]:
				t.Errorf("query %d: no verdict", i)
			case i == 1 && (v.ResultID != l.ID || v.Status != "invalid" || v.Reason != "mailbox_not_found" || !v.ProbedAt.Equal(tLearned)):
				t.Errorf("query %d, after the learned hit: %+v, want %s invalid at %s", i, v, l.ID, tLearned.Format(time.TimeOnly))
			case i != 1 && (v.Status != "valid" || v.Score != 90 || v.Reason != "ok" || v.MXHost != "mx.shop.example"):
				t.Errorf("query %d (before %s): %+v, want the repeated verdict, valid", i, qs[i].Before.Format(time.TimeOnly), v)
			case i != 1 && (at[v.ResultID].IsZero() || !v.ProbedAt.Equal(at[v.ResultID]) || v.ProbedAt.After(qs[i].Before)):
				t.Errorf("query %d (before %s): result %s at %s: not the source or one of its repeats, or at another time",
					i, qs[i].Before.Format(time.TimeOnly), v.ResultID, v.ProbedAt.Format(time.TimeOnly))
			case i == 2 && v.ProbedAt.Before(tLearned):
				t.Errorf("query 2: %s at %s, before the learned hit: the learned verdict is then the latest", v.ResultID, v.ProbedAt.Format(time.TimeOnly))
			}
		}
	}
	last := c.Now()
	check(s, last)
	s = b.Reopen(t, s)
	check(s, last)
	// A fresh result written after repeats but probed before the last of
	// them (its probe began before, ended after): the repeat given after
	// its probe began is still the latest from then on.
	c.Advance(time.Hour)
	r1 := repeat()
	r2 := repeat()
	late := storage.Result{Email: "ann@shop.example", Status: "invalid", Score: 3, ProbedAt: at[r1.ID].Add(30 * time.Minute),
		Receipt: receiptOf("invalid", "mailbox_not_found", false, "mx.shop.example")}
	lateRow := validate(t, s, acct, late).Result
	vs, ok, err := s.LatestVerdicts(t.Context(), acct, []storage.VerdictQuery{
		{Email: "ann@shop.example", Before: late.ProbedAt.Add(time.Minute)},
		{Email: "ann@shop.example", Before: at[r2.ID].Add(time.Minute)},
	})
	noErr(t, err, "LatestVerdicts")
	if !ok[0] || vs[0].ResultID != lateRow.ID || vs[0].Status != "invalid" {
		t.Errorf("between the repeats, after the late result's probe began: %+v, want %s invalid", vs[0], lateRow.ID)
	}
	if !ok[1] || vs[1].Status != "valid" || vs[1].ProbedAt.Before(late.ProbedAt) {
		t.Errorf("after the last repeat, given after the late result's probe began: %+v, want the repeat's valid", vs[1])
	}

	// After a restart a repeat is still the latest.
	c.Advance(time.Hour)
	learned2 := learned
	validate(t, s, acct, learned2)
	tLearned = c.Now()
	repeat()
	last = c.Now()
	vs, ok, err = s.LatestVerdicts(t.Context(), acct, []storage.VerdictQuery{{Email: "ann@shop.example", Before: last}})
	noErr(t, err, "LatestVerdicts")
	if !ok[0] || vs[0].Status != "valid" || vs[0].ProbedAt.Before(tLearned) {
		t.Errorf("after a restart, a learned hit and a repeat: %+v, want the repeat's valid", vs[0])
	}
}
