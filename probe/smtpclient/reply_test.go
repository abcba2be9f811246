package smtpclient

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Reply
	}{
		{"250 ok\r\n", Reply{Code: 250, Lines: []string{"ok"}}},
		{"250\r\n", Reply{Code: 250, Lines: []string{""}}},
		{"250 \r\n", Reply{Code: 250, Lines: []string{""}}},
		{"250 ok\n", Reply{Code: 250, Lines: []string{"ok"}}}, // bare LF tolerated
		{"250-a\r\n250-\r\n250 c\r\n", Reply{Code: 250, Lines: []string{"a", "", "c"}}},
		{"550 5.1.1 no such user\r\n", Reply{Code: 550, Enhanced: Enhanced{5, 1, 1}, Lines: []string{"no such user"}}},
		{"550 5.1.1\r\n", Reply{Code: 550, Enhanced: Enhanced{5, 1, 1}, Lines: []string{""}}},
		{"550 5.1.10 null MX\r\n", Reply{Code: 550, Enhanced: Enhanced{5, 1, 10}, Lines: []string{"null MX"}}},
		{"452 4.5.3\ttoo many\r\n", Reply{Code: 452, Enhanced: Enhanced{4, 5, 3}, Lines: []string{"too many"}}},
		// RFC 2034 §4: every line carries the code; each is stripped.
		{"550-5.7.1 blocked\r\n550-5.7.1 see https://x.test\r\n550 5.7.1 bye\r\n",
			Reply{Code: 550, Enhanced: Enhanced{5, 7, 1}, Lines: []string{"blocked", "see https://x.test", "bye"}}},
		// The enhanced code counts only at the start of the first line...
		{"550-no such user\r\n550 5.1.1 really\r\n", Reply{Code: 550, Lines: []string{"no such user", "really"}}},
		{"550 user 5.1.1 unknown\r\n", Reply{Code: 550, Lines: []string{"user 5.1.1 unknown"}}},
		// ...when its class is the code's first digit...
		{"550 4.1.1 odd\r\n", Reply{Code: 550, Lines: []string{"4.1.1 odd"}}},
		{"250 5.1.1 odd\r\n", Reply{Code: 250, Lines: []string{"5.1.1 odd"}}},
		// ...and it is well formed: 1-3 digit subject and detail, then a blank.
		{"550 5.1.1234 x\r\n", Reply{Code: 550, Lines: []string{"5.1.1234 x"}}},
		{"550 5.1. x\r\n", Reply{Code: 550, Lines: []string{"5.1. x"}}},
		{"550 5.1.1: x\r\n", Reply{Code: 550, Lines: []string{"5.1.1: x"}}},
		{"550 5..1 x\r\n", Reply{Code: 550, Lines: []string{"5..1 x"}}},
		{"220 2.3.4.5 ESMTP\r\n", Reply{Code: 220, Lines: []string{"2.3.4.5 ESMTP"}}},
		{"354 3.0.0 go\r\n", Reply{Code: 354, Lines: []string{"3.0.0 go"}}},
		// Control characters are replaced; UTF-8 is kept.
		{"250 a\x00b\x1bc\x7fd\te\r\n", Reply{Code: 250, Lines: []string{"a?b?c?d\te"}}},
		{"250 a\rb\r\n", Reply{Code: 250, Lines: []string{"a?b"}}},
		{"250 grüße\r\n", Reply{Code: 250, Lines: []string{"grüße"}}},
	} {
		got, err := ParseReply([]byte(tc.in))
		if err != nil {
			t.Errorf("ParseReply(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseReply(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseReplyErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", io.ErrUnexpectedEOF},
		{"250 ok", io.ErrUnexpectedEOF},
		{"250-ok\r\n", io.ErrUnexpectedEOF},
		{"250-ok\r\n250", io.ErrUnexpectedEOF},
		{"\r\n", ErrProtocol},
		{"25\r\n", ErrProtocol},
		{"2x0 ok\r\n", ErrProtocol},
		{"-50 ok\r\n", ErrProtocol},
		{"199 ok\r\n", ErrProtocol},
		{"600 ok\r\n", ErrProtocol},
		{"000 ok\r\n", ErrProtocol},
		{"250ok\r\n", ErrProtocol},
		{"2500 ok\r\n", ErrProtocol},
		{"250-a\r\n251 b\r\n", ErrProtocol},
		{"250-a\r\n\r\n", ErrProtocol},
		{"250 ok\r\n250 again\r\n", ErrProtocol}, // two replies
		{"250 " + strings.Repeat("x", MaxLineLen) + "\r\n", ErrProtocol},
		{strings.Repeat("250-x\r\n", MaxLines) + "250 x\r\n", ErrProtocol},
	} {
		_, err := ParseReply([]byte(tc.in))
		if !errors.Is(err, tc.want) {
			in := tc.in
			if len(in) > 40 {
				in = in[:40] + "..."
			}
			t.Errorf("ParseReply(%q) error %v, want %v", in, err, tc.want)
		}
	}
	// The bounds themselves are allowed.
	if _, err := ParseReply([]byte("250 " + strings.Repeat("x", MaxLineLen-6) + "\r\n")); err != nil {
		t.Errorf("line of MaxLineLen: %v", err)
	}
	if _, err := ParseReply([]byte(strings.Repeat("250-x\r\n", MaxLines-1) + "250 x\r\n")); err != nil {
		t.Errorf("MaxLines lines: %v", err)
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Code: 550, Enhanced: Enhanced{5, 1, 1}, Command: CmdRcpt, Line: "no such user"}, "smtp: RCPT answered 550 5.1.1: no such user"},
		{&Error{Code: 550, Command: CmdRcpt, Line: "no such user"}, "smtp: RCPT answered 550: no such user"},
		{&Error{Code: 421, Command: CmdBanner}, "smtp: greeting was 421"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	long := newError(CmdRcpt, Reply{Code: 550, Lines: []string{strings.Repeat("é", 400)}})
	if len(long.Line) > maxErrorLine || !strings.HasSuffix(long.Line, "é") {
		t.Errorf("long line cut to %d bytes, ending %q", len(long.Line), long.Line[len(long.Line)-2:])
	}
	if (&Error{Code: 450}).Temporary() != true || (&Error{Code: 550}).Temporary() != false {
		t.Error("Temporary is wrong")
	}
}

