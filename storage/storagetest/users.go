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

func testUsersAndInvites(t *testing.T, b backend) {
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
	if pend, err := s.Invites(t.Context(), acct); err != nil || len(pend) != 1 || pend[0].ID != iv.ID {
		t.Fatalf("pending %+v, %v", pend, err)
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
	if pend, err := s.Invites(t.Context(), acct); err != nil || len(pend) != 0 {
		t.Fatalf("pending after redemption %+v, %v", pend, err)
	}

	// Link an existing user as a member; an expired invitation fails.
	bob, err := s.CreateUser(t.Context(), "bob@example.test", testHash, false)
	if err != nil {
		t.Fatal(err)
	}
	token2, _, err := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", ann.ID, time.Hour)
	noErr(t, err, "CreateInvite")
	token3, _, err := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", ann.ID, time.Minute)
	noErr(t, err, "CreateInvite")
	c.Advance(2 * time.Minute)
	if _, _, err := s.RedeemInvite(t.Context(), token3, bob.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("expired: %v", err)
	}
	bob, _, err = s.RedeemInvite(t.Context(), token2, bob.ID)
	if r, _ := bob.Role(acct); err != nil || r != storage.RoleMember {
		t.Fatalf("link: %+v %v", bob, err)
	}
	if ms, err := s.Members(t.Context(), acct); err != nil || len(ms) != 2 || ms[0].ID != ann.ID || ms[1].ID != bob.ID {
		t.Fatalf("members %+v, %v", ms, err)
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
	revokeMe, iv4, err := s.CreateInvite(t.Context(), acct, storage.RoleMember, "", bob.ID, time.Hour)
	noErr(t, err, "CreateInvite")
	if _, err := s.RevokeInvite(t.Context(), acct, iv4.ID); err != nil {
		t.Fatal(err)
	}

	// Everything survives a restart.
	s = b.Reopen(t, s)
	ann2, err := s.UserByEmail(t.Context(), "ANN@example.test")
	if err != nil || ann2.ID != ann.ID || len(ann2.Accounts) != 0 {
		t.Fatalf("after reopen: %+v %v", ann2, err)
	}
	bob2, err := s.GetUser(t.Context(), bob.ID)
	if r, _ := bob2.Role(acct); err != nil || r != storage.RoleOwner {
		t.Fatalf("bob after reopen: %+v, %v", bob2, err)
	}
	if _, _, err := s.RedeemInvite(t.Context(), token, bob.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("a used invitation after reopen: %v", err)
	}
	if _, _, err := s.RedeemInvite(t.Context(), revokeMe, ann.ID); !errors.Is(err, storage.ErrInviteInvalid) {
		t.Fatalf("a revoked invitation after reopen: %v", err)
	}
}

func testSessions(t *testing.T, b backend) {
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
	tok2, _, err := s.CreateSession(t.Context(), u.ID, acct, "127.0.0.1", "test", time.Hour)
	noErr(t, err, "CreateSession")
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
	noErr(t, s.TouchSession(t.Context(), s1.ID), "TouchSession")
	if got, err := s.LookupSession(t.Context(), tok1); err != nil || !got.LastSeen.Equal(s1.LastSeen) {
		t.Errorf("touched after 30 s: %v, %v", got.LastSeen, err)
	}
	c.Advance(time.Minute)
	noErr(t, s.TouchSession(t.Context(), s1.ID), "TouchSession")
	if got, err := s.LookupSession(t.Context(), tok1); err != nil || !got.LastSeen.Equal(c.Now().Truncate(time.Millisecond)) {
		t.Errorf("touched after 90 s: %v, %v", got.LastSeen, err)
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
	tok3, _, err := s.CreateSession(t.Context(), u.ID, "", "", "", time.Hour)
	noErr(t, err, "CreateSession")
	if _, err := s.SetPassword(t.Context(), u.ID, testHash+"x"); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	for _, tok := range []string{tok2, tok3} {
		if _, err := s.LookupSession(t.Context(), tok); !errors.Is(err, storage.ErrSessionInvalid) {
			t.Errorf("a session from before the password change: %v", err)
		}
	}
	if got, err := s.GetUser(t.Context(), u.ID); err != nil || got.PasswordHash != testHash+"x" || got.PasswordChangedAt.IsZero() {
		t.Errorf("user after the change %+v, %v", got, err)
	}

	// Purge: expired and idle sessions go.
	session := func(ttl time.Duration) string {
		t.Helper()
		tok, _, err := s.CreateSession(t.Context(), u.ID, "", "", "", ttl)
		noErr(t, err, "CreateSession")
		return tok
	}
	tokA := session(time.Hour)
	tokB := session(10 * time.Hour)
	c.Advance(2 * time.Hour)
	tokC := session(10 * time.Hour)
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

func testOpenRegistration(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	u, a, err := s.RegisterWithAccount(t.Context(), "ann@example.test", testHash, "Ann's shop", storage.PlanFree, 100)
	if err != nil || a.Grant != 0 {
		t.Fatalf("register: %+v %v", a, err)
	}
	if r, _ := u.Role(a.ID); r != storage.RoleOwner {
		t.Fatalf("role %q", r)
	}
	if cr, err := s.Credits(t.Context(), a.ID); err != nil || cr.Balance != 100 {
		t.Fatalf("balance %d, %v", cr.Balance, err)
	}
	CheckLedger(t, s, a.ID)
}

func testSecret(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	a, err := s.Secret(t.Context(), "csrf")
	if err != nil || len(a) != 32 {
		t.Fatal(a, err)
	}
	s = b.Reopen(t, s)
	if b, err := s.Secret(t.Context(), "csrf"); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("the secret changed across a restart (%v)", err)
	}
	if c, err := s.Secret(t.Context(), "other"); err != nil || len(c) != 32 || bytes.Equal(a, c) {
		t.Fatalf("two names, one secret (%v)", err)
	}
	if _, err := s.Secret(t.Context(), "no spaces"); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("a secret name with spaces: %v", err)
	}
}

// testUserAdmin: what an operator does to users. Every user is listed,
// by email without regard to case; the operator role is granted and
// withdrawn; a password hash is upgraded in place (RehashPassword, after
// a login with an old-cost hash) only while it is still the hash the
// caller read, without ending the user's sessions.
func testUserAdmin(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	ctx := t.Context()
	if us, err := s.ListUsers(ctx); err != nil || len(us) != 0 {
		t.Fatalf("ListUsers of a new store: %+v, %v", us, err)
	}
	user := func(email string, operator bool) storage.User {
		t.Helper()
		u, err := s.CreateUser(ctx, email, testHash, operator)
		noErr(t, err, "CreateUser(%s)", email)
		return u
	}
	carl := user("Carl@example.test", false)
	ann := user("ann@example.test", true)
	bob := user("bob@example.test", false)
	list := func(what string, want ...storage.User) {
		t.Helper()
		us, err := s.ListUsers(ctx)
		if err != nil || len(us) != len(want) {
			t.Fatalf("%s: ListUsers %+v, %v", what, us, err)
		}
		for i, u := range us {
			if u.ID != want[i].ID || u.Email != want[i].Email || u.Operator != want[i].Operator || u.PasswordHash != want[i].PasswordHash {
				t.Errorf("%s: user %d is %+v, want %+v", what, i, u, want[i])
			}
		}
	}
	list("created", ann, bob, carl)

	up, err := s.SetOperator(ctx, bob.ID, true)
	if err != nil || !up.Operator || up.ID != bob.ID || up.Email != bob.Email {
		t.Fatalf("SetOperator(bob, true): %+v, %v", up, err)
	}
	bob = up
	if ann, err = s.SetOperator(ctx, ann.ID, false); err != nil || ann.Operator {
		t.Fatalf("SetOperator(ann, false): %+v, %v", ann, err)
	}
	if _, err := s.SetOperator(ctx, "user_nosuchuserxxxxxxxxxxx", true); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("SetOperator of an unknown user: %v", err)
	}

	tok, _, err := s.CreateSession(ctx, bob.ID, "", "", "", time.Hour)
	noErr(t, err, "CreateSession")
	stronger := strings.Replace(testHash, "m=8192,t=1", "m=65536,t=3", 1)
	noErr(t, s.RehashPassword(ctx, bob.ID, testHash, stronger), "RehashPassword")
	got, err := s.GetUser(ctx, bob.ID)
	if err != nil || got.PasswordHash != stronger || !got.PasswordChangedAt.IsZero() {
		t.Fatalf("after RehashPassword: %+v, %v", got, err)
	}
	if _, err := s.LookupSession(ctx, tok); err != nil {
		t.Fatalf("a session after a rehash of the same password: %v", err)
	}
	// The hash changed meanwhile (a new password): the stale rehash is
	// refused, the new hash stays.
	err = s.RehashPassword(ctx, bob.ID, testHash, testHash+"y")
	if !errors.Is(err, storage.ErrInvalid) || err.Error() != "storage: invalid argument: the password changed meanwhile" {
		t.Fatalf("RehashPassword of a hash no longer the user's: %v", err)
	}
	if got, err := s.GetUser(ctx, bob.ID); err != nil || got.PasswordHash != stronger {
		t.Fatalf("after a refused rehash: %+v, %v", got, err)
	}
	if err := s.RehashPassword(ctx, "user_nosuchuserxxxxxxxxxxx", testHash, stronger); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("RehashPassword of an unknown user: %v", err)
	}

	bob.PasswordHash = stronger
	s = b.Reopen(t, s)
	list("after a restart", ann, bob, carl)
}

