package smtpclient

import (
	"errors"
	"net"
	"strconv"
	"unicode/utf8"
)

// Sentinels for errors.Is. The client never returns them bare: they come
// wrapped in an *OpError that names the command.
var (
	// ErrProtocol: the server's reply broke RFC 5321 §4.2 (see ParseReply),
	// or the server sent data where it must not (after the 220 to STARTTLS).
	ErrProtocol = errors.New("smtpclient: malformed reply")
	// ErrTLSHandshake: the TLS handshake after STARTTLS failed. The
	// connection is closed; the caller may try again without TLS.
	ErrTLSHandshake = errors.New("smtpclient: tls handshake failed")
	// ErrTLSRequired: Options.RequireTLS is set and the server does not
	// offer STARTTLS, or refused it.
	ErrTLSRequired = errors.New("smtpclient: tls required but not available")
	// ErrSMTPUTF8: an address needs SMTPUTF8 (RFC 6531) and the server or
	// the transaction does not have it.
	ErrSMTPUTF8 = errors.New("smtpclient: smtputf8 not available")
	// ErrBadPath: an address cannot go into MAIL FROM or RCPT TO: it holds
	// control characters or is longer than 254 octets (RFC 5321 §4.5.3.1.3).
	ErrBadPath = errors.New("smtpclient: address not usable in a path")
	// ErrSequence: a method was called in a state where its command is not
	// allowed (RCPT before MAIL, MAIL inside a transaction).
	ErrSequence = errors.New("smtpclient: command out of sequence")
	// ErrClosed: the connection is closed.
	ErrClosed = errors.New("smtpclient: connection closed")
)

// Error is an SMTP reply that refused a command: what the engine's verdict
// is made of. Classify it with its Class method, never by its text.
type Error struct {
	// Code is the reply code (RFC 5321 §4.2).
	Code int
	// Enhanced is the enhanced status code (RFC 3463), zero when absent.
	Enhanced Enhanced
	// Command is the command the reply answered: CmdBanner for the
	// greeting, otherwise the SMTP verb (CmdEHLO, CmdRcpt, ...).
	Command string
	// Line is the reply's text, its lines joined by a space, cut at 512
	// bytes; for people and logs only.
	Line string
}

const maxErrorLine = 512

func newError(cmd string, r Reply) *Error {
	line := r.Text()
	if len(line) > maxErrorLine {
		cut := maxErrorLine
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut]
	}
	return &Error{Code: r.Code, Enhanced: r.Enhanced, Command: cmd, Line: line}
}

// Error returns, for example, "smtp: RCPT answered 550 5.1.1: no such user".
func (e *Error) Error() string {
	b := make([]byte, 0, 40+len(e.Line))
	b = append(b, "smtp: "...)
	if e.Command == CmdBanner {
		b = append(b, "greeting was "...)
	} else {
		b = append(b, e.Command...)
		b = append(b, " answered "...)
	}
	b = strconv.AppendInt(b, int64(e.Code), 10)
	if !e.Enhanced.IsZero() {
		b = append(b, ' ')
		b = e.Enhanced.appendTo(b)
	}
	if e.Line != "" {
		b = append(b, ": "...)
		b = append(b, e.Line...)
	}
	return string(b)
}

// Temporary reports whether the reply was a 4xx: the same command may
// succeed later.
func (e *Error) Temporary() bool { return e.Code/100 == 4 }

// Class classifies the reply as Classify does.
func (e *Error) Class() Classification {
	return Classify(e.Command, Reply{Code: e.Code, Enhanced: e.Enhanced})
}

// OpError is a failure that is not an SMTP reply: the connection could not
// be made, a read or write failed or timed out, the server broke the
// protocol, the TLS handshake failed, or the client was misused. Err keeps
// the cause for errors.Is and errors.As: os.ErrDeadlineExceeded and
// net.Error for timeouts, context.Canceled or context.DeadlineExceeded
// when the context ended the session, io.EOF or io.ErrUnexpectedEOF when
// the server closed, and this package's sentinels.
type OpError struct {
	// Command is the step that failed: CmdConnect, CmdBanner or an SMTP verb.
	Command string
	// Err is the cause.
	Err error
}

func (e *OpError) Error() string { return "smtpclient: " + e.Command + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// Timeout reports whether a deadline (per command, per session or the
// context's) ended the step.
func (e *OpError) Timeout() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// detail wraps a cause with a message and a kind that errors.Is matches;
// it keeps sentinel messages from repeating the package prefix.
type detail struct {
	kind error
	msg  string
	err  error
}

func (d *detail) Error() string {
	if d.err != nil {
		return d.msg + ": " + d.err.Error()
	}
	return d.msg
}

func (d *detail) Is(target error) bool { return target == d.kind }
func (d *detail) Unwrap() error        { return d.err }

func protoErr(msg string) error {
	return &detail{kind: ErrProtocol, msg: "malformed reply: " + msg}
}
