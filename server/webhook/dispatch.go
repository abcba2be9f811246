package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/storage"
)

// The webhook dispatcher. Events wait in storage's outbox, keyed by when
// they are next due; the dispatcher loop takes the due ones, posts each on
// its own goroutine (at most Options.Concurrency at once), and
// records the outcome:
//
//   - a 2xx answer: the event leaves the outbox (delivered);
//   - the SSRF guard refused every address of the URL: the event goes to
//     the dead-letter queue at once (retrying cannot help until the
//     operator changes the configuration or the URL's DNS; `verifyctl
//     webhooks resend` sends it again);
//   - anything else (another status, a redirect, a time-out, a connection
//     failure): the event is due again after the next delay of the retry
//     schedule (spec §6: 30 s, 2 min, 10 min, 1 h, 6 h, then every 6 h),
//     but never later than GiveUpAfter (24 h) after it was created; a
//     failure at or after that moment moves it to the dead-letter queue.
//
// The outcome is recorded after the request: a crash in between sends the
// event again, so delivery is at least once and receivers de-duplicate by
// the X-SVC-Event-Id header.

// Options configures webhook delivery.
type Options struct {
	// DB holds the outbox, its dead letters and the accounts' secrets.
	// Required.
	DB Store
	// Now is the clock of schedules and signatures; default time.Now. It
	// should be the storage's clock.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Timeout bounds one attempt, connect to last byte. Default 10 s.
	Timeout time.Duration
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// other internal addresses (the SSRF guard is otherwise strict).
	AllowPrivate bool
	// RetrySchedule is the delay after each failed attempt; the last one
	// repeats. Default 30s, 2m, 10m, 1h, 6h (spec §6).
	RetrySchedule []time.Duration
	// GiveUpAfter is how long after its creation an event that still
	// fails moves to the dead-letter queue. Default 24 h (spec §6, §8).
	GiveUpAfter time.Duration
	// Concurrency bounds the deliveries in flight. Default 16.
	Concurrency int
	// Resolver resolves webhook hosts; default net.DefaultResolver.
	Resolver Resolver
}

// Defaults of Options, the daemon's too (the [webhooks] section of
// cmd/verifyd/config takes them): 10 s an attempt, dead-lettered a day
// after the event (spec §6, §8), 16 deliveries at once.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultGiveUpAfter = 24 * time.Hour
	DefaultConcurrency = 16
)

// DefaultRetrySchedule is spec §6's schedule.
var DefaultRetrySchedule = []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if len(o.RetrySchedule) == 0 {
		o.RetrySchedule = DefaultRetrySchedule
	}
	if o.GiveUpAfter == 0 {
		o.GiveUpAfter = DefaultGiveUpAfter
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.DB == nil {
		errs = append(errs, errors.New("a storage DB is required"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("webhook timeout must be positive, not %v", o.Timeout))
	}
	for i, d := range o.RetrySchedule {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("webhook retry_schedule[%d] must be positive, not %v", i, d))
		}
	}
	if o.GiveUpAfter <= 0 {
		errs = append(errs, fmt.Errorf("webhook give_up_after must be positive, not %v", o.GiveUpAfter))
	}
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("webhook concurrency must be at least 1, not %d", o.Concurrency))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	return nil
}

// maxResponseRead is how much of a receiver's answer is read (and thrown
// away) so that the connection can be reused.
const maxResponseRead = 64 << 10

// userAgent identifies webhook requests.
const userAgent = "verifyd-webhooks/1"

// Attempt is one delivery attempt, remembered for `verifyctl webhooks
// deliveries`.
type Attempt = hookapi.Attempt

// recentAttempts is how many attempts the dispatcher remembers.
const recentAttempts = 500

// Store is what the dispatcher reads and writes: the outbox, and the
// accounts whose secrets sign the events.
type Store interface {
	storage.Outbox
	GetAccount(ctx context.Context, id string) (storage.Account, error)
}

// Dispatcher delivers the outbox's events. Start makes one; Close stops
// it.
type Dispatcher struct {
	db     Store
	opts   Options
	guard  *Guard
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	wakeCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}

	mu       sync.Mutex
	inflight map[string]bool
	recent   []Attempt // ring
	next     int
}

