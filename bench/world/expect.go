package world

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verdicts and reasons of spec §2.3, as the world's expectations use them.
const (
	StatusValid      = "valid"
	StatusInvalid    = "invalid"
	StatusRisky      = "risky"
	StatusUnknown    = "unknown"
	StatusDisposable = "disposable"
	StatusSpamtrap   = "spamtrap"

	ReasonOK              = "ok"
	ReasonSyntax          = "syntax_error"
	ReasonDomainNotFound  = "domain_not_found"
	ReasonNoMX            = "no_mx_record"
	ReasonSMTPRejected    = "smtp_rejected"
	ReasonMailboxNotFound = "mailbox_not_found"
	ReasonCatchAll        = "catch_all"
	ReasonRoleBased       = "role_based"
	ReasonDisposable      = "disposable_domain"
	ReasonTimeout         = "timeout"
	ReasonConnection      = "connection_error"
)

// Expect returns the verdict a correct verifier reaches for email in w, by
// the engine's decision table (probe/README.md), given that greylisted
// recipients are retried until accepted. The world knows nothing of the
// disposable, role and spamtrap lists: the caller sets those from what it
// generated (see Generate). An address whose domain the world does not serve
// gets unknown/connection_error: the world's DNS refuses such names, which a
// resolver sees as a temporary failure. Generate refines what Expect cannot
// know: a valid role address has reason role_based, a listed disposable
// domain gives disposable/disposable_domain, a spamtrap gives spamtrap with no
// reason (the spec's reasons have none for it).
//
// The table, in the order it is applied:
//
//	domain NXDOMAIN                           invalid   domain_not_found
//	zone SERVFAIL                             unknown   connection_error
//	zone drops queries                        unknown   timeout
//	null MX, or no MX and no A                invalid   no_mx_record
//	no MX host with an address (each a name
//	  of a zone, NXDOMAIN or NODATA there)    invalid   no_mx_record
//	every MX refuses connections              unknown   connection_error
//	first reachable MX busy (421)             unknown   connection_error
//	first reachable MX tarpits                unknown   timeout
//	first reachable MX defers EHLO (421)      unknown   connection_error
//	first reachable MX greets with 554        unknown   smtp_rejected
//	MX defers MAIL FROM (451 4.7.1)           unknown   timeout
//	MX requires an SPF sender (550 5.7.23)    unknown   smtp_rejected
//	UTF-8 local part, MX without SMTPUTF8     invalid   smtp_rejected
//	policy reject (550 5.7.1)                 unknown   smtp_rejected
//	MX accepts the first N unknown (N > 0)    risky     catch_all
//	mailbox restricted (550 5.7.1)            unknown   smtp_rejected
//	mailbox disabled (550 5.2.1)              invalid   smtp_rejected
//	mailbox full (552 5.2.2)                  risky     smtp_rejected
//	mailbox bad syntax (553 5.1.3)            invalid   syntax_error
//	mailbox behind a null MX (550 5.1.10)     invalid   smtp_rejected
//	catch-all domain (whatever its
//	  Domain.UnknownUser: accept-then-bounce
//	  and dropping ones alike)                 risky     catch_all
//	known mailbox, host believed to accept
//	  all (Yahoo) or a gateway, that has not
//	  shown it checks recipients (see below)  risky     catch_all
//	known mailbox (greylisted, over quota
//	  at delivery, or neither)                valid     ok
//	unknown mailbox, a refusal that may be
//	  policy, read by the positive control    invalid   mailbox_not_found
//	                                          (postmaster accepted), unknown
//	                                          smtp_rejected (refused alike)
//	unknown mailbox: Domain.UnknownReply      the provider's code or wording,
//	                                          else its code and enhanced code
//	unknown mailbox (550 5.1.1)               invalid   mailbox_not_found
//
// A host believed to accept every recipient or a gateway (Host.Provider,
// ProviderFacts) has shown it checks recipients when its reply to an
// unknown local part reads as no such mailbox (by its codes, its
// provider's wording or the positive control: see control) and it takes
// more than one recipient per transaction (so the random probe can go
// after the real one). Every host accepts postmaster@ its domains (RFC
// 5321 §4.5.1) unless Domain.NoPostmaster.
//
// MX targets that are IP literals are skipped (RFC 5321 §5.1: not a host
// name); a CNAME at an MX target is followed. Expect assumes the prober's
// MAIL FROM domain is not a domain of the world, and that fewer than
// AcceptFirst probes reach an AcceptFirst host.
//
// The verdict is the truth of SMTP at RCPT time. Expect adds the truth of
// delivery, which the verdict does not change: Expectation.Delivery and
// DeliveryTruth are World.Deliver's event and truth for the address.
func (w *World) Expect(email string) Expectation {
	e := w.expectSMTP(email)
	dv := w.Deliver(email, time.Time{})
	e.Delivery, e.DeliveryTruth = dv.Event, dv.Truth
	return e
}

