package probe

import (
	"context"
	"net/netip"
	"sync"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe/smtpclient"
)

// Sessions kept open for the next real-time validation.
//
// A real-time validation whose session ended well does not say QUIT: the
// session waits, open, up to idleSession for the next real-time
// validation to the same MX address from an egress address it may use.
// That one ends the transaction before (RSET, RFC 5321 §4.1.1.5: the
// transaction ends, the session stays) and opens its own in the same
// write (RSET, MAIL and RCPT pipelined, RFC 2920; without PIPELINING the
// RSET goes alone): no connection, greeting, EHLO, STARTTLS and second
// EHLO (four to six round trips, and a TLS key exchange where the host
// offers STARTTLS), and the server sees one session where it would have
// seen several. The big providers' few MX hosts carry most of the
// traffic, so most real-time validations find one open.
//
// A session is kept only while servers take it well: one whose last
// transaction met a greylisting, a policy refusal, a 421 or a broken
// reply ends as before; so does one after sessionUses transactions or
// once the server refused sessionRefusals replies (Postfix delays every
// reply after smtpd_soft_error_limit, 10 by default, refusals and ends
// the session after 20; its smtpd_junk_command_limit, 100, counts RSET),
// or sessionAge after it began; nor is one whose slot Acquires wait for
// (egress.max_conns_per_host reached: they would wait for it to expire),
// and an Acquire that starts to wait for a slot to an MX address ends the
// sessions kept to it (egress.Pool.OnWait).
// Before each use the egress lease is
// checked as an Acquire would check it (not draining or disabled, the
// pair not cooling); a validation that must go out from a given address
// (a greylisting's retry) or not from one (an unexplained refusal's)
// takes only a session that satisfies it. A server may still have closed
// a kept session (its idle timeout, a restart): the validation that finds
// it closed before any reply runs in a new session, as if none had been
// kept (sessions reports it as stale, not as the server's answer).
//
// A validation that finds no session kept to its MX address, but one in
// use there by another real-time validation, waits for that one (up to
// handoffWait) rather than open its own: when its transaction ends well,
// the session goes straight to the validation waiting (FIFO), as a kept
// one would; when it ends otherwise, or is not done in time, the
// validation opens its own. At most one validation waits per session in
// use; one that must go out from a given egress address or not from one
// does not wait. Concurrent validations to one MX address (the big
// providers' hosts; a domain's addresses validated together) thus share
// sessions too, and the server sees fewer at once.
//
// Batch jobs do not keep sessions: a batch sends each domain's
// recipients in one session already.
const (
	idleSession     = 2 * time.Second
	sessionUses     = 10
	sessionRefusals = 5
	sessionAge      = 30 * time.Second
	// keptPerAddr bounds the sessions kept per MX address, keptMax the
	// engine's: each holds a socket and its egress slot.
	keptPerAddr = 4
	keptMax     = 512
	// handoffWait bounds a wait for a session in use: a transaction's
	// last replies, or a session's opening, in a world of slow replies.
	handoffWait = time.Second
)

var (
	sessionsKept   = vm.NewCounter(`verifyd_probe_sessions_kept_total`)
	sessionsReused = vm.NewCounter(`verifyd_probe_sessions_reused_total`)
	sessionsStale  = vm.NewCounter(`verifyd_probe_sessions_stale_total`)
	sessionsIdle   = vm.NewGauge(`verifyd_probe_sessions_idle`, nil)
	awaited        = struct{ taken, none, timeout *vm.Counter }{
		vm.NewCounter(`verifyd_probe_sessions_awaited_total{result="taken"}`),
		vm.NewCounter(`verifyd_probe_sessions_awaited_total{result="none"}`),
		vm.NewCounter(`verifyd_probe_sessions_awaited_total{result="timeout"}`),
	}
)

// keptSession is a session open between two validations.
type keptSession struct {
	c     *smtpclient.Client
	lease *egress.Lease
	prov  *Provider
	facts SessionFacts
	helo  string
	uses  int       // transactions run
	began time.Time // the connection's
	timer *time.Timer
}

// keeper holds the sessions kept open, by MX address.
type keeper struct {
	e *Engine
	// wait is how long a session is kept unused: idleSession (tests
	// change it).
	wait time.Duration
	// handoff bounds a wait for a session in use: handoffWait (tests
	// change it).
	handoff time.Duration
	mu      sync.Mutex
	idle    map[netip.Addr][]*keptSession
	n       int
	closed  bool
	// busy counts, by MX address, the real-time validations' sessions
	// in use (from the moment one is opened or taken to its end);
	// waiting holds the validations waiting for one of them, oldest
	// first, never more than busy.
	busy    map[netip.Addr]int
	waiting map[netip.Addr][]chan *keptSession
}

// keepable reports whether s, whose last transaction ended with out, may
// be kept for another use.
func keepable(s *keptSession, out txOutcome) bool {
	return out.sessionOK && out.egress == egress.OutcomeOK && !out.greylisted &&
		s.uses < sessionUses && s.c.Refusals() < sessionRefusals && time.Since(s.began) < sessionAge
}

