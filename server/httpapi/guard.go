package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/conns"
	"github.com/verifyd/verifyd/storage"
)

// Scopes of spec §5, and outcomes:write (POST /v1/outcomes only).
const (
	ScopeRead     = "validate:read"
	ScopeWrite    = "validate:write"
	ScopeOutcomes = "outcomes:write"
)

// Caller is who a request comes from, once authenticated: an API key, or
// a browser session (Key zero).
type Caller struct {
	Key     storage.APIKey
	Account string
	Plan    string
}

// KeyStore is what the guard reads: API keys and the accounts' plans.
type KeyStore interface {
	VerifyKey(ctx context.Context, key string) (storage.APIKey, error)
	GetAccount(ctx context.Context, id string) (storage.Account, error)
}

// PlanReader is a KeyStore that reads an account's plan more cheaply than
// GetAccount (a fleet's store keeps the plans it read for a few seconds):
// the guard asks it for the plan of an API key's account when the store
// has it.
type PlanReader interface {
	AccountPlan(ctx context.Context, id string) (storage.Plan, error)
}

// GuardOptions configures a Guard.
type GuardOptions struct {
	DB KeyStore
	// IPLimits are the per source IP limits per route class (spec §8);
	// IPLimitsDisabled turns them off.
	IPLimits         Limits
	IPLimitsDisabled bool
	// TrustedProxies may name the client in X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// IPv6PrefixLen is how many leading bits of an IPv6 client address
	// name one client for every per-client limit (the connection caps,
	// IPLimits, the /auth/* limits of server/web): conns.ClientPrefix.
	// 0 means conns.DefaultIPv6PrefixLen (64).
	IPv6PrefixLen int
	// RequestTimeout is the deadline of a request's work below HTTP
	// (storage calls, the engine): Context. Default 30 s.
	RequestTimeout time.Duration
	// Now is the limits' clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Guard is what every /v1 route does before its handler: the limits of
// spec §8 and the authentication of spec §5 (Wrap). It also names the
// client (ClientIP, ClientKey) for the other front ends.
type Guard struct {
	opts      GuardOptions
	log       *slog.Logger
	ipLimits  *limiter
	keyLimits *limiter
	// ipConf is the per-IP limits in force; SetIPLimits swaps it on reload.
	ipConf atomic.Pointer[ipLimitConf]
	// sessions authenticates browser sessions; nil: API keys only.
	sessions atomic.Pointer[SessionAuth]
}

type ipLimitConf struct {
	limits   Limits
	disabled bool
}

// NewGuard returns a Guard.
func NewGuard(opts GuardOptions) *Guard {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	g := &Guard{opts: opts, log: opts.Logger.With("pkg", "httpapi"), ipLimits: newLimiter(opts.Now), keyLimits: newLimiter(opts.Now)}
	g.SetIPLimits(opts.IPLimits, opts.IPLimitsDisabled)
	return g
}

// DefaultRequestTimeout is GuardOptions.RequestTimeout's default.
const DefaultRequestTimeout = 30 * time.Second

// SetIPLimits changes the per source IP limits (a reload). Windows already
// counted keep their counts.
func (g *Guard) SetIPLimits(l Limits, disabled bool) {
	g.ipConf.Store(&ipLimitConf{limits: l, disabled: disabled})
}

// Session is a browser session's principal on the /v1 routes.
type Session struct {
	// Account is the account the session acts for; LimitKey keys its
	// per-key rate (one bucket per user, whatever the sessions).
	Account  string
	LimitKey string
}

// SessionAuth authenticates a request without an Authorization header
// by its session cookie (package web). It answers ok false and a nil
// error when the request has no session cookie at all, so the guard
// answers the usual 401 for a missing key; an error when the session is
// ended (401), a write lacks its CSRF token or comes cross-site (403), or
// the user is no longer a member of the account (403).
type SessionAuth func(ctx *fasthttp.RequestCtx) (s Session, ok bool, err *APIError)

// SetSessionAuth lets browser sessions use the /v1 routes, with every
// scope: the dashboard calls the same handlers as API clients.
func (g *Guard) SetSessionAuth(f SessionAuth) { g.sessions.Store(&f) }

// Handler is an authenticated route's handler.
type Handler func(ctx *fasthttp.RequestCtx, c *Caller)

// Wrap wraps h with what every /v1 route does first (spec §5, §8):
//
//  1. the per source IP fixed window of the route class;
//  2. the Bearer key (401 when missing, malformed, unknown or revoked),
//     or, without an Authorization header, a browser session
//     (SetSessionAuth);
//  3. the scope (403 with details.missingScope; a session has every
//     scope);
//  4. the per-key rate of the account's plan (per user for a session).
//
// Whichever limit trips answers 429 with Retry-After and details.retryAfter.
func (g *Guard) Wrap(r Class, scope string, h Handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		// The request's deadline, for every storage call it makes (the
		// guard's own too) and its engine run: Context.
		rctx := newRequestContext(g.opts.RequestTimeout)
		defer rctx.finish()
		ctx.SetUserValue(ctxKey{}, rctx)
		defer ctx.RemoveUserValue(ctxKey{})
		if conf := g.ipConf.Load(); !conf.disabled {
			if ok, wait := g.ipLimits.allow(g.ClientKey(ctx), r, conf.limits[r]); !ok {
				RateLimited(ctx, wait)
				return
			}
		}
		auth := ctx.Request.Header.Peek("Authorization")
		if len(auth) == 0 {
			if f := g.sessions.Load(); f != nil {
				sess, ok, aerr := (*f)(ctx)
				if aerr != nil {
					WriteError(ctx, aerr)
					return
				}
				if ok {
					g.serveSession(ctx, r, sess, h)
					return
				}
			}
		}
		token, ok := bearer(auth)
		if !ok {
			WriteError(ctx, &APIError{Code: CodeUnauthorized, Message: "missing bearer token: send Authorization: Bearer <API key>"})
			return
		}
		key, err := g.opts.DB.VerifyKey(Context(ctx), token)
		switch {
		case errors.Is(err, storage.ErrKeyRevoked):
			WriteError(ctx, &APIError{Code: CodeUnauthorized, Message: "API key revoked"})
			return
		case errors.Is(err, storage.ErrKeyInvalid):
			WriteError(ctx, &APIError{Code: CodeUnauthorized, Message: "invalid API key"})
			return
		case err != nil:
			g.internal(ctx, "verify key", err)
			return
		}
		if !key.HasScope(scope) {
			WriteError(ctx, &APIError{Code: CodeForbidden, Message: "API key lacks scope " + scope,
				Details: map[string]any{"missingScope": scope}})
			return
		}
		plan, err := g.plan(Context(ctx), key.Account)
		if err != nil {
			g.internal(ctx, "get account", err)
			return
		}
		if lims, ok := Plans[plan]; ok {
			if ok, wait := g.keyLimits.allow(key.Prefix, r, lims[r]); !ok {
				RateLimited(ctx, wait)
				return
			}
		}
		h(ctx, &Caller{Key: key, Account: key.Account, Plan: plan})
	}
}

