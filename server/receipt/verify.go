package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PublicKeys is a parsed key set: the Ed25519 public keys by kid.
type PublicKeys struct {
	keys map[string]ed25519.PublicKey
	kids []string // newest first when built by a KeySet, else as listed
}

// Kids lists the kids of the set.
func (p *PublicKeys) Kids() []string { return slices.Clone(p.kids) }

// Key returns the public key of kid.
func (p *PublicKeys) Key(kid string) (ed25519.PublicKey, bool) {
	k, ok := p.keys[kid]
	return k, ok
}

// ParseJWKS reads a JWK Set (RFC 7517 §5) and keeps its Ed25519 signing
// keys: kty OKP and crv Ed25519 (RFC 8037 §2), alg Ed25519 (RFC 9864),
// EdDSA (RFC 8037) or absent, use sig or absent. Other keys are skipped. A
// set with no such key, a key without kid, two keys of one kid, a bad x,
// or a private key ("d") is an error matching [ErrBadKeySet].
func ParseJWKS(data []byte) (*PublicKeys, error) {
	var set struct {
		Keys []struct {
			Kty string  `json:"kty"`
			Crv string  `json:"crv"`
			Kid string  `json:"kid"`
			X   string  `json:"x"`
			D   *string `json:"d"`
			Alg string  `json:"alg"`
			Use string  `json:"use"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKeySet, err)
	}
	p := &PublicKeys{keys: make(map[string]ed25519.PublicKey, len(set.Keys))}
	for i, k := range set.Keys {
		if k.D != nil {
			return nil, fmt.Errorf("%w: key %d holds a private key (d); publish only public keys", ErrBadKeySet, i)
		}
		if k.Kty != "OKP" || k.Crv != "Ed25519" ||
			(k.Alg != "" && k.Alg != AlgEd25519 && k.Alg != AlgEdDSA) ||
			(k.Use != "" && k.Use != "sig") {
			continue
		}
		if k.Kid == "" {
			return nil, fmt.Errorf("%w: key %d has no kid", ErrBadKeySet, i)
		}
		if _, dup := p.keys[k.Kid]; dup {
			return nil, fmt.Errorf("%w: kid %q is listed twice", ErrBadKeySet, k.Kid)
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(k.X) != xLen || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %q: x is not a base64url Ed25519 public key", ErrBadKeySet, k.Kid)
		}
		p.keys[k.Kid] = ed25519.PublicKey(x)
		p.kids = append(p.kids, k.Kid)
	}
	if len(p.keys) == 0 {
		return nil, fmt.Errorf("%w: no Ed25519 signing key", ErrBadKeySet)
	}
	return p, nil
}

// Verify checks a signed receipt against a JWKS, as `verifyctl receipt
// verify` does, and returns the kid that signed it. See [PublicKeys.Verify].
func Verify(receiptJSON, jwks []byte) (kid string, err error) {
	p, err := ParseJWKS(jwks)
	if err != nil {
		return "", err
	}
	return p.Verify(receiptJSON)
}

// Verify checks a signed receipt and returns its kid:
//
//  1. the receipt must be one I-JSON object with string members "kid" and
//     "sig", sig 64 bytes in base64url without padding;
//  2. the object without "sig" is put in RFC 8785 canonical form;
//  3. the Ed25519 signature (RFC 8032 §5.1.7) over those bytes must verify
//     with the key of that kid.
//
// Errors match [ErrMalformed], [ErrUnknownKid] or [ErrBadSignature].
func (p *PublicKeys) Verify(receiptJSON []byte) (kid string, err error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	c.topv = topLevel{}
	canon, err := c.run(c.out[:0], receiptJSON, &c.topv)
	c.out = canon[:0]
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	top := &c.topv
	switch {
	case !top.hasKid:
		return "", fmt.Errorf("%w: no kid", ErrMalformed)
	case top.kid == nil:
		return "", fmt.Errorf("%w: kid is not a string", ErrMalformed)
	case !top.hasSig:
		return "", fmt.Errorf("%w: no sig", ErrMalformed)
	case top.sig == nil:
		return "", fmt.Errorf("%w: sig is not a string", ErrMalformed)
	}
	kid = string(top.kid)
	// The length check also keeps out CR and LF, which the decoder skips.
	sig, err := b64.DecodeString(string(top.sig))
	if err != nil || len(top.sig) != sigLen || len(sig) != ed25519.SignatureSize {
		return kid, fmt.Errorf("%w: sig is not a base64url (no padding) Ed25519 signature", ErrMalformed)
	}
	key, ok := p.keys[kid]
	if !ok {
		return kid, fmt.Errorf("%w %q (the key set has %s)", ErrUnknownKid, kid, strings.Join(p.kids, ", "))
	}
	if !ed25519.Verify(key, canon, sig) {
		return kid, fmt.Errorf("%w with key %q", ErrBadSignature, kid)
	}
	return kid, nil
}
