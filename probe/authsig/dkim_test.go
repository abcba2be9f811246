package authsig

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Test keys, made once: a real 1024-bit RSA key (the smallest accepted), a
// 2048-bit one, a 512-bit modulus (too small), an ed25519 key.
var testKeys = sync.OnceValue(func() (k struct{ rsa1024, rsa2048, rsa2048PKCS1, rsa512, ed string }) {
	enc := base64.StdEncoding.EncodeToString
	spki := func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			panic(err)
		}
		return enc(der)
	}
	for _, bits := range []int{1024, 2048} {
		priv, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			panic(err)
		}
		if bits == 1024 {
			k.rsa1024 = spki(&priv.PublicKey)
		} else {
			k.rsa2048 = spki(&priv.PublicKey)
			k.rsa2048PKCS1 = enc(x509.MarshalPKCS1PublicKey(&priv.PublicKey))
		}
	}
	n := new(big.Int).Lsh(big.NewInt(1), 511)
	k.rsa512 = spki(&rsa.PublicKey{N: n.Add(n, big.NewInt(1)), E: 65537})
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	k.ed = enc(pub)
	return k
})

func TestDKIM(t *testing.T) {
	k := testKeys()
	// A long key as a DNS zone would carry it: split in 255-octet strings
	// that the caller has joined, with whitespace inside p= from a folded
	// zone file.
	folded := k.rsa2048[:100] + " \r\n\t" + k.rsa2048[100:]
	tests := []struct {
		name    string
		records []string
		want    DKIMStatus
		bits    int
		testing bool
		wantErr string // substring of Err; "" means Err == nil
	}{
		{"no record", nil, DKIMNone, 0, false, ""},
		{"minimal", []string{"p=" + k.rsa2048}, DKIMFound, 2048, false, ""},
		{"full", []string{"v=DKIM1; h=sha256; k=rsa; s=email; t=s; n=hello; p=" + k.rsa1024}, DKIMFound, 1024, false, ""},
		{"trailing semicolon and spaces", []string{" v=DKIM1 ; k = rsa ; p = " + k.rsa2048 + " ; "}, DKIMFound, 2048, false, ""},
		{"whitespace inside p=", []string{"v=DKIM1; p=" + folded}, DKIMFound, 2048, false, ""},
		{"no base64 padding", []string{"p=" + strings.TrimRight(k.rsa2048, "=")}, DKIMFound, 2048, false, ""},
		{"PKCS #1 key", []string{"k=rsa; p=" + k.rsa2048PKCS1}, DKIMFound, 2048, false, ""},
		{"ed25519", []string{"v=DKIM1; k=ed25519; p=" + k.ed}, DKIMFound, 256, false, ""},
		{"testing flag", []string{"v=DKIM1; t=y:s; p=" + k.rsa2048}, DKIMFound, 2048, true, ""},
		{"h lists sha1 and sha256", []string{"h=sha1:sha256; p=" + k.rsa2048}, DKIMFound, 2048, false, ""},
		{"h with spaces and unknown algorithm", []string{"h=sha512 : sha256; p=" + k.rsa2048}, DKIMFound, 2048, false, ""},
		{"s=*", []string{"s=*; p=" + k.rsa2048}, DKIMFound, 2048, false, ""},
		{"unknown tags ignored", []string{"v=DKIM1; x=1; y_z=; p=" + k.rsa2048}, DKIMFound, 2048, false, ""},

		{"revoked", []string{"v=DKIM1; p="}, DKIMRevoked, 0, false, ""},
		{"revoked with spaces", []string{"v=DKIM1; k=rsa; p= ;"}, DKIMRevoked, 0, false, ""},
		{"revoked, unknown key type", []string{"k=future; p="}, DKIMRevoked, 0, false, ""},

		{"two records", []string{"p=" + k.rsa2048, "p=" + k.rsa1024}, DKIMNone, 0, false, "more than one record"},
		{"v= not first", []string{"k=rsa; v=DKIM1; p=" + k.rsa2048}, DKIMNone, 0, false, "not the first"},
		{"wrong version", []string{"v=DKIM2; p=" + k.rsa2048}, DKIMNone, 0, false, "not DKIM1"},
		{"lower-case version value", []string{"v=dkim1; p=" + k.rsa2048}, DKIMNone, 0, false, "not DKIM1"},
		{"upper-case tag names are other tags", []string{"V=DKIM1; P=" + k.rsa2048}, DKIMNone, 0, false, "no p="},
		{"no p=", []string{"v=DKIM1; k=rsa"}, DKIMNone, 0, false, "no p="},
		{"duplicate p=", []string{"p=" + k.rsa2048 + "; p=" + k.rsa1024}, DKIMNone, 0, false, "duplicate"},
		{"not base64", []string{"p=not*base64"}, DKIMNone, 0, false, "not base64"},
		{"base64 but not a key", []string{"p=aGVsbG8gd29ybGQ="}, DKIMNone, 0, false, "not a DER"},
		{"rsa below 1024 bits", []string{"p=" + k.rsa512}, DKIMNone, 0, false, "below 1024"},
		{"ed25519 key labelled rsa", []string{"k=rsa; p=" + k.ed}, DKIMNone, 0, false, "not a DER"},
		{"rsa key labelled ed25519", []string{"k=ed25519; p=" + k.rsa2048}, DKIMNone, 0, false, "not 32 octets"},
		{"unknown key type", []string{"k=dsa; p=" + k.rsa2048}, DKIMNone, 0, false, "unknown key type"},
		{"key type is case-sensitive", []string{"k=RSA; p=" + k.rsa2048}, DKIMNone, 0, false, "unknown key type"},
		{"sha1 only", []string{"h=sha1; p=" + k.rsa2048}, DKIMNone, 0, false, "no acceptable hash"},
		{"not for email", []string{"s=tlsrpt; p=" + k.rsa2048}, DKIMNone, 0, false, "not for email"},
		{"an SPF record at the selector", []string{"v=spf1 -all"}, DKIMNone, 0, false, "not DKIM1"},
		{"wildcard junk", []string{"google-site-verification=abc"}, DKIMNone, 0, false, "bad tag name"},
		{"empty tag-spec", []string{"v=DKIM1;; p=" + k.rsa2048}, DKIMNone, 0, false, "empty tag-spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DKIM("sel", tt.records)
			if got.Status != tt.want || got.Selector != "sel" {
				t.Fatalf("DKIM = %v (selector %q, err %v), want %v", got.Status, got.Selector, got.Err, tt.want)
			}
			if (got.Key != nil) != (tt.want == DKIMFound) {
				t.Fatalf("Key = %+v with status %v", got.Key, got.Status)
			}
			if got.Key != nil && (got.Key.Bits != tt.bits || got.Key.Testing() != tt.testing) {
				t.Errorf("Key = %+v (testing %v), want %d bits, testing %v", got.Key, got.Key.Testing(), tt.bits, tt.testing)
			}
			switch {
			case tt.wantErr == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
}

func TestParseDKIMKeyRevoked(t *testing.T) {
	if _, err := ParseDKIMKey("v=DKIM1; p="); !errors.Is(err, ErrDKIMRevoked) {
		t.Errorf("err = %v, want ErrDKIMRevoked", err)
	}
}

func TestCombineDKIM(t *testing.T) {
	found := DKIMResult{Selector: "s2", Status: DKIMFound, Key: &DKIMKey{KeyType: "rsa", Bits: 2048}}
	revoked := DKIMResult{Selector: "s1", Status: DKIMRevoked}
	malformed := DKIMResult{Selector: "s3", Err: errors.New("bad")}
	none := DKIMResult{Selector: "s4"}
	tests := []struct {
		in   []DKIMResult
		want DKIMResult
	}{
		{nil, DKIMResult{}},
		{[]DKIMResult{none, none}, DKIMResult{}},
		{[]DKIMResult{none, malformed}, malformed},
		{[]DKIMResult{revoked, malformed, none}, revoked},
		{[]DKIMResult{revoked, found, malformed}, found},
	}
	for i, tt := range tests {
		got := CombineDKIM(tt.in)
		if got.Selector != tt.want.Selector || got.Status != tt.want.Status || got.Err != tt.want.Err {
			t.Errorf("case %d: CombineDKIM = %+v, want %+v", i, got, tt.want)
		}
	}
}

func TestDefaultDKIMSelectors(t *testing.T) {
	s := DefaultDKIMSelectors()
	if len(s) < 12 || !slices.Contains(s, "google") || !slices.Contains(s, "selector1") {
		t.Fatalf("DefaultDKIMSelectors() = %q", s)
	}
	s[0] = "changed"
	if DefaultDKIMSelectors()[0] == "changed" {
		t.Error("DefaultDKIMSelectors returns the package's own slice")
	}
	if got := DKIMName("google", "Example.COM."); got != "google._domainkey.example.com" {
		t.Errorf("DKIMName = %q", got)
	}
}

func TestDKIMStatusString(t *testing.T) {
	for s, want := range map[DKIMStatus]string{DKIMNone: "none", DKIMFound: "found", DKIMRevoked: "revoked"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

func FuzzDKIM(f *testing.F) {
	k := testKeys()
	for _, s := range []string{
		"v=DKIM1; k=rsa; p=" + k.rsa2048,
		"v=DKIM1; k=ed25519; p=" + k.ed,
		"v=DKIM1; p=",
		"h=sha1:sha256; s=email:*; t=y:s; p=" + k.rsa1024,
		"k=rsa; v=DKIM1; p=MIGf",
		"p=" + k.rsa512,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, txt string) {
		res := DKIM("s", []string{txt})
		switch res.Status {
		case DKIMFound:
			if res.Key == nil || res.Err != nil || res.Key.Bits < 256 ||
				(res.Key.KeyType != "rsa" && res.Key.KeyType != "ed25519") ||
				(res.Key.KeyType == "rsa" && res.Key.Bits < minRSABits) {
				t.Fatalf("DKIM(%q) found with %+v, %v", txt, res.Key, res.Err)
			}
		case DKIMRevoked, DKIMNone:
			if res.Key != nil {
				t.Fatalf("DKIM(%q) = %v with a key", txt, res.Status)
			}
		default:
			t.Fatalf("DKIM(%q): status %d out of range", txt, res.Status)
		}
	})
}
