// Package batch runs verifyd's bulk validation (spec §4.2-4.4, §3) below
// HTTP: the fair batch scheduler that takes the jobs POST /v1/batch
// (package server) creates, and writes their results and their ends.
// Webhook delivery is server/webhook's. README.md is the reference; this
// is the walk through one job.
//
//  1. POST /v1/batch (server/batch.go): the guard has checked the per-IP
//     window, the Bearer key, the validate:write scope and the plan's rate
//     (httpapi.Guard); the HTTP server refused a body over 8 MB from
//     its Content-Length before reading it. An Idempotency-Key is handled
//     as for /v1/validate (httpapi.Idempotency; a replay answers the
//     stored 202). The body is decoded strictly (server/batchdecode.go):
//     emails 1 to 100,000 strings of 1 to 320 characters, listName up to
//     200, webhookUrl an absolute http(s)
//     URL the SSRF guard does not refuse outright (an internal IP literal
//     is refused here; a name is judged at delivery). Address syntax is
//     not a reason to refuse: a malformed row is a result (invalid,
//     syntax_error). Each address is lower-cased and parsed once
//     (address.NewLowerInput; spec §2.2) and repeats dropped.
//  2. storage.CreateJob writes, in one synced batch, the job (queued), its
//     addresses, the reservation of one credit per unique address (or
//     refuses: 400 with currentCredits, needed, deltaShortfall) and the
//     idempotent 202. The scheduler takes the job (Scheduler.Add); the
//     202 answers.
//  3. The scheduler (scheduler.go) groups the job's addresses by domain in
//     chunks of up to 100, and hands groups to the engine's batch mode
//     (probe.Pools.VerifyDomain: one SMTP session, RCPT after RCPT)
//     round-robin over accounts, their jobs and the jobs' domains, at most
//     Concurrency in flight and DomainConcurrency per domain. The job's
//     first group moves it to running (storage.StartJob).
//  4. Greylisted addresses come back unknown with RetryAt and Egress: they
//     wait in a deferred queue and are retried then, from that egress
//     address, until answered or RetryWindow (30 min) has passed; then
//     their last result, unknown, is final.
//  5. Results are written with storage.PutJobResults, a synced batch of up
//     to 500 with their history rows (kind batch, job_id), cache entries
//     and the job's progress. Only a stored result counts as done: after a
//     crash, the job resumes with the addresses that have none.
//  6. When every address has a result, storage.FinishJob completes the job
//     (completed_at, results_url), uses one credit per address, refunds
//     the rest of the reservation and writes the batch.completed event to
//     the outbox, in one synced batch. A group failing MaxFailures times
//     in a row fails the job instead (batch.failed), with the same
//     settlement.
//  7. The dispatcher (server/webhook) posts due events, signed (
//     X-SVC-Signature = sha256=<hex HMAC-SHA256 of the raw body>, plus an
//     event id, a timestamp and a timestamped signature), through a client
//     whose dialer checks every address it connects to (its SSRF guard), follows
//     no redirect and uses no proxy. A 2xx ends the delivery; anything else
//     is retried at 30 s, 2 min, 10 min, 1 h, 6 h (then every 6 h) until
//     24 h after the event, then dead-lettered.
//  8. GET /v1/jobs/{id}/results.csv streams the results from storage in
//     upload order (server/csv.go), never the whole file in memory.
//
// The operator's side (server/admin/webhooks.go, server/webhook/hookapi):
// list the outbox, the
// dead-letter queue and recent attempts, resend an event, fire a test
// event replaying an account's latest payload; verifyctl webhooks.
package batch
