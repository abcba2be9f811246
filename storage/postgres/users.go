package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Users, invitations, sessions and secrets, shared by the fleet: a user
// signed in on one box is signed in on all (the session is a row), and
// the CSRF and session keys are one set. Records are JSON documents of
// the storage types; secrets only as hashes, as on Pebble.

func userDoc(row scanner) (storage.User, error) {
	var v []byte
	if err := row.Scan(&v); err != nil {
		return storage.User{}, err
	}
	var u storage.User
	return u, json.Unmarshal(v, &u)
}

// CreateUser adds a user with no account.
func (db *DB) CreateUser(ctx context.Context, email, passwordHash string, operator bool) (storage.User, error) {
	return db.register(ctx, email, passwordHash, operator, nil)
}

// RegisterWithInvite creates a user and redeems the invitation for it, in
// one transaction.
func (db *DB) RegisterWithInvite(ctx context.Context, email, passwordHash, token string) (storage.User, storage.Invite, error) {
	var iv storage.Invite
	u, err := db.register(ctx, email, passwordHash, false, func(ctx context.Context, tx pgx.Tx, u *storage.User) error {
		var err error
		iv, err = db.redeem(ctx, tx, token, u)
		return err
	})
	return u, iv, err
}

// RegisterWithAccount creates a user who owns a new account on plan with
// credits to start with, in one transaction (the grant is its first
// ledger entry).
func (db *DB) RegisterWithAccount(ctx context.Context, email, passwordHash, accountName string, plan storage.Plan, credits int64) (storage.User, storage.Account, error) {
	if err := storage.CheckPlan(plan); err != nil {
		return storage.User{}, storage.Account{}, err
	}
	if err := storage.CheckStartingCredits(credits); err != nil {
		return storage.User{}, storage.Account{}, err
	}
	var a storage.Account
	u, err := db.register(ctx, email, passwordHash, false, func(ctx context.Context, tx pgx.Tx, u *storage.User) error {
		var err error
		if a, err = storage.NewAccount(storage.Clip(strings.TrimSpace(accountName), 200), plan, db.now()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, name, plan, webhook_secret, created_at) VALUES ($1, $2, $3, $4, $5)`,
			a.ID, a.Name, string(a.Plan), a.WebhookSecret, a.CreatedAt); err != nil {
			return err
		}
		if credits > 0 {
			r, err := lockAccount(ctx, tx, a.ID)
			if err != nil {
				return err
			}
			if _, err := r.entry(ctx, tx, a.ID, db.now(), storage.EntryAdd, credits, credits, 0, 0, "", "starting credits (open registration)"); err != nil {
				return err
			}
			if err := saveAccount(ctx, tx, a.ID, r); err != nil {
				return err
			}
		}
		u.Accounts = append(u.Accounts, storage.Membership{Account: a.ID, Role: storage.RoleOwner, Since: a.CreatedAt})
		return nil
	})
	if err != nil {
		return storage.User{}, storage.Account{}, err
	}
	return u, a, nil
}

// register writes a new user and what stage adds, in one transaction.
// The invitation (stage) is checked before the email: without a valid
// one, nobody learns whether an email has a user.
func (db *DB) register(ctx context.Context, email, passwordHash string, operator bool, stage func(context.Context, pgx.Tx, *storage.User) error) (storage.User, error) {
	email = strings.TrimSpace(email)
	if err := storage.CheckEmail(email); err != nil {
		return storage.User{}, err
	}
	if err := storage.CheckPasswordHash(passwordHash); err != nil {
		return storage.User{}, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var u storage.User
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		u = storage.User{ID: storage.NewUserID(), Email: email, PasswordHash: passwordHash, Operator: operator,
			CreatedAt: db.now().Truncate(time.Millisecond)}
		if stage != nil {
			if err := stage(ctx, tx, &u); err != nil {
				return err
			}
		}
		v, err := json.Marshal(u)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO users (id, email_lc, doc) VALUES ($1, $2, $3)`, u.ID, strings.ToLower(email), v)
		if isUnique(err) {
			return storage.ErrEmailTaken
		}
		return err
	})
	if err != nil {
		return storage.User{}, err
	}
	return u, nil
}

