package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Addresses returns n distinct addresses: user0@example.com, …
func Addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}

func testJobLifecycle(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 10)
	other := account(t, s, 10)

	// Not enough credits: the error says how many are missing.
	_, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(12)})
	var ice *storage.InsufficientCreditsError
	if !errors.As(err, &ice) || ice.Current != 10 || ice.Needed != 12 || ice.Shortfall() != 2 {
		t.Fatalf("CreateJob beyond the balance: %v", err)
	}
	// Credits held by a validation in flight are not available.
	h, err := s.Hold(t.Context(), acct, 3, "")
	noErr(t, err, "Hold")
	_, err = s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(8)})
	if !errors.As(err, &ice) || ice.Held != 3 || ice.Shortfall() != 1 {
		t.Fatalf("CreateJob beyond the available credits: %v", err)
	}
	_, err = s.Release(t.Context(), h, "")
	noErr(t, err, "Release")

	j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(5), ListName: "leads", WebhookURL: "https://hooks.example/x"})
	if err != nil {
		t.Fatal(err)
	}
	if !storage.ValidUUID(j.ID) || j.Status != storage.JobQueued || j.Total != 5 || j.Reserved != 5 || j.Processed != 0 || j.CreatedAt.IsZero() || !j.StartedAt.IsZero() {
		t.Fatalf("new job %+v", j)
	}
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 5 {
		t.Errorf("balance after reserving 5 of 10: %d, %v", cr.Balance, err)
	}
	// The id is taken now.
	_, err = s.CreateJob(t.Context(), storage.JobSpec{ID: j.ID, Account: other, Addresses: Addresses(1)})
	wantErr(t, err, storage.ErrExists)
	if _, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: []string{"a@x", "b@x", "a@x"}}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("duplicate addresses: %v", err)
	}
	if _, err := s.CreateJob(t.Context(), storage.JobSpec{ID: "not-a-uuid", Account: acct, Addresses: Addresses(1)}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("bad id: %v", err)
	}

	// Only the owner sees it.
	if _, err := s.AccountJob(t.Context(), acct, j.ID); err != nil {
		t.Error(err)
	}
	_, err = s.AccountJob(t.Context(), other, j.ID)
	wantErr(t, err, storage.ErrNotFound)
	_, err = s.Job(t.Context(), "0190e6b2-2f5e-4c3a-9d5b-0a1b2c3d4e5f")
	wantErr(t, err, storage.ErrNotFound)

	// Results need a running job.
	_, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{{Index: 0, Result: result("user0@example.com", "valid")}})
	wantErr(t, err, storage.ErrJobState)
	c.Advance(time.Second)
	j, err = s.StartJob(t.Context(), j.ID)
	if err != nil || j.Status != storage.JobRunning || !j.StartedAt.Equal(c.Now().Truncate(time.Millisecond)) {
		t.Fatalf("StartJob: %+v, %v", j, err)
	}
	if again, err := s.StartJob(t.Context(), j.ID); err != nil || !again.StartedAt.Equal(j.StartedAt) {
		t.Errorf("StartJob of a running job: %+v, %v", again, err)
	}

	j, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{
		{Index: 3, Result: because(result("user3@example.com", "unknown"), "timeout")},
		{Index: 0, Result: because(result("user0@example.com", "valid"), "ok")},
		{Index: 0, Result: because(result("user0@example.com", "invalid"), "mailbox_not_found")}, // the same index again
	})
	if err != nil || j.Processed != 2 || j.Count("valid") != 1 || j.Count("unknown") != 1 ||
		!maps.Equal(j.Reasons, map[string]int{"valid/ok": 1, "unknown/timeout": 1}) {
		t.Fatalf("PutJobResults: %+v, %v", j, err)
	}
	// A redone address keeps its first result and is not counted twice.
	j, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{{Index: 3, Result: result("user3@example.com", "valid")}})
	if err != nil || j.Processed != 2 || j.Count("unknown") != 1 {
		t.Fatalf("redone address: %+v, %v", j, err)
	}
	if _, err := s.PutJobResults(t.Context(), j.ID, []storage.JobResult{{Index: 5, Result: result("x@example.com", "valid")}}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("index out of range: %v", err)
	}
	var pending []int
	err = s.PendingAddresses(t.Context(), j.ID, func(i int, addr string) error {
		if addr != fmt.Sprintf("user%d@example.com", i) {
			t.Errorf("address %d is %q", i, addr)
		}
		pending = append(pending, i)
		return nil
	})
	noErr(t, err, "PendingAddresses")
	if fmt.Sprint(pending) != "[1 2 4]" {
		t.Errorf("pending %v", pending)
	}
	// Not completed before every address has a result.
	_, err = s.FinishJob(t.Context(), j.ID, storage.JobFinish{Status: storage.JobCompleted})
	wantErr(t, err, storage.ErrJobState)

	// A restart: the job is still running with its progress.
	s = b.Reopen(t, s)
	if active, err := s.ListJobs(t.Context(), storage.JobRunning); err != nil || len(active) != 1 || active[0].ID != j.ID || active[0].Processed != 2 {
		t.Fatalf("ListJobs(running) after reopen: %+v, %v", active, err)
	}
	if q, err := s.ListJobs(t.Context(), storage.JobQueued); err != nil || len(q) != 0 {
		t.Errorf("queued: %+v, %v", q, err)
	}
	j, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{
		{Index: 1, Result: because(result("user1@example.com", "valid"), "ok")},
		{Index: 2, Result: because(result("user2@example.com", "risky"), "catch_all")},
		{Index: 4, Result: result("user4@example.com", "valid")}, // no reason: in Counts only
	})
	wantReasons := map[string]int{"valid/ok": 2, "unknown/timeout": 1, "risky/catch_all": 1}
	if err != nil || j.Processed != 5 || !maps.Equal(j.Reasons, wantReasons) {
		t.Fatalf("after reopen: %+v, %v", j, err)
	}
	// The breakdown is stored with the job.
	s = b.Reopen(t, s)
	if got, err := s.Job(t.Context(), j.ID); err != nil || !maps.Equal(got.Reasons, wantReasons) || got.Count("valid") != 3 {
		t.Fatalf("reasons after a second reopen: %+v, %v; want %v", got, err, wantReasons)
	}
	var seen []int
	err = s.JobResults(t.Context(), j.ID, func(r storage.Result) error {
		if r.JobID != j.ID || r.Kind != storage.KindBatch || r.Account != acct || r.Email != fmt.Sprintf("user%d@example.com", r.JobIndex) {
			t.Errorf("result %+v", r)
		}
		seen = append(seen, r.JobIndex)
		return nil
	})
	if err != nil || fmt.Sprint(seen) != "[0 1 2 3 4]" {
		t.Errorf("results in order %v, %v", seen, err)
	}
	p, err := s.ListHistory(t.Context(), acct, storage.HistoryBatch, "", 10)
	if err != nil || len(p.Rows) != 5 || p.Rows[0].JobID != j.ID {
		t.Errorf("batch history: %+v, %v", p.Rows, err)
	}

	// Completing: every credit used, nothing refunded, the event in the
	// same batch.
	c.Advance(time.Minute)
	j, err = s.FinishJob(t.Context(), j.ID, storage.JobFinish{Status: storage.JobCompleted, Event: func(j storage.Job) (*storage.Event, error) {
		body, _ := json.Marshal(map[string]any{
			"event": "batch.completed", "job_id": j.ID, "processed": j.Processed,
			"successful": j.Processed - j.Count("unknown"), "completed_at": j.CompletedAt,
		})
		return &storage.Event{Account: j.Account, Type: "batch.completed", URL: j.WebhookURL, Body: body}, nil
	}})
	if err != nil || j.Status != storage.JobCompleted || j.Used != 5 || j.Refunded != 0 || !j.CompletedAt.Equal(c.Now()) {
		t.Fatalf("FinishJob: %+v, %v", j, err)
	}
	evs, err := s.DueEvents(t.Context(), 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "batch.completed" || evs[0].URL != "https://hooks.example/x" {
		t.Fatalf("outbox: %+v, %v", evs, err)
	}
	var body map[string]any
	if err := json.Unmarshal(evs[0].Body, &body); err != nil || body["successful"] != 4.0 || body["processed"] != 5.0 {
		t.Errorf("event body %s", evs[0].Body)
	}
	_, err = s.FinishJob(t.Context(), j.ID, storage.JobFinish{Status: storage.JobFailed})
	wantErr(t, err, storage.ErrJobState)
	_, err = s.PutJobResults(t.Context(), j.ID, []storage.JobResult{{Index: 0, Result: result("user0@example.com", "valid")}})
	wantErr(t, err, storage.ErrJobState)
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 5 {
		t.Errorf("balance %d, %v", cr.Balance, err)
	}
	es := CheckLedger(t, s, acct)
	last := es[len(es)-1]
	if last.Kind != storage.EntryUse || last.Amount != 5 || last.Ref != j.ID {
		t.Errorf("last entry %+v", last)
	}
	if done, err := s.ListJobs(t.Context(), storage.JobCompleted); err != nil || len(done) != 1 {
		t.Errorf("completed jobs: %d, %v", len(done), err)
	}
	if js, err := s.ListAccountJobs(t.Context(), acct, 0); err != nil || len(js) != 1 || js[0].ID != j.ID {
		t.Errorf("account jobs: %+v, %v", js, err)
	}
}

