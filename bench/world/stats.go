package world

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// StatsServer serves a session log's counters (LogStats) as JSON at
// GET /stats, over plain HTTP on a loopback address, so that a benchmark
// running the world in a process of its own (mailworld -stats) can read
// what the servers saw of each client: sessions, RCPTs, and sessions in
// which a host refused the client itself.
type StatsServer struct {
	ln  net.Listener
	srv *http.Server
}

// StartStats serves l's counters on addr, a loopback "ip:port"
// ("127.0.0.1:0" picks a port).
func StartStats(l *SessionLog, addr string) (*StatsServer, error) {
	ln, err := listenLoopback("stats", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l.Stats())
	})
	s := &StatsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the server's "ip:port".
func (s *StatsServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *StatsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// FetchStats reads the counters a StatsServer (mailworld -stats) serves at
// addr ("ip:port").
func FetchStats(ctx context.Context, addr string) (LogStats, error) {
	var st LogStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("world stats: HTTP %d", resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}
