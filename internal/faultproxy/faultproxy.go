// Package faultproxy is a TCP proxy for tests that breaks the link it
// carries on demand: a verifyd box points its storage.dsn at the proxy,
// the proxy forwards to the real PostgreSQL, and the test switches the
// proxy between faults while the box runs.
//
// The flow: New listens on a loopback port; every connection accepted
// is a link, whose upstream connection to the target is dialled at once
// (later, while the link is held by a black hole). Each link runs a
// reader and a writer in each direction: the reader takes chunks off its
// socket as they come (up to 32 KiB each) and stamps their arrival; the
// writer sends them on in order, as the mode says when it is their turn:
//
//   - Pass: at once.
//   - Latency(lo, hi): each chunk lo to hi after its arrival (a delay
//     drawn for each chunk, never overtaking the chunk before), in each
//     direction: a round trip costs two delays.
//   - BlackHole (a half-open link, a partition): nothing is forwarded in
//     either direction, connections stay open, new ones are accepted and
//     get nothing (their upstream is dialled when the hole ends). The
//     bytes wait, as TCP's retransmissions would, and flow again when the
//     mode changes: nothing is lost or reordered.
//   - Mute (an asymmetric partition): the client's bytes reach the
//     server, the server's replies wait, as in a black hole. A request
//     sent then is carried out, and its answer lost if the client gives
//     up before the mode changes.
//   - Refuse (the server down): every open connection is reset and every
//     new one is reset as soon as it is accepted.
//
// Reset (an action, not a mode) resets every open connection, on both
// sides, with an RST (SO_LINGER 0), and goes on accepting. Close stops
// the listener and every link and returns once every goroutine of the
// proxy has ended.
package faultproxy

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with the bytes of its links.
type Mode int

const (
	Pass Mode = iota
	Latency
	BlackHole
	Mute
	Refuse
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Latency:
		return "latency"
	case BlackHole:
		return "black hole"
	case Mute:
		return "mute"
	case Refuse:
		return "refuse"
	}
	return "unknown"
}

// chunkSize is the most one read takes off a socket.
const chunkSize = 32 << 10

// dialTimeout bounds the dial of a link's upstream connection.
const dialTimeout = 5 * time.Second

// Proxy forwards the connections accepted on its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    Mode
	lo, hi  time.Duration // Latency's bounds
	changed chan struct{} // closed (and replaced) when the mode changes
	links   map[*link]struct{}
	closed  bool

	wg sync.WaitGroup // the accept loop and every link's goroutines
}

// New listens on a free loopback port and forwards to target (host:port),
// in mode Pass.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Pass forwards everything at once again; bytes held by a black hole or
// delayed by latency flow on.
func (p *Proxy) Pass() { p.set(Pass, 0, 0) }

// Latency delays every chunk, in each direction, by lo to hi.
func (p *Proxy) Latency(lo, hi time.Duration) { p.set(Latency, lo, max(lo, hi)) }

// BlackHole stops forwarding: connections stay open, carry nothing.
func (p *Proxy) BlackHole() { p.set(BlackHole, 0, 0) }

// Mute forwards the clients' bytes and holds the server's.
func (p *Proxy) Mute() { p.set(Mute, 0, 0) }

// Refuse resets every open connection and every new one.
func (p *Proxy) Refuse() {
	p.set(Refuse, 0, 0)
	p.Reset()
}

func (p *Proxy) set(m Mode, lo, hi time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.lo, p.hi = m, lo, hi
	close(p.changed)
	p.changed = make(chan struct{})
}

// Reset resets every open connection (RST on both sides) and returns how
// many links it cut. The mode is unchanged: new connections are accepted.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.kill(true)
	}
	return len(ls)
}

// Conns returns the number of open links.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, resets every link and waits for every goroutine
// of the proxy to end. Closing again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	again := p.closed
	p.closed = true
	p.mu.Unlock()
	if again {
		p.wg.Wait()
		return nil
	}
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