// expectSMTP is Expect's verdict, without the truth of delivery.
func (w *World) expectSMTP(email string) Expectation {
	e := Expectation{Email: email}
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 {
		e.Status, e.Reason = StatusInvalid, ReasonSyntax
		return e
	}
	local := strings.ToLower(email[:at])
	d := w.Domain(email[at+1:])
	set := func(status, reason string) Expectation {
		e.Status, e.Reason = status, reason
		return e
	}
	switch {
	case d == nil:
		return set(StatusUnknown, ReasonConnection)
	case d.NXDomain:
		return set(StatusInvalid, ReasonDomainNotFound)
	case d.DNSFault == DNSFaultServFail:
		return set(StatusUnknown, ReasonConnection)
	case d.DNSFault == DNSFaultDrop:
		return set(StatusUnknown, ReasonTimeout)
	}
	hosts := w.mailHosts(d)
	if hosts == nil || w.noHostAddress(d) {
		return set(StatusInvalid, ReasonNoMX)
	}
	var host *Host
	for _, h := range hosts {
		if h != nil && h.Mode != HostRefuse {
			host = h
			break
		}
	}
	switch {
	case host == nil:
		return set(StatusUnknown, ReasonConnection)
	case host.Mode == HostBusy, host.Mode == HostDeferEHLO:
		return set(StatusUnknown, ReasonConnection)
	case host.Mode == HostTarpit:
		return set(StatusUnknown, ReasonTimeout)
	case host.Mode == HostBlocked:
		return set(StatusUnknown, ReasonSMTPRejected)
	case host.MailPolicy == MailDefer:
		return set(StatusUnknown, ReasonTimeout)
	case host.MailPolicy == MailRequireSPF:
		return set(StatusUnknown, ReasonSMTPRejected)
	case !isASCII(local) && !host.SMTPUTF8:
		return set(StatusInvalid, ReasonSMTPRejected)
	case d.Policy == PolicyReject:
		return set(StatusUnknown, ReasonSMTPRejected)
	case host.AcceptFirst > 0 && d.Policy != PolicyCatchAll:
		e.CatchAll = true
		return set(StatusRisky, ReasonCatchAll)
	}
	switch d.Mailboxes[local] {
	case MailboxRestricted:
		// The positive control tells nothing: postmaster is accepted,
		// a random local part refused otherwise (assumed: the domain's
		// unknown reply is not 550 5.7.1 too).
		return set(StatusUnknown, ReasonSMTPRejected)
	case MailboxDisabled, MailboxNullMX:
		return set(StatusInvalid, ReasonSMTPRejected)
	case MailboxFull:
		return set(StatusRisky, ReasonSMTPRejected)
	case MailboxBadSyntax:
		return set(StatusInvalid, ReasonSyntax)
	}
	if d.Policy == PolicyCatchAll {
		e.CatchAll = true
		return set(StatusRisky, ReasonCatchAll)
	}
	unknown := unknownReading(d, host)
	ctl := control(d, host)
	if _, ok := d.Mailboxes[local]; ok {
		pf := Providers[host.Provider]
		// A host believed to accept every recipient, or a gateway, shows
		// it checks recipients by refusing the random probe as no such
		// mailbox (by its codes, its provider's wording, or the positive
		// control); one that cannot be asked (one recipient per
		// transaction) or refuses otherwise has not shown it.
		shown := host.MaxRcpts != 1 && (unknown.Status == StatusInvalid && unknown.Reason == ReasonMailboxNotFound || ctl == controlMailbox)
		if (pf.AcceptsAll || pf.Gateway) && !shown {
			e.CatchAll = true
			return set(StatusRisky, ReasonCatchAll)
		}
		return set(StatusValid, ReasonOK)
	}
	switch ctl {
	case controlMailbox:
		return set(StatusInvalid, ReasonMailboxNotFound)
	case controlProber:
		return set(StatusUnknown, ReasonSMTPRejected)
	}
	return set(unknown.Status, unknown.Reason)
}

