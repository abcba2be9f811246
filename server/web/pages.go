package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
)

// The dashboard's pages are html/template files (every value escaped for
// its context) that draw the frame; assets/app.js fills them in from the
// JSON routes, building the DOM with textContent, never HTML from data.
// Every asset is embedded: the appliance fetches nothing at run time.

//go:embed pages/*.html
var pageFS embed.FS

//go:embed assets
var assetFS embed.FS

// csp allows this origin's scripts and styles only: no inline script, no
// inline style attribute, no framing (frame-ancestors), no <base>, forms
// only to this origin. Style properties set from script (CSSOM) are not
// inline styles and stay allowed.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders are set on every page and asset.
func securityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

// hsts is set on pages served over TLS (RFC 6797): Options.HSTS
// (http.hsts_max_age, a year by default), this host only.
func (w *Web) hsts(ctx *fasthttp.RequestCtx) {
	if w.opts.HSTS != "" && w.overTLS(ctx) {
		ctx.Response.Header.Set("Strict-Transport-Security", w.opts.HSTS)
	}
}

// asset is an embedded file served under a name holding its content's
// hash, so it can be cached for good.
type asset struct {
	body  []byte
	ctype string
}

// pageDef is one page: its template file, its title, whether it needs a
// session, and the role it needs.
type pageDef struct {
	path, file, title, nav string
	signedIn               bool
	need                   need
}

var pageDefs = []pageDef{
	{path: "/login", file: "login.html", title: "Sign in", need: -1},
	{path: "/docs", file: "docs.html", title: "API reference", need: -1},
	{path: "/register", file: "register.html", title: "Create your user", need: -1},
	{path: "/link", file: "link.html", title: "Join an account", signedIn: true, need: -1},
	{path: "/dashboard", file: "overview.html", title: "Overview", nav: "overview", signedIn: true},
	{path: "/dashboard/validate", file: "validate.html", title: "Validate", nav: "validate", signedIn: true},
	{path: "/dashboard/batch", file: "batch.html", title: "Batch", nav: "batch", signedIn: true},
	{path: "/dashboard/history", file: "history.html", title: "History", nav: "history", signedIn: true},
	{path: "/dashboard/accuracy", file: "accuracy.html", title: "Accuracy", nav: "accuracy", signedIn: true},
	{path: "/dashboard/keys", file: "keys.html", title: "API keys", nav: "keys", signedIn: true, need: needOwner},
	{path: "/dashboard/webhooks", file: "webhooks.html", title: "Webhooks", nav: "webhooks", signedIn: true, need: needOwner},
	{path: "/dashboard/team", file: "team.html", title: "Team", nav: "team", signedIn: true},
	{path: "/dashboard/settings", file: "settings.html", title: "Settings", nav: "settings", signedIn: true, need: -1},
	{path: "/dashboard/operator", file: "operator.html", title: "Operator", nav: "operator", signedIn: true, need: needOperator},
}

// navItem is a link of the dashboard's navigation.
type navItem struct {
	Href, Label, Key string
}

// pageData is what a page's template sees.
type pageData struct {
	Title, Page  string
	CSS, JS      string
	CSRF         string
	Signed       bool
	User         UserView
	Account      string
	AccountName  string
	Role         string
	Owner        bool
	Operator     bool
	Nav          []navItem
	Registration string
	Next         string
	Denied       string
}

// site holds the parsed pages and assets.
type site struct {
	pages  map[string]*template.Template
	assets map[string]asset
	css    string
	js     string
}

func loadSite() (*site, error) {
	s := &site{pages: map[string]*template.Template{}, assets: map[string]asset{}}
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(p)
		name := strings.TrimSuffix(path.Base(p), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ctype := mime.TypeByExtension(ext)
		if ext == ".js" {
			ctype = "text/javascript; charset=utf-8"
		}
		s.assets[name] = asset{body: b, ctype: ctype}
		switch path.Base(p) {
		case "app.css":
			s.css = "/assets/" + name
		case "app.js":
			s.js = "/assets/" + name
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	base, err := template.ParseFS(pageFS, "pages/layout.html")
	if err != nil {
		return nil, err
	}
	for _, p := range pageDefs {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if t, err = t.ParseFS(pageFS, "pages/"+p.file); err != nil {
			return nil, err
		}
		s.pages[p.path] = t
	}
	return s, nil
}

// registerPages adds the pages and /assets/.
func (w *Web) registerPages(r *router.Router) {
	for _, p := range pageDefs {
		r.GET(p.path, w.page(p))
	}
	r.GET("/assets/{name}", w.asset)
	r.GET("/favicon.ico", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNoContent) })
	r.GET("/", root)
}

// root answers GET /: a browser (text/html named in its Accept) goes to
// the dashboard, which sends it on to /login when it is not signed in; an
// API client (curl's */*, application/json, no Accept) gets the 404
// envelope, as for any path the API does not serve.
func root(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Vary", "Accept")
	if acceptsHTML(string(ctx.Request.Header.Peek(fasthttp.HeaderAccept))) {
		seeOther(ctx, "/dashboard")
		return
	}
	httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "no such endpoint: /"})
}

