package server

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestIdleConnections: a connection that idles past the server's timeouts
// is closed without a word, whether it carried a request before (a
// keep-alive connection) or none yet (a pool's spare connection, a
// browser's preconnect). The spare one was answered an unasked
// "400 malformed request" after http.read_timeout: fasthttp hands the
// ErrorHandler the read timeout of a connection's first request even
// when nothing of it came, and the handler answered every read error
// 400. A client that then sent a request on it read that 400 as the
// answer. A request cut off mid-head answers 400 BAD_REQUEST in the envelope (spec §7: not 408).
func TestIdleConnections(t *testing.T) {
	// Timeouts long enough that a client on a loaded machine sends its
	// request before they pass; the cases run side by side.
	e := startServer(t, func(o *Options) {
		o.ReadTimeout = 1500 * time.Millisecond
		o.IdleTimeout = 2 * time.Second
	})
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// Far past both timeouts; only the server's close ends the wait.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	// rest is what the server sends before it closes the connection.
	rest := func(t *testing.T, br *bufio.Reader) string {
		t.Helper()
		b, err := io.ReadAll(br)
		if err != nil {
			t.Fatalf("the server did not close the idle connection: %v (read %q)", err, b)
		}
		return string(b)
	}

	t.Run("after a request", func(t *testing.T) {
		t.Parallel()
		c, br := dial(t)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := readReply(t, br); r.status != 200 {
			t.Fatalf("healthz: %d %s", r.status, r.body)
		}
		if b := rest(t, br); b != "" {
			t.Errorf("idle after a request: the server sent %q", b)
		}
	})
	t.Run("before any request", func(t *testing.T) {
		t.Parallel()
		_, br := dial(t)
		if b := rest(t, br); b != "" {
			t.Errorf("idle before any request: the server sent %q", b)
		}
	})
	t.Run("after two requests", func(t *testing.T) {
		t.Parallel()
		c, br := dial(t)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.key+"\r\n\r\n")
		if r := readReply(t, br); r.status != 200 {
			t.Fatalf("healthz: %d", r.status)
		}
		if r := readReply(t, br); r.status != 200 {
			t.Fatalf("balance: %d", r.status)
		}
		if b := rest(t, br); b != "" {
			t.Errorf("idle after two requests: the server sent %q", b)
		}
	})
	// Part of a head, then nothing: 400 in the envelope, first request or
	// a later one.
	for name, first := range map[string]string{"head cut off": "", "head cut off after a request": "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, br := dial(t)
			io.WriteString(c, first+"GET /v1/balance HTTP/1.1\r\nHost: x\r\n")
			if first != "" {
				if r := readReply(t, br); r.status != 200 {
					t.Fatalf("healthz: %d", r.status)
				}
			}
			r := readReply(t, br)
			if code, _, _ := r.errorEnvelope(t); r.status != 400 || code != httpapi.CodeBadRequest {
				t.Errorf("%d %s, want 400", r.status, r.body)
			}
			if b := rest(t, br); b != "" {
				t.Errorf("after the 400: %q", b)
			}
		})
	}
	// A malformed head is still a 400 at once.
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		c, br := dial(t)
		io.WriteString(c, "NOT HTTP AT ALL\r\n\r\n")
		r := readReply(t, br)
		if code, msg, _ := r.errorEnvelope(t); r.status != 400 || code != httpapi.CodeBadRequest || !strings.Contains(msg, "malformed") {
			t.Errorf("a malformed head: %d %s", r.status, r.body)
		}
	})
}
