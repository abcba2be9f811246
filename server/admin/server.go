package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/conns"
	"github.com/verifyd/verifyd/server/receipt"
)

// Options configures a Server.
type Options struct {
	// DB holds accounts, credits and API keys. Required.
	DB Store
	// Keys is the receipt signing key set. Required.
	Keys *receipt.KeySet
	// Logger receives the access log (debug), every change (info) and
	// internal errors; default slog.Default().
	Logger *slog.Logger
	// Webhooks, when set, serves the webhook routes (outbox, dead
	// letters, attempts, resend, test): the dispatcher.
	Webhooks Webhooks
	// Extra, when set, is called with the router after the built-in routes
	// are added, for the routes of cmd/verifyd (egress, backup). Build
	// their handlers with JSON, DecodeJSON and WriteError.
	Extra func(r *router.Router)
	// HashPassword hashes a new dashboard user's password (server/web),
	// or says what is wrong with it; InviteLifetime is how long an
	// invitation lasts (default 7 days).
	HashPassword   func(string) (string, error)
	InviteLifetime time.Duration
}

// DefaultInviteLifetime is Options.InviteLifetime's default, the
// daemon's too (auth.invite_lifetime).
const DefaultInviteLifetime = 7 * 24 * time.Hour

// Limits of the admin server.
const (
	// MaxBodyBytes bounds a request body; larger ones answer 400.
	MaxBodyBytes = 1 << 20
	// ReadTimeout and WriteTimeout bound one request and one answer.
	ReadTimeout  = 30 * time.Second
	WriteTimeout = 2 * time.Minute
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout = 2 * time.Minute
)

// Server is the admin API server.
type Server struct {
	opts Options
	db   Store
	keys *receipt.KeySet
	log  *slog.Logger
	srv  *fasthttp.Server

	mu   sync.Mutex
	cl   *conns.Listener
	ln   net.Listener
	path string
	sock os.FileInfo // the socket file Listen made, to remove only that one
}

// New returns a Server with its routes. Call Listen, then Serve.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.InviteLifetime == 0 {
		opts.InviteLifetime = DefaultInviteLifetime
	}
	s := &Server{opts: opts, db: opts.DB, keys: opts.Keys, log: opts.Logger.With("pkg", "admin")}
	r := router.New()
	r.SaveMatchedRoutePath = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	s.routes(r)
	if opts.Webhooks != nil {
		s.webhookRoutes(r)
	}
	if opts.Extra != nil {
		opts.Extra(r)
	}
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		WriteError(ctx, notFound("no such endpoint: %s %s", ctx.Method(), ctx.Path()))
	}
	r.HandleMethodNotAllowed = true
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		WriteError(ctx, badRequest(fmt.Sprintf("method %s is not allowed on %s", ctx.Method(), ctx.Path())))
	}
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		WriteError(ctx, fmt.Errorf("handler panicked: %v", v))
	}
	s.srv = &fasthttp.Server{
		Handler:            s.accessLog(r.Handler),
		Name:               "verifyd-admin",
		ReadTimeout:        ReadTimeout,
		WriteTimeout:       WriteTimeout,
		IdleTimeout:        IdleTimeout,
		MaxRequestBodySize: MaxBodyBytes,
		CloseOnShutdown:    true,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				e := badRequest(fmt.Sprintf("request body exceeds the limit of %d bytes", MaxBodyBytes))
				e.Details = map[string]any{"maxBodyBytes": MaxBodyBytes}
				WriteError(ctx, e)
				return
			}
			WriteError(ctx, badRequest("malformed request"))
		},
		Logger: fasthttpLogger{s.log},
	}
	return s
}

// routes adds the built-in routes; README.md documents each.
func (s *Server) routes(r *router.Router) {
	r.POST("/v1/accounts", JSON(s.createAccount))
	r.GET("/v1/accounts", JSON(s.listAccounts))
	r.GET("/v1/accounts/{id}", JSON(s.getAccount))
	r.POST("/v1/accounts/{id}/plan", JSON(s.setPlan))
	r.POST("/v1/accounts/{id}/credits", JSON(s.adjustCredits))
	r.GET("/v1/accounts/{id}/ledger", JSON(s.ledger))

	r.POST("/v1/accounts/{id}/keys", JSON(s.mintKey))
	r.GET("/v1/accounts/{id}/keys", JSON(s.listKeys))
	r.POST("/v1/keys/{prefix}/revoke", JSON(s.revokeKey))

	r.GET("/v1/accounts/{id}/webhook-secret", JSON(s.webhookSecret))
	r.POST("/v1/accounts/{id}/webhook-secret/rotate", JSON(s.rotateWebhookSecret))
	r.GET("/v1/accounts/{id}/outcome-settings", JSON(s.outcomeSettings))
	r.PUT("/v1/accounts/{id}/outcome-settings", JSON(s.setOutcomeSettings))

	r.POST("/v1/signing-keys/rotate", JSON(s.rotateSigningKey))
	r.GET("/v1/signing-keys", JSON(s.signingKeys))

	r.POST("/v1/users", JSON(s.addUser))
	r.GET("/v1/users", JSON(s.listUsers))
	r.POST("/v1/users/{id}/operator", JSON(s.setOperator))
	r.POST("/v1/accounts/{id}/invites", JSON(s.createInvite))
	r.GET("/v1/accounts/{id}/invites", JSON(s.listInvites))
}

// accessLog wraps the router: one debug line and one count per request,
// an error line for every 500. It logs the route pattern, never the path
// as sent, which could hold a pasted secret.
func (s *Server) accessLog(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		next(ctx)
		status := ctx.Response.StatusCode()
		countRequest(status)
		route, _ := ctx.UserValue(router.MatchedRoutePathParam).(string)
		if route == "" {
			route = "(none)"
		}
		attrs := []any{"req", ctx.ID(), "method", string(ctx.Method()), "route", route,
			"status", status, "dur", time.Since(start).Round(time.Microsecond)}
		if err, ok := ctx.UserValue(errKey{}).(error); ok {
			s.log.Error("admin request failed", append(attrs, "err", err)...)
			return
		}
		s.log.Debug("admin request", attrs...)
	}
}

// Listen creates the admin socket at path, mode 0600, and listens on it;
// see the package documentation for how. It creates the parent directory
// (mode 0700) when missing and replaces a stale socket.
func (s *Server) Listen(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return fmt.Errorf("admin: already listening on %s", s.path)
	}
	ln, fi, err := listenSocket(path)
	if err != nil {
		return err
	}
	// The lingering close of package conns, so that verifyctl (or any
	// client) reads the answer to a body over the limit.
	s.cl = conns.New(ln, conns.Options{Name: "admin"})
	s.ln, s.path, s.sock = peerListener{s.cl}, path, fi
	s.log.Info("admin API listening", "socket", path, "mode", "0600")
	return nil
}

// Addr is the socket path Listen was given ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.path
}

// Serve serves the admin API on the socket of Listen until Shutdown.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return errors.New("admin: Serve before Listen")
	}
	return s.srv.Serve(ln)
}

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// closes the connections and removes the socket file.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Shutdown()
	}
	if s.ln != nil {
		s.ln.Close() // when Serve never ran; else already closed
		removeSocket(s.path, s.sock)
	}
	return err
}

// fasthttpLogger sends fasthttp's own messages to slog at debug level.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}
