package receipt

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest in the input of
// [Canonicalize]. Receipts nest three levels; the limit only bounds the
// recursion on hostile input.
const MaxDepth = 1000

// ErrorKind says which rule a rejected input broke.
type ErrorKind uint8

const (
	// KindSyntax: not JSON text (RFC 8259).
	KindSyntax ErrorKind = iota + 1
	// KindUTF8: the text is not valid UTF-8 (RFC 8259 §8.1, RFC 7493 §2.1).
	KindUTF8
	// KindSurrogate: a string holds an escaped lone surrogate, which is not
	// Unicode and has no UTF-8 form (RFC 7493 §2.1, RFC 8785 §3.2.2.2).
	KindSurrogate
	// KindDuplicate: an object repeats a member name (RFC 7493 §2.3).
	KindDuplicate
	// KindNumber: a number is outside IEEE 754 double precision (RFC 7493
	// §2.2, RFC 8785 §3.2.2.3).
	KindNumber
	// KindDepth: nesting deeper than [MaxDepth].
	KindDepth
)

// JSONError is the error of [Canonicalize]: what is wrong, and the byte
// offset in the input where it was found.
type JSONError struct {
	Kind   ErrorKind
	Offset int
	Msg    string
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("receipt: jcs: %s at offset %d", e.Msg, e.Offset)
}

