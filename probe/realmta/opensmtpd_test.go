package realmta

import (
	"net/netip"
	"testing"

	"github.com/verifyd/verifyd/internal/mtatest"
	"github.com/verifyd/verifyd/probe"
)

// OpenSMTPD 6.8.0p2 (Debian 12). Sources: the OpenSMTPD source at tag
// v6.8.0p2 (usr.sbin/smtpd/lka_session.c, smtp_session.c) and the
// package's manual pages smtpd.conf(5) and aliases(5). OpenSMTPD has no
// DNS block list and no greylisting of its own (smtpd.conf(5) has neither;
// both are filters, and Debian 12 packages none of those: its filters are
// dkimsign, rspamd and senderscore), so it has no such cases.
var (
	opensmtpdDebian = addSite(site{mta: mtatest.KindOpenSMTPD, setup: "debian", ip: netip.MustParseAddr("127.35.3.1"),
		domains: []string{"local.opensmtpd.test", "virt.opensmtpd.test", "nopm.opensmtpd.test", "shop.opensmtpd.test",
			"relay.opensmtpd.test"}})
	opensmtpdLimit = addSite(site{mta: mtatest.KindOpenSMTPD, setup: "limit", ip: netip.MustParseAddr("127.35.3.2"),
		domains: []string{"limit.opensmtpd.test"}})
)

// TestOpenSMTPD: OpenSMTPD with Debian's smtpd.conf, a local domain
// (the commented "match from any for domain" of that file), virtual
// domains with a table of virtual users, and a recipient limit.
func TestOpenSMTPD(t *testing.T) {
	needMTAs(t)
	t.Run("debian", func(t *testing.T) {
		t.Parallel()
		testOpenSMTPDDebian(t)
	})
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		testOpenSMTPDLimit(t)
	})
}

const (
	srcInvalidRecipient = "lka_session.c:414 (the user part is no system user: LKA_PERMFAIL with no message) and :228 (\"550 Invalid recipient\"), smtp_session.c:782 (\"%s: <%s>\"): no such user or alias"
	srcMailingList      = "lka_session.c:350-356 (the address is not in the virtual table, \"no aliases for virtual\": LKA_PERMFAIL, \"524 5.2.4 Mailing list expansion problem\"): no such address in the domain, whatever RFC 3463's words for X.2.4"
	srcOpenSMTPDAccept  = "smtp_session.c:915 (\"250 2.1.5 Destination address valid: Recipient ok\")"
)

