package harness

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// RealWorldResult is scenario 6: a world of the real-world profile (mailbox
// providers and MX providers weighted by market share, hosts playing them,
// self-hosted servers with odd behaviours), every address validated once
// singly and once in a batch, each verdict against the world's.
type RealWorldResult struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Domains, Hosts and Addresses describe the world.
	Domains   int `json:"domains"`
	Hosts     int `json:"hosts"`
	Addresses int `json:"addresses"`
	// Single compares every single validation (verdict and reason), Batch
	// the batch's CSV (verdict); each with its agreement per group.
	Single *Confusion `json:"single,omitempty"`
	Batch  *Confusion `json:"batch,omitempty"`
	// SingleSeconds is how long the single validations took; BatchSeconds
	// the batch from upload to completed (its deferred addresses wait out
	// the verifyd's jobs.retry_window).
	SingleSeconds float64 `json:"single_seconds"`
	BatchSeconds  float64 `json:"batch_seconds"`
	RetryWindow   string  `json:"retry_window"`
	// SingleCost and BatchCost are what the probes cost the servers, per
	// address, from verifyd's own counters.
	SingleCost *ProbeCost `json:"single_cost,omitempty"`
	BatchCost  *ProbeCost `json:"batch_cost,omitempty"`
}

// ProbeCost is what probing cost the mail servers, per address:
// verifyd_probe_sessions_total and verifyd_probe_rcpts_total{kind}
// between two scrapes of its /metrics.
type ProbeCost struct {
	Sessions float64 `json:"sessions"`
	// RCPTs is every RCPT answered; the others split it by why it was
	// sent (probe/README.md, "Metrics").
	RCPTs    float64 `json:"rcpts"`
	Address  float64 `json:"address"`
	CatchAll float64 `json:"catch_all"`
	Role     float64 `json:"role"`
	Control  float64 `json:"control"`
	// Controls counts the positive controls' readings, per address.
	ControlMailbox float64 `json:"control_mailbox"`
	ControlProber  float64 `json:"control_prober"`
	ControlNone    float64 `json:"control_none"`
}

// probeCost is the cost per address of n addresses between two scrapes;
// nil without them, or from a verifyd that has no RCPT counters.
func probeCost(before, after metricsSnapshot, n int) *ProbeCost {
	if before == nil || after == nil || n == 0 {
		return nil
	}
	if _, ok := after[`verifyd_probe_rcpts_total{kind="address"}`]; !ok {
		return nil
	}
	per := func(series string) float64 { return round3((after[series] - before[series]) / float64(n)) }
	c := &ProbeCost{
		Address:        per(`verifyd_probe_rcpts_total{kind="address"}`),
		CatchAll:       per(`verifyd_probe_rcpts_total{kind="catch_all"}`),
		Role:           per(`verifyd_probe_rcpts_total{kind="role"}`),
		Control:        per(`verifyd_probe_rcpts_total{kind="control"}`),
		ControlMailbox: per(`verifyd_probe_controls_total{reading="mailbox"}`),
		ControlProber:  per(`verifyd_probe_controls_total{reading="prober"}`),
		ControlNone:    per(`verifyd_probe_controls_total{reading="none"}`),
	}
	c.RCPTs = round3(c.Address + c.CatchAll + c.Role + c.Control)
	for name := range after {
		if strings.HasPrefix(name, "verifyd_probe_sessions_total{") {
			c.Sessions += (after[name] - before[name]) / float64(n)
		}
	}
	c.Sessions = round3(c.Sessions)
	return c
}

// realWorldEgress are the first egress addresses of A's and B's verifyd in
// scenario 6, apart from the other scenarios' so no world sees them mixed.
var realWorldEgress = []string{"127.0.0.34", "127.0.0.50"}

