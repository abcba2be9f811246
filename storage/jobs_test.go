package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}

func TestJobLifecycle(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10)
	other := db.account(t, 10)

	// Not enough credits: the error says how many are missing.
	_, err := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(12)})
	var ice *InsufficientCreditsError
	if !errors.As(err, &ice) || ice.Current != 10 || ice.Needed != 12 || ice.Shortfall() != 2 {
		t.Fatalf("CreateJob beyond the balance: %v", err)
	}
	// Credits held by a validation in flight are not available.
	h, _ := db.Hold(acct, 3, "")
	_, err = db.CreateJob(JobSpec{Account: acct, Addresses: addresses(8)})
	if !errors.As(err, &ice) || ice.Held != 3 || ice.Shortfall() != 1 {
		t.Fatalf("CreateJob beyond the available credits: %v", err)
	}
	db.Release(h, "")

	j, err := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(5), ListName: "leads", WebhookURL: "https://hooks.example/x"})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidUUID(j.ID) || j.Status != JobQueued || j.Total != 5 || j.Reserved != 5 || j.Processed != 0 || j.CreatedAt.IsZero() || !j.StartedAt.IsZero() {
		t.Fatalf("new job %+v", j)
	}
	if bal, _ := db.Balance(acct); bal != 5 {
		t.Errorf("balance after reserving 5 of 10: %d", bal)
	}
	// The id is taken now.
	_, err = db.CreateJob(JobSpec{ID: j.ID, Account: other, Addresses: addresses(1)})
	wantErr(t, err, ErrExists)
	if _, err := db.CreateJob(JobSpec{Account: acct, Addresses: []string{"a@x", "b@x", "a@x"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate addresses: %v", err)
	}
	if _, err := db.CreateJob(JobSpec{ID: "not-a-uuid", Account: acct, Addresses: addresses(1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad id: %v", err)
	}

	// Only the owner sees it.
	if _, err := db.AccountJob(acct, j.ID); err != nil {
		t.Error(err)
	}
	_, err = db.AccountJob(other, j.ID)
	wantErr(t, err, ErrNotFound)
	_, err = db.Job("0190e6b2-2f5e-4c3a-9d5b-0a1b2c3d4e5f")
	wantErr(t, err, ErrNotFound)

	// Results need a running job.
	_, err = db.PutJobResults(j.ID, []JobResult{{Index: 0, Result: result("user0@example.com", "valid")}})
	wantErr(t, err, ErrJobState)
	db.clock.Advance(time.Second)
	j, err = db.StartJob(j.ID)
	if err != nil || j.Status != JobRunning || !j.StartedAt.Equal(db.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("StartJob: %+v, %v", j, err)
	}
	if again, err := db.StartJob(j.ID); err != nil || !again.StartedAt.Equal(j.StartedAt) {
		t.Errorf("StartJob of a running job: %+v, %v", again, err)
	}

	j, err = db.PutJobResults(j.ID, []JobResult{
		{Index: 3, Result: result("user3@example.com", "unknown")},
		{Index: 0, Result: result("user0@example.com", "valid")},
		{Index: 0, Result: result("user0@example.com", "invalid")}, // the same index again
	})
	if err != nil || j.Processed != 2 || j.Count("valid") != 1 || j.Count("unknown") != 1 {
		t.Fatalf("PutJobResults: %+v, %v", j, err)
	}
	// A redone address keeps its first result and is not counted twice.
	j, err = db.PutJobResults(j.ID, []JobResult{{Index: 3, Result: result("user3@example.com", "valid")}})
	if err != nil || j.Processed != 2 || j.Count("unknown") != 1 {
		t.Fatalf("redone address: %+v, %v", j, err)
	}
	if _, err := db.PutJobResults(j.ID, []JobResult{{Index: 5, Result: result("x@example.com", "valid")}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("index out of range: %v", err)
	}
	var pending []int
	db.PendingAddresses(j.ID, func(i int, addr string) error {
		if addr != fmt.Sprintf("user%d@example.com", i) {
			t.Errorf("address %d is %q", i, addr)
		}
		pending = append(pending, i)
		return nil
	})
	if fmt.Sprint(pending) != "[1 2 4]" {
		t.Errorf("pending %v", pending)
	}
	// Not completed before every address has a result.
	_, err = db.FinishJob(j.ID, JobFinish{Status: JobCompleted})
	wantErr(t, err, ErrJobState)

	// A restart: the job is still running with its progress.
	db.reopen(t)
	if active, err := db.ListJobs(JobRunning); err != nil || len(active) != 1 || active[0].ID != j.ID || active[0].Processed != 2 {
		t.Fatalf("ListJobs(running) after reopen: %+v, %v", active, err)
	}
	if q, _ := db.ListJobs(JobQueued); len(q) != 0 {
		t.Errorf("queued: %+v", q)
	}
	j, err = db.PutJobResults(j.ID, []JobResult{
		{Index: 1, Result: result("user1@example.com", "valid")},
		{Index: 2, Result: result("user2@example.com", "risky")},
		{Index: 4, Result: result("user4@example.com", "valid")},
	})
	if err != nil || j.Processed != 5 {
		t.Fatalf("after reopen: %+v, %v", j, err)
	}
	var seen []int
	db.JobResults(j.ID, func(r Result) error {
		if r.JobID != j.ID || r.Kind != KindBatch || r.Account != acct || r.Email != fmt.Sprintf("user%d@example.com", r.JobIndex) {
			t.Errorf("result %+v", r)
		}
		seen = append(seen, r.JobIndex)
		return nil
	})
	if fmt.Sprint(seen) != "[0 1 2 3 4]" {
		t.Errorf("results in order %v", seen)
	}
	p, _ := db.ListHistory(acct, HistoryBatch, "", 10)
	if len(p.Rows) != 5 || p.Rows[0].JobID != j.ID {
		t.Errorf("batch history: %+v", p.Rows)
	}

	// Completing: every credit used, nothing refunded, the event in the
	// same batch.
	db.clock.Advance(time.Minute)
	j, err = db.FinishJob(j.ID, JobFinish{Status: JobCompleted, Event: func(j Job) (*Event, error) {
		body, _ := json.Marshal(map[string]any{
			"event": "batch.completed", "job_id": j.ID, "processed": j.Processed,
			"successful": j.Processed - j.Count("unknown"), "completed_at": j.CompletedAt,
		})
		return &Event{Account: j.Account, Type: "batch.completed", URL: j.WebhookURL, Body: body}, nil
	}})
	if err != nil || j.Status != JobCompleted || j.Used != 5 || j.Refunded != 0 || !j.CompletedAt.Equal(db.clock.Now()) {
		t.Fatalf("FinishJob: %+v, %v", j, err)
	}
	evs, _ := db.DueEvents(10)
	if len(evs) != 1 || evs[0].Type != "batch.completed" || evs[0].URL != "https://hooks.example/x" {
		t.Fatalf("outbox: %+v", evs)
	}
	var body map[string]any
	json.Unmarshal(evs[0].Body, &body)
	if body["successful"] != 4.0 || body["processed"] != 5.0 {
		t.Errorf("event body %s", evs[0].Body)
	}
	_, err = db.FinishJob(j.ID, JobFinish{Status: JobFailed})
	wantErr(t, err, ErrJobState)
	_, err = db.PutJobResults(j.ID, []JobResult{{Index: 0, Result: result("user0@example.com", "valid")}})
	wantErr(t, err, ErrJobState)
	if bal, _ := db.Balance(acct); bal != 5 {
		t.Errorf("balance %d", bal)
	}
	es := checkLedger(t, db.DB, acct)
	last := es[len(es)-1]
	if last.Kind != EntryUse || last.Amount != 5 || last.Ref != j.ID {
		t.Errorf("last entry %+v", last)
	}
	if done, _ := db.ListJobs(JobCompleted); len(done) != 1 {
		t.Errorf("completed jobs: %d", len(done))
	}
	if js, _ := db.ListAccountJobs(acct, 0); len(js) != 1 || js[0].ID != j.ID {
		t.Errorf("account jobs: %+v", js)
	}
}

// A job that fails midway refunds what it did not process, in the batch
// that ends it; a job failed while queued refunds everything.
func TestJobFailRefund(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 100)
	j, err := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(40)})
	if err != nil {
		t.Fatal(err)
	}
	db.StartJob(j.ID)
	var rs []JobResult
	for i := range 15 {
		rs = append(rs, JobResult{Index: i, Result: result(fmt.Sprintf("user%d@example.com", i), "valid")})
	}
	db.PutJobResults(j.ID, rs)
	j, err = db.FinishJob(j.ID, JobFinish{Status: JobFailed, Error: "retries exhausted", Event: func(j Job) (*Event, error) {
		return &Event{Account: j.Account, Type: "batch.failed", URL: "https://hooks.example/f", Body: []byte(`{}`)}, nil
	}})
	if err != nil || j.Used != 15 || j.Refunded != 25 || j.Error != "retries exhausted" {
		t.Fatalf("FinishJob(failed): %+v, %v", j, err)
	}
	if bal, _ := db.Balance(acct); bal != 85 {
		t.Errorf("balance %d, want 100 − 15", bal)
	}

	q, _ := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(30)})
	if bal, _ := db.Balance(acct); bal != 55 {
		t.Errorf("balance %d after reserving 30", bal)
	}
	if q, err = db.FinishJob(q.ID, JobFinish{Status: JobFailed}); err != nil || q.Refunded != 30 {
		t.Fatalf("failing a queued job: %+v, %v", q, err)
	}
	if bal, _ := db.Balance(acct); bal != 85 {
		t.Errorf("balance %d", bal)
	}
	es := checkLedger(t, db.DB, acct)
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, fmt.Sprintf("%s:%d", e.Kind, e.Delta))
	}
	if got := fmt.Sprint(kinds); got != "[add:100 reserve:-40 use:0 refund:25 reserve:-30 use:0 refund:30]" {
		t.Errorf("ledger %s", got)
	}
	// A failing event builder ends nothing.
	k, _ := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(1)})
	if _, err := db.FinishJob(k.ID, JobFinish{Status: JobFailed, Event: func(Job) (*Event, error) { return nil, errors.New("boom") }}); err == nil {
		t.Fatal("event error ignored")
	}
	if k, _ = db.Job(k.ID); k.Status != JobQueued {
		t.Errorf("job %s after a failed finish", k.Status)
	}
	// An event for an unknown account fails the batch, not half of it.
	if _, err := db.FinishJob(k.ID, JobFinish{Status: JobFailed, Event: func(Job) (*Event, error) {
		return &Event{Account: "acct_nope", Type: "x", URL: "u"}, nil
	}}); err == nil {
		t.Fatal("event of an unknown account accepted")
	}
	if k, _ = db.Job(k.ID); k.Status != JobQueued {
		t.Errorf("job %s after a failed finish", k.Status)
	}
	checkLedger(t, db.DB, acct)
}

