package harness

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// FeedbackResult is scenario 9: verifyd learns from what happened when
// the mail was sent. Every address of a world of the feedback profile
// (accept-then-bounce hosts, catch-alls that drop mail for unknown users,
// true catch-alls, mailboxes that fill up, greylisting, …) is validated;
// the world delivers mail to each (world.Deliver) and the outcomes go back
// to verifyd (POST /v1/outcomes); then every address is validated again.
// Both rounds are measured against the world's truth of delivery.
type FeedbackResult struct {
	Skipped   string `json:"skipped,omitempty"`
	Error     string `json:"error,omitempty"`
	Domains   int    `json:"domains"`
	Addresses int    `json:"addresses"`
	// Sent counts the world's deliveries by event.
	Sent map[string]int `json:"sent"`
	// Fed is POST /v1/outcomes' answers, summed.
	Fed map[string]int `json:"fed"`
	// Before and After are the two rounds against the truth.
	Before *FeedbackRound `json:"before,omitempty"`
	After  *FeedbackRound `json:"after,omitempty"`
	// Changed counts the verdicts of the second round that differ from
	// the first ("valid → risky"), and Learned the second round's receipts
	// by learned.kind.
	Changed map[string]int `json:"changed"`
	Learned map[string]int `json:"learned"`
	// Accuracy is verifyd's own GET /v1/accuracy after the feedback: its
	// measure of the first round on the outcomes.
	Accuracy json.RawMessage `json:"accuracy,omitempty"`
	// CalibrationSeconds is how long the calibration took to appear.
	CalibrationSeconds float64 `json:"calibration_seconds"`
}

// FeedbackRound is one round's verdicts against the world's truth of
// delivery: deliverable (delivered or complained about) or bounced (a hard
// bounce); soft bounces count in neither.
type FeedbackRound struct {
	Verdicts map[string]int `json:"verdicts"`
	// Valid verdicts with a truth, and those whose mail bounced.
	Valid, ValidBounced int
	// CatchAll: risky catch-all verdicts with a truth, and those whose
	// mail bounced: the catch-all share that bounces.
	CatchAll, CatchAllBounced int
	// Invalid verdicts with a truth, and those whose mail was delivered.
	Invalid, InvalidDelivered int
	// Brier is the mean squared error of score/100 as the probability of
	// delivery; Reliability the truth per tenth of the score.
	Brier       float64          `json:"brier"`
	Reliability [10]FeedbackBand `json:"reliability"`
	Calibrated  int              `json:"calibrated"`
	Seconds     float64          `json:"seconds"`
}

// FeedbackBand is a tenth of the score: addresses with a truth, and those
// deliverable.
type FeedbackBand struct{ N, Deliverable int }

// feedbackEgress are the first egress addresses of A's and B's verifyd in
// scenario 9.
var feedbackEgress = []string{"127.0.0.66", "127.0.0.82"}

// fbReceipt is what scenario 9 reads of a receipt.
type fbReceipt struct {
	Email  string `json:"email"`
	Status string `json:"status"`
	Score  int    `json:"score"`
	Checks struct {
		Reason   string `json:"reason"`
		CatchAll bool   `json:"is_catch_all"`
	} `json:"checks"`
	Learned *struct {
		Kind string `json:"kind"`
	} `json:"learned"`
	Calibration *struct {
		RawScore int `json:"raw_score"`
	} `json:"calibration"`
}

