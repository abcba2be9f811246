// Package outcomes is verifyd's delivery outcomes: what happened when an
// account's mail was sent to the addresses verifyd judged (delivered,
// bounced, complained about), reported with POST /v1/outcomes or by a
// sending platform's own webhook (package platform).
//
// Parse reads a POST /v1/outcomes body (JSON lines or CSV). A Service
// matches outcomes to the account's verdicts (storage.Outcomes), stores
// them once each by event id, and learns from the new ones: a "no such
// mailbox" bounce of an address called valid or risky makes its later
// verdicts invalid (Learned, Apply, applied by server to fresh and cached
// validations), and a domain whose accepted addresses keep bouncing makes
// its valid addresses risky, shared with every box through the fact
// store. README.md has the rules, their sources and the metrics;
// docs/outcomes.md is the customer's guide.
package outcomes
