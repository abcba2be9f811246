// Package adminapi is the wire format of verifyd's admin API (package
// server/admin) and a Go client for it over the admin unix socket. It is
// what verifyctl speaks; it depends on the standard library only, so the CLI
// carries neither fasthttp nor the storage engine.
//
// Every body is JSON with snake_case member names. A non-2xx answer carries
// the envelope of the public API (spec §2.11):
//
//	{"error":{"code":"NOT_FOUND","message":"no account \"acct_x\"","details":{…}}}
//
// with a code of BAD_REQUEST (400), NOT_FOUND (404), CONFLICT (409) or
// INTERNAL (500). The client returns it as an *Error.
//
// To add a route: put its request and response types here, a method on
// Client beside the others, and the handler in server/admin.
package adminapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Error codes of the envelope, the subset of spec §7 the admin API uses.
const (
	CodeBadRequest = "BAD_REQUEST"
	CodeNotFound   = "NOT_FOUND"
	CodeConflict   = "CONFLICT"
	CodeInternal   = "INTERNAL"
)

// Issue is one problem of a request, as details.issues lists them (spec
// §7). Path names the member ("plan", "scopes[1]"), "" the body itself.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is an error answer: the inside of the envelope {"error": …}.
type Error struct {
	// Status is the HTTP status it came with; not part of the body.
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// Error writes the code, the message and any issues.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if issues, ok := e.Details["issues"].([]any); ok {
		for _, it := range issues {
			m, _ := it.(map[string]any)
			path, _ := m["path"].(string)
			msg, _ := m["message"].(string)
			if strings.Contains(e.Message, msg) {
				continue // the message already says it
			}
			if path != "" {
				fmt.Fprintf(&b, "; %s: %s", path, msg)
			} else {
				fmt.Fprintf(&b, "; %s", msg)
			}
		}
	}
	return fmt.Sprintf("%s (%s)", b.String(), e.Code)
}

// Envelope is the body of an error answer.
type Envelope struct {
	Error *Error `json:"error"`
}

// Account is an account as the admin API shows it: never with its webhook
// secret (see WebhookSecret).
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Plan      string    `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
	// Balance is what GET /v1/balance reports: credits neither charged nor
	// reserved by a batch job.
	Balance int64 `json:"balance"`
	// Held is the part of Balance held by validations in flight.
	Held int64 `json:"held"`
	// WebhookSecretRotatedAt is when the webhook secret last changed; zero
	// (absent) when it is still the one minted with the account.
	WebhookSecretRotatedAt time.Time `json:"webhook_secret_rotated_at,omitzero"`
}

// AccountList is the body of GET /v1/accounts, ordered by id.
type AccountList struct {
	Accounts []Account `json:"accounts"`
}

// CreateAccount is the body of POST /v1/accounts.
type CreateAccount struct {
	// Name is 1 to 200 bytes once trimmed of surrounding spaces.
	Name string `json:"name"`
	// Plan is free, starter, growth, scale or enterprise (spec §8).
	Plan string `json:"plan"`
	// Credits, when positive, is the opening balance: one "add" ledger
	// entry with the note "initial credits".
	Credits int64 `json:"credits,omitempty"`
}

// SetPlan is the body of POST /v1/accounts/{id}/plan.
type SetPlan struct {
	Plan string `json:"plan"`
}

// AdjustCredits is the body of POST /v1/accounts/{id}/credits: exactly one
// of Add (> 0) and Set (≥ 0), with an optional note kept in the ledger.
type AdjustCredits struct {
	Add  *int64 `json:"add,omitempty"`
	Set  *int64 `json:"set,omitempty"`
	Note string `json:"note,omitempty"`
}

// CreditsChanged is the answer of POST /v1/accounts/{id}/credits.
type CreditsChanged struct {
	Account string      `json:"account"`
	Balance int64       `json:"balance"`
	Held    int64       `json:"held"`
	Entry   LedgerEntry `json:"entry"`
}

// LedgerEntry is one change of an account's credits (storage.Entry).
type LedgerEntry struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Kind is add, set, hold, charge, release, reserve, use or refund.
	Kind string `json:"kind"`
	// Amount is what the entry is about (for set: the new balance).
	Amount int64 `json:"amount"`
	// Delta is the change of Balance.
	Delta int64 `json:"delta"`
	// Balance and Held are the account's after the entry.
	Balance int64 `json:"balance"`
	Held    int64 `json:"held"`
	// HoldSeq, for a charge or a release, is the seq of the hold it ends.
	HoldSeq uint64 `json:"hold_seq,omitempty"`
	// Ref is a request id (hold), result id (charge) or job id.
	Ref  string `json:"ref,omitempty"`
	Note string `json:"note,omitempty"`
}

// Ledger is the answer of GET /v1/accounts/{id}/ledger: the newest entries
// first. NextBefore, when set, is the before= of the next (older) page.
type Ledger struct {
	Account    string        `json:"account"`
	Balance    int64         `json:"balance"`
	Held       int64         `json:"held"`
	Entries    []LedgerEntry `json:"entries"`
	NextBefore *uint64       `json:"next_before"`
}

// MintKey is the body of POST /v1/accounts/{id}/keys.
type MintKey struct {
	// Scopes are validate:read and/or validate:write (spec §5); at least one.
	Scopes []string `json:"scopes"`
	// Label is an operator's note (≤ 200 bytes), shown by keys list.
	Label string `json:"label,omitempty"`
}

// Key is an API key's record: never its secret, which verifyd does not
// keep.
type Key struct {
	// Prefix names the key: the <prefix> of svc_live_<prefix>_<secret>.
	Prefix    string    `json:"prefix"`
	Account   string    `json:"account"`
	Label     string    `json:"label,omitempty"`
	Scopes    []string  `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// LastUsed is when the key last authenticated a request (to the
	// minute across a crash); absent: never used.
	LastUsed time.Time `json:"last_used,omitzero"`
}

