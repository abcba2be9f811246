package storage

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/verifyd/verifyd/internal/dnsname"
)

// The records every backend makes the same way: the checks of their
// arguments, their ids and secrets. A backend stores them; it does not
// make its own.

// NewAccount checks an account's name and plan and makes the account: a
// new id ("acct_" and 20 of [a-z0-9]), the name trimmed, a new webhook
// secret, created now (to the millisecond). The caller makes sure the id
// is not taken.
func NewAccount(name string, plan Plan, now time.Time) (Account, error) {
	if err := CheckPlan(plan); err != nil {
		return Account{}, err
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

// NewAccountID is a new account id: "acct_" and 20 of [a-z0-9].
func NewAccountID() string { return newAccountID() }

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
		if s != ScopeValidateRead && s != ScopeValidateWrite && s != ScopeOutcomesWrite {
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

// CheckJobSpec checks a job about to be created, and gives it a new
// UUIDv4 when its ID is empty. The addresses are checked by the backend
// as it stores them (or by CheckJobAddresses).
func CheckJobSpec(spec *JobSpec) error {
	if spec.ID == "" {
		spec.ID = NewUUIDv4()
	}
	switch {
	case !ValidUUID(spec.ID):
		return invalidf("job id %q is not a canonical UUID", spec.ID)
	case len(spec.Addresses) == 0 || len(spec.Addresses) > 1<<24:
		return invalidf("a job has 1 to %d addresses, not %d", 1<<24, len(spec.Addresses))
	case spec.Idem != nil && spec.Respond == nil:
		return invalidf("JobSpec.Idem needs Respond for the response")
	case spec.Idem != nil && spec.Idem.Account != spec.Account:
		return invalidf("idempotency key of another account")
	}
	return nil
}

// CheckJobAddresses refuses an empty or repeated address.
func CheckJobAddresses(addrs []string) error {
	seen := make(map[string]struct{}, len(addrs))
	for i, a := range addrs {
		if a == "" {
			return invalidf("address %d is empty", i)
		}
		if _, dup := seen[a]; dup {
			return invalidf("address %d (%q) is a duplicate", i, a)
		}
		seen[a] = struct{}{}
	}
	return nil
}

// JobSliceSize is the mean number of addresses of a job slice: the unit
// of work the boxes of a fleet lease (JobLeases).
const JobSliceSize = 1000

// JobSliceCount is the number of slices of a job of n addresses.
func JobSliceCount(n int) int { return max(1, (n+JobSliceSize-1)/JobSliceSize) }

// JobSliceOf is the slice of a job of n slices that addr belongs to: by
// a hash of its domain (what follows the last @, folded: dnsname.Fold),
// so that one domain's addresses are all in one slice.
func JobSliceOf(addr string, n int) int {
	d := dnsname.Fold(addr[strings.LastIndexByte(addr, '@')+1:])
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(d); i++ {
		h = (h ^ uint32(d[i])) * 16777619
	}
	return int(h % uint32(n))
}

// PrepareEvent checks an event about to be enqueued and fills in its
// defaults: a UUIDv7 id, created and due now; times to the millisecond,
// in UTC.
func PrepareEvent(ev *Event, now time.Time) error {
	if ev.ID == "" {
		ev.ID = NewUUIDv7(now)
	}
	switch {
	case !validID(ev.ID):
		return invalidf("event id %q", ev.ID)
	case ev.Type == "" || ev.URL == "":
		return invalidf("an event needs a type and a URL")
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = now
	}
	if ev.NextAttempt.IsZero() {
		ev.NextAttempt = now
	}
	ev.CreatedAt = ev.CreatedAt.UTC().Truncate(time.Millisecond)
	ev.NextAttempt = ev.NextAttempt.UTC().Truncate(time.Millisecond)
	return nil
}

// CheckEmail checks a user's email (trimmed by the caller).
func CheckEmail(email string) error { return checkEmail(email) }

// NewSessionToken makes a session token "<id>.<secret>" and its SHA-256.
func NewSessionToken() (id, token string, hash []byte) {
	id = randomString(sessionIDLen, alphaLowerDigits)
	token = id + "." + randomString(tokenSecret, alphaBase62)
	sum := sha256.Sum256([]byte(token))
	return id, token, sum[:]
}

// SessionID returns the id of a well-formed session token.
func SessionID(token string) (string, bool) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || len(id) != sessionIDLen || len(secret) != tokenSecret {
		return "", false
	}
	return id, true
}

// NewInviteToken makes an invitation token "inv_<id>_<secret>" and its
// SHA-256.
func NewInviteToken() (id, token string, hash []byte) {
	id = randomString(inviteIDLen, alphaLowerDigits)
	token = inviteLead + id + "_" + randomString(tokenSecret, alphaBase62)
	sum := sha256.Sum256([]byte(token))
	return id, token, sum[:]
}

// InviteID returns the id of a well-formed invitation token.
func InviteID(token string) (string, bool) { return parseInvite(token) }

// TokenMatches compares a token with a stored SHA-256, in constant time.
func TokenMatches(token string, hash []byte) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}

// NewUserID is "user_" and 20 of [a-z0-9].
func NewUserID() string { return "user_" + randomString(20, alphaLowerDigits) }

// Clip cuts s to at most n bytes of valid UTF-8.
func Clip(s string, n int) string { return clip(s, n) }

// Redeem applies a pending invitation to u at now: the membership is
// added (or raised to owner, never lowered) and the invitation marked
// used by u.
func Redeem(iv *Invite, u *User, now time.Time) {
	now = now.Truncate(time.Millisecond)
	if i := slices.IndexFunc(u.Accounts, func(m Membership) bool { return m.Account == iv.Account }); i >= 0 {
		if iv.Role == RoleOwner {
			u.Accounts[i].Role = RoleOwner
		}
	} else {
		u.Accounts = append(u.Accounts, Membership{Account: iv.Account, Role: iv.Role, Since: now})
	}
	iv.RedeemedBy, iv.RedeemedAt = u.ID, now
}

// InviteEnded is when an invitation stopped being pending (redeemed,
// revoked or expired): PurgeSessions drops it 30 days later.
func InviteEnded(iv Invite) time.Time {
	switch {
	case !iv.RedeemedAt.IsZero():
		return iv.RedeemedAt
	case !iv.RevokedAt.IsZero():
		return iv.RevokedAt
	}
	return iv.ExpiresAt
}

// CheckSecretName checks the name of a Secret.
func CheckSecretName(name string) error {
	if !validID(name) {
		return invalidf("secret name %q", name)
	}
	return nil
}

// validID reports whether s may be a key component followed by "/": 1 to
// 64 bytes of [A-Za-z0-9._:-]. Account ids, job ids and event ids are.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidID reports whether s can be an id in a key of the Pebble layout (1
// to 64 of [A-Za-z0-9._:-]): result, event and secret names.
func ValidID(s string) bool { return validID(s) }
