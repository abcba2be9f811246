// Package pebble is verifyd's storage on one Pebble database under the
// data directory: the default backend of the storage contract
// (storage.Store, the suite of storage/storagetest), and on every box of a
// fleet the store of its own egress state. It holds accounts, API keys,
// the credit ledger, probe results and history, idempotency records, the
// cache index, batch jobs, the webhook outbox, users and sessions, and the
// egress pool's saved state. Nothing here knows HTTP or the receipt's
// schema (a receipt is opaque bytes).
//
// # Key layout
//
// keys.go is the whole key layout. Every key starts with a record prefix
// ("acct/", "key/", "ledger/", "hold/", "res/", "hist/", "idem/",
// "idemexp/", "cache/", "job/", "jobactive/", "acctjob/", "jobaddr/",
// "jobres/", "outbox/", "dlq/", "hooklast/", "meta/"); numbers are
// fixed-width big-endian so byte order is numeric order, and newest-first
// orders use inverted numbers (^n), so every listing is a forward scan,
// Pebble's fast direction. Values of the hot records are a compact binary
// encoding (codec.go: a version byte, varints, length-prefixed strings);
// the cold records (accounts, keys, jobs, events) are JSON. README.md
// lists every prefix with its value and durability.
//
// # A validation, step by step
//
//  1. Authenticate: VerifyKey parses svc_live_<prefix>_<secret>, finds the
//     key by prefix in memory (every key is loaded at Open), compares the
//     SHA-256 of the presented key with the stored hash in constant time.
//     No disk read.
//  2. Idempotency (when the request has a key): BeginIdem answers new,
//     in flight, replay or mismatch, and marks the key pending.
//  3. Hold: Hold(account, 1) checks, under the account's lock, that the
//     available credits (balance − held) suffice, and writes a hold
//     ledger entry and a hold/ key in one synced batch. Concurrent holds
//     never take more than the balance.
//  4. The engine runs (no storage involved; LookupCache for cache: true).
//  5. Charge: one synced batch holds the charge ledger entry (the balance
//     drops by 1), the deletion of the hold, the result (res/<uuid>), its
//     history row (hist/), its cache entry (cache/) and, when the request
//     had an Idempotency-Key, the completed idempotency record with the
//     response. The receipt's credits_remaining is known before the
//     batch is written (ChargeRequest.Seal), so the signed receipt is in
//     it. Or, when the engine failed, Release writes a release entry.
//
// A kill -9 at any moment therefore loses no charge and doubles none: a
// charge and its result are one batch; a hold that was never charged or
// released belongs to a request that never answered, and Open releases it
// (each release a ledger entry, note "released at open"). A retry with the
// same Idempotency-Key after a crash replays the stored response, since
// that response was written with the charge.
//
// # Credits
//
// An account's ledger is a sequence of entries 1, 2, 3…, each with the
// balance and held credits after it; the balance is the last entry's (there
// is no separate balance key that could disagree with the ledger). Every
// change to an account's credits, history or jobs happens under that
// account's lock, from reading its state to handing the batch to Pebble
// (Pebble's ApplyNoSyncWait: the batch takes its place in the WAL and becomes
// visible). The fsync is waited for after the lock is released, so many
// requests of one account share fsyncs (group commit) instead of queueing
// one each; a call returns only once its batch is synced. A batch job
// reserves one credit per address in the batch that creates it
// (CreateJob); FinishJob, in the batch that ends the job with its webhook
// event, records the processed count as used and refunds the rest.
//
// # History paging
//
// A history row's position is its probed_at millisecond times 10⁶ plus
// its rank among the account's rows of that millisecond, unique per
// account; rows list by position, newest first. The spec's cursor is "the
// probed_at of the last row of the previous page"; here it is that row's
// position as an RFC 3339 date-time — its probed_at, with the rank in six
// extra fractional digits when it is not 0 ("…T10:00:00.123000042Z"). It is
// still a date-time in the right millisecond, "strictly older than the
// cursor" keeps its meaning, and walking pages with any limit yields every
// row exactly once however many rows share a millisecond.
//
// # Durability
//
// Synced (pebble.Sync): ledger entries and holds, results, history rows
// and cache entries (they ride in the charge's batch), jobs, their
// addresses and results, outbox events, accounts, API keys, the history id
// ceiling. Not synced: idempotency records written on their own (the spec
// makes the store fail-open; those that go with a charge or a job are in
// its synced batch), the egress state (saved every few seconds; a lost
// save loses a few cooldowns), purges (redone on the next run).
package pebble