// profileWorld starts a world of a generator profile for a scenario of
// its own (its work directory "world-<name>") and returns it with its
// addresses; the caller stops it.
func (r *runner) profileWorld(ctx context.Context, name, profile string, domains int) (*World, []string, error) {
	wo := r.o.World
	wo.Profile, wo.Domains = profile, domains
	wo.Extra, wo.Disposable = nil, ""
	dir := filepath.Join(r.work, "world-"+name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	r.logf("%s: starting a world of %d domains", name, domains)
	w, err := StartWorld(ctx, r.procs, r.mailworld, dir, wo)
	if err != nil {
		return nil, nil, err
	}
	emails := make([]string, len(w.Expected))
	for i, e := range w.Expected {
		emails[i] = e.Email
	}
	return w, emails, nil
}

// scenarioRealWorld is scenario 6.
func (r *runner) scenarioRealWorld(ctx context.Context) error {
	o := r.o
	w, emails, err := r.profileWorld(ctx, "realworld", world.ProfileRealWorld, o.RealWorldDomains)
	if err != nil {
		return err
	}
	defer func() { _ = w.Proc.Stop(10 * time.Second) }()
	for _, i := range r.order(1) {
		run := r.runs[i]
		res := &RealWorldResult{Domains: w.Domains, Hosts: w.Hosts, Addresses: len(emails), RetryWindow: o.RealWorldRetryWindow.String()}
		run.Scenarios.RealWorld = res
		if ctx.Err() != nil {
			res.Skipped = "not run: " + ctx.Err().Error()
			continue
		}
		cfg := o.Config
		cfg.DNS, cfg.SMTPPort = w.DNS, w.SMTPPort
		cfg.Egress = EgressRange(netip.MustParseAddr(realWorldEgress[i]), len(o.Config.Egress))
		cfg.RetryWindow = o.RealWorldRetryWindow
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg.Metrics, cfg.Pprof = fmt.Sprintf("127.0.0.1:%d", port), false
		v, err := StartVerifyd(ctx, r.procs, run.Label+"-realworld", run.Binary, filepath.Join(r.work, "verifyd-"+run.Label+"-realworld"), cfg)
		if err != nil {
			return err
		}
		if err := v.SetCredits(ctx, o.Credits); err != nil {
			_ = v.Stop()
			return err
		}
		r.realWorldRun(ctx, v, w, emails, res)
		if err := v.Stop(); err != nil {
			r.logf("real-world mix %s: stopping verifyd: %v", run.Label, err)
		}
		pause(ctx)
	}
	return nil
}

// realWorldRun validates every address of w singly, then in one batch.
func (r *runner) realWorldRun(ctx context.Context, v *Verifyd, w *World, emails []string, res *RealWorldResult) {
	scrape := func() metricsSnapshot {
		m, err := scrapeMetrics(v.Config.Metrics)
		if err != nil {
			r.logf("real-world mix %s: metrics: %v", v.Label, err)
			return nil
		}
		return m
	}
	m0 := scrape()
	start := time.Now()
	_, outs := r.freshLoad(ctx, v, "realworld", r.o.MixedConcurrency, emails, 10*time.Minute, true)
	res.SingleSeconds = round3(time.Since(start).Seconds())
	m1 := scrape()
	res.SingleCost = probeCost(m0, m1, len(outs))
	res.Single = NewConfusion()
	for _, o := range outs {
		if e, ok := w.Expect[lower(o.Email)]; ok {
			res.Single.AddExpected(e, o.Status, o.Reason, true)
		}
	}
	r.logf("real-world mix %s: %d single validations in %.1f s, verdict agrees for %.2f %%",
		v.Label, len(outs), res.SingleSeconds, 100*res.Single.Agreement())
	if len(outs) < len(emails) {
		res.Error = fmt.Sprintf("%d of %d single validations answered", len(outs), len(emails))
	}
	// The batch: a new account would see the singles' cached verdicts
	// no more than this one does (batches probe afresh).
	rb, err := r.uploadBatch(ctx, v, emails)
	if err != nil || rb.res.Error != "" || rb.res.Skipped != "" {
		if err == nil {
			err = fmt.Errorf("%s", rb.res.Error+rb.res.Skipped)
		}
		res.Error = "batch: " + err.Error()
		return
	}
	rb.wait(ctx, r.o.RealWorldRetryWindow+3*time.Minute)
	if rb.res.Error == "" {
		rb.download(ctx, w)
	}
	res.BatchSeconds = rb.res.CompletionSeconds
	if rb.res.Error != "" {
		res.Error = "batch: " + rb.res.Error
		return
	}
	res.Batch = rb.res.confusion
	res.BatchCost = probeCost(m1, scrape(), len(emails))
	r.logf("real-world mix %s: batch of %d completed in %.1f s, verdict agrees for %.2f %%",
		v.Label, len(emails), res.BatchSeconds, 100*res.Batch.Agreement())
}

// realWorldSection writes scenario 6 of the report.
func realWorldSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 6. Real-world mix\n\n")
	p("A second world, `mailworld -profile realworld` (bench/world/realworld.go): half the addresses at consumer mailbox providers, weighted by their share of a US consumer list (Mapp, *Global Provider Report 2019*: Gmail 50.1 %%, Yahoo and AOL 22.6 %%, Microsoft 12.4 %%, Comcast 2.0 %%, Apple 1.6 %%, AT&T 1.1 %%, the other 10.2 %% spread over GMX, WEB.DE, Yandex, Mail.ru, Proton, Zoho and Fastmail); half at business domains, whose MX providers are weighted by their share of the Tranco top million's MX records (J. Schaumann, *MX diversity*, March 2023: Google 41.1 %%, Microsoft 19.6 %%, Yandex 4.1 %%, Proofpoint 3.3 %%, Mimecast 2.7 %%, Barracuda 1.2 %%, Zoho 1.1 %%, Cisco 0.8 %%, Mail.ru 0.7 %%, self-hosted or smaller 25.4 %%). ")
	p("Hosts play the providers with their real MX names, greetings and replies (probe/README.md, \"Providers\"); the self-hosted servers each show one behaviour of the \"Real servers\" table. Assumed, for want of published figures: 70 %% of consumer addresses still exist; 80 %% of Microsoft 365 tenants use directory-based edge blocking; 70 %% of gateway customers have the gateway check recipients; 3 %% of Google Workspace domains route unknown recipients to a catch-all. ")
	p("Every address is validated once singly (concurrency 64, verdict and `checks.reason` compared) and once in one batch (the CSV's verdict compared; the verifyd's `jobs.retry_window` is shortened so that servers deferring for ever end the batch in minutes).\n\n")
	for _, run := range res.Runs {
		rw := run.Scenarios.RealWorld
		if !runHeading(w, res, run, rw) {
			continue
		}
		p("World: %s domains, %s hosts, %s addresses. Singles took %.1f s; the batch %.1f s (retry window %s).\n\n",
			itoa(rw.Domains), itoa(rw.Hosts), itoa(rw.Addresses), rw.SingleSeconds, rw.BatchSeconds, rw.RetryWindow)
		if rw.Error != "" {
			p("**Error: %s.**\n\n", rw.Error)
		}
		if c := rw.Single; c != nil {
			p("Single validations: verdict agrees for **%s of %s (%.2f %%)**; verdict and `checks.reason` both agree for %s (%.2f %%).\n\n",
				itoa(c.Agree), itoa(c.Total), 100*c.Agreement(), itoa(c.ReasonAgree), 100*c.ReasonAgreement())
			c.WriteMarkdown(w)
			p("\n")
			mismatchKinds(w, c)
		}
		if c := rw.Batch; c != nil {
			p("Batch CSV (verdict only): agrees for **%s of %s (%.2f %%)**.\n\n", itoa(c.Agree), itoa(c.Total), 100*c.Agreement())
			c.WriteMarkdown(w)
			p("\n")
			mismatchKinds(w, c)
		}
		if rw.SingleCost != nil || rw.BatchCost != nil {
			p("What probing cost the servers, per address (verifyd_probe_sessions_total, verifyd_probe_rcpts_total{kind} and verifyd_probe_controls_total{reading}):\n\n")
			p("| | sessions | RCPTs | address | catch_all | role | control | control: mailbox | control: prober | control: none |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, x := range []struct {
				name string
				c    *ProbeCost
			}{{"singles", rw.SingleCost}, {"batch", rw.BatchCost}} {
				if c := x.c; c != nil {
					p("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.4f | %.4f | %.4f |\n", x.name, c.Sessions, c.RCPTs, c.Address, c.CatchAll,
						c.Role, c.Control, c.ControlMailbox, c.ControlProber, c.ControlNone)
				}
			}
			p("\n")
		}
		if c := rw.Single; c != nil {
			c.WriteGroups(w, true)
		}
	}
	p("Debatable rows, and the verdict chosen (the one that never calls an undeliverable address valid; probe/README.md gives the reasoning):\n\n")
	for _, d := range debatableRows {
		p("- %s\n", d)
	}
	p("\n")
}

