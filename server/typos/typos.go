// Package typos gives the engine each account's own domains as targets of
// its typing-slip suggestions (probe.WithTypoTargets, receipt
// did_you_mean): beside the large providers verifyd ships, a business
// list's mistakes are slips of the account's own customers' domains
// (ann@northwindtrders.com for ann@northwindtraders.com).
//
// An account's domains are those of the addresses its newest history
// rows found valid (HistoryRows of them, singles and batches): a valid
// address proves its domain receives mail. They are read when a
// suggestion is first looked for, and kept for TTL: a domain an account
// validated is a target within that time, on every box of a fleet. A
// suggestion is looked for only when an address's domain takes no mail,
// so an account whose addresses' domains all receive mail never reads
// its history for this.
package typos

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/storage"
)

// History reads an account's history (storage.Store's ListHistory).
type History interface {
	ListHistory(ctx context.Context, account, kind, cursor string, limit int) (storage.HistoryPage, error)
}

// Defaults of Options.
const (
	DefaultTTL         = time.Minute
	DefaultHistoryRows = 5000
	DefaultMaxDomains  = 1000
	DefaultMaxAccounts = 10_000
)

// Options configures Accounts; zero fields take their defaults.
type Options struct {
	// TTL is how long an account's domains are kept before they are read
	// again.
	TTL time.Duration
	// HistoryRows is how many of the account's newest history rows are
	// read (one page; storage allows 10,000 at most).
	HistoryRows int
	// MaxDomains caps an account's domains: the most often valid first.
	MaxDomains int
	// MaxAccounts caps the accounts whose domains are kept; past it the
	// expired ones are dropped, then all.
	MaxAccounts int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// readRetry is how long after a failed read the next one is made.
const readRetry = 5 * time.Second

// Accounts keeps the accounts' domains.
type Accounts struct {
	db History
	o  Options

	mu sync.Mutex
	m  map[string]*entry
}

// entry is one account's domains; mu is held while they are read, so
// that the validations waiting on them share one read.
type entry struct {
	mu      sync.Mutex
	at      time.Time
	domains []string
}

var (
	historyReads  = metrics.NewCounter(`verifyd_typo_account_reads_total`)
	historyErrors = metrics.NewCounter(`verifyd_typo_account_read_errors_total`)
)

// New returns the Accounts reading db.
func New(db History, o Options) *Accounts {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.HistoryRows <= 0 {
		o.HistoryRows = DefaultHistoryRows
	}
	if o.MaxDomains <= 0 {
		o.MaxDomains = DefaultMaxDomains
	}
	if o.MaxAccounts <= 0 {
		o.MaxAccounts = DefaultMaxAccounts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Accounts{db: db, o: o, m: map[string]*entry{}}
}

// Targets returns the account's domains for probe.WithTypoTargets; nil
// for a nil Accounts.
func (a *Accounts) Targets(account string) probe.TypoTargets {
	if a == nil {
		return nil
	}
	return func(ctx context.Context) []string { return a.Domains(ctx, account) }
}

// Domains returns the account's domains: read again once TTL old. After
// a failed read the last ones read (or none) serve for readRetry before
// the next try: a database that fails is not asked again by every
// validation of the account, each waiting on the one before.
func (a *Accounts) Domains(ctx context.Context, account string) []string {
	now := a.o.Now()
	a.mu.Lock()
	e := a.m[account]
	if e == nil {
		if len(a.m) >= a.o.MaxAccounts {
			a.evict(now)
		}
		e = &entry{}
		a.m[account] = e
	}
	a.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.at.IsZero() && now.Sub(e.at) < a.o.TTL {
		return e.domains
	}
	historyReads.Inc()
	p, err := a.db.ListHistory(ctx, account, storage.HistoryAll, "", a.o.HistoryRows)
	if err != nil {
		historyErrors.Inc()
		e.at = now.Add(readRetry - a.o.TTL)
		return e.domains // the last ones read, if any
	}
	e.domains, e.at = validDomains(p.Rows, a.o.MaxDomains), now
	return e.domains
}

// evict drops the expired accounts, or all when none is. The caller
// holds a.mu.
func (a *Accounts) evict(now time.Time) {
	for k, e := range a.m {
		if e.mu.TryLock() {
			old := now.Sub(e.at) >= a.o.TTL
			e.mu.Unlock()
			if old {
				delete(a.m, k)
			}
		}
	}
	if len(a.m) >= a.o.MaxAccounts {
		clear(a.m)
	}
}

// validDomains returns the domains of rows' valid addresses, the most
// often valid first, at most max. Internationalised domains are left
// out: the suggestions compare ASCII letters and the keys beside them.
func validDomains(rows []storage.HistoryRow, max int) []string {
	count := map[string]int{}
	for _, r := range rows {
		if r.Status != string(probe.StatusValid) {
			continue
		}
		at := strings.LastIndexByte(r.Email, '@')
		if at < 0 {
			continue
		}
		d := strings.ToLower(r.Email[at+1:])
		if !ascii(d) {
			continue
		}
		count[d]++
	}
	out := make([]string, 0, len(count))
	for d := range count {
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y string) int {
		return cmp.Or(count[y]-count[x], strings.Compare(x, y))
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
