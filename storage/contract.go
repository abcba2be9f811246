package storage

import (
	"context"
	"time"
)

// The storage contract: what server/ and its packages need from storage,
// as small interfaces, one per area. storage/pebble (one box) and
// storage/postgres (a fleet) implement them all; storage/storagetest is
// the suite both pass. Every method takes the caller's context first: a
// request's deadline reaches the database (postgres bounds each call by
// the shorter of it and Options.CallTimeout; Pebble's calls are local and
// short). A consumer declares the smaller interface it uses where it uses
// it. What stays on each box (the egress state, checkpoints, Pebble's
// metrics) is not in the contract.

// Accounts is the accounts: their plans and webhook secrets.
type Accounts interface {
	CreateAccount(ctx context.Context, name string, plan Plan) (Account, error)
	GetAccount(ctx context.Context, id string) (Account, error)
	ListAccounts(ctx context.Context) ([]Account, error)
	SetPlan(ctx context.Context, id string, plan Plan) (Account, error)
	RotateWebhookSecret(ctx context.Context, id string) (Account, error)
}

// Keys is the API keys, kept as hashes.
type Keys interface {
	MintKey(ctx context.Context, account string, scopes []string, label string) (string, APIKey, error)
	LookupKey(ctx context.Context, prefix string) (APIKey, error)
	VerifyKey(ctx context.Context, key string) (APIKey, error)
	RevokeKey(ctx context.Context, prefix string) (APIKey, error)
	ListKeys(ctx context.Context, account string) ([]APIKey, error)
}

// Balances is balances, holds, charges and the ledger: no overdraft, and a
// charge written with its result.
type Balances interface {
	Credits(ctx context.Context, account string) (Credits, error)
	AddCredits(ctx context.Context, account string, n int64, note string) (Entry, error)
	SetCredits(ctx context.Context, account string, n int64, note string) (Entry, error)
	Hold(ctx context.Context, account string, n int64, ref string) (Hold, error)
	Charge(ctx context.Context, h Hold, req ChargeRequest) (Charged, error)
	ChargeDirect(ctx context.Context, account string, n int64, req ChargeRequest) (Charged, error)
	Release(ctx context.Context, h Hold, note string) (Entry, error)
	Holds(ctx context.Context, account string) ([]Hold, error)
	Ledger(ctx context.Context, account string, after uint64, limit int) ([]Entry, error)
}

// Idempotency is Idempotency-Key records (spec §7.3).
type Idempotency interface {
	BeginIdem(ctx context.Context, ref IdemRef, requestHash []byte) (IdemOutcome, IdemRecord, error)
	CompleteIdem(ctx context.Context, ref IdemRef, resp IdemResponse) error
	AbortIdem(ctx context.Context, ref IdemRef) error
	GetIdem(ctx context.Context, ref IdemRef) (IdemRecord, error)
	PurgeIdem(ctx context.Context) (int, error)
}

// Results is results, the history and the cache:true lookups.
type Results interface {
	GetResult(ctx context.Context, id string) (Result, error)
	LookupCache(ctx context.Context, account, email string, maxAge time.Duration) (r Result, ok bool, err error)
	PurgeCache(ctx context.Context, maxAge time.Duration) (int, error)
	ListHistory(ctx context.Context, account, kind, cursor string, limit int) (HistoryPage, error)
	DailyCounts(ctx context.Context, account string, days int) ([]DayCount, error)
}

// Jobs is batch jobs, their addresses and results.
type Jobs interface {
	CreateJob(ctx context.Context, spec JobSpec) (Job, error)
	Job(ctx context.Context, id string) (Job, error)
	AccountJob(ctx context.Context, account, id string) (Job, error)
	StartJob(ctx context.Context, id string) (Job, error)
	PutJobResults(ctx context.Context, id string, results []JobResult) (Job, error)
	FinishJob(ctx context.Context, id string, f JobFinish) (Job, error)
	ListJobs(ctx context.Context, status JobStatus) ([]Job, error)
	ListAccountJobs(ctx context.Context, account string, limit int) ([]Job, error)
	PendingAddresses(ctx context.Context, id string, fn func(index int, addr string) error) error
	JobResults(ctx context.Context, id string, fn func(Result) error) error
}

// JobLeases is what a store shared by several boxes adds to Jobs: the
// boxes split each job between them by leasing its slices (its addresses
// grouped by a hash of their domain, JobSliceOf). A lease holds while the
// box that took it is alive; the slices of a box that stopped go to the
// others. A box that implements it schedules only what it leased.
type JobLeases interface {
	// LeaseSlices leases up to n free slices of active jobs to this box,
	// the accounts with the fewest slices leased first. It also returns
	// (Slice −1) running jobs whose every address has a result but
	// which no box ended (the box that wrote the last result stopped):
	// the caller ends them.
	LeaseSlices(ctx context.Context, n int) ([]JobSlice, error)
	// SliceAddresses calls fn, in index order, with the addresses of a
	// job's slice that have no result yet.
	SliceAddresses(ctx context.Context, id string, slice int, fn func(index int, addr string) error) error
	// ReturnSlice gives back a slice this box leased and will not work
	// on: another box may lease it at once.
	ReturnSlice(ctx context.Context, id string, slice int) error
	// LeasedSlices returns the slices this box holds (Job.ID and Slice
	// set, the rest of Job zero), for the scheduler to give back those it
	// is not working on.
	LeasedSlices(ctx context.Context) ([]JobSlice, error)
}

