package storage

import (
	"fmt"
	"time"
)

// Idempotency records (spec §7 rule 3). A request with an Idempotency-Key
// starts with BeginIdem, which answers one of:
//
//   - IdemNew: no live record; a pending one now holds the key. Process the
//     request, then CompleteIdem with the response (or let Charge or
//     CreateJob complete it in their batch), or AbortIdem if the request
//     failed in a way worth retrying (a 500).
//   - IdemInFlight: the same request is being processed by this process
//     right now (a concurrent duplicate).
//   - IdemReplay: the request was answered; replay the stored response.
//   - IdemMismatch: the key was used with another request body (409).
//
// Records expire Options.IdemTTL (24 h) after BeginIdem created them; an
// expired record counts as absent at once and the background loop deletes
// it later. A pending record names the process (bootID) that wrote it: one
// left by a crashed process is taken over by the next BeginIdem, since that
// request never answered.
//
// Durability: BeginIdem, CompleteIdem and AbortIdem do not sync. The spec
// makes the store fail-open (a request is processed normally when it is
// unavailable), so a record lost in a crash costs what an unavailable store
// costs. The responses that matter, those that spend credits, are
// completed inside the synced batch of the charge or of the job's
// reservation (ChargeRequest.Idem, JobSpec.Idem), so a crash can never
// leave a charge without its replayable response.

// IdemRef names an idempotency record: the key a client sent to an
// endpoint of an account.
type IdemRef struct {
	Account  string
	Endpoint string
	Key      string
}

// IdemResponse is a stored response.
type IdemResponse struct {
	Status int
	Header []HeaderField
	Body   []byte
}

// HeaderField is one response header.
type HeaderField struct{ Name, Value string }

// IdemRecord is a stored idempotency record.
type IdemRecord struct {
	IdemRef
	// RequestHash is the caller's digest of the request (of its body).
	RequestHash []byte
	// Done: Response holds the answer; otherwise the request is pending.
	Done      bool
	Response  IdemResponse
	CreatedAt time.Time
	ExpiresAt time.Time

	// Owner, on a single box, is the process whose request a pending
	// record is (Pebble's boot id): one left by a process that died is
	// taken over. Not part of the record's meaning; not exported.
	Owner uint64 `json:"-"`
}

// IdemOutcome is what BeginIdem found.
type IdemOutcome int

// BeginIdem outcomes.
const (
	IdemNew IdemOutcome = iota
	IdemInFlight
	IdemReplay
	IdemMismatch
)

var idemOutcomeNames = [...]string{"new", "in_flight", "replay", "mismatch"}

func (o IdemOutcome) String() string {
	if o >= 0 && int(o) < len(idemOutcomeNames) {
		return idemOutcomeNames[o]
	}
	return fmt.Sprintf("IdemOutcome(%d)", int(o))
}

func (ref IdemRef) check() error {
	if ref.Endpoint == "" || ref.Key == "" {
		return invalidf("idempotency record needs an endpoint and a key")
	}
	return nil
}
