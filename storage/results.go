package storage

import (
	"math"
	"time"
)

// Result kinds (spec §2.3, history row kind).
const (
	KindSingle = "single"
	KindBatch  = "batch"
)

// Result is one probe result: what a history row shows plus the receipt,
// which the package stores as the caller's opaque bytes.
type Result struct {
	// ID is a UUID (v7 when the package makes it). It is the cached_from
	// of rows served from this result.
	ID      string
	Account string
	Email   string
	// Status is the verdict; Score 0 to 100.
	Status string
	Score  int
	// Reason is the verdict's reason (checks.reason). It is counted in its
	// job's Job.Reasons and not stored: the receipt holds it.
	Reason string
	// Kind is KindSingle or KindBatch; JobID and JobIndex name the job
	// and address of a batch result.
	Kind     string
	JobID    string
	JobIndex int
	// LatencyMs is the probe's latency; −1 means null.
	LatencyMs int64
	// ProbedAt is stored with millisecond precision; zero means now.
	ProbedAt time.Time
	// CachedFrom is the ID of the result this one was served from
	// (cache: true), empty for a fresh probe.
	CachedFrom string
	// SkipCache keeps a fresh result out of the cache index (an unknown
	// verdict is not worth reusing). It is not stored.
	SkipCache bool
	// Repeats marks a cache hit that gives CachedFrom's verdict as it is
	// (not changed by delivery outcomes learnt since). It is not stored.
	// A store may then leave its verdict index as it is when the
	// address's latest verdict is CachedFrom's already: LatestVerdicts
	// then names CachedFrom's result (or an earlier repeat of it) for
	// the times after this one, the same verdict, given first at that
	// result's time.
	Repeats bool
	// HistoryID is the numeric id of the result's history row (spec §2.9
	// id), set by the package.
	HistoryID uint64
	// Receipt is the signed receipt, as the caller encoded it.
	Receipt []byte
}

// HistoryRow is one row of GET /v1/results (spec §2.9).
type HistoryRow struct {
	ID         uint64
	Email      string
	Status     string
	Score      int
	Kind       string
	JobID      string // empty: null
	LatencyMs  int64  // −1: null
	ProbedAt   time.Time
	CachedFrom string // empty: null
	ResultID   string
	// Pos is the row's place in the account's history (see Cursor).
	Pos int64
}

// Cursor returns the cursor that pages past this row (see FormatCursor).
func (r HistoryRow) Cursor() string { return FormatCursor(r.Pos) }

// --- history positions and the paging cursor

// A history row's position is a nanosecond timestamp, unique within its
// account: its probed_at millisecond times 10⁶ plus its rank among the
// account's rows of that millisecond (0 for the first written, 1 for the
// next…). Rows are listed by position, newest first; so rows sharing a
// millisecond come newest-written first, and a position names one row.
//
// The paging cursor (spec §4.6: "the probed_at of the last row of the
// previous page; rows strictly older than it are returned") is the last
// row's position written as an RFC 3339 date-time: its probed_at when its
// rank is 0 ("2026-11-21T10:00:00.123Z"), else with the rank in the six
// extra fractional digits ("2026-11-21T10:00:00.123000042Z"), still a valid
// ISO 8601 date-time within the right millisecond. Rows strictly older
// than the cursor's instant are the ones after it: walking pages loses and
// repeats no row, whatever the limit and however many rows share a
// millisecond. A client's own cursor with millisecond precision keeps the
// spec's meaning exactly: rows probed before that millisecond.

// PosPerMs is how many history positions a millisecond has.
const PosPerMs = posPerMs

const (
	posPerMs = 1_000_000
	// maxPosMs keeps positions within int64 (the year 2262).
	maxPosMs = (math.MaxInt64 - posPerMs) / posPerMs
)

// FormatCursor writes a position as a cursor.
func FormatCursor(pos int64) string {
	t := time.Unix(0, pos).UTC()
	if pos%posPerMs == 0 {
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.Format("2006-01-02T15:04:05.000000000Z07:00")
}

// ParseCursor reads a cursor: any RFC 3339 date-time (any offset, any
// number of fractional digits), as the instant in nanoseconds it names.
func ParseCursor(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, invalidf("cursor %q is not an RFC 3339 date-time", s)
	}
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0, nil
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64, nil
	}
	return t.UnixNano(), nil
}

// History filters (spec §4.6 kind).
const (
	HistoryAll    = "all"
	HistorySingle = KindSingle
	HistoryBatch  = KindBatch
)

// DefaultHistoryLimit is the page size when ListHistory gets limit 0.
const DefaultHistoryLimit = 50

// HistoryPage is one page of GET /v1/results.
type HistoryPage struct {
	Rows []HistoryRow
	// NextCursor pages on; empty (null) on the last page.
	NextCursor string
}
