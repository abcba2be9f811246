package smtpclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

const greeting = `
S: 220 mx.test ESMTP ready
C: EHLO probe.verifyd.test
S: 250-mx.test Hello probe
S: 250-PIPELINING
S: 250-SIZE 35882577
S: 250-8BITMIME
S: 250-ENHANCEDSTATUSCODES
S: 250-SMTPUTF8
S: 250 VRFY
`

const quit = `
C: QUIT
S: 221 2.0.0 bye
OPEN 30ms
CLOSE
`

func dial(t *testing.T, f *fake, opts Options) (*Client, error) {
	t.Helper()
	return Dial(context.Background(), newDialer(t), f.addr, opts)
}

func mustDial(t *testing.T, f *fake, opts Options) *Client {
	t.Helper()
	c, err := dial(t, f, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSessionEveryStep(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
S: 250 2.1.0 ok
C: RCPT TO:<alice@example.test>
S: 250 2.1.5 ok
C: RSET
S: 250 2.0.0 flushed
C: MAIL FROM:<probe@verifyd.test> SMTPUTF8
S: 250 2.1.0 ok
C: RCPT TO:<jörg@example.test>
S: 550-5.1.1 no such user
S: 550 5.1.1 try again never
`+quit)
	c := mustDial(t, f, testOptions())
	if got := c.BannerHost(); got != "mx.test" {
		t.Errorf("BannerHost = %q", got)
	}
	if got := c.EHLOHost(); got != "mx.test" {
		t.Errorf("EHLOHost = %q", got)
	}
	ext := c.Extensions()
	if !ext.Pipelining || !ext.EightBitMIME || !ext.EnhancedStatusCodes || !ext.SMTPUTF8 || ext.StartTLS ||
		!ext.HasSize || ext.Size != 35882577 || !ext.Has("vrfy") || ext.Has("AUTH") {
		t.Errorf("Extensions = %+v", ext)
	}
	if _, _, ok := c.TLSState(); ok {
		t.Error("TLSState ok without STARTTLS")
	}
	if c.RemoteAddr().String() != f.addr {
		t.Errorf("RemoteAddr = %v, want %v", c.RemoteAddr(), f.addr)
	}
	if ip := c.LocalAddr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("LocalAddr = %v", c.LocalAddr())
	}
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	r, err := c.Rcpt("alice@example.test")
	if err != nil || r.Code != 250 || r.Enhanced != (Enhanced{2, 1, 5}) || !reflect.DeepEqual(r.Lines, []string{"ok"}) {
		t.Fatalf("Rcpt = %+v, %v", r, err)
	}
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("probe@verifyd.test", true); err != nil {
		t.Fatal(err)
	}
	r, err = c.Rcpt("jörg@example.test")
	var se *Error
	if !errors.As(err, &se) || se.Code != 550 || se.Enhanced != (Enhanced{5, 1, 1}) || se.Command != CmdRcpt ||
		se.Line != "no such user try again never" {
		t.Fatalf("Rcpt error = %#v", err)
	}
	if !reflect.DeepEqual(r.Lines, []string{"no such user", "try again never"}) {
		t.Errorf("Lines = %q", r.Lines)
	}
	if cl := Classify(CmdRcpt, r); cl != (Classification{Class: NoMailbox}) {
		t.Errorf("class = %+v", cl)
	}
	if err := c.Quit(); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	f.check(t)
	if _, err := c.Rcpt("x@example.test"); !errors.Is(err, ErrClosed) {
		t.Errorf("Rcpt after Quit: %v, want ErrClosed", err)
	}
}

func TestMultiLineEHLOAndBanner(t *testing.T) {
	f := startFake(t, `
S: 220-mx2.test first line
S: 220-second line
S: 220 third
C: EHLO probe.verifyd.test
S: 250-mx2.test greets you
S: 250-pipelining
S: 250-STARTTLS
S: 250-SIZE
S: 250 AUTH PLAIN LOGIN
`+quit)
	c := mustDial(t, f, testOptions())
	ext := c.Extensions()
	if c.BannerHost() != "mx2.test" || c.EHLOHost() != "mx2.test" || !ext.Pipelining || !ext.StartTLS ||
		!ext.HasSize || ext.Size != 0 || !ext.Has("auth") {
		t.Errorf("banner %q ehlo %q ext %+v", c.BannerHost(), c.EHLOHost(), ext)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestEHLORejectedFallsBackToHELO(t *testing.T) {
	for _, code := range []string{"500 5.5.1 unrecognized command", "502 command not implemented"} {
		t.Run(code[:3], func(t *testing.T) {
			f := startFake(t, `
S: 220 old.test SMTP
C: EHLO probe.verifyd.test
S: `+code+`
C: HELO probe.verifyd.test
S: 250 old.test
C: MAIL FROM:<>
S: 250 ok
`+quit)
			c := mustDial(t, f, testOptions())
			if c.EHLOHost() != "old.test" || !reflect.DeepEqual(c.Extensions(), Extensions{}) {
				t.Errorf("EHLOHost %q Extensions %+v", c.EHLOHost(), c.Extensions())
			}
			if err := c.Mail("", false); err != nil {
				t.Fatal(err)
			}
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
			f.check(t)
		})
	}
}

func TestEHLORefusedQuitsPolitely(t *testing.T) {
	f := startFake(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 550 5.7.1 your helo is not welcome
`+quit)
	_, err := dial(t, f, testOptions())
	var se *Error
	if !errors.As(err, &se) || se.Command != CmdEHLO || se.Class() != (Classification{Class: Policy}) {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}

func TestBanner421(t *testing.T) {
	f := startFake(t, `
S: 421 4.7.0 mx.test too busy, try later
CLOSE
`)
	_, err := dial(t, f, testOptions())
	var se *Error
	if !errors.As(err, &se) || se.Code != 421 || se.Command != CmdBanner || !se.Temporary() ||
		se.Class().Class != ServiceUnavailable {
		t.Fatalf("Dial: %#v", err)
	}
	if want := "smtp: greeting was 421 4.7.0: mx.test too busy, try later"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	f.check(t)
}

func TestBanner554QuitsPolitely(t *testing.T) {
	f := startFake(t, `
S: 554 5.7.1 no SMTP service for you
`+quit)
	_, err := dial(t, f, testOptions())
	var se *Error
	if !errors.As(err, &se) || se.Code != 554 || se.Class() != (Classification{Class: Policy}) {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}

func TestBannerTimeout(t *testing.T) {
	f := startFake(t, "HANG")
	opts := testOptions()
	opts.CommandTimeout = 100 * time.Millisecond
	_, err := dial(t, f, opts)
	var oe *OpError
	var ne net.Error
	if !errors.As(err, &oe) || oe.Command != CmdBanner || !oe.Timeout() ||
		!errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Dial: %#v", err)
	}
	f.check(t)
}

func TestSessionTimeout(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
HANG
`)
	opts := testOptions()
	// Only the session deadline can end the MAIL step before the fake
	// server's own 10 s; the command timeout is far longer.
	opts.CommandTimeout = time.Minute
	opts.SessionTimeout = 300 * time.Millisecond
	c := mustDial(t, f, opts)
	err := c.Mail("", false)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Command != CmdMail || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Mail: %v", err)
	}
	f.check(t)
}

func TestContextDeadline(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
HANG
`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	opts := testOptions()
	opts.CommandTimeout, opts.SessionTimeout = time.Minute, time.Hour
	c, err := Dial(ctx, newDialer(t), f.addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Mail("", false)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Mail: %v", err)
	}
	f.check(t)
}

func TestContextCancel(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
HANG
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := testOptions()
	opts.CommandTimeout = time.Minute
	c, err := Dial(ctx, newDialer(t), f.addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	err = c.Mail("", false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Mail: %v", err)
	}
	f.check(t)
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(context.Background(), newDialer(t), addr, testOptions())
	var oe *OpError
	if !errors.As(err, &oe) || oe.Command != CmdConnect {
		t.Fatalf("Dial: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{},
		{HeloName: "bad name"},
		{HeloName: "ok.test", CommandTimeout: -1},
		{HeloName: "ok.test", RequireTLS: true},
	} {
		if _, err := Dial(context.Background(), newDialer(t), "127.0.0.1:1", o); err == nil || errors.As(err, new(*OpError)) {
			t.Errorf("Dial(%+v) = %v, want an options error", o, err)
		}
	}
}

func TestQuitWaitsForServerToClose(t *testing.T) {
	// OPEN makes the fake fail if the client closes before the server does.
	f := startFake(t, greeting+`
C: QUIT
S: 221 2.0.0 bye
OPEN 200ms
CLOSE
`)
	c := mustDial(t, f, testOptions())
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestQuitServerNeverCloses(t *testing.T) {
	f := startFake(t, greeting+`
C: QUIT
S: 221 2.0.0 bye
EOF
`)
	opts := testOptions()
	opts.QuitWait = 50 * time.Millisecond
	c := mustDial(t, f, opts)
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t) // EOF: the client closed, after QuitWait, sending nothing more
}

func TestQuitOtherReply(t *testing.T) {
	f := startFake(t, greeting+`
C: QUIT
S: 250 2.0.0 whatever
CLOSE
`)
	c := mustDial(t, f, testOptions())
	var se *Error
	if err := c.Quit(); !errors.As(err, &se) || se.Code != 250 || se.Command != CmdQuit {
		t.Fatalf("Quit: %v", err)
	}
	f.check(t)
}

func TestMalformedReplyIsProtocolError(t *testing.T) {
	for name, raw := range map[string]string{
		"letters":    `"2x0 hello\r\n"`,
		"range":      `"199 hello\r\n"`,
		"mismatch":   `"220-mx.test\r\n221 done\r\n"`,
		"separator":  `"220_mx.test\r\n"`,
		"long line":  `"220 ` + strings.Repeat("x", 5000) + `\r\n"`,
		"many lines": `"` + strings.Repeat(`220-x\r\n`, 101) + `220 x\r\n"`,
	} {
		t.Run(name, func(t *testing.T) {
			f := startFake(t, "R: "+raw+"\nEOF")
			_, err := dial(t, f, testOptions())
			var oe *OpError
			if !errors.Is(err, ErrProtocol) || !errors.As(err, &oe) || oe.Command != CmdBanner {
				t.Fatalf("Dial: %v", err)
			}
			f.check(t)
		})
	}
}

func TestServerClosesMidReply(t *testing.T) {
	f := startFake(t, `
R: "220-mx.test\r\n"
CLOSE
`)
	_, err := dial(t, f, testOptions())
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}

func TestRcpt421ClosesSession(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
S: 250 ok
C: RCPT TO:<a@example.test>
S: 421 4.3.2 shutting down
OPEN 30ms
CLOSE
`)
	c := mustDial(t, f, testOptions())
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	r, err := c.Rcpt("a@example.test")
	var se *Error
	if !errors.As(err, &se) || se.Code != 421 || Classify(CmdRcpt, r).Class != ServiceUnavailable {
		t.Fatalf("Rcpt: %v", err)
	}
	if _, err := c.Rcpt("b@example.test"); !errors.Is(err, ErrClosed) {
		t.Errorf("Rcpt after 421: %v", err)
	}
	f.check(t)
}

func TestSequenceAndPathErrors(t *testing.T) {
	f := startFake(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 PIPELINING
C: MAIL FROM:<>
S: 250 ok
`+quit)
	c := mustDial(t, f, testOptions())
	if _, err := c.Rcpt("a@example.test"); !errors.Is(err, ErrSequence) {
		t.Errorf("Rcpt before Mail: %v", err)
	}
	if _, _, err := c.RcptMany([]string{"a@example.test"}); !errors.Is(err, ErrSequence) {
		t.Errorf("RcptMany before Mail: %v", err)
	}
	if err := c.Mail("", true); !errors.Is(err, ErrSMTPUTF8) {
		t.Errorf("Mail with SMTPUTF8 not announced: %v", err)
	}
	if err := c.Mail("x@y.test>\r\nRCPT TO:<z@y.test", false); !errors.Is(err, ErrBadPath) {
		t.Errorf("Mail with CRLF: %v", err)
	}
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("", false); !errors.Is(err, ErrSequence) {
		t.Errorf("Mail twice: %v", err)
	}
	if _, err := c.Rcpt("jörg@example.test"); !errors.Is(err, ErrSMTPUTF8) {
		t.Errorf("non-ASCII Rcpt without SMTPUTF8: %v", err)
	}
	if _, err := c.Rcpt(strings.Repeat("a", 250) + "@b.test"); !errors.Is(err, ErrBadPath) {
		t.Errorf("long Rcpt: %v", err)
	}
	if _, _, err := c.RcptMany([]string{"ok@example.test", "bad\n@example.test"}); !errors.Is(err, ErrBadPath) {
		t.Errorf("RcptMany with a bad address: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if err := c.Close(); err != nil {
		t.Errorf("Close after Quit: %v", err)
	}
}

func TestTranscriptLog(t *testing.T) {
	f := startFake(t, greeting+`
C: MAIL FROM:<>
S: 250 2.1.0 ok
`+quit)
	var buf bytes.Buffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := mustDial(t, f, opts)
	if err := c.Mail("", false); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	for _, want := range []string{
		`msg="smtp send" line="EHLO probe.verifyd.test"`,
		`msg="smtp send" line="MAIL FROM:<>"`,
		`msg="smtp reply" cmd=MAIL code=250 enhanced=2.1.0 lines=[ok]`,
		`msg="smtp reply" cmd=BANNER code=220`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestStartTLS(t *testing.T) {
	cert, pool := testCert(t)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			f := startFakeTLS(t, `
S: 220 mx.test ESMTP
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250-SIZE 1000
S: 250 STARTTLS
C: STARTTLS
S: 220 2.0.0 go ahead
TLS
C: EHLO probe.verifyd.test
S: 250-mx-tls.test
S: 250 PIPELINING
C: MAIL FROM:<>
S: 250 ok
`+quit, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: v, MaxVersion: v})
			opts := testOptions()
			opts.TLSConfig = &tls.Config{RootCAs: pool, ServerName: "mx.test"}
			opts.RequireTLS = true
			c := mustDial(t, f, opts)
			version, cipher, ok := c.TLSState()
			if !ok || version != tls.VersionName(v) {
				t.Errorf("TLSState = %q %q %v, want version %q", version, cipher, ok, tls.VersionName(v))
			}
			ext := c.Extensions()
			if c.EHLOHost() != "mx-tls.test" || ext.StartTLS || ext.HasSize || !ext.Pipelining {
				t.Errorf("after TLS: EHLOHost %q, Extensions %+v (must be the post-TLS ones)", c.EHLOHost(), ext)
			}
			if err := c.Mail("", false); err != nil {
				t.Fatal(err)
			}
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
			f.check(t)
			if want := tls.CipherSuiteName(f.tlsState.CipherSuite); cipher != want {
				t.Errorf("cipher %q, server says %q", cipher, want)
			}
		})
	}
}

// TestStartTLSResumes: a second session to the same host name resumes the
// first one's TLS session from the shared ClientSessionCache, in TLS 1.2
// (session ticket) and 1.3 (PSK from a NewSessionTicket read after the
// handshake); a host of another name gets a full handshake.
func TestStartTLSResumes(t *testing.T) {
	cert, pool := testCert(t)
	script := `
S: 220 mx.test ESMTP
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 STARTTLS
C: STARTTLS
S: 220 2.0.0 go ahead
TLS
C: EHLO probe.verifyd.test
S: 250-mx-tls.test
S: 250 PIPELINING
` + quit
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			server := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: v, MaxVersion: v}
			cache := tls.NewLRUClientSessionCache(8)
			for i, want := range []struct {
				name    string
				resumed bool
			}{{"mx.test", false}, {"mx.test", true}, {"other.test", false}, {"mx.test", true}} {
				f := startFakeTLS(t, script, server)
				opts := testOptions()
				opts.TLSConfig = &tls.Config{RootCAs: pool, ServerName: want.name, InsecureSkipVerify: true, ClientSessionCache: cache}
				c := mustDial(t, f, opts)
				if _, _, ok := c.TLSState(); !ok {
					t.Fatalf("session %d: no TLS", i)
				}
				if c.TLSResumed() != want.resumed || f.tlsState.DidResume != want.resumed {
					t.Errorf("session %d to %s: resumed %v (server: %v), want %v", i, want.name, c.TLSResumed(), f.tlsState.DidResume, want.resumed)
				}
				if err := c.Quit(); err != nil {
					t.Fatal(err)
				}
				f.check(t)
			}
		})
	}
}