// scenarioFeedback is scenario 9.
func (r *runner) scenarioFeedback(ctx context.Context) error {
	o := r.o
	w, emails, err := r.profileWorld(ctx, "feedback", world.ProfileFeedback, o.FeedbackDomains)
	if err != nil {
		return err
	}
	defer func() { _ = w.Proc.Stop(10 * time.Second) }()
	for _, i := range r.order(1) {
		run := r.runs[i]
		res := &FeedbackResult{Domains: w.Domains, Addresses: len(emails)}
		run.Scenarios.Feedback = res
		if ctx.Err() != nil {
			res.Skipped = "not run: " + ctx.Err().Error()
			continue
		}
		v, err := r.startOn(ctx, run, w, "feedback", feedbackEgress[i], func(cfg *VerifydConfig) { cfg.OutcomesRefitEvery = 2 * time.Second })
		var ns *notStarted
		switch {
		case errors.As(err, &ns):
			res.Skipped = "this verifyd does not start with an [outcomes] section (it learns nothing from outcomes): " + firstLine(err.Error())
			r.logf("feedback %s: %s", run.Label, res.Skipped)
			continue
		case err != nil:
			return err
		}
		if err := r.feedbackRun(ctx, v, w, emails, res); err != nil {
			res.Error = err.Error()
			r.logf("feedback %s: %v", run.Label, err)
		}
		if err := v.Stop(); err != nil {
			r.logf("feedback %s: stopping verifyd: %v", run.Label, err)
		}
		pause(ctx)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// feedbackRun validates, sends, feeds back and validates again.
func (r *runner) feedbackRun(ctx context.Context, v *Verifyd, w *World, emails []string, res *FeedbackResult) error {
	hc := &http.Client{Timeout: r.o.RequestTimeout}
	truth := map[string]world.Delivery{}
	first, secs, err := r.validateAll(ctx, hc, v, emails)
	if err != nil {
		return err
	}
	// The world delivers to every address, after the verdicts: each
	// outcome a microsecond after the last validation, in the past when
	// it is reported (verifyd leaves the future out of its measures).
	// SendGrid's events carry whole seconds: a second's wait puts them
	// after the last verdict.
	time.Sleep(1100 * time.Millisecond)
	sendAt := time.Now()
	var ds []world.Delivery
	res.Sent = map[string]int{}
	for i, e := range emails {
		d := w.W.Deliver(e, sendAt)
		d.At = sendAt.Add(time.Duration(i) * time.Microsecond)
		truth[lower(e)] = d
		ds = append(ds, d)
		res.Sent[d.Event]++
	}
	res.Before = judge(first, truth)
	res.Before.Seconds = secs
	time.Sleep(time.Duration(len(emails))*time.Microsecond + 10*time.Millisecond)
	// Feed them back as SendGrid's signed Event Webhook would, 1,000
	// events a request, signed with a key the account is set up with on
	// the admin socket.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	hcAdmin := v.adminClient()
	defer hcAdmin.CloseIdleConnections()
	if v.Account == "" {
		return fmt.Errorf("the demo account's id is unknown")
	}
	if err := adminDo(ctx, hcAdmin, "PUT", "/v1/accounts/"+v.Account+"/outcome-settings",
		map[string]any{"sendgrid_key": base64.StdEncoding.EncodeToString(der)}, nil); err != nil {
		res.Skipped = "this verifyd takes no sending-platform settings: " + firstLine(err.Error())
		return nil
	}
	res.Fed = map[string]int{}
	for lo := 0; lo < len(ds); lo += 1000 {
		body := world.SendGridEvents(ds[lo:min(lo+1000, len(ds))])
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		h := sha256.Sum256(append([]byte(ts), body...))
		sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", v.Base+"/v1/outcomes/sendgrid?account="+url.QueryEscape(v.Account), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
		req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			res.Skipped = "this verifyd has no /v1/outcomes/sendgrid"
			return nil
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST /v1/outcomes/sendgrid: %d %s", resp.StatusCode, b)
		}
		var sum map[string]any
		if err := json.Unmarshal(b, &sum); err != nil {
			return err
		}
		for k, n := range sum {
			if f, ok := n.(float64); ok {
				res.Fed[k] += int(f)
			}
		}
	}
	// The calibration is fitted every 2 s (outcomes.refit_every).
	t0 := time.Now()
	for deadline := t0.Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, "GET", v.Base+"/v1/accuracy?days=1&top=10", nil)
		req.Header.Set("Authorization", "Bearer "+v.Key)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a struct {
			Calibration json.RawMessage `json:"calibration"`
		}
		_ = json.Unmarshal(b, &a)
		res.Accuracy = b
		if string(a.Calibration) != "null" && len(a.Calibration) > 0 {
			break
		}
		if time.Now().After(deadline) {
			r.logf("feedback %s: no calibration within 30 s", v.Label)
			break
		}
	}
	res.CalibrationSeconds = round3(time.Since(t0).Seconds())
	second, secs, err := r.validateAll(ctx, hc, v, emails)
	if err != nil {
		return err
	}
	res.After = judge(second, truth)
	res.After.Seconds = secs
	res.Changed, res.Learned = map[string]int{}, map[string]int{}
	for e, a := range second {
		if b, ok := first[e]; ok && b.Status != a.Status {
			res.Changed[b.Status+" → "+a.Status]++
		}
		if a.Learned != nil {
			res.Learned[a.Learned.Kind]++
		}
	}
	r.logf("feedback %s: catch-all that bounces %d of %d before, %d of %d after; valid that bounces %d of %d before, %d of %d after",
		v.Label, res.Before.CatchAllBounced, res.Before.CatchAll, res.After.CatchAllBounced, res.After.CatchAll,
		res.Before.ValidBounced, res.Before.Valid, res.After.ValidBounced, res.After.Valid)
	return nil
}