// state is what a writer needs to know: the mode, Latency's bounds and
// the channel closed at the next change.
func (p *Proxy) state() (Mode, time.Duration, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.lo, p.hi, p.changed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		l := &link{p: p, client: c, ctx: ctx, cancel: cancel}
		p.mu.Lock()
		if p.closed || p.mode == Refuse {
			p.mu.Unlock()
			l.kill(true)
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.run()
	}
}

// link is one accepted connection and its upstream.
type link struct {
	p      *Proxy
	client net.Conn

	// ctx ends with the link (kill).
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	upstream net.Conn // nil until dialled
	killed   bool
}

// kill closes both connections, with an RST when reset, and ends the
// link's goroutines.
func (l *link) kill(reset bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed {
		return
	}
	l.killed = true
	l.cancel()
	for _, c := range []net.Conn{l.client, l.upstream} {
		if c == nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

func (l *link) run() {
	defer l.p.wg.Done()
	defer func() {
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	}()
	// The upstream is dialled once no black hole holds the link.
	for {
		m, _, _, changed := l.p.state()
		if m == Refuse {
			l.kill(true)
			return
		}
		if m != BlackHole {
			break
		}
		select {
		case <-changed:
		case <-l.ctx.Done():
			return
		}
	}
	ctx, cancel := context.WithTimeout(l.ctx, dialTimeout)
	var d net.Dialer
	u, err := d.DialContext(ctx, "tcp", l.p.target)
	cancel()
	if err != nil {
		l.kill(true)
		return
	}
	l.mu.Lock()
	if l.killed {
		l.mu.Unlock()
		_ = u.(*net.TCPConn).SetLinger(0)
		_ = u.Close()
		return
	}
	l.upstream = u
	l.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(4)
	up, down := make(chan chunk, 64), make(chan chunk, 64)
	go l.read(&wg, l.client, up)
	go l.write(&wg, u, up, false)
	go l.read(&wg, u, down)
	go l.write(&wg, l.client, down, true)
	wg.Wait()
	l.kill(false)
}

// chunk is what one read took off a socket, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// read takes chunks off src until it fails (EOF included); then q is
// closed. A failure other than EOF (a reset) kills the link with a reset.
func (l *link) read(wg *sync.WaitGroup, src net.Conn, q chan<- chunk) {
	defer wg.Done()
	defer close(q)
	for {
		b := make([]byte, chunkSize)
		n, err := src.Read(b)
		if n > 0 {
			select {
			case q <- chunk{b[:n], time.Now()}:
			case <-l.ctx.Done():
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.kill(true)
			}
			return
		}
	}
}

// write sends q's chunks to dst (the client when reply) as the mode
// says, then half-closes dst.
func (l *link) write(wg *sync.WaitGroup, dst net.Conn, q <-chan chunk, reply bool) {
	defer wg.Done()
	var last time.Time // the due time of the chunk before, under Latency
	for c := range q {
		if !l.hold(c, &last, reply) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			l.kill(true)
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// hold returns when chunk c (of the server's replies when reply) may be
// sent: at once under Pass, at its due time under Latency, never under
// BlackHole, nor under Mute for a reply (until the mode changes). It
// reports false when the link ended meanwhile.
func (l *link) hold(c chunk, last *time.Time, reply bool) bool {
	var due time.Time
	for {
		m, lo, hi, changed := l.p.state()
		var timer *time.Timer
		var wait <-chan time.Time
		switch m {
		case Pass:
			return true
		case Mute:
			if !reply {
				return true
			}
		case Refuse:
			l.kill(true)
			return false
		case Latency:
			if due.IsZero() {
				due = c.at.Add(lo + rand.N(hi-lo+1))
				if due.Before(*last) {
					due = *last
				}
				*last = due
			}
			d := time.Until(due)
			if d <= 0 {
				return true
			}
			timer = time.NewTimer(d)
			wait = timer.C
		}
		select {
		case <-wait:
			return true
		case <-changed:
		case <-l.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-l.ctx.Done():
			return false
		default:
		}
	}
}