// GetUser returns the user, or ErrNotFound.
func (db *DB) GetUser(ctx context.Context, id string) (storage.User, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	u, err := userDoc(db.pool.QueryRow(ctx, `SELECT doc FROM users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.User{}, notFound("user", id)
	}
	return u, err
}

// UserByEmail finds a user by email, without regard to case.
func (db *DB) UserByEmail(ctx context.Context, email string) (storage.User, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	u, err := userDoc(db.pool.QueryRow(ctx, `SELECT doc FROM users WHERE email_lc = $1`, strings.ToLower(strings.TrimSpace(email))))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.User{}, fmt.Errorf("%w: no user with that email", storage.ErrNotFound)
	}
	return u, err
}

// ListUsers returns every user, ordered by email.
func (db *DB) ListUsers(ctx context.Context) ([]storage.User, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT doc FROM users ORDER BY email_lc`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.User, error) { return userDoc(row) })
}

// Members returns the users of an account, ordered by email.
func (db *DB) Members(ctx context.Context, account string) ([]storage.User, error) {
	all, err := db.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(u storage.User) bool { _, ok := u.Role(account); return !ok }), nil
}

// updateUser changes a user in a transaction that holds its row (and,
// first, what lock takes).
func (db *DB) updateUser(ctx context.Context, id string, change func(context.Context, pgx.Tx, *storage.User) error) (storage.User, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var u storage.User
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		u, err = userDoc(tx.QueryRow(ctx, `SELECT doc FROM users WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("user", id)
		}
		if err != nil {
			return err
		}
		if err := change(ctx, tx, &u); err != nil {
			return err
		}
		v, err := json.Marshal(u)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE users SET doc = $2 WHERE id = $1`, id, v)
		return err
	})
	if err != nil {
		return storage.User{}, err
	}
	return u, nil
}

// SetPassword replaces the user's password hash and ends every session
// of the user, in one transaction.
func (db *DB) SetPassword(ctx context.Context, id, passwordHash string) (storage.User, error) {
	if err := storage.CheckPasswordHash(passwordHash); err != nil {
		return storage.User{}, err
	}
	return db.updateUser(ctx, id, func(ctx context.Context, tx pgx.Tx, u *storage.User) error {
		u.PasswordHash = passwordHash
		u.PasswordChangedAt = db.now().Truncate(time.Millisecond)
		_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, id)
		return err
	})
}

// RehashPassword replaces the user's password hash with another of the
// same password, if it is still old.
func (db *DB) RehashPassword(ctx context.Context, id, old, hash string) error {
	_, err := db.updateUser(ctx, id, func(_ context.Context, _ pgx.Tx, u *storage.User) error {
		if err := storage.CheckRehash(u.PasswordHash, old); err != nil {
			return err
		}
		u.PasswordHash = hash
		return nil
	})
	return err
}

// SetOperator grants or withdraws the operator role.
func (db *DB) SetOperator(ctx context.Context, id string, operator bool) (storage.User, error) {
	return db.updateUser(ctx, id, func(_ context.Context, _ pgx.Tx, u *storage.User) error { u.Operator = operator; return nil })
}

