package receipt

import (
	"crypto/ed25519"
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
	sig := ed25519.Sign(st.priv, canon)
	out := make([]byte, 0, len(canon)+len(`,"sig":""`)+sigLen)
	out = append(out, canon[:len(canon)-1]...)
	if len(canon) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"sig":"`...)
	out = b64.AppendEncode(out, sig)
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
