package outcomes

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/outcomes/platform"
	"github.com/verifyd/verifyd/storage"
)

// SourceAPI is the source of outcomes reported with an API key.
const SourceAPI = "api"

// Store is what the service needs of storage.
type Store interface {
	LatestVerdicts(ctx context.Context, account string, qs []storage.VerdictQuery) ([]storage.Verdict, []bool, error)
	PutOutcomes(ctx context.Context, account string, outs []storage.Outcome) ([]bool, error)
	AddressEvidence(ctx context.Context, account, email string) (storage.Outcome, bool, error)
	EvidenceAccounts(ctx context.Context) ([]string, error)
	PurgeOutcomes(ctx context.Context, before time.Time) (int, error)
}

// FactStore keeps the domain knowledge (storage/pebble on one box, the
// fleet's PostgreSQL): a value of a kind for a key until it expires.
type FactStore interface {
	Fact(kind, key string) (string, time.Time, bool, error)
	PutFact(kind, key, value string, expires time.Time) error
	FactsOfKind(kind string) (map[string]string, error)
}

// FactBounces is the kind of the domain knowledge: by domain, its counts
// (domainCounts).
const FactBounces = "bounces"

// Options configures a Service.
type Options struct {
	DB    Store
	Facts FactStore
	// Window: an outcome matches a verdict at most this old, and an
	// address's bounce changes its verdicts for this long. Default 90
	// days.
	Window time.Duration
	// DomainTTL is how long a domain's counts live after their last
	// change. Default 30 days.
	DomainTTL time.Duration
	// MinBounces and BounceShare: a domain whose addresses verifyd called
	// valid or risky got at least MinBounces "no such mailbox" bounces,
	// and those are at least BounceShare of its bounces and deliveries,
	// accepts at RCPT what it then bounces. Defaults 2 and 0.2.
	MinBounces  int
	BounceShare float64
	// Refresh is how often the domains are read again from Facts, where
	// the other boxes of a fleet write theirs, and the accounts with
	// address evidence from DB. Default 1 minute.
	Refresh time.Duration
	// Retention: outcomes that happened longer ago are deleted, once an
	// hour. Default 180 days; negative: never.
	Retention time.Duration
	// Calibrate reads the outcomes the score's calibration is fitted to
	// (the store); nil: no calibration. RefitEvery is how often it is
	// fitted again (default 24 hours); MinCalibration how many
	// deliverable or bounced outcomes an account, or a provider, needs for
	// a model of its own (default 100).
	Calibrate      Scanner
	RefitEvery     time.Duration
	MinCalibration int
	Now            func() time.Time
	Logger         *slog.Logger
}

// Service matches outcomes to verdicts, stores them, and learns from them
// (docs/outcomes.md).
type Service struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex // orders the read-modify-writes of domain counts
	domains sync.Map   // ASCII domain → domainCounts, flagged only

	// evidence holds the accounts that have address evidence (account →
	// struct{}), read from DB at start and at each refresh, and added to
	// at once when this box records an account's outcomes; never
	// shrunk but by a restart (an account that lost its evidence costs a
	// read, not a wrong answer). Until a read succeeded (evidenceKnown),
	// every validation asks DB.
	evidence      sync.Map
	evidenceKnown atomic.Bool

	models models

	stop      chan struct{}
	done      chan struct{}
	refitDone chan struct{}
}

// New returns a Service and starts its refresh of the domain knowledge;
// Close stops it.
func New(opts Options) *Service {
	if opts.Window <= 0 {
		opts.Window = 90 * 24 * time.Hour
	}
	if opts.DomainTTL <= 0 {
		opts.DomainTTL = 30 * 24 * time.Hour
	}
	if opts.MinBounces <= 0 {
		opts.MinBounces = 2
	}
	if opts.BounceShare <= 0 {
		opts.BounceShare = 0.2
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Minute
	}
	if opts.Retention == 0 {
		opts.Retention = 180 * 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RefitEvery <= 0 {
		opts.RefitEvery = 24 * time.Hour
	}
	if opts.MinCalibration <= 0 {
		opts.MinCalibration = 100
	}
	s := &Service{opts: opts, log: opts.Logger.With("pkg", "outcomes"), stop: make(chan struct{}), done: make(chan struct{}),
		refitDone: make(chan struct{})}
	s.refresh()
	go s.loop()
	go s.refitLoop()
	return s
}

// Close stops the refresh, the purge and the refits.
func (s *Service) Close() {
	close(s.stop)
	<-s.done
	<-s.refitDone
}

func (s *Service) loop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Refresh)
	defer t.Stop()
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	s.purge()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.refresh()
		case <-purge.C:
			s.purge()
		}
	}
}

// purge deletes the outcomes older than the retention.
func (s *Service) purge() {
	if s.opts.Retention < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := s.opts.DB.PurgeOutcomes(ctx, s.opts.Now().Add(-s.opts.Retention))
	if err != nil {
		s.log.Warn("cannot delete the outcomes past their retention", "err", err)
		return
	}
	purged.Add(n)
	if n > 0 {
		s.log.Info("outcomes past their retention deleted", "n", n, "retention", s.opts.Retention)
	}
}