// A job that fails midway refunds what it did not process, in the batch
// that ends it; a job failed while queued refunds everything.
func testJobFailRefund(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 100)
	j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(40)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.StartJob(t.Context(), j.ID)
	noErr(t, err, "StartJob")
	var rs []storage.JobResult
	for i := range 15 {
		rs = append(rs, storage.JobResult{Index: i, Result: result(fmt.Sprintf("user%d@example.com", i), "valid")})
	}
	_, err = s.PutJobResults(t.Context(), j.ID, rs)
	noErr(t, err, "PutJobResults")
	j, err = s.FinishJob(t.Context(), j.ID, storage.JobFinish{Status: storage.JobFailed, Error: "retries exhausted", Event: func(j storage.Job) (*storage.Event, error) {
		return &storage.Event{Account: j.Account, Type: "batch.failed", URL: "https://hooks.example/f", Body: []byte(`{}`)}, nil
	}})
	if err != nil || j.Used != 15 || j.Refunded != 25 || j.Error != "retries exhausted" {
		t.Fatalf("FinishJob(failed): %+v, %v", j, err)
	}
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 85 {
		t.Errorf("balance %d, %v; want 100 − 15", cr.Balance, err)
	}

	q, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(30)})
	noErr(t, err, "CreateJob")
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 55 {
		t.Errorf("balance %d after reserving 30, %v", cr.Balance, err)
	}
	if q, err = s.FinishJob(t.Context(), q.ID, storage.JobFinish{Status: storage.JobFailed}); err != nil || q.Refunded != 30 {
		t.Fatalf("failing a queued job: %+v, %v", q, err)
	}
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 85 {
		t.Errorf("balance %d, %v", cr.Balance, err)
	}
	es := CheckLedger(t, s, acct)
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, fmt.Sprintf("%s:%d", e.Kind, e.Delta))
	}
	if got := fmt.Sprint(kinds); got != "[add:100 reserve:-40 use:0 refund:25 reserve:-30 use:0 refund:30]" {
		t.Errorf("ledger %s", got)
	}
	// A failing event builder ends nothing.
	k, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(1)})
	noErr(t, err, "CreateJob")
	if _, err := s.FinishJob(t.Context(), k.ID, storage.JobFinish{Status: storage.JobFailed, Event: func(storage.Job) (*storage.Event, error) { return nil, errors.New("boom") }}); err == nil {
		t.Fatal("event error ignored")
	}
	if k, err = s.Job(t.Context(), k.ID); err != nil || k.Status != storage.JobQueued {
		t.Errorf("job %s after a failed finish, %v", k.Status, err)
	}
	// An event for an unknown account fails the batch, not half of it.
	if _, err := s.FinishJob(t.Context(), k.ID, storage.JobFinish{Status: storage.JobFailed, Event: func(storage.Job) (*storage.Event, error) {
		return &storage.Event{Account: "acct_nope", Type: "x", URL: "u"}, nil
	}}); err == nil {
		t.Fatal("event of an unknown account accepted")
	}
	if k, err = s.Job(t.Context(), k.ID); err != nil || k.Status != storage.JobQueued {
		t.Errorf("job %s after a failed finish, %v", k.Status, err)
	}
	CheckLedger(t, s, acct)
}