// validateAll validates every address once (cache: false), 32 at a time.
func (r *runner) validateAll(ctx context.Context, hc *http.Client, v *Verifyd, emails []string) (map[string]fbReceipt, float64, error) {
	start := time.Now()
	out := make(map[string]fbReceipt, len(emails))
	var mu sync.Mutex
	var firstErr error
	next := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range next {
				b, _ := json.Marshal(map[string]any{"email": e})
				req, _ := http.NewRequestWithContext(ctx, "POST", v.Base+"/v1/validate", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+v.Key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var rc fbReceipt
				if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &rc) != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, fmt.Errorf("validate %s: %d %s", e, resp.StatusCode, body))
					mu.Unlock()
					continue
				}
				mu.Lock()
				out[lower(e)] = rc
				mu.Unlock()
			}
		}()
	}
	for _, e := range emails {
		if ctx.Err() != nil {
			break
		}
		next <- e
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, 0, firstErr
	}
	return out, round3(time.Since(start).Seconds()), ctx.Err()
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// judge measures one round's verdicts against the truth of delivery.
func judge(rs map[string]fbReceipt, truth map[string]world.Delivery) *FeedbackRound {
	f := &FeedbackRound{Verdicts: map[string]int{}}
	var sq float64
	n := 0
	for e, rc := range rs {
		f.Verdicts[rc.Status]++
		if rc.Calibration != nil {
			f.Calibrated++
		}
		d, ok := truth[e]
		if !ok {
			continue
		}
		deliverable := d.Event == world.EventDelivered || d.Event == world.EventComplaint
		bounced := d.Event == world.EventHardBounce
		if !deliverable && !bounced {
			continue
		}
		switch {
		case rc.Status == "valid":
			f.Valid++
			if bounced {
				f.ValidBounced++
			}
		case rc.Status == "risky" && rc.Checks.Reason == "catch_all":
			f.CatchAll++
			if bounced {
				f.CatchAllBounced++
			}
		case rc.Status == "invalid":
			f.Invalid++
			if deliverable {
				f.InvalidDelivered++
			}
		}
		p, y := float64(rc.Score)/100, 0.0
		if deliverable {
			y = 1
		}
		sq += (p - y) * (p - y)
		n++
		band := &f.Reliability[min(max(rc.Score, 0)/10, 9)]
		band.N++
		if deliverable {
			band.Deliverable++
		}
	}
	if n > 0 {
		f.Brier = math.Round(1e4*sq/float64(n)) / 1e4
	}
	return f
}

func pct(part, whole int) string {
	if whole == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(part)/float64(whole))
}

