package lists

import "testing"

// TestLookupsDoNotAllocate: the predicates run on every probe, so they
// must not allocate, whatever the case or shape of the input.
func TestLookupsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	l := Embedded()
	for name, f := range map[string]func(){
		"IsDisposable":      func() { sink = l.IsDisposable("A.B.Mailinator.COM") },
		"IsDisposable/miss": func() { sink = l.IsDisposable("mail.example.co.uk.") },
		"IsFree":            func() { sink = l.IsFree("GMail.com") },
		"IsRole":            func() { sink = l.IsRole("No.Reply+bounces") },
		"IsSpamtrap":        func() { sink = l.IsSpamtrap("SpamTrap-Test+x@Example.invalid") },
		"Normalize/unknown": func() { s, _ := Normalize("John", "example.com"); sink = s == "" },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
