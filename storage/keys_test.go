package storage

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"acct_abc": true, "0190e6b2-2f5e-7c3a-9d5b-0a1b2c3d4e5f": true, "": false,
		"a/b": false, "a\x00": false, strings.Repeat("a", 65): false, "é": false,
	} {
		if got := validID(s); got != want {
			t.Errorf("validID(%q) = %v", s, got)
		}
	}
}

func TestUUID(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	v4, v7 := NewUUIDv4(), NewUUIDv7(now)
	if !ValidUUID(v4) || v4[14] != '4' || !strings.ContainsAny(v4[19:20], "89ab") {
		t.Errorf("v4 %q", v4)
	}
	if !ValidUUID(v7) || v7[14] != '7' || !strings.ContainsAny(v7[19:20], "89ab") {
		t.Errorf("v7 %q", v7)
	}
	// v7 sorts by time.
	if later := NewUUIDv7(now.Add(time.Millisecond)); later <= v7 {
		t.Errorf("v7 %q not after %q", later, v7)
	}
	if NewUUIDv4() == v4 {
		t.Error("v4 repeats")
	}
	for _, bad := range []string{"", "0190E6B2-2F5E-7C3A-9D5B-0A1B2C3D4E5F", "0190e6b2x2f5e-7c3a-9d5b-0a1b2c3d4e5f", "0190e6b2-2f5e-7c3a-9d5b-0a1b2c3d4e5"} {
		if ValidUUID(bad) {
			t.Errorf("ValidUUID(%q)", bad)
		}
	}
}

func TestCursorFormat(t *testing.T) {
	ms := time.Date(2026, 11, 21, 10, 0, 0, 123_000_000, time.UTC).UnixNano()
	for _, tc := range []struct {
		pos  int64
		want string
	}{
		{ms, "2026-11-21T10:00:00.123Z"},
		{ms + 42, "2026-11-21T10:00:00.123000042Z"},
		{ms + 999_999, "2026-11-21T10:00:00.123999999Z"},
	} {
		got := FormatCursor(tc.pos)
		if got != tc.want {
			t.Errorf("FormatCursor(%d) = %q, want %q", tc.pos, got, tc.want)
		}
		// A date-time parser reads it as a time in the right millisecond.
		pt, err := time.Parse(time.RFC3339Nano, got)
		if err != nil || pt.Truncate(time.Millisecond).UnixNano() != ms {
			t.Errorf("%q reads as %v, %v", got, pt, err)
		}
		if back, err := ParseCursor(got); err != nil || back != tc.pos {
			t.Errorf("ParseCursor(%q) = %d, %v", got, back, err)
		}
	}
	for s, want := range map[string]int64{
		"2026-11-21T10:00:00.123Z":      ms,
		"2026-11-21T11:00:00.123+01:00": ms,
		"2026-11-21T10:00:00Z":          ms - 123_000_000,
		"1969-12-31T23:59:59Z":          0,
		"2300-01-01T00:00:00Z":          math.MaxInt64,
	} {
		if got, err := ParseCursor(s); err != nil || got != want {
			t.Errorf("ParseCursor(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-11-21", "2026-11-21 10:00:00Z"} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

// Cursors round-trip for every position.
func FuzzCursor(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(1_763_719_200_123_000_042))
	f.Add(int64(maxPosMs * posPerMs))
	f.Fuzz(func(t *testing.T, pos int64) {
		if pos < 0 || pos > maxPosMs*posPerMs+posPerMs-1 {
			return
		}
		s := FormatCursor(pos)
		got, err := ParseCursor(s)
		if err != nil || got != pos {
			t.Fatalf("ParseCursor(FormatCursor(%d) = %q) = %d, %v", pos, s, got, err)
		}
	})
}
