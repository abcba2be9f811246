package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/probe/smtpclient"
	"github.com/verifyd/verifyd/resolver"
)

// target is one address being probed, with its result.
type target struct {
	addr address.Address
	r    *Result
	// done: the address has its SMTP answer (or none will come).
	done bool
	// grey: the address was greylisted and waits for a retry.
	grey bool
	// hostSet: Checks.MXHost names the host that answered it.
	hostSet bool
	// refusal is the reply of a refusal that may be about the prober
	// (ambiguousRefusal), for the positive control to read.
	refusal smtpclient.Reply
	// aboutUs: the target's refusal is about the prober, not the mailbox
	// (reading.go): a block of the egress address.
	aboutUs bool
	// unexplained: the positive control showed the refusal is not the
	// host's "no such mailbox" (control.go); again: it was reopened to be
	// asked once more from another egress address, its first answer
	// standing if none can ask; retried: it was.
	unexplained, again, retried bool
	// backup: an MX address before this one could not be used, so this
	// host may be a backup MX that relays for the domain only when told.
	backup bool
}

// probeOne runs the SMTP stage for one address, waiting out greylisting
// while ctx's deadline allows.
func (e *Engine) probeOne(ctx context.Context, r *Result, addr address.Address, rt route) {
	e.probeDomain(ctx, rt, addr.ASCIIDomain, []*target{{addr: addr, r: r}}, true, netip.Addr{})
}

// probeDomain runs the SMTP stage for addresses of one domain: the MX hosts
// in preference order, each host's addresses in turn, falling to the next
// when a connection cannot be made (RFC 5321 §5.1). With wait, greylisted
// recipients are retried once their egress cooldown ends, within ctx's
// deadline; without, they are left unknown with RetryAt set, for a batch job
// to come back to.
func (e *Engine) probeDomain(ctx context.Context, rt route, domain string, ts []*target, wait bool, prefer netip.Addr) {
	failure := SMTPConnRefused
	tried := 0
	// noAddress holds while every MX host's address lookup answered,
	// authoritatively, that it has none (NXDOMAIN, or NODATA for A and
	// AAAA both): then no mail can ever be delivered to the domain (RFC
	// 5321 §5.1), as with no MX at all. A failed or timed-out lookup
	// says nothing of the kind.
	noAddress := len(rt.hosts) > 0
hosts:
	for _, host := range rt.hosts {
		t := time.Now()
		ips, err := e.opts.Resolver.LookupIP(ctx, "ip", host)
		phase.Since(phase.HostIP, t)
		if err != nil {
			if !errors.Is(err, resolver.ErrNoData) && !errors.Is(err, resolver.ErrNXDomain) {
				noAddress = false
			}
			if dnsFailure(err) == DNSTimeout {
				failure = SMTPTimeout
			}
			continue
		}
		if len(ips.IPs) > 0 {
			noAddress = false
		}
		for _, ip := range ips.IPs {
			if tried == e.opts.MaxMXHosts {
				break hosts
			}
			tried++
			if tried > 1 {
				for _, t := range ts {
					t.backup = true
				}
			}
			next, out := e.sessions(ctx, host, ip, domain, ts, wait, prefer)
			// mx_host names the host whose answer made a verdict, not
			// the first MX when another one gave it.
			for _, t := range ts {
				if t.done && !t.hostSet {
					t.r.Checks.MXHost, t.hostSet = host, true
				}
			}
			if !next {
				return
			}
			if out == SMTPTimeout {
				failure = SMTPTimeout
			}
			if ctx.Err() != nil {
				failure = SMTPTimeout
				break
			}
		}
	}
	for _, t := range ts {
		if t.done {
			continue
		}
		if noAddress {
			t.r.Evidence.DNS = DNSNoMX
			t.r.Checks.MX, t.r.Checks.MXHost = false, ""
		} else {
			t.r.Evidence.SMTP = failure
		}
		t.done = true
	}
}

