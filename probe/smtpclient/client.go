package smtpclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/verifyd/verifyd/internal/phase"
)

// Command names, as they appear in Error.Command and OpError.Command and as
// Classify takes them. CmdConnect and CmdBanner name steps that are not
// commands: the TCP connection and the server's greeting.
const (
	CmdConnect  = "CONNECT"
	CmdBanner   = "BANNER"
	CmdEHLO     = "EHLO"
	CmdHELO     = "HELO"
	CmdStartTLS = "STARTTLS"
	CmdMail     = "MAIL"
	CmdRcpt     = "RCPT"
	CmdRset     = "RSET"
	CmdQuit     = "QUIT"
)

// Dialer makes the TCP connection. The egress package supplies one bound to
// a source address; *net.Dialer satisfies it.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Defaults for the Options fields left zero.
const (
	DefaultCommandTimeout = 30 * time.Second
	DefaultSessionTimeout = 2 * time.Minute
	DefaultQuitWait       = time.Second
)

// Options configure one session.
type Options struct {
	// HeloName is the name the client gives in EHLO and HELO; it should be
	// the egress address's reverse DNS name. Required.
	HeloName string
	// CommandTimeout bounds each step: the connection, the greeting, each
	// command and its reply, the TLS handshake. Default 30 s.
	CommandTimeout time.Duration
	// GreetingTimeout bounds the wait for the server's greeting, which RFC
	// 5321 §4.5.3.2.1 lets take 5 minutes (busy servers delay it on
	// purpose). Default CommandTimeout; never less than it.
	GreetingTimeout time.Duration
	// SessionTimeout bounds the whole session from Dial on; the context's
	// deadline, when earlier, wins. Default 2 min.
	SessionTimeout time.Duration
	// QuitWait bounds how long Quit waits, after the 221, for the server to
	// close the connection first. Default 1 s.
	QuitWait time.Duration
	// TLSConfig, when set, makes the client say STARTTLS when the server
	// offers it. It is used as is (set ServerName or InsecureSkipVerify as
	// the probe needs). Nil: never STARTTLS.
	TLSConfig *tls.Config
	// RequireTLS makes Dial fail with ErrTLSRequired when the session
	// cannot be protected by TLS. It needs TLSConfig.
	RequireTLS bool
	// Logger receives the transcript at debug level: every command sent
	// and every reply read. Nil: no transcript.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.HeloName == "" {
		return o, errors.New("smtpclient: Options.HeloName is empty")
	}
	for i := 0; i < len(o.HeloName); i++ {
		if b := o.HeloName[i]; b <= ' ' || b >= 0x7f {
			return o, errors.New("smtpclient: Options.HeloName holds a blank, control or non-ASCII character")
		}
	}
	if o.CommandTimeout < 0 || o.SessionTimeout < 0 || o.QuitWait < 0 || o.GreetingTimeout < 0 {
		return o, errors.New("smtpclient: negative timeout in Options")
	}
	if o.RequireTLS && o.TLSConfig == nil {
		return o, errors.New("smtpclient: Options.RequireTLS needs Options.TLSConfig")
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	o.GreetingTimeout = max(o.GreetingTimeout, o.CommandTimeout)
	if o.QuitWait == 0 {
		o.QuitWait = DefaultQuitWait
	}
	return o, nil
}

type state uint8

const (
	stateReady  state = iota // greeted and said EHLO/HELO; no transaction
	stateMail                // MAIL accepted: RCPT allowed
	stateClosed              // connection closed, for whatever reason
)

// buffers are the per-connection buffers, pooled across sessions.
type buffers struct {
	rr replyReader
	w  *bufio.Writer
}

var bufPool = sync.Pool{New: func() any {
	return &buffers{
		rr: replyReader{r: bufio.NewReaderSize(nil, MaxLineLen), text: make([]byte, 0, 512), ends: make([]int, 0, 16)},
		w:  bufio.NewWriterSize(nil, 4096),
	}
}}