// Canonicalize returns the RFC 8785 canonical form of one JSON text: the
// same value with no whitespace, object members sorted by the UTF-16 code
// units of their names (§3.2.3), strings escaped as §3.2.2.2 says and
// numbers written as ECMAScript writes an IEEE 754 double (§3.2.2.3).
//
// The input must be I-JSON (RFC 7493): valid UTF-8, no duplicate member
// names, no lone surrogates, numbers within double range. Numbers are
// parsed as doubles, so an integer beyond 2^53 is rounded the way every
// JCS implementation rounds it. Noncharacters (U+FFFE, U+FDD0 …), which
// RFC 7493 also forbids, are let through: every JCS implementation writes
// them unchanged, so rejecting them would only make signing fail. An error
// is a *[JSONError].
func Canonicalize(src []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	out, err := c.run(make([]byte, 0, len(src)+16), src, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// topLevel changes how the outermost object is written, for signing and
// verifying receipts. Member "sig" is always left out of the canonical
// form; its decoded value is recorded.
type topLevel struct {
	// setKid, when non-nil, replaces the value of member "kid" (or adds
	// the member) with this string: the signing mode. When nil, "kid" is
	// kept as it is and its value recorded: the verifying mode.
	setKid []byte
	// set, in the signing mode, are further members written with the
	// given values in place of the input's (see KeySet.SignWith); seen
	// records which of them the input had, to refuse repeats.
	set  []Field
	seen uint64

	sig, kid       []byte // decoded string values, nil if absent or not strings
	hasSig, hasKid bool   // whether the members were present at all
}

// member is one object member being sorted: where its decoded name is
// and where its canonical `"name":value` text sits in the output buffer.
// It holds no pointers, so that sorting moves it without write barriers.
type member struct {
	// prefix is the name's first 8 bytes, big-endian, zero-padded: most
	// comparisons end there.
	prefix uint64
	// The name is c.src[nameOff:nameOff+nameLen], or c.names[…] when
	// inNames (names that needed unescaping).
	nameOff, nameLen int32
	inNames          bool
	// high: the name has a byte ≥ 0xEE, the lead byte of U+E000 and above,
	// where UTF-8 and UTF-16 order can disagree.
	high       bool
	start, end int
}

// canonicalizer holds the scratch space of one Canonicalize call; pooled so
// that the signing hot path allocates only its result.
type canonicalizer struct {
	src     []byte
	pos     int
	depth   int
	top     *topLevel
	members []member // a stack: each open object uses the tail
	names   []byte   // decoded names that needed unescaping
	tmp     []byte   // reordering space
	str     []byte   // decoded string scratch
	out     []byte   // output space for Sign and Verify
	topv    topLevel
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

func (c *canonicalizer) release() {
	if cap(c.tmp) > 64<<10 || cap(c.names) > 64<<10 || cap(c.members) > 4096 || cap(c.str) > 64<<10 || cap(c.out) > 64<<10 {
		return // do not keep huge buffers alive
	}
	c.src, c.top, c.topv = nil, nil, topLevel{}
	canonPool.Put(c)
}

// run appends the canonical form of src to dst.
func (c *canonicalizer) run(dst, src []byte, top *topLevel) ([]byte, error) {
	c.src, c.pos, c.depth, c.top = src, 0, 0, top
	if len(src) > math.MaxInt32 {
		return dst, c.fail(KindSyntax, "input larger than 2 GiB")
	}
	c.members, c.names = c.members[:0], c.names[:0]
	c.skipSpace()
	if top != nil {
		if c.pos >= len(src) || src[c.pos] != '{' {
			return dst, c.fail(KindSyntax, "a receipt must be a JSON object")
		}
	}
	dst, err := c.value(dst)
	if err != nil {
		return dst, err
	}
	c.skipSpace()
	if c.pos != len(src) {
		return dst, c.fail(KindSyntax, "data after the JSON value")
	}
	return dst, nil
}

func (c *canonicalizer) fail(kind ErrorKind, format string, args ...any) error {
	return &JSONError{Kind: kind, Offset: c.pos, Msg: fmt.Sprintf(format, args...)}
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(dst []byte) ([]byte, error) {
	if c.pos >= len(c.src) {
		return dst, c.fail(KindSyntax, "unexpected end of input")
	}
	switch b := c.src[c.pos]; {
	case b == '{':
		return c.object(dst)
	case b == '[':
		return c.array(dst)
	case b == '"':
		s, _, err := c.string()
		if err != nil {
			return dst, err
		}
		return appendString(dst, s), nil
	case b == '-' || b >= '0' && b <= '9':
		return c.number(dst)
	case b == 't':
		return c.literal(dst, "true")
	case b == 'f':
		return c.literal(dst, "false")
	case b == 'n':
		return c.literal(dst, "null")
	default:
		return dst, c.fail(KindSyntax, "unexpected character %q", b)
	}
}

func (c *canonicalizer) literal(dst []byte, lit string) ([]byte, error) {
	if len(c.src)-c.pos < len(lit) || string(c.src[c.pos:c.pos+len(lit)]) != lit {
		return dst, c.fail(KindSyntax, "invalid literal, want %s", lit)
	}
	c.pos += len(lit)
	return append(dst, lit...), nil
}

func (c *canonicalizer) enter() error {
	c.depth++
	if c.depth > MaxDepth {
		return c.fail(KindDepth, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (c *canonicalizer) array(dst []byte) ([]byte, error) {
	if err := c.enter(); err != nil {
		return dst, err
	}
	c.pos++ // [
	dst = append(dst, '[')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		c.depth--
		return append(dst, ']'), nil
	}
	for {
		var err error
		c.skipSpace()
		if dst, err = c.value(dst); err != nil {
			return dst, err
		}
		c.skipSpace()
		if c.pos >= len(c.src) {
			return dst, c.fail(KindSyntax, "unterminated array")
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			dst = append(dst, ',')
		case ']':
			c.pos++
			c.depth--
			return append(dst, ']'), nil
		default:
			return dst, c.fail(KindSyntax, "want , or ] in array")
		}
	}
}

func (c *canonicalizer) object(dst []byte) ([]byte, error) {
	if err := c.enter(); err != nil {
		return dst, err
	}
	var top *topLevel
	if c.depth == 1 {
		top = c.top
	}
	c.pos++ // {
	start := len(dst)
	base := len(c.members)
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.skipSpace()
			if c.pos >= len(c.src) || c.src[c.pos] != '"' {
				return dst, c.fail(KindSyntax, "want a member name")
			}
			nameStart := c.pos + 1
			raw, escaped, err := c.string()
			if err != nil {
				return dst, err
			}
			m := member{nameOff: int32(nameStart), nameLen: int32(len(raw))}
			if escaped {
				m.inNames, m.nameOff = true, int32(len(c.names))
				c.names = append(c.names, raw...)
			}
			name := c.name(m)
			c.skipSpace()
			if c.pos >= len(c.src) || c.src[c.pos] != ':' {
				return dst, c.fail(KindSyntax, "want : after member name")
			}
			c.pos++
			c.skipSpace()
			mstart := len(dst)
			dst = appendString(dst, name)
			dst = append(dst, ':')
			valPos, valStart := c.pos, len(dst)
			if dst, err = c.value(dst); err != nil {
				return dst, err
			}
			keep := true
			if top != nil {
				keep, err = c.topMember(dst[valStart:], name, valPos, top)
				if err != nil {
					return dst, err
				}
			}
			if keep {
				m.start, m.end = mstart, len(dst)
				m.prefix, m.high = namePrefix(name), hasHigh(name)
				c.members = append(c.members, m)
			} else {
				dst = dst[:mstart]
			}
			c.skipSpace()
			if c.pos >= len(c.src) {
				return dst, c.fail(KindSyntax, "unterminated object")
			}
			if c.src[c.pos] == ',' {
				c.pos++
				continue
			}
			if c.src[c.pos] == '}' {
				c.pos++
				break
			}
			return dst, c.fail(KindSyntax, "want , or } in object")
		}
	}
	if top != nil && top.setKid != nil {
		mstart := len(dst)
		dst = append(dst, `"kid":`...)
		dst = appendString(dst, top.setKid)
		m := member{nameOff: int32(len(c.names)), nameLen: 3, inNames: true, start: mstart, end: len(dst)}
		c.names = append(c.names, "kid"...)
		m.prefix = namePrefix(c.name(m))
		c.members = append(c.members, m)
		for _, f := range top.set {
			mstart := len(dst)
			dst = appendString(dst, []byte(f.Name))
			dst = append(dst, ':')
			dst = append(dst, f.Value...)
			m := member{nameOff: int32(len(c.names)), nameLen: int32(len(f.Name)), inNames: true, start: mstart, end: len(dst)}
			c.names = append(c.names, f.Name...)
			name := c.name(m)
			m.prefix, m.high = namePrefix(name), hasHigh(name)
			c.members = append(c.members, m)
		}
	}
	dst, err := c.sortMembers(dst, start, c.members[base:])
	c.members = c.members[:base]
	c.depth--
	return dst, err
}

// topMember handles "kid" and "sig" of the outermost object; it reports
// whether the member stays in the canonical form. val is the member's
// canonical value, valPos where the value starts in the input.
func (c *canonicalizer) topMember(val, name []byte, valPos int, top *topLevel) (bool, error) {
	var out *[]byte
	switch string(name) {
	case "sig":
		if top.hasSig {
			return false, c.fail(KindDuplicate, "duplicate member name %q", name)
		}
		top.hasSig = true
		out = &top.sig
	case "kid":
		// In the signing mode the member is dropped and written anew, so
		// sortMembers would not see a repeated one.
		if top.hasKid && top.setKid != nil {
			return false, c.fail(KindDuplicate, "duplicate member name %q", name)
		}
		top.hasKid = true
		out = &top.kid
	default:
		for i, f := range top.set {
			if f.Name == string(name) {
				if top.seen&(1<<i) != 0 {
					return false, c.fail(KindDuplicate, "duplicate member name %q", name)
				}
				top.seen |= 1 << i
				return false, nil
			}
		}
		return true, nil
	}
	if val[0] == '"' && top.setKid == nil {
		pos := c.pos
		c.pos = valPos
		s, _, err := c.string() // parsed once already: cannot fail
		c.pos = pos
		if err != nil {
			return false, err
		}
		*out = append(make([]byte, 0, len(s)), s...)
	}
	return string(name) == "kid" && top.setKid == nil, nil
}

// name returns the decoded name of m.
func (c *canonicalizer) name(m member) []byte {
	b := c.src
	if m.inNames {
		b = c.names
	}
	return b[m.nameOff : m.nameOff+m.nameLen]
}

// namePrefix packs the first 8 bytes of name, zero-padded, big-endian.
func namePrefix(name []byte) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(name) {
			p |= uint64(name[i])
		}
	}
	return p
}

// sortMembers rewrites dst[start:] as '{', the members in RFC 8785 §3.2.3
// order separated by commas, '}'. Members are in dst after start, in input
// order, without separators.
func (c *canonicalizer) sortMembers(dst []byte, start int, ms []member) ([]byte, error) {
	sorted := slices.IsSortedFunc(ms, c.compareMembers)
	switch {
	case sorted:
	case len(ms) <= 64:
		c.insertionSort(ms)
	default:
		slices.SortFunc(ms, c.compareMembers)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i-1].prefix == ms[i].prefix && string(c.name(ms[i-1])) == string(c.name(ms[i])) {
			return dst, &JSONError{Kind: KindDuplicate, Offset: c.pos, Msg: fmt.Sprintf("duplicate member name %q", c.name(ms[i]))}
		}
	}
	if sorted {
		// Already in order (and contiguous): insert the braces and commas
		// in place by one backwards pass.
		if len(ms) == 0 {
			return append(dst, '{', '}'), nil
		}
		extra := len(ms) // '{' and the commas; '}' is appended
		oldLen := len(dst)
		dst = slices.Grow(dst, extra+1)[:oldLen+extra]
		w := len(dst)
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			w -= m.end - m.start
			copy(dst[w:], dst[m.start:m.end])
			w--
			if i == 0 {
				dst[w] = '{'
			} else {
				dst[w] = ','
			}
		}
		return append(dst, '}'), nil
	}
	tmp := append(c.tmp[:0], '{')
	for i, m := range ms {
		if i > 0 {
			tmp = append(tmp, ',')
		}
		tmp = append(tmp, dst[m.start:m.end]...)
	}
	tmp = append(tmp, '}')
	c.tmp = tmp
	return append(dst[:start], tmp...), nil
}

