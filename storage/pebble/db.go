package pebble

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/verifyd/verifyd/storage"
)

// DB is verifyd's durable state: one Pebble database. Its methods are safe
// for concurrent use. Close it once every user has stopped.
type DB struct {
	pdb *pebble.DB

	// readMu guards reads, the iterators open, and readsClosed, set by
	// Close before it waits for reads to reach zero (readsDone).
	readMu      sync.Mutex
	reads       int
	readsClosed bool
	readsDone   *sync.Cond
	opts        Options
	now         func() time.Time
	log         *slog.Logger

	// bootID tells this process's pending idempotency records from those
	// a crashed process left behind.
	bootID uint64

	// mu guards the in-memory copies of every account and API key, loaded
	// at Open and kept by the methods that change them (this process is
	// the only writer), so authentication reads no disk.
	mu       sync.RWMutex
	accounts map[string]storage.Account
	keys     map[string]storage.APIKey
	// stats caches the daily counts of settled days (stats.go).
	stats dayStats
	// keyUse holds each key's last use not yet written (prefix → *keyUse).
	keyUse sync.Map

	// umu guards us, the in-memory copy of users, sessions and
	// invitations (users.go). Lock order: umu before mu.
	umu sync.RWMutex
	us  userState

	// states holds one *acctState per account used since Open: the lock
	// that orders its credit, history and job writes, and its counters.
	states sync.Map

	// outMu orders the writes of delivery outcomes (outcomes.go).
	outMu sync.Mutex

	// jobsMu guards jobs, the in-memory copies of queued and running jobs.
	jobsMu sync.Mutex
	jobs   map[string]*storage.Job

	// space refuses writes while the disk is nearly full (space.go); nil:
	// no guard.
	space *spaceGuard

	idemLocks [idemStripes]sync.Mutex
	outboxMu  sync.Mutex
	histIDs   seqAlloc
	memo      *cacheMemo // nil: none
	verdicts  lastVerdicts
	pacer     *syncPacer // nil: no floor between WAL fsyncs

	closed atomic.Bool
	// failed is set once the in-memory account state counts a write Pebble
	// refused: every call fails after it (restart to reload from disk).
	failed atomic.Pointer[error]
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Open opens (creating if needed) the database in dir. It loads accounts
// and API keys into memory and releases the credit holds a crash left
// behind: a validation whose process died never answered, so it was never
// charged (each release is a ledger entry).
func Open(dir string, opts Options) (*DB, error) {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // Pebble holds its own reference
	log := opts.Logger.With("pkg", "storage")
	popts := &pebble.Options{
		Cache:              cache,
		Logger:             pebbleLogger{log},
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       uint64(opts.MemTableSize),
		FS:                 privateFS{vfs.Default},
	}
	var pacer *syncPacer
	if d := opts.WALMinSyncInterval; d > 0 {
		pacer = newSyncPacer(d, float64(opts.WALBusyRate))
		popts.WALMinSyncInterval = pacer.minSyncInterval
	}
	// Bloom filters on every level: many point reads look for keys that
	// are not there (a job address without a result yet, an idempotency
	// key seen for the first time, a cache miss), and a filter answers
	// those without reading a data block.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		popts.Levels[i].FilterType = pebble.TableFilter
	}
	pdb, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("storage: cannot open %s: %w", dir, err)
	}
	var boot [8]byte
	rand.Read(boot[:])
	db := &DB{
		pdb:      pdb,
		opts:     opts,
		now:      func() time.Time { return opts.Now().UTC() },
		log:      log,
		bootID:   binary.LittleEndian.Uint64(boot[:]),
		accounts: make(map[string]storage.Account),
		keys:     make(map[string]storage.APIKey),
		jobs:     make(map[string]*storage.Job),
		stop:     make(chan struct{}),
		histIDs:  seqAlloc{key: keyMetaHistSeq, block: histIDBlock},
		pacer:    pacer,
		space:    newSpaceGuard(dir, opts.MinFreeBytes),
	}
	db.readsDone = sync.NewCond(&db.readMu)
	if opts.MemoSize > 0 {
		db.memo = newCacheMemo(opts.MemoSize)
	}
	if err := db.load(); err != nil {
		pdb.Close()
		return nil, err
	}
	if opts.PurgeInterval > 0 {
		db.wg.Add(1)
		go db.purgeLoop(opts.PurgeInterval)
	}
	return db, nil
}

