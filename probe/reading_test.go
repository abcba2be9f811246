package probe

import (
	"context"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
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
		{"550 5.7.23 SPF validation failed", "RFC 7372 x.7.23: the sender's SPF", want{class: smtpclient.Policy, aboutUs: true}},
		{"550 5.7.606 Access denied, banned sending IP [192.0.2.1]", "Microsoft 365, x.7.606-649: the sending IP", want{class: smtpclient.Policy, aboutUs: true}},
		// A specific policy code about one recipient blames no egress
		// address.
		{"550 5.7.129 RESOLVER.RST.RestrictedToRecipientsPermission; not authorized to send to this group",
			"Microsoft 365 x.7.129: a group that takes mail from its own people only", want{class: smtpclient.Policy}},
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

// TestRelayDeniedFromBackup: "Relay access denied" from a domain's only
// MX says no mail reaches the address (invalid / smtp_rejected); from a
// host met after the preferred MX could not be reached, it may be a backup
// MX that relays for the domain only when told to, and says nothing of
// the address (unknown / smtp_rejected).
func TestRelayDeniedFromBackup(t *testing.T) {
	const relay = "554 5.7.1 <{addr}>: Relay access denied"
	only := &world.Host{Name: "mx.relay-only.test", IP: "127.81.9.1"}
	down := &world.Host{Name: "mx1.relay-backup.test", IP: "127.81.9.2", Mode: world.HostRefuse}
	backup := &world.Host{Name: "mx2.relay-backup.test", IP: "127.81.9.3"}
	w := behaviourWorld(t, []behaviour{
		{hosts: []*world.Host{only}, domain: &world.Domain{Name: "relay-only.test", MX: mx(only.Name), UnknownReply: relay}},
		{hosts: []*world.Host{down, backup}, domain: &world.Domain{Name: "relay-backup.test", MX: mx(down.Name, backup.Name), UnknownReply: relay}},
	})
	e := startEnv(t, w, envOptions{})
	for _, c := range []struct {
		email  string
		status Status
	}{{"ann@relay-only.test", StatusInvalid}, {"ann@relay-backup.test", StatusUnknown}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r := e.engine.Verify(ctx, c.email)
		cancel()
		if r.Status != c.status || r.Reason != ReasonSMTPRejected {
			t.Errorf("%s: %s/%s, want %s/smtp_rejected", c.email, r.Status, r.Reason, c.status)
		}
	}
}

// TestPolicyAtMailTriesAnotherAddress: a refusal at MAIL FROM (550 5.7.23,
// the sender's SPF) is about the prober: the address cools for the host
// and a real-time validation asks again from the other one; both refused,
// the answer is unknown / smtp_rejected after one session from each.
func TestPolicyAtMailTriesAnotherAddress(t *testing.T) {
	h := &world.Host{Name: "mx.spf-mail.test", IP: "127.81.9.4", MailPolicy: world.MailRequireSPF}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: &world.Domain{Name: "spf-mail.test", MX: mx(h.Name), Mailboxes: ok("ann")}}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:2], GreylistCooldown: time.Minute}})
	r, inBudget := realtime(t, e, "ann@spf-mail.test")
	if r.Status != StatusUnknown || r.Reason != ReasonSMTPRejected || !inBudget {
		t.Fatalf("%s/%s within the budget %v, want unknown/smtp_rejected", r.Status, r.Reason, inBudget)
	}
	e.run.Log().Wait(2, 10*time.Second)
	if ss := e.run.Log().Sessions(); len(ss) != 2 || ss[0].Client == ss[1].Client {
		t.Errorf("sessions %+v: want one from each address", ss)
	}
}
