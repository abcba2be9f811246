package smtpclient

import (
	"strings"
	"testing"
)

// TestClassify is the README's table, row by row.
func TestClassify(t *testing.T) {
	e := func(c, s, d int) Enhanced { return Enhanced{c, s, d} }
	type row struct {
		cmd      string
		code     int
		enh      Enhanced
		accepted int
		want     Class
		weak     bool
	}
	for _, tc := range []row{
		// Accepted
		{CmdRcpt, 250, e(2, 1, 5), 0, Accepted, false},
		{CmdRcpt, 251, Enhanced{}, 0, Accepted, false},
		{CmdMail, 250, Enhanced{}, 0, Accepted, false},
		{CmdBanner, 220, Enhanced{}, 0, Accepted, false},
		// NoMailbox
		{CmdRcpt, 550, e(5, 1, 1), 0, NoMailbox, false},
		{CmdRcpt, 550, e(5, 1, 0), 0, NoMailbox, false},
		{CmdRcpt, 550, e(5, 1, 6), 0, NoMailbox, false},
		{CmdRcpt, 553, e(5, 1, 1), 0, NoMailbox, false},
		{CmdRcpt, 550, Enhanced{}, 0, NoMailbox, true},
		{CmdRcpt, 551, Enhanced{}, 0, NoMailbox, true},
		{CmdRcpt, 553, Enhanced{}, 0, NoMailbox, true},
		{CmdRcpt, 550, e(5, 0, 0), 0, NoMailbox, true}, // x.0.0 says nothing more
		{CmdRcpt, 550, e(5, 4, 1), 0, NoMailbox, true},
		// Disabled, Full
		{CmdRcpt, 550, e(5, 2, 1), 0, Disabled, false},
		{CmdRcpt, 552, e(5, 2, 2), 0, Full, false},
		{CmdRcpt, 452, e(4, 2, 2), 0, Full, false},
		{CmdRcpt, 552, Enhanced{}, 0, Full, true},
		// BadDomain
		{CmdRcpt, 550, e(5, 1, 2), 0, BadDomain, false},
		{CmdRcpt, 556, e(5, 1, 10), 0, BadDomain, false},
		// Syntax
		{CmdRcpt, 553, e(5, 1, 3), 0, Syntax, false},
		{CmdRcpt, 501, e(5, 5, 4), 0, Syntax, false},
		{CmdRcpt, 501, Enhanced{}, 0, Syntax, false},
		{CmdRcpt, 500, Enhanced{}, 0, Syntax, false},
		{CmdMail, 501, e(5, 5, 2), 0, Syntax, false},
		{CmdEHLO, 502, Enhanced{}, 0, Syntax, false},
		// Policy
		{CmdRcpt, 550, e(5, 7, 1), 0, Policy, false},
		{CmdRcpt, 554, e(5, 7, 1), 0, Policy, false},
		{CmdRcpt, 550, e(5, 1, 8), 0, Policy, false},
		{CmdRcpt, 553, e(5, 1, 7), 0, Policy, false},
		{CmdMail, 550, e(5, 7, 1), 0, Policy, false},
		{CmdMail, 553, e(5, 1, 8), 0, Policy, false},
		{CmdMail, 550, e(5, 1, 1), 0, Policy, true}, // never NoMailbox outside RCPT
		{CmdMail, 550, Enhanced{}, 0, Policy, true},
		{CmdMail, 552, e(5, 3, 4), 0, Policy, true},
		{CmdBanner, 554, Enhanced{}, 0, Policy, true},
		{CmdBanner, 554, e(5, 7, 1), 0, Policy, false},
		{CmdEHLO, 550, e(5, 7, 1), 0, Policy, false},
		// Greylisted (RCPT) and TempFail (elsewhere)
		{CmdRcpt, 450, e(4, 2, 0), 0, Greylisted, false},
		{CmdRcpt, 451, e(4, 7, 1), 0, Greylisted, false},
		{CmdRcpt, 450, e(4, 1, 1), 0, Greylisted, false},
		{CmdRcpt, 450, Enhanced{}, 0, Greylisted, false},
		{CmdRcpt, 452, Enhanced{}, 0, Greylisted, false},
		{CmdRcpt, 452, e(4, 3, 1), 3, Greylisted, false},
		{CmdMail, 451, e(4, 3, 0), 0, TempFail, false},
		{CmdBanner, 450, Enhanced{}, 0, TempFail, false},
		{CmdStartTLS, 454, e(4, 7, 0), 0, TempFail, false},
		// TooManyRecipients
		{CmdRcpt, 452, e(4, 5, 3), 0, TooManyRecipients, false},
		{CmdRcpt, 452, Enhanced{}, 1, TooManyRecipients, false},
		{CmdRcpt, 552, e(5, 5, 3), 0, TooManyRecipients, false},
		// ServiceUnavailable
		{CmdBanner, 421, e(4, 7, 0), 0, ServiceUnavailable, false},
		{CmdRcpt, 421, Enhanced{}, 0, ServiceUnavailable, false},
		// Unknown
		{CmdRcpt, 554, Enhanced{}, 0, Unknown, false},
		{CmdRcpt, 503, Enhanced{}, 0, Unknown, false},
		{CmdRcpt, 550, e(5, 3, 0), 0, Unknown, false},
		{CmdRcpt, 550, e(5, 6, 0), 0, Unknown, false},
		{CmdRcpt, 550, e(5, 2, 0), 0, Unknown, false},
		{CmdRcpt, 354, Enhanced{}, 0, Unknown, false},
		{CmdRcpt, 550, e(4, 1, 1), 0, NoMailbox, true}, // a class that disagrees is ignored
		{CmdRcpt, 0, Enhanced{}, 0, Unknown, false},
		{CmdRcpt, 999, Enhanced{}, 0, Unknown, false},
	} {
		got := ClassifyRcpt(Reply{Code: tc.code, Enhanced: tc.enh}, tc.accepted)
		if tc.cmd != CmdRcpt {
			got = Classify(tc.cmd, Reply{Code: tc.code, Enhanced: tc.enh})
		} else if tc.accepted == 0 {
			if g := Classify(CmdRcpt, Reply{Code: tc.code, Enhanced: tc.enh}); g != got {
				t.Errorf("Classify and ClassifyRcpt(_, 0) differ: %+v, %+v", g, got)
			}
		}
		if want := (Classification{Class: tc.want, Weak: tc.weak}); got != want {
			t.Errorf("%s %d %v (accepted %d) = %v weak=%v, want %v weak=%v",
				tc.cmd, tc.code, tc.enh, tc.accepted, got.Class, got.Weak, want.Class, want.Weak)
		}
	}
}

func TestClassNames(t *testing.T) {
	seen := map[string]bool{}
	for c := Unknown; c <= ServiceUnavailable; c++ {
		s := c.String()
		if s == "" || seen[s] || strings.HasPrefix(s, "class(") {
			t.Errorf("class %d has name %q", c, s)
		}
		seen[s] = true
	}
	if s := Class(200).String(); s != "class(200)" {
		t.Errorf("Class(200) = %q", s)
	}
}
