package authsig

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// SPFLookupLimit is the most DNS-querying terms (include, a, mx, ptr, exists
// and redirect) one SPF evaluation may use (RFC 7208 §4.6.4).
const SPFLookupLimit = 10

// SPFPosture is what a domain's SPF record says about mail from hosts it
// does not list: the qualifier of its "all" mechanism.
type SPFPosture uint8

// SPF postures. The zero value is SPFNone.
const (
	SPFNone      SPFPosture = iota // "none": no SPF record (RFC 7208 §4.5)
	SPFStrict                      // "strict": -all, unlisted hosts fail
	SPFSoftfail                    // "softfail": ~all
	SPFNeutral                     // "neutral": ?all, or neither all nor redirect (§4.7)
	SPFPass                        // "pass": +all or a bare all, every host passes
	SPFRedirect                    // "redirect": no all, a redirect= decides (§6.1); see SPFResult.Redirect
	SPFPermError                   // "permerror": several records, a syntax error, a broken include or redirect, too many lookups
)

var spfPostureNames = [...]string{"none", "strict", "softfail", "neutral", "pass", "redirect", "permerror"}

// String returns the posture as the auth object spells it.
func (p SPFPosture) String() string {
	if int(p) < len(spfPostureNames) {
		return spfPostureNames[p]
	}
	return "SPFPosture(" + strconv.Itoa(int(p)) + ")"
}

// SPFMechanism is one directive of an SPF record (RFC 7208 §4.6.1, §5).
type SPFMechanism struct {
	Qualifier byte         // '+', '-', '~' or '?'; '+' when the record leaves it out
	Name      string       // lower-case: all, include, a, mx, ptr, ip4, ip6, exists
	Domain    string       // the domain-spec as written (macros not expanded), "" when absent
	Prefix    netip.Prefix // ip4 and ip6 only: the network with its length (32 or 128 when absent)
	CIDR4     int          // a and mx only: the ip4-cidr-length, -1 when absent
	CIDR6     int          // a and mx only: the ip6-cidr-length, -1 when absent
}

// Posture returns the posture this mechanism gives when it is the "all"
// that ends an evaluation.
func (m SPFMechanism) Posture() SPFPosture {
	switch m.Qualifier {
	case '-':
		return SPFStrict
	case '~':
		return SPFSoftfail
	case '?':
		return SPFNeutral
	default:
		return SPFPass
	}
}

// queriesDNS reports whether evaluating m costs one of the lookups of
// RFC 7208 §4.6.4.
func (m SPFMechanism) queriesDNS() bool {
	switch m.Name {
	case "include", "a", "mx", "ptr", "exists":
		return true
	}
	return false
}

// SPFRecord is a parsed SPF record (RFC 7208 §4.5, §12).
type SPFRecord struct {
	Mechanisms  []SPFMechanism // in record order
	Redirect    string         // redirect= domain-spec, "" when absent (§6.1)
	Explanation string         // exp= domain-spec, "" when absent (§6.2)
}

// All returns the first "all" mechanism, the one that ends every evaluation
// that reaches it, and whether there is one.
func (r *SPFRecord) All() (SPFMechanism, bool) {
	for _, m := range r.Mechanisms {
		if m.Name == "all" {
			return m, true
		}
	}
	return SPFMechanism{}, false
}

// Posture is the record's own posture: the qualifier of its first "all";
// SPFRedirect when it has no "all" but a redirect= (a redirect is ignored
// when there is an "all", §6.1); SPFNeutral when it has neither, the default
// result of §4.7.
func (r *SPFRecord) Posture() SPFPosture {
	if all, ok := r.All(); ok {
		return all.Posture()
	}
	if r.Redirect != "" {
		return SPFRedirect
	}
	return SPFNeutral
}

// Lookups counts the DNS-querying terms an evaluation of this record alone
// runs when no mechanism matches before the "all" (the path that decides the
// posture): include, a, mx, ptr and exists before the first "all", plus the
// redirect= when there is no "all". Nested includes and the redirect target
// are not counted; FollowSPF counts them.
func (r *SPFRecord) Lookups() int {
	n := 0
	for _, m := range r.Mechanisms {
		if m.Name == "all" {
			return n
		}
		if m.queriesDNS() {
			n++
		}
	}
	if r.Redirect != "" {
		n++
	}
	return n
}

// Includes returns the include: targets an evaluation reaches before the
// first "all", in order, as written.
func (r *SPFRecord) Includes() []string {
	var out []string
	for _, m := range r.Mechanisms {
		if m.Name == "all" {
			break
		}
		if m.Name == "include" {
			out = append(out, m.Domain)
		}
	}
	return out
}

