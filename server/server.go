// Package server is verifyd's HTTP side: the public API of spec §4 on
// fasthttp and fasthttp/router, with the error envelope of spec §7 on every
// non-2xx answer (unknown paths, wrong methods, oversized bodies and panics
// included).
//
// A request to a /v1 route flows through the HTTP kit (server/httpapi):
//
//	per-IP window → Bearer key or session → scope → per-plan rate → handler
//
// and POST /v1/validate then (validate.go): Idempotency-Key → strict body
// decoding → cache lookup or credit hold → engine on the real-time pool →
// one synced write of the charge, the result, its history row, the cache
// entry and the idempotent response → the signed receipt. POST /v1/batch
// (batch.go) is decoded and written the same way, and handed to the batch
// scheduler (server/batch).
//
// Nothing from a *fasthttp.RequestCtx outlives its handler: what the engine
// needs is copied, and it runs under the request's context
// (httpapi.Context: its deadline is http.request_timeout), within the
// real-time budget.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/conns"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/openapi"
	"github.com/verifyd/verifyd/server/outcomes"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/typos"
)

// Verifier runs single validations (probe.Pools in verifyd).
type Verifier interface {
	Verify(ctx context.Context, in address.Input) (*probe.Result, error)
}

// Options configures a Server.
type Options struct {
	DB       Store
	Keys     *receipt.KeySet
	Verifier Verifier
	// Guard authenticates and limits every /v1 route. Required with DB.
	Guard *httpapi.Guard
	// Batch runs the jobs of POST /v1/batch (server/batch); nil serves
	// no batch routes.
	Batch Scheduler
	// Webhooks judges a batch's webhookUrl when it is posted (the SSRF
	// guard of server/webhook); nil accepts any absolute http(s) URL.
	Webhooks URLChecker
	// Outcomes records delivery outcomes (POST /v1/outcomes) and changes
	// verdicts by what they taught (server/outcomes); nil serves no
	// outcome routes and changes nothing.
	Outcomes *outcomes.Service
	// Platforms receive the sending platforms' webhooks
	// (/v1/outcomes/{platform}), with Outcomes; nil: no receivers.
	Platforms *Platforms
	// Typos, when set, gives the engine each account's own domains as
	// targets of its did_you_mean suggestions (server/typos); nil: the
	// engine's shipped targets only.
	Typos *typos.Accounts
	// MaxOutcomesBody is the largest body of POST /v1/outcomes. Default
	// outcomes.MaxBody (32 MiB).
	MaxOutcomesBody int
	// MaxEmails caps the addresses of one batch (spec §8). Default 100,000.
	MaxEmails int
	// MaxDownloads caps the results.csv downloads streaming at once;
	// MaxDownloadsPerAccount those of one account. Defaults 32 and 4.
	MaxDownloads           int
	MaxDownloadsPerAccount int

	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// MaxConns and MaxConnsPerIP cap the open connections, in total and
	// per client (the socket's address, grouped as IPv6PrefixLen says;
	// trusted proxies are exempt); 0 means no cap. A connection over a
	// cap is answered 429 in the envelope and closed. LingerTimeout and
	// LingerBytes bound the lingering close (package conns); zero means
	// the defaults.
	MaxConns      int
	MaxConnsPerIP int
	LingerTimeout time.Duration
	LingerBytes   int64
	// MaxBodyBytes is the largest body of POST /v1/batch; MaxSmallBody
	// that of every other request. Larger ones answer 400.
	MaxBodyBytes int
	MaxSmallBody int
	// MaxHeaderBytes is the largest request head (request line and
	// header fields): fasthttp's per-connection read buffer, so each open
	// connection holds this much. A larger head answers 431 in the
	// envelope. 0 means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// RealtimeBudget bounds one single validation.
	RealtimeBudget time.Duration
	// CacheMaxAge is how old a result cache: true may reuse.
	CacheMaxAge time.Duration
	// TrustedProxies are exempt from the connection caps (give the
	// Guard the same list); IPv6PrefixLen groups IPv6 clients for them
	// (conns.ClientPrefix; 0 means conns.DefaultIPv6PrefixLen, 64).
	TrustedProxies []netip.Prefix
	IPv6PrefixLen  int
	Logger         *slog.Logger
	// Ready reports whether verifyd has started; /healthz (liveness) and
	// /readyz answer 503 while it is false. Nil means always started.
	Ready func() bool
	// Unready says why verifyd cannot serve now ("" when it can): /readyz
	// answers 503 with it as its reason, for a load balancer to send the
	// requests elsewhere (the fleet's database out of reach or read-only:
	// "database"; the disk too full to charge: "storage_full"). /healthz
	// does not look at it: a process that waits for its database is
	// alive, and restarting it would not bring the database back.
	Unready func() string
	// TLS, when set, makes Serve speak HTTPS with it (server/tlsserve);
	// HSTS is then the Strict-Transport-Security value of every answer
	// ("" for none).
	TLS  *tls.Config
	HSTS string
}