// refresh reads the domains every box has learned and the accounts that
// have address evidence.
func (s *Service) refresh() {
	s.refreshEvidence()
	if s.opts.Facts == nil {
		return
	}
	m, err := s.opts.Facts.FactsOfKind(FactBounces)
	if err != nil {
		s.log.Warn("cannot read the domains learned from outcomes", "err", err)
		return
	}
	flagged := 0
	seen := map[string]bool{}
	for d, v := range m {
		c := parseCounts(v)
		if s.flags(c) {
			s.domains.Store(d, c)
			seen[d] = true
			flagged++
		}
	}
	s.domains.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			s.domains.Delete(k)
		}
		return true
	})
	flaggedDomains.Set(float64(flagged))
}

// refreshEvidence reads the accounts that have address evidence. A
// failure keeps what was known (and, before the first success, every
// validation asking DB).
func (s *Service) refreshEvidence() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.opts.DB.EvidenceAccounts(ctx)
	if err != nil {
		s.log.Warn("cannot read the accounts with delivery outcomes", "err", err)
		return
	}
	for _, a := range l {
		s.evidence.Store(a, struct{}{})
	}
	s.evidenceKnown.Store(true)
	n := 0
	s.evidence.Range(func(_, _ any) bool { n++; return true })
	evidenceAccounts.Set(float64(n))
}

// anyFlagged reports whether some domain is known to bounce what it
// accepts (Range stops at the first).
func (s *Service) anyFlagged() bool {
	found := false
	s.domains.Range(func(_, _ any) bool { found = true; return false })
	return found
}

// hasEvidence reports whether account may have address evidence: false
// only when it is known to have none.
func (s *Service) hasEvidence(account string) bool {
	if !s.evidenceKnown.Load() {
		return true
	}
	_, ok := s.evidence.Load(account)
	return ok
}

// domainCounts are a domain's outcomes of addresses verifyd called valid
// or risky: "no such mailbox" bounces, and deliveries.
type domainCounts struct{ Bounced, Delivered int }

func (c domainCounts) String() string { return fmt.Sprintf("b=%d d=%d", c.Bounced, c.Delivered) }

func parseCounts(v string) domainCounts {
	var c domainCounts
	for _, f := range strings.Fields(v) {
		k, n, _ := strings.Cut(f, "=")
		i, _ := strconv.Atoi(n)
		switch k {
		case "b":
			c.Bounced = i
		case "d":
			c.Delivered = i
		}
	}
	return c
}

// flags reports whether counts make a domain one that accepts at RCPT
// what it bounces later.
func (s *Service) flags(c domainCounts) bool {
	total := c.Bounced + c.Delivered
	return c.Bounced >= s.opts.MinBounces && float64(c.Bounced) >= s.opts.BounceShare*float64(total)
}

// Summary is what Record did.
type Summary struct {
	// Received outcomes; Stored of them new, Duplicates already known
	// (their event id).
	Received, Stored, Duplicates int
	// Matched and Unmatched: the new outcomes with and without a verdict.
	Matched, Unmatched int
	// Bounced: new "no such mailbox" bounces of addresses verifyd called
	// valid or risky (their later verdicts are invalid). FalseNegatives:
	// new deliveries to addresses it called invalid.
	Bounced, FalseNegatives int
}

// Record matches outcomes of the account to its verdicts, stores them,
// and learns from the new ones.
func (s *Service) Record(ctx context.Context, account string, outs []storage.Outcome) (Summary, error) {
	sum := Summary{Received: len(outs)}
	qs := make([]storage.VerdictQuery, len(outs))
	for i, o := range outs {
		qs[i] = storage.VerdictQuery{Email: o.Email, Before: o.At}
	}
	vs, ok, err := s.opts.DB.LatestVerdicts(ctx, account, qs)
	if err != nil {
		return sum, err
	}
	for i := range outs {
		o := &outs[i]
		if o.Enhanced == "" || o.SMTPCode == 0 {
			code, enh := platform.ParseSMTP(o.Diagnostic)
			if o.SMTPCode == 0 {
				o.SMTPCode = code
			}
			if o.Enhanced == "" {
				o.Enhanced = enh
			}
		}
		if ok[i] && o.At.Sub(vs[i].ProbedAt) <= s.opts.Window {
			o.Verdict = vs[i]
		}
	}
	// Before they are stored, so that no validation of this box reads
	// past evidence it just stored.
	if _, ok := s.evidence.LoadOrStore(account, struct{}{}); !ok {
		evidenceAccounts.Inc()
	}
	fresh, err := s.opts.DB.PutOutcomes(ctx, account, outs)
	if err != nil {
		return sum, err
	}
	learn := map[string]domainCounts{}
	for i := range outs {
		o := &outs[i]
		if !fresh[i] {
			sum.Duplicates++
			continue
		}
		sum.Stored++
		outcomesStored(o.Source, o.Event).Inc()
		if !o.Matched() {
			sum.Unmatched++
			unmatched.Inc()
			continue
		}
		sum.Matched++
		said := o.Verdict.Status
		acceptedAtRCPT := said == string(probe.StatusValid) || said == string(probe.StatusRisky)
		switch {
		case o.Event == storage.OutcomeHardBounce && acceptedAtRCPT && s.noMailbox(o, o.Verdict.MXHost):
			sum.Bounced++
			learnedAddresses.Inc()
			d := domainOf(o.Email)
			c := learn[d]
			c.Bounced++
			learn[d] = c
		case o.Event == storage.OutcomeDelivered && acceptedAtRCPT:
			d := domainOf(o.Email)
			c := learn[d]
			c.Delivered++
			learn[d] = c
		case o.Event == storage.OutcomeDelivered && said == string(probe.StatusInvalid):
			sum.FalseNegatives++
			falseNegatives.Inc()
		}
	}
	if err := s.learnDomains(learn); err != nil {
		// The outcomes are stored; the knowledge of this request is lost.
		s.log.Warn("cannot record what outcomes taught about domains", "err", err)
	}
	return sum, nil
}

