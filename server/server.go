// Package server is verifyd's HTTP side: the public API of spec §4 on
// fasthttp and fasthttp/router, with the error envelope of spec §7 on every
// non-2xx answer (unknown paths, wrong methods, oversized bodies and panics
// included).
//
// A request to a /v1 route flows (auth.go):
//
//	per-IP window → Bearer key → scope → per-plan rate → handler
//
// and POST /v1/validate then (validate.go): Idempotency-Key → strict body
// decoding → cache lookup or credit hold → engine on the real-time pool →
// one synced write of the charge, the result, its history row, the cache
// entry and the idempotent response → the signed receipt.
//
// Nothing from a *fasthttp.RequestCtx outlives its handler: what the engine
// needs is copied, and it runs under its own context.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// Verifier runs single validations (probe.Pools in verifyd).
type Verifier interface {
	Verify(ctx context.Context, email string) (*probe.Result, error)
}

// Options configures a Server.
type Options struct {
	DB       *storage.DB
	Keys     *receipt.KeySet
	Verifier Verifier

	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// MaxBodyBytes is the largest body of POST /v1/batch; MaxSmallBody
	// that of every other request. Larger ones answer 400.
	MaxBodyBytes int
	MaxSmallBody int
	// RealtimeBudget bounds one single validation.
	RealtimeBudget time.Duration
	// CacheMaxAge is how old a result cache: true may reuse.
	CacheMaxAge time.Duration
	// IPLimits are the per source IP limits per route class (spec §8);
	// IPLimitsDisabled turns them off.
	IPLimits         [numRoutes]Limit
	IPLimitsDisabled bool
	// TrustedProxies may name the client in X-Forwarded-For.
	TrustedProxies []netip.Prefix
	Now            func() time.Time
	Logger         *slog.Logger
	// Ready reports whether verifyd can serve; /healthz answers 503 while
	// it is false. Nil means always ready.
	Ready func() bool
}

// DefaultIPLimits are spec §8's per-endpoint limits.
func DefaultIPLimits(window time.Duration, validate, batch, results, other int) [numRoutes]Limit {
	return [numRoutes]Limit{
		routeValidate: {validate, window},
		routeBatch:    {batch, window},
		routeResults:  {results, window},
		routeOther:    {other, window},
	}
}

// Server is the public API server.
type Server struct {
	opts      Options
	log       *slog.Logger
	db        *storage.DB
	srv       *fasthttp.Server
	ipLimits  *limiter
	keyLimits *limiter
	router    *router.Router
	// ipConf is the per-IP limits in force; SetIPLimits swaps it on reload.
	ipConf atomic.Pointer[ipLimitConf]
}

type ipLimitConf struct {
	limits   [numRoutes]Limit
	disabled bool
}

// SetIPLimits changes the per source IP limits (a reload). Windows already
// counted keep their counts.
func (s *Server) SetIPLimits(l [numRoutes]Limit, disabled bool) {
	s.ipConf.Store(&ipLimitConf{limits: l, disabled: disabled})
}

// New returns a Server with its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSmallBody == 0 {
		opts.MaxSmallBody = 64 << 10
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.RealtimeBudget == 0 {
		opts.RealtimeBudget = 15 * time.Second
	}
	if opts.CacheMaxAge == 0 {
		opts.CacheMaxAge = 24 * time.Hour
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger.With("pkg", "server"),
		db:        opts.DB,
		ipLimits:  newLimiter(opts.Now),
		keyLimits: newLimiter(opts.Now),
	}
	s.SetIPLimits(opts.IPLimits, opts.IPLimitsDisabled)
	r := router.New()
	r.GET("/healthz", s.healthz)
	if opts.DB != nil {
		r.GET("/.well-known/jwks.json", s.jwks)
		r.GET("/v1/keys", s.jwks)
		r.POST("/v1/validate", s.guard(routeValidate, ScopeWrite, s.validate))
		r.GET("/v1/balance", s.guard(routeOther, ScopeRead, s.balance))
		r.GET("/v1/results", s.guard(routeResults, ScopeRead, s.results))
	}
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, &APIError{Code: CodeNotFound, Message: fmt.Sprintf("no such endpoint: %s", ctx.Path())})
	}
	r.HandleMethodNotAllowed = true
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		// The spec's enumeration has no 405 code; the closest is a bad
		// request. Allow still names the methods the path takes.
		writeError(ctx, &APIError{Code: CodeBadRequest, Message: fmt.Sprintf("method %s is not allowed on %s", ctx.Method(), ctx.Path())})
	}
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		s.log.Error("handler panicked", "path", string(ctx.Path()), "panic", fmt.Sprint(v))
		writeError(ctx, &APIError{Code: CodeInternal, Message: "internal error; safe to retry with the same Idempotency-Key"})
	}
	s.router = r
	s.srv = &fasthttp.Server{
		Handler:            s.observe(r.Handler),
		Name:               "verifyd",
		ReadTimeout:        opts.ReadTimeout,
		WriteTimeout:       opts.WriteTimeout,
		IdleTimeout:        opts.IdleTimeout,
		MaxRequestBodySize: opts.MaxBodyBytes,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			// fasthttp calls this for requests it could not read: bodies
			// over the limit, malformed heads, read timeouts.
			msg := "malformed request"
			if err == fasthttp.ErrBodyTooLarge {
				msg = fmt.Sprintf("request body exceeds %d bytes", opts.MaxBodyBytes)
			}
			writeError(ctx, &APIError{Code: CodeBadRequest, Message: msg})
		},
		Logger: fasthttpLogger{s.log},
	}
	return s
}

// Router returns the router, for routes added by other parts of verifyd
// (batch jobs).
func (s *Server) Router() *router.Router { return s.router }

// Guard exposes the authentication and limits chain to routes added with
// Router. cls is "validate", "batch", "results" or "other".
func (s *Server) Guard(cls string, scope string, h func(ctx *fasthttp.RequestCtx, account string)) fasthttp.RequestHandler {
	r := routeOther
	for i, n := range routeNames {
		if n == cls {
			r = route(i)
		}
	}
	return s.guard(r, scope, func(ctx *fasthttp.RequestCtx, c *caller) { h(ctx, c.account) })
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	if s.opts.Ready != nil && !s.opts.Ready() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"starting"}`)
		return
	}
	ctx.SetBodyString(`{"status":"ok"}`)
}

// jwks serves the public keys of the receipts' signatures (DESIGN.md):
// alg Ed25519 (RFC 9864), or EdDSA with ?alg=EdDSA for older clients.
func (s *Server) jwks(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/jwk-set+json")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	if string(ctx.QueryArgs().Peek("alg")) == "EdDSA" {
		ctx.SetBody(s.opts.Keys.JWKSLegacy())
		return
	}
	ctx.SetBody(s.opts.Keys.JWKS())
}

// internal answers 500 for an unexpected error, logged but not shown.
func (s *Server) internal(ctx *fasthttp.RequestCtx, what string, err error) {
	s.reqLog(ctx).Error("internal error", "what", what, "err", err, "path", string(ctx.Path()))
	writeError(ctx, &APIError{Code: CodeInternal, Message: "internal error; safe to retry with the same Idempotency-Key"})
}

// Serve serves the API on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting, waits for in-flight requests until ctx ends, and
// closes idle connections.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.ShutdownWithContext(ctx) }

// fasthttpLogger sends fasthttp's own messages to slog at debug level.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}

// reqLog is the logger of one request: every line carries its id.
func (s *Server) reqLog(ctx *fasthttp.RequestCtx) *slog.Logger {
	return s.log.With("request_id", requestID(ctx))
}