// sessions talks to one MX address until every target has an answer. It
// reports next when the address could not be used at all (refused,
// unreachable, no egress address of its family), so the caller tries the
// next one, with the failure seen.
func (e *Engine) sessions(ctx context.Context, host string, ip netip.Addr, domain string, ts []*target, wait bool, prefer netip.Addr) (next bool, failure SMTPOutcome) {
	hostport := net.JoinHostPort(ip.String(), strconv.Itoa(e.opts.SMTPPort))
	// The MX name says who runs the host, when it is a provider's; the
	// greeting may say it when the name does not.
	prov := providerIndex.byMX(host)
	if prov == nil && e.learnt != nil {
		// Another box of the fleet may have learnt it from the greeting.
		prov = e.learnt.get(host, e.opts.Now())
	}
	for _, t := range pendingTargets(ts) {
		t.r.Session.Provider = prov.name()
	}
	noTLS := false
	perTx := 0           // the server's recipients per transaction, once learnt
	var avoid netip.Addr // an unexplained refusal is asked again from any address but this
	for {
		pending := pendingTargets(ts)
		if len(pending) == 0 {
			return false, 0
		}
		// A real-time validation first takes a session kept open by
		// one before it, or one in use that will be soon (reuse.go).
		var s *keptSession
		kept := wait && e.keeper != nil
		if kept {
			if s = e.keeper.take(ip, prefer, avoid); s == nil && !prefer.IsValid() && !avoid.IsValid() {
				s = e.keeper.await(ctx, ip)
			}
			e.keeper.begin(ip)
			if s != nil {
				s.c.Attach(ctx)
				if err := s.c.ResetPipelined(); err != nil {
					// Without PIPELINING the RSET went alone, and found
					// the session closed (or too slow to be worth it):
					// nothing was asked, a new session asks.
					s.stale()
					e.keeper.end(ip)
					continue
				}
				avoid = netip.Addr{}
				if prov == nil {
					prov = s.prov
				}
			}
		}
		if s == nil {
			var o openOutcome
			var f SMTPOutcome
			if s, o, f = e.open(ctx, host, hostport, ip, pending, wait, &prefer, &avoid, &noTLS); o != opened {
				if kept {
					e.keeper.end(ip)
				}
				switch o {
				case openAgain:
					continue
				case openNext:
					return true, f
				}
				return false, 0
			}
			if prov == nil {
				prov = providerIndex.byBanner(s.c.Banner(), s.c.BannerHost(), s.c.EHLOHost())
				if prov != nil && e.learnt != nil {
					e.learnt.learn(host, prov, e.opts.Now())
				}
			}
			s.prov = prov
			s.facts = SessionFacts{MXIP: ip, BannerHost: s.c.BannerHost(), EHLOHost: s.c.EHLOHost(), Provider: prov.name()}
			var tlsOK bool
			s.facts.TLSVersion, s.facts.TLSCipher, tlsOK = s.c.TLSState()
			if tlsOK {
				tlsHandshakes[s.c.TLSResumed()].Inc()
			}
		}
		c, lease, reused := s.c, s.lease, s.uses > 0
		for _, t := range pending {
			t.r.Session = s.facts
			t.r.Egress = lease.Addr()
		}
		batch := pending
		if perTx > 0 && len(batch) > perTx {
			// The server's limit is known: send no RCPT it would refuse.
			batch = batch[:perTx]
		}
		out := e.transaction(c, prov, e.mailFrom(s.helo), host, domain, batch, reused)
		s.uses++
		if out.stale {
			// The server had closed the session kept open: nothing was
			// asked. A new session asks.
			s.stale()
			if kept {
				e.keeper.end(ip)
			}
			continue
		}
		if out.perTx > 0 {
			perTx = out.perTx
		}
		keep := kept && keepable(s, out)
		if kept && !keep {
			e.keeper.end(ip)
		}
		switch {
		case keep:
			// Every answer is in: the session is kept open for the
			// next real-time validation to this address, which ends
			// this transaction (RSET) in the write of its own MAIL.
			e.keeper.keep(s)
		case out.sessionOK && out.egress == egress.OutcomeOK:
			// Every answer is in: the probe need not wait a round trip
			// for the 221. The session says QUIT and waits for its reply
			// (RFC 5321 §4.1.1.10) on its own, holding its egress slot
			// until it ends.
			c.Detach()
			e.quits.Add(1)
			go func() {
				defer e.quits.Done()
				s.quit() // off the probe's path: not a phase of it
			}()
		default:
			// A session that met trouble ends before the probe answers,
			// so its outcome is recorded first.
			if out.sessionOK {
				t := time.Now()
				_ = c.Quit()
				phase.Since(phase.Quit, t)
			} else {
				_ = c.Close()
			}
			lease.Release(out.egress)
			countSession(out.egress)
		}

		if wait && out.egress == egress.OutcomePolicy && !out.greylisted && unsettleBlocked(pending) {
			// Refused by policy (5.7.x at MAIL or RCPT): a block of this
			// egress address, not an answer about the mailbox. The
			// address now cools for this server; a real-time validation
			// asks again at once from another healthy one, if any.
			policyRetries.Inc()
			prefer = netip.Addr{}
			continue
		}
		if out.greylisted {
			prefer = lease.Addr()
			until := e.opts.Egress.CooldownUntil(prefer, ip)
			if !wait || !sleepUntil(ctx, e.opts.Now, until) {
				for _, t := range pending {
					if t.grey && !t.done {
						settle([]*target{t}, SMTPGreylisted, until, prefer)
					}
				}
			}
		}
		if !out.greylisted && reopenUnexplained(pending) {
			policyRetries.Inc()
			avoid, prefer = lease.Addr(), netip.Addr{}
			continue
		}
		for _, t := range pending {
			t.again = false // answered from the other address
		}
		if !out.progress && !out.greylisted {
			// Nothing was learnt and nothing will be by asking again.
			settle(pendingTargets(ts), SMTPBusy, time.Time{}, prefer)
			return false, 0
		}
	}
}

