package world

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Session outcomes: how an SMTP session of the world ended (Session.Outcome).
const (
	OutcomeOK           = "ok"             // the client sent QUIT and got 221
	OutcomeTarpit       = "tarpit"         // a tarpit host held the connection until it was closed
	OutcomeBusy         = "busy"           // a busy host answered 421 4.7.0 and closed
	OutcomeTooManyConns = "too-many-conns" // over Host.MaxConnsPerClient: 421 4.7.0 and closed
	OutcomeTimeout      = "timeout"        // the client stayed idle past SMTPOptions.IdleTimeout
	OutcomeClientClosed = "client-closed"  // the client closed the connection without QUIT
	OutcomeTLSFailed    = "tls-failed"     // the STARTTLS handshake failed
	OutcomeClosed       = "closed"         // SMTPServers.Close ended the session
	OutcomeError        = "error"          // another network error (reset, broken pipe ...)
	OutcomeDeferred     = "deferred"       // a defer_ehlo host answered EHLO or HELO with 421 and closed
	OutcomeBlocked      = "blocked"        // a blocked host greeted with 554 and the client quit or left
	OutcomeDropped      = "dropped"        // the host ended the session after Host.DropAfterRcpts RCPTs
)

// DefaultSessionLogLimit is how many sessions a SessionLog from
// NewSessionLog keeps before it drops the oldest.
const DefaultSessionLogLimit = 1_000_000

// RcptResult is one RCPT TO of a session and the server's answer to it.
type RcptResult struct {
	// Addr is the address inside the angle brackets, as the client sent it
	// (the whole argument when it could not be parsed).
	Addr string
	// Code is the reply code (250, 450, 550 ...).
	Code int
	// Enhanced is the enhanced status code of the reply (RFC 3463), "2.1.5".
	Enhanced string
}

// Session is what the world's SMTP servers saw of one TCP connection.
type Session struct {
	// ID numbers the sessions of a log in the order they started, from 1.
	ID uint64
	// HostName and HostIP are the host that took the connection.
	HostName, HostIP string
	// Client is the client's IP address (without port): the prober's egress
	// address. ClientPort is its source port.
	Client     string
	ClientPort int
	// Start is when the connection was accepted, End when it was closed
	// (wall clock, not SMTPOptions.Now).
	Start, End time.Time
	// Helo is the argument of the last EHLO or HELO.
	Helo string
	// TLS is set when STARTTLS succeeded; TLSVersion and TLSCipher are the
	// negotiated tls.VersionTLS1x and cipher suite.
	TLS        bool
	TLSVersion uint16
	TLSCipher  uint16
	// MailFrom is the reverse path of the last MAIL FROM, without the angle
	// brackets ("" for the null path <> or when no MAIL was sent).
	MailFrom string
	// Rcpts are all the RCPT TO commands of the session, across
	// transactions, in order. Log readers share these slices: do not modify.
	Rcpts []RcptResult
	// Quit is set when the client sent QUIT and was answered 221.
	Quit bool
	// RoundTrips counts the latency waits of the session: one per group
	// of replies sent together, as over a real network (zero on a host
	// without latency).
	RoundTrips int
	// Outcome is how the session ended: one of the Outcome constants.
	Outcome string
	// RefusedClient is set when the host refused the client itself, for
	// good, in this session: a 554 greeting (Host.Mode blocked), a 5xx to
	// MAIL FROM by its Host.MailPolicy, or a RCPT refused for every
	// recipient (Domain.Policy reject, Host.BlockedClients). A verifier's
	// policy block of its address is warranted in such a session only.
	RefusedClient bool
}

// LogStats are counters over every session a SessionLog was given since it
// was made or Reset, including those dropped by its bound.
type LogStats struct {
	// Sessions is how many sessions were logged; Dropped how many of them
	// the bound pushed out.
	Sessions uint64 `json:"sessions"`
	Dropped  uint64 `json:"dropped"`
	// Rcpts is how many RCPT TO commands the sessions carried.
	Rcpts uint64 `json:"rcpts"`
	// Outcomes counts the sessions per Outcome.
	Outcomes map[string]uint64 `json:"outcomes"`
	// Clients counts the sessions per client address, ClientRcpts the
	// RCPT TO commands they carried, ClientRefused those in which the
	// host refused the client itself (Session.RefusedClient).
	Clients       map[string]uint64 `json:"clients"`
	ClientRcpts   map[string]uint64 `json:"client_rcpts"`
	ClientRefused map[string]uint64 `json:"client_refused"`
}

