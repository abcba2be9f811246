package jobs

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
	"github.com/verifyd/verifyd/storage"
)

// Verifier runs the engine's batch mode: many addresses of one domain per
// SMTP session (probe.Pools.VerifyDomain, on the batch worker pool).
type Verifier interface {
	VerifyDomain(ctx context.Context, emails []string, prefer netip.Addr) ([]*probe.Result, error)
}

// Options configures the Service. Zero fields take their defaults.
type Options struct {
	// DB holds jobs, results, credits and the outbox. Required.
	DB storage.Store
	// Verifier runs the engine. Required.
	Verifier Verifier
	// MaxEmails caps the addresses of one batch (spec §8). Default 100,000.
	MaxEmails int
	// MaxBodyBytes caps the body of POST /v1/batch (spec §8: 8 MB). The
	// HTTP server refuses larger bodies before reading them; this is the
	// handler's own check. Default 8 MiB.
	MaxBodyBytes int
	// MaxDownloads caps the results.csv downloads streaming at once;
	// MaxDownloadsPerAccount those of one account. Defaults 32 and 4.
	MaxDownloads           int
	MaxDownloadsPerAccount int
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
	// Webhooks configures delivery.
	Webhooks WebhookOptions
	// Now is the clock of stored times, deferrals and webhook schedules;
	// default time.Now. It should be the storage's clock.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.MaxDownloads <= 0 {
		o.MaxDownloads = 32
	}
	if o.MaxDownloadsPerAccount <= 0 {
		o.MaxDownloadsPerAccount = 4
	}
	if o.MaxEmails == 0 {
		o.MaxEmails = 100_000
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.RetryWindow == 0 {
		o.RetryWindow = 30 * time.Minute
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1024
	}
	if o.DomainConcurrency == 0 {
		o.DomainConcurrency = 4
	}
	if o.GroupSize == 0 {
		o.GroupSize = 100
	}
	if o.GroupTimeout == 0 {
		o.GroupTimeout = 10 * time.Minute
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
		o.MaxFailures = 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Webhooks.defaults()
}

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
		{"max emails", o.MaxEmails}, {"max body bytes", o.MaxBodyBytes}, {"concurrency", o.Concurrency}, {"domain concurrency", o.DomainConcurrency},
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
	errs = append(errs, o.Webhooks.validate()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	return nil
}

// Service runs batch jobs and delivers webhooks. Start makes one; Routes
// adds its API routes, AdminRoutes its operator routes; Close stops it.
type Service struct {
	opts  Options
	db    storage.Store
	log   *slog.Logger
	now   func() time.Time
	guard *Guard
	// downloads caps the results.csv downloads under way.
	downloads *downloadGate
	hooks     *dispatcher
	sched     *scheduler

	repMu   sync.Mutex
	repSent map[string]time.Time // job id + egress address → last warning
	repCh   chan egress.Event
	repWG   sync.WaitGroup
	repStop chan struct{}

	closeOnce sync.Once
}

// Start loads the jobs that were queued or running when verifyd stopped
// (they resume where they stopped), and starts the scheduler and the
// webhook dispatcher.
func Start(opts Options) (*Service, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger.With("pkg", "jobs")
	s := &Service{
		opts:      opts,
		db:        opts.DB,
		log:       log,
		now:       opts.Now,
		guard:     &Guard{AllowPrivate: opts.Webhooks.AllowPrivate},
		downloads: newDownloadGate(opts.MaxDownloads, opts.MaxDownloadsPerAccount),
		hooks:     newDispatcher(opts.DB, opts.Webhooks, opts.Now, log.With("part", "webhooks")),
		repSent:   map[string]time.Time{},
		repCh:     make(chan egress.Event, 64),
		repStop:   make(chan struct{}),
	}
	s.sched = newScheduler(s)
	if err := s.sched.resume(); err != nil {
		return nil, fmt.Errorf("jobs: cannot resume jobs: %w", err)
	}
	s.sched.start()
	s.hooks.start()
	s.repWG.Add(1)
	go s.reputationLoop()
	current.Store(s)
	return s, nil
}

// Close stops the scheduler (engine calls in flight are cancelled and
// their addresses probed again after the restart; results already
// received are written first), the webhook dispatcher and the reputation
// relay, waiting for them until ctx ends.
func (s *Service) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		err = errors.Join(s.sched.stop(ctx), s.hooks.stop(ctx))
		close(s.repStop)
		s.repWG.Wait()
		current.CompareAndSwap(s, nil)
	})
	return err
}

// stats is what the gauges report.
type schedStats struct{ jobs, inflight, queued, deferred int }

func (s *Service) stats() schedStats { return s.sched.stats() }

// EgressEvent takes the egress pool's events (egress.Options.OnEvent). An
// egress address that hit a greylist or rate limit (a cooldown, spec §6),
// crossed the policy-block threshold (reputation), or was taken out of
// rotation (disabled, e.g. by the self-check finding it on a block list)
// becomes a reputation.warning webhook for every running job with a webhook
// URL (in a fleet, every one this box probes), at most once per job and
// egress address an hour (per box). It never blocks.
func (s *Service) EgressEvent(ev egress.Event) {
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

func (s *Service) reputationLoop() {
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

func (s *Service) warnJobs(ev egress.Event) {
	running, err := s.db.ListJobs(storage.JobRunning)
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
		body, err := reputationBody(j.ID, ev.Addr, ev.Reason, at)
		if err != nil {
			continue
		}
		if _, err := s.db.Enqueue(storage.Event{Account: j.Account, Type: EventReputationWarning, URL: j.WebhookURL, Body: body}); err != nil {
			s.log.Error("cannot enqueue a reputation warning", "job", j.ID, "err", err)
			continue
		}
		hooksEnqueued[EventReputationWarning].Inc()
		s.log.Info("reputation warning enqueued", "job", j.ID, "egress", ev.Addr, "reason", ev.Reason)
	}
	s.hooks.wake()
}
