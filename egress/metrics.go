package egress

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of the package, shared by every Pool of the process. README.md
// lists them. Label sets are bounded: addr is a pool address (or "system"),
// outcome one of the Outcome names, reason one of the three cooling
// outcomes. Destinations are never a label.

var (
	acquireWait = metrics.NewHistogram(`verifyd_egress_acquire_wait_seconds`)
	allCooling  = metrics.NewCounter(`verifyd_egress_all_cooling_total`)
	noAddress   = metrics.NewCounter(`verifyd_egress_no_address_total`)

	// The self-check's (selfcheck.go).
	selfCheckRuns     = metrics.NewCounter(`verifyd_egress_selfcheck_runs_total`)
	selfCheckFailing  = metrics.NewCounter(`verifyd_egress_selfcheck_failures_total`)
	selfCheckDisabled = metrics.NewCounter(`verifyd_egress_selfcheck_disabled_total`)

	// activeCooldowns is the sum over pools of the cooling pairs each
	// counted at its last sweep.
	activeCooldowns atomic.Int64
	_               = metrics.NewGauge(`verifyd_egress_cooldowns_active`, func() float64 {
		return float64(activeCooldowns.Load())
	})
)

// addrMetrics are the metrics of one pool address. A source that leaves
// the pool and comes back gets the same ones.
type addrMetrics struct {
	sessions  *metrics.Counter
	inflight  *metrics.Gauge
	outcomes  [numOutcomes]*metrics.Counter
	cooldowns [numOutcomes]*metrics.Counter // only the cooling outcomes are set
	disabled  *metrics.Gauge
	// reputation counts the reputation warnings the address earned.
	reputation *metrics.Counter
}

var (
	addrMetricsMu  sync.Mutex
	addrMetricsMap = map[netip.Addr]*addrMetrics{}
)

// metricsFor returns the metrics of pool address a.
func metricsFor(a netip.Addr) *addrMetrics {
	addrMetricsMu.Lock()
	defer addrMetricsMu.Unlock()
	if m := addrMetricsMap[a]; m != nil {
		return m
	}
	l := addrLabel(a)
	m := &addrMetrics{
		sessions:   metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_egress_sessions_total{addr=%q}`, l)),
		inflight:   metrics.GetOrCreateGauge(fmt.Sprintf(`verifyd_egress_inflight_sessions{addr=%q}`, l), nil),
		disabled:   metrics.GetOrCreateGauge(fmt.Sprintf(`verifyd_egress_address_disabled{addr=%q}`, l), nil),
		reputation: metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_egress_reputation_warnings_total{addr=%q}`, l)),
	}
	for o := range Outcome(numOutcomes) {
		m.outcomes[o] = metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_egress_outcomes_total{addr=%q,outcome=%q}`, l, o))
		if o.cools() {
			m.cooldowns[o] = metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_egress_cooldowns_total{addr=%q,reason=%q}`, l, o))
		}
	}
	addrMetricsMap[a] = m
	return m
}

// addrLabel is the value of the addr label, and the name of a in logs.
func addrLabel(a netip.Addr) string {
	if !a.IsValid() {
		return "system"
	}
	return a.String()
}