// The positive control's readings (control).
const (
	controlNone    = iota // not asked, or it told nothing: the codes decide
	controlMailbox        // postmaster accepted, a random local part refused alike: no such mailbox
	controlProber         // postmaster refused alike: the refusal is about the prober
)

// control is how the prober's positive control reads host's refusal of a
// local part d does not know (probe/README.md, "Refusals that may be
// policy"). A refusal that may be about the prober — a 5.7.x, a 5.2.4, a
// bare 550 or 554, not a wording of the host's provider — is read by
// asking the same session for postmaster@d, which RFC 5321 §4.5.1 says
// must exist, and for a random local part, which gets the same refusal
// here. It tells nothing when the host takes one recipient per
// transaction or greylists every new (client, recipient) pair.
func control(d *Domain, host *Host) int {
	r := parseReplyLine(styled(host, unknownLine(d)))
	if !ambiguousRefusal(r) || ruled(host.Provider, r) || host.MaxRcpts == 1 || d.Policy == PolicyGreylist {
		return controlNone
	}
	if d.NoPostmaster {
		return controlProber // postmaster gets the same refusal
	}
	return controlMailbox
}

// ambiguousRefusal is the engine's rule for a refusal that may be about the
// prober.
func ambiguousRefusal(r smtpReply) bool {
	if r.code/100 != 5 {
		return false
	}
	switch {
	case r.enh == "" || strings.HasSuffix(r.enh, ".0.0"):
		return r.code == 550 || r.code == 554
	case strings.HasPrefix(r.enh, "5.7."):
		return true
	}
	return r.enh == "5.2.4"
}

// ruled reports whether provider reads r by a rule of its own.
func ruled(provider string, r smtpReply) bool {
	pf := Providers[provider]
	key := strconv.Itoa(r.code)
	if r.enh != "" {
		key += " " + r.enh
	}
	if slices.Contains(pf.NoMailbox, key) {
		return true
	}
	_, ok := pf.wording(r)
	return ok
}

// unknownLine is d's reply to RCPT for a local part it does not know.
func unknownLine(d *Domain) string {
	if d.UnknownReply == "" {
		return replyNoSuchUser.line
	}
	return d.UnknownReply
}

// styled is line as host words it (Host.Replies: a bare host drops the
// enhanced code).
func styled(host *Host, line string) string {
	if host.Replies != RepliesBare {
		return line
	}
	code, rest, _ := strings.Cut(line, " ")
	if f, text, ok := strings.Cut(rest, " "); ok && isEnhanced(f) {
		rest = text
	}
	return code + " " + rest
}