// Client is one SMTP session. It is not safe for concurrent use; to abort a
// session from elsewhere, cancel the context given to Dial: the step under
// way fails at once with the context's error.
type Client struct {
	opts Options
	ctx  context.Context
	stop func() bool // unregisters the context's AfterFunc

	raw  net.Conn // the TCP connection (under TLS, if any), closed by Close
	bufs *buffers
	rr   *replyReader
	w    *bufio.Writer

	deadline    time.Time // session deadline: start+SessionTimeout or ctx's, the earlier
	ctxDeadline time.Time // zero when the context has none
	debug       bool

	state    state
	accepted int  // recipients accepted in the current transaction
	utf8     bool // the current transaction was opened with SMTPUTF8
	// mailPending: MailPipelined buffered a MAIL whose reply is unread; the
	// next RCPT batch sends it and reads its reply first.
	mailPending bool
	// resetPending: ResetPipelined buffered a RSET whose reply is unread;
	// it goes out with the next MAIL and RCPTs, and its reply is read
	// before theirs.
	resetPending bool

	// refusals counts the replies of 4xx and 5xx the server gave:
	// servers count them as the client's errors (Postfix's
	// smtpd_soft_error_limit, 10 by default, delays each reply after
	// that many; smtpd_hard_error_limit, 20, ends the session).
	refusals int

	banner               string // the greeting's first line, bounded
	bannerHost, ehloHost string
	ext                  Extensions
	tlsVersion, tlsCiph  string
	tlsOK, tlsResumed    bool
	local, remote        net.Addr
}

// aLongTimeAgo is a deadline in the past: setting it wakes a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// Dial connects to addr ("host:port") through d and walks the session to
// the point where a mail transaction can begin: greeting, EHLO (or HELO),
// STARTTLS and EHLO again when offered and configured. On failure the
// connection is closed, politely (QUIT) when the server is still talking;
// the error is an *Error for a refusing reply and an *OpError otherwise.
// ctx bounds and can cancel the whole session, not only Dial.
func Dial(ctx context.Context, d Dialer, addr string, opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c := &Client{opts: opts, ctx: ctx, deadline: now.Add(opts.SessionTimeout)}
	if dl, ok := ctx.Deadline(); ok {
		c.ctxDeadline = dl
		if dl.Before(c.deadline) {
			c.deadline = dl
		}
	}
	dialDeadline := now.Add(opts.CommandTimeout)
	if c.deadline.Before(dialDeadline) {
		dialDeadline = c.deadline
	}
	dctx, cancel := context.WithDeadline(ctx, dialDeadline)
	t := time.Now()
	conn, err := d.DialContext(dctx, "tcp", addr)
	cancel()
	phase.Since(phase.Connect, t)
	if err != nil {
		return nil, &OpError{Command: CmdConnect, Err: c.ctxCause(err)}
	}
	c.raw = conn
	c.local, c.remote = conn.LocalAddr(), conn.RemoteAddr()
	c.bufs = bufPool.Get().(*buffers)
	c.rr = &c.bufs.rr
	c.rr.r.Reset(conn)
	c.w = c.bufs.w
	c.w.Reset(conn)
	c.debug = opts.Logger != nil && opts.Logger.Enabled(ctx, slog.LevelDebug)
	if ctx.Done() != nil {
		c.stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	}
	if err := c.open(); err != nil {
		return nil, c.abort(err)
	}
	return c, nil
}

// open reads the greeting, says EHLO and, when it can, STARTTLS.
func (c *Client) open() error {
	c.armFor(c.opts.GreetingTimeout)
	t := time.Now()
	r, err := c.rr.read()
	phase.Since(phase.Banner, t)
	if err != nil {
		return c.fail(CmdBanner, err)
	}
	if c.debug {
		c.opts.Logger.LogAttrs(c.ctx, slog.LevelDebug, "smtp reply",
			slog.String("cmd", CmdBanner), slog.Int("code", r.Code), slog.Any("lines", r.Lines))
	}
	if r.Code != CodeServiceReady {
		// RFC 5321 §3.1: 554 means no service here; the client should
		// still QUIT, which abort does. 421 closes at once.
		return c.refused(CmdBanner, r)
	}
	c.banner = r.Lines[0]
	if len(c.banner) > maxBannerLen {
		c.banner = c.banner[:maxBannerLen]
	}
	c.bannerHost = firstWord(c.banner)
	t = time.Now()
	err = c.hello()
	phase.Since(phase.EHLO, t)
	if err != nil {
		return err
	}
	if c.opts.TLSConfig != nil && c.ext.StartTLS {
		t = time.Now()
		err := c.startTLS()
		phase.Since(phase.StartTLS, t)
		if err != nil {
			return err
		}
	}
	if c.opts.RequireTLS && !c.tlsOK {
		return &OpError{Command: CmdStartTLS, Err: &detail{kind: ErrTLSRequired, msg: "tls required but not available"}}
	}
	return nil
}

