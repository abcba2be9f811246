package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Load is one closed-loop load: Concurrency workers send POST requests to
// one path, each taking the next request index until Count requests were
// sent, Duration has passed since the start, or the context ends. Every
// load therefore stops by itself. Requests in flight when it stops are
// waited for (each is bounded by Timeout) and counted in the latencies.
type Load struct {
	// Name says what the load is ("fresh", "cache", …), for file names.
	Name        string
	Client      *fasthttp.HostClient
	Path        string
	Key         string
	Concurrency int
	Count       int
	Duration    time.Duration
	Timeout     time.Duration
	// Body returns the body of request i (0 ≤ i < Count).
	Body func(i int) []byte
	// Check, when set, is called with every answer (status, body) and
	// returns "" when it is a success, else the name of the failure. The
	// body is only valid during the call. Default: HTTP 200 is success.
	Check func(i int, status int, body []byte, latency time.Duration) string
	// Timing, when set, is called after a successful Check with the
	// answer's Server-Timing header (nil when absent), valid during the
	// call.
	Timing func(i int, serverTiming []byte)
}

// EngineTiming returns the dur of metric "engine" in a Server-Timing
// header (verifyd's engine time of a fresh validation); ok is false when
// there is none.
func EngineTiming(h []byte) (time.Duration, bool) {
	for _, m := range strings.Split(string(h), ",") {
		parts := strings.Split(m, ";")
		if strings.TrimSpace(parts[0]) != "engine" {
			continue
		}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if k != "dur" {
				continue
			}
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || ms < 0 {
				return 0, false
			}
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// LoadStats is what a load measured.
type LoadStats struct {
	Sent   int
	OK     int
	Errors map[string]int
	Hist   *Histogram
	// Window is from the start to the moment the last request was sent;
	// InWindow counts the successes that completed within it. Their ratio
	// is the sustained throughput: the closing drain of requests in flight
	// does not dilute it.
	Window   time.Duration
	InWindow int
	// Total is from the start to the last answer.
	Total time.Duration
}

// Throughput is successes per second while the load was sustained.
func (s LoadStats) Throughput() float64 {
	if s.Window <= 0 {
		return s.OverallThroughput()
	}
	return float64(s.InWindow) / s.Window.Seconds()
}

// OverallThroughput is successes per second over the whole load, drain
// included.
func (s LoadStats) OverallThroughput() float64 {
	if s.Total <= 0 {
		return 0
	}
	return float64(s.OK) / s.Total.Seconds()
}

// NewClient returns a client for the API at addr (host:port) with enough
// connections for concurrency.
func NewClient(addr string, concurrency int, timeout time.Duration) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          addr,
		MaxConns:                      concurrency + 16,
		MaxConnWaitTimeout:            timeout,
		ReadTimeout:                   timeout,
		WriteTimeout:                  10 * time.Second,
		MaxIdleConnDuration:           time.Minute,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		ReadBufferSize:                16 << 10,
	}
}

// Run runs the load and returns what it measured.
func (l Load) Run(ctx context.Context) LoadStats {
	if l.Concurrency < 1 {
		l.Concurrency = 1
	}
	hist := NewHistogram()
	var (
		next     atomic.Int64
		ok       atomic.Int64
		mu       sync.Mutex
		errs     = map[string]int{}
		lastSent atomic.Int64 // ns since start
		ends     = make([]int64, l.Count)
	)
	for i := range ends {
		ends[i] = -1
	}
	start := time.Now()
	deadline := start.Add(l.Duration)
	auth := "Bearer " + l.Key
	uri := "http://" + l.Client.Addr + l.Path
	var wg sync.WaitGroup
	for range l.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := fasthttp.AcquireRequest()
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				i := int(next.Add(1) - 1)
				now := time.Now()
				if i >= l.Count || now.After(deadline) || ctx.Err() != nil {
					return
				}
				for {
					prev := lastSent.Load()
					sent := int64(now.Sub(start))
					if sent <= prev || lastSent.CompareAndSwap(prev, sent) {
						break
					}
				}
				req.Reset()
				resp.Reset()
				req.SetRequestURI(uri)
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.Set("Authorization", auth)
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(l.Body(i))
				err := l.Client.DoTimeout(req, resp, l.Timeout)
				end := time.Now()
				lat := end.Sub(now)
				fail := ""
				switch {
				case err != nil:
					fail = "transport: " + errorKind(err)
				case l.Check != nil:
					fail = l.Check(i, resp.StatusCode(), resp.Body(), lat)
					if fail == "" && l.Timing != nil {
						l.Timing(i, resp.Header.Peek("Server-Timing"))
					}
				case resp.StatusCode() != fasthttp.StatusOK:
					fail = fmt.Sprintf("HTTP %d", resp.StatusCode())
				}
				if fail != "" {
					mu.Lock()
					errs[fail]++
					mu.Unlock()
					continue
				}
				hist.Record(lat)
				ok.Add(1)
				ends[i] = int64(end.Sub(start))
			}
		}()
	}
	wg.Wait()
	st := LoadStats{
		OK:     int(ok.Load()),
		Errors: errs,
		Hist:   hist,
		Window: time.Duration(lastSent.Load()),
		Total:  time.Since(start),
	}
	st.Sent = st.OK
	for _, c := range errs {
		st.Sent += c
	}
	for _, e := range ends {
		if e >= 0 && e <= int64(st.Window) {
			st.InWindow++
		}
	}
	return st
}

// errorKind names a transport error briefly.
func errorKind(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no free connections"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}
