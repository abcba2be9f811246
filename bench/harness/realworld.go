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
	// SingleWorld and BatchWorld are the same cost as the world's servers
	// saw it, from their session log (any binary).
	SingleWorld *WorldCost `json:"single_world,omitempty"`
	BatchWorld  *WorldCost `json:"batch_world,omitempty"`
	// SingleEgress and BatchEgress are what the egress pool recorded
	// against its own addresses meanwhile: policy blocks and reputation
	// warnings.
	SingleEgress *EgressCost `json:"single_egress,omitempty"`
	BatchEgress  *EgressCost `json:"batch_egress,omitempty"`
}

// WorldCost is what the world's SMTP servers saw of one verifyd's egress
// addresses between two reads of the world's session counters
// (mailworld -stats), per address validated.
type WorldCost struct {
	// Sessions and RCPTs are per address: every SMTP session the hosts
	// took from the verifyd's egress addresses, every RCPT TO they
	// carried.
	Sessions float64 `json:"sessions"`
	RCPTs    float64 `json:"rcpts"`
	// RefusedPer10k are the sessions in which a host refused the client
	// itself (a 554 greeting, a MAIL FROM policy, a domain refusing every
	// recipient: world.Session.RefusedClient), per 10,000 addresses: the
	// sessions where a policy block of the egress address is warranted.
	RefusedPer10k float64 `json:"refused_per_10k"`
	Refused       int64   `json:"refused"`
}

// EgressCost is what verifyd's egress pool recorded against its addresses
// between two moments, from its /metrics and its log.
type EgressCost struct {
	// PolicyBlocks are the sessions verifyd ended as a refusal of its
	// egress address by policy: verifyd_egress_outcomes_total{outcome=
	// "policy"} summed over the addresses (each is an egress policy_block
	// event), or, from a verifyd without it, cooldowns_total{reason=
	// "policy"}.
	PolicyBlocks       int64   `json:"policy_blocks"`
	PolicyBlocksPer10k float64 `json:"policy_blocks_per_10k"`
	// ReputationWarnings are the egress pool's reputation warnings:
	// verifyd_egress_reputation_warnings_total summed over the addresses,
	// or, from a verifyd without that counter, its log lines "egress
	// reputation" (ReputationFrom says which).
	ReputationWarnings       int64   `json:"reputation_warnings"`
	ReputationWarningsPer10k float64 `json:"reputation_warnings_per_10k"`
	PolicyFrom               string  `json:"policy_from,omitempty"`
	ReputationFrom           string  `json:"reputation_from,omitempty"`
}

// worldCost is the cost to the world of n addresses validated by the
// verifyd whose egress addresses are egress, between two reads of the
// world's counters; nil without them.
func worldCost(before, after *world.LogStats, egress []netip.Addr, n int) *WorldCost {
	if before == nil || after == nil || n == 0 {
		return nil
	}
	var sessions, rcpts, refused uint64
	for _, a := range egress {
		k := a.String()
		sessions += after.Clients[k] - before.Clients[k]
		rcpts += after.ClientRcpts[k] - before.ClientRcpts[k]
		refused += after.ClientRefused[k] - before.ClientRefused[k]
	}
	return &WorldCost{
		Sessions:      round3(float64(sessions) / float64(n)),
		RCPTs:         round3(float64(rcpts) / float64(n)),
		Refused:       int64(refused),
		RefusedPer10k: round3(float64(refused) * 10000 / float64(n)),
	}
}