// The 202 response is recorded in the job's batch.
func testJobIdempotency(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 10)
	ref := storage.IdemRef{Account: acct, Endpoint: "batch", Key: "batch-key-1"}
	if out, _, err := s.BeginIdem(t.Context(), ref, []byte("h")); err != nil || out != storage.IdemNew {
		t.Fatalf("BeginIdem: %v, %v", out, err)
	}
	j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(2), Idem: &ref, Respond: func(j storage.Job) (storage.IdemResponse, error) {
		return storage.IdemResponse{Status: 202, Body: fmt.Appendf(nil, `{"job_id":%q,"credits_reserved":%d}`, j.ID, j.Reserved)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	out, rec, err := s.BeginIdem(t.Context(), ref, []byte("h"))
	if err != nil || out != storage.IdemReplay || string(rec.Response.Body) != fmt.Sprintf(`{"job_id":%q,"credits_reserved":2}`, j.ID) {
		t.Fatalf("replay: %v %q %v", out, rec.Response.Body, err)
	}

	// A key BeginIdem could not record (JobSpec.IdemHash): the job's
	// write records it, completed, so the retry replays the 202; another
	// body under it is a mismatch.
	lost := storage.IdemRef{Account: acct, Endpoint: "batch", Key: "batch-key-lost"}
	j2, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(3), Idem: &lost, IdemHash: []byte("h2"),
		Respond: func(j storage.Job) (storage.IdemResponse, error) {
			return storage.IdemResponse{Status: 202, Body: fmt.Appendf(nil, `{"job_id":%q}`, j.ID)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if out, rec, err := s.BeginIdem(t.Context(), lost, []byte("h2")); err != nil || out != storage.IdemReplay || string(rec.Response.Body) != fmt.Sprintf(`{"job_id":%q}`, j2.ID) {
		t.Fatalf("the retry of a job whose key was lost: %v %q %v", out, rec.Response.Body, err)
	}
	if out, _, err := s.BeginIdem(t.Context(), lost, []byte("h3")); err != nil || out != storage.IdemMismatch {
		t.Fatalf("another body under the lost key: %v %v", out, err)
	}
}

// Concurrent jobs and validations on one account never overdraw it.
func testJobsConcurrentReservations(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	reserved := int64(0)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%2 == 0 {
				j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(9)})
				if err == nil {
					mu.Lock()
					reserved += j.Reserved
					mu.Unlock()
				} else if !errors.Is(err, storage.ErrInsufficientCredits) {
					t.Error(err)
				}
				return
			}
			h, err := s.Hold(t.Context(), acct, 1, "")
			if errors.Is(err, storage.ErrInsufficientCredits) {
				return
			}
			if err == nil {
				_, err = s.Charge(t.Context(), h, storage.ChargeRequest{Result: result("x@example.com", "valid")})
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			reserved++
			mu.Unlock()
		}()
	}
	wg.Wait()
	cr, err := s.Credits(t.Context(), acct)
	if err != nil || cr.Balance < 0 || cr.Balance != 100-reserved {
		t.Errorf("balance %d (%v), spent %d", cr.Balance, err, reserved)
	}
	CheckLedger(t, s, acct)
}

