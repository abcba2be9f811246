package platform

// maxParse is how much of a diagnostic ParseSMTP reads: the codes are
// at its start, and a diagnostic is kept to MaxDiagnostic bytes anyway.
const maxParse = 4 * MaxDiagnostic

// ParseSMTP finds the reply code (RFC 5321 section 4.2) and the enhanced
// status code (RFC 3463 section 2) in a bounce's diagnostic text:
// "smtp; 550 5.1.1 <x@y>: Recipient address rejected: User unknown"
// gives 550 and "5.1.1". It gives 0 and "" for what it does not find.
//
// The enhanced code is the first class.subject.detail (class 2, 4 or 5;
// subject and detail of one to three digits) standing alone: not part
// of a longer dotted number such as an IP address or "4.16.55.1". The
// reply code is three digits of a final reply (2xx, 4xx or 5xx)
// standing alone and followed by a space or a hyphen (a multiline
// reply, "550-5.1.1"): the one just before the enhanced code, else the
// first of the same class as the enhanced code, so "quota 250 MB
// exceeded, 5.2.2" gives no reply code rather than 250.
func ParseSMTP(diagnostic string) (code int, enhanced string) {
	s := diagnostic
	if len(s) > maxParse {
		s = s[:maxParse]
	}
	enhAt := -1
	for i := 0; i < len(s); i++ {
		if n := enhancedAt(s, i); n > 0 {
			enhanced, enhAt = s[i:i+n], i
			break
		}
	}
	for i := 0; i+3 <= len(s); i++ {
		c := replyCodeAt(s, i)
		switch {
		case c == 0:
		case enhAt >= 0 && i+4 == enhAt:
			return c, enhanced
		case code == 0 && (enhanced == "" || c/100 == int(enhanced[0]-'0')):
			code = c
		}
	}
	return code, enhanced
}

// validEnhanced reports whether s is an enhanced status code and
// nothing else.
func validEnhanced(s string) bool {
	return s != "" && enhancedAt(s, 0) == len(s)
}

// enhancedAt is the length of the enhanced status code that starts at
// s[i] and stands alone, 0 when none does.
func enhancedAt(s string, i int) int {
	if !boundary(s, i) || i+5 > len(s) || (s[i] != '2' && s[i] != '4' && s[i] != '5') || s[i+1] != '.' {
		return 0
	}
	j := i + 2
	n := digits(s, j)
	if n < 1 || n > 3 || j+n >= len(s) || s[j+n] != '.' {
		return 0
	}
	j += n + 1
	n = digits(s, j)
	if n < 1 || n > 3 {
		return 0
	}
	j += n
	// What follows must end it: not a letter or a digit, nor a dot that
	// goes on with a digit.
	if j < len(s) && (alnum(s[j]) || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])) {
		return 0
	}
	return j - i
}

// replyCodeAt is the final reply code (2yz, 4yz, 5yz; y at most 5) that
// starts at s[i] and stands alone,
// followed by a space, a hyphen or the end; 0 when none does.
func replyCodeAt(s string, i int) int {
	if !boundary(s, i) || i+3 > len(s) || (s[i] != '2' && s[i] != '4' && s[i] != '5') || s[i+1] < '0' || s[i+1] > '5' || !isDigit(s[i+2]) {
		return 0
	}
	if j := i + 3; j < len(s) {
		switch s[j] {
		case ' ', '-', '\t', '\r', '\n':
		default:
			return 0
		}
	}
	return int(s[i]-'0')*100 + int(s[i+1]-'0')*10 + int(s[i+2]-'0')
}

// boundary reports whether a code may start at s[i]: at the start, or
// after anything but a letter, a digit or a dot.
func boundary(s string, i int) bool {
	return i == 0 || !alnum(s[i-1]) && s[i-1] != '.'
}

// digits counts the digits at s[i:].
func digits(s string, i int) int {
	n := 0
	for i+n < len(s) && isDigit(s[i+n]) {
		n++
	}
	return n
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func alnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
