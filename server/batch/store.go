package batch

import (
	"context"

	"github.com/verifyd/verifyd/storage"
)

// Store is what the scheduler needs of storage: the jobs it runs, their
// addresses and results, and the outbox for reputation warnings. A store
// shared by a fleet also implements storage.JobLeases (Options.Leases).
type Store interface {
	StartJob(ctx context.Context, id string) (storage.Job, error)
	PutJobResults(ctx context.Context, id string, results []storage.JobResult) (storage.Job, error)
	FinishJob(ctx context.Context, id string, f storage.JobFinish) (storage.Job, error)
	ListJobs(ctx context.Context, status storage.JobStatus) ([]storage.Job, error)
	PendingAddresses(ctx context.Context, id string, fn func(index int, addr string) error) error
	Enqueue(ctx context.Context, ev storage.Event) (storage.Event, error)
}
