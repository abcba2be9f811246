package pebble

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// userState is the in-memory copy of the user records.
type userState struct {
	users    map[string]storage.User
	byEmail  map[string]string // lower-cased email → user id
	sessions map[string]storage.Session
	invites  map[string]storage.Invite
}

// CreateUser adds a user with no account (an operator, or one linked
// later with an invitation).
func (db *DB) CreateUser(ctx context.Context, email, passwordHash string, operator bool) (storage.User, error) {
	return db.register(strings.TrimSpace(email), passwordHash, operator, nil)
}

// RegisterWithInvite creates a user and redeems the invitation token for
// it, in one write: the user exists only as a member of the invitation's
// account.
func (db *DB) RegisterWithInvite(ctx context.Context, email, passwordHash, token string) (storage.User, storage.Invite, error) {
	var iv storage.Invite
	u, err := db.register(strings.TrimSpace(email), passwordHash, false, func(b *pebble.Batch, u *storage.User) (func(), error) {
		var err error
		iv, err = db.redeemLocked(b, token, u)
		return func() { db.us.invites[iv.ID] = iv }, err
	})
	return u, iv, err
}

// RegisterWithAccount creates a user who owns a new account on plan with
// credits to start with (open registration). One synced write holds the
// account, the user and the grant of credits; the grant then becomes a
// ledger entry in a second write, and Open finishes a grant a crash left
// between the two. No credit is lost or given twice.
func (db *DB) RegisterWithAccount(ctx context.Context, email, passwordHash, accountName string, plan storage.Plan, credits int64) (storage.User, storage.Account, error) {
	if err := storage.CheckPlan(plan); err != nil {
		return storage.User{}, storage.Account{}, err
	}
	if err := storage.CheckStartingCredits(credits); err != nil {
		return storage.User{}, storage.Account{}, err
	}
	var acct storage.Account
	u, err := db.register(strings.TrimSpace(email), passwordHash, false, func(b *pebble.Batch, u *storage.User) (func(), error) {
		db.mu.RLock()
		var err error
		acct, err = db.newAccountLocked(storage.Clip(strings.TrimSpace(accountName), 200), plan)
		db.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		acct.Grant = credits
		if err := putJSON(b, accountKey(acct.ID), acct); err != nil {
			return nil, err
		}
		u.Accounts = append(u.Accounts, storage.Membership{Account: acct.ID, Role: storage.RoleOwner, Since: acct.CreatedAt})
		return func() {
			db.mu.Lock()
			db.accounts[acct.ID] = acct
			db.mu.Unlock()
		}, nil
	})
	if err != nil {
		return storage.User{}, storage.Account{}, err
	}
	if err := db.settleGrant(acct.ID); err != nil {
		return u, acct, err
	}
	a, err := db.GetAccount(ctx, acct.ID)
	return u, a, err
}

// settleGrant turns the account's pending grant into a ledger entry and
// clears it, in one synced write. Only the registration that made the
// account (before it answers) and Open call it: no client knows the
// account yet, so no other change of its record comes between.
func (db *DB) settleGrant(id string) error {
	a, err := db.GetAccount(context.Background(), id)
	if err != nil || a.Grant == 0 {
		return err
	}
	grant := a.Grant
	a.Grant = 0
	_, err = db.adjust(id, func(tx *ledgerTx) (storage.Entry, error) {
		if err := putJSON(tx.b, accountKey(id), a); err != nil {
			return storage.Entry{}, err
		}
		return tx.add(storage.EntryAdd, grant, grant, 0, 0, "", "starting credits (open registration)"), nil
	})
	if err != nil {
		return err
	}
	db.mu.Lock()
	db.accounts[id] = a
	db.mu.Unlock()
	return nil
}

// settleGrants finishes, at Open, the grants a crash left pending.
func (db *DB) settleGrants() error {
	db.mu.RLock()
	var ids []string
	for id, a := range db.accounts {
		if a.Grant != 0 {
			ids = append(ids, id)
		}
	}
	db.mu.RUnlock()
	for _, id := range ids {
		if err := db.settleGrant(id); err != nil {
			return err
		}
	}
	return nil
}