// hello says EHLO, and HELO when the server does not know EHLO (RFC 5321
// §4.1.4: 500 or 502).
func (c *Client) hello() error {
	r, err := c.cmd(CmdEHLO, "EHLO ", c.opts.HeloName, "")
	if err != nil {
		return err
	}
	if r.Code/100 == 2 {
		c.ehloHost, c.ext = ParseEHLO(r)
		return nil
	}
	if r.Code != CodeSyntaxError && r.Code != CodeNotImplemented {
		return c.refused(CmdEHLO, r)
	}
	r, err = c.cmd(CmdHELO, "HELO ", c.opts.HeloName, "")
	if err != nil {
		return err
	}
	if r.Code/100 != 2 {
		return c.refused(CmdHELO, r)
	}
	c.ehloHost, c.ext = firstWord(r.Lines[0]), Extensions{}
	return nil
}

// startTLS says STARTTLS (RFC 3207 §4), shakes hands, forgets what the
// server said in the clear and says EHLO again (§4.2). A refusal (454) is
// not an error unless TLS is required: the session goes on in the clear.
func (c *Client) startTLS() error {
	r, err := c.cmd(CmdStartTLS, "STARTTLS", "", "")
	if err != nil {
		return err
	}
	if r.Code != CodeServiceReady {
		if r.Code == CodeServiceUnavailable || c.opts.RequireTLS {
			return c.refused(CmdStartTLS, r)
		}
		return nil
	}
	if c.rr.r.Buffered() > 0 {
		// Anything the server sent after its 220 and before the handshake
		// would be read as if it came over TLS (RFC 3207 §6; the STARTTLS
		// command injection family, CVE-2011-0411).
		return c.fail(CmdStartTLS, protoErr("data after the 220 to STARTTLS"))
	}
	tc := tls.Client(c.raw, c.opts.TLSConfig)
	c.arm()
	if err := tc.Handshake(); err != nil {
		return c.fail(CmdStartTLS, &detail{kind: ErrTLSHandshake, msg: "tls handshake failed", err: err})
	}
	st := tc.ConnectionState()
	c.tlsVersion, c.tlsCiph, c.tlsOK = tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), true
	c.tlsResumed = st.DidResume
	c.rr.r.Reset(tc)
	c.w.Reset(tc)
	c.ext = Extensions{}
	return c.hello()
}

// Mail opens a transaction: MAIL FROM:<from> (RFC 5321 §4.1.1.2); from ""
// is the null reverse-path. With smtputf8 the command carries the SMTPUTF8
// parameter (RFC 6531 §3.4), which the server must have announced; without
// it, from and the recipients must be ASCII. A refusal is an *Error.
func (c *Client) Mail(from string, smtputf8 bool) error {
	if err := c.need(CmdMail, stateReady); err != nil {
		return err
	}
	if err := c.settleMail(); err != nil { // a pipelined RSET
		return err
	}
	if smtputf8 && !c.ext.SMTPUTF8 {
		return &OpError{Command: CmdMail, Err: &detail{kind: ErrSMTPUTF8, msg: "smtputf8 not announced by the server"}}
	}
	if err := checkPath(CmdMail, from, smtputf8); err != nil {
		return err
	}
	suffix := ">"
	if smtputf8 {
		suffix = "> SMTPUTF8"
	}
	r, err := c.cmd(CmdMail, "MAIL FROM:<", from, suffix)
	if err != nil {
		return err
	}
	if r.Code/100 != 2 {
		return c.refused(CmdMail, r)
	}
	c.state, c.accepted, c.utf8 = stateMail, 0, smtputf8
	return nil
}

