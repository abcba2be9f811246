package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Outcome is how a leased session ended, as told to Lease.Release. It feeds
// the address's health counters and, for the three that say "not now, not
// from you" (Greylisted, RateLimited, Policy), the pair's cooldown.
type Outcome uint8

// Outcomes. The zero value is OutcomeOK.
const (
	// OutcomeOK: the session completed, whatever the mailboxes' answers
	// (accepted, no such mailbox, full, ...). Resets the pair's backoff.
	OutcomeOK Outcome = iota
	// OutcomeGreylisted: a 4xx greylisting reply on RCPT (smtpclient
	// Greylisted). Cools the pair.
	OutcomeGreylisted
	// OutcomeRateLimited: the server limits the prober's connections or
	// rate (421, or 4.7.x "too many connections"). Cools the pair.
	OutcomeRateLimited
	// OutcomePolicy: a refusal of the prober itself, not of a mailbox (by
	// its words, its place or a control: probe/README.md). Cools the pair
	// and counts towards the address's reputation (reputation.go).
	OutcomePolicy
	// OutcomeTempFail: another temporary failure (4xx outside RCPT).
	OutcomeTempFail
	// OutcomeConnectFailed: the TCP connection could not be made.
	OutcomeConnectFailed
	// OutcomeTimeout: the server did not answer in time.
	OutcomeTimeout
	// OutcomeProtocol: the server broke the protocol (unparseable reply,
	// unexpected close, TLS failure).
	OutcomeProtocol
	// OutcomeCanceled: the lease was not used, or the caller gave up (its
	// context ended). Counted, with no other effect. Release treats values
	// outside this list as OutcomeCanceled.
	OutcomeCanceled

	numOutcomes = iota
)

var outcomeNames = [numOutcomes]string{
	OutcomeOK:            "ok",
	OutcomeGreylisted:    "greylisted",
	OutcomeRateLimited:   "rate_limited",
	OutcomePolicy:        "policy",
	OutcomeTempFail:      "temp_fail",
	OutcomeConnectFailed: "connect_failed",
	OutcomeTimeout:       "timeout",
	OutcomeProtocol:      "protocol",
	OutcomeCanceled:      "canceled",
}

// String returns the outcome's snake_case name, as used in logs, metrics,
// snapshots and the saved state.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText encodes o by name.
func (o Outcome) MarshalText() ([]byte, error) {
	if int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("egress: unknown outcome %d", o)
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText decodes an outcome name.
func (o *Outcome) UnmarshalText(b []byte) error {
	v, ok := parseOutcome(string(b))
	if !ok {
		return fmt.Errorf("egress: unknown outcome %q", b)
	}
	*o = v
	return nil
}

func parseOutcome(s string) (Outcome, bool) {
	for i, n := range outcomeNames {
		if n == s {
			return Outcome(i), true
		}
	}
	return 0, false
}

// cools reports whether o starts a cooldown of its pair.
func (o Outcome) cools() bool {
	return o == OutcomeGreylisted || o == OutcomeRateLimited || o == OutcomePolicy
}

// Event kinds.
const (
	// EventCooldown: a greylisting or rate-limiting reply cooled the pair
	// (Addr, Dest) until Until. Reason is the outcome's name.
	EventCooldown = "cooldown"
	// EventPolicyBlock: Dest refused Addr by policy (5.7.x); the pair cools
	// until Until. Reason is "policy".
	EventPolicyBlock = "policy_block"
	// EventReputation: Addr's share of sessions blocked by policy stands
	// out from the pool's (reputation.go); Reason gives the figures. This is
	// the event behind the reputation.warning webhook. The address stays in
	// rotation: taking it out is the caller's decision (Disable).
	EventReputation = "reputation"
	// EventDisabled: Addr was taken out of rotation, for Reason (Disable,
	// or Lease.DialContext could not bind it).
	EventDisabled = "disabled"
	// EventEnabled: Addr is back in rotation (Enable).
	EventEnabled = "enabled"
	// EventDrained: Addr, removed by SetAddresses, has no session left and
	// is gone from the pool.
	EventDrained = "drained"
)

// Event is something an operator may want to hear about: a cooldown, a
// policy block, a reputation warning, a change of the pool. Dest is set for
// cooldown and policy_block, Until for those two and is otherwise zero.
type Event struct {
	Kind   string     `json:"kind"`
	Addr   netip.Addr `json:"addr"` // zero: the system address
	Dest   netip.Addr `json:"dest,omitzero"`
	Until  time.Time  `json:"until,omitzero"`
	Reason string     `json:"reason,omitempty"`
	At     time.Time  `json:"at"`
}

// Errors.
var (
	// ErrAllCooling: every address that could serve the destination is
	// cooling for it. Acquire returns it as a *CoolingError.
	ErrAllCooling = errors.New("egress: every address is cooling for the destination")
	// ErrNoAddress: no address of the pool can serve the destination: none
	// of its family, or all disabled or draining.
	ErrNoAddress = errors.New("egress: no usable address for the destination")
	// ErrInvalidDest: Acquire was given an invalid or unspecified
	// destination.
	ErrInvalidDest = errors.New("egress: invalid destination address")
	// ErrClosed: the pool is closed.
	ErrClosed = errors.New("egress: pool closed")
	// ErrUnknownAddress: the address is not in the pool.
	ErrUnknownAddress = errors.New("egress: address not in the pool")
	// ErrReleased: the lease was used after Release.
	ErrReleased = errors.New("egress: lease already released")
	// ErrWrongDestination: Lease.DialContext was asked to dial another
	// host than the one the lease is for.
	ErrWrongDestination = errors.New("egress: dial target is not the leased destination")
)

// CoolingError is the error of an Acquire that found every eligible
// address cooling for Dest. It matches ErrAllCooling with errors.Is.
type CoolingError struct {
	Dest netip.Addr
	// RetryAt is the earliest end of those cooldowns.
	RetryAt time.Time
	// Cause is the outcome that started the cooldown ending at RetryAt:
	// OutcomeGreylisted, OutcomeRateLimited (a busy or limiting server) or
	// OutcomePolicy (a 5.7.x block of the prober). A real-time caller
	// that cannot wait answers with it at once.
	Cause Outcome
}

func (e *CoolingError) Error() string {
	return fmt.Sprintf("egress: every address is cooling for %s until %s (%s)", e.Dest, e.RetryAt.UTC().Format(time.RFC3339), e.Cause)
}

// Is makes errors.Is(err, ErrAllCooling) true.
func (e *CoolingError) Is(target error) bool { return target == ErrAllCooling }
