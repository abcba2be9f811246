package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of these or is
// an *InsufficientCreditsError (which matches ErrInsufficientCredits), or
// comes from Pebble or the file system.
var (
	// ErrNotFound: no such record (account, key, job, result, event), or
	// a record of another account where the call names the account.
	ErrNotFound = errors.New("storage: not found")
	// ErrExists: a record with that id already exists.
	ErrExists = errors.New("storage: already exists")
	// ErrInvalid: an argument the package refuses (an empty scope list, a
	// negative amount, a malformed id). The message names the argument.
	ErrInvalid = errors.New("storage: invalid argument")
	// ErrClosed: the DB was closed.
	ErrClosed = errors.New("storage: closed")
	// ErrKeyInvalid: an API key that is malformed, unknown, or whose secret
	// does not match. The server answers 401 without telling which.
	ErrKeyInvalid = errors.New("storage: invalid API key")
	// ErrKeyRevoked: an API key that was revoked (also a 401).
	ErrKeyRevoked = errors.New("storage: API key revoked")
	// ErrHoldNotActive: Charge or Release of a hold that was already
	// charged or released (or released by Open after a crash).
	ErrHoldNotActive = errors.New("storage: hold not active")
	// ErrJobState: a job operation its status does not allow (results for
	// a finished job, completing a job with addresses left).
	ErrJobState = errors.New("storage: wrong job status")
	// ErrInsufficientCredits matches every *InsufficientCreditsError with
	// errors.Is.
	ErrInsufficientCredits = errors.New("storage: insufficient credits")
	// ErrNoSpace: the store refuses writes because its disk is (nearly)
	// full. Nothing of the call was written; reads still work, and
	// writes are taken again by themselves once space is freed. The API
	// answers 500 with Retry-After, safe to retry (see NoSpace).
	ErrNoSpace = errors.New("storage: disk full: writes refused until space is freed")
	// ErrIdemAnswered: a charge whose request went on without its
	// Idempotency-Key (ChargeRequest.IdemHash: BeginIdem failed) finds
	// the key answered meanwhile, by an earlier try of the same request
	// whose answer was lost. Nothing is charged; the request fails (a
	// 500, safe to retry), and its retry replays the answer kept.
	ErrIdemAnswered = errors.New("storage: the idempotency key was answered by another request")
)

// Unavailable reports whether err says the store could not be reached or
// could not take the call for now, a state that passes by itself: its
// disk is full (NoSpace), the connection to the database failed or timed
// out, or the database is shutting down, restarting or out of resources
// (SQLSTATE classes 08, 53 and 57P). Work that can wait (a batch job's
// writes) waits for it instead of counting it as a failure.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if NoSpace(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		c := st.SQLState()
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || strings.HasPrefix(c, "57P")
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// pgx marks the errors of a connection that failed before the
	// statement reached the server (a refused or dropped connection).
	var sr interface{ SafeToRetry() bool }
	return errors.As(err, &sr) && sr.SafeToRetry()
}

// NoSpace reports whether err says the store's disk is full: ErrNoSpace
// (Pebble's guard), or a database error with SQLSTATE 53100 (PostgreSQL's
// disk_full; any driver error with a SQLState method).
func NoSpace(err error) bool {
	if errors.Is(err, ErrNoSpace) {
		return true
	}
	var st interface{ SQLState() string }
	return errors.As(err, &st) && st.SQLState() == "53100"
}

// InsufficientCreditsError is returned by Hold and CreateJob when the
// account's available credits (Current − Held) are fewer than Needed. It
// carries what the API's error details report (spec §7: currentCredits,
// needed, deltaShortfall).
type InsufficientCreditsError struct {
	// Current is the balance: credits neither charged nor reserved by jobs.
	Current int64
	// Held is the part of Current held by validations in flight.
	Held int64
	// Needed is what the call asked for.
	Needed int64
}

func (e *InsufficientCreditsError) Error() string {
	return fmt.Sprintf("storage: insufficient credits: %d needed, %d available (balance %d, %d held)",
		e.Needed, e.Available(), e.Current, e.Held)
}

// Is makes errors.Is(err, ErrInsufficientCredits) true.
func (e *InsufficientCreditsError) Is(target error) bool { return target == ErrInsufficientCredits }

// Available is the balance not held by validations in flight.
func (e *InsufficientCreditsError) Available() int64 { return e.Current - e.Held }

// Shortfall is how many credits more the call needed (deltaShortfall).
func (e *InsufficientCreditsError) Shortfall() int64 { return e.Needed - e.Available() }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
