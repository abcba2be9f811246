// Package address is the syntax stage of the validation engine: it decides
// whether a string is a mailbox the engine can probe, and returns it in the
// two forms the later stages need — the user's form for the receipt and the
// ASCII-domain form for DNS and SMTP.
//
// A syntax failure is a result, not a fault: [Parse] returns a [*SyntaxError]
// and the engine turns it into status invalid, reason syntax_error,
// checks.syntax false (spec §2.5, DESIGN "Address syntax").
//
// # Steps
//
// [Parse] works in this order; the first failed check is the reported reason.
//
//  1. The whole input. Nothing is trimmed or folded: the HTTP layer passes the
//     string as the user sent it, and leading or trailing white space (ASCII
//     or Unicode) is a syntax error rather than something silently repaired.
//     Inputs longer than 2048 octets are refused before any other work; no
//     address within the RFC 5321 limits needs that many octets in any
//     spelling Parse accepts.
//  2. The split. The last "@" separates local part and domain (RFC 5321
//     §4.1.2, Mailbox = Local-part "@" ( Domain / address-literal )): a quoted
//     local part may contain "@", a domain never does. Only U+0040 splits;
//     FULLWIDTH COMMERCIAL AT and the like are ordinary characters.
//  3. The local part, RFC 5321 §4.1.2: Local-part = Dot-string / Quoted-string.
//     A Dot-string is atoms of atext (RFC 5322 §3.2.3) joined by single dots,
//     with no leading, trailing or doubled dot. A Quoted-string holds
//     qtextSMTP and quoted-pairSMTP (backslash followed by %d32-126). RFC 6531
//     §3.3 adds UTF8-non-ascii (RFC 6532 §3.1) to atext and qtextSMTP, so
//     "用户" and "josé" are local parts; such a local part needs the
//     SMTPUTF8 extension ([Address.UTF8Local]). Beyond the grammar, Parse
//     rejects invalid UTF-8, control characters (C0, DEL, C1), Unicode
//     noncharacters and line/paragraph separators anywhere, and Unicode space
//     separators (Zs) outside quotes — they are to a Dot-string what an
//     ASCII space is. The local part is never case-folded or normalised
//     (RFC 5321 §2.4: only the receiving host may interpret it).
//  4. Canonical local part. The quotes and backslashes of a Quoted-string
//     are not part of the mailbox name (RFC 5322 §3.2.1, §3.2.4), and a
//     local part that can be written as a Dot-string SHOULD be (RFC 5322
//     §3.4.1): so `"john"` becomes john, and any other quoted local part is
//     re-quoted minimally (only `"` and `\` escaped). An empty quoted string `""`
//     names no mailbox a verifier can probe and is rejected (the RFC 5321bis
//     drafts also require at least one character).
//  5. Local part length: at most 64 octets of the canonical form, counted in
//     UTF-8 octets (RFC 5321 §4.5.3.1.1, RFC 6531 §3.3).
//  6. The domain, RFC 5321 §4.1.2: Domain = sub-domain *("." sub-domain),
//     sub-domain = Let-dig [Ldh-str], extended by RFC 6531 §3.3 with U-labels.
//     A domain in ASCII without A-labels is checked and lower-cased here;
//     anything else goes through golang.org/x/net/idna with the UTS 46
//     lookup profile, non-transitional (IDNA2008, RFC 5891 §5): UTS 46
//     mapping (case, width, compatibility forms, U+3002 as a dot), NFC,
//     STD3 rules (so "_" is refused), hyphen rules (RFC 5891 §4.2.3.1: no
//     leading or trailing hyphen, no "--" in positions 3 and 4 unless the
//     label is an A-label), CONTEXTJ (RFC 5892 Appendix A) and the Bidi rule
//     (RFC 5893). The result is [Address.ASCIIDomain] in A-labels and
//     [Address.Domain] as ToUnicode of that, so both spellings of a domain
//     give the same Address. Symbols such as emoji, which IDNA2008 itself
//     disallows (RFC 5892), are valid under UTS 46 (status NV8) and are
//     accepted: such domains are registered (.ws, .to) and DNS, not syntax,
//     decides whether they exist.
//  7. Domain structure, checked on the A-label form: every label 1 to 63
//     octets (RFC 1035 §2.3.4); the whole name at most 253 octets (RFC 5321
//     §4.5.3.1.2 says 255, which is the DNS wire length; 253 is that limit
//     in text without the root dot); no trailing dot (the Domain grammar of
//     RFC 5321 §4.1.2 has no root label, and "example.com." in an address
//     is a typo far more often than intent); at least two labels (a
//     deliberate choice: a dotless domain is not routable on the public
//     internet, RFC 7085); the top-level label not all digits (RFC 3696
//     §2), so "1.2.3.4" without brackets is refused. What x/net/idna maps
//     depends on the Unicode version of the Go toolchain (Go 1.26: Unicode
//     15, where "ẞ" maps to "ss"; Unicode 16 maps it to "ß").
//  8. Address literals ("[192.0.2.1]", "[IPv6:2001:db8::1]", RFC 5321
//     §4.1.3) are valid RFC 5321 but are refused with the reason "address
//     literals are not verifiable": they have no MX, public mail systems do
//     not accept them, and the verdict pipeline cannot probe them honestly.
//     A malformed literal is reported as such.
//  9. The path: "<" local "@" ascii-domain ">" at most 256 octets (RFC 5321
//     §4.5.3.1.3), computed on the form sent in RCPT TO. With the brackets
//     this leaves 254 octets for the address, which is the tighter limit
//     for any domain longer than 188 octets.
//
// The obsolete and header-only forms of RFC 5322 — comments, folding white
// space, obs-local-part ("a"."b"), obs-domain, a display name or angle
// brackets — are not accepted: they cannot appear in an SMTP path and no
// user types them into a verification form.
package address

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits, in octets.
const (
	// maxLocal is the limit on a local part (RFC 5321 §4.5.3.1.1).
	maxLocal = 64
	// maxDomain is the limit on a domain in text form without the root
	// dot (RFC 5321 §4.5.3.1.2, RFC 1035 §2.3.4).
	maxDomain = 253
	// maxLabel is the limit on one DNS label (RFC 1035 §2.3.4).
	maxLabel = 63
	// maxPath is the limit on "<local@domain>" (RFC 5321 §4.5.3.1.3).
	maxPath = 256
	// maxInput bounds the work Parse does on hostile input.
	maxInput = 2048
)

