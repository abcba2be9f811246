// Package hookapi is the wire format of the admin API's webhook routes
// (server/admin serves them on the admin socket) and the client calls
// verifyctl makes with them. Like adminapi, it depends on the standard
// library and adminapi only, so the CLI carries no server code.
//
//	GET  /v1/webhooks/outbox?account=&limit=        events waiting for delivery
//	GET  /v1/webhooks/dead-letters?account=&limit=  the dead-letter queue
//	GET  /v1/webhooks/attempts?account=&limit=      recent attempts (since start)
//	POST /v1/webhooks/events/{id}/resend            send one again now
//	POST /v1/webhooks/test {"account","url"}        replay the latest payload
package hookapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// Event is a webhook event in the outbox or the dead-letter queue.
type Event struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Type    string `json:"type"`
	URL     string `json:"url"`
	// Attempts is how many attempts failed so far.
	Attempts    int       `json:"attempts"`
	CreatedAt   time.Time `json:"created_at"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	DeadAt      time.Time `json:"dead_at,omitzero"`
	// Body is the JSON payload as signed and sent.
	Body json.RawMessage `json:"body,omitempty"`
}

// EventList is the answer of the outbox and dead-letter routes.
type EventList struct {
	Events []Event `json:"events"`
}

// Attempt is one delivery attempt, remembered in memory since verifyd
// started (the outbox and the dead-letter queue are the durable record).
type Attempt struct {
	EventID string    `json:"event_id"`
	Account string    `json:"account"`
	Type    string    `json:"type"`
	URL     string    `json:"url"`
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	// Status is the HTTP status answered, 0 for none.
	Status     int    `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"duration_ms"`
	// Outcome is delivered, retry (NextAttempt says when), dead, or
	// test (a test event; Status and Error say how it went).
	Outcome     string    `json:"outcome"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// AttemptList is the answer of the attempts route.
type AttemptList struct {
	Attempts []Attempt `json:"attempts"`
}

// TestRequest fires a test event: the account's latest payload, sent
// once, now, to URL (empty: the URL that payload was for).
type TestRequest struct {
	Account string `json:"account"`
	URL     string `json:"url,omitempty"`
}

// TestResult is how the test event went.
type TestResult struct {
	// EventID is the test's own event id (X-SVC-Event-Id), so a receiver
	// that de-duplicates does not drop it as a repeat of the original.
	EventID string `json:"event_id"`
	// ReplayOf is the id of the event whose payload was replayed.
	ReplayOf   string `json:"replay_of"`
	Type       string `json:"type"`
	URL        string `json:"url"`
	Delivered  bool   `json:"delivered"`
	Status     int    `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"duration_ms"`
}

func listQuery(path, account string, limit int) string {
	q := url.Values{}
	if account != "" {
		q.Set("account", account)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Outbox lists the events waiting for delivery, soonest due first.
func Outbox(ctx context.Context, c *adminapi.Client, account string, limit int) ([]Event, error) {
	var l EventList
	err := c.Do(ctx, http.MethodGet, listQuery("/v1/webhooks/outbox", account, limit), nil, &l)
	return l.Events, err
}

// DeadLetters lists the dead-letter queue, oldest first.
func DeadLetters(ctx context.Context, c *adminapi.Client, account string, limit int) ([]Event, error) {
	var l EventList
	err := c.Do(ctx, http.MethodGet, listQuery("/v1/webhooks/dead-letters", account, limit), nil, &l)
	return l.Events, err
}

// Attempts lists recent delivery attempts, newest first.
func Attempts(ctx context.Context, c *adminapi.Client, account string, limit int) ([]Attempt, error) {
	var l AttemptList
	err := c.Do(ctx, http.MethodGet, listQuery("/v1/webhooks/attempts", account, limit), nil, &l)
	return l.Attempts, err
}

// Resend makes an event (dead or waiting) due now.
func Resend(ctx context.Context, c *adminapi.Client, id string) (Event, error) {
	var ev Event
	err := c.Do(ctx, http.MethodPost, "/v1/webhooks/events/"+url.PathEscape(id)+"/resend", nil, &ev)
	return ev, err
}

// Test fires a test event and reports how it went.
func Test(ctx context.Context, c *adminapi.Client, req TestRequest) (TestResult, error) {
	var r TestResult
	err := c.Do(ctx, http.MethodPost, "/v1/webhooks/test", req, &r)
	return r, err
}
