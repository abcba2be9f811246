package storage

import (
	"testing"
	"time"
)

func TestDailyCounts(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 100)
	other := db.account(t, 100)
	day := time.Date(2031, 3, 10, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) { db.clock.Set(day.Add(d)) }

	at(-47 * time.Hour) // two days ago, 01:00
	db.validate(t, acct, result("a@x.test", "valid"))
	db.validate(t, acct, result("b@x.test", "invalid"))
	at(-90 * time.Minute) // yesterday, 22:30
	db.validate(t, acct, result("c@x.test", "valid"))
	db.validate(t, other, result("d@x.test", "valid"))
	at(5 * time.Minute) // today, 00:05
	db.validate(t, acct, result("e@x.test", "risky"))

	check := func(what string, want []map[string]int) {
		t.Helper()
		got, err := db.DailyCounts(acct, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range got {
			if !d.Day.Equal(day.AddDate(0, 0, i-2)) {
				t.Errorf("%s: day %d is %v", what, i, d.Day)
			}
			if len(d.Counts) != len(want[i]) {
				t.Errorf("%s: %v: %v, want %v", what, d.Day, d.Counts, want[i])
				continue
			}
			for k, n := range want[i] {
				if d.Counts[k] != n {
					t.Errorf("%s: %v: %v, want %v", what, d.Day, d.Counts, want[i])
				}
			}
		}
	}
	check("first", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1}, {"risky": 1}})

	// Yesterday is not settled 5 minutes after midnight: a late batch
	// result with yesterday's time still counts.
	h, err := db.Hold(acct, 1, "late")
	if err != nil {
		t.Fatal(err)
	}
	late := result("f@x.test", "invalid")
	late.ProbedAt = day.Add(-time.Minute)
	if _, err := db.Charge(h, ChargeRequest{Result: late}); err != nil {
		t.Fatal(err)
	}
	at(time.Hour)
	db.validate(t, acct, result("g@x.test", "valid"))
	check("late", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1, "invalid": 1}, {"risky": 1, "valid": 1}})
	// Settled days come from memory, and callers cannot change them.
	got, _ := db.DailyCounts(acct, 3)
	got[0].Counts["valid"] = 99
	check("again", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1, "invalid": 1}, {"risky": 1, "valid": 1}})

	if _, err := db.DailyCounts(acct, 0); err == nil {
		t.Error("0 days")
	}
	_, err = db.DailyCounts("acct_nope", 30)
	wantErr(t, err, ErrNotFound)
	if got, err := db.DailyCounts(acct, 30); err != nil || len(got) != 30 || got[29].Total() != 2 {
		t.Errorf("30 days: %d, %v", len(got), err)
	}
}