// Start starts delivering the outbox's events.
func Start(opts Options) (*Dispatcher, error) {
	opts.defaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := newDispatcher(opts)
	d.wg.Add(1)
	go d.loop()
	current.Store(d)
	return d, nil
}

func newDispatcher(opts Options) *Dispatcher {
	g := &Guard{AllowPrivate: opts.AllowPrivate, Resolver: opts.Resolver, DialTimeout: opts.Timeout}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect out of the guard's sight
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Dispatcher{
		db: opts.DB, opts: opts, guard: g, now: opts.Now, log: opts.Logger.With("pkg", "webhook"),
		client: &http.Client{
			Transport: tr,
			Timeout:   opts.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // redirects are not followed
			},
		},
		wakeCh:   make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		sem:      make(chan struct{}, opts.Concurrency),
		inflight: map[string]bool{},
	}
}

// Guard is the SSRF guard deliveries go through; POST /v1/batch judges a
// webhookUrl with it (Guard.CheckURL).
func (d *Dispatcher) Guard() *Guard { return d.guard }

// Wake makes the dispatcher look at the outbox now: call it after
// enqueueing an event (or finishing a job that wrote one).
func (d *Dispatcher) Wake() {
	select {
	case d.wakeCh <- struct{}{}:
	default:
	}
}

// Close ends the loop and the deliveries in flight (whose outcome is not
// recorded: they are sent again after the restart) and waits for them
// until ctx ends.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.cancel()
	defer current.CompareAndSwap(d, nil)
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		d.client.CloseIdleConnections()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook deliveries still running: %w", ctx.Err())
	}
}

func (d *Dispatcher) inflightCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inflight)
}

// idleWait is the longest the loop sleeps without a reason (everything
// that enqueues an event wakes it; this is the safety net).
const idleWait = 10 * time.Second

func (d *Dispatcher) loop() {
	defer d.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.wakeCh:
		case <-t.C:
		}
		wait := d.pass()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// pass starts the deliveries of the due events and returns how long to
// sleep before the next pass.
func (d *Dispatcher) pass() time.Duration {
	evs, err := d.db.DueEvents(d.ctx, 4*d.opts.Concurrency)
	if err != nil {
		if d.ctx.Err() == nil {
			d.log.Error("cannot read the webhook outbox", "err", err)
		}
		return 5 * time.Second
	}
	for _, ev := range evs {
		d.mu.Lock()
		busy := d.inflight[ev.ID]
		d.mu.Unlock()
		if busy {
			continue
		}
		select {
		case d.sem <- struct{}{}:
		default:
			return idleWait // a delivery ending wakes the loop
		}
		d.mu.Lock()
		d.inflight[ev.ID] = true
		d.mu.Unlock()
		d.wg.Add(1)
		go d.deliver(ev)
	}
	at, ok, err := d.db.NextDue(d.ctx)
	if err != nil || !ok {
		return idleWait
	}
	w := at.Sub(d.now())
	if w <= 0 {
		// Due, but already in flight: its end wakes the loop.
		return idleWait
	}
	return min(w+time.Millisecond, idleWait)
}

// outcome is what one attempt achieved.
type outcome struct {
	status  int
	err     error
	refused bool // the SSRF guard refused the destination
	dur     time.Duration
}

func (o outcome) ok() bool { return o.err == nil && o.status >= 200 && o.status <= 299 }

func (o outcome) text() string {
	switch {
	case o.err != nil:
		return o.err.Error()
	case o.status >= 300 && o.status <= 399:
		return fmt.Sprintf("HTTP %d (redirects are not followed)", o.status)
	case !o.ok():
		return fmt.Sprintf("HTTP %d", o.status)
	}
	return ""
}

