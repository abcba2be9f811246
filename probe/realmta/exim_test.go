package realmta

import (
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/mtatest"
)

// Exim 4.96 (exim4-daemon-light 4.96-15+deb12u9) with Debian's
// configuration. Sources: the Exim source at tag exim-4.96
// (src/src/route.c, smtp_in.c, configure.default), the specification
// shipped in exim4-base (/usr/share/doc/exim4-base/spec.txt.gz, "spec"
// below, sections by title), and Debian's configuration in exim4-config
// (conf.d/acl/30_exim4-config_check_rcpt, "Debian's acl_check_rcpt" with
// its line numbers, which the generated configuration holds as it is).
var (
	eximDebian = addSite(site{mta: mtatest.KindExim, setup: "debian", ip: netip.MustParseAddr("127.35.2.1"),
		domains: []string{"local.exim.test", "virt.exim.test", "nopm.exim.test", "relay.exim.test"}})
	eximDNSBL = addSite(site{mta: mtatest.KindExim, setup: "dnsbl", ip: netip.MustParseAddr("127.35.2.2"),
		domains: []string{"dnsbl.exim.test"}})
	eximGrey = addSite(site{mta: mtatest.KindExim, setup: "grey", ip: netip.MustParseAddr("127.35.2.3"),
		domains: []string{"grey.exim.test"}})
	eximLimit = addSite(site{mta: mtatest.KindExim, setup: "limit", ip: netip.MustParseAddr("127.35.2.4"),
		domains: []string{"limit.exim.test"}})
	eximLimitReject = addSite(site{mta: mtatest.KindExim, setup: "limitreject", ip: netip.MustParseAddr("127.35.2.5"),
		domains: []string{"limitreject.exim.test"}})
	eximDNSBLMessage = addSite(site{mta: mtatest.KindExim, setup: "dnsblmsg", ip: netip.MustParseAddr("127.35.2.6"),
		domains: []string{"dnsblmsg.exim.test"}})
	// postgreyExim is the policy server of the grey setup (--exim).
	postgreyExim = netip.MustParseAddrPort("127.35.4.2:10023")
)

// TestExim: Exim as Debian configures it for an "internet site", with a
// local domain and virtual domains as the spec's "Virtual domains"
// section routes them; a DNS block list in the RCPT ACL (Exim's own
// message and configure.default's); postgrey as its README.exim wires it;
// recipients_max.
func TestExim(t *testing.T) {
	needMTAs(t)
	for name, f := range map[string]func(*testing.T){
		"debian": testEximDebian, "dnsbl": testEximDNSBL, "dnsblmsg": testEximDNSBLMessage,
		"grey": testEximGrey, "limit": testEximLimit, "limitreject": testEximLimitReject,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t)
		})
	}
}

// eximLocal is the configuration of a setup with local domains: Debian's,
// with the domains added as debconf's "other destinations" would.
func eximLocal(domains string, users ...string) mtatest.Config {
	return mtatest.Config{
		Users:  users,
		Append: map[string]string{"/etc/exim4/update-exim4.conf.conf": "dc_other_hostnames='" + domains + "'\n"},
		Files:  map[string]string{},
	}
}

// eximLocalACL adds acl to Debian's RCPT ACL, through the hook Debian
// provides (CHECK_RCPT_LOCAL_ACL_FILE, set in a conf.d/main file as
// README.Debian §2.1.3 says); it runs after "require verify = recipient".
func eximLocalACL(cfg mtatest.Config, acl string) mtatest.Config {
	cfg.Files["/etc/exim4/conf.d/main/000_localmacros"] = "CHECK_RCPT_LOCAL_ACL_FILE = /etc/exim4/local_rcpt_acl\n"
	cfg.Files["/etc/exim4/local_rcpt_acl"] = acl
	return cfg
}

const (
	srcUnrouteable = "route.c:1898: an address no router accepts gets \"Unrouteable address\" (spec, \"Generic options for routers\", cannot_route_message); Debian's acl_check_rcpt:210-211 \"require verify = recipient\" refuses it 550: no such user or alias"
	srcEximAccept  = "Debian's acl_check_rcpt: a recipient that verifies is accepted (\"250 Accepted\"); the random local part is refused as unrouteable, so the domain is no catch-all"
)

