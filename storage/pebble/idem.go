package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// idemStripes is the number of locks idempotency records are striped over.
const idemStripes = 64

const (
	idemPending = 1
	idemDone    = 2
)

func encodeIdem(r *storage.IdemRecord) []byte {
	e := newEnc(64 + len(r.Endpoint) + len(r.Key) + len(r.RequestHash) + len(r.Response.Body))
	state := byte(idemPending)
	if r.Done {
		state = idemDone
	}
	e.byte1(state).uvarint(r.Owner).bytes(r.RequestHash).varint(toMs(r.CreatedAt)).varint(toMs(r.ExpiresAt)).
		str(r.Endpoint).str(r.Key).uvarint(uint64(r.Response.Status)).uvarint(uint64(len(r.Response.Header)))
	for _, h := range r.Response.Header {
		e.str(h.Name).str(h.Value)
	}
	e.bytes(r.Response.Body)
	return e.b
}

func decodeIdem(account string, v []byte) (storage.IdemRecord, error) {
	d := newDec(v, "idempotency record")
	r := storage.IdemRecord{IdemRef: storage.IdemRef{Account: account}}
	r.Done = d.byte1() == idemDone
	r.Owner = d.uvarint()
	r.RequestHash = d.bytes()
	r.CreatedAt = fromMs(d.varint())
	r.ExpiresAt = fromMs(d.varint())
	r.Endpoint = d.str()
	r.Key = d.str()
	r.Response.Status = int(d.uvarint())
	n := d.uvarint()
	if n > uint64(len(v)) {
		return storage.IdemRecord{}, fmt.Errorf("%w: idempotency header count", errCorrupt)
	}
	for i := uint64(0); i < n; i++ {
		r.Response.Header = append(r.Response.Header, storage.HeaderField{Name: d.str(), Value: d.str()})
	}
	r.Response.Body = d.bytes()
	return r, d.err
}

// idemLock returns the lock of the stripe of ref's record: the
// read-decide-write of BeginIdem and the writes of the others are atomic
// per record.
func (db *DB) idemLock(ref storage.IdemRef) *sync.Mutex { return &db.idemLocks[db.idemStripe(ref)] }

func (db *DB) idemStripe(ref storage.IdemRef) int {
	h := fnv.New32a()
	h.Write([]byte(ref.Account))
	h.Write([]byte{0})
	h.Write([]byte(ref.Endpoint))
	h.Write([]byte{0})
	h.Write([]byte(ref.Key))
	return int(h.Sum32() % uint32(len(db.idemLocks)))
}

// readIdem returns the live (unexpired) record, or ErrNotFound. The
// caller holds the record's lock.
func (db *DB) readIdem(ref storage.IdemRef, now time.Time) (storage.IdemRecord, []byte, error) {
	k := idemKey(ref.Account, ref.Endpoint, ref.Key)
	v, err := db.get(k)
	if err != nil {
		return storage.IdemRecord{}, k, err
	}
	r, err := decodeIdem(ref.Account, v)
	if err != nil {
		return storage.IdemRecord{}, k, err
	}
	if r.Endpoint != ref.Endpoint || r.Key != ref.Key {
		return storage.IdemRecord{}, k, fmt.Errorf("%w: idempotency key digest collision", errCorrupt)
	}
	if !r.ExpiresAt.After(now) {
		return r, k, storage.ErrNotFound
	}
	return r, k, nil
}

