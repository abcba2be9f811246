package resolver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// EDNS0 parameters of every query (RFC 6891 §6.2.5; 1232 octets is the
// DNS Flag Day 2020 value, safe from IP fragmentation).
const ednsBufSize = 1232

// tcpMaxIdle is how long a pooled TCP connection may sit idle before it is
// dropped rather than reused; servers close idle connections after a few
// seconds (miekg/dns: 8s).
const tcpMaxIdle = 4 * time.Second

// aLongTimeAgo is a deadline in the past, to interrupt a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// udpBufSize is the read buffer of a UDP exchange. Queries advertise
// ednsBufSize (1232), so a conforming reply fits with room to spare; a
// larger datagram breaks the advertised limit and fails to unpack. 4 KiB
// rather than 64 KiB matters: thousands of queries are in flight during a
// big batch, each holding one buffer (64 KiB each measured ~470 MB).
const udpBufSize = 4096

// bufPool holds the UDP read buffers.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, udpBufSize)
	return &b
}}

// upstream is one recursive resolver: its pooled sockets and its health.
type upstream struct {
	addr       string
	maxQueries int // per UDP socket
	udp        chan *udpConn
	tcp        chan *tcpConn
	m          *upstreamMetrics

	fails     atomic.Int32 // consecutive failures
	downUntil atomic.Int64 // unix nanoseconds of Options.Now; skipped before
}

type udpConn struct {
	net.Conn
	uses int
}

type tcpConn struct {
	*dns.Conn
	idleSince time.Time
}

func newUpstream(addr string, idle, maxQueries int) *upstream {
	return &upstream{
		addr:       addr,
		maxQueries: maxQueries,
		udp:        make(chan *udpConn, idle),
		tcp:        make(chan *tcpConn, idle),
		m:          newUpstreamMetrics(addr),
	}
}

// errMalformed marks a reply that could not be unpacked.
var errMalformed = errors.New("malformed reply")

// query sends m to u over UDP, and over TCP again if the reply is
// truncated. Each exchange may take timeout (and no longer than ctx
// allows). It returns the reply, the result class (upOK, ...) and, for a
// class without a usable reply, the error.
func (u *upstream) query(ctx context.Context, m *dns.Msg, timeout time.Duration) (*dns.Msg, int, error) {
	start := time.Now()
	r, err := u.exchangeUDP(ctx, m, deadline(ctx, start, timeout))
	if err == nil && r.Truncated {
		tcpFallbacks.Inc()
		r, err = u.exchangeTCP(ctx, m, deadline(ctx, time.Now(), timeout))
	}
	u.m.duration.UpdateDuration(start)
	class := upOK
	switch {
	case err != nil:
		r = nil
		var ne net.Error
		switch {
		case errors.Is(err, errMalformed):
			class = upMalformed
		case errors.Is(err, os.ErrDeadlineExceeded), ctx.Err() != nil, errors.As(err, &ne) && ne.Timeout():
			class = upTimeout
			if cerr := ctx.Err(); cerr != nil {
				err = fmt.Errorf("%w (%v)", cerr, err)
			}
		default:
			class = upNetError
		}
	case r.Rcode == dns.RcodeSuccess, r.Rcode == dns.RcodeNameError:
	case r.Rcode == dns.RcodeServerFailure:
		class = upServFail
	case r.Rcode == dns.RcodeRefused:
		class = upRefused
	default:
		class = upRcode
	}
	u.m.results[class].Inc()
	return r, class, err
}