// learnDomains adds counts to the domains' facts.
func (s *Service) learnDomains(add map[string]domainCounts) error {
	if s.opts.Facts == nil || len(add) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	for d, a := range add {
		if d == "" {
			continue
		}
		v, _, _, err := s.opts.Facts.Fact(FactBounces, d)
		if err != nil {
			return err
		}
		c := parseCounts(v)
		c.Bounced += a.Bounced
		c.Delivered += a.Delivered
		if err := s.opts.Facts.PutFact(FactBounces, d, c.String(), now.Add(s.opts.DomainTTL)); err != nil {
			return err
		}
		_, was := s.domains.Load(d)
		if s.flags(c) {
			s.domains.Store(d, c)
			if !was {
				learnedDomains.Inc()
				s.log.Info("domain accepts at RCPT what it bounces later", "domain", d, "bounced", c.Bounced, "delivered", c.Delivered)
			}
		} else if was {
			s.domains.Delete(d)
			s.log.Info("domain delivers what it accepts again", "domain", d, "bounced", c.Bounced, "delivered", c.Delivered)
		}
	}
	return nil
}

// noMailbox reports whether a hard bounce says the mailbox does not exist.
func (s *Service) noMailbox(o *storage.Outcome, mxHost string) bool {
	return probe.BounceNoMailbox(o.SMTPCode, o.Enhanced, o.Diagnostic, mxHost)
}

// Learned returns what the outcomes taught about an address the probe
// judged status, nil when nothing changes the verdict: a "no such
// mailbox" bounce of the address within the window (its latest evidence:
// a later delivery clears it) makes it invalid; a valid address of a
// domain that bounces what it accepts is risky.
func (s *Service) Learned(ctx context.Context, account, email, mxHost string, status probe.Status) (*probe.Learned, error) {
	if status != probe.StatusValid && status != probe.StatusRisky {
		return nil, nil
	}
	// An account that never reported outcomes pays no read.
	var ev storage.Outcome
	var ok bool
	if s.hasEvidence(account) {
		var err error
		if ev, ok, err = s.opts.DB.AddressEvidence(ctx, account, email); err != nil {
			return nil, err
		}
	} else {
		evidenceSkipped.Inc()
	}
	if ok && ev.Event == storage.OutcomeHardBounce && s.opts.Now().Sub(ev.At) <= s.opts.Window {
		if mxHost == "" {
			mxHost = ev.Verdict.MXHost
		}
		if s.noMailbox(&ev, mxHost) {
			applied(probe.LearnedAddress).Inc()
			return &probe.Learned{Kind: probe.LearnedAddress, At: ev.At, Enhanced: ev.Enhanced}, nil
		}
	}
	if status != probe.StatusValid || !s.anyFlagged() {
		return nil, nil // no domain flagged: the address is not parsed
	}
	if v, ok := s.domains.Load(domainOf(email)); ok {
		c := v.(domainCounts)
		applied(probe.LearnedDomain).Inc()
		return &probe.Learned{Kind: probe.LearnedDomain, Bounced: c.Bounced, Delivered: c.Delivered}, nil
	}
	return nil, nil
}

// Apply changes a fresh result by what the outcomes taught (Learned),
// then calibrates its score (Calibrate).
func (s *Service) Apply(ctx context.Context, account string, r *probe.Result) error {
	l, err := s.Learned(ctx, account, r.Email, r.Checks.MXHost, r.Status)
	if l != nil {
		r.Learn(l)
	}
	s.Calibrate(account, r)
	return err
}

// domainOf is the ASCII domain of an address, "" when it does not parse.
func domainOf(email string) string {
	return address.NewInput(email).ASCIIDomain()
}