// Batch results are history rows of kind batch beside the single ones,
// served from cache and by id like them.
func testBatchHistoryAndCache(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 1000)
	j, err := s.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: Addresses(400)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	t0 := c.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			h, err := s.Hold(t.Context(), acct, 1, "")
			if err == nil {
				_, err = s.Charge(t.Context(), h, storage.ChargeRequest{Result: result(fmt.Sprintf("s%d@example.com", i), "valid")})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Batch results in chunks, in the same millisecond, some probed
	// earlier (late ones).
	for i := 0; i < 400; i += 37 {
		var rs []storage.JobResult
		for k := i; k < min(400, i+37); k++ {
			r := storage.Result{Email: fmt.Sprintf("user%d@example.com", k), Status: "valid", Score: 80, LatencyMs: -1}
			if k%5 == 0 {
				r.ProbedAt = t0.Add(-time.Duration(k%3+1) * time.Millisecond)
			}
			rs = append(rs, storage.JobResult{Index: k, Result: r})
		}
		if j, err = s.PutJobResults(t.Context(), j.ID, rs); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if j.Processed != 400 {
		t.Fatalf("processed %d", j.Processed)
	}
	want := map[string]int{storage.HistoryAll: 600, storage.HistorySingle: 200, storage.HistoryBatch: 400}
	for _, kind := range []string{storage.HistoryAll, storage.HistorySingle, storage.HistoryBatch} {
		for _, limit := range []int{7, 200} {
			rows := WalkHistory(t, s, acct, kind, limit)
			if len(rows) != want[kind] {
				t.Errorf("kind %s, limit %d: %d rows, want %d", kind, limit, len(rows), want[kind])
			}
			CheckNewestFirst(t, rows)
			for _, r := range rows {
				if kind != storage.HistoryAll && r.Kind != kind {
					t.Fatalf("kind %s: a %s row", kind, r.Kind)
				}
				if r.Kind == storage.KindBatch && (r.JobID != j.ID || r.LatencyMs != -1) {
					t.Fatalf("batch row %+v", r)
				}
			}
		}
	}
	hit, ok, err := s.LookupCache(t.Context(), acct, "USER1@example.com", time.Hour)
	if err != nil || !ok || hit.Kind != storage.KindBatch || hit.JobID != j.ID || hit.JobIndex != 1 {
		t.Fatalf("batch result from cache: %+v %v %v", hit, ok, err)
	}
	if got, err := s.GetResult(t.Context(), hit.ID); err != nil || got.JobIndex != 1 || got.Email != "user1@example.com" || got.HistoryID == 0 {
		t.Errorf("GetResult of a batch result: %+v, %v", got, err)
	}
	days, err := s.DailyCounts(t.Context(), acct, 1)
	if err != nil || days[0].Counts["valid"] != 600 {
		t.Errorf("DailyCounts: %+v, %v", days, err)
	}
}

func testOutbox(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	if _, ok, err := s.NextDue(t.Context()); ok || err != nil {
		t.Fatalf("empty outbox: %v, %v", ok, err)
	}
	t0 := c.Now().Truncate(time.Millisecond)
	e1, err := s.Enqueue(t.Context(), storage.Event{Account: acct, Type: "reputation.warning", URL: "https://h.example/1", Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e1.ID == "" || !e1.NextAttempt.Equal(t0) || !e1.CreatedAt.Equal(t0) {
		t.Fatalf("enqueued %+v", e1)
	}
	e2, err := s.Enqueue(t.Context(), storage.Event{Account: acct, Type: "batch.completed", URL: "https://h.example/2", NextAttempt: t0.Add(time.Minute)})
	noErr(t, err, "Enqueue")
	if _, err := s.Enqueue(t.Context(), storage.Event{Account: acct, Type: "x"}); err == nil {
		t.Error("an event without a URL")
	}

	due, err := s.DueEvents(t.Context(), 10)
	if err != nil || len(due) != 1 || due[0].ID != e1.ID || string(due[0].Body) != `{"a":1}` {
		t.Fatalf("due now: %+v, %v", due, err)
	}
	if at, ok, err := s.NextDue(t.Context()); err != nil || !ok || !at.Equal(t0) {
		t.Errorf("NextDue %v %v %v", at, ok, err)
	}
	// The first attempt fails: due again in 30 s.
	r1, err := s.Reschedule(t.Context(), due[0], t0.Add(30*time.Second), 503, "service unavailable")
	if err != nil || r1.Attempts != 1 || r1.LastStatus != 503 {
		t.Fatalf("Reschedule: %+v, %v", r1, err)
	}
	// The stale copy can no longer be acted on.
	wantErr(t, s.MarkDelivered(t.Context(), due[0]), storage.ErrNotFound)
	if due, err := s.DueEvents(t.Context(), 10); err != nil || len(due) != 0 {
		t.Errorf("due after reschedule: %+v, %v", due, err)
	}
	if at, ok, err := s.NextDue(t.Context()); err != nil || !ok || !at.Equal(t0.Add(30*time.Second)) {
		t.Errorf("NextDue after reschedule %v %v %v", at, ok, err)
	}
	c.Advance(time.Minute)
	due, err = s.DueEvents(t.Context(), 10)
	if err != nil || len(due) != 2 || due[0].ID != r1.ID || due[1].ID != e2.ID {
		t.Fatalf("due a minute later: %+v", due)
	}
	if err := s.MarkDelivered(t.Context(), due[1]); err != nil {
		t.Fatal(err)
	}
	dead, err := s.DeadLetter(t.Context(), due[0], 0, "timeout")
	if err != nil || dead.Attempts != 2 || dead.DeadAt.IsZero() {
		t.Fatalf("DeadLetter: %+v, %v", dead, err)
	}
	if due, err := s.DueEvents(t.Context(), 0); err != nil || len(due) != 0 {
		t.Errorf("outbox not empty: %+v, %v", due, err)
	}
	if _, ok, err := s.NextDue(t.Context()); err != nil || ok {
		t.Errorf("NextDue of an empty outbox: %v, %v", ok, err)
	}

	s = b.Reopen(t, s)
	dl, err := s.DeadLetters(t.Context(), acct, 0)
	if err != nil || len(dl) != 1 || dl[0].ID != e1.ID || dl[0].LastError != "timeout" {
		t.Fatalf("DeadLetters: %+v, %v", dl, err)
	}
	if other, err := s.DeadLetters(t.Context(), "acct_other", 0); err != nil || len(other) != 0 {
		t.Errorf("another account's dead letters: %+v, %v", other, err)
	}
	back, err := s.Redrive(t.Context(), "", e1.ID)
	if err != nil || back.Attempts != 0 || !back.DeadAt.IsZero() {
		t.Fatalf("Redrive: %+v, %v", back, err)
	}
	if due, err := s.DueEvents(t.Context(), 10); err != nil || len(due) != 1 || due[0].ID != e1.ID {
		t.Errorf("due after redrive: %+v, %v", due, err)
	}
	if dl, err := s.DeadLetters(t.Context(), "", 0); err != nil || len(dl) != 0 {
		t.Errorf("dead letters after redrive: %+v, %v", dl, err)
	}
	// The latest payload of the account, for the dashboard's test event.
	last, err := s.LastEvent(t.Context(), acct)
	if err != nil || last.ID != e2.ID {
		t.Errorf("LastEvent: %+v, %v", last, err)
	}
}

func testOutboxEventsAndResend(t *testing.T, be backend) {
	c := NewClock()
	s := be.Open(t, c)
	a, b := account(t, s, 0), account(t, s, 1)
	t0 := c.Now().Truncate(time.Millisecond)
	enqueue := func(ev storage.Event) storage.Event {
		t.Helper()
		ev, err := s.Enqueue(t.Context(), ev)
		noErr(t, err, "Enqueue")
		return ev
	}
	e1 := enqueue(storage.Event{Account: a, Type: "batch.completed", URL: "https://h.example/1", NextAttempt: t0.Add(time.Hour)})
	e2 := enqueue(storage.Event{Account: b, Type: "batch.failed", URL: "https://h.example/2", NextAttempt: t0.Add(time.Minute)})
	e3 := enqueue(storage.Event{Account: a, Type: "batch.completed", URL: "https://h.example/3"})

	all, err := s.OutboxEvents(t.Context(), "", 0)
	if err != nil || len(all) != 3 || all[0].ID != e3.ID || all[1].ID != e2.ID || all[2].ID != e1.ID {
		t.Fatalf("OutboxEvents: %+v, %v", all, err)
	}
	if mine, err := s.OutboxEvents(t.Context(), a, 0); err != nil || len(mine) != 2 || mine[0].ID != e3.ID || mine[1].ID != e1.ID {
		t.Fatalf("OutboxEvents of %s: %+v, %v", a, mine, err)
	}
	if one, err := s.OutboxEvents(t.Context(), "", 1); err != nil || len(one) != 1 {
		t.Fatalf("limit 1: %+v, %v", one, err)
	}

	// A failed attempt, then the operator resends it: due now, attempts kept.
	r1, err := s.Reschedule(t.Context(), e1, t0.Add(2*time.Hour), 500, "boom")
	if err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueEvents(t.Context(), 0); err != nil || len(due) != 1 || due[0].ID != e3.ID {
		t.Fatalf("due before resend: %+v, %v", due, err)
	}
	// Another account cannot resend it.
	_, err = s.ResendEvent(t.Context(), b, r1.ID)
	wantErr(t, err, storage.ErrNotFound)
	re, err := s.ResendEvent(t.Context(), a, r1.ID)
	if err != nil || re.Attempts != 1 || !re.NextAttempt.Equal(t0) {
		t.Fatalf("ResendEvent (outbox): %+v, %v", re, err)
	}
	if due, err := s.DueEvents(t.Context(), 0); err != nil || len(due) != 2 {
		t.Fatalf("due after resend: %+v, %v", due, err)
	}
	if all, err := s.OutboxEvents(t.Context(), "", 0); err != nil || len(all) != 3 {
		t.Fatalf("resend duplicated or lost an event: %+v, %v", all, err)
	}

	// A dead letter comes back with its attempts reset.
	dead, err := s.DeadLetter(t.Context(), e2, 0, "refused")
	noErr(t, err, "DeadLetter")
	_, err = s.ResendEvent(t.Context(), a, dead.ID)
	wantErr(t, err, storage.ErrNotFound)
	back, err := s.ResendEvent(t.Context(), b, dead.ID)
	if err != nil || back.Attempts != 0 || !back.DeadAt.IsZero() {
		t.Fatalf("ResendEvent (dead letter): %+v, %v", back, err)
	}
	if dl, err := s.DeadLetters(t.Context(), "", 0); err != nil || len(dl) != 0 {
		t.Errorf("dead letters after resend: %+v, %v", dl, err)
	}

	// A delivered event is gone.
	if err := s.MarkDelivered(t.Context(), e3); err != nil {
		t.Fatal(err)
	}
	_, err = s.ResendEvent(t.Context(), "", e3.ID)
	wantErr(t, err, storage.ErrNotFound)
}