// plan is the plan of an API key's account.
func (g *Guard) plan(ctx context.Context, account string) (string, error) {
	if pr, ok := g.opts.DB.(PlanReader); ok {
		p, err := pr.AccountPlan(ctx, account)
		return string(p), err
	}
	acct, err := g.opts.DB.GetAccount(ctx, account)
	return string(acct.Plan), err
}

// serveSession runs h for a browser session: steps 3 and 4 of guard.
func (g *Guard) serveSession(ctx *fasthttp.RequestCtx, r Class, sess Session, h Handler) {
	acct, err := g.opts.DB.GetAccount(Context(ctx), sess.Account)
	if errors.Is(err, storage.ErrNotFound) {
		WriteError(ctx, &APIError{Code: CodeForbidden, Message: "the session's account is gone"})
		return
	}
	if err != nil {
		g.internal(ctx, "get account", err)
		return
	}
	plan := string(acct.Plan)
	if lims, ok := Plans[plan]; ok {
		if ok, wait := g.keyLimits.allow(sess.LimitKey, r, lims[r]); !ok {
			RateLimited(ctx, wait)
			return
		}
	}
	// A browser keeps no copy of what a session read (history, jobs).
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	h(ctx, &Caller{Account: acct.ID, Plan: plan})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(h []byte) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !bytes.EqualFold(h[:len(prefix)], []byte(prefix)) {
		return "", false
	}
	tok := bytes.TrimSpace(h[len(prefix):])
	if len(tok) == 0 {
		return "", false
	}
	return string(tok), true
}

