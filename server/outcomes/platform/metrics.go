package platform

import "github.com/VictoriaMetrics/metrics"

// The metrics of the platforms' webhooks (README.md lists them). The
// handler counts requests and events; these count what happens inside.
var (
	snsCertHits    = metrics.NewCounter(`verifyd_platform_sns_cert_cache_hits_total`)
	snsURLsRefused = metrics.NewCounter(`verifyd_platform_sns_urls_refused_total`)
	snsConfirmed   = metrics.NewCounter(`verifyd_platform_sns_subscriptions_confirmed_total`)
	mailgunReplays = metrics.NewCounter(`verifyd_platform_mailgun_replays_total`)
)

// snsCertFetches counts the signing certificates fetched, by result:
// ok, error (not fetched), invalid (fetched, not a certificate).
func snsCertFetches(result string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_platform_sns_cert_fetches_total{result="` + result + `"}`)
}