// register writes a new user, and whatever stage adds to the same batch;
// the function stage returns runs after the write, under the users' lock.
func (db *DB) register(email, passwordHash string, operator bool, stage func(*pebble.Batch, *storage.User) (func(), error)) (storage.User, error) {
	if err := db.check(); err != nil {
		return storage.User{}, err
	}
	if err := storage.CheckEmail(email); err != nil {
		return storage.User{}, err
	}
	if err := storage.CheckPasswordHash(passwordHash); err != nil {
		return storage.User{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	u := storage.User{Email: email, PasswordHash: passwordHash, Operator: operator, CreatedAt: db.now().Truncate(time.Millisecond)}
	for {
		u.ID = storage.NewUserID()
		if _, dup := db.us.users[u.ID]; !dup {
			break
		}
	}
	b := db.pdb.NewBatch()
	var done func()
	if stage != nil {
		// The invitation is checked before the email: without a valid
		// one, nobody learns whether an email has a user.
		var err error
		if done, err = stage(b, &u); err != nil {
			b.Close()
			return storage.User{}, err
		}
	}
	if _, taken := db.us.byEmail[strings.ToLower(email)]; taken {
		b.Close()
		return storage.User{}, storage.ErrEmailTaken
	}
	if err := putJSON(b, userKey(u.ID), u); err != nil {
		b.Close()
		return storage.User{}, err
	}
	b.Set(userEmailKey(email), []byte(u.ID), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		return storage.User{}, err
	}
	db.us.users[u.ID] = u
	db.us.byEmail[strings.ToLower(email)] = u.ID
	if done != nil {
		done()
	}
	return u.Clone(), nil
}

func putJSON(b *pebble.Batch, key []byte, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Set(key, j, nil)
	return nil
}

// GetUser returns the user, or ErrNotFound.
func (db *DB) GetUser(ctx context.Context, id string) (storage.User, error) {
	if err := db.check(); err != nil {
		return storage.User{}, err
	}
	db.umu.RLock()
	defer db.umu.RUnlock()
	u, ok := db.us.users[id]
	if !ok {
		return storage.User{}, fmt.Errorf("%w: user %q", storage.ErrNotFound, id)
	}
	return u.Clone(), nil
}

// UserByEmail finds a user by email, without regard to case.
func (db *DB) UserByEmail(ctx context.Context, email string) (storage.User, error) {
	if err := db.check(); err != nil {
		return storage.User{}, err
	}
	db.umu.RLock()
	defer db.umu.RUnlock()
	id, ok := db.us.byEmail[strings.ToLower(strings.TrimSpace(email))]
	if !ok {
		return storage.User{}, fmt.Errorf("%w: no user with that email", storage.ErrNotFound)
	}
	return db.us.users[id].Clone(), nil
}

// ListUsers returns every user, ordered by email.
func (db *DB) ListUsers(ctx context.Context) ([]storage.User, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.umu.RLock()
	out := make([]storage.User, 0, len(db.us.users))
	for _, u := range db.us.users {
		out = append(out, u.Clone())
	}
	db.umu.RUnlock()
	slices.SortFunc(out, func(a, b storage.User) int {
		return strings.Compare(strings.ToLower(a.Email), strings.ToLower(b.Email))
	})
	return out, nil
}

// Members returns the users of an account, ordered by email.
func (db *DB) Members(ctx context.Context, account string) ([]storage.User, error) {
	all, err := db.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, u := range all {
		if _, ok := u.Role(account); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// updateUser changes a user under the lock and writes it in one batch with
// what change adds to it; the function change returns runs after the
// write, still under the lock.
func (db *DB) updateUser(id string, change func(*storage.User, *pebble.Batch) (func(), error)) (storage.User, error) {
	if err := db.check(); err != nil {
		return storage.User{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	u, ok := db.us.users[id]
	if !ok {
		return storage.User{}, fmt.Errorf("%w: user %q", storage.ErrNotFound, id)
	}
	u = u.Clone()
	b := db.pdb.NewBatch()
	after, err := change(&u, b)
	if err == nil {
		err = putJSON(b, userKey(u.ID), u)
	}
	if err != nil {
		b.Close()
		return storage.User{}, err
	}
	if err := db.commit(b, pebble.Sync); err != nil {
		return storage.User{}, err
	}
	db.us.users[id] = u
	if after != nil {
		after()
	}
	return u.Clone(), nil
}

// SetPassword replaces the user's password hash and ends every session
// of the user, in one write.
func (db *DB) SetPassword(ctx context.Context, id, passwordHash string) (storage.User, error) {
	if err := storage.CheckPasswordHash(passwordHash); err != nil {
		return storage.User{}, err
	}
	return db.updateUser(id, func(u *storage.User, b *pebble.Batch) (func(), error) {
		u.PasswordHash = passwordHash
		u.PasswordChangedAt = db.now().Truncate(time.Millisecond)
		var ended []string
		for sid, s := range db.us.sessions {
			if s.User == id {
				b.Delete(sessionKey(sid), nil)
				ended = append(ended, sid)
			}
		}
		return func() {
			for _, sid := range ended {
				delete(db.us.sessions, sid)
			}
		}, nil
	})
}

// RehashPassword replaces the user's password hash with another of the
// same password (made at a higher cost), if it is still old; sessions
// stay, since the password did not change.
func (db *DB) RehashPassword(ctx context.Context, id, old, hash string) error {
	_, err := db.updateUser(id, func(u *storage.User, _ *pebble.Batch) (func(), error) {
		if err := storage.CheckRehash(u.PasswordHash, old); err != nil {
			return nil, err
		}
		u.PasswordHash = hash
		return nil, nil
	})
	return err
}

// SetOperator grants or withdraws the operator role.
func (db *DB) SetOperator(ctx context.Context, id string, operator bool) (storage.User, error) {
	return db.updateUser(id, func(u *storage.User, _ *pebble.Batch) (func(), error) { u.Operator = operator; return nil, nil })
}

// ownersLocked counts the owners of account, the user except with role r.
func (db *DB) ownersLocked(account, except string, r storage.Role) int {
	n := 0
	for _, u := range db.us.users {
		role, ok := u.Role(account)
		if u.ID == except {
			role, ok = r, r != ""
		}
		if ok && role == storage.RoleOwner {
			n++
		}
	}
	return n
}

// SetRole changes the user's role in account; an empty role removes the
// membership. An account keeps at least one owner (ErrLastOwner).
// Sessions are not touched: server/web reads the role from the user at
// each request, never from the session.
func (db *DB) SetRole(ctx context.Context, account, id string, role storage.Role) (storage.User, error) {
	if err := storage.CheckSetRole(role); err != nil {
		return storage.User{}, err
	}
	return db.updateUser(id, func(u *storage.User, _ *pebble.Batch) (func(), error) {
		i := slices.IndexFunc(u.Accounts, func(m storage.Membership) bool { return m.Account == account })
		if i < 0 {
			return nil, fmt.Errorf("%w: user %q is not a member of %q", storage.ErrNotFound, id, account)
		}
		if u.Accounts[i].Role == storage.RoleOwner && role != storage.RoleOwner && db.ownersLocked(account, id, role) == 0 {
			return nil, storage.ErrLastOwner
		}
		if role == "" {
			u.Accounts = slices.Delete(u.Accounts, i, i+1)
		} else {
			u.Accounts[i].Role = role
		}
		return nil, nil
	})
}

// --- invitations

// CreateInvite mints a one-time invitation to account with role, valid
// for ttl, optionally only for email. The token is returned once.
func (db *DB) CreateInvite(ctx context.Context, account string, role storage.Role, email, createdBy string, ttl time.Duration) (string, storage.Invite, error) {
	if err := db.check(); err != nil {
		return "", storage.Invite{}, err
	}
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
	if !db.accountExists(account) {
		return "", storage.Invite{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	var id, token string
	var sum []byte
	for {
		if id, token, sum = storage.NewInviteToken(); db.us.invites[id].ID == "" {
			break
		}
	}
	now := db.now().Truncate(time.Millisecond)
	iv := storage.Invite{ID: id, Hash: sum, Account: account, Role: role, Email: email, CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := db.putRecord(inviteKey(id), iv); err != nil {
		return "", storage.Invite{}, err
	}
	db.us.invites[id] = iv
	return token, iv, nil
}

func (db *DB) putRecord(key []byte, v any) error {
	b := db.pdb.NewBatch()
	if err := putJSON(b, key, v); err != nil {
		b.Close()
		return err
	}
	return db.commit(b, pebble.Sync)
}

// inviteLocked finds the pending invitation of token, for u's email.
func (db *DB) inviteLocked(token, email string) (storage.Invite, error) {
	id, ok := storage.InviteID(token)
	if !ok {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	iv, ok := db.us.invites[id]
	if !ok {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	if !storage.TokenMatches(token, iv.Hash) || !iv.Pending(db.now()) ||
		iv.Email != "" && !strings.EqualFold(iv.Email, email) {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	if !db.accountExists(iv.Account) {
		return storage.Invite{}, storage.ErrInviteInvalid
	}
	return iv, nil
}

// redeemLocked stages the redemption of token by u into b: the
// invitation is marked used, the membership added to u (not yet written).
func (db *DB) redeemLocked(b *pebble.Batch, token string, u *storage.User) (storage.Invite, error) {
	iv, err := db.inviteLocked(token, u.Email)
	if err != nil {
		return storage.Invite{}, err
	}
	storage.Redeem(&iv, u, db.now())
	if err := putJSON(b, inviteKey(iv.ID), iv); err != nil {
		return storage.Invite{}, err
	}
	return iv, nil
}

// RedeemInvite links an existing user to the invitation's account (POST
// /auth/link), in one write.
func (db *DB) RedeemInvite(ctx context.Context, token, userID string) (storage.User, storage.Invite, error) {
	var iv storage.Invite
	u, err := db.updateUser(userID, func(u *storage.User, b *pebble.Batch) (func(), error) {
		var err error
		iv, err = db.redeemLocked(b, token, u)
		return func() { db.us.invites[iv.ID] = iv }, err
	})
	if err != nil {
		return storage.User{}, storage.Invite{}, err
	}
	return u, iv, nil
}

// Invites returns the account's pending invitations, newest first.
func (db *DB) Invites(ctx context.Context, account string) ([]storage.Invite, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	now := db.now()
	db.umu.RLock()
	var out []storage.Invite
	for _, iv := range db.us.invites {
		if iv.Account == account && iv.Pending(now) {
			out = append(out, iv)
		}
	}
	db.umu.RUnlock()
	slices.SortFunc(out, func(a, b storage.Invite) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// RevokeInvite withdraws a pending invitation of account.
func (db *DB) RevokeInvite(ctx context.Context, account, id string) (storage.Invite, error) {
	if err := db.check(); err != nil {
		return storage.Invite{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	iv, ok := db.us.invites[id]
	if !ok || iv.Account != account {
		return storage.Invite{}, fmt.Errorf("%w: invitation %q", storage.ErrNotFound, id)
	}
	if !iv.Pending(db.now()) {
		return iv, nil
	}
	iv.RevokedAt = db.now().Truncate(time.Millisecond)
	if err := db.putRecord(inviteKey(id), iv); err != nil {
		return storage.Invite{}, err
	}
	db.us.invites[id] = iv
	return iv, nil
}

// --- sessions

// CreateSession starts a session of the user on account (may be empty),
// ending after ttl. The token is returned once.
func (db *DB) CreateSession(ctx context.Context, user, account, ip, userAgent string, ttl time.Duration) (string, storage.Session, error) {
	if err := db.check(); err != nil {
		return "", storage.Session{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	if _, ok := db.us.users[user]; !ok {
		return "", storage.Session{}, fmt.Errorf("%w: user %q", storage.ErrNotFound, user)
	}
	var id, token string
	var sum []byte
	for {
		if id, token, sum = storage.NewSessionToken(); db.us.sessions[id].ID == "" {
			break
		}
	}
	now := db.now().Truncate(time.Millisecond)
	s := storage.Session{ID: id, Hash: sum, User: user, Account: account, CreatedAt: now, LastSeen: now,
		ExpiresAt: now.Add(ttl), IP: storage.Clip(ip, 64), UserAgent: storage.Clip(userAgent, 200)}
	if err := db.putRecord(sessionKey(id), s); err != nil {
		return "", storage.Session{}, err
	}
	db.us.sessions[id] = s
	return token, s, nil
}

// LookupSession returns the session of token, or ErrSessionInvalid. It
// does not judge expiry: the caller knows the idle timeout.
func (db *DB) LookupSession(ctx context.Context, token string) (storage.Session, error) {
	if err := db.check(); err != nil {
		return storage.Session{}, err
	}
	id, ok := storage.SessionID(token)
	if !ok {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	db.umu.RLock()
	s, found := db.us.sessions[id]
	db.umu.RUnlock()
	if !found || !storage.TokenMatches(token, s.Hash) {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	return s, nil
}

// TouchSession records that the session was used at now. The write is
// not synced and happens at most once a minute per session: a crash
// loses at most a minute of idle time, never the session.
func (db *DB) TouchSession(ctx context.Context, id string) error {
	if err := db.check(); err != nil {
		return err
	}
	now := db.now().Truncate(time.Millisecond)
	db.umu.RLock()
	s, ok := db.us.sessions[id]
	db.umu.RUnlock()
	if !ok || now.Sub(s.LastSeen) < time.Minute {
		return nil // the common case: no write, no write lock
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	if s, ok = db.us.sessions[id]; !ok || now.Sub(s.LastSeen) < time.Minute {
		return nil
	}
	s.LastSeen = now
	b := db.pdb.NewBatch()
	if err := putJSON(b, sessionKey(id), s); err != nil {
		b.Close()
		return err
	}
	if err := db.commit(b, pebble.NoSync); err != nil {
		return err
	}
	db.us.sessions[id] = s
	return nil
}

// SetSessionAccount switches the account the session shows; the user must
// be a member (or an operator).
func (db *DB) SetSessionAccount(ctx context.Context, id, account string) (storage.Session, error) {
	if err := db.check(); err != nil {
		return storage.Session{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	s, ok := db.us.sessions[id]
	if !ok {
		return storage.Session{}, storage.ErrSessionInvalid
	}
	u := db.us.users[s.User]
	if _, member := u.Role(account); !member && !(u.Operator && db.accountExists(account)) {
		return storage.Session{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	s.Account = account
	if err := db.putRecord(sessionKey(id), s); err != nil {
		return storage.Session{}, err
	}
	db.us.sessions[id] = s
	return s, nil
}

// DeleteSession ends a session (logout). Ending an ended one is not an
// error.
func (db *DB) DeleteSession(ctx context.Context, id string) error {
	if err := db.check(); err != nil {
		return err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	if _, ok := db.us.sessions[id]; !ok {
		return nil
	}
	b := db.pdb.NewBatch()
	b.Delete(sessionKey(id), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		return err
	}
	delete(db.us.sessions, id)
	return nil
}

// PurgeSessions deletes the sessions past their expiry or idle longer
// than idle, and invitations ended more than 30 days ago.
func (db *DB) PurgeSessions(ctx context.Context, idle time.Duration) (int, error) {
	if err := db.check(); err != nil {
		return 0, err
	}
	now := db.now()
	db.umu.Lock()
	defer db.umu.Unlock()
	b := db.pdb.NewBatch()
	var gone, goneInv []string
	for id, s := range db.us.sessions {
		if !now.Before(s.ExpiresAt) || idle > 0 && now.Sub(s.LastSeen) >= idle {
			b.Delete(sessionKey(id), nil)
			gone = append(gone, id)
		}
	}
	for id, iv := range db.us.invites {
		if now.Sub(storage.InviteEnded(iv)) > 30*24*time.Hour {
			b.Delete(inviteKey(id), nil)
			goneInv = append(goneInv, id)
		}
	}
	if len(gone)+len(goneInv) == 0 {
		b.Close()
		return 0, nil
	}
	if err := db.commit(b, pebble.NoSync); err != nil {
		return 0, err
	}
	for _, id := range gone {
		delete(db.us.sessions, id)
	}
	for _, id := range goneInv {
		delete(db.us.invites, id)
	}
	return len(gone), nil
}

// --- server secrets

// Secret returns the named 32-byte server secret (the dashboard's CSRF
// key), made at its first use and kept, synced, in meta/.
func (db *DB) Secret(ctx context.Context, name string) ([]byte, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := storage.CheckSecretName(name); err != nil {
		return nil, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	v, err := db.get(secretKey(name))
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	v = make([]byte, 32)
	rand.Read(v)
	b := db.pdb.NewBatch()
	b.Set(secretKey(name), v, nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		return nil, err
	}
	return v, nil
}

// loadUsers reads the users, sessions and invitations at Open.
func (db *DB) loadUsers() error {
	db.us = userState{users: map[string]storage.User{}, byEmail: map[string]string{}, sessions: map[string]storage.Session{}, invites: map[string]storage.Invite{}}
	load := func(prefix string, fn func(v []byte) error) error {
		return db.scanPrefix([]byte(prefix), func(k, v []byte) (bool, error) {
			if err := fn(v); err != nil {
				return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
			}
			return true, nil
		})
	}
	if err := load(prefixUser, func(v []byte) error {
		var u storage.User
		if err := json.Unmarshal(v, &u); err != nil {
			return err
		}
		db.us.users[u.ID] = u
		db.us.byEmail[strings.ToLower(u.Email)] = u.ID
		return nil
	}); err != nil {
		return err
	}
	if err := load(prefixSession, func(v []byte) error {
		var s storage.Session
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		db.us.sessions[s.ID] = s
		return nil
	}); err != nil {
		return err
	}
	return load(prefixInvite, func(v []byte) error {
		var iv storage.Invite
		if err := json.Unmarshal(v, &iv); err != nil {
			return err
		}
		db.us.invites[iv.ID] = iv
		return nil
	})
}
