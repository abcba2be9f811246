package world

// The world's SMTP servers: one listener per host, one goroutine per
// connection, written on the standard library alone.
//
// A session runs like this:
//
//  1. Accept. A tarpit host reads and discards whatever comes until the
//     client or Close ends the connection; a busy host answers 421 4.7.0 and
//     closes; a connection over Host.MaxConnsPerClient gets 421 4.7.0 and is
//     closed. Nothing listens for a refuse host, so the kernel refuses.
//  2. Greeting "220 <banner> ESMTP mailworld" (RFC 5321 §4.2, §3.1).
//  3. Commands, read line by line from a bufio.Reader so that pipelined
//     commands work (RFC 2920); replies are buffered and flushed once no
//     further complete command is waiting. Command lines are limited to 512
//     octets (RFC 5321 §4.5.3.1.4). Every reply except the greeting and the
//     EHLO/HELO replies carries an enhanced status code (RFC 2034, RFC 3463).
//  4. STARTTLS (RFC 3207) when Host.TLS is set: 220, handshake, and the
//     session starts over — the client must EHLO again, and anything it
//     pipelined after STARTTLS is discarded (RFC 3207 §4.2, §6).
//  5. MAIL FROM and RCPT TO. The recipient's domain, mailbox and policy
//     decide the RCPT reply (see SMTPServers.rcptReply); SMTPUTF8 follows
//     RFC 6531. DATA is accepted and discarded.
//  6. QUIT: 221, and the server closes first, so TIME_WAIT lands on the
//     server side as with real MTAs.
//
// Before every reply, the greeting included, the session waits the host's
// latency on a timer of its own, which Close interrupts. Every session is
// added to the SessionLog as it ends.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/idna"
)

// DefaultIdleTimeout is how long a session may wait for the client's next
// command (or a tarpit for the client to give up) before it is closed.
const DefaultIdleTimeout = 5 * time.Minute

// MaxMessageSize is the SIZE the hosts advertise (RFC 1870).
const MaxMessageSize = 10 << 20

const (
	maxCommandLine  = 512 // octets with CRLF, RFC 5321 §4.5.3.1.4
	readBufferSize  = 4096
	writeBufferSize = 4096
	tlsTimeout      = 30 * time.Second // STARTTLS handshake, at most
	listenAttempts  = 20               // port -1: new ports to try when a bind collides
)