func deadline(ctx context.Context, now time.Time, timeout time.Duration) time.Time {
	d := now.Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

// exchangeUDP sends m from a pooled connected UDP socket and reads until a
// reply with m's ID and question arrives. Replies that do not match (late
// answers to earlier queries on a reused socket, spoofing attempts) are
// discarded.
func (u *upstream) exchangeUDP(ctx context.Context, m *dns.Msg, dl time.Time) (*dns.Msg, error) {
	c, err := u.getUDP()
	if err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	out, err := m.PackBuffer(buf)
	if err != nil {
		u.putUDP(c)
		return nil, err
	}
	if err := c.SetDeadline(dl); err != nil {
		c.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	if _, err := c.Write(out); err != nil {
		c.Close()
		return nil, err
	}
	c.uses++
	for {
		n, err := c.Read(buf)
		if err != nil {
			c.Close()
			return nil, err
		}
		if n < 12 || binary.BigEndian.Uint16(buf) != m.Id {
			udpMismatches.Inc()
			continue
		}
		p := make([]byte, n) // the reply keeps no reference to buf
		copy(p, buf[:n])
		r := new(dns.Msg)
		if err := r.Unpack(p); err != nil {
			if p[2]&0x02 == 0 { // not truncated: broken
				c.Close()
				return nil, fmt.Errorf("%w from %s: %v", errMalformed, u.addr, err)
			}
			// A truncated reply cut short: only its header matters.
			r = &dns.Msg{MsgHdr: dns.MsgHdr{Id: m.Id, Response: true, Truncated: true}}
			r.Question = m.Question
		}
		if !r.Response || !questionMatches(r, m) {
			udpMismatches.Inc()
			continue
		}
		u.putUDP(c)
		return r, nil
	}
}

// exchangeTCP sends m over a pooled TCP connection (RFC 7766 §6.2.1). A
// pooled connection the server has closed meanwhile is retried once on a
// fresh one.
func (u *upstream) exchangeTCP(ctx context.Context, m *dns.Msg, dl time.Time) (*dns.Msg, error) {
	for {
		c, reused, err := u.getTCP(ctx, dl)
		if err != nil {
			return nil, err
		}
		r, err := u.tcpOnce(ctx, c, m, dl)
		if err == nil {
			u.putTCP(c)
			return r, nil
		}
		c.Close()
		if !reused || errors.Is(err, errMalformed) || ctx.Err() != nil || !time.Now().Before(dl) {
			return nil, err
		}
	}
}

func (u *upstream) tcpOnce(ctx context.Context, c *tcpConn, m *dns.Msg, dl time.Time) (*dns.Msg, error) {
	if err := c.SetDeadline(dl); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	defer stop()
	if err := c.WriteMsg(m); err != nil {
		return nil, err
	}
	r, err := c.ReadMsg()
	if err != nil {
		if r != nil { // read whole, but does not unpack
			return nil, fmt.Errorf("%w from %s over tcp: %v", errMalformed, u.addr, err)
		}
		return nil, err
	}
	if r.Id != m.Id || !r.Response || !questionMatches(r, m) {
		return nil, fmt.Errorf("%w from %s over tcp: reply does not match the query", errMalformed, u.addr)
	}
	return r, nil
}

// questionMatches reports whether reply r answers query m. An error reply
// may leave the question out.
func questionMatches(r, m *dns.Msg) bool {
	if len(r.Question) == 0 {
		return r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError
	}
	if len(r.Question) != 1 {
		return false
	}
	q, rq := m.Question[0], r.Question[0]
	return rq.Qtype == q.Qtype && rq.Qclass == q.Qclass && strings.EqualFold(rq.Name, q.Name)
}

func (u *upstream) getUDP() (*udpConn, error) {
	select {
	case c := <-u.udp:
		return c, nil
	default:
	}
	nc, err := net.Dial("udp", u.addr)
	if err != nil {
		return nil, err
	}
	return &udpConn{Conn: nc}, nil
}

func (u *upstream) putUDP(c *udpConn) {
	if c.uses >= u.maxQueries {
		c.Close()
		return
	}
	select {
	case u.udp <- c:
	default:
		c.Close()
	}
}

func (u *upstream) getTCP(ctx context.Context, dl time.Time) (c *tcpConn, reused bool, err error) {
	for {
		var pooled *tcpConn
		select {
		case pooled = <-u.tcp:
		default:
		}
		if pooled == nil {
			break
		}
		if time.Since(pooled.idleSince) < tcpMaxIdle {
			return pooled, true, nil
		}
		pooled.Close()
	}
	d := net.Dialer{Deadline: dl}
	nc, err := d.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, false, err
	}
	return &tcpConn{Conn: &dns.Conn{Conn: nc}}, false, nil
}

func (u *upstream) putTCP(c *tcpConn) {
	c.idleSince = time.Now()
	select {
	case u.tcp <- c:
	default:
		c.Close()
	}
}

// close closes the pooled connections. No exchange may be running.
func (u *upstream) close() {
	for {
		select {
		case c := <-u.udp:
			c.Close()
		case c := <-u.tcp:
			c.Close()
		default:
			return
		}
	}
}

// usable reports whether u is not in its cooldown at now.
func (u *upstream) usable(now int64) bool { return now >= u.downUntil.Load() }

// failed records a failure at now; it reports whether u went down.
func (u *upstream) failed(now int64, failures int, cooldown time.Duration) bool {
	n := u.fails.Add(1)
	if int(n) < failures {
		return false
	}
	wasUp := u.usable(now)
	u.downUntil.Store(now + int64(cooldown))
	if wasUp {
		u.m.down.Inc()
	}
	return wasUp
}

// succeeded records a reply.
func (u *upstream) succeeded() {
	if u.fails.Load() != 0 {
		u.fails.Store(0)
	}
	if u.downUntil.Load() != 0 {
		u.downUntil.Store(0)
	}
}
