package web

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

var bgCtx = context.Background()

// hashWait bounds the wait for a free hashing slot.
const hashWait = 10 * time.Second

// UserView is a user as /auth/* answers it: never the password hash.
type UserView struct {
	ID       string           `json:"id"`
	Email    string           `json:"email"`
	Operator bool             `json:"operator"`
	Accounts []MembershipView `json:"accounts"`
}

// MembershipView is one of a user's accounts.
type MembershipView struct {
	Account string `json:"account"`
	Name    string `json:"name"`
	Role    string `json:"role"`
}

// SessionView is the answer of login, register, link, password and GET
// /auth/session: who is signed in, on which account, and the CSRF token
// the browser sends back in X-CSRF-Token on every write.
type SessionView struct {
	User      UserView  `json:"user"`
	Account   string    `json:"account,omitempty"`
	Role      string    `json:"role,omitempty"`
	CSRFToken string    `json:"csrf_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (w *Web) userView(ctx context.Context, u storage.User) UserView {
	v := UserView{ID: u.ID, Email: u.Email, Operator: u.Operator, Accounts: []MembershipView{}}
	for _, m := range u.Accounts {
		a, _ := w.db.GetAccount(ctx, m.Account)
		v.Accounts = append(v.Accounts, MembershipView{Account: m.Account, Name: a.Name, Role: string(m.Role)})
	}
	return v
}

func (w *Web) sessionView(ctx context.Context, s storage.Session, u storage.User) SessionView {
	v := SessionView{User: w.userView(ctx, u), Account: s.Account, CSRFToken: w.csrfToken(s.ID), ExpiresAt: s.ExpiresAt}
	if r, ok := u.Role(s.Account); ok {
		v.Role = string(r)
	} else if u.Operator && s.Account != "" {
		v.Role = "operator"
	}
	return v
}

// limit applies one of spec §8's per source IP limits of /auth/*, keyed
// as the API's (httpapi.Guard.ClientKey: an IPv6 client by its /64).
func (w *Web) limit(ctx *fasthttp.RequestCtx, name string, lim httpapi.Limit) bool {
	if ok, wait := w.limits.Allow(name+"|"+w.guard.ClientKey(ctx), lim); !ok {
		w.log.Info("auth rate limit", "endpoint", name, "ip", w.guard.ClientIP(ctx))
		rateLimited(name).Inc()
		httpapi.RateLimited(ctx, wait)
		return false
	}
	return true
}

// POST /auth/register {email, password, invitation?, account_name?}
func (w *Web) register(ctx *fasthttp.RequestCtx) {
	if !w.limit(ctx, "register", w.opts.RegisterLimit) {
		return
	}
	var email, pw, invitation, accountName string
	issues := decodeStrings(ctx.PostBody(), map[string]*string{
		"email": &email, "password": &pw, "invitation": &invitation, "account_name": &accountName,
	}, "email", "password")
	if w.opts.Registration == RegistrationClosed {
		httpapi.WriteError(ctx, forbidden("registration is closed: ask the operator for an account", "registration_closed"))
		return
	}
	issues = append(issues, checkNewUser(email, pw)...)
	if w.opts.Registration == RegistrationInvite && invitation == "" {
		issues = append(issues, httpapi.Issue{Path: "invitation", Message: "is required: registration is by invitation"})
	}
	if len(accountName) > 200 {
		issues = append(issues, httpapi.Issue{Path: "account_name", Message: "must be at most 200 bytes"})
	}
	if len(issues) > 0 {
		httpapi.WriteError(ctx, badRequest(issues...))
		return
	}
	hctx, cancel := context.WithTimeout(bgCtx, hashWait)
	defer cancel()
	hash, err := w.hash.hash(hctx, pw)
	if err != nil {
		w.internal(ctx, "hash password", err)
		return
	}
	var u storage.User
	switch {
	case invitation != "":
		u, _, err = w.db.RegisterWithInvite(httpapi.Context(ctx), email, hash, strings.TrimSpace(invitation))
	case w.opts.Registration == RegistrationOpen:
		if accountName == "" {
			accountName = strings.TrimSpace(email)
		}
		u, _, err = w.db.RegisterWithAccount(httpapi.Context(ctx), email, hash, accountName, w.opts.OpenPlan, w.opts.OpenCredits)
	}
	switch {
	case errors.Is(err, storage.ErrEmailTaken):
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeConflict, Message: "a user with that email exists: sign in instead",
			Details: map[string]any{"field": "email"}})
		return
	case errors.Is(err, storage.ErrInviteInvalid):
		httpapi.WriteError(ctx, badRequest(httpapi.Issue{Path: "invitation", Message: "is invalid, used, expired or for another email"}))
		return
	case err != nil:
		w.internal(ctx, "register", err)
		return
	}
	w.log.Info("user registered", "user", u.ID, "mode", w.opts.Registration, "ip", w.guard.ClientIP(ctx))
	mode := RegistrationOpen
	if invitation != "" {
		mode = RegistrationInvite
	}
	registrations(mode).Inc()
	s, err := w.startSession(ctx, u, "")
	if err != nil {
		w.internal(ctx, "start session", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, w.sessionView(httpapi.Context(ctx), s, u))
}

// checkNewUser checks the email and password of a new user.
func checkNewUser(email, pw string) []httpapi.Issue {
	var issues []httpapi.Issue
	e := strings.TrimSpace(email)
	switch {
	case e == "" && email != "":
		issues = append(issues, httpapi.Issue{Path: "email", Message: "must not be blank"})
	case e != "" && (!strings.Contains(e, "@") || strings.HasPrefix(e, "@") || strings.HasSuffix(e, "@")):
		issues = append(issues, httpapi.Issue{Path: "email", Message: "must be an email address"})
	case len(e) > storage.MaxEmail:
		issues = append(issues, httpapi.Issue{Path: "email", Message: "must be at most 320 characters"})
	}
	if pw != "" {
		if msg := checkPassword(pw); msg != "" {
			issues = append(issues, httpapi.Issue{Path: "password", Message: msg})
		}
	}
	return issues
}

// POST /auth/login {email, password}
func (w *Web) login(ctx *fasthttp.RequestCtx) {
	if !w.limit(ctx, "login", w.opts.LoginLimit) {
		return
	}
	var email, pw string
	if issues := decodeStrings(ctx.PostBody(), map[string]*string{"email": &email, "password": &pw}, "email", "password"); len(issues) > 0 {
		httpapi.WriteError(ctx, badRequest(issues...))
		return
	}
	ip := w.guard.ClientIP(ctx)
	// The address's failures count per client as the limits do: an IPv6
	// client by its /64, which it could otherwise rotate through.
	acctKey, ipKey := "user|"+strings.ToLower(strings.TrimSpace(email)), "ip|"+w.guard.ClientKey(ctx)
	if wait := max(w.failures.wait(acctKey), w.failures.wait(ipKey)); wait > 0 {
		w.log.Info("login throttled", "ip", ip)
		loginsThrottled.Inc()
		httpapi.RateLimited(ctx, wait)
		return
	}
	if !w.failures.begin(acctKey, ipKey) {
		// Another attempt for this account or from this address is being
		// checked: one at a time, so a burst cannot outrun the count.
		loginsThrottled.Inc()
		httpapi.RateLimited(ctx, time.Second)
		return
	}
	defer w.failures.end(acctKey, ipKey)
	hctx, cancel := context.WithTimeout(bgCtx, hashWait)
	defer cancel()
	u, err := w.db.UserByEmail(httpapi.Context(ctx), email)
	hash := u.PasswordHash
	if err != nil {
		hash = w.hash.dummy // the same work whether or not the user exists
	}
	ok, stale, verr := w.hash.verify(hctx, hash, pw)
	if verr != nil && !errors.Is(verr, errBadHash) {
		w.internal(ctx, "verify password", verr)
		return
	}
	if err != nil || !ok {
		w.failures.fail(acctKey)
		w.failures.fail(ipKey)
		w.log.Info("login failed", "ip", ip, "known_user", err == nil)
		loginsFailed.Inc()
		httpapi.WriteError(ctx, unauthorized("wrong email or password"))
		return
	}
	// Only the account's count clears: a success on one's own account
	// must not reset the address's count between guesses at others'.
	w.failures.succeed(acctKey)
	if stale {
		// The cost was raised since this hash was made: remake it now
		// that the password is at hand. Sessions stay (SetPassword would
		// end them), so write it as a plain update.
		if h, err := w.hash.hash(hctx, pw); err == nil {
			w.rehash(httpapi.Context(ctx), u, h)
		}
	}
	s, err := w.startSession(ctx, u, "")
	if err != nil {
		w.internal(ctx, "start session", err)
		return
	}
	w.log.Info("user signed in", "user", u.ID, "session", s.ID, "ip", ip)
	loginsOK.Inc()
	writeJSON(ctx, fasthttp.StatusOK, w.sessionView(httpapi.Context(ctx), s, u))
}

// rehash stores a hash remade with the current cost. It cannot use
// SetPassword (which ends sessions): the password did not change.
func (w *Web) rehash(ctx context.Context, u storage.User, h string) {
	if err := w.db.RehashPassword(ctx, u.ID, u.PasswordHash, h); err != nil {
		w.log.Error("cannot store a remade password hash", "user", u.ID, "err", err)
	}
}

// POST /auth/logout: ends the session and clears the cookie. Without a
// session it only clears the cookie.
func (w *Web) logout(ctx *fasthttp.RequestCtx) {
	if s, _, ok := w.current(ctx); ok {
		if !w.csrfOK(ctx, s) {
			httpapi.WriteError(ctx, csrfRefused("missing or wrong X-CSRF-Token"))
			return
		}
		if err := w.db.DeleteSession(httpapi.Context(ctx), s.ID); err != nil {
			w.internal(ctx, "end session", err)
			return
		}
		w.log.Info("user signed out", "user", s.User, "session", s.ID)
	}
	w.setCookie(ctx, "", 0)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// signedIn is the session of a write that needs one: 401 without it, 403
// without its CSRF token.
func (w *Web) signedIn(ctx *fasthttp.RequestCtx) (storage.Session, storage.User, bool) {
	s, u, ok := w.current(ctx)
	if !ok {
		httpapi.WriteError(ctx, unauthorized("not signed in, or the session ended"))
		return s, u, false
	}
	if string(ctx.Method()) != fasthttp.MethodGet && !w.csrfOK(ctx, s) {
		httpapi.WriteError(ctx, csrfRefused("missing or wrong X-CSRF-Token"))
		return s, u, false
	}
	return s, u, true
}

// POST /auth/link {invitation}: the signed-in user joins the invitation's
// account, which the session then shows.
func (w *Web) link(ctx *fasthttp.RequestCtx) {
	if !w.limit(ctx, "link", w.opts.LinkLimit) {
		return
	}
	s, _, ok := w.signedIn(ctx)
	if !ok {
		return
	}
	var invitation string
	if issues := decodeStrings(ctx.PostBody(), map[string]*string{"invitation": &invitation}, "invitation"); len(issues) > 0 {
		httpapi.WriteError(ctx, badRequest(issues...))
		return
	}
	u, iv, err := w.db.RedeemInvite(httpapi.Context(ctx), strings.TrimSpace(invitation), s.User)
	switch {
	case errors.Is(err, storage.ErrInviteInvalid):
		httpapi.WriteError(ctx, badRequest(httpapi.Issue{Path: "invitation", Message: "is invalid, used, expired or for another email"}))
		return
	case err != nil:
		w.internal(ctx, "redeem invitation", err)
		return
	}
	if s, err = w.db.SetSessionAccount(httpapi.Context(ctx), s.ID, iv.Account); err != nil {
		w.internal(ctx, "switch account", err)
		return
	}
	w.log.Info("user linked", "user", u.ID, "account", iv.Account, "role", iv.Role, "invite", iv.ID)
	writeJSON(ctx, fasthttp.StatusOK, w.sessionView(httpapi.Context(ctx), s, u))
}

// POST /auth/password {current_password, new_password}: every session of
// the user ends, this browser gets a new one.
func (w *Web) password(ctx *fasthttp.RequestCtx) {
	s, u, ok := w.signedIn(ctx)
	if !ok {
		return
	}
	var cur, next string
	issues := decodeStrings(ctx.PostBody(), map[string]*string{"current_password": &cur, "new_password": &next}, "current_password", "new_password")
	if next != "" {
		if msg := checkPassword(next); msg != "" {
			issues = append(issues, httpapi.Issue{Path: "new_password", Message: msg})
		}
	}
	if len(issues) > 0 {
		httpapi.WriteError(ctx, badRequest(issues...))
		return
	}
	key := "user|" + strings.ToLower(u.Email)
	if wait := w.failures.wait(key); wait > 0 {
		httpapi.RateLimited(ctx, wait)
		return
	}
	if !w.failures.begin(key) {
		httpapi.RateLimited(ctx, time.Second)
		return
	}
	defer w.failures.end(key)
	hctx, cancel := context.WithTimeout(bgCtx, hashWait)
	defer cancel()
	if ok, _, err := w.hash.verify(hctx, u.PasswordHash, cur); err != nil || !ok {
		w.failures.fail(key)
		httpapi.WriteError(ctx, badRequest(httpapi.Issue{Path: "current_password", Message: "is wrong"}))
		return
	}
	h, err := w.hash.hash(hctx, next)
	if err != nil {
		w.internal(ctx, "hash password", err)
		return
	}
	if u, err = w.db.SetPassword(httpapi.Context(ctx), u.ID, h); err != nil {
		w.internal(ctx, "set password", err)
		return
	}
	w.log.Info("password changed; every session ended", "user", u.ID)
	passwordChanges.Inc()
	ns, err := w.startSession(ctx, u, s.Account)
	if err != nil {
		w.internal(ctx, "start session", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, w.sessionView(httpapi.Context(ctx), ns, u))
}

// GET /auth/session: the signed-in user, or 401.
func (w *Web) session(ctx *fasthttp.RequestCtx) {
	s, u, ok := w.current(ctx)
	if !ok {
		httpapi.WriteError(ctx, unauthorized("not signed in, or the session ended"))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, w.sessionView(httpapi.Context(ctx), s, u))
}
