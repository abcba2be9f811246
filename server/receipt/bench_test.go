package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
)

// BenchmarkSignStruct is the hot path of POST /v1/validate: marshal the
// receipt, canonicalize it, sign it, append sig.
func BenchmarkSignStruct(b *testing.B) {
	ks, _ := newTestKeySet(b)
	r := realisticReceipt()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ks.SignStruct(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is SignStruct without encoding/json.
func BenchmarkSign(b *testing.B) {
	ks, _ := newTestKeySet(b)
	raw := realisticReceiptJSON()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ks.Sign(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// The parts of SignStruct, to see where the time goes.

func BenchmarkMarshal(b *testing.B) {
	r := realisticReceipt()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	raw := realisticReceiptJSON()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519Sign(b *testing.B) {
	ks, _ := newTestKeySet(b)
	canon, err := Canonicalize(realisticReceiptJSON())
	if err != nil {
		b.Fatal(err)
	}
	st := ks.cur.Load()
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ed25519.Sign(st.priv, canon)
		}
	})
	b.Run("signer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st.signer.sign(canon)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	ks, _ := newTestKeySet(b)
	signed, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		b.Fatal(err)
	}
	pub := ks.PublicKeys()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pub.Verify(signed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyJWKS is Verify with the key set parsed each time, as
// `verifyctl receipt verify` does once.
func BenchmarkVerifyJWKS(b *testing.B) {
	ks, _ := newTestKeySet(b)
	signed, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		b.Fatal(err)
	}
	jwks := ks.JWKS()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(signed, jwks); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResign: re-signing a stored receipt with cached and
// credits_remaining set (a cache:true answer), by the fast path and by
// the canonicalizer.
func BenchmarkResign(b *testing.B) {
	ks, _ := newTestKeySet(b)
	st := ks.cur.Load()
	signed, err := ks.Sign(realisticReceiptJSON())
	if err != nil {
		b.Fatal(err)
	}
	fields := []Field{{"cached", []byte("true")}, {"credits_remaining", []byte("41")}}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, ok := st.resign(signed, fields); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("canonicalizer", func(b *testing.B) {
		for b.Loop() {
			if _, err := st.signWith(signed, fields); err != nil {
				b.Fatal(err)
			}
		}
	})
}