// insertionSort sorts a few members: binary search for the place, one
// memmove to make room. Faster than slices.SortFunc on objects of the size
// of a receipt's, where the calls through a func value dominate.
func (c *canonicalizer) insertionSort(ms []member) {
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		lo, hi := 0, i
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if c.compareMembers(ms[mid], m) <= 0 {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo < i {
			copy(ms[lo+1:i+1], ms[lo:i])
			ms[lo] = m
		}
	}
}

func (c *canonicalizer) compareMembers(a, b member) int {
	if a.high && b.high {
		return compareUTF16(c.name(a), c.name(b))
	}
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return bytes.Compare(c.name(a), c.name(b))
}

// hasHigh reports whether s has a byte ≥ 0xEE. Two names compare the same
// in UTF-8 and UTF-16 unless both have one.
func hasHigh(s []byte) bool {
	for _, b := range s {
		if b >= 0xEE {
			return true
		}
	}
	return false
}

// compareUTF16 orders two UTF-8 strings by their UTF-16 code units, as
// RFC 8785 §3.2.3 sorts member names. Byte order of UTF-8 is code point
// order, which agrees with UTF-16 order except that the code points above
// U+FFFF (surrogate pairs, units D800-DFFF) sort before U+E000-U+FFFF.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the rune that differs.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Rank(ra)) - int(utf16Rank(rb))
}

