package address

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// atext marks the ASCII characters of RFC 5322 §3.2.3 atext:
//
//	ALPHA / DIGIT / "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" /
//	"/" / "=" / "?" / "^" / "_" / "`" / "{" / "|" / "}" / "~"
var atext = func() (t [utf8.RuneSelf]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-/=?^_`{|}~" {
		t[c] = true
	}
	return t
}()

// parseLocal checks a non-empty local part (RFC 5321 §4.1.2 Local-part =
// Dot-string / Quoted-string, with RFC 6531 §3.3 UTF8-non-ascii) and returns
// its canonical form, whether that form is a Quoted-string, and the reason it
// is refused ("" when it is not).
func parseLocal(l string) (canon string, quoted bool, reason string) {
	if l[0] == '"' {
		return parseQuoted(l)
	}
	if reason := checkDotString(l); reason != "" {
		return "", false, reason
	}
	return l, false, ""
}

// checkDotString checks s against RFC 5321 §4.1.2
//
//	Dot-string = Atom *("."  Atom)
//	Atom       = 1*atext
//
// with atext extended by UTF8-non-ascii (RFC 6531 §3.3). It returns "" when s
// is a Dot-string.
func checkDotString(s string) string {
	if s == "" {
		return reasonEmptyLocal
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case atext[c]:
			case c == '.':
				switch {
				case i == 0:
					return reasonLeadingDot
				case i == len(s)-1:
					return reasonTrailingDot
				case s[i-1] == '.':
					return reasonDoubleDot
				}
			case c == '"':
				// A quote inside a Dot-string: `a"b`, or the obsolete
				// `"a".b` word sequence (RFC 5322 §4.4 obs-local-part).
				return reasonMisplacedQuote
			case c == '(' || c == ')':
				return reasonComment
			default:
				return reasonLocalChar
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return reasonUTF8
		}
		if badRune(r) || unicode.Is(unicode.Zs, r) {
			return reasonLocalChar
		}
		i += size
	}
	return ""
}

// parseQuoted checks a local part that starts with a double quote against
// RFC 5321 §4.1.2
//
//	Quoted-string   = DQUOTE *QcontentSMTP DQUOTE
//	QcontentSMTP    = qtextSMTP / quoted-pairSMTP
//	quoted-pairSMTP = %d92 %d32-126
//	qtextSMTP       = %d32-33 / %d35-91 / %d93-126
//
// with qtextSMTP extended by UTF8-non-ascii (RFC 6531 §3.3; quoted-pairSMTP
// is not extended, so a backslash before a non-ASCII character is refused).
// The canonical form is the content as a Dot-string when it is one (RFC 5322
// §3.4.1), else the content re-quoted with only `"` and `\` escaped.
func parseQuoted(l string) (canon string, quoted bool, reason string) {
	var content []byte // the unescaped content, built only once an escape is seen
	end := -1
	i := 1
scan:
	for i < len(l) {
		c := l[i]
		size := 1
		switch {
		case c == '"':
			end = i
			break scan
		case c == '\\':
			if i+1 >= len(l) {
				return "", false, reasonUnbalancedQuote
			}
			if n := l[i+1]; n < ' ' || n > '~' {
				return "", false, reasonEscape
			}
			if content == nil {
				content = make([]byte, 0, len(l))
				content = append(content, l[1:i]...)
			}
			content = append(content, l[i+1])
			i += 2
			continue
		case c < ' ' || c == 0x7f:
			return "", false, reasonLocalChar
		case c >= utf8.RuneSelf:
			var r rune
			r, size = utf8.DecodeRuneInString(l[i:])
			if r == utf8.RuneError && size == 1 {
				return "", false, reasonUTF8
			}
			if badRune(r) {
				return "", false, reasonLocalChar
			}
		}
		if content != nil {
			content = append(content, l[i:i+size]...)
		}
		i += size
	}
	switch {
	case end < 0:
		return "", false, reasonUnbalancedQuote
	case end != len(l)-1:
		// Text after the closing quote: `"a"b` or `"a"."b"`.
		return "", false, reasonMisplacedQuote
	}

	if content == nil {
		// No escapes: the content is l without its quotes, and l is
		// already the minimal quoted form of it.
		inner := l[1:end]
		switch {
		case inner == "":
			return "", false, reasonEmptyLocal
		case checkDotString(inner) == "":
			return inner, false, ""
		}
		return l, true, ""
	}
	if len(content) == 0 {
		return "", false, reasonEmptyLocal
	}
	if checkDotString(string(content)) == "" {
		return string(content), false, ""
	}
	return quote(content), true, ""
}

// quote returns content as a Quoted-string with only `"` and `\` escaped.
func quote(content []byte) string {
	var b strings.Builder
	b.Grow(len(content) + 2 + 4)
	b.WriteByte('"')
	for _, c := range content {
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// badRune reports whether the non-ASCII rune r is refused anywhere in a local
// part although RFC 6532 UTF8-non-ascii admits it: C1 controls, the line and
// paragraph separators, and noncharacters (Unicode §23.7).
func badRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u2028' || r == '\u2029':
		return true
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe:
		return true
	}
	return false
}