// ClientIP is the client's address, for logs and sessions: the socket's
// peer, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For that is not a trusted proxy.
func (g *Guard) ClientIP(ctx *fasthttp.RequestCtx) string { return g.clientAddr(ctx).String() }

// ClientKey is what the per source IP limits key on (spec §8's windows
// here, the /auth/* limits and failed-login delays of server/web): the
// client ClientIP counts as, conns.ClientPrefix of it. An IPv6 client is
// its /64 (Options.IPv6PrefixLen), so one host cannot rotate past the
// limits through the addresses of its prefix; an IPv4 client (IPv4-mapped
// included) is its address.
func (g *Guard) ClientKey(ctx *fasthttp.RequestCtx) string {
	return conns.ClientPrefix(g.clientAddr(ctx), g.opts.IPv6PrefixLen).String()
}

// ViaTrustedProxy reports whether the request came through a trusted
// proxy, whose X-Forwarded-Proto may then be believed.
func (g *Guard) ViaTrustedProxy(ctx *fasthttp.RequestCtx) bool {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return g.trusted(peer.Unmap())
}

// clientAddr is the socket's peer, or, when the peer is a trusted proxy,
// the right-most address of X-Forwarded-For that is not a trusted proxy.
func (g *Guard) clientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !g.trusted(peer) {
		return peer
	}
	xff := ctx.Request.Header.Peek("X-Forwarded-For")
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		part := bytes.TrimSpace(xff[i+1:])
		xff = xff[:max(i, 0)]
		a, err := netip.ParseAddr(string(part))
		if err != nil {
			break
		}
		a = a.Unmap()
		if !g.trusted(a) {
			return a
		}
		if i < 0 {
			break
		}
	}
	return peer
}

func (g *Guard) trusted(a netip.Addr) bool {
	for _, p := range g.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// internal answers 500 for an unexpected error, logged but not shown.
func (g *Guard) internal(ctx *fasthttp.RequestCtx, what string, err error) {
	g.log.Error("internal error", "what", what, "err", err, "path", string(ctx.Path()), "request_id", RequestID(ctx))
	WriteInternal(ctx, err)
}

// RequestID is the request's id for logs and ledger references.
func RequestID(ctx *fasthttp.RequestCtx) string {
	return "req-" + strconv.FormatUint(ctx.ID(), 36) + "-" + strconv.FormatInt(ctx.ConnTime().UnixNano()%1e9, 36)
}

// ctxKey is the user value under which the guard keeps a request's
// context.
type ctxKey struct{}

// Context is the context of the request ctx for the calls it makes below
// HTTP (storage, the engine): the one the guard gave it, which ends with
// the request's deadline (GuardOptions.RequestTimeout), or, for a route
// the guard does not wrap, one without a deadline (storage still bounds
// each call by its own timeout). It is not a context of its own: a
// handler that hands work to a goroutine outliving it gives that work its
// own context.
func Context(ctx *fasthttp.RequestCtx) context.Context {
	if c, ok := ctx.UserValue(ctxKey{}).(context.Context); ok {
		return c
	}
	return context.Background()
}
