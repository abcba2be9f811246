package server

import (
	"context"
	"time"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// Store is what the /v1 handlers need of storage: the credits a
// validation holds and charges, results and history, the jobs POST
// /v1/batch creates and their results, and the Idempotency-Key records
// (httpapi.IdemStore), the delivery outcomes GET /v1/accuracy measures,
// and the platform settings /v1/outcomes/{platform} checks against.
type Store interface {
	httpapi.IdemStore
	Credits(ctx context.Context, account string) (storage.Credits, error)
	Hold(ctx context.Context, account string, n int64, ref string) (storage.Hold, error)
	Charge(ctx context.Context, h storage.Hold, req storage.ChargeRequest) (storage.Charged, error)
	ChargeDirect(ctx context.Context, account string, n int64, req storage.ChargeRequest) (storage.Charged, error)
	Release(ctx context.Context, h storage.Hold, note string) (storage.Entry, error)
	LookupCache(ctx context.Context, account, email string, maxAge time.Duration) (r storage.Result, ok bool, err error)
	ListHistory(ctx context.Context, account, kind, cursor string, limit int) (storage.HistoryPage, error)
	CreateJob(ctx context.Context, spec storage.JobSpec) (storage.Job, error)
	AccountJob(ctx context.Context, account, id string) (storage.Job, error)
	ListAccountJobs(ctx context.Context, account string, limit int) ([]storage.Job, error)
	JobResults(ctx context.Context, id string, fn func(storage.Result) error) error
	ScanOutcomes(ctx context.Context, account string, since time.Time, fn func(storage.Outcome) error) error
	OutcomeSettings(ctx context.Context, account string) (storage.OutcomeSettings, error)
}
