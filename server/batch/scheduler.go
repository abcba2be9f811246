package batch

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// The scheduler. Every active job is a queue of domain groups: its
// addresses without a stored result, grouped by domain (the part after
// the last @), each domain's addresses cut into chunks of at most
// GroupSize, each chunk one engine call (probe's batch mode: one SMTP
// session, RCPT after RCPT).
//
// Fairness. One loop hands out groups while fewer than Concurrency are in
// flight. A free slot goes to the account with the fewest groups in
// flight among those with addresses queued (max-min fairness: a newcomer
// takes the next free slots until it holds as many as the others), ties
// and the rest round-robin over the accounts with active jobs; within an
// account round-robin over its jobs, and within a job round-robin over
// its domains. So a 100-address upload beside a 100,000-address batch
// gets every slot that frees until all its groups run, an account with
// ten jobs gets no more slots than an account with one, and a job's big
// domain does not starve its small ones. Nothing is reserved: an account
// alone takes every slot (work-conserving). At most DomainConcurrency groups of one
// domain are in flight at once (all jobs together), so one provider's MX
// hosts are not flooded and a job made of one domain cannot take every
// slot; the egress pool's per-MX connection and rate limits apply below
// that.
//
// Greylisting. The engine does not wait out a greylisting in batch mode:
// it answers unknown with RetryAt (when the egress address's cooldown
// ends) and Egress (the address to retry from, as greylisters want the
// same client). Those addresses leave the group into a deferred queue and
// come back at RetryAt, first in their job's line, from that egress
// address, until they get a final answer or RetryWindow has passed since
// their first greylisting; then their last result (unknown) is final.
//
// Results are written by storage's PutJobResults in synced batches of up
// to FlushSize (or every FlushInterval), with the history rows, cache
// entries and the job's progress. A job ends when every address has a
// stored result: FinishJob completes it, uses one credit per address,
// refunds the rest of the reservation and enqueues its webhook event, in
// one synced write. MaxFailures consecutive failed engine calls or writes
// fail it instead (spec §3: retries exhausted), with the same settlement.
//
// A job turns running in storage (StartJob) when its first group goes;
// the groups do not wait for that synced write, only their results do.
//
// Crash recovery. Nothing but stored results counts as done: after a
// restart, the jobs still queued or running are loaded again with
// PendingAddresses (their addresses without a result), so nothing already
// judged is probed again and nothing is lost; an address whose result was
// not yet written is probed again. Credits were reserved once at creation
// and are settled once by FinishJob.

// Fleet mode. When the store is shared by several boxes (it implements
// storage.JobLeases: PostgreSQL), a box schedules only what it leased: its
// lease loop takes slices of the active jobs (a job's addresses grouped
// by a hash of their domain) whenever its domain groups queued and in
// flight would not fill its slots (leaser.need), and adds their addresses without a result to the job's
// queue, exactly as resume does for a whole job on one box. A job a box
// has no more work of leaves its rotation (another box holds the rest);
// the box whose write leaves no address without a result ends it, and a
// job whose every result is written but which no box ended (that box
// died) is handed out by LeaseSlices to be ended. Results are written
// once per address whichever box writes them, and FinishJob succeeds
// once, so a job is counted, charged and announced once. A box that dies
// loses its slices after the lease (storage.lease) and the others take
// them; what it wrote stays written.

// group is one engine call's worth of a job's addresses, all of one
// domain.
type group struct {
	job    *jobRun
	domain string
	idx    []int
	// addrs are the addresses, parsed once when the job was loaded
	// (address.NewInput): the engine does not parse them again.
	addrs []address.Input
	// prefer is the egress address to retry greylisted addresses from.
	prefer netip.Addr
	// deadline ends the retry window of a deferred group (zero: fresh).
	deadline time.Time
	// readyAt is when a deferred group may go.
	readyAt time.Time
	// failures counts the group's consecutive failed engine calls.
	failures int
	// dnsTries counts the retries after transient DNS failures.
	dnsTries int
	hidx     int
}

// domainQ is a job's chunks of one domain, in order.
type domainQ struct {
	name   string
	chunks []*group
}

