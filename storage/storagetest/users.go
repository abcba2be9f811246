package storagetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// testHash is a well-formed Argon2id string (the package stores what it
// is given).
const testHash = "$argon2id$v=19$m=8192,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA"

// RunUsers runs the users, invitations, sessions and secrets suite.
func RunUsers[S storage.Store](t *testing.T, b Backend[S]) {
	t.Run("UsersAndInvites", func(t *testing.T) { testUsersAndInvites(t, b) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, b) })
	t.Run("OpenRegistration", func(t *testing.T) { testOpenRegistration(t, b) })
	t.Run("Secret", func(t *testing.T) { testSecret(t, b) })
}

func testUsersAndInvites[S storage.Store](t *testing.T, b Backend[S]) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	op, err := s.CreateUser(t.Context(), " Op@Example.test ", testHash, true)
	if err != nil || op.Email != "Op@Example.test" || !op.Operator || !strings.HasPrefix(op.ID, "user_") {
		t.Fatalf("operator: %+v %v", op, err)
	}
	if _, err := s.CreateUser(t.Context(), "op@example.TEST", testHash, false); !errors.Is(err, storage.ErrEmailTaken) || !errors.Is(err, storage.ErrExists) {
		t.Fatalf("same email in another case: %v", err)
	}
	for _, bad := range []string{"", "no-at-sign", strings.Repeat("a", 320) + "@x.test"} {
		if _, err := s.CreateUser(t.Context(), bad, testHash, false); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("email %q: %v", bad, err)
		}
	}

	// An invitation is redeemed once, by its email only, before it expires.
	token, iv, err := s.CreateInvite(t.Context(), acct, storage.RoleOwner, "ann@example.test", op.ID, time.Hour)
	if err != nil || !strings.HasPrefix(token, "inv_") || iv.Account != acct {
		t.Fatalf("invite: %q %+v %v", token, iv, err)
	}
	if pend, _ := s.Invites(t.Context(), acct); len(pend) != 1 || pend[0].ID != iv.ID {
		t.Fatalf("pending %+v", pend)
	}
	if _, _, err := s.RegisterWithInvite(t.Context(), "bob@example.test", testHash, token); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("another email: %v", err)
	}
	if _, err := s.UserByEmail(t.Context(), "bob@example.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused registration left a user: %v", err)
	}
	tampered := token[:len(token)-1] + map[bool]string{true: "A", false: "B"}[token[len(token)-1] != 'A']
	if _, _, err := s.RegisterWithInvite(t.Context(), "ann@example.test", testHash, tampered); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("tampered token: %v", err)
	}
	ann, used, err := s.RegisterWithInvite(t.Context(), "ann@example.test", testHash, token)
	if err != nil || used.RedeemedBy != ann.ID {
		t.Fatalf("register: %+v %+v %v", ann, used, err)
	}
	if r, ok := ann.Role(acct); !ok || r != storage.RoleOwner {
		t.Fatalf("ann's role %q %v", r, ok)
	}
	if _, _, err := s.RegisterWithInvite(t.Context(), "ann2@example.test", testHash, token); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("second redemption: %v", err)
	}
	if pend, _ := s.Invites(t.Context(), acct); len(pend) != 0 {
		t.Fatalf("pending after redemption %+v", pend)
	}

	// Link an existing user as a member; an expired invitation fails.
	bob, err := s.CreateUser(t.Context(), "bob@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	token2, _, _ := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", ann.ID, time.Hour)
	token3, _, _ := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", ann.ID, time.Minute)
	c.Advance(2 * time.Minute)
	if _, _, err := s.RedeemInvite(t.Context(), token3, bob.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("expired: %v", err)
	}
	bob, _, err = s.RedeemInvite(t.Context(), token2, bob.ID)
	if r, _ := bob.Role(acct); err != nil || r != storage.RoleMember {
		t.Fatalf("link: %+v %v", bob, err)
	}
	if ms, _ := s.Members(t.Context(), acct); len(ms) != 2 || ms[0].ID != ann.ID || ms[1].ID != bob.ID {
		t.Fatalf("members %+v", ms)
	}

	// The last owner stays.
	if _, err := s.SetRole(t.Context(), acct, ann.ID, storage.RoleMember); !errors.Is(err, storage.ErrLastOwner) {
		t.Fatalf("demote the last owner: %v", err)
	}
	if _, err := s.SetRole(t.Context(), acct, ann.ID, ""); !errors.Is(err, storage.ErrLastOwner) {
		t.Fatalf("remove the last owner: %v", err)
	}
	if _, err := s.SetRole(t.Context(), acct, bob.ID, storage.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRole(t.Context(), acct, ann.ID, ""); err != nil {
		t.Fatal(err)
	}
	revokeMe, iv4, _ := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", bob.ID, time.Hour)
	if _, err := s.RevokeInvite(t.Context(), acct, iv4.ID); err != nil {
		t.Fatal(err)
	}

	// Everything survives a restart.
	s = b.Reopen(t, s)
	ann2, err := s.UserByEmail(t.Context(), "ANN@example.test")
	if err != nil || ann2.ID != ann.ID || len(ann2.Accounts) != 0 {
		t.Fatalf("after reopen: %+v %v", ann2, err)
	}
	bob2, _ := s.GetUser(t.Context(), bob.ID)
	if r, _ := bob2.Role(acct); r != storage.RoleOwner {
		t.Fatalf("bob after reopen: %+v", bob2)
	}
	if _, _, err := s.RedeemInvite(t.Context(), token, bob.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("a used invitation after reopen: %v", err)
	}
	if _, _, err := s.RedeemInvite(t.Context(), revokeMe, ann.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("a revoked invitation after reopen: %v", err)
	}
}