// openOutcome is what open did: opened a session, or says what sessions
// does next.
type openOutcome int

const (
	opened    openOutcome = iota
	openAgain             // try again (another address, without TLS, after a wait)
	openDone              // the targets are settled
	openNext              // the MX address cannot be used: the next one, with the failure seen
)

// open acquires an egress address for ip and connects: a new session for
// sessions, which passes its state (prefer, avoid, noTLS) for open to
// change as the loop's body did.
func (e *Engine) open(ctx context.Context, host, hostport string, ip netip.Addr, pending []*target, wait bool,
	prefer, avoid *netip.Addr, noTLS *bool) (*keptSession, openOutcome, SMTPOutcome) {
	var lease *egress.Lease
	var err error
	waited := time.Now()
	if avoid.IsValid() {
		lease, err = e.opts.Egress.AcquireExcept(ctx, ip, *avoid)
		*avoid = netip.Addr{}
		if err != nil {
			// No other address may ask now: the first answers stand.
			keepFirst(pending)
			return nil, openAgain, 0
		}
	} else if prefer.IsValid() {
		// A retry goes out from the address the recipients were
		// greylisted from, or not at all until it may.
		lease, err = e.opts.Egress.AcquireFrom(ctx, ip, *prefer)
		if errors.Is(err, egress.ErrNoAddress) {
			*prefer = netip.Addr{} // gone from the pool: any will do
			return nil, openAgain, 0
		}
	} else {
		lease, err = e.opts.Egress.Acquire(ctx, ip, netip.Addr{})
	}
	phase.Since(phase.Egress, waited)
	if err != nil {
		var ce *egress.CoolingError
		switch {
		case errors.As(err, &ce):
			// A greylisting or a busy server is waited out within
			// the budget; a policy block is not: the server refused
			// every address that asked, and would refuse again.
			if wait && ce.Cause != egress.OutcomePolicy && sleepUntil(ctx, e.opts.Now, ce.RetryAt) {
				return nil, openAgain, 0
			}
			// A batch comes back at RetryAt. A real-time validation
			// answers at once, never waiting out a cooldown its budget
			// cannot outlast, with what the cooldown says.
			o := SMTPGreylisted
			if wait {
				o = cooledOutcome(ce.Cause)
			}
			settle(pending, o, ce.RetryAt, *prefer)
			return nil, openDone, 0
		case errors.Is(err, egress.ErrNoAddress), errors.Is(err, egress.ErrInvalidDest):
			return nil, openNext, SMTPConnRefused
		default: // the context ended, or the pool closed
			settle(pending, SMTPTimeout, time.Time{}, *prefer)
			return nil, openDone, 0
		}
	}
	var tlsCfg = e.tlsConfig(host)
	if *noTLS {
		tlsCfg = nil
	}
	helo := lease.HeloName()
	if helo == "" {
		helo = e.opts.HeloName
	}
	c, err := smtpclient.Dial(ctx, lease, hostport, smtpclient.Options{
		HeloName:        helo,
		CommandTimeout:  e.opts.CommandTimeout,
		GreetingTimeout: e.opts.GreetingTimeout,
		SessionTimeout:  e.opts.SessionTimeout,
		TLSConfig:       tlsCfg,
		Logger:          e.transcriptLogger(),
	})
	if err != nil {
		f := dialFailure(err)
		lease.Release(f.egress)
		countSession(f.egress)
		// A second question that cannot be asked leaves the first
		// answer standing.
		keepFirst(pending)
		pending = pendingTargets(pending)
		switch {
		case f.retryPlain && !*noTLS:
			*noTLS = true
			return nil, openAgain, 0
		case f.nextIP:
			return nil, openNext, f.smtp
		case wait && f.egress == egress.OutcomePolicy:
			// Refused by policy at the banner or EHLO: the server
			// blocks this egress address, which now cools for it.
			// Another address may be welcome; Acquire picks one, or
			// says every one is cooling.
			*prefer = netip.Addr{}
			return nil, openAgain, 0
		}
		settle(pending, f.smtp, time.Time{}, lease.Addr())
		return nil, openDone, 0
	}
	return &keptSession{c: c, lease: lease, helo: helo, began: time.Now()}, opened, 0
}

