// Package conns is what verifyd's HTTP listeners do below HTTP: caps on
// open connections, in total and per client address, and the lingering
// close of RFC 9112 §9.6.
//
// The flow of one connection:
//
//  1. Accept counts it against the total cap and its client's cap (the
//     client being its address's ClientPrefix: an IPv4 address, or an
//     IPv6 address's /64). Over either, the connection gets a complete HTTP/1.1 answer at once (the
//     caller's Reject writes it, in the API's error envelope, with
//     Connection: close) and a lingering close; Accept goes on to the next
//     connection and never blocks on a client.
//  2. The server (fasthttp) serves it. Conn.Used tells it whether the
//     client sent a byte: a read error on a connection that sent nothing
//     (a pool's spare connection timing out) has no request to answer, and
//     Conn.Mute drops what the server would write to it.
//  3. Close is a lingering close (RFC 9112 §9.6): the write side is shut
//     first, so the client has the whole answer and a FIN; then what the
//     client still sends is read and thrown away, until it closes its side,
//     or LingerTimeout passes, or LingerBytes were read; only then is the
//     socket closed. Without this, a server that answers before reading the
//     whole request (a body over the limit, rejected on its Content-Length)
//     closes a socket with unread data, the kernel sends a TCP reset, and a
//     client that writes its whole body before reading (Node's fetch, many
//     HTTP libraries) gets ECONNRESET instead of the answer. The draining
//     runs on its own goroutine, at most MaxLingering at once; past that,
//     or after Shutdown, the close is immediate.
//
// A well-behaved client closes at once when it reads the server's FIN, so
// the lingering close costs it nothing but one read that returns EOF.
package conns

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Defaults of Options.
const (
	DefaultLingerTimeout = 5 * time.Second
	DefaultLingerBytes   = 32 << 20
	DefaultMaxLingering  = 1024
	// DefaultIPv6PrefixLen is how many leading bits of an IPv6 address
	// name one client: a /64, the prefix one host or one site is given
	// (RFC 6177, RFC 7421), within which it may use any address.
	DefaultIPv6PrefixLen = 64
)

// ClientPrefix is the client an address counts as, for every per-client
// limit of verifyd: the connection caps here, spec §8's per source IP
// windows and the /auth/* limits and failed-login delays (package server
// and server/web key on it through Server.ClientKey). An IPv4 address,
// or an IPv4-mapped IPv6 one (::ffff:192.0.2.1), is itself, a /32. An
// IPv6 address counts by its first v6Bits bits (DefaultIPv6PrefixLen when
// v6Bits is not 1 to 128): a host given a /64 can take any of its 2^64
// addresses, and would rotate past a limit kept per address. A zone is
// dropped. The zero Addr gives the zero Prefix.
func ClientPrefix(a netip.Addr, v6Bits int) netip.Prefix {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	if v6Bits < 1 || v6Bits > 128 {
		v6Bits = DefaultIPv6PrefixLen
	}
	p, err := a.Prefix(v6Bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// Reason says why Accept refused a connection.
type Reason int

const (
	// OverTotal: MaxConns connections are open.
	OverTotal Reason = iota
	// OverPerIP: MaxConnsPerIP connections from the client's address are
	// open.
	OverPerIP
)

func (r Reason) String() string {
	if r == OverPerIP {
		return "per_ip"
	}
	return "total"
}

// Options configures a Listener. The zero value caps nothing and lingers
// with the defaults.
type Options struct {
	// MaxConns caps the connections open at once; 0 means no cap.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one client
	// (ClientPrefix of the peer's address, with IPv6PrefixLen); 0 means no
	// cap. Addresses in Exempt are not capped (a trusted reverse proxy
	// carries many clients).
	MaxConnsPerIP int
	IPv6PrefixLen int
	Exempt        []netip.Prefix
	// Reject writes the complete answer to a refused connection (status
	// line, headers with Connection: close, body). Nil writes a bare 503.
	Reject func(w io.Writer, why Reason)
	// LingerTimeout bounds a lingering close; LingerBytes bounds what it
	// reads and throws away; MaxLingering bounds how many run at once.
	// Zero means the default; a negative LingerTimeout turns lingering off.
	LingerTimeout time.Duration
	LingerBytes   int64
	MaxLingering  int
	// Name labels the metrics ("api", "admin"); default "api".
	Name string
}

// Listener wraps a net.Listener with the caps and the lingering close.
type Listener struct {
	net.Listener
	opts Options

	open      atomic.Int64
	lingering atomic.Int64
	mu        sync.Mutex
	perIP     map[netip.Prefix]int

	// stopped (under mu) and stop: Shutdown was called.
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup

	mOpen      *metrics.Gauge
	mRejTotal  *metrics.Counter
	mRejPerIP  *metrics.Counter
	mLingered  *metrics.Counter
	mLingerB   *metrics.Counter
	mLingerCut *metrics.Counter
}

// New wraps ln.
func New(ln net.Listener, opts Options) *Listener {
	if opts.LingerTimeout == 0 {
		opts.LingerTimeout = DefaultLingerTimeout
	}
	if opts.LingerBytes <= 0 {
		opts.LingerBytes = DefaultLingerBytes
	}
	if opts.MaxLingering <= 0 {
		opts.MaxLingering = DefaultMaxLingering
	}
	if opts.Name == "" {
		opts.Name = "api"
	}
	l := &Listener{Listener: ln, opts: opts, perIP: make(map[netip.Prefix]int), stop: make(chan struct{})}
	n := opts.Name
	l.mOpen = metrics.GetOrCreateGauge(`verifyd_http_connections_open{listener="`+n+`"}`, func() float64 { return float64(l.open.Load()) })
	l.mRejTotal = metrics.GetOrCreateCounter(`verifyd_http_connections_refused_total{listener="` + n + `",reason="total"}`)
	l.mRejPerIP = metrics.GetOrCreateCounter(`verifyd_http_connections_refused_total{listener="` + n + `",reason="per_ip"}`)
	l.mLingered = metrics.GetOrCreateCounter(`verifyd_http_lingering_closes_total{listener="` + n + `"}`)
	l.mLingerB = metrics.GetOrCreateCounter(`verifyd_http_lingering_discarded_bytes_total{listener="` + n + `"}`)
	l.mLingerCut = metrics.GetOrCreateCounter(`verifyd_http_lingering_cut_total{listener="` + n + `"}`)
	return l
}

// Accept returns the next connection within the caps.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client, capped := l.client(c)
		if l.opts.MaxConns > 0 && l.open.Load() >= int64(l.opts.MaxConns) {
			l.mRejTotal.Inc()
			l.refuse(c, OverTotal)
			continue
		}
		if capped {
			l.mu.Lock()
			if l.perIP[client] >= l.opts.MaxConnsPerIP {
				l.mu.Unlock()
				l.mRejPerIP.Inc()
				l.refuse(c, OverPerIP)
				continue
			}
			l.perIP[client]++
			l.mu.Unlock()
		}
		l.open.Add(1)
		return &Conn{Conn: c, l: l, client: client, capped: capped}, nil
	}
}

