package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/verifyd/verifyd/internal/fifo"
)

// Interface is what the probe engine needs from DNS. *Resolver implements
// it; tests of the engine use the simulated world or a fake.
//
// Every method takes a name in any case, with or without the trailing dot,
// in Unicode or A-labels (see Normalize). A result's Status is always set:
// StatusAnswer with a nil error, or StatusNXDomain, StatusNoData,
// StatusTempFail with an *Error wrapping ErrNXDomain, ErrNoData,
// ErrTemporary. A malformed name gives StatusNone and an error wrapping
// ErrInvalidName, and sends no query. Slices in results are shared with
// the cache and must not be modified.
type Interface interface {
	// LookupMX returns the MX records of a domain, by preference, and
	// reports a null MX (RFC 7505). An empty MX list with StatusNoData is
	// the caller's cue for the implicit MX of RFC 5321 §5.1.
	LookupMX(ctx context.Context, name string) (MXResult, error)
	// LookupIP returns the addresses of a host: network "ip4" (A), "ip6"
	// (AAAA) or "ip" (both, queried concurrently; an answer to either is an
	// answer).
	LookupIP(ctx context.Context, network, name string) (IPResult, error)
	// LookupTXT returns the TXT records of a name (SPF, DMARC, MTA-STS,
	// TLS-RPT, BIMI), each record's strings joined.
	LookupTXT(ctx context.Context, name string) (TXTResult, error)
	// LookupPTR returns the names of an address (reverse DNS).
	LookupPTR(ctx context.Context, addr netip.Addr) (PTRResult, error)
	// LookupTLSA returns the TLSA records of a name such as
	// "_25._tcp.mx.example.com" (RFC 7672).
	LookupTLSA(ctx context.Context, name string) (TLSAResult, error)
	// LookupCAA returns the CAA records of a name (RFC 8659).
	LookupCAA(ctx context.Context, name string) (CAAResult, error)
	// Lookup returns the answer section, RCODE and AD bit for any type.
	Lookup(ctx context.Context, name string, qtype uint16) (Answer, error)
}

var _ Interface = (*Resolver)(nil)

// staleAnswerTTL is the TTL of a stale answer, during which no new query is
// made for it (RFC 8767 §4, §5: 30 seconds).
const staleAnswerTTL = 30 * time.Second

// Resolver is a caching DNS resolver. It is safe for concurrent use.
type Resolver struct {
	opts    Options
	bounds  ttlBounds
	ups     []*upstream
	cache   *cache
	flights [16]flightShard
	log     *slog.Logger

	ctx    context.Context // cancelled by Close; the context of queries
	cancel context.CancelFunc
	work   workers        // the worker pool (workers.go)
	wg     sync.WaitGroup // workers
	closed atomic.Bool
	once   sync.Once
}

type flightShard struct {
	mu sync.Mutex
	m  map[key]*call
	_  [40]byte
}

// call is one query in flight; e is set before done is closed.
type call struct {
	k    key
	h    uint64
	fs   *flightShard
	done chan struct{}
	e    *entry
	// refresh marks a prefetch: begun by a hit, with no caller waiting
	// until the entry expires.
	refresh bool
}

