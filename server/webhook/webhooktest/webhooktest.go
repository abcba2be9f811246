// Package webhooktest is a webhook receiver for tests: an HTTP server on
// loopback that records every request and answers a settable status.
package webhooktest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Receiver is a webhook endpoint on loopback; URL is its address.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []Request
	status int
}

// Request is one request the receiver got.
type Request struct {
	Header http.Header
	Body   []byte
	At     time.Time
}

// New starts a receiver answering status, closed when the test ends.
func New(t testing.TB, status int) *Receiver {
	rc := &Receiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, Request{r.Header.Clone(), b, time.Now()})
		st := rc.status
		rc.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// SetStatus changes the status later requests are answered.
func (rc *Receiver) SetStatus(status int) {
	rc.mu.Lock()
	rc.status = status
	rc.mu.Unlock()
}

// Count is the number of requests received.
func (rc *Receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// Requests returns the requests received, in order.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.got...)
}
