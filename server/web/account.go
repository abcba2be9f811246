package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// EgressActions are the egress pool's operator actions (cmd/verifyd
// builds them over the pool; the admin socket serves the same ones). Drain
// and Enable read the address from the route's "addr" user value.
type EgressActions struct {
	List, Drain, Enable admin.HandlerFunc
}

// Actions are what the dashboard's JSON routes do, taken from the
// packages that own them so that a change made in the browser and one
// made with verifyctl run the same code.
type Actions struct {
	Admin  admin.Handlers
	Hooks  admin.HookHandlers
	Egress EgressActions
	// Jobs lists an account's jobs, newest first (server.Server.AccountJobs).
	Jobs func(ctx context.Context, account string, limit int) (any, error)
	// Accuracy measures the outcomes of an account, or of every account
	// (""), over days days (server.Server.AccuracyOf); nil: none.
	Accuracy func(ctx context.Context, account string, days, top int) (any, error)
}

// need is the role a dashboard route needs in the session's account.
type need int

const (
	needMember   need = iota // any role in the account
	needOwner                // owner of the account
	needOperator             // the operator flag (verifyctl users operator)
)

// apiSession is the httpapi.SessionAuth of the /v1 routes: a browser
// session may call them like an API key with every scope, for the
// account it shows, as long as the user is still a member (or an
// operator). A write needs the CSRF token and no cross-site signal.
func (w *Web) apiSession(ctx *fasthttp.RequestCtx) (httpapi.Session, bool, *httpapi.APIError) {
	if len(ctx.Request.Header.Cookie(w.cookieName(ctx))) == 0 {
		return httpapi.Session{}, false, nil
	}
	s, u, ok := w.current(ctx)
	if !ok {
		return httpapi.Session{}, false, unauthorized("not signed in, or the session ended")
	}
	if isWrite(ctx) {
		if reason := w.crossSiteOrigin(ctx); reason != "" {
			return httpapi.Session{}, false, csrfRefused("cross-site request refused: " + reason)
		}
		if !w.csrfOK(ctx, s) {
			return httpapi.Session{}, false, csrfRefused("missing or wrong X-CSRF-Token")
		}
	}
	if aerr := allowed(needMember, s, u); aerr != nil {
		return httpapi.Session{}, false, aerr
	}
	return httpapi.Session{Account: s.Account, LimitKey: "user|" + u.ID}, true, nil
}

func isWrite(ctx *fasthttp.RequestCtx) bool {
	m := string(ctx.Method())
	return m != fasthttp.MethodGet && m != fasthttp.MethodHead
}

// allowed says whether the user may use a route that needs n in the
// session's account. Operators act as owners on any account.
func allowed(n need, s storage.Session, u storage.User) *httpapi.APIError {
	if n == needOperator {
		if !u.Operator {
			return forbidden("only operators may do this", "not_operator")
		}
		return nil
	}
	if s.Account == "" {
		return forbidden("your user is in no account yet: redeem an invitation", "no_account")
	}
	role, member := u.Role(s.Account)
	switch {
	case u.Operator:
		return nil
	case !member:
		return forbidden("you are no longer a member of this account", "not_member")
	case n == needOwner && role != storage.RoleOwner:
		return forbidden("only the account's owners may do this", "not_owner")
	}
	return nil
}

// dashFunc is a dashboard JSON route, run once the session and the role
// are checked.
type dashFunc func(ctx *fasthttp.RequestCtx, s storage.Session, u storage.User) (any, error)

// dash wraps a dashboard JSON route: the session (401), on a write the
// same-site checks and the CSRF token (403 csrf), the role (403), the
// query (400: a parameter outside query, or one given twice, as on /v1:
// httpapi.QueryIssues), then h; its answer is JSON, never cached.
func (w *Web) dash(n need, h dashFunc, query ...string) fasthttp.RequestHandler {
	inner := func(ctx *fasthttp.RequestCtx) {
		s, u, ok := w.signedIn(ctx)
		if !ok {
			return
		}
		if aerr := allowed(n, s, u); aerr != nil {
			httpapi.WriteError(ctx, aerr)
			return
		}
		if issues := httpapi.QueryIssues(ctx.QueryArgs(), query...); issues != nil {
			httpapi.WriteError(ctx, badRequest(issues...))
			return
		}
		admin.WithActor(ctx, u.ID)
		v, err := h(ctx, s, u)
		if err != nil {
			w.writeErr(ctx, err)
			return
		}
		ctx.Response.Header.Set("Cache-Control", "no-store")
		ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
		admin.WriteJSON(ctx, v)
	}
	return func(ctx *fasthttp.RequestCtx) {
		if isWrite(ctx) {
			w.browserWrite(inner)(ctx)
			return
		}
		inner(ctx)
	}
}