// JobSlice is a slice of a job leased to this box.
type JobSlice struct {
	Job   Job
	Slice int
}

// Outbox is the webhook outbox and its dead letters.
type Outbox interface {
	Enqueue(ctx context.Context, ev Event) (Event, error)
	DueEvents(ctx context.Context, limit int) ([]Event, error)
	NextDue(ctx context.Context) (at time.Time, ok bool, err error)
	MarkDelivered(ctx context.Context, ev Event) error
	Reschedule(ctx context.Context, ev Event, next time.Time, status int, errText string) (Event, error)
	DeadLetter(ctx context.Context, ev Event, status int, errText string) (Event, error)
	DeadLetters(ctx context.Context, account string, limit int) ([]Event, error)
	Redrive(ctx context.Context, account, id string) (Event, error)
	LastEvent(ctx context.Context, account string) (Event, error)
	OutboxEvents(ctx context.Context, account string, limit int) ([]Event, error)
	ResendEvent(ctx context.Context, account, id string) (Event, error)
}

// Users is users, invitations and dashboard sessions.
type Users interface {
	CreateUser(ctx context.Context, email, passwordHash string, operator bool) (User, error)
	RegisterWithInvite(ctx context.Context, email, passwordHash, token string) (User, Invite, error)
	RegisterWithAccount(ctx context.Context, email, passwordHash, accountName string, plan Plan, credits int64) (User, Account, error)
	GetUser(ctx context.Context, id string) (User, error)
	UserByEmail(ctx context.Context, email string) (User, error)
	ListUsers(ctx context.Context) ([]User, error)
	Members(ctx context.Context, account string) ([]User, error)
	SetPassword(ctx context.Context, id, passwordHash string) (User, error)
	RehashPassword(ctx context.Context, id, old, hash string) error
	SetOperator(ctx context.Context, id string, operator bool) (User, error)
	SetRole(ctx context.Context, account, id string, role Role) (User, error)
	CreateInvite(ctx context.Context, account string, role Role, email, createdBy string, ttl time.Duration) (string, Invite, error)
	RedeemInvite(ctx context.Context, token, userID string) (User, Invite, error)
	Invites(ctx context.Context, account string) ([]Invite, error)
	RevokeInvite(ctx context.Context, account, id string) (Invite, error)
	CreateSession(ctx context.Context, user, account, ip, userAgent string, ttl time.Duration) (string, Session, error)
	LookupSession(ctx context.Context, token string) (Session, error)
	TouchSession(ctx context.Context, id string) error
	SetSessionAccount(ctx context.Context, id, account string) (Session, error)
	DeleteSession(ctx context.Context, id string) error
	PurgeSessions(ctx context.Context, idle time.Duration) (int, error)
}

// Secrets is named secrets, made once and shared (signing, CSRF and
// session keys).
type Secrets interface {
	Secret(ctx context.Context, name string) ([]byte, error)
}

// Outcomes is delivery outcomes and what matching them needs.
type Outcomes interface {
	// LatestVerdicts answers each query with the account's latest result
	// for the address probed at or before its time (ok false: none).
	LatestVerdicts(ctx context.Context, account string, qs []VerdictQuery) ([]Verdict, []bool, error)
	// PutOutcomes stores outcomes of one account, synced, and reports
	// which were new: an event id the account already has is not stored
	// again. Each outcome is checked (CheckOutcome); ReceivedAt is set to
	// now.
	PutOutcomes(ctx context.Context, account string, outs []Outcome) (fresh []bool, err error)
	// ScanOutcomes calls fn with the outcomes whose At is at or after
	// since, of the account or of every account (account ""), oldest
	// first within an account.
	ScanOutcomes(ctx context.Context, account string, since time.Time, fn func(Outcome) error) error
	// AddressEvidence returns the account's latest hard bounce or
	// delivery of the address (ok false: none).
	AddressEvidence(ctx context.Context, account, email string) (Outcome, bool, error)
	// EvidenceAccounts returns the accounts for which AddressEvidence
	// can find anything (in no particular order): a validation of an
	// account outside it need not ask.
	EvidenceAccounts(ctx context.Context) ([]string, error)
	// DeleteOutcomes deletes every outcome of the account.
	DeleteOutcomes(ctx context.Context, account string) (int, error)
	// PurgeOutcomes deletes the outcomes (of every account) that happened
	// before the time.
	PurgeOutcomes(ctx context.Context, before time.Time) (int, error)
	// OutcomeSettings returns the account's settings (zero when none).
	OutcomeSettings(ctx context.Context, account string) (OutcomeSettings, error)
	// SetOutcomeSettings replaces them.
	SetOutcomeSettings(ctx context.Context, account string, s OutcomeSettings) error
}

// Store is the whole contract.
type Store interface {
	Accounts
	Keys
	Balances
	Idempotency
	Results
	Jobs
	Outbox
	Users
	Secrets
	Outcomes
}