// Defaults of Options, the daemon's too (cmd/verifyd/config takes them):
// the API's body limits (8 MiB for a batch, 64 KiB otherwise) and 100,000
// addresses a batch, a 15 s real-time budget, results reused for a day,
// 32 results.csv downloads at once, 4 of one account.
const (
	DefaultMaxBodyBytes           = 8 << 20
	DefaultMaxSmallBody           = 64 << 10
	DefaultMaxEmails              = 100_000
	DefaultRealtimeBudget         = 15 * time.Second
	DefaultCacheMaxAge            = 24 * time.Hour
	DefaultMaxDownloads           = 32
	DefaultMaxDownloadsPerAccount = 4
)

// DefaultMaxHeaderBytes is the default of Options.MaxHeaderBytes: 16 KiB,
// room for a 5,000-byte Cookie (the dashboard shares its host's cookies)
// and a long URL; fasthttp's own 4 KiB answered a bare 400 to them.
const DefaultMaxHeaderBytes = 16 << 10

// Server is the public API server.
type Server struct {
	opts   Options
	log    *slog.Logger
	db     Store
	srv    *fasthttp.Server
	router *router.Router
	idem   *httpapi.Idempotency
	// downloads caps the results.csv downloads under way.
	downloads *downloadGate

	lnMu sync.Mutex
	lns  []*conns.Listener

	// chunkedLimits holds the body limit chosen at the head of a chunked
	// request to a route with the large limit, keyed by the request's
	// header (its RequestCtx's, reused on its connection): fasthttp resets
	// the request when a chunked body passes the limit, so the error
	// handler could not name the route's limit otherwise. The entry goes
	// when the handler or the error handler runs.
	chunkedLimits sync.Map // *fasthttp.RequestHeader → int
}

