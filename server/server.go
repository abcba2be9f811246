// Package server is verifyd's HTTP side: the public API of spec §4 on
// fasthttp and fasthttp/router, with the error envelope of spec §7 on every
// non-2xx answer (unknown paths, wrong methods, oversized bodies and panics
// included).
//
// A request flows: router → (auth → rate limits → idempotency, as later
// issues add them) → handler. Nothing from a *fasthttp.RequestCtx outlives
// its handler: a handler that hands work to another goroutine copies what
// the work needs first.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// Options configures a Server.
type Options struct {
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// MaxBodyBytes is the largest request body read; larger ones answer 400.
	MaxBodyBytes int
	Logger       *slog.Logger
	// Ready reports whether verifyd can serve (storage open, engine up);
	// /healthz answers 503 while it is false. Nil means always ready.
	Ready func() bool
}

// Server is the public API server.
type Server struct {
	opts Options
	log  *slog.Logger
	srv  *fasthttp.Server
}

// New returns a Server with its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger.With("pkg", "server")}
	r := router.New()
	r.GET("/healthz", s.healthz)
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
	s.srv = &fasthttp.Server{
		Handler:                       r.Handler,
		Name:                          "verifyd",
		ReadTimeout:                   opts.ReadTimeout,
		WriteTimeout:                  opts.WriteTimeout,
		IdleTimeout:                   opts.IdleTimeout,
		MaxRequestBodySize:            opts.MaxBodyBytes,
		DisableHeaderNamesNormalizing: false,
		NoDefaultServerHeader:         false,
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

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentType("application/json")
	if s.opts.Ready != nil && !s.opts.Ready() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"starting"}`)
		return
	}
	ctx.SetBodyString(`{"status":"ok"}`)
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
