package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"strconv"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// Webhook events (spec §6; README.md documents the bodies).
const (
	EventBatchCompleted    = "batch.completed"
	EventBatchFailed       = "batch.failed"
	EventReputationWarning = "reputation.warning"
)

// Webhook request headers.
const (
	// HeaderSignature is spec §6's signature: "sha256=" and the lower-case
	// hex HMAC-SHA256 of the raw body, keyed with the account's secret.
	HeaderSignature = "X-SVC-Signature"
	// HeaderEventID is the event's id (a UUID): the same on every attempt
	// of one event, so receivers de-duplicate by it.
	HeaderEventID = "X-SVC-Event-Id"
	// HeaderEvent is the event name (batch.completed, …).
	HeaderEvent = "X-SVC-Event"
	// HeaderTimestamp is when this attempt was signed, in Unix seconds.
	HeaderTimestamp = "X-SVC-Timestamp"
	// HeaderSignatureTS signs the event id and the timestamp with the
	// body: "sha256=" and the hex HMAC-SHA256 of
	// "<event id>.<timestamp>.<raw body>". A receiver that checks it (and
	// refuses old timestamps) is safe from a captured request replayed
	// later; HeaderSignature alone cannot tell.
	HeaderSignatureTS = "X-SVC-Signature-Timestamped"
	// HeaderAttempt is the attempt's number, from 1.
	HeaderAttempt = "X-SVC-Delivery-Attempt"
	// HeaderTest is "true" on a test event fired by the operator.
	HeaderTest = "X-SVC-Test"
)

// Sign returns the X-SVC-Signature value of body: "sha256=<hex>".
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// SignTimestamped returns the X-SVC-Signature-Timestamped value.
func SignTimestamped(secret, eventID string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(eventID))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig (an X-SVC-Signature value) is body's
// signature under secret, comparing in constant time.
func Verify(secret string, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(sig))
}

// JobPath and ResultsPath are a job's resource paths (spec §2.7, §2.8),
// which the API answers and batch.completed names.
func JobPath(id string) string     { return "/v1/jobs/" + id }
func ResultsPath(id string) string { return "/v1/jobs/" + id + "/results.csv" }

// CompletedEvent is the body of batch.completed: spec §6's fields, the
// results_url the event table promises, and the counts per status.
type CompletedEvent struct {
	Event       string         `json:"event"`
	JobID       string         `json:"job_id"`
	Processed   int            `json:"processed"`
	Successful  int            `json:"successful"`
	CompletedAt string         `json:"completed_at"`
	ResultsURL  string         `json:"results_url"`
	Total       int            `json:"total"`
	Counts      map[string]int `json:"counts"`
	ListName    string         `json:"list_name,omitempty"`
}

// FailedEvent is the body of batch.failed.
type FailedEvent struct {
	Event      string `json:"event"`
	JobID      string `json:"job_id"`
	Processed  int    `json:"processed"`
	Successful int    `json:"successful"`
	Total      int    `json:"total"`
	// FailedAt is the job's completed_at: when it ended.
	FailedAt        string         `json:"failed_at"`
	Error           string         `json:"error"`
	CreditsUsed     int64          `json:"credits_used"`
	CreditsRefunded int64          `json:"credits_refunded"`
	Counts          map[string]int `json:"counts"`
	ListName        string         `json:"list_name,omitempty"`
}

// ReputationEvent is the body of reputation.warning.
type ReputationEvent struct {
	Event      string `json:"event"`
	JobID      string `json:"job_id"`
	EgressIP   string `json:"egress_ip"`
	Reason     string `json:"reason"`
	OccurredAt string `json:"occurred_at"`
	Action     string `json:"action"`
}

// successful counts the results with a definitive verdict: every status
// but unknown (DESIGN.md).
func successful(j storage.Job) int {
	n := 0
	for st, c := range j.Counts {
		if st != string(probe.StatusUnknown) {
			n += c
		}
	}
	return n
}

func counts(j storage.Job) map[string]int {
	m := make(map[string]int, len(j.Counts))
	for k, v := range j.Counts {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}

// JobEvent returns the event announcing the end of j, for
// storage.JobFinish to write with it; nil when the job has no webhook.
func JobEvent(j storage.Job) (*storage.Event, error) {
	if j.WebhookURL == "" {
		return nil, nil
	}
	var body any
	typ := EventBatchCompleted
	if j.Status == storage.JobCompleted {
		body = CompletedEvent{
			Event: EventBatchCompleted, JobID: j.ID, Processed: j.Processed, Successful: successful(j),
			CompletedAt: receipt.FormatTime(j.CompletedAt), ResultsURL: ResultsPath(j.ID), Total: j.Total,
			Counts: counts(j), ListName: j.ListName,
		}
	} else {
		typ = EventBatchFailed
		body = FailedEvent{
			Event: EventBatchFailed, JobID: j.ID, Processed: j.Processed, Successful: successful(j), Total: j.Total,
			FailedAt: receipt.FormatTime(j.CompletedAt), Error: j.Error, CreditsUsed: j.Used, CreditsRefunded: j.Refunded,
			Counts: counts(j), ListName: j.ListName,
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &storage.Event{Account: j.Account, Type: typ, URL: j.WebhookURL, Body: b}, nil
}

// ReputationBody is the body of reputation.warning for a job's webhook.
func ReputationBody(jobID string, ip netip.Addr, reason string, at time.Time) ([]byte, error) {
	egressIP := ip.String()
	if !ip.IsValid() {
		egressIP = "system"
	}
	return json.Marshal(ReputationEvent{
		Event: EventReputationWarning, JobID: jobID, EgressIP: egressIP, Reason: reason,
		OccurredAt: receipt.FormatTime(at),
		Action:     "advisory: verifyd cools the address for the destinations that refused it; the job goes on",
	})
}