// New returns a Server with its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxSmallBody == 0 {
		opts.MaxSmallBody = DefaultMaxSmallBody
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxHeaderBytes == 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.RealtimeBudget == 0 {
		opts.RealtimeBudget = DefaultRealtimeBudget
	}
	if opts.CacheMaxAge == 0 {
		opts.CacheMaxAge = DefaultCacheMaxAge
	}
	if opts.MaxOutcomesBody == 0 {
		opts.MaxOutcomesBody = outcomes.MaxBody
	}
	if opts.MaxEmails == 0 {
		opts.MaxEmails = DefaultMaxEmails
	}
	if opts.MaxDownloads <= 0 {
		opts.MaxDownloads = DefaultMaxDownloads
	}
	if opts.MaxDownloadsPerAccount <= 0 {
		opts.MaxDownloadsPerAccount = DefaultMaxDownloadsPerAccount
	}
	log := opts.Logger.With("pkg", "server")
	s := &Server{
		opts:      opts,
		log:       log,
		db:        opts.DB,
		downloads: newDownloadGate(opts.MaxDownloads, opts.MaxDownloadsPerAccount),
		// One wait for both routes: a duplicate of a validation waits
		// out its real-time budget, one of a batch its synced write.
		idem: &httpapi.Idempotency{DB: opts.DB, Wait: max(opts.RealtimeBudget+5*time.Second, 30*time.Second), Logger: log},
	}
	r := router.New()
	// No redirects: the router's trailing-slash and path-fixing redirects
	// answered /v1/balance/, /V1/BALANCE and /v1//balance with a bare 301
	// (308 for POST) to the client's own Host, before authentication: an
	// open redirect outside the envelope. Such paths answer the 404
	// envelope instead, as on the admin socket.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.SaveMatchedRoutePath = true // the metrics' route label
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/openapi.json", func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetContentType("application/json")
		ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
		ctx.SetBody(openapi.JSON)
	})
	if opts.DB != nil {
		r.GET("/.well-known/jwks.json", s.jwks)
		r.GET("/v1/keys", s.jwks)
		g := opts.Guard
		r.POST("/v1/validate", g.Wrap(httpapi.ClassValidate, httpapi.ScopeWrite, s.validate))
		r.GET("/v1/balance", g.Wrap(httpapi.ClassOther, httpapi.ScopeRead, s.balance))
		r.GET("/v1/results", g.Wrap(httpapi.ClassResults, httpapi.ScopeRead, s.results))
		if opts.Batch != nil {
			r.POST("/v1/batch", g.Wrap(httpapi.ClassBatch, httpapi.ScopeWrite, s.postBatch))
			r.GET("/v1/jobs/{id}", g.Wrap(httpapi.ClassOther, httpapi.ScopeRead, s.getJob))
			r.GET("/v1/jobs/{id}/results.csv", g.Wrap(httpapi.ClassOther, httpapi.ScopeRead, s.getResults))
			r.GET("/v1/jobs/{id}/suggestions.csv", g.Wrap(httpapi.ClassOther, httpapi.ScopeRead, s.getSuggestions))
		}
		if opts.Outcomes != nil {
			r.POST("/v1/outcomes", g.Wrap(httpapi.ClassBatch, httpapi.ScopeOutcomes, s.postOutcomes))
			r.GET("/v1/accuracy", g.Wrap(httpapi.ClassResults, httpapi.ScopeRead, s.getAccuracy))
			if opts.Platforms != nil {
				// No API key: each platform's own signature scheme,
				// against the account's settings.
				r.POST("/v1/outcomes/{platform}", s.postPlatformOutcomes)
			}
		}
	}
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: fmt.Sprintf("no such endpoint: %s", ctx.Path())})
	}
	r.HandleMethodNotAllowed = true
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		// The spec's enumeration has no 405 code; the closest is a bad
		// request. Allow still names the methods the path takes.
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: fmt.Sprintf("method %s is not allowed on %s", ctx.Method(), ctx.Path())})
	}
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		s.log.Error("handler panicked", "path", string(ctx.Path()), "panic", fmt.Sprint(v))
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeInternal, Message: httpapi.InternalMessage(ctx)})
	}
	s.router = r
	observed := httpapi.Observe(r.Handler)
	hsts := ""
	if opts.TLS != nil {
		hsts = opts.HSTS
	}
	s.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if ctx.IsPost() {
				s.chunkedLimits.Delete(&ctx.Request.Header) // read within its limit
			}
			if hsts != "" {
				ctx.Response.Header.Set("Strict-Transport-Security", hsts)
			}
			observed(ctx)
		},
		Name:               "verifyd",
		ReadTimeout:        opts.ReadTimeout,
		WriteTimeout:       opts.WriteTimeout,
		IdleTimeout:        opts.IdleTimeout,
		MaxRequestBodySize: opts.MaxBodyBytes,
		// The head must fit in the read buffer; a larger one is
		// fasthttp's *ErrSmallBuffer, answered 431 below.
		ReadBufferSize: opts.MaxHeaderBytes,
		// No route takes a form: a multipart body is not parsed before the
		// handler, which answers 415 for it like any body not declared
		// JSON (parsed, a body that is not multipart answered a bare
		// 400 "malformed request").
		DisablePreParseMultipartForm: true,
		// Each route's body limit applies as soon as the head is read, so
		// an oversized body is refused on its Content-Length (or as soon
		// as a chunked one passes the limit) without being buffered.
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			limit := s.bodyLimit(h.Method(), h.RequestURI())
			if limit != s.opts.MaxSmallBody && h.ContentLength() < 0 {
				s.chunkedLimits.Store(h, limit)
			}
			return fasthttp.RequestConfig{MaxRequestBodySize: limit}
		},
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			// fasthttp calls this for requests it could not read: bodies
			// over the limit, malformed heads, read timeouts, and a
			// connection's first request when nothing of it came. The
			// connection then closes lingering (package conns), so the
			// client reads this answer even if it writes its whole body
			// first.
			limit, chunked := s.chunkedLimits.LoadAndDelete(&ctx.Request.Header)
			if c, ok := ctx.Conn().(*conns.Conn); ok && !c.Used() {
				// Nothing was sent on the connection: a client (a pool's
				// spare, a preconnect) opened it and let http.read_timeout
				// pass, or reset it. There is no request to answer: it
				// closes without a word. fasthttp says nothing itself
				// only after a connection's first request (ErrNothingRead,
				// which it unwraps for the first); an answer here came
				// unasked on a connection the client held idle, and a
				// client that then sent a request on it read it as the
				// answer.
				c.Mute()
				return
			}
			var small *fasthttp.ErrSmallBuffer
			var nerr net.Error
			switch {
			case errors.Is(err, fasthttp.ErrBodyTooLarge):
				if !chunked {
					limit = s.bodyLimit(ctx.Method(), ctx.RequestURI())
				}
				httpapi.WriteError(ctx, httpapi.BodyTooLarge(limit.(int)))
				return
			case errors.As(err, &small):
				// The request line and header fields do not fit in the
				// read buffer: RFC 6585 §5's 431, but a BAD_REQUEST is a
				// 400 (spec §7).
				httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest,
					Message: fmt.Sprintf("the request line and header fields exceed the limit of %d bytes", s.opts.MaxHeaderBytes),
					Details: map[string]any{"maxHeaderBytes": s.opts.MaxHeaderBytes}})
				return
			case errors.As(err, &nerr) && nerr.Timeout():
				// Part of a request came, not the rest within
				// http.read_timeout: RFC 9110 §15.5.9's 408, but a
				// BAD_REQUEST is a 400 (spec §7).
				httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest,
					Message: "the request did not arrive in full within the read timeout"})
				return
			}
			httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: "malformed request"})
		},
		Logger: fasthttpLogger{s.log},
	}
	return s
}