// The 202 response is recorded in the job's batch.
func TestJobIdempotency(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10)
	ref := IdemRef{Account: acct, Endpoint: "batch", Key: "batch-key-1"}
	db.BeginIdem(ref, []byte("h"))
	j, err := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(2), Idem: &ref, Respond: func(j Job) (IdemResponse, error) {
		return IdemResponse{Status: 202, Body: fmt.Appendf(nil, `{"job_id":%q,"credits_reserved":%d}`, j.ID, j.Reserved)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	out, rec, err := db.BeginIdem(ref, []byte("h"))
	if err != nil || out != IdemReplay || string(rec.Response.Body) != fmt.Sprintf(`{"job_id":%q,"credits_reserved":2}`, j.ID) {
		t.Fatalf("replay: %v %q %v", out, rec.Response.Body, err)
	}
}

// Concurrent jobs and validations on one account never overdraw it.
func TestJobsConcurrentReservations(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	reserved := int64(0)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%2 == 0 {
				j, err := db.CreateJob(JobSpec{Account: acct, Addresses: addresses(9)})
				if err == nil {
					mu.Lock()
					reserved += j.Reserved
					mu.Unlock()
				} else if !errors.Is(err, ErrInsufficientCredits) {
					t.Error(err)
				}
				return
			}
			if h, err := db.Hold(acct, 1, ""); err == nil {
				db.Charge(h, ChargeRequest{Result: result("x@example.com", "valid")})
				mu.Lock()
				reserved++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	bal, _ := db.Balance(acct)
	if bal < 0 || bal != 100-reserved {
		t.Errorf("balance %d, spent %d", bal, reserved)
	}
	checkLedger(t, db.DB, acct)
}