// debatableRows are the groups of the real-world profile where a careful
// verifier could answer otherwise, with the verdict chosen.
var debatableRows = []string{
	"**yahoo (yahoo.com, aol.com) · known**: risky / catch_all, not valid. Yahoo answers 250 to every RCPT and refuses unknown recipients after DATA; an SMTP acceptance proves nothing there. Verifiers that answer valid for Yahoo either guess or query Yahoo's web sign-up pages, which verifyd does not.",
	"**microsoft365 (no edge blocking) · known** and **gateways (accepts any address) · known**: risky / catch_all. The tenant or gateway accepts every recipient; the mailbox may exist, nothing at RCPT can tell.",
	"**gateways (checks recipients) · known**: valid, but only because the random probe (or an unknown address of the domain) was refused as no such mailbox in the same or an earlier session; a gateway that has not shown that is risky / catch_all.",
	"**yandex · unknown**: invalid / mailbox_not_found. Yandex words \"no such user\" as `550 5.7.1`, a policy code; verifyd never reads the text, but asks the same session for postmaster@ the domain and a random local part (the positive control): postmaster accepted and the random refused alike, the refusal is about the mailbox. Where postmaster is refused too, the answer is unknown / smtp_rejected.",
	"**outlook · unknown** (`550 5.5.0`), **microsoft365 (edge blocking) · unknown** (`550 5.4.1`): invalid / mailbox_not_found, read by the provider's fingerprint; from a server of no known provider the same codes read as syntax_error and (weakly) mailbox_not_found.",
	"**any · full**: risky / smtp_rejected. A full mailbox exists and may empty; mail sent now bounces.",
	"**self-hosted bare 550 user unknown** and **self-hosted bare replies · unknown**: invalid / mailbox_not_found. A bare 550 carries no enhanced code to say what it refuses; the positive control (postmaster@ accepted, a random local part refused alike) says it is the mailbox (score 2; 10 where the control tells nothing).",
	"**self-hosted 451 at MAIL**, **421 at EHLO**, **554 greeting**, **policy block 5.7.1**: unknown. The server refuses or defers the prober, not the mailbox; a batch retries within jobs.retry_window, then says unknown.",
}
