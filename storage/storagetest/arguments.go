package storagetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// testInvalidArguments: what each backend refuses before it touches its
// data, with the error storage's checks make (storage/check.go), word for
// word on every backend.
func testInvalidArguments(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	ctx := t.Context()
	acct := account(t, s, 10)
	h := hold(t, s, acct, 2, "held")
	u, err := s.CreateUser(ctx, "ann@example.test", testHash, false)
	noErr(t, err, "CreateUser")
	j, err := s.CreateJob(ctx, storage.JobSpec{Account: acct, Addresses: Addresses(3)})
	noErr(t, err, "CreateJob")
	_, err = s.StartJob(ctx, j.ID)
	noErr(t, err, "StartJob")
	const bad = "not-a-uuid"
	noop := func(int, string) error { return nil }

	for _, c := range []struct {
		call string
		err  error
		want string
		is   error
	}{
		{"SetPlan", second(s.SetPlan(ctx, acct, "gold")), `unknown plan "gold"`, storage.ErrInvalid},
		{"AddCredits", second(s.AddCredits(ctx, acct, 0, "")), "credits to add must be positive, not 0", storage.ErrInvalid},
		{"SetCredits", second(s.SetCredits(ctx, acct, -1, "")), "balance must not be negative, not -1", storage.ErrInvalid},
		{"SetCredits below held", second(s.SetCredits(ctx, acct, 1, "")), "balance cannot be set to 1, below the 2 credits held by validations in flight", storage.ErrInvalid},
		{"Hold", second(s.Hold(ctx, acct, -3, "")), "credits to hold must be positive, not -3", storage.ErrInvalid},
		{"ChargeDirect", second(s.ChargeDirect(ctx, acct, 0, storage.ChargeRequest{Result: result("x@example.com", "valid")})), "credits to charge must be positive, not 0", storage.ErrInvalid},
		{"DailyCounts", second(s.DailyCounts(ctx, acct, storage.MaxStatDays+1)), fmt.Sprintf("days must be 1 to %d, not %d", storage.MaxStatDays, storage.MaxStatDays+1), storage.ErrInvalid},
		{"CreateJob empty address", second(s.CreateJob(ctx, storage.JobSpec{Account: acct, Addresses: []string{"a@x.test", ""}})), "address 1 is empty", storage.ErrInvalid},
		{"CreateJob duplicate", second(s.CreateJob(ctx, storage.JobSpec{Account: acct, Addresses: []string{"a@x.test", "b@x.test", "a@x.test"}})), `address 2 ("a@x.test") is a duplicate`, storage.ErrInvalid},
		{"PutJobResults", second(s.PutJobResults(ctx, j.ID, []storage.JobResult{{Index: 3, Result: result("x@example.com", "valid")}})), "job " + j.ID + " has no address 3", storage.ErrInvalid},
		{"FinishJob", second(s.FinishJob(ctx, j.ID, storage.JobFinish{Status: storage.JobQueued})), `a job ends completed or failed, not "queued"`, storage.ErrInvalid},
		{"Job", second(s.Job(ctx, bad)), `job "not-a-uuid"`, storage.ErrNotFound},
		{"PendingAddresses", s.PendingAddresses(ctx, bad, noop), `job "not-a-uuid"`, storage.ErrNotFound},
		{"JobResults", s.JobResults(ctx, bad, func(storage.Result) error { return nil }), `job "not-a-uuid"`, storage.ErrNotFound},
		{"CreateUser", second(s.CreateUser(ctx, "bob@example.test", "", false)), "password hash is empty", storage.ErrInvalid},
		{"RegisterWithAccount plan", second3(s.RegisterWithAccount(ctx, "bob@example.test", testHash, "Bob", "gold", 0)), `unknown plan "gold"`, storage.ErrInvalid},
		{"RegisterWithAccount credits", second3(s.RegisterWithAccount(ctx, "bob@example.test", testHash, "Bob", storage.PlanFree, -1)), "starting credits must not be negative, not -1", storage.ErrInvalid},
		{"SetPassword", second(s.SetPassword(ctx, u.ID, "")), "password hash is empty", storage.ErrInvalid},
		{"SetRole", second(s.SetRole(ctx, acct, u.ID, "admin")), `unknown role "admin"`, storage.ErrInvalid},
		{"CreateInvite role", third(s.CreateInvite(ctx, acct, "admin", "", u.ID, time.Hour)), `unknown role "admin"`, storage.ErrInvalid},
		{"CreateInvite ttl", third(s.CreateInvite(ctx, acct, storage.RoleMember, "", u.ID, 0)), "invitation lifetime must be positive", storage.ErrInvalid},
	} {
		prefix := "storage: invalid argument: "
		if c.is == storage.ErrNotFound {
			prefix = "storage: not found: "
		}
		if !errors.Is(c.err, c.is) || c.err.Error() != prefix+c.want {
			t.Errorf("%s: %v, want %q", c.call, c.err, prefix+c.want)
		}
	}
	// Nothing of the refused calls was written.
	if cr, err := s.Credits(ctx, acct); err != nil || cr.Balance != 7 || cr.Held != 2 { // 10, 3 reserved by the job
		t.Errorf("credits after the refused calls: %+v, %v", cr, err)
	}
	if _, err := s.UserByEmail(ctx, "bob@example.test"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a refused registration left a user: %v", err)
	}
	if js, err := s.ListAccountJobs(ctx, acct, 0); err != nil || len(js) != 1 {
		t.Errorf("jobs after refused ones: %+v, %v", js, err)
	}
	if _, err := s.Release(ctx, h, ""); err != nil {
		t.Errorf("the hold after the refused calls: %v", err)
	}
}

// second, second3 and third return the error of a call's results.
func second[T any](_ T, err error) error          { return err }
func second3[T, U any](_ T, _ U, err error) error { return err }
func third[T, U any](_ T, _ U, err error) error   { return err }
