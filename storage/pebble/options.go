package pebble

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Options configures a DB. Open calls Defaults and Validate on its own copy.
type Options struct {
	// Now is the clock of every stored time (ledger entries, probed_at
	// defaults, job timestamps) and of idempotency expiry; default
	// time.Now. Tests inject a fake clock to see time pass without sleeping.
	Now func() time.Time
	// Logger receives the package's log lines and Pebble's; default
	// slog.Default().
	Logger *slog.Logger
	// CacheSize is the size in bytes of Pebble's block cache. Default
	// 64 MiB.
	CacheSize int64
	// MemTableSize is the size in bytes of Pebble's memtable. Larger
	// than Pebble's 4 MiB default so that a write-heavy appliance keeps
	// few L0 tables, which every point read (an idempotency key, a cache
	// entry) consults: at 32 MiB a validation with an idempotency key ran
	// about twice as fast. Up to two memtables are in memory. Default
	// 32 MiB.
	MemTableSize int64
	// IdemTTL is how long an idempotency record is kept (spec §7: 24 h).
	// Default 24 h.
	IdemTTL time.Duration
	// PurgeInterval is the period of the background loop that deletes
	// expired idempotency records. Default 10 min; negative: no loop (call
	// PurgeIdem yourself).
	PurgeInterval time.Duration
	// MemoSize bounds, in bytes, the memory kept of recent cache entries
	// and their results (with receipts), so that a validation with
	// cache: true of a recently validated address reads nothing from
	// Pebble. Default 16 MiB; negative: none.
	MemoSize int
	// WALMinSyncInterval is the least time between two fsyncs of the WAL
	// (Pebble's option of that name) while synced commits come faster
	// than WALBusyRate a second: a commit that comes sooner after the last
	// fsync waits for the rest of it, and shares the next fsync with every
	// commit that arrives meanwhile. A busy appliance makes fewer, larger
	// fsyncs, each of which costs CPU time in the kernel: on the 2-core
	// build machine, 250 µs took the CPU time of a cache:true validation
	// from ~148 to ~112 µs and its throughput from ~10,000 to ~15,000/s
	// (BenchmarkCacheHits). Below the busy rate there is no floor, since
	// there it would only make commits wait (syncpace.go). Default
	// 250 µs; negative: never a floor.
	WALMinSyncInterval time.Duration
	// WALBusyRate is the rate of synced commits a second above which
	// WALMinSyncInterval applies (measured over 20 ms). Default 4,000.
	WALBusyRate int
	// MinFreeBytes is the free space of the data directory's file system
	// below which writes are refused with storage.ErrNoSpace (space.go):
	// Pebble stops the process when a WAL write finds the disk full, so
	// the store stops short of it, keeping this much for Pebble's
	// flushes and compactions. Default 256 MiB; negative: no guard.
	MinFreeBytes int64
}

// Defaults for Options.
const (
	DefaultCacheSize     = 64 << 20
	DefaultMemTableSize  = 32 << 20
	DefaultIdemTTL       = storage.DefaultIdemTTL
	DefaultPurgeInterval = 10 * time.Minute
	DefaultMemoSize      = 16 << 20
	// DefaultWALMinSyncInterval is Options.WALMinSyncInterval's default.
	DefaultWALMinSyncInterval = 250 * time.Microsecond
	// DefaultWALBusyRate is Options.WALBusyRate's default.
	DefaultWALBusyRate = 4000
	// DefaultMinFreeBytes is Options.MinFreeBytes's default.
	DefaultMinFreeBytes = 256 << 20
)

// Defaults fills the unset fields.
func (o *Options) Defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.WALBusyRate == 0 {
		o.WALBusyRate = DefaultWALBusyRate
	}
	if o.WALMinSyncInterval == 0 {
		o.WALMinSyncInterval = DefaultWALMinSyncInterval
	}
	if o.MemoSize == 0 {
		o.MemoSize = DefaultMemoSize
	}
	if o.IdemTTL == 0 {
		o.IdemTTL = DefaultIdemTTL
	}
	if o.PurgeInterval == 0 {
		o.PurgeInterval = DefaultPurgeInterval
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
}

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("storage: CacheSize must not be negative, not %d", o.CacheSize))
	}
	if o.MemTableSize < 0 || o.MemTableSize >= 4<<30 {
		errs = append(errs, fmt.Errorf("storage: MemTableSize must be 0 to 4 GiB, not %d", o.MemTableSize))
	}
	if o.IdemTTL < 0 {
		errs = append(errs, fmt.Errorf("storage: IdemTTL must not be negative, not %v", o.IdemTTL))
	}
	return errors.Join(errs...)
}