// jobRun is an active job's scheduling state. The scheduler's lock guards
// it all.
type jobRun struct {
	id      string
	account string
	total   int
	acct    *acctQ

	// domains is a queue of the domains with chunks to go (head at
	// dhead); retries are deferred groups whose time came, served first.
	domains []*domainQ
	dhead   int
	retries []*group

	queued   int // addresses in domains and retries
	inflight int // groups in flight
	// slices are the slices of the job this box leased and works on (in
	// a fleet; see leaser.giveBack).
	slices   map[int]bool
	deferred int // addresses waiting for their RetryAt

	buf      []storage.JobResult // results not yet written
	bufSince time.Time
	writing  bool
	// unwritten is the addresses with no stored result (Total − Processed).
	unwritten int

	started   bool // running in storage
	starting  bool // StartJob in flight
	finishing bool
	done      bool // ended, or gone: no longer scheduled

	failures int // consecutive failed writes or finishes
	// stalled: the store refuses writes (its disk is full, the database
	// is away). The job takes no new groups and its writes are retried,
	// without counting as failures, until one goes in (see storeAway).
	stalled bool
	// stalledSince is when it stalled (monotonic): in a fleet, a job
	// stalled for stallGiveBack gives its slices back (leaser.giveBack).
	stalledSince time.Time
	failErr      string    // set: fail the job once the buffer is handled
	dropBuf      bool      // the writes are what fails: do not retry them
	retryAt      time.Time // after a failed write or finish, not before
}

// acctQ is an account's active jobs.
type acctQ struct {
	name     string
	jobs     []*jobRun
	cursor   int
	inflight int // groups in flight, all its jobs together
}

type scheduler struct {
	s    *Scheduler
	opts *Options
	db   Store // the Scheduler's DB; a test wraps it to inject failures
	// lease is the fleet's lease loop (Options.Leases), else nil.
	lease *leaser

	mu       sync.Mutex
	jobs     map[string]*jobRun
	accts    []*acctQ
	acctIdx  map[string]*acctQ
	cursor   int
	inflight int
	perDom   map[string]int
	deferred deferHeap
	closing  bool

	ctx      context.Context // the engine calls' and the lease loop's reads; cancelled by stop (writes and give-backs outlive it)
	cancel   context.CancelFunc
	wakeCh   chan struct{}
	stopCh   chan struct{}
	loopDone chan struct{}
	wg       sync.WaitGroup // groups, writes, finishes
}

func newScheduler(s *Scheduler) *scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	sc := &scheduler{
		s: s, opts: &s.opts, db: s.db,
		jobs:     map[string]*jobRun{},
		acctIdx:  map[string]*acctQ{},
		perDom:   map[string]int{},
		ctx:      ctx,
		cancel:   cancel,
		wakeCh:   make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if s.opts.Leases != nil {
		sc.lease = &leaser{sc: sc, db: s.opts.Leases, wakeCh: make(chan struct{}, 1)}
	}
	return sc
}

// resume loads the jobs that were running, then those queued, oldest
// first. In a fleet it loads nothing: the lease loop takes work.
func (sc *scheduler) resume() error {
	if sc.lease != nil {
		return nil
	}
	for _, st := range []storage.JobStatus{storage.JobRunning, storage.JobQueued} {
		js, err := sc.db.ListJobs(sc.ctx, st)
		if err != nil {
			return err
		}
		slices.SortFunc(js, func(a, b storage.Job) int { return a.CreatedAt.Compare(b.CreatedAt) })
		for _, j := range js {
			b := newBuilder(sc.opts.GroupSize)
			err := sc.db.PendingAddresses(sc.ctx, j.ID, func(i int, addr string) error {
				b.add(i, addr)
				return nil
			})
			if err != nil {
				return fmt.Errorf("job %s: %w", j.ID, err)
			}
			sc.mu.Lock()
			sc.register(j, -1, b)
			sc.mu.Unlock()
			jobsResumed.Inc()
			sc.s.log.Info("job resumed", "job", j.ID, "account", j.Account, "status", j.Status,
				"processed", j.Processed, "total", j.Total)
		}
	}
	return nil
}

