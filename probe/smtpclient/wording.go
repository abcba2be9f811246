package smtpclient

import (
	"errors"
	"strconv"
	"strings"
	"sync"
)

// Wording is the class of what a reply's text says. Classify and
// ClassifyRcpt never read the text; ReadWording does, for the refusals of
// RCPT whose codes say too little (a bare 550, a 550 5.7.1, a 554): many
// servers refuse an unknown recipient with a bare code and plain words, and
// refuse a blocklisted client the same way. WORDINGS.md lists every phrase
// with the software that words its replies so and where that was found.
type Wording uint8

// Wordings. The zero value is WordingNone.
const (
	// WordingNone: the text says nothing the table knows, or something it
	// deliberately leaves unread (a greylisting, "Access denied",
	// "mailbox unavailable").
	WordingNone Wording = iota
	// WordingNoMailbox: no such mailbox, user unknown, invalid recipient,
	// an address refused as not existing.
	WordingNoMailbox
	// WordingAboutUs: about the sender or the client, not the mailbox:
	// policy, a blocklist or DNSBL, the reputation of the IP address or the
	// host, its reverse DNS, SPF, DKIM, DMARC or authentication of the
	// sender, rate or connection limits, spam.
	WordingAboutUs
	// WordingFull: the mailbox exists and is full or over quota.
	WordingFull
	// WordingDisabled: the mailbox exists and is disabled, inactive,
	// suspended, locked or blocked.
	WordingDisabled
	// WordingNoRelay: the server does not take mail for the domain:
	// relay access denied, relaying denied, not in my list of allowed
	// rcpthosts.
	WordingNoRelay
	// WordingTooManyRecipients: the transaction has had as many
	// recipients as the server takes (RFC 5321 §4.5.3.1.10: a 552 for too
	// many recipients is to be treated as temporary): the rest go into a
	// new transaction.
	WordingTooManyRecipients
)

var wordingNames = [...]string{
	WordingNone:      "none",
	WordingNoMailbox: "no_mailbox",
	WordingAboutUs:   "about_us",
	WordingFull:      "full",
	WordingDisabled:  "disabled",
	WordingNoRelay:   "no_relay",

	WordingTooManyRecipients: "too_many_recipients",
}

// String returns the wording's snake_case name, as used in logs and metrics.
func (w Wording) String() string {
	if int(w) < len(wordingNames) {
		return wordingNames[w]
	}
	return "wording(" + strconv.Itoa(int(w)) + ")"
}

// WordingRule is one row of the table: the phrases that match, the class
// they say, who words its replies so, where that was found and a real reply
// it was taken from.
type WordingRule struct {
	// Phrases are matched as whole words, in order, on the normalized text
	// (see ReadWording); any one of them matches the rule. A trailing '*'
	// lets the last word run on: "blacklist*" matches "blacklisted" and
	// "blacklisting". A phrase is normalized as the text is, so "doesn't"
	// matches "doesn’t" and "doesn't" alike.
	Phrases []string
	// Class is what a text that matches says.
	Class Wording
	// Software is the MTA, filter or provider whose replies are worded so.
	Software string
	// Source is where the wording was found: the source file and function
	// of an MTA, the provider's documentation, or a published bounce.
	Source string
	// Example is a real reply with these words, its lines separated by
	// "\n", code included; addresses and IP addresses are replaced by
	// documentation ones (example.com, 192.0.2.0/24).
	Example string
	// Note says what is worth knowing about the rule, if anything.
	Note string
}

// wordingRank orders the classes when a text matches rules of several:
// the highest wins (see ReadWording). A WordingNone row (greylisting) sits
// below the rows about us and above the rest.
func wordingRank(w Wording) uint8 {
	switch w {
	case WordingAboutUs:
		return 7
	case WordingTooManyRecipients:
		return 6
	case WordingNone:
		return 5
	case WordingNoRelay:
		return 4
	case WordingDisabled:
		return 3
	case WordingFull:
		return 2
	case WordingNoMailbox:
		return 1
	}
	return 0
}

// ReadWording reads the text of a reply (Reply.Text(): the lines without
// their codes and the enhanced code) and returns what it says, with the row
// of the table that said it: WordingNone and nil when no row matches,
// WordingNone and the row when a greylisting matched (a text recognised and
// deliberately read as nothing).
//
// The text is normalized as it is read: letters are folded to lower case;
// every run of characters that are not ASCII letters or digits (blanks,
// punctuation, apostrophes, U+2018 and U+2019 included) becomes one word
// break, so "Spamhaus's" reads "spamhaus s" and "doesn't" "doesn t"; other
// non-ASCII bytes count as letters that no phrase contains; and every
// e-mail address (the run of address characters around an '@', such as the
// address the server echoes, "<x@example.com>") becomes one such opaque
// word, so that a local part such as "spam" or "blocked" is never read as
// the server's words and no phrase runs across an address.
//
// When rows of several classes match, precedence decides: WordingAboutUs
// over everything (a refusal that names the client, its IP address, the
// sender or a blocklist is about the prober even when it names the mailbox
// too: Exim's "Unrouteable address ... Sender verify failed" is about our
// sender, and Postfix's "Sender address rejected: User unknown in local
// recipient table" about our MAIL FROM); then WordingTooManyRecipients (a
// cut of the transaction, whatever else the text says); then the
// greylisting rows (WordingNone); then WordingNoRelay, WordingDisabled, WordingFull and
// WordingNoMailbox, most specific first. Within the winning class the
// earliest row of the table wins. The returned rule belongs to the table
// and must not be modified.
//
// ReadWording does not allocate; its cost is linear in the length of the
// text (one table step per byte).
func ReadWording(text string) (Wording, *WordingRule) {
	m := wordingMatcherOf()
	s := wordingScan{m: m, state: m.start, sep: true, best: -1}
	i := 0
	for i < len(text) {
		a := strings.IndexByte(text[i:], '@')
		if a < 0 {
			s.feedText(text[i:])
			break
		}
		a += i
		ls := a
		for ls > i && addrChar[text[ls-1]]&addrLocal != 0 {
			ls--
		}
		de := a + 1
		for de < len(text) && addrChar[text[de]]&addrDomain != 0 {
			de++
		}
		s.feedText(text[i:ls])
		s.feed(symSep)
		s.feed(symOther)
		s.feed(symSep)
		i = de
	}
	s.feed(symSep)
	if s.best < 0 {
		return WordingNone, nil
	}
	r := &wordingTable[s.best]
	return r.Class, r
}

// Wordings returns the table (for docs and tests): a copy of the slice,
// grouped by class, each class's rows in their order of precedence. The
// rows' Phrases are shared and must not be modified.
func Wordings() []WordingRule {
	return append([]WordingRule(nil), wordingTable...)
}

// The matcher is an Aho-Corasick automaton compiled into a full transition
// table over a 38-symbol alphabet: a word break, the 26 letters, the 10
// digits and "any other letter". Each phrase is compiled with a word break
// on each side (only before it when it ends in '*'), so it matches whole
// words only; the text is fed with a word break before and after it.
const (
	symSep   = 0
	symOther = 37
	numSyms  = 38
)

