package egress

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"
)

// stateVersion is the version of the saved state's format.
const stateVersion = 1

// savedState is the JSON document given to Store.SaveEgressState.
type savedState struct {
	Version   int            `json:"version"`
	SavedAt   time.Time      `json:"saved_at"`
	Addresses []savedAddr    `json:"addresses"`
	Cooldowns []savedCooling `json:"cooldowns"`
}

// savedAddr is the health of one address. Outcomes are keyed by name, so
// a name this version does not know is skipped rather than fatal.
type savedAddr struct {
	Addr       netip.Addr        `json:"addr"` // "" for the system address
	Sessions   uint64            `json:"sessions"`
	Outcomes   map[string]uint64 `json:"outcomes,omitempty"`
	Disabled   bool              `json:"disabled,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	DisabledAt time.Time         `json:"disabled_at,omitzero"`
}

// savedCooling is one cooling pair.
type savedCooling struct {
	Addr    netip.Addr `json:"addr"`
	Dest    netip.Addr `json:"dest"`
	Until   time.Time  `json:"until"`
	Repeats int        `json:"repeats"`
	// Cause is absent in states saved before it was kept: greylisted.
	Cause string `json:"cause,omitempty"`
}

// load restores the state saved in the Store: the health of the addresses
// still in the pool, and their cooldowns that have not yet expired. A Store
// error fails New; a document that does not decode is logged and ignored
// (the state is advisory).
func (p *Pool) load() error {
	if p.opts.Store == nil {
		return nil
	}
	b, err := p.opts.Store.LoadEgressState()
	if err != nil {
		return fmt.Errorf("egress: load state: %w", err)
	}
	if len(b) == 0 {
		return nil
	}
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil || st.Version != stateVersion {
		p.log.Warn("egress state ignored", "err", err, "version", st.Version)
		return nil
	}
	now := p.now()
	for _, a := range st.Addresses {
		s := p.find(a.Addr)
		if s == nil {
			continue
		}
		s.sessions.Store(a.Sessions)
		for name, n := range a.Outcomes {
			if o, ok := parseOutcome(name); ok {
				s.totals[o].Store(n)
			}
		}
		if a.Disabled {
			s.disabled.Store(true)
			s.reason, s.disabledAt = a.Reason, a.DisabledAt
			s.m.disabled.Set(1)
		}
	}
	n := 0
	for _, c := range st.Cooldowns {
		dest := c.Dest.Unmap()
		if !c.Until.After(now) || !dest.IsValid() || p.find(c.Addr) == nil {
			continue
		}
		ds := p.lockDest(dest, now)
		pr := ds.get(c.Addr.Unmap())
		pr.until, pr.repeats = c.Until, c.Repeats
		pr.cause = OutcomeGreylisted
		if o, ok := parseOutcome(c.Cause); ok && o.cools() {
			pr.cause = o
		}
		ds.mu.Unlock()
		n++
	}
	p.log.Info("egress state loaded", "saved_at", st.SavedAt, "cooldowns", n, "dropped", len(st.Cooldowns)-n)
	return nil
}

// encode returns the state as saved: health counters of every address,
// and the pairs cooling at now.
func (p *Pool) encode(now time.Time) ([]byte, error) {
	st := savedState{Version: stateVersion, SavedAt: now, Addresses: []savedAddr{}, Cooldowns: []savedCooling{}}
	for _, s := range *p.sources.Load() {
		a := savedAddr{Addr: s.addr, Sessions: s.sessions.Load(), Outcomes: map[string]uint64{}}
		for o := range s.totals {
			if n := s.totals[o].Load(); n > 0 {
				a.Outcomes[Outcome(o).String()] = n
			}
		}
		s.mu.Lock()
		if s.disabled.Load() {
			a.Disabled, a.Reason, a.DisabledAt = true, s.reason, s.disabledAt
		}
		s.mu.Unlock()
		st.Addresses = append(st.Addresses, a)
	}
	p.eachDest(func(dest netip.Addr, ds *destState) bool {
		for _, pr := range ds.pairs {
			if pr.until.After(now) {
				st.Cooldowns = append(st.Cooldowns, savedCooling{Addr: pr.addr, Dest: dest, Until: pr.until, Repeats: pr.repeats, Cause: pr.cause.String()})
			}
		}
		return false
	})
	return json.Marshal(st)
}

// save writes the state to the Store (when there is one).
func (p *Pool) save() error {
	if p.opts.Store == nil {
		return nil
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.dirty.Store(false)
	b, err := p.encode(p.now())
	if err == nil {
		err = p.opts.Store.SaveEgressState(b)
	}
	if err != nil {
		p.dirty.Store(true)
		return fmt.Errorf("egress: save state: %w", err)
	}
	return nil
}

// loop is the background goroutine: every SaveInterval it runs maintain,
// until Close.
func (p *Pool) loop() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.SaveInterval)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.maintain()
		}
	}
}

// maintain forgets idle destinations, refreshes the active cooldown gauge
// and saves the state if it changed.
func (p *Pool) maintain() {
	n := int64(p.sweep(p.now()))
	p.saveMu.Lock()
	activeCooldowns.Add(n - p.lastCount)
	p.lastCount = n
	p.saveMu.Unlock()
	if p.dirty.Load() {
		if err := p.save(); err != nil {
			p.log.Warn("egress state not saved", "err", err)
		}
	}
}
