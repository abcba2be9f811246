package storage

import (
	"crypto/rand"
	"encoding/base64"
	"time"
)

// Plan is an account's plan (spec §8, per-plan request rates).
type Plan string

// The plans of spec §8.
const (
	PlanFree       Plan = "free"
	PlanStarter    Plan = "starter"
	PlanGrowth     Plan = "growth"
	PlanScale      Plan = "scale"
	PlanEnterprise Plan = "enterprise"
)

// Valid reports whether p is one of the plans.
func (p Plan) Valid() bool {
	switch p {
	case PlanFree, PlanStarter, PlanGrowth, PlanScale, PlanEnterprise:
		return true
	}
	return false
}

// Account is a customer of the appliance. Its credits live in the ledger,
// not here.
type Account struct {
	// ID is "acct_" and 20 characters of [a-z0-9].
	ID   string `json:"id"`
	Name string `json:"name"`
	Plan Plan   `json:"plan"`
	// WebhookSecret keys the HMAC-SHA256 of the account's webhook bodies
	// (X-SVC-Signature): "whsec_" and 32 random bytes in base64url.
	WebhookSecret string    `json:"webhook_secret"`
	CreatedAt     time.Time `json:"created_at"`
	// SecretRotatedAt is when the webhook secret last changed (zero:
	// never since creation).
	SecretRotatedAt time.Time `json:"secret_rotated_at,omitzero"`
	// Grant is starting credits written with the account (open
	// registration) and not yet in the ledger; Open finishes it.
	Grant int64 `json:"grant,omitempty"`
}

// newWebhookSecret returns "whsec_" and 32 random bytes, base64url.
func newWebhookSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}
