package storage

import (
	"errors"
	"maps"
	"strings"
	"time"
)

// JobStatus is a batch job's status (spec §3).
type JobStatus string

// Job statuses.
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobCompleted JobStatus = "completed"
	JobFailed    JobStatus = "failed"
)

// Job is a batch job's record. Its addresses and results are separate keys
// (jobaddr/, jobres/).
type Job struct {
	ID         string    `json:"id"`
	Account    string    `json:"account"`
	Status     JobStatus `json:"status"`
	ListName   string    `json:"list_name,omitempty"`
	WebhookURL string    `json:"webhook_url,omitempty"`
	// Total is the number of addresses; Processed the number with a
	// result, and Counts those by result status.
	Total     int            `json:"total"`
	Processed int            `json:"processed"`
	Counts    map[string]int `json:"counts,omitempty"`
	// Reasons counts the results by verdict and reason (checks.reason),
	// keyed ReasonKey(status, reason): the breakdown of GET /v1/jobs/{id}.
	// A result with no reason is counted in Counts only.
	Reasons map[string]int `json:"reasons,omitempty"`
	// Reserved is the credits reserved at creation (= Total). When the job
	// ends, Used (= Processed) of them are spent and Refunded return.
	Reserved    int64     `json:"reserved"`
	Used        int64     `json:"used"`
	Refunded    int64     `json:"refunded"`
	CreatedAt   time.Time `json:"created_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// Error is why a failed job failed.
	Error string `json:"error,omitempty"`
}

// Active reports whether the job is queued or running.
func (j Job) Active() bool { return j.Status == JobQueued || j.Status == JobRunning }

// Count returns the number of results with that status.
func (j Job) Count(status string) int { return j.Counts[status] }

// Clone returns a copy that shares no map with j.
func (j Job) Clone() Job {
	j.Counts = maps.Clone(j.Counts)
	j.Reasons = maps.Clone(j.Reasons)
	return j
}

// CountResult counts a new result of the job: Processed, Counts and
// Reasons. Both backends count with it.
func (j *Job) CountResult(r *Result) {
	if j.Counts == nil {
		j.Counts = make(map[string]int)
	}
	j.Processed++
	j.Counts[r.Status]++
	if r.Reason != "" {
		if j.Reasons == nil {
			j.Reasons = make(map[string]int)
		}
		j.Reasons[ReasonKey(r.Status, r.Reason)]++
	}
}

// ReasonKey is the key of Job.Reasons for a verdict and its reason.
func ReasonKey(status, reason string) string { return status + "/" + reason }

// SplitReasonKey returns the verdict and reason of a Job.Reasons key.
func SplitReasonKey(k string) (status, reason string) {
	status, reason, _ = strings.Cut(k, "/")
	return status, reason
}

// JobSpec is what CreateJob needs.
type JobSpec struct {
	// ID is the job id, a canonical UUID; empty: a new UUIDv4.
	ID      string
	Account string
	// Addresses are the job's addresses, each in its canonical form and
	// de-duplicated (compared lower-cased) by the caller (spec §2.2); a
	// duplicate is refused.
	// Each reserves one credit.
	Addresses  []string
	ListName   string
	WebhookURL string
	// Idem, when set, completes that idempotency record in the job's
	// batch with the response Respond builds from the new job (the 202).
	Idem    *IdemRef
	Respond func(Job) (IdemResponse, error)
	// IdemHash, with Idem, says that BeginIdem could not record Idem (the
	// store failed and the request went on without it): the job's batch
	// records it, completed, with this request hash, as
	// ChargeRequest.IdemHash does for a validation, so that a retry
	// replays the 202 instead of creating a second job.
	IdemHash []byte
}

// JobResult is the result of the job's address at Index.
type JobResult struct {
	Index  int
	Result Result
}

// JobFinish is how a job ends.
type JobFinish struct {
	// Status is JobCompleted (every address has a result) or JobFailed.
	Status JobStatus
	// Error is why the job failed.
	Error string
	// Event, when set, returns the event to enqueue in the same batch
	// (batch.completed, batch.failed), built from the ended job (its
	// CompletedAt, Processed, Counts); nil for none.
	Event func(Job) (*Event, error)
}

// ErrStop, returned by an iteration callback, ends the iteration early
// without an error.
var ErrStop = errors.New("storage: stop iteration")
