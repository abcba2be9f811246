package smtpclient

import "strings"

// Extensions are the service extensions a server announced in its reply to
// EHLO (RFC 5321 §4.1.1.1): one keyword a line after the first, with
// optional parameters. After HELO, or before EHLO, it is the zero value.
type Extensions struct {
	Pipelining          bool // RFC 2920
	StartTLS            bool // RFC 3207
	SMTPUTF8            bool // RFC 6531
	EightBitMIME        bool // RFC 6152
	EnhancedStatusCodes bool // RFC 2034
	Chunking            bool // RFC 3030
	DSN                 bool // RFC 3461
	RequireTLS          bool // RFC 8689
	// Size is the SIZE parameter (RFC 1870): the largest message accepted,
	// 0 when SIZE is absent, says no fixed maximum, or cannot be read.
	Size int64
	// HasSize reports whether SIZE was announced at all.
	HasSize bool

	lines []string // the keyword lines, for Has
}

// Has reports whether keyword (case-insensitive, without parameters) was
// announced, for extensions without a field of their own ("AUTH", "VRFY").
func (e Extensions) Has(keyword string) bool {
	for _, l := range e.lines {
		if strings.EqualFold(firstWord(l), keyword) {
			return true
		}
	}
	return false
}

// maxHostLen bounds the host names read from the greeting and EHLO replies
// (RFC 1035 §2.3.4: 255 octets).
const maxHostLen = 255

// ParseEHLO reads a reply to EHLO: host is the first word of the first line
// (the server's name for itself, RFC 5321 §4.1.1.1), ext what the other
// lines announce. Keywords are matched without regard to case; unknown ones
// are kept for Extensions.Has. It never fails: a line it cannot read only
// announces nothing.
func ParseEHLO(r Reply) (host string, ext Extensions) {
	if len(r.Lines) == 0 {
		return "", Extensions{}
	}
	host = firstWord(r.Lines[0])
	ext.lines = r.Lines[1:]
	for _, l := range ext.lines {
		kw, param := l, ""
		if i := strings.IndexAny(l, " \t"); i >= 0 {
			kw, param = l[:i], strings.TrimLeft(l[i+1:], " \t")
		}
		switch {
		case strings.EqualFold(kw, "PIPELINING"):
			ext.Pipelining = true
		case strings.EqualFold(kw, "STARTTLS"):
			ext.StartTLS = true
		case strings.EqualFold(kw, "SMTPUTF8"):
			ext.SMTPUTF8 = true
		case strings.EqualFold(kw, "8BITMIME"):
			ext.EightBitMIME = true
		case strings.EqualFold(kw, "ENHANCEDSTATUSCODES"):
			ext.EnhancedStatusCodes = true
		case strings.EqualFold(kw, "CHUNKING"):
			ext.Chunking = true
		case strings.EqualFold(kw, "DSN"):
			ext.DSN = true
		case strings.EqualFold(kw, "REQUIRETLS"):
			ext.RequireTLS = true
		case strings.EqualFold(kw, "SIZE"):
			ext.HasSize = true
			ext.Size = parseSize(firstWord(param))
		}
	}
	return host, ext
}

// parseSize reads SIZE's parameter: decimal digits, at most 18 of them so
// it cannot overflow; anything else reads as 0 (no known maximum).
func parseSize(s string) int64 {
	if len(s) == 0 || len(s) > 18 {
		return 0
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

// firstWord returns s up to its first blank, at most maxHostLen bytes.
func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		s = s[:i]
	}
	if len(s) > maxHostLen {
		s = s[:maxHostLen]
	}
	return s
}
