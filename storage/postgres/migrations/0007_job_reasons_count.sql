-- 0007: the jobs written before migration 6 get their reasons, counted
-- from their results' receipts (checks.reason). Portable SQL: PostgreSQL
-- 15 and CockroachDB.

UPDATE jobs SET reasons = COALESCE((
	SELECT json_object_agg(s.status || '/' || s.reason, s.n)::text
	FROM (
		SELECT status, convert_from(receipt, 'UTF8')::jsonb #>> '{checks,reason}' AS reason, count(*) AS n
		FROM results
		WHERE results.job_id = jobs.id AND receipt IS NOT NULL
		GROUP BY 1, 2
	) s
	WHERE s.reason IS NOT NULL AND s.reason <> ''
), '{}')
WHERE reasons = '{}';