// feedbackSection writes scenario 9 of the report.
func feedbackSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 9. Learning from delivery outcomes\n\n")
	p("A world of the feedback profile (`mailworld -profile feedback`, bench/world/README.md, \"Delivery and outcomes\"): accept-then-bounce catch-alls (every RCPT accepted, mail to unknown users bounced 5.1.1 afterwards), catch-alls that drop mail for unknown users, true catch-alls, mailboxes over quota at delivery, full and disabled mailboxes, greylisting, a host that blocks the prober. ")
	p("Every address is validated (32 at a time, fresh probes); the world delivers mail to each (`world.Deliver`: what a real send would produce) and the outcomes go back to verifyd as SendGrid's signed Event Webhook would post them (`world.SendGridEvents`, 1,000 events a request, to `/v1/outcomes/sendgrid` with an ECDSA key the account is set up with); every address is validated again once verifyd has fitted its calibration (outcomes.refit_every 2 s). ")
	p("Both rounds are measured against the world's truth of delivery: deliverable (delivered or complained about) or bounced (a hard bounce); soft bounces count in neither.\n\n")
	for _, run := range res.Runs {
		fb := run.Scenarios.Feedback
		if !runHeading(w, res, run, fb) {
			continue
		}
		if fb.Error != "" {
			p("**Error: %s.**\n\n", fb.Error)
		}
		p("World: %s domains, %s addresses. Sent: %s. Fed back: %s.\n\n", itoa(fb.Domains), itoa(fb.Addresses), mapLine(fb.Sent), mapLine(fb.Fed))
		b, a := fb.Before, fb.After
		if b == nil || a == nil {
			continue
		}
		p("| against the truth of delivery | before feedback | after one feedback round |\n|---|---:|---:|\n")
		p("| risky catch-all verdicts whose mail bounces (**the catch-all share that bounces**) | %s of %s (%s) | %s of %s (%s) |\n",
			itoa(b.CatchAllBounced), itoa(b.CatchAll), pct(b.CatchAllBounced, b.CatchAll), itoa(a.CatchAllBounced), itoa(a.CatchAll), pct(a.CatchAllBounced, a.CatchAll))
		p("| valid verdicts whose mail bounces | %s of %s (%s) | %s of %s (%s) |\n",
			itoa(b.ValidBounced), itoa(b.Valid), pct(b.ValidBounced, b.Valid), itoa(a.ValidBounced), itoa(a.Valid), pct(a.ValidBounced, a.Valid))
		p("| invalid verdicts whose mail is delivered | %s of %s (%s) | %s of %s (%s) |\n",
			itoa(b.InvalidDelivered), itoa(b.Invalid), pct(b.InvalidDelivered, b.Invalid), itoa(a.InvalidDelivered), itoa(a.Invalid), pct(a.InvalidDelivered, a.Invalid))
		p("| Brier score of score/100 as the probability of delivery (lower is better) | %.4f | %.4f |\n", b.Brier, a.Brier)
		p("| receipts with a calibrated score | %s | %s |\n", itoa(b.Calibrated), itoa(a.Calibrated))
		p("| verdicts | %s | %s |\n\n", mapLine(b.Verdicts), mapLine(a.Verdicts))
		p("Verdicts that changed: %s. Receipts saying what was learned (`learned.kind`): %s. The calibration appeared %.1f s after the outcomes.\n\n",
			mapLine(fb.Changed), mapLine(fb.Learned), fb.CalibrationSeconds)
		p("The score against the truth (a reliability diagram as a table: for each tenth of the score, the addresses with a truth and the share deliverable):\n\n")
		p("| score | before: addresses | before: deliverable | after (calibrated): addresses | after: deliverable |\n|---|---:|---:|---:|---:|\n")
		for i := range 10 {
			hi := 10*i + 9
			if i == 9 {
				hi = 100
			}
			p("| %d–%d | %s | %s | %s | %s |\n", 10*i, hi, itoa(b.Reliability[i].N), pct(b.Reliability[i].Deliverable, b.Reliability[i].N),
				itoa(a.Reliability[i].N), pct(a.Reliability[i].Deliverable, a.Reliability[i].N))
		}
		p("\n")
		var acc struct {
			Calibration *struct {
				Model    string `json:"model"`
				Outcomes int    `json:"outcomes"`
				Scores   []int  `json:"scores"`
			} `json:"calibration"`
		}
		if json.Unmarshal(fb.Accuracy, &acc) == nil && acc.Calibration != nil {
			c := acc.Calibration
			p("The calibration curve verifyd fitted (model `%s`, on %s outcomes): the engine's score 0, 10, … 100 becomes %s.\n\n",
				c.Model, itoa(c.Outcomes), strings.Trim(fmt.Sprint(c.Scores), "[]"))
		}
	}
}

// mapLine writes a map of counts as "k n, k n", by key.
func mapLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + itoa(m[k])
	}
	return strings.Join(parts, ", ")
}