// shared serves an admin handler on the session's account: the handler
// reads the account from the "id" user value.
func (w *Web) shared(n need, h admin.HandlerFunc) fasthttp.RequestHandler {
	return w.dash(n, func(ctx *fasthttp.RequestCtx, s storage.Session, _ storage.User) (any, error) {
		ctx.SetUserValue("id", s.Account)
		return h(ctx)
	})
}

// hook serves a webhook admin handler on the session's account: those
// read it from ?account=, which is set here (a browser that sends one is
// refused: it is not among query).
func (w *Web) hook(h admin.HandlerFunc, query ...string) fasthttp.RequestHandler {
	return w.dash(needOwner, func(ctx *fasthttp.RequestCtx, s storage.Session, _ storage.User) (any, error) {
		ctx.QueryArgs().Set("account", s.Account)
		return h(ctx)
	}, query...)
}

// writeErr answers a shared handler's error in the envelope; an internal
// error is logged, and its text never reaches the browser.
func (w *Web) writeErr(ctx *fasthttp.RequestCtx, err error) {
	var ae *httpapi.APIError
	if errors.As(err, &ae) {
		httpapi.WriteError(ctx, ae)
		return
	}
	e := admin.ErrorOf(err)
	if e.Code == adminapi.CodeInternal {
		w.internal(ctx, "dashboard", err)
		return
	}
	httpapi.WriteError(ctx, &httpapi.APIError{Code: e.Code, Message: e.Message, Details: e.Details})
}

// Register adds the routes of /auth/*, the dashboard's JSON routes
// (/dashboard/api/*) and pages, and lets sessions use the /v1 routes.
func (w *Web) Register(r *router.Router, a Actions) {
	r.POST("/auth/register", w.browserWrite(w.register))
	r.POST("/auth/login", w.browserWrite(w.login))
	r.POST("/auth/logout", w.browserWrite(w.logout))
	r.POST("/auth/link", w.browserWrite(w.link))
	r.POST("/auth/password", w.browserWrite(w.password))
	r.POST("/auth/account", w.browserWrite(w.switchAccount))
	r.GET("/auth/session", w.session)
	w.guard.SetSessionAuth(w.apiSession)

	const p = "/dashboard/api"
	r.GET(p+"/account", w.shared(needMember, a.Admin.GetAccount))
	r.GET(p+"/stats", w.dash(needMember, w.stats, "days"))
	r.GET(p+"/jobs", w.dash(needMember, func(ctx *fasthttp.RequestCtx, s storage.Session, _ storage.User) (any, error) {
		n, err := intArg(ctx, "limit", 20, 1, 1000)
		if err != nil {
			return nil, err
		}
		return a.Jobs(httpapi.Context(ctx), s.Account, n)
	}, "limit"))
	r.GET(p+"/outcome-settings", w.shared(needOwner, a.Admin.OutcomeSettings))
	r.POST(p+"/outcome-settings", w.shared(needOwner, a.Admin.SetOutcomeSettings))
	r.POST(p+"/outcomes/delete", w.dash(needOwner, func(ctx *fasthttp.RequestCtx, s storage.Session, u storage.User) (any, error) {
		if len(ctx.PostBody()) > 0 && string(ctx.PostBody()) != "{}" {
			return nil, badRequest(httpapi.Issue{Message: "the body must be {}"})
		}
		n, err := w.db.DeleteOutcomes(httpapi.Context(ctx), s.Account)
		if err != nil {
			return nil, err
		}
		w.log.Info("outcomes deleted", "account", s.Account, "n", n, "user", u.ID)
		return map[string]int{"deleted": n}, nil
	}))
	r.GET(p+"/members", w.dash(needMember, w.members))
	r.POST(p+"/members/{user}/role", w.dash(needOwner, w.setRole))
	r.GET(p+"/invites", w.shared(needOwner, a.Admin.ListInvites))
	r.POST(p+"/invites", w.shared(needOwner, a.Admin.CreateInvite))
	r.POST(p+"/invites/{invite}/revoke", w.dash(needOwner, w.revokeInvite))
	r.GET(p+"/keys", w.shared(needOwner, a.Admin.ListKeys))
	r.POST(p+"/keys", w.shared(needOwner, a.Admin.MintKey))
	r.POST(p+"/keys/{prefix}/revoke", w.dash(needOwner, func(ctx *fasthttp.RequestCtx, s storage.Session, _ storage.User) (any, error) {
		// Only the session's account's keys: another's is not found.
		prefix, _ := ctx.UserValue("prefix").(string)
		if k, err := w.db.LookupKey(httpapi.Context(ctx), prefix); err == nil && k.Account != s.Account {
			return nil, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no key with that prefix in this account"}
		}
		return a.Admin.RevokeKey(ctx)
	}))
	r.GET(p+"/webhook-secret", w.shared(needOwner, a.Admin.WebhookSecret))
	r.POST(p+"/webhook-secret/rotate", w.shared(needOwner, a.Admin.RotateWebhookSecret))
	r.GET(p+"/webhooks/outbox", w.hook(a.Hooks.Outbox, "limit"))
	r.GET(p+"/webhooks/dead-letters", w.hook(a.Hooks.DeadLetters, "limit"))
	r.GET(p+"/webhooks/attempts", w.hook(a.Hooks.Attempts, "limit"))
	r.POST(p+"/webhooks/events/{id}/resend", w.hook(a.Hooks.Resend))
	r.POST(p+"/webhooks/test", w.hook(func(ctx *fasthttp.RequestCtx) (any, error) {
		// The latest payload goes to the URL it was made for: an owner
		// does not choose where (the admin socket may).
		if len(ctx.PostBody()) > 0 && string(ctx.PostBody()) != "{}" {
			return nil, badRequest(httpapi.Issue{Message: "the body must be {}"})
		}
		ctx.Request.SetBodyString(`{"account":` + strconv.Quote(string(ctx.QueryArgs().Peek("account"))) + `}`)
		return a.Hooks.Test(ctx)
	}))
	r.GET(p+"/operator/egress", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
		return a.Egress.List(ctx)
	}))
	r.POST(p+"/operator/egress/{addr}/drain", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
		return a.Egress.Drain(ctx)
	}))
	r.POST(p+"/operator/egress/{addr}/enable", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
		return a.Egress.Enable(ctx)
	}))
	if a.Accuracy != nil {
		r.GET(p+"/operator/accuracy", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
			days, err := intArg(ctx, "days", 30, 1, 365)
			if err != nil {
				return nil, err
			}
			top, err := intArg(ctx, "top", 10, 1, 100)
			if err != nil {
				return nil, err
			}
			return a.Accuracy(httpapi.Context(ctx), "", days, top)
		}, "days", "top"))
	}
	r.GET(p+"/operator/accounts", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
		return a.Admin.ListAccounts(ctx)
	}))
	r.POST(p+"/operator/accounts/{id}/credits", w.dash(needOperator, func(ctx *fasthttp.RequestCtx, _ storage.Session, _ storage.User) (any, error) {
		return a.Admin.AdjustCredits(ctx)
	}))
	w.registerPages(r)
}

