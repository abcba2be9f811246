-- 0001: accounts, API keys and the credit ledger (docs/fleet.md).
-- Portable SQL: PostgreSQL 15 and CockroachDB run it as it is.

CREATE TABLE accounts (
	id                text PRIMARY KEY,
	name              text NOT NULL,
	plan              text NOT NULL,
	webhook_secret    text NOT NULL,
	created_at        timestamptz NOT NULL,
	secret_rotated_at timestamptz,
	-- Credits neither charged nor reserved by a job, and the part of them
	-- held by validations in flight: balance - held is what may be spent.
	balance           bigint NOT NULL DEFAULT 0,
	held              bigint NOT NULL DEFAULT 0,
	-- The account's next ledger sequence: taken in the transaction that
	-- writes the entry, so an account's writes are ordered by its row
	-- lock, whatever box makes them.
	next_seq          bigint NOT NULL DEFAULT 1,
	CHECK (held >= 0 AND balance - held >= 0)
);

CREATE TABLE api_keys (
	prefix     text PRIMARY KEY,
	account    text NOT NULL REFERENCES accounts (id),
	label      text NOT NULL DEFAULT '',
	scopes     text[] NOT NULL,
	hash       bytea NOT NULL,
	created_at timestamptz NOT NULL,
	revoked_at timestamptz,
	last_used  timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account, created_at);

CREATE TABLE ledger (
	account  text NOT NULL REFERENCES accounts (id),
	seq      bigint NOT NULL,
	at       timestamptz NOT NULL,
	kind     text NOT NULL,
	amount   bigint NOT NULL,
	delta    bigint NOT NULL,
	balance  bigint NOT NULL,
	held     bigint NOT NULL,
	hold_seq bigint,
	ref      text NOT NULL DEFAULT '',
	note     text NOT NULL DEFAULT '',
	PRIMARY KEY (account, seq)
);

-- Holds of validations in flight, by the ledger seq of their hold entry,
-- with the boot (one run of one verifyd, see 0002) that holds them: the
-- holds of a boot that stopped are released by the boxes still running.
CREATE TABLE holds (
	account text NOT NULL REFERENCES accounts (id),
	seq     bigint NOT NULL,
	amount  bigint NOT NULL,
	ref     text NOT NULL DEFAULT '',
	boot    text NOT NULL,
	at      timestamptz NOT NULL,
	PRIMARY KEY (account, seq)
);
CREATE INDEX holds_boot ON holds (boot);
