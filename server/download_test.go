package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
)

// smallBufListener gives every accepted connection a small send buffer,
// so that a client that stops reading stalls the server after kilobytes,
// not after the kernel's megabytes.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(4096)
	}
	return c, err
}

// stalledDownload asks for a results.csv and never reads the answer: its
// receive buffer is small too.
func stalledDownload(t *testing.T, addr, key, id string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /v1/jobs/%s/results.csv HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, key)
	return c
}

func (g *downloadGate) active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// TestCSVDownloadCaps: downloads whose clients stopped reading hold their
// places, further ones over a cap answer 429 with Retry-After, and the
// places come back when those clients go.
func TestCSVDownloadCaps(t *testing.T) {
	db := pebbletest.Open(t, nil)
	sched := startBatch(t, db)
	srv := New(Options{DB: db, Guard: httpapi.NewGuard(httpapi.GuardOptions{DB: db, IPLimitsDisabled: true, Logger: quiet}),
		Batch: sched, Logger: quiet, WriteTimeout: time.Minute, MaxDownloads: 3, MaxDownloadsPerAccount: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(smallBufListener{ln})
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	addr := ln.Addr().String()

	var jobs [2]string
	var keys [2]string
	const rows = 3000 // ~300 KB of CSV: far more than the buffers hold
	for i := range jobs {
		acct := pebbletest.Account(t, db, rows)
		key, _, err := db.MintKey(t.Context(), acct, []string{httpapi.ScopeRead}, "test")
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = key
		var addrs []string
		for n := range rows {
			addrs = append(addrs, fmt.Sprintf("a%d-%d@d%d.test", i, n, n%30))
		}
		j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addrs})
		if err != nil {
			t.Fatal(err)
		}
		sched.Add(j, addrs)
		jobs[i] = j.ID
		waitUntil(t, 2*time.Minute, "the job", func() bool { j, _ := db.Job(t.Context(), jobs[i]); return j.Status == storage.JobCompleted })
	}
	get := func(i int) (int, http.Header, []byte) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/jobs/"+jobs[i]+"/results.csv", nil)
		req.Header.Set("Authorization", "Bearer "+keys[i])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	refused := func(i int, why string) {
		t.Helper()
		status, h, b := get(i)
		if status != 429 || h.Get("Retry-After") != "5" || !bytes.Contains(b, []byte(`"RATE_LIMITED"`)) || !bytes.Contains(b, []byte(`"retryAfter":5`)) {
			t.Fatalf("%s: %d %v %s", why, status, h, b)
		}
	}

	a1 := stalledDownload(t, addr, keys[0], jobs[0])
	a2 := stalledDownload(t, addr, keys[0], jobs[0])
	waitUntil(t, 30*time.Second, "two stalled downloads", func() bool { return srv.downloads.active() == 2 })
	refused(0, "a third download of one account")
	stalledDownload(t, addr, keys[1], jobs[1])
	waitUntil(t, 30*time.Second, "three stalled downloads", func() bool { return srv.downloads.active() == 3 })
	refused(1, "a download over the total")

	// The stalled clients go: their places come back, and a client that
	// reads gets the whole file.
	a1.Close()
	a2.Close()
	waitUntil(t, 30*time.Second, "the places of closed clients", func() bool { return srv.downloads.active() == 1 })
	status, _, b := get(0)
	if n := bytes.Count(b, []byte("\r\n")); status != 200 || n != rows+1 {
		t.Fatalf("download after the others went: %d, %d lines", status, n)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan()
	if sc.Text() != "email,status,score,is_disposable,is_role_based,is_catch_all,is_free_provider,mx_host,latency_ms,probed_at" {
		t.Fatalf("header %q", sc.Text())
	}
}