// String writes the record back in canonical form: lower-case names,
// qualifiers only when not '+', modifiers last.
func (r *SPFRecord) String() string {
	var b strings.Builder
	b.WriteString("v=spf1")
	for _, m := range r.Mechanisms {
		b.WriteByte(' ')
		if m.Qualifier != '+' {
			b.WriteByte(m.Qualifier)
		}
		b.WriteString(m.Name)
		switch m.Name {
		case "ip4", "ip6":
			b.WriteByte(':')
			b.WriteString(m.Prefix.String())
			continue
		}
		if m.Domain != "" {
			b.WriteByte(':')
			b.WriteString(m.Domain)
		}
		if m.CIDR4 >= 0 {
			b.WriteString("/" + strconv.Itoa(m.CIDR4))
		}
		if m.CIDR6 >= 0 {
			b.WriteString("//" + strconv.Itoa(m.CIDR6))
		}
	}
	if r.Redirect != "" {
		b.WriteString(" redirect=" + r.Redirect)
	}
	if r.Explanation != "" {
		b.WriteString(" exp=" + r.Explanation)
	}
	return b.String()
}

// IsSPFRecord reports whether txt is an SPF record: it begins with the
// version "v=spf1", compared case-insensitively, followed by a space or the
// end of the record (RFC 7208 §4.5). "v=spf10" and " v=spf1" are not.
func IsSPFRecord(txt string) bool {
	const v = "v=spf1"
	return len(txt) >= len(v) && strings.EqualFold(txt[:len(v)], v) &&
		(len(txt) == len(v) || txt[len(v)] == ' ')
}

// ParseSPF parses one SPF record against the grammar of RFC 7208 §12. Every
// term is checked, including those after "all": any syntax error makes the
// whole record a permerror (§4.6). Errors are *SyntaxError. Mechanism and
// modifier names are case-insensitive; terms are separated by one or more
// spaces (not tabs); unknown modifiers are checked and ignored (§6);
// redirect= and exp= may appear once each (§6).
func ParseSPF(txt string) (*SPFRecord, error) {
	if !IsSPFRecord(txt) {
		return nil, syntaxErr("spf", txt, "record does not begin with \"v=spf1\"")
	}
	r := &SPFRecord{}
	var sawRedirect, sawExp bool
	for term := range strings.SplitSeq(txt[len("v=spf1"):], " ") {
		if term == "" {
			continue // 1*SP between terms, trailing spaces
		}
		if name, value, ok := cutModifier(term); ok {
			switch strings.ToLower(name) {
			case "redirect":
				if sawRedirect {
					return nil, syntaxErr("spf", term, "redirect= more than once")
				}
				sawRedirect = true
				if err := checkDomainSpec(value); err != nil {
					return nil, syntaxErr("spf", term, err.Error())
				}
				r.Redirect = value
			case "exp":
				if sawExp {
					return nil, syntaxErr("spf", term, "exp= more than once")
				}
				sawExp = true
				if err := checkDomainSpec(value); err != nil {
					return nil, syntaxErr("spf", term, err.Error())
				}
				r.Explanation = value
			default:
				if err := checkMacroString(value); err != nil {
					return nil, syntaxErr("spf", term, err.Error())
				}
			}
			continue
		}
		m, err := parseMechanism(term)
		if err != nil {
			return nil, syntaxErr("spf", term, err.Error())
		}
		r.Mechanisms = append(r.Mechanisms, m)
	}
	return r, nil
}

// cutModifier splits a modifier term: name "=" value, where
// name = ALPHA *( ALPHA / DIGIT / "-" / "_" / "." ).
func cutModifier(term string) (name, value string, ok bool) {
	if term == "" || !isAlpha(term[0]) {
		return "", "", false
	}
	for i := 1; i < len(term); i++ {
		c := term[i]
		switch {
		case c == '=':
			return term[:i], term[i+1:], true
		case isAlnum(c) || c == '-' || c == '_' || c == '.':
		default:
			return "", "", false
		}
	}
	return "", "", false
}

