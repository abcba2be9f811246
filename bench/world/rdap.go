package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The world's registry: a fake RDAP server (RFC 7480, RFC 9082, RFC 9083)
// and a fake WHOIS server (RFC 3912), both serving the registration dates of
// the world's domains (Domain.Registered), so that a verifier's domain-age
// lookups can be tested without the internet.

// registry maps a domain (A-label, lower-case, no trailing dot) to its
// registration time; built once when a server starts.
type registry map[string]time.Time

func newRegistry(w *World) registry {
	reg := registry{}
	for _, d := range w.Domains {
		t, ok := d.RegisteredAt()
		if !ok || d.NXDomain {
			continue
		}
		name, err := dnsName(d.Name)
		if err != nil {
			continue
		}
		reg[strings.TrimSuffix(name, ".")] = t
	}
	return reg
}

// lookup finds name (any case, Unicode or A-label, trailing dot or not).
func (r registry) lookup(name string) (string, time.Time, bool) {
	n, err := dnsName(strings.TrimSpace(name))
	if err != nil {
		return "", time.Time{}, false
	}
	n = strings.TrimSuffix(n, ".")
	t, ok := r[n]
	return n, t, ok
}

// listenLoopback listens on addr, which must be a loopback address: the
// world reaches nothing else.
func listenLoopback(what, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("world: bad %s address %q: %w", what, addr, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("world: %s address %q is not a loopback address", what, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("world: cannot listen for %s on %s: %w", what, addr, err)
	}
	return ln, nil
}

// RDAPServer is the world's RDAP server: plain HTTP on a loopback address,
// answering domain queries (RFC 9082 §3.1.3, "GET /domain/<name>") with an
// RFC 9083 domain object whose events hold the registration date. Start it
// with StartRDAP; it is safe for concurrent use.
type RDAPServer struct {
	reg     registry
	ln      net.Listener
	srv     *http.Server
	served  chan error
	queries atomic.Int64
	fault   atomic.Int32 // HTTP status answered to every query; 0 for none
	once    sync.Once
	err     error
}

// StartRDAP starts the RDAP server for w's domains on addr, a loopback
// "ip:port" ("127.0.0.1:0" picks a port). It reads w once.
//
// GET /domain/<name> answers, as application/rdap+json:
//   - 200 with {"objectClassName": "domain", "ldhName": ..., "events":
//     [{"eventAction": "registration", "eventDate": ...}]} for a domain with
//     Registered set (the name in any case, Unicode or A-label);
//   - 404 with an RFC 9083 §6 error object for any other name.
//
// Any other path or method is 400 or 405. SetFault makes every query
// answer a given status instead.
func StartRDAP(w *World, addr string) (*RDAPServer, error) {
	ln, err := listenLoopback("rdap", addr)
	if err != nil {
		return nil, err
	}
	s := &RDAPServer{reg: newRegistry(w), ln: ln, served: make(chan error, 1)}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the server's "ip:port".
func (s *RDAPServer) Addr() string { return s.ln.Addr().String() }

// URL returns the server's base URL, "http://ip:port/", to which an RDAP
// client appends "domain/<name>" (RFC 9224 §3: base URLs end in "/").
func (s *RDAPServer) URL() string { return "http://" + s.Addr() + "/" }

// Queries returns how many requests the server has received.
func (s *RDAPServer) Queries() int64 { return s.queries.Load() }

// SetFault makes every later request answer HTTP status code (with an
// RFC 9083 error object), as a failing registry would; 0 restores normal
// answers.
func (s *RDAPServer) SetFault(code int) { s.fault.Store(int32(code)) }

// Close stops the server and waits for its handlers. Calling it again does
// nothing.
func (s *RDAPServer) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.srv.Shutdown(ctx)
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			s.err = fmt.Errorf("world: cannot close rdap server: %w", err)
		}
	})
	return s.err
}

// rdapEvent and rdapDomain are the parts of RFC 9083 §5.3 the server sends.
type rdapEvent struct {
	Action string `json:"eventAction"`
	Date   string `json:"eventDate"`
}

type rdapDomain struct {
	Conformance []string    `json:"rdapConformance"`
	Class       string      `json:"objectClassName"`
	LDHName     string      `json:"ldhName"`
	Status      []string    `json:"status"`
	Events      []rdapEvent `json:"events"`
}

type rdapError struct {
	Conformance []string `json:"rdapConformance"`
	Code        int      `json:"errorCode"`
	Title       string   `json:"title"`
}

func (s *RDAPServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.queries.Add(1)
	if code := int(s.fault.Load()); code != 0 {
		writeRDAP(w, code, rdapError{Conformance: []string{"rdap_level_0"}, Code: code, Title: http.StatusText(code)})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeRDAP(w, http.StatusMethodNotAllowed, rdapError{Conformance: []string{"rdap_level_0"}, Code: 405, Title: "Method Not Allowed"})
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/domain/")
	if !ok || name == "" || strings.Contains(name, "/") {
		writeRDAP(w, http.StatusBadRequest, rdapError{Conformance: []string{"rdap_level_0"}, Code: 400, Title: "Bad Request"})
		return
	}
	ldh, at, found := s.reg.lookup(name)
	if !found {
		writeRDAP(w, http.StatusNotFound, rdapError{Conformance: []string{"rdap_level_0"}, Code: 404, Title: "Not Found"})
		return
	}
	writeRDAP(w, http.StatusOK, rdapDomain{
		Conformance: []string{"rdap_level_0"},
		Class:       "domain",
		LDHName:     ldh,
		Status:      []string{"active"},
		Events: []rdapEvent{
			{Action: "registration", Date: at.UTC().Format(time.RFC3339)},
			{Action: "expiration", Date: at.UTC().AddDate(100, 0, 0).Format(time.RFC3339)},
		},
	})
}

func writeRDAP(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/rdap+json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
