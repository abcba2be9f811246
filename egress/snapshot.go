package egress

import (
	"net/netip"
	"slices"
	"time"
)

// AddrStatus is the state of one pool address, for `verifyctl egress list`
// and the admin API.
type AddrStatus struct {
	// Addr is the address; the zero Addr (JSON "") is the system address.
	Addr netip.Addr `json:"addr"`
	// HeloName is the name its sessions say in EHLO, and HeloSource where
	// it comes from: config, global, ptr or default (helo.go).
	HeloName   string `json:"helo_name"`
	HeloSource string `json:"helo_source"`
	// InFlight is the number of leases out.
	InFlight int `json:"in_flight"`
	// Sessions is the number of leases ever granted, and Outcomes their
	// ends by outcome (only those seen); both survive restarts.
	Sessions uint64             `json:"sessions"`
	Outcomes map[Outcome]uint64 `json:"outcomes"`
	// Recent are the last outcomes (up to 32), oldest first.
	Recent []Recent `json:"recent"`
	// Cooldowns are the destinations the address is cooling for, soonest
	// end first.
	Cooldowns []Cooldown `json:"cooldowns"`
	// PolicyBlocks counts the policy blocks within the last
	// PolicyBlockWindow (to within a tenth of it).
	PolicyBlocks int `json:"policy_blocks"`
	// Draining: removed by SetAddresses, waiting for its sessions to end.
	Draining bool `json:"draining"`
	// Disabled: out of rotation since DisabledAt, for DisabledReason.
	Disabled       bool      `json:"disabled"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	// Findings are what the last self-check found wrong (empty: it
	// passed), at CheckedAt (zero: not checked since start).
	Findings  []string  `json:"findings"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// Recent is one outcome of an address.
type Recent struct {
	At      time.Time  `json:"at"`
	Dest    netip.Addr `json:"dest"`
	Outcome Outcome    `json:"outcome"`
}

// Cooldown is one cooling pair, seen from its address.
type Cooldown struct {
	Dest  netip.Addr `json:"dest"`
	Until time.Time  `json:"until"`
	// Repeats is the number of cooldowns in a row, this one included.
	Repeats int `json:"repeats"`
	// Cause is what started it: greylisted, rate_limited or policy.
	Cause Outcome `json:"cause"`
}

// Snapshot returns the state of every address of the pool, in configured
// order, draining ones last. It walks every destination: it is meant for
// operators, not for the session path.
func (p *Pool) Snapshot() []AddrStatus {
	now := p.now()
	srcs := *p.sources.Load()
	cool := make(map[netip.Addr][]Cooldown, len(srcs))
	p.eachDest(func(dest netip.Addr, ds *destState) bool {
		for _, pr := range ds.pairs {
			if pr.until.After(now) {
				cool[pr.addr] = append(cool[pr.addr], Cooldown{Dest: dest, Until: pr.until, Repeats: pr.repeats, Cause: pr.cause})
			}
		}
		return false
	})
	out := make([]AddrStatus, 0, len(srcs))
	for _, s := range srcs {
		st := AddrStatus{
			Addr:      s.addr,
			InFlight:  int(s.inflight.Load()),
			Sessions:  s.sessions.Load(),
			Outcomes:  make(map[Outcome]uint64),
			Cooldowns: cool[s.addr],
			Draining:  s.draining.Load(),
			Disabled:  s.disabled.Load(),
		}
		st.HeloName, st.HeloSource = p.HeloName(s.addr)
		for o := range s.totals {
			if n := s.totals[o].Load(); n > 0 {
				st.Outcomes[Outcome(o)] = n
			}
		}
		slices.SortFunc(st.Cooldowns, func(a, b Cooldown) int { return a.Until.Compare(b.Until) })
		s.mu.Lock()
		n := min(s.nrecent, recentLen)
		st.Recent = make([]Recent, 0, n)
		for i := s.nrecent - n; i < s.nrecent; i++ {
			st.Recent = append(st.Recent, s.recent[i%recentLen])
		}
		_, blocked := s.rep.totals(now, p.started, p.opts.PolicyBlockWindow)
		st.PolicyBlocks = int(blocked)
		if st.Disabled {
			st.DisabledReason, st.DisabledAt = s.reason, s.disabledAt
		}
		st.Findings, st.CheckedAt = slices.Clone(s.findings), s.checkedAt
		if st.Findings == nil {
			st.Findings = []string{}
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}