func parseMechanism(term string) (SPFMechanism, error) {
	m := SPFMechanism{Qualifier: '+', CIDR4: -1, CIDR6: -1}
	switch term[0] {
	case '+', '-', '~', '?':
		m.Qualifier = term[0]
		term = term[1:]
	}
	end := strings.IndexAny(term, ":/")
	if end < 0 {
		end = len(term)
	}
	m.Name = strings.ToLower(term[:end])
	rest := term[end:]
	switch m.Name {
	case "all":
		if rest != "" {
			return m, errors.New("all takes no argument")
		}
	case "include", "exists":
		d, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return m, fmt.Errorf("%s needs \":domain\"", m.Name)
		}
		if err := checkDomainSpec(d); err != nil {
			return m, err
		}
		m.Domain = d
	case "a", "mx":
		var err error
		if rest, m.CIDR4, m.CIDR6, err = cutDualCIDR(rest); err != nil {
			return m, err
		}
		if rest != "" {
			d, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return m, errors.New("junk after mechanism name")
			}
			if err := checkDomainSpec(d); err != nil {
				return m, err
			}
			m.Domain = d
		}
	case "ptr":
		if rest != "" {
			d, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return m, errors.New("ptr takes no cidr-length")
			}
			if err := checkDomainSpec(d); err != nil {
				return m, err
			}
			m.Domain = d
		}
	case "ip4", "ip6":
		p, err := parseIPNetwork(m.Name, rest)
		if err != nil {
			return m, err
		}
		m.Prefix = p
	default:
		return m, errors.New("unknown mechanism")
	}
	return m, nil
}

// parseIPNetwork parses ":" ip-network [ "/" cidr-length ] of ip4 and ip6.
func parseIPNetwork(name, rest string) (netip.Prefix, error) {
	s, ok := strings.CutPrefix(rest, ":")
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%s needs \":network\"", name)
	}
	max := 32
	if name == "ip6" {
		max = 128
	}
	bits := max
	if i := strings.IndexByte(s, '/'); i >= 0 {
		var err error
		if bits, err = parseCIDR(s[i+1:], max); err != nil {
			return netip.Prefix{}, err
		}
		s = s[:i]
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad %s network", name)
	}
	if (name == "ip4") != addr.Is4() || addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("not an %s address", name)
	}
	return netip.PrefixFrom(addr, bits), nil
}

// cutDualCIDR removes a trailing dual-cidr-length ([ "/" n4 ] [ "//" n6 ])
// from the argument of a or mx. The domain-spec before it cannot end in
// "/digits" (its domain-end is a toplabel or a macro), so cutting from the
// right is unambiguous.
func cutDualCIDR(s string) (rest string, c4, c6 int, err error) {
	c4, c6 = -1, -1
	if i := strings.LastIndex(s, "//"); i >= 0 && allDigits(s[i+2:]) {
		if c6, err = parseCIDR(s[i+2:], 128); err != nil {
			return s, -1, -1, err
		}
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 && allDigits(s[i+1:]) {
		if c4, err = parseCIDR(s[i+1:], 32); err != nil {
			return s, -1, -1, err
		}
		s = s[:i]
	}
	return s, c4, c6, nil
}

// parseCIDR parses a cidr-length: "0" or a number without leading zeros, at
// most max.
func parseCIDR(s string, max int) (int, error) {
	if !allDigits(s) || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, errors.New("bad cidr-length")
	}
	n, _ := strconv.Atoi(s)
	if n > max {
		return 0, errors.New("cidr-length out of range")
	}
	return n, nil
}

// checkDomainSpec checks domain-spec = macro-string domain-end, where
// domain-end = ( "." toplabel [ "." ] ) / macro-expand.
func checkDomainSpec(s string) error {
	if s == "" {
		return errors.New("empty domain-spec")
	}
	tail, endsInMacro, err := scanMacroString(s)
	if err != nil {
		return err
	}
	if endsInMacro {
		return nil
	}
	lit := strings.TrimSuffix(tail, ".")
	dot := strings.LastIndexByte(lit, '.')
	if dot < 0 || !isTopLabel(lit[dot+1:]) {
		return errors.New("domain-spec does not end in \".toplabel\" or a macro")
	}
	return nil
}

// checkMacroString checks the value of an unknown modifier (may be empty).
func checkMacroString(s string) error {
	_, _, err := scanMacroString(s)
	return err
}

