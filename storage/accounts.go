package storage

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
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

// CreateAccount creates an account with a new id and webhook secret. Its
// balance starts at 0 (AddCredits).
func (db *DB) CreateAccount(name string, plan Plan) (Account, error) {
	if err := db.check(); err != nil {
		return Account{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	a, err := db.newAccountLocked(name, plan)
	if err != nil {
		return Account{}, err
	}
	if err := db.putAccount(a); err != nil {
		return Account{}, err
	}
	db.accounts[a.ID] = a
	return a, nil
}

// newAccountLocked makes (NewAccount), but does not store, an account
// with an id no other has; db.mu is held (read or write).
func (db *DB) newAccountLocked(name string, plan Plan) (Account, error) {
	a, err := NewAccount(name, plan, db.now())
	for err == nil {
		if _, dup := db.accounts[a.ID]; !dup {
			break
		}
		a.ID = newAccountID()
	}
	return a, err
}

// GetAccount returns the account, or ErrNotFound.
func (db *DB) GetAccount(id string) (Account, error) {
	if err := db.check(); err != nil {
		return Account{}, err
	}
	db.mu.RLock()
	a, ok := db.accounts[id]
	db.mu.RUnlock()
	if !ok {
		return Account{}, fmt.Errorf("%w: account %q", ErrNotFound, id)
	}
	return a, nil
}

// ListAccounts returns every account, ordered by id.
func (db *DB) ListAccounts() ([]Account, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	out := make([]Account, 0, len(db.accounts))
	for _, a := range db.accounts {
		out = append(out, a)
	}
	db.mu.RUnlock()
	slices.SortFunc(out, func(a, b Account) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// SetPlan changes the account's plan.
func (db *DB) SetPlan(id string, plan Plan) (Account, error) {
	if !plan.Valid() {
		return Account{}, invalidf("unknown plan %q", plan)
	}
	return db.updateAccount(id, func(a *Account) { a.Plan = plan })
}

// RotateWebhookSecret gives the account a new webhook secret and returns
// the account with it. Events not yet delivered are signed with the new
// secret when they are sent.
func (db *DB) RotateWebhookSecret(id string) (Account, error) {
	return db.updateAccount(id, func(a *Account) {
		a.WebhookSecret = newWebhookSecret()
		a.SecretRotatedAt = db.now().Truncate(time.Millisecond)
	})
}

func (db *DB) updateAccount(id string, change func(*Account)) (Account, error) {
	if err := db.check(); err != nil {
		return Account{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	a, ok := db.accounts[id]
	if !ok {
		return Account{}, fmt.Errorf("%w: account %q", ErrNotFound, id)
	}
	change(&a)
	if err := db.putAccount(a); err != nil {
		return Account{}, err
	}
	db.accounts[id] = a
	return a, nil
}

// putAccount writes the account record, synced.
func (db *DB) putAccount(a Account) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	b.Set(accountKey(a.ID), v, nil)
	return db.commit(b, pebble.Sync)
}

// accountExists reports whether id is a known account.
func (db *DB) accountExists(id string) bool {
	db.mu.RLock()
	_, ok := db.accounts[id]
	db.mu.RUnlock()
	return ok
}

func (db *DB) loadAccounts() error {
	return db.scanPrefix([]byte(prefixAccount), func(k, v []byte) (bool, error) {
		var a Account
		if err := json.Unmarshal(v, &a); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		db.accounts[a.ID] = a
		return true, nil
	})
}
