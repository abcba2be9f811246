package world

// Delivery truth: what happens when a customer actually sends mail to an
// address of the world, as the customer's sending platform reports it.
// Verification (Expect) is the truth of SMTP at RCPT time, seen by a
// prober; delivery (Deliver) is the truth of the mailbox, seen by a
// sender. The two differ where a server accepts at RCPT what it cannot
// deliver (accept-then-bounce), accepts and drops it, or fills up later.
//
// Deliver decides like a sending MTA (RFC 5321 §5.1, §4.2.5, §6):
//
//  1. The domain: NXDOMAIN bounces (5.1.2); no MX and no address, or MX
//     hosts without an address, bounce (5.4.4); a null MX bounces (5.1.10,
//     RFC 7505); a failing or unknown zone defers (4.4.3).
//  2. The MX hosts in preference order: a host that refuses connections,
//     never greets or answers 421 is skipped for the next one (RFC 5321
//     §5.1); when none is left the send is deferred (4.4.1, 4.4.2, 4.7.0).
//  3. Refusals aimed at the prober are not aimed at the customer's sending
//     platform, which has a reputation, an SPF record and a return path and
//     retries: a 554 greeting, 421 to EHLO, MAIL FROM policies, a blocked
//     client address, a domain's policy reject, recipient limits, dropped
//     sessions and greylisting are looked through, to the mailbox.
//  4. The mailbox: a known mailbox is delivered (a share of them, by
//     World.ComplaintRate, complains), or refused as its state says (full,
//     disabled, ...), in the words of the host's provider; an unknown local
//     part is refused at RCPT (5.1.1), or, on a domain that accepts every
//     local part, meets the domain's unknown-user behaviour
//     (Domain.UnknownUser): delivered to a catch-all mailbox, bounced
//     afterwards, or dropped.
//
// Everything is derived from the address alone, so a world gives the same
// answers every time; only Delivery.At follows the time of the send.

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Delivery events, as storage.OutcomeEvents and POST /v1/outcomes name them.
const (
	EventDelivered  = "delivered"
	EventHardBounce = "hard_bounce"
	EventSoftBounce = "soft_bounce"
	EventComplaint  = "complaint"
)

// Delivery truths (Delivery.Truth): why a send ended as it did.
const (
	TruthMailbox          = "mailbox"            // a mailbox that exists took it
	TruthCatchAll         = "catch_all"          // a catch-all mailbox took it for an unknown local part
	TruthDropped          = "dropped"            // accepted for an unknown local part and thrown away: the platform saw a 250
	TruthNoMailbox        = "no_mailbox"         // refused at RCPT: no such mailbox
	TruthAcceptThenBounce = "accept_then_bounce" // accepted at RCPT, bounced afterwards: no such mailbox
	TruthFull             = "full"               // the mailbox is over its quota (at RCPT or at delivery)
	TruthDisabled         = "disabled"           // the mailbox is disabled
	TruthRestricted       = "restricted"         // the mailbox takes mail only from senders it knows
	TruthBadSyntax        = "bad_syntax"         // the address's syntax is refused
	TruthNoDomain         = "no_domain"          // the domain does not exist (NXDOMAIN)
	TruthNoMX             = "no_mx"              // the domain takes no mail: null MX, no MX and no address
	TruthDNSError         = "dns_error"          // the domain's DNS fails: deferred
	TruthUnreachable      = "unreachable"        // no MX host takes connections: deferred
	TruthUTF8             = "utf8_unsupported"   // a UTF-8 local part and an MX without SMTPUTF8
)

// Delivery is what happened when mail was sent to one address of the
// world, as a sending platform reports it (docs/outcomes.md).
type Delivery struct {
	Email string `json:"email"`
	// Event is EventDelivered, EventHardBounce, EventSoftBounce or
	// EventComplaint.
	Event string `json:"event"`
	// At is when it happened: the time of the send plus seconds (a
	// delivery, a refusal at RCPT), minutes (a bounce after acceptance, a
	// complaint).
	At time.Time `json:"at"`
	// SMTPCode is the receiving server's reply code (250 for a delivery);
	// 0 when no server answered and the sending MTA bounced or deferred on
	// its own (DNS, connections).
	SMTPCode int `json:"smtp_code,omitempty"`
	// Enhanced is the enhanced status code the platform reports (RFC 3463):
	// the server's, or "5.0.0" / "4.0.0" when its reply had none, as a
	// sending MTA derives it.
	Enhanced string `json:"enhanced_code,omitempty"`
	// Diagnostic is what the receiving server said, worded as the host's
	// provider words it ("550-5.1.1 The email account that you tried to
	// reach does not exist. …" for Google, "550 5.1.1 <x@y>: Recipient
	// address rejected: User unknown in virtual mailbox table" for a
	// Postfix), or the sending MTA's own words when no server answered.
	Diagnostic string `json:"diagnostic,omitempty"`
	// Host is the MX host that took or refused the mail; "" when none did.
	Host string `json:"host,omitempty"`
	// Truth says why, for reports: one of the Truth constants.
	Truth string `json:"truth"`
}

