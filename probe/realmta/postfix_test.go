package realmta

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/mtatest"
)

// Postfix 3.7.11 (Debian 12). Sources: the Postfix source at tag v3.7.11
// (postfix/src/smtpd/smtpd_check.c, smtpd.c, global/mail_params.h) and the
// package's manual pages: postconf(5), access(5).
var (
	postfixDebian = addSite(site{mta: mtatest.KindPostfix, setup: "debian", ip: netip.MustParseAddr("127.35.1.1"),
		domains: []string{"local.postfix.test", "virt.postfix.test", "nopm.postfix.test", "relay.postfix.test"}})
	postfixClassic = addSite(site{mta: mtatest.KindPostfix, setup: "classic", ip: netip.MustParseAddr("127.35.1.2"),
		domains: []string{"classic.postfix.test", "elsewhere.postfix.test"}})
	postfixGrey = addSite(site{mta: mtatest.KindPostfix, setup: "grey", ip: netip.MustParseAddr("127.35.1.3"),
		domains: []string{"grey.postfix.test"}})
	postfixLimit = addSite(site{mta: mtatest.KindPostfix, setup: "limit", ip: netip.MustParseAddr("127.35.1.4"),
		domains: []string{"limit.postfix.test"}})
	// postgreyPostfix is the policy server of the grey setup.
	postgreyPostfix = netip.MustParseAddrPort("127.35.4.1:10023")
)

// TestPostfix: Postfix as Debian installs it ("Internet Site"), with a
// local domain and virtual mailbox domains as VIRTUAL_README sets them up;
// the classic restrictions (reject_unauth_destination, a DNS block list);
// postgrey; a recipient limit.
func TestPostfix(t *testing.T) {
	needMTAs(t)
	t.Run("debian", func(t *testing.T) {
		t.Parallel()
		testPostfixDebian(t)
	})
	t.Run("classic", func(t *testing.T) {
		t.Parallel()
		testPostfixClassic(t)
	})
	t.Run("grey", func(t *testing.T) {
		t.Parallel()
		testPostfixGrey(t)
	})
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		testPostfixLimit(t)
	})
}

