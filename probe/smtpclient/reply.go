package smtpclient

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
)

// Reply codes (RFC 5321 §4.2.2, §4.2.3) that the client and the classifier
// name. A reply's first digit says how it ended (2 done, 3 go on, 4 try again
// later, 5 never); the enhanced status code (RFC 3463) says why.
const (
	CodeServiceReady            = 220 // greeting; also "go ahead" to STARTTLS (RFC 3207)
	CodeServiceClosing          = 221 // answer to QUIT
	CodeOK                      = 250
	CodeUserNotLocalWillForward = 251
	CodeCannotVerify            = 252
	CodeServiceUnavailable      = 421 // the server is closing the channel
	CodeMailboxUnavailableTemp  = 450 // mailbox busy, greylisted
	CodeLocalError              = 451
	CodeInsufficientStorage     = 452 // also "too many recipients" (RFC 5321 §4.5.3.1.10)
	CodeTLSNotAvailable         = 454 // RFC 3207 §4
	CodeSyntaxError             = 500 // command unrecognised (EHLO unknown: fall back to HELO)
	CodeParamSyntaxError        = 501
	CodeNotImplemented          = 502 // command not implemented (EHLO unknown: fall back to HELO)
	CodeBadSequence             = 503
	CodeParamNotImplemented     = 504
	CodeMailboxUnavailable      = 550 // mailbox not found, no access, or policy
	CodeUserNotLocal            = 551
	CodeExceededStorage         = 552
	CodeMailboxNameNotAllowed   = 553
	CodeTransactionFailed       = 554 // also "no SMTP service here" as a greeting (§3.1)
	CodeParamsNotRecognized     = 555
)

// Bounds that keep a hostile server from making the client buffer without
// end. RFC 5321 §4.5.3.1.5 allows 512 octets in a reply line; real servers
// exceed it, so the client tolerates eight times as much.
const (
	// MaxLineLen is the longest reply line read, CRLF included.
	MaxLineLen = 4096
	// MaxLines is the most lines one reply may have.
	MaxLines = 100
)

// Enhanced is an enhanced mail system status code, class.subject.detail
// (RFC 3463 §2), such as 5.1.1. The zero value means the reply carried none.
type Enhanced struct {
	Class, Subject, Detail int
}

// IsZero reports whether e is absent.
func (e Enhanced) IsZero() bool { return e.Class == 0 }

// String returns "5.1.1", or "" for an absent code.
func (e Enhanced) String() string {
	if e.IsZero() {
		return ""
	}
	return string(e.appendTo(make([]byte, 0, 12)))
}

func (e Enhanced) appendTo(b []byte) []byte {
	b = strconv.AppendInt(b, int64(e.Class), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(e.Subject), 10)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(e.Detail), 10)
}

// Reply is one SMTP reply (RFC 5321 §4.2): a three-digit code and one or
// more lines of text.
type Reply struct {
	// Code is the reply code, 200 to 599.
	Code int
	// Enhanced is the enhanced status code at the start of the first line's
	// text, when there is one whose class matches the code's first digit
	// (RFC 3463 §2, RFC 2034 §4); zero otherwise.
	Enhanced Enhanced
	// Lines holds the text of each line without the code, the separator,
	// an enhanced status code at its start, and the line ending; control
	// characters other than tab are replaced by '?'. There is at least one
	// line; its text may be empty.
	Lines []string
}

// Text returns the reply's lines joined by a space.
func (r Reply) Text() string {
	switch len(r.Lines) {
	case 0:
		return ""
	case 1:
		return r.Lines[0]
	}
	n := len(r.Lines) - 1
	for _, l := range r.Lines {
		n += len(l)
	}
	b := make([]byte, 0, n)
	for i, l := range r.Lines {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, l...)
	}
	return string(b)
}

// ParseReply parses data as exactly one complete reply, as the client reads
// it from a server (see Reply); for tests, tools and the simulated world.
// Malformed input gives an error that matches ErrProtocol, input that ends
// mid-reply one that matches io.ErrUnexpectedEOF.
func ParseReply(data []byte) (Reply, error) {
	br := bufio.NewReaderSize(bytes.NewReader(data), MaxLineLen)
	rr := replyReader{r: br}
	r, err := rr.read()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Reply{}, err
	}
	if br.Buffered() > 0 {
		return Reply{}, protoErr("data after the last line of the reply")
	}
	return r, nil
}

