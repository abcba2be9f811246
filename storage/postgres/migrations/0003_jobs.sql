-- 0003: batch jobs, their addresses and slices, the webhook outbox
-- (docs/fleet.md). Portable SQL: PostgreSQL 15 and CockroachDB.

CREATE TABLE jobs (
	id           text PRIMARY KEY,
	account      text NOT NULL REFERENCES accounts (id),
	status       text NOT NULL,
	list_name    text NOT NULL DEFAULT '',
	webhook_url  text NOT NULL DEFAULT '',
	total        int NOT NULL,
	processed    int NOT NULL DEFAULT 0,
	-- Results per status, a JSON object.
	counts       text NOT NULL DEFAULT '{}',
	reserved     bigint NOT NULL,
	used         bigint NOT NULL DEFAULT 0,
	refunded     bigint NOT NULL DEFAULT 0,
	created_at   timestamptz NOT NULL,
	started_at   timestamptz,
	completed_at timestamptz,
	error        text NOT NULL DEFAULT ''
);
CREATE INDEX jobs_account ON jobs (account, created_at);
CREATE INDEX jobs_status ON jobs (status, created_at);

-- A job's addresses, each in the slice of its domain (a hash of the part
-- after the last @): a slice is what a box leases, so one domain's
-- addresses are probed by one box, in as few SMTP sessions as on a
-- single box.
CREATE TABLE job_addrs (
	job_id text NOT NULL,
	idx    int NOT NULL,
	slice  int NOT NULL,
	addr   text NOT NULL,
	PRIMARY KEY (job_id, idx)
);
CREATE INDEX job_addrs_slice ON job_addrs (job_id, slice, idx);

-- The slices of an active job that still have addresses without a
-- result. owner is the boot that leased it: the lease holds while that
-- boot is alive (boots.seen_at within the lease); a slice whose owner
-- stopped is free again. A slice is deleted once all its addresses have
-- results, and the rest when the job ends.
CREATE TABLE job_slices (
	job_id     text NOT NULL,
	slice      int NOT NULL,
	account    text NOT NULL,
	size       int NOT NULL,
	processed  int NOT NULL DEFAULT 0,
	owner      text NOT NULL DEFAULT '',
	leased_at  timestamptz,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (job_id, slice)
);
CREATE INDEX job_slices_account ON job_slices (account, created_at);

-- The webhook outbox: events due at next_attempt, claimed by the boot
-- delivering them until claim_until (or until that boot stops).
CREATE TABLE outbox (
	id           text PRIMARY KEY,
	account      text NOT NULL REFERENCES accounts (id),
	next_attempt timestamptz NOT NULL,
	claim_boot   text NOT NULL DEFAULT '',
	claim_until  timestamptz,
	event        bytea NOT NULL
);
CREATE INDEX outbox_due ON outbox (next_attempt, id);

CREATE TABLE dead_letters (
	id      text PRIMARY KEY,
	account text NOT NULL REFERENCES accounts (id),
	event   bytea NOT NULL
);

-- The latest event enqueued per account (the dashboard's test event).
CREATE TABLE hook_last (
	account text PRIMARY KEY REFERENCES accounts (id),
	event   bytea NOT NULL
);
