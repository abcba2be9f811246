package server

import (
	"github.com/VictoriaMetrics/metrics"
)

// Metrics of the /v1 handlers (those of every request, counts and
// latencies per route and idempotent replays, are httpapi's):
//
//	verifyd_credits_charged_total                   credits charged by validations
//	verifyd_http_validate_overhead_seconds          a fresh validation's time less the engine's
//	verifyd_jobs_created_total                      jobs POST /v1/batch created
//	verifyd_jobs_csv_downloads_total                results.csv downloads started
//	verifyd_jobs_csv_rows_total                     results.csv rows sent
//	verifyd_jobs_csv_downloads_refused_total        downloads refused over a cap (429)
//	verifyd_jobs_csv_downloads_active               downloads streaming now
var (
	jobsCreated  = metrics.NewCounter("verifyd_jobs_created_total")
	csvDownloads = metrics.NewCounter("verifyd_jobs_csv_downloads_total")
	csvRows      = metrics.NewCounter("verifyd_jobs_csv_rows_total")
	csvRefused   = metrics.NewCounter("verifyd_jobs_csv_downloads_refused_total")
	csvActive    = metrics.NewGauge("verifyd_jobs_csv_downloads_active", nil)

	creditsCharged = metrics.NewCounter("verifyd_credits_charged_total")
	// validateOverhead is what the API adds to the engine's time for a
	// fresh validation answered 200: from the handler's start to the
	// response being ready, less the engine's own time (auth, limits,
	// idempotency, the hold, the real-time pool's queue, signing and the
	// synced charge).
	validateOverhead = metrics.NewHistogram("verifyd_http_validate_overhead_seconds")
)