// Router returns the router, for the routes of the dashboard and /auth/*
// (server/web), which cmd/verifyd adds.
func (s *Server) Router() *router.Router { return s.router }

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	if s.opts.Ready != nil && !s.opts.Ready() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"starting"}`)
		return
	}
	ctx.SetBodyString(`{"status":"ok"}`)
}

// readyz is the readiness of a load balancer's health check: 200
// {"status":"ready"}, or 503 {"status":"unavailable","reason":...} while
// verifyd starts or cannot serve (Options.Unready). It reads state the
// storage keeps up to date: no query per check.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	reason := ""
	switch {
	case s.opts.Ready != nil && !s.opts.Ready():
		reason = "starting"
	case s.opts.Unready != nil:
		reason = s.opts.Unready()
	}
	if reason != "" {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"unavailable","reason":"` + reason + `"}`)
		return
	}
	ctx.SetBodyString(`{"status":"ready"}`)
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
	httpapi.WriteInternal(ctx, err)
}

// bodyLimit is the largest body the request may carry: MaxBodyBytes for
// POST /v1/batch and a platform's /v1/outcomes/{platform}, MaxOutcomesBody
// for POST /v1/outcomes, MaxSmallBody for every other request.
func (s *Server) bodyLimit(method, requestURI []byte) int {
	if string(method) != fasthttp.MethodPost {
		return s.opts.MaxSmallBody
	}
	path := requestURI
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if bytes.IndexByte(path, '%') >= 0 || !bytes.HasPrefix(path, []byte("/")) {
		// A percent-encoded or absolute form: judge the path the router sees.
		var u fasthttp.URI
		if u.Parse(nil, requestURI) != nil {
			return s.opts.MaxSmallBody
		}
		path = u.Path()
	}
	switch string(path) {
	case "/v1/batch":
		return s.opts.MaxBodyBytes
	case "/v1/outcomes":
		if s.opts.Outcomes != nil {
			return s.opts.MaxOutcomesBody
		}
	}
	if s.opts.Platforms != nil && bytes.HasPrefix(path, []byte("/v1/outcomes/")) {
		return s.opts.MaxBodyBytes // a platform's batch of events
	}
	return s.opts.MaxSmallBody
}

