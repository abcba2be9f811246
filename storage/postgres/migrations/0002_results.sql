-- 0002: boots, results and their history, the cache index, idempotency
-- records (docs/fleet.md). Portable SQL: PostgreSQL 15 and CockroachDB.

-- One row per running verifyd process (a boot), kept fresh by its
-- heartbeat. A boot whose seen_at is older than the lease is stopped: the
-- boxes still running release its holds, take over its pending
-- idempotency keys and its leased job groups. Times are the database's
-- clock (now()), never a box's.
CREATE TABLE boots (
	id         text PRIMARY KEY,
	box        text NOT NULL,
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL
);

-- What a box writes to make its commits made without waiting for the WAL
-- flush durable (DB.flush): a synchronous commit of a write flushes the WAL
-- up to it. Slots spread concurrent flushes over rows.
CREATE TABLE flush_marks (
	boot text NOT NULL,
	slot int NOT NULL,
	n    bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (boot, slot)
);

-- History row ids (spec §2.9 id): unique, increasing within a box's
-- writes; gaps are fine.
CREATE SEQUENCE history_ids;

-- Results, one row each, which are also the history rows: pos is the
-- row's place in its account's history (probed_at in nanoseconds: its
-- millisecond times 10^6 plus its rank among the account's rows of that
-- millisecond, taken under the account's row lock).
CREATE TABLE results (
	id          text PRIMARY KEY,
	account     text NOT NULL REFERENCES accounts (id),
	pos         bigint NOT NULL,
	history_id  bigint NOT NULL,
	kind        text NOT NULL,
	email       text NOT NULL,
	status      text NOT NULL,
	score       int NOT NULL,
	job_id      text,
	job_index   int,
	latency_ms  bigint NOT NULL,
	probed_at   timestamptz NOT NULL,
	cached_from text NOT NULL DEFAULT '',
	receipt     bytea
);
CREATE UNIQUE INDEX results_history ON results (account, pos);
CREATE INDEX results_history_kind ON results (account, kind, pos);
CREATE UNIQUE INDEX results_job ON results (job_id, job_index) WHERE job_id IS NOT NULL;

-- The cache:true index: an account's latest fresh result per address
-- (lower-cased).
CREATE TABLE cache (
	account   text NOT NULL REFERENCES accounts (id),
	email     text NOT NULL,
	result_id text NOT NULL,
	probed_at timestamptz NOT NULL,
	PRIMARY KEY (account, email)
);
CREATE INDEX cache_probed ON cache (probed_at);

-- Idempotency-Key records (spec §7.3). A pending record names the boot
-- processing its request.
CREATE TABLE idem (
	account      text NOT NULL REFERENCES accounts (id),
	endpoint     text NOT NULL,
	key          text NOT NULL,
	request_hash bytea NOT NULL,
	done         bool NOT NULL DEFAULT false,
	boot         text NOT NULL DEFAULT '',
	status       int NOT NULL DEFAULT 0,
	header_names text[] NOT NULL DEFAULT '{}',
	header_vals  text[] NOT NULL DEFAULT '{}',
	body         bytea,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	PRIMARY KEY (account, endpoint, key)
);
CREATE INDEX idem_expiry ON idem (expires_at);
