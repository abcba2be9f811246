-- 0006: each job's results counted by verdict and reason, the breakdown
-- of GET /v1/jobs/{id} (storage.Job.Reasons): a JSON object keyed
-- "<status>/<reason>". Migration 7 counts the jobs written before it
-- (CockroachDB does not write a column in the transaction that adds it).
-- Portable SQL: PostgreSQL 15 and CockroachDB.

ALTER TABLE jobs ADD COLUMN reasons text NOT NULL DEFAULT '{}';
