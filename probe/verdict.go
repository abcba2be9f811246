package probe

// Status is the verdict of spec §2.3.
type Status string

// Verdicts.
const (
	StatusValid      Status = "valid"
	StatusInvalid    Status = "invalid"
	StatusRisky      Status = "risky"
	StatusUnknown    Status = "unknown"
	StatusDisposable Status = "disposable"
	StatusSpamtrap   Status = "spamtrap"
)

// Statuses lists every verdict, in the order reports list them.
var Statuses = []Status{StatusValid, StatusInvalid, StatusRisky, StatusUnknown, StatusDisposable, StatusSpamtrap}

// Reason is checks.reason of spec §2.3.
type Reason string

// Reasons.
const (
	ReasonNone            Reason = ""
	ReasonOK              Reason = "ok"
	ReasonSyntax          Reason = "syntax_error"
	ReasonDomainNotFound  Reason = "domain_not_found"
	ReasonNoMX            Reason = "no_mx_record"
	ReasonSMTPRejected    Reason = "smtp_rejected"
	ReasonMailboxNotFound Reason = "mailbox_not_found"
	ReasonCatchAll        Reason = "catch_all"
	ReasonRoleBased       Reason = "role_based"
	ReasonDisposable      Reason = "disposable_domain"
	ReasonTimeout         Reason = "timeout"
	ReasonConnection      Reason = "connection_error"
)

// DNSOutcome is what the MX stage learnt.
type DNSOutcome uint8

// DNS outcomes.
const (
	DNSRouted   DNSOutcome = iota // MX hosts (or an implicit MX) found
	DNSNXDomain                   // the domain does not exist
	DNSNoMX                       // null MX (RFC 7505), neither MX nor A/AAAA, or no MX host with an address
	DNSTimeout                    // no upstream answered in time
	DNSFailure                    // SERVFAIL, REFUSED: a temporary failure
)

// SMTPOutcome is what the SMTP stage learnt of the real recipient.
type SMTPOutcome uint8

// SMTP outcomes. The RCPT ones come from the reply classifier, which reads
// the code and the RFC 3463 enhanced status, never the text.
const (
	SMTPNotTried      SMTPOutcome = iota // no session (verdict decided earlier)
	SMTPConnRefused                      // every MX refused or was unreachable
	SMTPTimeout                          // connect, banner or a reply timed out
	SMTPBusy                             // 421 / 4.7.0 on connect or later
	SMTPAccepted                         // 250 to RCPT
	SMTPNoMailbox                        // 5.1.1 and friends: no such mailbox
	SMTPNoMailboxWeak                    // a bare 550/551/553 with no enhanced code
	SMTPDisabled                         // 5.2.1 mailbox disabled
	SMTPFull                             // 5.2.2 mailbox full
	SMTPPolicy                           // 5.7.x: the prober is blocked, not the mailbox
	SMTPGreylisted                       // 4xx left after the retries the budget allowed
	SMTPBadDomain                        // 5.1.2: the server does not handle the domain
	SMTPRejected                         // another permanent failure that names no cause
	SMTPProtocol                         // malformed replies, TLS failure, session broke
	SMTPSyntax                           // x.1.3: the MX cannot take the address's syntax
	SMTPNoUTF8                           // a UTF-8 local part, and the MX offers no SMTPUTF8
)

// CatchAll is what the catch-all probe learnt of the domain.
type CatchAll uint8

// Catch-all findings.
const (
	CatchAllUnknown CatchAll = iota // not probed, or the probe got no answer
	CatchAllNo                      // a random local part was rejected
	CatchAllYes                     // a random local part was accepted
)

// Evidence is everything the decision table reads.
type Evidence struct {
	SyntaxOK   bool
	Spamtrap   bool
	Disposable bool
	Role       bool
	Free       bool
	DNS        DNSOutcome
	SMTP       SMTPOutcome
	CatchAll   CatchAll
	// Auth counts positive authentication signals of the domain (SPF with
	// -all or ~all, DMARC with p=quarantine or reject, MTA-STS, DKIM key
	// found); each nudges the score up a little.
	Auth int
}