// Serve serves the API on ln until Shutdown, with the connection caps and
// the lingering close of package conns, over TLS when Options.TLS is set
// (the caps count TCP connections, before their handshakes; one over a
// cap is closed without an answer, which would not be TLS).
func (s *Server) Serve(ln net.Listener) error {
	reject := writeRefusal
	if s.opts.TLS != nil {
		reject = nil
	}
	cl := conns.New(ln, conns.Options{
		MaxConns:      s.opts.MaxConns,
		MaxConnsPerIP: s.opts.MaxConnsPerIP,
		IPv6PrefixLen: s.opts.IPv6PrefixLen,
		Exempt:        s.opts.TrustedProxies,
		LingerTimeout: s.opts.LingerTimeout,
		LingerBytes:   s.opts.LingerBytes,
		Reject:        reject,
		Name:          "api",
	})
	s.lnMu.Lock()
	s.lns = append(s.lns, cl)
	s.lnMu.Unlock()
	if s.opts.TLS != nil {
		return s.srv.Serve(tls.NewListener(cl, s.opts.TLS))
	}
	return s.srv.Serve(cl)
}

// writeRefusal answers a connection over a cap: 429 in the envelope,
// before its request is read, and the connection closes.
func writeRefusal(w io.Writer, why conns.Reason) {
	msg := "too many connections from this address; retry after 1 second"
	if why == conns.OverTotal {
		msg = "the server has too many open connections; retry after 1 second"
	}
	b, _ := json.Marshal(struct {
		Error *httpapi.APIError `json:"error"`
	}{&httpapi.APIError{Code: httpapi.CodeRateLimited, Message: msg, Details: map[string]any{"retryAfter": 1, "limit": "connections_" + why.String()}}})
	fmt.Fprintf(w, "HTTP/1.1 429 Too Many Requests\r\nServer: verifyd\r\nConnection: close\r\nRetry-After: 1\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
}

// Shutdown stops accepting, waits for in-flight requests until ctx ends, and
// closes idle connections; lingering closes still under way end at once.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	s.lnMu.Lock()
	lns := s.lns
	s.lnMu.Unlock()
	for _, l := range lns {
		l.Shutdown()
	}
	return err
}

// fasthttpLogger sends fasthttp's own messages to slog at debug level.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}

// reqLog is the logger of one request: every line carries its id.
func (s *Server) reqLog(ctx *fasthttp.RequestCtx) *slog.Logger {
	return s.log.With("request_id", httpapi.RequestID(ctx))
}