// SMTPOptions configures StartSMTP.
type SMTPOptions struct {
	// Port overrides World.SMTPPort when non-zero. -1 picks a free port: the
	// first host listens on port 0 and every other host on the port it got;
	// if another host's bind collides, all start over on a new port.
	Port int
	// Now is the clock of greylisting; default time.Now.
	Now func() time.Time
	// Log is where sessions are recorded; default NewSessionLog().
	Log *SessionLog
	// Logger, when set, receives accept errors, recovered panics and, at
	// debug level, every session's transcript.
	Logger *slog.Logger
	// IdleTimeout closes a session whose client sends nothing for that long
	// (421 4.4.2 first), tarpit sessions included; default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// SMTPServers are the running SMTP servers of a world.
type SMTPServers struct {
	w      *World
	port   int
	log    *SessionLog
	now    func() time.Time
	logger *slog.Logger
	idle   time.Duration
	hosts  []*hostServer
	grey   greylist

	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // open sessions
}

// hostServer is the listener of one host and what its replies need.
type hostServer struct {
	srv      *SMTPServers
	host     *Host
	ln       net.Listener
	tls      *tls.Config // nil without STARTTLS
	greeting string      // "220 ..." with CRLF, as every host-wide reply below
	busy     string
	quit     string
	timeout  string
	ehlo     string // the multi-line EHLO reply before STARTTLS
	ehloTLS  string // ... and after
	helo     string

	mu      sync.Mutex
	clients map[string]int // open sessions per client address, with MaxConnsPerClient
	unknown int            // unknown local parts accepted, for AcceptFirst
}

// StartSMTP starts one SMTP server per host of w, at the host's IP and the
// world's port, and returns once all listen. A HostRefuse host gets no
// listener: connections to it are refused. The servers read w while they
// run; do not modify it until Close returns.
func StartSMTP(w *World, opts SMTPOptions) (*SMTPServers, error) {
	s := &SMTPServers{
		w:      w,
		log:    opts.Log,
		now:    opts.Now,
		logger: opts.Logger,
		idle:   opts.IdleTimeout,
		done:   make(chan struct{}),
		conns:  map[net.Conn]struct{}{},
	}
	s.grey.first = map[string]time.Time{}
	if s.log == nil {
		s.log = NewSessionLog()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.idle <= 0 {
		s.idle = DefaultIdleTimeout
	}
	port := opts.Port
	if port == 0 {
		port = w.SMTPPort
	}
	if port == 0 {
		port = DefaultSMTPPort
	}
	if port < -1 || port > 65535 {
		return nil, fmt.Errorf("world: smtp port %d out of range", port)
	}
	for _, h := range w.Hosts {
		if h.Mode == HostRefuse {
			continue
		}
		hs, err := newHostServer(s, h)
		if err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, hs)
	}
	if err := s.listen(port); err != nil {
		return nil, err
	}
	for _, hs := range s.hosts {
		s.wg.Add(1)
		go hs.serve()
	}
	return s, nil
}

func newHostServer(s *SMTPServers, h *Host) (*hostServer, error) {
	banner := cmp.Or(h.Banner, h.Name)
	ehloName := cmp.Or(h.EHLOName, h.Name)
	hs := &hostServer{
		srv:      s,
		host:     h,
		greeting: "220 " + cmp.Or(h.Greeting, banner+" ESMTP mailworld") + "\r\n",
		busy:     "421 4.7.0 " + banner + " too busy, try later\r\n",
		quit:     "221 2.0.0 " + banner + " closing\r\n",
		timeout:  "421 4.4.2 " + banner + " idle timeout, closing connection\r\n",
		helo:     "250 " + ehloName + "\r\n",
	}
	if h.TLS != "" {
		cfg, err := serverTLSConfig(h.TLS)
		if err != nil {
			return nil, fmt.Errorf("world: host %s: %w", h.Name, err)
		}
		hs.tls = cfg
	}
	hs.ehlo = ehloReply(ehloName, h, hs.tls != nil)
	hs.ehloTLS = ehloReply(ehloName, h, false)
	return hs, nil
}

// ehloReply builds the multi-line 250 reply to EHLO (RFC 5321 §4.1.1.1).
func ehloReply(name string, h *Host, starttls bool) string {
	lines := []string{name, "PIPELINING", "8BITMIME", "ENHANCEDSTATUSCODES", "SIZE " + strconv.Itoa(MaxMessageSize)}
	if starttls {
		lines = append(lines, "STARTTLS")
	}
	if h.SMTPUTF8 {
		lines = append(lines, "SMTPUTF8")
	}
	var b strings.Builder
	for i, l := range lines {
		if i == len(lines)-1 {
			b.WriteString("250 ")
		} else {
			b.WriteString("250-")
		}
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	return b.String()
}

// listen binds every host's listener at port, or at a free port for -1.
func (s *SMTPServers) listen(port int) error {
	for attempt := 1; ; attempt++ {
		p, err := s.listenAt(port)
		if err == nil {
			s.port = p
			return nil
		}
		if port != -1 || attempt == listenAttempts || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
	}
}

func (s *SMTPServers) listenAt(port int) (int, error) {
	for i, hs := range s.hosts {
		p := max(port, 0)
		ln, err := net.Listen("tcp", net.JoinHostPort(hs.host.IP, strconv.Itoa(p)))
		if err != nil {
			for _, prev := range s.hosts[:i] {
				prev.ln.Close()
				prev.ln = nil
			}
			return 0, fmt.Errorf("world: cannot listen for host %s: %w", hs.host.Name, err)
		}
		hs.ln = ln
		if port == -1 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
	}
	if port == -1 { // nothing listens at all: still name a port that is free
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("world: cannot pick a free port: %w", err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	return port, nil
}

// Port returns the port every host listens on.
func (s *SMTPServers) Port() int { return s.port }

// Addr returns "ip:port", the address a client dials for the host at ip.
func (s *SMTPServers) Addr(ip string) string {
	return net.JoinHostPort(ip, strconv.Itoa(s.port))
}

// Log returns the log the sessions are recorded in.
func (s *SMTPServers) Log() *SessionLog { return s.log }

// Close closes every listener and every open session, and waits for all
// the servers' goroutines to return. Sessions it ends are logged with
// OutcomeClosed (OutcomeTarpit on tarpit hosts).
func (s *SMTPServers) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	var errs []error
	for _, hs := range s.hosts {
		if err := hs.ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("world: close listener of %s: %w", hs.host.Name, err))
		}
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *SMTPServers) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// track registers an accepted connection so that Close can end it; it
// reports false once the servers are closed.
func (s *SMTPServers) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *SMTPServers) forget(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// serve accepts the host's connections until Close.
func (hs *hostServer) serve() {
	srv := hs.srv
	defer srv.wg.Done()
	var backoff time.Duration
	for {
		c, err := hs.ln.Accept()
		if err != nil {
			if srv.isClosed() {
				return
			}
			// Out of file descriptors and the like: back off as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if srv.logger != nil {
				srv.logger.Warn("world: smtp accept failed", "host", hs.host.Name, "err", err, "retry_in", backoff)
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-srv.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		if !srv.track(c) {
			c.Close()
			return
		}
		srv.wg.Add(1)
		go hs.handle(c)
	}
}

// acquire takes one of the client's MaxConnsPerClient slots.
func (hs *hostServer) acquire(client string) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.clients[client] >= hs.host.MaxConnsPerClient {
		return false
	}
	if hs.clients == nil {
		hs.clients = map[string]int{}
	}
	hs.clients[client]++
	return true
}

func (hs *hostServer) release(client string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if n := hs.clients[client] - 1; n > 0 {
		hs.clients[client] = n
	} else {
		delete(hs.clients, client)
	}
}

// greylist remembers when each (client address, recipient) pair was first
// seen, across all hosts of the world.
type greylist struct {
	mu    sync.Mutex
	first map[string]time.Time
}

// passed records the pair key and reports whether delay has passed since
// it was first seen. A retry before that does not restart the wait.
func (g *greylist) passed(key string, now time.Time, delay time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	first, ok := g.first[key]
	if !ok {
		g.first[key] = now
		return false
	}
	return now.Sub(first) >= delay
}

// smtpReply is a reply line (without CRLF) with the code and enhanced code
// the session log records for it.
type smtpReply struct {
	code int
	enh  string
	line string
}

// Replies to RCPT TO.
var (
	replyRcptOK       = smtpReply{250, "2.1.5", "250 2.1.5 ok"}
	replyNoSuchUser   = smtpReply{550, "5.1.1", "550 5.1.1 no such user"}
	replyNoDomain     = smtpReply{550, "5.1.2", "550 5.1.2 domain not handled here"}
	replyMailboxFull  = smtpReply{552, "5.2.2", "552 5.2.2 mailbox full"}
	replyDisabled     = smtpReply{550, "5.2.1", "550 5.2.1 mailbox disabled"}
	replyGreylisted   = smtpReply{450, "4.2.0", "450 4.2.0 greylisted, try again later"}
	replyPolicy       = smtpReply{550, "5.7.1", "550 5.7.1 rejected by policy"}
	replyClientBlock  = smtpReply{554, "5.7.1", "554 5.7.1 Client host rejected: Access denied"}
	replyTooManyRcpts = smtpReply{452, "4.5.3", "452 4.5.3 too many recipients"}
	replyUTF8         = smtpReply{553, "5.6.7", "553 5.6.7 UTF-8 addresses not supported"}
	replyBadSyntax    = smtpReply{553, "5.1.3", "553 5.1.3 mailbox name not allowed"}
	replyNullMX       = smtpReply{550, "5.1.10", "550 5.1.10 recipient domain publishes a null MX"}
	replyRestricted   = smtpReply{550, "5.7.1", "550 5.7.1 Recipient not authorized, only internal senders accepted"}
	replyBadRcpt      = smtpReply{501, "5.1.3", "501 5.1.3 bad recipient address syntax"}
	replyRcptSyntax   = smtpReply{501, "5.5.4", "501 5.5.4 syntax: RCPT TO:<address>"}
	replyBadParam     = smtpReply{555, "5.5.4", "555 5.5.4 unsupported parameter"}
	replyNeedMail     = smtpReply{503, "5.5.1", "503 5.5.1 need MAIL before RCPT"}
)

// rcptReply decides the reply to RCPT TO:<local@domain> for a recipient
// domain d of the world, from client. domain is the A-label form,
// lower-case.
// unknown is true when the reply says the local part is not known.
func (s *SMTPServers) rcptReply(client string, d *Domain, local, domain string) (r smtpReply, unknown bool) {
	addr := local + "@" + domain
	local = strings.ToLower(unquoteLocal(local))
	passed := false // the pair has waited out its greylisting
	switch d.Policy {
	case PolicyReject:
		return replyPolicy, false
	case PolicyGreylist:
		if !s.greyPassed(client, d, local, domain) {
			return replyGreylisted, false
		}
		passed = true
	}
	state, known := d.Mailboxes[local]
	if !known {
		if d.Policy == PolicyCatchAll || local == "postmaster" && !d.NoPostmaster { // RFC 5321 §4.5.1
			return replyRcptOK, false
		}
		if line := d.UnknownReply; line != "" {
			if strings.IndexByte(line, '{') >= 0 {
				line = strings.NewReplacer("{addr}", addr, "{domain}", domain).Replace(line)
			}
			return parseReplyLine(line), true
		}
		return replyNoSuchUser, true
	}
	switch state {
	case MailboxFull:
		return replyMailboxFull, false
	case MailboxDisabled:
		return replyDisabled, false
	case MailboxBadSyntax:
		return replyBadSyntax, false
	case MailboxRestricted:
		return replyRestricted, false
	case MailboxNullMX:
		return replyNullMX, false
	case MailboxGreylist:
		if !passed && !s.greyPassed(client, d, local, domain) {
			return replyGreylisted, false
		}
	}
	return replyRcptOK, false
}

// parseReplyLine makes a reply of a whole line ("550 5.7.1 User unknown").
func parseReplyLine(line string) smtpReply {
	code, rest, _ := strings.Cut(line, " ")
	n, _ := strconv.Atoi(code)
	enh, _, _ := strings.Cut(rest, " ")
	if !isEnhanced(enh) {
		enh = ""
	}
	return smtpReply{n, enh, line}
}

func (s *SMTPServers) greyPassed(client string, d *Domain, local, domain string) bool {
	delay := d.GreylistDelay.D()
	if delay == 0 {
		delay = time.Minute // World.Defaults
	}
	return s.grey.passed(client+" "+local+"@"+domain, s.now(), delay)
}

// lookupDomain finds the world's domain for the domain part of an address,
// given in Unicode or A-labels, in any case. It returns the domain (nil when
// the world does not serve it) and its lower-case A-label form; ok is false
// when the name cannot be converted to A-labels.
func (s *SMTPServers) lookupDomain(name string) (d *Domain, ascii string, ok bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if strings.HasPrefix(name, "[") { // an address literal: no domain of ours
		return nil, name, true
	}
	if !isASCII(name) {
		a, err := idna.ToASCII(name)
		if err != nil {
			return nil, "", false
		}
		name = strings.ToLower(a)
	}
	d = s.w.Domain(name)
	if d == nil && strings.Contains(name, "xn--") { // a world that names the domain in Unicode
		if u, err := idna.ToUnicode(name); err == nil {
			d = s.w.Domain(u)
		}
	}
	return d, name, true
}

// session is one connection. Sessions are pooled with their buffers and
// timer.
type session struct {
	srv   *SMTPServers
	hs    *hostServer
	raw   net.Conn
	conn  net.Conn // raw, or the TLS connection after STARTTLS
	r     *bufio.Reader
	w     *bufio.Writer
	timer *time.Timer
	rec   Session
	slot  bool // holds a MaxConnsPerClient slot
	debug bool

	greeted   bool // EHLO or HELO since the start or STARTTLS
	esmtp     bool // ... and it was EHLO
	inTLS     bool
	mail      bool // a transaction is open (MAIL accepted)
	mailUTF8  bool // ... with the SMTPUTF8 parameter
	rcpts     int  // RCPTs answered in this transaction, for MaxRcpts
	sessRcpts int  // RCPTs of the whole session, for DropAfterRcpts
	accepted  int  // RCPTs answered 250 in this transaction
}

var sessionPool = sync.Pool{New: func() any {
	return &session{
		r: bufio.NewReaderSize(nil, readBufferSize),
		w: bufio.NewWriterSize(nil, writeBufferSize),
	}
}}

var errLineTooLong = errors.New("world: line too long")

// handle runs one session, logs it and returns it to the pool.
func (hs *hostServer) handle(c net.Conn) {
	srv := hs.srv
	defer srv.wg.Done()
	s := sessionPool.Get().(*session)
	s.srv, s.hs, s.raw, s.conn = srv, hs, c, c
	s.r.Reset(c)
	s.w.Reset(c)
	s.rec = Session{
		ID:       srv.log.newID(),
		HostName: hs.host.Name,
		HostIP:   hs.host.IP,
		Start:    time.Now(),
	}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		s.rec.Client, s.rec.ClientPort = ta.IP.String(), ta.Port
	}
	s.debug = srv.logger != nil && srv.logger.Enabled(context.Background(), slog.LevelDebug)

	outcome := s.runSafely()

	s.conn.Close()
	srv.forget(c)
	if s.slot {
		hs.release(s.rec.Client)
	}
	s.rec.End = time.Now()
	s.rec.Outcome = outcome
	srv.log.Add(s.rec)
	if s.debug {
		srv.logger.Debug("world: smtp session ended", "session", s.rec.ID, "host", hs.host.Name, "client", s.rec.Client, "outcome", outcome)
	}

	if s.timer != nil {
		s.timer.Stop()
	}
	s.r.Reset(nil)
	s.w.Reset(nil)
	*s = session{r: s.r, w: s.w, timer: s.timer}
	sessionPool.Put(s)
}

// runSafely runs the session, turning a panic into OutcomeError.
func (s *session) runSafely() (outcome string) {
	defer func() {
		if p := recover(); p != nil {
			if s.srv.logger != nil {
				s.srv.logger.Error("world: smtp session panicked", "session", s.rec.ID, "host", s.hs.host.Name, "panic", p)
			}
			outcome = OutcomeError
		}
	}()
	return s.run()
}

func (s *session) run() string {
	h := s.hs.host
	switch h.Mode {
	case HostTarpit:
		return s.tarpit()
	case HostBusy:
		s.reply("BANNER", s.hs.busy)
		s.flush()
		return OutcomeBusy
	case HostBlocked:
		return s.blocked()
	}
	if h.MaxConnsPerClient > 0 {
		if !s.hs.acquire(s.rec.Client) {
			s.reply("BANNER", "421 4.7.0 too many connections from your address\r\n")
			s.flush()
			return OutcomeTooManyConns
		}
		s.slot = true
	}
	s.reply("BANNER", s.hs.greeting)
	for {
		line, err := s.readLine(maxCommandLine)
		switch {
		case err == errLineTooLong:
			s.reply("", "500 5.5.2 line too long\r\n")
			continue
		case err != nil:
			return s.failed(err)
		}
		if outcome := s.command(line); outcome != "" {
			return outcome
		}
	}
}

// blocked greets with 554 (RFC 5321 §3.1) and then refuses every command
// but QUIT, as a server that will not serve this client.
func (s *session) blocked() string {
	s.rec.RefusedClient = true
	s.reply("BANNER", "554 5.7.1 "+s.hs.host.Banner+" no SMTP service for you here\r\n")
	for {
		line, err := s.readLine(maxCommandLine)
		if err == errLineTooLong {
			continue
		}
		if err != nil {
			s.failed(err)
			return OutcomeBlocked
		}
		if v, _, _ := bytes.Cut(line, []byte(" ")); strings.EqualFold(string(v), "QUIT") {
			s.reply("QUIT", s.hs.quit)
			s.flush()
			s.rec.Quit = true
			return OutcomeBlocked
		}
		s.replyLine("", "503 5.5.1 no service")
	}
}

// styled writes a reply line in the host's style (Host.Replies).
func (s *session) styled(line string) string {
	switch s.hs.host.Replies {
	case RepliesBare:
		code, rest, _ := strings.Cut(line, " ")
		if f, text, ok := strings.Cut(rest, " "); ok && isEnhanced(f) {
			rest = text
		}
		if code == "250" {
			return "250 OK"
		}
		return code + " " + rest
	case RepliesMultiline:
		code, rest, _ := strings.Cut(line, " ")
		enh, text, ok := strings.Cut(rest, " ")
		if !ok || !isEnhanced(enh) {
			return code + "-" + rest + "\r\n" + code + " see https://support.mailworld.test/smtp"
		}
		return code + "-" + enh + " " + text + "\r\n" + code + " " + enh + " https://support.mailworld.test/smtp/" + code
	}
	return line
}

// isEnhanced reports whether f looks like an enhanced status code
// (RFC 3463): class.subject.detail.
func isEnhanced(f string) bool {
	parts := strings.Split(f, ".")
	if len(parts) != 3 || len(parts[0]) != 1 || parts[0] < "2" || parts[0] > "5" {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// tarpit holds the connection without a word, discarding input, until the
// client gives up, the idle timeout passes or Close.
func (s *session) tarpit() string {
	for {
		s.raw.SetReadDeadline(time.Now().Add(s.srv.idle))
		if _, err := s.r.Peek(1); err != nil {
			return OutcomeTarpit
		}
		s.r.Discard(s.r.Buffered())
	}
}

// failed maps a read or write error to the session's outcome.
func (s *session) failed(err error) string {
	var ne net.Error
	switch {
	case s.srv.isClosed():
		return OutcomeClosed
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return OutcomeClientClosed
	case errors.As(err, &ne) && ne.Timeout():
		s.conn.SetWriteDeadline(time.Now().Add(time.Second))
		s.w.WriteString(s.hs.timeout)
		s.w.Flush()
		return OutcomeTimeout
	}
	return OutcomeError
}

// pause waits the host's latency for the reply to verb, or until Close.
func (s *session) pause(verb string) {
	h := s.hs.host
	d := h.Latency.D()
	if v, ok := h.CommandLatency[verb]; ok {
		d = v.D()
	}
	if j := h.Jitter.D(); j > 0 {
		d += rand.N(j + 1)
	}
	if d <= 0 {
		return
	}
	s.rec.RoundTrips++
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
	case <-s.srv.done:
		s.timer.Stop()
	}
}

// reply waits the latency for verb and buffers line, which ends in CRLF.
// Write errors surface at the next flush.
func (s *session) reply(verb, line string) {
	// Latency is per round trip: the first reply of a group waits, the
	// replies to commands the client pipelined with it (written while
	// earlier replies are still buffered, unflushed) go out with it, as
	// over a real network.
	if s.w.Buffered() == 0 {
		s.pause(verb)
	}
	s.w.WriteString(line)
	if s.debug {
		s.srv.logger.Debug("world: smtp reply", "session", s.rec.ID, "host", s.hs.host.Name, "line", strings.TrimRight(line, "\r\n"))
	}
}

// replyLine is reply for a line without CRLF.
func (s *session) replyLine(verb, line string) {
	if s.w.Buffered() == 0 { // once per round trip, as in reply
		s.pause(verb)
	}
	s.w.WriteString(line)
	s.w.WriteString("\r\n")
	if s.debug {
		s.srv.logger.Debug("world: smtp reply", "session", s.rec.ID, "host", s.hs.host.Name, "line", line)
	}
}

func (s *session) flush() error {
	if s.w.Buffered() == 0 {
		return nil
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.srv.idle))
	return s.w.Flush()
}

// readLine reads one line and returns it without its line ending (CRLF, or
// a bare LF). A line longer than limit octets with its CRLF is consumed and
// errLineTooLong returned. The replies buffered so far are flushed first
// unless another complete line is already waiting (RFC 2920 §3.2).
func (s *session) readLine(limit int) ([]byte, error) {
	if s.w.Buffered() > 0 && !s.lineWaiting() {
		if err := s.flush(); err != nil {
			return nil, err
		}
	}
	s.conn.SetReadDeadline(time.Now().Add(s.srv.idle))
	line, err := s.r.ReadSlice('\n')
	switch {
	case err == nil && len(line) <= limit:
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if s.debug {
			s.srv.logger.Debug("world: smtp command", "session", s.rec.ID, "host", s.hs.host.Name, "line", string(line))
		}
		return line, nil
	case err == nil:
		return nil, errLineTooLong
	case err == bufio.ErrBufferFull:
		for err == bufio.ErrBufferFull {
			_, err = s.r.ReadSlice('\n')
		}
		if err != nil {
			return nil, err
		}
		return nil, errLineTooLong
	}
	return nil, err
}

// lineWaiting reports whether a complete line is buffered.
func (s *session) lineWaiting() bool {
	n := s.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// resetTx ends the mail transaction (RFC 5321 §4.1.1.5).
func (s *session) resetTx() {
	s.mail, s.mailUTF8 = false, false
	s.rcpts, s.accepted = 0, 0
}

// command runs one command line and returns the session's outcome when the
// session ends, else "".
func (s *session) command(line []byte) string {
	verb, arg := line, []byte(nil)
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		verb, arg = line[:i], bytes.TrimSpace(line[i+1:])
	}
	var up [8]byte
	if len(verb) > len(up) {
		s.replyLine("", "500 5.5.2 command not recognized")
		return ""
	}
	for i, c := range verb {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	switch v := string(up[:len(verb)]); v {
	case "EHLO", "HELO":
		switch {
		case s.hs.host.Mode == HostDeferEHLO:
			s.replyLine(v, "421 4.7.0 [TSS04] Messages from "+s.rec.Client+" temporarily deferred due to unexpected volume or user complaints")
			s.flush()
			return OutcomeDeferred
		case v == "EHLO" && s.hs.host.NoEHLO:
			s.replyLine(v, "502 5.5.1 command not recognized")
		default:
			s.hello(v, arg)
		}
	case "STARTTLS":
		return s.starttls(arg)
	case "MAIL":
		s.mailFrom(arg)
	case "RCPT":
		return s.rcptTo(arg)
	case "DATA":
		return s.data(arg)
	case "RSET":
		if len(arg) > 0 {
			s.replyLine("RSET", "501 5.5.4 syntax: RSET")
			break
		}
		s.resetTx()
		s.replyLine("RSET", "250 2.0.0 ok")
	case "NOOP":
		s.replyLine("NOOP", "250 2.0.0 ok")
	case "VRFY":
		if len(arg) == 0 {
			s.replyLine("VRFY", "501 5.5.4 syntax: VRFY <address>")
			break
		}
		s.replyLine("VRFY", "252 2.1.5 cannot verify, but will accept the message and attempt delivery")
	case "EXPN":
		s.replyLine("EXPN", "502 5.5.1 EXPN not implemented")
	case "HELP":
		s.replyLine("HELP", "214 2.0.0 commands: EHLO HELO STARTTLS MAIL RCPT DATA RSET NOOP VRFY QUIT")
	case "QUIT":
		s.reply("QUIT", s.hs.quit)
		if err := s.flush(); err != nil {
			return s.failed(err)
		}
		s.rec.Quit = true
		return OutcomeOK
	default:
		s.replyLine("", "500 5.5.2 command not recognized")
	}
	return ""
}

// hello answers EHLO or HELO (RFC 5321 §4.1.1.1), which also ends any
// transaction.
func (s *session) hello(verb string, arg []byte) {
	if len(arg) == 0 {
		s.replyLine(verb, "501 5.5.4 syntax: "+verb+" <domain>")
		return
	}
	s.rec.Helo = string(arg)
	s.resetTx()
	s.greeted, s.esmtp = true, verb == "EHLO"
	switch {
	case !s.esmtp:
		s.reply(verb, s.hs.helo)
	case s.inTLS:
		s.reply(verb, s.hs.ehloTLS)
	default:
		s.reply(verb, s.hs.ehlo)
	}
}

// starttls runs STARTTLS (RFC 3207).
func (s *session) starttls(arg []byte) string {
	switch {
	case s.hs.tls == nil:
		s.replyLine("STARTTLS", "502 5.5.1 STARTTLS not supported")
		return ""
	case s.inTLS:
		s.replyLine("STARTTLS", "503 5.5.1 already in TLS")
		return ""
	case len(arg) > 0:
		s.replyLine("STARTTLS", "501 5.5.4 syntax: STARTTLS")
		return ""
	case !s.esmtp:
		s.replyLine("STARTTLS", "503 5.5.1 send EHLO first")
		return ""
	}
	s.replyLine("STARTTLS", "220 2.0.0 ready to start TLS")
	if err := s.flush(); err != nil {
		return s.failed(err)
	}
	if s.hs.host.TLSBroken {
		// A broken TLS stack: bytes that are no ServerHello, then close.
		s.raw.Write([]byte("\x15\x03\x01\x00\x02\x02\x50garbage\r\n"))
		return OutcomeTLSFailed
	}
	tc := tls.Server(s.raw, s.hs.tls)
	s.raw.SetDeadline(time.Now().Add(min(s.srv.idle, tlsTimeout)))
	if err := tc.Handshake(); err != nil {
		if s.srv.isClosed() {
			return OutcomeClosed
		}
		if s.srv.logger != nil {
			s.srv.logger.Debug("world: smtp tls handshake failed", "session", s.rec.ID, "host", s.hs.host.Name, "err", err)
		}
		return OutcomeTLSFailed
	}
	s.raw.SetDeadline(time.Time{})
	cs := tc.ConnectionState()
	s.rec.TLS, s.rec.TLSVersion, s.rec.TLSCipher = true, cs.Version, cs.CipherSuite
	// Whatever the client pipelined after STARTTLS came in the clear and is
	// dropped with the old reader's buffer (RFC 3207 §6).
	s.conn = tc
	s.r.Reset(tc)
	s.w.Reset(tc)
	s.inTLS = true
	s.greeted, s.esmtp = false, false
	s.resetTx()
	return ""
}

// mailFrom answers MAIL FROM:<reverse-path> [params] (RFC 5321 §4.1.1.2),
// with the parameters SIZE (RFC 1870), BODY (RFC 6152) and SMTPUTF8
// (RFC 6531, only when the host offers it).
func (s *session) mailFrom(arg []byte) {
	switch {
	case !s.greeted:
		s.replyLine("MAIL", "503 5.5.1 send EHLO or HELO first")
		return
	case s.mail:
		s.replyLine("MAIL", "503 5.5.1 nested MAIL command")
		return
	}
	rest, ok := cutPrefixFold(string(arg), "FROM:")
	if !ok {
		s.replyLine("MAIL", "501 5.5.4 syntax: MAIL FROM:<address>")
		return
	}
	path, params, ok := splitPath(strings.TrimLeft(rest, " "))
	if !ok {
		s.replyLine("MAIL", "501 5.5.4 syntax: MAIL FROM:<address>")
		return
	}
	if path != "" {
		if _, _, ok := splitAddr(path); !ok {
			s.replyLine("MAIL", "501 5.1.7 bad sender address syntax")
			return
		}
	}
	utf8 := false
	for params = strings.TrimSpace(params); params != ""; {
		var p string
		p, params, _ = strings.Cut(params, " ")
		params = strings.TrimLeft(params, " ")
		if !s.esmtp {
			s.replyLine("MAIL", replyBadParam.line)
			return
		}
		key, value, hasValue := strings.Cut(p, "=")
		switch strings.ToUpper(key) {
		case "SIZE":
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				s.replyLine("MAIL", "501 5.5.4 bad SIZE parameter")
				return
			}
			if n > MaxMessageSize {
				s.replyLine("MAIL", "552 5.3.4 message size exceeds fixed maximum message size")
				return
			}
		case "BODY":
			if v := strings.ToUpper(value); v != "7BIT" && v != "8BITMIME" {
				s.replyLine("MAIL", "501 5.5.4 bad BODY parameter")
				return
			}
		case "SMTPUTF8":
			if !s.hs.host.SMTPUTF8 || hasValue {
				s.replyLine("MAIL", replyBadParam.line)
				return
			}
			utf8 = true
		default:
			s.replyLine("MAIL", replyBadParam.line)
			return
		}
	}
	if !utf8 && !isASCII(path) {
		s.replyLine("MAIL", replyUTF8.line)
		return
	}
	if r := s.mailPolicy(path); r != "" {
		if r[0] == '5' {
			s.rec.RefusedClient = true
		}
		s.replyLine("MAIL", s.styled(r))
		return
	}
	s.mail, s.mailUTF8 = true, utf8
	s.rec.MailFrom = path
	s.replyLine("MAIL", s.styled("250 2.1.0 ok"))
}

// mailPolicy is the refusal of MAIL FROM:<path> by Host.MailPolicy, or "".
func (s *session) mailPolicy(path string) string {
	switch s.hs.host.MailPolicy {
	case MailDefer:
		return "451 4.7.1 sender not yet trusted, try again later"
	case MailRefuseNull:
		if path == "" {
			return "550 5.7.1 null sender refused here"
		}
	case MailRequireSPF:
		_, domain, _ := splitAddr(path)
		if d := s.srv.w.Domain(domain); d == nil || !hasSPF(d) {
			return "550 5.7.23 sender domain publishes no SPF record"
		}
	}
	return ""
}

// hasSPF reports whether d publishes an SPF record at its apex.
func hasSPF(d *Domain) bool {
	for _, r := range d.Records {
		if strings.EqualFold(r.Type, "TXT") && (r.Name == "" || r.Name == "@") && strings.Contains(strings.ToLower(r.Data), "v=spf1") {
			return true
		}
	}
	return false
}

// rcptTo answers RCPT TO:<forward-path> (RFC 5321 §4.1.1.3) for the world's
// recipient domain and mailbox.
//
// Host.MaxRcpts counts the RCPTs of one transaction, as RFC 5321 scopes
// recipients: RSET, a new EHLO/HELO, STARTTLS and the end of DATA start a
// new transaction and a new count (as Postfix's smtpd_recipient_limit).
// Every RCPT with a valid path counts, whatever its reply; the 452s do not.
func (s *session) rcptTo(arg []byte) string {
	a := string(arg)
	if h := s.hs.host; h.DropAfterRcpts > 0 && s.sessRcpts >= h.DropAfterRcpts {
		// The replies to the commands before go out, as a server that
		// closes between two reads would have sent them.
		if h.DropMode == Drop421 {
			s.replyLine("RCPT", "421 4.4.2 "+h.Banner+" closing connection")
		}
		s.flush()
		return OutcomeDropped
	}
	s.sessRcpts++
	if !s.mail {
		s.rcptDone(a, replyNeedMail)
		return ""
	}
	rest, ok := cutPrefixFold(a, "TO:")
	if !ok {
		s.rcptDone(a, replyRcptSyntax)
		return ""
	}
	path, params, ok := splitPath(strings.TrimLeft(rest, " "))
	if !ok {
		s.rcptDone(a, replyRcptSyntax)
		return ""
	}
	if strings.TrimSpace(params) != "" {
		s.rcptDone(path, replyBadParam)
		return ""
	}
	if m := s.hs.host.MaxRcpts; m > 0 && s.rcpts >= m {
		s.rcptDone(path, replyTooManyRcpts)
		return ""
	}
	s.rcpts++
	if strings.EqualFold(path, "postmaster") { // RFC 5321 §4.5.1
		s.rcptDone(path, replyRcptOK)
		return ""
	}
	local, domain, ok := splitAddr(path)
	if !ok {
		s.rcptDone(path, replyBadRcpt)
		return ""
	}
	if !s.mailUTF8 && !isASCII(path) {
		s.rcptDone(path, replyUTF8)
		return ""
	}
	d, ascii, ok := s.srv.lookupDomain(domain)
	switch {
	case !ok:
		s.rcptDone(path, replyBadRcpt)
	case d == nil:
		s.rcptDone(path, replyNoDomain)
	case slices.Contains(s.hs.host.BlockedClients, s.rec.Client):
		s.rec.RefusedClient = true
		r := replyClientBlock
		if s.hs.host.BlockedReply != "" {
			r = parseReplyLine(s.hs.host.BlockedReply)
		}
		s.rcptDone(path, r)
	default:
		if d.Policy == PolicyReject {
			s.rec.RefusedClient = true
		}
		r, unknown := s.srv.rcptReply(s.rec.Client, d, local, ascii)
		if unknown && s.hs.host.AcceptFirst > 0 {
			s.hs.mu.Lock()
			if s.hs.unknown < s.hs.host.AcceptFirst {
				s.hs.unknown++
				r = replyRcptOK
			}
			s.hs.mu.Unlock()
		}
		s.rcptDone(path, r)
	}
	return ""
}

func (s *session) rcptDone(addr string, r smtpReply) {
	s.rec.Rcpts = append(s.rec.Rcpts, RcptResult{Addr: addr, Code: r.code, Enhanced: r.enh})
	if r.code == 250 {
		s.accepted++
	}
	s.replyLine("RCPT", s.styled(r.line))
}

// data answers DATA (RFC 5321 §4.1.1.4): 354, then it reads the message up
// to the lone dot and discards it.
func (s *session) data(arg []byte) string {
	switch {
	case len(arg) > 0:
		s.replyLine("DATA", "501 5.5.4 syntax: DATA")
		return ""
	case !s.mail:
		s.replyLine("DATA", "503 5.5.1 need MAIL command")
		return ""
	case s.accepted == 0:
		s.replyLine("DATA", "554 5.5.1 no valid recipients")
		return ""
	}
	s.replyLine("DATA", "354 end data with <CR><LF>.<CR><LF>")
	if err := s.flush(); err != nil {
		return s.failed(err)
	}
	size, atStart := 0, true
	for {
		s.conn.SetReadDeadline(time.Now().Add(s.srv.idle))
		line, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			size += len(line)
			atStart = false
			continue
		}
		if err != nil {
			return s.failed(err)
		}
		if atStart && (string(line) == ".\r\n" || string(line) == ".\n") {
			break
		}
		size += len(line)
		atStart = true
	}
	s.resetTx()
	if size > MaxMessageSize {
		s.replyLine("DATA", "552 5.3.4 message size exceeds fixed maximum message size")
		return ""
	}
	s.replyLine("DATA", "250 2.0.0 ok, message discarded")
	return ""
}

