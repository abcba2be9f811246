package storage

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The records every backend makes the same way: the checks of their
// arguments, their ids and secrets. A backend stores them; it does not
// make its own.

// NewAccount checks an account's name and plan and makes the account: a
// new id ("acct_" and 20 of [a-z0-9]), the name trimmed, a new webhook
// secret, created now (to the millisecond). The caller makes sure the id
// is not taken.
func NewAccount(name string, plan Plan, now time.Time) (Account, error) {
	if !plan.Valid() {
		return Account{}, invalidf("unknown plan %q", plan)
	}
	if len(name) > 200 {
		return Account{}, invalidf("account name longer than 200 bytes")
	}
	return Account{
		ID:            newAccountID(),
		Name:          strings.TrimSpace(name),
		Plan:          plan,
		WebhookSecret: newWebhookSecret(),
		CreatedAt:     now.Truncate(time.Millisecond),
	}, nil
}

// newAccountID is "acct_" and 20 of [a-z0-9].
func newAccountID() string { return "acct_" + randomString(20, alphaLowerDigits) }

// NewKey checks a key's scopes and label and makes the key string (shown
// once) and its record: a new prefix, the SHA-256 of the whole string,
// the scopes sorted without repeats, created now (to the millisecond).
// The caller makes sure the prefix is not taken and the account exists.
func NewKey(account string, scopes []string, label string, now time.Time) (string, APIKey, error) {
	if len(scopes) == 0 {
		return "", APIKey{}, invalidf("a key needs at least one scope")
	}
	for _, s := range scopes {
		if s != ScopeValidateRead && s != ScopeValidateWrite {
			return "", APIKey{}, invalidf("unknown scope %q", s)
		}
	}
	if len(label) > 200 {
		return "", APIKey{}, invalidf("key label longer than 200 bytes")
	}
	scopes = slices.Clone(scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	prefix := randomString(KeyPrefixLen, alphaLowerDigits)
	full := keyLead + prefix + "_" + randomString(KeySecretLen, alphaBase62)
	sum := sha256.Sum256([]byte(full))
	return full, APIKey{
		Prefix:    prefix,
		Account:   account,
		Label:     label,
		Scopes:    scopes,
		Hash:      sum[:],
		CreatedAt: now.Truncate(time.Millisecond),
	}, nil
}

// MatchKey checks a presented key string against the record of its
// prefix, in constant time: ErrKeyInvalid when the secret does not match,
// ErrKeyRevoked when it matches a revoked key.
func MatchKey(key string, k APIKey) error {
	sum := sha256.Sum256([]byte(key))
	if subtle.ConstantTimeCompare(sum[:], k.Hash) != 1 {
		return ErrKeyInvalid
	}
	if k.Revoked {
		return ErrKeyRevoked
	}
	return nil
}

// NewWebhookSecret is a new webhook secret: "whsec_" and 32 random bytes,
// base64url.
func NewWebhookSecret() string { return newWebhookSecret() }

// PrepareResult checks a result about to be stored and fills in its ID
// (a UUIDv7 of now) and ProbedAt (now) when they are zero; ProbedAt is
// kept to the millisecond, in UTC.
func PrepareResult(r *Result, now time.Time) error {
	if r.Email == "" || r.Status == "" {
		return invalidf("a result needs an email and a status")
	}
	if r.Score < 0 || r.Score > 100 {
		return invalidf("score %d is not 0 to 100", r.Score)
	}
	if r.Kind != KindSingle && r.Kind != KindBatch {
		return invalidf("result kind %q", r.Kind)
	}
	if r.ID == "" {
		r.ID = NewUUIDv7(now)
	} else if !validID(r.ID) {
		return invalidf("result id %q", r.ID)
	}
	if r.ProbedAt.IsZero() {
		r.ProbedAt = now
	}
	r.ProbedAt = r.ProbedAt.UTC().Truncate(time.Millisecond)
	if ms := r.ProbedAt.UnixMilli(); ms < 0 || ms > maxPosMs {
		return invalidf("probed_at %v out of range", r.ProbedAt)
	}
	return nil
}

// CheckCharge checks what a charge of account stores: a single result of
// that account (Account and Kind filled in when empty), and an
// idempotency record only with the Seal that makes its response.
func CheckCharge(account string, req *ChargeRequest) error {
	r := &req.Result
	if r.Account == "" {
		r.Account = account
	}
	if r.Kind == "" {
		r.Kind = KindSingle
	}
	if r.Account != account || r.Kind != KindSingle || r.JobID != "" {
		return invalidf("a charge stores a single result of the charged account")
	}
	if req.Idem != nil && req.Seal == nil {
		return invalidf("ChargeRequest.Idem needs Seal for the response")
	}
	if req.Idem != nil && req.Idem.Account != account {
		return invalidf("idempotency key of another account")
	}
	return nil
}

// CheckIdemRef checks an idempotency record's name.
func CheckIdemRef(ref IdemRef) error { return ref.check() }

// VoidNote is the note of the ledger entry that gives back a charge whose
// receipt could not be sealed.
func VoidNote(seq uint64) string { return fmt.Sprintf("void charge %d: receipt not sealed", seq) }

// CacheEmail is the form of an address the cache:true index keys it by:
// lower-cased.
func CacheEmail(email string) string { return strings.ToLower(email) }

// HistoryArgs checks ListHistory's arguments and returns the kind
// (HistoryAll for ""), the position the rows must be below (the cursor's
// instant in nanoseconds; math.MaxInt64 without one; 0 or less: no row
// can be) and the page size (DefaultHistoryLimit for 0).
func HistoryArgs(kind, cursor string, limit int) (string, int64, int, error) {
	switch kind {
	case "":
		kind = HistoryAll
	case HistoryAll, HistorySingle, HistoryBatch:
	default:
		return "", 0, 0, invalidf("history kind %q", kind)
	}
	if limit == 0 {
		limit = DefaultHistoryLimit
	}
	if limit < 0 || limit > 10_000 {
		return "", 0, 0, invalidf("history limit %d", limit)
	}
	before := int64(math.MaxInt64)
	if cursor != "" {
		c, err := ParseCursor(cursor)
		if err != nil {
			return "", 0, 0, err
		}
		before = c
	}
	return kind, before, limit, nil
}
