package storagetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

func testAccounts(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	a, err := s.CreateAccount(t.Context(), "  Acme Corp  ", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "acct_") || len(a.ID) != 25 || a.Name != "Acme Corp" || a.Plan != storage.PlanGrowth ||
		!strings.HasPrefix(a.WebhookSecret, "whsec_") || !a.CreatedAt.Equal(c.Now()) || a.CreatedAt.Location() != time.UTC {
		t.Fatalf("created %+v", a)
	}
	got, err := s.GetAccount(t.Context(), a.ID)
	if err != nil || got != a {
		t.Fatalf("GetAccount: %+v, %v; want %+v", got, err, a)
	}
	if _, err := s.GetAccount(t.Context(), "acct_nosuchaccountxxxxxx"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	for _, bad := range []struct {
		name string
		plan storage.Plan
	}{{"x", "platinum"}, {strings.Repeat("n", 201), storage.PlanFree}} {
		if _, err := s.CreateAccount(t.Context(), bad.name, bad.plan); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("CreateAccount(%.10q, %q): %v, want ErrInvalid", bad.name, bad.plan, err)
		}
	}

	c.Advance(time.Minute)
	beta, err := s.CreateAccount(t.Context(), "Beta", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListAccounts(t.Context())
	if err != nil || len(list) != 2 || !slices.IsSortedFunc(list, func(x, y storage.Account) int { return strings.Compare(x.ID, y.ID) }) {
		t.Fatalf("ListAccounts: %+v, %v", list, err)
	}

	up, err := s.SetPlan(t.Context(), beta.ID, storage.PlanScale)
	if err != nil || up.Plan != storage.PlanScale || up.WebhookSecret != beta.WebhookSecret {
		t.Fatalf("SetPlan: %+v, %v", up, err)
	}
	if _, err := s.SetPlan(t.Context(), beta.ID, "gold"); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("SetPlan to an unknown plan: %v", err)
	}
	if _, err := s.SetPlan(t.Context(), "acct_nosuchaccountxxxxxx", storage.PlanFree); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("SetPlan of an unknown account: %v", err)
	}
	rot, err := s.RotateWebhookSecret(t.Context(), beta.ID)
	if err != nil || rot.WebhookSecret == beta.WebhookSecret || !strings.HasPrefix(rot.WebhookSecret, "whsec_") ||
		rot.SecretRotatedAt.IsZero() || rot.Plan != storage.PlanScale {
		t.Fatalf("RotateWebhookSecret: %+v, %v", rot, err)
	}
	if !rot.SecretRotatedAt.Equal(c.Now()) {
		t.Errorf("rotated at %v, want the clock's %v", rot.SecretRotatedAt, c.Now())
	}
	if got, err := s.GetAccount(t.Context(), beta.ID); err != nil || got != rot {
		t.Fatalf("after rotation GetAccount %+v, %v; want %+v", got, err, rot)
	}
}

func testKeys(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	a, err := s.CreateAccount(t.Context(), "Keys", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	full, k, err := s.MintKey(t.Context(), a.ID, []string{storage.ScopeValidateWrite, storage.ScopeValidateRead, storage.ScopeValidateWrite}, "ci")
	if err != nil {
		t.Fatal(err)
	}
	prefix, _, ok := storage.ParseKey(full)
	if !ok || prefix != k.Prefix || k.Account != a.ID || k.Label != "ci" || k.Revoked ||
		!slices.Equal(k.Scopes, []string{storage.ScopeValidateRead, storage.ScopeValidateWrite}) || len(k.Hash) != 32 {
		t.Fatalf("minted %q %+v", full, k)
	}
	v, err := s.VerifyKey(t.Context(), full)
	if err != nil || v.Prefix != k.Prefix || v.Account != a.ID {
		t.Fatalf("VerifyKey: %+v, %v", v, err)
	}
	// A wrong secret of a real prefix, an unknown prefix, a malformed key.
	wrong := full[:len(full)-1] + "A"
	if full[len(full)-1] == 'A' {
		wrong = full[:len(full)-1] + "B"
	}
	for _, bad := range []string{wrong, "svc_live_" + strings.Repeat("z", storage.KeyPrefixLen) + full[len("svc_live_")+storage.KeyPrefixLen:], "svc_live_short", ""} {
		if _, err := s.VerifyKey(t.Context(), bad); !errors.Is(err, storage.ErrKeyInvalid) {
			t.Errorf("VerifyKey(%.20q…): %v, want ErrKeyInvalid", bad, err)
		}
	}
	if _, _, err := s.MintKey(t.Context(), "acct_nosuchaccountxxxxxx", []string{storage.ScopeValidateRead}, ""); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("MintKey for an unknown account: %v", err)
	}
	for _, scopes := range [][]string{nil, {"admin"}} {
		if _, _, err := s.MintKey(t.Context(), a.ID, scopes, ""); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("MintKey with scopes %q: %v", scopes, err)
		}
	}
	if _, _, err := s.MintKey(t.Context(), a.ID, []string{storage.ScopeValidateRead}, strings.Repeat("l", 201)); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("MintKey with a long label: %v", err)
	}

	// Minted in a row, listed oldest first in that order.
	prefixes := []string{k.Prefix}
	for range 4 {
		_, k2, err := s.MintKey(t.Context(), a.ID, []string{storage.ScopeValidateRead}, "")
		if err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, k2.Prefix)
	}
	list, err := s.ListKeys(t.Context(), a.ID)
	if err != nil || len(list) != len(prefixes) {
		t.Fatalf("ListKeys: %d keys, %v", len(list), err)
	}
	for i, lk := range list {
		if lk.Prefix != prefixes[i] {
			t.Fatalf("ListKeys order %v, want the minting order %v", list, prefixes)
		}
	}

	r, err := s.RevokeKey(t.Context(), k.Prefix)
	if err != nil || !r.Revoked || r.RevokedAt.IsZero() {
		t.Fatalf("RevokeKey: %+v, %v", r, err)
	}
	if _, err := s.VerifyKey(t.Context(), full); !errors.Is(err, storage.ErrKeyRevoked) {
		t.Fatalf("revoked key: %v, want ErrKeyRevoked", err)
	}
	again, err := s.RevokeKey(t.Context(), k.Prefix)
	if err != nil || !again.RevokedAt.Equal(r.RevokedAt) {
		t.Fatalf("second revocation: %+v, %v; want the first time kept", again, err)
	}
	lk, err := s.LookupKey(t.Context(), k.Prefix)
	if err != nil || !lk.Revoked {
		t.Fatalf("LookupKey: %+v, %v", lk, err)
	}
	if _, err := s.LookupKey(t.Context(), "nosuchprefix"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("LookupKey of an unknown prefix: %v", err)
	}
	if _, err := s.RevokeKey(t.Context(), "nosuchprefix"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("RevokeKey of an unknown prefix: %v", err)
	}
}
