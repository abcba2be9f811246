package receipt

import (
	"crypto/ed25519"
	"math/rand/v2"
	"testing"
)

// The signer's signatures are crypto/ed25519's, byte for byte, over many
// keys and messages of every length up to a few receipts'.
func TestSignerMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seed := make([]byte, ed25519.SeedSize)
	for i := range 2000 {
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		k, err := newSigner(priv)
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, rng.IntN(4000))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		if i%7 == 0 {
			msg = msg[:0]
		}
		got := k.sign(msg)
		if want := ed25519.Sign(priv, msg); string(got[:]) != string(want) {
			t.Fatalf("key %d, %d-byte message: signature %x, crypto/ed25519 %x", i, len(msg), got, want)
		}
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), msg, got[:]) {
			t.Fatalf("key %d: signature does not verify", i)
		}
	}
	if _, err := newSigner(make([]byte, 10)); err == nil {
		t.Error("a 10-byte key accepted")
	}
}

func FuzzSigner(f *testing.F) {
	f.Add(make([]byte, 32), []byte("receipt"))
	f.Fuzz(func(t *testing.T, seed, msg []byte) {
		if len(seed) != ed25519.SeedSize {
			return
		}
		priv := ed25519.NewKeyFromSeed(seed)
		k, err := newSigner(priv)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := k.sign(msg), ed25519.Sign(priv, msg); string(got[:]) != string(want) {
			t.Fatalf("signature %x, crypto/ed25519 %x", got, want)
		}
	})
}