// symOf maps a byte of the text to its symbol.
var symOf = func() (t [256]uint8) {
	for b := 0; b < 256; b++ {
		switch {
		case 'a' <= b && b <= 'z':
			t[b] = uint8(1 + b - 'a')
		case 'A' <= b && b <= 'Z':
			t[b] = uint8(1 + b - 'A')
		case '0' <= b && b <= '9':
			t[b] = uint8(27 + b - '0')
		case b >= 0x80:
			t[b] = symOther
		default:
			t[b] = symSep
		}
	}
	return t
}()

// addrChar marks the bytes that may make up the local part (RFC 5322 atext,
// dots and quotes) and the domain of an address found around an '@'.
const (
	addrLocal  = 1
	addrDomain = 2
)

var addrChar = func() (t [256]uint8) {
	for b := 0; b < 256; b++ {
		alnum := 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
		if alnum || strings.IndexByte("!#$%&'*+-/=?^_`{|}~.\"", byte(b)) >= 0 {
			t[b] |= addrLocal
		}
		if alnum || b == '-' || b == '.' || b == '_' {
			t[b] |= addrDomain
		}
	}
	return t
}()

type wordingMatcher struct {
	delta []uint16 // delta[state*numSyms+symbol] is the next state
	out   []int16  // the best rule that ends in each state, or -1
	rank  []uint8  // wordingRank of each rule's class
	start uint16   // the state after the leading word break
}

type wordingScan struct {
	m     *wordingMatcher
	state uint16
	sep   bool  // the last symbol fed was a word break
	best  int16 // the best rule matched so far, or -1
}

func (s *wordingScan) feed(c uint8) {
	if c == symSep {
		if s.sep {
			return
		}
		s.sep = true
	} else {
		s.sep = false
	}
	s.state = s.m.delta[int(s.state)*numSyms+int(c)]
	if r := s.m.out[s.state]; r >= 0 && (s.best < 0 || s.m.better(r, s.best)) {
		s.best = r
	}
}

func (s *wordingScan) feedText(t string) {
	for i := 0; i < len(t); i++ {
		b := t[i]
		if b == 0xe2 && i+2 < len(t) && t[i+1] == 0x80 && (t[i+2] == 0x98 || t[i+2] == 0x99) {
			i += 2 // U+2018, U+2019: quotation marks, as ' is
			s.feed(symSep)
			continue
		}
		s.feed(symOf[b])
	}
}

// better reports whether rule a outranks rule b: a higher class rank, or
// the same rank and earlier in the table.
func (m *wordingMatcher) better(a, b int16) bool {
	ra, rb := m.rank[a], m.rank[b]
	return ra > rb || ra == rb && a < b
}

var wordingMatcherOf = sync.OnceValue(func() *wordingMatcher {
	m, err := compileWordings(wordingTable)
	if err != nil {
		panic("smtpclient: wording table: " + err.Error())
	}
	return m
})

// phraseSymbols normalizes a phrase as ReadWording normalizes a text and
// returns its symbols, without the surrounding word breaks, and whether it
// ends in '*'.
func phraseSymbols(p string) ([]uint8, bool, error) {
	prefix := strings.HasSuffix(p, "*")
	if prefix {
		p = p[:len(p)-1]
	}
	var syms []uint8
	sep := true
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch c := symOf[b]; {
		case b == '*' || b == '@':
			return nil, false, errors.New("phrase " + strconv.Quote(p) + ": '*' only at the end, and no '@'")
		case c == symOther:
			return nil, false, errors.New("phrase " + strconv.Quote(p) + ": not ASCII")
		case c == symSep:
			if !sep {
				syms = append(syms, symSep)
				sep = true
			}
		default:
			syms = append(syms, c)
			sep = false
		}
	}
	if len(syms) > 0 && syms[len(syms)-1] == symSep {
		syms = syms[:len(syms)-1]
	}
	if len(syms) == 0 {
		return nil, false, errors.New("phrase " + strconv.Quote(p) + " has no word")
	}
	return syms, prefix, nil
}

