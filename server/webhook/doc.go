// Package webhook delivers verifyd's webhooks (spec §6): the events batch
// jobs write to storage's outbox (batch.completed, batch.failed,
// reputation.warning), signed with the account's secret, posted through a
// client whose dialer checks every address it connects to (Guard: the
// SSRF guard), retried on spec §6's schedule and dead-lettered after a
// day. It also judges a batch's webhookUrl when it is posted
// (Dispatcher.CheckPosted), and serves the operator's side: recent
// attempts, resend, test events (server/admin routes them). It has no HTTP
// server code. README.md is the reference.
package webhook