// MailPipelined is Mail for a server that announced PIPELINING (RFC 2920):
// MAIL FROM is buffered, not sent, and goes out with the first RCPTs of
// RcptMany (or Rcpt), saving a round trip; its reply is read first there,
// and a refusal comes back from that call as the MAIL's *Error. Without
// PIPELINING it is Mail.
func (c *Client) MailPipelined(from string, smtputf8 bool) error {
	if !c.ext.Pipelining {
		return c.Mail(from, smtputf8)
	}
	if err := c.need(CmdMail, stateReady); err != nil {
		return err
	}
	if smtputf8 && !c.ext.SMTPUTF8 {
		return &OpError{Command: CmdMail, Err: &detail{kind: ErrSMTPUTF8, msg: "smtputf8 not announced by the server"}}
	}
	if err := checkPath(CmdMail, from, smtputf8); err != nil {
		return err
	}
	suffix := ">"
	if smtputf8 {
		suffix = "> SMTPUTF8"
	}
	c.write(CmdMail, "MAIL FROM:<", from, suffix)
	c.state, c.accepted, c.utf8, c.mailPending = stateMail, 0, smtputf8, true
	return nil
}

// settleMail sends a pipelined MAIL that no RCPT followed and reads its
// reply, before RSET or QUIT; its refusal no longer matters then.
func (c *Client) settleMail() error {
	if !c.mailPending && !c.resetPending {
		return nil
	}
	c.arm()
	if err := c.w.Flush(); err != nil {
		c.mailPending, c.resetPending = false, false
		return c.fail(CmdMail, err)
	}
	if err := c.resetReply(); err != nil {
		return err
	}
	if !c.mailPending {
		return nil
	}
	var se *Error
	if err := c.mailReply(0); err != nil && !errors.As(err, &se) {
		return err
	}
	return nil
}

// ResetPipelined is Reset for a server that announced PIPELINING (RFC
// 2920 lets RSET go anywhere in a group): RSET is buffered, not sent,
// and goes out with the next MAIL and RCPTs, saving a round trip; its
// reply is read first there. A refusal of RSET, which RFC 5321
// §4.1.1.5 does not allow, ends the session: the replies after it could
// not be trusted. Without PIPELINING it is Reset.
func (c *Client) ResetPipelined() error {
	if !c.ext.Pipelining {
		return c.Reset()
	}
	if c.state == stateClosed {
		return &OpError{Command: CmdRset, Err: ErrClosed}
	}
	if err := c.settleMail(); err != nil { // a MAIL no RCPT followed
		return err
	}
	c.write(CmdRset, "RSET", "", "")
	c.state, c.accepted, c.utf8, c.resetPending = stateReady, 0, false, true
	return nil
}

// resetReply reads the reply of a pipelined RSET once the group carrying
// it was flushed.
func (c *Client) resetReply() error {
	if !c.resetPending {
		return nil
	}
	c.resetPending = false
	r, err := c.reply(CmdRset)
	if err != nil {
		return err
	}
	if r.Code/100 == 2 {
		return nil
	}
	if r.Code == CodeServiceUnavailable {
		return c.refused(CmdRset, r)
	}
	_ = c.Close()
	return newError(CmdRset, r)
}

// mailReply reads the reply of a pipelined MAIL once the batch carrying it
// was flushed; n is the number of RCPTs flushed with it, whose replies are
// read and dropped when MAIL was refused.
func (c *Client) mailReply(n int) error {
	c.mailPending = false
	r, err := c.reply(CmdMail)
	if err != nil {
		return err
	}
	if r.Code/100 == 2 {
		return nil
	}
	c.state = stateReady
	if r.Code != CodeServiceUnavailable {
		for range n {
			if _, err := c.reply(CmdRcpt); err != nil {
				break
			}
		}
	}
	return c.refused(CmdMail, r)
}

