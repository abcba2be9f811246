package authsig

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics of the collector and the domain-age lookups (names
// verifyd_authsig_<what>_<unit>):
//
//	verifyd_authsig_collections_total{source}             collections by where the signals came from:
//	                                                       "cache", "joined" (a flight under way), "lookup"
//	verifyd_authsig_collection_duration_seconds           time of one collection's lookups
//	verifyd_authsig_collection_wait_seconds               time a collection waited for its turn
//	verifyd_authsig_collections_running                   collections running their lookups
//	verifyd_authsig_collections_queued                    collections waiting for their turn
//	verifyd_authsig_lookup_failures_total                 lookups that failed (keys left out)
//	verifyd_authsig_refreshes_total                       background collections begun by a hit in the last
//	                                                       tenth of the signals' cache time (Refresh)
//	verifyd_authsig_dkim_selectors_skipped_total          collections whose DKIM selectors were not asked:
//	                                                       _domainkey.<domain> is NXDOMAIN (RFC 8020)
//	verifyd_authsig_domain_age_lookups_total{source,outcome}
//	                                                       registration-date lookups: source "rdap" or
//	                                                       "whois", outcome "found", "not_found", "error"
//	verifyd_authsig_domain_age_dropped_total              background lookups dropped (queue full)
var (
	collectionsCached  = metrics.NewCounter(`verifyd_authsig_collections_total{source="cache"}`)
	collectionsJoined  = metrics.NewCounter(`verifyd_authsig_collections_total{source="joined"}`)
	collectionsRun     = metrics.NewCounter(`verifyd_authsig_collections_total{source="lookup"}`)
	refreshes          = metrics.NewCounter(`verifyd_authsig_refreshes_total`)
	collectionDuration = metrics.NewHistogram(`verifyd_authsig_collection_duration_seconds`)
	collectionWait     = metrics.NewHistogram(`verifyd_authsig_collection_wait_seconds`)
	lookupFailures     = metrics.NewCounter(`verifyd_authsig_lookup_failures_total`)
	dkimSkipped        = metrics.NewCounter(`verifyd_authsig_dkim_selectors_skipped_total`)
	ageDropped         = metrics.NewCounter(`verifyd_authsig_domain_age_dropped_total`)

	ageLookups = map[[2]string]*metrics.Counter{}

	// collectionsRunning and collectionsQueued are every Collector's.
	collectionsRunning atomic.Int64
	collectionsQueued  atomic.Int64
	_                  = metrics.NewGauge(`verifyd_authsig_collections_running`, func() float64 {
		return float64(collectionsRunning.Load())
	})
	_ = metrics.NewGauge(`verifyd_authsig_collections_queued`, func() float64 {
		return float64(collectionsQueued.Load())
	})
)

func init() {
	for _, src := range []string{"rdap", "whois"} {
		for _, out := range []string{"found", "not_found", "error"} {
			ageLookups[[2]string{src, out}] = metrics.NewCounter(
				`verifyd_authsig_domain_age_lookups_total{source="` + src + `",outcome="` + out + `"}`)
		}
	}
}

func countAgeLookup(source, outcome string) {
	if c := ageLookups[[2]string{source, outcome}]; c != nil {
		c.Inc()
	}
}