// keep keeps s for idleSession, its transaction still open: the next
// user's RSET goes out with its MAIL and RCPT (smtpclient's
// ResetPipelined), so neither this validation nor the next waits a round
// trip for it. When it cannot be kept, the session ends (QUIT) off the
// validation's path, counted in e.quits.
func (k *keeper) keep(s *keptSession) {
	s.c.Detach()
	// Its outcome is OK (keepable), though its Release waits for the
	// session's end.
	s.lease.Succeeded()
	k.mu.Lock()
	k.done(s.lease.Dest())
	k.mu.Unlock()
	k.offer(s)
}

// offer hands s, a session ended well and not in use, to the validation
// waiting longest for one to its address, else keeps it idle; when
// neither may be (Acquires wait for its slot, its pair cools, no room,
// the keeper closed), it ends (QUIT) off the validation's path, counted
// in e.quits, and a validation waiting beyond the sessions left in use
// opens its own.
func (k *keeper) offer(s *keptSession) {
	ip := s.lease.Dest()
	k.mu.Lock()
	if !k.closed && !s.lease.Contended() {
		ws := k.waiting[ip]
		switch {
		case len(ws) > 0 && s.lease.Usable(): // checked as take checks it
			k.setWaiting(ip, ws[1:])
			ws[0] <- s // buffered: the waiter takes it even after giving up
			k.mu.Unlock()
			return
		case len(ws) == 0 && k.putLocked(s):
			k.mu.Unlock()
			return
		}
	}
	k.excess(ip)
	k.mu.Unlock()
	k.e.quits.Add(1)
	go func() {
		defer k.e.quits.Done()
		s.quit()
	}()
}

// putLocked adds s to the idle sessions unless there is no room; the
// expiry timer ends it after idleSession. k.mu is held.
func (k *keeper) putLocked(s *keptSession) bool {
	ip := s.lease.Dest()
	if k.closed || k.n >= keptMax || len(k.idle[ip]) >= keptPerAddr {
		return false
	}
	if k.idle == nil {
		k.idle = map[netip.Addr][]*keptSession{}
	}
	k.idle[ip] = append(k.idle[ip], s)
	k.n++
	sessionsKept.Inc()
	sessionsIdle.Set(float64(k.n))
	k.e.quits.Add(1) // done when it is taken or ended
	s.timer = time.AfterFunc(k.wait, func() {
		if k.remove(s) {
			s.quit()
			k.e.quits.Done()
		}
	})
	return true
}

// remove takes s out of the idle sessions; false when it was not there
// (taken, or ended).
func (k *keeper) remove(s *keptSession) bool {
	ip := s.lease.Dest()
	k.mu.Lock()
	defer k.mu.Unlock()
	list := k.idle[ip]
	for i, x := range list {
		if x == s {
			list = append(list[:i], list[i+1:]...)
			if len(list) == 0 {
				delete(k.idle, ip)
			} else {
				k.idle[ip] = list
			}
			k.n--
			sessionsIdle.Set(float64(k.n))
			return true
		}
	}
	return false
}

// take returns an idle session to ip that a validation may use: from
// prefer when it is valid, not from avoid when it is valid; nil when
// there is none. Sessions found unusable (their pair cooling, their
// address drained) are ended.
func (k *keeper) take(ip, prefer, avoid netip.Addr) *keptSession {
	var drop []*keptSession
	defer func() {
		for _, s := range drop {
			s.quit()
			k.e.quits.Done()
		}
	}()
	k.mu.Lock()
	defer k.mu.Unlock()
	list := k.idle[ip]
	for i := len(list) - 1; i >= 0; i-- { // the most recent first
		s := list[i]
		addr := s.lease.Addr()
		if (prefer.IsValid() && addr != prefer) || (avoid.IsValid() && addr == avoid) {
			continue
		}
		list = append(list[:i], list[i+1:]...)
		k.n--
		s.timer.Stop()
		if !s.lease.Usable() {
			drop = append(drop, s)
			continue
		}
		k.store(ip, list)
		k.e.quits.Done() // the validation's now
		sessionsReused.Inc()
		return s
	}
	k.store(ip, list)
	return nil
}

// begin counts a real-time validation's session to ip in use: opened,
// taken idle or handed over. Its end is keep's or end's.
func (k *keeper) begin(ip netip.Addr) {
	k.mu.Lock()
	if k.busy == nil {
		k.busy = map[netip.Addr]int{}
	}
	k.busy[ip]++
	k.mu.Unlock()
}

// end counts a session to ip in use ended without being kept (it
// failed to open, met trouble, or the server had closed it): the
// validation waiting longest beyond the sessions left in use opens its
// own.
func (k *keeper) end(ip netip.Addr) {
	k.mu.Lock()
	k.done(ip)
	k.excess(ip)
	k.mu.Unlock()
}