// compileWordings builds the automaton for a table.
func compileWordings(rules []WordingRule) (*wordingMatcher, error) {
	if len(rules) > 1<<15-1 {
		return nil, errors.New("too many rules")
	}
	m := &wordingMatcher{rank: make([]uint8, len(rules))}
	for i, r := range rules {
		m.rank[i] = wordingRank(r.Class)
		if m.rank[i] == 0 {
			return nil, errors.New("rule " + strconv.Itoa(i) + ": unknown class")
		}
		if len(r.Phrases) == 0 {
			return nil, errors.New("rule " + strconv.Itoa(i) + ": no phrase")
		}
	}
	children := [][numSyms]int32{{}}
	out := []int16{-1}
	for i := range children[0] {
		children[0][i] = -1
	}
	for ri, r := range rules {
		for _, p := range r.Phrases {
			syms, prefix, err := phraseSymbols(p)
			if err != nil {
				return nil, errors.New("rule " + strconv.Itoa(ri) + ": " + err.Error())
			}
			pat := append([]uint8{symSep}, syms...)
			if !prefix {
				pat = append(pat, symSep)
			}
			n := int32(0)
			for _, c := range pat {
				if children[n][c] < 0 {
					var fresh [numSyms]int32
					for i := range fresh {
						fresh[i] = -1
					}
					children = append(children, fresh)
					out = append(out, -1)
					children[n][c] = int32(len(children) - 1)
				}
				n = children[n][c]
			}
			if out[n] < 0 || m.better(int16(ri), out[n]) {
				out[n] = int16(ri)
			}
		}
	}
	if len(children) > 1<<16 {
		return nil, errors.New("too many states")
	}
	m.delta = make([]uint16, len(children)*numSyms)
	fail := make([]int32, len(children))
	queue := make([]int32, 0, len(children))
	for c := 0; c < numSyms; c++ {
		if v := children[0][c]; v >= 0 {
			m.delta[c] = uint16(v)
			queue = append(queue, v)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		u := queue[qi]
		f := fail[u]
		if fo := out[f]; fo >= 0 && (out[u] < 0 || m.better(fo, out[u])) {
			out[u] = fo
		}
		for c := 0; c < numSyms; c++ {
			next := m.delta[int(f)*numSyms+c]
			if v := children[u][c]; v >= 0 {
				fail[v] = int32(next)
				m.delta[int(u)*numSyms+c] = uint16(v)
				queue = append(queue, v)
			} else {
				m.delta[int(u)*numSyms+c] = next
			}
		}
	}
	m.out = out
	m.start = m.delta[symSep]
	return m, nil
}

// wordingTable is the table, grouped by class in order of precedence and,
// within a class, the more specific rows first (the first row that matches
// is the one reported). WORDINGS.md renders it; TestWordingsDoc keeps the
// two in step.
var wordingTable = []WordingRule{
	// ---- about us: the client, its IP address, the sender, a blocklist ----
	{
		Phrases:  []string{"blocked using"},
		Class:    WordingAboutUs,
		Software: "Postfix (reject_rbl_client, postscreen); also Exchange Online, Yandex, Barracuda",
		Source:   "postfix/src/global/mail_params.h DEF_DEF_RBL_REPLY (\"Service unavailable; $rbl_class [$rbl_what] blocked using $rbl_domain\"), postfix/src/postscreen/postscreen_early.c; reply in postfix/src/smtpd/smtpd_check.ref",
		Example:  "554 5.7.1 Service unavailable; Client host [192.0.2.2] blocked using dnsbltest.porcupine.org; DNS blocklist test",
	},
	{
		Phrases:  []string{"client host rejected", "helo command rejected"},
		Class:    WordingAboutUs,
		Software: "Postfix (smtpd_client_restrictions, smtpd_helo_restrictions: reject_unknown_client_hostname, check_client_access, ...)",
		Source:   "postfix/src/smtpd/smtpd_check.c (reject_unknown_client, reject_unknown_reverse_name) and smtpd_dsn_fix.h (SMTPD_NAME_CLIENT \"Client host\", SMTPD_NAME_HELO \"Helo command\"); reply in postfix/src/smtpd/smtpd_check.ref",
		Example:  "450 4.7.1 Client host rejected: cannot find your hostname, [192.0.2.17]",
	},
	{
		Phrases:  []string{"sender address rejected"},
		Class:    WordingAboutUs,
		Software: "Postfix (smtpd_sender_restrictions, applied at RCPT by default: reject_unknown_sender_domain, reject_unlisted_sender, check_sender_access)",
		Source:   "postfix/src/smtpd/smtpd_check.c reject_unknown_mailhost, via reject_unknown_address (\"%s rejected: Domain not found\"), check_rcpt_maps (5.1.0 for the sender) and smtpd_dsn_fix.h SMTPD_NAME_SENDER; replies in postfix/src/smtpd/smtpd_check.ref and smtpd_addr_valid.ref",
		Example:  "450 4.1.8 <foo@example.com>: Sender address rejected: Domain not found",
		Note:     "reject_unlisted_sender says \"Sender address rejected: User unknown in local recipient table\" (550 5.1.0): about our MAIL FROM, and read so by the precedence.",
	},
	{
		Phrases:  []string{"too many connections from", "too much mail from", "too many recipients from"},
		Class:    WordingAboutUs,
		Software: "Postfix (anvil(8) client rate limits)",
		Source:   "postfix/src/smtpd/smtpd.c (\"421 4.7.0 %s Error: too many connections from %s\", \"450 4.7.1 Error: too much mail from %s\", \"450 4.7.1 Error: too many recipients from %s\")",
		Example:  "421 4.7.0 mx.example.com Error: too many connections from 192.0.2.1",
		Note:     "Temporary; the per-transaction limit (\"452 4.5.3 Error: too many recipients\") is not matched.",
	},
	{
		Phrases:  []string{"sender verify failed"},
		Class:    WordingAboutUs,
		Software: "Exim (ACL verify = sender)",
		Source:   "exim src/src/acl.c (user message \"Sender verify failed\"); reply in exim test/stdout",
		Example:  "550-Verification failed for <x@example.org>\n550-Unrouteable address\n550 Sender verify failed",
		Note:     "The reply quotes why our sender failed (\"Unrouteable address\", words of no mailbox): the precedence reads it as about us.",
	},
	{
		Phrases:  []string{"listed at"},
		Class:    WordingAboutUs,
		Software: "Sendmail (FEATURE(`dnsbl')); also Exim configurations (\"listed at $dnslist_domain\")",
		Source:   "sendmail cf/feature/dnsbl.m4 _DNSBL_MSG_ (\"550 Rejected: \" $&{client_addr} \" listed at \" server); exim doc/doc-docbook/spec.xfpt (dnslists examples)",
		Example:  "550 5.7.1 Rejected: 192.0.2.1 listed at zen.spamhaus.org",
	},
	{
		Phrases:  []string{"domain of sender address"},
		Class:    WordingAboutUs,
		Software: "Sendmail (check_mail: the sender's domain does not resolve)",
		Source:   "sendmail cf/m4/proto.m4, ruleset check_mail (\"553 Domain of sender address \" $&f \" does not exist\", \"451 ... does not resolve\"); real bounce in sisimai set-of-emails maildir/bsd/lhost-sendmail-04.eml",
		Example:  "553 5.1.8 <bounce@example.org>... Domain of sender address bounce@example.org does not exist",
	},
	{
		Phrases:  []string{"envelope sender", "badmailfrom"},
		Class:    WordingAboutUs,
		Software: "qmail, netqmail, notqmail (control/badmailfrom)",
		Source:   "notqmail qmail-smtpd.c err_bmf (\"553 sorry, your envelope sender is in my badmailfrom list (#5.7.1)\")",
		Example:  "553 sorry, your envelope sender is in my badmailfrom list (#5.7.1)",
	},
	{
		Phrases:  []string{"mail from your location", "administratively denied", "your mailserver"},
		Class:    WordingAboutUs,
		Software: "qmail-ldap",
		Source:   "qmail-ldap qmail-smtpd.c err_deny, err_bmf, err_bmfunknown, err_rbl (\"553 sorry, your mailserver [ip] is rejected by ...\")",
		Example:  "553 sorry, mail from your location [192.0.2.1] is administratively denied (#5.7.1)",
	},
	{
		Phrases:  []string{"is listed on", "is listed by", "your mail is not welcome here"},
		Class:    WordingAboutUs,
		Software: "Haraka (haraka-plugin-dns-list; a DENY at connect is repeated to every later command)",
		Source:   "haraka-plugin-dns-list index.js onConnect (\"host [ip] is listed on zones\") and the backscatterer check (\"is listed by ips.backscatterer.org\"); Haraka connection.js connect_respond (554, default \"Your mail is not welcome here\", repeated by loop_respond)",
		Example:  "554 host [192.0.2.1] is listed on zen.spamhaus.org",
	},
	{
		Phrases:  []string{"sending ip*", "from this ip", "banned sender", "client blocked", "rst authrequired", "rst sendernotauthenticated*"},
		Class:    WordingAboutUs,
		Software: "Microsoft Exchange Online / Microsoft 365 (EOP); RESOLVER.RST codes also Exchange on-premises",
		Source:   "https://learn.microsoft.com/en-us/exchange/troubleshoot/email-delivery/ndr/non-delivery-reports-in-exchange-online (5.7.606-649 \"Access denied, banned sending IP\", 5.7.511 \"banned sender\", 5.7.133-136 RESOLVER.RST.SenderNotAuthenticatedFor...) and .../fix-error-code-5-7-700-through-5-7-750 (5.7.708 \"traffic not accepted from this IP\", 5.7.750 \"Client blocked from sending from unregistered domains\"); real bounces in sisimai set-of-emails rhost-microsoft-01.eml, lhost-exchange2007-04.eml",
		Example:  "550 5.7.606 Access denied, banned sending IP [192.0.2.222]. To request removal from this list please visit https://sender.office.com/ and follow the directions. For more information please go to http://go.microsoft.com/fwlink/?LinkID=526655 (AS16012609)",
	},
	{
		Phrases:  []string{"for policy reasons", "namespace mining", "dynamic ip*", "open proxy"},
		Class:    WordingAboutUs,
		Software: "Outlook.com / Hotmail (consumer); \"for policy reasons\" also Yahoo/AOL",
		Source:   "https://substrate.office.com/ip-domain-management-snds/Postmaster/Troubleshooting (SMTP Error Codes 550 SC-001 to OU-002: \"Mail rejected by Outlook.com for policy reasons\"); Yahoo: real bounce in sisimai set-of-emails lhost-postfix-66.eml",
		Example:  "550 SC-001 Mail rejected by Outlook.com for policy reasons. Reasons for rejection may be related to content with spam-like characteristics or IP/domain reputation.",
	},
	{
		Phrases:  []string{"the ip you're using", "unsolicited mail", "ptr record", "sender is unauthenticated", "unauthenticated email"},
		Class:    WordingAboutUs,
		Software: "Gmail / Google Workspace",
		Source:   "https://support.google.com/a/answer/3726730 (550 5.7.1 \"The IP you're using to send email is not authorized...\", 421/550 \"unusual rate of unsolicited mail originating from your IP address\", 550 5.7.25 PTR record, 550 5.7.26 \"the sender is unauthenticated\"); real bounces in sisimai set-of-emails rhost-google-04.eml, rhost-google-06.eml",
		Example:  "550 5.7.1 The IP you're using to send email is not authorized to send email directly to our servers. Use the SMTP relay at your service provider instead.",
		Note:     "\"Use the SMTP relay\" refuses no relaying: no relay phrase matches it.",
	},
	{
		Phrases:  []string{"user complaints", "permanently deferred"},
		Class:    WordingAboutUs,
		Software: "Yahoo / AOL (Yahoo Inc.)",
		Source:   "https://senders.yahooinc.com/smtp-error-codes/ (TSS errors: excessive user complaints, permanent deferral); replies quoted in sisimai rhost/for-yahooinc.go; real bounce in sisimai set-of-emails lhost-postfix-74.eml",
		Example:  "553 5.7.2 [TSS09] All messages from 192.0.2.25 will be permanently deferred; Retrying will NOT succeed. See https://postmaster.yahooinc.com/error-codes",
	},
	{
		Phrases:  []string{"due to local policy"},
		Class:    WordingAboutUs,
		Software: "iCloud Mail (Apple)",
		Source:   "https://support.apple.com/en-us/102322 (formerly HT204137, linked from the refusal); reply quoted in sisimai rhost/for-apple.go",
		Example:  "550 5.7.1 [CS01] Message rejected due to local policy. Please visit https://support.apple.com/en-us/HT204137",
	},
	{
		Phrases:  []string{"suspicion of spam", "spam statistics"},
		Class:    WordingAboutUs,
		Software: "Yandex Mail",
		Source:   "https://yandex.com/support/mail/bounces/yandex.html (\"Message rejected under suspicion of SPAM\", \"Client host [IP_host] blocked using\", \"Blocked by spam statistics\")",
		Example:  "554 5.7.1 [2] Message rejected under suspicion of SPAM; https://ya.cc/",
	},
	{
		Phrases:  []string{"spam message"},
		Class:    WordingAboutUs,
		Software: "Mail.ru",
		Source:   "KumoMTA assets/community/bounces.toml (\"^550.+spam message rejected\", mail.ru); support form https://help.mail.ru/notspam-support",
		Example:  "550 spam message rejected. Please visit http://help.mail.ru/notspam-support/id?c=0",
	},
	{
		Phrases:  []string{"anti spoofing policy", "envelope blocked", "host network not allowed", "rejected due to security policies"},
		Class:    WordingAboutUs,
		Software: "Mimecast",
		Source:   "https://community.mimecast.com/s/article/Mimecast-SMTP-Error-Codes-842605754 (\"Rejected by header based Anti-Spoofing policy\", \"Envelope blocked\", \"Host network not allowed\", \"Email rejected due to security policies\"); real bounces in sisimai set-of-emails rhost-mimecast-01.eml, rhost-mimecast-02.eml",
		Example:  "554 Host network not allowed - https://community.mimecast.com/docs/DOC-1369#554 [z7qZw5BPd1zlDYHka4589ru.us222]",
	},
	{
		Phrases:  []string{"ipcheck proofpoint", "proofpoint com dnsbl lookup"},
		Class:    WordingAboutUs,
		Software: "Proofpoint (Dynamic Reputation; also in front of iCloud)",
		Source:   "https://www.proofpoint.com/postmaster; real bounce in sisimai set-of-emails lhost-postfix-38.eml; iCloud's \"550 5.7.0 Blocked - see https://support.proofpoint.com/dnsbl-lookup.cgi?ip=...\" quoted in sisimai rhost/for-apple.go",
		Example:  "554 Blocked - see https://support.proofpoint.com/dnsbl-lookup.cgi?ip=192.0.2.225",
	},
	{
		Phrases:  []string{"barracuda reputation", "barracudacentral"},
		Class:    WordingAboutUs,
		Software: "Barracuda (BRBL b.barracudacentral.org; Barracuda Email Security Gateway)",
		Source:   "published bounces at https://luxsci.com/blog/?p=16857 and http://tig.csail.mit.edu/wiki/TIG/EmailBlockedByBarracuda; zone named in postfix/README_FILES/POSTSCREEN_README",
		Example:  "554 Service unavailable; Client host [mail.example.com] blocked using Barracuda Reputation; http://bbl.barracudacentral.com/q.cgi?ip=192.0.2.1",
	},
	{
		Phrases:  []string{"spamhaus"},
		Class:    WordingAboutUs,
		Software: "Spamhaus lists (ZEN, SBL, XBL, PBL, DBL), named by Postfix, Exim, Sendmail, Yahoo, iCloud, Exchange Online",
		Source:   "postfix postconf(5) rbl_reply_maps example (\"blocked using ZEN - see https://www.spamhaus.org/query/ip/$client_address\"); Yahoo's reply quoted in sisimai rhost/for-yahooinc.go",
		Example:  "553 5.7.1 [BL21] Connections will not be accepted from 192.0.2.25, because the ip is in Spamhaus's list; see http://postmaster.yahoo.com/550-bl23.html",
	},
	{
		Phrases:  []string{"spamcop"},
		Class:    WordingAboutUs,
		Software: "SpamCop (bl.spamcop.net)",
		Source:   "SpamCop's recommended block message (\"Email from your IP Address [IP Address] blocked, see http://spamcop.net/bl.shtml?[IP Address]\"), http://forum.spamcop.net/forums/lofiversion/index.php/t5435.html; published bounce at https://blog.inframes.com/2013/08",
		Example:  "554 5.7.1 Rejected - your IP address was found in a blacklist for sending spam. Please visit: http://spamcop.net/bl.shtml?192.0.2.95",
	},
	{
		Phrases:  []string{"block list*", "blocklist*", "black list*", "blacklist*", "dnsbl", "rbl"},
		Class:    WordingAboutUs,
		Software: "DNSBL wording: GMX/Web.de (\"IP address is block listed\"), Outlook.com (\"on our block list\"), Exim (configure.default), Postfix (\"DNS blocklist\"), many",
		Source:   "https://postmaster.gmx.com/en/error-messages (\"554-IP address is block listed.\"); exim src/src/configure.default (dnslists example \"is in a black list at $dnslist_domain\"); real bounces in sisimai set-of-emails lhost-sendmail-33.eml (\"IP address blacklisted by recipient\"), lhost-amazonses-14.eml (\".../rbl/?ip=\")",
		Example:  "554-gmx.net (mxgmx104) Nemesis ESMTP Service not available\n554-No SMTP service\n554-IP address is block listed.\n554 For explanation visit https://postmaster.gmx.net/en/case?c=r0201&i=ip&v=192.0.2.42&r=1MNcgj-1ue23t3pyV-00S2YR",
	},
	{
		Phrases:  []string{"dns ptr", "reverse dns", "reverse hostname", "rdns"},
		Class:    WordingAboutUs,
		Software: "rDNS checks: GMX/Web.de/mail.com (\"Bad DNS PTR resource record\"), Postfix (\"cannot find your reverse hostname\"), qmail-ldap, Exim configurations",
		Source:   "https://postmaster.gmx.com/en/error-messages (c=rdns); postfix/src/smtpd/smtpd_check.c reject_unknown_reverse_name; real bounces in sisimai set-of-emails lhost-postfix-60.eml, lhost-exim-43.eml",
		Example:  "554-mail.com (mxgmxus002) Nemesis ESMTP Service not available\n554-No SMTP service\n554-Bad DNS PTR resource record.\n554 For explanation visit http://postmaster.gmx.com/en/error-messages?ip=192.0.2.22&c=rdns",
	},
	{
		Phrases:  []string{"rate limit*", "frequency limited", "too many connections", "sent to too many recipients"},
		Class:    WordingAboutUs,
		Software: "rate and connection limits: Microsoft (\"temporarily rate limited due to IP reputation\"), Gmail (\"rate limited\"), Tencent QQ (\"Ip frequency limited\"), GoDaddy (\"has sent to too many recipients this hour\")",
		Source:   "real bounces in sisimai set-of-emails rhost-microsoft-05.eml, lhost-postfix-09.eml, rhost-tencent-01.eml, rhost-godaddy-03.eml; https://support.google.com/a/answer/3726730 (421 4.7.28)",
		Example:  "451 4.7.650 The mail server [192.0.2.25] has been temporarily rate limited due to IP reputation. For e-mail delivery information, see https://postmaster.live.com (S3113)",
		Note:     "GoDaddy sends its limit with 550 5.1.1, whose specific code the engine reads before the words.",
	},
	{
		Phrases:  []string{"as spam", "looks like spam", "spam content"},
		Class:    WordingAboutUs,
		Software: "content filters (SpamAssassin/amavis front ends, Yandex's list of other servers' replies)",
		Source:   "https://yandex.com/support/mail/bounces/other.html (\"Message rejected as spam by Content Filtering\", \"Sorry, message looks like SPAM to me\"); real bounce in sisimai set-of-emails lhost-postfix-39.eml",
		Example:  "554 5.6.0 This message has been scored as spam with a probability of more than 90%",
	},
	{
		Phrases:  []string{"spf", "dkim", "dmarc", "sender policy framework", "sender id", "sending domain"},
		Class:    WordingAboutUs,
		Software: "sender authentication: Gmail (5.7.26), Exchange Online (5.7.509), Outlook.com (Sender ID), Mail.ru, Yahoo, GMX (\"Reject due to SPF policy\")",
		Source:   "https://support.google.com/a/answer/3726730 (5.7.26); https://learn.microsoft.com/en-us/exchange/troubleshoot/email-delivery/ndr/non-delivery-reports-in-exchange-online (5.7.509); real bounces in sisimai set-of-emails rhost-microsoft-04.eml, lhost-postfix-72.eml",
		Example:  "550 5.7.509 Access denied, sending domain [EXAMPLE.COM] does not pass DMARC verification and has a DMARC policy of reject.",
	},
	{
		Phrases:  []string{"reputation"},
		Class:    WordingAboutUs,
		Software: "reputation blocks: Mimecast (\"Local CT IP Reputation\"), Gmail (\"very low reputation of the sending IP address\"), Microsoft, Barracuda",
		Source:   "https://community.mimecast.com/s/article/Mimecast-SMTP-Error-Codes-842605754 (\"550 Local CT IP Reputation - (reject)\"); real bounce in sisimai set-of-emails lhost-postfix-58.eml",
		Example:  "550 Local CT IP Reputation - (reject)",
	},
	{
		Phrases:  []string{"client host", "client ip", "your ip", "sender ip"},
		Class:    WordingAboutUs,
		Software: "words naming the client: Orange (\"Client host blocked for spamming issues\"), Exchange Online (\"Client host [IP] blocked using Spamhaus\"), Outlook.com (\"mismatches client ip\"), many",
		Source:   "real bounces in sisimai set-of-emails rhost-franceptt-06.eml, lhost-outlook-09.eml, lhost-amazonses-16.eml; https://learn.microsoft.com/en-us/exchange/troubleshoot/email-delivery/ndr/non-delivery-reports-in-exchange-online (5.7.513 \"Client host [$ConnectingIP] blocked by $recipientDomain using Customer Block list\")",
		Example:  "550 mwinf5c04 ME Adresse IP source bloquee pour incident de spam. Client host blocked for spamming issues. OFR006_102 Ref http://csi.cloudmark.com/reset-request/?ip=192.0.2.1 [102]",
		Note:     "\"sender ip\" has no published reply of its own; it names the client as plainly as \"client ip\".",
	},
	{
		Phrases:  []string{"sender rejected", "unauthenticated senders"},
		Class:    WordingAboutUs,
		Software: "sender refusals: Cox, Spectrum (\"sender rejected\"), Courier (\"517 Sender rejected\"), hosting providers (\"Unauthenticated senders not allowed\")",
		Source:   "courier submit.C (\"517 Sender rejected: \"); real bounces in sisimai set-of-emails rhost-cox-01.eml, rhost-spectrum-01.eml, lhost-postfix-65.eml",
		Example:  "550 5.1.0 <bounce@example.com> sender rejected. Refer to Error Codes section at https://www.cox.com/residential/support/email-error-codes.html for more information. AUP#CDRBL",
	},

	// ---- too many recipients: the transaction's, not the mailbox's ----
	{
		Phrases:  []string{"too many bad recipients", "too many recipients"},
		Class:    WordingTooManyRecipients,
		Software: "Exim (recipients_max_reject: \"552 too many recipients\"; Debian's exim4-config acl_check_rcpt: \"Rejected for too many bad recipients\"); RFC 5321; Postfix and OpenSMTPD say it with 452/451 4.5.3",
		Source:   "RFC 5321 §4.5.3.1.10 (\"552 Too many recipients\", to be treated as temporary); exim src/src/smtp_in.c recipients_max_reject; Debian exim4-config conf.d/acl/30_exim4-config_check_rcpt (CHECK_RCPT_NO_FAIL_TOO_MANY_BAD_RCPT)",
		Example:  "550 Rejected for too many bad recipients",
		Note:     "About the transaction: the same recipients asked in a new transaction get their own answers.",
	},
	// ---- greylisting: recognised and left unread ----
	{
		Phrases:  []string{"greylist*", "graylist*"},
		Class:    WordingNone,
		Software: "Postgrey (Postfix policy server); Haraka greylist plugin",
		Source:   "postgrey (greylist_text default \"Greylisted, see http://postgrey.schweikert.ch/help/%r.html\", DEFER_IF_PERMIT); haraka-plugin-greylist config/greylist.ini (\"Greylisted. Please come back later.\") and index.js (DENYSOFT, 451); published reply at https://www.bytecamp.net/de/faq/email/zustellen.html",
		Example:  "450 4.2.0 <x@example.com>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/example.com.html",
		Note:     "Temporary: the engine retries any 4xx, whatever its words. The row keeps a greylisting from being read as anything else; \"graylist\" is the American spelling.",
	},

	// ---- no relay: the host does not take mail for the domain ----
	{
		Phrases:  []string{"relay access denied"},
		Class:    WordingNoRelay,
		Software: "Postfix (reject_unauth_destination); also iCloud, Microsoft 365 (\"550 5.7.64 TenantAttribution; Relay Access Denied\")",
		Source:   "postfix/src/smtpd/smtpd_check.c reject_unauth_destination (\"Relay access denied\"); reply in postfix/src/smtpd/smtpd_check.ref; iCloud's quoted in sisimai rhost/for-apple.go; https://learn.microsoft.com/en-us/exchange/troubleshoot/email-delivery/ndr/relay-access-denied-smtp",
		Example:  "554 5.7.1 <foo@example.com>: Recipient address rejected: Relay access denied",
		Note:     "Microsoft 365's 5.7.64 refuses a sending server its connector does not recognise: the specific code, read first by the engine, makes it a policy refusal that blames no egress address.",
	},
	{
		Phrases:  []string{"relaying denied"},
		Class:    WordingNoRelay,
		Software: "Sendmail (check_rcpt); also Courier (\"513 Relaying denied.\"), qmail-ldap, Yahoo",
		Source:   "sendmail cf/m4/proto.m4, ruleset check_rcpt (\"550 Relaying denied\", \"Relaying denied. IP name lookup failed\", \"Relaying denied. IP name possibly forged\"); courier module.esmtp/esmtp.C (513 \"Relaying denied.\"); qmail-ldap qmail-smtpd.c err_nogateway",
		Example:  "550 5.7.1 <x@example.com>... Relaying denied. IP name lookup failed [192.0.2.111]",
		Note:     "Sendmail says so only when the domain is not its own; the IP-name part explains why the client may not relay, so it makes no phrase about us.",
	},
	{
		Phrases:  []string{"relay not permitted"},
		Class:    WordingNoRelay,
		Software: "Exim (default configuration)",
		Source:   "exim src/src/configure.default acl_check_rcpt (\"require message = relay not permitted\"); reply in exim test/stdout",
		Example:  "550 relay not permitted",
	},
	{
		Phrases:  []string{"list of allowed rcpthosts"},
		Class:    WordingNoRelay,
		Software: "qmail, netqmail, notqmail",
		Source:   "notqmail qmail-smtpd.c err_nogateway (\"553 sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)\")",
		Example:  "553 sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)",
	},
	{
		Phrases:  []string{"we don't relay"},
		Class:    WordingNoRelay,
		Software: "qmail-ldap",
		Source:   "qmail-ldap qmail-smtpd.c err_relay (\"553 sorry, we don't relay for [ip] (#5.7.1)\")",
		Example:  "553 sorry, we don't relay for [192.0.2.1] (#5.7.1)",
	},
	{
		Phrases:  []string{"unable to relay"},
		Class:    WordingNoRelay,
		Software: "Microsoft Exchange (on-premises)",
		Source:   "https://knowledge.broadcom.com/external/article/175921 (\"550 5.7.1 Unable to relay\" from Exchange for a non-accepted domain); Microsoft KB 289553, cited at http://www.chilkatsoft.com/faq/Smtp550.html",
		Example:  "550 5.7.1 Unable to relay",
	},
	{
		Phrases:  []string{"i cannot deliver mail for"},
		Class:    WordingNoRelay,
		Software: "Haraka (no rcpt hook accepted the recipient: by default its domain is not in host_list)",
		Source:   "Haraka connection.js rcpt_respond (default \"I cannot deliver mail for <rcpt>\"); docs/Plugins.md; docs/plugins/rcpt_to.in_host_list.md",
		Example:  "550 I cannot deliver mail for <x@example.com>",
		Note:     "Haraka says the same when a recipient plugin passes on an address of a local domain; either way no mail reaches the address through this host.",
	},

	// ---- disabled: the mailbox exists and takes no mail ----
	{
		Phrases:  []string{"account that you tried to reach is disabled", "account that you tried to reach is inactive"},
		Class:    WordingDisabled,
		Software: "Gmail / Google Workspace",
		Source:   "https://support.google.com/a/answer/3726730 (550 5.2.1); real bounces in sisimai set-of-emails lhost-amazonses-20.eml, rhost-google-07.eml",
		Example:  "550-5.2.1 The email account that you tried to reach is disabled. Learn more at\n550 5.2.1 https://support.google.com/mail/?p=DisabledUser 000000000000eee.000 - gsmtp",
	},
	{
		Phrases:  []string{"account has been disabled", "mailbox is disabled"},
		Class:    WordingDisabled,
		Software: "Yahoo / AOL",
		Source:   "real bounce in sisimai set-of-emails lhost-postfix-52.eml; \"This mailbox is disabled (554.30)\" quoted in sisimai rhost/for-yahooinc.go and KumoMTA assets/community/bounces.toml",
		Example:  "554 delivery error: dd Sorry your message to x@example.com cannot be delivered. This account has been disabled or discontinued [#102]. - mta222.mail.example.com",
	},
	{
		Phrases:  []string{"mailbox disabled"},
		Class:    WordingDisabled,
		Software: "Zimbra (LMTP); RFC 3463's text for X.2.1",
		Source:   "Zimbra zm-mailbox store/src/java/com/zimbra/cs/lmtpserver/LmtpReply.java MAILBOX_DISABLED (450 4.2.1 \"Mailbox disabled, not accepting messages\"); RFC 3463 §3.3",
		Example:  "450 4.2.1 Mailbox disabled, not accepting messages",
	},
	{
		Phrases:  []string{"disabled recipient", "user account disabled"},
		Class:    WordingDisabled,
		Software: "RFC 5248's X.7.13 (\"User Account Disabled\"); Sendmail-based hosts",
		Source:   "IANA SMTP Enhanced Status Codes registry (RFC 5248), X.7.13; real bounce in sisimai set-of-emails lhost-sendmail-35.eml",
		Example:  "525 5.7.13 Disabled recipient address",
	},
	{
		Phrases:  []string{"policy rejection on the target address"},
		Class:    WordingDisabled,
		Software: "Yandex Mail (the recipient's account is blocked); the wording comes from ZMailer",
		Source:   "https://yandex.com/support/mail/bounces/yandex/policy-rejection-on-the-target-address.html (\"your message recipient's account has been blocked\")",
		Example:  "550 5.7.1 Policy rejection on the target address",
		Note:     "ZMailer, where the words come from, uses them for any policy refusal of a recipient; both readings make the address undeliverable.",
	},
	{
		Phrases:  []string{"mailbox is frozen", "recipient account is blocked", "temporary locked"},
		Class:    WordingDisabled,
		Software: "i.ua (\"Mailbox is frozen\"), Orange (\"The recipient account is blocked\"), others",
		Source:   "real bounces in sisimai set-of-emails rhost-iua-01.eml, rhost-franceptt-05.eml, lhost-amazonses-19.eml",
		Example:  "550 5.5.0 Le compte du destinataire est bloque. The recipient account is blocked. LPN007_426",
	},

	// ---- full: the mailbox exists and is over quota ----
	{
		Phrases:  []string{"quota exceeded", "mailbox for user is full"},
		Class:    WordingFull,
		Software: "Dovecot (LMTP; the quota-status policy service Postfix asks at RCPT)",
		Source:   "dovecot/core src/plugins/quota/quota-settings.c (quota_exceeded_message \"Quota exceeded (mailbox for user is full)\"), src/lmtp/lmtp-local.c (552 5.2.2, or 452 4.2.2), src/plugins/quota/quota-status.c (\"554 5.2.2 %{error}\"); real bounce in sisimai set-of-emails lhost-postfix-63.eml",
		Example:  "552 5.2.2 <x@example.org> Quota exceeded (mailbox for user is full)",
	},
	{
		Phrases:  []string{"mailbox full", "mailbox is full"},
		Class:    WordingFull,
		Software: "Sendmail, Exim (appendfile), OpenSMTPD, Exchange (\"STOREDRV.Deliver: mailbox full\")",
		Source:   "exim src/src/transports/appendfile.c (\"mailbox is full\"); OpenSMTPD usr.sbin/smtpd/esc.c (ESC_MAILBOX_FULL \"Mailbox full\"); real bounces in sisimai set-of-emails rhost-aol-02.eml, lhost-exchange2007-02.eml",
		Example:  "550 5.2.2 <x@example.co.jp>... Mailbox Full",
	},
	{
		Phrases:  []string{"out of storage space"},
		Class:    WordingFull,
		Software: "Gmail / Google Workspace",
		Source:   "https://support.google.com/a/answer/3726730 (452 4.2.2, 552 5.2.2 \"The recipient's inbox is out of storage space\"); real bounce in sisimai set-of-emails rhost-google-05.eml",
		Example:  "552-5.2.2 The recipient's inbox is out of storage space and inactive. Please\n552-5.2.2 direct the recipient to\n552 5.2.2 https://support.google.com/mail/?p=OverQuotaPerm c2-202229zmZBNM3agi23.222 - gsmtp",
	},
	{
		Phrases:  []string{"over quota", "overquota*"},
		Class:    WordingFull,
		Software: "Zimbra (LMTP \"Over quota\"), iCloud (\"user is over quota\"), Gmail (\"is over quota\", \"?p=OverQuotaPerm\")",
		Source:   "Zimbra zm-mailbox LmtpReply.java PERMANENT_FAILURE_OVER_QUOTA (552 5.2.2 \"Over quota\"); https://support.google.com/a/answer/3726730; real bounce in sisimai set-of-emails rhost-apple-03.eml",
		Example:  "552 5.2.2 <x@icloud.com>: user is over quota",
	},
	{
		Phrases:  []string{"mailbox size limit exceeded", "mailbox size exceeded"},
		Class:    WordingFull,
		Software: "Yandex Mail",
		Source:   "https://yandex.com/support/mail/bounces/yandex/mailbox-size-limit-exceeded.html (\"Mailbox size exceeded\", \"Mailbox size limit exceeded\")",
		Example:  "552 5.2.2 Mailbox size limit exceeded",
	},
	{
		Phrases:  []string{"exceeded storage allocation", "exhausted allowed storage"},
		Class:    WordingFull,
		Software: "RFC 5321's text for 552; Web.de",
		Source:   "RFC 5321 §4.2.2 (552 \"Requested mail action aborted: exceeded storage allocation\"); KumoMTA assets/community/bounces.toml (\"exceeded storage allocation Quota exceeded\", web.de); Web.de's reply listed at http://www.sitepackage.de/service/dokumentation/auswertung/typische-fehlermeldungen-bei-unzustellbarkeit.html",
		Example:  "550 Benutzer hat das Speichervolumen ueberschritten. / User has exhausted allowed storage space.",
		Note:     "The stock text of 552 names one cause, unlike 550's \"mailbox unavailable\", which is left unread.",
	},

	// ---- no mailbox ----
	{
		Phrases:  []string{"user unknown in local recipient table", "user unknown in virtual mailbox table", "user unknown in virtual alias table", "user unknown in relay recipient table"},
		Class:    WordingNoMailbox,
		Software: "Postfix (smtpd_reject_unlisted_recipient, virtual_alias_maps, relay_recipient_maps)",
		Source:   "postfix/src/smtpd/smtpd_check.c check_rcpt_maps (\"%s rejected: User unknown%s\"), postfix/src/trivial-rewrite/resolve.c (\" in virtual alias table\"); reply in postfix/src/smtpd/smtpd_addr_valid.ref",
		Example:  "550 5.1.1 <foo@example.com>: Recipient address rejected: User unknown in local recipient table",
	},
	{
		Phrases:  []string{"user unknown"},
		Class:    WordingNoMailbox,
		Software: "Sendmail; also Postfix (show_user_unknown_table_name = no), Courier (\"User unknown.\"), Oracle/Sun Messaging Server",
		Source:   "sendmail src/recipient.c recipient() (\"550 5.1.1 User unknown\"); courier cdmsgq2.C (\"550 User unknown.\"); real bounces in sisimai set-of-emails lhost-sendmail-01.eml, lhost-courier-01.eml, lhost-messagingserver-06.eml",
		Example:  "550 5.1.1 <x@example.org>... User Unknown",
	},
	{
		Phrases:  []string{"unrouteable address", "unknown user"},
		Class:    WordingNoMailbox,
		Software: "Exim (default configuration: verify = recipient; router localuser's cannot_route_message); \"Unknown user\" also Courier, McAfee",
		Source:   "exim src/src/route.c (default message \"Unrouteable address\"), src/src/configure.default (localuser: cannot_route_message = Unknown user); courier submit.C (511 \"Unknown user.\"); replies in exim's test suite (test/stdout, test/log)",
		Example:  "550 Unrouteable address",
	},
	{
		Phrases:  []string{"invalid recipient"},
		Class:    WordingNoMailbox,
		Software: "OpenSMTPD; also Mimecast (\"550 Invalid Recipient\")",
		Source:   "OpenSMTPD usr.sbin/smtpd/lka_session.c lka_resume (\"550 Invalid recipient\") and smtp_session.c (\"%s: <%s>\"); https://community.mimecast.com/s/article/Mimecast-SMTP-Error-Codes-842605754",
		Example:  "550 Invalid recipient: <x@example.com>",
		Note:     "OpenSMTPD says so both for an unknown user and for a recipient no rule accepts.",
	},
	{
		Phrases:  []string{"mailing list expansion problem"},
		Class:    WordingNoMailbox,
		Software: "OpenSMTPD (an address its virtual table does not have)",
		Source:   "OpenSMTPD usr.sbin/smtpd/lka_session.c lka_expand (no alias for a virtual domain's user: LKA_PERMFAIL with \"524 5.2.4 Mailing list expansion problem\"); seen from OpenSMTPD 6.8.0p2 in probe/realmta",
		Example:  "524 5.2.4 Mailing list expansion problem: <x@example.com>",
		Note:     "RFC 3463's words for X.2.4; a real list whose expansion fails cannot take mail either.",
	},
	{
		Phrases:  []string{"no such user here"},
		Class:    WordingNoMailbox,
		Software: "Zimbra (LMTP); Sendmail virtusertable error:nouser entries",
		Source:   "Zimbra zm-mailbox store/src/java/com/zimbra/cs/lmtpserver/LmtpReply.java NO_SUCH_USER (550 5.1.1 \"No such user here\"); real Sendmail bounce in sisimai set-of-emails lhost-v5sendmail-05.eml",
		Example:  "550 5.1.1 No such user here",
	},
	{
		Phrases:  []string{"no such user"},
		Class:    WordingNoMailbox,
		Software: "Yandex Mail (\"No such user!\"); Symantec MessageLabs, McAfee",
		Source:   "https://yandex.com/support/mail/bounces/yandex.html (\"No such user\"); real bounces in sisimai set-of-emails rhost-messagelabs-02.eml, lhost-mcafee-04.eml",
		Example:  "550 5.7.1 No such user!",
		Note:     "Yandex sends it with 5.7.1, a policy code: the words, not the code, say no mailbox.",
	},
	{
		Phrases:  []string{"user doesn't exist"},
		Class:    WordingNoMailbox,
		Software: "Dovecot LMTP (behind Postfix or Exim)",
		Source:   "dovecot/core src/lmtp/lmtp-recipient.c (550 5.1.1 \"User doesn't exist: %s\")",
		Example:  "550 5.1.1 <x@example.com> User doesn't exist: x@example.com",
	},
	{
		Phrases:  []string{"no mailbox here by that name"},
		Class:    WordingNoMailbox,
		Software: "qmail-ldap (qmail-verify at RCPT); the same words are qmail-local's bounce",
		Source:   "qmail-ldap qmail-verify.c and qmail-smtpd.c ldaplookup (\"Sorry, no mailbox here by that name. (#5.1.1)\", answered with 554 by err_554msg); notqmail qmail-local.c",
		Example:  "554 Sorry, no mailbox here by that name. (#5.1.1)",
	},
	{
		Phrases:  []string{"resolver adr recipientnotfound", "resolver adr recipnotfound", "resolver adr exrecipnotfound", "recipient not found"},
		Class:    WordingNoMailbox,
		Software: "Microsoft Exchange (on-premises) and Exchange Online",
		Source:   "https://learn.microsoft.com/en-us/exchange/troubleshoot/email-delivery/ndr/non-delivery-reports-in-exchange-online (5.1.10 \"Recipient not found\"); real bounces in sisimai set-of-emails lhost-office365-13.eml, lhost-exchange2007-01.eml",
		Example:  "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup",
	},
	{
		Phrases:  []string{"account that you tried to reach does not exist", "nosuchuser"},
		Class:    WordingNoMailbox,
		Software: "Gmail / Google Workspace",
		Source:   "https://support.google.com/a/answer/3726730 (550 5.1.1); real bounce in sisimai set-of-emails rhost-google-02.eml",
		Example:  "550-5.1.1 The email account that you tried to reach does not exist. Please try\n550-5.1.1 double-checking the recipient's email address for typos or\n550-5.1.1 unnecessary spaces. Learn more at\n550 5.1.1 https://support.google.com/mail/?p=NoSuchUser e22-n7GpZmsf093195.222 - gsmtp",
	},
	{
		Phrases:  []string{"user doesn't have a", "mailbox not found"},
		Class:    WordingNoMailbox,
		Software: "Yahoo / AOL",
		Source:   "https://help.yahoo.com/kb/mail-for-desktop/SLN3444.html (\"554 delivery error: dd This user doesn't have a ... account\"); real bounce in sisimai set-of-emails lhost-sendmail-41.eml; \"552 1 Requested mail action aborted, mailbox not found\" quoted in sisimai rhost/for-yahooinc.go",
		Example:  "554 delivery error: dd This user doesn't have a yahoo.com account (x@yahoo.com) [0] - mta1061.mail.ne1.yahoo.com",
	},
	{
		Phrases:  []string{"inactive email address", "unknown or illegal alias", "no longer on server"},
		Class:    WordingNoMailbox,
		Software: "iCloud Mail (Apple)",
		Source:   "real bounces in sisimai set-of-emails rhost-apple-04.eml (\"inactive email address\"), lhost-postfix-16.eml (\"recipient no longer on server\"); \"unknown or illegal alias\" quoted in sisimai rhost/for-apple.go",
		Example:  "550 5.1.1 <x@icloud.com>: inactive email address",
		Note:     "iCloud sends \"inactive email address\" with 5.1.1: an address it does not know, not a disabled one.",
	},
	{
		Phrases:  []string{"invalid mailbox", "user not found"},
		Class:    WordingNoMailbox,
		Software: "Mail.ru",
		Source:   "KumoMTA assets/community/bounces.toml (\"Message was not accepted -- invalid mailbox\", mail.ru); https://mailout.ru/2015/09 (\"User not found\")",
		Example:  "550 Message was not accepted -- invalid mailbox.  Local mailbox x@mail.ru is unavailable: user not found",
	},
	{
		Phrases:  []string{"mailbox does not exist", "address does not exist"},
		Class:    WordingNoMailbox,
		Software: "Amazon SES (inbound), Facebook, others",
		Source:   "real bounces in sisimai set-of-emails lhost-receivingses-01.eml (\"550 5.1.1 Mailbox does not exist\"), rhost-facebook-04.eml (\"Recipient address does not exist\")",
		Example:  "550 5.1.1 Mailbox does not exist",
	},
	{
		Phrases:  []string{"not our customer"},
		Class:    WordingNoMailbox,
		Software: "Comcast",
		Source:   "KumoMTA assets/community/bounces.toml (\"^550.+Not our Customer\", comcast.net); real bounce in sisimai set-of-emails lhost-sendmail-22.eml",
		Example:  "551 not our customer",
	},
}
