package storage

import (
	"testing"
	"time"
)

func TestOutboxEventsAndResend(t *testing.T) {
	db := openTest(t)
	a, b := db.account(t, 0), db.account(t, 1)
	t0 := db.clock.Now().Truncate(time.Millisecond)
	e1, _ := db.Enqueue(Event{Account: a, Type: "batch.completed", URL: "https://h.example/1", NextAttempt: t0.Add(time.Hour)})
	e2, _ := db.Enqueue(Event{Account: b, Type: "batch.failed", URL: "https://h.example/2", NextAttempt: t0.Add(time.Minute)})
	e3, _ := db.Enqueue(Event{Account: a, Type: "batch.completed", URL: "https://h.example/3"})

	all, err := db.OutboxEvents("", 0)
	if err != nil || len(all) != 3 || all[0].ID != e3.ID || all[1].ID != e2.ID || all[2].ID != e1.ID {
		t.Fatalf("OutboxEvents: %+v, %v", all, err)
	}
	if mine, _ := db.OutboxEvents(a, 0); len(mine) != 2 || mine[0].ID != e3.ID || mine[1].ID != e1.ID {
		t.Fatalf("OutboxEvents of %s: %+v", a, mine)
	}
	if one, _ := db.OutboxEvents("", 1); len(one) != 1 {
		t.Fatalf("limit 1: %+v", one)
	}

	// A failed attempt, then the operator resends it: due now, attempts kept.
	r1, err := db.Reschedule(e1, t0.Add(2*time.Hour), 500, "boom")
	if err != nil {
		t.Fatal(err)
	}
	if due, _ := db.DueEvents(0); len(due) != 1 || due[0].ID != e3.ID {
		t.Fatalf("due before resend: %+v", due)
	}
	// Another account cannot resend it.
	_, err = db.ResendEvent(b, r1.ID)
	wantErr(t, err, ErrNotFound)
	re, err := db.ResendEvent(a, r1.ID)
	if err != nil || re.Attempts != 1 || !re.NextAttempt.Equal(t0) {
		t.Fatalf("ResendEvent (outbox): %+v, %v", re, err)
	}
	if due, _ := db.DueEvents(0); len(due) != 2 {
		t.Fatalf("due after resend: %+v", due)
	}
	if all, _ := db.OutboxEvents("", 0); len(all) != 3 {
		t.Fatalf("resend duplicated or lost an event: %+v", all)
	}

	// A dead letter comes back with its attempts reset.
	dead, _ := db.DeadLetter(e2, 0, "refused")
	_, err = db.ResendEvent(a, dead.ID)
	wantErr(t, err, ErrNotFound)
	back, err := db.ResendEvent(b, dead.ID)
	if err != nil || back.Attempts != 0 || !back.DeadAt.IsZero() {
		t.Fatalf("ResendEvent (dead letter): %+v, %v", back, err)
	}
	if dl, _ := db.DeadLetters("", 0); len(dl) != 0 {
		t.Errorf("dead letters after resend: %+v", dl)
	}

	// A delivered event is gone.
	if err := db.MarkDelivered(e3); err != nil {
		t.Fatal(err)
	}
	_, err = db.ResendEvent("", e3.ID)
	wantErr(t, err, ErrNotFound)
}
