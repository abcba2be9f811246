package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestKeySet(t testing.TB) (*KeySet, *memStore) {
	t.Helper()
	store := &memStore{}
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	ks, err := OpenKeySet(store, Options{Rand: &countingReader{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return ks, store
}

func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestSignVerifyRoundTrip(t *testing.T) {
	ks, _ := newTestKeySet(t)
	signed, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	m := decodeObject(t, signed)
	if m["kid"] != "v1" {
		t.Errorf("kid = %v, want v1", m["kid"])
	}
	sig, _ := m["sig"].(string)
	if len(sig) != 86 || strings.ContainsAny(sig, "+/=") {
		t.Errorf("sig %q is not unpadded base64url of 64 bytes", sig)
	}
	// The body is the canonical form with sig appended last.
	i := bytes.LastIndex(signed, []byte(`,"sig":`))
	body := append(append([]byte(nil), signed[:i]...), '}')
	canon, err := Canonicalize(body)
	if err != nil || !bytes.Equal(canon, body) {
		t.Errorf("body without sig is not canonical:\n%s\n%s", body, canon)
	}
	if !strings.HasSuffix(string(signed), `"sig":"`+sig+`"}`) {
		t.Errorf("sig is not the last member: %s", signed)
	}
	// The signature is plain Ed25519 over the canonical form.
	pub, _ := ks.PublicKeys().Key("v1")
	raw, _ := b64.DecodeString(sig)
	if !ed25519.Verify(pub, canon, raw) {
		t.Error("sig is not an Ed25519 signature over the canonical form")
	}
	for name, verify := range map[string]func([]byte) (string, error){
		"Verify":        func(r []byte) (string, error) { return Verify(r, ks.JWKS()) },
		"legacy JWKS":   func(r []byte) (string, error) { return Verify(r, ks.JWKSLegacy()) },
		"KeySet.Verify": ks.Verify,
	} {
		if kid, err := verify(signed); err != nil || kid != "v1" {
			t.Errorf("%s = %q, %v", name, kid, err)
		}
	}
	// Whitespace and member order do not matter to a verifier.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, signed, "", "  "); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(pretty.Bytes(), ks.JWKS()); err != nil {
		t.Errorf("indented receipt: %v", err)
	}
	reordered, _ := json.Marshal(m) // Go sorts map keys: sig moves to the middle
	if _, err := Verify(reordered, ks.JWKS()); err != nil {
		t.Errorf("re-encoded receipt: %v", err)
	}
}

func TestSignSetsKidAndDropsSig(t *testing.T) {
	ks, _ := newTestKeySet(t)
	for _, in := range []string{
		`{"email":"a@b.c","score":1}`,
		`{"email":"a@b.c","score":1,"kid":"v99"}`,
		`{"email":"a@b.c","score":1,"kid":"","sig":"old"}`,
		`{"sig":null,"email":"a@b.c","kid":7,"score":1}`,
	} {
		signed, err := ks.Sign([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		want := `{"email":"a@b.c","kid":"v1","score":1,"sig":"`
		if !strings.HasPrefix(string(signed), want) {
			t.Errorf("Sign(%s) = %s", in, signed)
		}
		if _, err := ks.Verify(signed); err != nil {
			t.Errorf("Sign(%s): %v", in, err)
		}
	}
	// An empty object still gets kid and sig.
	signed, err := ks.Sign([]byte(`{}`))
	if err != nil || !strings.HasPrefix(string(signed), `{"kid":"v1","sig":"`) {
		t.Errorf("Sign({}) = %s, %v", signed, err)
	}
}

func TestSignRejects(t *testing.T) {
	ks, _ := newTestKeySet(t)
	for _, in := range []string{
		``, `[]`, `"x"`, `1`, `null`,
		`{"a":1,"a":2}`,
		`{"kid":"a","kid":"b"}`,
		`{"sig":"a","sig":"b"}`,
		"{\"email\":\"\xff\"}",
		`{"a":1} x`,
	} {
		if out, err := ks.Sign([]byte(in)); err == nil {
			t.Errorf("Sign(%q) = %s, want an error", in, out)
		}
	}
	if _, err := ks.SignStruct(make(chan int)); err == nil {
		t.Error("SignStruct(chan) succeeded")
	}
	if _, err := ks.SignStruct([]int{1}); err == nil {
		t.Error("SignStruct(slice) succeeded")
	}
}

func TestSignMapAndNonASCII(t *testing.T) {
	ks, _ := newTestKeySet(t)
	signed, err := ks.SignStruct(map[string]any{
		"email":  "用户@例子.广告",
		"status": "valid",
		"score":  80,
		"checks": map[string]any{"\ufb33": 1, "\U0001F600": 2, "<&>": "\u2028"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(signed, []byte(`"用户@例子.广告"`)) || !bytes.Contains(signed, []byte(`"<&>":"`+"\u2028"+`"`)) {
		t.Errorf("non-ASCII is not written as UTF-8: %s", signed)
	}
	if !bytes.Contains(signed, []byte("\"\U0001F600\":2,\"\ufb33\":1")) {
		t.Errorf("names are not in UTF-16 order: %s", signed)
	}
	if _, err := ks.Verify(signed); err != nil {
		t.Error(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	ks, _ := newTestKeySet(t)
	signed, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewKeySet(&memStore{}) // random keys
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Rotate(); err != nil { // v2 of another set: a kid "v2" we do not have
		t.Fatal(err)
	}
	s := string(signed)
	sig := decodeObject(t, signed)["sig"].(string)
	flipped := []byte(sig)
	flipped[10] ^= 'A' ^ 'B'
	if flipped[10] == sig[10] {
		flipped[10] = 'C'
	}
	replace := func(old, new string) []byte {
		if !strings.Contains(s, old) {
			t.Fatalf("receipt has no %s", old)
		}
		return []byte(strings.Replace(s, old, new, 1))
	}
	for _, tc := range []struct {
		name    string
		receipt []byte
		jwks    []byte
		want    error
	}{
		{"score changed", replace(`"score":97`, `"score":98`), nil, ErrBadSignature},
		{"status changed", replace(`"status":"valid"`, `"status":"risky"`), nil, ErrBadSignature},
		{"nested flag changed", replace(`"dane":false`, `"dane":true`), nil, ErrBadSignature},
		{"member added", replace(`"score":97`, `"score":97,"x":1`), nil, ErrBadSignature},
		{"member removed", replace(`"cached":false,`, ``), nil, ErrBadSignature},
		{"email case", replace(`jane.doe`, `Jane.doe`), nil, ErrBadSignature},
		{"sig changed", replace(sig, string(flipped)), nil, ErrBadSignature},
		{"other set's key", signed, other.JWKS(), ErrBadSignature},
		{"kid changed", replace(`"kid":"v1"`, `"kid":"v2"`), nil, ErrUnknownKid},
		{"kid changed to a known key", replace(`"kid":"v1"`, `"kid":"v2"`), other.JWKS(), ErrBadSignature},
		{"no sig", replace(`,"sig":"`+sig+`"`, ``), nil, ErrMalformed},
		{"no kid", replace(`"kid":"v1",`, ``), nil, ErrMalformed},
		{"kid not a string", replace(`"kid":"v1"`, `"kid":1`), nil, ErrMalformed},
		{"sig not a string", replace(`"sig":"`+sig+`"`, `"sig":null`), nil, ErrMalformed},
		{"sig padded", replace(sig, sig+"=="), nil, ErrMalformed},
		{"sig in std base64", replace(sig, strings.NewReplacer("-", "+", "_", "/").Replace(sig)+"/"), nil, ErrMalformed},
		{"sig short", replace(sig, sig[:80]), nil, ErrMalformed},
		{"sig with newline", replace(sig, sig[:40]+`\n`+sig[40:]), nil, ErrMalformed},
		{"two sigs", replace(`"score":97`, `"score":97,"sig":"x"`), nil, ErrMalformed},
		{"two kids", replace(`"score":97`, `"score":97,"kid":"v1"`), nil, ErrMalformed},
		{"array", []byte(`[` + s + `]`), nil, ErrMalformed},
		{"truncated", signed[:len(signed)-2], nil, ErrMalformed},
		{"empty", nil, nil, ErrMalformed},
	} {
		jwks := tc.jwks
		if jwks == nil {
			jwks = ks.JWKS()
		}
		_, err := Verify(tc.receipt, jwks)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Verify(signed, ks.JWKS()); err != nil {
		t.Errorf("the untouched receipt: %v", err)
	}
}

func TestRotation(t *testing.T) {
	ks, store := newTestKeySet(t)
	old, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	oldJWKS := ks.JWKS()
	kid, err := ks.Rotate()
	if err != nil || kid != "v2" || ks.ActiveKid() != "v2" {
		t.Fatalf("Rotate = %q, %v; active %q", kid, err, ks.ActiveKid())
	}
	fresh, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeObject(t, fresh)["kid"]; got != "v2" {
		t.Errorf("new receipt kid = %v, want v2", got)
	}
	for _, tc := range []struct {
		receipt []byte
		kid     string
	}{{old, "v1"}, {fresh, "v2"}} {
		if got, err := Verify(tc.receipt, ks.JWKS()); err != nil || got != tc.kid {
			t.Errorf("after rotation: Verify = %q, %v; want %s", got, err, tc.kid)
		}
	}
	// A client holding the JWKS from before the rotation does not know v2.
	if _, err := Verify(fresh, oldJWKS); !errors.Is(err, ErrUnknownKid) {
		t.Errorf("stale JWKS: %v", err)
	}
	if kid, err := ks.Rotate(); err != nil || kid != "v3" {
		t.Fatalf("second Rotate = %q, %v", kid, err)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(ks.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k["kid"])
	}
	if strings.Join(kids, ",") != "v3,v2,v1" {
		t.Errorf("JWKS kids = %v, want v3,v2,v1", kids)
	}
	if _, err := Verify(old, ks.JWKS()); err != nil {
		t.Errorf("v1 receipt after two rotations: %v", err)
	}
	// Only the active key's seed is kept.
	var f keyFile
	if err := json.Unmarshal(store.data, &f); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.Keys {
		if (k.Seed != "") != (k.Kid == "v3") || (k.Retired != nil) == (k.Kid == "v3") {
			t.Errorf("stored key %s: seed %t, retired %v", k.Kid, k.Seed != "", k.Retired)
		}
	}
	// Reopening gives the same set.
	ks2, err := NewKeySet(store)
	if err != nil {
		t.Fatal(err)
	}
	if ks2.ActiveKid() != "v3" || !bytes.Equal(ks2.JWKS(), ks.JWKS()) {
		t.Errorf("reopened: active %s, JWKS %s", ks2.ActiveKid(), ks2.JWKS())
	}
	if _, err := Verify(old, ks2.JWKS()); err != nil {
		t.Errorf("reopened: %v", err)
	}
}

func TestRotateFailsCleanly(t *testing.T) {
	ks, store := newTestKeySet(t)
	before := string(store.data)
	jwks := string(ks.JWKS())
	store.fail = true
	if _, err := ks.Rotate(); err == nil {
		t.Fatal("Rotate succeeded with a failing store")
	}
	if ks.ActiveKid() != "v1" || string(ks.JWKS()) != jwks || string(store.data) != before {
		t.Error("a failed rotation changed the key set")
	}
	store.fail = false
	if kid, err := ks.Rotate(); err != nil || kid != "v2" {
		t.Errorf("Rotate after the store recovered = %q, %v", kid, err)
	}
}

func TestNewKeySetFailsWhenFirstSaveFails(t *testing.T) {
	if _, err := NewKeySet(&memStore{fail: true}); err == nil {
		t.Error("NewKeySet succeeded without saving its new key")
	}
}

func TestJWKSFormat(t *testing.T) {
	ks, _ := newTestKeySet(t)
	pub, _ := ks.PublicKeys().Key("v1")
	x := b64.EncodeToString(pub)
	want := `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"v1","x":"` + x + `","alg":"Ed25519","use":"sig"}]}`
	if got := string(ks.JWKS()); got != want {
		t.Errorf("JWKS\n got %s\nwant %s", got, want)
	}
	legacy := strings.Replace(want, `"alg":"Ed25519"`, `"alg":"EdDSA"`, 1)
	if got := string(ks.JWKSLegacy()); got != legacy {
		t.Errorf("JWKSLegacy\n got %s\nwant %s", got, legacy)
	}
	if strings.Contains(string(ks.JWKS()), `"d"`) {
		t.Error("the JWKS holds a private key")
	}
}

func TestParseJWKS(t *testing.T) {
	ks, _ := newTestKeySet(t)
	pub, _ := ks.PublicKeys().Key("v1")
	x := b64.EncodeToString(pub)
	key := func(extra string) string {
		return `{"kty":"OKP","crv":"Ed25519","kid":"v1","x":"` + x + `"` + extra + `}`
	}
	for _, tc := range []struct {
		name, jwks string
		ok         bool
	}{
		{"no alg", `{"keys":[` + key("") + `]}`, true},
		{"EdDSA", `{"keys":[` + key(`,"alg":"EdDSA"`) + `]}`, true},
		{"other keys skipped", `{"keys":[{"kty":"RSA","kid":"r","n":"x","e":"AQAB"},{"kty":"OKP","crv":"X25519","kid":"x","x":"` + x + `"},` + key("") + `]}`, true},
		{"enc key skipped", `{"keys":[` + key(`,"use":"enc"`) + `]}`, false},
		{"other alg skipped", `{"keys":[` + key(`,"alg":"ES256"`) + `]}`, false},
		{"empty", `{"keys":[]}`, false},
		{"not JSON", `{"keys":`, false},
		{"private key", `{"keys":[` + key(`,"d":"`+x+`"`) + `]}`, false},
		{"duplicate kid", `{"keys":[` + key("") + `,` + key("") + `]}`, false},
		{"no kid", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}]}`, false},
		{"short x", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"v1","x":"` + x[:40] + `"}]}`, false},
		{"padded x", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"v1","x":"` + x + `="}]}`, false},
	} {
		_, err := ParseJWKS([]byte(tc.jwks))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, ErrBadKeySet) {
			t.Errorf("%s: %v does not match ErrBadKeySet", tc.name, err)
		}
	}
}

func TestBadKeyFiles(t *testing.T) {
	ks, store := newTestKeySet(t)
	if _, err := ks.Rotate(); err != nil {
		t.Fatal(err)
	}
	good := string(store.data)
	var f keyFile
	if err := json.Unmarshal(store.data, &f); err != nil {
		t.Fatal(err)
	}
	v1x, v2x, v2seed := f.Keys[0].X, f.Keys[1].X, f.Keys[1].Seed
	for _, tc := range []struct{ name, old, new string }{
		{"version", `"version": 1`, `"version": 2`},
		{"active missing", `"active": "v2"`, `"active": "v7"`},
		{"active without seed", `"active": "v2"`, `"active": "v1"`},
		{"bad kid", `"kid": "v1"`, `"kid": "key-1"`},
		{"leading zero kid", `"kid": "v1"`, `"kid": "v01"`},
		{"duplicate kid", `"kid": "v1"`, `"kid": "v2"`},
		{"bad x", v1x, v1x[:42] + "!"},
		{"seed of another key", v2x, v1x},
		{"short seed", v2seed, v2seed[:40]},
		{"unknown field", `"version": 1`, `"version": 1, "extra": true`},
		{"not JSON", `{`, `[`},
	} {
		if !strings.Contains(good, tc.old) {
			t.Fatalf("%s: key file has no %s:\n%s", tc.name, tc.old, good)
		}
		bad := &memStore{data: []byte(strings.Replace(good, tc.old, tc.new, 1))}
		if _, err := NewKeySet(bad); err == nil {
			t.Errorf("%s: NewKeySet accepted\n%s", tc.name, bad.data)
		} else if !strings.HasPrefix(err.Error(), "receipt: ") {
			t.Errorf("%s: error %q lacks the package prefix", tc.name, err)
		}
	}
}

func TestKidVersion(t *testing.T) {
	for kid, want := range map[string]int{"v1": 1, "v2": 2, "v10": 10, "v123456789": 123456789} {
		if got, ok := kidVersion(kid); !ok || got != want {
			t.Errorf("kidVersion(%q) = %d, %t", kid, got, ok)
		}
	}
	for _, kid := range []string{"", "v", "v0", "v01", "1", "V1", "v+1", "v-1", "v1a", "v1234567890", " v1"} {
		if _, ok := kidVersion(kid); ok {
			t.Errorf("kidVersion(%q) accepted", kid)
		}
	}
}

func TestFileStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys") // does not exist yet
	store := NewFileStore(dir)
	if b, err := store.LoadKeys(); b != nil || err != nil {
		t.Fatalf("LoadKeys on a missing file = %q, %v", b, err)
	}
	ks, err := NewKeySet(store)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(dir); dst.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v, want 0700", dst.Mode().Perm())
	}
	signed, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Rotate(); err != nil {
		t.Fatal(err)
	}
	// A file someone made readable is replaced by a 0600 one, not
	// rewritten in place.
	if err := os.Chmod(store.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Rotate(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(store.Path()); st.Mode().Perm() != 0o600 {
		t.Errorf("after rotation: key file mode %v, want 0600", st.Mode().Perm())
	}
	// No temporary files are left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != KeysFileName {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s", names, KeysFileName)
	}
	// A restart reads the same set back.
	ks2, err := NewKeySet(NewFileStore(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ks2.ActiveKid() != "v3" || !bytes.Equal(ks2.JWKS(), ks.JWKS()) {
		t.Errorf("reloaded: active %s", ks2.ActiveKid())
	}
	if kid, err := Verify(signed, ks2.JWKS()); err != nil || kid != "v1" {
		t.Errorf("v1 receipt after reload: %q, %v", kid, err)
	}
}

// A save that fails leaves the old file intact and no temporary file.
func TestFileStoreSaveFailureKeepsOldFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir := t.TempDir()
	store := NewFileStore(dir)
	if err := store.SaveKeys([]byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if err := store.SaveKeys([]byte("new")); err == nil {
		t.Fatal("SaveKeys into a read-only directory succeeded")
	}
	if b, _ := store.LoadKeys(); string(b) != "old" {
		t.Errorf("key file now %q", b)
	}
}

// The rename is what makes a save atomic: the file is replaced whole,
// never truncated and rewritten, so a reader holding the old file sees the
// old content to the end.
func TestFileStoreReplacesByRename(t *testing.T) {
	dir := t.TempDir()
	store := NewFileStore(dir)
	if err := store.SaveKeys([]byte("first version")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := store.SaveKeys([]byte("second")); err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 64)
	n, _ := f.Read(old)
	if string(old[:n]) != "first version" {
		t.Errorf("the open old file reads %q: it was rewritten in place", old[:n])
	}
	if b, _ := store.LoadKeys(); string(b) != "second" {
		t.Errorf("LoadKeys = %q", b)
	}
}

type errStore struct{ err error }

func (s errStore) LoadKeys() ([]byte, error) { return nil, s.err }
func (s errStore) SaveKeys([]byte) error     { return nil }

func TestNewKeySetStoreErrors(t *testing.T) {
	if _, err := NewKeySet(errStore{errors.New("io error")}); err == nil {
		t.Error("a load error was ignored")
	}
	// fs.ErrNotExist means no keys yet, for stores that say it that way.
	ks, err := NewKeySet(errStore{fs.ErrNotExist})
	if err != nil || ks.ActiveKid() != "v1" {
		t.Errorf("ErrNotExist: %v", err)
	}
}

// Sign from many goroutines while the keys rotate: every receipt verifies
// against the final JWKS with the kid it carries.
func TestConcurrentSignDuringRotate(t *testing.T) {
	ks, _ := newTestKeySet(t)
	const signers, perSigner, rotations = 8, 50, 20
	var wg sync.WaitGroup
	results := make(chan []byte, signers*perSigner)
	for range signers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := realisticReceipt()
			for range perSigner {
				b, err := ks.SignStruct(r)
				if err != nil {
					t.Error(err)
					return
				}
				results <- b
			}
		}()
	}
	for range rotations {
		if _, err := ks.Rotate(); err != nil {
			t.Fatal(err)
		}
		_ = ks.JWKS()
	}
	wg.Wait()
	close(results)
	if ks.ActiveKid() != "v21" {
		t.Errorf("active %s after %d rotations", ks.ActiveKid(), rotations)
	}
	jwks := ks.JWKS()
	for b := range results {
		if _, err := Verify(b, jwks); err != nil {
			t.Errorf("%v: %s", err, b)
		}
	}
}

// SignWith re-signs a signed receipt with members changed, giving the same
// bytes as signing the changed receipt anew.
func TestSignWith(t *testing.T) {
	ks, _ := newTestKeySet(t)
	first, err := ks.SignStruct(realisticReceipt())
	if err != nil {
		t.Fatal(err)
	}
	again, err := ks.SignWith(first,
		Field{"cached", []byte("true")},
		Field{"credits_remaining", AppendNumber(nil, 41)},
		Field{"note", AppendString(nil, "é \"x\"")}) // a member the receipt lacks
	if err != nil {
		t.Fatal(err)
	}
	r := realisticReceipt()
	r.Cached, r.CreditsRemaining = true, 41
	m := decodeObject(t, mustJSON(t, r))
	m["note"] = "é \"x\""
	want, err := ks.SignStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("SignWith:\n%s\nsigning the changed receipt:\n%s", again, want)
	}
	if _, err := ks.Verify(again); err != nil {
		t.Error(err)
	}

	for _, bad := range [][]Field{
		{{"kid", []byte(`"v9"`)}},
		{{"sig", []byte(`"x"`)}},
		{{"cached", []byte("true")}, {"cached", []byte("false")}},
	} {
		if out, err := ks.SignWith(first, bad...); err == nil {
			t.Errorf("SignWith(%v) = %s, want an error", bad, out)
		}
	}
	// A member to set that the receipt repeats is refused like any repeat.
	if out, err := ks.SignWith([]byte(`{"cached":false,"cached":false}`), Field{"cached", []byte("true")}); err == nil {
		t.Errorf("repeated member: %s", out)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resign, SignWith's fast path, gives the bytes the canonicalizer gives
// for every receipt it takes, and takes the receipts seal makes with the
// members to set present.
func TestResignMatchesCanonicalizer(t *testing.T) {
	ks, _ := newTestKeySet(t)
	st := ks.cur.Load()
	fields := []Field{{"cached", []byte("true")}, {"credits_remaining", AppendNumber(nil, 12345)}}
	inputs := [][]byte{realisticReceiptJSON()}
	r := realisticReceipt()
	r.Email = "quote\"back\\slash\u2028é😀@example.com"
	r.Checks.Reason = "a,b}c]d:e"
	inputs = append(inputs, mustJSON(t, r))
	inputs = append(inputs, []byte(`{"cached":false,"credits_remaining":1,"z":[1,{"a":"}"}],"a":{"b":[]}}`))
	for _, in := range inputs {
		signed, err := ks.Sign(in)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := st.resign(signed, fields)
		if !ok {
			t.Fatalf("resign refused %s", signed)
		}
		slow, err := st.signWith(signed, fields)
		if err != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("resign:\n%s\ncanonicalizer:\n%s %v", fast, slow, err)
		}
		if _, err := ks.Verify(fast); err != nil {
			t.Error(err)
		}
	}
	// What it leaves to the canonicalizer: not from seal, a member to set
	// missing, a name with an escape.
	for _, in := range []string{
		`{"cached":false,"credits_remaining":1,"kid":"v1"}`,
		`{"cached":false,"kid":"v1","sig":"` + strings.Repeat("A", sigLen) + `"}`,
		`{"cached":false,"credits_remaining":1,"kid":"v1","sig":"` + strings.Repeat("*", sigLen) + `"}`,
		`{"cach\u0065d":false,"credits_remaining":1,"kid":"v1","sig":"` + strings.Repeat("A", sigLen) + `"}`,
	} {
		if out, ok := st.resign([]byte(in), fields); ok {
			t.Errorf("resign took %s: %s", in, out)
		}
	}
}

// FuzzResign: for any object Sign accepts, re-signing what Sign made gives
// the same bytes by both paths.
func FuzzResign(f *testing.F) {
	f.Add(realisticReceiptJSON(), int64(7))
	f.Add([]byte(`{"cached":true,"credits_remaining":0,"x":"\u0000"}`), int64(-1))
	f.Add([]byte(`{"credits_remaining":[],"cached":{"a":[1,2,{}]}}`), int64(1e15))
	ks, _ := newTestKeySet(f)
	st := ks.cur.Load()
	f.Fuzz(func(t *testing.T, in []byte, credits int64) {
		signed, err := ks.Sign(in)
		if err != nil {
			return
		}
		fields := []Field{{"cached", []byte("true")}, {"credits_remaining", strconv.AppendInt(nil, credits, 10)}}
		fast, ok := st.resign(signed, fields)
		if !ok {
			return
		}
		slow, err := st.signWith(signed, fields)
		if err != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("resign:\n%s\ncanonicalizer:\n%s %v", fast, slow, err)
		}
	})
}
