package storage

import (
	"time"
)

// The webhook outbox. An event is written in the same synced batch as the
// state change it announces (FinishJob), so a job never ends without its
// event nor announces an end that did not happen. The dispatcher takes the
// due events (DueEvents), sends them, and then deletes each (MarkDelivered),
// reschedules it (Reschedule, spec §6: 30 s, 2 min, 10 min, 1 h, 6 h) or
// gives up on it after 24 h (DeadLetter). A crash between sending and
// recording the outcome sends the event again: delivery is at least once,
// and receivers tell repeats apart by the event id.
//
// Keys: outbox/<next attempt ms><id> orders events by due time, so the
// due ones are a prefix scan; dlq/<id> holds the dead letters (ids are
// UUIDv7, so in time order); hooklast/<account> the latest event enqueued
// for the account, which the dashboard's test button replays.

// Event is a webhook event to deliver.
type Event struct {
	// ID is a UUIDv7, set by the package when empty.
	ID      string `json:"id"`
	Account string `json:"account"`
	// Type is the event name (batch.completed, batch.failed,
	// reputation.warning).
	Type string `json:"type"`
	URL  string `json:"url"`
	// Body is the JSON body to sign and post, exactly as sent.
	Body      []byte    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
	// NextAttempt is when the event is due; zero on enqueue means now.
	NextAttempt time.Time `json:"next_attempt"`
	Attempts    int       `json:"attempts"`
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	DeadAt      time.Time `json:"dead_at,omitzero"`
}