// testEximDebian: local.exim.test is a local domain (users from
// /etc/passwd, /etc/aliases); virt.exim.test and nopm.exim.test are
// virtual domains, one alias file each, with the spec's router (section
// "Virtual domains") before Debian's own; nopm's file has no postmaster.
// /etc/aliases gets two :fail: entries an administrator wrote for a full
// and a disabled mailbox (not stock: Exim checks quotas only when the
// appendfile transport delivers, spec "The appendfile transport", quota;
// nothing at RCPT time).
func testEximDebian(t *testing.T) {
	cfg := eximLocal("local.exim.test:virt.exim.test:nopm.exim.test", "alice", "bob")
	cfg.Files["/etc/exim4/conf.d/router/350_exim4-config_virtual"] = `
# realmta: the spec's router for virtual domains ("Virtual domains").
virtual:
  driver = redirect
  domains = dsearch;/etc/exim4/virtual
  data = ${lookup{$local_part}lsearch{/etc/exim4/virtual/$domain_data}}
  no_more
`
	cfg.Files["/etc/exim4/virtual/virt.exim.test"] = "alice: alice@local.exim.test\npostmaster: alice@local.exim.test\n"
	cfg.Files["/etc/exim4/virtual/nopm.exim.test"] = "alice: alice@local.exim.test\n"
	cfg.Append["/etc/aliases"] = "full: :fail: Mailbox full\ngone: :fail: Mailbox disabled\n"
	var tooMany []batchAddr
	var tooManyRaw []string
	for _, lp := range []string{"g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10", "g11"} {
		tooMany = append(tooMany, batchAddr{lp + "@local.exim.test", noMailbox})
		tooManyRaw = append(tooManyRaw, lp+"@local.exim.test")
	}
	tooMany = append(tooMany, batchAddr{"alice@local.exim.test", valid}, batchAddr{"bob@local.exim.test", valid})
	runSetup(t, eximDebian, mtatest.Exim, cfg, []mtaCase{
		{name: "local user, capitals", email: "ALICE@local.exim.test", reply: `^250 Accepted$`, want: valid, source: srcCaseExim},
		{name: "virtual user, capitals", email: "Alice@virt.exim.test", reply: `^250 Accepted$`, want: valid, source: srcCaseExim},
		{name: "local user", email: "alice@local.exim.test", reply: `^250 Accepted$`, want: valid, source: srcEximAccept},
		{name: "local unknown", email: "ghost@local.exim.test", reply: `^550 Unrouteable address$`, want: noMailbox,
			source: srcUnrouteable},
		{name: "virtual user", email: "alice@virt.exim.test", reply: `^250 Accepted$`, want: valid, source: srcEximAccept},
		{name: "virtual unknown", email: "ghost@virt.exim.test", reply: `^550 Unrouteable address$`, want: noMailbox,
			source: srcUnrouteable + "; spec \"Virtual domains\": no_more makes an address missing from the domain's file fail"},
		{name: "no postmaster: user", email: "alice@nopm.exim.test", reply: `^250 Accepted$`, want: valid, source: srcEximAccept},
		{name: "no postmaster: unknown", email: "ghost@nopm.exim.test", reply: `^550 Unrouteable address$`, want: noMailbox,
			source: srcUnrouteable + "; spec \"Virtual domains\""},
		{name: "no postmaster: postmaster", email: "postmaster@nopm.exim.test", reply: `^250 Accepted$`, rawOnly: true,
			source: "Debian's acl_check_rcpt:108-117 \"Accept mail to postmaster in any local domain, regardless of the source\" (as configure.default): postmaster@ every local domain is accepted at RCPT before verification, so Exim's stock configurations never refuse it, whatever the domain's aliases say"},
		{name: "relay refused", email: "someone@relay.exim.test", reply: `^550 relay not permitted$`, want: undeliverable,
			source: "Debian's acl_check_rcpt:202-204: require message = relay not permitted, domains = +local_domains : +relay_to_domains: the domain's own MX takes no mail for it, so it is undeliverable, and the refusal is not about the prober"},
		{name: "full (:fail: alias)", email: "full@local.exim.test", reply: `^550 Mailbox full$`, want: full,
			source: "spec \"The redirect router\", :fail: (\"the text that follows is the error message\"), allowed by Debian's system_aliases (allow_fail); admin configuration: the words say the mailbox is full"},
		{name: "disabled (:fail: alias)", email: "gone@local.exim.test", reply: `^550 Mailbox disabled$`, want: undeliverable,
			source: "spec \"The redirect router\", :fail:; admin configuration: the words say the mailbox is disabled"},
		{name: "too many bad recipients (Debian), batch of 13", batch: tooMany,
			raw: append(append([]string{}, tooManyRaw...), "alice@local.exim.test"), reply: `^550 Rejected for too many bad recipients$`,
			budget: 30 * time.Second,
			source: "Debian's acl_check_rcpt:150-164 (unless CHECK_RCPT_NO_FAIL_TOO_MANY_BAD_RCPT): after 10 RCPTs of one message with fewer than half accepted, every RCPT is denied \"Rejected for too many bad recipients\", \"partly a defense against spam abuse\": it is about the transaction, not the recipient, and a new transaction asks again; every address answered as if asked alone"},
	})
}