// unknownReading is the verdict on a local part d does not know, from the
// reply its host gives (Domain.UnknownReply, else 550 5.1.1): the host's
// provider's own wording first, then the reply code and enhanced code as
// RFC 5321 and RFC 3463 define them, never other text.
func unknownReading(d *Domain, host *Host) Expectation {
	set := func(status, reason string) Expectation { return Expectation{Status: status, Reason: reason} }
	if d.UnknownReply == "" && host.Replies != RepliesBare {
		return set(StatusInvalid, ReasonMailboxNotFound)
	}
	r := parseReplyLine(styled(host, unknownLine(d)))
	if w, ok := Providers[host.Provider].wording(r); ok {
		return set(w.Status, w.Reason)
	}
	if r.enh != "" && strings.HasSuffix(r.enh, ".0.0") {
		r.enh = "" // "other or undefined": no more than the bare code
	}
	key := strconv.Itoa(r.code)
	if r.enh != "" {
		key += " " + r.enh
	}
	if slices.Contains(Providers[host.Provider].NoMailbox, key) {
		return set(StatusInvalid, ReasonMailboxNotFound)
	}
	class, subject, detail := 0, 0, 0
	if r.enh != "" {
		fmt.Sscanf(r.enh, "%d.%d.%d", &class, &subject, &detail)
	}
	switch {
	case r.code == 421:
		return set(StatusUnknown, ReasonConnection)
	case subject == 5 && detail == 3:
		return set(StatusUnknown, ReasonConnection) // the recipient limit
	case subject == 2 && detail == 2, r.enh == "" && r.code == 552:
		return set(StatusRisky, ReasonSMTPRejected) // mailbox full
	case r.code/100 == 4:
		return set(StatusUnknown, ReasonTimeout) // deferred past the retries
	case r.code/100 != 5:
		return set(StatusUnknown, ReasonSMTPRejected)
	case r.enh == "":
		switch r.code {
		case 550, 551, 553:
			return set(StatusInvalid, ReasonMailboxNotFound)
		case 500, 501, 502, 504:
			return set(StatusInvalid, ReasonSyntax)
		}
		return set(StatusUnknown, ReasonSMTPRejected)
	case subject == 1:
		switch detail {
		case 2, 10:
			return set(StatusInvalid, ReasonSMTPRejected)
		case 3:
			return set(StatusInvalid, ReasonSyntax)
		case 7, 8:
			return set(StatusUnknown, ReasonSMTPRejected)
		}
		return set(StatusInvalid, ReasonMailboxNotFound)
	case subject == 2 && detail == 1:
		return set(StatusInvalid, ReasonSMTPRejected)
	case subject == 4 && detail == 1:
		return set(StatusInvalid, ReasonMailboxNotFound)
	case subject == 5:
		return set(StatusInvalid, ReasonSyntax)
	}
	return set(StatusUnknown, ReasonSMTPRejected)
}

// ProviderFacts is what the world knows of a real provider a host can play
// (Host.Provider), from the provider's documentation and the public record
// of its replies (sources in probe/README.md, "Providers").
type ProviderFacts struct {
	// AcceptsAll: the provider's MX accepts every recipient at RCPT and
	// refuses unknown ones after DATA: an acceptance proves nothing.
	AcceptsAll bool
	// Gateway: a filtering gateway whose recipient check is its
	// customer's choice: an acceptance proves a mailbox only once the
	// gateway has refused a random local part as no such mailbox.
	Gateway bool
	// NoMailbox are the replies ("code" or "code enhanced") the provider
	// gives to a mailbox that does not exist where RFC 3463 says
	// something else.
	NoMailbox []string
	// Wordings are the provider's own ways of refusing at RCPT whose
	// codes say less (probe.ReplyRule's Text).
	Wordings []Wording
}

// Wording is a reply of a provider's read by its text: a reply with Code
// whose text contains Text (lower case) means Status and Reason.
type Wording struct {
	Code           int
	Text           string
	Status, Reason string
}

// wording returns the provider's wording r is, if any.
func (pf ProviderFacts) wording(r smtpReply) (Wording, bool) {
	text := strings.ToLower(r.line)
	for _, w := range pf.Wordings {
		if w.Code == r.code && strings.Contains(text, w.Text) {
			return w, true
		}
	}
	return Wording{}, false
}

