package receipt

import (
	"encoding/json"
)

// Values of the JWK member "alg".
const (
	// AlgEd25519 is the fully-specified algorithm of RFC 9864 §2.2: EdDSA
	// with the Ed25519 parameter set, nothing left to negotiate.
	AlgEd25519 = "Ed25519"
	// AlgEdDSA is the polymorphic name of RFC 8037 §3.1, which older JOSE
	// libraries know; with crv Ed25519 it means the same thing.
	AlgEdDSA = "EdDSA"
)

// jwk is a public Ed25519 key in JWK form (RFC 7517 §4, RFC 8037 §2), in
// the member order it is written.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

type jwkSet struct {
	Keys []jwk `json:"keys"`
}

// JWKS is the public key set as a JWK Set (RFC 7517 §5), newest key
// first, each key with "alg":"Ed25519" (RFC 9864):
//
//	{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"v2","x":"…","alg":"Ed25519","use":"sig"},…]}
//
// It is what GET /.well-known/jwks.json and GET /v1/keys serve. The bytes
// are built once per key generation and shared: do not modify them.
func (ks *KeySet) JWKS() []byte { return ks.cur.Load().jwks }

// JWKSLegacy is JWKS with "alg":"EdDSA" (RFC 8037 §3.1) in place of
// "Ed25519", for clients whose JOSE library predates RFC 9864; the HTTP
// layer serves it for ?alg=EdDSA. The keys are the same. Do not modify
// the bytes.
func (ks *KeySet) JWKSLegacy() []byte { return ks.cur.Load().legacy }

// buildJWKS writes the key set with the given alg.
func buildJWKS(pub *PublicKeys, alg string) []byte {
	set := jwkSet{Keys: make([]jwk, 0, len(pub.kids))}
	for _, kid := range pub.kids {
		set.Keys = append(set.Keys, jwk{
			Kty: "OKP",
			Crv: "Ed25519",
			Kid: kid,
			X:   b64.EncodeToString(pub.keys[kid]),
			Alg: alg,
			Use: "sig",
		})
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic("receipt: cannot marshal a key set: " + err.Error()) // strings only
	}
	return b
}
