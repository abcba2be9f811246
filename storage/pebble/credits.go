package pebble

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

func encodeEntry(e storage.Entry) []byte {
	return newEnc(48 + len(e.Ref) + len(e.Note)).varint(toMs(e.Time)).byte1(byte(e.Kind)).
		varint(e.Amount).varint(e.Delta).varint(e.Balance).varint(e.Held).
		uvarint(e.HoldSeq).str(e.Ref).str(e.Note).b
}

func decodeEntry(account string, seq uint64, v []byte) (storage.Entry, error) {
	d := newDec(v, "ledger entry")
	e := storage.Entry{Account: account, Seq: seq}
	e.Time = fromMs(d.varint())
	e.Kind = storage.EntryKind(d.byte1())
	e.Amount = d.varint()
	e.Delta = d.varint()
	e.Balance = d.varint()
	e.Held = d.varint()
	e.HoldSeq = d.uvarint()
	e.Ref = d.str()
	e.Note = d.str()
	return e, d.err
}

func encodeHold(h storage.Hold) []byte {
	return newEnc(16 + len(h.Ref)).varint(h.N).varint(toMs(h.At)).str(h.Ref).b
}

func decodeHold(account string, seq uint64, v []byte) (storage.Hold, error) {
	d := newDec(v, "hold")
	h := storage.Hold{Account: account, Seq: seq}
	h.N = d.varint()
	h.At = fromMs(d.varint())
	h.Ref = d.str()
	return h, d.err
}

// acctState is what the package keeps in memory about one account, and the
// lock that orders its writes. Every write of a ledger entry, a history
// row or a job of the account is staged with mu held, from reading the
// state to taking its place in the account's order: most then hand their
// batch to Pebble before unlocking (applyOrdered); a hold or a charge
// unlocks first and hands it over after the write ahead (pending).
type acctState struct {
	mu sync.Mutex

	loaded  bool
	balance int64
	held    int64
	seq     uint64 // last ledger seq
	// holds are the active holds: ledger seq → credits. All were taken by
	// this process: Open releases those of a previous one.
	holds map[uint64]int64

	histLoaded bool
	lastPos    int64 // highest history position of the account, −1: none
	// recent holds, for every millisecond from recentFrom on in which this
	// process gave out a history position, the highest it gave out: no
	// row of an earlier process can be in those milliseconds (they come
	// after lastPos as loaded), so a row probed in one of them, late
	// (a probe that started before others ended), gets its position
	// without reading Pebble, and without waiting under the lock for the
	// account's writes in flight. Bounded: see posAlloc.record.
	recent     map[int64]int64
	recentFrom int64
	recentMax  int64

	// pending is closed when the account's last write staged under mu
	// and finished outside it (a charge: see charge) has been handed to
	// Pebble; nil when there is none. Such writes reach Pebble in the
	// order they took mu, each waiting for the one before.
	pending chan struct{}
}

// drain waits, with mu held, until every write of the account staged
// before has been handed to Pebble, so what the caller reads from Pebble
// or writes next comes after them. The caller holds no other lock; the
// writes it waits for take none but an idempotency stripe, and only once
// the write ahead of them is in (so a write waiting in the chain holds no
// lock at all).
// enqueue makes the caller's write, staged with mu held, the account's
// next: the caller unlocks, waits for prev (nil: nothing ahead), hands
// its batch to Pebble and closes done, whatever happened.
func (st *acctState) enqueue() (prev, done chan struct{}) {
	prev, done = st.pending, make(chan struct{})
	st.pending = done
	return prev, done
}

func (st *acctState) drain() {
	if st.pending != nil {
		<-st.pending
		st.pending = nil
	}
}

// lockAccount returns the account's state, loaded and locked, with every
// write staged before it in Pebble (drain); the caller unlocks st.mu.
// ErrNotFound for an unknown account.
func (db *DB) lockAccount(account string) (*acctState, error) {
	st, err := db.lockAccountStaged(account)
	if err != nil {
		return nil, err
	}
	st.drain()
	return st, nil
}

