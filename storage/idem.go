package storage

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Idempotency records (spec §7 rule 3). A request with an Idempotency-Key
// starts with BeginIdem, which answers one of:
//
//   - IdemNew: no live record; a pending one now holds the key. Process the
//     request, then CompleteIdem with the response (or let Charge or
//     CreateJob complete it in their batch), or AbortIdem if the request
//     failed in a way worth retrying (a 500).
//   - IdemInFlight: the same request is being processed by this process
//     right now (a concurrent duplicate).
//   - IdemReplay: the request was answered; replay the stored response.
//   - IdemMismatch: the key was used with another request body (409).
//
// Records expire Options.IdemTTL (24 h) after BeginIdem created them; an
// expired record counts as absent at once and the background loop deletes
// it later. A pending record names the process (bootID) that wrote it: one
// left by a crashed process is taken over by the next BeginIdem, since that
// request never answered.
//
// Durability: BeginIdem, CompleteIdem and AbortIdem do not sync. The spec
// makes the store fail-open (a request is processed normally when it is
// unavailable), so a record lost in a crash costs what an unavailable store
// costs. The responses that matter, those that spend credits, are
// completed inside the synced batch of the charge or of the job's
// reservation (ChargeRequest.Idem, JobSpec.Idem), so a crash can never
// leave a charge without its replayable response.

// IdemRef names an idempotency record: the key a client sent to an
// endpoint of an account.
type IdemRef struct {
	Account  string
	Endpoint string
	Key      string
}

// IdemResponse is a stored response.
type IdemResponse struct {
	Status int
	Header []HeaderField
	Body   []byte
}

// HeaderField is one response header.
type HeaderField struct{ Name, Value string }

// IdemRecord is a stored idempotency record.
type IdemRecord struct {
	IdemRef
	// RequestHash is the caller's digest of the request (of its body).
	RequestHash []byte
	// Done: Response holds the answer; otherwise the request is pending.
	Done      bool
	Response  IdemResponse
	CreatedAt time.Time
	ExpiresAt time.Time

	bootID uint64
}

// IdemOutcome is what BeginIdem found.
type IdemOutcome int

// BeginIdem outcomes.
const (
	IdemNew IdemOutcome = iota
	IdemInFlight
	IdemReplay
	IdemMismatch
)

var idemOutcomeNames = [...]string{"new", "in_flight", "replay", "mismatch"}

func (o IdemOutcome) String() string {
	if o >= 0 && int(o) < len(idemOutcomeNames) {
		return idemOutcomeNames[o]
	}
	return fmt.Sprintf("IdemOutcome(%d)", int(o))
}

// idemStripes is the number of locks idempotency records are striped over.
const idemStripes = 64

const (
	idemPending = 1
	idemDone    = 2
)

func encodeIdem(r *IdemRecord) []byte {
	e := newEnc(64 + len(r.Endpoint) + len(r.Key) + len(r.RequestHash) + len(r.Response.Body))
	state := byte(idemPending)
	if r.Done {
		state = idemDone
	}
	e.byte1(state).uvarint(r.bootID).bytes(r.RequestHash).varint(toMs(r.CreatedAt)).varint(toMs(r.ExpiresAt)).
		str(r.Endpoint).str(r.Key).uvarint(uint64(r.Response.Status)).uvarint(uint64(len(r.Response.Header)))
	for _, h := range r.Response.Header {
		e.str(h.Name).str(h.Value)
	}
	e.bytes(r.Response.Body)
	return e.b
}

func decodeIdem(account string, v []byte) (IdemRecord, error) {
	d := newDec(v, "idempotency record")
	r := IdemRecord{IdemRef: IdemRef{Account: account}}
	r.Done = d.byte1() == idemDone
	r.bootID = d.uvarint()
	r.RequestHash = d.bytes()
	r.CreatedAt = fromMs(d.varint())
	r.ExpiresAt = fromMs(d.varint())
	r.Endpoint = d.str()
	r.Key = d.str()
	r.Response.Status = int(d.uvarint())
	n := d.uvarint()
	if n > uint64(len(v)) {
		return IdemRecord{}, fmt.Errorf("%w: idempotency header count", errCorrupt)
	}
	for i := uint64(0); i < n; i++ {
		r.Response.Header = append(r.Response.Header, HeaderField{Name: d.str(), Value: d.str()})
	}
	r.Response.Body = d.bytes()
	return r, d.err
}

func (ref IdemRef) check() error {
	if ref.Endpoint == "" || ref.Key == "" {
		return invalidf("idempotency record needs an endpoint and a key")
	}
	return nil
}

// idemLock returns the lock of the stripe of ref's record: the
// read-decide-write of BeginIdem and the writes of the others are atomic
// per record.
func (db *DB) idemLock(ref IdemRef) *sync.Mutex { return &db.idemLocks[db.idemStripe(ref)] }