func TestStartTLSNotConfigured(t *testing.T) {
	f := startFake(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 STARTTLS
`+quit)
	c := mustDial(t, f, testOptions())
	if _, _, ok := c.TLSState(); ok {
		t.Error("TLS without TLSConfig")
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestStartTLSRefused(t *testing.T) {
	const script = `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 STARTTLS
C: STARTTLS
S: 454 4.7.0 TLS not available now
`
	t.Run("opportunistic", func(t *testing.T) {
		f := startFake(t, script+quit)
		opts := testOptions()
		opts.TLSConfig = &tls.Config{InsecureSkipVerify: true}
		c := mustDial(t, f, opts)
		if _, _, ok := c.TLSState(); ok {
			t.Error("TLSState ok after 454")
		}
		if err := c.Quit(); err != nil {
			t.Fatal(err)
		}
		f.check(t)
	})
	t.Run("required", func(t *testing.T) {
		f := startFake(t, script+quit)
		opts := testOptions()
		opts.TLSConfig = &tls.Config{InsecureSkipVerify: true}
		opts.RequireTLS = true
		_, err := dial(t, f, opts)
		var se *Error
		if !errors.As(err, &se) || se.Code != 454 || se.Command != CmdStartTLS {
			t.Fatalf("Dial: %v", err)
		}
		f.check(t)
	})
}

func TestRequireTLSNotOffered(t *testing.T) {
	f := startFake(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250 mx.test
`+quit)
	opts := testOptions()
	opts.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	opts.RequireTLS = true
	_, err := dial(t, f, opts)
	if !errors.Is(err, ErrTLSRequired) {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}

func TestStartTLSHandshakeFails(t *testing.T) {
	cert, _ := testCert(t)
	f := startFakeTLS(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 STARTTLS
C: STARTTLS
S: 220 go ahead
TLSFAIL
`, &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12})
	opts := testOptions()
	opts.TLSConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	_, err := dial(t, f, opts)
	var oe *OpError
	if !errors.Is(err, ErrTLSHandshake) || !errors.As(err, &oe) || oe.Command != CmdStartTLS {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}

func TestStartTLSInjection(t *testing.T) {
	f := startFake(t, `
S: 220 mx.test
C: EHLO probe.verifyd.test
S: 250-mx.test
S: 250 STARTTLS
C: STARTTLS
R: "220 go ahead\r\n250 injected before the handshake\r\n"
EOF
`)
	opts := testOptions()
	opts.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	_, err := dial(t, f, opts)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Dial: %v", err)
	}
	f.check(t)
}