// UnknownUser is what becomes of mail a domain accepted at RCPT for a
// local part it does not know (Domain.UnknownUser).
type UnknownUser string

// Unknown-user behaviours.
const (
	// UnknownUserDefault: the provider's behaviour. Hosts playing a
	// provider that takes every recipient at its edge and checks later —
	// Yahoo, Microsoft 365 and Outlook without edge blocking, the
	// filtering gateways (ProviderFacts.AcceptsAll, Gateway) — bounce;
	// every other host delivers, as a true catch-all.
	UnknownUserDefault UnknownUser = ""
	// UnknownUserDeliver: a catch-all mailbox takes the mail.
	UnknownUserDeliver UnknownUser = "deliver"
	// UnknownUserBounce: accept-then-bounce. The mail is accepted at RCPT
	// and DATA, and a non-delivery report (5.1.1) follows.
	UnknownUserBounce UnknownUser = "bounce"
	// UnknownUserDrop: the mail is accepted and thrown away; the sender
	// sees a delivery.
	UnknownUserDrop UnknownUser = "drop"
)

// unknownUser is what d does with mail for an unknown local part that
// host accepted.
func unknownUser(d *Domain, host *Host) UnknownUser {
	if d.UnknownUser != UnknownUserDefault {
		return d.UnknownUser
	}
	pf := Providers[host.Provider]
	if pf.AcceptsAll || pf.Gateway || host.Provider == "microsoft365" || host.Provider == "outlook" {
		return UnknownUserBounce
	}
	return UnknownUserDeliver
}

// draws are the random values of one send, seeded by the address.
type draws struct {
	complain float64 // against World.ComplaintRate
	lag      float64 // where in its window the event falls
	token    uint64  // queue ids, message ids, server names
}

func drawsFor(email string) draws {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(email)))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x6a09e667f3bcc909))
	return draws{complain: rng.Float64(), lag: rng.Float64(), token: rng.Uint64()}
}

// Windows after the send in which events fall.
var (
	lagLocal    = [2]time.Duration{0, 2 * time.Second}                  // the sending MTA's own bounce
	lagRcpt     = [2]time.Duration{time.Second, 10 * time.Second}       // a refusal in the session
	lagDeliver  = [2]time.Duration{time.Second, 30 * time.Second}       // a delivery
	lagNDR      = [2]time.Duration{time.Minute, 15 * time.Minute}       // a bounce after acceptance
	lagComplain = [2]time.Duration{10 * time.Minute, 120 * time.Minute} // a recipient's complaint
)

// Deliver returns what sending mail to email at the time at produces: the
// event its sending platform reports, with the receiving server's reply,
// and the truth behind it. It answers the same for an address every time
// (At aside, which follows at), and never touches the network: it reads
// the world as its servers would answer a sending MTA (see the comment at
// the top of deliver.go).
func (w *World) Deliver(email string, at time.Time) Delivery {
	r := drawsFor(email)
	dv, lag := w.deliver(email, r)
	dv.Email = email
	if dv.Event == EventDelivered && (dv.Truth == TruthMailbox || dv.Truth == TruthCatchAll) && r.complain < w.ComplaintRate {
		dv.Event, lag = EventComplaint, lagComplain
	}
	dv.At = at.Add(lag[0] + time.Duration(r.lag*float64(lag[1]-lag[0]))).UTC()
	return dv
}

