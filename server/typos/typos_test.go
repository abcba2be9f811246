package typos

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// TestAccountDomains: an account's domains are those its history found
// valid, the most often valid first; invalid and unknown rows and
// internationalised domains give none; they are read once per TTL, and a
// domain validated later shows after the TTL; another account's rows are
// not its own.
func TestAccountDomains(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), pebble.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	account := func(name string) string {
		a, err := db.CreateAccount(ctx, name, storage.PlanEnterprise)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddCredits(ctx, a.ID, 100, "test"); err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	a, b := account("a"), account("b")
	charge := func(acct, email, status string) {
		t.Helper()
		if _, err := db.ChargeDirect(ctx, acct, 1, storage.ChargeRequest{Result: storage.Result{Email: email, Status: status, LatencyMs: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	charge(a, "ann@northwind.test", "valid")
	charge(a, "bob@Northwind.test", "valid")
	charge(a, "ann@contoso.test", "valid")
	charge(a, "ann@fabrikam.test", "invalid")
	charge(a, "ann@tailspin.test", "unknown")
	charge(a, "ann@bücher.test", "valid")
	charge(b, "ann@woodgrove.test", "valid")

	now := time.Unix(1_800_000_000, 0)
	acc := New(db, Options{TTL: time.Minute, Now: func() time.Time { return now }})
	reads := historyReads.Get()
	if got, want := acc.Targets(a)(ctx), []string{"northwind.test", "contoso.test"}; !slices.Equal(got, want) {
		t.Fatalf("account a: %q, want %q", got, want)
	}
	if got, want := acc.Domains(ctx, b), []string{"woodgrove.test"}; !slices.Equal(got, want) {
		t.Fatalf("account b: %q, want %q", got, want)
	}
	charge(a, "ann@adventure.test", "valid")
	acc.Domains(ctx, a)
	if n := historyReads.Get() - reads; n != 2 {
		t.Errorf("%d history reads within the TTL, want 2 (one per account)", n)
	}
	now = now.Add(time.Minute)
	if got := acc.Domains(ctx, a); !slices.Contains(got, "adventure.test") {
		t.Errorf("after the TTL: %q, want adventure.test among them", got)
	}
	if (*Accounts)(nil).Targets(a) != nil {
		t.Error("a nil Accounts gave targets")
	}
}

// TestAccountsBounded: past MaxAccounts the expired accounts are
// dropped, then all; MaxDomains keeps the most often valid.
func TestAccountsBounded(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), pebble.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Unix(1_800_000_000, 0)
	acc := New(db, Options{MaxAccounts: 3, Now: func() time.Time { return now }})
	for _, id := range []string{"a", "b", "c"} {
		acc.Domains(context.Background(), id)
	}
	now = now.Add(2 * DefaultTTL)
	acc.Domains(context.Background(), "d")
	if n := len(acc.m); n != 1 {
		t.Errorf("%d accounts kept, want 1 (the three expired ones dropped)", n)
	}
	rows := []storage.HistoryRow{
		{Email: "a@one.test", Status: "valid"}, {Email: "b@two.test", Status: "valid"},
		{Email: "c@two.test", Status: "valid"}, {Email: "d@three.test", Status: "valid"},
	}
	if got, want := validDomains(rows, 1), []string{"two.test"}; !slices.Equal(got, want) {
		t.Errorf("validDomains(max 1) = %q, want %q", got, want)
	}
}

// TestAccountReadRetry: a failed read (the store closed) is not made
// again by every caller: the next comes readRetry later.
func TestAccountReadRetry(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), pebble.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.CreateAccount(t.Context(), "a", storage.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	now := time.Unix(1_800_000_000, 0)
	acc := New(db, Options{Now: func() time.Time { return now }})
	errs := historyErrors.Get()
	for range 3 {
		if got := acc.Domains(context.Background(), a.ID); len(got) != 0 {
			t.Fatalf("domains %q from a closed store", got)
		}
	}
	if n := historyErrors.Get() - errs; n != 1 {
		t.Errorf("%d failed reads by three callers within %v, want 1", n, readRetry)
	}
	now = now.Add(readRetry)
	acc.Domains(context.Background(), a.ID)
	if n := historyErrors.Get() - errs; n != 2 {
		t.Errorf("%d failed reads after %v, want 2 (read again)", n, readRetry)
	}
}