// testPostfixDebian: Debian's Postfix with local.postfix.test in
// mydestination (local users from /etc/passwd), two virtual mailbox
// domains (virt has postmaster in its table, nopm has none: common,
// though against RFC 5321 §4.5.1), and an access map an administrator
// wrote for a full and a disabled mailbox (not stock: Postfix has no
// quota or account state at RCPT time).
func testPostfixDebian(t *testing.T) {
	const (
		userUnknownLocal   = `^550 5\.1\.1 <%s>: Recipient address rejected: User unknown in local recipient table$`
		userUnknownVirtual = `^550 5\.1\.1 <%s>: Recipient address rejected: User unknown in virtual mailbox table$`
		srcLocal           = "smtpd_check.c:5396 (check_rcpt_maps, RESOLVE_CLASS_LOCAL: not in local_recipient_maps, unknown_local_recipient_reject_code 550, 5.1.1); RFC 3463 X.1.1 bad destination mailbox address"
		srcVirtual         = "smtpd_check.c:5412 (check_rcpt_maps, RESOLVE_CLASS_VIRTUAL: not in virtual_mailbox_maps, 550 5.1.1); RFC 3463 X.1.1"
		srcAccepted        = "250 2.1.5: smtpd accepts a listed recipient (postconf(5) smtpd_reject_unlisted_recipient); the random local part is refused 5.1.1, so the domain is no catch-all"
	)
	cfg := mtatest.Config{
		Users: []string{"alice", "full", "gone", "full2", "gone2"},
		Append: map[string]string{"/etc/postfix/main.cf": `
# realmta: a local domain, virtual mailbox domains (VIRTUAL_README), an
# administrator's access map.
mydestination = $myhostname, local.postfix.test, localhost
virtual_mailbox_domains = virt.postfix.test, nopm.postfix.test
virtual_mailbox_base = /var/mail/vhosts
virtual_mailbox_maps = hash:/etc/postfix/vmailbox
smtpd_recipient_restrictions = check_recipient_access hash:/etc/postfix/recipient_access
`},
		Files: map[string]string{
			"/etc/postfix/vmailbox": `alice@virt.postfix.test       virt.postfix.test/alice/
postmaster@virt.postfix.test  virt.postfix.test/postmaster/
alice@nopm.postfix.test       nopm.postfix.test/alice/
`,
			"/etc/postfix/recipient_access": `full@local.postfix.test   552 5.2.2 Mailbox full
gone@local.postfix.test   550 5.2.1 Mailbox disabled
full2@local.postfix.test  REJECT Mailbox full
gone2@local.postfix.test  REJECT Mailbox disabled
`,
		},
		Setup: []string{"postmap /etc/postfix/vmailbox /etc/postfix/recipient_access"},
	}
	runSetup(t, postfixDebian, mtatest.Postfix, cfg, []mtaCase{
		{name: "local user, capitals", email: "ALICE@local.postfix.test", reply: `^250 2\.1\.5 Ok$`, want: valid, source: srcCasePostfix},
		{name: "virtual user, capitals", email: "Alice@virt.postfix.test", reply: `^250 2\.1\.5 Ok$`, want: valid, source: srcCasePostfix},
		{name: "local user", email: "alice@local.postfix.test", reply: `^250 2\.1\.5 Ok$`, want: valid, source: srcAccepted},
		{name: "local unknown", email: "ghost@local.postfix.test", reply: fmt.Sprintf(userUnknownLocal, `ghost@local\.postfix\.test`),
			want: noMailbox, source: srcLocal},
		{name: "virtual user", email: "alice@virt.postfix.test", reply: `^250 2\.1\.5 Ok$`, want: valid, source: srcAccepted},
		{name: "virtual unknown", email: "ghost@virt.postfix.test", reply: fmt.Sprintf(userUnknownVirtual, `ghost@virt\.postfix\.test`),
			want: noMailbox, source: srcVirtual},
		{name: "no postmaster: user", email: "alice@nopm.postfix.test", reply: `^250 2\.1\.5 Ok$`, want: valid, source: srcAccepted},
		{name: "no postmaster: unknown", email: "ghost@nopm.postfix.test", reply: fmt.Sprintf(userUnknownVirtual, `ghost@nopm\.postfix\.test`),
			want: noMailbox, source: srcVirtual},
		{name: "no postmaster: postmaster", email: "postmaster@nopm.postfix.test", reply: fmt.Sprintf(userUnknownVirtual, `postmaster@nopm\.postfix\.test`),
			want: noMailbox, source: srcVirtual + "; postmaster is exempt only in local domains (smtpd_check.c:5386), not in virtual ones: the address itself does not exist"},
		{name: "relay refused (stock: defer_unauth_destination)", email: "someone@relay.postfix.test", budget: 4 * time.Second,
			reply: `^454 4\.7\.1 <someone@relay\.postfix\.test>: Relay access denied$`, want: temporarilyNone,
			source: "postconf(5) smtpd_relay_restrictions, default permit_mynetworks, permit_sasl_authenticated, defer_unauth_destination (Debian's postinst writes the same); defer_unauth_destination: \"Reject the same requests as reject_unauth_destination, with a non-permanent error code\" (smtpd_check.c:4655, relay_domains_reject_code - 100, 4.7.1): a temporary refusal, so spec §2.3's unknown; the engine's reason for a 4xx still there when the budget ran out is timeout"},
		{name: "full (access map, numeric)", email: "full@local.postfix.test",
			reply: `^552 5\.2\.2 <full@local\.postfix\.test>: Recipient address rejected: Mailbox full$`, want: full,
			source: "access(5) \"5NN text\" (admin configuration); RFC 3463 X.2.2 mailbox full: the mailbox exists but cannot take mail now"},
		{name: "disabled (access map, numeric)", email: "gone@local.postfix.test",
			reply: `^550 5\.2\.1 <gone@local\.postfix\.test>: Recipient address rejected: Mailbox disabled$`, want: undeliverable,
			source: "access(5) \"5NN text\" (admin configuration); RFC 3463 X.2.1 mailbox disabled, not accepting messages"},
		{name: "full (access map, REJECT)", email: "full2@local.postfix.test",
			reply: `^554 5\.7\.1 <full2@local\.postfix\.test>: Recipient address rejected: Mailbox full$`, want: full,
			source: "access(5) \"REJECT optional text\": access_map_reject_code 554 and 5.7.1 (smtpd_check.c:2420) whatever the text; the administrator's words say the mailbox is full"},
		{name: "disabled (access map, REJECT)", email: "gone2@local.postfix.test",
			reply: `^554 5\.7\.1 <gone2@local\.postfix\.test>: Recipient address rejected: Mailbox disabled$`, want: undeliverable,
			source: "access(5) \"REJECT optional text\" (smtpd_check.c:2420, 554 5.7.1); the administrator's words say the mailbox is disabled"},
	})
}