// lockAccountStaged is lockAccount without the drain: the state may count
// writes still on their way to Pebble. For charge, which adds to them, and
// readers of the in-memory state.
func (db *DB) lockAccountStaged(account string) (*acctState, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if !db.accountExists(account) {
		return nil, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	v, ok := db.states.Load(account)
	if !ok {
		v, _ = db.states.LoadOrStore(account, &acctState{})
	}
	st := v.(*acctState)
	st.mu.Lock()
	if !st.loaded {
		if err := db.loadAcctState(account, st); err != nil {
			st.mu.Unlock()
			return nil, err
		}
	}
	return st, nil
}

// loadAcctState reads the account's last ledger entry: its balance, held
// credits and seq.
func (db *DB) loadAcctState(account string, st *acctState) error {
	p := ledgerPrefix(account)
	it, err := db.iter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	defer it.Close()
	st.holds = make(map[uint64]int64)
	if it.Last() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		e, err := decodeEntry(account, ledgerSeq(it.Key()), v)
		if err != nil {
			return err
		}
		st.balance, st.held, st.seq = e.Balance, e.Held, e.Seq
	}
	if err := it.Error(); err != nil {
		return err
	}
	st.loaded = true
	return nil
}

// ledgerTx stages ledger entries of one account into a batch; apply copies
// the result into the state once Pebble has taken the batch.
type ledgerTx struct {
	st      *acctState
	account string
	b       *pebble.Batch
	now     time.Time

	balance, held int64
	seq           uint64
	entries       []storage.Entry
}

func (st *acctState) begin(account string, b *pebble.Batch, now time.Time) *ledgerTx {
	return &ledgerTx{st: st, account: account, b: b, now: now, balance: st.balance, held: st.held, seq: st.seq}
}

func (tx *ledgerTx) add(kind storage.EntryKind, amount, delta, heldDelta int64, holdSeq uint64, ref, note string) storage.Entry {
	tx.seq++
	tx.balance += delta
	tx.held += heldDelta
	e := storage.Entry{
		Account: tx.account, Seq: tx.seq, Time: tx.now, Kind: kind, Amount: amount,
		Delta: delta, Balance: tx.balance, Held: tx.held, HoldSeq: holdSeq, Ref: ref, Note: note,
	}
	tx.b.Set(ledgerKey(tx.account, e.Seq), encodeEntry(e), nil)
	tx.entries = append(tx.entries, e)
	return e
}

// apply copies the staged balance into the state; call it once the batch
// is applied.
func (tx *ledgerTx) apply() {
	tx.st.balance, tx.st.held, tx.st.seq = tx.balance, tx.held, tx.seq
	countEntries(tx.entries)
}

// Credits returns the account's balance and held credits.
func (db *DB) Credits(ctx context.Context, account string) (storage.Credits, error) {
	st, err := db.lockAccountStaged(account)
	if err != nil {
		return storage.Credits{}, err
	}
	defer st.mu.Unlock()
	return storage.Credits{Balance: st.balance, Held: st.held}, nil
}

// AddCredits adds n > 0 credits to the account.
func (db *DB) AddCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error) {
	if err := storage.CheckAddCredits(n); err != nil {
		return storage.Entry{}, err
	}
	return db.adjust(account, func(tx *ledgerTx) (storage.Entry, error) {
		return tx.add(storage.EntryAdd, n, n, 0, 0, "", note), nil
	})
}

// SetCredits sets the account's balance to n. It refuses an n below the
// credits held by validations in flight, which will be charged or released
// whatever the balance says.
func (db *DB) SetCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error) {
	if err := storage.CheckSetCredits(n); err != nil {
		return storage.Entry{}, err
	}
	return db.adjust(account, func(tx *ledgerTx) (storage.Entry, error) {
		if err := storage.CheckSetCreditsHeld(n, tx.held); err != nil {
			return storage.Entry{}, err
		}
		return tx.add(storage.EntrySet, n, n-tx.balance, 0, 0, "", note), nil
	})
}

// adjust writes one operator entry, synced.
func (db *DB) adjust(account string, stage func(*ledgerTx) (storage.Entry, error)) (storage.Entry, error) {
	st, err := db.lockAccount(account)
	if err != nil {
		return storage.Entry{}, err
	}
	b := db.pdb.NewBatch()
	tx := st.begin(account, b, db.now())
	e, err := stage(tx)
	if err != nil {
		st.mu.Unlock()
		b.Close()
		return storage.Entry{}, err
	}
	wait, err := db.applyOrdered(b)
	if err != nil {
		st.mu.Unlock()
		return storage.Entry{}, err
	}
	tx.apply()
	st.mu.Unlock()
	return e, wait()
}

