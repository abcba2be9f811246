// Package receipt signs and verifies verifyd's receipts, the 200 answers
// of POST /v1/validate (spec §2.4), and publishes the keys that verify
// them. It knows nothing of HTTP: the server writes what it returns.
//
// # Signing
//
//  1. The server builds the receipt as a Go value and calls
//     [KeySet.SignStruct] (or [KeySet.Sign] with JSON).
//  2. Member "kid" is set to the active key's id ("v1", "v2", …, spec §9)
//     and any "sig" is left out.
//  3. The object is written in the JSON Canonicalization Scheme, RFC 8785
//     ([Canonicalize]): no whitespace, members sorted by the UTF-16 code
//     units of their names (§3.2.3), strings escaped per §3.2.2.2, numbers
//     as ECMAScript prints them (§3.2.2.3). Input must be I-JSON (RFC
//     7493): valid UTF-8, no duplicate names.
//  4. Those bytes are signed with Ed25519 (RFC 8032 §5.1.6).
//  5. "sig", the 64-byte signature in base64url without padding (RFC 4648
//     §5), is appended as the last member; the rest stays canonical.
//
// # Verifying
//
// [Verify] and [PublicKeys.Verify] undo it: parse the receipt, take out
// "sig", canonicalize the rest (kid included), look kid up in the key set
// and check the signature (RFC 8032 §5.1.7). README.md has the same steps
// for users, a ten-line Python verifier, and verifier-py/, a stdlib-only
// Python verifier that shares no code with this package; the tests run it.
//
// # Keys
//
// A [KeySet] holds one active private key and the public half of every
// key it ever had. [KeySet.JWKS] is the JWK Set (RFC 7517 §5; kty OKP, crv
// Ed25519, RFC 8037 §2; alg Ed25519, RFC 9864) served at
// GET /.well-known/jwks.json and GET /v1/keys; [KeySet.JWKSLegacy] says
// alg EdDSA instead, for older JOSE libraries. [KeySet.Rotate] adds key
// v<N+1> and makes it active; the old key keeps being published, so
// receipts signed with it keep verifying, but its private seed is dropped.
// The set lives in a [KeyStore]: the storage package, or [FileStore]
// (keys.json, mode 0600, replaced atomically).
package receipt
