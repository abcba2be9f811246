package probe

import (
	"context"
	"strings"
	"time"

	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/probe/smtpclient"
)

// The auth signals (spec §2.6) of a probe, with Options.Auth:
//
//  1. When the MX stage has routed the domain and an SMTP probe will be
//     made, or found that the domain takes no mail (null MX), startAuth starts the collector's DNS lookups for the domain and
//     its first MX host (or joins them, or finds them cached); they run
//     while the SMTP stage runs. A real-time probe's collection goes ahead
//     of batch ones when the collector's concurrency bound makes them
//     wait (Collector.StartUrgent).
//  2. In the SMTP transaction, after the real RCPTs and the catch-all
//     probe, probeRoleMailboxes sends RCPT TO:<postmaster@D> and
//     RCPT TO:<abuse@D> (pipelined when the server offers PIPELINING),
//     unless the collector already knows both, and records what the
//     replies say.
//  3. After the SMTP stage, joinAuth waits for the lookups with what is
//     left of the probe's budget (ctx), takes the keys learnt so far,
//     merges the session's (TLS, EHLO name against the PTR name, the role
//     mailboxes), and counts the positive signals into Evidence.Auth.

// startAuth begins the auth signals of domain when they are wanted: an
// Options.Auth, and an SMTP probe about to be made, or a domain that
// exists but takes no mail (a null MX, RFC 7505, or neither MX nor
// address records): its SPF "-all" and DMARC "p=reject" are exactly how it
// says it sends no mail either, so its DNS-based signals are collected;
// the SMTP-based ones stay absent. urgent is for a real-time probe.
func (e *Engine) startAuth(p plan, domain string, urgent bool) *authsig.Pending {
	if e.opts.Auth == nil || !p.wantsAuth() {
		return nil
	}
	if urgent {
		return e.opts.Auth.StartUrgent(domain, p.route.hosts)
	}
	return e.opts.Auth.Start(domain, p.route.hosts)
}

// joinAuth gives every result of rs (addresses of domain) the signals of
// pending, as learnt by the time ctx ends, with its session's keys.
func (e *Engine) joinAuth(ctx context.Context, pending *authsig.Pending, domain string, rs ...*Result) {
	if pending == nil {
		return
	}
	t := time.Now()
	base := pending.Wait(ctx)
	phase.Since(phase.AuthWait, t)
	boxes := e.opts.Auth.Mailboxes(domain)
	for _, r := range rs {
		s := base.Clone()
		s.MergeSession(authsig.SessionFacts{
			MXIP:       r.Session.MXIP,
			EHLOHost:   r.Session.EHLOHost,
			BannerHost: r.Session.BannerHost,
			TLSVersion: r.Session.TLSVersion,
			TLSCipher:  r.Session.TLSCipher,
		})
		s.MergeMailboxes(boxes)
		r.Auth = s
		r.Evidence.Auth = s.Positive()
	}
}

// probeRoleMailboxes asks the MX, in the current transaction, whether it
// accepts postmaster@domain (RFC 5321 §4.5.1) and abuse@domain (RFC 2142
// §2, §4), unless the collector knows already, and records the answers: an
// acceptance is true; a refusal that names the mailbox (x.1.x, x.2.1,
// x.2.2, or a bare 550) is false; anything else (greylisting, policy, a
// recipient limit) leaves the key unknown.
func (e *Engine) probeRoleMailboxes(c *smtpclient.Client, domain string) {
	if e.opts.Auth == nil {
		return
	}
	known := e.opts.Auth.Mailboxes(domain)
	var addrs []string
	if known.Postmaster == nil {
		addrs = append(addrs, "postmaster@"+domain)
	}
	if known.Abuse == nil {
		addrs = append(addrs, "abuse@"+domain)
	}
	if len(addrs) == 0 {
		return
	}
	results, _, _ := c.RcptMany(addrs)
	rcptsSent.role.Add(len(results))
	var m authsig.Mailboxes
	for _, res := range results {
		var v bool
		switch res.Class.Class {
		case smtpclient.Accepted:
			v = true
		case smtpclient.NoMailbox, smtpclient.Disabled, smtpclient.Full:
			v = false
		default:
			continue
		}
		if strings.HasPrefix(res.Addr, "postmaster@") {
			m.Postmaster = &v
		} else {
			m.Abuse = &v
		}
	}
	e.opts.Auth.RecordMailboxes(domain, m)
}
