package address

import (
	"strings"
	"unicode/utf8"
)

// Input is an address as verifyd takes it in: parsed once, at the edge
// (POST /v1/validate, POST /v1/batch, a job's address read back from
// storage), and carried downstream, so that a single validation and a
// batch of the same address verify, store and answer the same thing.
type Input struct {
	// Email is the form verifyd verifies, stores and answers: the parsed
	// address (Address.String(): the canonical local part, its case kept,
	// RFC 5321 §2.4; the domain lower-cased and in U-labels), or the input
	// as given when it is not an address the engine accepts (its result
	// is invalid, syntax_error).
	Email string
	// Addr is the parsed address; zero when Err is set.
	Addr Address
	// Err is why the input is not an address the engine accepts
	// (*SyntaxError); nil when it parsed.
	Err error
}

// NewInput parses s (Parse) into an Input.
func NewInput(s string) Input {
	a, err := Parse(s)
	if err != nil {
		return Input{Email: s, Err: err}
	}
	if isForm(s, a) {
		return Input{Email: s, Addr: a} // s is a.String() already
	}
	return Input{Email: a.String(), Addr: a}
}

// isForm says whether s is a.String(), without building it.
func isForm(s string, a Address) bool {
	n := len(a.Local)
	return len(s) == n+1+len(a.Domain) && s[:n] == a.Local && s[n] == '@' && s[n+1:] == a.Domain
}

// ASCIIDomain is the domain in A-labels (DNS, SMTP, the batch
// scheduler's grouping), "" when the input did not parse.
func (in Input) ASCIIDomain() string { return in.Addr.ASCIIDomain }

// NewLowerInput is NewInput of s lower-cased: the form of an address in a
// batch (spec §2.2: "Lower-cased and de-duplicated by the service"). It
// lower-cases before parsing, so the limits hold for the form stored; an
// input that is not valid UTF-8 has only its ASCII letters lower-cased
// (strings.ToLower would turn the bad bytes into U+FFFD, a character
// Parse accepts, and so repair an input that is not an address).
func NewLowerInput(s string) Input { return NewInput(Lower(s)) }

// Lower lower-cases s: every letter when s is valid UTF-8, the ASCII
// letters only when it is not (NewLowerInput).
func Lower(s string) string {
	if utf8.ValidString(s) {
		return strings.ToLower(s)
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