// txOutcome is what one session's transaction achieved.
type txOutcome struct {
	egress     egress.Outcome
	sessionOK  bool // the session is in a state to QUIT politely
	greylisted bool // some targets were greylisted
	progress   bool // some targets got their answer
	// perTx is the server's recipients per transaction, learnt from a
	// 452 4.5.3 after that many (0: none seen).
	perTx int
	// stale: the session, kept open by an earlier validation, had been
	// closed by the server; nothing was asked.
	stale bool
}

// answered reports whether a reply of results says something of its
// recipient: any but a 421.
func answered(results []smtpclient.RcptResult) bool {
	for _, r := range results {
		if r.Reply.Code != smtpclient.CodeServiceUnavailable {
			return true
		}
	}
	return false
}

// staleSession reports whether err, the failure of a kept session's
// first command, says the server had closed the session meanwhile: the
// connection closed or reset, or a 421 (RFC 5321 §3.8: the server closes
// the channel; idle timeouts and shutdowns say it). A timeout is not:
// the server may be slow, and the time is spent.
func staleSession(err error) bool {
	var se *smtpclient.Error
	if errors.As(err, &se) {
		return se.Code == smtpclient.CodeServiceUnavailable
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, smtpclient.ErrClosed)
}

// transaction runs MAIL, the RCPTs of the pending targets and, when one was
// accepted and the domain's catch-all finding is not cached, one RCPT with a
// random local part, after the real ones so it cannot spoil them. prov, the
// host's provider when known, reads the replies it words its own way and
// says what an acceptance proves.
//
// reused says the session was kept open by an earlier validation: a
// failure before any reply that says the server closed it (staleSession)
// comes back as stale, every target untouched.
func (e *Engine) transaction(c *smtpclient.Client, prov *Provider, mailFrom, host, domain string, pending []*target, reused bool) txOutcome {
	utf8 := false
	for _, t := range pending {
		if t.addr.UTF8Local {
			if !c.Extensions().SMTPUTF8 {
				// The MX cannot take this address from anyone: a
				// compliant sender must not send it (RFC 6531 §3.2) and
				// bounces the message. Say so without asking.
				t.r.Evidence.SMTP = SMTPNoUTF8
				t.done = true
				continue
			}
			utf8 = true
		}
	}
	pending = pendingTargets(pending)
	if len(pending) == 0 {
		return txOutcome{egress: egress.OutcomeOK, sessionOK: true, progress: true}
	}
	// With PIPELINING, MAIL goes out with the RCPTs: one round trip less.
	if err := c.MailPipelined(mailFrom, utf8); err != nil {
		if reused && staleSession(err) {
			return txOutcome{stale: true}
		}
		return failedCommand(err, pending)
	}
	rcpts := make([]string, len(pending))
	for i, t := range pending {
		rcpts[i] = t.addr.Rcpt()
	}
	t := time.Now()
	results, rest, err := c.RcptMany(rcpts)
	rcptsSent.address.Add(len(results))
	phase.Since(phase.Rcpt, t)
	if reused && err != nil && staleSession(err) && !answered(results) {
		// The server had closed the kept session, or closes it now,
		// before answering anything (a 421 to the MAIL or the first
		// RCPT: an idle timeout, a cap of its own on a session's
		// recipients).
		return txOutcome{stale: true}
	}
	var mailErr *smtpclient.Error
	if errors.As(err, &mailErr) && mailErr.Command == smtpclient.CmdMail {
		return failedCommand(err, pending) // the pipelined MAIL was refused
	}
	out := txOutcome{egress: egress.OutcomeOK, sessionOK: err == nil}
	if len(rest) > 0 && len(rest) < len(pending) {
		// Cut at the server's recipient limit: that many go in each
		// transaction from now on.
		out.perTx = len(pending) - len(rest)
	}
	accepted := false
	perMailbox := false // the server answers per mailbox: role probes mean something
	var ambiguous []*target
	now := e.opts.Now()
	for i, res := range results {
		t := pending[i]
		rd := readRcpt(prov, res.Reply, res.Class)
		if rd.Class == smtpclient.BadDomain && rd.by == byWording && t.backup {
			// "Relay access denied" from a host met after a preferred
			// MX failed: a backup MX that does not relay for the
			// domain now says nothing of the address.
			rd.Classification = smtpclient.Classification{Class: smtpclient.Unknown}
		}
		countReply(rd.Class)
		countReading(rd)
		switch rd.Class {
		case smtpclient.Greylisted, smtpclient.TempFail:
			t.grey = true
			out.greylisted = true
			out.egress = egress.OutcomeGreylisted
			continue
		case smtpclient.TooManyRecipients:
			// In rest too when the code said so; said in words (a 552
			// "too many recipients"), it is left pending here. Either
			// way the next transaction takes it, with no more than
			// the server took in this one.
			if out.perTx == 0 && i > 0 {
				out.perTx = i
			}
			continue
		case smtpclient.ServiceUnavailable:
			// 421 in the middle of the RCPTs: the server is closing the
			// session; this one and the rest go to the next.
			out.egress = egress.OutcomeRateLimited
			continue
		case smtpclient.Accepted:
			accepted = true
			perMailbox = true
			e.knownGood.put(host, domain, t.addr.Rcpt(), now)
		case smtpclient.NoMailbox:
			perMailbox = true
			// A domain that refuses one mailbox is not catch-all.
			if !rd.Weak || rd.by == byWording {
				e.catchAll.put(domain, CatchAllNo, now)
			}
		}
		if rd.ambiguous {
			t.refusal = res.Reply
			ambiguous = append(ambiguous, t)
		}
		t.aboutUs, t.unexplained = rd.aboutUs, false
		t.r.Evidence.SMTP = rcptOutcome(rd.Classification)
		t.done = true
		t.grey = false
		out.progress = true
	}
	if err != nil {
		f := dialFailure(err)
		if f.egress != egress.OutcomeOK && out.egress == egress.OutcomeOK {
			out.egress = f.egress
		}
		// The session ended in the middle of the RCPTs (421, a dropped
		// connection). When it answered some, the others go to a new
		// session; when it answered none, asking again would teach
		// nothing: they get the failure.
		if !out.progress {
			for _, t := range pending {
				if !t.done && !t.grey {
					t.r.Evidence.SMTP = f.smtp
					t.aboutUs = f.egress == egress.OutcomePolicy
					t.done = true
					out.progress = true
				}
			}
		}
	} else if len(rest) > 0 && len(rest) == len(pending) {
		// The server takes no recipient at all in this transaction.
		for _, t := range pending {
			t.r.Evidence.SMTP = SMTPBusy
			t.done = true
		}
		out.progress = true
	}
	// After a greylisting the probe goes out too, though nothing was
	// accepted: its (client, recipient) pair starts waiting alongside the
	// real one, so the retry learns the catch-all finding as well. It goes
	// out to a provider believed to accept every recipient too: what this
	// server says outranks the belief.
	t = time.Now()
	defer phase.Since(phase.Extra, t)
	if (accepted || out.greylisted) && out.sessionOK {
		e.probeCatchAll(c, prov, mailFrom, host, domain)
	}
	if perMailbox && out.sessionOK && len(rest) == 0 && (prov == nil || prov.Recipients != AcceptsAll) {
		e.probeRoleMailboxes(c, domain)
	}
	welcome := accepted // the server accepted a recipient from us: no block of ours
	if len(ambiguous) > 0 && out.sessionOK {
		welcome = e.readRefusals(c, mailFrom, host, domain, ambiguous) || welcome
	}
	policy := false // a refusal about the prober: a block of the egress address
	for _, t := range pending {
		if t.done && t.aboutUs && !welcome {
			policy = true
		}
	}
	if policy && out.egress == egress.OutcomeOK && (prov == nil || !prov.RecipientPolicy) {
		out.egress = egress.OutcomePolicy
	}
	ca := e.catchAll.get(domain, e.opts.Now())
	if prov != nil && prov.Recipients != PerMailbox && ca == CatchAllUnknown {
		// A host believed to accept any recipient (AcceptsAll), or a
		// gateway, that has not shown it checks recipients by refusing
		// the random probe: an acceptance proves no mailbox.
		ca = CatchAllYes
	}
	for _, t := range pending {
		t.r.Evidence.CatchAll = ca
	}
	return out
}

