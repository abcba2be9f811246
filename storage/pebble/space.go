package pebble

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/verifyd/verifyd/storage"
)

// Disk space. Pebble treats a WAL write that fails (ENOSPC) as fatal: it
// stops the process. So the store never lets the disk get that far: a
// guard checks the file system's free space and refuses writes (every
// write goes through commit or applyOrdered) with storage.ErrNoSpace
// while less than Options.MinFreeBytes is free, before Pebble sees them.
// The reserve left is what Pebble's flushes and compactions, and the
// writes in flight, still need. Reads go on; once space is freed the
// guard sees it (it looks again every spaceRecheck while refusing) and
// writes are taken again, with nothing half-written in between: a
// refused batch was never applied.
//
// Free space is read (statfs) again after every spaceStep of bytes
// written and every spaceRecheck, so that a burst of writes cannot run
// through the reserve between two looks.

// spaceRecheck is how often the guard reads the free space while it
// refuses writes, or when writes are few.
const spaceRecheck = 250 * time.Millisecond

type spaceGuard struct {
	dir string
	min uint64
	// step is how many bytes may be written between two looks.
	step int64

	written atomic.Int64 // bytes written since the last look
	// looked is when the last look was, as monotonic time since start:
	// a step of the wall clock neither stops nor hastens the looks.
	start  time.Time
	looked atomic.Int64
	low    atomic.Bool

	mu sync.Mutex // one look at a time
}

func newSpaceGuard(dir string, min int64) *spaceGuard {
	if min <= 0 {
		return nil
	}
	g := &spaceGuard{dir: dir, min: uint64(min), step: max(min/8, 1<<20), start: time.Now()}
	g.look()
	return g
}

// admit reports whether a write of n bytes may go: nil, or ErrNoSpace.
func (g *spaceGuard) admit(n int) error {
	if g == nil {
		return nil
	}
	w := g.written.Add(int64(n))
	if w >= g.step || g.stale() {
		g.look()
	}
	if g.low.Load() {
		writesRefused.Inc()
		return storage.ErrNoSpace
	}
	return nil
}

func (g *spaceGuard) stale() bool {
	return time.Since(g.start)-time.Duration(g.looked.Load()) >= spaceRecheck
}

// look reads the free space (for an unprivileged user: root may use the
// file system's own reserve, verifyd should not count on it). A write
// that finds a look under way goes on with the last reading, which that
// look is about to replace: the writers that found the guard stale at
// the same moment do not each read it in turn, holding their commits.
func (g *spaceGuard) look() {
	if !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	g.written.Store(0)
	g.looked.Store(int64(time.Since(g.start)))
	var st unix.Statfs_t
	if err := unix.Statfs(g.dir, &st); err != nil {
		return // keep the last reading
	}
	free := st.Bavail * uint64(st.Bsize)
	diskFree.Set(float64(free))
	low := free < g.min
	if was := g.low.Swap(low); was != low {
		if low {
			diskLow.Set(1)
		} else {
			diskLow.Set(0)
		}
	}
}

// Low reports whether the guard refuses writes now (for /healthz and
// the operator view).
func (db *DB) Low() bool {
	g := db.space
	if g == nil {
		return false
	}
	if g.stale() {
		g.look()
	}
	return g.low.Load()
}

// privateFS is Pebble's file system with every file it creates readable
// by verifyd's user only (0600, directories 0700), whatever the umask:
// the data directory holds credits, history, API key hashes and receipts.
type privateFS struct{ vfs.FS }

func (fs privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return private(fs.FS.Create(name, category))(name)
}

func (fs privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return private(fs.FS.OpenReadWrite(name, category, opts...))(name)
}

func (fs privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return private(fs.FS.ReuseForWrite(oldname, newname, category))(newname)
}

func (fs privateFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := fs.FS.MkdirAll(dir, perm&0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

func (fs privateFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	if err == nil {
		if cerr := os.Chmod(name, 0o600); cerr != nil {
			c.Close()
			return nil, cerr
		}
	}
	return c, err
}

// private makes a file just opened for writing, name, 0600; on failure
// it closes it.
func private(f vfs.File, err error) func(name string) (vfs.File, error) {
	return func(name string) (vfs.File, error) {
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(name, 0o600); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
}