// intArg reads ?name= as an integer in [lo, hi], def when absent (given
// empty, it is checked: days= is a 400).
func intArg(ctx *fasthttp.RequestCtx, name string, def, lo, hi int) (int, error) {
	if !ctx.QueryArgs().Has(name) {
		return def, nil
	}
	n, err := strconv.Atoi(string(ctx.QueryArgs().Peek(name)))
	if err != nil || n < lo || n > hi {
		return 0, badRequest(httpapi.Issue{Path: name, Message: "must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi)})
	}
	return n, nil
}

// statsJSON is GET /dashboard/api/stats: the account's validations per
// UTC day and verdict, oldest day first, today included.
type statsJSON struct {
	Days []dayJSON `json:"days"`
}

type dayJSON struct {
	Day    string         `json:"day"` // YYYY-MM-DD
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
}

// GET /dashboard/api/stats?days=30
func (w *Web) stats(ctx *fasthttp.RequestCtx, s storage.Session, _ storage.User) (any, error) {
	days, err := intArg(ctx, "days", 30, 1, 366)
	if err != nil {
		return nil, err
	}
	dcs, err := w.db.DailyCounts(httpapi.Context(ctx), s.Account, days)
	if err != nil {
		return nil, err
	}
	out := statsJSON{Days: make([]dayJSON, 0, len(dcs))}
	for _, d := range dcs {
		c := d.Counts
		if c == nil {
			c = map[string]int{}
		}
		out.Days = append(out.Days, dayJSON{Day: d.Day.Format(time.DateOnly), Total: d.Total(), Counts: c})
	}
	return out, nil
}

// memberJSON is one of GET /dashboard/api/members: a user of the account.
type memberJSON struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Role     string `json:"role"`
	Operator bool   `json:"operator"`
	You      bool   `json:"you"`
}

// GET /dashboard/api/members
func (w *Web) members(ctx *fasthttp.RequestCtx, s storage.Session, u storage.User) (any, error) {
	us, err := w.db.Members(httpapi.Context(ctx), s.Account)
	if err != nil {
		return nil, err
	}
	out := struct {
		Members []memberJSON `json:"members"`
	}{Members: make([]memberJSON, 0, len(us))}
	for _, m := range us {
		r, _ := m.Role(s.Account)
		out.Members = append(out.Members, memberJSON{ID: m.ID, Email: m.Email, Role: string(r), Operator: m.Operator, You: m.ID == u.ID})
	}
	return out, nil
}

// POST /dashboard/api/members/{user}/role {"role": "owner"|"member"|""}:
// "" removes the user from the account. The last owner stays (409).
func (w *Web) setRole(ctx *fasthttp.RequestCtx, s storage.Session, u storage.User) (any, error) {
	var role string
	if issues := decodeStrings(ctx.PostBody(), map[string]*string{"role": &role}, "role"); len(issues) > 0 {
		return nil, badRequest(issues...)
	}
	r := storage.Role(role)
	if role != "" && !r.Valid() {
		return nil, badRequest(httpapi.Issue{Path: "role", Message: `must be "owner", "member" or "" (remove)`})
	}
	id, _ := ctx.UserValue("user").(string)
	m, err := w.db.GetUser(httpapi.Context(ctx), id)
	if _, member := m.Role(s.Account); err != nil || !member {
		return nil, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no such member of this account"}
	}
	before, _ := m.Role(s.Account)
	m, err = w.db.SetRole(httpapi.Context(ctx), s.Account, id, r)
	if errors.Is(err, storage.ErrLastOwner) {
		return nil, &httpapi.APIError{Code: httpapi.CodeConflict, Message: "the account must keep at least one owner"}
	}
	if err != nil {
		return nil, err
	}
	if before == storage.RoleOwner && r != storage.RoleOwner {
		// Invitations are made with their owner's authority: a demoted
		// or removed owner's pending ones go with it.
		if ivs, err := w.db.Invites(httpapi.Context(ctx), s.Account); err == nil {
			for _, iv := range ivs {
				if iv.CreatedBy == id {
					if _, err := w.db.RevokeInvite(httpapi.Context(ctx), s.Account, iv.ID); err != nil {
						w.log.Error("cannot revoke a demoted owner's invitation", "invite", iv.ID, "err", err)
					}
				}
			}
		}
	}
	w.log.Info("member role changed", "account", s.Account, "member", id, "role", role, "by", u.ID)
	return memberJSON{ID: m.ID, Email: m.Email, Role: role, Operator: m.Operator, You: m.ID == u.ID}, nil
}

// POST /dashboard/api/invites/{invite}/revoke
func (w *Web) revokeInvite(ctx *fasthttp.RequestCtx, s storage.Session, u storage.User) (any, error) {
	id, _ := ctx.UserValue("invite").(string)
	iv, err := w.db.RevokeInvite(httpapi.Context(ctx), s.Account, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no pending invitation with that id"}
	}
	if err != nil {
		return nil, err
	}
	w.log.Info("invitation revoked", "account", s.Account, "invite", iv.ID, "by", u.ID)
	return inviteJSON(iv), nil
}

func inviteJSON(iv storage.Invite) adminapi.Invite {
	return adminapi.Invite{ID: iv.ID, Account: iv.Account, Role: string(iv.Role), Email: iv.Email,
		CreatedBy: iv.CreatedBy, CreatedAt: iv.CreatedAt, ExpiresAt: iv.ExpiresAt}
}

// POST /auth/account {account}: the session shows another of the user's
// accounts (an operator: any account).
func (w *Web) switchAccount(ctx *fasthttp.RequestCtx) {
	s, u, ok := w.signedIn(ctx)
	if !ok {
		return
	}
	var account string
	if issues := decodeStrings(ctx.PostBody(), map[string]*string{"account": &account}, "account"); len(issues) > 0 {
		httpapi.WriteError(ctx, badRequest(issues...))
		return
	}
	if _, member := u.Role(account); !member {
		_, err := w.db.GetAccount(httpapi.Context(ctx), account)
		if !u.Operator || err != nil {
			httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no such account of yours"})
			return
		}
	}
	s, err := w.db.SetSessionAccount(httpapi.Context(ctx), s.ID, account)
	if err != nil {
		w.internal(ctx, "switch account", err)
		return
	}
	writeJSON(ctx, http.StatusOK, w.sessionView(httpapi.Context(ctx), s, u))
}