// testOpenSMTPDDebian: local.opensmtpd.test delivered to local users;
// virt.opensmtpd.test and nopm.opensmtpd.test to the virtual users of
// /etc/mail/vusers (nopm has no postmaster); shop.opensmtpd.test to local
// users through an alias table of its own without postmaster (an action's
// "alias <table>", smtpd.conf(5)); /etc/aliases gets two error:
// entries an administrator wrote for a full and a disabled mailbox (not
// stock: OpenSMTPD knows no quota or account state at RCPT time).
func testOpenSMTPDDebian(t *testing.T) {
	cfg := mtatest.Config{
		Users: []string{"alice", "vmail"},
		Append: map[string]string{
			"/etc/smtpd.conf": `
# realmta: a local domain, virtual domains (smtpd.conf(5), table(5)).
table vusers file:/etc/mail/vusers
action "virtual" maildir virtual <vusers>
match from any for domain "local.opensmtpd.test" action "local"
match from any for domain "virt.opensmtpd.test" action "virtual"
match from any for domain "nopm.opensmtpd.test" action "virtual"
table shopaliases file:/etc/mail/aliases-shop
action "shop" maildir alias <shopaliases>
match from any for domain "shop.opensmtpd.test" action "shop"
`,
			"/etc/aliases": "full: error:552 5.2.2 Mailbox full\ngone: error:550 5.2.1 Mailbox disabled\n",
		},
		Files: map[string]string{
			"/etc/mail/vusers": `alice@virt.opensmtpd.test       vmail
postmaster@virt.opensmtpd.test  vmail
alice@nopm.opensmtpd.test       vmail
`,
			"/etc/mail/aliases-shop": "ann: alice\n",
		},
	}
	const accepted = `^250 2\.1\.5 Destination address valid: Recipient ok$`
	runSetup(t, opensmtpdDebian, mtatest.OpenSMTPD, cfg, []mtaCase{
		{name: "local user, capitals", email: "ALICE@local.opensmtpd.test", reply: accepted, want: valid, source: srcCaseOpensmtpd},
		{name: "virtual user, capitals", email: "Alice@virt.opensmtpd.test", reply: accepted, want: valid, source: srcCaseOpensmtpd},
		{name: "local user", email: "alice@local.opensmtpd.test", reply: accepted, want: valid, source: srcOpenSMTPDAccept},
		{name: "local unknown", email: "ghost@local.opensmtpd.test", reply: `^550 Invalid recipient: <ghost@local\.opensmtpd\.test>$`,
			want: noMailbox, source: srcInvalidRecipient},
		{name: "virtual user", email: "alice@virt.opensmtpd.test", reply: accepted, want: valid, source: srcOpenSMTPDAccept},
		{name: "virtual unknown", email: "ghost@virt.opensmtpd.test",
			reply: `^524 5\.2\.4 Mailing list expansion problem: <ghost@virt\.opensmtpd\.test>$`, want: noMailbox, source: srcMailingList},
		{name: "no postmaster: user", email: "alice@nopm.opensmtpd.test", reply: accepted, want: valid, source: srcOpenSMTPDAccept},
		{name: "no postmaster: unknown", email: "ghost@nopm.opensmtpd.test",
			reply: `^524 5\.2\.4 Mailing list expansion problem: <ghost@nopm\.opensmtpd\.test>$`, want: noMailbox, source: srcMailingList},
		{name: "no postmaster: postmaster", email: "postmaster@nopm.opensmtpd.test",
			reply: `^524 5\.2\.4 Mailing list expansion problem: <postmaster@nopm\.opensmtpd\.test>$`, want: noMailbox,
			source: srcMailingList + "; the address itself does not exist"},
		{name: "no postmaster, local delivery: alias", email: "ann@shop.opensmtpd.test", reply: accepted, want: valid,
			source: srcOpenSMTPDAccept},
		{name: "no postmaster, local delivery: unknown", email: "ghost@shop.opensmtpd.test",
			reply: `^550 Invalid recipient: <ghost@shop\.opensmtpd\.test>$`, want: noMailbox, source: srcInvalidRecipient},
		{name: "no postmaster, local delivery: postmaster", email: "postmaster@shop.opensmtpd.test",
			reply: `^550 Invalid recipient: <postmaster@shop\.opensmtpd\.test>$`, want: noMailbox,
			source: srcInvalidRecipient + "; the address itself does not exist"},
		{name: "relay refused", email: "someone@relay.opensmtpd.test", reply: `^550 Invalid recipient: <someone@relay\.opensmtpd\.test>$`,
			// The reply is the one of an unknown local user: no verifier can
			// tell the two apart from it, so either reason is right.
			want:   want(probe.StatusInvalid, probe.ReasonSMTPRejected, probe.ReasonMailboxNotFound),
			source: "lka_session.c:319-321 (no match rule accepts the envelope: LKA_PERMFAIL with no message) and :228 (\"550 Invalid recipient\"): the domain's own MX takes no mail for it, so it is undeliverable; OpenSMTPD words it as an unknown user (same code path), so mailbox_not_found is as right as smtp_rejected"},
		{name: "full (error: alias)", email: "full@local.opensmtpd.test", reply: `^552 5\.2\.2 Mailbox full: <full@local\.opensmtpd\.test>$`,
			want: full, source: "aliases(5) \"error:code message\" (admin configuration), lka_session.c:465-469; RFC 3463 X.2.2 mailbox full"},
		{name: "disabled (error: alias)", email: "gone@local.opensmtpd.test",
			reply: `^550 5\.2\.1 Mailbox disabled: <gone@local\.opensmtpd\.test>$`, want: undeliverable,
			source: "aliases(5) \"error:code message\" (admin configuration), lka_session.c:465-469; RFC 3463 X.2.1 mailbox disabled"},
	})
}

// testOpenSMTPDLimit: "smtp limit max-rcpt 3" (smtpd.conf(5)).
func testOpenSMTPDLimit(t *testing.T) {
	cfg := mtatest.Config{
		Users: []string{"u1", "u2", "u3", "u4"},
		Append: map[string]string{"/etc/smtpd.conf": `
# realmta: a recipient limit.
smtp limit max-rcpt 3
match from any for domain "limit.opensmtpd.test" action "local"
`},
	}
	runSetup(t, opensmtpdLimit, mtatest.OpenSMTPD, cfg, []mtaCase{
		limitCase("limit.opensmtpd.test", `^451 4\.5\.3 Too many recipients: Too many recipients$`,
			"smtpd.conf(5) \"smtp limit max-rcpt\"; smtp_session.c:2548 (\"451 4.5.3 … Too many recipients\"); RFC 3463 X.5.3 too many recipients; RFC 5321 §4.5.3.1.10"),
	})
}

// srcCaseOpensmtpd: why a capitalised spelling of a mailbox is the mailbox.
const srcCaseOpensmtpd = "spec §2.3: valid is a mailbox the server accepts, and alice exists; smtpd.conf(5) and table(5) do not say how OpenSMTPD compares a local part's case, so the reply the case checks is the plain session's own 250 to the capitalised spelling, not a documented one; RFC 5321 §4.1.2 asks hosts not to define case-sensitive local parts"
