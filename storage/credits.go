package storage

import (
	"fmt"
	"time"
)

// EntryKind is what a ledger entry records.
type EntryKind uint8

// Ledger entry kinds. Delta is the change of the balance; Held the credits
// held by validations in flight after the entry.
const (
	// EntryAdd: the operator added Amount credits (Delta = +Amount).
	EntryAdd EntryKind = iota + 1
	// EntrySet: the operator set the balance to Amount.
	EntrySet
	// EntryHold: a validation holds Amount credits while the engine runs
	// (Delta 0, Held +Amount).
	EntryHold
	// EntryCharge: the validation returned a result; its hold (HoldSeq)
	// becomes a charge (Delta −Amount, Held −Amount). Ref is the result id.
	EntryCharge
	// EntryRelease: the validation failed, or its process died (Note
	// "released at open"); its hold (HoldSeq) ends uncharged (Delta 0,
	// Held −Amount).
	EntryRelease
	// EntryReserve: a batch job (Ref) reserves Amount credits, one per
	// address (Delta −Amount).
	EntryReserve
	// EntryUse: a batch job (Ref) ended having processed Amount addresses:
	// that much of its reservation is spent (Delta 0).
	EntryUse
	// EntryRefund: a batch job (Ref) ended; the unused part of its
	// reservation, Amount, returns to the balance (Delta +Amount).
	EntryRefund
)

var entryKindNames = [...]string{"", "add", "set", "hold", "charge", "release", "reserve", "use", "refund"}

func (k EntryKind) String() string {
	if int(k) < len(entryKindNames) && entryKindNames[k] != "" {
		return entryKindNames[k]
	}
	return fmt.Sprintf("EntryKind(%d)", uint8(k))
}

// MarshalText writes the kind's name (for JSON and logs).
func (k EntryKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name (an export's ledger entries).
func (k *EntryKind) UnmarshalText(b []byte) error {
	for i, n := range entryKindNames {
		if n != "" && n == string(b) {
			*k = EntryKind(i)
			return nil
		}
	}
	return fmt.Errorf("storage: unknown ledger entry kind %q", b)
}

// Entry is one ledger entry: one change of an account's credits. An
// account's entries are numbered 1, 2, 3… (Seq) and each carries the
// balance after it, so Balance of entry n is Balance of entry n−1 plus
// Delta; the balance of an account is the Balance of its last entry.
type Entry struct {
	Account string    `json:"account"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    EntryKind `json:"kind"`
	// Amount is the credits the entry is about (added, held, charged,
	// released, reserved, used, refunded; for EntrySet the new balance).
	Amount int64 `json:"amount"`
	// Delta is the change of Balance.
	Delta int64 `json:"delta"`
	// Balance is the balance after the entry: credits neither charged nor
	// reserved by a job. Held of them are held by validations in flight.
	Balance int64 `json:"balance"`
	Held    int64 `json:"held"`
	// HoldSeq, for a charge or release, is the Seq of the hold it ends.
	HoldSeq uint64 `json:"hold_seq,omitempty"`
	// Ref is the caller's reference: a request id for a hold, the result
	// id for a charge, the job id for reserve, use and refund.
	Ref  string `json:"ref,omitempty"`
	Note string `json:"note,omitempty"`
}

// Hold is credits held by one validation in flight, from Hold until Charge
// or Release.
type Hold struct {
	Account string
	// Seq is the ledger seq of the hold entry; it names the hold.
	Seq uint64
	N   int64
	Ref string
	At  time.Time
	// Part, when not 0, names a part of the hold Seq: on PostgreSQL a
	// box may hold a block of an account's credits as one hold and hand
	// each validation its credit from it (docs/fleet.md, credit leases).
	Part uint64
}

// Credits is an account's credit position.
type Credits struct {
	// Balance is what GET /v1/balance reports: credits neither charged nor
	// reserved by a batch job.
	Balance int64
	// Held is the part of Balance held by validations in flight.
	Held int64
}

// Available is what a new Hold or job reservation can take.
func (c Credits) Available() int64 { return c.Balance - c.Held }

// ChargeRequest is what Charge writes besides the charge.
type ChargeRequest struct {
	// Result is the validation's result, stored with its history row and
	// cache entry. Account and Kind may be left empty (the hold's account,
	// KindSingle); ID and ProbedAt are filled in when zero.
	Result Result
	// Seal, when set, is called once the result is final (its ID and
	// ProbedAt filled in) and the balance after the charge is known (the
	// receipt's credits_remaining); it returns the receipt to store as
	// Result.Receipt and, when Idem is set, the response to record for
	// the idempotency key. It runs without the account's lock, beside
	// other charges' Seals, but the account's later writes wait for it:
	// it must be quick (signing a receipt is) and must not call the DB.
	// When it fails the charge is voided by an entry that adds the
	// credits back.
	Seal func(r Result, balance int64) (Sealed, error)
	// Idem, when set, completes that idempotency record in the same synced
	// batch as the charge, with the response Seal returns: a client that
	// retries after a crash gets the replay, never a second charge.
	Idem *IdemRef
	// IdemHash, with Idem, says that BeginIdem could not record Idem (the
	// store failed before the request, which went on without it:
	// fail-open, spec §7.3). The charge then writes the key's completed
	// record itself, with this request hash, unless a live record of the
	// key exists: a retry with the key replays this charge instead of
	// making a second one, as if BeginIdem had worked.
	IdemHash []byte
}

// Sealed is what ChargeRequest.Seal returns.
type Sealed struct {
	Receipt  []byte
	Response IdemResponse
}

// Charged is what Charge returns.
type Charged struct {
	// Balance is the balance after the charge (credits_remaining).
	Balance int64
	Entry   Entry
	// Result is the stored result, with ID, HistoryID and ProbedAt set.
	Result Result
}
