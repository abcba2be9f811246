package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/typos"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
)

// Verifier runs the engine's batch mode: many addresses of one domain per
// SMTP session (probe.Pools.VerifyDomain, on the batch worker pool).
type Verifier interface {
	VerifyDomain(ctx context.Context, addrs []address.Input, prefer netip.Addr) ([]*probe.Result, error)
}

// Options configures the Scheduler. Zero fields take their defaults.
type Options struct {
	// DB holds jobs, results, credits and the outbox. Required.
	DB Store
	// Leases, when set, is the fleet's: the scheduler runs only the job
	// slices it leases (storage/postgres). Nil on one box.
	Leases storage.JobLeases
	// Verifier runs the engine. Required.
	Verifier Verifier
	// Hooks is told when an event was written to the outbox (a job's
	// end, a reputation warning): the webhook dispatcher. Nil: nobody.
	Hooks Waker
	// Learn changes the engine's results by what the account's delivery
	// outcomes taught (server/outcomes.Service.Apply); nil: nothing.
	Learn Learner
	// Typos, when set, gives the engine each account's own domains as
	// targets of its did_you_mean suggestions (server/typos).
	Typos *typos.Accounts
	// RetryWindow is how long after its first greylisting an address is
	// retried; when it is spent, its result is the last one (unknown).
	// Default 30 min.
	RetryWindow time.Duration
	// Concurrency bounds the domain groups in flight, all jobs together.
	// Default 1024 (the batch pool's default size).
	Concurrency int
	// DomainConcurrency bounds the groups of one domain in flight, all
	// jobs together. Default 4.
	DomainConcurrency int
	// GroupSize is the most addresses of one engine call (one SMTP
	// session, RCPT after RCPT). Default 100.
	GroupSize int
	// GroupTimeout bounds one engine call. Default 10 min.
	GroupTimeout time.Duration
	// DNSRetryDelay is the wait before an address whose result was
	// unknown for a DNS time-out or SERVFAIL is probed again (twice at
	// most, the second time after twice the delay). Default 5 s.
	DNSRetryDelay time.Duration
	// FlushSize results of a job are written in one synced batch; a result
	// waits at most FlushInterval. Defaults 500 and 250 ms.
	FlushSize     int
	FlushInterval time.Duration
	// MaxFailures consecutive failures of one engine call (a group's), or
	// of a job's result writes, fail the job (spec §3: retries
	// exhausted); they are retried after 1 s, 2 s, 4 s … up to a minute
	// apart, so the default, 10, gives up after about 5 minutes.
	MaxFailures int
	// Now is the clock of stored times, deferrals and webhook schedules;
	// default time.Now. It should be the storage's clock.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Learner changes an engine result by what delivery outcomes taught.
type Learner interface {
	Apply(ctx context.Context, account string, r *probe.Result) error
}

// Defaults of Options, the daemon's too (the [jobs] section of
// cmd/verifyd/config takes them).
const (
	DefaultRetryWindow       = 30 * time.Minute
	DefaultConcurrency       = 1024
	DefaultDomainConcurrency = 4
	DefaultGroupSize         = 100
	DefaultGroupTimeout      = 10 * time.Minute
	DefaultMaxFailures       = 10
)

func (o *Options) defaults() {
	if o.RetryWindow == 0 {
		o.RetryWindow = DefaultRetryWindow
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.DomainConcurrency == 0 {
		o.DomainConcurrency = DefaultDomainConcurrency
	}
	if o.GroupSize == 0 {
		o.GroupSize = DefaultGroupSize
	}
	if o.GroupTimeout == 0 {
		o.GroupTimeout = DefaultGroupTimeout
	}
	if o.DNSRetryDelay == 0 {
		o.DNSRetryDelay = 5 * time.Second
	}
	if o.FlushSize == 0 {
		o.FlushSize = 500
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 250 * time.Millisecond
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Hooks == nil {
		o.Hooks = noHooks{}
	}
}

// Waker is told that an event waits in the outbox (webhook.Dispatcher).
type Waker interface{ Wake() }

type noHooks struct{}

func (noHooks) Wake() {}

func (o *Options) validate() error {
	var errs []error
	if o.DB == nil {
		errs = append(errs, errors.New("a storage DB is required"))
	}
	if o.Verifier == nil {
		errs = append(errs, errors.New("a verifier is required"))
	}
	for _, c := range []struct {
		name string
		v    int
	}{
		{"concurrency", o.Concurrency}, {"domain concurrency", o.DomainConcurrency},
		{"group size", o.GroupSize}, {"flush size", o.FlushSize}, {"max failures", o.MaxFailures},
	} {
		if c.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, not %d", c.name, c.v))
		}
	}
	for _, c := range []struct {
		name string
		v    time.Duration
	}{
		{"retry window", o.RetryWindow}, {"group timeout", o.GroupTimeout}, {"flush interval", o.FlushInterval},
		{"DNS retry delay", o.DNSRetryDelay},
	} {
		if c.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", c.name, c.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	return nil
}

// Scheduler runs batch jobs. Start makes one; Add gives it a job just
// created; Close stops it.
type Scheduler struct {
	opts  Options
	db    Store
	log   *slog.Logger
	now   func() time.Time
	sched *scheduler

	repMu   sync.Mutex
	repSent map[string]time.Time // job id + egress address → last warning
	repCh   chan egress.Event
	repWG   sync.WaitGroup
	repStop chan struct{}
	// repCtx bounds the relay's storage calls; Close cancels it.
	repCtx    context.Context
	repCancel context.CancelFunc

	closeOnce sync.Once
}

// Start loads the jobs that were queued or running when verifyd stopped
// (they resume where they stopped), and starts scheduling.
func Start(opts Options) (*Scheduler, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		opts:    opts,
		db:      opts.DB,
		log:     opts.Logger.With("pkg", "batch"),
		now:     opts.Now,
		repSent: map[string]time.Time{},
		repCh:   make(chan egress.Event, 64),
		repStop: make(chan struct{}),
	}
	s.sched = newScheduler(s)
	if err := s.sched.resume(); err != nil {
		return nil, fmt.Errorf("batch: cannot resume jobs: %w", err)
	}
	s.sched.start()
	s.repCtx, s.repCancel = context.WithCancel(context.Background())
	s.repWG.Add(1)
	go s.reputationLoop()
	current.Store(s)
	return s, nil
}

// Close stops the scheduler (engine calls in flight are cancelled and
// their addresses probed again after the restart; results already
// received are written first) and the reputation relay, waiting for them
// until ctx ends.
func (s *Scheduler) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		err = s.sched.stop(ctx)
		close(s.repStop)
		s.repCancel()
		s.repWG.Wait()
		current.CompareAndSwap(s, nil)
	})
	return err
}

