package storage

import (
	"testing"
	"time"
)

func TestOutbox(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	if _, ok, err := db.NextDue(); ok || err != nil {
		t.Fatalf("empty outbox: %v, %v", ok, err)
	}
	t0 := db.clock.Now().Truncate(time.Millisecond)
	e1, err := db.Enqueue(Event{Account: acct, Type: "reputation.warning", URL: "https://h.example/1", Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !validID(e1.ID) || !e1.NextAttempt.Equal(t0) || !e1.CreatedAt.Equal(t0) {
		t.Fatalf("enqueued %+v", e1)
	}
	e2, _ := db.Enqueue(Event{Account: acct, Type: "batch.completed", URL: "https://h.example/2", NextAttempt: t0.Add(time.Minute)})
	if _, err := db.Enqueue(Event{Account: acct, Type: "x"}); err == nil {
		t.Error("an event without a URL")
	}

	due, _ := db.DueEvents(10)
	if len(due) != 1 || due[0].ID != e1.ID || string(due[0].Body) != `{"a":1}` {
		t.Fatalf("due now: %+v", due)
	}
	if at, ok, _ := db.NextDue(); !ok || !at.Equal(t0) {
		t.Errorf("NextDue %v %v", at, ok)
	}
	// The first attempt fails: due again in 30 s.
	r1, err := db.Reschedule(due[0], t0.Add(30*time.Second), 503, "service unavailable")
	if err != nil || r1.Attempts != 1 || r1.LastStatus != 503 {
		t.Fatalf("Reschedule: %+v, %v", r1, err)
	}
	// The stale copy can no longer be acted on.
	wantErr(t, db.MarkDelivered(due[0]), ErrNotFound)
	if due, _ := db.DueEvents(10); len(due) != 0 {
		t.Errorf("due after reschedule: %+v", due)
	}
	db.clock.Advance(time.Minute)
	due, _ = db.DueEvents(10)
	if len(due) != 2 || due[0].ID != r1.ID || due[1].ID != e2.ID {
		t.Fatalf("due a minute later: %+v", due)
	}
	if err := db.MarkDelivered(due[1]); err != nil {
		t.Fatal(err)
	}
	dead, err := db.DeadLetter(due[0], 0, "timeout")
	if err != nil || dead.Attempts != 2 || dead.DeadAt.IsZero() {
		t.Fatalf("DeadLetter: %+v, %v", dead, err)
	}
	if due, _ := db.DueEvents(0); len(due) != 0 {
		t.Errorf("outbox not empty: %+v", due)
	}

	db.reopen(t)
	dl, err := db.DeadLetters(acct, 0)
	if err != nil || len(dl) != 1 || dl[0].ID != e1.ID || dl[0].LastError != "timeout" {
		t.Fatalf("DeadLetters: %+v, %v", dl, err)
	}
	if other, _ := db.DeadLetters("acct_other", 0); len(other) != 0 {
		t.Errorf("another account's dead letters: %+v", other)
	}
	back, err := db.Redrive("", e1.ID)
	if err != nil || back.Attempts != 0 || !back.DeadAt.IsZero() {
		t.Fatalf("Redrive: %+v, %v", back, err)
	}
	if due, _ := db.DueEvents(10); len(due) != 1 || due[0].ID != e1.ID {
		t.Errorf("due after redrive: %+v", due)
	}
	if dl, _ := db.DeadLetters("", 0); len(dl) != 0 {
		t.Errorf("dead letters after redrive: %+v", dl)
	}
	// The latest payload of the account, for the dashboard's test event.
	last, err := db.LastEvent(acct)
	if err != nil || last.ID != e2.ID {
		t.Errorf("LastEvent: %+v, %v", last, err)
	}
}