// deliver is Deliver without the time and the complaints.
func (w *World) deliver(email string, r draws) (Delivery, [2]time.Duration) {
	local := func(event, enh, diag, truth string) (Delivery, [2]time.Duration) {
		return Delivery{Event: event, Enhanced: enh, Diagnostic: diag, Truth: truth}, lagLocal
	}
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 {
		return local(EventHardBounce, "5.1.3", "bad address syntax: "+email, TruthBadSyntax)
	}
	lp, domain := strings.ToLower(email[:at]), strings.ToLower(strings.TrimSuffix(email[at+1:], "."))
	d := w.Domain(domain)
	notFound := "Host or domain name not found. Name service error for name=" + domain + " type=MX: Host not found"
	switch {
	case d == nil, d.DNSFault != DNSFaultNone:
		return local(EventSoftBounce, "4.4.3", notFound+", try again", TruthDNSError)
	case d.NXDomain:
		return local(EventHardBounce, "5.1.2", notFound, TruthNoDomain)
	}
	for _, mx := range d.MX {
		if mx.Host == "." {
			return local(EventHardBounce, "5.1.10", "Domain "+domain+" does not accept mail (nullMX)", TruthNoMX)
		}
	}
	hosts := w.mailHosts(d)
	if hosts == nil || w.noHostAddress(d) {
		return local(EventHardBounce, "5.4.4", "Host or domain name not found. Name service error for name="+domain+
			" type=A: Host found but no data record of requested type", TruthNoMX)
	}
	// The MX hosts in order: a host that cannot be reached is skipped for
	// the next (RFC 5321 §5.1); the last failure stands when none is left.
	var host *Host
	var fail Delivery
	for _, h := range hosts {
		switch {
		case h == nil:
			fail = Delivery{Event: EventSoftBounce, Enhanced: "4.4.3", Truth: TruthDNSError,
				Diagnostic: "Host or domain name not found. Name service error for an MX host of " + domain + " type=A: Host not found, try again"}
		case h.Mode == HostRefuse:
			fail = Delivery{Event: EventSoftBounce, Enhanced: "4.4.1", Truth: TruthUnreachable,
				Diagnostic: "connect to " + h.Name + "[" + h.IP + "]:25: Connection refused"}
		case h.Mode == HostTarpit:
			fail = Delivery{Event: EventSoftBounce, Enhanced: "4.4.2", Truth: TruthUnreachable,
				Diagnostic: "conversation with " + h.Name + "[" + h.IP + "] timed out while receiving the initial server greeting"}
		case h.Mode == HostBusy:
			fail = Delivery{Event: EventSoftBounce, SMTPCode: 421, Enhanced: "4.7.0", Truth: TruthUnreachable, Host: h.Name,
				Diagnostic: "host " + h.Name + "[" + h.IP + "] refused to talk to me: 421 4.7.0 " + h.Banner + " too busy, try later"}
		default:
			host = h
		}
		if host != nil {
			break
		}
	}
	if host == nil {
		return fail, lagRcpt
	}
	if !isASCII(lp) && !host.SMTPUTF8 {
		return Delivery{Event: EventHardBounce, Enhanced: "5.6.7", Truth: TruthUTF8, Host: host.Name,
			Diagnostic: "SMTPUTF8 is required, but was not offered by host " + host.Name + "[" + host.IP + "]"}, lagLocal
	}
	st := styleOf(host.Provider)
	v := vars{addr: email, local: email[:at], domain: domain, host: host, token: r.token}
	reply := func(sr styledReply, bare bool, event, truth string, lag [2]time.Duration) (Delivery, [2]time.Duration) {
		code, enh, diag := sr.code, sr.enh, v.expand(sr.text)
		if bare && host.Replies == RepliesBare && enh != "" {
			c := strconv.Itoa(code)
			diag = strings.NewReplacer(c+" "+enh+" ", c+" ", c+"-"+enh+" ", c+"-").Replace(diag)
			enh = ""
		}
		if enh == "" {
			enh = strconv.Itoa(code/100) + ".0.0"
		}
		return Delivery{Event: event, SMTPCode: code, Enhanced: enh, Diagnostic: diag, Host: host.Name, Truth: truth}, lag
	}
	delivered := func(truth string) (Delivery, [2]time.Duration) {
		return reply(st.delivered, false, EventDelivered, truth, lagDeliver)
	}
	refused := func(sr styledReply, truth string) (Delivery, [2]time.Duration) {
		event := EventHardBounce
		if sr.code/100 == 4 || truth == TruthFull {
			event = EventSoftBounce
		}
		return reply(sr, true, event, truth, lagRcpt)
	}
	state, known := d.Mailboxes[lp]
	if !known {
		switch {
		case lp == "postmaster" && !d.NoPostmaster: // RFC 5321 §4.5.1
			return delivered(TruthMailbox)
		case d.Policy == PolicyCatchAll:
			switch unknownUser(d, host) {
			case UnknownUserBounce:
				// A report sent after acceptance carries an enhanced
				// status (RFC 3464) whatever the host's reply style.
				return reply(st.ndr, false, EventHardBounce, TruthAcceptThenBounce, lagNDR)
			case UnknownUserDrop:
				return delivered(TruthDropped)
			}
			return delivered(TruthCatchAll)
		case d.UnknownReply != "":
			// The domain's own wording, as its server answers RCPT.
			r := parseReplyLine(d.UnknownReply)
			return refused(styledReply{r.code, r.enh, d.UnknownReply}, TruthNoMailbox)
		}
		// An AcceptFirst host tells the truth once its first acceptances
		// are spent, which a probe before the send has used.
		return refused(st.noMailbox, TruthNoMailbox)
	}
	switch state {
	case MailboxFull:
		return refused(st.full, TruthFull)
	case MailboxOverQuota:
		// Accepted at RCPT; refused at the end of DATA, or bounced by
		// the delivery agent behind the server.
		dv, _ := refused(st.overQuota, TruthFull)
		return dv, lagDeliver
	case MailboxDisabled:
		return refused(st.disabled, TruthDisabled)
	case MailboxBadSyntax:
		return refused(styledReply{553, "5.1.3", "553 5.1.3 <{addr}>: Recipient address rejected: mailbox name not allowed"}, TruthBadSyntax)
	case MailboxNullMX:
		return refused(styledReply{550, "5.1.10", "550 5.1.10 <{addr}>: Recipient address rejected: recipient domain publishes a null MX"}, TruthNoMX)
	case MailboxRestricted:
		return refused(styledReply{550, "5.7.1", "550 5.7.1 <{addr}>: Recipient not authorized, only internal senders accepted"}, TruthRestricted)
	}
	return delivered(TruthMailbox) // ok, greylist (the sender retries)
}

