package jobs

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of batch jobs and webhooks (README.md lists them with their
// meaning).
var (
	jobsCreated    = metrics.NewCounter("verifyd_jobs_created_total")
	jobsResumed    = metrics.NewCounter("verifyd_jobs_resumed_total")
	jobsCompleted  = metrics.NewCounter(`verifyd_jobs_finished_total{status="completed"}`)
	jobsFailed     = metrics.NewCounter(`verifyd_jobs_finished_total{status="failed"}`)
	addrsProcessed = metrics.NewCounter("verifyd_jobs_addresses_processed_total")
	greyDeferrals  = metrics.NewCounter("verifyd_jobs_greylist_deferrals_total")
	dnsDeferrals   = metrics.NewCounter("verifyd_jobs_dns_retries_total")
	windowExpired  = metrics.NewCounter("verifyd_jobs_retry_window_expired_total")
	groupsRun      = metrics.NewCounter("verifyd_jobs_groups_total")
	// slicesGivenBack counts the job slices a box of a fleet held but did
	// not work on, and gave back (scheduler.giveBack).
	slicesGivenBack = metrics.NewCounter("verifyd_jobs_slices_given_back_total")
	// jobsPausedDiskFull and jobsPausedStoreAway count the jobs paused
	// because the store refused their writes for a full disk, or could
	// not be reached (scheduler.storeAway).
	jobsPausedDiskFull  = metrics.NewCounter(`verifyd_jobs_paused_total{reason="disk_full"}`)
	jobsPausedStoreAway = metrics.NewCounter(`verifyd_jobs_paused_total{reason="store_unavailable"}`)
	// jobsGivenUp counts the jobs of a fleet this box left after it
	// could not store their results for a while (scheduler.giveBack).
	jobsGivenUp    = metrics.NewCounter("verifyd_jobs_given_up_total")
	groupErrors    = metrics.NewCounter("verifyd_jobs_group_errors_total")
	groupDuration  = metrics.NewHistogram("verifyd_jobs_group_duration_seconds")
	resultWrites   = metrics.NewCounter("verifyd_jobs_result_writes_total")
	resultWriteErr = metrics.NewCounter("verifyd_jobs_result_write_errors_total")
	csvDownloads   = metrics.NewCounter("verifyd_jobs_csv_downloads_total")
	csvRows        = metrics.NewCounter("verifyd_jobs_csv_rows_total")
	csvRefused     = metrics.NewCounter("verifyd_jobs_csv_downloads_refused_total")
	csvActive      = metrics.NewGauge("verifyd_jobs_csv_downloads_active", nil)

	hooksEnqueued = map[string]*metrics.Counter{
		EventBatchCompleted:    metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="batch.completed"}`),
		EventBatchFailed:       metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="batch.failed"}`),
		EventReputationWarning: metrics.NewCounter(`verifyd_webhooks_enqueued_total{event="reputation.warning"}`),
	}
	hooksDelivered   = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="delivered"}`)
	hooksFailed      = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="failed"}`)
	hooksRefused     = metrics.NewCounter(`verifyd_webhooks_attempts_total{outcome="refused"}`)
	hooksDead        = metrics.NewCounter("verifyd_webhooks_dead_lettered_total")
	hooksDuration    = metrics.NewHistogram("verifyd_webhooks_attempt_duration_seconds")
	ssrfAtPost       = metrics.NewCounter(`verifyd_webhooks_ssrf_refused_total{stage="post"}`)
	ssrfAtDelivery   = metrics.NewCounter(`verifyd_webhooks_ssrf_refused_total{stage="delivery"}`)
	hooksTestEvents  = metrics.NewCounter("verifyd_webhooks_test_events_total")
	hooksRedriven    = metrics.NewCounter("verifyd_webhooks_resent_total")
	reputationEvents = metrics.NewCounter("verifyd_webhooks_reputation_signals_total")
)

// current is the Service the gauges report: the last one started.
var current atomic.Pointer[Service]

func gauge(name string, f func(*Service) float64) {
	metrics.NewGauge(name, func() float64 {
		if s := current.Load(); s != nil {
			return f(s)
		}
		return 0
	})
}

func init() {
	gauge("verifyd_jobs_active", func(s *Service) float64 { return float64(s.stats().jobs) })
	gauge("verifyd_jobs_groups_inflight", func(s *Service) float64 { return float64(s.stats().inflight) })
	gauge("verifyd_jobs_addresses_queued", func(s *Service) float64 { return float64(s.stats().queued) })
	gauge("verifyd_jobs_addresses_deferred", func(s *Service) float64 { return float64(s.stats().deferred) })
	gauge("verifyd_webhooks_deliveries_inflight", func(s *Service) float64 { return float64(s.hooks.inflightCount()) })
}
