package pebble

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/verifyd/verifyd/storage"
)

// Metrics of the package, shared by every DB of the process. README.md lists
// them. Pebble's own metrics (levels, compactions, cache, WAL) come from
// DB.Metrics and are exported by the metrics exporter.

var (
	syncCommits   = metrics.NewCounter(`verifyd_storage_commits_total{sync="true"}`)
	noSyncCommits = metrics.NewCounter(`verifyd_storage_commits_total{sync="false"}`)
	syncDuration  = metrics.NewHistogram(`verifyd_storage_sync_commit_duration_seconds`)
	// syncQuantiles are the same commits' quantiles over the last five
	// minutes, for Prometheus, which cannot take a quantile of the
	// histogram's vmrange buckets (monitoring/verifyd.rules.yml alerts on
	// the p99).
	syncQuantiles = metrics.NewSummaryExt(`verifyd_storage_sync_commit_seconds`, 5*time.Minute, []float64{0.5, 0.99})

	insufficientCredits = metrics.NewCounter(`verifyd_storage_insufficient_credits_total`)
	staleHoldsReleased  = metrics.NewCounter(`verifyd_storage_stale_holds_released_total`)
	idemPurged          = metrics.NewCounter(`verifyd_storage_idem_purged_total`)
	cacheHits           = metrics.NewCounter(`verifyd_storage_cache_lookups_total{result="hit"}`)
	cacheMisses         = metrics.NewCounter(`verifyd_storage_cache_lookups_total{result="miss"}`)
	memoHits            = metrics.NewCounter(`verifyd_storage_cache_memo_hits_total`)
	// verdictKeysSkipped counts the cache hits that wrote no verdict
	// index key (lastVerdicts).
	verdictKeysSkipped = metrics.NewCounter(`verifyd_storage_verdict_keys_skipped_total`)
	memoBytes          = metrics.NewGauge(`verifyd_storage_cache_memo_bytes`, nil)

	// The disk space guard (space.go).
	diskFree      = metrics.NewGauge(`verifyd_storage_disk_free_bytes`, nil)
	diskLow       = metrics.NewGauge(`verifyd_storage_disk_low`, nil)
	writesRefused = metrics.NewCounter(`verifyd_storage_writes_refused_total{reason="disk_full"}`)
)

// ledgerEntries[kind] counts verifyd_storage_ledger_entries_total.
var ledgerEntries = func() []*metrics.Counter {
	cs := make([]*metrics.Counter, storage.EntryRefund+1)
	for k := storage.EntryAdd; k <= storage.EntryRefund; k++ {
		cs[k] = metrics.NewCounter(fmt.Sprintf(`verifyd_storage_ledger_entries_total{kind=%q}`, k.String()))
	}
	return cs
}()

// idemOutcomes[outcome] counts verifyd_storage_idem_begins_total.
var idemOutcomes = func() []*metrics.Counter {
	cs := make([]*metrics.Counter, storage.IdemMismatch+1)
	for o := storage.IdemNew; o <= storage.IdemMismatch; o++ {
		cs[o] = metrics.NewCounter(fmt.Sprintf(`verifyd_storage_idem_begins_total{outcome=%q}`, o.String()))
	}
	return cs
}()

func countCommit(sync bool, d time.Duration) {
	if sync {
		syncCommits.Inc()
		syncDuration.Update(d.Seconds())
		syncQuantiles.Update(d.Seconds())
	} else {
		noSyncCommits.Inc()
	}
}

func countEntries(es []storage.Entry) {
	for _, e := range es {
		if int(e.Kind) < len(ledgerEntries) && ledgerEntries[e.Kind] != nil {
			ledgerEntries[e.Kind].Inc()
		}
	}
}
