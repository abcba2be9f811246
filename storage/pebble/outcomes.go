package pebble

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/verifyd/verifyd/storage"
)

// Delivery outcomes (storage.Outcomes). An outcome is stored under its
// account and time (outc/), with its event id's digest as the key of a
// small record (outid/) that makes a second report of the event a no-op;
// a delivery or a hard bounce also replaces the address's evidence
// (outaddr/) when it is newer. Matching reads the verdict index (vidx/),
// one empty key per result written by stageResultAt: an address's
// results by probed_at, so the latest before a time is one seek.

// --- keys

func verdictPrefix(account, email string) []byte {
	email = storage.CacheEmail(email)
	k := keyBuf(prefixVerdict, len(account)+1+len(email)+1+8+36)
	k = append(append(append(k, account...), '/'), email...)
	return append(k, 0)
}

func verdictKey(account, email string, probedMs int64, id string) []byte {
	return append(appendU64(verdictPrefix(account, email), uint64(probedMs)), id...)
}

func eventDigest(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:16]
}

func outcomePrefix(account string) []byte {
	return append(append(keyBuf(prefixOutcome, len(account)+1+8+16), account...), '/')
}

func outcomeKey(account string, atMs int64, digest []byte) []byte {
	return append(appendU64(outcomePrefix(account), uint64(atMs)), digest...)
}

func outcomeIDKey(account string, digest []byte) []byte {
	k := append(append(keyBuf(prefixOutcomeID, len(account)+1+16), account...), '/')
	return append(k, digest...)
}

func outcomeAddrKey(account, email string) []byte {
	email = storage.CacheEmail(email)
	k := append(append(keyBuf(prefixOutcomeAdr, len(account)+1+len(email)), account...), '/')
	return append(k, email...)
}

func outcomeSetKey(account string) []byte {
	return append(keyBuf(prefixOutcomeSet, len(account)), account...)
}

// --- values

func encodeOutcome(o *storage.Outcome) []byte {
	v := &o.Verdict
	e := newEnc(160 + len(o.EventID) + 2*len(o.Email) + len(o.Diagnostic) + len(v.MXHost))
	e.str(o.Account).str(o.EventID).str(o.Email).str(o.Event).varint(toMs(o.At)).str(o.Source).
		uvarint(uint64(o.SMTPCode)).str(o.Enhanced).str(o.Diagnostic).varint(toMs(o.ReceivedAt)).
		str(v.ResultID).str(v.Status).uvarint(uint64(v.Score)).str(v.Reason)
	catchAll := byte(0)
	if v.CatchAll {
		catchAll = 1
	}
	e.byte1(catchAll).str(v.MXHost).varint(toMs(v.ProbedAt))
	return e.b
}

func decodeOutcome(b []byte) (storage.Outcome, error) {
	d := newDec(b, "outcome")
	var o storage.Outcome
	o.Account = d.str()
	o.EventID = d.str()
	o.Email = d.str()
	o.Event = d.str()
	o.At = fromMs(d.varint())
	o.Source = d.str()
	o.SMTPCode = int(d.uvarint())
	o.Enhanced = d.str()
	o.Diagnostic = d.str()
	o.ReceivedAt = fromMs(d.varint())
	v := &o.Verdict
	v.ResultID = d.str()
	v.Status = d.str()
	v.Score = int(d.uvarint())
	v.Reason = d.str()
	v.CatchAll = d.byte1() == 1
	v.MXHost = d.str()
	v.ProbedAt = fromMs(d.varint())
	return o, d.err
}

// --- the verdict index

// stageVerdict adds a result's verdict index key to b.
func stageVerdict(b *pebble.Batch, r *storage.Result) {
	b.Set(verdictKey(r.Account, r.Email, toMs(r.ProbedAt), r.ID), nil, nil)
}

// lastVerdicts knows, for the addresses this process last wrote a
// verdict index key for, which result's verdict the address's latest key
// gives (a repeat's is the result it repeats). A cache hit that repeats
// it (Result.Repeats) needs no key of its own: the address's latest
// verdict is its verdict already. That is most cache hits, each a key
// less to write and compact.
//
// The index is ordered by ProbedAt, and a fresh result is written when
// its probe ends, with the time it began: it may land before repeats
// that wrote no key. Its write then writes the key of the last of them
// too (reassert), so the repeated verdict stays the latest from then on,
// as it was given. It is asked under the account's lock, in the order
// the account's writes reach Pebble (charge, PutJobResults); an address
// it does not know (a restart, the map cleared when full) gets a key,
// which is always right.
type lastVerdicts struct {
	mu sync.Mutex
	m  map[lastVerdictKey]lastVerdict
}