func testSessions[S storage.Store](t *testing.T, b Backend[S]) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	u, err := s.CreateUser(t.Context(), "ann@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	tok1, s1, err := s.CreateSession(t.Context(), u.ID, acct, "127.0.0.1", "test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok2, _, _ := s.CreateSession(t.Context(), u.ID, acct, "127.0.0.1", "test", time.Hour)
	if got, err := s.LookupSession(t.Context(), tok1); err != nil || got.ID != s1.ID || got.User != u.ID {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	for _, bad := range []string{"", "x", s1.ID, s1.ID + ".", tok1 + "x", strings.Replace(tok1, ".", ".A", 1)[:len(tok1)]} {
		if _, err := s.LookupSession(t.Context(), bad); !errors.Is(err, storage.ErrSessionInvalid) {
			t.Errorf("token %q: %v", bad, err)
		}
	}

	// Touch writes at most once a minute.
	c.Advance(30 * time.Second)
	s.TouchSession(t.Context(), s1.ID)
	if got, _ := s.LookupSession(t.Context(), tok1); !got.LastSeen.Equal(s1.LastSeen) {
		t.Errorf("touched after 30 s: %v", got.LastSeen)
	}
	c.Advance(time.Minute)
	s.TouchSession(t.Context(), s1.ID)
	if got, _ := s.LookupSession(t.Context(), tok1); !got.LastSeen.Equal(c.Now().Truncate(time.Millisecond)) {
		t.Errorf("touched after 90 s: %v", got.LastSeen)
	}

	// Sessions survive a restart; logout ends one; a new password all.
	s = b.Reopen(t, s)
	if _, err := s.LookupSession(t.Context(), tok2); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if err := s.DeleteSession(t.Context(), s1.ID); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	if _, err := s.LookupSession(t.Context(), tok1); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Fatalf("after logout and reopen: %v", err)
	}
	tok3, _, _ := s.CreateSession(t.Context(), u.ID, "", "", "", time.Hour)
	if _, err := s.SetPassword(t.Context(), u.ID, testHash+"x"); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	for _, tok := range []string{tok2, tok3} {
		if _, err := s.LookupSession(t.Context(), tok); !errors.Is(err, storage.ErrSessionInvalid) {
			t.Errorf("a session from before the password change: %v", err)
		}
	}
	if got, _ := s.GetUser(t.Context(), u.ID); got.PasswordHash != testHash+"x" || got.PasswordChangedAt.IsZero() {
		t.Errorf("user after the change %+v", got)
	}

	// Purge: expired and idle sessions go.
	tokA, _, _ := s.CreateSession(t.Context(), u.ID, "", "", "", time.Hour)
	tokB, _, _ := s.CreateSession(t.Context(), u.ID, "", "", "", 10*time.Hour)
	c.Advance(2 * time.Hour)
	tokC, _, _ := s.CreateSession(t.Context(), u.ID, "", "", "", 10*time.Hour)
	if n, err := s.PurgeSessions(t.Context(), 90*time.Minute); err != nil || n != 2 {
		t.Fatalf("purged %d, %v; want 2", n, err)
	}
	s = b.Reopen(t, s)
	for tok, want := range map[string]bool{tokA: false, tokB: false, tokC: true} {
		if _, err := s.LookupSession(t.Context(), tok); (err == nil) != want {
			t.Errorf("after the purge: %v, want found %v", err, want)
		}
	}
}

func testOpenRegistration[S storage.Store](t *testing.T, b Backend[S]) {
	c := NewClock()
	s := b.Open(t, c)
	u, a, err := s.RegisterWithAccount(t.Context(), "ann@example.test", testHash, "Ann's shop", storage.PlanFree, 100)
	if err != nil || a.Grant != 0 {
		t.Fatalf("register: %+v %v", a, err)
	}
	if r, _ := u.Role(a.ID); r != storage.RoleOwner {
		t.Fatalf("role %q", r)
	}
	if cr, _ := s.Credits(t.Context(), a.ID); cr.Balance != 100 {
		t.Fatalf("balance %d", cr.Balance)
	}
	CheckLedger(t, s, a.ID)
}

func testSecret[S storage.Store](t *testing.T, b Backend[S]) {
	c := NewClock()
	s := b.Open(t, c)
	a, err := s.Secret(t.Context(), "csrf")
	if err != nil || len(a) != 32 {
		t.Fatal(a, err)
	}
	s = b.Reopen(t, s)
	if b, _ := s.Secret(t.Context(), "csrf"); !bytes.Equal(a, b) {
		t.Fatal("the secret changed across a restart")
	}
	if c, _ := s.Secret(t.Context(), "other"); bytes.Equal(a, c) {
		t.Fatal("two names, one secret")
	}
}
