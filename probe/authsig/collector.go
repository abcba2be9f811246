package authsig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/verifyd/verifyd/dnsbl"
	"github.com/verifyd/verifyd/internal/fifo"
	"github.com/verifyd/verifyd/resolver"
)

// CollectorOptions configures a Collector.
type CollectorOptions struct {
	// Resolver answers every DNS question; the collector relies on its
	// cache and its in-flight deduplication. Required.
	Resolver resolver.Interface
	// DKIMSelectors are the selectors tried (all at once); default
	// DefaultDKIMSelectors().
	DKIMSelectors []string
	// TrustKeys are the key ids the operator's svc trust programme issued;
	// none certifies no domain.
	TrustKeys TrustKeys
	// DNSBL and DNSWL are the zones of the DNS block and allow lists the MX
	// address is queried on (RFC 5782), e.g. "zen.spamhaus.org" and
	// "list.dnswl.org". None by default: the dnsbl and dnswl keys are then
	// left out. Many lists refuse queries from public resolvers and charge
	// commercial users; configure only lists whose terms you meet.
	DNSBL []string
	DNSWL []string
	// Timeout bounds one domain's collection, whatever the callers' own
	// deadlines, from when its lookups start. Default 5 s.
	Timeout time.Duration
	// Concurrency bounds the collections whose lookups run at once (each
	// holds a score of lookups and their goroutines); more wait their turn
	// in a queue, those begun by StartUrgent ahead of those begun by
	// Start. A caller's deadline bounds its wait. Default 128.
	Concurrency int
	// MinTTL and MaxTTL clamp how long a domain's signals are reused: the
	// smallest TTL of the answers they came from, within these bounds.
	// Defaults 5 min and 1 h.
	MinTTL, MaxTTL time.Duration
	// FailTTL is how long signals are reused when some lookup failed (their
	// keys left out), so that a domain whose DNS is broken does not make
	// every probe wait for it again. Default 30 s.
	FailTTL time.Duration
	// Refresh collects a domain's signals again in the background when a
	// Start finds them in the last tenth of their cache time, so that the
	// domains in steady use never make a validation wait for their
	// collection (the resolver's prefetch, for the signals): the Start is
	// answered from the cache at once. A refresh that fails some lookup
	// keeps what was cached until it expires. Default off.
	Refresh bool
	// MailboxTTL is how long what RCPT probes learnt of abuse@ and
	// postmaster@ is reused. Default 24 h.
	MailboxTTL time.Duration
	// MaxEntries bounds the per-domain caches. Default 100,000.
	MaxEntries int
	// Age gives domain_age_days from its cache, never waiting for it;
	// nil: domain_age_days is always 0 (unknown). The Collector does not
	// close it.
	Age *DomainAge
	// Now is the clock of the caches; default time.Now.
	Now func() time.Time
	// Logger receives failed lookups at debug level; default
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of CollectorOptions.
const (
	DefaultCollectTimeout = 5 * time.Second
	DefaultConcurrency    = 128
	DefaultSignalsMinTTL  = 5 * time.Minute
	DefaultSignalsMaxTTL  = time.Hour
	DefaultSignalsFailTTL = 30 * time.Second
	DefaultMailboxTTL     = 24 * time.Hour
	DefaultMaxEntries     = 100000
)

// Collector looks up a domain's authentication and deliverability signals
// (the auth object of spec §2.6) and caches them per domain. It is safe for
// concurrent use. The flow for one domain D and its first MX host M, all
// lookups started at once (see README.md for each key):
//
//   - TXT at D, walking include: and redirect= (FollowSPF): spf;
//   - TXT at _domainkey.D, then, unless that is NXDOMAIN (RFC 8020),
//     at <selector>._domainkey.D for every selector: dkim;
//   - TXT at _dmarc.D, then _dmarc.<org domain> (DiscoverDMARC): dmarc and
//     its five companions;
//   - TXT at _mta-sts.D, _smtp._tls.D, _svc-trust.D, default._bimi.D (then
//     the org domain's): mta_sts, tls_rpt, svc_*, bimi, bimi_vmc;
//   - CAA at D and its parents (CAANames): caa;
//   - MX at D (the resolver's cache already has it): dnssec from its AD
//     bit; when authenticated, TLSA at _25._tcp.M: dane (RFC 7672 §2.2);
//   - A/AAAA of M, then on its first address: PTR and the forward lookup
//     of each PTR name (ptr, fcrdns), and A at <reversed address>.<zone>
//     for every configured DNS list (dnsbl_clean, dnsbl_lists_on,
//     dnswl_listed).
//
// Concurrent collections of one domain share one flight; a finished one is
// cached for the smallest TTL of its answers, clamped to [MinTTL, MaxTTL],
// or FailTTL when a lookup failed. At most Options.Concurrency flights run
// their lookups at once; the others wait in a queue (real-time ones, begun
// by StartUrgent, first), holding no goroutine, so that a batch of
// thousands of domains does not start tens of thousands of lookups at
// once. The session keys come from the prober's SMTP session
// (Signals.MergeSession, MergeMailboxes) and domain_age_days from
// DomainAge's cache.
type Collector struct {
	opts    CollectorOptions
	log     *slog.Logger
	signals *ttlCache[*Signals]
	boxes   *ttlCache[Mailboxes]

	mu      sync.Mutex
	flights map[string]*flight
	running int                 // flights running their lookups (≤ Concurrency)
	waiting fifo.Lanes[*flight] // flights waiting to run, StartUrgent's first

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewCollector returns a Collector, or an error naming every problem of
// opts.
func NewCollector(opts CollectorOptions) (*Collector, error) {
	var errs []error
	if opts.Resolver == nil {
		errs = append(errs, errors.New("a resolver is required"))
	}
	for _, z := range slices.Concat(opts.DNSBL, opts.DNSWL) {
		if !validHostname(normalizeDomain(z)) {
			errs = append(errs, fmt.Errorf("dns list zone %q is not a host name", z))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", opts.Timeout}, {"min ttl", opts.MinTTL}, {"max ttl", opts.MaxTTL}, {"fail ttl", opts.FailTTL}, {"mailbox ttl", opts.MailboxTTL}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if opts.MaxEntries < 0 {
		errs = append(errs, fmt.Errorf("max entries %d is negative", opts.MaxEntries))
	}
	if opts.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d is negative", opts.Concurrency))
	}
	if opts.MinTTL > 0 && opts.MaxTTL > 0 && opts.MinTTL > opts.MaxTTL {
		errs = append(errs, fmt.Errorf("min ttl %v is above max ttl %v", opts.MinTTL, opts.MaxTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("authsig: %w", err)
	}
	if opts.DKIMSelectors == nil {
		opts.DKIMSelectors = DefaultDKIMSelectors()
	}
	opts.DNSBL = normalizeZones(opts.DNSBL)
	opts.DNSWL = normalizeZones(opts.DNSWL)
	if opts.Timeout == 0 {
		opts.Timeout = DefaultCollectTimeout
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MinTTL == 0 {
		opts.MinTTL = DefaultSignalsMinTTL
		if opts.MaxTTL > 0 && opts.MaxTTL < opts.MinTTL {
			opts.MinTTL = opts.MaxTTL
		}
	}
	if opts.MaxTTL == 0 {
		opts.MaxTTL = max(DefaultSignalsMaxTTL, opts.MinTTL)
	}
	if opts.FailTTL == 0 {
		opts.FailTTL = DefaultSignalsFailTTL
	}
	if opts.MailboxTTL == 0 {
		opts.MailboxTTL = DefaultMailboxTTL
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Collector{
		opts:    opts,
		log:     opts.Logger.With("pkg", "authsig"),
		signals: newTTLCache[*Signals](opts.MaxEntries),
		boxes:   newTTLCache[Mailboxes](opts.MaxEntries),
		flights: map[string]*flight{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

func normalizeZones(zones []string) []string {
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		out = append(out, normalizeDomain(z))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Close stops the collections under way (their callers get what was
// learnt) and waits for their goroutines. Later collections learn nothing.
func (c *Collector) Close() {
	c.cancel()
	c.wg.Wait()
}

// flight is one collection of one (domain, MX host); its Signals fill in
// as the lookups finish.
type flight struct {
	done  chan struct{}
	start time.Time // when Start made it

	// What run needs; set by Start, read once the flight runs. urgent
	// (begun or joined by StartUrgent while waiting) is guarded by
	// Collector.mu.
	key, domain, mx string
	now             time.Time
	urgent          bool
	refresh         bool // begun by a hit in the last tenth (Refresh)

	mu     sync.Mutex
	s      Signals
	ttl    time.Duration // smallest TTL of the answers so far; 0 for none yet
	failed bool          // some lookup failed: keys are missing
}

// Pending is a collection begun by Start.
type Pending struct {
	c      *Collector
	domain string
	s      *Signals // a cache hit
	f      *flight  // or the flight to wait for
}

// Start begins collecting the signals of domain (an A-label or Unicode
// name) whose mail goes to mxHosts (in preference order, or the domain
// itself for an implicit MX; only the first is looked at), or joins the
// collection already under way, or finds them cached. It does not wait:
// the lookups run in the background, bounded by Options.Timeout, and Wait
// collects what they learnt. When Options.Concurrency collections are
// running, the new one waits its turn. It also asks the DomainAge, if
// any, to look the domain up in the background.
func (c *Collector) Start(domain string, mxHosts []string) *Pending {
	return c.start(domain, mxHosts, false)
}

// StartUrgent is Start for a caller with a budget of seconds (a real-time
// validation): when its collection has to wait for a turn, it goes ahead
// of every collection begun by Start.
func (c *Collector) StartUrgent(domain string, mxHosts []string) *Pending {
	return c.start(domain, mxHosts, true)
}

func (c *Collector) start(domain string, mxHosts []string, urgent bool) *Pending {
	d := normalizeDomain(domain)
	mx := ""
	if len(mxHosts) > 0 {
		mx = normalizeDomain(mxHosts[0])
	}
	if c.opts.Age != nil {
		c.opts.Age.Days(d)
	}
	key := d + " " + mx
	now := c.opts.Now()
	if s, ok, refresh := c.signals.getRefresh(key, now); ok {
		collectionsCached.Inc()
		if refresh { // only signals put with Options.Refresh ask for one
			c.mu.Lock()
			if c.flights[key] == nil && c.ctx.Err() == nil {
				refreshes.Inc()
				c.launch(&flight{done: make(chan struct{}), start: time.Now(), key: key, domain: d, mx: mx, now: now, refresh: true}, fifo.Background)
			}
			c.mu.Unlock()
		}
		return &Pending{c: c, domain: d, s: s}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[key]; f != nil {
		collectionsJoined.Inc()
		if urgent && c.waiting.Promote(f, fifo.Urgent) {
			f.urgent = true
		} else if f.refresh {
			c.waiting.Promote(f, fifo.Normal)
		}
		return &Pending{c: c, domain: d, f: f}
	}
	f := &flight{done: make(chan struct{}), start: time.Now(), key: key, domain: d, mx: mx, now: now}
	if c.ctx.Err() != nil {
		close(f.done) // closed: nothing to learn
		return &Pending{c: c, domain: d, f: f}
	}
	collectionsRun.Inc()
	lane := fifo.Normal
	if urgent {
		lane = fifo.Urgent
	}
	c.launch(f, lane)
	return &Pending{c: c, domain: d, f: f}
}

// launch registers f and runs it, or queues it in lane when Concurrency
// flights run (StartUrgent's, then Start's, then refreshes). The caller
// holds mu.
func (c *Collector) launch(f *flight, lane fifo.Lane) {
	c.flights[f.key] = f
	c.wg.Add(1)
	f.urgent = lane == fifo.Urgent
	if c.running < c.opts.Concurrency {
		c.running++
		collectionsRunning.Add(1)
		go c.runner(f)
	} else {
		c.waiting.Push(f, lane)
		collectionsQueued.Add(1)
	}
}

// runner runs f, then the queued flights, urgent ones first, until the
// queues are empty.
func (c *Collector) runner(f *flight) {
	for f != nil {
		c.run(f)
		c.mu.Lock()
		f = c.next()
		if f == nil {
			c.running--
			collectionsRunning.Add(-1)
		}
		c.mu.Unlock()
	}
}

// next takes the next waiting flight, urgent ones first; nil when none
// waits. The caller holds mu.
func (c *Collector) next() *flight {
	f, ok := c.waiting.Pop()
	if ok {
		collectionsQueued.Add(-1)
	}
	return f
}

// Wait returns the signals learnt by the time the collection ends or ctx
// does, whichever comes first: keys whose lookups have not finished are
// left out, never guessed. domain_age_days is set from the DomainAge's
// cache, 0 when unknown. The result is the caller's own copy.
func (p *Pending) Wait(ctx context.Context) *Signals {
	var s *Signals
	if p.f == nil {
		s = p.s.Clone()
	} else {
		select {
		case <-p.f.done:
		case <-ctx.Done():
		}
		p.f.mu.Lock()
		s = p.f.s.Clone()
		p.f.mu.Unlock()
	}
	days := 0
	if p.c.opts.Age != nil {
		days, _ = p.c.opts.Age.Days(p.domain)
	}
	s.DomainAgeDays = intPtr(days)
	return s
}

// Done is closed when the collection has ended (at once for a cache hit).
func (p *Pending) Done() <-chan struct{} {
	if p.f == nil {
		return closedChan
	}
	return p.f.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Collect is Start then Wait.
func (c *Collector) Collect(ctx context.Context, domain string, mxHosts []string) *Signals {
	return c.Start(domain, mxHosts).Wait(ctx)
}

// Mailboxes returns what RCPT probes learnt of domain's abuse@ and
// postmaster@ within Options.MailboxTTL (nil fields: not known).
func (c *Collector) Mailboxes(domain string) Mailboxes {
	m, _ := c.boxes.get(normalizeDomain(domain), c.opts.Now())
	return m
}

// RecordMailboxes keeps what an RCPT probe learnt of domain's role
// mailboxes for Options.MailboxTTL; nil fields keep what was known.
func (c *Collector) RecordMailboxes(domain string, m Mailboxes) {
	if m.Abuse == nil && m.Postmaster == nil {
		return
	}
	c.boxes.update(normalizeDomain(domain), c.opts.Now(), c.opts.MailboxTTL, func(old Mailboxes) Mailboxes {
		if m.Abuse != nil {
			old.Abuse = boolPtr(*m.Abuse)
		}
		if m.Postmaster != nil {
			old.Postmaster = boolPtr(*m.Postmaster)
		}
		return old
	})
}

// run does one collection and caches its outcome.
func (c *Collector) run(f *flight) {
	defer c.wg.Done()
	key, now := f.key, f.now
	begun := time.Now()
	collectionWait.UpdateDuration(f.start)
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Timeout)
	defer cancel()
	c.mu.Lock()
	urgent := f.urgent
	c.mu.Unlock()
	if urgent {
		// A real-time validation waits for these: ahead of a batch's
		// lookups at the resolver too.
		ctx = resolver.Urgent(ctx)
	}
	k := &collection{c: c, f: f, domain: f.domain, mx: f.mx}
	var wg sync.WaitGroup
	for _, step := range []func(context.Context){
		k.spf, k.dkim, k.dmarc, k.mtaSTS, k.tlsRPT, k.bimi, k.caa, k.trust, k.dnssecDANE, k.mxAddress,
	} {
		k.goSafe(&wg, ctx, step)
	}
	wg.Wait()

	f.mu.Lock()
	ttl := f.ttl
	failed := f.failed || ctx.Err() != nil
	if failed {
		ttl = c.opts.FailTTL
	} else {
		ttl = min(max(ttl, c.opts.MinTTL), c.opts.MaxTTL)
	}
	s := f.s.Clone()
	f.mu.Unlock()
	// A refresh that failed leaves the cached signals until they expire.
	if c.ctx.Err() == nil && !(f.refresh && failed) {
		c.signals.put(key, s, now, ttl, c.opts.Refresh)
	}
	collectionDuration.UpdateDuration(begun)
	c.mu.Lock()
	delete(c.flights, key)
	c.mu.Unlock()
	close(f.done)
}

// collection is the state of one run.
type collection struct {
	c          *Collector
	f          *flight
	domain, mx string
}

// goSafe runs step in a goroutine counted by wg; a panic (a bug triggered
// by untrusted DNS data) costs that step's keys, not the process.
func (k *collection) goSafe(wg *sync.WaitGroup, ctx context.Context, step func(context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if v := recover(); v != nil {
				k.c.log.Error("signal lookup panicked", "domain", k.domain, "panic", v)
				k.fail()
			}
		}()
		step(ctx)
	}()
}

// set changes the flight's signals.
func (k *collection) set(fn func(s *Signals)) {
	k.f.mu.Lock()
	fn(&k.f.s)
	k.f.mu.Unlock()
}

// answered records the TTL of an answer (positive or negative).
func (k *collection) answered(ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	k.f.mu.Lock()
	if k.f.ttl == 0 || ttl < k.f.ttl {
		k.f.ttl = ttl
	}
	k.f.mu.Unlock()
}

func (k *collection) fail() {
	k.f.mu.Lock()
	k.f.failed = true
	k.f.mu.Unlock()
}

// failed records a lookup that failed; its keys will be left out.
func (k *collection) failed(what string, err error) {
	k.fail()
	lookupFailures.Inc()
	k.c.log.Debug("signal lookup failed", "domain", k.domain, "lookup", what, "err", err)
}

// errIncomplete stands for a lookup that did not finish (its goroutine
// panicked).
var errIncomplete = errors.New("authsig: lookup did not finish")

// noRecords reports whether a lookup's error is an answer saying there are
// no such records (NXDOMAIN, NODATA), or a name that cannot exist.
func noRecords(err error) bool {
	return errors.Is(err, resolver.ErrNXDomain) || errors.Is(err, resolver.ErrNoData) ||
		errors.Is(err, resolver.ErrInvalidName)
}

// txt is the TXTLookup of the collection: (nil, nil) for no records, an
// error only for a failed lookup.
func (k *collection) txt(ctx context.Context, name string) ([]string, error) {
	res, err := k.c.opts.Resolver.LookupTXT(ctx, name)
	switch {
	case err == nil:
		k.answered(res.TTL)
		return res.TXT, nil
	case noRecords(err):
		k.answered(res.TTL)
		return nil, nil
	}
	k.failed("TXT "+name, err)
	return nil, err
}

func (k *collection) txtLookup(ctx context.Context) TXTLookup {
	return func(name string) ([]string, error) { return k.txt(ctx, name) }
}

// spf: FollowSPF from the domain. A posture that depends on the sender (a
// redirect= with macros) is unknown.
func (k *collection) spf(ctx context.Context) {
	res, err := FollowSPF(k.domain, k.txtLookup(ctx))
	if err != nil || res.Posture == SPFRedirect {
		return
	}
	k.set(func(s *Signals) { s.SPF = res.Posture.String() })
}

// dkim: every selector at once; found wins, otherwise a failed selector
// makes the key unknown. First, one query at _domainkey.D: NXDOMAIN there
// means no name below it exists (RFC 8020 §2), so no selector has a key,
// and the selectors are not asked (one query instead of one a selector:
// most of a new domain's lookups when it does not sign). A domain with
// any key has _domainkey.D as an empty non-terminal, which answers
// NODATA (RFC 8020 §2, RFC 4592 §2.2.2); NODATA, an answer or a failure
// asks the selectors as before.
func (k *collection) dkim(ctx context.Context) {
	sels := k.c.opts.DKIMSelectors
	if len(sels) == 0 {
		return // nothing tried, nothing known
	}
	if res, err := k.c.opts.Resolver.LookupTXT(ctx, dkimParent(k.domain)); errors.Is(err, resolver.ErrNXDomain) {
		k.answered(res.TTL)
		dkimSkipped.Inc()
		k.set(func(s *Signals) { s.DKIM = CombineDKIM(nil).Status.String() })
		return
	}
	results := make([]DKIMResult, len(sels))
	failed := make([]bool, len(sels))
	var wg sync.WaitGroup
	for i, sel := range sels {
		failed[i] = true // until the lookup answers
		k.goSafe(&wg, ctx, func(ctx context.Context) {
			recs, err := k.txt(ctx, DKIMName(sel, k.domain))
			if err != nil {
				return
			}
			results[i] = DKIM(sel, recs)
			failed[i] = false
		})
	}
	wg.Wait()
	res := CombineDKIM(results)
	if res.Status != DKIMFound && slices.Contains(failed, true) {
		return
	}
	k.set(func(s *Signals) { s.DKIM = res.Status.String() })
}

// dmarc: DiscoverDMARC; the companions only with a record.
func (k *collection) dmarc(ctx context.Context) {
	res, err := DiscoverDMARC(k.domain, k.txtLookup(ctx))
	if err != nil {
		return
	}
	k.set(func(s *Signals) {
		s.DMARC = res.Status.String()
		if res.Status != DMARCFound || res.Record == nil {
			return
		}
		r := res.Record
		s.DMARCPolicy = r.Policy.String()
		s.DMARCSubdomainPolicy = r.SubdomainPolicy.String()
		if s.DMARCSubdomainPolicy == "" {
			s.DMARCSubdomainPolicy = s.DMARCPolicy
		}
		s.DMARCAlignmentSPF = r.ASPF.String()
		s.DMARCAlignmentDKIM = r.ADKIM.String()
		s.DMARCRUASet = boolPtr(r.RUASet())
	})
}

func (k *collection) mtaSTS(ctx context.Context) {
	recs, err := k.txt(ctx, MTASTSName(k.domain))
	if err != nil {
		return
	}
	res := MTASTS(recs)
	k.set(func(s *Signals) { s.MTASTS = boolPtr(res.Enabled) })
}

func (k *collection) tlsRPT(ctx context.Context) {
	recs, err := k.txt(ctx, TLSRPTName(k.domain))
	if err != nil {
		return
	}
	res := TLSRPT(recs)
	k.set(func(s *Signals) { s.TLSRPT = boolPtr(res.Enabled) })
}

// bimi: default._bimi.D, or the org domain's when D publishes no BIMI
// record at all (BIMI draft §4.3, the receiver's fallback).
func (k *collection) bimi(ctx context.Context) {
	recs, err := k.txt(ctx, BIMIName("default", k.domain))
	if err != nil {
		return
	}
	if !slices.ContainsFunc(recs, IsBIMIRecord) {
		if org := OrgDomain(k.domain); org != k.domain {
			if recs, err = k.txt(ctx, BIMIName("default", org)); err != nil {
				return
			}
		}
	}
	res := BIMI(recs)
	k.set(func(s *Signals) {
		s.BIMI = boolPtr(res.Enabled)
		s.BIMIVMC = boolPtr(res.VMC)
	})
}

// caa: every name of CAANames at once.
func (k *collection) caa(ctx context.Context) {
	names := CAANames(k.domain)
	lookups := make([]CAALookup, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		lookups[i] = CAALookup{Name: name, Err: errIncomplete}
		k.goSafe(&wg, ctx, func(ctx context.Context) {
			lookups[i].Err = nil
			res, err := k.c.opts.Resolver.LookupCAA(ctx, name)
			switch {
			case err == nil:
				k.answered(res.TTL)
				lookups[i].Found = len(res.Records) > 0
			case noRecords(err):
				k.answered(res.TTL)
			default:
				k.failed("CAA "+name, err)
				lookups[i].Err = err
			}
		})
	}
	wg.Wait()
	has, err := HasCAA(lookups)
	if err != nil {
		return
	}
	k.set(func(s *Signals) { s.CAA = boolPtr(has) })
}

func (k *collection) trust(ctx context.Context) {
	recs, err := k.txt(ctx, TrustName(k.domain))
	if err != nil {
		return
	}
	res := Trust(recs, k.c.opts.TrustKeys)
	k.set(func(s *Signals) {
		s.SVCCertified = boolPtr(res.Certified)
		s.SVCTrustLevel = intPtr(res.Level)
		s.SVCKeyID = res.KeyID
	})
}

// dnssecDANE: dnssec is the AD bit of the domain's MX answer (an answer or
// an authenticated denial). dane needs that answer authenticated (RFC 7672
// §2.2.1: the MX host name must be secure for its TLSA records to count)
// and an authenticated TLSA RRset at _25._tcp.<MX host> with a usable
// record (§3.1): DANE-TA(2) or DANE-EE(3), selector 0 or 1, matching type
// 0, 1 (32 octets) or 2 (64 octets).
func (k *collection) dnssecDANE(ctx context.Context) {
	mx, err := k.c.opts.Resolver.LookupMX(ctx, k.domain)
	if err != nil && !noRecords(err) {
		k.failed("MX "+k.domain, err)
		return
	}
	k.answered(mx.TTL)
	k.set(func(s *Signals) { s.DNSSEC = boolPtr(mx.AD) })
	if k.mx == "" {
		return
	}
	if !mx.AD {
		k.set(func(s *Signals) { s.DANE = boolPtr(false) })
		return
	}
	name := "_25._tcp." + k.mx
	tl, err := k.c.opts.Resolver.LookupTLSA(ctx, name)
	dane := false
	switch {
	case err == nil:
		k.answered(tl.TTL)
		dane = tl.AD && slices.ContainsFunc(tl.Records, usableTLSA)
	case noRecords(err):
		k.answered(tl.TTL)
	default:
		k.failed("TLSA "+name, err)
		return
	}
	k.set(func(s *Signals) { s.DANE = boolPtr(dane) })
}

// usableTLSA reports whether an SMTP client may use r (RFC 7672 §3.1).
func usableTLSA(r resolver.TLSA) bool {
	if r.Usage != 2 && r.Usage != 3 || r.Selector > 1 {
		return false
	}
	switch r.MatchingType {
	case 0:
		return len(r.Data) > 0
	case 1:
		return len(r.Data) == 32
	case 2:
		return len(r.Data) == 64
	}
	return false
}

// mxAddress: the first address of the first MX host (the one the prober
// tries first), then its reverse DNS and its DNS list entries.
func (k *collection) mxAddress(ctx context.Context) {
	if k.mx == "" {
		return
	}
	res, err := k.c.opts.Resolver.LookupIP(ctx, "ip", k.mx)
	switch {
	case err == nil && len(res.IPs) > 0:
		k.answered(res.TTL)
	case err == nil, noRecords(err):
		k.answered(res.TTL)
		return // an MX without address: nothing to learn of it
	default:
		k.failed("A/AAAA "+k.mx, err)
		return
	}
	ip := res.IPs[0].Unmap()
	k.set(func(s *Signals) { s.mxIP = ip })
	var wg sync.WaitGroup
	k.goSafe(&wg, ctx, func(ctx context.Context) { k.reverse(ctx, ip) })
	k.goSafe(&wg, ctx, func(ctx context.Context) { k.blockLists(ctx, ip) })
	k.goSafe(&wg, ctx, func(ctx context.Context) { k.allowLists(ctx, ip) })
	wg.Wait()
}

// maxPTRNames bounds the forward lookups of FCrDNS (RFC 8601 §3 lets
// a verifier stop after a few names; 10 as for SPF's ptr, RFC 7208 §4.6.4).
const maxPTRNames = 10

// reverse: ptr is the first PTR name; fcrdns whether some PTR name
// resolves back to ip (RFC 8601 §3 "iprev").
func (k *collection) reverse(ctx context.Context, ip netip.Addr) {
	res, err := k.c.opts.Resolver.LookupPTR(ctx, ip)
	var names []string
	switch {
	case err == nil:
		k.answered(res.TTL)
		names = slices.Clone(res.Names)
	case noRecords(err):
		k.answered(res.TTL)
	default:
		k.failed("PTR "+ip.String(), err)
		return
	}
	k.set(func(s *Signals) {
		s.ptrKnown, s.ptrNames = true, names
		if len(names) > 0 {
			s.PTR = names[0]
		}
	})
	network := "ip4"
	if ip.Is6() {
		network = "ip6"
	}
	confirmed, failed := false, false
	for _, name := range names[:min(len(names), maxPTRNames)] {
		fwd, err := k.c.opts.Resolver.LookupIP(ctx, network, name)
		switch {
		case err == nil:
			k.answered(fwd.TTL)
			if slices.ContainsFunc(fwd.IPs, func(a netip.Addr) bool { return a.Unmap() == ip }) {
				confirmed = true
			}
		case noRecords(err):
			k.answered(fwd.TTL)
		default:
			k.failed("forward "+name, err)
			failed = true
		}
		if confirmed {
			break
		}
	}
	if !confirmed && failed {
		return
	}
	k.set(func(s *Signals) { s.FCrDNS = boolPtr(confirmed) })
}

// listAnswer looks ip up on one DNS list zone: its A records, nil for
// not listed.
func (k *collection) listAnswer(ctx context.Context, ip netip.Addr, zone string) ([]netip.Addr, error) {
	name, err := dnsbl.Name(ip, zone) // zone normalized by NewCollector
	if err != nil {
		return nil, err
	}
	res, err := k.c.opts.Resolver.LookupIP(ctx, "ip4", name)
	switch {
	case err == nil:
		k.answered(res.TTL)
		return res.IPs, nil
	case noRecords(err):
		k.answered(res.TTL)
		return nil, nil
	}
	k.failed("A "+name, err)
	return nil, err
}

// blockLists: dnsbl_clean and dnsbl_lists_on (SummarizeDNSBL).
func (k *collection) blockLists(ctx context.Context, ip netip.Addr) {
	zones := k.c.opts.DNSBL
	if len(zones) == 0 {
		return
	}
	results := make([]DNSBLResult, len(zones))
	var wg sync.WaitGroup
	for i, zone := range zones {
		results[i] = DNSBLResult{Zone: zone, Err: errIncomplete}
		k.goSafe(&wg, ctx, func(ctx context.Context) {
			answers, err := k.listAnswer(ctx, ip, zone)
			if err == nil {
				results[i].Listed, err = dnsbl.Classify(answers)
				if err != nil {
					k.failed("dnsbl "+zone, err)
				}
			}
			results[i].Err = err
		})
	}
	wg.Wait()
	clean, on, known := SummarizeDNSBL(results)
	if !known {
		return
	}
	if on == nil {
		on = []string{}
	}
	k.set(func(s *Signals) {
		s.DNSBLClean = boolPtr(clean)
		s.DNSBLListsOn = on
	})
}

// allowLists: dnswl_listed is true when some allow list lists the
// address, false when every one answered that it does not.
func (k *collection) allowLists(ctx context.Context, ip netip.Addr) {
	zones := k.c.opts.DNSWL
	if len(zones) == 0 {
		return
	}
	listed := make([]bool, len(zones))
	failed := make([]bool, len(zones))
	var wg sync.WaitGroup
	for i, zone := range zones {
		failed[i] = true // until the lookup answers
		k.goSafe(&wg, ctx, func(ctx context.Context) {
			answers, err := k.listAnswer(ctx, ip, zone)
			if err == nil {
				listed[i], err = ClassifyDNSWL(answers)
				if err != nil {
					k.failed("dnswl "+zone, err)
				}
			}
			failed[i] = err != nil
		})
	}
	wg.Wait()
	onList := slices.Contains(listed, true)
	if !onList && slices.Contains(failed, true) {
		return
	}
	k.set(func(s *Signals) { s.DNSWLListed = boolPtr(onList) })
}