// deliver makes one attempt of ev and records its outcome.
func (d *Dispatcher) deliver(ev storage.Event) {
	defer d.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("webhook delivery panicked", "event", ev.ID, "panic", fmt.Sprint(v))
		}
		<-d.sem
		d.mu.Lock()
		delete(d.inflight, ev.ID)
		d.mu.Unlock()
		d.Wake()
	}()
	o := d.send(d.ctx, ev, ev.ID, ev.Attempts+1, false)
	if d.ctx.Err() != nil {
		return // shutting down: the event stays due, and goes after the restart
	}
	a := Attempt{EventID: ev.ID, Account: ev.Account, Type: ev.Type, URL: ev.URL, At: d.now(),
		Attempt: ev.Attempts + 1, Status: o.status, Error: o.text(), DurationMs: o.dur.Milliseconds()}
	log := d.log.With("event", ev.ID, "type", ev.Type, "account", ev.Account, "url", redactURL(ev.URL), "attempt", a.Attempt)
	// Decide, remember the attempt (so that whoever sees the outcome in
	// storage also sees it listed), then record the outcome.
	var record func() error
	switch {
	case o.ok():
		hooksDelivered.Inc()
		a.Outcome = "delivered"
		record = func() error { return d.db.MarkDelivered(context.Background(), ev) }
		log.Info("webhook delivered", "status", o.status, "ms", a.DurationMs)
	case o.refused:
		hooksRefused.Inc()
		ssrfAtDelivery.Inc()
		hooksDead.Inc()
		a.Outcome = "dead"
		record = func() error { _, err := d.db.DeadLetter(context.Background(), ev, 0, o.text()); return err }
		log.Warn("webhook refused by the SSRF guard; dead-lettered", "err", o.text())
	default:
		hooksFailed.Inc()
		now := d.now()
		giveUp := ev.CreatedAt.Add(d.opts.GiveUpAfter)
		if !now.Before(giveUp) {
			hooksDead.Inc()
			a.Outcome = "dead"
			record = func() error { _, err := d.db.DeadLetter(context.Background(), ev, o.status, o.text()); return err }
			log.Warn("webhook given up; dead-lettered", "err", o.text(), "created", ev.CreatedAt)
			break
		}
		delay := d.opts.RetrySchedule[min(ev.Attempts, len(d.opts.RetrySchedule)-1)]
		next := now.Add(delay)
		if next.After(giveUp) {
			next = giveUp // one last attempt as the window closes
		}
		a.Outcome, a.NextAttempt = "retry", next
		record = func() error {
			_, err := d.db.Reschedule(context.Background(), ev, next, o.status, o.text())
			return err
		}
		log.Info("webhook attempt failed; will retry", "err", o.text(), "next", next)
	}
	d.remember(a)
	if err := record(); err != nil && !errors.Is(err, storage.ErrNotFound) {
		log.Error("cannot record the webhook outcome", "err", err)
	}
}

// send posts ev's body to ev.URL, signed with the account's current
// secret, under id (a test event has its own).
func (d *Dispatcher) send(ctx context.Context, ev storage.Event, id string, attempt int, test bool) outcome {
	acct, err := d.db.GetAccount(ctx, ev.Account)
	if err != nil {
		return outcome{err: fmt.Errorf("account %s: %w", ev.Account, err)}
	}
	ts := d.now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ev.URL, bytes.NewReader(ev.Body))
	if err != nil {
		return outcome{err: fmt.Errorf("bad webhook URL: %w", err), refused: true}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	h.Set(HeaderSignature, Sign(acct.WebhookSecret, ev.Body))
	h.Set(HeaderSignatureTS, SignTimestamped(acct.WebhookSecret, id, ts, ev.Body))
	h.Set(HeaderEventID, id)
	h.Set(HeaderEvent, ev.Type)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	if test {
		h.Set(HeaderTest, "true")
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	dur := time.Since(start)
	hooksDuration.Update(dur.Seconds())
	if err != nil {
		return outcome{err: unwrapURLError(err), refused: errors.Is(err, ErrRefused), dur: dur}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	resp.Body.Close()
	return outcome{status: resp.StatusCode, dur: dur}
}

// unwrapURLError drops the `Post "URL":` prefix, which would put the URL
// (maybe with a token in it) into stored errors and logs.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (d *Dispatcher) remember(a Attempt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.recent) < recentAttempts {
		d.recent = append(d.recent, a)
		d.next = len(d.recent) % recentAttempts
		return
	}
	d.recent[d.next] = a
	d.next = (d.next + 1) % recentAttempts
}

// Attempts returns the remembered delivery attempts of account ("" for
// all), newest first, at most limit.
func (d *Dispatcher) Attempts(account string, limit int) []Attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Attempt, 0, min(limit, len(d.recent)))
	n := len(d.recent)
	for i := 0; i < n && len(out) < limit; i++ {
		// newest first: the one before next, going back
		a := d.recent[(d.next-1-i+2*n)%n]
		if account == "" || a.Account == account {
			out = append(out, a)
		}
	}
	return out
}