// done counts one session to ip in use fewer; k.mu is held.
func (k *keeper) done(ip netip.Addr) {
	if k.busy[ip]--; k.busy[ip] <= 0 {
		delete(k.busy, ip)
	}
}

// excess wakes, with no session, the validations waiting for one to ip
// beyond the sessions in use there, oldest first; k.mu is held.
func (k *keeper) excess(ip netip.Addr) {
	ws := k.waiting[ip]
	for len(ws) > k.busy[ip] {
		ws[0] <- nil
		ws = ws[1:]
	}
	k.setWaiting(ip, ws)
}

// setWaiting sets the validations waiting for a session to ip; k.mu is
// held.
func (k *keeper) setWaiting(ip netip.Addr, ws []chan *keptSession) {
	if len(ws) == 0 {
		delete(k.waiting, ip)
	} else {
		k.waiting[ip] = ws
	}
}

// await waits, up to k.handoff, for a session to ip that is in use to
// be handed over when its transaction ends well. It returns nil at once
// when there is no session in use there that another validation is not
// already waiting for, and nil when the one awaited ended otherwise,
// the wait bound passed or ctx ended: the validation then opens its own.
func (k *keeper) await(ctx context.Context, ip netip.Addr) *keptSession {
	k.mu.Lock()
	if k.closed || k.busy[ip] <= len(k.waiting[ip]) {
		k.mu.Unlock()
		return nil
	}
	ch := make(chan *keptSession, 1)
	if k.waiting == nil {
		k.waiting = map[netip.Addr][]chan *keptSession{}
	}
	k.waiting[ip] = append(k.waiting[ip], ch)
	k.mu.Unlock()
	defer phase.Since(phase.Handoff, time.Now())
	t := time.NewTimer(k.handoff)
	defer t.Stop()
	select {
	case s := <-ch:
		return k.handed(ctx, s)
	case <-t.C:
	case <-ctx.Done():
	}
	k.mu.Lock()
	ws := k.waiting[ip]
	for i, w := range ws {
		if w == ch { // still waiting: give up
			k.setWaiting(ip, append(ws[:i:i], ws[i+1:]...))
			k.mu.Unlock()
			awaited.timeout.Inc()
			return nil
		}
	}
	k.mu.Unlock()
	return k.handed(ctx, <-ch) // answered meanwhile
}

// handed takes s, handed over to a validation that waited (nil: none
// came); one whose ctx ended meanwhile offers it on.
func (k *keeper) handed(ctx context.Context, s *keptSession) *keptSession {
	if s == nil {
		awaited.none.Inc()
		return nil
	}
	if ctx.Err() != nil {
		k.offer(s)
		return nil
	}
	awaited.taken.Inc()
	sessionsReused.Inc()
	return s
}

// store sets ip's idle sessions; k.mu is held.
func (k *keeper) store(ip netip.Addr, list []*keptSession) {
	if len(list) == 0 {
		delete(k.idle, ip)
	} else {
		k.idle[ip] = list
	}
	sessionsIdle.Set(float64(k.n))
}

// quit says QUIT and releases the session's egress lease: a session
// that ended well.
func (s *keptSession) quit() {
	_ = s.c.Quit()
	s.lease.Release(egress.OutcomeOK)
	countSession(egress.OutcomeOK)
}

// stale closes a kept session the server had closed and releases its
// lease: nothing was asked in it, nothing cools.
func (s *keptSession) stale() {
	sessionsStale.Inc()
	_ = s.c.Close()
	s.lease.Release(egress.OutcomeOK)
	countSession(egress.OutcomeOK)
}

// wanted ends every idle session to ip: an Acquire waits for a slot to
// it (egress.Pool.OnWait), which an idle session would hold until it
// expires.
func (k *keeper) wanted(ip netip.Addr) {
	k.mu.Lock()
	list := k.idle[ip]
	delete(k.idle, ip)
	k.n -= len(list)
	sessionsIdle.Set(float64(k.n))
	k.mu.Unlock()
	k.endIdle(list)
}

// close ends every idle session and keeps no more.
func (k *keeper) close() {
	k.mu.Lock()
	k.closed = true
	var all []*keptSession
	for _, list := range k.idle {
		all = append(all, list...)
	}
	k.idle, k.n = nil, 0
	sessionsIdle.Set(0)
	for ip, ws := range k.waiting {
		for _, w := range ws {
			w <- nil
		}
		delete(k.waiting, ip)
	}
	k.mu.Unlock()
	k.endIdle(all)
}

// endIdle ends sessions taken out of the idle ones, each on a goroutine
// of its own counted in e.quits (as when it was put).
func (k *keeper) endIdle(list []*keptSession) {
	for _, s := range list {
		s.timer.Stop() // one that fires finds s gone: it does nothing
		go func() {
			defer k.e.quits.Done()
			s.quit()
		}()
	}
}
