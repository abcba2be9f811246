// Package dnsname holds verifyd's one rule for folding a domain name in
// presentation form: the ASCII letters A to Z become a to z, and every
// other byte stays as it is. DNS compares names without regard to ASCII
// case, and only ASCII case (RFC 1035 §2.3.3, RFC 4343 §3), so two names
// that fold alike are the same name.
//
//   - A trailing dot stays. Whether "example.com." is "example.com" is the
//     caller's rule, applied before it folds: the resolver and the lists
//     drop one trailing dot, probe/address refuses it.
//   - Bytes 0x80 and above stay. Converting U-labels to A-labels is IDNA's
//     work (its UTS 46 mapping lower-cases them too), which the callers that
//     accept U-labels do before they fold, never this package. So a fold
//     never changes UTF-8 into something else, and on a string of ASCII
//     it gives what strings.ToLower gives.
//
// The fold is idempotent and keeps the length. Fold returns its argument
// itself, without allocating, when there is nothing to fold; FoldInto
// writes into the caller's buffer and never allocates, for lookups that
// must not (probe/lists).
package dnsname

import "strings"

// Fold returns name with its ASCII letters lower-cased, or name itself when
// it has no upper-case ASCII letter.
func Fold(name string) string {
	for i := 0; i < len(name); i++ {
		if isUpper(name[i]) {
			var b strings.Builder
			b.Grow(len(name))
			b.WriteString(name[:i])
			for ; i < len(name); i++ {
				b.WriteByte(lower(name[i]))
			}
			return b.String()
		}
	}
	return name
}

// FoldInto writes the fold of name into buf and returns buf[:len(name)].
// It returns false, and writes nothing, when name is longer than buf.
func FoldInto(buf []byte, name string) ([]byte, bool) {
	if len(name) > len(buf) {
		return nil, false
	}
	for i := 0; i < len(name); i++ {
		buf[i] = lower(name[i])
	}
	return buf[:len(name)], true
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

func lower(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}
