package admin

import "github.com/VictoriaMetrics/metrics"

// Metrics of the package; README.md lists them. Requests are counted by
// status class only: the admin API sees a handful of requests a day.
var (
	requests2xx = metrics.NewCounter(`verifyd_admin_requests_total{class="2xx"}`)
	requests4xx = metrics.NewCounter(`verifyd_admin_requests_total{class="4xx"}`)
	requests5xx = metrics.NewCounter(`verifyd_admin_requests_total{class="5xx"}`)

	accountsCreated  = metrics.NewCounter(`verifyd_admin_accounts_created_total`)
	keysMinted       = metrics.NewCounter(`verifyd_admin_keys_minted_total`)
	keysRevoked      = metrics.NewCounter(`verifyd_admin_keys_revoked_total`)
	webhookRotations = metrics.NewCounter(`verifyd_admin_webhook_secret_rotations_total`)
	signingRotations = metrics.NewCounter(`verifyd_admin_signing_key_rotations_total`)
)

func countRequest(status int) {
	switch {
	case status >= 500:
		requests5xx.Inc()
	case status >= 400:
		requests4xx.Inc()
	default:
		requests2xx.Inc()
	}
}