// probeCatchAll sends one RCPT with a random local part unless the domain's
// finding is cached, and caches what it learns. A random local part
// refused in a way its codes and words leave ambiguous (a bare 554, a
// generic 5.7.1, a 5.2.4) is read as no such mailbox only when the
// session then accepts postmaster@domain or the host's known-good
// recipient (control.go).
func (e *Engine) probeCatchAll(c *smtpclient.Client, prov *Provider, mailFrom, host, domain string) {
	now := e.opts.Now()
	if e.catchAll.get(domain, now) != CatchAllUnknown {
		return
	}
	reply, err := c.Rcpt(e.catchAll.probeLocal(domain) + "@" + domain)
	rcptsSent.catchAll.Inc()
	var se *smtpclient.Error
	if err != nil && !errors.As(err, &se) {
		return // the session broke: no finding
	}
	// A refusal comes back as an *Error with its reply: that is the
	// finding.
	rd := readRcpt(prov, reply, smtpclient.ClassifyRcpt(reply, 1))
	switch {
	case rd.Class == smtpclient.Accepted:
		e.catchAll.put(domain, CatchAllYes, now)
	case rd.Class == smtpclient.NoMailbox:
		// A bare 550 (Weak) to a random name still says no such mailbox:
		// the session took the real recipient just before.
		e.catchAll.put(domain, CatchAllNo, now)
	case rd.ambiguous:
		addrs := []string{postmaster(domain)}
		if good := e.knownGood.get(host, domain, now); good != "" {
			addrs = append(addrs, good)
		}
		rs, ok := e.askControl(c, mailFrom, addrs)
		welcome := false
		for _, r := range rs {
			welcome = welcome || ok && r.Class.Class == smtpclient.Accepted
		}
		if welcome {
			controls.mailbox.Inc()
			e.catchAll.put(domain, CatchAllNo, now)
		} else {
			controls.none.Inc()
		}
	}
}

