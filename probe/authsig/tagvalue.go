package authsig

import (
	"strings"
)

// Tag is one tag=value pair of a tag-list.
type Tag struct {
	Name  string
	Value string // without surrounding whitespace; inner whitespace kept
}

// TagList is a parsed tag-list, in record order.
type TagList []Tag

// Get returns the value of the first tag called name (compared exactly) and
// whether there is one.
func (l TagList) Get(name string) (string, bool) {
	for _, t := range l {
		if t.Name == name {
			return t.Value, true
		}
	}
	return "", false
}

// ParseTagList parses s as an RFC 6376 §3.2 tag-list, the syntax shared by
// DKIM key records and, with small variations, DMARC, MTA-STS, TLS-RPT and
// BIMI records:
//
//	tag-list  = tag-spec *( ";" tag-spec ) [ ";" ]
//	tag-spec  = [FWS] tag-name [FWS] "=" [FWS] tag-value [FWS]
//	tag-name  = ALPHA *( ALPHA / DIGIT / "_" )
//	tag-value = [ tval *( 1*(WSP / FWS) tval ) ]   ; may be empty
//	tval      = 1*( %x21-3A / %x3C-7E )            ; printable but ";"
//
// Tag names are case-sensitive and a name may appear once: a duplicate is an
// error (§3.2: "Tags with duplicate names MUST NOT occur within a single
// tag-list"). A value may be empty ("p="). One trailing ";" is allowed; an
// empty tag-spec elsewhere (";;", a leading ";") is an error. Whitespace is
// SP, HTAB, CR and LF: the record comes from DNS, not from a folded header,
// so the CRLF-then-WSP shape of FWS is not enforced. The empty string is an
// empty list.
func ParseTagList(s string) (TagList, error) {
	l, errs := parseTags(s, tagSyntax{record: "tag-list", validName: isTagName})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return l, nil
}

// tagSyntax is one signal's variation of the tag-list grammar.
type tagSyntax struct {
	record      string            // grammar name for errors
	validName   func(string) bool // the tag-name rule
	foldNames   bool              // lower-case names before use (DMARC: names are case-insensitive)
	tightEquals bool              // no whitespace on either side of "=" (MTA-STS, TLS-RPT, svc)
	lenient     bool              // skip bad tag-specs and empty ones, keep duplicates (DMARC)
}

// parseTags splits s into tags. In strict mode it stops at the first problem
// and returns it; in lenient mode it returns every well-formed tag, in order
// and with duplicates, plus one error per tag-spec it skipped.
func parseTags(s string, syn tagSyntax) (TagList, []error) {
	var (
		list TagList
		errs []error
	)
	n := strings.Count(s, ";") + 1
	i := 0
	for seg := range strings.SplitSeq(s, ";") {
		i++
		spec := trimWS(seg)
		if spec == "" {
			if i == n || syn.lenient {
				continue // trailing ";", or an empty record
			}
			errs = append(errs, syntaxErr(syn.record, s, "empty tag-spec"))
			return nil, errs
		}
		tag, err := parseTagSpec(spec, syn)
		if err == nil && !syn.lenient {
			if _, dup := list.Get(tag.Name); dup {
				err = syntaxErr(syn.record, tag.Name, "duplicate tag")
			}
		}
		if err != nil {
			errs = append(errs, err)
			if !syn.lenient {
				return nil, errs
			}
			continue
		}
		list = append(list, tag)
	}
	return list, errs
}

// parseTagSpec parses one tag-spec, already trimmed of outer whitespace.
func parseTagSpec(spec string, syn tagSyntax) (Tag, error) {
	rawName, rawValue, ok := strings.Cut(spec, "=")
	if !ok {
		return Tag{}, syntaxErr(syn.record, spec, "tag-spec without \"=\"")
	}
	name, value := trimWS(rawName), trimWS(rawValue)
	if syn.tightEquals && (name != rawName || value != rawValue) {
		return Tag{}, syntaxErr(syn.record, spec, "whitespace around \"=\"")
	}
	if !syn.validName(name) {
		return Tag{}, syntaxErr(syn.record, spec, "bad tag name")
	}
	if !validTagValue(value) {
		return Tag{}, syntaxErr(syn.record, spec, "bad character in tag value")
	}
	if syn.foldNames {
		name = strings.ToLower(name)
	}
	return Tag{Name: name, Value: value}, nil
}

// isTagName is RFC 6376 tag-name: ALPHA *ALNUMPUNC.
func isTagName(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}

// isExtName is the extension-name rule of MTA-STS and TLS-RPT
// (RFC 8461 §3.1 sts-ext-name, RFC 8460 §3 tlsrpt-ext-name):
// (ALPHA / DIGIT) *31(ALPHA / DIGIT / "_" / "-" / ".").
func isExtName(s string) bool {
	if s == "" || len(s) > 32 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// validTagValue accepts VALCHARs and inner whitespace.
func validTagValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x21 || c > 0x7e || c == ';') && !isWS(c) {
			return false
		}
	}
	return true
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func trimWS(s string) string {
	i, j := 0, len(s)
	for i < j && isWS(s[i]) {
		i++
	}
	for j > i && isWS(s[j-1]) {
		j--
	}
	return s[i:j]
}

// removeWS drops every whitespace octet (DKIM p= "whitespace is ignored").
func removeWS(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x80 && isWS(byte(r)) }) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if !isWS(s[i]) {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// splitList splits a sep-separated value (colon lists of DKIM h=, s=, t=;
// comma lists of URIs) and trims whitespace around each item. An empty value
// gives no items; an empty item between separators is kept as "".
func splitList(v string, sep byte) []string {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, string(sep))
	for i, p := range parts {
		parts[i] = trimWS(p)
	}
	return parts
}

// versionTag reports whether txt starts with the version tag name=value of a
// tag-list record, allowing whitespace around "=" and requiring optional
// whitespace then ";" or the end after the value ("v=DMARC1 p=none" is not a
// DMARC1 version tag: its value is "DMARC1 p=none"). The value is compared exactly; the
// name exactly or, with foldName, ASCII case-insensitively. Leading
// whitespace is allowed only when leadingWS is true.
func versionTag(txt, name, value string, foldName, leadingWS bool) bool {
	if leadingWS {
		txt = trimWS(txt)
	}
	if len(txt) < len(name) {
		return false
	}
	if foldName {
		if !strings.EqualFold(txt[:len(name)], name) {
			return false
		}
	} else if txt[:len(name)] != name {
		return false
	}
	rest := strings.TrimLeft(txt[len(name):], " \t")
	if !strings.HasPrefix(rest, "=") {
		return false
	}
	rest = strings.TrimLeft(rest[1:], " \t")
	if !strings.HasPrefix(rest, value) {
		return false
	}
	rest = trimWS(rest[len(value):])
	return rest == "" || rest[0] == ';'
}
