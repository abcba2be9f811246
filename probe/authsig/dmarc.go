package authsig

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// DMARCStatus is whether a DMARC policy applies to a domain.
type DMARCStatus uint8

// DMARC statuses. The zero value is DMARCNone.
const (
	DMARCNone  DMARCStatus = iota // "none": no policy record applies
	DMARCFound                    // "found": a policy record applies
)

// String returns the status as the auth object spells it.
func (s DMARCStatus) String() string {
	switch s {
	case DMARCNone:
		return "none"
	case DMARCFound:
		return "found"
	}
	return "DMARCStatus(" + strconv.Itoa(int(s)) + ")"
}

// DMARCPolicy is a requested handling policy (p=, sp=, np=).
type DMARCPolicy uint8

// DMARC policies. The zero value means "not set".
const (
	DMARCPolicyUnset      DMARCPolicy = iota // "": absent
	DMARCPolicyNone                          // "none"
	DMARCPolicyQuarantine                    // "quarantine"
	DMARCPolicyReject                        // "reject"
)

var dmarcPolicyNames = [...]string{"", "none", "quarantine", "reject"}

// String returns the policy as the record and the auth object spell it; ""
// when unset.
func (p DMARCPolicy) String() string {
	if int(p) < len(dmarcPolicyNames) {
		return dmarcPolicyNames[p]
	}
	return "DMARCPolicy(" + strconv.Itoa(int(p)) + ")"
}

func parseDMARCPolicy(v string) (DMARCPolicy, bool) {
	switch strings.ToLower(v) {
	case "none":
		return DMARCPolicyNone, true
	case "quarantine":
		return DMARCPolicyQuarantine, true
	case "reject":
		return DMARCPolicyReject, true
	}
	return DMARCPolicyUnset, false
}

// Alignment is an identifier alignment mode (aspf=, adkim=).
type Alignment uint8

// Alignment modes. The zero value is relaxed, the default.
const (
	AlignRelaxed Alignment = iota // "r"
	AlignStrict                   // "s"
)

// String returns "r" or "s".
func (a Alignment) String() string {
	if a == AlignStrict {
		return "s"
	}
	return "r"
}

// DMARCRecord is a parsed DMARC policy record (RFC 7489 §6.3, RFC 9989 §4.7).
// Every field holds a usable value: defaults stand in for absent tags and for
// tags whose value is malformed.
type DMARCRecord struct {
	Policy            DMARCPolicy // p=; none when the record falls back under the rua rule
	SubdomainPolicy   DMARCPolicy // sp=; defaults to Policy
	NonexistentPolicy DMARCPolicy // np= (RFC 9989); defaults to SubdomainPolicy
	ADKIM             Alignment   // adkim=, default r
	ASPF              Alignment   // aspf=, default r
	Percent           int         // pct= (RFC 7489, dropped by RFC 9989), 0-100, default 100
	Testing           bool        // t=y (RFC 9989)
	PSD               string      // psd= (RFC 9989): "y", "n", or "u" (default)
	FailureOptions    string      // fo=, default "0"
	ReportInterval    uint32      // ri= (RFC 7489), seconds, default 86400
	RUA               []string    // rua=: the valid mailto: URIs, "!size" suffix removed
	RUF               []string    // ruf=: the valid mailto: URIs
}

// RUASet reports whether aggregate reports have somewhere to go: at least one
// valid mailto: URI in rua= (the auth key dmarc_rua_set).
func (r *DMARCRecord) RUASet() bool { return len(r.RUA) > 0 }

// IsDMARCRecord reports whether txt begins with the DMARC version tag: "v",
// any case, "=" with optional whitespace around it, then exactly "DMARC1",
// then optional whitespace and ";" or the end (RFC 7489 §6.4, RFC 9989 §4.8).
// Leading whitespace is tolerated.
func IsDMARCRecord(txt string) bool { return versionTag(txt, "v", "DMARC1", true, true) }

