package web

import (
	"github.com/VictoriaMetrics/metrics"
	"github.com/verifyd/verifyd/server/httpapi"
)

// Metrics of the account surface (README.md lists them with the rest):
//
//	verifyd_auth_logins_total{result="ok|failed|throttled"}   sign-in attempts
//	verifyd_auth_registrations_total{mode="invite|open"}      users registered
//	verifyd_auth_rate_limited_total{endpoint}                 spec §8's per-IP limits tripped
//	verifyd_auth_csrf_refused_total                           writes refused as cross-site or without their token
//	verifyd_auth_sessions_started_total                       sessions started (login, register, password change)
//	verifyd_auth_password_changes_total                       passwords changed (every session of the user ended)
//
// The pages and JSON routes are counted by route and status with the
// API's verifyd_http_requests_total.
var (
	loginsOK        = metrics.NewCounter(`verifyd_auth_logins_total{result="ok"}`)
	loginsFailed    = metrics.NewCounter(`verifyd_auth_logins_total{result="failed"}`)
	loginsThrottled = metrics.NewCounter(`verifyd_auth_logins_total{result="throttled"}`)
	csrfRefusals    = metrics.NewCounter(`verifyd_auth_csrf_refused_total`)
	sessionsStarted = metrics.NewCounter(`verifyd_auth_sessions_started_total`)
	passwordChanges = metrics.NewCounter(`verifyd_auth_password_changes_total`)
)

func registrations(mode string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_auth_registrations_total{mode="` + mode + `"}`)
}

func rateLimited(endpoint string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`verifyd_auth_rate_limited_total{endpoint="` + endpoint + `"}`)
}

// csrfRefused is the 403 of a write refused as cross-site, counted.
func csrfRefused(msg string) *httpapi.APIError {
	csrfRefusals.Inc()
	return forbidden(msg, "csrf")
}