// holdBytes and chargeBytes are what a hold and a charge (without its
// receipt) write, about, for the space guard's count.
const (
	holdBytes   = 256
	chargeBytes = 2048
)

// Hold takes n credits of the account for a validation about to run, or
// fails with an *InsufficientCreditsError when fewer are available
// (balance − held). The check and the staging happen under the account's
// lock, so concurrent holds never take more than the balance; the hold
// reaches Pebble in the account's order of writes (acctState.pending).
// The hold entry is not synced by Hold: the charge or release that ends
// it is, and brings it to disk with it (see below). ref is logged in the
// entry (a request id). End the hold with Charge or Release.
func (db *DB) Hold(ctx context.Context, account string, n int64, ref string) (storage.Hold, error) {
	if err := storage.CheckHold(n); err != nil {
		return storage.Hold{}, err
	}
	// The disk space guard decides before anything is staged: a write
	// staged and then refused would leave the state counting it.
	if err := db.space.admit(holdBytes); err != nil {
		return storage.Hold{}, err
	}
	// The hold joins the account's chain of staged writes, as a charge
	// does (see charge), rather than waiting under the lock for the
	// charges ahead of it to be signed.
	st, err := db.lockAccountStaged(account)
	if err != nil {
		return storage.Hold{}, err
	}
	if avail := st.balance - st.held; avail < n {
		e := &storage.InsufficientCreditsError{Current: st.balance, Held: st.held, Needed: n}
		st.mu.Unlock()
		insufficientCredits.Inc()
		return storage.Hold{}, e
	}
	now := db.now()
	b := db.pdb.NewBatch()
	tx := st.begin(account, b, now)
	e := tx.add(storage.EntryHold, n, 0, n, 0, ref, "")
	h := storage.Hold{Account: account, Seq: e.Seq, N: n, Ref: ref, At: e.Time}
	b.Set(holdKey(account, e.Seq), encodeHold(h), nil)
	tx.apply()
	st.holds[e.Seq] = n
	prev, done := st.enqueue()
	st.mu.Unlock()
	// The hold is not synced on its own: it changes no balance, and the
	// synced charge or release that ends it carries it to disk (the WAL is
	// written in order). A crash before then may lose it, which loses
	// nothing: a lost hold was never charged, and one that reached disk is
	// released at Open. This saves one fsync per validation.
	if prev != nil {
		<-prev
	}
	err = db.commitAdmitted(b, pebble.NoSync)
	close(done)
	if err != nil {
		db.fail(fmt.Errorf("hold of %s not applied: %w", account, err))
		return storage.Hold{}, err
	}
	return h, nil
}

// Charge turns the hold into a charge: in one synced batch it writes the
// charge entry (the balance drops by the hold's credits), deletes the hold,
// and stores the result, its history row, its cache entry and, with
// req.Idem, the idempotent response. Either all of it survives a crash or
// none of it does. ErrHoldNotActive when the hold was already charged or
// released.
func (db *DB) Charge(ctx context.Context, h storage.Hold, req storage.ChargeRequest) (storage.Charged, error) {
	return db.charge(h.Account, &h, 0, req)
}

// ChargeDirect charges n credits of the account without a hold, for a
// result that is already known (cache: true): the availability check and the
// charge with the result, its history row and the idempotent response are
// one synced batch under the account's lock. It fails with an
// *InsufficientCreditsError when fewer than n are available.
func (db *DB) ChargeDirect(ctx context.Context, account string, n int64, req storage.ChargeRequest) (storage.Charged, error) {
	if err := storage.CheckChargeDirect(n); err != nil {
		return storage.Charged{}, err
	}
	return db.charge(account, nil, n, req)
}