// utf16Rank maps a code point to a number whose order is the order of its
// UTF-16 encoding: U+E000-U+FFFF move above the supplementary planes.
func utf16Rank(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x110000
	}
	return r
}

// string parses a JSON string at c.pos and returns its decoded UTF-8
// bytes: a slice of the input when it has no escapes, else (escaped) of
// the scratch buffer c.str, valid until the next call.
func (c *canonicalizer) string() (s []byte, escaped bool, err error) {
	c.pos++ // opening quote
	start := c.pos
	// Fast path: no escapes.
	for c.pos < len(c.src) {
		b := c.src[c.pos]
		switch {
		case b == '"':
			c.pos++
			return c.src[start : c.pos-1], false, nil
		case b == '\\':
			return c.slowString(start)
		case b < 0x20:
			return nil, false, c.fail(KindSyntax, "control character %#02x in string", b)
		case b < utf8.RuneSelf:
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.src[c.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, c.fail(KindUTF8, "invalid UTF-8")
			}
			c.pos += size
		}
	}
	return nil, false, c.fail(KindSyntax, "unterminated string")
}

// slowString continues string at the first backslash.
func (c *canonicalizer) slowString(start int) ([]byte, bool, error) {
	buf := append(c.str[:0], c.src[start:c.pos]...)
	defer func() { c.str = buf[:0] }()
	for c.pos < len(c.src) {
		b := c.src[c.pos]
		switch {
		case b == '"':
			c.pos++
			return buf, true, nil
		case b == '\\':
			var err error
			if buf, err = c.escape(buf); err != nil {
				return nil, false, err
			}
		case b < 0x20:
			return nil, false, c.fail(KindSyntax, "control character %#02x in string", b)
		case b < utf8.RuneSelf:
			buf = append(buf, b)
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.src[c.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, c.fail(KindUTF8, "invalid UTF-8")
			}
			buf = append(buf, c.src[c.pos:c.pos+size]...)
			c.pos += size
		}
	}
	return nil, false, c.fail(KindSyntax, "unterminated string")
}

