package probe

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/verifyd/verifyd/probe/address"
)

// VerifyDomain validates many addresses of one domain in as few SMTP
// sessions as the MX allows: one DNS resolution, one session with MAIL and
// every RCPT (pipelined when the server offers PIPELINING, RFC 2920), one
// catch-all probe per domain and TTL, and another session for what a
// 452 4.5.3 recipient limit left over. Greylisted addresses are not waited
// for: their results are unknown with RetryAt set, and a later call with
// prefer set to their Egress retries them from the same source address, as
// greylisters want.
//
// emails must share one domain (compared after IDNA conversion); an address
// of another domain, or one failing syntax, gets its own result as Verify
// would give without SMTP, so a caller may pass a whole group blindly.
// Results are in the order of emails.
func (e *Engine) VerifyDomain(ctx context.Context, emails []string, prefer netip.Addr) []*Result {
	ins := make([]address.Input, len(emails))
	for i, email := range emails {
		ins[i] = address.NewInput(email)
	}
	return e.VerifyInputs(ctx, ins, prefer)
}

// VerifyInputs is VerifyDomain of addresses already parsed (at the edge,
// address.NewInput): they are not parsed again.
func (e *Engine) VerifyInputs(ctx context.Context, ins []address.Input, prefer netip.Addr) []*Result {
	start := e.opts.Now()
	results := make([]*Result, len(ins))
	var targets []*target
	var noMail []*Result // addresses of a domain that takes no mail
	var domain string
	var rt route
	routed := false
	for i, in := range ins {
		r := &Result{Email: in.Email, ProbedAt: start}
		results[i] = r
		if in.Err != nil {
			r.DidYouMean = e.suggestLocal(ctx, in)
			continue
		}
		addr := in.Addr
		if domain == "" {
			domain = addr.ASCIIDomain
		}
		if !strings.EqualFold(addr.ASCIIDomain, domain) {
			p := e.plan(ctx, r, addr)
			auth := e.startAuth(p, addr.ASCIIDomain, false)
			if p.probe {
				e.probeBatchDomain(ctx, p.route, addr.ASCIIDomain, []*target{{addr: addr, r: r}}, prefer)
			}
			e.joinAuth(ctx, auth, addr.ASCIIDomain, r)
			continue
		}
		// The first address of the domain resolves it; the others reuse
		// the route (plan's lookups are cached anyway).
		p := e.plan(ctx, r, addr)
		if !routed {
			rt, routed = p.route, true
		}
		switch {
		case p.probe:
			targets = append(targets, &target{addr: addr, r: r})
		case p.wantsAuth():
			noMail = append(noMail, r)
		}
	}
	if len(noMail) > 0 {
		// A domain that takes no mail: its DNS-based signals only.
		e.joinAuth(ctx, e.startAuth(plan{route: rt}, domain, false), domain, noMail...)
	}
	if len(targets) > 0 {
		auth := e.startAuth(plan{route: rt, probe: true}, domain, false)
		e.probeBatchDomain(ctx, rt, domain, targets, prefer)
		rs := make([]*Result, len(targets))
		for i, t := range targets {
			rs[i] = t.r
		}
		e.joinAuth(ctx, auth, domain, rs...)
	}
	for _, r := range results {
		e.finish(r, start)
	}
	return results
}

// probeBatchDomain is probeDomain for batch work, once the real-time
// validations in flight leave room for it (share). A batch whose context
// ends while it waits leaves its addresses unknown, to be retried.
func (e *Engine) probeBatchDomain(ctx context.Context, rt route, domain string, ts []*target, prefer netip.Addr) {
	if !e.share.batchStart(ctx) {
		settle(ts, SMTPTimeout, time.Time{}, netip.Addr{})
		return
	}
	defer e.share.batchEnd()
	e.probeDomain(ctx, rt, domain, ts, false, prefer)
}