// Address is a parsed, syntactically valid mailbox. The zero value is not a
// valid address.
type Address struct {
	// Local is the local part in its canonical RFC 5321 form: a Dot-string
	// exactly as given (case preserved), or, when the local part cannot be
	// written as a Dot-string, a Quoted-string with only `"` and `\`
	// escaped. It is what goes before the "@" in RCPT TO.
	Local string
	// Domain is the domain in the user's form for the receipt: U-labels,
	// lower-cased and mapped per UTS 46 ("bücher.de" for "XN--BCHER-KVA.DE"
	// and for "BÜCHER.de").
	Domain string
	// ASCIIDomain is the domain in A-labels, lower-case, without a trailing
	// dot ("xn--bcher-kva.de"): the form for DNS lookups and SMTP.
	ASCIIDomain string
	// Quoted reports that Local is a Quoted-string, i.e. the local part
	// cannot be written as a Dot-string. `"john"@example.com` is not
	// Quoted: its canonical local part is john.
	Quoted bool
	// UTF8Local reports that Local contains non-ASCII characters, so the
	// address can only be sent to a server offering SMTPUTF8 (RFC 6531).
	UTF8Local bool
}

// String returns the address in the user's form, Local "@" Domain.
func (a Address) String() string { return a.Local + "@" + a.Domain }

// ASCII returns the address with the domain in A-labels, Local "@"
// ASCIIDomain. It is pure ASCII unless UTF8Local.
func (a Address) ASCII() string { return a.Local + "@" + a.ASCIIDomain }

// Rcpt returns the form the engine sends in RCPT TO: the local part
// lower-cased, "@", ASCIIDomain. RFC 5321 §2.4 lets the receiving host
// tell "Ann" from "ann", and §4.1.2 asks hosts not to define mailboxes
// that way; Postfix, Exim and OpenSMTPD fold the case of local parts in
// their lookups, and so do the large providers. verifyd decides for the
// lower-cased form (server/README.md, "Address case"): every spelling of
// an address is asked the same question and gets the same verdict, which
// is what a batch (spec §2.2: "Lower-cased and de-duplicated") and the
// cache, both keyed by the lower-cased address, already assume.
func (a Address) Rcpt() string { return strings.ToLower(a.Local) + "@" + a.ASCIIDomain }

// SyntaxError reports why a string is not an address the engine accepts.
//
// Reason is a short, stable, lower-case phrase meant for logs and for the
// user; callers should not branch on it beyond showing it. The phrases are:
//
//	empty address, address too long, leading or trailing white space,
//	missing @, empty local part, local part too long,
//	invalid character in local part, invalid UTF-8,
//	leading dot in local part, trailing dot in local part,
//	consecutive dots in local part, unbalanced quote, misplaced quote,
//	invalid escape in local part, comments are not accepted,
//	empty domain, domain too long, domain label too long, empty label,
//	trailing dot in domain, invalid character in domain,
//	underscore in domain, hyphen at start or end of label,
//	hyphens in positions 3 and 4, bad IDNA domain, dotless domain,
//	numeric top-level domain, address literals are not verifiable,
//	invalid address literal
type SyntaxError struct {
	Input  string // the string given to Parse, unchanged
	Reason string // why it was refused
}

