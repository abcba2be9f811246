package world

import (
	"net/netip"
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

// Expect returns the verdict a careful verifier reaches for email in w,
// from what the world's servers do and what their replies mean, given
// that greylisted recipients are retried until accepted. It is written
// from the behaviour of the mail software the world plays (its
// documentation and source), apart from any verifier's rules and code,
// so that a verifier can be found wrong by it. The world knows nothing of
// the disposable, role and spamtrap lists: the caller sets those from
// what it generated (see Generate). An address whose domain the world
// does not serve gets unknown/connection_error: the world's DNS refuses
// such names, which a resolver sees as a temporary failure. Generate
// refines what Expect cannot know: a valid role address has reason
// role_based, a listed disposable domain gives disposable/disposable_domain,
// a spamtrap gives spamtrap with no reason (the spec's reasons have none
// for it).
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
//	unknown mailbox: what the host's refusal says (unknownSays):
//	  no such mailbox                         invalid   mailbox_not_found
//	  disabled, no relay for the domain       invalid   smtp_rejected
//	  full                                    risky     smtp_rejected
//	  bad address syntax                      invalid   syntax_error
//	  temporary (4xx)                         unknown   timeout
//	  about the client                        unknown   smtp_rejected
//	  nothing, postmaster@ the domain
//	    accepted                              invalid   mailbox_not_found
//	  nothing, postmaster refused alike       unknown   smtp_rejected
//
// What a refusal of an unknown local part says is, in this order: the
// domain's Domain.UnknownSays; for a permanent refusal (5xx), the entry
// of Replies whose words it has (the world's record of real servers'
// replies and what their software means by them, each with its source:
// Exim's "550 Unrouteable address", OpenSMTPD's "550 Invalid recipient",
// Postfix's "User unknown in virtual mailbox table", Yandex's "550 5.7.1
// No such user!", ...), whatever postmaster does; else what its codes
// alone say (codesSay: RFC 3463's codes that name one cause; a bare 550
// or 554, X.0.0 and the policy codes X.7.x say nothing). The default
// reply, 550 5.1.1, says no such mailbox. A refusal that says nothing is
// read against postmaster@ the domain, which RFC 5321 §4.5.1 says must
// exist: accepted from the same client, the refusal is about the local
// part; refused too (Domain.NoPostmaster: many virtual domains have no
// postmaster), a careful verifier knows no more than the refusal, and
// "postmaster refused alike" is no sign that the refusal is about the
// client (only a refusal about the client, or of every recipient, is).
// Other recipients known to exist would tell as much as postmaster, but
// which of them a verifier has met depends on the list and its order,
// which Expect does not know. Postmaster can be asked in a transaction of
// its own, so a host that takes one recipient per transaction, or
// greylists, does not hide it.
//
// A host believed to accept every recipient or a gateway (Host.Provider,
// ProviderFacts) has shown it checks recipients when its refusal of an
// unknown local part reads as no such mailbox (above) and it takes more
// than one recipient per transaction (so the random probe can go after
// the real one; this rule of the catch-all expectation is kept as it
// was, though a random probe in a transaction of its own would tell as
// much). Every host accepts postmaster@ its domains (RFC 5321 §4.5.1)
// unless Domain.NoPostmaster.
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
		// The mailbox exists and takes mail only from senders it knows
		// ("only internal senders accepted"): the words are about the
		// sender, and its refusal is not the domain's refusal of a
		// local part it does not know (assumed: the domain's unknown
		// reply is another).
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
	unknown := unknownVerdict(d, host)
	if _, ok := d.Mailboxes[local]; ok {
		pf := Providers[host.Provider]
		// A host believed to accept every recipient, or a gateway, shows
		// it checks recipients by refusing the random probe in a way
		// that reads as no such mailbox (unknownVerdict); one that cannot
		// be asked (one recipient per transaction) or refuses otherwise
		// has not shown it.
		shown := host.MaxRcpts != 1 && unknown.Status == StatusInvalid && unknown.Reason == ReasonMailboxNotFound
		if (pf.AcceptsAll || pf.Gateway) && !shown {
			e.CatchAll = true
			return set(StatusRisky, ReasonCatchAll)
		}
		return set(StatusValid, ReasonOK)
	}
	return set(unknown.Status, unknown.Reason)
}

// unknownVerdict is the verdict on a local part d does not know, from
// what host's refusal of it says (unknownSays): a refusal that says no
// such mailbox is invalid whatever else the host does; one about the
// client says nothing of the mailbox; one that says nothing is read
// against a recipient that must exist, postmaster@d (RFC 5321 §4.5.1):
// the host accepts it from the same client, so the refusal is about the
// local part — no such mailbox; the host refuses it too (no postmaster
// for the domain, against the RFC, as many virtual domains have), and a
// careful verifier knows no more than the refusal.
func unknownVerdict(d *Domain, host *Host) Expectation {
	set := func(status, reason string) Expectation { return Expectation{Status: status, Reason: reason} }
	switch unknownSays(d, host) {
	case SaysNoMailbox:
		return set(StatusInvalid, ReasonMailboxNotFound)
	case SaysDisabled, SaysNoRelay:
		return set(StatusInvalid, ReasonSMTPRejected)
	case SaysFull:
		return set(StatusRisky, ReasonSMTPRejected)
	case SaysSyntax:
		return set(StatusInvalid, ReasonSyntax)
	case SaysDeferred:
		return set(StatusUnknown, ReasonTimeout) // deferred past the retries
	case SaysClient:
		return set(StatusUnknown, ReasonSMTPRejected)
	}
	if postmasterAccepted(d) {
		return set(StatusInvalid, ReasonMailboxNotFound)
	}
	return set(StatusUnknown, ReasonSMTPRejected)
}

// postmasterAccepted reports whether d's hosts accept postmaster@d from a
// client they serve: a known mailbox of that name that takes mail, or
// the RFC 5321 §4.5.1 postmaster every domain has unless NoPostmaster.
func postmasterAccepted(d *Domain) bool {
	st, ok := d.Mailboxes["postmaster"]
	if !ok {
		return !d.NoPostmaster
	}
	switch st {
	case MailboxOK, MailboxGreylist, MailboxOverQuota:
		return true
	}
	return false
}

// ProviderFacts is what the world knows of a real provider a host can play
// (Host.Provider), from the provider's documentation and the public record
// of its replies. What its replies to RCPT mean is in Replies, beside the
// replies themselves.
type ProviderFacts struct {
	// AcceptsAll: the provider's MX accepts every recipient at RCPT and
	// refuses unknown ones after DATA: an acceptance proves nothing.
	AcceptsAll bool
	// Gateway: a filtering gateway whose recipient check is its
	// customer's choice: an acceptance proves a mailbox only once the
	// gateway has refused a random local part as no such mailbox.
	Gateway bool
	// NoMailbox and Wordings list the provider's refusals of an unknown
	// recipient whose codes say less than their words, as codes ("code"
	// or "code enhanced") and as fragments of text. Expect does not read
	// them: a reply's meaning is in Replies. They are kept for
	// probe.TestProvidersAgreeWithWorld, which compares the engine's
	// provider table with them.
	NoMailbox []string
	Wordings  []Wording
}

// Wording is a reply of a provider's by its text: a reply with Code
// whose text contains Text (lower case) means Status and Reason
// (ProviderFacts.Wordings).
type Wording struct {
	Code           int
	Text           string
	Status, Reason string
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
