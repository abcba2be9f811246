package smtpclient

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestRcptReplyClasses plays one session per RCPT reply and checks the
// class the engine would act on.
func TestRcptReplyClasses(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  Classification
	}{
		{"250 2.1.5 ok", Classification{Class: Accepted}},
		{"550 5.1.1 no such user", Classification{Class: NoMailbox}},
		{"550 5.2.1 mailbox disabled", Classification{Class: Disabled}},
		{"552 5.2.2 mailbox full", Classification{Class: Full}},
		{"450 4.2.0 greylisted, come back later", Classification{Class: Greylisted}},
		{"451 4.7.1 try again later", Classification{Class: Greylisted}},
		{"550 5.7.1 client host blocked", Classification{Class: Policy}},
		{"553 5.1.3 bad address syntax", Classification{Class: Syntax}},
		{"550 no such user here", Classification{Class: NoMailbox, Weak: true}},
		{"452 4.5.3 too many recipients", Classification{Class: TooManyRecipients}},
	} {
		t.Run(tc.reply, func(t *testing.T) {
			f := startFake(t, greeting+`
C: MAIL FROM:<>
S: 250 2.1.0 ok
C: RCPT TO:<someone@example.test>
S: `+tc.reply+quit)
			c := mustDial(t, f, testOptions())
			if err := c.Mail("", false); err != nil {
				t.Fatal(err)
			}
			r, err := c.Rcpt("someone@example.test")
			if got := Classify(CmdRcpt, r); got != tc.want {
				t.Errorf("Classify = %+v, want %+v", got, tc.want)
			}
			var se *Error
			switch {
			case tc.want.Class == Accepted && err != nil:
				t.Errorf("Rcpt error %v for an accepted recipient", err)
			case tc.want.Class != Accepted && (!errors.As(err, &se) || se.Class() != tc.want || se.Code != r.Code):
				t.Errorf("Rcpt error %#v, want an *Error classified %+v", err, tc.want)
			}
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
			f.check(t)
		})
	}
}

func addrs(n int) []string {
	a := make([]string, n)
	for i := range a {
		a[i] = "user" + strconv.Itoa(i) + "@example.test"
	}
	return a
}

func rcptLines(as []string) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString("C: RCPT TO:<" + a + ">\n")
	}
	return b.String()
}

func replyLines(n int, reply string) string {
	return strings.Repeat("S: "+reply+"\n", n)
}

const greetingNoPipelining = `
S: 220 mx.test ESMTP
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 ENHANCEDSTATUSCODES
`

