package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// The requests behind this box's pending idempotency records. A pending
// record names the boot whose request holds the key (idem.boot). Other
// boxes wait for it while that boot lives; this box knows more: which of
// its requests still run (live). A pending record of this boot whose
// request ended without writing the record's end — its AbortIdem or
// CompleteIdem failed, or its BeginIdem failed after its commit, as when
// the database restarts under load — would otherwise hold the key
// "in progress" for as long as the box lives. So:
//
//   - here, BeginIdem takes such a record over at once (its request is
//     not live);
//   - for the other boxes, the ended request's key goes to stray, and the
//     heartbeat deletes its pending record (only this boot's, only
//     pending) as soon as the database answers, within Lease/3 of its
//     return: a retry on any box is then processed.
//
// BeginIdem decides and writes under its key's own lock, and the stray
// loop deletes under it, so a stray key is never deleted after a new
// request of this box took it. The lock is the key's alone (not a stripe
// shared with others, as on Pebble): it is held for a database round
// trip, and keys that merely hash alike must not queue behind each other.

type idemLocal struct {
	locksMu sync.Mutex
	locks   map[storage.IdemRef]*keyLock

	mu    sync.Mutex
	live  map[storage.IdemRef]struct{} // begun here, not ended
	stray map[storage.IdemRef]struct{} // ended here, record's end not written
}

// keyLock is one key's lock and how many hold or wait for it.
type keyLock struct {
	sync.Mutex
	users int
}

// lock takes ref's lock and returns its unlock.
func (l *idemLocal) lock(ref storage.IdemRef) (unlock func()) {
	l.locksMu.Lock()
	if l.locks == nil {
		l.locks = map[storage.IdemRef]*keyLock{}
	}
	k := l.locks[ref]
	if k == nil {
		k = &keyLock{}
		l.locks[ref] = k
	}
	k.users++
	l.locksMu.Unlock()
	k.Lock()
	return func() {
		k.Unlock()
		l.locksMu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, ref)
		}
		l.locksMu.Unlock()
	}
}

// running reports whether a request of this box holds ref.
func (l *idemLocal) running(ref storage.IdemRef) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.live[ref]
	return ok
}

// begin records that a request of this box holds ref.
func (l *idemLocal) begin(ref storage.IdemRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live == nil {
		l.live = map[storage.IdemRef]struct{}{}
	}
	l.live[ref] = struct{}{}
	delete(l.stray, ref)
}

// end records that the request holding ref ended; written reports
// whether the record's end (its response, or its deletion) was written.
func (l *idemLocal) end(ref storage.IdemRef, written bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, ref)
	if !written {
		l.addStray(ref)
	}
}

// lost records that a BeginIdem of ref failed: its pending record may
// have been written. The caller holds ref's lock and knows no request of
// this box holds ref.
func (l *idemLocal) lost(ref storage.IdemRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addStray(ref)
}

func (l *idemLocal) addStray(ref storage.IdemRef) {
	if l.stray == nil {
		l.stray = map[storage.IdemRef]struct{}{}
	}
	l.stray[ref] = struct{}{}
	idemStray.Set(float64(len(l.stray)))
}

// strays returns the stray keys.
func (l *idemLocal) strays() []storage.IdemRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]storage.IdemRef, 0, len(l.stray))
	for ref := range l.stray {
		out = append(out, ref)
	}
	return out
}

// endStrays deletes the pending records of this boot whose requests ended
// without writing their end (see above). It stops at the first failure:
// the database is still away, and the next heartbeat tries again.
func (db *DB) endStrays() {
	for _, ref := range db.idem.strays() {
		if !db.endStray(ref) {
			return
		}
	}
}

func (db *DB) endStray(ref storage.IdemRef) bool {
	defer db.idem.lock(ref)()
	l := &db.idem
	l.mu.Lock()
	_, stray := l.stray[ref]
	_, live := l.live[ref]
	l.mu.Unlock()
	if !stray || live {
		return true // taken over by a request of this box, or done
	}
	ctx, cancel := context.WithTimeout(context.Background(), strayTimeout)
	defer cancel()
	_, err := db.pool.Exec(ctx, `DELETE FROM idem WHERE account = $1 AND endpoint = $2 AND key = $3 AND NOT done AND boot = $4`,
		ref.Account, ref.Endpoint, ref.Key, db.boot)
	if err != nil {
		db.log.Warn("cannot end a pending idempotency key yet; will retry", "account", ref.Account, "endpoint", ref.Endpoint, "err", err)
		return false
	}
	l.mu.Lock()
	delete(l.stray, ref)
	idemStray.Set(float64(len(l.stray)))
	l.mu.Unlock()
	idemStrayEnded.Inc()
	return true
}

// strayTimeout bounds one stray key's deletion.
const strayTimeout = 5 * time.Second