// MintedKey is the answer of POST /v1/accounts/{id}/keys: the only time
// the whole key string is ever shown.
type MintedKey struct {
	// Token is the key string svc_live_<prefix>_<secret>, the Bearer token
	// of spec §5. verifyd keeps only its SHA-256.
	Token string `json:"key"`
	Key
}

// KeyList is the answer of GET /v1/accounts/{id}/keys, oldest first,
// revoked keys included.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// WebhookSecret is the answer of GET /v1/accounts/{id}/webhook-secret and
// of its rotation: the key of the HMAC-SHA256 in X-SVC-Signature (spec §6).
type WebhookSecret struct {
	Account string `json:"account"`
	// Secret is "whsec_" and 43 characters of base64url.
	Secret string `json:"webhook_secret"`
	// RotatedAt is zero (absent) when the secret is the one minted with the
	// account.
	RotatedAt time.Time `json:"rotated_at,omitzero"`
}

// SigningKeyRotated is the answer of POST /v1/signing-keys/rotate.
type SigningKeyRotated struct {
	// Kid is the new active key: new receipts carry it.
	Kid string `json:"kid"`
	// Previous is the key it replaced, which stays published.
	Previous string `json:"previous"`
}

// SigningKeys is the answer of GET /v1/signing-keys: the JWK Set that
// GET /.well-known/jwks.json publishes (RFC 7517 §5), newest key first,
// with one more member naming the active key. RFC 7517 §5 has readers
// ignore members they do not know, so the body is itself a JWKS that
// receipt.Verify and any JOSE library read.
type SigningKeys struct {
	Active string            `json:"active"`
	Keys   []json.RawMessage `json:"keys"`
}

// AddUser is the body of POST /v1/users.
type AddUser struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	// Operator grants the dashboard's operator view.
	Operator bool `json:"operator,omitempty"`
}

// User is a dashboard user: never the password or its hash.
type User struct {
	ID       string       `json:"id"`
	Email    string       `json:"email"`
	Operator bool         `json:"operator"`
	Accounts []Membership `json:"accounts"`
	Created  time.Time    `json:"created_at"`
}

// Membership is one of a user's accounts and the role there.
type Membership struct {
	Account string `json:"account"`
	Role    string `json:"role"`
}

// UserList is the answer of GET /v1/users.
type UserList struct {
	Users []User `json:"users"`
}

// SetOperator is the body of POST /v1/users/{id}/operator.
type SetOperator struct {
	Operator bool `json:"operator"`
}

// CreateInvite is the body of POST /v1/accounts/{id}/invites.
type CreateInvite struct {
	// Role is owner or member.
	Role string `json:"role"`
	// Email, when set, is the only address that may redeem it.
	Email string `json:"email,omitempty"`
}

// Invite is a pending invitation; Token is set only in the answer that
// made it.
type Invite struct {
	Token     string    `json:"token,omitempty"`
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Role      string    `json:"role"`
	Email     string    `json:"email,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// InviteList is the answer of GET /v1/accounts/{id}/invites.
type InviteList struct {
	Invites []Invite `json:"invites"`
}

// OutcomeSettings is an account's sending-platform settings
// (/v1/outcomes/{platform}), as GET /v1/accounts/{id}/outcome-settings
// shows them: the secrets never, only whether they are set.
type OutcomeSettings struct {
	Account             string   `json:"account"`
	SESTopics           []string `json:"ses_topics"`
	SendGridKey         string   `json:"sendgrid_key"`
	MailgunKeySet       bool     `json:"mailgun_key_set"`
	PostmarkUser        string   `json:"postmark_user"`
	PostmarkPasswordSet bool     `json:"postmark_password_set"`
}

// SetOutcomeSettings is the body of PUT
// /v1/accounts/{id}/outcome-settings: each field given replaces the
// account's ("" or [] turns it off); a field left out keeps it.
type SetOutcomeSettings struct {
	// SESTopics are the SNS topic ARNs whose notifications are taken.
	SESTopics *[]string `json:"ses_topics,omitempty"`
	// SendGridKey is SendGrid's signed-event verification key (base64 of
	// a P-256 public key).
	SendGridKey *string `json:"sendgrid_key,omitempty"`
	// MailgunKey is Mailgun's webhook signing key.
	MailgunKey *string `json:"mailgun_key,omitempty"`
	// PostmarkUser and PostmarkPassword are the basic-auth credentials
	// Postmark's webhook URL carries; verifyd keeps the password's
	// SHA-256. A password of at least 16 characters.
	PostmarkUser     *string `json:"postmark_user,omitempty"`
	PostmarkPassword *string `json:"postmark_password,omitempty"`
}