// Add schedules a job storage.Jobs.CreateJob just wrote, with its
// addresses (those of JobSpec.Addresses, index = position). In a fleet
// the job's slices are leased like any other job's: this box's lease
// loop is woken to take them first.
func (s *Scheduler) Add(j storage.Job, addrs []string) { s.sched.add(j, addrs) }

// stats is what the gauges report.
type schedStats struct{ jobs, inflight, queued, deferred int }

func (s *Scheduler) stats() schedStats { return s.sched.stats() }

// EgressEvent takes the egress pool's events (egress.Options.OnEvent). An
// egress address that hit a greylist or rate limit (a cooldown, spec §6),
// crossed the policy-block threshold (reputation), or was taken out of
// rotation (disabled, e.g. by the self-check finding it on a block list)
// becomes a reputation.warning webhook for every running job with a webhook
// URL (in a fleet, every one this box probes), at most once per job and
// egress address an hour (per box). It never blocks.
func (s *Scheduler) EgressEvent(ev egress.Event) {
	switch ev.Kind {
	case egress.EventReputation, egress.EventDisabled, egress.EventCooldown:
	default:
		return
	}
	select {
	case s.repCh <- ev:
	default:
		s.log.Warn("reputation warning dropped: relay busy", "addr", ev.Addr)
	}
}

// reputationRepeat is how often one job hears about one egress address.
const reputationRepeat = time.Hour

func (s *Scheduler) reputationLoop() {
	defer s.repWG.Done()
	for {
		select {
		case <-s.repStop:
			return
		case ev := <-s.repCh:
			reputationEvents.Inc()
			s.warnJobs(ev)
		}
	}
}

func (s *Scheduler) warnJobs(ev egress.Event) {
	running, err := s.db.ListJobs(s.repCtx, storage.JobRunning)
	if err != nil {
		s.log.Error("cannot list running jobs for a reputation warning", "err", err)
		return
	}
	at := ev.At
	if at.IsZero() {
		at = s.now()
	}
	for _, j := range running {
		if j.WebhookURL == "" || !s.sched.runs(j.ID) {
			continue
		}
		key := j.ID + "|" + ev.Addr.String()
		s.repMu.Lock()
		last, seen := s.repSent[key]
		if seen && s.now().Sub(last) < reputationRepeat {
			s.repMu.Unlock()
			continue
		}
		s.repSent[key] = s.now()
		for k, t := range s.repSent { // keep the map small
			if s.now().Sub(t) > reputationRepeat {
				delete(s.repSent, k)
			}
		}
		s.repMu.Unlock()
		body, err := webhook.ReputationBody(j.ID, ev.Addr, ev.Reason, at)
		if err != nil {
			continue
		}
		if _, err := s.db.Enqueue(s.repCtx, storage.Event{Account: j.Account, Type: webhook.EventReputationWarning, URL: j.WebhookURL, Body: body}); err != nil {
			s.log.Error("cannot enqueue a reputation warning", "job", j.ID, "err", err)
			continue
		}
		webhook.Enqueued(webhook.EventReputationWarning)
		s.log.Info("reputation warning enqueued", "job", j.ID, "egress", ev.Addr, "reason", ev.Reason)
	}
	s.opts.Hooks.Wake()
}
