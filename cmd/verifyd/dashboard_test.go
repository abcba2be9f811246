package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
)

// xssAddress is a valid address (a quoted local part, RFC 5321 §4.1.2)
// that runs script wherever a page writes it as HTML.
const xssAddress = `"<img src=x onerror=alert(1)>"@x.test`

// chromium finds the browser: $CHROMIUM, else chromium on $PATH. Without
// one the test is skipped, unless VERIFYD_BROWSER_TESTS=require (make
// test, which installs Debian's chromium when missing) makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("VERIFYD_BROWSER_TESTS") == "require" {
		t.Fatal("no chromium: make test installs Debian's chromium when missing (make browser)")
	}
	t.Skip("no chromium on PATH (make browser installs it)")
	return ""
}

// tab is a headless Chromium tab driven by chromedp. Every JavaScript
// dialog the page opens is recorded and accepted: an alert() is what an
// injected script would call.
type tab struct {
	t       *testing.T
	ctx     context.Context
	base    string
	shots   string // where screenshots go
	mu      sync.Mutex
	dialogs []string
}

func newTab(t *testing.T, base string) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	tb := &tab{t: t, ctx: ctx, base: base, shots: os.Getenv("VERIFYD_SCREENSHOTS")}
	if tb.shots == "" {
		tb.shots = t.TempDir()
	}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("cannot start chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for e, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(e.Type)+": "+e.Message)
			tb.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return tb
}

// do runs actions, failing the test on error.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v (at %s)", what, err, tb.url())
	}
}

func (tb *tab) url() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	u, _ := chromedp.Run(ctx, chromedp.Location())
	return u
}

// open navigates to path and waits for its body.
func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.do("open "+path, chromedp.Navigate(tb.base+path), chromedp.WaitReady(chromedp.CSS("body")))
}

// eval evaluates a JavaScript expression; a promise is awaited.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// waitJS polls expr until it is true, for up to within.
func (tb *tab) waitJS(what, expr string, within time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body := eval[string](tb, "(document.querySelector('main') ? document.querySelector('main').innerText : document.body.innerText) + '\\n[toast] ' + ((document.querySelector('#toast') || {}).textContent || '')")
			tb.t.Fatalf("%s: not within %v (%s, %v); the page says:\n%s", what, within, tb.url(), err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf("(document.querySelector(%q) || {textContent: ''}).textContent", sel))
}

// fill sets an input's value by typing it.
func (tb *tab) fill(sel, value string) {
	tb.t.Helper()
	tb.do("fill "+sel, chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf("document.querySelector(%q).value = ''", sel)),
		chromedp.SendKeys(chromedp.CSS(sel), value))
}

// choose picks an option of a select, as a user would.
func (tb *tab) choose(sel, value string) {
	tb.t.Helper()
	tb.do("choose "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		"(s => { s.value = %q; s.dispatchEvent(new Event('change')) })(document.querySelector(%q))", value, sel)))
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// shot checks the page is usable by keyboard and saves a full-page
// screenshot as name.png.
func (tb *tab) shot(name string) { tb.shotOf(name, chromedp.FullScreenshot(100)) }

// shotTop is shot of the window only, for a page too long to show whole
// (the API reference runs to some 30,000 pixels).
func (tb *tab) shotTop(name string) { tb.shotOf(name, chromedp.CaptureScreenshot()) }

