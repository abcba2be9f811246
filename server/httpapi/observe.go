package httpapi

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// Metrics of every request (names verifyd_http_<what>_<unit>):
//
//	verifyd_http_requests_total{route,status}       requests answered
//	verifyd_http_request_duration_seconds{route}    latency per route
//	verifyd_http_idempotent_replays_total           Idempotent-Replay answers (idem.go)
var (
	reqCounters  sync.Map // route+status → *metrics.Counter
	reqDurations sync.Map // route → *metrics.Histogram
)

// routeLabel names a request's route for metrics without unbounded labels:
// the router's pattern (/v1/jobs/{id}, /dashboard/api/keys/{prefix}/revoke),
// or "other" for a path no route matched.
func routeLabel(ctx *fasthttp.RequestCtx) string {
	if r, ok := ctx.UserValue(router.MatchedRoutePathParam).(string); ok && r != "" {
		return r
	}
	p := string(ctx.Path())
	switch {
	case p == "/v1/validate", p == "/v1/batch", p == "/v1/balance", p == "/v1/results",
		p == "/v1/keys", p == "/.well-known/jwks.json", p == "/healthz", p == "/readyz":
		return p
	case len(p) > 9 && p[:9] == "/v1/jobs/":
		if len(p) > 12 && p[len(p)-12:] == "/results.csv" {
			return "/v1/jobs/{id}/results.csv"
		}
		if len(p) > 16 && p[len(p)-16:] == "/suggestions.csv" {
			return "/v1/jobs/{id}/suggestions.csv"
		}
		return "/v1/jobs/{id}"
	}
	return "other"
}

// Observe counts every request by route and status and times it.
func Observe(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		next(ctx)
		route := routeLabel(ctx)
		status := ctx.Response.StatusCode()
		key := route + " " + strconv.Itoa(status)
		c, ok := reqCounters.Load(key)
		if !ok {
			c, _ = reqCounters.LoadOrStore(key, metrics.GetOrCreateCounter(
				fmt.Sprintf(`verifyd_http_requests_total{route=%q,status="%d"}`, route, status)))
		}
		c.(*metrics.Counter).Inc()
		h, ok := reqDurations.Load(route)
		if !ok {
			h, _ = reqDurations.LoadOrStore(route, metrics.GetOrCreateHistogram(
				fmt.Sprintf(`verifyd_http_request_duration_seconds{route=%q}`, route)))
		}
		h.(*metrics.Histogram).UpdateDuration(start)
	}
}
