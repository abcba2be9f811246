package storage

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Users, their sessions and the invitations that link them to accounts:
// the records behind /auth/* and the dashboard. Like accounts and API
// keys, every record is kept in memory (loaded at Open, changed only by
// the methods below, this process being the only writer) and every
// change is one synced Pebble batch, so a kill -9 loses none of them.
//
// Secrets are stored only as hashes: a password as the Argon2id string
// its caller made (this package never sees a password), a session or
// invitation token as its SHA-256. Tokens carry 256 random bits, so a
// fast hash is as safe for them as for API keys (see APIKey).

// Role is what a user may do in an account.
type Role string

// The roles. An owner manages keys, webhooks and the team; a member
// validates, runs batches and reads history.
const (
	RoleOwner  Role = "owner"
	RoleMember Role = "member"
)

// Valid reports whether r is a role.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleMember }

// Membership links a user to an account.
type Membership struct {
	Account string    `json:"account"`
	Role    Role      `json:"role"`
	Since   time.Time `json:"since"`
}

// User is a person who signs in to the dashboard.
type User struct {
	// ID is "user_" and 20 characters of [a-z0-9].
	ID string `json:"id"`
	// Email is as given at registration, trimmed; it is unique without
	// regard to case.
	Email string `json:"email"`
	// PasswordHash is the PHC string of the password's Argon2id hash.
	PasswordHash string `json:"password_hash"`
	// Operator users see the operator view (egress pool, every account).
	Operator          bool         `json:"operator,omitempty"`
	Accounts          []Membership `json:"accounts,omitempty"`
	CreatedAt         time.Time    `json:"created_at"`
	PasswordChangedAt time.Time    `json:"password_changed_at,omitzero"`
}

// Role returns the user's role in account, if a member.
func (u User) Role(account string) (Role, bool) {
	for _, m := range u.Accounts {
		if m.Account == account {
			return m.Role, true
		}
	}
	return "", false
}

func (u User) clone() User {
	u.Accounts = slices.Clone(u.Accounts)
	return u
}