// scanMacroString checks macro-string = *( macro-expand / macro-literal ) and
// returns the literal text after the last macro-expand and whether the string
// ends with a macro-expand.
//
//	macro-expand  = ( "%{" macro-letter transformers *delimiter "}" ) / "%%" / "%_" / "%-"
//	macro-literal = %x21-24 / %x26-7E
//	macro-letter  = s l o d i p h c r t v   ; c, r, t only in exp text (§7.2)
//	transformers  = *DIGIT [ "r" ]          ; a DIGIT value must be nonzero (§7.3)
//	delimiter     = "." / "-" / "+" / "," / "/" / "_" / "="
func scanMacroString(s string) (tail string, endsInMacro bool, err error) {
	litStart := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '%' {
			if c < 0x21 || c > 0x7e {
				return "", false, errors.New("bad character")
			}
			i++
			endsInMacro = false
			continue
		}
		if i+1 >= len(s) {
			return "", false, errors.New("bad macro: lone \"%\"")
		}
		switch s[i+1] {
		case '%', '_', '-':
			i += 2
		case '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return "", false, errors.New("bad macro: no \"}\"")
			}
			if err := checkMacroBody(s[i+2 : i+j]); err != nil {
				return "", false, err
			}
			i += j + 1
		default:
			return "", false, errors.New("bad macro: \"%\" not followed by {, %, _ or -")
		}
		endsInMacro = true
		litStart = i
	}
	return s[litStart:], endsInMacro, nil
}

func checkMacroBody(b string) error {
	if b == "" {
		return errors.New("bad macro: empty")
	}
	switch b[0] | 0x20 {
	case 's', 'l', 'o', 'd', 'i', 'p', 'h', 'v':
	case 'c', 'r', 't':
		return errors.New("bad macro: letter c, r and t only allowed in exp text (RFC 7208 §7.2)")
	default:
		return errors.New("bad macro: unknown letter")
	}
	i := 1
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	if i > 1 && strings.Trim(b[1:i], "0") == "" {
		return errors.New("bad macro: zero digit transformer (RFC 7208 §7.3)")
	}
	if i < len(b) && b[i]|0x20 == 'r' {
		i++
	}
	for ; i < len(b); i++ {
		if !strings.ContainsRune(".-+,/_=", rune(b[i])) {
			return errors.New("bad macro: bad delimiter")
		}
	}
	return nil
}

// isTopLabel is toplabel = ( *alphanum ALPHA *alphanum ) /
// ( 1*alphanum "-" *( alphanum / "-" ) alphanum ).
func isTopLabel(s string) bool {
	if s == "" {
		return false
	}
	alpha, hyphen := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isAlpha(c):
			alpha = true
		case isDigit(c):
		case c == '-':
			hyphen = true
		default:
			return false
		}
	}
	if hyphen {
		return s[0] != '-' && s[len(s)-1] != '-'
	}
	return alpha
}

// SPFResult is the SPF signal of a domain.
type SPFResult struct {
	Posture  SPFPosture
	Record   *SPFRecord // the domain's own record; nil for none and for several records
	Redirect string     // when Posture is SPFRedirect: the redirect= target to follow
	Lookups  int        // DNS-querying terms counted (see SPFRecord.Lookups, FollowSPF)
	Err      error      // why Posture is SPFPermError (or, from FollowSPF, SPFRedirect); nil otherwise
}

// SPF selects and judges the SPF record among the TXT records of a domain,
// without any further lookup (RFC 7208 §4.5): records that are not SPF are
// ignored; none left gives SPFNone; more than one gives SPFPermError with
// ErrMultipleRecords; a record with a syntax error gives SPFPermError; else
// the record's posture, which is SPFRedirect (with Redirect set) when a
// redirect= decides. See FollowSPF to resolve redirects and check the
// lookup limit.
func SPF(records []string) SPFResult {
	var found string
	n := 0
	for _, txt := range records {
		if IsSPFRecord(txt) {
			found = txt
			n++
		}
	}
	switch {
	case n == 0:
		return SPFResult{Posture: SPFNone}
	case n > 1:
		return SPFResult{Posture: SPFPermError, Err: ErrMultipleRecords}
	}
	rec, err := ParseSPF(found)
	if err != nil {
		return SPFResult{Posture: SPFPermError, Err: err}
	}
	res := SPFResult{Posture: rec.Posture(), Record: rec, Lookups: rec.Lookups()}
	if res.Posture == SPFRedirect {
		res.Redirect = rec.Redirect
	}
	if res.Lookups > SPFLookupLimit {
		res.Posture, res.Redirect, res.Err = SPFPermError, "", ErrSPFTooManyLookups
	}
	return res
}