// New returns a Resolver. It reads Options.ResolvConf if no upstream is
// configured, and fails if that names none. It sends no query.
func New(opts Options) (*Resolver, error) {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ups := opts.Upstreams
	if len(ups) == 0 {
		var err error
		if ups, err = readResolvConf(opts.ResolvConf); err != nil {
			return nil, err
		}
		if len(ups) > maxUpstreams {
			ups = ups[:maxUpstreams]
		}
	}
	r := &Resolver{
		opts:   opts,
		bounds: ttlBounds{min: opts.MinTTL, max: opts.MaxTTL, negMax: max(opts.NegativeMaxTTL, opts.MinTTL)},
		cache:  newCache(opts.CacheEntries, opts.CacheBytes),
		log:    opts.Logger.With("pkg", "resolver"),
	}
	r.opts.Upstreams = nil
	for _, s := range ups {
		addr, _ := parseUpstream(s) // validated
		r.opts.Upstreams = append(r.opts.Upstreams, addr)
		r.ups = append(r.ups, newUpstream(addr, opts.MaxIdleConns, opts.ConnMaxQueries))
	}
	for i := range r.flights {
		r.flights[i].m = make(map[key]*call)
	}
	r.work.idleFor = workerIdle
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Upstreams returns the upstream addresses in use, "ip:port".
func (r *Resolver) Upstreams() []string { return append([]string(nil), r.opts.Upstreams...) }

// Close stops the resolver: queries in flight are abandoned (their callers
// get a temporary failure), sockets closed, the cache emptied. Later
// lookups fail with ErrClosed. Close waits for the resolver's goroutines.
func (r *Resolver) Close() {
	r.once.Do(func() {
		r.closed.Store(true)
		// A barrier: begin dispatches a query to a worker while holding
		// its shard's lock, after checking closed; once every lock has been
		// taken here, no query starts and every worker is counted in wg.
		for i := range r.flights {
			r.flights[i].mu.Lock()
			_ = len(r.flights[i].m)
			r.flights[i].mu.Unlock()
		}
		r.cancel()
		r.wg.Wait()
		for _, u := range r.ups {
			u.close()
		}
		r.cache.purge()
	})
}

func (r *Resolver) nowNanos() int64 { return r.opts.Now().UnixNano() }

// LookupMX implements Interface.
func (r *Resolver) LookupMX(ctx context.Context, name string) (MXResult, error) {
	e, now := r.resolve(ctx, name, dns.TypeMX)
	res := *e.typed.(*MXResult)
	res.TTL = e.ttl(now)
	count(dns.TypeMX, &res.Meta)
	return res, e.typedErr
}

// LookupTXT implements Interface.
func (r *Resolver) LookupTXT(ctx context.Context, name string) (TXTResult, error) {
	e, now := r.resolve(ctx, name, dns.TypeTXT)
	res := *e.typed.(*TXTResult)
	res.TTL = e.ttl(now)
	count(dns.TypeTXT, &res.Meta)
	return res, e.typedErr
}

// LookupTLSA implements Interface.
func (r *Resolver) LookupTLSA(ctx context.Context, name string) (TLSAResult, error) {
	e, now := r.resolve(ctx, name, dns.TypeTLSA)
	res := *e.typed.(*TLSAResult)
	res.TTL = e.ttl(now)
	count(dns.TypeTLSA, &res.Meta)
	return res, e.typedErr
}

// LookupCAA implements Interface.
func (r *Resolver) LookupCAA(ctx context.Context, name string) (CAAResult, error) {
	e, now := r.resolve(ctx, name, dns.TypeCAA)
	res := *e.typed.(*CAAResult)
	res.TTL = e.ttl(now)
	count(dns.TypeCAA, &res.Meta)
	return res, e.typedErr
}

// LookupPTR implements Interface.
func (r *Resolver) LookupPTR(ctx context.Context, addr netip.Addr) (PTRResult, error) {
	if !addr.IsValid() {
		return PTRResult{}, fmt.Errorf("%w: no address to look up", ErrInvalidName)
	}
	name, err := dns.ReverseAddr(addr.Unmap().WithZone("").String())
	if err != nil {
		return PTRResult{}, fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	e, now := r.resolve(ctx, name, dns.TypePTR)
	res := *e.typed.(*PTRResult)
	res.TTL = e.ttl(now)
	count(dns.TypePTR, &res.Meta)
	return res, e.typedErr
}

// LookupIP implements Interface.
func (r *Resolver) LookupIP(ctx context.Context, network, name string) (IPResult, error) {
	var qtype uint16
	switch network {
	case "ip4":
		qtype = dns.TypeA
	case "ip6":
		qtype = dns.TypeAAAA
	case "ip":
	default:
		return IPResult{}, fmt.Errorf("resolver: unknown network %q, want ip, ip4 or ip6", network)
	}
	if qtype != 0 {
		e, now := r.resolve(ctx, name, qtype)
		res := *e.typed.(*IPResult)
		res.TTL = e.ttl(now)
		count(qtype, &res.Meta)
		return res, e.typedErr
	}
	// Start both queries before waiting for either.
	p4 := r.begin(ctx, name, dns.TypeA)
	p6 := r.begin(ctx, name, dns.TypeAAAA)
	e4, now4 := r.wait(ctx, p4)
	e6, now6 := r.wait(ctx, p6)
	a, b := *e4.typed.(*IPResult), *e6.typed.(*IPResult)
	a.TTL, b.TTL = e4.ttl(now4), e6.ttl(now6)
	count(dns.TypeA, &a.Meta)
	count(dns.TypeAAAA, &b.Meta)
	return mergeIP(a, e4.typedErr, b, e6.typedErr)
}

// mergeIP combines the A and AAAA results of one name: an answer to
// either is an answer; otherwise a temporary failure of either is one;
// otherwise NXDOMAIN if either says so; otherwise NODATA.
func mergeIP(a IPResult, aerr error, b IPResult, berr error) (IPResult, error) {
	switch {
	case a.Status == StatusAnswer && b.Status == StatusAnswer:
		res := a
		res.IPs = make([]netip.Addr, 0, len(a.IPs)+len(b.IPs))
		res.IPs = append(append(res.IPs, a.IPs...), b.IPs...)
		res.TTL = min(a.TTL, b.TTL)
		res.AD = a.AD && b.AD
		res.Stale = a.Stale || b.Stale
		return res, nil
	case a.Status == StatusAnswer:
		return a, nil
	case b.Status == StatusAnswer:
		return b, nil
	case a.Status == StatusNone:
		return a, aerr
	case a.Status == StatusTempFail:
		return a, aerr
	case b.Status == StatusTempFail:
		return b, berr
	case a.Status == StatusNXDomain:
		return a, aerr
	case b.Status == StatusNXDomain:
		return b, berr
	default:
		a.TTL = min(a.TTL, b.TTL)
		a.AD = a.AD && b.AD
		return a, aerr
	}
}

// Lookup implements Interface.
func (r *Resolver) Lookup(ctx context.Context, name string, qtype uint16) (Answer, error) {
	switch qtype {
	case 0, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeIXFR, dns.TypeAXFR, dns.TypeMAILA, dns.TypeMAILB:
		return Answer{Rcode: -1}, fmt.Errorf("resolver: cannot look up type %s", typeString(qtype))
	}
	e, now := r.resolve(ctx, name, qtype)
	a := e.ans
	a.TTL = e.ttl(now)
	count(qtype, &a.Meta)
	return a, e.err
}

// meta gives access to the Meta of any typed result.
func (m *Meta) meta() *Meta { return m }

// resolve looks up (name, qtype) and returns the entry and the time to
// compute its TTL at.
func (r *Resolver) resolve(ctx context.Context, name string, qtype uint16) (*entry, int64) {
	return r.wait(ctx, r.begin(ctx, name, qtype))
}

// count counts a lookup's outcome in the metrics.
func count(qtype uint16, m *Meta) {
	countQuery(qtype, m.Status)
	if m.Stale {
		staleAnswers.Inc()
	}
}

// ttl returns how long e stays fresh after now.
func (e *entry) ttl(now int64) time.Duration {
	if e.expires <= now {
		return 0
	}
	return time.Duration(e.expires - now)
}

// pending is a lookup begun: its entry if the outcome was known at once,
// or else the call to wait for.
type pending struct {
	e   *entry
	c   *call
	k   key
	now int64 // when e was found
}

// begin starts a lookup of (name, qtype): the outcome is known at once for
// a cache hit, a bad name, a closed resolver; otherwise a query is joined
// or started.
func (r *Resolver) begin(ctx context.Context, name string, qtype uint16) pending {
	if r.closed.Load() {
		return pending{e: failEntry(key{name, qtype}, StatusNone, -1, ErrClosed)}
	}
	n, err := normalize(name)
	if err != nil {
		return pending{e: failEntry(key{name, qtype}, StatusNone, -1, err)}
	}
	k := key{n, qtype}
	h := r.cache.hash(k)
	now := r.nowNanos()
	if e := r.cache.get(k, h); e != nil && now < e.expires {
		if !e.ref.Load() {
			e.ref.Store(true)
		}
		cacheHits.Inc()
		if e.refreshAt != 0 && now >= e.refreshAt && !e.refreshing.Load() && e.refreshing.CompareAndSwap(false, true) {
			r.refresh(k, h)
		}
		return pending{e: e, k: k, now: now}
	}
	cacheMisses.Inc()
	if err := ctx.Err(); err != nil {
		return pending{e: failEntry(k, StatusTempFail, -1, err), k: k}
	}
	fs := r.shard(h)
	fs.mu.Lock()
	if c := fs.m[k]; c != nil {
		if lane := laneOf(ctx); lane == fifo.Urgent || c.refresh {
			r.promote(c, lane)
		}
		fs.mu.Unlock()
		inflightJoins.Inc()
		return pending{c: c, k: k}
	}
	// The query that just ended stored its entry before leaving the map.
	if e := r.cache.get(k, h); e != nil {
		if now := r.nowNanos(); now < e.expires {
			fs.mu.Unlock()
			return pending{e: e, k: k, now: now}
		}
	}
	if r.closed.Load() {
		fs.mu.Unlock()
		return pending{e: failEntry(k, StatusNone, -1, ErrClosed), k: k}
	}
	c := r.launch(fs, k, h, laneOf(ctx), false)
	fs.mu.Unlock()
	return pending{c: c, k: k}
}

// shard is the flight shard of hash h.
func (r *Resolver) shard(h uint64) *flightShard { return &r.flights[h%uint64(len(r.flights))] }

// launch registers a query for k in fs and dispatches it in lane. The
// caller holds fs.mu and found the resolver open: dispatched under the
// lock, Close's barrier then knows no query starts after it.
func (r *Resolver) launch(fs *flightShard, k key, h uint64, lane fifo.Lane, refresh bool) *call {
	c := &call{k: k, h: h, fs: fs, done: make(chan struct{}), refresh: refresh}
	fs.m[k] = c
	r.dispatch(c, lane)
	return c
}

// refresh starts a background query for k, whose entry a hit found in the
// last tenth of its TTL (Options.Prefetch), unless one is in flight. When
// it has to wait for a worker it waits behind every lookup a caller waits
// for: nobody waits for it until the entry expires, and a caller that
// misses then joins it and moves it to the caller's lane.
func (r *Resolver) refresh(k key, h uint64) {
	fs := r.shard(h)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[k] != nil || r.closed.Load() {
		return
	}
	prefetches.Inc()
	r.launch(fs, k, h, fifo.Background, true)
}

// wait returns the entry of p, waiting for its query until ctx ends, and
// the time to compute the entry's TTL at.
func (r *Resolver) wait(ctx context.Context, p pending) (*entry, int64) {
	if p.c == nil {
		return p.e, p.now
	}
	select {
	case <-p.c.done:
		return p.c.e, r.nowNanos()
	case <-ctx.Done():
		return failEntry(p.k, StatusTempFail, -1, ctx.Err()), 0
	}
}

// fly runs the query of c and publishes its outcome to c's waiters. It
// runs under the resolver's context, not a caller's.
func (r *Resolver) fly(c *call) {
	k, h, fs := c.k, c.h, c.fs
	var e *entry
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("query panicked", "name", k.name, "type", typeString(k.qtype), "panic", p)
			e = failEntry(k, StatusTempFail, -1, fmt.Errorf("internal error: %v", p))
		}
		c.e = e
		fs.mu.Lock()
		delete(fs.m, k)
		fs.mu.Unlock()
		close(c.done)
	}()
	msg, err := r.exchange(r.ctx, k)
	now := r.nowNanos()
	if err != nil {
		rcode := -1
		if msg != nil {
			rcode = msg.Rcode
		}
		e = failEntry(k, StatusTempFail, rcode, err)
		if c.refresh {
			// The entry the refresh was for still serves until it
			// expires; a caller that joined after that gets the failure
			// (or the stale answer below).
			if old := r.cache.get(k, h); old != nil && now < old.expires {
				e = old
				return
			}
		}
		if r.opts.ServeStale {
			if s := r.stale(k, h, now); s != nil {
				e = s
			}
		}
		return
	}
	e = r.newEntry(k, msg, now)
	if e.expires > now {
		r.cache.put(e, h, now)
	}
}

