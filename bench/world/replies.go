package world

import (
	"regexp"
	"strconv"
	"strings"
)

// Says is what a refusal of RCPT tells a careful reader about the
// recipient: what the software that sends it means by it, as its
// documentation or its source says. The world writes it down beside each
// reply it gives (Replies, Domain.UnknownSays); Expect answers from it,
// not from the reply's words. It is the world's own account of the
// servers it plays, written from their documentation and source, not
// from any verifier's way of reading replies.
type Says string

// What a refusal says.
const (
	// SaysNoMailbox: there is no such mailbox here.
	SaysNoMailbox Says = "no_mailbox"
	// SaysClient: the refusal is about the client — its IP address or
	// name, its sender, a block list, a reputation —, not the recipient.
	SaysClient Says = "client"
	// SaysNothing: a refusal that does not say why: the recipient, the
	// client and a policy are all possible.
	SaysNothing Says = "nothing"
	// SaysFull: the mailbox exists and is full.
	SaysFull Says = "full"
	// SaysDisabled: the mailbox exists and is disabled.
	SaysDisabled Says = "disabled"
	// SaysNoRelay: the host takes no mail for the recipient's domain.
	SaysNoRelay Says = "no_relay"
	// SaysSyntax: the address is malformed.
	SaysSyntax Says = "syntax"
	// SaysDeferred: a temporary refusal (4xx): try again later.
	SaysDeferred Says = "deferred"
)

// validSays reports whether s is one of the Says constants.
func validSays(s Says) bool {
	switch s {
	case SaysNoMailbox, SaysClient, SaysNothing, SaysFull, SaysDisabled, SaysNoRelay, SaysSyntax, SaysDeferred:
		return true
	}
	return false
}

// Reply is a reply a real server gives to RCPT, as the world's hosts give
// it (Domain.UnknownReply), with what it means.
type Reply struct {
	// Line is the reply line. {addr} stands for the recipient as the
	// client gave it (the host fills it in); any other {name} for
	// something of the server's own (a host name, a list, an address):
	// looking a line up, each placeholder matches a run of characters
	// other than blanks.
	Line string
	// Says is what the reply means, by Source.
	Says Says
	// Provider, when set, limits the meaning to hosts playing that
	// provider (Host.Provider): elsewhere the same words are RFC 5321's
	// stock text for any refusal, and mean what the codes say.
	Provider string
	// Source is whose reply it is and where its meaning is documented.
	Source string
}