// testPostfixClassic: the restrictions of Postfix's own documentation
// (SMTPD_ACCESS_README, postconf(5) reject_rbl_client): relaying refused
// with reject_unauth_destination, and a DNS block list at RCPT time (the
// default smtpd_delay_reject = yes).
func testPostfixClassic(t *testing.T) {
	const (
		rblReply      = `^554 5\.7\.1 Service unavailable; Client host \[127\.35\.9\.1\] blocked using dnsbl\.test$`
		srcRBL        = "postconf(5) reject_rbl_client and default_rbl_reply (mail_params.h:2407: \"$rbl_code Service unavailable; $rbl_class [$rbl_what] blocked using $rbl_domain\", maps_rbl_reject_code 554, 5.7.1): the refusal names the client, not the mailbox"
		engineBlocked = `reject: RCPT from unknown\[127\.35\.9\.1\]: 554 5\.7\.1 Service unavailable; Client host \[127\.35\.9\.1\] blocked using dnsbl\.test; from=<verify@prober\.realmta\.test>`
	)
	cfg := mtatest.Config{
		Users: []string{"alice"},
		Append: map[string]string{"/etc/postfix/main.cf": `
# realmta: the classic restrictions, a DNS block list at RCPT.
mydestination = $myhostname, classic.postfix.test, localhost
smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject_unauth_destination
smtpd_recipient_restrictions = permit_mynetworks, reject_unauth_destination, reject_rbl_client dnsbl.test
`},
	}
	listedFirst := []netip.Addr{listedA, cleanA}
	allListed := []netip.Addr{listedA, listedB}
	runSetup(t, postfixClassic, mtatest.Postfix, cfg, []mtaCase{
		{name: "relay refused (reject_unauth_destination)", email: "someone@elsewhere.postfix.test",
			reply: `^554 5\.7\.1 <someone@elsewhere\.postfix\.test>: Relay access denied$`, want: undeliverable,
			source: "smtpd_check.c:1777 (reject_unauth_destination: \"Relay access denied\", relay_domains_reject_code 554, 5.7.1 at smtpd_check.c:4651): the domain's own MX takes no mail for it, so it is undeliverable, and the refusal is not about the prober"},
		{name: "DNSBL lists one egress address: user", email: "alice@classic.postfix.test", pool: listedFirst,
			reply: rblReply, want: valid, logged: engineBlocked,
			source: srcRBL + "; asked again from the unlisted address, the mailbox is accepted (250 2.1.5)"},
		{name: "DNSBL lists one egress address: unknown", email: "ghost@classic.postfix.test", pool: listedFirst,
			reply: rblReply, want: noMailbox, logged: engineBlocked,
			source: srcRBL + "; from the unlisted address: 550 5.1.1 User unknown in local recipient table (smtpd_check.c:5396)"},
		{name: "DNSBL lists every egress address: user", email: "alice@classic.postfix.test", pool: allListed,
			reply: rblReply, want: blocked, source: srcRBL + "; no address is unlisted: nothing is known of the mailbox"},
		{name: "DNSBL lists every egress address: unknown", email: "ghost@classic.postfix.test", pool: allListed,
			reply: rblReply, want: blocked,
			source: srcRBL + "; smtpd_recipient_restrictions run before the implicit reject_unlisted_recipient (smtpd_check.c:5139-5176), so an unknown recipient gets the block list's refusal too"},
	})
}