func (db *DB) idemStripe(ref IdemRef) int {
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
func (db *DB) readIdem(ref IdemRef, now time.Time) (IdemRecord, []byte, error) {
	k := idemKey(ref.Account, ref.Endpoint, ref.Key)
	v, err := db.get(k)
	if err != nil {
		return IdemRecord{}, k, err
	}
	r, err := decodeIdem(ref.Account, v)
	if err != nil {
		return IdemRecord{}, k, err
	}
	if r.Endpoint != ref.Endpoint || r.Key != ref.Key {
		return IdemRecord{}, k, fmt.Errorf("%w: idempotency key digest collision", errCorrupt)
	}
	if !r.ExpiresAt.After(now) {
		return r, k, ErrNotFound
	}
	return r, k, nil
}

// BeginIdem looks up the record of ref and, when there is no live one,
// writes a pending one (see IdemOutcome). The record is returned for
// IdemReplay (the response) and IdemInFlight.
func (db *DB) BeginIdem(ref IdemRef, requestHash []byte) (IdemOutcome, IdemRecord, error) {
	if err := db.check(); err != nil {
		return 0, IdemRecord{}, err
	}
	if err := ref.check(); err != nil {
		return 0, IdemRecord{}, err
	}
	if !db.accountExists(ref.Account) {
		return 0, IdemRecord{}, fmt.Errorf("%w: account %q", ErrNotFound, ref.Account)
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	now := db.now()
	old, k, err := db.readIdem(ref, now)
	switch {
	case err == nil:
		out := IdemReplay
		switch {
		case !bytes.Equal(old.RequestHash, requestHash):
			out = IdemMismatch
		case !old.Done && old.bootID == db.bootID:
			out = IdemInFlight
		case !old.Done:
			// Pending in a process that died: that request never
			// answered, so this one takes the key over.
			out = IdemNew
		}
		if out != IdemNew {
			idemOutcomes[out].Inc()
			return out, old, nil
		}
	case errors.Is(err, ErrNotFound):
	default:
		return 0, IdemRecord{}, err
	}
	r := IdemRecord{
		IdemRef:     ref,
		RequestHash: bytes.Clone(requestHash),
		CreatedAt:   now,
		ExpiresAt:   now.Add(db.opts.IdemTTL),
		bootID:      db.bootID,
	}
	b := db.pdb.NewBatch()
	if !old.ExpiresAt.IsZero() {
		b.Delete(idemExpiryKey(toMs(old.ExpiresAt), k), nil)
	}
	b.Set(k, encodeIdem(&r), nil)
	b.Set(idemExpiryKey(toMs(r.ExpiresAt), k), nil, nil)
	if err := db.commit(b, pebble.NoSync); err != nil {
		return 0, IdemRecord{}, err
	}
	idemOutcomes[IdemNew].Inc()
	return IdemNew, r, nil
}

// CompleteIdem stores the response of the request that began ref.
func (db *DB) CompleteIdem(ref IdemRef, resp IdemResponse) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := ref.check(); err != nil {
		return err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	b := db.pdb.NewBatch()
	if err := db.stageIdemDone(b, ref, resp, db.now()); err != nil {
		b.Close()
		return err
	}
	return db.commit(b, pebble.NoSync)
}

// stageIdemDone adds the completed record of ref to b, keeping the pending
// record's request hash and expiry. The caller holds the record's lock.
// Without a live pending record (it expired, or a crash lost it) the
// response is not recorded: there is no request hash to match replays
// against.
func (db *DB) stageIdemDone(b *pebble.Batch, ref IdemRef, resp IdemResponse, now time.Time) error {
	if err := ref.check(); err != nil {
		return err
	}
	r, k, err := db.readIdem(ref, now)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.Done = true
	r.bootID = 0
	r.Response = IdemResponse{Status: resp.Status, Header: resp.Header, Body: resp.Body}
	b.Set(k, encodeIdem(&r), nil)
	return nil
}

// AbortIdem deletes the pending record of ref, so a retry with the same
// key is processed afresh (spec §7: a 500 is safe to retry with the same
// Idempotency-Key). A completed record is left alone.
func (db *DB) AbortIdem(ref IdemRef) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := ref.check(); err != nil {
		return err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	r, k, err := db.readIdem(ref, db.now())
	if errors.Is(err, ErrNotFound) {
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
	return db.commit(b, pebble.NoSync)
}

// GetIdem returns the live record of ref, or ErrNotFound.
func (db *DB) GetIdem(ref IdemRef) (IdemRecord, error) {
	if err := db.check(); err != nil {
		return IdemRecord{}, err
	}
	if err := ref.check(); err != nil {
		return IdemRecord{}, err
	}
	mu := db.idemLock(ref)
	mu.Lock()
	defer mu.Unlock()
	r, _, err := db.readIdem(ref, db.now())
	if err != nil {
		return IdemRecord{}, err
	}
	return r, nil
}

// PurgeIdem deletes the records expired by now and returns how many. The
// background loop calls it every Options.PurgeInterval.
func (db *DB) PurgeIdem() (int, error) {
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
		if errors.Is(err, ErrNotFound) {
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
		if errors.Is(err, ErrNotFound) && !cur.ExpiresAt.After(now) {
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
			if n, err := db.PurgeIdem(); err != nil {
				db.log.Error("cannot purge idempotency records", "err", err)
			} else if n > 0 {
				db.log.Debug("purged idempotency records", "records", n)
			}
		}
	}
}
