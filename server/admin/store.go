package admin

import (
	"context"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Store is what the operator's API needs of storage: accounts, credits and the ledger, API keys, users and invitations, and the webhook outbox it lists.
type Store interface {
	AddCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error)
	CreateAccount(ctx context.Context, name string, plan storage.Plan) (storage.Account, error)
	CreateInvite(ctx context.Context, account string, role storage.Role, email, createdBy string, ttl time.Duration) (string, storage.Invite, error)
	CreateUser(ctx context.Context, email, passwordHash string, operator bool) (storage.User, error)
	Credits(ctx context.Context, account string) (storage.Credits, error)
	DeadLetters(ctx context.Context, account string, limit int) ([]storage.Event, error)
	GetAccount(ctx context.Context, id string) (storage.Account, error)
	GetUser(ctx context.Context, id string) (storage.User, error)
	Invites(ctx context.Context, account string) ([]storage.Invite, error)
	LastEvent(ctx context.Context, account string) (storage.Event, error)
	Ledger(ctx context.Context, account string, after uint64, limit int) ([]storage.Entry, error)
	ListAccounts(ctx context.Context) ([]storage.Account, error)
	ListKeys(ctx context.Context, account string) ([]storage.APIKey, error)
	ListUsers(ctx context.Context) ([]storage.User, error)
	LookupKey(ctx context.Context, prefix string) (storage.APIKey, error)
	MintKey(ctx context.Context, account string, scopes []string, label string) (string, storage.APIKey, error)
	OutcomeSettings(ctx context.Context, account string) (storage.OutcomeSettings, error)
	OutboxEvents(ctx context.Context, account string, limit int) ([]storage.Event, error)
	RevokeKey(ctx context.Context, prefix string) (storage.APIKey, error)
	RotateWebhookSecret(ctx context.Context, id string) (storage.Account, error)
	SetCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error)
	SetOperator(ctx context.Context, id string, operator bool) (storage.User, error)
	SetOutcomeSettings(ctx context.Context, account string, s storage.OutcomeSettings) error
	SetPlan(ctx context.Context, id string, plan storage.Plan) (storage.Account, error)
	UserByEmail(ctx context.Context, email string) (storage.User, error)
}