// add schedules a job just created with its addresses (index = position).
// In a fleet the job's slices are leased like any other job's: this box's
// lease loop is woken to take them first.
func (sc *scheduler) add(j storage.Job, addrs []string) {
	if sc.lease != nil {
		sc.lease.wake()
		return
	}
	b := newBuilder(sc.opts.GroupSize)
	for i, a := range addrs {
		b.add(i, a)
	}
	sc.mu.Lock()
	if !sc.closing {
		sc.register(j, -1, b)
	}
	sc.mu.Unlock()
	sc.wake()
}

// builder groups a job's addresses by domain, in order of first sight.
type builder struct {
	size    int
	byName  map[string]*domainQ
	domains []*domainQ
	n       int
}

func newBuilder(size int) *builder { return &builder{size: size, byName: map[string]*domainQ{}} }

// add takes the job's address of index i, parsing it (the scheduler's
// edge: addresses come from storage, as CreateJob wrote them) and
// grouping it by its ASCII domain ("" for one that does not parse: the
// engine answers syntax_error without the network).
func (b *builder) add(i int, addr string) {
	in := address.NewInput(addr)
	d := in.ASCIIDomain()
	q := b.byName[d]
	if q == nil {
		q = &domainQ{name: d}
		b.byName[d] = q
		b.domains = append(b.domains, q)
	}
	var g *group
	if k := len(q.chunks); k > 0 && len(q.chunks[k-1].idx) < b.size {
		g = q.chunks[k-1]
	} else {
		g = &group{domain: d, idx: make([]int, 0, min(b.size, 16)), addrs: make([]address.Input, 0, min(b.size, 16))}
		q.chunks = append(q.chunks, g)
	}
	g.idx = append(g.idx, i)
	g.addrs = append(g.addrs, in)
	b.n++
}

// register adds a job to the rotation; the caller holds mu. In a fleet a
// job already here takes the addresses of another slice.
func (sc *scheduler) register(j storage.Job, slice int, b *builder) {
	if r, dup := sc.jobs[j.ID]; dup {
		if sc.lease != nil && !r.done {
			for _, q := range b.domains {
				for _, g := range q.chunks {
					g.job = r
				}
			}
			r.domains = append(r.domains, b.domains...)
			r.queued += b.n
			if slice >= 0 {
				r.slices[slice] = true
			}
		}
		return
	}
	r := &jobRun{
		id: j.ID, account: j.Account, total: j.Total,
		domains:   b.domains,
		queued:    b.n,
		unwritten: j.Total - j.Processed,
		started:   j.Status == storage.JobRunning,
		slices:    map[int]bool{},
	}
	if slice >= 0 {
		r.slices[slice] = true
	}
	for _, q := range b.domains {
		for _, g := range q.chunks {
			g.job = r
		}
	}
	a := sc.acctIdx[j.Account]
	if a == nil {
		a = &acctQ{name: j.Account}
		sc.acctIdx[j.Account] = a
		sc.accts = append(sc.accts, a)
	}
	a.jobs = append(a.jobs, r)
	r.acct = a
	sc.jobs[j.ID] = r
}

// remove takes a job out of the rotation; the caller holds mu. Its
// deferred groups are dropped when they come up.
func (sc *scheduler) remove(r *jobRun) {
	if r.done {
		return
	}
	r.done = true
	r.buf = nil
	delete(sc.jobs, r.id)
	a := r.acct
	a.jobs = removeTurn(a.jobs, r, &a.cursor)
	sc.dropIdle(a)
}

// removeTurn deletes x from a round-robin list and keeps cursor on the
// element that was to have the next turn.
func removeTurn[T comparable](list []T, x T, cursor *int) []T {
	i := slices.Index(list, x)
	if i < 0 {
		return list
	}
	list = slices.Delete(list, i, i+1)
	if *cursor > i {
		*cursor--
	}
	if len(list) > 0 {
		*cursor %= len(list)
	} else {
		*cursor = 0
	}
	return list
}

// dropIdle takes an account out of the rotation once it has neither jobs
// nor groups in flight: while its groups still run, a new job of the
// account counts them (the fewest-in-flight rule). The caller holds mu.
func (sc *scheduler) dropIdle(a *acctQ) {
	if len(a.jobs) > 0 || a.inflight > 0 || sc.acctIdx[a.name] != a {
		return
	}
	delete(sc.acctIdx, a.name)
	sc.accts = removeTurn(sc.accts, a, &sc.cursor)
}