// SetRole changes the user's role in account; an empty role removes the
// membership. An account keeps at least one owner: the account's row is
// locked first, so two boxes demoting its two owners at once cannot both
// pass the check.
func (db *DB) SetRole(ctx context.Context, account, id string, role storage.Role) (storage.User, error) {
	if err := storage.CheckSetRole(role); err != nil {
		return storage.User{}, err
	}
	return db.updateUser(ctx, id, func(ctx context.Context, tx pgx.Tx, u *storage.User) error {
		i := slices.IndexFunc(u.Accounts, func(m storage.Membership) bool { return m.Account == account })
		if i < 0 {
			return fmt.Errorf("%w: user %q is not a member of %q", storage.ErrNotFound, id, account)
		}
		if u.Accounts[i].Role == storage.RoleOwner && role != storage.RoleOwner {
			if _, err := lockAccount(ctx, tx, account); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT doc FROM users WHERE id <> $1`, id)
			if err != nil {
				return err
			}
			others, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.User, error) { return userDoc(row) })
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(others, func(o storage.User) bool { r, ok := o.Role(account); return ok && r == storage.RoleOwner }) {
				return storage.ErrLastOwner
			}
		}
		if role == "" {
			u.Accounts = slices.Delete(u.Accounts, i, i+1)
		} else {
			u.Accounts[i].Role = role
		}
		return nil
	})
}

// --- invitations

func inviteDoc(row scanner) (storage.Invite, error) {
	var v []byte
	if err := row.Scan(&v); err != nil {
		return storage.Invite{}, err
	}
	var iv storage.Invite
	return iv, json.Unmarshal(v, &iv)
}

// CreateInvite mints a one-time invitation to account with role, valid
// for ttl, optionally only for email. The token is returned once.
func (db *DB) CreateInvite(ctx context.Context, account string, role storage.Role, email, createdBy string, ttl time.Duration) (string, storage.Invite, error) {
	if err := storage.CheckRole(role); err != nil {
		return "", storage.Invite{}, err
	}
	if err := storage.CheckInviteTTL(ttl); err != nil {
		return "", storage.Invite{}, err
	}
	email = strings.TrimSpace(email)
	if email != "" {
		if err := storage.CheckEmail(email); err != nil {
			return "", storage.Invite{}, err
		}
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.mustExist(ctx, account); err != nil {
		return "", storage.Invite{}, err
	}
	id, token, sum := storage.NewInviteToken()
	now := db.now().Truncate(time.Millisecond)
	iv := storage.Invite{ID: id, Hash: sum, Account: account, Role: role, Email: email, CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	v, err := json.Marshal(iv)
	if err != nil {
		return "", storage.Invite{}, err
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO invites (id, account, doc) VALUES ($1, $2, $3)`, iv.ID, iv.Account, v); err != nil {
		return "", storage.Invite{}, err
	}
	return token, iv, nil
}

// redeem marks the pending invitation of token used by u and adds the
// membership to u (written by the caller), in tx, which holds the
// invitation's row: it is redeemed once, whatever box redeems it.
func (db *DB) redeem(ctx context.Context, tx pgx.Tx, token string, u *storage.User) (storage.Invite, error) {
	id, ok := storage.InviteID(token)
	if !ok {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	iv, err := inviteDoc(tx.QueryRow(ctx, `SELECT doc FROM invites WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	if err != nil {
		return storage.Invite{}, err
	}
	if !storage.TokenMatches(token, iv.Hash) || !iv.Pending(db.now()) || iv.Email != "" && !strings.EqualFold(iv.Email, u.Email) {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, iv.Account).Scan(&exists); err != nil {
		return storage.Invite{}, err
	}
	if !exists {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	storage.Redeem(&iv, u, db.now())
	v, err := json.Marshal(iv)
	if err != nil {
		return storage.Invite{}, err
	}
	_, err = tx.Exec(ctx, `UPDATE invites SET doc = $2 WHERE id = $1`, iv.ID, v)
	return iv, err
}

// RedeemInvite links an existing user to the invitation's account.
func (db *DB) RedeemInvite(ctx context.Context, token, userID string) (storage.User, storage.Invite, error) {
	var iv storage.Invite
	u, err := db.updateUser(ctx, userID, func(ctx context.Context, tx pgx.Tx, u *storage.User) error {
		var err error
		iv, err = db.redeem(ctx, tx, token, u)
		return err
	})
	if err != nil {
		return storage.User{}, storage.Invite{}, err
	}
	return u, iv, nil
}

// Invites returns the account's pending invitations, newest first.
func (db *DB) Invites(ctx context.Context, account string) ([]storage.Invite, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT doc FROM invites WHERE account = $1`, account)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Invite, error) { return inviteDoc(row) })
	if err != nil {
		return nil, err
	}
	now := db.now()
	all = slices.DeleteFunc(all, func(iv storage.Invite) bool { return !iv.Pending(now) })
	slices.SortFunc(all, func(a, b storage.Invite) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return all, nil
}

// RevokeInvite withdraws a pending invitation of account.
func (db *DB) RevokeInvite(ctx context.Context, account, id string) (storage.Invite, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var iv storage.Invite
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		iv, err = inviteDoc(tx.QueryRow(ctx, `SELECT doc FROM invites WHERE id = $1 AND account = $2 FOR UPDATE`, id, account))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: invitation %q", storage.ErrNotFound, id)
		}
		if err != nil || !iv.Pending(db.now()) {
			return err
		}
		iv.RevokedAt = db.now().Truncate(time.Millisecond)
		v, err := json.Marshal(iv)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE invites SET doc = $2 WHERE id = $1`, id, v)
		return err
	})
	return iv, err
}

// --- sessions

func sessionDoc(row scanner) (storage.Session, error) {
	var v []byte
	var seen time.Time
	if err := row.Scan(&v, &seen); err != nil {
		return storage.Session{}, err
	}
	var s storage.Session
	err := json.Unmarshal(v, &s)
	s.LastSeen = seen.UTC()
	return s, err
}

// CreateSession starts a session of the user on account (may be empty),
// ending after ttl. The token is returned once.
func (db *DB) CreateSession(ctx context.Context, user, account, ip, userAgent string, ttl time.Duration) (string, storage.Session, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var exists bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, user).Scan(&exists); err != nil {
		return "", storage.Session{}, err
	}
	if !exists {
		return "", storage.Session{}, notFound("user", user)
	}
	id, token, sum := storage.NewSessionToken()
	now := db.now().Truncate(time.Millisecond)
	s := storage.Session{ID: id, Hash: sum, User: user, Account: account, CreatedAt: now, LastSeen: now,
		ExpiresAt: now.Add(ttl), IP: storage.Clip(ip, 64), UserAgent: storage.Clip(userAgent, 200)}
	v, err := json.Marshal(s)
	if err != nil {
		return "", storage.Session{}, err
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO sessions (id, user_id, last_seen, expires_at, doc) VALUES ($1, $2, $3, $4, $5)`,
		id, user, now, s.ExpiresAt, v); err != nil {
		return "", storage.Session{}, err
	}
	return token, s, nil
}

// LookupSession returns the session of token, or ErrSessionInvalid.
func (db *DB) LookupSession(ctx context.Context, token string) (storage.Session, error) {
	id, ok := storage.SessionID(token)
	if !ok {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	s, err := sessionDoc(db.pool.QueryRow(ctx, `SELECT doc, last_seen FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	if err != nil {
		return storage.Session{}, err
	}
	if !storage.TokenMatches(token, s.Hash) {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	return s, nil
}

// TouchSession records that the session was used at now, at most once a
// minute.
func (db *DB) TouchSession(ctx context.Context, id string) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	now := db.now().Truncate(time.Millisecond)
	_, err := db.pool.Exec(ctx, `UPDATE sessions SET last_seen = $2 WHERE id = $1 AND last_seen <= $3`, id, now, now.Add(-time.Minute))
	return err
}

// SetSessionAccount switches the account the session shows; the user must
// be a member (or an operator).
func (db *DB) SetSessionAccount(ctx context.Context, id, account string) (storage.Session, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var s storage.Session
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		s, err = sessionDoc(tx.QueryRow(ctx, `SELECT doc, last_seen FROM sessions WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.ErrSessionInvalid
		}
		if err != nil {
			return err
		}
		u, err := userDoc(tx.QueryRow(ctx, `SELECT doc FROM users WHERE id = $1`, s.User))
		if err != nil {
			return err
		}
		var acct bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, account).Scan(&acct); err != nil {
			return err
		}
		if _, member := u.Role(account); !member && !(u.Operator && acct) {
			return notFound("account", account)
		}
		s.Account = account
		v, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET doc = $2 WHERE id = $1`, id, v)
		return err
	})
	if err != nil {
		return storage.Session{}, err
	}
	return s, nil
}

// DeleteSession ends a session.
func (db *DB) DeleteSession(ctx context.Context, id string) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err := db.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
	return err
}

// PurgeSessions deletes the sessions past their expiry or idle longer
// than idle, and invitations ended more than 30 days ago.
func (db *DB) PurgeSessions(ctx context.Context, idle time.Duration) (int, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	now := db.now()
	seen := time.Unix(0, 0)
	if idle > 0 {
		seen = now.Add(-idle)
	}
	tag, err := db.pool.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1 OR last_seen <= $2`, now, seen)
	if err != nil {
		return 0, err
	}
	rows, err := db.pool.Query(ctx, `SELECT doc FROM invites`)
	if err != nil {
		return 0, err
	}
	ivs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Invite, error) { return inviteDoc(row) })
	if err != nil {
		return 0, err
	}
	var gone []string
	for _, iv := range ivs {
		if now.Sub(storage.InviteEnded(iv)) > 30*24*time.Hour {
			gone = append(gone, iv.ID)
		}
	}
	if len(gone) > 0 {
		if _, err := db.pool.Exec(ctx, `DELETE FROM invites WHERE id = ANY($1)`, gone); err != nil {
			return 0, err
		}
	}
	return int(tag.RowsAffected()), nil
}

// Secret returns the named 32-byte secret, made by the first box that
// asks and then the same on every box.
func (db *DB) Secret(ctx context.Context, name string) ([]byte, error) {
	if err := storage.CheckSecretName(name); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	v := make([]byte, 32)
	rand.Read(v)
	if _, err := db.pool.Exec(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, v); err != nil {
		return nil, err
	}
	err := db.pool.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&v)
	return v, err
}
