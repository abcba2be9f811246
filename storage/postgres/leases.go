package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Credit leases. A fresh validation holds a credit before it probes and
// charges it after (storage.Balances): two transactions on the account's
// row, a holds row inserted and deleted and two ledger entries, each
// shared with the validations of the account in flight on the box
// (combine.go), but paid for by each. A box that validates for an account
// many times a second instead takes a block of its credits once, as one
// hold (a lease: a holds row of this boot, ref leaseRef), hands a
// validation its credit from the block in memory (a part: storage.Hold
// with Part set), and charges each part against the block in the
// charge's transaction: `amount = amount - n` where the row still has n,
// so a charge never takes more than the block holds. A validation then
// costs its charge's share of a transaction and one ledger entry, and no
// holds row of its own.
//
// What stays true:
//   - No overdraft: the block is held on the account's row like any hold
//     (the CHECK balance − held ≥ 0 counts it), and a charge takes at most
//     what its block still has. A part whose block is gone (released by an
//     operator's SetCredits, by another box that took this one for stopped,
//     or lost with a primary) is charged from the available credits as a
//     ChargeDirect, or fails with InsufficientCreditsError: never an
//     overdraft.
//   - No credit stays held for nothing: a block is returned (its rest
//     released, one ledger entry) after leaseIdle without a part handed
//     out, at Close, and after the primary changes; a box that dies
//     holding one has it released by the others with its other holds
//     after storage.lease (Reap); a block whose take's answer was lost is
//     released by the heartbeat (sweepHolds), as any hold.
//   - Each charge is still one ledger entry with its result, and the
//     ledger still adds up: the block's hold entry, a charge entry per
//     validation naming the block (hold_seq), a release of the rest.
//
// The price: while a block is out, its unused credits count as held, so a
// hold, a batch's reservation or a charge on another box can find fewer
// credits available than the balance shows, by at most leaseShare of
// what was available when the block was taken, for at most leaseIdle
// after the box's last validation of the account. A block is only taken
// while the account has at least leaseMin credits available, so an
// account near its last credits holds one credit a validation, as
// before, and only for an account that validated on this box within the
// last second (a lone validation takes a plain hold).

// leaseRef is the ref of a block's holds row and ledger entries.
const leaseRef = "credit-lease"

// The blocks' sizes and life (Options.CreditLeases).
const (
	// leaseMin: no block is taken while fewer credits are available.
	leaseMin = 10_000
	// leaseShare: a block is at most 1/leaseShare of the credits
	// available when it is taken,
	leaseShare = 100
	// leaseMax: and at most this many.
	leaseMax = 10_000
	// leaseIdle: a block no validation used for this long is returned.
	leaseIdle = 2 * time.Second
	// leaseRecent: a block is taken for an account that validated on
	// this box this recently.
	leaseRecent = time.Second
)

// creditLeases are a box's blocks, by account.
type creditLeases struct {
	min, max, share int64
	idle            time.Duration

	mu     sync.Mutex
	by     map[string]*creditLease // the account's block parts are taken from
	old    []*creditLease          // retired blocks with parts out
	taking map[string]bool         // a block's take under way
	recent map[string]time.Time    // the account's last hold on this box
	part   uint64                  // the last part's id
}

// creditLease is one block.
type creditLease struct {
	hold    storage.Hold // the holds row: Seq, and N as taken
	avail   int64        // not handed out yet
	parts   map[uint64]int64
	used    time.Time // the last part handed out
	retired bool      // no more parts; returned once the parts are ended
}

func newCreditLeases() *creditLeases {
	return &creditLeases{min: leaseMin, max: leaseMax, share: leaseShare, idle: leaseIdle,
		by: map[string]*creditLease{}, taking: map[string]bool{}, recent: map[string]time.Time{}}
}

// size is the block to take when avail credits are available (0: none).
func (c *creditLeases) size(avail int64) int64 {
	if avail < c.min {
		return 0
	}
	return min(avail/c.share, c.max)
}

// take hands out n credits of the account's block as a part, if it has a
// block with n left.
func (c *creditLeases) take(account string, n int64, ref string, now time.Time) (storage.Hold, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.by[account]
	if l == nil {
		return storage.Hold{}, false
	}
	if l.avail < n {
		c.retire(account, l)
		return storage.Hold{}, false
	}
	c.recent[account] = now
	return c.handOut(l, n, ref, now), true
}

// handOut takes a part of n from l; c.mu is held. The part's At is the
// caller's to set, by the records' clock (Options.Now).
func (c *creditLeases) handOut(l *creditLease, n int64, ref string, now time.Time) storage.Hold {
	c.part++
	l.avail -= n
	l.parts[c.part] = n
	l.used = now
	leaseParts.Inc()
	return storage.Hold{Account: l.hold.Account, Seq: l.hold.Seq, N: n, Ref: ref, Part: c.part}
}

