-- 0008: delivery outcomes (docs/outcomes.md): what the accounts' sending
-- platforms reported when mail was sent to addresses verifyd had judged,
-- each with the verdict it was matched to. Portable SQL: PostgreSQL 15
-- and CockroachDB.

CREATE TABLE outcomes (
	account     text NOT NULL REFERENCES accounts (id),
	event_id    text NOT NULL,
	email       text NOT NULL,
	-- email lower-cased by verifyd (storage.CacheEmail)
	email_key   text NOT NULL,
	event       text NOT NULL,
	at          timestamptz NOT NULL,
	source      text NOT NULL,
	smtp_code   int NOT NULL DEFAULT 0,
	enhanced    text NOT NULL DEFAULT '',
	diagnostic  text NOT NULL DEFAULT '',
	received_at timestamptz NOT NULL,
	-- the matched verdict; result_id '' when none matched
	result_id   text NOT NULL DEFAULT '',
	v_status    text NOT NULL DEFAULT '',
	v_score     int NOT NULL DEFAULT 0,
	v_reason    text NOT NULL DEFAULT '',
	v_catch_all boolean NOT NULL DEFAULT false,
	v_mx_host   text NOT NULL DEFAULT '',
	v_probed_at timestamptz,
	PRIMARY KEY (account, event_id)
);
CREATE INDEX outcomes_at ON outcomes (account, at);
CREATE INDEX outcomes_purge ON outcomes (at);

-- An address's latest delivery or hard bounce: the evidence a new
-- verdict is weighed against.
CREATE TABLE outcome_evidence (
	account   text NOT NULL,
	email_key text NOT NULL,
	event_id  text NOT NULL,
	at        timestamptz NOT NULL,
	PRIMARY KEY (account, email_key)
);
CREATE INDEX outcome_evidence_at ON outcome_evidence (at);

-- How each account's sending platforms report (storage.OutcomeSettings,
-- JSON).
CREATE TABLE outcome_settings (
	account text PRIMARY KEY REFERENCES accounts (id),
	value   text NOT NULL
);

-- Matching: an address's results by time.
CREATE INDEX results_verdicts ON results (account, lower(email), probed_at);