func (sc *scheduler) start() {
	go sc.loop()
	if sc.lease != nil {
		sc.wg.Add(1)
		go sc.lease.loop()
	}
}

func (sc *scheduler) wake() {
	select {
	case sc.wakeCh <- struct{}{}:
	default:
	}
}

func (sc *scheduler) loop() {
	defer close(sc.loopDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-sc.stopCh:
			return
		case <-sc.wakeCh:
		case <-t.C:
		}
		wait := sc.pass()
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// pass moves due deferred groups to their jobs, hands out groups to free
// slots, and starts the writes and finishes that are due. It returns how
// long the loop may sleep if nothing wakes it.
func (sc *scheduler) pass() time.Duration {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	wait := time.Minute
	if sc.closing {
		return wait
	}
	now := sc.s.now()
	for len(sc.deferred) > 0 {
		g := sc.deferred[0]
		if g.readyAt.After(now) {
			wait = min(wait, g.readyAt.Sub(now))
			break
		}
		heap.Pop(&sc.deferred)
		r := g.job
		r.deferred -= len(g.idx)
		if r.done {
			continue
		}
		r.queued += len(g.idx)
		r.retries = append(r.retries, g)
	}
	for sc.inflight < sc.opts.Concurrency {
		g := sc.pick()
		if g == nil {
			break
		}
		sc.launch(g)
	}
	for _, r := range sc.jobs {
		if r.writing || r.finishing || r.starting {
			continue
		}
		if !r.retryAt.IsZero() && now.Before(r.retryAt) {
			wait = min(wait, r.retryAt.Sub(now))
			continue
		}
		if r.dropBuf && len(r.buf) > 0 {
			r.buf = nil
		}
		if !r.started {
			if r.failErr == "" {
				if !r.retryAt.IsZero() {
					sc.startJob(r) // again: the back-off of a failed StartJob is over
				} else if sc.lease != nil && r.queued == 0 && r.inflight == 0 && r.deferred == 0 && len(r.buf) == 0 {
					// A slice of a queued job with nothing left to do.
					sc.remove(r)
				}
				continue
			}
			r.buf = nil // never started: nothing stored, nothing charged
		}
		if len(r.buf) > 0 {
			due := r.bufSince.Add(sc.opts.FlushInterval)
			idle := r.queued == 0 && r.inflight == 0
			if len(r.buf) >= sc.opts.FlushSize || idle || !now.Before(due) || r.failErr != "" {
				sc.startWrite(r)
			} else {
				wait = min(wait, due.Sub(now))
			}
			continue
		}
		switch {
		case r.failErr != "":
			sc.startFinish(r, storage.JobFailed)
		case r.unwritten == 0:
			sc.startFinish(r, storage.JobCompleted)
		case sc.lease != nil && r.queued == 0 && r.inflight == 0 && r.deferred == 0 && r.started:
			// Nothing of it left here: other boxes hold the rest.
			sc.remove(r)
			sc.lease.wake()
		}
	}
	return max(wait, time.Millisecond)
}

// pick returns the next group to run; nil when nothing can go now. The
// caller holds mu. The account with the fewest groups in flight among
// those with work queued goes first (max-min fairness: a newcomer's
// groups take the next free slots), ties and the rest round-robin over
// accounts, their jobs and the jobs' domains.
func (sc *scheduler) pick() *group {
	n := len(sc.accts)
	best := -1
	for i := range n {
		ai := (sc.cursor + i) % n
		a := sc.accts[ai]
		if (best < 0 || a.inflight < sc.accts[best].inflight) && a.hasQueued() {
			best = ai
		}
	}
	if best >= 0 {
		if g := sc.pickAcct(best); g != nil {
			return g
		}
	}
	for i := range n {
		if g := sc.pickAcct((sc.cursor + i) % n); g != nil {
			return g
		}
	}
	return nil
}

// pickAcct returns the next group of account ai's jobs, round-robin,
// or nil.
func (sc *scheduler) pickAcct(ai int) *group {
	a := sc.accts[ai]
	m := len(a.jobs)
	for k := range m {
		ji := (a.cursor + k) % m
		if g := sc.pickFrom(a.jobs[ji]); g != nil {
			a.cursor = (ji + 1) % m
			sc.cursor = (ai + 1) % len(sc.accts)
			return g
		}
	}
	return nil
}

// hasQueued reports whether any of the account's jobs has addresses
// waiting for a slot (they may still be held back by DomainConcurrency).
func (a *acctQ) hasQueued() bool {
	for _, r := range a.jobs {
		if r.queued > 0 && !r.done && r.failErr == "" && !r.stalled {
			return true
		}
	}
	return false
}

// pickScan bounds how many saturated domains one pick looks past.
const pickScan = 64

// pickFrom returns a job's next group: a due retry first, else the next
// domain's next chunk, skipping domains at DomainConcurrency.
func (sc *scheduler) pickFrom(r *jobRun) *group {
	if r.done || r.failErr != "" || r.queued == 0 || r.stalled {
		return nil
	}
	if !r.started && (!r.retryAt.IsZero() || len(r.buf) >= sc.opts.FlushSize) {
		// Its StartJob failed: no more groups until it is running (pass
		// tries again after the back-off); or its StartJob is slow and
		// a write's worth of results waits for it already.
		return nil
	}
	limit := sc.opts.DomainConcurrency
	for i, g := range r.retries {
		if i >= pickScan {
			break
		}
		if sc.perDom[g.domain] < limit {
			r.retries = slices.Delete(r.retries, i, i+1)
			return g
		}
	}
	defer r.compact()
	for range min(len(r.domains)-r.dhead, pickScan) {
		q := r.domains[r.dhead]
		r.domains[r.dhead] = nil
		r.dhead++
		if sc.perDom[q.name] >= limit {
			r.domains = append(r.domains, q)
			continue
		}
		g := q.chunks[0]
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		if len(q.chunks) > 0 {
			r.domains = append(r.domains, q)
		}
		return g
	}
	return nil
}

// compact drops the consumed head of the domain queue now and then.
func (r *jobRun) compact() {
	if r.dhead > 1024 && r.dhead > len(r.domains)/2 {
		r.domains = append(r.domains[:0:0], r.domains[r.dhead:]...)
		r.dhead = 0
	}
}

// launch runs g on its own goroutine; the caller holds mu.
func (sc *scheduler) launch(g *group) {
	r := g.job
	sc.inflight++
	r.inflight++
	r.acct.inflight++
	r.queued -= len(g.idx)
	sc.perDom[g.domain]++
	if !r.started && !r.starting && r.retryAt.IsZero() {
		sc.startJob(r)
	}
	sc.wg.Add(1)
	go sc.run(g)
}

// startJob moves a job from queued to running in storage (spec §3) when
// its first group goes; the caller holds mu. The groups do not wait for
// the write: only their results do (pass writes nothing before started).
func (sc *scheduler) startJob(r *jobRun) {
	r.starting = true
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		_, err := sc.db.StartJob(context.Background(), r.id)
		sc.mu.Lock()
		defer sc.wake()
		defer sc.mu.Unlock()
		r.starting = false
		switch {
		case err == nil:
			r.started = true
			r.failures = 0
			r.retryAt = time.Time{}
			r.stalled = false
		case errors.Is(err, storage.ErrJobState), errors.Is(err, storage.ErrNotFound):
			sc.remove(r) // ended by someone else; groups in flight are dropped
		case storage.Unavailable(err):
			sc.storeAway(r, err)
		default:
			r.failures++
			r.retryAt = sc.s.now().Add(backoff(r.failures))
			sc.s.log.Error("cannot start the job; will retry", "job", r.id, "failures", r.failures, "err", err)
			if r.failures >= sc.opts.MaxFailures {
				r.failErr = fmt.Sprintf("the job could not be started %d times in a row: %v", r.failures, err)
			}
		}
	}()
}