// Replies are the refusals of RCPT the world knows, with what each
// means. A Domain.UnknownReply whose words (the line after the code and
// any enhanced code, in any case) are one of these means what it says
// here whatever its code, when the code is permanent (5xx); see
// unknownSays for the others.
var Replies = []Reply{
	// Self-hosted MTAs, in their stock configurations.
	{Line: "550 Unrouteable address", Says: SaysNoMailbox,
		Source: "Exim: route.c's message when no router accepts the address and the last one tried sets no cannot_route_message; the RCPT ACL's `require verify = recipient` (configure.default) refuses with it. From the domain's own MX: no local part of that name"},
	{Line: "550 Unknown user", Says: SaysNoMailbox,
		Source: "Exim: configure.default's localuser router, `cannot_route_message = Unknown user`, when no router accepts a local part of a local domain"},
	{Line: "550 Invalid recipient: <{addr}>", Says: SaysNoMailbox,
		Source: "OpenSMTPD: lka_session.c's \"550 Invalid recipient\" when no rule of smtpd.conf matches the recipient (a `rcpt-to` table without it), with the address appended by smtp_session.c"},
	{Line: "524 5.2.4 Mailing list expansion problem: <{addr}>", Says: SaysNoMailbox,
		Source: "OpenSMTPD: lka_session.c, a virtual domain's user with no alias in its table (\"no aliases for virtual\": LKA_PERMFAIL), seen from OpenSMTPD 6.8.0p2 in probe/realmta"},
	{Line: "524 5.2.4 Mailing list expansion problem", Says: SaysNoMailbox,
		Source: "OpenSMTPD: as above, without the address smtp_session.c appends"},
	{Line: "550 5.1.1 <{addr}>: Recipient address rejected: User unknown in virtual mailbox table", Says: SaysNoMailbox,
		Source: "Postfix: smtpd_check.c, a recipient of a virtual mailbox domain not in virtual_mailbox_maps (unknown_virtual_mailbox_reject_code 550)"},
	{Line: "550 5.1.1 <{addr}>: Recipient address rejected: User unknown in local recipient table", Says: SaysNoMailbox,
		Source: "Postfix: smtpd_check.c, a recipient of a local domain not in local_recipient_maps"},
	{Line: "554 5.7.1 <{addr}>: Recipient address rejected: Access denied", Says: SaysNothing,
		Source: "Postfix: smtpd_check.c's text for a REJECT without text in any check_*_access table (access_map_reject_code 554): a list of recipients, of senders or of clients alike"},
	{Line: "554 5.7.1 Service unavailable; Client host [{ip}] blocked using {list}", Says: SaysClient,
		Source: "Postfix: reject_rbl_client's default reply (default_rbl_reply in mail_params.h): the client's address is on a DNS block list"},
	{Line: "550 No such user here", Says: SaysNoMailbox,
		Source: "a bare 550 in plain words, as many servers word an unknown local part (quoted in sisimai/go-sisimai lhost/via-mailfoundry.go and lhost/via-gmail.go)"},
	{Line: "550 5.1.1 no such user", Says: SaysNoMailbox,
		Source: "the world's own reply to an unknown local part (replyNoSuchUser)"},
	{Line: "550 5.7.1 User unknown", Says: SaysNoMailbox,
		Source: "a server that misuses the policy code 5.7.1 for a local part it does not know, in words that say so"},

	// Providers (Host.Provider).
	{Line: "550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)", Says: SaysNoMailbox, Provider: "outlook",
		Source: "Outlook.com's refusal of an unknown recipient (sisimai/go-sisimai rhost/for-outlook.go lists it as user unknown)"},
	{Line: "550 Requested action not taken: mailbox unavailable", Says: SaysNoMailbox, Provider: "gmx",
		Source: "GMX and WEB.DE refuse an unknown recipient with RFC 5321's stock text for 550 (§4.2.2); from other servers the same text covers any refusal"},
	{Line: "550 5.7.1 No such user!", Says: SaysNoMailbox,
		Source: "Yandex's refusal of an unknown recipient: the words say it, the code 5.7.1 does not"},
	{Line: "550 5.4.1 Recipient address rejected: Access denied. AS(201806281)", Says: SaysNoMailbox, Provider: "microsoft365",
		Source: "Exchange Online's directory-based edge blocking: the recipient is not in the tenant's directory (learn.microsoft.com, \"Fix email delivery issues for error code 550 5.4.1 in Exchange Online\")"},
	{Line: "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", Says: SaysNoMailbox, Provider: "microsoft365",
		Source: "Exchange Online's directory lookup when the recipient is not found (learn.microsoft.com, \"Fix NDR error 550 5.1.10 in Exchange Online\"); elsewhere 5.1.10 is RFC 7505's null MX"},
	{Line: "550 Invalid Recipient", Says: SaysNoMailbox,
		Source: "Mimecast's refusal of a recipient its customer's directory does not have (Mimecast's SMTP error code reference: \"550 Invalid Recipient\")"},
	{Line: "550 cuda_nsu 5.1.1 User unknown", Says: SaysNoMailbox,
		Source: "Barracuda Email Security Service: cuda_nsu, no such user, after its recipient verification"},
	{Line: "550 cuda_nsu 5.1.1 <{addr}>... User unknown", Says: SaysNoMailbox,
		Source: "Barracuda Email Security Service, quoting the address"},
	{Line: "552 1 Requested mail action aborted, mailbox not found", Says: SaysNoMailbox,
		Source: "Yahoo's refusal of an unknown recipient (sisimai/go-sisimai rhost/for-yahooinc.go)"},
	{Line: "554 delivery error: dd This user doesn't have a {domain} account ({addr}) [0] - {server}", Says: SaysNoMailbox,
		Source: "Yahoo and AOL (sisimai/go-sisimai lhost/via-x2.go)"},
	{Line: "554 delivery error: dd Sorry your message to {addr} cannot be delivered. This mailbox is disabled (554.30)", Says: SaysDisabled,
		Source: "Yahoo: an account closed or disabled"},
}

// replyPattern is a Replies line's words as a pattern.
type replyPattern struct {
	re    *regexp.Regexp
	reply *Reply
}

