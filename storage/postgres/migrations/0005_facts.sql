-- 0005: what the boxes of a fleet learn about domains and MX hosts and
-- share (probe.Facts: catch-all findings, providers named by greetings).
-- Portable SQL: PostgreSQL 15 and CockroachDB.
CREATE TABLE domain_facts (
	kind       text NOT NULL,
	key        text NOT NULL,
	value      text NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (kind, key)
);
CREATE INDEX domain_facts_expiry ON domain_facts (expires_at);