const (
	srcExim4DNSBL = "spec \"Access control lists\", dnslists; a deny without message gets smtp_in.c:3469's \"Administrative prohibition\": here the client's listing, not the mailbox"
	eximBlocked   = `\[127\.35\.9\.1\] [^\n]*F=<verify@prober\.realmta\.test> rejected RCPT <alice@`
)

// testEximDNSBL: "deny dnslists = dnsbl.test" in the RCPT ACL, with Exim's
// own message for a deny that sets none.
func testEximDNSBL(t *testing.T) {
	cfg := eximLocalACL(eximLocal("dnsbl.exim.test", "alice"), "  deny\n    dnslists = dnsbl.test\n")
	listedFirst := []netip.Addr{listedA, cleanA}
	allListed := []netip.Addr{listedA, listedB}
	runSetup(t, eximDNSBL, mtatest.Exim, cfg, []mtaCase{
		{name: "DNSBL lists one egress address: user", email: "alice@dnsbl.exim.test", pool: listedFirst,
			reply: `^550 Administrative prohibition$`, want: valid, logged: eximBlocked,
			source: srcExim4DNSBL + "; asked again from the unlisted address, the mailbox is accepted"},
		{name: "DNSBL lists one egress address: unknown", email: "ghost@dnsbl.exim.test", pool: listedFirst,
			reply: `^550 Unrouteable address$`, want: noMailbox,
			source: "Debian's acl_check_rcpt verifies the recipient (:210-211) before CHECK_RCPT_LOCAL_ACL_FILE (:329-330): even the listed client hears " + srcUnrouteable},
		{name: "DNSBL lists every egress address: user", email: "alice@dnsbl.exim.test", pool: allListed,
			reply: `^550 Administrative prohibition$`, want: blocked,
			source: srcExim4DNSBL + "; no address is unlisted: nothing is known of the mailbox"},
		{name: "DNSBL lists every egress address: unknown", email: "ghost@dnsbl.exim.test", pool: allListed,
			reply: `^550 Unrouteable address$`, want: noMailbox,
			source: "Debian's acl_check_rcpt verifies the recipient (:210-211) before CHECK_RCPT_LOCAL_ACL_FILE (:329-330): a listed client too hears " + srcUnrouteable},
	})
}

// testEximDNSBLMessage: the same list with the message of the example in
// Exim's configure.default.
func testEximDNSBLMessage(t *testing.T) {
	cfg := eximLocalACL(eximLocal("dnsblmsg.exim.test", "alice"),
		"  deny\n    dnslists = dnsbl.test\n    message = rejected because $sender_host_address is in a black list at $dnslist_domain\\n$dnslist_text\n")
	const reply = `^550 rejected because 127\.35\.9\.1 is in a black list at dnsbl\.test$`
	const src = "configure.default:527-529 (the deny dnslists example and its message): the words name the client's listing, not the mailbox"
	runSetup(t, eximDNSBLMessage, mtatest.Exim, cfg, []mtaCase{
		{name: "DNSBL lists one egress address: user", email: "alice@dnsblmsg.exim.test", pool: []netip.Addr{listedA, cleanA},
			reply: reply, want: valid, logged: eximBlocked, source: src + "; from the unlisted address the mailbox is accepted"},
		{name: "DNSBL lists every egress address: user", email: "alice@dnsblmsg.exim.test", pool: []netip.Addr{listedA, listedB},
			reply: reply, want: blocked, source: src + "; no address is unlisted: nothing is known of the mailbox"},
	})
}

