package storage

import (
	"fmt"
	"time"
)

// The checks of the contract's arguments that are not records' (those
// are in records.go: NewAccount, NewKey, PrepareResult, CheckCharge,
// CheckJobSpec, ...): each rule once, called by both backends before
// they touch their data (or, for the rules that need it, with the data
// read under the lock they write under), so that a call is refused the
// same way, with the same words, by Pebble and by PostgreSQL. Each
// returns nil or an error that wraps ErrInvalid (CheckJobID: ErrNotFound).

// CheckPlan refuses an unknown plan (SetPlan, RegisterWithAccount).
func CheckPlan(plan Plan) error {
	if !plan.Valid() {
		return invalidf("unknown plan %q", plan)
	}
	return nil
}

// CheckAddCredits refuses credits to add that are not positive
// (AddCredits).
func CheckAddCredits(n int64) error {
	if n <= 0 {
		return invalidf("credits to add must be positive, not %d", n)
	}
	return nil
}

// CheckSetCredits refuses a negative balance (SetCredits).
func CheckSetCredits(n int64) error {
	if n < 0 {
		return invalidf("balance must not be negative, not %d", n)
	}
	return nil
}

// CheckSetCreditsHeld refuses to set the balance below the credits held
// by validations in flight, which will be charged or released whatever
// the balance says (SetCredits, under the account's lock).
func CheckSetCreditsHeld(n, held int64) error {
	if n < held {
		return invalidf("balance cannot be set to %d, below the %d credits held by validations in flight", n, held)
	}
	return nil
}

// CheckHold refuses credits to hold that are not positive (Hold).
func CheckHold(n int64) error {
	if n <= 0 {
		return invalidf("credits to hold must be positive, not %d", n)
	}
	return nil
}

// CheckChargeDirect refuses credits to charge that are not positive
// (ChargeDirect).
func CheckChargeDirect(n int64) error {
	if n <= 0 {
		return invalidf("credits to charge must be positive, not %d", n)
	}
	return nil
}

// CheckStartingCredits refuses negative starting credits
// (RegisterWithAccount).
func CheckStartingCredits(n int64) error {
	if n < 0 {
		return invalidf("starting credits must not be negative, not %d", n)
	}
	return nil
}

// CheckJobID answers ErrNotFound for an id that cannot be a job's (not a
// canonical UUID): no job has it, and the backends need not look.
func CheckJobID(id string) error {
	if !ValidUUID(id) {
		return fmt.Errorf("%w: job %q", ErrNotFound, id)
	}
	return nil
}

// CheckJobIndex refuses a result for an index the job has no address at
// (PutJobResults).
func CheckJobIndex(id string, index, total int) error {
	if index < 0 || index >= total {
		return invalidf("job %s has no address %d", id, index)
	}
	return nil
}

// CheckJobFinish refuses an end that is neither completed nor failed
// (FinishJob).
func CheckJobFinish(f JobFinish) error {
	if f.Status != JobCompleted && f.Status != JobFailed {
		return invalidf("a job ends completed or failed, not %q", f.Status)
	}
	return nil
}

// CheckDays refuses a number of days DailyCounts does not count: 1 to
// MaxStatDays.
func CheckDays(days int) error {
	if days < 1 || days > MaxStatDays {
		return invalidf("days must be 1 to %d, not %d", MaxStatDays, days)
	}
	return nil
}

// CheckPasswordHash refuses an empty password hash (CreateUser, the
// registrations, SetPassword).
func CheckPasswordHash(hash string) error {
	if hash == "" {
		return invalidf("password hash is empty")
	}
	return nil
}

// CheckRehash refuses to replace the user's password hash, now current,
// with a rehash of old unless old is still the hash (RehashPassword,
// under the user's lock): the password changed meanwhile.
func CheckRehash(current, old string) error {
	if current != old {
		return invalidf("the password changed meanwhile")
	}
	return nil
}

// CheckRole refuses an unknown role (CreateInvite).
func CheckRole(role Role) error {
	if !role.Valid() {
		return invalidf("unknown role %q", role)
	}
	return nil
}

// CheckSetRole refuses an unknown role other than "", which removes the
// membership (SetRole).
func CheckSetRole(role Role) error {
	if role == "" {
		return nil
	}
	return CheckRole(role)
}

// CheckInviteTTL refuses an invitation lifetime that is not positive
// (CreateInvite).
func CheckInviteTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return invalidf("invitation lifetime must be positive")
	}
	return nil
}
