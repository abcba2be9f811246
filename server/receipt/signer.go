package receipt

import (
	"encoding/json"
	"errors"
	"fmt"
)

// sigLen is the length of sig: 64 signature bytes in base64url without
// padding.
const sigLen = 86

// Sign signs one receipt, given as a JSON object, with the active key. It
//
//  1. sets member "kid" to the active kid (replacing one the caller set)
//     and leaves out any member "sig";
//  2. writes that object in RFC 8785 canonical form;
//  3. signs the canonical bytes with Ed25519 (RFC 8032 §5.1.6);
//  4. returns the canonical form with member "sig" — the signature in
//     base64url without padding (RFC 4648 §5) — appended as the last
//     member.
//
// So the result is the canonical object except for where "sig" sits:
// every other member is in RFC 8785 order, "sig" comes last (it would
// sort between "score" and "status"). Verifiers must not depend on that:
// they parse the receipt, remove "sig" and canonicalize what is left. The
// result is a new slice the caller owns, ready to be a response body.
func (ks *KeySet) Sign(receiptJSON []byte) ([]byte, error) {
	st := ks.cur.Load()
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.topv = topLevel{setKid: st.kidJSON}
	canon, err := c.run(c.out[:0], receiptJSON, &c.topv)
	c.out = canon[:0]
	if err != nil {
		return nil, fmt.Errorf("receipt: cannot sign: %w", err)
	}
	return st.seal(canon), nil
}

// Field is a member of a receipt's outermost object that SignWith sets.
// Value is its JSON text in RFC 8785 form: true, false, null, a number as
// [AppendNumber] writes it, or a string as [AppendString] writes it.
type Field struct {
	Name  string
	Value []byte
}

// maxFields is how many fields SignWith takes.
const maxFields = 8

// SignWith is Sign with some members of the outermost object replaced:
// each field is written with its value, whether or not the receipt had
// it. It re-signs a stored receipt with a few values changed, without
// decoding it: a receipt served from the cache (cached, credits). The
// fields must not be "kid" or "sig", nor repeat a name.
func (ks *KeySet) SignWith(receiptJSON []byte, fields ...Field) ([]byte, error) {
	if len(fields) > maxFields {
		return nil, fmt.Errorf("receipt: cannot sign: more than %d fields to set", maxFields)
	}
	for i, f := range fields {
		if f.Name == "kid" || f.Name == "sig" {
			return nil, fmt.Errorf("receipt: cannot sign: member %q is not set by the caller", f.Name)
		}
		for _, g := range fields[:i] {
			if g.Name == f.Name {
				return nil, fmt.Errorf("receipt: cannot sign: member %q set twice", f.Name)
			}
		}
	}
	st := ks.cur.Load()
	if out, ok := st.resign(receiptJSON, fields); ok {
		return out, nil
	}
	return st.signWith(receiptJSON, fields)
}

// signWith is SignWith through the canonicalizer, for any receipt.
func (st *keyState) signWith(receiptJSON []byte, fields []Field) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.topv = topLevel{setKid: st.kidJSON, set: fields}
	canon, err := c.run(c.out[:0], receiptJSON, &c.topv)
	c.out = canon[:0]
	if err != nil {
		return nil, fmt.Errorf("receipt: cannot sign: %w", err)
	}
	return st.seal(canon), nil
}

// SignStruct is Sign for a Go value: v (a struct or a map) is marshalled
// with encoding/json, which must give an object. Marshal the receipt's
// optional fields with omitempty: the design says an optional key without
// a value is left out, never null.
func (ks *KeySet) SignStruct(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("receipt: cannot sign: %w", err)
	}
	return ks.Sign(raw)
}

// seal signs canon, an object in canonical form, and returns it with
// "sig" appended.
func (st *keyState) seal(canon []byte) []byte {
	sig := st.signer.sign(canon)
	out := make([]byte, 0, len(canon)+len(`,"sig":""`)+sigLen)
	out = append(out, canon[:len(canon)-1]...)
	if len(canon) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"sig":"`...)
	out = b64.AppendEncode(out, sig[:])
	return append(out, '"', '}')
}