// load runs the steps of Open after Pebble is open.
func (db *DB) load() error {
	if err := db.checkVersion(); err != nil {
		return err
	}
	if err := db.loadAccounts(); err != nil {
		return err
	}
	if err := db.loadKeys(); err != nil {
		return err
	}
	if err := db.loadUsers(); err != nil {
		return err
	}
	if err := db.histIDs.init(db); err != nil {
		return err
	}
	if err := db.releaseStaleHolds(); err != nil {
		return err
	}
	return db.settleGrants()
}

// Close stops the background loop and closes the database.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return storage.ErrClosed
	}
	exported.CompareAndSwap(db, nil)
	snapMu.Lock() // wait out a scrape reading this DB
	snap = nil
	snapMu.Unlock()
	close(db.stop)
	db.wg.Wait()
	db.waitReads()
	// The keys' last uses not yet written go with the WAL Close flushes.
	db.keyUse.Range(func(prefix, u any) bool {
		if err := db.flushKeyUse(prefix.(string), u.(*keyUse)); err != nil {
			db.log.Warn("cannot record an API key's last use", "prefix", prefix, "err", err)
		}
		return true
	})
	return db.pdb.Close()
}

// Metrics returns Pebble's metrics (compactions, levels, cache hit rates,
// WAL bytes), for the metrics exporter.
func (db *DB) Metrics() *pebble.Metrics { return db.pdb.Metrics() }

// Checkpoint writes a consistent copy of the database into dir, which must
// not exist: sstables are hard-linked when dir is on the same file system,
// and the WAL is synced first so the copy has every acknowledged write.
// Open the copy with Open to restore.
func (db *DB) Checkpoint(dir string) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := db.pdb.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("storage: checkpoint to %s: %w", dir, err)
	}
	return nil
}