// charge is Charge (h set: the hold's credits) and ChargeDirect (h nil: n
// credits checked against the available balance).
//
// It works in two steps so that one account's charges do not queue behind
// each other's signatures. Under the account's lock it checks the credits,
// stages the ledger entry, gives out the result's history id and position,
// and counts the charge in the account's state. Then, without the lock, it
// seals the receipt (an Ed25519 signature, the costly part), stages the
// result and the idempotent response, waits until the account's write
// staged before it is in Pebble and applies its own (see acctState.pending):
// the account's writes still reach the WAL in the order of its lock, so a
// ledger entry never reaches disk without the one before it, and history
// rows become visible in the order of their positions.
func (db *DB) charge(account string, h *storage.Hold, n int64, req storage.ChargeRequest) (storage.Charged, error) {
	if err := storage.CheckCharge(account, &req); err != nil {
		return storage.Charged{}, err
	}
	r := req.Result
	// Admitted before anything is staged (see Hold).
	if err := db.space.admit(len(r.Email) + chargeBytes); err != nil {
		return storage.Charged{}, err
	}
	st, err := db.lockAccountStaged(account)
	if err != nil {
		return storage.Charged{}, err
	}
	var holdSeq uint64
	heldDelta := int64(0)
	if h != nil {
		var ok bool
		if n, ok = st.holds[h.Seq]; !ok {
			st.mu.Unlock()
			return storage.Charged{}, fmt.Errorf("%w: %s/%d", storage.ErrHoldNotActive, h.Account, h.Seq)
		}
		holdSeq, heldDelta = h.Seq, -n
	} else if avail := st.balance - st.held; avail < n {
		e := &storage.InsufficientCreditsError{Current: st.balance, Held: st.held, Needed: n}
		st.mu.Unlock()
		insufficientCredits.Inc()
		return storage.Charged{}, e
	}
	now := db.now()
	if err := db.prepareResult(&r, now); err != nil {
		st.mu.Unlock()
		return storage.Charged{}, err
	}
	b := db.pdb.NewBatch()
	tx := st.begin(account, b, now)
	e := tx.add(storage.EntryCharge, n, -n, heldDelta, holdSeq, r.ID, "")
	if h != nil {
		b.Delete(holdKey(account, h.Seq), nil)
	}
	pa := posAlloc{db: db, st: st, account: account}
	pos, err := db.allocResult(&pa, &r)
	if err != nil {
		st.mu.Unlock()
		b.Close()
		return storage.Charged{}, err
	}
	verdict, re := db.verdicts.index(&r) // under the lock: in the order of the writes
	// From here the charge is the account's next write: it is counted in
	// the state now and must reach Pebble after the writes before it and
	// before the writes after it, whatever happens to its receipt.
	tx.apply()
	pa.apply()
	if h != nil {
		delete(st.holds, h.Seq)
	}
	prev, done := st.enqueue()
	st.mu.Unlock()

	var sealed storage.Sealed
	var sealErr error
	if req.Seal != nil {
		if sealed, sealErr = req.Seal(r, e.Balance); sealErr == nil {
			r.Receipt = sealed.Receipt
		}
	}
	if sealErr == nil {
		db.stageResultAt(b, &r, pos, verdict)
	} else {
		db.verdicts.unwrite(db, &r)
	}
	stageVerdictRef(b, &r, re)
	// Wait for the write ahead before taking any lock: a write ahead may
	// need the same idempotency stripe.
	if prev != nil {
		<-prev
	}
	var idemMu *sync.Mutex
	if sealErr == nil && req.Idem != nil {
		idemMu = db.idemLock(*req.Idem)
		idemMu.Lock()
		if err := db.stageIdemDone(b, *req.Idem, req.IdemHash, sealed.Response, now); err != nil {
			// Fail-open, as for an idempotency store that fails before
			// the request (spec §7.3): the validation stands, its
			// response is not kept for replays.
			db.log.Warn("idempotency record not completed", "account", account, "err", err)
		}
	}
	wait, err := db.applyOrderedAdmitted(b)
	if idemMu != nil {
		idemMu.Unlock()
	}
	if err == nil && sealErr == nil && r.CachedFrom == "" && !r.SkipCache {
		db.memo.written(cacheKey(r.Account, r.Email), r)
	}
	close(done)
	if err != nil {
		// The state counts a charge Pebble refused: nothing written after
		// it can be trusted.
		db.fail(fmt.Errorf("charge of %s not applied: %w", account, err))
		return storage.Charged{}, err
	}
	if sealErr != nil {
		// The charge entry is written (the entries after it count it); a
		// second entry gives the credit back.
		if _, verr := db.AddCredits(context.Background(), account, n, storage.VoidNote(e.Seq)); verr != nil {
			db.log.Error("void charge", "account", account, "seq", e.Seq, "err", verr)
		}
		if werr := wait(); werr != nil {
			return storage.Charged{}, werr
		}
		return storage.Charged{}, fmt.Errorf("storage: seal receipt: %w", sealErr)
	}
	if err := wait(); err != nil {
		return storage.Charged{}, err
	}
	return storage.Charged{Balance: e.Balance, Entry: e, Result: r}, nil
}