// Errors of verification. Every error of [Verify] and [PublicKeys.Verify]
// matches one of the first three with errors.Is; [ParseJWKS] answers
// ErrBadKeySet.
var (
	// ErrMalformed: not a receipt — not a JSON object, not I-JSON, or kid
	// or sig missing or not of their form.
	ErrMalformed = errors.New("receipt: malformed receipt")
	// ErrUnknownKid: the key set has no key of the receipt's kid.
	ErrUnknownKid = errors.New("receipt: unknown kid")
	// ErrBadSignature: the signature does not verify; the receipt was
	// changed after signing, or signed by another key.
	ErrBadSignature = errors.New("receipt: signature does not verify")
	// ErrBadKeySet: the JWKS is not a usable key set.
	ErrBadKeySet = errors.New("receipt: bad key set")
)

// sigMemberLen is the length of the "sig" member seal appends, with its
// comma and the object's closing brace: ,"sig":"<86 characters>"}.
const sigMemberLen = len(`,"sig":"`) + sigLen + len(`"}`)

// resign is SignWith's fast path for a receipt seal made: the canonical
// form with "sig" appended last, so that with "sig" cut off it is
// canonical already. When the fields and "kid" are all members of it, the
// canonical form of the changed receipt is the same text with their
// values replaced (names and so order unchanged), and no canonicalizer
// pass is needed. ok is false for any other input, which signWith takes.
// TestResignMatchesCanonicalizer and FuzzResign compare the two.
func (st *keyState) resign(receipt []byte, fields []Field) (out []byte, ok bool) {
	n := len(receipt)
	if n < 2+sigMemberLen || receipt[0] != '{' || string(receipt[n-sigMemberLen:n-sigMemberLen+8]) != `,"sig":"` ||
		string(receipt[n-2:]) != `"}` || !isB64URL(receipt[n-sigMemberLen+8:n-2]) {
		return nil, false
	}
	body := receipt[:n-sigMemberLen] // '{' and the members, no closing brace
	type span struct{ start, end int }
	var found [maxFields + 1]span // value spans of fields…, then kid
	seen := 0
	for i := 1; i < len(body); {
		if body[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(body) && body[j] != '"' {
			if body[j] == '\\' {
				return nil, false // an escaped name: leave it to the canonicalizer
			}
			j++
		}
		if j+1 >= len(body) || body[j+1] != ':' {
			return nil, false
		}
		name := body[i+1 : j]
		vs := j + 2
		ve, ok := skipValue(body, vs)
		if !ok {
			return nil, false
		}
		k := -1
		if string(name) == "sig" {
			return nil, false // not from seal
		}
		if string(name) == "kid" {
			k = len(fields)
		} else {
			for f := range fields {
				if fields[f].Name == string(name) {
					k = f
					break
				}
			}
		}
		if k >= 0 {
			if found[k] != (span{}) {
				return nil, false
			}
			found[k] = span{vs, ve}
			seen++
		}
		if ve == len(body) {
			break
		}
		if body[ve] != ',' {
			return nil, false
		}
		i = ve + 1
	}
	if seen != len(fields)+1 {
		return nil, false // a member to set is missing: it must be inserted in order
	}
	kid := st.kidStr
	out = make([]byte, 0, len(body)+64)
	last := 0
	for {
		// The next span to replace, in text order.
		k, at := -1, len(body)
		for f := 0; f <= len(fields); f++ {
			if s := found[f]; s.start >= last && s.start < at {
				k, at = f, s.start
			}
		}
		if k < 0 {
			break
		}
		out = append(out, body[last:found[k].start]...)
		if k == len(fields) {
			out = append(out, kid...)
		} else {
			out = append(out, fields[k].Value...)
		}
		last = found[k].end
	}
	out = append(out, body[last:]...)
	out = append(out, '}')
	return st.seal(out), true
}

// skipValue returns the end of the JSON value at b[i:], in canonical
// form (no whitespace): a string, a literal, a number, an object or an
// array. ok is false when it is not well formed as far as it can tell.
func skipValue(b []byte, i int) (end int, ok bool) {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return 0, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return 0, false
			}
			depth--
			i++
		case ',', ':':
			if depth == 0 {
				return i, c == ','
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(b) && (b[i] == ',' || b[i] == '}') {
			return i, true
		}
	}
	return i, depth == 0
}

func isB64URL(b []byte) bool {
	for _, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