func TestRcptManyPipelined(t *testing.T) {
	// 60 addresses: a chunk of 50 commands, then their 50 replies, then
	// the last 10. The transcript shows the client did not wait between
	// commands of a chunk.
	as := addrs(60)
	script := greeting + "C: MAIL FROM:<>\nS: 250 ok\n" +
		rcptLines(as[:50]) + replyLines(49, "250 2.1.5 ok") + "S: 550 5.1.1 unknown\n" +
		rcptLines(as[50:]) + replyLines(10, "250 2.1.5 ok") + quit
	f := startFake(t, script)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	if err != nil || rest != nil || len(res) != 60 {
		t.Fatalf("RcptMany: %d results, rest %q, %v", len(res), rest, err)
	}
	for i, r := range res {
		want := Accepted
		if i == 49 {
			want = NoMailbox
		}
		if r.Addr != as[i] || r.Class.Class != want {
			t.Errorf("result %d = %s %v, want %s %v", i, r.Addr, r.Class.Class, as[i], want)
		}
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestRcptManyOneByOne(t *testing.T) {
	as := addrs(3)
	f := startFake(t, greetingNoPipelining+`
C: MAIL FROM:<>
S: 250 ok
C: RCPT TO:<user0@example.test>
S: 250 2.1.5 ok
C: RCPT TO:<user1@example.test>
S: 450 4.2.0 greylisted
C: RCPT TO:<user2@example.test>
S: 550 5.2.1 disabled
`+quit)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	if err != nil || rest != nil {
		t.Fatalf("RcptMany: rest %q, %v", rest, err)
	}
	var got []Class
	for _, r := range res {
		got = append(got, r.Class.Class)
	}
	if want := []Class{Accepted, Greylisted, Disabled}; !reflect.DeepEqual(got, want) {
		t.Errorf("classes %v, want %v", got, want)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestRcptManyTooManyRecipients cuts a batch at the server's limit and
// checks the rest in a second session, as the batch scheduler does.
func TestRcptManyTooManyRecipients(t *testing.T) {
	as := addrs(5)
	first := startFake(t, greeting+"C: MAIL FROM:<>\nS: 250 ok\n"+
		"C: RCPT TO:<catchall-probe@example.test>\nS: 550 5.1.1 unknown\n"+
		rcptLines(as)+
		"S: 250 2.1.5 ok\nS: 250 2.1.5 ok\nS: 452 4.5.3 too many recipients\nS: 452 4.5.3 too many recipients\nS: 452 4.5.3 too many recipients\n"+
		quit)
	c := mustDial(t, first, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Rcpt("catchall-probe@example.test"); Classify(CmdRcpt, r).Class != NoMailbox {
		t.Fatalf("catch-all probe: %+v", r)
	}
	res, rest, err := c.RcptMany(as)
	if err != nil || len(res) != 2 || !reflect.DeepEqual(rest, as[2:]) {
		t.Fatalf("RcptMany: %d results, rest %q, %v", len(res), rest, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	first.check(t)

	second := startFake(t, greetingNoPipelining+"C: MAIL FROM:<>\nS: 250 ok\n"+
		"C: RCPT TO:<user2@example.test>\nS: 250 ok\n"+
		"C: RCPT TO:<user3@example.test>\nS: 452 too many recipients\n"+quit)
	c = mustDial(t, second, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err = c.RcptMany(rest)
	// A bare 452 after an accepted recipient is the limit too.
	if err != nil || len(res) != 1 || res[0].Addr != "user2@example.test" || !reflect.DeepEqual(rest, as[3:]) {
		t.Fatalf("second RcptMany: %+v, rest %q, %v", res, rest, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	second.check(t)
}

func TestRcptManyBare452First(t *testing.T) {
	// A bare 452 before any acceptance is a temporary failure of that
	// address (insufficient storage), not the recipient limit.
	f := startFake(t, greetingNoPipelining+`
C: MAIL FROM:<>
S: 250 ok
C: RCPT TO:<user0@example.test>
S: 452 insufficient system storage
C: RCPT TO:<user1@example.test>
S: 250 ok
`+quit)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(addrs(2))
	if err != nil || rest != nil || len(res) != 2 || res[0].Class.Class != Greylisted || res[1].Class.Class != Accepted {
		t.Fatalf("RcptMany: %+v, rest %q, %v", res, rest, err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestRcptMany421(t *testing.T) {
	as := addrs(4)
	f := startFake(t, greeting+"C: MAIL FROM:<>\nS: 250 ok\n"+rcptLines(as)+`
S: 250 ok
S: 421 4.4.2 bye now
OPEN 30ms
CLOSE
`)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	var se *Error
	if !errors.As(err, &se) || se.Code != 421 || len(res) != 2 || res[1].Class.Class != ServiceUnavailable ||
		!reflect.DeepEqual(rest, as[2:]) {
		t.Fatalf("RcptMany: %+v, rest %q, %v", res, rest, err)
	}
	f.check(t)
}

func TestRcptManyTransportError(t *testing.T) {
	as := addrs(3)
	f := startFake(t, greeting+"C: MAIL FROM:<>\nS: 250 ok\n"+rcptLines(as)+`
S: 250 ok
CLOSE
`)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	res, rest, err := c.RcptMany(as)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Command != CmdRcpt || len(res) != 1 || !reflect.DeepEqual(rest, as[1:]) {
		t.Fatalf("RcptMany: %+v, rest %q, %v", res, rest, err)
	}
	f.check(t)
}
