package storage

import (
	"fmt"
	"slices"
	"strings"
	"time"
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

// Clone returns a copy that shares no slice with u.
func (u User) Clone() User {
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

// parseInvite returns the id of a token "inv_<id>_<secret>".
func parseInvite(token string) (string, bool) {
	if len(token) != len(inviteLead)+inviteIDLen+1+tokenSecret || !strings.HasPrefix(token, inviteLead) ||
		token[len(inviteLead)+inviteIDLen] != '_' {
		return "", false
	}
	return token[len(inviteLead) : len(inviteLead)+inviteIDLen], true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
