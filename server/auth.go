package server

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/conns"
	"github.com/verifyd/verifyd/storage"
)

// Scopes of spec §5.
const (
	ScopeRead  = "validate:read"
	ScopeWrite = "validate:write"
)

// caller is who a request comes from, once authenticated: an API key, or
// a browser session (key zero).
type caller struct {
	key     storage.APIKey
	account string
	plan    string
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
func (s *Server) SetSessionAuth(f SessionAuth) { s.sessions.Store(&f) }

// handler is an authenticated route's handler.
type handler func(ctx *fasthttp.RequestCtx, c *caller)

// guard wraps h with what every /v1 route does first (spec §5, §8):
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
func (s *Server) guard(r route, scope string, h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if conf := s.ipConf.Load(); !conf.disabled {
			if ok, wait := s.ipLimits.allow(s.ClientKey(ctx), r, conf.limits[r]); !ok {
				rateLimited(ctx, wait)
				return
			}
		}
		auth := ctx.Request.Header.Peek("Authorization")
		if len(auth) == 0 {
			if f := s.sessions.Load(); f != nil {
				sess, ok, aerr := (*f)(ctx)
				if aerr != nil {
					writeError(ctx, aerr)
					return
				}
				if ok {
					s.serveSession(ctx, r, sess, h)
					return
				}
			}
		}
		token, ok := bearer(auth)
		if !ok {
			writeError(ctx, &APIError{Code: CodeUnauthorized, Message: "missing bearer token: send Authorization: Bearer <API key>"})
			return
		}
		key, err := s.db.VerifyKey(token)
		switch {
		case errors.Is(err, storage.ErrKeyRevoked):
			writeError(ctx, &APIError{Code: CodeUnauthorized, Message: "API key revoked"})
			return
		case errors.Is(err, storage.ErrKeyInvalid):
			writeError(ctx, &APIError{Code: CodeUnauthorized, Message: "invalid API key"})
			return
		case err != nil:
			s.internal(ctx, "verify key", err)
			return
		}
		if !key.HasScope(scope) {
			writeError(ctx, &APIError{Code: CodeForbidden, Message: "API key lacks scope " + scope,
				Details: map[string]any{"missingScope": scope}})
			return
		}
		acct, err := s.db.GetAccount(key.Account)
		if err != nil {
			s.internal(ctx, "get account", err)
			return
		}
		plan := string(acct.Plan)
		if lims, ok := Plans[plan]; ok {
			if ok, wait := s.keyLimits.allow(key.Prefix, r, lims[r]); !ok {
				rateLimited(ctx, wait)
				return
			}
		}
		h(ctx, &caller{key: key, account: key.Account, plan: plan})
	}
}

// serveSession runs h for a browser session: steps 3 and 4 of guard.
func (s *Server) serveSession(ctx *fasthttp.RequestCtx, r route, sess Session, h handler) {
	acct, err := s.db.GetAccount(sess.Account)
	if errors.Is(err, storage.ErrNotFound) {
		writeError(ctx, &APIError{Code: CodeForbidden, Message: "the session's account is gone"})
		return
	}
	if err != nil {
		s.internal(ctx, "get account", err)
		return
	}
	plan := string(acct.Plan)
	if lims, ok := Plans[plan]; ok {
		if ok, wait := s.keyLimits.allow(sess.LimitKey, r, lims[r]); !ok {
			rateLimited(ctx, wait)
			return
		}
	}
	// A browser keeps no copy of what a session read (history, jobs).
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	h(ctx, &caller{account: acct.ID, plan: plan})
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

// RateLimited answers 429 RATE_LIMITED with Retry-After and
// details.retryAfter, the whole seconds of wait rounded up.
func RateLimited(ctx *fasthttp.RequestCtx, wait time.Duration) { rateLimited(ctx, wait) }

func rateLimited(ctx *fasthttp.RequestCtx, wait time.Duration) {
	secs := retryAfterSeconds(wait)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
	writeError(ctx, &APIError{Code: CodeRateLimited,
		Message: "rate limit exceeded; retry in " + strconv.Itoa(secs) + " s",
		Details: map[string]any{"retryAfter": secs}})
}

// ClientIP is the client's address, for logs and sessions: the socket's
// peer, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For that is not a trusted proxy.
func (s *Server) ClientIP(ctx *fasthttp.RequestCtx) string { return s.clientAddr(ctx).String() }

// ClientKey is what the per source IP limits key on (spec §8's windows
// here, the /auth/* limits and failed-login delays of server/web): the
// client ClientIP counts as, conns.ClientPrefix of it. An IPv6 client is
// its /64 (Options.IPv6PrefixLen), so one host cannot rotate past the
// limits through the addresses of its prefix; an IPv4 client (IPv4-mapped
// included) is its address.
func (s *Server) ClientKey(ctx *fasthttp.RequestCtx) string {
	return conns.ClientPrefix(s.clientAddr(ctx), s.opts.IPv6PrefixLen).String()
}

// ViaTrustedProxy reports whether the request came through a trusted
// proxy, whose X-Forwarded-Proto may then be believed.
func (s *Server) ViaTrustedProxy(ctx *fasthttp.RequestCtx) bool {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return s.trusted(peer.Unmap())
}

// clientAddr is the socket's peer, or, when the peer is a trusted proxy,
// the right-most address of X-Forwarded-For that is not a trusted proxy.
func (s *Server) clientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !s.trusted(peer) {
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
		if !s.trusted(a) {
			return a
		}
		if i < 0 {
			break
		}
	}
	return peer
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
