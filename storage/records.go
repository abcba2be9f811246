package storage

import (
	"crypto/sha256"
	"crypto/subtle"
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