// rcptOutcome maps the classifier's verdict on a RCPT reply.
func rcptOutcome(cls smtpclient.Classification) SMTPOutcome {
	switch cls.Class {
	case smtpclient.Accepted:
		return SMTPAccepted
	case smtpclient.NoMailbox:
		if cls.Weak {
			return SMTPNoMailboxWeak
		}
		return SMTPNoMailbox
	case smtpclient.Disabled:
		return SMTPDisabled
	case smtpclient.Full:
		return SMTPFull
	case smtpclient.BadDomain:
		return SMTPBadDomain
	case smtpclient.Syntax:
		return SMTPSyntax
	case smtpclient.Policy:
		return SMTPPolicy
	case smtpclient.Greylisted, smtpclient.TempFail:
		return SMTPGreylisted
	case smtpclient.ServiceUnavailable, smtpclient.TooManyRecipients:
		return SMTPBusy
	}
	return SMTPRejected
}

// failedCommand is the outcome of a MAIL that did not go through: every
// pending target shares it.
func failedCommand(err error, pending []*target) txOutcome {
	f := dialFailure(err)
	out := txOutcome{egress: f.egress, progress: true}
	if f.smtp == SMTPGreylisted {
		for _, t := range pending {
			t.grey = true
		}
		return txOutcome{egress: egress.OutcomeRateLimited, sessionOK: true, greylisted: true}
	}
	var se *smtpclient.Error
	out.sessionOK = errors.As(err, &se) && se.Code != smtpclient.CodeServiceUnavailable
	settle(pending, f.smtp, time.Time{}, netip.Addr{})
	for _, t := range pending {
		// A refusal at MAIL is about the sender or the client.
		t.aboutUs = f.egress == egress.OutcomePolicy
	}
	return out
}

