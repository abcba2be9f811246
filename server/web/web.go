package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// Registration modes of POST /auth/register.
const (
	RegistrationClosed = "closed"
	RegistrationInvite = "invite"
	RegistrationOpen   = "open"
)

// Options configure the account surface.
type Options struct {
	DB Store
	// Guard authenticates the /v1 routes (the dashboard signs them in
	// with its sessions: SetSessionAuth) and names the client.
	Guard *httpapi.Guard
	// Registration is closed (the default: only operators add users),
	// invite (an invitation token is needed) or open (anyone; a new
	// account on OpenPlan with OpenCredits).
	Registration string
	OpenPlan     storage.Plan
	OpenCredits  int64
	// SessionLifetime ends a session this long after sign-in; SessionIdle
	// ends it after this long unused. Defaults 7 days and 12 hours.
	SessionLifetime time.Duration
	SessionIdle     time.Duration
	// SecureCookie is auto (Secure when the request came over TLS, or
	// through a trusted proxy saying X-Forwarded-Proto: https), always or
	// never.
	SecureCookie string
	// HSTS is the Strict-Transport-Security value of the pages served
	// over TLS, verifyd's own or a proxy's (http.hsts_max_age,
	// tlsserve.HSTS); "" sends none.
	HSTS string
	// LinkLimit, RegisterLimit and LoginLimit are spec §8's per source IP
	// limits; zero values take the spec's (5/10 min, 20/h, 30/10 min).
	LinkLimit, RegisterLimit, LoginLimit httpapi.Limit
	// Argon2 is the password hash cost; zero takes DefaultArgon2.
	Argon2 Argon2Params
	Now    func() time.Time
	Logger *slog.Logger
}

// Defaults of Options, the daemon's too (the [auth] section of
// cmd/verifyd/config takes them): a session lasts 7 days, 12 hours
// unused; spec §8's per source IP limits of /auth/*.
const (
	DefaultSessionLifetime = 7 * 24 * time.Hour
	DefaultSessionIdle     = 12 * time.Hour
)

// Spec §8's per source IP limits of /auth/* (Options.LinkLimit,
// RegisterLimit, LoginLimit).
var (
	DefaultLinkLimit     = httpapi.Limit{N: 5, Window: 10 * time.Minute}
	DefaultRegisterLimit = httpapi.Limit{N: 20, Window: time.Hour}
	DefaultLoginLimit    = httpapi.Limit{N: 30, Window: 10 * time.Minute}
)

// Web serves /auth/* (and, with the pages, the dashboard).
type Web struct {
	opts     Options
	db       Store
	guard    *httpapi.Guard
	log      *slog.Logger
	hash     *hasher
	limits   *httpapi.Limiter
	failures *throttle
	csrfKey  []byte
	site     *site
	stop     chan struct{}
	done     chan struct{}
}

// New returns the account surface; Register adds its routes.
func New(opts Options) (*Web, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Registration == "" {
		opts.Registration = RegistrationClosed
	}
	switch opts.Registration {
	case RegistrationClosed, RegistrationInvite, RegistrationOpen:
	default:
		return nil, fmt.Errorf("registration mode %q: want closed, invite or open", opts.Registration)
	}
	if opts.OpenPlan == "" {
		opts.OpenPlan = storage.PlanFree
	}
	if opts.SessionLifetime == 0 {
		opts.SessionLifetime = DefaultSessionLifetime
	}
	if opts.SessionIdle == 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.SecureCookie == "" {
		opts.SecureCookie = "auto"
	}
	def := func(l *httpapi.Limit, n int, w time.Duration) {
		if l.N == 0 && l.Window == 0 {
			*l = httpapi.Limit{N: n, Window: w}
		}
	}
	def(&opts.LinkLimit, DefaultLinkLimit.N, DefaultLinkLimit.Window)
	def(&opts.RegisterLimit, DefaultRegisterLimit.N, DefaultRegisterLimit.Window)
	def(&opts.LoginLimit, DefaultLoginLimit.N, DefaultLoginLimit.Window)
	if opts.Argon2 == (Argon2Params{}) {
		opts.Argon2 = DefaultArgon2
	}
	h, err := newHasher(opts.Argon2, runtime.NumCPU())
	if err != nil {
		return nil, err
	}
	// The dummy hash of unknown emails, now: made at the first such
	// login, it doubled that login's time (one hash made, one checked).
	// It costs no Argon2id (makeDummy).
	h.makeDummy()
	key, err := opts.DB.Secret(context.Background(), "csrf")
	if err != nil {
		return nil, fmt.Errorf("cannot read the CSRF key: %w", err)
	}
	site, err := loadSite()
	if err != nil {
		return nil, fmt.Errorf("cannot load the dashboard's pages: %w", err)
	}
	w := &Web{
		site: site,
		opts: opts, db: opts.DB, guard: opts.Guard, log: opts.Logger.With("pkg", "web"), hash: h,
		limits:   httpapi.NewLimiter(opts.Now),
		failures: newThrottle(opts.Now, 5, 15*time.Minute),
		csrfKey:  key,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go w.purgeLoop(10 * time.Minute)
	return w, nil
}

// purgeLoop deletes ended sessions and old invitations now and then.
func (w *Web) purgeLoop(every time.Duration) {
	defer close(w.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if n, err := w.db.PurgeSessions(context.Background(), w.opts.SessionIdle); err != nil {
				w.log.Error("cannot purge sessions", "err", err)
			} else if n > 0 {
				w.log.Debug("purged sessions", "sessions", n)
			}
		}
	}
}

