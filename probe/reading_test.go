package probe

import (
	"testing"

	"github.com/verifyd/verifyd/probe/smtpclient"
)

// TestReadRcpt reads real replies to RCPT in the order of reading.go: a
// specific enhanced code, then the words, then (left ambiguous, for the
// control) the bare code. Each row names the software that sends the reply
// and where its wording is documented; the expected reading comes from
// what the software means by it, not from the engine.
func TestReadRcpt(t *testing.T) {
	type want struct {
		class     smtpclient.Class
		aboutUs   bool
		ambiguous bool
	}
	for _, c := range []struct {
		reply  string
		source string
		want   want
	}{
		// No such mailbox, by code.
		{"550 5.1.1 <zed@virt.test>: Recipient address rejected: User unknown in virtual mailbox table",
			"Postfix smtpd_check.c, virtual_mailbox_maps", want{class: smtpclient.NoMailbox}},
		// No such mailbox, in words only: Exim and OpenSMTPD send no
		// enhanced code.
		{"550 Unrouteable address", "Exim verify.c (verify = recipient, no router accepted the address)", want{class: smtpclient.NoMailbox}},
		{"550 Unknown user", "Exim redirect router :fail: (Debian's exim4-config local_user)", want{class: smtpclient.NoMailbox}},
		{"550 Invalid recipient: <zed@virt.test>", "OpenSMTPD smtp_session.c, LKA_PERMFAIL", want{class: smtpclient.NoMailbox}},
		{"550 5.7.1 User unknown", "a policy code whose words say no such user", want{class: smtpclient.NoMailbox}},
		// About the client or the sender.
		{"554 5.7.1 Service unavailable; Client host [127.0.0.1] blocked using dnsbl.test",
			"Postfix smtpd_check.c, reject_rbl_client", want{class: smtpclient.Policy, aboutUs: true}},
		{"550 5.7.26 This mail has been blocked because the sender is unauthenticated.",
			"Gmail, DMARC (RFC 7372 x.7.26: multiple authentication checks failed)", want{class: smtpclient.Policy, aboutUs: true}},
		// The mailbox exists and takes no mail.
		{"552 5.2.2 Mailbox full", "RFC 3463 x.2.2", want{class: smtpclient.Full}},
		{"550 5.7.13 User account disabled", "RFC 5248's registry: x.7.13", want{class: smtpclient.Disabled}},
		// Relaying refused: the host does not take mail for the domain.
		{"554 5.7.1 <zed@other.test>: Relay access denied", "Postfix smtpd_check.c, reject_unauth_destination",
			want{class: smtpclient.BadDomain}},
		// Nothing in the words: the control reads them.
		{"550 5.7.1 Recipient not authorized", "on-premises Exchange", want{class: smtpclient.Policy, ambiguous: true}},
		{"554 Recipient address rejected", "a bare 554", want{class: smtpclient.Unknown, ambiguous: true}},
		{"550 Access denied", "a bare 550", want{class: smtpclient.NoMailbox, ambiguous: true}},
		// A greylisting keeps its code's reading whatever its words.
		{"450 4.2.0 <zed@virt.test>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/virt.test.html",
			"postgrey", want{class: smtpclient.Greylisted}},
	} {
		r, err := smtpclient.ParseReply([]byte(c.reply + "\r\n"))
		if err != nil {
			t.Fatalf("%q: %v", c.reply, err)
		}
		rd := readRcpt(nil, r, smtpclient.ClassifyRcpt(r, 0))
		got := want{class: rd.Class, aboutUs: rd.aboutUs, ambiguous: rd.ambiguous}
		if got != c.want {
			t.Errorf("%q (%s): %+v, want %+v", c.reply, c.source, got, c.want)
		}
	}
}