// startTake notes a hold of the account at now that found no block, and
// reports whether it should take one: the account held on this box
// within leaseRecent before and no take is under way. Then the caller
// takes one, and calls taken.
func (c *creditLeases) startTake(account string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.recent[account]
	c.recent[account] = now
	if !ok || now.Sub(last) > leaseRecent || c.taking[account] || c.by[account] != nil {
		return false
	}
	c.taking[account] = true
	return true
}

// taken ends a take: with lease set (the block's holds row), the block is
// the account's and the caller's part of n is handed out of it.
func (c *creditLeases) taken(account string, lease *storage.Hold, n int64, ref string, now time.Time) storage.Hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.taking, account)
	if lease == nil {
		return storage.Hold{}
	}
	if l := c.by[account]; l != nil {
		c.retire(account, l)
	}
	l := &creditLease{hold: *lease, avail: lease.N, parts: map[uint64]int64{}}
	c.by[account] = l
	leasesTaken.Inc()
	return c.handOut(l, n, ref, now)
}

// retire ends the handing out of l's parts; c.mu is held.
func (c *creditLeases) retire(account string, l *creditLease) {
	if l.retired {
		return
	}
	l.retired = true
	if c.by[account] == l {
		delete(c.by, account)
	}
	c.old = append(c.old, l)
}

// find returns the block of h, a part, and whether it still has the part.
func (c *creditLeases) find(h storage.Hold) (*creditLease, bool) {
	if l := c.by[h.Account]; l != nil && l.hold.Seq == h.Seq {
		_, ok := l.parts[h.Part]
		return l, ok
	}
	for _, l := range c.old {
		if l.hold.Account == h.Account && l.hold.Seq == h.Seq {
			_, ok := l.parts[h.Part]
			return l, ok
		}
	}
	return nil, false
}

// end ends the part h (charged, or released with back set: its credits
// go back to the block unless it is retired); false when it had ended.
func (c *creditLeases) end(h storage.Hold, back bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.find(h)
	if !ok {
		return false
	}
	n := l.parts[h.Part]
	delete(l.parts, h.Part)
	if back && !l.retired {
		l.avail += n
	}
	return true
}

// gone retires the block of h: a charge found its holds row gone or short.
func (c *creditLeases) gone(h storage.Hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, _ := c.find(h); l != nil {
		c.retire(h.Account, l)
	}
}

// retireAll retires every block (the primary changed: their rows may be
// gone with the one written to).
func (c *creditLeases) retireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for account, l := range c.by {
		c.retire(account, l)
	}
}

// due retires the blocks idle since before now − idle and returns the
// retired ones with no part out, forgetting them, for the caller to
// return.
func (c *creditLeases) due(now time.Time) []storage.Hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	for account, l := range c.by {
		if now.Sub(l.used) >= c.idle {
			c.retire(account, l)
		}
	}
	for account, at := range c.recent {
		if now.Sub(at) > leaseRecent {
			delete(c.recent, account)
		}
	}
	var back []storage.Hold
	keep := c.old[:0]
	for _, l := range c.old {
		if len(l.parts) == 0 {
			back = append(back, l.hold)
		} else {
			keep = append(keep, l)
		}
	}
	clear(c.old[len(keep):])
	c.old = keep
	return back
}

// out returns the blocks this box has (tests).
func (c *creditLeases) out() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.by) + len(c.old)
}

// returnLeases gives back the blocks due (creditLeases.due): each holds
// row's rest is released (one ledger entry; a row charged to nothing goes
// without one). A block that cannot be returned now is the heartbeat's
// (sweepHolds), as a hold whose release failed.
func (db *DB) returnLeases(now time.Time) {
	for _, h := range db.leases.due(now) {
		db.returnLease(h)
	}
}

func (db *DB) returnLease(h storage.Hold) {
	defer db.live.drop(h)
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	tag, err := db.pool.Exec(ctx, `DELETE FROM holds WHERE account = $1 AND seq = $2 AND amount = 0`, h.Account, int64(h.Seq))
	if err == nil && tag.RowsAffected() == 1 {
		leasesReturned.Inc()
		return
	}
	if err == nil {
		_, err = db.release(ctx, h, "credit lease returned: the rest of its block")
	}
	switch {
	case err == nil:
		leasesReturned.Inc()
	case errors.Is(err, storage.ErrHoldNotActive):
		// Released already (an operator's set, a box that took this one
		// for stopped).
	default:
		db.log.Warn("cannot return a credit lease; the heartbeat will", "account", h.Account, "hold", h.Seq, "err", err)
	}
}

// leaseLoop returns the blocks due, four times a leaseIdle.
func (db *DB) leaseLoop() {
	defer db.wg.Done()
	t := time.NewTicker(db.leases.idle / 4)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case now := <-t.C:
			db.returnLeases(now)
		}
	}
}
