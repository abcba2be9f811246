package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testNow is the tests' clock.
var testNow = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return testNow }

// readTestdata reads a file of testdata/.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testdataFiles are the names of testdata/ files starting with prefix.
func testdataFiles(t testing.TB, prefix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", prefix+"*.json"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no testdata/%s*.json: %v", prefix, err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// hash16 is how an event id names a recipient, computed apart from the
// code under test.
func hash16(email string) string {
	s := sha256.Sum256([]byte(strings.ToLower(email)))
	return hex.EncodeToString(s[:])[:16]
}

var enhancedRe = regexp.MustCompile(`^[245]\.[0-9]{1,3}\.[0-9]{1,3}$`)

// eventIssue says what is wrong with an event any Receive returned,
// whatever it was given; "" when nothing is.
func eventIssue(e Event) string {
	switch {
	case e.ID == "" || len(e.ID) > MaxID || !utf8.ValidString(e.ID):
		return "bad ID"
	case e.Email == "" || len(e.Email) > MaxEmail || !utf8.ValidString(e.Email):
		return "bad Email"
	case e.Type != Delivered && e.Type != HardBounce && e.Type != SoftBounce && e.Type != Complaint && e.Type != Unsubscribed:
		return "bad Type"
	case e.At.IsZero() || e.At.Location() != time.UTC || e.At.Year() < 2000 || e.At.Year() > 9999:
		return "bad At"
	case e.SMTPCode != 0 && (e.SMTPCode < 200 || e.SMTPCode > 599):
		return "bad SMTPCode"
	case e.Enhanced != "" && !enhancedRe.MatchString(e.Enhanced):
		return "bad Enhanced"
	case len(e.Diagnostic) > MaxDiagnostic || !utf8.ValidString(e.Diagnostic):
		return "bad Diagnostic"
	}
	return ""
}

// checkResult checks what every Result must be.
func checkResult(t testing.TB, res Result) {
	t.Helper()
	if len(res.Events) > MaxEvents {
		t.Errorf("%d events", len(res.Events))
	}
	for i, e := range res.Events {
		if msg := eventIssue(e); msg != "" {
			t.Errorf("event %d: %s: %+v", i, msg, e)
		}
	}
}

// wantKind fails t unless err is an *Error of kind.
func wantKind(t testing.TB, err, kind error) {
	t.Helper()
	var pe *Error
	if !errors.Is(err, kind) || !errors.As(err, &pe) {
		t.Fatalf("error %v, want %v", err, kind)
	}
}

// sameEvents compares events field by field.
func sameEvents(t testing.TB, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) || g.At.Location() != time.UTC {
			t.Errorf("event %d: At %v, want %v (UTC)", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}