// ParseDMARC parses one DMARC record. Tag names are case-insensitive (they are
// ABNF literals), and so are the values p, sp, np, adkim, aspf, t and psd.
// The parse is lenient where the RFCs say so (RFC 7489 §6.3, RFC 9989 §4.8:
// "syntax errors in the remainder of the record MUST be discarded in favor of
// default values"): a malformed tag-spec, an unknown tag, or a known tag with
// a bad value is skipped, the default used, and a warning returned.
//
// The policy tags p, sp and np are the exception (RFC 7489 §6.6.3 step 6,
// RFC 9989 §4.10.1): when p= is present but not one of none, quarantine,
// reject, or sp= or np= is present and invalid, the record still applies only
// if rua= holds at least one valid mailto: URI, and then as p=none (and sp,
// np none); otherwise ParseDMARC returns an error and no DMARC applies. An
// absent p= means p=none (RFC 9989 §4.7; RFC 7489 made it an error). A tag
// given twice with different values counts as invalid; twice with the same
// value, as once.
//
// The error is a *SyntaxError; it is also returned when txt is not a DMARC
// record at all.
func ParseDMARC(txt string) (*DMARCRecord, []string, error) {
	if !IsDMARCRecord(txt) {
		return nil, nil, syntaxErr("dmarc", txt, "record does not begin with \"v=DMARC1\"")
	}
	tags, errs := parseTags(txt, tagSyntax{record: "dmarc", validName: isTagName, foldNames: true, lenient: true})
	var warnings []string
	for _, err := range errs {
		warnings = append(warnings, err.Error())
	}
	// The first tag is the version, checked above; look at the rest once
	// each, noting conflicting duplicates.
	vals := make(map[string]string, len(tags))
	bad := make(map[string]bool)
	for i, t := range tags {
		if i == 0 {
			continue
		}
		if old, dup := vals[t.Name]; dup {
			if !strings.EqualFold(old, t.Value) {
				bad[t.Name] = true
				warnings = append(warnings, fmt.Sprintf("authsig: dmarc: %s= given twice with different values", t.Name))
			}
			continue
		}
		vals[t.Name] = t.Value
	}
	warn := func(name, why string) {
		warnings = append(warnings, fmt.Sprintf("authsig: dmarc: %s=%s: %s; default used", name, vals[name], why))
	}

	r := &DMARCRecord{Percent: 100, PSD: "u", FailureOptions: "0", ReportInterval: 86400}
	if !bad["rua"] {
		r.RUA = parseDMARCURIs(vals["rua"])
		if _, ok := vals["rua"]; ok && len(r.RUA) == 0 {
			warn("rua", "no valid mailto: URI")
		}
	}
	if !bad["ruf"] {
		r.RUF = parseDMARCURIs(vals["ruf"])
	}

	policy := func(name string) (p DMARCPolicy, present, valid bool) {
		v, present := vals[name]
		if !present {
			return DMARCPolicyUnset, false, true
		}
		if bad[name] {
			return DMARCPolicyUnset, true, false
		}
		p, valid = parseDMARCPolicy(v)
		return p, true, valid
	}
	p, _, pOK := policy("p")
	sp, _, spOK := policy("sp")
	np, _, npOK := policy("np")
	if !pOK || !spOK || !npOK {
		if !r.RUASet() {
			return nil, warnings, syntaxErr("dmarc", txt, "invalid p=, sp= or np= and no valid rua= (RFC 7489 §6.6.3)")
		}
		warnings = append(warnings, "authsig: dmarc: invalid p=, sp= or np= with a valid rua=: treated as p=none (RFC 7489 §6.6.3 step 6)")
		p, sp, np = DMARCPolicyNone, DMARCPolicyNone, DMARCPolicyNone
	}
	if p == DMARCPolicyUnset {
		p = DMARCPolicyNone // RFC 9989 §4.7
	}
	if sp == DMARCPolicyUnset {
		sp = p
	}
	if np == DMARCPolicyUnset {
		np = sp
	}
	r.Policy, r.SubdomainPolicy, r.NonexistentPolicy = p, sp, np

	for _, name := range []string{"adkim", "aspf"} {
		v, ok := vals[name]
		if !ok {
			continue
		}
		var a Alignment
		switch strings.ToLower(v) {
		case "r":
			a = AlignRelaxed
		case "s":
			a = AlignStrict
		default:
			warn(name, "not r or s")
			continue
		}
		if bad[name] {
			continue
		}
		if name == "adkim" {
			r.ADKIM = a
		} else {
			r.ASPF = a
		}
	}
	if v, ok := vals["pct"]; ok && !bad["pct"] {
		if n, err := strconv.Atoi(v); err == nil && allDigits(v) && n <= 100 {
			r.Percent = n
		} else {
			warn("pct", "not an integer 0-100")
		}
	}
	if v, ok := vals["t"]; ok && !bad["t"] {
		switch strings.ToLower(v) {
		case "y":
			r.Testing = true
		case "n":
		default:
			warn("t", "not y or n")
		}
	}
	if v, ok := vals["psd"]; ok && !bad["psd"] {
		switch c := strings.ToLower(v); c {
		case "y", "n", "u":
			r.PSD = c
		default:
			warn("psd", "not y, n or u")
		}
	}
	if v, ok := vals["fo"]; ok && !bad["fo"] {
		if validFO(v) {
			r.FailureOptions = strings.ToLower(v)
		} else {
			warn("fo", "not a colon list of 0, 1, d, s")
		}
	}
	if v, ok := vals["ri"]; ok && !bad["ri"] {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && allDigits(v) {
			r.ReportInterval = uint32(n)
		} else {
			warn("ri", "not a 32-bit integer")
		}
	}
	return r, warnings, nil
}

// validFO checks fo= against RFC 7489 §6.4: one or more of 0, 1, d, s
// separated by ":", each at most once.
func validFO(v string) bool {
	seen := map[string]bool{}
	for _, o := range splitList(strings.ToLower(v), ':') {
		switch o {
		case "0", "1", "d", "s":
		default:
			return false
		}
		if seen[o] {
			return false
		}
		seen[o] = true
	}
	return len(seen) > 0
}