// learn applies what the account's delivery outcomes taught to the
// final results of an engine call (not those to be retried), outside
// the scheduler's lock: it reads storage. A failure to read leaves a
// result as the engine gave it.
func (sc *scheduler) learn(account string, rs []*probe.Result) {
	ctx, cancel := context.WithTimeout(sc.ctx, 30*time.Second)
	defer cancel()
	for _, res := range rs {
		if res == nil || !res.RetryAt.IsZero() {
			continue
		}
		if err := sc.opts.Learn.Apply(ctx, account, res); err != nil {
			sc.s.log.Warn("outcome evidence", "account", account, "err", err)
			return
		}
	}
}

// run makes one engine call for g and takes its results in.
func (sc *scheduler) run(g *group) {
	defer sc.wg.Done()
	r := g.job
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(sc.ctx, sc.opts.GroupTimeout)
	rs, err := sc.verify(ctx, g)
	cancel()
	if err == nil && sc.opts.Learn != nil {
		sc.learn(r.account, rs)
	}
	groupsRun.Inc()
	groupDuration.UpdateDuration(t0)
	if err == nil && len(rs) != len(g.addrs) {
		err = fmt.Errorf("the engine returned %d results for %d addresses", len(rs), len(g.addrs))
	}
	cancelled := sc.ctx.Err() != nil

	sc.mu.Lock()
	defer sc.wake()
	defer sc.mu.Unlock()
	sc.inflight--
	r.inflight--
	r.acct.inflight--
	sc.dropIdle(r.acct)
	sc.doneDomain(g.domain)
	if cancelled || sc.closing || r.done {
		// Shutting down: results of a cancelled call are not answers.
		// The addresses have no stored result and go again after the
		// restart.
		return
	}
	now := sc.s.now()
	if err != nil {
		groupErrors.Inc()
		delay := 200 * time.Millisecond
		if !errors.Is(err, probe.ErrOverloaded) {
			g.failures++
			delay = backoff(g.failures)
			sc.s.log.Warn("engine call failed; will retry", "job", r.id, "domain", g.domain,
				"addresses", len(g.idx), "failures", g.failures, "err", err)
			if g.failures >= sc.opts.MaxFailures {
				r.failErr = fmt.Sprintf("the engine failed %d times in a row: %v", g.failures, err)
			}
		}
		g.readyAt = now.Add(delay)
		r.deferred += len(g.idx)
		heap.Push(&sc.deferred, g)
		return
	}
	var again []*group
	deadline := g.deadline
	if deadline.IsZero() {
		deadline = now.Add(sc.opts.RetryWindow)
	}
	for i, res := range rs {
		if res == nil {
			res = &probe.Result{Email: g.addrs[i].Email, Status: probe.StatusUnknown, ProbedAt: now}
		}
		switch {
		case !res.RetryAt.IsZero():
			if !res.RetryAt.After(deadline) {
				again = deferTo(again, g, deadline, i, res.Egress, res.RetryAt, g.dnsTries)
				greyDeferrals.Inc()
				continue
			}
			windowExpired.Inc()
		case dnsTransient(res) && g.dnsTries < maxDNSTries:
			if at := now.Add(sc.opts.DNSRetryDelay << g.dnsTries); !at.After(deadline) {
				again = deferTo(again, g, deadline, i, netip.Addr{}, at, g.dnsTries+1)
				dnsDeferrals.Inc()
				continue
			}
		}
		if len(r.buf) == 0 {
			r.bufSince = now
		}
		r.buf = append(r.buf, storage.JobResult{Index: g.idx[i], Result: stored(g.addrs[i].Email, res)})
	}
	for _, ag := range again {
		if !ag.readyAt.After(now) {
			ag.readyAt = now.Add(minRetryDelay)
		}
		r.deferred += len(ag.idx)
		heap.Push(&sc.deferred, ag)
	}
}