// testEximGrey: postgrey (--exim, greylisting 2 s) asked from the RCPT
// ACL with the readsocket ACL of postgrey's README.exim, verbatim but for
// the socket (TCP here).
func testEximGrey(t *testing.T) {
	mtatest.Postgrey(t, mtatest.Config{Addr: postgreyExim, Hostname: eximGrey.host(), Args: []string{"--delay=2", "--exim"}})
	cfg := eximLocalACL(eximLocal("grey.exim.test", "alice", "bob"), `
  # postgrey's README.exim
  defer log_message = greylisted host $sender_host_address
        set acl_m0  = request=smtpd_access_policy\nprotocol_state=RCPT\nprotocol_name=${uc:$received_protocol}\nhelo_name=$sender_helo_name\nclient_address=$sender_host_address\nclient_name=$sender_host_name\nsender=$sender_address\nrecipient=$local_part@$domain\ninstance=$sender_host_address/$sender_address/$local_part@$domain\n\n
        set acl_m0  = ${sg{${readsocket{inet:127.35.4.2:10023}{$acl_m0}{5s}{}{action=DUNNO}}}{action=}{}}
        message     = ${sg{$acl_m0}{^\\w+\\s*}{}}
        condition   = ${if eq{${uc:${substr{0}{5}{$acl_m0}}}}{DEFER}{true}{false}}
`)
	const greylisted = `^451-Greylisted, see http://postgrey\.schweikert\.ch/help/grey\.exim\.test\.html / 451 $`
	const srcGrey = "postgrey(8) --delay and README.exim (a new client/sender/recipient triplet is deferred until the delay has passed); RFC 5321 §4.2.5: a 4yz reply is transient, the client retries"
	runSetup(t, eximGrey, mtatest.Exim, cfg, []mtaCase{
		{name: "greylisted user, budget past the delay", email: "alice@grey.exim.test", budget: 12 * time.Second,
			reply: greylisted, want: valid, source: srcGrey + "; retried from the same address after the delay, the mailbox is accepted"},
		{name: "greylisted user, budget shorter than the delay", email: "bob@grey.exim.test", budget: time.Second,
			reply: greylisted, want: temporarilyNone, source: srcGrey + "; no retry fits in the budget: spec §2.3 unknown, reason timeout"},
		{name: "unknown, not greylisted", email: "ghost@grey.exim.test", budget: 12 * time.Second,
			reply: `^550 Unrouteable address$`, want: noMailbox,
			source: "Debian's acl_check_rcpt verifies the recipient (:210-211) before CHECK_RCPT_LOCAL_ACL_FILE (:329-330), so an unknown recipient is refused before greylisting: " + srcUnrouteable},
	})
}

// testEximLimit: recipients_max = 3 (the 452 of the default
// recipients_max_reject = false).
func testEximLimit(t *testing.T) {
	cfg := eximLocal("limit.exim.test", "u1", "u2", "u3", "u4")
	cfg.Files["/etc/exim4/conf.d/main/90_realmta_recipients_max"] = "recipients_max = 3\n"
	runSetup(t, eximLimit, mtatest.Exim, cfg, []mtaCase{
		limitCase("limit.exim.test", `^452 too many recipients$`,
			"spec recipients_max (\"SMTP messages get a 452 response for all recipients over the limit\"); smtp_in.c:5243"),
	})
}

// testEximLimitReject: recipients_max = 3 with recipients_max_reject.
func testEximLimitReject(t *testing.T) {
	cfg := eximLocal("limitreject.exim.test", "u1", "u2", "u3", "u4")
	cfg.Files["/etc/exim4/conf.d/main/90_realmta_recipients_max"] = "recipients_max = 3\nrecipients_max_reject = true\n"
	runSetup(t, eximLimitReject, mtatest.Exim, cfg, []mtaCase{
		limitCase("limitreject.exim.test", `^552 too many recipients$`,
			"spec recipients_max_reject (552 to the surplus RCPTs); smtp_in.c:5235; RFC 5321 §4.5.3.1.10: a client SHOULD treat a 552 for too many recipients as temporary"),
	})
}

// srcCaseExim: why a capitalised spelling of a mailbox is the mailbox.
const srcCaseExim = "Exim's spec, \"caseful_local_part\": false by default, so routers see the local part lower-cased and lsearch matches it; the plain session's 250 to the capitalised spelling shows it"