// styledReply is a reply of a receiving server: its code, its enhanced
// code ("" when the server gives none) and its whole text as a platform
// shows it, with the placeholders of vars.
type styledReply struct {
	code int
	enh  string
	text string
}

// mtaStyle is how a kind of receiving server words what a sender meets.
type mtaStyle struct {
	delivered styledReply // the reply to the end of DATA
	noMailbox styledReply // RCPT of a local part it does not know
	ndr       styledReply // the bounce after it accepted one (accept-then-bounce)
	full      styledReply // RCPT of a full mailbox
	overQuota styledReply // the end of DATA for a mailbox over its quota
	disabled  styledReply // RCPT of a disabled mailbox
}

// vars fill a styledReply's placeholders: {addr}, {local}, {domain},
// {host}, {ip}, {queue} (a Postfix queue id), {gsmtp} (a Google session
// id), {n} (a server number).
type vars struct {
	addr, local, domain string
	host                *Host
	token               uint64
}

func (v vars) expand(text string) string {
	if !strings.Contains(text, "{") {
		return text
	}
	return strings.NewReplacer(
		"{addr}", v.addr,
		"{local}", v.local,
		"{domain}", v.domain,
		"{host}", v.host.Name,
		"{ip}", v.host.IP,
		"{queue}", fmt.Sprintf("%010X", v.token&0xffffffffff),
		"{gsmtp}", fmt.Sprintf("%012x.%d", v.token>>16&0xffffffffffff, v.token%1000),
		"{n}", strconv.FormatUint(1000+v.token%9000, 10),
	).Replace(text)
}

