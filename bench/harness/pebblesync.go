package harness

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// PebbleSync is a bare Pebble synced write's latency, measured in the same
// run as scenario 1 on the disk that holds verifyd's data: the floor under
// the API's overhead, which waits for one synced write per validation
// (spec: no answer before its charge is durable).
type PebbleSync struct {
	Concurrency int         `json:"concurrency"`
	Writes      int         `json:"writes"`
	Latency     Percentiles `json:"latency_ms"`
	// Paced is the same at the load the API puts on its store at that
	// concurrency: each writer waits the level's mean engine time between
	// writes, and writes as many bytes as a charge (the signed receipt and
	// its rows); nil in results of earlier versions.
	Paced *PacedSync `json:"paced,omitempty"`
}

// PacedSync is a bare Pebble synced write at the API's pace.
type PacedSync struct {
	Writes  int         `json:"writes"`
	Bytes   int         `json:"bytes"`
	ThinkMs float64     `json:"think_ms"`
	Latency Percentiles `json:"latency_ms"`
}

// measurePebbleSync opens a new Pebble store in dir and writes n records
// of size bytes, each its own synced batch, from concurrency writers, each
// waiting think after each write; dir is removed afterwards.
func measurePebbleSync(dir string, concurrency, n, size int, think time.Duration) (PebbleSync, error) {
	res := PebbleSync{Concurrency: concurrency, Writes: n}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return res, fmt.Errorf("pebble: %w", err)
	}
	h := NewHistogram()
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	var werr atomic.Value
	val := make([]byte, size)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := make([]byte, 8)
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				binary.BigEndian.PutUint64(key, uint64(i))
				start := time.Now()
				if err := db.Set(key, val, pebble.Sync); err != nil {
					werr.Store(err)
					return
				}
				d := time.Since(start)
				mu.Lock()
				h.Record(d)
				mu.Unlock()
				time.Sleep(think)
			}
		}()
	}
	wg.Wait()
	cerr := db.Close()
	if err, _ := werr.Load().(error); err != nil {
		return res, fmt.Errorf("pebble: %w", err)
	}
	if cerr != nil {
		return res, fmt.Errorf("pebble: %w", cerr)
	}
	res.Latency = percentiles(h)
	return res, nil
}

// quietPebble drops Pebble's informational lines.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