// cutPrefixFold is strings.CutPrefix, ignoring ASCII case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// splitPath parses the "<path>" at the start of s (RFC 5321 §4.1.2) and
// returns the mailbox inside, without a source route ("@a,@b:"), and what
// follows the closing bracket. The null path "<>" gives "".
func splitPath(s string) (path, rest string, ok bool) {
	if len(s) == 0 || s[0] != '<' {
		return "", "", false
	}
	quoted := false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c < ' ' || c == 0x7f:
			return "", "", false
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == ' ':
			return "", "", false
		case c == '>':
			path, rest = s[1:i], s[i+1:]
			if strings.HasPrefix(path, "@") {
				j := strings.IndexByte(path, ':')
				if j < 0 {
					return "", "", false
				}
				path = path[j+1:]
			}
			if rest != "" && rest[0] != ' ' {
				return "", "", false
			}
			return path, rest, true
		}
	}
	return "", "", false
}

// splitAddr splits a mailbox "local@domain" (RFC 5321 §4.1.2; UTF-8 allowed
// as in RFC 6531) and checks its syntax.
func splitAddr(addr string) (local, domain string, ok bool) {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 {
		return "", "", false
	}
	local, domain = addr[:at], addr[at+1:]
	if len(local) > 64*4 || len(domain) > 255 { // octets; generous for UTF-8
		return "", "", false
	}
	if !validLocal(local) || !validDomain(domain) {
		return "", "", false
	}
	return local, domain, true
}