func (tb *tab) shotOf(name string, capture chromedp.Action[[]byte]) {
	tb.t.Helper()
	tb.accessible(name)
	time.Sleep(300 * time.Millisecond) // let the last paint land
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, capture)
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tb.shots, name+".png"), buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// accessible checks every control of the page has a name a screen reader
// reads (a <label>, aria-label or text), every control can take focus,
// and a focused control shows an outline.
func (tb *tab) accessible(where string) {
	tb.t.Helper()
	bad := eval[[]string](tb, `[...document.querySelectorAll("input:not([type=hidden]), select, textarea, button, a[href]")]
		.filter(e => e.offsetParent !== null)
		.filter(e => !((e.labels && e.labels.length) || e.getAttribute("aria-label") || (e.textContent || "").trim()) || e.tabIndex < 0)
		.map(e => e.outerHTML.slice(0, 120))`)
	if len(bad) > 0 {
		tb.t.Errorf("%s: controls without a name or out of the tab order: %q", where, bad)
	}
	// From the skip link, the page's first stop, one Tab as a keyboard
	// user presses it: the next control must show where focus is.
	tb.do("tab", chromedp.Evaluate[chromedp.Void](`document.querySelector(".skip").focus()`), chromedp.KeyEvent(kb.Tab))
	outline := eval[string](tb, `(() => { const e = document.activeElement; const s = getComputedStyle(e);
		return e.tagName + " " + s.outlineStyle + " " + s.outlineWidth })()`)
	if f := strings.Fields(outline); len(f) != 3 || f[0] == "BODY" || f[1] == "none" || f[2] == "0px" {
		tb.t.Errorf("%s: the focused control shows no outline (%s)", where, outline)
	}
}

// inert checks the page ran nothing an address carried: no dialog and
// no <img> or onerror attribute made from data.
func (tb *tab) inert(where string) {
	tb.t.Helper()
	imgs := eval[int](tb, `document.querySelectorAll("main img, [onerror]").length`)
	tb.mu.Lock()
	d := append([]string(nil), tb.dialogs...)
	tb.mu.Unlock()
	var alerts []string
	for _, s := range d {
		if strings.HasPrefix(s, "alert") {
			alerts = append(alerts, s)
		}
	}
	if imgs != 0 || len(alerts) != 0 {
		tb.t.Fatalf("%s: the XSS address ran: %d <img>/onerror elements, dialogs %q", where, imgs, alerts)
	}
}

// cookie is the session cookie, checked for HttpOnly and SameSite=Strict.
func (tb *tab) cookie() string {
	tb.t.Helper()
	res, err := chromedp.Call(tb.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{tb.base}})
	if err != nil {
		tb.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "verifyd_session" {
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				tb.t.Fatalf("session cookie %+v: want HttpOnly and SameSite=Strict", c)
			}
			return c.Value
		}
	}
	return ""
}

