package probe

import (
	"github.com/verifyd/verifyd/probe/smtpclient"
)

// A refusal of RCPT is read in this order; the first step that says
// something decides (probe/README.md, "Reading a refusal"):
//
//  1. the provider's own rules, for a host whose fingerprint is known;
//  2. a specific enhanced status code (RFC 3463, RFC 5248's registry):
//     x.1.1 no such mailbox, x.2.2 full, x.7.26 the sender's
//     authentication, …;
//  3. the words of the reply (smtpclient.ReadWording: Postfix's, Exim's,
//     OpenSMTPD's, the big providers' stock texts);
//  4. the positive control, for a refusal still ambiguous
//     (ambiguousRefusal): postmaster@domain, a recipient this host
//     accepted before, and a random local part, asked in the same session
//     (readRefusals);
//  5. the bare code (a 550 is no such mailbox, weakly).
//
// A refusal is about the prober (the egress address, the sender) only when
// something says so: its words, a specific code about the sender or the
// client (aboutUsCode), a refusal at the greeting, EHLO or MAIL, or a
// known-good recipient refused alike. Only
// such a refusal cools the (egress, MX) pair and counts towards the
// address's reputation; a policy code alone does not.

// readBy is the step that read a reply.
type readBy uint8

const (
	byCode     readBy = iota // the code and enhanced code (steps 2 and 5)
	byProvider               // the provider's rule (step 1)
	byWording                // the reply's words (step 3)
	byControl                // the positive control (step 4)
)

// rcptReading is what a reply to RCPT says.
type rcptReading struct {
	smtpclient.Classification
	by readBy
	// aboutUs: the refusal is about the prober, not the mailbox.
	aboutUs bool
	// ambiguous: a refusal steps 1 to 3 could not read, for the positive
	// control (step 4) to try.
	ambiguous bool
}

// readRcpt reads reply r to RCPT, which the code-only classifier read as
// cls (smtpclient.ClassifyRcpt), with steps 1 to 3; step 4 is
// readRefusals', on what this leaves ambiguous.
func readRcpt(prov *Provider, r smtpclient.Reply, cls smtpclient.Classification) rcptReading {
	if c, ruled := prov.classify(r, cls); ruled {
		return rcptReading{Classification: c, by: byProvider}
	}
	rd := rcptReading{Classification: cls}
	if r.Code/100 != 5 {
		// Temporary replies keep their codes' reading: a greylisting
		// is retried whatever its words.
		return rd
	}
	e := r.Enhanced
	if specificCode(e) {
		rd.aboutUs = rd.Class == smtpclient.Policy && aboutUsCode(e)
		if e.Subject == 7 && e.Detail == 13 { // user account disabled (RFC 5248's registry)
			rd.Class, rd.Weak = smtpclient.Disabled, false
		}
		return rd
	}
	w, _ := smtpclient.ReadWording(r.Text())
	rd.by = byWording
	switch w {
	case smtpclient.WordingNoMailbox:
		// Words without a specific code: as sure as a bare 550, which
		// they explain.
		rd.Classification = smtpclient.Classification{Class: smtpclient.NoMailbox, Weak: true}
		return rd
	case smtpclient.WordingAboutUs:
		rd.Classification = smtpclient.Classification{Class: smtpclient.Policy}
		rd.aboutUs = true
		return rd
	case smtpclient.WordingFull:
		rd.Classification = smtpclient.Classification{Class: smtpclient.Full, Weak: e.IsZero()}
		return rd
	case smtpclient.WordingDisabled:
		rd.Classification = smtpclient.Classification{Class: smtpclient.Disabled}
		return rd
	case smtpclient.WordingTooManyRecipients:
		// A cut of the transaction (RFC 5321 §4.5.3.1.10: a 552 for
		// too many recipients is to be treated as temporary).
		rd.Classification = smtpclient.Classification{Class: smtpclient.TooManyRecipients}
		return rd
	case smtpclient.WordingNoRelay:
		// The host does not take mail for the domain: no mail reaches
		// the address through it (RFC 5321 §3.6.2's relaying refused).
		rd.Classification = smtpclient.Classification{Class: smtpclient.BadDomain}
		return rd
	}
	rd.by = byCode
	if vague(e) {
		// x.2.0, x.3.0, x.4.0 and x.5.0 say no more than the bare
		// code: read them as such.
		rd.Classification = smtpclient.ClassifyRcpt(smtpclient.Reply{Code: r.Code, Lines: r.Lines}, 0)
	}
	rd.ambiguous = ambiguousRefusal(r)
	return rd
}

// vague reports the generic codes that name a subject but no cause:
// x.2.0 (other mailbox status), x.3.0 (other mail system status), x.4.0
// (other network status) and x.5.0 (other protocol status, which
// Microsoft gives to unknown recipients).
func vague(e smtpclient.Enhanced) bool {
	return e.Detail == 0 && (e.Subject == 2 || e.Subject == 3 || e.Subject == 4 || e.Subject == 5)
}

// specificCode reports whether enhanced code e says more than its class:
// not zero, and none of the codes servers use for any refusal — x.1.0,
// x.2.0, x.2.4, x.3.0, x.4.0, x.4.1, x.5.0, x.7.0 and x.7.1 (other or
// undefined status, the catch-all "delivery not authorized", Microsoft's
// x.4.1 and x.5.0, OpenSMTPD's x.2.4) — whose words are read first.
func specificCode(e smtpclient.Enhanced) bool {
	if e.IsZero() || e.Subject == 0 && e.Detail == 0 {
		return false
	}
	switch [2]int{e.Subject, e.Detail} {
	case [2]int{1, 0}, [2]int{2, 0}, [2]int{2, 4}, [2]int{3, 0}, [2]int{4, 0}, [2]int{4, 1}, [2]int{5, 0},
		[2]int{7, 0}, [2]int{7, 1}:
		return false
	}
	return true
}

// aboutUsCode reports the specific codes that name the sender or the
// client: x.1.7 and x.1.8 (the sender's address, RFC 3463), x.7.20 to
// x.7.29 (the sender's authentication, reverse DNS: RFC 7372, RFC 8601's
// registry entries), and Microsoft's x.7.500 to x.7.799 (the sending IP
// address or tenant banned or blocked). Other specific x.7 codes may
// refuse one recipient — x.7.2 a list's expansion, x.7.17 and x.7.18 an
// owner change, Microsoft's x.7.129 and x.7.133-136 a group that takes mail
// from its own people only — and blame no egress address.
func aboutUsCode(e smtpclient.Enhanced) bool {
	switch e.Subject {
	case 1:
		return e.Detail == 7 || e.Detail == 8
	case 7:
		return e.Detail >= 20 && e.Detail <= 29 || e.Detail >= 500 && e.Detail <= 799
	}
	return false
}

// ambiguousRefusal reports a permanent refusal of a RCPT whose code may be
// about the prober as well as the mailbox, and whose words did not say
// which: a bare 550 or 554 (or with x.0.0 or a vague code), a generic
// x.7.0 or x.7.1, or a x.2.4. readRefusals reads it with the positive
// control.
func ambiguousRefusal(r smtpclient.Reply) bool {
	if r.Code/100 != 5 {
		return false
	}
	e := r.Enhanced
	switch {
	case e.Class != 5 || e.Subject == 0 && e.Detail == 0 || vague(e):
		return r.Code == 550 || r.Code == 554
	case e.Subject == 7:
		return e.Detail == 0 || e.Detail == 1
	}
	return e.Subject == 2 && e.Detail == 4
}