// lastVerdictKey is an account and a lower-cased address: two strings,
// not one joined, so that a lookup allocates nothing.
type lastVerdictKey struct{ account, email string }

type lastVerdict struct {
	account, email string
	// gives is the result whose verdict the address's latest key gives,
	// ms the latest time that verdict was given: its key's, or that of
	// skipped, the last repeat that wrote no key ("": none since the
	// key).
	gives   string
	ms      int64
	skipped string
}

// verdictRef is a verdict index key to write: a result and its time.
type verdictRef struct {
	id string
	ms int64
}

// maxLastVerdicts bounds lastVerdicts (about 16 MB).
const maxLastVerdicts = 1 << 16

// index reports whether r needs a verdict index key, and notes it; re,
// when its id is set, is a skipped repeat's key to write with r's.
func (l *lastVerdicts) index(r *storage.Result) (key bool, re verdictRef) {
	email := storage.CacheEmail(r.Email)
	k := lastVerdictKey{r.Account, email}
	ms := toMs(r.ProbedAt)
	repeat := r.Repeats && r.CachedFrom != ""
	l.mu.Lock()
	defer l.mu.Unlock()
	e, known := l.m[k]
	if repeat && known && e.gives == r.CachedFrom && ms >= e.ms {
		e.ms, e.skipped = ms, r.ID
		l.m[k] = e
		verdictKeysSkipped.Inc()
		return false, verdictRef{}
	}
	if l.m == nil || len(l.m) >= maxLastVerdicts {
		l.m = make(map[lastVerdictKey]lastVerdict)
		known = false
	}
	gives := r.ID
	if repeat {
		gives = r.CachedFrom
	}
	switch {
	case !known || ms > e.ms:
		// r's key is the latest.
		l.m[k] = lastVerdict{account: r.Account, email: email, gives: gives, ms: ms}
	case e.skipped != "":
		// r lands before repeats that wrote no key: the last of them
		// gets its key now, and stays the latest.
		re = verdictRef{id: e.skipped, ms: e.ms}
		e.skipped = ""
		l.m[k] = e
	case ms == e.ms:
		// Keys of one millisecond are ordered by result id: which is
		// the latest is not known.
		delete(l.m, k)
	}
	return true, re
}

// unwrite is told that r, noted by index, was not written after all (its
// receipt could not be sealed: a bug, Ed25519 does not fail). What the
// address's latest key gives is no longer known, so it is forgotten; a
// repeat skipped after r gets its key now. (When r was the last repeat
// skipped, one skipped before it stays without a key: a fresh result
// that began before it and ends after may then hide it.)
func (l *lastVerdicts) unwrite(db *DB, r *storage.Result) {
	k := lastVerdictKey{r.Account, storage.CacheEmail(r.Email)}
	l.mu.Lock()
	e, known := l.m[k]
	delete(l.m, k)
	l.mu.Unlock()
	if known && e.skipped != "" && e.skipped != r.ID {
		if err := db.pdb.Set(verdictKey(e.account, e.email, e.ms, e.skipped), nil, pebble.Sync); err != nil {
			db.log.Error("verdict index key of a repeat", "account", e.account, "result", e.skipped, "err", err)
		}
	}
}

// stageVerdictRef adds the verdict index key of re (index) to b.
func stageVerdictRef(b *pebble.Batch, r *storage.Result, re verdictRef) {
	if re.id != "" {
		b.Set(verdictKey(r.Account, r.Email, re.ms, re.id), nil, nil)
	}
}

// LatestVerdicts answers each query with the account's latest result for
// its address probed at or before its time.
func (db *DB) LatestVerdicts(ctx context.Context, account string, qs []storage.VerdictQuery) ([]storage.Verdict, []bool, error) {
	if err := db.check(); err != nil {
		return nil, nil, err
	}
	if !db.accountExists(account) {
		return nil, nil, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	it, err := db.iter(&pebble.IterOptions{LowerBound: []byte(prefixVerdict), UpperBound: prefixEnd([]byte(prefixVerdict))})
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	out := make([]storage.Verdict, len(qs))
	ok := make([]bool, len(qs))
	for i, q := range qs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		p := verdictPrefix(account, q.Email)
		// The first key after every key of a result probed at or before
		// Before, then one step back.
		bound := appendU64(bytes.Clone(p), uint64(toMs(q.Before))+1)
		if !it.SeekLT(bound) || !bytes.HasPrefix(it.Key(), p) {
			if err := it.Error(); err != nil {
				return nil, nil, err
			}
			continue
		}
		id := string(it.Key()[len(p)+8:])
		r, err := db.GetResult(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			continue // purged since
		}
		if err != nil {
			return nil, nil, err
		}
		out[i], ok[i] = storage.VerdictOf(r), true
	}
	return out, ok, nil
}