// FollowSPF finds the SPF posture of domain as a receiver evaluating mail
// from an unlisted host would: it reads the domain's record, then walks every
// include: reached before the first "all" and follows redirect= when there is
// no "all", fetching each target's TXT records through lookup, and counts
// every DNS-querying term against SPFLookupLimit (RFC 7208 §4.6.4, §5.2,
// §6.1). The posture is that of the record that ends the chain of redirects.
// It is SPFPermError when a record on the path has a syntax error or several
// SPF records, when an include or redirect target has no SPF record or is not
// a valid name (ErrSPFNoTarget), or when the count passes the limit
// (ErrSPFTooManyLookups).
//
// Targets that contain macros depend on the sender and the connecting IP, so
// they are not fetched: such an include is counted but not walked, and such a
// redirect leaves the posture SPFRedirect with Redirect set and Err saying
// why; the orchestrator should then omit the spf key.
//
// Lookups of a, mx, ptr and exists are counted, not run. The void-lookup
// limit (§4.6.4, two lookups with no answer) is not checked, as it depends on
// those lookups.
//
// The error is non-nil only when lookup failed; the result is then empty and
// the spf key should be omitted.
func FollowSPF(domain string, lookup TXTLookup) (SPFResult, error) {
	domain = normalizeDomain(domain)
	txts, err := lookup(domain)
	if err != nil {
		return SPFResult{}, fmt.Errorf("cannot look up SPF of %q: %w", domain, err)
	}
	res := SPF(txts)
	if res.Record == nil {
		return res, nil
	}
	w := spfWalker{lookup: lookup}
	posture, target, err := w.eval(res.Record)
	var lerr *lookupError
	if errors.As(err, &lerr) {
		return SPFResult{}, lerr.err
	}
	res.Posture, res.Lookups, res.Err, res.Redirect = posture, w.lookups, err, ""
	if posture == SPFRedirect {
		res.Redirect = target
	}
	return res, nil
}

// lookupError wraps a TXTLookup failure so that it can leave the walk.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }

type spfWalker struct {
	lookup  TXTLookup
	lookups int
}

// eval walks rec along its no-match path. It returns the posture that ends
// it and, for an unfollowable redirect, its target. A permerror comes with
// its reason; a *lookupError means the walk could not finish.
func (w *spfWalker) eval(rec *SPFRecord) (SPFPosture, string, error) {
	for _, m := range rec.Mechanisms {
		if m.Name == "all" {
			return m.Posture(), "", nil
		}
		if !m.queriesDNS() {
			continue
		}
		if err := w.charge(); err != nil {
			return SPFPermError, "", err
		}
		if m.Name != "include" || hasMacro(m.Domain) {
			continue
		}
		sub, err := w.fetch(m.Domain)
		if err != nil {
			return SPFPermError, "", err
		}
		// The included record's own posture does not matter (§5.2), only
		// whether its evaluation ends in an error. One that ends in a
		// macro redirect cannot be judged and is let through.
		p, _, err := w.eval(sub)
		var lerr *lookupError
		if p == SPFPermError || errors.As(err, &lerr) {
			return SPFPermError, "", err
		}
	}
	if rec.Redirect == "" {
		return SPFNeutral, "", nil
	}
	if err := w.charge(); err != nil {
		return SPFPermError, "", err
	}
	if hasMacro(rec.Redirect) {
		return SPFRedirect, rec.Redirect, fmt.Errorf("authsig: spf: redirect target %q depends on the sender (macro)", rec.Redirect)
	}
	sub, err := w.fetch(rec.Redirect)
	if err != nil {
		return SPFPermError, "", err
	}
	return w.eval(sub)
}

func (w *spfWalker) charge() error {
	w.lookups++
	if w.lookups > SPFLookupLimit {
		return ErrSPFTooManyLookups
	}
	return nil
}

// fetch returns the one SPF record of an include or redirect target.
func (w *spfWalker) fetch(target string) (*SPFRecord, error) {
	name := normalizeDomain(target)
	if !validDomainName(name) {
		return nil, fmt.Errorf("%w: %q is not a valid domain name", ErrSPFNoTarget, target)
	}
	txts, err := w.lookup(name)
	if err != nil {
		return nil, &lookupError{fmt.Errorf("cannot look up SPF of %q: %w", name, err)}
	}
	res := SPF(txts)
	switch res.Posture {
	case SPFNone:
		return nil, fmt.Errorf("%w: %q", ErrSPFNoTarget, name)
	case SPFPermError:
		if res.Record == nil {
			return nil, fmt.Errorf("authsig: spf: record of %q: %w", name, res.Err)
		}
	}
	return res.Record, nil
}

func hasMacro(s string) bool { return strings.IndexByte(s, '%') >= 0 }
