package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sendWholeThenRead is the client of Node's fetch and of many HTTP
// libraries: it writes the whole request, body included, before it reads
// a byte of the answer. It returns the answer's status and envelope.
func sendWholeThenRead(t *testing.T, network, addr, head string, body []byte) (int, map[string]any, error) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(append([]byte(head), body...)); err != nil {
		return 0, nil, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("read: %w", err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("envelope: %w", err)
	}
	if env.Error.Code != "BAD_REQUEST" || env.Error.Message == "" {
		return resp.StatusCode, nil, fmt.Errorf("envelope %+v", env)
	}
	return resp.StatusCode, env.Error.Details, nil
}

// TestBodyLimitsClientWritesFirst: a body over a route's limit is refused
// on its Content-Length (or as soon as a chunked one passes the limit),
// and a client that writes all of it before reading still reads the 400
// envelope naming the limit (RFC 9112 §9.6 lingering close), on every
// route with a limit: POST /v1/batch (8 MiB), every other request (64
// KiB), the admin socket (1 MiB).
func TestBodyLimitsClientWritesFirst(t *testing.T) {
	in := startIn(t, t.TempDir(), testConfig)
	addr := strings.TrimPrefix(in.base, "http://")
	nine := bytes.Repeat([]byte("a"), 9<<20)
	check := func(what string, status int, details map[string]any, err error, limit int) {
		t.Helper()
		if err != nil || status != 400 || details["maxBodyBytes"] != float64(limit) {
			t.Fatalf("%s: %d %v: %v", what, status, details, err)
		}
	}

	for i := range 20 {
		head := fmt.Sprintf("POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", in.key, len(nine))
		status, d, err := sendWholeThenRead(t, "tcp", addr, head, nine)
		check(fmt.Sprintf("9 MiB batch, try %d", i+1), status, d, err, 8<<20)
	}

	// Chunked: no Content-Length to refuse on; refused when the limit
	// passes, with the rest of the body still on its way.
	var chunked bytes.Buffer
	for off := 0; off < len(nine); off += 1 << 20 {
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", 1<<20, nine[off:off+1<<20])
	}
	chunked.WriteString("0\r\n\r\n")
	for i := range 3 {
		head := "POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		status, d, err := sendWholeThenRead(t, "tcp", addr, head, chunked.Bytes())
		check(fmt.Sprintf("9 MiB chunked batch, try %d", i+1), status, d, err, 8<<20)
	}

	// Every other route: 64 KiB.
	for _, path := range []string{"/v1/validate", "/v1/balance", "/v1/nope"} {
		mb := nine[:1<<20]
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(mb))
		status, d, err := sendWholeThenRead(t, "tcp", addr, head, mb)
		check("1 MiB to "+path, status, d, err, 64<<10)
	}

	// The admin socket: 1 MiB.
	head := fmt.Sprintf("POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 2<<20)
	status, d, err := sendWholeThenRead(t, "unix", filepath.Join(in.dir, "data", "admin.sock"), head, nine[:2<<20])
	check("2 MiB to the admin socket", status, d, err, 1<<20)

	// A body within the limit is read, and the connection stays usable.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 2 {
		fmt.Fprintf(c, "POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("a small batch without a key: %d", resp.StatusCode)
		}
	}
}