// checkReply asserts what every parsed reply must satisfy.
func checkReply(t *testing.T, in []byte, r Reply) {
	t.Helper()
	if r.Code < 200 || r.Code > 599 {
		t.Fatalf("%q: code %d out of range", in, r.Code)
	}
	if len(r.Lines) < 1 || len(r.Lines) > MaxLines {
		t.Fatalf("%q: %d lines", in, len(r.Lines))
	}
	if e := r.Enhanced; !e.IsZero() && (e.Class != r.Code/100 || e.Subject > 999 || e.Detail > 999 || e.Subject < 0 || e.Detail < 0) {
		t.Fatalf("%q: enhanced %v with code %d", in, e, r.Code)
	}
	for _, l := range r.Lines {
		if len(l) > MaxLineLen {
			t.Fatalf("%q: line of %d bytes", in, len(l))
		}
		for i := 0; i < len(l); i++ {
			if b := l[i]; (b < 0x20 && b != '\t') || b == 0x7f {
				t.Fatalf("%q: control character %#x in %q", in, b, l)
			}
		}
	}
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		"250 ok\r\n",
		"250-a\r\n250 b\r\n",
		"550 5.1.1 no such user\r\n",
		"550-5.7.1 a\r\n550 5.7.1 b\r\n",
		"452 4.5.3 too many recipients\r\n",
		"220 mx.test ESMTP\n",
		"2x0 bad\r\n",
		"250-a\r\n251 b\r\n",
		"550 5.1.1234 x\r\n",
		"250 a\x00b\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseReply(in)
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%q: unexpected error kind %v", in, err)
			}
			return
		}
		checkReply(t, in, r)
		_ = Classify(CmdRcpt, r)
		_ = Classify(CmdMail, r)
		_ = newError(CmdRcpt, r).Error()
	})
}
