package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const testHash = "$argon2id$v=19$m=8192,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"

func TestUsersAndInvites(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	op, err := db.CreateUser(" Op@Example.test ", testHash, true)
	if err != nil || op.Email != "Op@Example.test" || !op.Operator || !strings.HasPrefix(op.ID, "user_") {
		t.Fatalf("operator: %+v %v", op, err)
	}
	if _, err := db.CreateUser("op@example.TEST", testHash, false); !errors.Is(err, ErrEmailTaken) || !errors.Is(err, ErrExists) {
		t.Fatalf("same email in another case: %v", err)
	}
	for _, bad := range []string{"", "no-at-sign", strings.Repeat("a", 320) + "@x.test"} {
		if _, err := db.CreateUser(bad, testHash, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("email %q: %v", bad, err)
		}
	}

	// An invitation is redeemed once, by its email only, before it expires.
	token, iv, err := db.CreateInvite(acct, RoleOwner, "ann@example.test", op.ID, time.Hour)
	if err != nil || !strings.HasPrefix(token, "inv_") || iv.Account != acct {
		t.Fatalf("invite: %q %+v %v", token, iv, err)
	}
	if pend, _ := db.Invites(acct); len(pend) != 1 || pend[0].ID != iv.ID {
		t.Fatalf("pending %+v", pend)
	}
	if _, _, err := db.RegisterWithInvite("bob@example.test", testHash, token); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("another email: %v", err)
	}
	if _, err := db.UserByEmail("bob@example.test"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused registration left a user: %v", err)
	}
	tampered := token[:len(token)-1] + map[bool]string{true: "A", false: "B"}[token[len(token)-1] != 'A']
	if _, _, err := db.RegisterWithInvite("ann@example.test", testHash, tampered); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("tampered token: %v", err)
	}
	ann, used, err := db.RegisterWithInvite("ann@example.test", testHash, token)
	if err != nil || used.RedeemedBy != ann.ID {
		t.Fatalf("register: %+v %+v %v", ann, used, err)
	}
	if r, ok := ann.Role(acct); !ok || r != RoleOwner {
		t.Fatalf("ann's role %q %v", r, ok)
	}
	if _, _, err := db.RegisterWithInvite("ann2@example.test", testHash, token); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("second redemption: %v", err)
	}
	if pend, _ := db.Invites(acct); len(pend) != 0 {
		t.Fatalf("pending after redemption %+v", pend)
	}

	// Link an existing user as a member; an expired invitation fails.
	bob, err := db.CreateUser("bob@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	token2, _, _ := db.CreateInvite(acct, RoleMember, "", ann.ID, time.Hour)
	token3, _, _ := db.CreateInvite(acct, RoleMember, "", ann.ID, time.Minute)
	db.clock.Advance(2 * time.Minute)
	if _, _, err := db.RedeemInvite(token3, bob.ID); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("expired: %v", err)
	}
	bob, _, err = db.RedeemInvite(token2, bob.ID)
	if r, _ := bob.Role(acct); err != nil || r != RoleMember {
		t.Fatalf("link: %+v %v", bob, err)
	}
	if ms, _ := db.Members(acct); len(ms) != 2 || ms[0].ID != ann.ID || ms[1].ID != bob.ID {
		t.Fatalf("members %+v", ms)
	}

	// The last owner stays.
	if _, err := db.SetRole(acct, ann.ID, RoleMember); !errors.Is(err, ErrLastOwner) {
		t.Fatalf("demote the last owner: %v", err)
	}
	if _, err := db.SetRole(acct, ann.ID, ""); !errors.Is(err, ErrLastOwner) {
		t.Fatalf("remove the last owner: %v", err)
	}
	if _, err := db.SetRole(acct, bob.ID, RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetRole(acct, ann.ID, ""); err != nil {
		t.Fatal(err)
	}
	revokeMe, iv4, _ := db.CreateInvite(acct, RoleMember, "", bob.ID, time.Hour)
	if _, err := db.RevokeInvite(acct, iv4.ID); err != nil {
		t.Fatal(err)
	}

	// Everything survives a restart.
	db.reopen(t)
	ann2, err := db.UserByEmail("ANN@example.test")
	if err != nil || ann2.ID != ann.ID || len(ann2.Accounts) != 0 {
		t.Fatalf("after reopen: %+v %v", ann2, err)
	}
	bob2, _ := db.GetUser(bob.ID)
	if r, _ := bob2.Role(acct); r != RoleOwner {
		t.Fatalf("bob after reopen: %+v", bob2)
	}
	if _, _, err := db.RedeemInvite(token, bob.ID); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("a used invitation after reopen: %v", err)
	}
	if _, _, err := db.RedeemInvite(revokeMe, ann.ID); !errors.Is(err, ErrInviteInvalid) {
		t.Fatalf("a revoked invitation after reopen: %v", err)
	}
}