// exchange sends the query for k to the upstreams in turn until one
// answers NOERROR or NXDOMAIN. On failure it returns the last reply, if
// any, and the last error.
func (r *Resolver) exchange(ctx context.Context, k key) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.Question = []dns.Question{{Name: fqdn(k.name), Qtype: k.qtype, Qclass: dns.ClassINET}}
	q.RecursionDesired = true
	q.AuthenticatedData = true // RFC 6840 §5.7: we understand AD
	q.SetEdns0(ednsBufSize, true)

	var buf [maxUpstreams]int
	order := r.order(r.nowNanos(), buf[:0])
	var servfailed uint64
	var last *dns.Msg
	var lastErr error
	for range r.opts.Attempts {
		for _, i := range order {
			if servfailed&(1<<i) != 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return last, err
			}
			u := r.ups[i]
			q.Id = uint16(rand.Uint32())
			resp, class, err := u.query(ctx, q, r.opts.Timeout)
			switch class {
			case upOK:
				u.succeeded()
				return resp, nil
			case upServFail:
				servfailed |= 1 << i
				last, lastErr = resp, fmt.Errorf("SERVFAIL from %s", u.addr)
				continue
			case upRefused, upRcode:
				last, lastErr = resp, fmt.Errorf("%s from %s", dns.RcodeToString[resp.Rcode], u.addr)
			default:
				lastErr = err
			}
			if ctx.Err() == nil && u.failed(r.nowNanos(), r.opts.HealthFailures, r.opts.HealthCooldown) {
				r.log.Warn("upstream down", "upstream", u.addr, "cooldown", r.opts.HealthCooldown, "err", lastErr)
			}
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no upstream to ask")
	}
	return last, lastErr
}