// acceptsHTML reports whether an Accept header names text/html (or
// application/xhtml+xml) with a quality above zero (RFC 9110 §12.5.1). A
// wildcard does not count: every client accepts that.
func acceptsHTML(accept string) bool {
	for _, r := range strings.Split(accept, ",") {
		typ, params, _ := strings.Cut(r, ";")
		typ = strings.ToLower(strings.TrimSpace(typ))
		if typ != "text/html" && typ != "application/xhtml+xml" {
			continue
		}
		zero := false
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				v = strings.TrimRight(strings.TrimSpace(v), "0")
				zero = v == "0." || v == "0" || v == ""
			}
		}
		if !zero {
			return true
		}
	}
	return false
}

func (w *Web) asset(ctx *fasthttp.RequestCtx) {
	securityHeaders(ctx)
	name, _ := ctx.UserValue("name").(string)
	a, ok := w.site.assets[name]
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	ctx.Response.Header.SetContentType(a.ctype)
	ctx.Response.Header.Set("Cache-Control", "public, max-age=31536000, immutable")
	ctx.SetBody(a.body)
}

// safeNext is the path to go to after signing in: only a local dashboard
// or link path, never another site (an open redirect).
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.Contains(next, "\\") || !strings.HasPrefix(u.Path, "/") {
		return "/dashboard"
	}
	p := path.Clean(u.Path)
	if p != "/dashboard" && !strings.HasPrefix(p, "/dashboard/") && p != "/link" {
		return "/dashboard"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// page serves one page. A page that needs a session sends a browser
// without one to /login, with the way back in ?next=.
func (w *Web) page(p pageDef) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		securityHeaders(ctx)
		w.hsts(ctx)
		ctx.Response.Header.Set("Cache-Control", "no-store")
		d := pageData{Title: p.title, Page: p.nav, CSS: w.site.css, JS: w.site.js, Registration: w.opts.Registration}
		if d.Page == "" {
			d.Page = strings.TrimPrefix(p.path, "/")
		}
		s, u, ok := w.current(ctx)
		if ok {
			d.Signed = true
			v := w.sessionView(httpapi.Context(ctx), s, u)
			d.CSRF, d.User, d.Account, d.Role = v.CSRFToken, v.User, v.Account, v.Role
			if a, err := w.db.GetAccount(httpapi.Context(ctx), s.Account); err == nil {
				d.AccountName = a.Name
			}
			d.Operator = u.Operator
			r, _ := u.Role(s.Account)
			d.Owner = r == storage.RoleOwner || u.Operator
			d.Nav = navFor(d)
		}
		switch {
		case p.signedIn && !ok:
			seeOther(ctx, "/login?next="+url.QueryEscape(string(ctx.URI().RequestURI())))
			return
		case !p.signedIn && ok && p.path == "/login":
			seeOther(ctx, safeNext(string(ctx.QueryArgs().Peek("next"))))
			return
		case ok && p.need >= 0 && s.Account == "" && !(p.need == needOperator && u.Operator):
			// Signed in but in no account yet: joining one is all to do.
			seeOther(ctx, "/link")
			return
		case ok && p.need >= 0:
			if aerr := allowed(p.need, s, u); aerr != nil {
				ctx.SetStatusCode(fasthttp.StatusForbidden)
				d.Denied = aerr.Message
			}
		}
		d.Next = safeNext(string(ctx.QueryArgs().Peek("next")))
		var buf bytes.Buffer
		if err := w.site.pages[p.path].ExecuteTemplate(&buf, "layout", d); err != nil {
			w.internal(ctx, "render page", err)
			return
		}
		ctx.Response.Header.SetContentType("text/html; charset=utf-8")
		ctx.SetBody(buf.Bytes())
	}
}

// seeOther answers 303 See Other to path, a path of this server, as a
// relative Location (RFC 9110 §10.2.2 allows one; browsers resolve it
// against the page's own address). fasthttp's ctx.Redirect would make it
// absolute with the request's Host header, which the client chose: a
// request with Host: evil.test would be sent to evil.test.
func seeOther(ctx *fasthttp.RequestCtx, path string) {
	ctx.Response.Header.Set(fasthttp.HeaderLocation, path)
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}

// navFor is the navigation for the user's role.
func navFor(d pageData) []navItem {
	nav := []navItem{{"/dashboard", "Overview", "overview"}}
	if d.Account != "" {
		nav = append(nav, navItem{"/dashboard/validate", "Validate", "validate"},
			navItem{"/dashboard/batch", "Batch", "batch"},
			navItem{"/dashboard/history", "History", "history"},
			navItem{"/dashboard/accuracy", "Accuracy", "accuracy"})
		if d.Owner {
			nav = append(nav, navItem{"/dashboard/keys", "API keys", "keys"},
				navItem{"/dashboard/webhooks", "Webhooks", "webhooks"})
		}
		nav = append(nav, navItem{"/dashboard/team", "Team", "team"})
	}
	if d.Operator {
		nav = append(nav, navItem{"/dashboard/operator", "Operator", "operator"})
	}
	return append(nav, navItem{"/dashboard/settings", "Settings", "settings"})
}
