package probe

import (
	"cmp"
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/probe/smtpclient"
)

// Metrics of the engine (names verifyd_probe_<what>_<unit>):
//
//	verifyd_probe_results_total{status,reason}   verdicts given
//	verifyd_probe_duration_seconds               time per address
//	verifyd_probe_smtp_replies_total{class}      RCPT replies by class
//	verifyd_probe_sessions_total{outcome}        SMTP sessions by how they ended
//	verifyd_probe_policy_retries_total           real-time validations asked again from another
//	                                             egress address after a refusal about the prober
//	verifyd_probe_provider_results_total{provider,status}
//	                                             verdicts by the MX's provider (probe/provider.go;
//	                                             "other": no fingerprint matched; "none": no SMTP session)
//	verifyd_probe_rcpts_total{kind}              RCPT commands answered: "address" (the addresses asked),
//	                                             "catch_all" (the random probe), "role" (postmaster@ and
//	                                             abuse@ for the auth signals), "control" (the positive control)
//	verifyd_probe_controls_total{reading}        refusals read with the positive control
//	                                             (postmaster@, a known-good recipient and a random
//	                                             local part): "mailbox" (no such mailbox), "prober"
//	                                             (the known-good recipient refused alike: the
//	                                             server refuses us), "unexplained" (not the host's
//	                                             no-such-mailbox reply: asked again from another
//	                                             egress address), "none" (it told nothing)
//	verifyd_probe_refusals_total{by,about}       permanent refusals of RCPT by the step that read
//	                                             them (reading.go): by "provider", "code", "wording",
//	                                             or "ambiguous" (left to the control); about "us"
//	                                             (the prober) or "mailbox"
var (
	// typoSuggestions counts the did-you-mean candidates of domains that
	// receive no mail: made (the candidate routes mail), noMail (it does
	// not either: no suggestion).
	typoSuggestions = struct{ made, noMail *metrics.Counter }{
		metrics.NewCounter(`verifyd_probe_typo_suggestions_total{outcome="suggested"}`),
		metrics.NewCounter(`verifyd_probe_typo_suggestions_total{outcome="candidate_takes_no_mail"}`),
	}
	rcptsSent = struct{ address, catchAll, role, control *metrics.Counter }{
		metrics.NewCounter(`verifyd_probe_rcpts_total{kind="address"}`),
		metrics.NewCounter(`verifyd_probe_rcpts_total{kind="catch_all"}`),
		metrics.NewCounter(`verifyd_probe_rcpts_total{kind="role"}`),
		metrics.NewCounter(`verifyd_probe_rcpts_total{kind="control"}`),
	}
	controls = struct{ mailbox, prober, unexplained, none *metrics.Counter }{
		metrics.NewCounter(`verifyd_probe_controls_total{reading="mailbox"}`),
		metrics.NewCounter(`verifyd_probe_controls_total{reading="prober"}`),
		metrics.NewCounter(`verifyd_probe_controls_total{reading="unexplained"}`),
		metrics.NewCounter(`verifyd_probe_controls_total{reading="none"}`),
	}
	policyRetries = metrics.NewCounter("verifyd_probe_policy_retries_total")
	// refusals is indexed by readBy (byControl: ambiguous), then aboutUs.
	refusals = [4][2]*metrics.Counter{
		byCode:     {metrics.NewCounter(`verifyd_probe_refusals_total{by="code",about="mailbox"}`), metrics.NewCounter(`verifyd_probe_refusals_total{by="code",about="us"}`)},
		byProvider: {metrics.NewCounter(`verifyd_probe_refusals_total{by="provider",about="mailbox"}`), metrics.NewCounter(`verifyd_probe_refusals_total{by="provider",about="us"}`)},
		byWording:  {metrics.NewCounter(`verifyd_probe_refusals_total{by="wording",about="mailbox"}`), metrics.NewCounter(`verifyd_probe_refusals_total{by="wording",about="us"}`)},
		byControl:  {metrics.NewCounter(`verifyd_probe_refusals_total{by="ambiguous",about="mailbox"}`), metrics.NewCounter(`verifyd_probe_refusals_total{by="ambiguous",about="us"}`)},
	}
	// tlsHandshakes counts the STARTTLS handshakes that succeeded, by
	// whether they resumed a session.
	tlsHandshakes = map[bool]*metrics.Counter{
		false: metrics.NewCounter(`verifyd_probe_tls_handshakes_total{resumed="false"}`),
		true:  metrics.NewCounter(`verifyd_probe_tls_handshakes_total{resumed="true"}`),
	}
	resultCounters  = map[[2]string]*metrics.Counter{}
	replyCounters   [smtpclient.ServiceUnavailable + 1]*metrics.Counter
	sessionCounters = map[egress.Outcome]*metrics.Counter{}
	probeDuration   = metrics.NewHistogram("verifyd_probe_duration_seconds")
	// providerCounters is keyed by provider label, then status.
	providerCounters = map[string]map[Status]*metrics.Counter{}
)

func init() {
	statuses := []Status{StatusValid, StatusInvalid, StatusRisky, StatusUnknown, StatusDisposable, StatusSpamtrap}
	reasons := []Reason{ReasonNone, ReasonOK, ReasonSyntax, ReasonDomainNotFound, ReasonNoMX, ReasonSMTPRejected,
		ReasonMailboxNotFound, ReasonCatchAll, ReasonRoleBased, ReasonDisposable, ReasonTimeout, ReasonConnection}
	for _, s := range statuses {
		for _, r := range reasons {
			resultCounters[[2]string{string(s), string(r)}] = metrics.NewCounter(
				fmt.Sprintf(`verifyd_probe_results_total{status=%q,reason=%q}`, s, r))
		}
	}
	labels := []string{ProviderOther, ProviderNone}
	for _, p := range providers {
		labels = append(labels, p.Name)
	}
	for _, p := range labels {
		m := map[Status]*metrics.Counter{}
		for _, s := range statuses {
			m[s] = metrics.NewCounter(fmt.Sprintf(`verifyd_probe_provider_results_total{provider=%q,status=%q}`, p, s))
		}
		providerCounters[p] = m
	}
	for c := range replyCounters {
		replyCounters[c] = metrics.NewCounter(fmt.Sprintf(`verifyd_probe_smtp_replies_total{class=%q}`, smtpclient.Class(c)))
	}
	for o := egress.OutcomeOK; o <= egress.OutcomeCanceled; o++ {
		sessionCounters[o] = metrics.NewCounter(fmt.Sprintf(`verifyd_probe_sessions_total{outcome=%q}`, o))
	}
}

func countResult(r *Result) {
	if c := resultCounters[[2]string{string(r.Status), string(r.Reason)}]; c != nil {
		c.Inc()
	}
	probeDuration.Update(r.Latency.Seconds())
	if c := providerCounters[cmp.Or(r.Session.Provider, ProviderNone)][r.Status]; c != nil {
		c.Inc()
	}
}

func countReply(c smtpclient.Class) {
	if int(c) < len(replyCounters) {
		replyCounters[c].Inc()
	}
}

// countReading counts a permanent refusal by the step that read it.
func countReading(rd rcptReading) {
	switch rd.Class {
	case smtpclient.Accepted, smtpclient.Greylisted, smtpclient.TempFail, smtpclient.TooManyRecipients, smtpclient.ServiceUnavailable:
		return
	}
	by := rd.by
	if rd.ambiguous {
		by = byControl
	}
	about := 0
	if rd.aboutUs {
		about = 1
	}
	refusals[by][about].Inc()
}

func countSession(o egress.Outcome) {
	if c := sessionCounters[o]; c != nil {
		c.Inc()
	}
}
