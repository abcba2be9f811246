package pebble

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/verifyd/verifyd/storage"
)

// This file is the whole key layout of the database: every prefix, every
// key builder and key parser. Nothing else in the package spells a key.
//
// Conventions:
//   - Every key starts with an ASCII record prefix ending in "/", so two
//     prefixes never overlap ("job/" and "jobaddr/" differ at their fourth
//     byte) and a prefix scan sees one record type.
//   - Numbers are fixed-width big-endian (uint64: 8 bytes, uint32: 4) so
//     that byte order is numeric order.
//   - Newest first is spelled with inverted numbers (^n), so the wanted
//     order is a forward scan: Pebble's forward iteration is its fast path,
//     and a page needs no SeekLT/Prev dance.
//   - A variable-length text component (account id, job id) is followed by
//     "/" and may not contain "/" (validID); only the last component of a key
//     may be arbitrary bytes (an email address), because nothing follows it.
//   - Idempotency keys are client-chosen text of any bytes: their key
//     carries a SHA-256 digest of (endpoint, key) instead, and the record
//     repeats both in clear.

// Record prefixes. README.md has the same table with each value's encoding
// and durability.
const (
	prefixAccount    = "acct/"      // acct/<account>                              → Account (JSON)
	prefixAccountJob = "acctjob/"   // acctjob/<account>/<^created ms u64><job>    → empty: an account's jobs, newest first
	prefixAPIKey     = "key/"       // key/<prefix>                                → APIKey (JSON)
	prefixLedger     = "ledger/"    // ledger/<account>/<seq u64>                  → Entry (binary)
	prefixHold       = "hold/"      // hold/<account>/<ledger seq u64>             → Hold (binary), while active
	prefixResult     = "res/"       // res/<uuid>                                  → Result (binary), or a pointer into jobres/
	prefixHistory    = "hist/"      // hist/<account>/<kind s|b>/<^pos u64>        → HistoryRow (binary)
	prefixIdem       = "idem/"      // idem/<account>/<sha256(endpoint,key)[:16]>  → IdemRecord (binary)
	prefixIdemExpiry = "idemexp/"   // idemexp/<expires ms u64><idem/ key>         → empty: purge index
	prefixCache      = "cache/"     // cache/<account>/<lower-cased email>         → cache entry (binary)
	prefixJob        = "job/"       // job/<job>                                   → Job (JSON)
	prefixJobActive  = "jobactive/" // jobactive/<job>                             → empty, while queued or running
	prefixJobAddr    = "jobaddr/"   // jobaddr/<job>/<index u32>                   → address bytes
	prefixJobResult  = "jobres/"    // jobres/<job>/<index u32>                    → Result (binary)
	prefixOutbox     = "outbox/"    // outbox/<due ms u64><event>                  → Event (JSON)
	prefixDeadLetter = "dlq/"       // dlq/<event>                                 → Event (JSON)
	prefixHookLast   = "hooklast/"  // hooklast/<account>                          → Event (JSON): latest payload
	prefixMeta       = "meta/"      // meta/<name>                                 → see below
	prefixUser       = "user/"      // user/<user>                                 → User (JSON)
	prefixUserEmail  = "useremail/" // useremail/<lower-cased email>               → user id: the unique index
	prefixSession    = "sess/"      // sess/<session>                              → Session (JSON)
	prefixInvite     = "invite/"    // invite/<invite>                             → Invite (JSON)
	prefixVerdict    = "vidx/"      // vidx/<account>/<lower email>\x00<probed ms u64><result> → empty: an address's verdicts by time
	prefixOutcome    = "outc/"      // outc/<account>/<at ms u64><sha256(event id)[:16]>       → Outcome (binary)
	prefixOutcomeID  = "outid/"     // outid/<account>/<sha256(event id)[:16]>                → at ms u64: seen event ids
	prefixOutcomeAdr = "outaddr/"   // outaddr/<account>/<lower email>                        → Outcome (binary): the address's latest evidence
	prefixOutcomeSet = "outset/"    // outset/<account>                                       → OutcomeSettings (JSON)
	prefixFact       = "fact/"      // fact/<kind>/<key>                                      → value and expiry (binary): domain knowledge
)

// Keys under meta/.
var (
	keyMetaVersion = []byte(prefixMeta + "version")  // schema version, decimal text
	keyMetaHistSeq = []byte(prefixMeta + "seq/hist") // history id ceiling, u64
	keyMetaEgress  = []byte(prefixMeta + "egress")   // egress pool state, opaque
	keyMetaSecrets = []byte(prefixMeta + "secret/")  // meta/secret/<name>: 32 random bytes (Secret)
)

// Kind bytes of history keys.
const (
	histKindSingle = 's'
	histKindBatch  = 'b'
)

// keyBuf starts a key of the given prefix with room for n more bytes.
func keyBuf(prefix string, n int) []byte {
	b := make([]byte, 0, len(prefix)+n)
	return append(b, prefix...)
}

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// prefixEnd returns the smallest key greater than every key starting with
// p: the exclusive upper bound of a prefix scan.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// --- accounts and API keys

func accountKey(id string) []byte { return append(keyBuf(prefixAccount, len(id)), id...) }

func apiKeyKey(prefix string) []byte { return append(keyBuf(prefixAPIKey, len(prefix)), prefix...) }

