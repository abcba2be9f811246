package lists

import (
	"strings"

	"github.com/verifyd/verifyd/internal/dnsname"
	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

// Notes returned by [Normalize], one per rule that changed something (or, for
// [NoteYahooDisposable], that was recognised). They are stable identifiers,
// safe to store and to show.
const (
	// NoteLowercased: the provider treats local parts case-insensitively
	// and the local part had upper-case letters.
	NoteLowercased = "lowercased"
	// NotePlusTag: the provider documents plus addressing (RFC 5233
	// subaddress); the "+tag" was removed.
	NotePlusTag = "plus_tag_removed"
	// NoteDots: Gmail ignores dots in the local part; they were removed.
	NoteDots = "dots_removed"
	// NoteSeparators: Proton treats ".", "-" and "_" in its own addresses
	// as insignificant; they were removed.
	NoteSeparators = "separators_removed"
	// NoteDomainAlias: the domain is an alias of another (googlemail.com is
	// gmail.com); see [CanonicalDomain].
	NoteDomainAlias = "domain_alias"
	// NoteYahooDisposable: a "-" in a Yahoo local part marks a Yahoo
	// disposable address ("basename-keyword"). The base name is not the
	// mailbox's name, so nothing is removed.
	NoteYahooDisposable = "yahoo_disposable_address"
)

// rules are one provider's documented address rules.
type rules struct {
	plus       bool   // "+tag" is a subaddress of the same mailbox
	dots       bool   // "." is ignored
	separators bool   // ".", "-" and "_" are ignored
	yahoo      bool   // "-" marks a Yahoo disposable address
	alias      string // the provider's canonical domain, if this is an alias
}

// providers holds the rules we can justify from the providers' own
// documentation or code; a provider not here is left alone. Conservative on
// purpose: a wrong rule would merge two people's mailboxes.
//
//   - Gmail: "dots don't matter in Gmail addresses" and "+" aliases
//     (Gmail Help); googlemail.com is the same service.
//   - Outlook.com consumer domains: plus addressing since 2013 (the same
//     feature Microsoft documents for Exchange Online as "plus addressing").
//     Country variants (hotmail.co.uk, …) are not included until checked.
//   - iCloud Mail: plus addressing (Apple) on icloud.com, me.com, mac.com.
//   - Fastmail: plus addressing (Fastmail help, "Plus addressing and
//     subdomain addressing"); its subdomain addressing changes the domain
//     and is not normalised here.
//   - Proton: "+" aliases (Proton support, "Email addresses and aliases");
//     its clients canonicalise internal addresses by removing ".", "-" and
//     "_" as well (canonicalizeInternalEmail in Proton's web clients).
//   - Yahoo: no plus addressing; "-" separates the base name and keyword
//     of a disposable address (Yahoo Help, AddressGuard). Noted only.
var providers = map[string]rules{
	"gmail.com":      {plus: true, dots: true},
	"googlemail.com": {plus: true, dots: true, alias: "gmail.com"},

	"outlook.com": {plus: true},
	"hotmail.com": {plus: true},
	"live.com":    {plus: true},
	"msn.com":     {plus: true},

	"icloud.com": {plus: true},
	"me.com":     {plus: true},
	"mac.com":    {plus: true},

	"fastmail.com": {plus: true},
	"fastmail.fm":  {plus: true},

	"proton.me":      {plus: true, separators: true},
	"protonmail.com": {plus: true, separators: true},
	"protonmail.ch":  {plus: true, separators: true},
	"pm.me":          {plus: true, separators: true},

	"yahoo.com":      {yahoo: true},
	"ymail.com":      {yahoo: true},
	"rocketmail.com": {yahoo: true},
}

// Normalize returns the local part as the provider of asciiDomain resolves
// it, and notes naming each rule that applied. For a domain without known
// rules it returns local unchanged and no notes: RFC 5321 §2.4 leaves a
// local part's meaning, case included, to the receiving host.
//
// The result is a key for list lookups and for cache and de-duplication
// hints. It is never the address the engine probes: the probe always uses
// the address as given.
//
// Quoted local parts are returned unchanged. A rule that would leave an
// empty local part ("+tag" alone) is not applied.
func Normalize(local, asciiDomain string) (normLocal string, notes []string) {
	var buf [entry.MaxDomain]byte
	d, ok := foldDomain(&buf, asciiDomain)
	if !ok {
		return local, nil
	}
	r, ok := providers[string(d)]
	if !ok || local == "" || local[0] == '"' {
		return local, nil
	}
	out := local
	if lower := entry.LowerASCII(out); lower != out {
		out = lower
		notes = append(notes, NoteLowercased)
	}
	if r.plus {
		if i := strings.IndexByte(out, '+'); i > 0 {
			out = out[:i]
			notes = append(notes, NotePlusTag)
		}
	}
	if r.dots && strings.Contains(out, ".") {
		if s := strings.ReplaceAll(out, ".", ""); s != "" {
			out = s
			notes = append(notes, NoteDots)
		}
	}
	if r.separators && strings.ContainsAny(out, ".-_") {
		if s := removeBytes(out, ".-_"); s != "" {
			out = s
			notes = append(notes, NoteSeparators)
		}
	}
	if r.yahoo && strings.Contains(out, "-") {
		notes = append(notes, NoteYahooDisposable)
	}
	if r.alias != "" {
		notes = append(notes, NoteDomainAlias)
	}
	return out, notes
}

// CanonicalDomain returns the domain a provider's alias domain stands for
// (googlemail.com → gmail.com), and otherwise asciiDomain lower-cased
// without a trailing dot. Like [Normalize], it is for keys and hints only.
func CanonicalDomain(asciiDomain string) string {
	d := dnsname.Fold(strings.TrimSuffix(asciiDomain, "."))
	if r, ok := providers[d]; ok && r.alias != "" {
		return r.alias
	}
	return d
}

func removeBytes(s, cut string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(cut, s[i]) < 0 {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