// Close stops the background purge.
func (w *Web) Close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
		<-w.done
	}
}

// HashPassword returns the Argon2id hash of a new password, or an error
// worded for the person who chose it (verifyctl users add).
func (w *Web) HashPassword(pw string) (string, error) {
	return w.hash.hashNew(bgCtx, pw)
}

// --- answers

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeInternal, Message: "internal error"})
		return
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}

func badRequest(issues ...httpapi.Issue) *httpapi.APIError {
	msg := "invalid request"
	if len(issues) > 0 {
		msg = "invalid request: " + strings.TrimPrefix(issues[0].Path+" ", " ") + issues[0].Message
	}
	return &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: msg, Details: map[string]any{"issues": issues}}
}

func forbidden(msg, reason string) *httpapi.APIError {
	return &httpapi.APIError{Code: httpapi.CodeForbidden, Message: msg, Details: map[string]any{"reason": reason}}
}

func unauthorized(msg string) *httpapi.APIError {
	return &httpapi.APIError{Code: httpapi.CodeUnauthorized, Message: msg}
}

func (w *Web) internal(ctx *fasthttp.RequestCtx, what string, err error) {
	w.log.Error("internal error", "what", what, "err", err, "path", string(ctx.Path()))
	httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeInternal, Message: "internal error; safe to retry"})
}

// decodeStrings reads a JSON object whose members are all strings, into
// fields; a member not in fields, or not a string, is an issue, as is a
// required one missing.
func decodeStrings(body []byte, fields map[string]*string, required ...string) []httpapi.Issue {
	var issues []httpapi.Issue
	seen := map[string]bool{}
	err := httpapi.WalkObject(body, func(name string, dec *json.Decoder) error {
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		p, ok := fields[name]
		if !ok {
			issues = append(issues, httpapi.Issue{Path: name, Message: "unknown property"})
			return nil
		}
		seen[name] = true // present: a bad value is its issue, not "is required"
		s, ok := v.(string)
		if !ok {
			issues = append(issues, httpapi.Issue{Path: name, Message: "must be a string"})
			return nil
		}
		if msg := httpapi.CheckText(s); msg != "" {
			issues = append(issues, httpapi.Issue{Path: name, Message: msg})
			return nil
		}
		*p = s
		return nil
	})
	if err != nil {
		return []httpapi.Issue{{Message: err.Error()}}
	}
	for _, f := range required {
		if !seen[f] {
			issues = append(issues, httpapi.Issue{Path: f, Message: "is required"})
		}
	}
	return issues
}

// --- cross-site requests

// browserWrite guards a state-changing request (RFC 6454 origins, the
// Fetch standard's Sec-Fetch-Site): the body must be JSON, which a
// cross-site HTML form cannot send without a CORS preflight verifyd never
// grants; Origin, when sent, must be this server's; and Sec-Fetch-Site,
// when sent, must not say cross-site. A request with a session must also
// carry its CSRF token in X-CSRF-Token (csrfOK).
//
// A body of another type, or of none, is refused as cross-site (403): a
// form can send it, and so can a no-cors fetch of a Blob without a type.
// application/json with a parameter other than charset=utf-8
// (charset=utf-16) is not a form's; it answers 400 as on /v1
// (httpapi.CheckJSONType).
func (w *Web) browserWrite(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if reason := w.crossSite(ctx); reason != "" {
			w.log.Info("cross-site request refused", "path", string(ctx.Path()), "reason", reason, "ip", w.guard.ClientIP(ctx))
			httpapi.WriteError(ctx, csrfRefused("cross-site request refused: "+reason))
			return
		}
		if e := httpapi.CheckJSONType(&ctx.Request.Header); e != nil {
			httpapi.WriteError(ctx, e)
			return
		}
		h(ctx)
	}
}

// crossSite says why a write is refused as cross-site, or "".
func (w *Web) crossSite(ctx *fasthttp.RequestCtx) string {
	ct := string(ctx.Request.Header.ContentType())
	if mt, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return "the body must be application/json"
	}
	return w.crossSiteOrigin(ctx)
}