// Rcpt says RCPT TO:<to> (RFC 5321 §4.1.1.3) and returns the reply, which
// Classify (or ClassifyRcpt) turns into a verdict. A reply that is not 2xx
// also comes back as an *Error; a transport failure as an *OpError with a
// zero Reply.
func (c *Client) Rcpt(to string) (Reply, error) {
	if err := c.need(CmdRcpt, stateMail); err != nil {
		return Reply{}, err
	}
	if err := checkPath(CmdRcpt, to, c.utf8); err != nil {
		return Reply{}, err
	}
	if c.mailPending {
		c.arm()
		c.write(CmdRcpt, "RCPT TO:<", to, ">")
		if err := c.w.Flush(); err != nil {
			return Reply{}, c.fail(CmdRcpt, err)
		}
		if err := c.resetReply(); err != nil {
			return Reply{}, err
		}
		if err := c.mailReply(1); err != nil {
			return Reply{}, err
		}
		r, err := c.reply(CmdRcpt)
		if err != nil {
			return Reply{}, err
		}
		if r.Code/100 != 2 {
			return r, c.refused(CmdRcpt, r)
		}
		c.accepted++
		return r, nil
	}
	r, err := c.cmd(CmdRcpt, "RCPT TO:<", to, ">")
	if err != nil {
		return Reply{}, err
	}
	if r.Code/100 != 2 {
		return r, c.refused(CmdRcpt, r)
	}
	c.accepted++
	return r, nil
}

// Reset says RSET (RFC 5321 §4.1.1.5), ending the transaction; MAIL may
// follow.
func (c *Client) Reset() error {
	if c.state == stateClosed {
		return &OpError{Command: CmdRset, Err: ErrClosed}
	}
	if err := c.settleMail(); err != nil {
		return err
	}
	r, err := c.cmd(CmdRset, "RSET", "", "")
	if err != nil {
		return err
	}
	if r.Code/100 != 2 {
		return c.refused(CmdRset, r)
	}
	c.state, c.accepted, c.utf8 = stateReady, 0, false
	return nil
}

// Quit says QUIT (RFC 5321 §4.1.1.10), reads the 221 and then waits, at
// most Options.QuitWait, for the server to close the connection before
// closing its own side: the side that closes first keeps the TIME_WAIT,
// and the prober must not pile them on its few source addresses. The
// connection is closed when Quit returns, whatever happened.
func (c *Client) Quit() error {
	if c.state == stateClosed {
		return &OpError{Command: CmdQuit, Err: ErrClosed}
	}
	if err := c.settleMail(); err != nil {
		return err
	}
	r, err := c.cmd(CmdQuit, "QUIT", "", "")
	if err != nil {
		return err
	}
	c.waitClose()
	if r.Code != CodeServiceClosing {
		return newError(CmdQuit, r)
	}
	return nil
}

// Detach unbinds the session from the context Dial was given, so that what
// is left of it (a QUIT) may go on after that context ends, within a
// deadline of its own: one CommandTimeout from now. The caller that detaches
// is the one that finishes the session.
func (c *Client) Detach() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	c.ctx = context.Background()
	c.ctxDeadline = time.Time{}
	c.deadline = time.Now().Add(c.opts.CommandTimeout)
}

// Attach binds a detached session to ctx for its next steps, as Dial
// does: ctx can cancel it, and the session's deadline becomes one
// SessionTimeout from now or ctx's deadline, the earlier. A session kept
// open between two uses is detached, then attached by its next user.
func (c *Client) Attach(ctx context.Context) {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	c.ctx = ctx
	c.ctxDeadline = time.Time{}
	c.deadline = time.Now().Add(c.opts.SessionTimeout)
	if dl, ok := ctx.Deadline(); ok {
		c.ctxDeadline = dl
		c.deadline = minTime(c.deadline, dl)
	}
	if ctx.Done() != nil && c.raw != nil {
		raw := c.raw
		c.stop = context.AfterFunc(ctx, func() { _ = raw.SetDeadline(aLongTimeAgo) })
	}
}

// Refusals is how many replies of 4xx and 5xx the server gave in the
// session: what servers count as the client's errors.
func (c *Client) Refusals() int { return c.refusals }