func TestSessions(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	u, err := db.CreateUser("ann@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	tok1, s1, err := db.CreateSession(u.ID, acct, "127.0.0.1", "test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok2, _, _ := db.CreateSession(u.ID, acct, "127.0.0.1", "test", time.Hour)
	if got, err := db.LookupSession(tok1); err != nil || got.ID != s1.ID || got.User != u.ID {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	for _, bad := range []string{"", "x", s1.ID, s1.ID + ".", tok1 + "x", strings.Replace(tok1, ".", ".A", 1)[:len(tok1)]} {
		if _, err := db.LookupSession(bad); !errors.Is(err, ErrSessionInvalid) {
			t.Errorf("token %q: %v", bad, err)
		}
	}

	// Touch writes at most once a minute.
	db.clock.Advance(30 * time.Second)
	db.TouchSession(s1.ID)
	if got, _ := db.LookupSession(tok1); !got.LastSeen.Equal(s1.LastSeen) {
		t.Errorf("touched after 30 s: %v", got.LastSeen)
	}
	db.clock.Advance(time.Minute)
	db.TouchSession(s1.ID)
	if got, _ := db.LookupSession(tok1); !got.LastSeen.Equal(db.clock.Now().Truncate(time.Millisecond)) {
		t.Errorf("touched after 90 s: %v", got.LastSeen)
	}

	// Sessions survive a restart; logout ends one; a new password all.
	db.reopen(t)
	if _, err := db.LookupSession(tok2); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if err := db.DeleteSession(s1.ID); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	if _, err := db.LookupSession(tok1); !errors.Is(err, ErrSessionInvalid) {
		t.Fatalf("after logout and reopen: %v", err)
	}
	tok3, _, _ := db.CreateSession(u.ID, "", "", "", time.Hour)
	if _, err := db.SetPassword(u.ID, testHash+"x"); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	for _, tok := range []string{tok2, tok3} {
		if _, err := db.LookupSession(tok); !errors.Is(err, ErrSessionInvalid) {
			t.Errorf("a session from before the password change: %v", err)
		}
	}
	if got, _ := db.GetUser(u.ID); got.PasswordHash != testHash+"x" || got.PasswordChangedAt.IsZero() {
		t.Errorf("user after the change %+v", got)
	}

	// Purge: expired and idle sessions go.
	tokA, _, _ := db.CreateSession(u.ID, "", "", "", time.Hour)
	tokB, _, _ := db.CreateSession(u.ID, "", "", "", 10*time.Hour)
	db.clock.Advance(2 * time.Hour)
	tokC, _, _ := db.CreateSession(u.ID, "", "", "", 10*time.Hour)
	if n, err := db.PurgeSessions(90 * time.Minute); err != nil || n != 2 {
		t.Fatalf("purged %d, %v; want 2", n, err)
	}
	db.reopen(t)
	for tok, want := range map[string]bool{tokA: false, tokB: false, tokC: true} {
		if _, err := db.LookupSession(tok); (err == nil) != want {
			t.Errorf("after the purge: %v, want found %v", err, want)
		}
	}
}

// TestOpenRegistrationGrant: the starting credits of an account made by
// open registration reach the ledger once, even when a crash comes
// between the two writes.
func TestOpenRegistrationGrant(t *testing.T) {
	db := openTest(t)
	u, a, err := db.RegisterWithAccount("ann@example.test", testHash, "Ann's shop", PlanFree, 100)
	if err != nil || a.Grant != 0 {
		t.Fatalf("register: %+v %v", a, err)
	}
	if r, _ := u.Role(a.ID); r != RoleOwner {
		t.Fatalf("role %q", r)
	}
	if n, _ := db.Balance(a.ID); n != 100 {
		t.Fatalf("balance %d", n)
	}
	checkLedger(t, db.DB, a.ID)

	// The crash: the first write done, the second not.
	a2 := Account{ID: "acct_crashedbeforegrant", Name: "x", Plan: PlanFree, CreatedAt: db.clock.Now(), Grant: 25}
	if err := db.putAccount(a2); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	db.reopen(t)
	if n, _ := db.Balance(a2.ID); n != 25 {
		t.Fatalf("balance after the grant was finished at Open: %d", n)
	}
	if got, _ := db.GetAccount(a2.ID); got.Grant != 0 {
		t.Fatalf("grant still pending: %+v", got)
	}
	if n, _ := db.Balance(a.ID); n != 100 {
		t.Fatalf("first account after reopen: %d", n)
	}
	checkLedger(t, db.DB, a2.ID)
}

// No password hash, session or invitation token secret in clear on disk.
func TestNoUserSecretOnDisk(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	u, _ := db.CreateUser("ann@example.test", testHash, false)
	stok, _, _ := db.CreateSession(u.ID, acct, "", "", time.Hour)
	itok, _, _ := db.CreateInvite(acct, RoleMember, "", u.ID, time.Hour)
	secrets := []string{stok[strings.IndexByte(stok, '.')+1:], itok[len(itok)-tokenSecret:]}
	db.Close()
	noFileHolds(t, db.dir, secrets...)
}

func TestSecret(t *testing.T) {
	db := openTest(t)
	a, err := db.Secret("csrf")
	if err != nil || len(a) != 32 {
		t.Fatal(a, err)
	}
	db.reopen(t)
	if b, _ := db.Secret("csrf"); !bytes.Equal(a, b) {
		t.Fatal("the secret changed across a restart")
	}
	if c, _ := db.Secret("other"); bytes.Equal(a, c) {
		t.Fatal("two names, one secret")
	}
}