// upgradeVerdictIndex (2 → 3) indexes the results already stored.
func upgradeVerdictIndex(db *DB, b *pebble.Batch) error {
	return db.scanPrefix([]byte(prefixResult), func(_, v []byte) (bool, error) {
		r, job, index, err := decodeResult(v)
		if err != nil {
			return false, err
		}
		if job != "" { // a batch result: the pointer's target
			rv, err := db.get(jobResultKey(job, uint32(index)))
			if errors.Is(err, storage.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if r, _, _, err = decodeResult(rv); err != nil {
				return false, err
			}
		}
		stageVerdict(b, &r)
		return true, db.applyPart(b)
	})
}

// --- outcomes

// PutOutcomes stores the account's new outcomes in one synced batch.
func (db *DB) PutOutcomes(ctx context.Context, account string, outs []storage.Outcome) ([]bool, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if !db.accountExists(account) {
		return nil, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	now := db.now()
	for i := range outs {
		outs[i].Account, outs[i].ReceivedAt = account, now.Truncate(time.Millisecond)
		if err := storage.CheckOutcome(&outs[i]); err != nil {
			return nil, err
		}
	}
	db.outMu.Lock()
	defer db.outMu.Unlock()
	b := db.pdb.NewBatch()
	fresh := make([]bool, len(outs))
	seen := make(map[string]bool, len(outs))
	evidence := map[string]*storage.Outcome{}
	for i := range outs {
		o := &outs[i]
		dg := eventDigest(o.EventID)
		if seen[string(dg)] {
			continue
		}
		seen[string(dg)] = true
		idk := outcomeIDKey(account, dg)
		had, err := db.has(idk)
		if err != nil {
			b.Close()
			return nil, err
		}
		if had {
			continue
		}
		fresh[i] = true
		b.Set(idk, binary.BigEndian.AppendUint64(nil, uint64(toMs(o.At))), nil)
		b.Set(outcomeKey(account, toMs(o.At), dg), encodeOutcome(o), nil)
		if storage.IsAddressEvidence(*o) {
			k := storage.CacheEmail(o.Email)
			if prev := evidence[k]; prev == nil || o.At.After(prev.At) {
				evidence[k] = o
			}
		}
	}
	for _, o := range evidence {
		k := outcomeAddrKey(account, o.Email)
		v, err := db.get(k)
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			b.Close()
			return nil, err
		default:
			prev, err := decodeOutcome(v)
			if err == nil && !o.At.After(prev.At) {
				continue
			}
		}
		b.Set(k, encodeOutcome(o), nil)
	}
	if b.Empty() {
		b.Close()
		return fresh, nil
	}
	if err := db.commit(b, pebble.Sync); err != nil {
		return nil, err
	}
	return fresh, nil
}

// ScanOutcomes calls fn with the outcomes at or after since, of the
// account or of every account ("").
func (db *DB) ScanOutcomes(ctx context.Context, account string, since time.Time, fn func(storage.Outcome) error) error {
	if err := db.check(); err != nil {
		return err
	}
	accounts := []string{account}
	if account == "" {
		as, err := db.ListAccounts(ctx)
		if err != nil {
			return err
		}
		accounts = accounts[:0]
		for _, a := range as {
			accounts = append(accounts, a.ID)
		}
	} else if !db.accountExists(account) {
		return fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	for _, a := range accounts {
		p := outcomePrefix(a)
		lower := appendU64(bytes.Clone(p), uint64(max(toMs(since), 0)))
		n := 0
		err := db.scan(lower, prefixEnd(p), func(_, v []byte) (bool, error) {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return false, err
				}
			}
			o, err := decodeOutcome(v)
			if err != nil {
				return false, err
			}
			if err := fn(o); err != nil {
				if errors.Is(err, storage.ErrStop) {
					return false, nil
				}
				return false, err
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// AddressEvidence returns the address's latest delivery or hard bounce.
func (db *DB) AddressEvidence(ctx context.Context, account, email string) (storage.Outcome, bool, error) {
	if err := db.check(); err != nil {
		return storage.Outcome{}, false, err
	}
	v, err := db.get(outcomeAddrKey(account, email))
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Outcome{}, false, nil
	}
	if err != nil {
		return storage.Outcome{}, false, err
	}
	o, err := decodeOutcome(v)
	return o, err == nil, err
}

// EvidenceAccounts returns the accounts with address evidence: one seek
// per account, past its keys.
func (db *DB) EvidenceAccounts(ctx context.Context) ([]string, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	it, err := db.iter(&pebble.IterOptions{LowerBound: []byte(prefixOutcomeAdr), UpperBound: prefixEnd([]byte(prefixOutcomeAdr))})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rest := it.Key()[len(prefixOutcomeAdr):]
		i := bytes.IndexByte(rest, '/')
		if i < 0 {
			return nil, fmt.Errorf("pebble: malformed evidence key %q", it.Key())
		}
		out = append(out, string(rest[:i]))
		// The account's keys all start outaddr/<account>/; '/'+1 is '0'.
		next := append(append(keyBuf(prefixOutcomeAdr, i+1), rest[:i]...), '/'+1)
		ok = it.SeekGE(next)
	}
	return out, it.Error()
}

// DeleteOutcomes deletes every outcome of the account, its event ids and
// its addresses' evidence.
func (db *DB) DeleteOutcomes(ctx context.Context, account string) (int, error) {
	if err := db.check(); err != nil {
		return 0, err
	}
	if !db.accountExists(account) {
		return 0, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	db.outMu.Lock()
	defer db.outMu.Unlock()
	return db.deleteOutcomes(account, time.Time{})
}

// PurgeOutcomes deletes the outcomes that happened before the time, and
// the evidence of the same age.
func (db *DB) PurgeOutcomes(ctx context.Context, before time.Time) (int, error) {
	if err := db.check(); err != nil {
		return 0, err
	}
	as, err := db.ListAccounts(ctx)
	if err != nil {
		return 0, err
	}
	db.outMu.Lock()
	defer db.outMu.Unlock()
	total := 0
	for _, a := range as {
		n, err := db.deleteOutcomes(a.ID, before)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// deleteOutcomes deletes an account's outcomes before the time (all: the
// zero time), with their ids and the evidence as old, in synced batches.
// The caller holds outMu.
func (db *DB) deleteOutcomes(account string, before time.Time) (int, error) {
	all := before.IsZero()
	p := outcomePrefix(account)
	upper := prefixEnd(p)
	if !all {
		upper = appendU64(bytes.Clone(p), uint64(max(toMs(before), 0)))
	}
	n := 0
	b := db.pdb.NewBatch()
	flush := func() error {
		if b.Empty() {
			return nil
		}
		// Deletes go even on a full disk: they free space.
		err := db.commitAdmitted(b, pebble.Sync)
		b = db.pdb.NewBatch()
		return err
	}
	err := db.scan(p, upper, func(k, v []byte) (bool, error) {
		dg := k[len(k)-16:]
		b.Delete(k, nil)
		b.Delete(outcomeIDKey(account, dg), nil)
		n++
		if b.Len() > 1<<20 {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		ap := append(append(keyBuf(prefixOutcomeAdr, len(account)+1), account...), '/')
		err = db.scanPrefix(ap, func(k, v []byte) (bool, error) {
			if !all {
				o, err := decodeOutcome(v)
				if err == nil && !o.At.Before(before) {
					return true, nil
				}
			}
			b.Delete(k, nil)
			return true, nil
		})
	}
	if err == nil {
		err = flush()
	}
	b.Close()
	return n, err
}

// OutcomeSettings returns the account's settings.
func (db *DB) OutcomeSettings(ctx context.Context, account string) (storage.OutcomeSettings, error) {
	if err := db.check(); err != nil {
		return storage.OutcomeSettings{}, err
	}
	if !db.accountExists(account) {
		return storage.OutcomeSettings{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	v, err := db.get(outcomeSetKey(account))
	if errors.Is(err, storage.ErrNotFound) {
		return storage.OutcomeSettings{}, nil
	}
	if err != nil {
		return storage.OutcomeSettings{}, err
	}
	var s storage.OutcomeSettings
	if err := json.Unmarshal(v, &s); err != nil {
		return storage.OutcomeSettings{}, fmt.Errorf("%w: outcome settings of %s: %v", errCorrupt, account, err)
	}
	return s, nil
}

// SetOutcomeSettings replaces the account's settings.
func (db *DB) SetOutcomeSettings(ctx context.Context, account string, s storage.OutcomeSettings) error {
	if err := db.check(); err != nil {
		return err
	}
	if !db.accountExists(account) {
		return fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	b.Set(outcomeSetKey(account), v, nil)
	return db.commit(b, pebble.Sync)
}