// Close closes the connection at once, without QUIT: for aborting. It is
// safe to call more than once, and after Quit.
func (c *Client) Close() error {
	if c.bufs == nil {
		return nil
	}
	c.state = stateClosed
	if c.stop != nil {
		c.stop()
	}
	// The TCP connection, not the TLS one: no close_notify that could
	// block on a server that stopped reading.
	err := c.raw.Close()
	c.rr.r.Reset(nil)
	c.w.Reset(nil)
	if cap(c.rr.text) <= 64<<10 {
		bufPool.Put(c.bufs)
	}
	c.bufs, c.rr, c.w = nil, nil, nil
	return err
}

// maxBannerLen bounds what Banner keeps of the greeting: enough for any
// provider's fingerprint, little enough to log.
const maxBannerLen = 200

// Banner is the text of the greeting's first line, after "220 ", at most
// 200 bytes: what mailbox providers' fingerprints are read from. It is the
// remote server's text: escape it wherever it is shown.
func (c *Client) Banner() string { return c.banner }

// BannerHost is the first word of the greeting: the name the server gives
// itself (RFC 5321 §4.3.1).
func (c *Client) BannerHost() string { return c.bannerHost }

// EHLOHost is the first word of the reply to EHLO (or HELO), the server's
// name for itself, for comparing with its reverse DNS. After STARTTLS it is
// the one given over TLS.
func (c *Client) EHLOHost() string { return c.ehloHost }

// Extensions returns what the server announced in its last reply to EHLO.
func (c *Client) Extensions() Extensions { return c.ext }

// TLSState returns the TLS version ("TLS 1.3") and cipher suite
// ("TLS_AES_128_GCM_SHA256") of the session, and false when it is not
// protected by TLS.
func (c *Client) TLSState() (version, cipher string, ok bool) {
	return c.tlsVersion, c.tlsCiph, c.tlsOK
}

// TLSResumed says whether the STARTTLS handshake resumed an earlier
// session (Options.TLSConfig's ClientSessionCache held a ticket from the
// server) instead of a full handshake.
func (c *Client) TLSResumed() bool { return c.tlsResumed }

// RemoteAddr is the server's address.
func (c *Client) RemoteAddr() net.Addr { return c.remote }

// LocalAddr is the client's address: the egress address and port used.
func (c *Client) LocalAddr() net.Addr { return c.local }

// cmd sends one command line, prefix+arg+suffix, and reads its reply.
func (c *Client) cmd(name, prefix, arg, suffix string) (Reply, error) {
	c.arm()
	c.write(name, prefix, arg, suffix)
	if err := c.w.Flush(); err != nil {
		return Reply{}, c.fail(name, err)
	}
	return c.reply(name)
}

// write buffers one command line and puts it in the transcript. This is
// the only place commands are logged: a command carrying a secret (AUTH,
// which the prober does not use) would be redacted here.
func (c *Client) write(name, prefix, arg, suffix string) {
	_, _ = c.w.WriteString(prefix)
	_, _ = c.w.WriteString(arg)
	_, _ = c.w.WriteString(suffix)
	_, _ = c.w.WriteString("\r\n")
	if c.debug {
		line := prefix + arg + suffix
		if name == "AUTH" {
			line = "AUTH <redacted>"
		}
		c.opts.Logger.LogAttrs(c.ctx, slog.LevelDebug, "smtp send", slog.String("line", line))
	}
}

// reply reads one reply under a fresh command deadline.
func (c *Client) reply(name string) (Reply, error) {
	c.arm()
	r, err := c.rr.read()
	if err != nil {
		return Reply{}, c.fail(name, err)
	}
	if r.Code >= 400 {
		c.refusals++
	}
	if c.debug {
		c.opts.Logger.LogAttrs(c.ctx, slog.LevelDebug, "smtp reply",
			slog.String("cmd", name), slog.Int("code", r.Code),
			slog.String("enhanced", r.Enhanced.String()), slog.Any("lines", r.Lines))
	}
	return r, nil
}