// replyReader reads replies from r, reusing its buffers: each reply costs
// two allocations, one string that holds every line's text and the Lines
// slice that points into it.
type replyReader struct {
	r    *bufio.Reader
	text []byte // the texts of the lines read so far, back to back
	ends []int  // where each line's text ends in text
}

// read reads one reply. An error is either a transport error from the
// underlying reader (io.EOF when the server closed before the reply began,
// io.ErrUnexpectedEOF when it closed inside one) or a protocol error;
// after either the stream is out of step and must be closed.
func (rr *replyReader) read() (Reply, error) {
	rr.text = rr.text[:0]
	rr.ends = rr.ends[:0]
	code := 0
	var enh Enhanced
	for n := 0; ; n++ {
		if n == MaxLines {
			return Reply{}, protoErr("more than 100 lines")
		}
		line, err := rr.r.ReadSlice('\n')
		if err != nil {
			if err == bufio.ErrBufferFull {
				return Reply{}, protoErr("line longer than 4096 bytes")
			}
			if err == io.EOF && (n > 0 || len(line) > 0) {
				err = io.ErrUnexpectedEOF
			}
			return Reply{}, err
		}
		line = line[:len(line)-1]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) < 3 || !isDigit(line[0]) || !isDigit(line[1]) || !isDigit(line[2]) {
			return Reply{}, protoErr("reply code is not three digits")
		}
		c := int(line[0]-'0')*100 + int(line[1]-'0')*10 + int(line[2]-'0')
		if c < 200 || c > 599 {
			return Reply{}, protoErr("reply code out of range 200-599")
		}
		if n == 0 {
			code = c
		} else if c != code {
			return Reply{}, protoErr("reply lines carry different codes")
		}
		last := true
		if len(line) > 3 {
			switch line[3] {
			case ' ':
			case '-':
				last = false
			default:
				return Reply{}, protoErr("reply code not followed by space or hyphen")
			}
			line = line[4:]
		} else {
			line = line[3:]
		}
		e, skip := parseEnhanced(line, code/100)
		if n == 0 {
			enh = e
		}
		for _, b := range line[skip:] {
			if (b < 0x20 && b != '\t') || b == 0x7f {
				b = '?'
			}
			rr.text = append(rr.text, b)
		}
		rr.ends = append(rr.ends, len(rr.text))
		if last {
			break
		}
	}
	s := string(rr.text)
	lines := make([]string, len(rr.ends))
	start := 0
	for i, end := range rr.ends {
		lines[i] = s[start:end]
		start = end
	}
	return Reply{Code: code, Enhanced: enh, Lines: lines}, nil
}

// parseEnhanced recognises an enhanced status code at the start of text
// (RFC 3463 §2: class "." subject "." detail, subject and detail of one to
// three digits), only when its class is class (RFC 2034 §4: it repeats the
// reply code's first digit) and is 2, 4 or 5, and only when a space, a tab
// or the end of the text follows it. It returns the code and how many bytes
// it takes, with the blanks after it; a zero Enhanced and 0 otherwise.
func parseEnhanced(text []byte, class int) (Enhanced, int) {
	if class != 2 && class != 4 && class != 5 {
		return Enhanced{}, 0
	}
	if len(text) < 5 || text[0] != byte('0'+class) || text[1] != '.' {
		return Enhanced{}, 0
	}
	subject, i := atoi3(text, 2)
	if i < 0 || i >= len(text) || text[i] != '.' {
		return Enhanced{}, 0
	}
	detail, j := atoi3(text, i+1)
	if j < 0 || (j < len(text) && text[j] != ' ' && text[j] != '\t') {
		return Enhanced{}, 0
	}
	for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
		j++
	}
	return Enhanced{Class: class, Subject: subject, Detail: detail}, j
}

// atoi3 reads one to three digits at b[i:], returning the number and the
// index after it, or -1 when there is no digit or more than three.
func atoi3(b []byte, i int) (int, int) {
	v, start := 0, i
	for i < len(b) && isDigit(b[i]) {
		if i-start == 3 {
			return 0, -1
		}
		v = v*10 + int(b[i]-'0')
		i++
	}
	if i == start {
		return 0, -1
	}
	return v, i
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