// LoadEgressState returns the egress pool's saved state, nil when none was
// saved (egress.Store).
func (db *DB) LoadEgressState() ([]byte, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	v, err := db.get(keyMetaEgress)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// SaveEgressState replaces the egress pool's saved state (egress.Store).
// It is not synced: the pool saves every few seconds, and a crash that
// loses the last save loses a few cooldowns, which start over.
func (db *DB) SaveEgressState(state []byte) error {
	if err := db.check(); err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	b.Set(keyMetaEgress, state, nil)
	return db.commit(b, pebble.NoSync)
}

// --- helpers shared by the record files

func (db *DB) check() error {
	if db.closed.Load() {
		return storage.ErrClosed
	}
	if err := db.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// fail makes every later call return err (see DB.failed).
func (db *DB) fail(err error) {
	err = fmt.Errorf("storage: failed, restart to recover: %w", err)
	if db.failed.CompareAndSwap(nil, &err) && !db.closed.Load() {
		db.log.Error("storage failed", "err", err)
	}
}

// get returns a copy of the value of key, or ErrNotFound.
func (db *DB) get(key []byte) ([]byte, error) {
	v, closer, err := db.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, nil
}

// has reports whether key exists.
func (db *DB) has(key []byte) (bool, error) {
	_, closer, err := db.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// commit applies b with the given durability and closes it.
func (db *DB) commit(b *pebble.Batch, opts *pebble.WriteOptions) error {
	if err := db.space.admit(b.Len()); err != nil {
		b.Close()
		return err
	}
	return db.commitAdmitted(b, opts)
}

// commitAdmitted is commit for a write the space guard already admitted
// (before its caller staged state it cannot undo), or one that must go
// even with the disk nearly full (a release, which frees credits).
func (db *DB) commitAdmitted(b *pebble.Batch, opts *pebble.WriteOptions) error {
	defer b.Close()
	start := time.Now()
	if opts.Sync && db.pacer != nil {
		db.pacer.count()
	}
	if err := db.pdb.Apply(b, opts); err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	countCommit(opts.Sync, time.Since(start))
	return nil
}

// applyOrdered commits b synced at its place in an account's order of
// writes: with the account's lock held, or for a charge once the write
// ahead of it is in (acctState.pending). Pebble's ApplyNoSyncWait gives
// the batch its place in the WAL and makes it visible before returning,
// without waiting for the fsync; the caller goes on (updates its state,
// unlocks, lets the next write go) and then calls the returned wait, which
// blocks until the WAL sync covers the batch. So the order of an account's
// writes is the order of its lock, yet concurrent writers of one account
// share fsyncs (group commit) instead of queueing one fsync each.
// The WAL is one sequential file: once a batch is synced, so is every
// batch before it. A caller reports success only after wait returns nil.
func (db *DB) applyOrdered(b *pebble.Batch) (wait func() error, err error) {
	if err := db.space.admit(b.Len()); err != nil {
		b.Close()
		return nil, err
	}
	return db.applyOrderedAdmitted(b)
}

// applyOrderedAdmitted is applyOrdered for a write the space guard
// already admitted, or one that must go (see commitAdmitted).
func (db *DB) applyOrderedAdmitted(b *pebble.Batch) (wait func() error, err error) {
	start := time.Now()
	if db.pacer != nil {
		db.pacer.count()
	}
	if err := db.pdb.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		b.Close()
		return nil, fmt.Errorf("storage: commit: %w", err)
	}
	return func() error {
		err := b.SyncWait()
		b.Close()
		if err != nil {
			db.log.Error("WAL sync failed", "err", err)
			return fmt.Errorf("storage: sync: %w", err)
		}
		countCommit(true, time.Since(start))
		return nil
	}, nil
}

// scan calls fn for every key in [lower, upper) in order until fn returns
// false or an error. k and v are only valid during the call.
func (db *DB) scan(lower, upper []byte, fn func(k, v []byte) (bool, error)) error {
	it, err := db.iter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if db.closed.Load() {
			it.Close()
			return storage.ErrClosed // a long scan lets Close go on
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		more, err := fn(it.Key(), v)
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// scanPrefix is scan over every key that starts with p.
func (db *DB) scanPrefix(p []byte, fn func(k, v []byte) (bool, error)) error {
	return db.scan(p, prefixEnd(p), fn)
}

// toMs and fromMs convert times to the stored form: Unix milliseconds, UTC.
// The zero time is stored as 0 and read back as the zero time.
func toMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// seqAlloc hands out increasing ids from blocks whose ceiling is stored
// (synced) before any id of the block is used: a restart goes on above the
// last ceiling, so ids are never reused, only a block's unused tail is
// skipped.
type seqAlloc struct {
	key   []byte
	block uint64

	mu   sync.Mutex
	next uint64 // next id to hand out
	ceil uint64 // last id reserved on disk
}

// histIDBlock is how many history ids one synced ceiling write reserves.
const histIDBlock = 1 << 14

func (a *seqAlloc) init(db *DB) error {
	v, err := db.get(a.key)
	if errors.Is(err, storage.ErrNotFound) {
		a.next, a.ceil = 1, 0
		return nil
	}
	if err != nil {
		return err
	}
	if len(v) != 8 {
		return fmt.Errorf("%w: %s", errCorrupt, a.key)
	}
	a.ceil = binary.BigEndian.Uint64(v)
	a.next = a.ceil + 1
	return nil
}

// alloc returns the first of n consecutive new ids.
func (a *seqAlloc) alloc(db *DB, n uint64) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next+n-1 > a.ceil {
		ceil := a.next + n - 1 + a.block
		b := db.pdb.NewBatch()
		b.Set(a.key, appendU64(nil, ceil), nil)
		if err := db.commit(b, pebble.Sync); err != nil {
			return 0, err
		}
		a.ceil = ceil
	}
	first := a.next
	a.next += n
	return first, nil
}

// pebbleLogger hands Pebble's log lines to slog.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...), "src", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "src", "pebble")
}

// Fatalf is Pebble finding its files corrupt or unwritable, after which it
// must not go on: log, then panic (Pebble's own default exits).
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "src", "pebble", "fatal", true)
	panic("pebble: " + msg)
}

// readIter is a Pebble iterator that Close waits for: closing Pebble
// with an iterator open panics, and a results.csv download or a history
// scan may still run when verifyd shuts down.
type readIter struct {
	*pebble.Iterator
	db *DB
}

// iter opens an iterator, or answers ErrClosed once Close began.
func (db *DB) iter(o *pebble.IterOptions) (*readIter, error) {
	db.readMu.Lock()
	if db.readsClosed {
		db.readMu.Unlock()
		return nil, storage.ErrClosed
	}
	db.reads++
	db.readMu.Unlock()
	it, err := db.pdb.NewIter(o)
	if err != nil {
		db.endRead()
		return nil, err
	}
	return &readIter{Iterator: it, db: db}, nil
}

func (it *readIter) Close() error {
	err := it.Iterator.Close()
	it.db.endRead()
	return err
}

func (db *DB) endRead() {
	db.readMu.Lock()
	db.reads--
	if db.reads == 0 && db.readsClosed {
		db.readsDone.Broadcast()
	}
	db.readMu.Unlock()
}

// waitReads refuses new iterators and waits for the open ones to close.
func (db *DB) waitReads() {
	db.readMu.Lock()
	db.readsClosed = true
	for db.reads > 0 {
		db.readsDone.Wait()
	}
	db.readMu.Unlock()
}

var _ storage.Store = (*DB)(nil)