// failure is what a failed session step means.
type failure struct {
	smtp       SMTPOutcome
	egress     egress.Outcome
	nextIP     bool // try the MX's next address
	retryPlain bool // the TLS handshake failed: try again without TLS
}

// dialFailure classifies the error of Dial, MAIL or RCPT.
func dialFailure(err error) failure {
	var se *smtpclient.Error
	if errors.As(err, &se) {
		cls := se.Class()
		switch {
		case se.Code == smtpclient.CodeServiceUnavailable:
			return failure{smtp: SMTPBusy, egress: egress.OutcomeRateLimited}
		case cls.Class == smtpclient.Policy:
			return failure{smtp: SMTPPolicy, egress: egress.OutcomePolicy}
		case se.Temporary():
			return failure{smtp: SMTPGreylisted, egress: egress.OutcomeRateLimited}
		}
		return failure{smtp: SMTPRejected, egress: egress.OutcomeProtocol}
	}
	var oe *smtpclient.OpError
	connect := errors.As(err, &oe) && oe.Command == smtpclient.CmdConnect
	switch {
	case errors.Is(err, smtpclient.ErrTLSHandshake), connectTLS(err):
		// Opportunistic TLS (RFC 7435 §3): a broken STARTTLS is retried
		// in the clear, as senders do.
		return failure{smtp: SMTPProtocol, egress: egress.OutcomeProtocol, retryPlain: true}
	case isTimeout(err):
		// A connect that times out may be one dead address of several; a
		// server that accepted and then went quiet (a tarpit) is the
		// verdict.
		return failure{smtp: SMTPTimeout, egress: egress.OutcomeTimeout, nextIP: connect}
	case connect:
		return failure{smtp: SMTPConnRefused, egress: egress.OutcomeConnectFailed, nextIP: true}
	case errors.Is(err, context.Canceled):
		return failure{smtp: SMTPTimeout, egress: egress.OutcomeCanceled}
	}
	return failure{smtp: SMTPProtocol, egress: egress.OutcomeProtocol}
}