// order appends to buf the indexes of the upstreams to try, in configured
// order: those not in their cooldown, or all if every one is.
func (r *Resolver) order(now int64, buf []int) []int {
	for i, u := range r.ups {
		if u.usable(now) {
			buf = append(buf, i)
		}
	}
	if len(buf) == 0 {
		for i := range r.ups {
			buf = append(buf, i)
		}
	}
	return buf
}

// newEntry classifies reply msg to k and builds its entry at now.
func (r *Resolver) newEntry(k key, msg *dns.Msg, now int64) *entry {
	c := classify(k.name, k.qtype, msg, r.bounds)
	e := &entry{key: k, ans: c.ans}
	if c.ans.Status != StatusAnswer {
		e.err = &Error{Name: k.name, Type: k.qtype, Status: c.ans.Status, Rcode: msg.Rcode}
	}
	e.typed = typedView(k.qtype, c.ans.Meta, c.matched)
	e.typedErr = e.err
	if pt, ok := e.typed.(interface{ meta() *Meta }); ok {
		if s := pt.meta().Status; s != c.ans.Status {
			e.typedErr = &Error{Name: k.name, Type: k.qtype, Status: s, Rcode: msg.Rcode}
		}
	}
	e.expires = now + int64(c.ttl)
	e.staleUntil = e.expires
	if r.opts.Prefetch {
		e.refreshAt = e.expires - int64(c.ttl/10)
	}
	if r.opts.ServeStale {
		e.staleUntil += int64(r.opts.StaleTTL)
	}
	e.size = entrySize(k, c.ans.Records)
	return e
}