// Providers are the providers a host can play, by Host.Provider.
var Providers = map[string]ProviderFacts{
	"google":       {},
	"outlook":      {NoMailbox: []string{"550 5.5.0"}},
	"microsoft365": {NoMailbox: []string{"550 5.4.1", "550 5.1.10"}},
	"yahoo": {AcceptsAll: true, NoMailbox: []string{"552"}, Wordings: []Wording{
		{Code: 554, Text: "this user doesn't have a", Status: StatusInvalid, Reason: ReasonMailboxNotFound},
		{Code: 554, Text: "this mailbox is disabled", Status: StatusInvalid, Reason: ReasonSMTPRejected},
	}},
	"icloud":      {},
	"proofpoint":  {Gateway: true},
	"mimecast":    {Gateway: true},
	"barracuda":   {Gateway: true},
	"cisco":       {Gateway: true},
	"spamexperts": {Gateway: true},
	"zoho":        {},
	"fastmail":    {},
	"proton":      {},
	"yandex":      {},
	"mailru":      {},
	"gmx":         {},
}

// mailHosts returns the hosts a sender would try for d, in preference order:
// the MX hosts (nil entries for names the world has no host for), or for a
// domain without MX the host at its A record (implicit MX, RFC 5321 §5.1).
// It returns nil when mail cannot be routed (null MX, or neither MX nor A).
func (w *World) mailHosts(d *Domain) []*Host {
	if len(d.MX) == 0 {
		if len(d.A) == 0 {
			return nil
		}
		return []*Host{w.HostByIP(d.A[0])}
	}
	mxs := append([]MX(nil), d.MX...)
	for i := 1; i < len(mxs); i++ { // insertion sort: MX lists are short
		for j := i; j > 0 && mxs[j].Pref < mxs[j-1].Pref; j-- {
			mxs[j], mxs[j-1] = mxs[j-1], mxs[j]
		}
	}
	var hs []*Host
	for _, mx := range mxs {
		if mx.Host == "." {
			return nil
		}
		if _, err := netip.ParseAddr(strings.TrimSuffix(mx.Host, ".")); err == nil {
			continue // an IP literal is no host name (RFC 5321 §5.1)
		}
		hs = append(hs, w.HostByName(w.cname(d, mx.Host)))
	}
	if len(hs) == 0 {
		return nil
	}
	return hs
}

// noHostAddress reports whether d has MX hosts and none of them has an
// address the world's DNS would give, authoritatively: each is a name of
// a world zone (not failing) with no host and no A or AAAA record there,
// so the DNS answers NXDOMAIN or NODATA. No mail can be delivered to such
// a domain (RFC 5321 §5.1): invalid, no_mx_record. A host name outside
// every zone, or in a failing one, is a lookup failure: unknown.
func (w *World) noHostAddress(d *Domain) bool {
	if len(d.MX) == 0 {
		return false
	}
	for _, mx := range d.MX {
		name := strings.ToLower(strings.TrimSuffix(w.cname(d, mx.Host), "."))
		if _, err := netip.ParseAddr(name); err == nil {
			continue // an IP literal is no host name: skipped
		}
		if w.HostByName(name) != nil {
			return false
		}
		var z *Domain
		for s := name; s != "" && z == nil; {
			z = w.Domain(s)
			_, s, _ = strings.Cut(s, ".")
		}
		if z == nil || z.DNSFault != "" {
			return false
		}
		if z.NXDomain {
			continue
		}
		if name == z.Name && (len(z.A) > 0 || len(z.AAAA) > 0) {
			return false
		}
		for _, r := range z.Records {
			owner := strings.ToLower(strings.TrimSuffix(r.Name, "."))
			if owner == "" || owner == "@" {
				owner = z.Name
			} else if !strings.HasSuffix(r.Name, ".") {
				owner += "." + z.Name
			}
			if owner == name && (strings.EqualFold(r.Type, "A") || strings.EqualFold(r.Type, "AAAA")) {
				return false
			}
		}
	}
	return true
}

// cname follows a CNAME record of d's zone at name, once.
func (w *World) cname(d *Domain, name string) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, r := range d.Records {
		if !strings.EqualFold(r.Type, "CNAME") {
			continue
		}
		owner := strings.ToLower(strings.TrimSuffix(r.Name, "."))
		if owner != "" && owner != "@" && !strings.HasSuffix(owner, "."+d.Name) && owner != d.Name {
			owner += "." + d.Name
		}
		if owner == name {
			return strings.TrimSuffix(r.Data, ".")
		}
	}
	return name
}
