package world

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// whoisTimeout bounds one WHOIS exchange on the server side.
const whoisTimeout = 10 * time.Second

// WHOISServer is the world's WHOIS server (RFC 3912): TCP on a loopback
// address, one query line per connection, answered in the layout of the
// gTLD registries ("Domain Name:", "Creation Date:"), then closed. Start it
// with StartWHOIS; it is safe for concurrent use.
type WHOISServer struct {
	reg     registry
	ln      net.Listener
	wg      sync.WaitGroup
	done    chan struct{}
	queries atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	once    sync.Once
}

// StartWHOIS starts the WHOIS server for w's domains on addr, a loopback
// "ip:port" ("127.0.0.1:0" picks a port; real WHOIS uses port 43). It reads
// w once. A query is one line, the domain name (any case, Unicode or
// A-label); the answer for a domain with Registered set is
//
//	Domain Name: ACME0.TEST
//	Registry Domain ID: 1_DOMAIN_TEST-WORLD
//	Creation Date: 2009-03-14T00:00:00Z
//	Registrar: World Registrar
//	>>> Last update of WHOIS database: 2026-01-01T00:00:00Z <<<
//
// and `No match for "NAME".` for any other name.
func StartWHOIS(w *World, addr string) (*WHOISServer, error) {
	ln, err := listenLoopback("whois", addr)
	if err != nil {
		return nil, err
	}
	s := &WHOISServer{reg: newRegistry(w), ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr returns the server's "ip:port".
func (s *WHOISServer) Addr() string { return s.ln.Addr().String() }

// Queries returns how many connections the server has accepted.
func (s *WHOISServer) Queries() int64 { return s.queries.Load() }

// Close stops the server, closes open connections and waits for their
// goroutines. Calling it again does nothing.
func (s *WHOISServer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

func (s *WHOISServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		s.queries.Add(1)
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *WHOISServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	_ = c.SetDeadline(time.Now().Add(whoisTimeout))
	line, err := bufio.NewReaderSize(c, 512).ReadString('\n')
	if err != nil && line == "" {
		return
	}
	q := strings.TrimSpace(line)
	ldh, at, ok := s.reg.lookup(q)
	var b strings.Builder
	if !ok {
		fmt.Fprintf(&b, "No match for %q.\r\n", strings.ToUpper(q))
	} else {
		upper := strings.ToUpper(ldh)
		fmt.Fprintf(&b, "   Domain Name: %s\r\n", upper)
		fmt.Fprintf(&b, "   Registry Domain ID: %d_DOMAIN_%s-WORLD\r\n", len(ldh), strings.ToUpper(strings.ReplaceAll(ldh, ".", "_")))
		fmt.Fprintf(&b, "   Creation Date: %s\r\n", at.UTC().Format(time.RFC3339))
		b.WriteString("   Registrar: World Registrar\r\n")
		fmt.Fprintf(&b, ">>> Last update of WHOIS database: %s <<<\r\n", time.Now().UTC().Format(time.RFC3339))
	}
	_, _ = c.Write([]byte(b.String()))
}