// egressCost is what the egress pool recorded for n addresses between two
// scrapes of verifyd's /metrics, with logs the reputation warnings it
// logged meanwhile (the fallback for a verifyd without the counter); nil
// without the scrapes.
func egressCost(before, after metricsSnapshot, logs int64, n int) *EgressCost {
	if before == nil || after == nil || n == 0 {
		return nil
	}
	sum := func(prefix, label string) (float64, bool) {
		var t float64
		found := false
		for name, v := range after {
			if strings.HasPrefix(name, prefix+"{") && (label == "" || strings.Contains(name, label)) {
				t += v - before[name]
				found = true
			}
		}
		return t, found
	}
	c := &EgressCost{}
	if v, ok := sum("verifyd_egress_outcomes_total", `outcome="policy"`); ok {
		c.PolicyBlocks, c.PolicyFrom = int64(v), "verifyd_egress_outcomes_total"
	} else if v, ok := sum("verifyd_egress_cooldowns_total", `reason="policy"`); ok {
		c.PolicyBlocks, c.PolicyFrom = int64(v), "verifyd_egress_cooldowns_total"
	}
	if v, ok := sum("verifyd_egress_reputation_warnings_total", ""); ok {
		c.ReputationWarnings, c.ReputationFrom = int64(v), "verifyd_egress_reputation_warnings_total"
	} else {
		c.ReputationWarnings, c.ReputationFrom = logs, "log"
	}
	c.PolicyBlocksPer10k = round3(float64(c.PolicyBlocks) * 10000 / float64(n))
	c.ReputationWarningsPer10k = round3(float64(c.ReputationWarnings) * 10000 / float64(n))
	return c
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
	if mailworldServesStats(ctx, r.mailworld) {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		wo.Stats = fmt.Sprintf("127.0.0.1:%d", port)
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

// startOn starts run's verifyd on w, the world of a later scenario, as
// <label>-<name> with data of its own and the egress addresses from
// first, its configuration changed by mod (nil: none), and gives it the
// run's credits. A verifyd that did not start is a *notStarted error.
func (r *runner) startOn(ctx context.Context, run *RunResult, w *World, name, first string, mod func(*VerifydConfig)) (*Verifyd, error) {
	cfg := r.o.Config
	cfg.DNS, cfg.SMTPPort = w.DNS, w.SMTPPort
	cfg.Egress = EgressRange(netip.MustParseAddr(first), len(r.o.Config.Egress))
	if mod != nil {
		mod(&cfg)
	}
	v, err := StartVerifyd(ctx, r.procs, run.Label+"-"+name, run.Binary, filepath.Join(r.work, "verifyd-"+run.Label+"-"+name), cfg)
	if err != nil {
		return nil, &notStarted{err}
	}
	if err := v.SetCredits(ctx, r.o.Credits); err != nil {
		_ = v.Stop()
		return nil, err
	}
	return v, nil
}

// notStarted is startOn's error for a verifyd that did not start.
type notStarted struct{ error }

func (e *notStarted) Unwrap() error { return e.error }

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
		port, err := freePort()
		if err != nil {
			return err
		}
		v, err := r.startOn(ctx, run, w, "realworld", realWorldEgress[i], func(cfg *VerifydConfig) {
			cfg.RetryWindow = o.RealWorldRetryWindow
			cfg.Metrics, cfg.Pprof = fmt.Sprintf("127.0.0.1:%d", port), false
		})
		if err != nil {
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
	// The world's counters: what its servers saw of this verifyd.
	stats := func() *world.LogStats {
		if w.StatsAddr == "" {
			return nil
		}
		st, err := w.Stats(ctx)
		if err != nil {
			r.logf("real-world mix %s: world stats: %v", v.Label, err)
			return nil
		}
		return &st
	}
	egress := v.Config.Egress
	m0, w0, l0 := scrape(), stats(), v.ReputationLogs()
	start := time.Now()
	_, outs := r.freshLoad(ctx, v, "realworld", r.o.MixedConcurrency, emails, 10*time.Minute, true)
	res.SingleSeconds = round3(time.Since(start).Seconds())
	m1, w1, l1 := scrape(), stats(), v.ReputationLogs()
	res.SingleCost = probeCost(m0, m1, len(outs))
	res.SingleWorld = worldCost(w0, w1, egress, len(outs))
	res.SingleEgress = egressCost(m0, m1, l1-l0, len(outs))
	r.logEgress(v.Label, "singles", res.SingleWorld, res.SingleEgress)
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
	m2, w2, l2 := scrape(), stats(), v.ReputationLogs()
	res.BatchCost = probeCost(m1, m2, len(emails))
	res.BatchWorld = worldCost(w1, w2, egress, len(emails))
	res.BatchEgress = egressCost(m1, m2, l2-l1, len(emails))
	r.logEgress(v.Label, "batch", res.BatchWorld, res.BatchEgress)
	r.logf("real-world mix %s: batch of %d completed in %.1f s, verdict agrees for %.2f %%",
		v.Label, len(emails), res.BatchSeconds, 100*res.Batch.Agreement())
}

// logEgress prints a phase's cost to the world and to the egress pool.
func (r *runner) logEgress(label, phase string, wc *WorldCost, ec *EgressCost) {
	var parts []string
	if wc != nil {
		parts = append(parts, fmt.Sprintf("%.3f sessions and %.3f RCPTs per address, %.1f sessions refusing the client per 10,000 addresses",
			wc.Sessions, wc.RCPTs, wc.RefusedPer10k))
	}
	if ec != nil {
		parts = append(parts, fmt.Sprintf("%.1f policy blocks and %.1f reputation warnings per 10,000 addresses", ec.PolicyBlocksPer10k, ec.ReputationWarningsPer10k))
	}
	if len(parts) > 0 {
		r.logf("real-world mix %s, %s: %s", label, phase, strings.Join(parts, "; "))
	}
}

// realWorldSection writes scenario 6 of the report.
func realWorldSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 6. Real-world mix\n\n")
	p("A second world, `mailworld -profile realworld` (bench/world/realworld.go): half the addresses at consumer mailbox providers, weighted by their share of a US consumer list (Mapp, *Global Provider Report 2019*: Gmail 50.1 %%, Yahoo and AOL 22.6 %%, Microsoft 12.4 %%, Comcast 2.0 %%, Apple 1.6 %%, AT&T 1.1 %%, the other 10.2 %% spread over GMX, WEB.DE, Yandex, Mail.ru, Proton, Zoho and Fastmail); half at business domains, whose MX providers are weighted by their share of the Tranco top million's MX records (J. Schaumann, *MX diversity*, March 2023: Google 41.1 %%, Microsoft 19.6 %%, Yandex 4.1 %%, Proofpoint 3.3 %%, Mimecast 2.7 %%, Barracuda 1.2 %%, Zoho 1.1 %%, Cisco 0.8 %%, Mail.ru 0.7 %%, self-hosted or smaller 25.4 %%). ")
	p("Hosts play the providers with their real MX names, greetings and replies (probe/README.md, \"Providers\"); the self-hosted servers each show one behaviour of the \"Real servers\" table, or refuse unknown local parts in their MTA's stock words (Exim's `550 Unknown user` and `550 Unrouteable address`, Postfix's virtual mailbox table, OpenSMTPD's `550 Invalid recipient`, with and without a postmaster for the domain, weighted by Security Space's MX server survey of December 2023: bench/world/README.md). Assumed, for want of published figures: 70 %% of consumer addresses still exist; 80 %% of Microsoft 365 tenants use directory-based edge blocking; 70 %% of gateway customers have the gateway check recipients; 3 %% of Google Workspace domains route unknown recipients to a catch-all. ")
	p("Every address is validated once singly (concurrency 64, verdict and `checks.reason` compared) and once in one batch (the CSV's verdict compared; the verifyd's `jobs.retry_window` is shortened so that servers deferring for ever end the batch in minutes).\n\n")
	egressSummary(w, res)
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
		if rw.SingleWorld != nil || rw.BatchWorld != nil || rw.SingleEgress != nil || rw.BatchEgress != nil {
			p("What the world's servers saw of this verifyd's egress addresses (its session log, `mailworld -stats`) and what the egress pool recorded against them:\n\n")
			p("| | sessions / address | RCPTs / address | sessions refusing the client / 10k addresses | policy blocks / 10k addresses | reputation warnings / 10k addresses |\n|---|---:|---:|---:|---:|---:|\n")
			for _, x := range []struct {
				name string
				wc   *WorldCost
				ec   *EgressCost
			}{{"singles", rw.SingleWorld, rw.SingleEgress}, {"batch", rw.BatchWorld, rw.BatchEgress}} {
				if x.wc != nil || x.ec != nil {
					p("| %s | %s | %s | %s | %s | %s |\n", x.name, worldFig(x.wc, func(c *WorldCost) float64 { return c.Sessions }, "%.3f"),
						worldFig(x.wc, func(c *WorldCost) float64 { return c.RCPTs }, "%.3f"), worldFig(x.wc, func(c *WorldCost) float64 { return c.RefusedPer10k }, "%.1f"),
						egressFig(x.ec, false), egressFig(x.ec, true))
				}
			}
			p("\n")
			if ec := rw.SingleEgress; ec != nil {
				p("Policy blocks from `%s`, reputation warnings from `%s`.\n\n", ec.PolicyFrom, ec.ReputationFrom)
			}
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

// egressSummary writes scenario 6's figures of every binary side by side:
// agreement with the world, what the world's servers saw, what the egress
// pool recorded.
func egressSummary(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	var rows []string
	for _, run := range res.Runs {
		rw := run.Scenarios.RealWorld
		if rw == nil || rw.Skipped != "" {
			continue
		}
		agree := func(c *Confusion) string {
			if c == nil || c.Total == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f %%", 100*c.Agreement())
		}
		for _, x := range []struct {
			name   string
			c      *Confusion
			wc     *WorldCost
			ec     *EgressCost
			reason bool
		}{{"singles", rw.Single, rw.SingleWorld, rw.SingleEgress, true}, {"batch", rw.Batch, rw.BatchWorld, rw.BatchEgress, false}} {
			reason := "—"
			if x.reason && x.c != nil && x.c.Total > 0 {
				reason = fmt.Sprintf("%.2f %%", 100*x.c.ReasonAgreement())
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", run.Label, x.name, agree(x.c), reason,
				worldFig(x.wc, func(c *WorldCost) float64 { return c.Sessions }, "%.3f"), worldFig(x.wc, func(c *WorldCost) float64 { return c.RCPTs }, "%.3f"),
				worldFig(x.wc, func(c *WorldCost) float64 { return c.RefusedPer10k }, "%.1f"), egressFig(x.ec, false), egressFig(x.ec, true)))
		}
	}
	if len(rows) == 0 {
		return
	}
	p("Every binary at a glance: agreement with the world's verdicts (and with its reasons, singles only); the world's sessions and RCPTs per address, from its session log; the sessions in which a host refused the client itself (a 554 greeting, a MAIL FROM policy, a domain refusing every recipient), where a policy block is warranted; and the egress pool's policy blocks and reputation warnings. No host of the mix refuses one egress address more than another, so reputation warnings should be 0, and policy blocks at most the sessions refusing the client.\n\n")
	p("| verifyd | | verdict agrees | and reason | sessions / address | RCPTs / address | sessions refusing the client / 10k | policy blocks / 10k | reputation warnings / 10k |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		p("%s\n", r)
	}
	p("\n")
}

// worldFig formats a figure of c, "—" without c.
func worldFig(c *WorldCost, f func(*WorldCost) float64, format string) string {
	if c == nil {
		return "—"
	}
	return fmt.Sprintf(format, f(c))
}

// egressFig formats policy blocks (or reputation warnings) per 10,000
// addresses, with the count, "—" without c.
func egressFig(c *EgressCost, reputation bool) string {
	if c == nil {
		return "—"
	}
	if reputation {
		return fmt.Sprintf("%.1f (%d)", c.ReputationWarningsPer10k, c.ReputationWarnings)
	}
	return fmt.Sprintf("%.1f (%d)", c.PolicyBlocksPer10k, c.PolicyBlocks)
}

// debatableRows are the groups of the real-world profile where a careful
// verifier could answer otherwise, with the verdict chosen.
var debatableRows = []string{
	"**yahoo (yahoo.com, aol.com) · known**: risky / catch_all, not valid. Yahoo answers 250 to every RCPT and refuses unknown recipients after DATA; an SMTP acceptance proves nothing there. Verifiers that answer valid for Yahoo either guess or query Yahoo's web sign-up pages, which verifyd does not.",
	"**microsoft365 (no edge blocking) · known** and **gateways (accepts any address) · known**: risky / catch_all. The tenant or gateway accepts every recipient; the mailbox may exist, nothing at RCPT can tell.",
	"**gateways (checks recipients) · known**: valid, but only because the random probe (or an unknown address of the domain) was refused as no such mailbox in the same or an earlier session; a gateway that has not shown that is risky / catch_all.",
	"**yandex · unknown**: invalid / mailbox_not_found. Yandex words \"no such user\" as `550 5.7.1`, a policy code; the words say no such mailbox, whatever postmaster does.",
	"**outlook · unknown** (`550 5.5.0`), **microsoft365 (edge blocking) · unknown** (`550 5.4.1`): invalid / mailbox_not_found, read by the provider's fingerprint; from a server of no known provider the same codes read as syntax_error and (weakly) mailbox_not_found.",
	"**any · full**: risky / smtp_rejected. A full mailbox exists and may empty; mail sent now bounces.",
	"**self-hosted bare 550 user unknown**, **bare replies**, **Exim 550 Unknown user**, **Exim 550 Unrouteable address** and **OpenSMTPD 550 Invalid recipient · unknown**, with or without postmaster: invalid / mailbox_not_found. A bare 550 carries no enhanced code to say what it refuses, but its words, as the software that sends them documents them, say no such mailbox; a domain without postmaster (against RFC 5321 §4.5.1, common for virtual domains) changes nothing, and \"postmaster refused alike\" says nothing about the prober.",
	"**self-hosted Postfix access map 554 5.7.1 Access denied · unknown**: invalid / mailbox_not_found. Postfix's text for any REJECT of an access table says nothing of why; postmaster@ the domain is accepted from the same client, so the refusal is about the local part. Without postmaster the answer would be unknown / smtp_rejected (not in the mix: which real mailboxes a verifier met before depends on the list's order).",
	"**self-hosted 451 at MAIL**, **421 at EHLO**, **554 greeting**, **policy block 5.7.1**: unknown. The server refuses or defers the prober, not the mailbox; a batch retries within jobs.retry_window, then says unknown.",
}