// BeginIdem looks up the record of ref and, when there is no live one,
// writes a pending one (see IdemOutcome). The record is returned for
// IdemReplay (the response) and IdemInFlight.
func (db *DB) BeginIdem(ctx context.Context, ref storage.IdemRef, requestHash []byte) (storage.IdemOutcome, storage.IdemRecord, error) {
	if err := db.check(); err != nil {
		return 0, storage.IdemRecord{}, err
	}
	if err := storage.CheckIdemRef(ref); err != nil {
		return 0, storage.IdemRecord{}, err
	}
	if !db.accountExists(ref.Account) {
		return 0, storage.IdemRecord{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, ref.Account)
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	now := db.now()
	old, k, err := db.readIdem(ref, now)
	switch {
	case err == nil:
		out := storage.IdemReplay
		switch {
		case !bytes.Equal(old.RequestHash, requestHash):
			out = storage.IdemMismatch
		case !old.Done && old.Owner == db.bootID:
			out = storage.IdemInFlight
		case !old.Done:
			// Pending in a process that died: that request never
			// answered, so this one takes the key over.
			out = storage.IdemNew
		}
		if out != storage.IdemNew {
			idemOutcomes[out].Inc()
			return out, old, nil
		}
	case errors.Is(err, storage.ErrNotFound):
	default:
		return 0, storage.IdemRecord{}, err
	}
	r := storage.IdemRecord{
		IdemRef:     ref,
		RequestHash: bytes.Clone(requestHash),
		CreatedAt:   now,
		ExpiresAt:   now.Add(db.opts.IdemTTL),
		Owner:       db.bootID,
	}
	b := db.pdb.NewBatch()
	if !old.ExpiresAt.IsZero() {
		b.Delete(idemExpiryKey(toMs(old.ExpiresAt), k), nil)
	}
	b.Set(k, encodeIdem(&r), nil)
	b.Set(idemExpiryKey(toMs(r.ExpiresAt), k), nil, nil)
	if err := db.commit(b, pebble.NoSync); err != nil {
		return 0, storage.IdemRecord{}, err
	}
	idemOutcomes[storage.IdemNew].Inc()
	return storage.IdemNew, r, nil
}

// CompleteIdem stores the response of the request that began ref.
func (db *DB) CompleteIdem(ctx context.Context, ref storage.IdemRef, resp storage.IdemResponse) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := storage.CheckIdemRef(ref); err != nil {
		return err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	b := db.pdb.NewBatch()
	if err := db.stageIdemDone(b, ref, nil, resp, db.now()); err != nil {
		b.Close()
		return err
	}
	return db.commit(b, pebble.NoSync)
}

// stageIdemDone adds the completed record of ref to b, keeping the pending
// record's request hash and expiry. The caller holds the record's lock.
// Without a live record (it expired, or a crash lost it) the response is
// recorded only when hash, the request's, is given
// (ChargeRequest.IdemHash): otherwise there is nothing to match replays
// against.
func (db *DB) stageIdemDone(b *pebble.Batch, ref storage.IdemRef, hash []byte, resp storage.IdemResponse, now time.Time) error {
	if err := storage.CheckIdemRef(ref); err != nil {
		return err
	}
	r, k, err := db.readIdem(ref, now)
	if errors.Is(err, storage.ErrNotFound) {
		if hash == nil {
			return nil
		}
		r = storage.IdemRecord{IdemRef: ref, RequestHash: bytes.Clone(hash), CreatedAt: now, ExpiresAt: now.Add(db.opts.IdemTTL)}
		k = idemKey(ref.Account, ref.Endpoint, ref.Key)
		b.Set(idemExpiryKey(toMs(r.ExpiresAt), k), nil, nil)
		err = nil
	} else if err == nil && hash != nil && (r.Done || !bytes.Equal(r.RequestHash, hash)) {
		return nil // a live record of another request: left alone
	}
	if err != nil {
		return err
	}
	r.Done = true
	r.Owner = 0
	r.Response = storage.IdemResponse{Status: resp.Status, Header: resp.Header, Body: resp.Body}
	b.Set(k, encodeIdem(&r), nil)
	return nil
}

// AbortIdem deletes the pending record of ref, so a retry with the same
// key is processed afresh (spec §7: a 500 is safe to retry with the same
// Idempotency-Key). A completed record is left alone.
func (db *DB) AbortIdem(ctx context.Context, ref storage.IdemRef) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := storage.CheckIdemRef(ref); err != nil {
		return err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	r, k, err := db.readIdem(ref, db.now())
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.Done {
		return nil
	}
	b := db.pdb.NewBatch()
	b.Delete(k, nil)
	b.Delete(idemExpiryKey(toMs(r.ExpiresAt), k), nil)
	// It goes even with the disk nearly full (space.go): the request it
	// ends got a 500 or 503 promising a retry, which a pending record
	// left behind would answer 409 until the next start.
	return db.commitAdmitted(b, pebble.NoSync)
}

// GetIdem returns the live record of ref, or ErrNotFound.
func (db *DB) GetIdem(ctx context.Context, ref storage.IdemRef) (storage.IdemRecord, error) {
	if err := db.check(); err != nil {
		return storage.IdemRecord{}, err
	}
	if err := storage.CheckIdemRef(ref); err != nil {
		return storage.IdemRecord{}, err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	r, _, err := db.readIdem(ref, db.now())
	if err != nil {
		return storage.IdemRecord{}, err
	}
	return r, nil
}

// PurgeIdem deletes the records expired by now and returns how many. The
// background loop calls it every Options.PurgeInterval.
func (db *DB) PurgeIdem(ctx context.Context) (int, error) {
	if err := db.check(); err != nil {
		return 0, err
	}
	now := db.now()
	upper := appendU64([]byte(prefixIdemExpiry), uint64(toMs(now))+1)
	var items []struct{ exp, rec []byte } // idemexp/ and idem/ keys
	err := db.scan([]byte(prefixIdemExpiry), upper, func(k, _ []byte) (bool, error) {
		if _, ik, ok := parseIdemExpiryKey(k); ok {
			items = append(items, struct{ exp, rec []byte }{bytes.Clone(k), bytes.Clone(ik)})
		}
		return len(items) < 100_000, nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for len(items) > 0 {
		chunk := items[:min(len(items), 1000)]
		items = items[len(chunk):]
		m, err := db.purgeChunk(chunk, now)
		n += m
		if err != nil {
			return n, err
		}
	}
	idemPurged.Add(n)
	return n, nil
}

// purgeChunk deletes the index keys of a chunk and the records they name
// that are still expired. It holds the records' locks until the deletes
// are applied: a BeginIdem that replaces one meanwhile must not lose it.
func (db *DB) purgeChunk(chunk []struct{ exp, rec []byte }, now time.Time) (int, error) {
	var held [idemStripes]bool
	defer func() {
		for i, h := range held {
			if h {
				db.idemLocks[i].Unlock()
			}
		}
	}()
	n := 0
	b := db.pdb.NewBatch()
	for _, it := range chunk {
		b.Delete(it.exp, nil)
		v, err := db.get(it.rec)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			b.Close()
			return 0, err
		}
		acct, _, _ := bytes.Cut(it.rec[len(prefixIdem):], []byte("/"))
		r, err := decodeIdem(string(acct), v)
		if err != nil {
			b.Delete(it.rec, nil)
			n++
			continue
		}
		if i := db.idemStripe(r.IdemRef); !held[i] {
			db.idemLocks[i].Lock()
			held[i] = true
		}
		cur, _, err := db.readIdem(r.IdemRef, now)
		if errors.Is(err, storage.ErrNotFound) && !cur.ExpiresAt.After(now) {
			b.Delete(it.rec, nil)
			n++
		}
	}
	if err := db.commit(b, pebble.NoSync); err != nil {
		return 0, err
	}
	return n, nil
}

// purgeLoop runs PurgeIdem every interval until Close.
func (db *DB) purgeLoop(interval time.Duration) {
	defer db.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			if n, err := db.PurgeIdem(context.Background()); err != nil {
				db.log.Error("cannot purge idempotency records", "err", err)
			} else if n > 0 {
				db.log.Debug("purged idempotency records", "records", n)
			}
		}
	}
}