// testPostfixGrey: postgrey as its README and Debian's package set it up
// (check_policy_service inet:…:10023 in smtpd_recipient_restrictions),
// greylisting for 2 s (--delay=2).
func testPostfixGrey(t *testing.T) {
	mtatest.Postgrey(t, mtatest.Config{Addr: postgreyPostfix, Hostname: postfixGrey.host(), Args: []string{"--delay=2"}})
	const greylisted = `^450 4\.2\.0 <%s>: Recipient address rejected: Greylisted, see http://postgrey\.schweikert\.ch/help/grey\.postfix\.test\.html$`
	const srcGrey = "postgrey(8) --delay (a new client/sender/recipient triplet gets DEFER_IF_PERMIT until the delay has passed, then passes); access(5) DEFER_IF_PERMIT; RFC 5321 §4.2.5: a 4yz reply is a transient failure, the client retries"
	cfg := mtatest.Config{
		Users: []string{"alice", "bob"},
		Append: map[string]string{"/etc/postfix/main.cf": `
# realmta: postgrey (postgrey(8), README: check_policy_service).
mydestination = $myhostname, grey.postfix.test, localhost
smtpd_recipient_restrictions = permit_mynetworks, reject_unauth_destination, check_policy_service inet:127.35.4.1:10023
`},
	}
	runSetup(t, postfixGrey, mtatest.Postfix, cfg, []mtaCase{
		{name: "greylisted user, budget past the delay", email: "alice@grey.postfix.test", budget: 12 * time.Second,
			reply: fmt.Sprintf(greylisted, `alice@grey\.postfix\.test`), want: valid,
			source: srcGrey + "; retried from the same address after the delay, the mailbox is accepted (250 2.1.5)"},
		{name: "greylisted user, budget shorter than the delay", email: "bob@grey.postfix.test", budget: time.Second,
			reply: fmt.Sprintf(greylisted, `bob@grey\.postfix\.test`), want: temporarilyNone,
			source: srcGrey + "; no retry fits in the budget: spec §2.3 unknown, reason timeout"},
		{name: "greylisted unknown, budget past the delay", email: "ghost@grey.postfix.test", budget: 12 * time.Second,
			reply: fmt.Sprintf(greylisted, `ghost@grey\.postfix\.test`), want: noMailbox,
			source: srcGrey + "; a pending DEFER_IF_PERMIT is turned into the deferral before the implicit reject_unlisted_recipient runs (smtpd_check.c:5161-5176), so an unknown recipient is greylisted too, and after the delay refused 550 5.1.1 User unknown in local recipient table"},
	})
}

// testPostfixLimit: smtpd_recipient_limit = 3 and a batch of eight
// addresses of the domain, four that exist and four that do not.
func testPostfixLimit(t *testing.T) {
	cfg := mtatest.Config{
		Users: []string{"u1", "u2", "u3", "u4"},
		Append: map[string]string{"/etc/postfix/main.cf": `
# realmta: a recipient limit.
mydestination = $myhostname, limit.postfix.test, localhost
smtpd_recipient_limit = 3
`},
	}
	runSetup(t, postfixLimit, mtatest.Postfix, cfg, []mtaCase{
		limitCase("limit.postfix.test", `^452 4\.5\.3 Error: too many recipients$`,
			"postconf(5) smtpd_recipient_limit (recipients accepted per message); smtpd.c:3034 \"452 4.5.3 Error: too many recipients\"; RFC 5321 §4.5.3.1.10: the client sends the rest in another transaction"),
	})
}

// limitCase is the recipient-limit batch of a domain whose users are u1
// to u4: the plain session sends u1 to u4 and records the reply to the
// fourth (the limit is 3); the engine gets the eight addresses at once.
func limitCase(domain, reply, source string) mtaCase {
	var batch []batchAddr
	for i := 1; i <= 4; i++ {
		batch = append(batch,
			batchAddr{fmt.Sprintf("u%d@%s", i, domain), valid},
			batchAddr{fmt.Sprintf("ghost%d@%s", i, domain), noMailbox})
	}
	var raw []string
	for i := 1; i <= 4; i++ {
		raw = append(raw, fmt.Sprintf("u%d@%s", i, domain))
	}
	return mtaCase{name: "recipient limit 3, batch of 8", batch: batch, raw: raw, reply: reply, budget: 30 * time.Second,
		source: source + "; every address answered as if asked alone"}
}

// srcCasePostfix: why a capitalised spelling of a mailbox is the mailbox.
const srcCasePostfix = "Postfix folds the case of a lookup key (fold_addr(3); virtual(5) and local_recipient_maps tables are searched lower-cased): the plain session's 250 to the capitalised spelling shows it; RFC 5321 §4.1.2 asks hosts not to define case-sensitive local parts"
