package storage

import (
	"time"
)

// Export: a box's shared state as a stream of records, for moving it into
// a fleet (verifyctl db export, then db import into PostgreSQL). Records
// come kind by kind, in an order an importer can write them in: accounts
// first, then what refers to them. Holds are not exported: Open released
// those of the last process (their validations never answered). Egress
// state stays behind: it is the box's own.

// Record types of an export, in the order Export gives them.
const (
	RecAccount     = "account"
	RecKey         = "key"
	RecEntry       = "entry"
	RecResult      = "result"
	RecCache       = "cache"
	RecIdem        = "idem"
	RecJob         = "job"
	RecOutbox      = "outbox"
	RecDeadLetter  = "dead_letter"
	RecHookLast    = "hook_last"
	RecUser        = "user"
	RecInvite      = "invite"
	RecSession     = "session"
	RecSecret      = "secret"
	RecSigningKeys = "signing_keys"
)

// Record is one record of an export: Type says which field is set.
type Record struct {
	Type    string   `json:"type"`
	Account *Account `json:"account,omitempty"`
	Key     *APIKey  `json:"key,omitempty"`
	Entry   *Entry   `json:"entry,omitempty"`
	// Result is a result with its history position (Pos).
	Result *Result `json:"result,omitempty"`
	Pos    int64   `json:"pos,omitempty"`
	// Cache is a cache:true index entry.
	Cache *CacheEntry `json:"cache,omitempty"`
	Idem  *IdemRecord `json:"idem,omitempty"`
	// Job comes with its addresses, in index order.
	Job     *Job     `json:"job,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
	Event   *Event   `json:"event,omitempty"`
	User    *User    `json:"user,omitempty"`
	Invite  *Invite  `json:"invite,omitempty"`
	Session *Session `json:"session,omitempty"`
	// Name and Value are a named secret's (RecSecret); Value alone the
	// signing key set's document (RecSigningKeys).
	Name  string `json:"name,omitempty"`
	Value []byte `json:"value,omitempty"`
}

// CacheEntry is an entry of the cache:true index: an account's latest
// fresh result for an address (lower-cased).
type CacheEntry struct {
	Account  string    `json:"account"`
	Email    string    `json:"email"`
	ResultID string    `json:"result_id"`
	ProbedAt time.Time `json:"probed_at"`
}
