package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestExportImport moves a single box into a fleet: a Pebble database with
// an account's keys, validations (one with an Idempotency-Key), a finished
// job and one still running, webhook events, users, a session and an
// invitation, secrets, is exported as JSON lines and imported into an empty
// PostgreSQL database; every read of the contract then answers the same
// on both (ledger, history pages and cursors, results and receipts, the
// cache, the idempotent replay, jobs and their results and pending
// addresses, outbox, dead letters, users, sessions, secrets), and the
// fleet goes on from there: the running job's slices are leasable, new
// history rows come after the imported ones. A second import is refused.
func TestExportImport(t *testing.T) {
	c := storagetest.NewClock()
	src, err := pebble.Open(t.TempDir(), pebble.Options{Now: c.Now, PurgeInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// must fails the test unless the call that makes a record of the
	// source succeeded: an empty source would compare equal to anything.
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	acct, err := src.CreateAccount(t.Context(), "Acme", storage.PlanGrowth)
	must(err, "CreateAccount")
	other, err := src.CreateAccount(t.Context(), "Other", storage.PlanFree)
	must(err, "CreateAccount")
	_, err = src.AddCredits(t.Context(), acct.ID, 1000, "start")
	must(err, "AddCredits")
	full, _, err := src.MintKey(t.Context(), acct.ID, []string{storage.ScopeValidateRead, storage.ScopeValidateWrite}, "ci")
	must(err, "MintKey")
	ref := storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: "k-1"}
	_, _, err = src.BeginIdem(t.Context(), ref, []byte("h"))
	must(err, "BeginIdem")
	seal := func(r storage.Result, bal int64) (storage.Sealed, error) {
		b := fmt.Appendf(nil, `{"id":%q,"credits_remaining":%d}`, r.ID, bal)
		return storage.Sealed{Receipt: b, Response: storage.IdemResponse{Status: 200, Header: []storage.HeaderField{{Name: "X-Credits", Value: fmt.Sprint(bal)}}, Body: b}}, nil
	}
	for i := range 30 {
		h, err := src.Hold(t.Context(), acct.ID, 1, "r")
		if err != nil {
			t.Fatal(err)
		}
		req := storage.ChargeRequest{Result: storage.Result{Email: fmt.Sprintf("u%d@x.test", i%20), Status: "valid", Score: 90, LatencyMs: 12}, Seal: seal}
		if i == 0 {
			req.Idem = &ref
		}
		if _, err := src.Charge(t.Context(), h, req); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			c.Advance(time.Millisecond)
		}
	}
	done, err := src.CreateJob(t.Context(), storage.JobSpec{Account: acct.ID, Addresses: storagetest.Addresses(50), WebhookURL: "https://h.test/x"})
	must(err, "CreateJob")
	_, err = src.StartJob(t.Context(), done.ID)
	must(err, "StartJob")
	var rs []storage.JobResult
	for i := range 50 {
		rs = append(rs, storage.JobResult{Index: i, Result: storage.Result{Email: fmt.Sprintf("user%d@example.com", i), Status: "valid", Score: 80, LatencyMs: -1}})
	}
	_, err = src.PutJobResults(t.Context(), done.ID, rs)
	must(err, "PutJobResults")
	_, err = src.FinishJob(t.Context(), done.ID, storage.JobFinish{Status: storage.JobCompleted, Event: func(j storage.Job) (*storage.Event, error) {
		return &storage.Event{Account: j.Account, Type: "batch.completed", URL: j.WebhookURL, Body: []byte(`{}`)}, nil
	}})
	must(err, "FinishJob")
	running, err := src.CreateJob(t.Context(), storage.JobSpec{Account: acct.ID, Addresses: []string{"a@d1.test", "b@d2.test", "c@d3.test", "d@d4.test"}})
	must(err, "CreateJob")
	_, err = src.StartJob(t.Context(), running.ID)
	must(err, "StartJob")
	_, err = src.PutJobResults(t.Context(), running.ID, []storage.JobResult{{Index: 1, Result: storage.Result{Email: "b@d2.test", Status: "invalid"}}})
	must(err, "PutJobResults")
	ev, err := src.Enqueue(t.Context(), storage.Event{Account: other.ID, Type: "reputation.warning", URL: "https://h.test/y"})
	must(err, "Enqueue")
	_, err = src.DeadLetter(t.Context(), ev, 500, "gave up")
	must(err, "DeadLetter")
	_, err = src.Enqueue(t.Context(), storage.Event{Account: acct.ID, Type: "reputation.warning", URL: "https://h.test/z"})
	must(err, "Enqueue")
	u, _, err := src.RegisterWithAccount(t.Context(), "ann@x.test", "$argon2id$v=19$m=8,t=1,p=1$c2FsdA$aGFzaA", "Ann", storage.PlanFree, 5)
	must(err, "RegisterWithAccount")
	tok, _, err := src.CreateSession(t.Context(), u.ID, u.Accounts[0].Account, "127.0.0.1", "test", time.Hour)
	must(err, "CreateSession")
	itok, _, err := src.CreateInvite(t.Context(), acct.ID, storage.RoleMember, "", u.ID, time.Hour)
	must(err, "CreateInvite")
	csrf, err := src.Secret(t.Context(), "csrf")
	must(err, "Secret")

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := src.Export(func(r storage.Record) error { return enc.Encode(r) }); err != nil {
		t.Fatal(err)
	}
	must(enc.Encode(storage.Record{Type: storage.RecSigningKeys, Value: []byte(`{"version":1}`)}), "Encode")

	srv := pgtest.Start(t)
	ctx := context.Background()
	pool := newPool(t, srv, "import")
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	dst, err := Open(ctx, srv.DSN("import"), Options{Now: c.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	read := func(b []byte) func() (storage.Record, bool, error) {
		dec := json.NewDecoder(bytes.NewReader(b))
		return func() (storage.Record, bool, error) {
			var r storage.Record
			if err := dec.Decode(&r); errors.Is(err, io.EOF) {
				return r, false, nil
			} else if err != nil {
				return r, false, err
			}
			return r, true, nil
		}
	}
	exported := bytes.Clone(buf.Bytes())
	stats, err := dst.Import(read(exported))
	if err != nil {
		t.Fatal(err)
	}
	if stats[storage.RecResult] != 30+50+1 || stats[storage.RecAccount] != 3 || stats[storage.RecJob] != 2 {
		t.Fatalf("stats %v", stats)
	}

	same := func(what string, a, b any, errA, errB error) {
		t.Helper()
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", what, errA, errB)
		}
		ja, errA := json.Marshal(a)
		jb, errB := json.Marshal(b)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", what, errA, errB)
		}
		// An empty list is nil on one backend, empty on the other.
		if string(ja) == "null" {
			ja = []byte("[]")
		}
		if string(jb) == "null" {
			jb = []byte("[]")
		}
		if !bytes.Equal(ja, jb) {
			t.Fatalf("%s differs:\npebble   %s\npostgres %s", what, ja, jb)
		}
	}
	la, ea := src.ListAccounts(t.Context())
	lb, eb := dst.ListAccounts(t.Context())
	same("accounts", la, lb, ea, eb)
	for _, a := range la {
		x, e1 := src.Ledger(t.Context(), a.ID, 0, 0)
		y, e2 := dst.Ledger(t.Context(), a.ID, 0, 0)
		same("ledger of "+a.Name, x, y, e1, e2)
		ca, e1 := src.Credits(t.Context(), a.ID)
		cb, e2 := dst.Credits(t.Context(), a.ID)
		same("credits of "+a.Name, ca, cb, e1, e2)
		ka, e1 := src.ListKeys(t.Context(), a.ID)
		kb, e2 := dst.ListKeys(t.Context(), a.ID)
		same("keys of "+a.Name, ka, kb, e1, e2)
		for _, kind := range []string{storage.HistoryAll, storage.HistoryBatch} {
			ha := storagetest.WalkHistory(t, src, a.ID, kind, 7)
			hb := storagetest.WalkHistory(t, dst, a.ID, kind, 7)
			same("history of "+a.Name, ha, hb, nil, nil)
		}
		ja, e1 := src.ListAccountJobs(t.Context(), a.ID, 0)
		jb, e2 := dst.ListAccountJobs(t.Context(), a.ID, 0)
		same("jobs of "+a.Name, ja, jb, e1, e2)
	}
	if _, err := dst.VerifyKey(t.Context(), full); err != nil {
		t.Fatalf("the key after the import: %v", err)
	}
	p, err := src.ListHistory(t.Context(), acct.ID, storage.HistorySingle, "", 1)
	must(err, "ListHistory")
	ra, e1 := src.GetResult(t.Context(), p.Rows[0].ResultID)
	rb, e2 := dst.GetResult(t.Context(), p.Rows[0].ResultID)
	same("a result", ra, rb, e1, e2)
	hita, _, e1 := src.LookupCache(t.Context(), acct.ID, "u5@x.test", time.Hour)
	hitb, _, e2 := dst.LookupCache(t.Context(), acct.ID, "u5@x.test", time.Hour)
	same("a cache hit", hita, hitb, e1, e2)
	out, rec, err := dst.BeginIdem(t.Context(), ref, []byte("h"))
	if err != nil || out != storage.IdemReplay || rec.Response.Header[0].Name != "X-Credits" {
		t.Fatalf("the idempotent replay after the import: %v %+v %v", out, rec, err)
	}
	for _, id := range []string{done.ID, running.ID} {
		var xa, xb []storage.Result
		e1 := src.JobResults(t.Context(), id, func(r storage.Result) error { xa = append(xa, r); return nil })
		e2 := dst.JobResults(t.Context(), id, func(r storage.Result) error { xb = append(xb, r); return nil })
		same("job results", xa, xb, e1, e2)
	}
	var pa, pb []int
	e1 = src.PendingAddresses(t.Context(), running.ID, func(i int, _ string) error { pa = append(pa, i); return nil })
	e2 = dst.PendingAddresses(t.Context(), running.ID, func(i int, _ string) error { pb = append(pb, i); return nil })
	same("pending addresses", pa, pb, e1, e2)
	if len(pa) != 3 {
		t.Fatalf("pending addresses %v, want 3", pa)
	}
	oa, e1 := src.OutboxEvents(t.Context(), "", 0)
	ob, e2 := dst.OutboxEvents(t.Context(), "", 0)
	same("outbox", oa, ob, e1, e2)
	da, e1 := src.DeadLetters(t.Context(), "", 0)
	db2, e2 := dst.DeadLetters(t.Context(), "", 0)
	same("dead letters", da, db2, e1, e2)
	ua, e1 := src.ListUsers(t.Context())
	ub, e2 := dst.ListUsers(t.Context())
	same("users", ua, ub, e1, e2)
	if s, err := dst.LookupSession(t.Context(), tok); err != nil || s.User != u.ID {
		t.Fatalf("the session after the import: %+v %v", s, err)
	}
	if ivs, err := dst.Invites(t.Context(), acct.ID); err != nil || len(ivs) != 1 {
		t.Fatalf("invitations %+v, %v", ivs, err)
	}
	if _, _, err := dst.RedeemInvite(t.Context(), itok, u.ID); err != nil {
		t.Fatalf("the invitation after the import: %v", err)
	}
	if s, err := dst.Secret(t.Context(), "csrf"); err != nil || !bytes.Equal(s, csrf) {
		t.Fatalf("the CSRF secret changed (%v)", err)
	}
	if keys, err := dst.SigningKeys().LoadKeys(); err != nil || string(keys) != `{"version":1}` {
		t.Fatalf("signing keys %q, %v", keys, err)
	}

	// The fleet goes on: the running job's slices lease, with the three
	// addresses left; a new row comes after the imported ones.
	ls, err := dst.LeaseSlices(t.Context(), 8)
	if err != nil {
		t.Fatal(err)
	}
	var left []int
	for _, l := range ls {
		err := dst.SliceAddresses(t.Context(), l.Job.ID, l.Slice, func(i int, _ string) error { left = append(left, i); return nil })
		must(err, "SliceAddresses")
	}
	slices.Sort(left)
	if !slices.Equal(left, []int{0, 2, 3}) {
		t.Fatalf("addresses left in the leased slices: %v", left)
	}
	h, err := dst.Hold(t.Context(), acct.ID, 1, "new")
	must(err, "Hold")
	ch, err := dst.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "new@x.test", Status: "valid"}})
	if err != nil {
		t.Fatal(err)
	}
	top := storagetest.WalkHistory(t, dst, acct.ID, storage.HistoryAll, 1000)
	if top[0].ResultID != ch.Result.ID || ch.Result.HistoryID <= top[1].ID {
		t.Fatalf("the new row %+v is not the newest: %+v", ch.Result, top[:2])
	}
	storagetest.CheckNewestFirst(t, top)

	if _, err := dst.Import(read(exported)); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second import: %v", err)
	}
}
