package smtpclient

import (
	"flag"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

var updateWordings = flag.Bool("update-wordings", false, "rewrite the generated table in WORDINGS.md")

// replyText parses a rule's Example (reply lines separated by "\n") as the
// client would read it and returns Reply.Text(), what ReadWording is given.
func replyText(t testing.TB, example string) string {
	t.Helper()
	r, err := ParseReply([]byte(strings.ReplaceAll(example, "\n", "\r\n") + "\r\n"))
	if err != nil {
		t.Fatalf("example %q does not parse: %v", example, err)
	}
	return r.Text()
}

// wordingCase is a real reply and what its words say.
type wordingCase struct {
	reply string // the reply as sent, lines separated by "\n"
	want  Wording
	// phrase, when set, is a phrase of the rule that must be the one
	// reported.
	phrase string
	source string // where the reply was seen
}

func checkWordings(t *testing.T, cases []wordingCase) {
	t.Helper()
	for _, c := range cases {
		text := replyText(t, c.reply)
		w, r := ReadWording(text)
		if w != c.want {
			got := "<nil>"
			if r != nil {
				got = strings.Join(r.Phrases, ", ")
			}
			t.Errorf("%q (%s): read %s by rule [%s], want %s", c.reply, c.source, w, got, c.want)
			continue
		}
		if c.phrase != "" && (r == nil || !hasPhrase(r, c.phrase)) {
			t.Errorf("%q (%s): reported rule %+v, want the rule with %q", c.reply, c.source, r, c.phrase)
		}
	}
}

func hasPhrase(r *WordingRule, p string) bool {
	for _, q := range r.Phrases {
		if q == p {
			return true
		}
	}
	return false
}

func TestWordingString(t *testing.T) {
	for w, want := range map[Wording]string{
		WordingNone: "none", WordingNoMailbox: "no_mailbox", WordingAboutUs: "about_us",
		WordingFull: "full", WordingDisabled: "disabled", WordingNoRelay: "no_relay",
		WordingTooManyRecipients: "too_many_recipients",
		Wording(42):              "wording(42)",
	} {
		if got := w.String(); got != want {
			t.Errorf("Wording(%d).String() = %q, want %q", w, got, want)
		}
	}
}

// TestWordingRulesReadTheirExamples: every row is complete, its own
// phrases match its example, and the example, read whole, says the row's
// class (whatever other rows it also matches).
func TestWordingRulesReadTheirExamples(t *testing.T) {
	for i, r := range Wordings() {
		if r.Software == "" || r.Source == "" || r.Example == "" || len(r.Phrases) == 0 {
			t.Errorf("rule %d %v is incomplete", i, r.Phrases)
			continue
		}
		text := replyText(t, r.Example)
		if !refRuleMatches(r, refNormalize(text)) {
			t.Errorf("rule %d %v: no phrase of its own matches its example %q", i, r.Phrases, r.Example)
		}
		if w, got := ReadWording(text); w != r.Class {
			t.Errorf("rule %d %v: its example %q reads %s (rule %+v), want %s", i, r.Phrases, r.Example, w, got, r.Class)
		}
	}
}

// TestWordingPhrases: no phrase twice; one-word phrases only where the
// word means one thing (a list's name, an acronym), never "user" or
// "unknown".
func TestWordingPhrases(t *testing.T) {
	oneWord := map[string]bool{
		"spamhaus": true, "spamcop": true, "barracudacentral": true, "dnsbl": true, "rbl": true,
		"blocklist*": true, "blacklist*": true, "spf": true, "dkim": true, "dmarc": true,
		"reputation": true, "badmailfrom": true, "rdns": true, "greylist*": true, "graylist*": true,
		"overquota*": true, "nosuchuser": true,
	}
	seen := map[string]int{}
	for i, r := range wordingTable {
		for _, p := range r.Phrases {
			n := strings.TrimSpace(refNormalize(strings.TrimSuffix(p, "*")))
			if j, ok := seen[n]; ok {
				t.Errorf("phrase %q in rules %d and %d", p, j, i)
			}
			seen[n] = i
			if !strings.Contains(n, " ") && !oneWord[p] {
				t.Errorf("rule %d: one-word phrase %q not in the allowed list", i, p)
			}
		}
	}
	for _, s := range []string{"user", "unknown", "mailbox", "recipient", "rejected", "denied", "blocked", "policy", "spam", "sender", "relay", "quota", "full", "disabled"} {
		if w, r := ReadWording(s); w != WordingNone || r != nil {
			t.Errorf("ReadWording(%q) = %s, %+v; a lone word must say nothing", s, w, r)
		}
	}
}

func TestCompileWordingsRejectsBadTables(t *testing.T) {
	if _, err := compileWordings(wordingTable); err != nil {
		t.Fatal(err)
	}
	for name, rules := range map[string][]WordingRule{
		"no phrase":      {{Class: WordingNoMailbox}},
		"unknown class":  {{Phrases: []string{"user unknown"}, Class: Wording(99)}},
		"empty phrase":   {{Phrases: []string{" - "}, Class: WordingNoMailbox}},
		"star inside":    {{Phrases: []string{"user*unknown"}, Class: WordingNoMailbox}},
		"address":        {{Phrases: []string{"x@example.com"}, Class: WordingNoMailbox}},
		"not ASCII":      {{Phrases: []string{"benutzer unbekannt für"}, Class: WordingNoMailbox}},
		"only a star":    {{Phrases: []string{"*"}, Class: WordingNoMailbox}},
		"punctuation":    {{Phrases: []string{"...!"}, Class: WordingNoMailbox}},
		"none and empty": {{Phrases: nil, Class: WordingNone}},
	} {
		if _, err := compileWordings(rules); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
}

// TestReadWordingNoMailbox: refusals of an unknown recipient, as real
// servers word them.
func TestReadWordingNoMailbox(t *testing.T) {
	checkWordings(t, []wordingCase{
		{"550 5.1.1 <foo@example.com>: Recipient address rejected: User unknown in local recipient table", WordingNoMailbox, "user unknown in local recipient table", "postfix smtpd_addr_valid.ref"},
		{"550 5.1.1 <neko@example.co.jp>: Recipient address rejected: User unknown in virtual mailbox table", WordingNoMailbox, "user unknown in virtual mailbox table", "sisimai lhost-amavis-01.eml"},
		{"450 4.1.1 <kijitora@example.org>: Recipient address rejected: User unknown in virtual alias table", WordingNoMailbox, "user unknown in virtual alias table", "sisimai lhost-postfix-05.eml"},
		{"550 5.7.1 <x@sfr.fr>: Recipient address rejected: User unknown", WordingNoMailbox, "user unknown", "sisimai lhost-sendmail-48.eml"},
		{"550 Unrouteable address", WordingNoMailbox, "unrouteable address", "exim test/stdout"},
		{"550 Unknown user", WordingNoMailbox, "unknown user", "exim test/log (localuser router)"},
		{"550 Unknown user kijitora@example.jp", WordingNoMailbox, "unknown user", "sisimai lhost-courier-02.eml"},
		{"550 Invalid recipient: <x@example.com>", WordingNoMailbox, "invalid recipient", "OpenSMTPD lka_session.c"},
		{"550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550 [aBcDeF.us1]", WordingNoMailbox, "invalid recipient", "Mimecast SMTP error codes"},
		{"553 5.3.0 <kijitora@example.com>... No such user here", WordingNoMailbox, "no such user here", "sisimai lhost-v5sendmail-05.eml"},
		{"550 5.7.1 No such user!", WordingNoMailbox, "no such user", "Yandex"},
		{"550 kijitora@neko.example.org... No such user", WordingNoMailbox, "no such user", "sisimai rhost-messagelabs-02.eml"},
		{"550 5.1.1 <x@example.com> User doesn't exist: x@example.com", WordingNoMailbox, "user doesn't exist", "dovecot lmtp-recipient.c"},
		{"554 Sorry, no mailbox here by that name. (#5.1.1)", WordingNoMailbox, "no mailbox here by that name", "qmail-ldap qmail-verify.c"},
		{"550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", WordingNoMailbox, "resolver adr recipientnotfound", "sisimai lhost-office365-13.eml"},
		{"550 5.1.1 RESOLVER.ADR.RecipNotFound; not found", WordingNoMailbox, "resolver adr recipnotfound", "sisimai lhost-exchange2007-01.eml"},
		{"550 5.1.1 RESOLVER.ADR.ExRecipNotFound; not found", WordingNoMailbox, "resolver adr exrecipnotfound", "pastebin.com/e6yfDi5v"},
		{"550-5.1.1 The email account that you tried to reach does not exist. Please try\n550-5.1.1 double-checking the recipient's email address for typos or\n550-5.1.1 unnecessary spaces. Learn more at\n550 5.1.1 https://support.google.com/mail/?p=NoSuchUser y3si675602plr.1 - gsmtp", WordingNoMailbox, "account that you tried to reach does not exist", "sisimai rfc3464-63.eml"},
		{"554 delivery error: dd This user doesn't have a yahoo.com account (x@yahoo.com) [0] - mta1061.mail.ne1.yahoo.com", WordingNoMailbox, "user doesn't have a", "sisimai lhost-sendmail-41.eml"},
		{"552 1 Requested mail action aborted, mailbox not found", WordingNoMailbox, "mailbox not found", "Yahoo, sisimai rhost/for-yahooinc.go"},
		{"550 5.1.1 <x@icloud.com>: inactive email address", WordingNoMailbox, "inactive email address", "sisimai rhost-apple-04.eml"},
		{"550 5.1.6 recipient no longer on server: kijitora@example.go.jp", WordingNoMailbox, "no longer on server", "sisimai lhost-postfix-16.eml"},
		{"550 Message was not accepted -- invalid mailbox.  Local mailbox nosuchuser@mail.ru is unavailable: user not found", WordingNoMailbox, "invalid mailbox", "Mail.ru"},
		{"550 User not found", WordingNoMailbox, "user not found", "sisimai lhost-postfix-76.eml"},
		{"550 5.1.1 Mailbox does not exist", WordingNoMailbox, "mailbox does not exist", "sisimai lhost-receivingses-01.eml"},
		{"550 5.1.1 RCP-P1 http://postmaster.facebook.com/response_codes?ip=192.0.2.54#rcp Recipient address does not exist", WordingNoMailbox, "address does not exist", "sisimai rhost-facebook-04.eml"},
		{"551 not our customer", WordingNoMailbox, "not our customer", "sisimai lhost-sendmail-22.eml"},
		{"550 5.1.1 user unknown (UserSearch)", WordingNoMailbox, "user unknown", "sisimai lhost-sendmail-47.eml"},
	})
}

// TestReadWordingAboutUs: refusals of the client, its address or the
// sender, as real servers word them.
func TestReadWordingAboutUs(t *testing.T) {
	checkWordings(t, []wordingCase{
		{"554 5.7.1 Service unavailable; Client host [192.0.2.2] blocked using zen.spamhaus.org", WordingAboutUs, "blocked using", "postfix DEF_DEF_RBL_REPLY"},
		{"521-5.7.1 Service unavailable; client [203.0.113.225] blocked using dnsbl.sorbs.net\n521 5.7.1 Please see http://support.mailhostbox.com/email-administrators-guide-error-codes/ for explanation of the problem.", WordingAboutUs, "blocked using", "postscreen; sisimai lhost-amazonses-16.eml"},
		{"554 5.7.1 <a8-95.smtp-out.amazonses.com[203.0.113.22]>: Client host rejected: blocked using mail.example.org; Please see http://mail.example.org/rbl/?ip=203.0.113.22 to send.", WordingAboutUs, "blocked using", "sisimai lhost-amazonses-14.eml"},
		{"554 5.7.1 <www.porcupine.org>: Helo command rejected: Access denied", WordingAboutUs, "helo command rejected", "postfix smtpd_check.ref"},
		{"450 4.1.8 <foo@bad.domain>: Sender address rejected: Domain not found", WordingAboutUs, "sender address rejected", "postfix smtpd_check.ref"},
		{"554 5.7.1 <reject@ok.domain>: Sender address rejected: Access denied", WordingAboutUs, "sender address rejected", "postfix smtpd_check.ref"},
		{"550 5.7.1 Rejected: 192.0.2.1 listed at zen.spamhaus.org", WordingAboutUs, "listed at", "sendmail dnsbl.m4"},
		{"553 5.1.8 <httpd@host1.mx.example.jp>... Domain of sender address httpd@host1.mx.example.jp does not exist", WordingAboutUs, "domain of sender address", "sisimai lhost-sendmail-04.eml"},
		{"553 sorry, your envelope sender is in my badmailfrom list (#5.7.1)", WordingAboutUs, "envelope sender", "notqmail err_bmf"},
		{"553 sorry, your mailserver [192.0.2.1] is rejected by zen.spamhaus.org", WordingAboutUs, "your mailserver", "qmail-ldap err_rbl"},
		{"554 host [192.0.2.1] is listed on zen.spamhaus.org", WordingAboutUs, "is listed on", "haraka-plugin-dns-list"},
		{"554 Your mail is not welcome here", WordingAboutUs, "your mail is not welcome here", "Haraka connect_respond"},
		{"550 5.7.708 Access denied, traffic not accepted from this IP.", WordingAboutUs, "from this ip", "Microsoft NDR 5.7.708"},
		{"550 5.7.1 RESOLVER.RST.AuthRequired; authentication required", WordingAboutUs, "rst authrequired", "sisimai lhost-exchange2007-04.eml"},
		{"550 5.7.133 RESOLVER.RST.SenderNotAuthenticatedForGroup; authentication required", WordingAboutUs, "rst sendernotauthenticated*", "Microsoft NDR 5.7.133"},
		{"550 5.7.1 Unfortunately, messages from [192.0.2.5] weren't sent. Please contact your Internet service provider since part of their network is on our block list (S3150).", WordingAboutUs, "block list*", "Outlook.com, sisimai rhost/for-microsoft.go"},
		{"550 DY-001 Mail rejected by Outlook.com for policy reasons. We generally do not accept email from dynamic IP's as they are not typically used to deliver unauthenticated SMTP email to an Internet mail server.", WordingAboutUs, "for policy reasons", "Outlook.com troubleshooting page"},
		{"554 5.7.9 Message not accepted for policy reasons. See https://postmaster.verizonmedia.com/error-codes", WordingAboutUs, "for policy reasons", "Yahoo, sisimai lhost-postfix-66.eml"},
		{"421 4.7.0 [TSS04] Messages from 192.0.2.192 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.verizonmedia.com/error-codes", WordingAboutUs, "user complaints", "sisimai lhost-postfix-74.eml"},
		{"550-5.7.25 [192.0.2.202] The IP address sending this message does not have a\n550-5.7.25 PTR record setup, or the corresponding forward DNS entry does not\n550-5.7.25 point to the sending IP. As a policy, Gmail does not accept messages\n550 5.7.25 from IPs with missing PTR records.", WordingAboutUs, "sending ip*", "sisimai rhost-google-06.eml"},
		{"421-4.7.0 [192.0.2.1 15] Our system has detected an unusual rate of\n421 4.7.0 unsolicited mail originating from your IP address.", WordingAboutUs, "unsolicited mail", "Gmail SMTP errors"},
		{"550-5.7.26 This mail has been blocked because the sender is unauthenticated.\n550 5.7.26 Gmail requires all senders to authenticate with either SPF or DKIM.", WordingAboutUs, "sender is unauthenticated", "sisimai rhost-google-04.eml"},
		{"554 5.7.1 [2] Message rejected under suspicion of SPAM; https://ya.cc/", WordingAboutUs, "suspicion of spam", "Yandex"},
		{"550 spam message rejected. Please visit http://help.mail.ru/notspam-support/id?c=0", WordingAboutUs, "spam message", "Mail.ru"},
		{"550 Rejected by header based Anti-Spoofing policy", WordingAboutUs, "anti spoofing policy", "Mimecast"},
		{"554 email rejected due to security policies - MCSpamSignature.sa.2.2", WordingAboutUs, "rejected due to security policies", "sisimai rhost-mimecast-02.eml"},
		{"550 5.7.0 Blocked - see https://ipcheck.proofpoint.com/?ip=192.0.2.1", WordingAboutUs, "ipcheck proofpoint", "Proofpoint"},
		{"554 Service unavailable; Client host [192.0.2.1] blocked using Barracuda Reputation; http://www.barracudanetworks.com/reputation/?pr=1&ip=192.0.2.1", WordingAboutUs, "blocked using", "MIT TIG page"},
		{"553 5.7.1 [BL23] Connections not accepted from IP addresses on Spamhaus XBL; see http://postmaster.yahoo.com/errors/550-bl23.html [550]", WordingAboutUs, "spamhaus", "sisimai rhost/for-yahooinc.go"},
		{"553 http://www.spamhaus.org/query/bl?ip=192.0.2.222", WordingAboutUs, "spamhaus", "sisimai rhost-godaddy-02.eml"},
		{"554 5.7.1 Rejected - your IP address was found in a blacklist for sending spam. Please visit: http://spamcop.net/bl.shtml?192.0.2.95", WordingAboutUs, "spamcop", "blog.inframes.com"},
		{"550 5.7.1 IP address blacklisted by recipient", WordingAboutUs, "blacklist*", "sisimai lhost-sendmail-33.eml"},
		{"550 rejected because 192.0.2.1 is in a black list at bl.example.net", WordingAboutUs, "black list*", "exim configure.default"},
		{"550 JunkMail rejected - 192.0.2.1 is in an RBL", WordingAboutUs, "rbl", "KumoMTA community bounces.toml"},
		{"550 5.7.1 Connections not accepted from servers without a valid sender domain. Fix reverse DNS for 203.0.113.2", WordingAboutUs, "reverse dns", "sisimai lhost-exim-43.eml"},
		{"450 4.7.1 Client host rejected: cannot find your reverse hostname, [192.0.2.17]", WordingAboutUs, "client host rejected", "postfix smtpd_check.c"},
		{"550 Connection frequency limited [Q1YzZ3kxdnRYYnpkbVZ0MAo= Blocked IP 192.0.2.22]. http://service.mail.qq.com/cgi-bin/help?subtype=1&&id=20022&&no=1000722", WordingAboutUs, "frequency limited", "sisimai rhost-tencent-02.eml"},
		{"550 5.1.1 <kijitora@example.com> - 192.0.2.225 has sent to too many recipients this hour. IB607 <http://x.co/rlbounce>", WordingAboutUs, "sent to too many recipients", "sisimai rhost-godaddy-03.eml"},
		{"550 5.7.1 Email rejected per DMARC policy for example.org", WordingAboutUs, "dmarc", "sisimai lhost-postfix-73.eml"},
		{"550 Bad SPF records for [example.org:192.0.2.2], see http://spf.pobox.com/", WordingAboutUs, "spf", "sisimai lhost-exim-29.eml"},
		{"550 Local CT IP Reputation - (reject)", WordingAboutUs, "reputation", "Mimecast"},
		{"550 domain [example.com] mismatches client ip 192.0.2.225.", WordingAboutUs, "client ip", "sisimai lhost-outlook-09.eml"},
		{"550 Unauthenticated senders not allowed", WordingAboutUs, "unauthenticated senders", "sisimai lhost-postfix-65.eml"},
		{"450 4.7.1 Error: too much mail from 192.0.2.1", WordingAboutUs, "too much mail from", "postfix smtpd.c"},
		{"550 5.7.1 Recipient address rejected: sender IP blocked", WordingAboutUs, "sender ip", "issue 35"},
	})
}

func TestReadWordingFull(t *testing.T) {
	checkWordings(t, []wordingCase{
		{"552 5.2.2 <neko@example.org> Quota exceeded (mailbox for user is full)", WordingFull, "quota exceeded", "sisimai lhost-postfix-63.eml (Dovecot)"},
		{"554 5.2.2 Quota exceeded (mailbox for user is full)", WordingFull, "quota exceeded", "dovecot quota-status"},
		{"552 Error: disk quota exceeded", WordingFull, "quota exceeded", "sisimai lhost-qmail-08.eml"},
		{"450 4.2.2 <kijitora@example.jp>... Mailbox Full", WordingFull, "mailbox full", "sisimai lhost-qmail-06.eml"},
		{"550 5.2.2 STOREDRV.Deliver: mailbox full. The following information should help identify the cause: \"MapiExceptionShutoffQuotaExceeded:00.00000:FF000000\"", WordingFull, "mailbox full", "sisimai lhost-exchange2007-02.eml"},
		{"550 mailbox is full", WordingFull, "mailbox is full", "exim appendfile.c"},
		{"552 5.2.2 Over quota", WordingFull, "over quota", "sisimai lhost-x3-06.eml; Zimbra LmtpReply"},
		{"452 4.2.2 The email account that you tried to reach is over quota. Please direct the recipient to Clear Google Drive space & increase storage.", WordingFull, "over quota", "Gmail SMTP errors (2023)"},
		{"552-5.2.2 The recipient's inbox is out of storage space and inactive. Please\n552-5.2.2 direct the recipient to\n552 5.2.2 https://support.google.com/mail/?p=OverQuotaPerm c2-202229zmZBNM3agi23.222 - gsmtp", WordingFull, "out of storage space", "sisimai rhost-google-05.eml"},
		{"552 5.2.2 Mailbox size limit exceeded", WordingFull, "mailbox size limit exceeded", "Yandex"},
		{"552 Requested mail action aborted: exceeded storage allocation", WordingFull, "exceeded storage allocation", "RFC 5321"},
	})
}

func TestReadWordingDisabled(t *testing.T) {
	checkWordings(t, []wordingCase{
		{"550 5.2.1 The email account that you tried to reach is disabled. g0000000000ggg.00", WordingDisabled, "account that you tried to reach is disabled", "sisimai rhost-google-01.eml"},
		{"550-5.2.1 The email account that you tried to reach is inactive. For more\n550 5.2.1 information, go to https://support.google.com/mail/?p=DisabledUser", WordingDisabled, "account that you tried to reach is inactive", "Gmail SMTP errors"},
		{"554 delivery error: dd Sorry your message to kijitora@example.co.jp cannot be delivered. This account has been disabled or discontinued [#102]. - mta222.mail.neko.example.co.jp", WordingDisabled, "account has been disabled", "sisimai lhost-postfix-52.eml"},
		{"554 30 Sorry, your message to x@aol.jp cannot be delivered. This mailbox is disabled (554.30)", WordingDisabled, "mailbox is disabled", "sisimai rhost/for-yahooinc.go"},
		{"450 4.2.1 Mailbox disabled, not accepting messages", WordingDisabled, "mailbox disabled", "Zimbra LmtpReply"},
		{"525 5.7.13 Disabled recipient address", WordingDisabled, "disabled recipient", "sisimai lhost-sendmail-35.eml"},
		{"550 5.7.1 Policy rejection on the target address", WordingDisabled, "policy rejection on the target address", "Yandex"},
		{"550 Mailbox is frozen. See http://mail.i.ua/err/3/", WordingDisabled, "mailbox is frozen", "sisimai rhost-iua-01.eml"},
		{"550 5.7.1 <kijitora@example.com>: Recipient address rejected: User kijitora@example.com temporary locked. Please try again later!", WordingDisabled, "temporary locked", "sisimai lhost-amazonses-19.eml"},
	})
}

// TestReadWordingTooManyRecipients: a refusal of the transaction's
// recipient count, in the words of Exim's recipients_max_reject and of
// Debian's exim4-config (both seen from the real Exim 4.96 in probe/realmta).
func TestReadWordingTooManyRecipients(t *testing.T) {
	for _, text := range []string{"too many recipients", "Rejected for too many bad recipients", "Too many recipients: Too many recipients",
		"Error: too many recipients"} {
		if w, _ := ReadWording(text); w != WordingTooManyRecipients {
			t.Errorf("%q: %v, want too_many_recipients", text, w)
		}
	}
}

func TestReadWordingNoRelay(t *testing.T) {
	checkWordings(t, []wordingCase{
		{"554 5.7.1 <kijitora@example.com>: Relay access denied", WordingNoRelay, "relay access denied", "sisimai lhost-amazonses-21.eml"},
		{"554 5.7.1 <foo@ibm.com>: Recipient address rejected: Relay access denied", WordingNoRelay, "relay access denied", "postfix smtpd_check.ref"},
		{"550 5.7.64 TenantAttribution; Relay Access Denied SMTP", WordingNoRelay, "relay access denied", "Microsoft 365 (its x.7.64 is read before the words)"},
		{"550 5.7.1 <x@example.com>... Relaying denied", WordingNoRelay, "relaying denied", "sendmail proto.m4"},
		{"550 5.7.1 <x@example.com>... Relaying denied. Proper authentication required.", WordingNoRelay, "relaying denied", "sendmail proto.m4"},
		{"513 Relaying denied.", WordingNoRelay, "relaying denied", "courier esmtp.C"},
		{"553 sorry, relaying denied from your location [192.0.2.1] (#5.7.1)", WordingNoRelay, "relaying denied", "qmail-ldap err_nogateway"},
		{"550 relay not permitted", WordingNoRelay, "relay not permitted", "exim configure.default"},
		{"553 sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)", WordingNoRelay, "list of allowed rcpthosts", "notqmail err_nogateway"},
		{"553 5.7.1 sorry, that domain isn’t in my list of allowed rcpthosts", WordingNoRelay, "list of allowed rcpthosts", "qmail, typographic apostrophe"},
		{"550 5.7.1 Unable to relay", WordingNoRelay, "unable to relay", "Exchange"},
		{"550 5.7.54 SMTP; Unable to relay recipient in non-accepted domain", WordingNoRelay, "unable to relay", "Exchange 2013+"},
		{"550 I cannot deliver mail for <x@example.com>", WordingNoRelay, "i cannot deliver mail for", "Haraka"},
	})
}

// TestReadWordingLeavesAmbiguousUnread: texts that say nothing certain,
// or say it of something else, stay WordingNone.
func TestReadWordingLeavesAmbiguousUnread(t *testing.T) {
	for _, s := range []string{
		"",
		"Access denied",
		"550 5.7.1 Access denied",
		"554 5.7.1 <reject@dunno.domain>: Recipient address rejected: Access denied",                                             // postfix smtpd_check.ref
		"550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [AM0PR01MB1234.eurprd01.prod.outlook.com]",           // Exchange Online DBEB
		"550 5.4.1 [x@example.org]: Recipient address rejected: Access denied [NEKOCHAN.cat-neko22.prod.protection.outlook.com]", // sisimai rhost-microsoft-02.eml
		"550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)",                                                // Outlook.com
		"550 Requested action not taken: mailbox unavailable",                                                                    // RFC 5321's stock text
		"550 <x@example.com>: Requested action not taken: mailbox unavailable",                                                   // GMX
		"mailbox unavailable",
		"550 Administrative prohibition",        // Exim's deny without a message
		"452 4.3.1 Insufficient system storage", // Postfix queue
		"452 Insufficient system storage",
		"550-5.2.1 The user you are trying to contact is receiving mail at a rate that\n550 5.2.1 prevents additional messages from being delivered.", // Gmail, about the recipient
		"450 User is receiving mail too quickly", // Yahoo
		"554 5.7.1 Delivery not authorized, message refused",
		"550 5.7.1 Message rejected",
		"554 Transaction failed",
		"421 4.3.2 Service not available, closing transmission channel",
		"550 #5.1.0 Address rejected.",
		"553 sorry, mail to that recipient is not accepted (#5.7.1)", // qmail-ldap badrcptto
		"550 5.7.1 <x@example.com>: Recipient address rejected: Service temporarily unavailable, please try later",
	} {
		var text string
		if strings.HasPrefix(s, "4") || strings.HasPrefix(s, "5") {
			text = replyText(t, s)
		} else {
			text = s
		}
		if w, r := ReadWording(text); w != WordingNone || r != nil {
			t.Errorf("%q: read %s by %+v, want none", s, w, r)
		}
	}
}

// TestReadWordingGreylisting: a greylisting is recognised (a rule is
// returned) and read as nothing, whatever it is attached to.
func TestReadWordingGreylisting(t *testing.T) {
	for _, s := range []string{
		"450 4.2.0 <x@example.com>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/example.com.html",
		"450 4.2.0 Recipient address rejected: Greylisted",
		"451 4.7.1 Greylisted. Please come back later.",
		"451 4.7.1 Greylisting in action, please come back later",
		"450 4.7.1 <x@example.com>: Recipient address rejected: graylisted, retry later",
	} {
		w, r := ReadWording(replyText(t, s))
		if w != WordingNone || r == nil || r.Class != WordingNone {
			t.Errorf("%q: read %s by %+v, want none by the greylisting rule", s, w, r)
		}
	}
}

// TestReadWordingPrecedence: texts that match rules of several classes.
func TestReadWordingPrecedence(t *testing.T) {
	checkWordings(t, []wordingCase{
		// About us outranks no mailbox: the sender, not the recipient.
		{"550-Verification failed for <x@example.org>\n550-Unrouteable address\n550 Sender verify failed", WordingAboutUs, "sender verify failed", "exim test/stdout"},
		{"550 5.1.0 <baz@example.com>: Sender address rejected: User unknown in local recipient table", WordingAboutUs, "sender address rejected", "postfix smtpd_addr_valid.ref"},
		{"550-Callout verification failed:\n550 550 5.1.1 <x@example.com>: Recipient address rejected: User unknown in local recipient table", WordingNoMailbox, "user unknown in local recipient table", "Exim recipient callout"},
		{"550 5.7.1 User unknown; your IP 192.0.2.1 is listed at zen.spamhaus.org", WordingAboutUs, "listed at", "constructed: both"},
		{"550 5.7.1 Recipient address rejected: sender IP blocked", WordingAboutUs, "sender ip", "issue 35"},
		{"550 Requested action not taken: mailbox unavailable | invalid DNS PTR resource record, IP=192.0.2.1", WordingAboutUs, "dns ptr", "IONOS"},
		// About us outranks no relay.
		{"554 5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org; Relay access denied", WordingAboutUs, "blocked using", "constructed: both"},
		// Greylisting outranks the mailbox words.
		{"450 4.2.0 <x@example.com>: Recipient address rejected: Greylisted; user unknown is checked later", WordingNone, "greylist*", "constructed: both"},
		// Disabled outranks no mailbox; full outranks no mailbox.
		{"550 Message was not accepted -- invalid mailbox. Local mailbox x@mail.ru is unavailable: account has been disabled", WordingDisabled, "account has been disabled", "constructed on Mail.ru's form"},
		{"551 x@example.com: user unknown or mailbox full", WordingFull, "mailbox full", "constructed: both"},
		// Relay words outrank mailbox words.
		{"550 5.7.1 Unable to relay: user unknown", WordingNoRelay, "unable to relay", "constructed: both"},
		// Within a class the earlier, more specific row is reported.
		{"550 5.1.1 <x@example.com>: Recipient address rejected: User unknown in relay recipient table", WordingNoMailbox, "user unknown in relay recipient table", "postfix"},
		{"550 5.1.1 No such user here", WordingNoMailbox, "no such user here", "Zimbra"},
	})
}

// TestReadWordingNormalization: case, blanks, punctuation, apostrophes,
// word boundaries, prefixes and addresses.
func TestReadWordingNormalization(t *testing.T) {
	for _, c := range []struct {
		text string
		want Wording
	}{
		{"USER UNKNOWN", WordingNoMailbox},
		{"User\tunknown", WordingNoMailbox},
		{"user   \t unknown", WordingNoMailbox},
		{"user-unknown", WordingNoMailbox},
		{"<x@example.com>:User_Unknown.", WordingNoMailbox},
		{"superuser unknown", WordingNone},
		{"user unknowns", WordingNone},
		{"user unknownx", WordingNone},
		{"blacklisted", WordingAboutUs},
		{"Blacklisting in effect", WordingAboutUs},
		{"unblacklisted", WordingNone},
		{"user doesn’t exist", WordingNoMailbox}, // U+2019
		{"user doesn‘t exist", WordingNoMailbox}, // U+2018
		{"user doesn`t exist", WordingNoMailbox},
		{"user doesnt exist", WordingNone},
		{"in Spamhaus's list", WordingAboutUs},
		{"user \xe2\x80 unknown", WordingNone}, // a broken sequence is letters
		{"user \xe2 unknown", WordingNone},
		{"user unknown\xe2\x80", WordingNone},
		{"benutzer unbekannt / user unknown", WordingNoMailbox},
		{"überquota user unknown", WordingNoMailbox},
		{"user\xffunknown", WordingNone},
		{"user unknown\xff", WordingNone},
		// Addresses are opaque: their words are not read and no phrase
		// runs across them.
		{"550 <spam@example.com>... delivered", WordingNone},
		{"<blacklisted@example.com>", WordingNone},
		{"<user.unknown@example.com>", WordingNone},
		{"user <x@example.com> unknown", WordingNone},
		{"relay access <x@example.com> denied", WordingNone},
		{"550 5.1.1 <spam.trap@dnsbl.example.com>: Recipient address rejected: User unknown in local recipient table", WordingNoMailbox},
		{"550 5.1.1 <blocked@example.com>... User unknown", WordingNoMailbox},
		{"(x@yahoo.com) user unknown", WordingNoMailbox},
		{"x@ user unknown", WordingNoMailbox},
		{"@@ user unknown @", WordingNoMailbox},
		{"address=spamhaus@example.com user unknown", WordingNoMailbox},
		{"spamhaus@example.com spamhaus", WordingAboutUs},
		{"a@b@c listed at d", WordingAboutUs},
	} {
		if w, _ := ReadWording(c.text); w != c.want {
			t.Errorf("ReadWording(%q) = %s, want %s", c.text, w, c.want)
		}
	}
}

// raceEnabled reports whether the test binary was built with -race,
// whose instrumentation allocates.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

var wordingSink Wording

// TestReadWordingDoNotAllocate: ReadWording runs on every refusal of a
// RCPT, so it must not allocate, whatever the text.
func TestReadWordingDoNotAllocate(t *testing.T) {
	if raceEnabled() {
		t.Skip("the race detector's instrumentation allocates")
	}
	texts := []string{
		"",
		"5.1.1 <foo@example.com>: Recipient address rejected: User unknown in local recipient table",
		"Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org",
		strings.Repeat("no rule matches this line at all, none; ", 200),
		"a@b@c@d user’s doesn‘t \xff\xe2\x80",
	}
	for _, s := range texts {
		if n := testing.AllocsPerRun(100, func() { wordingSink, _ = ReadWording(s) }); n != 0 {
			t.Errorf("ReadWording(%.40q): %v allocations per call, want 0", s, n)
		}
	}
}

// The reference reader: the specification of ReadWording written plainly
// (strings, Contains), for the fuzz test to hold the automaton to.

// refNormalize lowercases text, makes each e-mail address an opaque word
// (\x01), maps other non-ASCII bytes to \x01 too (U+2018 and U+2019 to a
// blank), every other byte that is not a letter or digit to a blank,
// collapses blanks and puts one blank at each end.
func refNormalize(text string) string {
	var mapped strings.Builder
	i := 0
	for i < len(text) {
		if a := strings.IndexByte(text[i:], '@'); a >= 0 {
			a += i
			ls := a
			for ls > i && isRefLocal(text[ls-1]) {
				ls--
			}
			de := a + 1
			for de < len(text) && isRefDomain(text[de]) {
				de++
			}
			refMap(&mapped, text[i:ls])
			mapped.WriteString(" \x01 ")
			i = de
			continue
		}
		refMap(&mapped, text[i:])
		break
	}
	return " " + strings.Join(strings.Fields(mapped.String()), " ") + " "
}

func refMap(b *strings.Builder, s string) {
	s = strings.NewReplacer("\u2018", " ", "\u2019", " ").Replace(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case c >= 0x80:
			b.WriteByte(1)
		default:
			b.WriteByte(' ')
		}
	}
}

func isRefLocal(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-/=?^_`{|}~.\"", c) >= 0
}

func isRefDomain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_'
}

// refRuleMatches reports whether a phrase of r occurs in normalized text n.
func refRuleMatches(r WordingRule, n string) bool {
	for _, p := range r.Phrases {
		pat := strings.TrimRight(refNormalize(strings.TrimSuffix(p, "*")), " ")
		if !strings.HasSuffix(p, "*") {
			pat += " "
		}
		if strings.Contains(n, pat) {
			return true
		}
	}
	return false
}

// refRead returns the index of the rule ReadWording must report for text,
// or -1.
func refRead(text string) int {
	n := refNormalize(text)
	best := -1
	for i, r := range wordingTable {
		if refRuleMatches(r, n) && (best < 0 || wordingRank(r.Class) > wordingRank(wordingTable[best].Class)) {
			best = i
		}
	}
	return best
}

// FuzzReadWording: ReadWording never panics, is deterministic, and agrees
// with the reference reader on every input.
func FuzzReadWording(f *testing.F) {
	for _, r := range wordingTable {
		f.Add(r.Example)
		f.Add(strings.ToUpper(r.Example))
	}
	for _, s := range []string{"", "@", "@@", "a@", "@b", "x@y z", "\xe2\x80\x99", "\xe2\x80", "user\xe2\x80\x99unknown", strings.Repeat("user unknown ", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w1, r1 := ReadWording(s)
		w2, r2 := ReadWording(s)
		if w1 != w2 || r1 != r2 {
			t.Fatalf("ReadWording(%q) is not deterministic: %s %p, then %s %p", s, w1, r1, w2, r2)
		}
		want := refRead(s)
		switch {
		case want < 0 && (w1 != WordingNone || r1 != nil):
			t.Fatalf("ReadWording(%q) = %s, %+v; the reference reads nothing", s, w1, r1)
		case want >= 0 && r1 != &wordingTable[want]:
			t.Fatalf("ReadWording(%q) = %s, %+v; the reference reads rule %d %+v", s, w1, r1, want, wordingTable[want])
		case r1 != nil && w1 != r1.Class:
			t.Fatalf("ReadWording(%q) = %s with a rule of class %s", s, w1, r1.Class)
		}
	})
}

func BenchmarkReadWording(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"postfix_user_unknown", "<foo@example.com>: Recipient address rejected: User unknown in local recipient table"},
		{"gmail_no_such_user", "The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces. Learn more at https://support.google.com/mail/?p=NoSuchUser e22-n7GpZmsf093195.222 - gsmtp"},
		{"postfix_dnsbl", "Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org"},
		{"no_match", "Requested action not taken: mailbox unavailable"},
		{"4KiB", strings.Repeat("Requested action not taken: mailbox unavailable ", 84)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				wordingSink, _ = ReadWording(bc.text)
			}
		})
	}
}

// The generated part of WORDINGS.md.
const (
	wordingsBegin = "<!-- wordings:begin: generated from wordingTable; go test ./probe/smtpclient -run TestWordingsDoc -update-wordings -->"
	wordingsEnd   = "<!-- wordings:end -->"
)

// TestWordingsDoc keeps WORDINGS.md's table in step with wordingTable.
func TestWordingsDoc(t *testing.T) {
	doc, err := os.ReadFile("WORDINGS.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	b, e := strings.Index(s, wordingsBegin), strings.Index(s, wordingsEnd)
	if b < 0 || e < b {
		t.Fatalf("WORDINGS.md lacks the %q ... %q markers", wordingsBegin, wordingsEnd)
	}
	gen := renderWordings()
	cur := s[b+len(wordingsBegin) : e]
	if cur == gen {
		return
	}
	if !*updateWordings {
		t.Fatal("WORDINGS.md is out of date: go test ./probe/smtpclient -run TestWordingsDoc -update-wordings")
	}
	s = s[:b+len(wordingsBegin)] + gen + s[e:]
	if err := os.WriteFile("WORDINGS.md", []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func renderWordings() string {
	var b strings.Builder
	classes := []struct {
		w     Wording
		title string
	}{
		{WordingAboutUs, "about the prober (the client, its IP address, the sender)"},
		{WordingTooManyRecipients, "the transaction's recipients are too many: a new transaction asks again"},
		{WordingNone, "greylisting: recognised, read as nothing"},
		{WordingNoRelay, "the host does not take mail for the domain"},
		{WordingDisabled, "the mailbox exists and takes no mail"},
		{WordingFull, "the mailbox exists and is full"},
		{WordingNoMailbox, "no such mailbox"},
	}
	b.WriteString("\n\n| class | rules | phrases |\n|---|---:|---:|\n")
	for _, c := range classes {
		rules, phrases := 0, 0
		for _, r := range wordingTable {
			if r.Class == c.w {
				rules++
				phrases += len(r.Phrases)
			}
		}
		b.WriteString("| `" + c.w.String() + "` | " + strconv.Itoa(rules) + " | " + strconv.Itoa(phrases) + " |\n")
	}
	for _, c := range classes {
		b.WriteString("\n### `" + c.w.String() + "`: " + c.title + "\n\n")
		b.WriteString("| phrases | software / provider | source | example |\n|---|---|---|---|\n")
		for _, r := range wordingTable {
			if r.Class != c.w {
				continue
			}
			var ph []string
			for _, p := range r.Phrases {
				ph = append(ph, "`"+p+"`")
			}
			sw := mdEscape(r.Software)
			if r.Note != "" {
				sw += "<br>*Note:* " + mdEscape(r.Note)
			}
			var ex []string
			for _, l := range strings.Split(r.Example, "\n") {
				ex = append(ex, "`"+strings.ReplaceAll(l, "|", `\|`)+"`")
			}
			b.WriteString("| " + strings.Join(ph, ", ") + " | " + sw + " | " + mdEscape(r.Source) + " | " + strings.Join(ex, "<br>") + " |\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// mdEscape escapes the characters Markdown would read in a table cell.
func mdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;", "|", `\|`).Replace(s)
}