// validLocal checks a Dot-string or Quoted-string local part.
func validLocal(l string) bool {
	if l[0] == '"' {
		if len(l) < 2 || l[len(l)-1] != '"' {
			return false
		}
		for i := 1; i < len(l)-1; i++ {
			switch c := l[i]; {
			case c == '\\':
				i++
				if i >= len(l)-1 {
					return false
				}
			case c == '"' || c < ' ' || c == 0x7f:
				return false
			}
		}
		return true
	}
	prevDot := true // no leading dot
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c == '.':
			if prevDot {
				return false
			}
			prevDot = true
			continue
		case c >= 0x80, 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0:
		default:
			return false
		}
		prevDot = false
	}
	return !prevDot
}

// validDomain checks a domain (labels of letters, digits, hyphens,
// underscores or UTF-8) or an address literal "[...]".
func validDomain(d string) bool {
	if d[0] == '[' {
		return len(d) > 2 && d[len(d)-1] == ']' && !strings.ContainsAny(d[1:len(d)-1], "[]\\ ")
	}
	d = strings.TrimSuffix(d, ".")
	label := 0
	for i := 0; i < len(d); i++ {
		c := d[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case c >= 0x80, 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		label++
	}
	return label > 0
}

// unquoteLocal returns a quoted local part's content, its quoted pairs
// undone; a Dot-string is returned as is.
func unquoteLocal(l string) string {
	if len(l) < 2 || l[0] != '"' {
		return l
	}
	l = l[1 : len(l)-1]
	if strings.IndexByte(l, '\\') < 0 {
		return l
	}
	b := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		if l[i] == '\\' && i+1 < len(l) {
			i++
		}
		b = append(b, l[i])
	}
	return string(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
