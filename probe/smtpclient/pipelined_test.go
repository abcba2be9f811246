package smtpclient

import (
	"errors"
	"testing"
)

// TestMailPipelined: MAIL goes out in the same write as the RCPTs (the
// fake answers MAIL only after it has read the RCPTs, so a client that
// waited for the MAIL reply would hang), and the replies are read in order.
func TestMailPipelined(t *testing.T) {
	as := addrs(3)
	f := startFake(t, greeting+"C: MAIL FROM:<>\n"+rcptLines(as)+"S: 250 ok\n"+
		"S: 250 2.1.5 ok\nS: 550 5.1.1 unknown\nS: 250 2.1.5 ok\n"+quit)
	c := mustDial(t, f, testOptions())
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	if err != nil || rest != nil || len(res) != 3 || res[1].Class.Class != NoMailbox || res[2].Class.Class != Accepted {
		t.Fatalf("RcptMany after a pipelined MAIL: %+v %q %v", res, rest, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestMailPipelinedRefused: a refused pipelined MAIL comes back from
// RcptMany as the MAIL's *Error, the RCPTs' 503s are read and dropped, and
// the session can still QUIT in step.
func TestMailPipelinedRefused(t *testing.T) {
	as := addrs(2)
	f := startFake(t, greeting+"C: MAIL FROM:<>\n"+rcptLines(as)+"S: 550 5.7.1 blocked\n"+
		"S: 503 5.5.1 no MAIL\nS: 503 5.5.1 no MAIL\n"+quit)
	c := mustDial(t, f, testOptions())
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	var se *Error
	if !errors.As(err, &se) || se.Command != CmdMail || se.Code != 550 || len(res) != 0 || len(rest) != 2 {
		t.Fatalf("refused pipelined MAIL: %+v %q %v", res, rest, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestMailPipelinedThenQuit: a pipelined MAIL that no RCPT followed is sent
// and answered before QUIT, so QUIT reads its own 221.
func TestMailPipelinedThenQuit(t *testing.T) {
	f := startFake(t, greeting+"C: MAIL FROM:<>\nS: 250 ok\n"+quit)
	c := mustDial(t, f, testOptions())
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestMailPipelinedWithoutPipelining falls back to Mail.
func TestMailPipelinedWithoutPipelining(t *testing.T) {
	f := startFake(t, greetingNoPipelining+"C: MAIL FROM:<>\nS: 250 ok\nC: RCPT TO:<user0@example.test>\nS: 250 2.1.5 ok\n"+quit)
	c := mustDial(t, f, testOptions())
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rcpt("user0@example.test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestResetPipelined: a second transaction in the session sends RSET,
// MAIL and its RCPT in one write (the fake answers RSET only after it
// has read the RCPT, so a client that waited for the RSET's reply would
// hang), and the replies are read in order.
func TestResetPipelined(t *testing.T) {
	f := startFake(t, greeting+"C: MAIL FROM:<>\nC: RCPT TO:<user0@example.test>\nS: 250 ok\nS: 250 2.1.5 ok\n"+
		"C: RSET\nC: MAIL FROM:<>\nC: RCPT TO:<user1@example.test>\nS: 250 2.0.0 ok\nS: 250 ok\nS: 550 5.1.1 unknown\n"+quit)
	c := mustDial(t, f, testOptions())
	for i, a := range addrs(2) {
		if i > 0 {
			if err := c.ResetPipelined(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.MailPipelined("", false); err != nil {
			t.Fatal(err)
		}
		res, _, err := c.RcptMany([]string{a})
		if err != nil || len(res) != 1 {
			t.Fatalf("transaction %d: %+v %v", i+1, res, err)
		}
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestResetPipelinedClosing: a 421 to the pipelined RSET (a server that
// closed the idle session: Postfix says 421 4.4.2 on its timeout) comes
// back from RcptMany as the RSET's *Error, and the session is closed.
func TestResetPipelinedClosing(t *testing.T) {
	f := startFake(t, greeting+"C: MAIL FROM:<>\nC: RCPT TO:<user0@example.test>\nS: 250 ok\nS: 250 2.1.5 ok\n"+
		"C: RSET\nC: MAIL FROM:<>\nC: RCPT TO:<user1@example.test>\nS: 421 4.4.2 timeout exceeded\n")
	c := mustDial(t, f, testOptions())
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.RcptMany([]string{"user0@example.test"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetPipelined(); err != nil {
		t.Fatal(err)
	}
	if err := c.MailPipelined("", false); err != nil {
		t.Fatal(err)
	}
	res, _, err := c.RcptMany([]string{"user1@example.test"})
	var se *Error
	if !errors.As(err, &se) || se.Command != CmdRset || se.Code != 421 || len(res) != 0 {
		t.Fatalf("421 to a pipelined RSET: %+v %v", res, err)
	}
	if err := c.Quit(); !errors.Is(err, ErrClosed) {
		t.Errorf("QUIT after the 421: %v, want the session closed", err)
	}
	f.check(t)
}