// replyPatterns are Replies' words, compiled once.
var replyPatterns = func() []replyPattern {
	placeholder := regexp.MustCompile(`\{[a-z]+\}`)
	out := make([]replyPattern, len(Replies))
	for i := range Replies {
		_, text := splitReply(Replies[i].Line)
		var b strings.Builder
		b.WriteString(`(?i)^`)
		last := 0
		for _, m := range placeholder.FindAllStringIndex(text, -1) {
			b.WriteString(regexp.QuoteMeta(text[last:m[0]]))
			b.WriteString(`\S+`)
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(text[last:]))
		b.WriteString(`$`)
		out[i] = replyPattern{regexp.MustCompile(b.String()), &Replies[i]}
	}
	return out
}()

// splitReply splits a reply line into its code and its words: the text
// after the code and after an enhanced status code, if any.
func splitReply(line string) (code int, words string) {
	c, rest, _ := strings.Cut(line, " ")
	code, _ = strconv.Atoi(c)
	if f, text, ok := strings.Cut(rest, " "); ok && isEnhanced(f) {
		rest = text
	}
	return code, strings.TrimSpace(rest)
}

// knownReply is the entry of Replies whose words line has, for a host
// playing provider; nil when there is none.
func knownReply(line, provider string) *Reply {
	_, words := splitReply(line)
	for _, p := range replyPatterns {
		if p.reply.Provider != "" && p.reply.Provider != provider {
			continue
		}
		if p.re.MatchString(words) {
			return p.reply
		}
	}
	return nil
}

// unknownSays is what d's reply to RCPT for a local part it does not know
// says, from host: Domain.UnknownSays when the domain says it; else, for a
// permanent refusal, what Replies says of its words; else what its codes
// alone say (codesSay). The host's reply style (Host.Replies) changes
// the form, not the meaning: a bare host sends the same words.
func unknownSays(d *Domain, host *Host) Says {
	if d.UnknownReply == "" {
		return SaysNoMailbox // replyNoSuchUser
	}
	if d.UnknownSays != "" {
		return d.UnknownSays
	}
	if code, _ := splitReply(d.UnknownReply); code/100 == 5 {
		if r := knownReply(d.UnknownReply, host.Provider); r != nil {
			return r.Says
		}
	}
	return codesSay(d.UnknownReply)
}

// codesSay is what a reply line's codes say by themselves: RFC 3463's
// status codes (and RFC 5248's registry) where they name one cause —
// X.1.1 bad destination mailbox and X.1.6 mailbox moved (no such
// mailbox here), X.1.2 bad destination system and X.1.10 null MX (RFC
// 7505: the host takes no mail for the domain), X.1.3 bad address
// syntax, X.2.1 mailbox disabled and X.7.13 account disabled, X.2.2
// mailbox full, X.1.7 and X.1.8 the sender's address, X.7.20 to X.7.27
// the sender's authentication, SPF, reverse DNS (RFC 7372): the client —,
// RFC 5321's 552 (storage allocation exceeded), and its temporary
// refusals (4xx: deferred, but for a full mailbox). Every other permanent
// refusal — a bare 550 or 554 (RFC 5321 §4.2.2: "mailbox unavailable"
// covers a mailbox not found, no access and a policy alike), X.0.0, the
// other security and policy codes X.7.x, X.2.4, X.4.x, X.5.x — says
// nothing.
func codesSay(line string) Says {
	code, rest, _ := strings.Cut(line, " ")
	n, _ := strconv.Atoi(code)
	enh, _, _ := strings.Cut(rest, " ")
	if !isEnhanced(enh) {
		enh = ""
	}
	sd := "" // ".subject.detail"
	if enh != "" {
		sd = enh[strings.IndexByte(enh, '.'):]
	}
	switch {
	case sd == ".2.2", enh == "" && n == 552:
		return SaysFull
	case n/100 == 4:
		return SaysDeferred
	}
	switch sd {
	case ".1.1", ".1.6":
		return SaysNoMailbox
	case ".1.2", ".1.10":
		return SaysNoRelay
	case ".1.3":
		return SaysSyntax
	case ".2.1", ".7.13":
		return SaysDisabled
	case ".1.7", ".1.8", ".7.20", ".7.21", ".7.22", ".7.23", ".7.24", ".7.25", ".7.26", ".7.27":
		return SaysClient
	}
	return SaysNothing
}