// minRetryDelay spaces a retry whose RetryAt already passed.
const minRetryDelay = 100 * time.Millisecond

// Transient DNS failures (a lookup that timed out, a SERVFAIL) decide
// nothing about an address and cost little to ask again: such an unknown
// result is retried up to maxDNSTries times, Options.DNSRetryDelay and then
// twice that later, within the retry window. Other unknowns (an MX that
// never answers, a 421) are final: asking again would cost as much and
// most likely tell the same.
const maxDNSTries = 2

// dnsTransient reports whether r is unknown because DNS failed.
func dnsTransient(r *probe.Result) bool {
	return r.Status == probe.StatusUnknown && (r.Evidence.DNS == probe.DNSTimeout || r.Evidence.DNS == probe.DNSFailure)
}

// deferTo adds g's address i to the retry group (in again) that goes
// from egress address prefer with dnsTries, at at the earliest.
func deferTo(again []*group, g *group, deadline time.Time, i int, prefer netip.Addr, at time.Time, dnsTries int) []*group {
	var ag *group
	for _, x := range again {
		if x.prefer == prefer && x.dnsTries == dnsTries {
			ag = x
			break
		}
	}
	if ag == nil {
		ag = &group{job: g.job, domain: g.domain, prefer: prefer, deadline: deadline, dnsTries: dnsTries}
		again = append(again, ag)
	}
	ag.idx = append(ag.idx, g.idx[i])
	ag.addrs = append(ag.addrs, g.addrs[i])
	if at.After(ag.readyAt) {
		ag.readyAt = at
	}
	return again
}