// arm sets the deadline for the next step: now+CommandTimeout, or the
// session deadline when earlier. Checking the context after setting it
// closes the race with the AfterFunc that sets a past deadline on cancel.
func (c *Client) arm() { c.armFor(c.opts.CommandTimeout) }

// armFor is arm with a step of its own length.
func (c *Client) armFor(step time.Duration) {
	d := time.Now().Add(step)
	if c.deadline.Before(d) {
		d = c.deadline
	}
	_ = c.raw.SetDeadline(d)
	if c.ctx.Err() != nil {
		_ = c.raw.SetDeadline(aLongTimeAgo)
	}
}

// fail closes the connection after a transport or protocol error and wraps
// the error with the step and, when the context ended the session, the
// context's error.
func (c *Client) fail(name string, err error) error {
	_ = c.Close()
	return &OpError{Command: name, Err: c.ctxCause(err)}
}

func (c *Client) ctxCause(err error) error {
	if cerr := c.ctx.Err(); cerr != nil {
		return &detail{kind: cerr, msg: cerr.Error(), err: err}
	}
	if !c.ctxDeadline.IsZero() && !time.Now().Before(c.ctxDeadline) {
		// The context's deadline fired the socket's before its own timer.
		return &detail{kind: context.DeadlineExceeded, msg: context.DeadlineExceeded.Error(), err: err}
	}
	return err
}

// refused turns a refusing reply into an *Error; after a 421 the server is
// closing the channel (RFC 5321 §3.8), so the client waits for it to.
func (c *Client) refused(name string, r Reply) error {
	if r.Code == CodeServiceUnavailable {
		c.waitClose()
	}
	return newError(name, r)
}

// abort ends a session that failed during Dial: QUIT when the server is
// still talking (RFC 5321 §3.1 asks for it even after a 554 greeting), so
// that the server closes first; returns err.
func (c *Client) abort(err error) error {
	if c.state != stateClosed {
		c.deadline = minTime(c.deadline, time.Now().Add(c.opts.QuitWait))
		if _, qerr := c.cmd(CmdQuit, "QUIT", "", ""); qerr == nil {
			c.waitClose()
		}
		_ = c.Close()
	}
	return err
}

// waitClose waits, at most QuitWait (and never past the session deadline),
// for the server to close, reading and dropping at most 64 KiB; then closes.
func (c *Client) waitClose() {
	_ = c.raw.SetDeadline(minTime(c.deadline, time.Now().Add(c.opts.QuitWait)))
	r := c.rr.r
	for n := 0; n < 64<<10; {
		if _, err := r.Peek(1); err != nil {
			break
		}
		m, _ := r.Discard(r.Buffered())
		n += m
	}
	_ = c.Close()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// need checks that the client is in state want before command name.
func (c *Client) need(name string, want state) error {
	switch {
	case c.state == stateClosed:
		return &OpError{Command: name, Err: ErrClosed}
	case c.state == want:
		return nil
	case want == stateMail:
		return &OpError{Command: name, Err: &detail{kind: ErrSequence, msg: "command out of sequence: no transaction (call Mail)"}}
	default:
		return &OpError{Command: name, Err: &detail{kind: ErrSequence, msg: "command out of sequence: transaction open (call Reset)"}}
	}
}

// checkPath checks that addr can go between the brackets of a path: no
// control characters (they would end or split the command), at most 254
// octets (RFC 5321 §4.5.3.1.3: 256 with the brackets), ASCII unless the
// transaction has SMTPUTF8 (RFC 6531 §3.2).
func checkPath(name, addr string, utf8 bool) error {
	if len(addr) > 254 {
		return &OpError{Command: name, Err: &detail{kind: ErrBadPath, msg: "address longer than 254 octets"}}
	}
	for i := 0; i < len(addr); i++ {
		b := addr[i]
		if b < ' ' || b == 0x7f {
			return &OpError{Command: name, Err: &detail{kind: ErrBadPath, msg: "control character in address"}}
		}
		if b >= 0x80 && !utf8 {
			return &OpError{Command: name, Err: &detail{kind: ErrSMTPUTF8, msg: "non-ASCII address without SMTPUTF8"}}
		}
	}
	return nil
}