// TestDashboardEndToEnd drives the dashboard in headless Chromium as a
// new customer would: register with an invitation, sign in, mint a key
// and use it, revoke it, validate the XSS address and verify its receipt
// in the browser, upload a 1,000-address batch and watch it to 100 %,
// download its CSV, find a failed webhook in the dead-letter queue,
// re-send it and fire a test event, use the operator view, and sign out.
// It saves a screenshot of every page (VERIFYD_SCREENSHOTS=dir keeps them:
// make screenshots).
func TestDashboardEndToEnd(t *testing.T) {
	run := batchWorld(t, 0)
	dir := t.TempDir()
	in := startIn(t, dir, batchConfig(run, `retry_schedule = ["200ms"]
give_up_after = "1s"
`, "")+inviteAuth)
	ctx := context.Background()
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	add := int64(5000)
	if _, err := ac.AdjustCredits(ctx, acct.ID, adminapi.AdjustCredits{Add: &add, Note: "browser test"}); err != nil {
		t.Fatal(err)
	}
	iv, err := ac.CreateInvite(ctx, acct.ID, adminapi.CreateInvite{Role: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, in.base)
	const email, pw = "ann@example.test", "correct horse battery staple"

	// --- register with the invitation (invite mode)
	tb.open("/register?invitation=" + iv.Token)
	tb.waitJS("invitation filled in", `document.querySelector("#invitation").value.startsWith("inv_")`, 10*time.Second)
	tb.fill("#email", email)
	tb.fill("#password", pw)
	tb.shot("register")
	tb.click(`#register-form button[type=submit]`)
	tb.waitJS("the overview after registering", `location.pathname === "/dashboard" && document.querySelector("#balance").textContent !== "…"`, 20*time.Second)

	// --- sign out, sign in
	tb.click("#logout")
	tb.waitJS("the login page", `location.pathname === "/login"`, 10*time.Second)
	tb.fill("#email", email)
	tb.fill("#password", "wrong password, surely")
	tb.click(`#login-form button[type=submit]`)
	tb.waitJS("a wrong password refused", `document.querySelector("#login-form .error").textContent.includes("wrong email or password")`, 10*time.Second)
	tb.fill("#password", pw)
	tb.shot("login")
	tb.click(`#login-form button[type=submit]`)
	tb.waitJS("the overview after signing in", `location.pathname === "/dashboard" && document.querySelector("#balance").textContent === "6,000"`, 20*time.Second)

	// --- mint a key, use it, revoke it
	tb.open("/dashboard/keys")
	tb.fill("#label", "signup form")
	tb.click(`#mint-form button[type=submit]`)
	tb.waitJS("the minted key", `document.querySelector("#minted-key").value.startsWith("svc_live_")`, 10*time.Second)
	key := eval[string](tb, `document.querySelector("#minted-key").value`)
	c := &client{t: t, base: in.base}
	if r := c.do("POST", "/v1/validate", key, `{"email":"ann@shop.test"}`); r.status != 200 || r.json(t)["status"] != "valid" {
		t.Fatalf("validate with the minted key: %d %s", r.status, r.body)
	}
	prefix := strings.SplitN(strings.TrimPrefix(key, "svc_live_"), "_", 2)[0]
	tb.open("/dashboard/keys")
	tb.waitJS("the key's last use", fmt.Sprintf(`[...document.querySelectorAll("#keys tr")].some(tr => tr.textContent.includes(%q) && /\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ.*\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/.test(tr.textContent))`, prefix), 10*time.Second)
	tb.shot("keys")
	tb.click(fmt.Sprintf(`button[aria-label="Revoke key %s"]`, prefix))
	tb.waitJS("the key revoked", fmt.Sprintf(`[...document.querySelectorAll("#keys tr")].some(tr => tr.textContent.includes(%q) && tr.textContent.includes("revoked"))`, prefix), 10*time.Second)
	if r := c.do("POST", "/v1/validate", key, `{"email":"ann@shop.test"}`); r.status != 401 {
		t.Fatalf("validate with the revoked key: %d %s", r.status, r.body)
	}

	// --- validate the XSS address; the receipt verifies in the browser
	tb.open("/dashboard/validate")
	tb.fill("#email", xssAddress)
	tb.click(`#validate-form button[type=submit]`)
	tb.waitJS("the receipt's signature verified", `document.querySelector("#r-sig").classList.contains("ok")`, 30*time.Second)
	if got := tb.text("#r-email"); got != xssAddress {
		t.Fatalf("the receipt shows %q, want the address as text", got)
	}
	tb.inert("validate")
	tb.fill("#email", "ann@shop.test")
	tb.click(`#validate-form button[type=submit]`)
	tb.waitJS("the second receipt", `document.querySelector("#r-email").textContent === "ann@shop.test" && document.querySelector("#r-sig").classList.contains("ok")`, 30*time.Second)
	if !eval[bool](tb, `document.querySelector("#r-dym").hidden`) {
		t.Error("a suggestion shown for an address whose domain takes mail")
	}
	tb.shot("validate")
	// --- a mistyped address: the receipt's did_you_mean, which goes into
	// the form when clicked (not validated: that would cost a credit).
	tb.fill("#email", "ann@gmail.co")
	tb.click(`#validate-form button[type=submit]`)
	tb.waitJS("the suggestion", `!document.querySelector("#r-dym").hidden && document.querySelector("#r-dym-use").textContent === "ann@gmail.com" && document.querySelector("#r-sig").classList.contains("ok")`, 30*time.Second)
	tb.shot("validate-did-you-mean")
	tb.click("#r-dym-use")
	tb.waitJS("the suggestion in the form", `document.querySelector("#email").value === "ann@gmail.com"`, 10*time.Second)

	// --- a 1,000-address batch from a CSV file, with a failing webhook
	hook := webhooktest.New(t, 500)
	var csvFile strings.Builder
	csvFile.WriteString("name,email\n")
	csvFile.WriteString(`"Mallory","""<img src=x onerror=alert(1)>""@x.test"` + "\n")
	csvFile.WriteString("Ann,ann@shop.test\nAnn again,ANN@shop.test\nBob,none yet\nDan,dan@gmail.co\n")
	for i := 0; len(strings.Split(strings.TrimSpace(csvFile.String()), "\n")) < 1003; i++ {
		fmt.Fprintf(&csvFile, "User %d,user%d@shop.test\n", i, i)
	}
	upload := filepath.Join(t.TempDir(), "list.csv")
	if err := os.WriteFile(upload, []byte(csvFile.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	tb.open("/dashboard/batch")
	tb.do("upload", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{upload}))
	tb.waitJS("the unique count", `document.querySelector("#count").textContent.includes("1,000 unique addresses from 1,002 rows, 1 duplicate, 1 without @ left out")`, 10*time.Second)
	tb.waitJS("the credits", `document.querySelector("#count").textContent.includes("Credits needed: 1,000") && document.querySelector("#count").textContent.includes("balance")`, 10*time.Second)
	column := eval[string](tb, `document.querySelector("#column").selectedOptions[0].textContent`)
	if !strings.HasPrefix(column, "email") {
		t.Fatalf("column chosen: %q, want the email column", column)
	}
	tb.fill("#listName", "November signups")
	tb.fill("#webhookUrl", hook.URL+"/hook")
	tb.shot("batch-upload")
	tb.click("#submit-batch")
	tb.waitJS("the progress bar at 100 %", `document.querySelector("#progress-text").textContent.includes("1,000 / 1,000 (100 %)") && document.querySelector("#progress").value === 1000`, 120*time.Second)
	tb.waitJS("the summary and the download links", `!document.querySelector("#download-row").hidden && document.querySelectorAll("#summary tbody tr").length > 1 && document.querySelectorAll("#downloads a").length === 5`, 30*time.Second)
	// dan@gmail.co: one address with a suggestion, its file offered.
	tb.waitJS("the suggestions", `!document.querySelector("#suggestions").hidden && document.querySelector("#suggestions-link").textContent === "Did you mean: 1 address looks mistyped" &&
		document.querySelector("#suggestions-link").getAttribute("href").endsWith("/suggestions.csv")`, 30*time.Second)
	tb.shot("batch-done")
	tb.inert("batch")
	jobID := tb.text("#job-id")

	// --- download the CSV with the browser: the whole job, then its
	// valid addresses only
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	download := func(link, pattern string, want func(rows [][]string) bool) [][]string {
		t.Helper()
		tb.click(link)
		var rows [][]string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			files, _ := filepath.Glob(filepath.Join(downloads, pattern))
			if len(files) == 1 {
				if f, err := os.Open(files[0]); err == nil {
					rows, err = csv.NewReader(f).ReadAll()
					f.Close()
					if err == nil && want(rows) {
						return rows
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no complete CSV downloaded: %v, %d rows", link, files, len(rows))
			}
		}
	}
	rows := download("#downloads a.button", "job-"+jobID+".csv", func(rows [][]string) bool { return len(rows) == 1001 })
	if rows[0][0] != "email" || rows[0][1] != "status" {
		t.Fatalf("CSV header %q", rows[0])
	}
	found := false
	byStatus := map[string]int{}
	for _, r := range rows[1:] {
		found = found || r[0] == strings.ToLower(xssAddress)
		byStatus[r[1]]++
	}
	if !found {
		t.Fatalf("the CSV lacks the XSS address")
	}
	if byStatus["valid"] == 0 || byStatus["valid"] == 1000 {
		t.Fatalf("the job's verdicts %v: the test needs valid and other addresses", byStatus)
	}
	// The summary agrees with the CSV: a row per verdict present, its
	// count, and reasons that add up to it.
	summary := eval[[][]string](tb, `[...document.querySelectorAll("#summary tbody tr")].map(tr => [tr.cells[0].textContent, tr.cells[1].textContent,
		String([...tr.querySelectorAll("ul.reasons li")].reduce((s, li) => s + Number(li.textContent.split(" ").pop().replaceAll(",", "")), 0))])`)
	if len(summary) != len(byStatus) {
		t.Fatalf("summary rows %q; the CSV has %v", summary, byStatus)
	}
	for _, r := range summary {
		if n := fmt.Sprint(byStatus[r[0]]); strings.ReplaceAll(r[1], ",", "") != n || r[2] != n {
			t.Errorf("summary row %q: the CSV has %s %s addresses (their reasons must add up to it)", r, n, r[0])
		}
	}
	valid := download("#downloads li:nth-child(2) a", "job-"+jobID+"-valid.csv", func(rows [][]string) bool { return len(rows) == byStatus["valid"]+1 })
	for _, r := range valid[1:] {
		if r[1] != "valid" {
			t.Fatalf("the valid-only download holds %q", r)
		}
	}

	// --- delivery outcomes of the job, reported with an outcomes:write
	// key as a sending platform would, then the Accuracy page.
	okey, err := ac.MintKey(ctx, acct.ID, adminapi.MintKey{Scopes: []string{"outcomes:write"}, Label: "sending platform"})
	if err != nil {
		t.Fatal(err)
	}
	var outLines strings.Builder
	sent, fneg := 0, 0
	for i, r := range rows[1:] {
		event := ""
		switch r[1] {
		case "valid":
			event = "delivered"
		case "invalid":
			event = "hard_bounce"
			if fneg < 2 {
				event, fneg = "delivered", fneg+1 // verifyd was wrong about these two
			}
		}
		if event == "" {
			continue
		}
		line, _ := json.Marshal(map[string]any{"event_id": fmt.Sprintf("ev-%d", i), "email": r[0], "event": event,
			"time": time.Now().UTC().Format(time.RFC3339Nano), "enhanced_code": "5.1.1"})
		outLines.Write(append(line, '\n'))
		sent++
	}
	oc := &client{t: t, base: in.base}
	if r := oc.do("POST", "/v1/outcomes", okey.Token, outLines.String(), "Content-Type", "application/x-ndjson"); r.status != 200 ||
		!strings.Contains(string(r.body), fmt.Sprintf(`"matched":%d`, sent)) || !strings.Contains(string(r.body), `"false_negatives":2`) {
		t.Fatalf("outcomes: %d %s", r.status, r.body)
	}
	tb.open("/dashboard/accuracy")
	tb.waitJS("the accuracy page", `document.querySelector("#acc-outcomes").textContent === "`+fmtThousands(sent)+`" &&
		document.querySelectorAll("#confusion tbody tr").length >= 2 && document.querySelectorAll("#reliability svg circle.pt").length >= 2 &&
		document.querySelector("#acc-pinvalid").textContent === "`+fmt.Sprintf("%.1f %%", 100*float64(sent-1-2)/float64(sent-1))+`" &&
		document.querySelector("#acc-matched").textContent.includes("2 deliveries to addresses called invalid")`, 10*time.Second)
	tb.inert("accuracy")
	// The owner sets up the sending platforms: keys in, a generated
	// Postmark password; the secrets come back only as "set".
	sgPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sgDER, _ := x509.MarshalPKIXPublicKey(&sgPriv.PublicKey)
	sgKey := base64.StdEncoding.EncodeToString(sgDER)
	tb.waitJS("the receivers' addresses", `document.querySelector('code.receiver[data-platform="sendgrid"]').textContent.includes("/v1/outcomes/sendgrid?account=`+acct.ID+`")`, 10*time.Second)
	tb.fill("#sendgrid-key", sgKey)
	tb.fill("#mailgun-key", "key-0123456789abcdef")
	tb.click("#postmark-generate")
	tb.click(`#platforms-form button[type=submit]`)
	tb.waitJS("the settings saved", `document.querySelector("#platforms-saved").textContent === "Saved." && document.querySelector("#mailgun-key").placeholder.startsWith("set")`, 10*time.Second)
	var ps adminapi.OutcomeSettings
	if err := ac.Do(ctx, "GET", "/v1/accounts/"+acct.ID+"/outcome-settings", nil, &ps); err != nil {
		t.Fatal(err)
	}
	if ps.SendGridKey != sgKey || !ps.MailgunKeySet || ps.PostmarkUser != "verifyd" || !ps.PostmarkPasswordSet {
		t.Fatalf("the platforms set in the dashboard: %+v", ps)
	}
	tb.shot("accuracy")

	// --- history: the address as text, cursor paging, the kind filter
	tb.open("/dashboard/history")
	tb.waitJS("history rows", `document.querySelectorAll("#history tbody tr").length === 50`, 10*time.Second)
	tb.choose("#kind", "single")
	tb.waitJS("single rows", `document.querySelectorAll("#history tbody tr").length === 4 && [...document.querySelectorAll("#history .addr")].some(e => e.textContent === `+jsString(xssAddress)+`)`, 10*time.Second)
	tb.inert("history")
	tb.shot("history")
	tb.choose("#kind", "all")
	tb.waitJS("page 1", `document.querySelectorAll("#history tbody tr").length === 50 && !document.querySelector("#older").disabled`, 10*time.Second)
	first := eval[string](tb, `document.querySelector("#history tbody tr").textContent`)
	tb.click("#older")
	tb.waitJS("page 2", `!document.querySelector("#newer").disabled && document.querySelector("#history tbody tr").textContent !== `+jsString(first), 10*time.Second)

	// --- webhooks: the dead letter, re-send, a test event
	tb.open("/dashboard/webhooks")
	tb.waitJS("the dead letter", `document.querySelectorAll("#dead tbody tr").length === 1`, 60*time.Second)
	tb.click("#reveal")
	tb.waitJS("the secret revealed", `document.querySelector("#secret").value.startsWith("whsec_")`, 10*time.Second)
	tb.shot("webhooks")
	hook.SetStatus(200)
	before := len(hook.Requests())
	tb.click(`#dead button`)
	tb.waitJS("the dead letter re-sent and delivered", `document.querySelectorAll("#dead tbody tr").length === 0`, 30*time.Second)
	waitFor(t, func() bool { return len(hook.Requests()) > before })
	tb.click("#test-event")
	tb.waitJS("the test event delivered", `document.querySelector("#test-result").textContent.startsWith("Delivered")`, 30*time.Second)
	last := hook.Requests()[len(hook.Requests())-1]
	if last.Header.Get("X-SVC-Test") != "true" || !strings.Contains(string(last.Body), `"batch.completed"`) {
		t.Fatalf("test event: %v %s", last.Header, last.Body)
	}
	tb.waitJS("the attempts listed", `[...document.querySelectorAll("#attempts tbody tr")].some(tr => tr.textContent.includes("test"))`, 10*time.Second)

	// --- team
	tb.open("/dashboard/team")
	tb.waitJS("the members", `document.querySelector("#members").textContent.includes("ann@example.test (you)")`, 10*time.Second)
	tb.choose("#invite-role", "member")
	tb.fill("#invite-email", xssAddress)
	tb.click(`#invite-form button[type=submit]`)
	tb.waitJS("the invitation", `document.querySelector("#invite-link").value.includes("/register?invitation=inv_") && document.querySelectorAll("#invites tbody tr").length === 1`, 10*time.Second)
	tb.waitJS("the invitation's address as text", `document.querySelector("#invites").textContent.includes(`+jsString(xssAddress)+`)`, 10*time.Second)
	tb.inert("team")
	tb.shot("team")

	// --- a cross-site form post: another origin on the same host (so the
	// same site: the SameSite=Strict cookie goes along) posts forms at
	// verifyd; each is refused and nothing changes.
	acctKeys, _ := ac.Keys(ctx, acct.ID)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("to")
		enctype := r.URL.Query().Get("enctype")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="POST" action="%s%s" enctype="%s">`+
			`<input name='{"scopes":["validate:read"],"label":"forged","x":"' value='"}'></form>`+
			`<script>document.getElementById("f").submit()</script>`, in.base, target, enctype)
	}))
	defer evil.Close()
	for _, f := range []struct{ to, enctype string }{
		{"/dashboard/api/keys", "text/plain"},
		{"/dashboard/api/keys", "application/x-www-form-urlencoded"},
		{"/auth/logout", "text/plain"},
		{"/v1/validate", "text/plain"},
	} {
		tb.do("forged form", chromedp.Navigate(evil.URL+"/?to="+f.to+"&enctype="+f.enctype))
		tb.waitJS("the forged "+f.to+" refused", `location.href.startsWith(`+jsString(in.base)+`) && document.body.textContent.includes("FORBIDDEN") && document.body.textContent.includes("csrf")`, 10*time.Second)
	}
	if ks, _ := ac.Keys(ctx, acct.ID); len(ks) != len(acctKeys) {
		t.Fatalf("a forged form minted a key: %d keys, then %d", len(acctKeys), len(ks))
	}
	if st, _, _ := authCall(t, in.base, "GET", "/auth/session", "", tb.cookie(), ""); st != 200 {
		t.Fatalf("a forged logout ended the session: %d", st)
	}

	// --- the operator view, once verifyctl made the user an operator
	us, err := ac.Users(ctx)
	if err != nil || len(us) != 1 {
		t.Fatalf("users: %v %v", us, err)
	}
	if _, err := ac.SetOperator(ctx, us[0].ID, true); err != nil {
		t.Fatal(err)
	}
	const xssName = `<script>alert("name")</script><img src=x onerror=alert(2)>`
	evilAcct, err := ac.CreateAccount(ctx, adminapi.CreateAccount{Name: xssName, Plan: "free"})
	if err != nil {
		t.Fatal(err)
	}
	// An operator sees every account's accuracy.
	tb.open("/dashboard/accuracy")
	tb.waitJS("the account's accuracy", `document.querySelector("#acc-outcomes").textContent === "`+fmtThousands(sent)+`"`, 10*time.Second)
	tb.choose("#scope", "all")
	tb.waitJS("every account's accuracy", `document.querySelector("#acc-outcomes").textContent === "`+fmtThousands(sent)+`"`, 10*time.Second)
	// An owner deletes the account's outcomes.
	tb.open("/dashboard/accuracy")
	tb.waitJS("the account's accuracy again", `document.querySelector("#acc-outcomes").textContent === "`+fmtThousands(sent)+`"`, 10*time.Second)
	tb.click("#delete-outcomes")
	tb.waitJS("the outcomes deleted", `document.querySelector("#acc-outcomes").textContent === "0" && !document.querySelector("#acc-empty").hidden`, 10*time.Second)
	tb.open("/dashboard/operator")
	tb.waitJS("the egress pool", `document.querySelectorAll("#egress tbody tr").length === 2 && document.querySelectorAll("#accounts tbody tr").length === 2`, 10*time.Second)
	tb.waitJS("the account name as text", `document.querySelector("#accounts").textContent.includes(`+jsString(xssName)+`)`, 10*time.Second)
	tb.inert("operator")
	// The operator shows that account: its name in the page's header.
	if st := eval[int](tb, `fetch("/auth/account", {method: "POST", headers: {"Content-Type": "application/json",
		"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: JSON.stringify({account: `+jsString(evilAcct.ID)+`})}).then(r => r.status)`); st != 200 {
		t.Fatalf("switch to the account: %d", st)
	}
	tb.open("/dashboard")
	tb.waitJS("the header", `document.querySelector("header").textContent.includes(`+jsString(xssName)+`)`, 10*time.Second)
	tb.inert("header")
	if st := eval[int](tb, `fetch("/auth/account", {method: "POST", headers: {"Content-Type": "application/json",
		"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: JSON.stringify({account: `+jsString(acct.ID)+`})}).then(r => r.status)`); st != 200 {
		t.Fatalf("switch back: %d", st)
	}
	tb.open("/dashboard/operator")
	tb.waitJS("the egress pool", `document.querySelectorAll("#egress tbody tr").length === 2`, 10*time.Second)
	tb.click(`button[aria-label="Drain 127.0.0.2"]`)
	tb.waitJS("127.0.0.2 drained", `[...document.querySelectorAll("#egress tbody tr")].some(tr => tr.textContent.includes("127.0.0.2") && tr.textContent.includes("disabled: drained by an operator"))`, 10*time.Second)
	tb.shot("operator")
	tb.click(`button[aria-label="Enable 127.0.0.2"]`)
	tb.waitJS("127.0.0.2 enabled", `[...document.querySelectorAll("#egress tbody tr")].some(tr => tr.textContent.includes("127.0.0.2") && tr.textContent.includes("in rotation"))`, 10*time.Second)

	// --- the overview, with the day's validations in the chart
	tb.open("/dashboard")
	tb.waitJS("the chart", `document.querySelectorAll("#chart svg rect.v-invalid").length >= 1 && document.querySelector("#total30").textContent === "1,004"`, 10*time.Second)
	tb.waitJS("the job listed", `document.querySelector("#jobs").textContent.includes("1,000 / 1,000")`, 10*time.Second)
	// The job's row: its short id (the whole one in the title) and its
	// list, one line each; the id opens the job.
	jobRow := eval[[]string](tb, `(() => { const a = document.querySelector("#jobs tbody a.mono"); const tr = a.closest("tr");
		const line = (e) => Math.round(e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight));
		return [a.textContent, a.title, tr.cells[1].textContent, String(line(a)), String(line(tr.cells[1].firstChild))]; })()`)
	if jobRow[0] != jobID[:8] || jobRow[1] != jobID || jobRow[2] != "November signups" || jobRow[3] != "1" || jobRow[4] != "1" {
		t.Fatalf("the job's row in the jobs table: %q; want %s, %s, its list, on one line", jobRow, jobID[:8], jobID)
	}
	tb.shot("overview")
	tb.click("#jobs tbody a.mono")
	tb.waitJS("the job's page", `location.search === "?job=`+jobID+`" && document.querySelector("#job-id").textContent === "`+jobID+`" &&
		document.querySelector("#job-list").textContent === "List: November signups" && document.querySelectorAll("#downloads a").length === 5`, 10*time.Second)
	tb.open("/dashboard/settings")
	tb.shot("settings")

	// --- the API reference, drawn from /openapi.json under the same CSP
	tb.open("/docs")
	tb.waitJS("the API reference", `[...document.querySelectorAll("#api-docs h3")].some(h => h.textContent === "POST /v1/validate") &&
		document.querySelectorAll("#api-docs article.op").length >= 10 && document.querySelector("#api-toc a") !== null`, 20*time.Second)
	tb.shotTop("docs")

	// --- sign out: the old session token is refused everywhere
	old := tb.cookie()
	if old == "" {
		t.Fatal("no session cookie")
	}
	tb.click("#logout")
	tb.waitJS("signed out", `location.pathname === "/login"`, 10*time.Second)
	if st, _, _ := authCall(t, in.base, "GET", "/auth/session", "", old, ""); st != 401 {
		t.Fatalf("the session after logout: %d", st)
	}
	req, _ := http.NewRequest("GET", in.base+"/v1/balance", nil)
	req.Header.Set("Cookie", "verifyd_session="+old)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("GET /v1/balance with the ended session: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	tb.open("/dashboard")
	tb.waitJS("sent to login", `location.pathname === "/login"`, 10*time.Second)
	tb.inert("login")
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	return fmt.Sprintf("%q", s)
}

// fmtThousands writes n as the dashboard does (en-US grouping: 1,000).
func fmtThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