// verify calls the engine, turning a panic into an error.
func (sc *scheduler) verify(ctx context.Context, g *group) (rs []*probe.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the engine panicked: %v", v)
		}
	}()
	if sc.opts.Typos != nil {
		ctx = probe.WithTypoTargets(ctx, sc.opts.Typos.Targets(g.job.account))
	}
	return sc.opts.Verifier.VerifyDomain(ctx, g.addrs, g.prefer)
}

func (sc *scheduler) doneDomain(d string) {
	if sc.perDom[d] <= 1 {
		delete(sc.perDom, d)
	} else {
		sc.perDom[d]--
	}
}

// backoff is the wait after the nth consecutive failure: 1 s doubling to
// a minute.
func backoff(n int) time.Duration {
	d := time.Second << min(max(n-1, 0), 6)
	return min(d, time.Minute)
}

// stop cancels the engine calls in flight, stops the loop, waits for the
// goroutines, and writes the results received before the stop.
func (sc *scheduler) stop(ctx context.Context) error {
	sc.mu.Lock()
	sc.closing = true
	sc.mu.Unlock()
	sc.cancel()
	close(sc.stopCh)
	<-sc.loopDone
	done := make(chan struct{})
	go func() { sc.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("batch: scheduler still busy at shutdown: %w", ctx.Err())
	}
	sc.mu.Lock()
	var pending []*jobRun
	for _, r := range sc.jobs {
		// A job never started has nowhere to store results: they are
		// probed again after the restart.
		if len(r.buf) > 0 && !r.writing && !r.dropBuf && r.started {
			pending = append(pending, r)
		}
	}
	sc.mu.Unlock()
	for _, r := range pending {
		sc.mu.Lock()
		batch := r.buf
		r.buf = nil
		sc.mu.Unlock()
		// Not ctx, which the wait above may have spent: what was
		// received is written (bounded by storage.call_timeout).
		if _, werr := sc.db.PutJobResults(context.Background(), r.id, batch); werr != nil {
			err = errors.Join(err, fmt.Errorf("batch: results of job %s not written at shutdown (they are probed again): %w", r.id, werr))
		}
	}
	return err
}

// runs reports whether this box probes the job: on one box every running
// job; in a fleet those it holds slices of (an egress address's warning
// concerns the jobs whose sessions it carries).
func (sc *scheduler) runs(id string) bool {
	if sc.lease == nil {
		return true
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	_, ok := sc.jobs[id]
	return ok
}

func (sc *scheduler) stats() schedStats {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := schedStats{jobs: len(sc.jobs), inflight: sc.inflight}
	for _, r := range sc.jobs {
		st.queued += r.queued
		st.deferred += r.deferred
	}
	return st
}

// deferHeap orders deferred groups by readyAt.
type deferHeap []*group

func (h deferHeap) Len() int           { return len(h) }
func (h deferHeap) Less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }
func (h deferHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *deferHeap) Push(x any) {
	g := x.(*group)
	g.hidx = len(*h)
	*h = append(*h, g)
}
func (h *deferHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return g
}

// stored is the stored result of the job's address addr: receipt.Stored,
// with the receipt of spec §2.4 without kid, sig and credits
// (receipt.Unsigned; a batch result is not signed: the CSV has no place
// for a signature), so that a later POST /v1/validate with cache: true
// can serve it, signing it then.
func stored(addr string, r *probe.Result) storage.Result {
	res := receipt.Stored(addr, r)
	if b, err := receipt.Unsigned(r, addr); err == nil {
		res.Receipt = b
	}
	return res
}