// maxErrorInput is how many octets of the input Error quotes.
const maxErrorInput = 80

// Error returns "address: <reason>: <quoted input>", the input cut to a
// readable length and escaped so that it is safe in a log line.
func (e *SyntaxError) Error() string {
	in := e.Input
	if len(in) > maxErrorInput {
		cut := maxErrorInput
		for cut > 0 && !utf8.RuneStart(in[cut]) {
			cut--
		}
		return fmt.Sprintf("address: %s: %q...", e.Reason, in[:cut])
	}
	return fmt.Sprintf("address: %s: %q", e.Reason, in)
}

// Reasons, see SyntaxError.
const (
	reasonEmpty           = "empty address"
	reasonTooLong         = "address too long"
	reasonSpace           = "leading or trailing white space"
	reasonNoAt            = "missing @"
	reasonEmptyLocal      = "empty local part"
	reasonLocalTooLong    = "local part too long"
	reasonLocalChar       = "invalid character in local part"
	reasonUTF8            = "invalid UTF-8"
	reasonLeadingDot      = "leading dot in local part"
	reasonTrailingDot     = "trailing dot in local part"
	reasonDoubleDot       = "consecutive dots in local part"
	reasonUnbalancedQuote = "unbalanced quote"
	reasonMisplacedQuote  = "misplaced quote"
	reasonEscape          = "invalid escape in local part"
	reasonComment         = "comments are not accepted"
	reasonEmptyDomain     = "empty domain"
	reasonDomainTooLong   = "domain too long"
	reasonLabelTooLong    = "domain label too long"
	reasonEmptyLabel      = "empty label"
	reasonDomainDot       = "trailing dot in domain"
	reasonDomainChar      = "invalid character in domain"
	reasonUnderscore      = "underscore in domain"
	reasonHyphen          = "hyphen at start or end of label"
	reasonReservedHyphens = "hyphens in positions 3 and 4"
	reasonIDNA            = "bad IDNA domain"
	reasonDotless         = "dotless domain"
	reasonNumericTLD      = "numeric top-level domain"
	reasonLiteral         = "address literals are not verifiable"
	reasonBadLiteral      = "invalid address literal"
)

// Parse parses s as a mailbox and returns it in canonical form. The error,
// when not nil, is always a *SyntaxError. See the package documentation for
// what is accepted and why.
func Parse(s string) (Address, error) {
	a, reason := parse(s)
	if reason != "" {
		return Address{}, &SyntaxError{Input: s, Reason: reason}
	}
	return a, nil
}

func parse(s string) (Address, string) {
	switch {
	case s == "":
		return Address{}, reasonEmpty
	case len(s) > maxInput:
		return Address{}, reasonTooLong
	case isSpaceAt(s, true) || isSpaceAt(s, false):
		return Address{}, reasonSpace
	}
	at := lastAt(s)
	if at < 0 {
		return Address{}, reasonNoAt
	}
	rawLocal, rawDomain := s[:at], s[at+1:]
	if rawLocal == "" {
		return Address{}, reasonEmptyLocal
	}
	if rawDomain == "" {
		return Address{}, reasonEmptyDomain
	}

	local, quoted, reason := parseLocal(rawLocal)
	if reason != "" {
		return Address{}, reason
	}
	if len(local) > maxLocal {
		return Address{}, reasonLocalTooLong
	}

	domain, ascii, reason := parseDomain(rawDomain)
	if reason != "" {
		return Address{}, reason
	}
	if len("<@>")+len(local)+len(ascii) > maxPath {
		return Address{}, reasonTooLong
	}
	return Address{
		Local:       local,
		Domain:      domain,
		ASCIIDomain: ascii,
		Quoted:      quoted,
		UTF8Local:   !IsASCII(local),
	}, ""
}

// lastAt returns the index of the last '@' in s, or -1.
func lastAt(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			return i
		}
	}
	return -1
}

// isSpaceAt reports whether s starts (first) or ends (!first) with white
// space, ASCII or Unicode. Invalid UTF-8 there is not space; the later
// checks report it.
func isSpaceAt(s string, first bool) bool {
	var r rune
	if first {
		r, _ = utf8.DecodeRuneInString(s)
	} else {
		r, _ = utf8.DecodeLastRuneInString(s)
	}
	return unicode.IsSpace(r)
}

// IsASCII reports whether s consists of ASCII octets only.
func IsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