// client is the client c's peer counts as (ClientPrefix), and whether
// the per-IP cap applies to it.
func (l *Listener) client(c net.Conn) (netip.Prefix, bool) {
	if l.opts.MaxConnsPerIP <= 0 {
		return netip.Prefix{}, false
	}
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false // a unix socket: one peer, the operator
	}
	ip := ta.AddrPort().Addr().Unmap()
	for _, p := range l.opts.Exempt {
		if p.Contains(ip) {
			return netip.Prefix{}, false
		}
	}
	return ClientPrefix(ip, l.opts.IPv6PrefixLen), true
}

// refuse answers a connection over a cap and closes it lingering.
func (l *Listener) refuse(c net.Conn, why Reason) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if l.opts.Reject != nil {
		l.opts.Reject(c, why)
	} else {
		io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	}
	l.linger(c)
}

// Shutdown ends the lingering closes under way (their sockets close at
// once) and makes every later close immediate. It does not close the
// listener.
func (l *Listener) Shutdown() {
	l.mu.Lock()
	if !l.stopped {
		l.stopped = true
		close(l.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// Open is the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Lingering is the number of lingering closes under way.
func (l *Listener) Lingering() int { return int(l.lingering.Load()) }

// linger closes c lingering (the package comment), on its own goroutine.
func (l *Listener) linger(c net.Conn) {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || l.opts.LingerTimeout < 0 {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.stopped || l.lingering.Load() >= int64(l.opts.MaxLingering) {
		l.mu.Unlock()
		l.mLingerCut.Inc()
		c.Close()
		return
	}
	l.lingering.Add(1)
	l.wg.Add(1)
	l.mu.Unlock()
	if cw.CloseWrite() != nil {
		l.lingering.Add(-1)
		l.wg.Done()
		c.Close()
		return
	}
	l.mLingered.Inc()
	go func() {
		defer l.wg.Done()
		defer l.lingering.Add(-1)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(l.opts.LingerTimeout))
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-l.stop:
				c.SetReadDeadline(time.Now())
			case <-done:
			}
		}()
		buf := make([]byte, 32<<10)
		var n int64
		for n < l.opts.LingerBytes {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		l.mLingerB.Add(int(n))
		if n >= l.opts.LingerBytes {
			l.mLingerCut.Inc()
		}
	}()
}

// Conn is an accepted connection; its Close is a lingering close.
type Conn struct {
	net.Conn
	l      *Listener
	client netip.Prefix
	capped bool
	closed atomic.Bool
	// used: a byte was read from the client; muted: writes are dropped.
	used  atomic.Bool
	muted atomic.Bool
}

// Read reads from the client, noting that it sent something.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.used.Load() {
		c.used.Store(true)
	}
	return n, err
}

// Used reports whether the client has sent a byte on the connection. A
// read error on a connection not Used is no malformed request: the
// client opened it and never sent one (a pool's spare connection) before
// the server's timeout, or closed it.
func (c *Conn) Used() bool { return c.used.Load() }

// Mute drops everything written to the connection from now on (Write
// reports it written): for the answer a server would send to a request
// nobody made.
func (c *Conn) Mute() { c.muted.Store(true) }

// Write writes to the client, unless the connection is muted.
func (c *Conn) Write(p []byte) (int, error) {
	if c.muted.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Close shuts the write side, drains what the client still sends (bounded)
// and closes; it returns at once.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return net.ErrClosed
	}
	c.l.open.Add(-1)
	if c.capped {
		c.l.mu.Lock()
		if c.l.perIP[c.client]--; c.l.perIP[c.client] <= 0 {
			delete(c.l.perIP, c.client)
		}
		c.l.mu.Unlock()
	}
	c.l.linger(c.Conn)
	return nil
}

// Unwrap returns the underlying connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }
