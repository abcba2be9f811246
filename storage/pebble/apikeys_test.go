package pebble

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

func TestAPIKeys(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	other := db.account(t, 0)
	key, rec, err := db.MintKey(t.Context(), acct, []string{storage.ScopeValidateWrite, storage.ScopeValidateRead, storage.ScopeValidateRead}, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^svc_live_[a-z0-9]{12}_[A-Za-z0-9]{43}$`).MatchString(key) {
		t.Fatalf("key %q", key)
	}
	prefix, _, ok := storage.ParseKey(key)
	if !ok || prefix != rec.Prefix || rec.Account != acct || rec.Label != "prod" {
		t.Fatalf("record %+v for %q", rec, key)
	}
	if len(rec.Scopes) != 2 || !rec.HasScope(storage.ScopeValidateRead) || !rec.HasScope(storage.ScopeValidateWrite) {
		t.Errorf("scopes %v", rec.Scopes)
	}
	readOnly, _, err := db.MintKey(t.Context(), acct, []string{storage.ScopeValidateRead}, "")
	if err != nil {
		t.Fatal(err)
	}

	got, err := db.VerifyKey(t.Context(), key)
	if err != nil || got.Account != acct {
		t.Fatalf("VerifyKey: %+v, %v", got, err)
	}
	got, err = db.VerifyKey(t.Context(), readOnly)
	if err != nil || got.HasScope(storage.ScopeValidateWrite) {
		t.Fatalf("VerifyKey(read-only): %+v, %v", got, err)
	}
	// A changed secret, another key's secret with this prefix, or a
	// malformed string are all just invalid.
	flipped := key[:len(key)-1] + "a"
	if key[len(key)-1] == 'a' {
		flipped = key[:len(key)-1] + "b"
	}
	_, secret2, _ := storage.ParseKey(readOnly)
	for _, bad := range []string{
		flipped,
		"svc_live_" + prefix + "_" + secret2,
		"svc_live_" + strings.Repeat("a", 12) + "_" + secret2,
		"", "svc_live_", key + "x", key[:len(key)-1], strings.Replace(key, "svc_live_", "svc_test_", 1),
		"svc_live_" + strings.ToUpper(prefix) + key[len("svc_live_")+12:],
		strings.Replace(key, "_", "-", 3),
	} {
		if _, err := db.VerifyKey(t.Context(), bad); err != storage.ErrKeyInvalid {
			t.Errorf("VerifyKey(%q) = %v", bad, err)
		}
	}

	if _, _, err := db.MintKey(t.Context(), acct, nil, ""); err == nil {
		t.Error("a key without scopes")
	}
	if _, _, err := db.MintKey(t.Context(), acct, []string{"admin"}, ""); err == nil {
		t.Error("an unknown scope")
	}
	_, _, err = db.MintKey(t.Context(), "acct_nope", []string{storage.ScopeValidateRead}, "")
	wantErr(t, err, storage.ErrNotFound)
	if _, _, err := db.MintKey(t.Context(), other, []string{storage.ScopeValidateRead}, ""); err != nil {
		t.Fatal(err)
	}

	if _, err := db.RevokeKey(t.Context(), prefix); err != nil {
		t.Fatal(err)
	}
	_, err = db.VerifyKey(t.Context(), key)
	wantErr(t, err, storage.ErrKeyRevoked)
	// Revocation needs the secret to show: a wrong secret is invalid.
	_, err = db.VerifyKey(t.Context(), flipped)
	wantErr(t, err, storage.ErrKeyInvalid)
	_, err = db.RevokeKey(t.Context(), "nope")
	wantErr(t, err, storage.ErrNotFound)

	db.reopen(t)
	_, err = db.VerifyKey(t.Context(), key)
	wantErr(t, err, storage.ErrKeyRevoked)
	if _, err := db.VerifyKey(t.Context(), readOnly); err != nil {
		t.Errorf("after reopen: %v", err)
	}
	lk, err := db.LookupKey(t.Context(), prefix)
	if err != nil || !lk.Revoked || lk.RevokedAt.IsZero() {
		t.Errorf("LookupKey: %+v, %v", lk, err)
	}
	keys, err := db.ListKeys(t.Context(), acct)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListKeys: %d keys, %v", len(keys), err)
	}
	// Callers cannot change the stored record through what they get.
	keys[0].Scopes[0] = "x"
	keys[0].Hash[0] ^= 0xff
	again, err := db.ListKeys(t.Context(), acct)
	if err != nil || again[0].Scopes[0] == "x" {
		t.Errorf("ListKeys shares the record's slices (%v)", err)
	}
	if _, err := db.VerifyKey(t.Context(), readOnly); err != nil {
		t.Error(err)
	}
}

// TestKeyLastUsed: VerifyKey notes the key's last use; the record keeps it
// across a restart, written at most once a minute while the process runs.
func TestKeyLastUsed(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	key, rec, err := db.MintKey(t.Context(), acct, []string{storage.ScopeValidateRead}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.LastUsed.IsZero() {
		t.Fatalf("a new key was used at %v", rec.LastUsed)
	}
	t0 := db.clock.Now().Truncate(time.Millisecond)
	if _, err := db.VerifyKey(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	lk, err := db.LookupKey(t.Context(), rec.Prefix)
	if err != nil || !lk.LastUsed.Equal(t0) {
		t.Fatalf("LastUsed %v (%v), want %v", lk.LastUsed, err, t0)
	}
	// The first use is written (in the background): wait for it.
	for i := 0; ; i++ {
		v, err := db.get(apiKeyKey(rec.Prefix))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(v), `"last_used"`) {
			break
		}
		if i > 5000 {
			t.Fatal("the first use was never written")
		}
		time.Sleep(time.Millisecond)
	}
	// Within the minute a use is only noted in memory...
	db.clock.Advance(30 * time.Second)
	if _, err := db.VerifyKey(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	keys, err := db.ListKeys(t.Context(), acct)
	if err != nil || !keys[0].LastUsed.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("ListKeys LastUsed %v, %v", keys, err)
	}
	db.mu.RLock()
	stored := db.keys[rec.Prefix].LastUsed
	db.mu.RUnlock()
	if !stored.Equal(t0) {
		t.Errorf("written within the minute: %v", stored)
	}
	// ...and a clean close writes it.
	db.reopen(t)
	lk, err = db.LookupKey(t.Context(), rec.Prefix)
	if err != nil || !lk.LastUsed.Equal(t0.Add(30*time.Second)) {
		t.Errorf("after reopen LastUsed %v, %v", lk.LastUsed, err)
	}
	// A revoked key's failed attempts are not uses.
	db.clock.Advance(time.Hour)
	if _, err := db.RevokeKey(t.Context(), rec.Prefix); err != nil {
		t.Fatal(err)
	}
	if _, err := db.VerifyKey(t.Context(), key); !errors.Is(err, storage.ErrKeyRevoked) {
		t.Fatalf("VerifyKey of a revoked key: %v", err)
	}
	lk, err = db.LookupKey(t.Context(), rec.Prefix)
	if err != nil || !lk.LastUsed.Equal(t0.Add(30*time.Second)) {
		t.Errorf("a revoked key's attempt counted: %v, %v", lk.LastUsed, err)
	}
}

// TestListKeysMintOrder: keys minted within one millisecond (the test clock
// does not move) list in the order they were minted.
func TestListKeysMintOrder(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	var want []string
	for range 20 {
		_, rec, err := db.MintKey(t.Context(), acct, []string{storage.ScopeValidateRead}, "")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec.Prefix)
	}
	ks, err := db.ListKeys(t.Context(), acct)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range ks {
		if k.Prefix != want[i] {
			t.Fatalf("key %d is %s, minted %s", i, k.Prefix, want[i])
		}
	}
}
