package webhook

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of webhook delivery (README.md lists them with their meaning).
var (
	hooksEnqueued = map[string]*metrics.Counter{
		EventBatchCompleted:    metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="batch.completed"}`),
		EventBatchFailed:       metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="batch.failed"}`),
		EventReputationWarning: metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="reputation.warning"}`),
	}
	hooksDelivered  = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="delivered"}`)
	hooksFailed     = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="failed"}`)
	hooksRefused    = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="refused"}`)
	hooksDead       = metrics.NewCounter("verifyd_webhooks_dead_lettered_total")
	hooksDuration   = metrics.NewHistogram("verifyd_webhooks_attempt_duration_seconds")
	ssrfAtPost      = metrics.NewCounter(`verifyd_webhooks_ssrf_refused_total{stage="post"}`)
	ssrfAtDelivery  = metrics.NewCounter(`verifyd_webhooks_ssrf_refused_total{stage="delivery"}`)
	hooksTestEvents = metrics.NewCounter("verifyd_webhooks_test_events_total")
	hooksRedriven   = metrics.NewCounter("verifyd_webhooks_resent_total")
)

// Enqueued counts an event of type typ written to the outbox (by the batch
// scheduler, with the job's end or a reputation warning).
func Enqueued(typ string) {
	if c := hooksEnqueued[typ]; c != nil {
		c.Inc()
	}
}

// current is the Dispatcher the gauge reports: the last one started.
var current atomic.Pointer[Dispatcher]

func init() {
	metrics.NewGauge("verifyd_webhooks_deliveries_inflight", func() float64 {
		if d := current.Load(); d != nil {
			return float64(d.inflightCount())
		}
		return 0
	})
}
