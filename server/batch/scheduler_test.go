package batch

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
)

// TestJobCompletesAndSettles runs a job with duplicates and mixed case to
// the end: one credit per unique address used, the rest of nothing
// refunded, a result and a history row of kind batch per address, the
// completion event in the outbox in the same write.
func TestJobCompletesAndSettles(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	f := newFake()
	f.answer = func(e string, _ int) *probe.Result {
		if strings.HasPrefix(e, "bad") {
			r := valid(e)
			r.Status, r.Reason, r.Score = probe.StatusInvalid, probe.ReasonMailboxNotFound, 5
			return r
		}
		return nil
	}
	s := startService(t, db, f, nil)
	upload := []string{"ann@a.test", "bad@a.test", "bob@b.test", "cy@c.test"}
	j := submit(t, s, acct, upload, "http://127.0.0.1:9/hook")
	if j.Total != 4 || j.Reserved != 4 {
		t.Fatalf("job of %d unique addresses: total %d reserved %d", 4, j.Total, j.Reserved)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 96 {
		t.Fatalf("balance after the reservation %d, want 96", cr.Balance)
	}
	j = waitJob(t, db, j.ID, 10*time.Second)
	if j.Status != storage.JobCompleted || j.Processed != 4 || j.Used != 4 || j.Refunded != 0 {
		t.Fatalf("ended %+v", j)
	}
	if j.StartedAt.IsZero() || j.CompletedAt.Before(j.StartedAt) {
		t.Errorf("times: started %v completed %v", j.StartedAt, j.CompletedAt)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 96 {
		t.Errorf("balance after completion %d, want 96 (4 used)", cr.Balance)
	}
	rs := results(t, db, j.ID)
	if len(rs) != 4 || rs["ann@a.test"].Status != "valid" || rs["bad@a.test"].Status != "invalid" {
		t.Fatalf("results %+v", rs)
	}
	for _, e := range []string{"ann@a.test", "bob@b.test"} {
		if n := f.probed(e); n != 1 {
			t.Errorf("%s probed %d times, want once (duplicates are one address)", e, n)
		}
	}
	page, err := db.ListHistory(t.Context(), acct, storage.HistoryBatch, "", 10)
	if err != nil || len(page.Rows) != 4 || page.Rows[0].JobID != j.ID || page.Rows[0].Kind != "batch" {
		t.Fatalf("history: %+v, %v", page, err)
	}
	evs, _ := db.OutboxEvents(t.Context(), acct, 0)
	if len(evs) != 1 || evs[0].Type != webhook.EventBatchCompleted {
		t.Fatalf("outbox %+v", evs)
	}
	var body map[string]any
	json.Unmarshal(evs[0].Body, &body)
	if body["event"] != "batch.completed" || body["job_id"] != j.ID || body["processed"] != 4.0 || body["successful"] != 4.0 ||
		body["results_url"] != "/v1/jobs/"+j.ID+"/results.csv" || body["completed_at"] != receipt.FormatTime(j.CompletedAt) {
		t.Errorf("event body %s", evs[0].Body)
	}
}

// TestFairness: a 10-address job of another account, queued behind a
// 20,000-address job, finishes while the big one is far from done.
func TestFairness(t *testing.T) {
	db := pebbletest.Open(t, nil)
	big, small := pebbletest.Account(t, db, 100_000), pebbletest.Account(t, db, 100)
	f := newFake()
	f.delay = 2 * time.Millisecond
	s := startService(t, db, f, func(o *Options) { o.Concurrency = 4; o.GroupSize = 10 })
	bj := submit(t, s, big, addresses("big", 20_000, 2_000), "")
	waitUntil(t, 10*time.Second, "the big job starts", func() bool {
		j, _ := db.Job(t.Context(), bj.ID)
		return j.Processed > 0
	})
	sj := submit(t, s, small, addresses("small", 10, 3), "")
	sj = waitJob(t, db, sj.ID, 10*time.Second)
	bNow, _ := db.Job(t.Context(), bj.ID)
	t.Logf("small job done when the big one had %d of %d", bNow.Processed, bNow.Total)
	if sj.Status != storage.JobCompleted || bNow.Processed > bNow.Total/4 {
		t.Fatalf("small job %s; big job at %d of %d: the small one waited", sj.Status, bNow.Processed, bNow.Total)
	}

	// Within one account, a second job gets turns too.
	sj2 := submit(t, s, big, addresses("second", 10, 2), "")
	sj2 = waitJob(t, db, sj2.ID, 10*time.Second)
	bNow2, _ := db.Job(t.Context(), bj.ID)
	if sj2.Status != storage.JobCompleted || !bNow2.Active() {
		t.Fatalf("second job of the same account %s; big job %s", sj2.Status, bNow2.Status)
	}
}

// TestDomainConcurrency: one domain never has more groups in flight than
// DomainConcurrency, even when it is all a job has.
func TestDomainConcurrency(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 10_000)
	f := newFake()
	f.delay = 3 * time.Millisecond
	s := startService(t, db, f, func(o *Options) { o.Concurrency = 64; o.GroupSize = 5; o.DomainConcurrency = 3 })
	var addrs []string
	for i := range 300 {
		addrs = append(addrs, "u"+strconv.Itoa(i)+"@one.test")
	}
	addrs = append(addrs, addresses("other", 100, 50)...)
	j := submit(t, s, acct, addrs, "")
	waitJob(t, db, j.ID, 20*time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxCur["one.test"] > 3 || f.maxCur["one.test"] < 2 {
		t.Fatalf("one.test had at most %d calls in flight, want 2..3", f.maxCur["one.test"])
	}
}

// TestGreylistDeferral: greylisted addresses come back at their RetryAt,
// from the egress address they were greylisted from, and get their final
// answer; the rest of the job is not held up meanwhile.
func TestGreylistDeferral(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	from := netip.MustParseAddr("127.0.0.7")
	f := newFake()
	f.answer = func(e string, n int) *probe.Result {
		if strings.HasSuffix(e, "@grey.test") && n == 1 {
			return greylisted(e, time.Now().Add(300*time.Millisecond), from)
		}
		return nil
	}
	s := startService(t, db, f, nil)
	j := submit(t, s, acct, []string{"a@grey.test", "b@grey.test", "c@fine.test"}, "")
	waitUntil(t, 5*time.Second, "the fine address is stored", func() bool {
		_, ok := results(t, db, j.ID)["c@fine.test"]
		return ok
	})
	if jj, _ := db.Job(t.Context(), j.ID); jj.Processed != 1 || !jj.Active() {
		t.Fatalf("before the retry: %+v", jj)
	}
	j = waitJob(t, db, j.ID, 5*time.Second)
	rs := results(t, db, j.ID)
	if j.Status != storage.JobCompleted || rs["a@grey.test"].Status != "valid" || rs["b@grey.test"].Status != "valid" {
		t.Fatalf("after the retry: %s %+v", j.Status, rs)
	}
	if f.probed("a@grey.test") != 2 || f.probed("c@fine.test") != 1 {
		t.Errorf("probes: grey %d, fine %d", f.probed("a@grey.test"), f.probed("c@fine.test"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.prefers, from) {
		t.Errorf("the retry did not prefer the greylisted egress address: %v", f.prefers)
	}
}

// TestGreylistWindowSpent: an address greylisted beyond the retry window
// ends unknown, and the job completes.
func TestGreylistWindowSpent(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	f := newFake()
	f.answer = func(e string, n int) *probe.Result {
		if strings.HasSuffix(e, "@grey.test") {
			// Always greylisted, each retry 200 ms later.
			return greylisted(e, time.Now().Add(200*time.Millisecond), netip.Addr{})
		}
		return nil
	}
	s := startService(t, db, f, func(o *Options) { o.RetryWindow = 700 * time.Millisecond })
	j := submit(t, s, acct, []string{"a@grey.test", "c@fine.test"}, "")
	j = waitJob(t, db, j.ID, 10*time.Second)
	rs := results(t, db, j.ID)
	if j.Status != storage.JobCompleted || rs["a@grey.test"].Status != "unknown" || rs["c@fine.test"].Status != "valid" {
		t.Fatalf("%s %+v", j.Status, rs)
	}
	if n := f.probed("a@grey.test"); n < 3 || n > 5 {
		t.Errorf("greylisted address probed %d times in a 700 ms window of 200 ms retries", n)
	}
	j.WebhookURL = "https://hooks.example/x"
	ev, err := webhook.JobEvent(j)
	var body webhook.CompletedEvent
	if err != nil || json.Unmarshal(ev.Body, &body) != nil || body.Successful != 1 {
		t.Errorf("batch.completed successful %d, want 1 (unknown is not definitive): %v", body.Successful, err)
	}
}

// TestDNSFailureRetried: an unknown for a DNS time-out is asked again
// (twice at most); an unknown for an MX that never answered is final.
func TestDNSFailureRetried(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	f := newFake()
	f.answer = func(e string, n int) *probe.Result {
		r := valid(e)
		switch {
		case strings.HasPrefix(e, "flaky@") && n == 1, strings.HasPrefix(e, "down@"):
			r.Status, r.Reason, r.Score, r.Evidence.DNS = probe.StatusUnknown, probe.ReasonTimeout, 30, probe.DNSTimeout
		case strings.HasPrefix(e, "tarpit@"):
			r.Status, r.Reason, r.Score, r.Evidence.SMTP = probe.StatusUnknown, probe.ReasonTimeout, 30, probe.SMTPTimeout
		}
		return r
	}
	s := startService(t, db, f, func(o *Options) { o.DNSRetryDelay = 20 * time.Millisecond })
	j := submit(t, s, acct, []string{"flaky@a.test", "down@b.test", "tarpit@c.test"}, "")
	j = waitJob(t, db, j.ID, 5*time.Second)
	rs := results(t, db, j.ID)
	if rs["flaky@a.test"].Status != "valid" || rs["down@b.test"].Status != "unknown" || rs["tarpit@c.test"].Status != "unknown" {
		t.Fatalf("results %+v", rs)
	}
	if a, b, c := f.probed("flaky@a.test"), f.probed("down@b.test"), f.probed("tarpit@c.test"); a != 2 || b != 1+maxDNSTries || c != 1 {
		t.Errorf("probes: flaky %d, down %d, tarpit %d; want 2, %d, 1", a, b, c, 1+maxDNSTries)
	}
}

// TestResumeAfterStop: a service stopped mid-job (as by a crash: the
// results written so far are all that survives) is followed by a new one
// on the same data, which finishes the job probing only what had no
// result, and settles the credits once.
func TestResumeAfterStop(t *testing.T) {
	dir := t.TempDir()
	db := pebbletest.OpenIn(t, filepath.Join(dir, "db"), nil)
	acct := pebbletest.Account(t, db, 1000)
	// The engine answers 25 calls of 10 addresses, then hangs.
	f1 := newFake()
	f1.blockAfter = 25
	s1 := startService(t, db, f1, func(o *Options) { o.Concurrency = 4; o.GroupSize = 10; o.FlushSize = 20 })
	addrs := addresses("r", 600, 60)
	j := submit(t, s1, acct, addrs, "http://127.0.0.1:9/x")
	waitUntil(t, 10*time.Second, "the answered results stored", func() bool {
		jj, _ := db.Job(t.Context(), j.ID)
		return jj.Processed == 250
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	db.Close()

	db = pebbletest.OpenIn(t, filepath.Join(dir, "db"), nil)
	mid, _ := db.Job(t.Context(), j.ID)
	if mid.Status != storage.JobRunning || mid.Processed != 250 {
		t.Fatalf("after the stop: %+v", mid)
	}
	judged := results(t, db, j.ID)
	if len(judged) != mid.Processed {
		t.Fatalf("%d results stored, progress says %d", len(judged), mid.Processed)
	}
	f2 := newFake()
	startService(t, db, f2, nil)
	end := waitJob(t, db, j.ID, 10*time.Second)
	if end.Status != storage.JobCompleted || end.Processed != 600 || end.Used != 600 || end.Refunded != 0 {
		t.Fatalf("resumed job ended %+v", end)
	}
	for e := range judged {
		if f2.probed(e) != 0 {
			t.Fatalf("%s was judged before the stop and probed again", e)
		}
	}
	f2.mu.Lock()
	again := len(f2.probes)
	f2.mu.Unlock()
	if again != 600-mid.Processed {
		t.Errorf("the resumed service probed %d addresses, want %d", again, 600-mid.Processed)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 400 {
		t.Errorf("balance %d, want 400 (600 used once)", cr.Balance)
	}
	if evs, _ := db.OutboxEvents(t.Context(), acct, 0); len(evs) != 1 {
		t.Errorf("outbox after the resumed job: %d events, want 1", len(evs))
	}
}

// TestJobFailsAfterRetries: an engine that keeps failing fails the job
// (spec §3: retries exhausted), refunding everything not processed and
// announcing batch.failed.
func TestJobFailsAfterRetries(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	f := newFake()
	f.fail = errors.New("probe: pool closed")
	s := startService(t, db, f, func(o *Options) { o.MaxFailures = 2 })
	j := submit(t, s, acct, []string{"a@x.test", "b@x.test", "c@y.test"}, "https://hooks.example/x")
	j = waitJob(t, db, j.ID, 20*time.Second)
	if j.Status != storage.JobFailed || j.Used != 0 || j.Refunded != 3 || !strings.Contains(j.Error, "pool closed") {
		t.Fatalf("ended %+v", j)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 100 {
		t.Errorf("balance %d, want 100", cr.Balance)
	}
	evs, _ := db.OutboxEvents(t.Context(), acct, 0)
	if len(evs) != 1 || evs[0].Type != webhook.EventBatchFailed {
		t.Fatalf("outbox %+v", evs)
	}
	var body map[string]any
	json.Unmarshal(evs[0].Body, &body)
	if body["event"] != "batch.failed" || body["job_id"] != j.ID || body["credits_refunded"] != 3.0 || body["error"] == "" {
		t.Errorf("batch.failed body %s", evs[0].Body)
	}
}

func TestBuilderGroups(t *testing.T) {
	b := newBuilder(2)
	for i, a := range []string{"a@x.test", "b@y.test", "c@x.test", "d@x.test", "junk", "e@Y.test"} {
		b.add(i, a)
	}
	var got []string
	for _, q := range b.domains {
		for _, g := range q.chunks {
			var emails []string
			for _, in := range g.addrs {
				emails = append(emails, in.Email)
			}
			got = append(got, q.name+":"+strings.Join(emails, ","))
		}
	}
	// Grouped by ASCII domain; an address as stored (a job made before
	// addresses were parsed at the edge may hold another spelling) is
	// parsed once here.
	want := []string{"x.test:a@x.test,c@x.test", "x.test:d@x.test", "y.test:b@y.test,e@y.test", ":junk"}
	if !slices.Equal(got, want) || b.n != 6 {
		t.Fatalf("groups %q, want %q", got, want)
	}
}

// TestPickFewestInFlight: a free slot goes to the account with the fewest
// groups in flight among those with work queued; equals take turns; an
// account held back by DomainConcurrency does not hold the slot from the
// others.
func TestPickFewestInFlight(t *testing.T) {
	sc := &scheduler{
		opts:    &Options{Concurrency: 8, DomainConcurrency: 1, FlushSize: 500},
		jobs:    map[string]*jobRun{},
		acctIdx: map[string]*acctQ{},
		perDom:  map[string]int{},
	}
	add := func(id, acct, prefix string, n int) {
		b := newBuilder(1)
		for i, a := range addresses(prefix, n, n) {
			b.add(i, a)
		}
		sc.register(storage.Job{ID: id, Account: acct, Total: n}, -1, b)
	}
	next := func() string {
		t.Helper()
		g := sc.pick()
		if g == nil {
			return ""
		}
		g.job.acct.inflight++ // as launch does
		g.job.queued -= len(g.idx)
		return g.job.account
	}
	add("a1", "A", "a", 20)
	for range 6 {
		if got := next(); got != "A" {
			t.Fatalf("alone, A's group was not picked: %q", got)
		}
	}
	add("b1", "B", "b", 3)
	var got []string
	for range 5 {
		got = append(got, next())
	}
	if strings.Join(got, ",") != "B,B,B,A,A" {
		t.Fatalf("picks after B's upload: %v, want B's three first (A had 6 in flight)", got)
	}
	// Equal in flight: turns.
	add("c1", "C", "c", 10)
	sc.accts[0].inflight, sc.accts[2].inflight = 0, 0 // A and C
	got = got[:0]
	for range 4 {
		got = append(got, next())
	}
	if got[0] == got[1] || got[1] == got[2] || got[2] == got[3] {
		t.Fatalf("A and C with as few in flight did not take turns: %v", got)
	}
	// A job that ends while its groups still run leaves their count with
	// the account: the account's next job does not start at zero.
	a := sc.acctIdx["A"]
	sc.remove(sc.jobs["a1"])
	add("a2", "A", "a2-", 5)
	if sc.acctIdx["A"] != a || a.inflight == 0 {
		t.Fatalf("after A's job ended with groups in flight, its account starts again at %d in flight", sc.acctIdx["A"].inflight)
	}
	a.inflight = 0
	sc.remove(sc.jobs["a2"])
	if _, ok := sc.acctIdx["A"]; ok {
		t.Fatal("an account without jobs or groups in flight stays in the rotation")
	}
	add("a1", "A", "a", 20)
	// C's every domain at its limit: A gets the slot though C has fewer.
	sc.acctIdx["C"].inflight = 0
	sc.acctIdx["A"].inflight = 3
	for _, q := range sc.jobs["c1"].domains[sc.jobs["c1"].dhead:] {
		sc.perDom[q.name] = 1
	}
	if got := next(); got != "A" {
		t.Fatalf("with C held back by its domains, the slot went to %q", got)
	}
}

// flakyStarts is the jobs store with StartJob failing its first fail
// calls (all of them when fail < 0), as a disk that refuses writes for a
// moment would.
type flakyStarts struct {
	Store
	mu    sync.Mutex
	fail  int
	calls int
}

func (f *flakyStarts) StartJob(ctx context.Context, id string) (storage.Job, error) {
	f.mu.Lock()
	f.calls++
	failing := f.fail < 0 || f.calls <= f.fail
	f.mu.Unlock()
	if failing {
		return storage.Job{}, errors.New("disk refused the write")
	}
	return f.Store.StartJob(ctx, id)
}

func (f *flakyStarts) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestStartJobFails: a job's groups go without waiting for its StartJob,
// but a failed StartJob holds the job's next groups and is tried again
// after the back-off, not at every launch; the job then completes. When
// it keeps failing, the job fails after MaxFailures tries with nothing
// stored and nothing charged.
func TestStartJobFails(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	s := startService(t, db, newFake(), func(o *Options) { o.Concurrency = 2; o.GroupSize = 1 })
	flaky := &flakyStarts{Store: db, fail: 1}
	s.sched.mu.Lock()
	s.sched.db = flaky
	s.sched.mu.Unlock()
	j := submit(t, s, acct, addresses("u", 20, 20), "")
	j = waitJob(t, db, j.ID, 20*time.Second)
	if j.Status != storage.JobCompleted || j.Processed != 20 || j.StartedAt.IsZero() {
		t.Fatalf("after one failed StartJob: %+v", j)
	}
	if n := flaky.count(); n != 2 {
		t.Fatalf("StartJob called %d times, want 2 (one failure, one retry after the back-off)", n)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 80 {
		t.Errorf("balance %d, want 80", cr.Balance)
	}

	s2 := startService(t, db, newFake(), func(o *Options) { o.MaxFailures = 2 })
	always := &flakyStarts{Store: db, fail: -1}
	s2.sched.mu.Lock()
	s2.sched.db = always
	s2.sched.mu.Unlock()
	j = submit(t, s2, acct, addresses("v", 5, 5), "")
	j = waitJob(t, db, j.ID, 20*time.Second)
	if j.Status != storage.JobFailed || j.Processed != 0 || j.Used != 0 || j.Refunded != 5 || !strings.Contains(j.Error, "could not be started") {
		t.Fatalf("StartJob failing for ever: %+v", j)
	}
	if n := always.count(); n != 2 {
		t.Fatalf("StartJob called %d times, want MaxFailures = 2", n)
	}
	if cr, _ := db.Credits(t.Context(), acct); cr.Balance != 80 {
		t.Errorf("balance %d after the failed job, want 80", cr.Balance)
	}
}

// fullDisk is the jobs store with every write refused for a full disk
// (storage.ErrNoSpace) while full is set.
type fullDisk struct {
	Store
	full   atomic.Bool
	writes atomic.Int32 // refused writes
}

func (f *fullDisk) PutJobResults(ctx context.Context, id string, rs []storage.JobResult) (storage.Job, error) {
	if f.full.Load() {
		f.writes.Add(1)
		return storage.Job{}, storage.ErrNoSpace
	}
	return f.Store.PutJobResults(ctx, id, rs)
}

func (f *fullDisk) StartJob(ctx context.Context, id string) (storage.Job, error) {
	if f.full.Load() {
		f.writes.Add(1)
		return storage.Job{}, storage.ErrNoSpace
	}
	return f.Store.StartJob(ctx, id)
}

// TestDiskFullPauses: while the store refuses writes for a full disk, a
// running job pauses — no more engine calls than those already under
// way, its writes tried again without counting as failures, so it is
// not failed however long it lasts (MaxFailures is 2 here) — and it
// completes by itself once the disk takes writes again, each address
// stored once.
func TestDiskFullPauses(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 200)
	v := newFake()
	v.delay = 20 * time.Millisecond // the job lasts seconds: the disk fills in the middle of it
	s := startService(t, db, v, func(o *Options) {
		o.Concurrency = 2
		o.GroupSize = 1
		o.MaxFailures = 2
		o.FlushSize = 1
	})
	disk := &fullDisk{Store: db}
	s.sched.mu.Lock()
	s.sched.db = disk
	s.sched.mu.Unlock()
	j := submit(t, s, acct, addresses("p", 200, 200), "")
	waitUntil(t, 30*time.Second, "the job under way", func() bool { cur, _ := db.Job(t.Context(), j.ID); return cur.Processed >= 20 })
	disk.full.Store(true)
	if cur, _ := db.Job(t.Context(), j.ID); cur.Processed > 150 {
		t.Skipf("the job ran too far (%d of 200) before the disk filled: too little left to see it pause", cur.Processed)
	}
	waitUntil(t, 30*time.Second, "refused writes", func() bool { return disk.writes.Load() >= 3 })
	v.mu.Lock()
	calls := v.calls
	v.mu.Unlock()
	waitUntil(t, 30*time.Second, "writes retried while full", func() bool { return disk.writes.Load() >= 6 })
	v.mu.Lock()
	more := v.calls - calls
	v.mu.Unlock()
	if more > 2 { // at most the calls already under way
		t.Fatalf("%d engine calls while the disk was full", more)
	}
	if cur, _ := db.Job(t.Context(), j.ID); cur.Status != storage.JobRunning {
		t.Fatalf("a job paused by a full disk: %+v", cur)
	}
	disk.full.Store(false)
	done := waitJob(t, db, j.ID, time.Minute)
	if done.Status != storage.JobCompleted || done.Processed != 200 || done.Used != 200 {
		t.Fatalf("after the disk took writes again: %+v", done)
	}
	if n := len(results(t, db, j.ID)); n != 200 {
		t.Fatalf("%d results", n)
	}
}
