package batch

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of batch jobs (README.md lists them with their meaning).
var (
	jobsResumed    = metrics.NewCounter("verifyd_jobs_resumed_total")
	jobsCompleted  = metrics.NewCounter(`verifyd_jobs_finished_total{status="completed"}`)
	jobsFailed     = metrics.NewCounter(`verifyd_jobs_finished_total{status="failed"}`)
	addrsProcessed = metrics.NewCounter("verifyd_jobs_addresses_processed_total")
	greyDeferrals  = metrics.NewCounter("verifyd_jobs_greylist_deferrals_total")
	dnsDeferrals   = metrics.NewCounter("verifyd_jobs_dns_retries_total")
	windowExpired  = metrics.NewCounter("verifyd_jobs_retry_window_expired_total")
	groupsRun      = metrics.NewCounter("verifyd_jobs_groups_total")
	// slicesGivenBack counts the job slices a box of a fleet held but did
	// not work on, and gave back (leaser.giveBack).
	slicesGivenBack = metrics.NewCounter("verifyd_jobs_slices_given_back_total")
	// jobsPausedDiskFull and jobsPausedStoreAway count the jobs paused
	// because the store refused their writes for a full disk, or could
	// not be reached (scheduler.storeAway).
	jobsPausedDiskFull  = metrics.NewCounter(`verifyd_jobs_paused_total{reason="disk_full"}`)
	jobsPausedStoreAway = metrics.NewCounter(`verifyd_jobs_paused_total{reason="store_unavailable"}`)
	// jobsGivenUp counts the jobs of a fleet this box left after it
	// could not store their results for a while (leaser.giveBack).
	jobsGivenUp      = metrics.NewCounter("verifyd_jobs_given_up_total")
	groupErrors      = metrics.NewCounter("verifyd_jobs_group_errors_total")
	groupDuration    = metrics.NewHistogram("verifyd_jobs_group_duration_seconds")
	resultWrites     = metrics.NewCounter("verifyd_jobs_result_writes_total")
	resultWriteErr   = metrics.NewCounter("verifyd_jobs_result_write_errors_total")
	reputationEvents = metrics.NewCounter("verifyd_webhooks_reputation_signals_total")
)

// current is the Scheduler the gauges report: the last one started.
var current atomic.Pointer[Scheduler]

func gauge(name string, f func(*Scheduler) float64) {
	metrics.NewGauge(name, func() float64 {
		if s := current.Load(); s != nil {
			return f(s)
		}
		return 0
	})
}

func init() {
	gauge("verifyd_jobs_active", func(s *Scheduler) float64 { return float64(s.stats().jobs) })
	gauge("verifyd_jobs_groups_inflight", func(s *Scheduler) float64 { return float64(s.stats().inflight) })
	gauge("verifyd_jobs_addresses_queued", func(s *Scheduler) float64 { return float64(s.stats().queued) })
	gauge("verifyd_jobs_addresses_deferred", func(s *Scheduler) float64 { return float64(s.stats().deferred) })
}