// connectTLS reports whether err broke the session during STARTTLS (data
// where the handshake should be, a reset).
func connectTLS(err error) bool {
	var oe *smtpclient.OpError
	return errors.As(err, &oe) && oe.Command == smtpclient.CmdStartTLS && !errors.Is(err, smtpclient.ErrTLSRequired)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ETIMEDOUT) || (errors.As(err, &ne) && ne.Timeout())
}

// settle gives every target in ts the outcome.
func settle(ts []*target, o SMTPOutcome, retryAt time.Time, egressAddr netip.Addr) {
	for _, t := range ts {
		if t.done {
			continue
		}
		t.r.Evidence.SMTP = o
		t.r.RetryAt = retryAt
		if egressAddr.IsValid() {
			t.r.Egress = egressAddr
		}
		t.done = true
	}
}

// mailFrom is the reverse-path of a session that says helo in EHLO.
func (e *Engine) mailFrom(helo string) string {
	if e.opts.MailFrom != "" {
		return e.opts.MailFrom
	}
	return "verify@" + helo
}

// keepFirst settles the targets of ts reopened to be asked again from
// another address with their first answer.
func keepFirst(ts []*target) {
	for _, t := range ts {
		if t.again {
			t.again, t.done = false, true
		}
	}
}

// reopenUnexplained reopens the targets of ts whose refusal the control
// could not explain and that were not asked again yet, to be asked once
// more from another egress address; it reports whether there was one.
func reopenUnexplained(ts []*target) bool {
	any := false
	for _, t := range ts {
		if t.done && t.unexplained && !t.retried {
			t.done, t.again, t.retried = false, true, true
			any = true
		}
	}
	return any
}

// unsettleBlocked reopens the targets of ts whose refusal was about the
// prober, for another session to answer; it reports whether there was one.
func unsettleBlocked(ts []*target) bool {
	any := false
	for _, t := range ts {
		if t.done && t.aboutUs {
			t.done, t.aboutUs = false, false
			any = true
		}
	}
	return any
}

// cooledOutcome is the answer of a real-time validation that finds every
// egress address cooling for the server beyond its budget: the cause of
// the cooldown. A greylisting is waited out no longer (unknown, timeout);
// a busy or limiting server is a connection problem (unknown,
// connection_error); a policy block of the prober is a refusal that says
// nothing of the mailbox (unknown, smtp_rejected).
func cooledOutcome(cause egress.Outcome) SMTPOutcome {
	switch cause {
	case egress.OutcomeRateLimited:
		return SMTPBusy
	case egress.OutcomePolicy:
		return SMTPPolicy
	}
	return SMTPGreylisted
}

func pendingTargets(ts []*target) []*target {
	var p []*target
	for _, t := range ts {
		if !t.done {
			p = append(p, t)
		}
	}
	return p
}

// sleepUntil waits until at by the engine's clock, and reports whether it
// did so before ctx's deadline (false without waiting when at is past the
// deadline).
func sleepUntil(ctx context.Context, now func() time.Time, at time.Time) bool {
	d := at.Sub(now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Now().Add(d).After(dl) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
