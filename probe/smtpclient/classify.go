package smtpclient

import "strconv"

// Class is what a reply says about the address or the session, decided by
// the reply code and the enhanced status code (RFC 3463), never by the text.
// The table in README.md lists every class with its codes and what the
// engine concludes.
type Class uint8

// Classes. The zero value is Unknown.
const (
	// Unknown: a refusal whose codes say nothing the engine can use
	// (5.3.x system, 5.6.x content, bare 554 on RCPT, 3xx).
	Unknown Class = iota
	// Accepted: any 2xx.
	Accepted
	// NoMailbox: the mailbox does not exist (x.1.1, x.1.0, x.1.6 and the
	// other x.1.x on RCPT but x.1.2, x.1.3, x.1.7, x.1.8, x.1.10). Weak when
	// inferred from a bare 550, 551 or 553, or from 5.4.1 (see README.md).
	NoMailbox
	// Disabled: the mailbox exists and takes no mail (x.2.1 on RCPT).
	Disabled
	// Full: the mailbox exists and is over quota (x.2.2 on RCPT, 4xx or
	// 5xx). Weak when inferred from a bare 552.
	Full
	// BadDomain: the domain of the address has no mail system (x.1.2, and
	// x.1.10 null MX, RFC 7505).
	BadDomain
	// Syntax: the command or the address was not understood (x.5.x other
	// than x.5.3, x.1.3, bare 500, 501, 502, 504).
	Syntax
	// Policy: the server refuses the prober, not the mailbox (x.7.x; x.1.7
	// and x.1.8, the sender's address; any other permanent refusal of the
	// greeting, EHLO, STARTTLS or MAIL, Weak when without an enhanced code).
	Policy
	// Greylisted: a 4xx to RCPT (other than 421, too many recipients and
	// x.2.2): try the address again later, from a cooled egress address.
	Greylisted
	// TempFail: a 4xx to anything but RCPT (other than 421).
	TempFail
	// TooManyRecipients: the server's recipient limit for this transaction
	// is reached (x.5.3, RFC 3463 §3.6; or a bare 452 after at least one
	// accepted recipient, RFC 5321 §4.5.3.1.10). Check the rest of the
	// addresses in a new session.
	TooManyRecipients
	// ServiceUnavailable: 421, the server is closing the channel.
	ServiceUnavailable
)

var classNames = [...]string{
	Unknown:            "unknown",
	Accepted:           "accepted",
	NoMailbox:          "no_mailbox",
	Disabled:           "disabled",
	Full:               "full",
	BadDomain:          "bad_domain",
	Syntax:             "syntax",
	Policy:             "policy",
	Greylisted:         "greylisted",
	TempFail:           "temp_fail",
	TooManyRecipients:  "too_many_recipients",
	ServiceUnavailable: "service_unavailable",
}

// String returns the class's snake_case name, as used in logs and metrics.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Classification is a Class and how sure it is.
type Classification struct {
	Class Class
	// Weak is set when the class is inferred from a bare reply code (or a
	// code known to be used loosely) rather than stated by an enhanced
	// status code: the engine should lower its confidence, not its verdict.
	Weak bool
}

// Classify classifies reply r to command cmd (CmdBanner, CmdEHLO, CmdMail,
// CmdRcpt, ...). RCPT replies speak about the mailbox; every other reply
// speaks about the session, so a permanent refusal there is Policy (or
// Syntax), never NoMailbox. Classify(CmdRcpt, r) is ClassifyRcpt(r, 0).
func Classify(cmd string, r Reply) Classification {
	return classify(cmd, r.Code, r.Enhanced, 0)
}

// ClassifyRcpt classifies a reply to RCPT knowing how many recipients the
// server accepted earlier in the same transaction: a bare 452 after at least
// one acceptance is the recipient limit (RFC 5321 §4.5.3.1.10), not a
// temporary failure of this mailbox.
func ClassifyRcpt(r Reply, acceptedBefore int) Classification {
	return classify(CmdRcpt, r.Code, r.Enhanced, acceptedBefore)
}

func classify(cmd string, code int, e Enhanced, acceptedBefore int) Classification {
	switch {
	case code >= 200 && code < 300:
		return Classification{Class: Accepted}
	case code == CodeServiceUnavailable:
		return Classification{Class: ServiceUnavailable}
	case code < 400 || code >= 600:
		return Classification{Class: Unknown}
	}
	if e.Class != code/100 || (e.Subject == 0 && e.Detail == 0) {
		// x.0.0 is "other or undefined status": it says no more than the
		// bare code. A class that disagrees with the code cannot come from
		// ParseReply, but a hand-made Reply may carry one.
		e = Enhanced{}
	}
	if cmd == CmdRcpt {
		return classifyRcpt(code, e, acceptedBefore)
	}
	return classifySession(code, e)
}

func classifyRcpt(code int, e Enhanced, acceptedBefore int) Classification {
	switch {
	case !e.IsZero() && e.Subject == 5 && e.Detail == 3:
		return Classification{Class: TooManyRecipients}
	case e.IsZero() && code == CodeInsufficientStorage && acceptedBefore > 0:
		return Classification{Class: TooManyRecipients}
	case !e.IsZero() && e.Subject == 2 && e.Detail == 2:
		return Classification{Class: Full}
	case code/100 == 4:
		return Classification{Class: Greylisted}
	}
	if e.IsZero() {
		switch code {
		case CodeMailboxUnavailable, CodeUserNotLocal, CodeMailboxNameNotAllowed:
			return Classification{Class: NoMailbox, Weak: true}
		case CodeExceededStorage:
			return Classification{Class: Full, Weak: true}
		case CodeSyntaxError, CodeParamSyntaxError, CodeNotImplemented, CodeParamNotImplemented:
			return Classification{Class: Syntax}
		}
		return Classification{Class: Unknown}
	}
	switch e.Subject {
	case 1: // addressing status
		switch e.Detail {
		case 2, 10: // bad destination system; null MX (RFC 7505 §4.2)
			return Classification{Class: BadDomain}
		case 3: // bad destination mailbox address syntax
			return Classification{Class: Syntax}
		case 7, 8: // the sender's address: postfix delays sender checks to RCPT
			return Classification{Class: Policy}
		}
		return Classification{Class: NoMailbox}
	case 2: // mailbox status
		if e.Detail == 1 {
			return Classification{Class: Disabled}
		}
	case 4: // network and routing status
		if e.Detail == 1 {
			// "No answer from host" cannot be true of a server that is
			// answering; Microsoft 365 directory-based edge blocking
			// uses 550 5.4.1 for recipients it does not know.
			return Classification{Class: NoMailbox, Weak: true}
		}
	case 5: // mail delivery protocol status
		return Classification{Class: Syntax}
	case 7: // security or policy status
		return Classification{Class: Policy}
	}
	return Classification{Class: Unknown}
}

func classifySession(code int, e Enhanced) Classification {
	if code/100 == 4 {
		return Classification{Class: TempFail}
	}
	if e.IsZero() {
		switch code {
		case CodeSyntaxError, CodeParamSyntaxError, CodeNotImplemented, CodeParamNotImplemented:
			return Classification{Class: Syntax}
		}
		return Classification{Class: Policy, Weak: true}
	}
	switch {
	case e.Subject == 5:
		return Classification{Class: Syntax}
	case e.Subject == 7, e.Subject == 1 && (e.Detail == 7 || e.Detail == 8):
		return Classification{Class: Policy}
	}
	return Classification{Class: Policy, Weak: true}
}