// Release ends the hold without a charge (the engine failed; the request
// answers 500). ErrHoldNotActive when it was already charged or released.
func (db *DB) Release(ctx context.Context, h storage.Hold, note string) (storage.Entry, error) {
	st, err := db.lockAccount(h.Account)
	if err != nil {
		return storage.Entry{}, err
	}
	n, ok := st.holds[h.Seq]
	if !ok {
		st.mu.Unlock()
		return storage.Entry{}, fmt.Errorf("%w: %s/%d", storage.ErrHoldNotActive, h.Account, h.Seq)
	}
	b := db.pdb.NewBatch()
	tx := st.begin(h.Account, b, db.now())
	e := tx.add(storage.EntryRelease, n, 0, -n, h.Seq, h.Ref, note)
	b.Delete(holdKey(h.Account, h.Seq), nil)
	// A release goes even with the disk nearly full (the guard's reserve
	// has room for it): it frees credits a request no longer needs.
	wait, err := db.applyOrderedAdmitted(b)
	if err != nil {
		st.mu.Unlock()
		return storage.Entry{}, err
	}
	tx.apply()
	delete(st.holds, h.Seq)
	st.mu.Unlock()
	return e, wait()
}

// Holds returns the account's active holds, oldest first.
func (db *DB) Holds(ctx context.Context, account string) ([]storage.Hold, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	var out []storage.Hold
	err := db.scanPrefix(holdPrefix(account), func(k, v []byte) (bool, error) {
		acct, seq, ok := parseHoldKey(k)
		if !ok || acct != account {
			return true, nil
		}
		h, err := decodeHold(acct, seq, v)
		out = append(out, h)
		return true, err
	})
	return out, err
}

// Ledger returns up to limit entries of the account with Seq > after, in
// order (limit ≤ 0: all of them).
func (db *DB) Ledger(ctx context.Context, account string, after uint64, limit int) ([]storage.Entry, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if !db.accountExists(account) {
		return nil, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	var out []storage.Entry
	p := ledgerPrefix(account)
	err := db.scan(ledgerKey(account, after+1), prefixEnd(p), func(k, v []byte) (bool, error) {
		e, err := decodeEntry(account, ledgerSeq(k), v)
		if err != nil {
			return false, err
		}
		out = append(out, e)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// releaseStaleHolds releases, at Open, every hold a previous process left:
// its validation never answered, so it is not charged. One synced batch
// per account, each release a ledger entry.
func (db *DB) releaseStaleHolds() error {
	byAccount := make(map[string][]storage.Hold)
	err := db.scanPrefix([]byte(prefixHold), func(k, v []byte) (bool, error) {
		acct, seq, ok := parseHoldKey(k)
		if !ok {
			return false, fmt.Errorf("%w: hold key %q", errCorrupt, k)
		}
		h, err := decodeHold(acct, seq, v)
		byAccount[acct] = append(byAccount[acct], h)
		return true, err
	})
	if err != nil {
		return err
	}
	accounts := make([]string, 0, len(byAccount))
	for a := range byAccount {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	for _, acct := range accounts {
		hs := byAccount[acct]
		v, _ := db.states.LoadOrStore(acct, &acctState{})
		st := v.(*acctState)
		st.mu.Lock()
		if !st.loaded {
			if err := db.loadAcctState(acct, st); err != nil {
				st.mu.Unlock()
				return err
			}
		}
		b := db.pdb.NewBatch()
		tx := st.begin(acct, b, db.now())
		for _, h := range hs {
			tx.add(storage.EntryRelease, h.N, 0, -h.N, h.Seq, h.Ref, "released at open")
			b.Delete(holdKey(acct, h.Seq), nil)
		}
		if err := db.commit(b, pebble.Sync); err != nil {
			st.mu.Unlock()
			return err
		}
		tx.apply()
		if st.held != 0 {
			db.log.Error("held credits left after releasing every hold", "account", acct, "held", st.held)
		}
		st.mu.Unlock()
		staleHoldsReleased.Add(len(hs))
		db.log.Info("released holds of validations a previous process left unanswered", "account", acct, "holds", len(hs))
	}
	return nil
}
