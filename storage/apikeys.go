package storage

import (
	"slices"
	"strings"
	"time"
)

// API key scopes (spec §5), and outcomes:write: a key that may report
// delivery outcomes (POST /v1/outcomes) and nothing else.
const (
	ScopeValidateRead  = "validate:read"
	ScopeValidateWrite = "validate:write"
	ScopeOutcomesWrite = "outcomes:write"
)

// The API key format, spec §5: svc_live_<prefix>_<secret>.
const (
	// KeyPrefixLen is the length of a key's prefix: [a-z0-9], 62 bits.
	KeyPrefixLen = 12
	// KeySecretLen is the length of a key's secret: [A-Za-z0-9], 256 bits.
	KeySecretLen = 43
	keyLead      = "svc_live_"
	keyLen       = len(keyLead) + KeyPrefixLen + 1 + KeySecretLen
)

// APIKey is the stored record of an API key. The secret itself is never
// stored: only Hash, the SHA-256 of the whole key string.
//
// Why SHA-256 and not bcrypt or Argon2: those slow hashes protect
// passwords, which have little entropy, against guessing. A key secret is
// 43 characters drawn uniformly from 62 (256 bits, crypto/rand): nobody
// can guess it from its hash faster than by guessing it outright, so a
// fast hash is as safe, and authentication stays a map lookup and one
// SHA-256 (about a microsecond) per request instead of ~50 ms of bcrypt.
type APIKey struct {
	// Prefix identifies the key (the <prefix> of the key string) and finds
	// its record in O(1); it is not secret and may be shown and logged.
	Prefix  string   `json:"prefix"`
	Account string   `json:"account"`
	Label   string   `json:"label,omitempty"`
	Scopes  []string `json:"scopes"`
	// Hash is SHA-256 of the whole key string.
	Hash      []byte    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// LastUsed is when the key last authenticated a request, to the
	// minute: VerifyKey notes each use in memory and writes the record
	// (unsynced) at most once a minute per key, so a crash may forget the
	// last minute of it. Zero: never used.
	LastUsed time.Time `json:"last_used,omitzero"`
}

// HasScope reports whether the key grants scope.
func (k APIKey) HasScope(scope string) bool { return slices.Contains(k.Scopes, scope) }

// Clone returns a copy that shares no slice with k.
func (k APIKey) Clone() APIKey {
	k.Scopes = slices.Clone(k.Scopes)
	k.Hash = slices.Clone(k.Hash)
	return k
}

// ParseKey splits a key string svc_live_<prefix>_<secret>. The prefix has a
// fixed length and no "_", so the split is unambiguous; ok is false for
// anything that does not have the exact shape.
func ParseKey(key string) (prefix, secret string, ok bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyLead) || key[len(keyLead)+KeyPrefixLen] != '_' {
		return "", "", false
	}
	prefix = key[len(keyLead) : len(keyLead)+KeyPrefixLen]
	secret = key[len(keyLead)+KeyPrefixLen+1:]
	for i := 0; i < len(prefix); i++ {
		if !strings.ContainsRune(alphaLowerDigits, rune(prefix[i])) {
			return "", "", false
		}
	}
	for i := 0; i < len(secret); i++ {
		if !strings.ContainsRune(alphaBase62, rune(secret[i])) {
			return "", "", false
		}
	}
	return prefix, secret, true
}