// Session is a signed-in browser. Its token is "<ID>.<secret>"; only the
// token's SHA-256 is stored.
type Session struct {
	// ID is 20 characters of [a-z0-9]: not secret, it names the session
	// in logs and in the list of a user's sessions.
	ID   string `json:"id"`
	Hash []byte `json:"hash"`
	User string `json:"user"`
	// Account is the account the dashboard shows (one of the user's).
	Account   string    `json:"account,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// LastSeen is written at most once a minute (TouchSession).
	LastSeen  time.Time `json:"last_seen"`
	ExpiresAt time.Time `json:"expires_at"`
	IP        string    `json:"ip,omitempty"`
	UserAgent string    `json:"user_agent,omitempty"`
}

// Invite is a one-time invitation to join an account with a role. Its
// token is "inv_<ID>_<secret>"; only the token's SHA-256 is stored.
type Invite struct {
	// ID is 12 characters of [a-z0-9]; not secret.
	ID      string `json:"id"`
	Hash    []byte `json:"hash"`
	Account string `json:"account"`
	Role    Role   `json:"role"`
	// Email, when set, is the only address that may redeem it.
	Email string `json:"email,omitempty"`
	// CreatedBy is the inviting user's id, or "operator" (verifyctl).
	CreatedBy  string    `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	RedeemedBy string    `json:"redeemed_by,omitempty"`
	RedeemedAt time.Time `json:"redeemed_at,omitzero"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
}

// Pending reports whether the invitation can still be redeemed at now.
func (iv Invite) Pending(now time.Time) bool {
	return iv.RedeemedBy == "" && iv.RevokedAt.IsZero() && now.Before(iv.ExpiresAt)
}

// Errors of the user records, each wrapping ErrInvalid, ErrNotFound or
// ErrExists so callers may test either.
var (
	// ErrEmailTaken: a user with that email (any case) exists.
	ErrEmailTaken = fmt.Errorf("%w: a user with that email exists", ErrExists)
	// ErrInviteInvalid: the token is malformed, unknown, redeemed,
	// revoked, expired, or for another email. The API does not tell
	// which.
	ErrInviteInvalid = fmt.Errorf("%w: invitation invalid, used or expired", ErrNotFound)
	// ErrSessionInvalid: the session token is malformed or unknown, or
	// its secret does not match.
	ErrSessionInvalid = fmt.Errorf("%w: no such session", ErrNotFound)
	// ErrLastOwner: the change would leave an account without an owner.
	ErrLastOwner = fmt.Errorf("%w: an account keeps at least one owner", ErrInvalid)
)

const (
	sessionIDLen = 20
	inviteIDLen  = 12
	tokenSecret  = 43 // characters of alphaBase62: 256 bits
	inviteLead   = "inv_"
	// OperatorInviter is Invite.CreatedBy for invitations made by an
	// operator with verifyctl.
	OperatorInviter = "operator"
	// MaxEmail is the longest email a user may have (spec §8).
	MaxEmail = 320
)

// userState is the in-memory copy of the user records.
type userState struct {
	users    map[string]User
	byEmail  map[string]string // lower-cased email → user id
	sessions map[string]Session
	invites  map[string]Invite
}

func checkEmail(email string) error {
	switch {
	case email == "":
		return invalidf("email is empty")
	case len(email) > MaxEmail:
		return invalidf("email longer than %d bytes", MaxEmail)
	case !strings.Contains(email, "@"):
		return invalidf("email has no @")
	}
	return nil
}

// CreateUser adds a user with no account (an operator, or one linked
// later with an invitation).
func (db *DB) CreateUser(email, passwordHash string, operator bool) (User, error) {
	return db.register(strings.TrimSpace(email), passwordHash, operator, nil)
}

// RegisterWithInvite creates a user and redeems the invitation token for
// it, in one write: the user exists only as a member of the invitation's
// account.
func (db *DB) RegisterWithInvite(email, passwordHash, token string) (User, Invite, error) {
	var iv Invite
	u, err := db.register(strings.TrimSpace(email), passwordHash, false, func(b *pebble.Batch, u *User) (func(), error) {
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
func (db *DB) RegisterWithAccount(email, passwordHash, accountName string, plan Plan, credits int64) (User, Account, error) {
	if !plan.Valid() {
		return User{}, Account{}, invalidf("unknown plan %q", plan)
	}
	if credits < 0 {
		return User{}, Account{}, invalidf("starting credits must not be negative, not %d", credits)
	}
	var acct Account
	u, err := db.register(strings.TrimSpace(email), passwordHash, false, func(b *pebble.Batch, u *User) (func(), error) {
		db.mu.RLock()
		var err error
		acct, err = db.newAccountLocked(clip(strings.TrimSpace(accountName), 200), plan)
		db.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		acct.Grant = credits
		if err := putJSON(b, accountKey(acct.ID), acct); err != nil {
			return nil, err
		}
		u.Accounts = append(u.Accounts, Membership{Account: acct.ID, Role: RoleOwner, Since: acct.CreatedAt})
		return func() {
			db.mu.Lock()
			db.accounts[acct.ID] = acct
			db.mu.Unlock()
		}, nil
	})
	if err != nil {
		return User{}, Account{}, err
	}
	if err := db.settleGrant(acct.ID); err != nil {
		return u, acct, err
	}
	a, err := db.GetAccount(acct.ID)
	return u, a, err
}

// settleGrant turns the account's pending grant into a ledger entry and
// clears it, in one synced write. Only the registration that made the
// account (before it answers) and Open call it: no client knows the
// account yet, so no other change of its record comes between.
func (db *DB) settleGrant(id string) error {
	a, err := db.GetAccount(id)
	if err != nil || a.Grant == 0 {
		return err
	}
	grant := a.Grant
	a.Grant = 0
	_, err = db.adjust(id, func(tx *ledgerTx) (Entry, error) {
		if err := putJSON(tx.b, accountKey(id), a); err != nil {
			return Entry{}, err
		}
		return tx.add(EntryAdd, grant, grant, 0, 0, "", "starting credits (open registration)"), nil
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
func (db *DB) register(email, passwordHash string, operator bool, stage func(*pebble.Batch, *User) (func(), error)) (User, error) {
	if err := db.check(); err != nil {
		return User{}, err
	}
	if err := checkEmail(email); err != nil {
		return User{}, err
	}
	if passwordHash == "" {
		return User{}, invalidf("password hash is empty")
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	u := User{Email: email, PasswordHash: passwordHash, Operator: operator, CreatedAt: db.now().Truncate(time.Millisecond)}
	for {
		u.ID = NewUserID()
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
			return User{}, err
		}
	}
	if _, taken := db.us.byEmail[strings.ToLower(email)]; taken {
		b.Close()
		return User{}, ErrEmailTaken
	}
	if err := putJSON(b, userKey(u.ID), u); err != nil {
		b.Close()
		return User{}, err
	}
	b.Set(userEmailKey(email), []byte(u.ID), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		return User{}, err
	}
	db.us.users[u.ID] = u
	db.us.byEmail[strings.ToLower(email)] = u.ID
	if done != nil {
		done()
	}
	return u.clone(), nil
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
func (db *DB) GetUser(id string) (User, error) {
	if err := db.check(); err != nil {
		return User{}, err
	}
	db.umu.RLock()
	defer db.umu.RUnlock()
	u, ok := db.us.users[id]
	if !ok {
		return User{}, fmt.Errorf("%w: user %q", ErrNotFound, id)
	}
	return u.clone(), nil
}

// UserByEmail finds a user by email, without regard to case.
func (db *DB) UserByEmail(email string) (User, error) {
	if err := db.check(); err != nil {
		return User{}, err
	}
	db.umu.RLock()
	defer db.umu.RUnlock()
	id, ok := db.us.byEmail[strings.ToLower(strings.TrimSpace(email))]
	if !ok {
		return User{}, fmt.Errorf("%w: no user with that email", ErrNotFound)
	}
	return db.us.users[id].clone(), nil
}

// ListUsers returns every user, ordered by email.
func (db *DB) ListUsers() ([]User, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.umu.RLock()
	out := make([]User, 0, len(db.us.users))
	for _, u := range db.us.users {
		out = append(out, u.clone())
	}
	db.umu.RUnlock()
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(strings.ToLower(a.Email), strings.ToLower(b.Email)) })
	return out, nil
}

// Members returns the users of an account, ordered by email.
func (db *DB) Members(account string) ([]User, error) {
	all, err := db.ListUsers()
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
func (db *DB) updateUser(id string, change func(*User, *pebble.Batch) (func(), error)) (User, error) {
	if err := db.check(); err != nil {
		return User{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	u, ok := db.us.users[id]
	if !ok {
		return User{}, fmt.Errorf("%w: user %q", ErrNotFound, id)
	}
	u = u.clone()
	b := db.pdb.NewBatch()
	after, err := change(&u, b)
	if err == nil {
		err = putJSON(b, userKey(u.ID), u)
	}
	if err != nil {
		b.Close()
		return User{}, err
	}
	if err := db.commit(b, pebble.Sync); err != nil {
		return User{}, err
	}
	db.us.users[id] = u
	if after != nil {
		after()
	}
	return u.clone(), nil
}

// SetPassword replaces the user's password hash and ends every session
// of the user, in one write.
func (db *DB) SetPassword(id, passwordHash string) (User, error) {
	if passwordHash == "" {
		return User{}, invalidf("password hash is empty")
	}
	return db.updateUser(id, func(u *User, b *pebble.Batch) (func(), error) {
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
func (db *DB) RehashPassword(id, old, hash string) error {
	_, err := db.updateUser(id, func(u *User, _ *pebble.Batch) (func(), error) {
		if u.PasswordHash != old {
			return nil, fmt.Errorf("%w: the password changed meanwhile", ErrInvalid)
		}
		u.PasswordHash = hash
		return nil, nil
	})
	return err
}

// SetOperator grants or withdraws the operator role.
func (db *DB) SetOperator(id string, operator bool) (User, error) {
	return db.updateUser(id, func(u *User, _ *pebble.Batch) (func(), error) { u.Operator = operator; return nil, nil })
}

// ownersLocked counts the owners of account, the user except with role r.
func (db *DB) ownersLocked(account, except string, r Role) int {
	n := 0
	for _, u := range db.us.users {
		role, ok := u.Role(account)
		if u.ID == except {
			role, ok = r, r != ""
		}
		if ok && role == RoleOwner {
			n++
		}
	}
	return n
}

// SetRole changes the user's role in account; an empty role removes the
// membership. An account keeps at least one owner (ErrLastOwner).
// Sessions are not touched: server/web reads the role from the user at
// each request, never from the session.
func (db *DB) SetRole(account, id string, role Role) (User, error) {
	if role != "" && !role.Valid() {
		return User{}, invalidf("unknown role %q", role)
	}
	return db.updateUser(id, func(u *User, _ *pebble.Batch) (func(), error) {
		i := slices.IndexFunc(u.Accounts, func(m Membership) bool { return m.Account == account })
		if i < 0 {
			return nil, fmt.Errorf("%w: user %q is not a member of %q", ErrNotFound, id, account)
		}
		if u.Accounts[i].Role == RoleOwner && role != RoleOwner && db.ownersLocked(account, id, role) == 0 {
			return nil, ErrLastOwner
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
func (db *DB) CreateInvite(account string, role Role, email, createdBy string, ttl time.Duration) (string, Invite, error) {
	if err := db.check(); err != nil {
		return "", Invite{}, err
	}
	if !role.Valid() {
		return "", Invite{}, invalidf("unknown role %q", role)
	}
	if ttl <= 0 {
		return "", Invite{}, invalidf("invitation lifetime must be positive")
	}
	email = strings.TrimSpace(email)
	if email != "" {
		if err := checkEmail(email); err != nil {
			return "", Invite{}, err
		}
	}
	if !db.accountExists(account) {
		return "", Invite{}, fmt.Errorf("%w: account %q", ErrNotFound, account)
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	var id, token string
	var sum []byte
	for {
		if id, token, sum = NewInviteToken(); db.us.invites[id].ID == "" {
			break
		}
	}
	now := db.now().Truncate(time.Millisecond)
	iv := Invite{ID: id, Hash: sum, Account: account, Role: role, Email: email, CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := db.putRecord(inviteKey(id), iv); err != nil {
		return "", Invite{}, err
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

// parseInvite returns the id of a token "inv_<id>_<secret>".
func parseInvite(token string) (string, bool) {
	if len(token) != len(inviteLead)+inviteIDLen+1+tokenSecret || !strings.HasPrefix(token, inviteLead) ||
		token[len(inviteLead)+inviteIDLen] != '_' {
		return "", false
	}
	return token[len(inviteLead) : len(inviteLead)+inviteIDLen], true
}

// inviteLocked finds the pending invitation of token, for u's email.
func (db *DB) inviteLocked(token, email string) (Invite, error) {
	id, ok := parseInvite(token)
	if !ok {
		return Invite{}, ErrInviteInvalid
	}
	iv, ok := db.us.invites[id]
	if !ok {
		return Invite{}, ErrInviteInvalid
	}
	if !TokenMatches(token, iv.Hash) || !iv.Pending(db.now()) ||
		iv.Email != "" && !strings.EqualFold(iv.Email, email) {
		return Invite{}, ErrInviteInvalid
	}
	if !db.accountExists(iv.Account) {
		return Invite{}, ErrInviteInvalid
	}
	return iv, nil
}

// redeemLocked stages the redemption of token by u into b: the
// invitation is marked used, the membership added to u (not yet written).
func (db *DB) redeemLocked(b *pebble.Batch, token string, u *User) (Invite, error) {
	iv, err := db.inviteLocked(token, u.Email)
	if err != nil {
		return Invite{}, err
	}
	Redeem(&iv, u, db.now())
	if err := putJSON(b, inviteKey(iv.ID), iv); err != nil {
		return Invite{}, err
	}
	return iv, nil
}

// RedeemInvite links an existing user to the invitation's account (POST
// /auth/link), in one write.
func (db *DB) RedeemInvite(token, userID string) (User, Invite, error) {
	var iv Invite
	u, err := db.updateUser(userID, func(u *User, b *pebble.Batch) (func(), error) {
		var err error
		iv, err = db.redeemLocked(b, token, u)
		return func() { db.us.invites[iv.ID] = iv }, err
	})
	if err != nil {
		return User{}, Invite{}, err
	}
	return u, iv, nil
}

// Invites returns the account's pending invitations, newest first.
func (db *DB) Invites(account string) ([]Invite, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	now := db.now()
	db.umu.RLock()
	var out []Invite
	for _, iv := range db.us.invites {
		if iv.Account == account && iv.Pending(now) {
			out = append(out, iv)
		}
	}
	db.umu.RUnlock()
	slices.SortFunc(out, func(a, b Invite) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// RevokeInvite withdraws a pending invitation of account.
func (db *DB) RevokeInvite(account, id string) (Invite, error) {
	if err := db.check(); err != nil {
		return Invite{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	iv, ok := db.us.invites[id]
	if !ok || iv.Account != account {
		return Invite{}, fmt.Errorf("%w: invitation %q", ErrNotFound, id)
	}
	if !iv.Pending(db.now()) {
		return iv, nil
	}
	iv.RevokedAt = db.now().Truncate(time.Millisecond)
	if err := db.putRecord(inviteKey(id), iv); err != nil {
		return Invite{}, err
	}
	db.us.invites[id] = iv
	return iv, nil
}

// --- sessions

// CreateSession starts a session of the user on account (may be empty),
// ending after ttl. The token is returned once.
func (db *DB) CreateSession(user, account, ip, userAgent string, ttl time.Duration) (string, Session, error) {
	if err := db.check(); err != nil {
		return "", Session{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	if _, ok := db.us.users[user]; !ok {
		return "", Session{}, fmt.Errorf("%w: user %q", ErrNotFound, user)
	}
	var id, token string
	var sum []byte
	for {
		if id, token, sum = NewSessionToken(); db.us.sessions[id].ID == "" {
			break
		}
	}
	now := db.now().Truncate(time.Millisecond)
	s := Session{ID: id, Hash: sum, User: user, Account: account, CreatedAt: now, LastSeen: now,
		ExpiresAt: now.Add(ttl), IP: clip(ip, 64), UserAgent: clip(userAgent, 200)}
	if err := db.putRecord(sessionKey(id), s); err != nil {
		return "", Session{}, err
	}
	db.us.sessions[id] = s
	return token, s, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// LookupSession returns the session of token, or ErrSessionInvalid. It
// does not judge expiry: the caller knows the idle timeout.
func (db *DB) LookupSession(token string) (Session, error) {
	if err := db.check(); err != nil {
		return Session{}, err
	}
	id, ok := SessionID(token)
	if !ok {
		return Session{}, ErrSessionInvalid
	}
	db.umu.RLock()
	s, found := db.us.sessions[id]
	db.umu.RUnlock()
	if !found || !TokenMatches(token, s.Hash) {
		return Session{}, ErrSessionInvalid
	}
	return s, nil
}

// TouchSession records that the session was used at now. The write is
// not synced and happens at most once a minute per session: a crash
// loses at most a minute of idle time, never the session.
func (db *DB) TouchSession(id string) error {
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
func (db *DB) SetSessionAccount(id, account string) (Session, error) {
	if err := db.check(); err != nil {
		return Session{}, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	s, ok := db.us.sessions[id]
	if !ok {
		return Session{}, ErrSessionInvalid
	}
	u := db.us.users[s.User]
	if _, member := u.Role(account); !member && !(u.Operator && db.accountExists(account)) {
		return Session{}, fmt.Errorf("%w: account %q", ErrNotFound, account)
	}
	s.Account = account
	if err := db.putRecord(sessionKey(id), s); err != nil {
		return Session{}, err
	}
	db.us.sessions[id] = s
	return s, nil
}

// DeleteSession ends a session (logout). Ending an ended one is not an
// error.
func (db *DB) DeleteSession(id string) error {
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

// UserSessions returns the user's sessions, newest first.
func (db *DB) UserSessions(user string) []Session {
	db.umu.RLock()
	var out []Session
	for _, s := range db.us.sessions {
		if s.User == user {
			out = append(out, s)
		}
	}
	db.umu.RUnlock()
	slices.SortFunc(out, func(a, b Session) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// PurgeSessions deletes the sessions past their expiry or idle longer
// than idle, and invitations ended more than 30 days ago.
func (db *DB) PurgeSessions(idle time.Duration) (int, error) {
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
		if now.Sub(InviteEnded(iv)) > 30*24*time.Hour {
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
func (db *DB) Secret(name string) ([]byte, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := CheckSecretName(name); err != nil {
		return nil, err
	}
	db.umu.Lock()
	defer db.umu.Unlock()
	v, err := db.get(secretKey(name))
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, ErrNotFound) {
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
	db.us = userState{users: map[string]User{}, byEmail: map[string]string{}, sessions: map[string]Session{}, invites: map[string]Invite{}}
	load := func(prefix string, fn func(v []byte) error) error {
		return db.scanPrefix([]byte(prefix), func(k, v []byte) (bool, error) {
			if err := fn(v); err != nil {
				return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
			}
			return true, nil
		})
	}
	if err := load(prefixUser, func(v []byte) error {
		var u User
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
		var s Session
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		db.us.sessions[s.ID] = s
		return nil
	}); err != nil {
		return err
	}
	return load(prefixInvite, func(v []byte) error {
		var iv Invite
		if err := json.Unmarshal(v, &iv); err != nil {
			return err
		}
		db.us.invites[iv.ID] = iv
		return nil
	})
}
