package pebble

import (
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

const testHash = "$argon2id$v=19$m=8192,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"

// TestOpenRegistrationGrant: the starting credits of an account made by
// open registration reach the ledger once, even when a crash comes
// between the two writes.
func TestOpenRegistrationGrant(t *testing.T) {
	db := openTest(t)
	u, a, err := db.RegisterWithAccount(t.Context(), "ann@example.test", testHash, "Ann's shop", storage.PlanFree, 100)
	if err != nil || a.Grant != 0 {
		t.Fatalf("register: %+v %v", a, err)
	}
	if r, _ := u.Role(a.ID); r != storage.RoleOwner {
		t.Fatalf("role %q", r)
	}
	if cr, err := db.Credits(t.Context(), a.ID); err != nil || cr.Balance != 100 {
		t.Fatalf("balance %d, %v", cr.Balance, err)
	}
	checkLedger(t, db.DB, a.ID)

	// The crash: the first write done, the second not.
	a2 := storage.Account{ID: "acct_crashedbeforegrant", Name: "x", Plan: storage.PlanFree, CreatedAt: db.clock.Now(), Grant: 25}
	if err := db.putAccount(a2); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	db.reopen(t)
	if cr, err := db.Credits(t.Context(), a2.ID); err != nil || cr.Balance != 25 {
		t.Fatalf("balance after the grant was finished at Open: %d, %v", cr.Balance, err)
	}
	if got, err := db.GetAccount(t.Context(), a2.ID); err != nil || got.Grant != 0 {
		t.Fatalf("grant still pending: %+v, %v", got, err)
	}
	if cr, err := db.Credits(t.Context(), a.ID); err != nil || cr.Balance != 100 {
		t.Fatalf("first account after reopen: %d, %v", cr.Balance, err)
	}
	checkLedger(t, db.DB, a2.ID)
}

// No password hash, session or invitation token secret in clear on disk.
func TestNoUserSecretOnDisk(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	u, err := db.CreateUser(t.Context(), "ann@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	stok, _, err := db.CreateSession(t.Context(), u.ID, acct, "", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	itok, _, err := db.CreateInvite(t.Context(), acct, storage.RoleMember, "", u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{stok[strings.IndexByte(stok, '.')+1:], itok[strings.LastIndexByte(itok, '_')+1:]}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	noFileHolds(t, db.dir, secrets...)
}
