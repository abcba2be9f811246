package web

import (
	"context"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Store is what the account surface needs of storage: users, their sessions and invitations, the accounts they belong to, and the secrets of its CSRF tokens.
type Store interface {
	CreateSession(ctx context.Context, user, account, ip, userAgent string, ttl time.Duration) (string, storage.Session, error)
	DailyCounts(ctx context.Context, account string, days int) ([]storage.DayCount, error)
	DeleteOutcomes(ctx context.Context, account string) (int, error)
	DeleteSession(ctx context.Context, id string) error
	GetAccount(ctx context.Context, id string) (storage.Account, error)
	GetUser(ctx context.Context, id string) (storage.User, error)
	Invites(ctx context.Context, account string) ([]storage.Invite, error)
	LookupKey(ctx context.Context, prefix string) (storage.APIKey, error)
	LookupSession(ctx context.Context, token string) (storage.Session, error)
	Members(ctx context.Context, account string) ([]storage.User, error)
	PurgeSessions(ctx context.Context, idle time.Duration) (int, error)
	RedeemInvite(ctx context.Context, token, userID string) (storage.User, storage.Invite, error)
	RegisterWithAccount(ctx context.Context, email, passwordHash, accountName string, plan storage.Plan, credits int64) (storage.User, storage.Account, error)
	RegisterWithInvite(ctx context.Context, email, passwordHash, token string) (storage.User, storage.Invite, error)
	RehashPassword(ctx context.Context, id, old, hash string) error
	RevokeInvite(ctx context.Context, account, id string) (storage.Invite, error)
	Secret(ctx context.Context, name string) ([]byte, error)
	SetPassword(ctx context.Context, id, passwordHash string) (storage.User, error)
	SetRole(ctx context.Context, account, id string, role storage.Role) (storage.User, error)
	SetSessionAccount(ctx context.Context, id, account string) (storage.Session, error)
	TouchSession(ctx context.Context, id string) error
	UserByEmail(ctx context.Context, email string) (storage.User, error)
}
