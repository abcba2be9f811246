-- 0004: dashboard users, their invitations and sessions, and the named
-- secrets of the fleet (signing, CSRF and session keys).
-- Portable SQL: PostgreSQL 15 and CockroachDB.

-- A user is a JSON document (storage.User: its memberships included);
-- email_lc keeps emails unique without regard to case.
CREATE TABLE users (
	id       text PRIMARY KEY,
	email_lc text NOT NULL UNIQUE,
	doc      bytea NOT NULL
);

CREATE TABLE invites (
	id      text PRIMARY KEY,
	account text NOT NULL,
	doc     bytea NOT NULL
);
CREATE INDEX invites_account ON invites (account);

CREATE TABLE sessions (
	id         text PRIMARY KEY,
	user_id    text NOT NULL,
	last_seen  timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	doc        bytea NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- Made once by whichever box needs it first, then shared.
CREATE TABLE secrets (
	name  text PRIMARY KEY,
	value bytea NOT NULL
);

-- The receipt signing key set (server/receipt's keys.json document):
-- one row, so the fleet publishes one JWKS and signs with one active key.
CREATE TABLE signing_keys (
	id  int PRIMARY KEY,
	doc bytea NOT NULL
);
