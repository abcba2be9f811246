package resolver

import (
	"fmt"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/miekg/dns"
)

// Metrics of the package, shared by every Resolver of the process. README.md
// lists them. Label sets are bounded: type is one of metricTypes or
// "OTHER", result one of the Status names, upstream one of the configured
// upstreams.

var (
	cacheHits      = metrics.NewCounter(`verifyd_resolver_cache_hits_total`)
	cacheMisses    = metrics.NewCounter(`verifyd_resolver_cache_misses_total`)
	cacheEvictions = metrics.NewCounter(`verifyd_resolver_cache_evictions_total`)
	inflightJoins  = metrics.NewCounter(`verifyd_resolver_inflight_joins_total`)
	staleAnswers   = metrics.NewCounter(`verifyd_resolver_stale_answers_total`)
	prefetches     = metrics.NewCounter(`verifyd_resolver_prefetches_total`)
	tcpFallbacks   = metrics.NewCounter(`verifyd_resolver_tcp_fallbacks_total`)
	udpMismatches  = metrics.NewCounter(`verifyd_resolver_udp_mismatched_replies_total`)

	queueWaits = metrics.NewCounter(`verifyd_resolver_queries_queued_total`)

	// workersRunning and queriesQueued are every Resolver's worker pool:
	// workers started (busy or idle), queries waiting for one.
	workersRunning atomic.Int64
	queriesQueued  atomic.Int64
	_              = metrics.NewGauge(`verifyd_resolver_workers`, func() float64 {
		return float64(workersRunning.Load())
	})
	_ = metrics.NewGauge(`verifyd_resolver_queries_queued`, func() float64 {
		return float64(queriesQueued.Load())
	})

	// cacheEntries counts the entries of every Resolver's cache.
	cacheEntries atomic.Int64
	_            = metrics.NewGauge(`verifyd_resolver_cache_entries`, func() float64 {
		return float64(cacheEntries.Load())
	})
)

// metricTypes are the query types with a label value of their own.
var metricTypes = []uint16{
	dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypePTR, dns.TypeTLSA,
	dns.TypeCAA, dns.TypeCNAME, dns.TypeNS, dns.TypeSOA, dns.TypeSRV,
}

// queryCounters[typeIndex][status] counts verifyd_resolver_queries_total;
// the last type row is "OTHER".
var queryCounters = func() [][len(statusNames)]*metrics.Counter {
	rows := make([][len(statusNames)]*metrics.Counter, len(metricTypes)+1)
	for i := range rows {
		t := "OTHER"
		if i < len(metricTypes) {
			t = dns.TypeToString[metricTypes[i]]
		}
		for s := range statusNames {
			rows[i][s] = metrics.NewCounter(fmt.Sprintf(`verifyd_resolver_queries_total{type=%q,result=%q}`, t, statusNames[s]))
		}
	}
	return rows
}()

// countQuery counts one lookup of qtype that ended in status.
func countQuery(qtype uint16, status Status) {
	i := len(metricTypes)
	for j, t := range metricTypes {
		if t == qtype {
			i = j
			break
		}
	}
	queryCounters[i][status].Inc()
}

// Upstream results, the values of the result label of
// verifyd_resolver_upstream_queries_total.
const (
	upOK        = iota // NOERROR or NXDOMAIN
	upServFail         // SERVFAIL
	upRefused          // REFUSED
	upRcode            // any other error rcode
	upTimeout          // no reply in time
	upNetError         // network error (refused connection, unreachable, ...)
	upMalformed        // a reply that does not unpack
	numUpResults
)

var upResultNames = [numUpResults]string{"ok", "servfail", "refused", "rcode", "timeout", "neterror", "malformed"}

// upstreamMetrics are the metrics of one upstream address.
type upstreamMetrics struct {
	results  [numUpResults]*metrics.Counter
	duration *metrics.Histogram
	down     *metrics.Counter
}

func newUpstreamMetrics(addr string) *upstreamMetrics {
	m := &upstreamMetrics{
		duration: metrics.GetOrCreateHistogram(fmt.Sprintf(`verifyd_resolver_upstream_duration_seconds{upstream=%q}`, addr)),
		down:     metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_resolver_upstream_down_total{upstream=%q}`, addr)),
	}
	for i, n := range upResultNames {
		m.results[i] = metrics.GetOrCreateCounter(fmt.Sprintf(`verifyd_resolver_upstream_queries_total{upstream=%q,result=%q}`, addr, n))
	}
	return m
}