// testSessionAccount: a dashboard session shows an account its user is a
// member of, or, for an operator, any account; another is refused and
// the session keeps the one it had.
func testSessionAccount(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	ctx := t.Context()
	mine, theirs := account(t, s, 0), account(t, s, 0)
	op, err := s.CreateUser(ctx, "op@example.test", testHash, true)
	noErr(t, err, "CreateUser")
	ann, err := s.CreateUser(ctx, "ann@example.test", testHash, false)
	noErr(t, err, "CreateUser")
	inv, _, err := s.CreateInvite(ctx, mine, storage.RoleMember, "", op.ID, time.Hour)
	noErr(t, err, "CreateInvite")
	_, _, err = s.RedeemInvite(ctx, inv, ann.ID)
	noErr(t, err, "RedeemInvite")
	tok, ss, err := s.CreateSession(ctx, ann.ID, "", "", "", time.Hour)
	noErr(t, err, "CreateSession")
	opTok, opSess, err := s.CreateSession(ctx, op.ID, "", "", "", time.Hour)
	noErr(t, err, "CreateSession")

	shows := func(tok, want string) {
		t.Helper()
		if got, err := s.LookupSession(ctx, tok); err != nil || got.Account != want {
			t.Fatalf("the session shows %q (%v), want %q", got.Account, err, want)
		}
	}
	got, err := s.SetSessionAccount(ctx, ss.ID, mine)
	if err != nil || got.ID != ss.ID || got.User != ann.ID || got.Account != mine {
		t.Fatalf("SetSessionAccount to a member's account: %+v, %v", got, err)
	}
	shows(tok, mine)
	for _, a := range []string{theirs, "acct_nosuchaccountxxxxxx"} {
		if _, err := s.SetSessionAccount(ctx, ss.ID, a); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("SetSessionAccount to an account of which the user is no member: %v", err)
		}
	}
	shows(tok, mine)
	if got, err := s.SetSessionAccount(ctx, opSess.ID, theirs); err != nil || got.Account != theirs {
		t.Fatalf("SetSessionAccount of an operator: %+v, %v", got, err)
	}
	if _, err := s.SetSessionAccount(ctx, opSess.ID, "acct_nosuchaccountxxxxxx"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("SetSessionAccount of an operator to an unknown account: %v", err)
	}
	if _, err := s.SetSessionAccount(ctx, "nosuchsession", mine); !errors.Is(err, storage.ErrSessionInvalid) {
		t.Errorf("SetSessionAccount of an unknown session: %v", err)
	}
	s = b.Reopen(t, s)
	shows(tok, mine)
	shows(opTok, theirs)
}
