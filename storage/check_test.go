package storage

import (
	"errors"
	"testing"
	"time"
)

// TestChecks pins what each argument check refuses and the words of its
// error, which both backends return as they are.
func TestChecks(t *testing.T) {
	const job = "0190e6b2-2f5e-4c3a-9d5b-0a1b2c3d4e5f"
	for _, c := range []struct {
		name string
		err  error
		want string // "": accepted
		is   error
	}{
		{"plan", CheckPlan(PlanGrowth), "", nil},
		{"plan", CheckPlan("gold"), `storage: invalid argument: unknown plan "gold"`, ErrInvalid},
		{"add", CheckAddCredits(1), "", nil},
		{"add", CheckAddCredits(0), "storage: invalid argument: credits to add must be positive, not 0", ErrInvalid},
		{"add", CheckAddCredits(-5), "storage: invalid argument: credits to add must be positive, not -5", ErrInvalid},
		{"set", CheckSetCredits(0), "", nil},
		{"set", CheckSetCredits(-1), "storage: invalid argument: balance must not be negative, not -1", ErrInvalid},
		{"set held", CheckSetCreditsHeld(2, 2), "", nil},
		{"set held", CheckSetCreditsHeld(1, 2), "storage: invalid argument: balance cannot be set to 1, below the 2 credits held by validations in flight", ErrInvalid},
		{"hold", CheckHold(1), "", nil},
		{"hold", CheckHold(0), "storage: invalid argument: credits to hold must be positive, not 0", ErrInvalid},
		{"charge", CheckChargeDirect(1), "", nil},
		{"charge", CheckChargeDirect(-2), "storage: invalid argument: credits to charge must be positive, not -2", ErrInvalid},
		{"starting", CheckStartingCredits(0), "", nil},
		{"starting", CheckStartingCredits(-1), "storage: invalid argument: starting credits must not be negative, not -1", ErrInvalid},
		{"job id", CheckJobID(job), "", nil},
		{"job id", CheckJobID("not-a-uuid"), `storage: not found: job "not-a-uuid"`, ErrNotFound},
		{"job id", CheckJobID("0190E6B2-2F5E-4C3A-9D5B-0A1B2C3D4E5F"), `storage: not found: job "0190E6B2-2F5E-4C3A-9D5B-0A1B2C3D4E5F"`, ErrNotFound},
		{"index", CheckJobIndex(job, 0, 1), "", nil},
		{"index", CheckJobIndex(job, 1, 1), "storage: invalid argument: job " + job + " has no address 1", ErrInvalid},
		{"index", CheckJobIndex(job, -1, 1), "storage: invalid argument: job " + job + " has no address -1", ErrInvalid},
		{"finish", CheckJobFinish(JobFinish{Status: JobCompleted}), "", nil},
		{"finish", CheckJobFinish(JobFinish{Status: JobFailed}), "", nil},
		{"finish", CheckJobFinish(JobFinish{Status: JobRunning}), `storage: invalid argument: a job ends completed or failed, not "running"`, ErrInvalid},
		{"days", CheckDays(1), "", nil},
		{"days", CheckDays(MaxStatDays), "", nil},
		{"days", CheckDays(0), "storage: invalid argument: days must be 1 to 366, not 0", ErrInvalid},
		{"days", CheckDays(MaxStatDays + 1), "storage: invalid argument: days must be 1 to 366, not 367", ErrInvalid},
		{"hash", CheckPasswordHash("$argon2id$x"), "", nil},
		{"hash", CheckPasswordHash(""), "storage: invalid argument: password hash is empty", ErrInvalid},
		{"rehash", CheckRehash("a", "a"), "", nil},
		{"rehash", CheckRehash("b", "a"), "storage: invalid argument: the password changed meanwhile", ErrInvalid},
		{"role", CheckRole(RoleMember), "", nil},
		{"role", CheckRole(""), `storage: invalid argument: unknown role ""`, ErrInvalid},
		{"role", CheckRole("admin"), `storage: invalid argument: unknown role "admin"`, ErrInvalid},
		{"set role", CheckSetRole(""), "", nil},
		{"set role", CheckSetRole(RoleOwner), "", nil},
		{"set role", CheckSetRole("admin"), `storage: invalid argument: unknown role "admin"`, ErrInvalid},
		{"ttl", CheckInviteTTL(time.Second), "", nil},
		{"ttl", CheckInviteTTL(0), "storage: invalid argument: invitation lifetime must be positive", ErrInvalid},
	} {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: refused: %v", c.name, c.err)
		case c.want != "" && (c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, c.is)):
			t.Errorf("%s: %v, want %q (%v)", c.name, c.err, c.want, c.is)
		}
	}
}
