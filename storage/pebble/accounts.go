package pebble

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// CreateAccount creates an account with a new id and webhook secret. Its
// balance starts at 0 (AddCredits).
func (db *DB) CreateAccount(ctx context.Context, name string, plan storage.Plan) (storage.Account, error) {
	if err := db.check(); err != nil {
		return storage.Account{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	a, err := db.newAccountLocked(name, plan)
	if err != nil {
		return storage.Account{}, err
	}
	if err := db.putAccount(a); err != nil {
		return storage.Account{}, err
	}
	db.accounts[a.ID] = a
	return a, nil
}

// newAccountLocked makes (NewAccount), but does not store, an account
// with an id no other has; db.mu is held (read or write).
func (db *DB) newAccountLocked(name string, plan storage.Plan) (storage.Account, error) {
	a, err := storage.NewAccount(name, plan, db.now())
	for err == nil {
		if _, dup := db.accounts[a.ID]; !dup {
			break
		}
		a.ID = storage.NewAccountID()
	}
	return a, err
}

// GetAccount returns the account, or ErrNotFound.
func (db *DB) GetAccount(ctx context.Context, id string) (storage.Account, error) {
	if err := db.check(); err != nil {
		return storage.Account{}, err
	}
	db.mu.RLock()
	a, ok := db.accounts[id]
	db.mu.RUnlock()
	if !ok {
		return storage.Account{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, id)
	}
	return a, nil
}

// ListAccounts returns every account, ordered by id.
func (db *DB) ListAccounts(ctx context.Context) ([]storage.Account, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	out := make([]storage.Account, 0, len(db.accounts))
	for _, a := range db.accounts {
		out = append(out, a)
	}
	db.mu.RUnlock()
	slices.SortFunc(out, func(a, b storage.Account) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// SetPlan changes the account's plan.
func (db *DB) SetPlan(ctx context.Context, id string, plan storage.Plan) (storage.Account, error) {
	if err := storage.CheckPlan(plan); err != nil {
		return storage.Account{}, err
	}
	return db.updateAccount(id, func(a *storage.Account) { a.Plan = plan })
}

// RotateWebhookSecret gives the account a new webhook secret and returns
// the account with it. Events not yet delivered are signed with the new
// secret when they are sent.
func (db *DB) RotateWebhookSecret(ctx context.Context, id string) (storage.Account, error) {
	return db.updateAccount(id, func(a *storage.Account) {
		a.WebhookSecret = storage.NewWebhookSecret()
		a.SecretRotatedAt = db.now().Truncate(time.Millisecond)
	})
}

func (db *DB) updateAccount(id string, change func(*storage.Account)) (storage.Account, error) {
	if err := db.check(); err != nil {
		return storage.Account{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	a, ok := db.accounts[id]
	if !ok {
		return storage.Account{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, id)
	}
	change(&a)
	if err := db.putAccount(a); err != nil {
		return storage.Account{}, err
	}
	db.accounts[id] = a
	return a, nil
}

// putAccount writes the account record, synced.
func (db *DB) putAccount(a storage.Account) error {
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
		var a storage.Account
		if err := json.Unmarshal(v, &a); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		db.accounts[a.ID] = a
		return true, nil
	})
}