// crossSiteOrigin is crossSite without the body's type: for the /v1
// routes, whose writes from a session must carry X-CSRF-Token, a header no
// cross-site form can send.
func (w *Web) crossSiteOrigin(ctx *fasthttp.RequestCtx) string {
	if site := string(ctx.Request.Header.Peek("Sec-Fetch-Site")); site != "" && site != "same-origin" && site != "none" {
		return "Sec-Fetch-Site is " + site
	}
	if origin := ctx.Request.Header.Peek("Origin"); len(origin) > 0 && string(origin) != w.origin(ctx) {
		return "Origin is another site's"
	}
	return ""
}

// origin is this request's own origin, scheme://host.
func (w *Web) origin(ctx *fasthttp.RequestCtx) string {
	scheme := "http"
	if w.overTLS(ctx) {
		scheme = "https"
	}
	return scheme + "://" + string(ctx.Host())
}

func (w *Web) overTLS(ctx *fasthttp.RequestCtx) bool {
	return ctx.IsTLS() || w.guard.ViaTrustedProxy(ctx) && strings.EqualFold(string(ctx.Request.Header.Peek("X-Forwarded-Proto")), "https")
}

// csrfToken is the session's CSRF token: an HMAC of its id under the
// server's key, so it needs no storage and dies with the session.
func (w *Web) csrfToken(sessionID string) string {
	m := hmac.New(sha256.New, w.csrfKey)
	m.Write([]byte("csrf\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK checks X-CSRF-Token against the session's, in constant time.
func (w *Web) csrfOK(ctx *fasthttp.RequestCtx, s storage.Session) bool {
	got := ctx.Request.Header.Peek("X-CSRF-Token")
	return hmac.Equal(got, []byte(w.csrfToken(s.ID)))
}

// --- sessions and cookies

// cookieName is __Host-verifyd_session over TLS (RFC 6265bis §4.1.3.2:
// Secure, Path=/, no Domain, so no other host or path can set it) and
// verifyd_session on plain HTTP, where the prefix is not allowed.
func (w *Web) cookieName(ctx *fasthttp.RequestCtx) string {
	if w.secure(ctx) {
		return "__Host-verifyd_session"
	}
	return "verifyd_session"
}

func (w *Web) secure(ctx *fasthttp.RequestCtx) bool {
	switch w.opts.SecureCookie {
	case "always":
		return true
	case "never":
		return false
	}
	return w.overTLS(ctx)
}

func (w *Web) setCookie(ctx *fasthttp.RequestCtx, token string, maxAge time.Duration) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(w.cookieName(ctx))
	c.SetValue(token)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSecure(w.secure(ctx))
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	if maxAge > 0 {
		c.SetMaxAge(int(maxAge / time.Second))
	} else {
		c.SetExpire(fasthttp.CookieExpireDelete)
		c.SetValue("")
	}
	ctx.Response.Header.SetCookie(c)
}

// current is the request's valid session and its user. A session past
// its lifetime or idle too long is ended on the spot.
func (w *Web) current(ctx *fasthttp.RequestCtx) (storage.Session, storage.User, bool) {
	tok := ctx.Request.Header.Cookie(w.cookieName(ctx))
	if len(tok) == 0 {
		return storage.Session{}, storage.User{}, false
	}
	s, err := w.db.LookupSession(httpapi.Context(ctx), string(tok))
	if err != nil {
		return storage.Session{}, storage.User{}, false
	}
	now := w.opts.Now()
	if !now.Before(s.ExpiresAt) || now.Sub(s.LastSeen) >= w.opts.SessionIdle {
		if err := w.db.DeleteSession(httpapi.Context(ctx), s.ID); err != nil {
			w.log.Error("cannot end an expired session", "err", err)
		}
		return storage.Session{}, storage.User{}, false
	}
	u, err := w.db.GetUser(httpapi.Context(ctx), s.User)
	if err != nil {
		return storage.Session{}, storage.User{}, false
	}
	if err := w.db.TouchSession(httpapi.Context(ctx), s.ID); err != nil {
		w.log.Error("cannot touch a session", "err", err)
	}
	return s, u, true
}

// startSession signs the user in: a new session on account, its cookie.
func (w *Web) startSession(ctx *fasthttp.RequestCtx, u storage.User, account string) (storage.Session, error) {
	if account == "" && len(u.Accounts) > 0 {
		account = u.Accounts[0].Account
	}
	// A browser signing in again (as anyone) ends the session it had:
	// its cookie is about to be replaced, and nobody would end it later.
	if old := ctx.Request.Header.Cookie(w.cookieName(ctx)); len(old) > 0 {
		if prev, err := w.db.LookupSession(httpapi.Context(ctx), string(old)); err == nil {
			if err := w.db.DeleteSession(httpapi.Context(ctx), prev.ID); err != nil {
				w.log.Error("cannot end the replaced session", "err", err)
			}
		}
	}
	token, s, err := w.db.CreateSession(httpapi.Context(ctx), u.ID, account, w.guard.ClientIP(ctx), string(ctx.UserAgent()), w.opts.SessionLifetime)
	if err != nil {
		return storage.Session{}, err
	}
	w.setCookie(ctx, token, w.opts.SessionLifetime)
	sessionsStarted.Inc()
	return s, nil
}
