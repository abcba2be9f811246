package receipt

import (
	"crypto/ed25519"
	"crypto/sha512"
	"fmt"

	"filippo.io/edwards25519"
)

// signer is an Ed25519 private key ready to sign (RFC 8032 §5.1.5-5.1.6):
// the secret scalar s and the prefix are derived from the seed once, not
// on every signature.
//
// crypto/ed25519.Sign hashes the seed again on each call and encodes the
// commitment point R twice (each encoding inverts a field element); with
// those gone a signature costs about a fifth less, and signing is most of
// a receipt's cost. The group arithmetic is filippo.io/edwards25519, the
// package the standard library's own implementation was taken from, kept
// by its author. The signatures are the same bytes as crypto/ed25519's
// (Ed25519 is deterministic): TestSignerMatchesStdlib and FuzzSigner
// compare them.
type signer struct {
	s      *edwards25519.Scalar
	prefix [32]byte
	pub    [32]byte
}

func newSigner(priv ed25519.PrivateKey) (*signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("receipt: private key of %d bytes", len(priv))
	}
	h := sha512.Sum512(priv.Seed())
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		return nil, err
	}
	k := &signer{s: s}
	copy(k.prefix[:], h[32:])
	copy(k.pub[:], priv[32:])
	return k, nil
}

// sign returns the Ed25519 signature of msg (RFC 8032 §5.1.6).
func (k *signer) sign(msg []byte) [64]byte {
	var digest [sha512.Size]byte
	// r = SHA-512(prefix || M) mod L; R = rB.
	h := sha512.New()
	h.Write(k.prefix[:])
	h.Write(msg)
	r, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic("receipt: ed25519: " + err.Error()) // 64 bytes: cannot fail
	}
	R := (&edwards25519.Point{}).ScalarBaseMult(r).Bytes()
	// k = SHA-512(R || A || M) mod L; S = r + k·s mod L.
	h.Reset()
	h.Write(R)
	h.Write(k.pub[:])
	h.Write(msg)
	kk, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic("receipt: ed25519: " + err.Error())
	}
	S := edwards25519.NewScalar().MultiplyAdd(kk, k.s, r)
	var sig [64]byte
	copy(sig[:32], R)
	copy(sig[32:], S.Bytes())
	return sig
}