// Decide is the engine's decision table: one verdict, one reason and a score
// from the evidence. probe/README.md prints the same table; TestDecideTable
// keeps them in step.
//
// Rows are applied in order; the first that matches decides:
//
//	syntax fails                       invalid     syntax_error        0
//	known spamtrap                     spamtrap    (none)              0
//	disposable domain                  disposable  disposable_domain   0
//	NXDOMAIN                           invalid     domain_not_found    0
//	null MX, no MX nor A, no MX addr   invalid     no_mx_record        0
//	DNS timed out                      unknown     timeout             30
//	DNS failed (SERVFAIL, REFUSED)     unknown     connection_error    30
//	RCPT accepted, domain catch-all    risky       catch_all           55
//	RCPT accepted                      valid       ok / role_based     90 / 75
//	5.1.1 no such mailbox              invalid     mailbox_not_found   2
//	bare 550 without enhanced code     invalid     mailbox_not_found   10
//	5.2.1 mailbox disabled             invalid     smtp_rejected       5
//	5.1.2 domain not handled           invalid     smtp_rejected       5
//	5.2.2 mailbox full                 risky       smtp_rejected       40
//	5.7.x policy block of the prober   unknown     smtp_rejected       30
//	other permanent failure            unknown     smtp_rejected       25
//	greylisted past the budget         unknown     timeout             30
//	timeout                            unknown     timeout             30
//	421 busy                           unknown     connection_error    30
//	connection refused                 unknown     connection_error    25
//	protocol error                     unknown     connection_error    25
//
// Score adjustments, each bounded so the verdict bands never overlap
// (valid 65-98, risky 35-63, unknown 20-30, invalid, disposable and
// spamtrap 0-10), so a higher score always means better evidence of
// deliverability:
//   - valid whose catch-all probe got no answer: -10 (the acceptance proves
//     less when the domain might accept anything);
//   - role-based address: -15 on valid, -5 on risky;
//   - each positive authentication signal: +2, at most +8, on valid and risky.
func Decide(ev Evidence) (Status, Reason, int) {
	switch {
	case !ev.SyntaxOK:
		return StatusInvalid, ReasonSyntax, 0
	case ev.Spamtrap:
		return StatusSpamtrap, ReasonNone, 0
	case ev.Disposable:
		return StatusDisposable, ReasonDisposable, 0
	}
	switch ev.DNS {
	case DNSNXDomain:
		return StatusInvalid, ReasonDomainNotFound, 0
	case DNSNoMX:
		return StatusInvalid, ReasonNoMX, 0
	case DNSTimeout:
		return StatusUnknown, ReasonTimeout, 30
	case DNSFailure:
		return StatusUnknown, ReasonConnection, 30
	}
	auth := min(ev.Auth, 4) * 2
	switch ev.SMTP {
	case SMTPAccepted:
		if ev.CatchAll == CatchAllYes {
			score := 55 + auth
			if ev.Role {
				score -= 5
			}
			return StatusRisky, ReasonCatchAll, score
		}
		score := 90 + auth
		if ev.CatchAll == CatchAllUnknown {
			score -= 10
		}
		if ev.Role {
			return StatusValid, ReasonRoleBased, score - 15
		}
		return StatusValid, ReasonOK, score
	case SMTPNoMailbox:
		return StatusInvalid, ReasonMailboxNotFound, 2
	case SMTPNoMailboxWeak:
		return StatusInvalid, ReasonMailboxNotFound, 10
	case SMTPDisabled, SMTPBadDomain, SMTPNoUTF8:
		return StatusInvalid, ReasonSMTPRejected, 5
	case SMTPSyntax:
		return StatusInvalid, ReasonSyntax, 5
	case SMTPFull:
		score := 40 + auth
		if ev.Role {
			score -= 5
		}
		return StatusRisky, ReasonSMTPRejected, score
	case SMTPPolicy:
		return StatusUnknown, ReasonSMTPRejected, 30
	case SMTPRejected:
		return StatusUnknown, ReasonSMTPRejected, 25
	case SMTPGreylisted:
		return StatusUnknown, ReasonTimeout, 30
	case SMTPTimeout:
		return StatusUnknown, ReasonTimeout, 30
	case SMTPBusy:
		return StatusUnknown, ReasonConnection, 30
	case SMTPConnRefused, SMTPProtocol:
		return StatusUnknown, ReasonConnection, 25
	}
	// SMTPNotTried with a routed domain: the engine always probes a routed
	// domain, so this is a bug upstream; say unknown rather than guess.
	return StatusUnknown, ReasonConnection, 20
}