// mtaStyles are the providers' wordings, by Host.Provider ("" and the
// providers not listed: Postfix's). Sources: the providers' published
// error pages (support.google.com/mail/answer/6596, aka.ms/EXOSmtpErrors),
// and the providers' replies of Replies.
var mtaStyles = map[string]mtaStyle{
	"": {
		delivered: styledReply{250, "2.0.0", "250 2.0.0 Ok: queued as {queue}"},
		noMailbox: styledReply{550, "5.1.1", "550 5.1.1 <{addr}>: Recipient address rejected: User unknown in virtual mailbox table"},
		ndr:       styledReply{550, "5.1.1", "550 5.1.1 <{addr}>: Recipient address rejected: User unknown in local recipient table"},
		full:      styledReply{552, "5.2.2", "552 5.2.2 <{addr}>: Recipient address rejected: Mailbox full"},
		overQuota: styledReply{552, "5.2.2", "552 5.2.2 <{addr}> Quota exceeded (mailbox for user is full)"},
		disabled:  styledReply{550, "5.2.1", "550 5.2.1 <{addr}>: Recipient address rejected: Mailbox disabled, not accepting messages"},
	},
	"google": {
		delivered: styledReply{250, "2.0.0", "250 2.0.0 OK {gsmtp} - gsmtp"},
		noMailbox: styledReply{550, "5.1.1", "550-5.1.1 The email account that you tried to reach does not exist. Please try 550-5.1.1 double-checking the recipient's email address for typos or 550-5.1.1 unnecessary spaces. For more information, go to 550 5.1.1  https://support.google.com/mail/?p=NoSuchUser {gsmtp} - gsmtp"},
		ndr:       styledReply{550, "5.1.1", "550-5.1.1 The email account that you tried to reach does not exist. Please try 550-5.1.1 double-checking the recipient's email address for typos or 550-5.1.1 unnecessary spaces. For more information, go to 550 5.1.1  https://support.google.com/mail/?p=NoSuchUser {gsmtp} - gsmtp"},
		full:      styledReply{452, "4.2.2", "452-4.2.2 The recipient's inbox is out of storage space. Please direct the 452-4.2.2 recipient to 452 4.2.2  https://support.google.com/mail/?p=OverQuotaTemp {gsmtp} - gsmtp"},
		overQuota: styledReply{452, "4.2.2", "452-4.2.2 The recipient's inbox is out of storage space. Please direct the 452-4.2.2 recipient to 452 4.2.2  https://support.google.com/mail/?p=OverQuotaTemp {gsmtp} - gsmtp"},
		disabled:  styledReply{550, "5.2.1", "550-5.2.1 The email account that you tried to reach is disabled. For more information, go to 550 5.2.1  https://support.google.com/mail/?p=DisabledUser {gsmtp} - gsmtp"},
	},
	"microsoft365": microsoftStyle("550 5.4.1 Recipient address rejected: Access denied. For more information see https://aka.ms/EXOSmtpErrors [{host}]"),
	"outlook":      microsoftStyle("550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302) [{host}]"),
	"yahoo": {
		delivered: styledReply{250, "", "250 ok dirdel"},
		noMailbox: styledReply{552, "", "552 1 Requested mail action aborted, mailbox not found"},
		ndr:       styledReply{554, "", "554 delivery error: dd This user doesn't have a {domain} account ({addr}) [0] - mta{n}.mail.gq1.yahoo.com"},
		full:      styledReply{452, "4.2.2", "452 4.2.2 Mailbox full - mta{n}.mail.gq1.yahoo.com"},
		overQuota: styledReply{452, "4.2.2", "452 4.2.2 Mailbox full - mta{n}.mail.gq1.yahoo.com"},
		disabled:  styledReply{554, "", "554 delivery error: dd This mailbox is disabled ({addr}). [0] - mta{n}.mail.gq1.yahoo.com"},
	},
	"proofpoint":  gatewayStyle,
	"mimecast":    gatewayStyle,
	"barracuda":   gatewayStyle,
	"cisco":       gatewayStyle,
	"spamexperts": gatewayStyle,
}

// microsoftStyle is Exchange Online's, with its refusal at RCPT.
func microsoftStyle(noMailbox string) mtaStyle {
	r := parseReplyLine(noMailbox)
	return mtaStyle{
		delivered: styledReply{250, "2.6.0", "250 2.6.0 <{queue}@mailworld.test> [InternalId={n}, Hostname={host}] Queued mail for delivery"},
		noMailbox: styledReply{r.code, r.enh, noMailbox},
		// Without directory-based edge blocking the directory lookup
		// misses after acceptance.
		ndr:       styledReply{550, "5.1.10", "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient {addr} not found by SMTP address lookup"},
		full:      styledReply{552, "5.2.2", "552 5.2.2 Mailbox full [{host}]"},
		overQuota: styledReply{554, "5.2.2", "554 5.2.2 mailbox full; STOREDRV.Deliver.Exception:QuotaExceededException.MapiExceptionShutoffQuotaExceeded; Failed to process message due to a permanent exception"},
		disabled:  styledReply{550, "5.2.1", "550 5.2.1 Requested action not taken: mailbox unavailable (disabled) [{host}]"},
	}
}

// gatewayStyle is a filtering gateway's: a Sendmail-like relay, whose
// bounce after acceptance quotes the customer's server behind it.
var gatewayStyle = mtaStyle{
	delivered: styledReply{250, "2.0.0", "250 2.0.0 {queue} Message accepted for delivery"},
	noMailbox: styledReply{550, "5.1.1", "550 5.1.1 <{addr}>... User unknown"},
	ndr:       styledReply{550, "5.1.1", "550 5.1.1 <{addr}>... User unknown"},
	full:      styledReply{552, "5.2.2", "552 5.2.2 <{addr}>... Mailbox full"},
	overQuota: styledReply{552, "5.2.2", "552 5.2.2 <{addr}>... Mailbox full"},
	disabled:  styledReply{550, "5.2.1", "550 5.2.1 <{addr}>... Mailbox disabled for this recipient"},
}

// styleOf returns provider's style, Postfix's for the others.
func styleOf(provider string) mtaStyle {
	if st, ok := mtaStyles[provider]; ok {
		return st
	}
	return mtaStyles[""]
}