// entrySize estimates the memory an entry holds: the entry, its map and
// ring slots, the records, and their typed view.
func entrySize(k key, rrs []dns.RR) int64 {
	n := 320 + 2*len(k.name)
	for _, rr := range rrs {
		n += 128 + 3*dns.Len(rr)
	}
	return int64(n)
}

// failEntry builds an uncached entry for a lookup without records.
func failEntry(k key, s Status, rcode int, err error) *entry {
	e := &entry{key: k, ans: Answer{Meta: Meta{Status: s}, Rcode: rcode}}
	if s == StatusNone {
		e.err = err
	} else {
		e.err = &Error{Name: k.name, Type: k.qtype, Status: s, Rcode: rcode, Err: err}
	}
	e.typedErr = e.err
	e.typed = typedView(k.qtype, e.ans.Meta, nil)
	return e
}

// stale returns a copy of k's expired entry marked stale and fresh for
// staleAnswerTTL, and caches it, or nil if there is none to serve
// (RFC 8767 §4).
func (r *Resolver) stale(k key, h uint64, now int64) *entry {
	old := r.cache.get(k, h)
	if old == nil || now >= old.staleUntil {
		return nil
	}
	e := &entry{key: k, ans: old.ans, err: old.err, typedErr: old.typedErr, staleUntil: old.staleUntil, size: old.size}
	e.ans.Stale = true
	e.expires = min(now+int64(staleAnswerTTL), old.staleUntil)
	switch t := old.typed.(type) {
	case *MXResult:
		c := *t
		c.Stale = true
		e.typed = &c
	case *IPResult:
		c := *t
		c.Stale = true
		e.typed = &c
	case *TXTResult:
		c := *t
		c.Stale = true
		e.typed = &c
	case *PTRResult:
		c := *t
		c.Stale = true
		e.typed = &c
	case *TLSAResult:
		c := *t
		c.Stale = true
		e.typed = &c
	case *CAAResult:
		c := *t
		c.Stale = true
		e.typed = &c
	}
	r.cache.put(e, h, now)
	return e
}