// accountJobKey orders an account's jobs newest first.
func accountJobKey(account string, createdMs int64, job string) []byte {
	k := keyBuf(prefixAccountJob, len(account)+1+8+len(job))
	k = append(append(k, account...), '/')
	k = appendU64(k, ^uint64(createdMs))
	return append(k, job...)
}

func accountJobPrefix(account string) []byte {
	return append(append(keyBuf(prefixAccountJob, len(account)+1), account...), '/')
}

// --- users, sessions, invitations

func userKey(id string) []byte { return append(keyBuf(prefixUser, len(id)), id...) }

// userEmailKey: the email is the last component, lower-cased (it may
// hold any byte but "/" is fine there: nothing follows it).
func userEmailKey(email string) []byte {
	e := strings.ToLower(email)
	return append(keyBuf(prefixUserEmail, len(e)), e...)
}

func sessionKey(id string) []byte { return append(keyBuf(prefixSession, len(id)), id...) }

func inviteKey(id string) []byte { return append(keyBuf(prefixInvite, len(id)), id...) }

func secretKey(name string) []byte {
	return append(append([]byte(nil), keyMetaSecrets...), name...)
}

// --- credits

func ledgerPrefix(account string) []byte {
	return append(append(keyBuf(prefixLedger, len(account)+1+8), account...), '/')
}

func ledgerKey(account string, seq uint64) []byte { return appendU64(ledgerPrefix(account), seq) }

// ledgerSeq returns the sequence number of a ledger key.
func ledgerSeq(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(key)-8:]) }

func holdPrefix(account string) []byte {
	return append(append(keyBuf(prefixHold, len(account)+1+8), account...), '/')
}

func holdKey(account string, seq uint64) []byte { return appendU64(holdPrefix(account), seq) }

// parseHoldKey splits hold/<account>/<seq>.
func parseHoldKey(key []byte) (account string, seq uint64, ok bool) {
	rest := key[len(prefixHold):]
	if len(rest) < 10 || rest[len(rest)-9] != '/' {
		return "", 0, false
	}
	return string(rest[:len(rest)-9]), binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

// --- results, history, cache

func resultKey(id string) []byte { return append(keyBuf(prefixResult, len(id)), id...) }

// histPrefix is the prefix of one account's rows of one kind.
func histPrefix(account string, kind byte) []byte {
	k := keyBuf(prefixHistory, len(account)+3+8)
	k = append(append(k, account...), '/', kind, '/')
	return k
}

// histKey: positions are inverted so a forward scan is newest first.
func histKey(account string, kind byte, pos int64) []byte {
	return appendU64(histPrefix(account, kind), ^uint64(pos))
}

// histPos returns the position of a history key.
func histPos(key []byte) int64 { return int64(^binary.BigEndian.Uint64(key[len(key)-8:])) }

func cacheKey(account, email string) []byte {
	k := keyBuf(prefixCache, len(account)+1+len(email))
	k = append(append(k, account...), '/')
	return append(k, storage.CacheEmail(email)...)
}

// --- idempotency

// idemKey hashes (endpoint, key): both are client or caller text of any
// bytes, and a fixed-width digest keeps the key short and unambiguous.
func idemKey(account, endpoint, key string) []byte {
	h := sha256.New()
	h.Write([]byte(endpoint))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	k := append(append(keyBuf(prefixIdem, len(account)+1+16), account...), '/')
	return append(k, h.Sum(sum[:0])[:16]...)
}

// idemExpiryKey indexes an idempotency record by expiry for the purge.
func idemExpiryKey(expiresMs int64, ik []byte) []byte {
	k := keyBuf(prefixIdemExpiry, 8+len(ik))
	k = appendU64(k, uint64(expiresMs))
	return append(k, ik...)
}

// parseIdemExpiryKey returns the expiry and the idem/ key it indexes.
func parseIdemExpiryKey(key []byte) (expiresMs int64, ik []byte, ok bool) {
	rest := key[len(prefixIdemExpiry):]
	if len(rest) < 8 {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(rest[:8])), rest[8:], true
}

// --- jobs

func jobKey(id string) []byte       { return append(keyBuf(prefixJob, len(id)), id...) }
func jobActiveKey(id string) []byte { return append(keyBuf(prefixJobActive, len(id)), id...) }

func jobAddrPrefix(job string) []byte {
	return append(append(keyBuf(prefixJobAddr, len(job)+1+4), job...), '/')
}

func jobAddrKey(job string, index uint32) []byte { return appendU32(jobAddrPrefix(job), index) }

func jobResultPrefix(job string) []byte {
	return append(append(keyBuf(prefixJobResult, len(job)+1+4), job...), '/')
}

func jobResultKey(job string, index uint32) []byte { return appendU32(jobResultPrefix(job), index) }

// jobIndex returns the index of a jobaddr/ or jobres/ key.
func jobIndex(key []byte) uint32 { return binary.BigEndian.Uint32(key[len(key)-4:]) }

// --- webhook outbox

func outboxKey(dueMs int64, id string) []byte {
	k := keyBuf(prefixOutbox, 8+len(id))
	k = appendU64(k, uint64(dueMs))
	return append(k, id...)
}

// parseOutboxKey returns the due time of an outbox key.
func parseOutboxKey(key []byte) (dueMs int64, ok bool) {
	rest := key[len(prefixOutbox):]
	if len(rest) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(rest[:8])), true
}

func deadLetterKey(id string) []byte { return append(keyBuf(prefixDeadLetter, len(id)), id...) }

func hookLastKey(account string) []byte {
	return append(keyBuf(prefixHookLast, len(account)), account...)
}