// SessionLog records the SMTP sessions of a world, keeping the most recent
// ones up to a bound, so that a long benchmark cannot exhaust memory. It is
// safe for concurrent use.
type SessionLog struct {
	nextID atomic.Uint64

	mu       sync.Mutex
	limit    int
	ring     []Session // grows up to limit, then wraps at head
	head     int       // index of the oldest session once the ring is full
	total    uint64
	dropped  uint64
	rcpts    uint64
	outcomes map[string]uint64
	clients  map[string]uint64
	crcpts   map[string]uint64 // RCPTs per client
	refused  map[string]uint64 // sessions refusing the client, per client
	waiters  []logWaiter
}

type logWaiter struct {
	n  uint64
	ch chan struct{}
}

// NewSessionLog returns an empty log that keeps DefaultSessionLogLimit
// sessions.
func NewSessionLog() *SessionLog { return NewSessionLogLimit(DefaultSessionLogLimit) }

// NewSessionLogLimit returns an empty log that keeps the last limit sessions
// (at least 1).
func NewSessionLogLimit(limit int) *SessionLog {
	return &SessionLog{
		limit:    max(limit, 1),
		outcomes: map[string]uint64{},
		clients:  map[string]uint64{},
		crcpts:   map[string]uint64{},
		refused:  map[string]uint64{},
	}
}

// newID hands out the ID of a session that starts now.
func (l *SessionLog) newID() uint64 { return l.nextID.Add(1) }

// Add appends a finished session. The servers call it as each session ends;
// tests may call it to build a log by hand. Add takes ownership of s.Rcpts.
func (l *SessionLog) Add(s Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < l.limit {
		l.ring = append(l.ring, s)
	} else {
		l.ring[l.head] = s
		l.head = (l.head + 1) % l.limit
		l.dropped++
	}
	l.total++
	l.rcpts += uint64(len(s.Rcpts))
	l.outcomes[s.Outcome]++
	l.clients[s.Client]++
	if len(s.Rcpts) > 0 {
		l.crcpts[s.Client] += uint64(len(s.Rcpts))
	}
	if s.RefusedClient {
		l.refused[s.Client]++
	}
	if len(l.waiters) > 0 {
		kept := l.waiters[:0]
		for _, w := range l.waiters {
			if l.total >= w.n {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		clear(l.waiters[len(kept):])
		l.waiters = kept
	}
}

// Sessions returns a copy of the sessions kept, in the order they started.
// The Rcpts slices are shared with the log: do not modify them.
func (l *SessionLog) Sessions() []Session {
	l.mu.Lock()
	out := make([]Session, 0, len(l.ring))
	out = append(out, l.ring[l.head:]...)
	out = append(out, l.ring[:l.head]...)
	l.mu.Unlock()
	// Sessions are added as they end; concurrent ones end out of order.
	slices.SortFunc(out, func(a, b Session) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Len returns how many sessions the log keeps now (at most its bound).
func (l *SessionLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ring)
}

// Stats returns the log's counters, which count every session since the log
// was made or Reset, dropped ones included.
func (l *SessionLog) Stats() LogStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogStats{
		Sessions:      l.total,
		Dropped:       l.dropped,
		Rcpts:         l.rcpts,
		Outcomes:      maps.Clone(l.outcomes),
		Clients:       maps.Clone(l.clients),
		ClientRcpts:   maps.Clone(l.crcpts),
		ClientRefused: maps.Clone(l.refused),
	}
}

// Reset forgets every session and zeroes the counters. Sessions still open
// are logged when they end, and count towards Wait from then on.
func (l *SessionLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.ring)
	l.ring = l.ring[:0]
	l.head = 0
	l.total, l.dropped, l.rcpts = 0, 0, 0
	clear(l.outcomes)
	clear(l.clients)
	clear(l.crcpts)
	clear(l.refused)
}

// Wait waits until at least n sessions have been logged since the log was
// made or Reset, or timeout passes, and reports whether they were.
func (l *SessionLog) Wait(n int, timeout time.Duration) bool {
	l.mu.Lock()
	if l.total >= uint64(max(n, 0)) {
		l.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, logWaiter{n: uint64(n), ch: ch})
	l.mu.Unlock()

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range l.waiters {
		if w.ch == ch {
			l.waiters = slices.Delete(l.waiters, i, i+1)
			return false
		}
	}
	return true // closed between the timer and the lock
}
