package storage

import "time"

// The storage contract: what server/ and its packages need from storage,
// as small interfaces, one per area. Today *DB (Pebble) implements them
// all; fleet mode (docs/fleet.md, issue 17) adds a PostgreSQL
// implementation behind the same interfaces, and one compliance suite runs
// against both. What stays on each box (the egress state, checkpoints,
// Pebble's metrics) is not in the contract.

// Accounts is the accounts: their plans and webhook secrets.
type Accounts interface {
	CreateAccount(name string, plan Plan) (Account, error)
	GetAccount(id string) (Account, error)
	ListAccounts() ([]Account, error)
	SetPlan(id string, plan Plan) (Account, error)
	RotateWebhookSecret(id string) (Account, error)
}

// Keys is the API keys, kept as hashes.
type Keys interface {
	MintKey(account string, scopes []string, label string) (string, APIKey, error)
	LookupKey(prefix string) (APIKey, error)
	VerifyKey(key string) (APIKey, error)
	RevokeKey(prefix string) (APIKey, error)
	ListKeys(account string) ([]APIKey, error)
}

// Balances is balances, holds, charges and the ledger: no overdraft, and a
// charge written with its result.
type Balances interface {
	Balance(account string) (int64, error)
	Credits(account string) (Credits, error)
	AddCredits(account string, n int64, note string) (Entry, error)
	SetCredits(account string, n int64, note string) (Entry, error)
	Hold(account string, n int64, ref string) (Hold, error)
	Charge(h Hold, req ChargeRequest) (Charged, error)
	ChargeDirect(account string, n int64, req ChargeRequest) (Charged, error)
	Release(h Hold, note string) (Entry, error)
	Holds(account string) ([]Hold, error)
	Ledger(account string, after uint64, limit int) ([]Entry, error)
}

// Idempotency is Idempotency-Key records (spec §7.3).
type Idempotency interface {
	BeginIdem(ref IdemRef, requestHash []byte) (IdemOutcome, IdemRecord, error)
	CompleteIdem(ref IdemRef, resp IdemResponse) error
	AbortIdem(ref IdemRef) error
	GetIdem(ref IdemRef) (IdemRecord, error)
	PurgeIdem() (int, error)
}

// Results is results, the history and the cache:true lookups.
type Results interface {
	GetResult(id string) (Result, error)
	LookupCache(account, email string, maxAge time.Duration) (r Result, ok bool, err error)
	PurgeCache(maxAge time.Duration) (int, error)
	ListHistory(account, kind, cursor string, limit int) (HistoryPage, error)
	DailyCounts(account string, days int) ([]DayCount, error)
}

// Jobs is batch jobs, their addresses and results.
type Jobs interface {
	CreateJob(spec JobSpec) (Job, error)
	Job(id string) (Job, error)
	AccountJob(account, id string) (Job, error)
	StartJob(id string) (Job, error)
	PutJobResults(id string, results []JobResult) (Job, error)
	FinishJob(id string, f JobFinish) (Job, error)
	ListJobs(status JobStatus) ([]Job, error)
	ListAccountJobs(account string, limit int) ([]Job, error)
	JobAddresses(id string, from int, fn func(index int, addr string) error) error
	PendingAddresses(id string, fn func(index int, addr string) error) error
	JobResults(id string, fn func(Result) error) error
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
	LeaseSlices(n int) ([]JobSlice, error)
	// SliceAddresses calls fn, in index order, with the addresses of a
	// job's slice that have no result yet.
	SliceAddresses(id string, slice int, fn func(index int, addr string) error) error
	// ReturnSlice gives back a slice this box leased and will not work
	// on: another box may lease it at once.
	ReturnSlice(id string, slice int) error
	// LeasedSlices returns the slices this box holds (Job.ID and Slice
	// set, the rest of Job zero), for the scheduler to give back those it
	// is not working on.
	LeasedSlices() ([]JobSlice, error)
}

// JobSlice is a slice of a job leased to this box.
type JobSlice struct {
	Job   Job
	Slice int
}

// Outbox is the webhook outbox and its dead letters.
type Outbox interface {
	Enqueue(ev Event) (Event, error)
	DueEvents(limit int) ([]Event, error)
	NextDue() (at time.Time, ok bool, err error)
	MarkDelivered(ev Event) error
	Reschedule(ev Event, next time.Time, status int, errText string) (Event, error)
	DeadLetter(ev Event, status int, errText string) (Event, error)
	DeadLetters(account string, limit int) ([]Event, error)
	Redrive(account, id string) (Event, error)
	LastEvent(account string) (Event, error)
	OutboxEvents(account string, limit int) ([]Event, error)
	ResendEvent(account, id string) (Event, error)
}

// Users is users, invitations and dashboard sessions.
type Users interface {
	CreateUser(email, passwordHash string, operator bool) (User, error)
	RegisterWithInvite(email, passwordHash, token string) (User, Invite, error)
	RegisterWithAccount(email, passwordHash, accountName string, plan Plan, credits int64) (User, Account, error)
	GetUser(id string) (User, error)
	UserByEmail(email string) (User, error)
	ListUsers() ([]User, error)
	Members(account string) ([]User, error)
	SetPassword(id, passwordHash string) (User, error)
	RehashPassword(id, old, hash string) error
	SetOperator(id string, operator bool) (User, error)
	SetRole(account, id string, role Role) (User, error)
	CreateInvite(account string, role Role, email, createdBy string, ttl time.Duration) (string, Invite, error)
	RedeemInvite(token, userID string) (User, Invite, error)
	Invites(account string) ([]Invite, error)
	RevokeInvite(account, id string) (Invite, error)
	CreateSession(user, account, ip, userAgent string, ttl time.Duration) (string, Session, error)
	LookupSession(token string) (Session, error)
	TouchSession(id string) error
	SetSessionAccount(id, account string) (Session, error)
	DeleteSession(id string) error
	UserSessions(user string) []Session
	PurgeSessions(idle time.Duration) (int, error)
}

// Secrets is named secrets, made once and shared (signing, CSRF and
// session keys).
type Secrets interface {
	Secret(name string) ([]byte, error)
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
	Close() error
}