// parseDMARCURIs returns the valid mailto: URIs of a comma-separated list of
// DMARC URIs (RFC 7489 §6.2, RFC 9989 §4.8), each without its obsolete
// "!size" suffix. A mailto: URI is valid when it names one address whose
// domain is a hostname. Other schemes are dropped: receivers need only
// support mailto:, and "URIs involving schemes not supported by Mail
// Receivers MUST be ignored" (RFC 9989 §4.7).
func parseDMARCURIs(v string) []string {
	var out []string
	for _, u := range splitList(v, ',') {
		if i := strings.LastIndexByte(u, '!'); i >= 0 && validReportSize(u[i+1:]) {
			u = u[:i]
		}
		if validMailtoURI(u) {
			out = append(out, u)
		}
	}
	return out
}

// validReportSize is 1*DIGIT [ "k" / "m" / "g" / "t" ].
func validReportSize(s string) bool {
	if s != "" && strings.ContainsRune("kmgtKMGT", rune(s[len(s)-1])) {
		s = s[:len(s)-1]
	}
	return allDigits(s)
}

// validMailtoURI reports whether u is a mailto: URI (RFC 6068) with one
// address: a non-empty local part and a hostname domain.
func validMailtoURI(u string) bool {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "mailto" || pu.Opaque == "" {
		return false
	}
	addr, err := url.PathUnescape(pu.Opaque)
	if err != nil {
		return false
	}
	return validAddress(addr)
}

// validAddress is a plain check of local@domain: one "@" at the last
// position that splits a local part of 1 to 64 printable octets and a
// hostname.
func validAddress(addr string) bool {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at > 64 {
		return false
	}
	for i := 0; i < at; i++ {
		if addr[i] <= ' ' || addr[i] >= 0x7f || addr[i] == ',' {
			return false
		}
	}
	return validHostname(strings.ToLower(addr[at+1:]))
}

// DMARCResult is the DMARC signal of a domain.
type DMARCResult struct {
	Status   DMARCStatus
	Record   *DMARCRecord // Status found only
	Domain   string       // where the deciding record was: the domain or its organizational domain; "" when none was anywhere
	Warnings []string     // tags skipped or defaulted; for logs
	Err      error        // why a record that exists gives none; nil otherwise
}

// Inherited reports whether the record came from the organizational domain
// rather than the domain itself.
func (r DMARCResult) Inherited(domain string) bool {
	return r.Status == DMARCFound && r.Domain != normalizeDomain(domain)
}

// EffectivePolicy is the policy a receiver applies to mail from domain: p=
// when the record is the domain's own, sp= when it was inherited from the
// organizational domain (RFC 7489 §6.6.3, RFC 9989 §4.10.1; np= needs to know
// whether the domain exists and is left to the caller). Unset for none.
func (r DMARCResult) EffectivePolicy(domain string) DMARCPolicy {
	if r.Status != DMARCFound {
		return DMARCPolicyUnset
	}
	if r.Inherited(domain) {
		return r.Record.SubdomainPolicy
	}
	return r.Record.Policy
}

// DMARC judges the TXT records at _dmarc.<name> (RFC 7489 §6.6.3 steps
// 2, 4-6): records that do not begin with v=DMARC1 are discarded; none left
// gives none (the caller may then try the organizational domain); more than
// one gives none with ErrMultipleRecords; one that ParseDMARC rejects gives
// none with its error; else found. Domain is left empty for the caller.
func DMARC(records []string) DMARCResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsDMARCRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return DMARCResult{}
	case n > 1:
		return DMARCResult{Err: ErrMultipleRecords}
	}
	rec, warnings, err := ParseDMARC(found)
	if err != nil {
		return DMARCResult{Warnings: warnings, Err: err}
	}
	return DMARCResult{Status: DMARCFound, Record: rec, Warnings: warnings}
}

// DiscoverDMARC finds the DMARC policy of domain (RFC 7489 §6.6.3): it reads
// _dmarc.<domain>; when that holds no DMARC record at all, it reads
// _dmarc.<OrgDomain(domain)> if that is a different name. Several records,
// or one invalid record, at the domain end the search with none: the
// organizational domain is consulted only when the domain publishes nothing
// (RFC 7489 §6.6.3 step 3). RFC 9989's DNS tree walk (§4.10) is not done;
// see README.md.
//
// The error is non-nil only when lookup failed; the dmarc keys should then be
// omitted.
func DiscoverDMARC(domain string, lookup TXTLookup) (DMARCResult, error) {
	d := normalizeDomain(domain)
	txts, err := lookup(DMARCName(d))
	if err != nil {
		return DMARCResult{}, fmt.Errorf("cannot look up DMARC of %q: %w", d, err)
	}
	res := DMARC(txts)
	if res.Status == DMARCFound || res.Err != nil {
		res.Domain = d
		return res, nil
	}
	org := OrgDomain(d)
	if org == d {
		return res, nil
	}
	txts, err = lookup(DMARCName(org))
	if err != nil {
		return DMARCResult{}, fmt.Errorf("cannot look up DMARC of %q: %w", org, err)
	}
	res = DMARC(txts)
	if res.Status == DMARCFound || res.Err != nil {
		res.Domain = org
	}
	return res, nil
}