// escape decodes the escape sequence at c.pos onto buf.
func (c *canonicalizer) escape(buf []byte) ([]byte, error) {
	if c.pos+1 >= len(c.src) {
		return buf, c.fail(KindSyntax, "unterminated string")
	}
	e := c.src[c.pos+1]
	var d byte
	switch e {
	case '"', '\\', '/':
		d = e
	case 'b':
		d = '\b'
	case 'f':
		d = '\f'
	case 'n':
		d = '\n'
	case 'r':
		d = '\r'
	case 't':
		d = '\t'
	case 'u':
		r, ok := c.hex4(c.pos + 2)
		if !ok {
			return buf, c.fail(KindSyntax, "bad \\u escape")
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xDC00:
			// A high surrogate must be followed by an escaped low one.
			lo, ok := c.hex4(c.pos + 8)
			if !ok || c.src[c.pos+6] != '\\' || c.src[c.pos+7] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
				return buf, c.fail(KindSurrogate, "lone surrogate \\u%04x", r)
			}
			c.pos += 12
			return utf8.AppendRune(buf, utf16.DecodeRune(r, lo)), nil
		case utf16.IsSurrogate(r):
			return buf, c.fail(KindSurrogate, "lone surrogate \\u%04x", r)
		}
		c.pos += 6
		return utf8.AppendRune(buf, r), nil
	default:
		return buf, c.fail(KindSyntax, "bad escape \\%c", e)
	}
	c.pos += 2
	return append(buf, d), nil
}

// hex4 reads four hex digits at i. Bounds are checked; the two bytes
// before i (read by the caller for a second escape) lie within the input
// whenever ok is true.
func (c *canonicalizer) hex4(i int) (rune, bool) {
	if i < 0 || i+4 > len(c.src) {
		return 0, false
	}
	var r rune
	for _, b := range c.src[i : i+4] {
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendString writes s (valid UTF-8) as RFC 8785 §3.2.2.2 says: the six
// short escapes, \u00xx in lower-case hex for the other controls, and
// every other character as itself.
// AppendString appends s as an RFC 8785 JSON string (for [Field] values).
func AppendString(dst []byte, s string) []byte { return appendString(dst, []byte(s)) }

func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	last := 0
	for i, b := range s {
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		last = i + 1
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// number parses a JSON number (RFC 8259 §6) and appends its RFC 8785
// §3.2.2.3 form.
func (c *canonicalizer) number(dst []byte) ([]byte, error) {
	start := c.pos
	i := c.pos
	src := c.src
	if src[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		c.pos = i
		return dst, c.fail(KindSyntax, "bad number")
	}
	integer := true
	if i < len(src) && src[i] == '.' {
		integer = false
		i++
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			c.pos = i
			return dst, c.fail(KindSyntax, "bad number: no digit after the point")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		integer = false
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			c.pos = i
			return dst, c.fail(KindSyntax, "bad number: no digit in the exponent")
		}
	}
	tok := src[start:i]
	c.pos = i
	// Fast path: an integer of up to 15 digits is exact in a double and
	// ECMAScript writes it as it is; only -0 changes.
	if integer && i-intStart <= 15 {
		if string(tok) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, tok...), nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		c.pos = start
		return dst, c.fail(KindNumber, "number %s is out of double range", tok)
	}
	return AppendNumber(dst, f), nil
}

// AppendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (ECMA-262 Number::toString, the algorithm RFC 8785 §3.2.2.3 adopts):
// the shortest digits that round-trip, positioned by the decimal exponent
// n — integers up to 21 digits in full, fractions down to 1e-6 in plain
// notation, everything else as d.ddde±x. -0 is written 0. f must be
// finite.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-trip digits:
	// d[.ddd]e±xx.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [17]byte
	k := 0
	j := 0
	for ; e[j] != 'e'; j++ {
		if e[j] != '.' {
			digits[k] = e[j]
			k++
		}
	}
	exp := 0
	neg := e[j+1] == '-'
	for _, b := range e[j+2:] {
		exp = exp*10 + int(b-'0')
	}
	if neg {
		exp = -exp
	}
	n := exp + 1 // the value is 0.d1d2…dk × 10^n
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst
}
