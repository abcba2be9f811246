package lists

import "github.com/VictoriaMetrics/metrics"

// Metrics of the lists stage. The lookups themselves are not counted here:
// they run on every probe and the engine's verdict metrics already say how
// often each flag was raised.
var (
	reloadsOK    = metrics.NewCounter(`verifyd_lists_reloads_total{result="ok"}`)
	reloadErrors = metrics.NewCounter(`verifyd_lists_reloads_total{result="error"}`)

	entryGauges = [len(names)]*metrics.Gauge{
		metrics.NewGauge(`verifyd_lists_entries{list="disposable"}`, nil),
		metrics.NewGauge(`verifyd_lists_entries{list="free"}`, nil),
		metrics.NewGauge(`verifyd_lists_entries{list="role"}`, nil),
		metrics.NewGauge(`verifyd_lists_entries{list="spamtrap"}`, nil),
	}
)

// setEntryGauges publishes the entry counts of the lists a [Store] serves.
func setEntryGauges(l *Lists) {
	for i, g := range entryGauges {
		g.Set(float64(l.counts[i]))
	}
}
