package harness

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// TyposResult is scenario 10: did-you-mean suggestions against the truth
// of a world of the typos profile (world.ProfileTypos). The account first
// validates one address at each real domain (a batch: the domains it
// knows), then every typed address one at a time; each receipt's
// did_you_mean is compared with the address the person meant.
type TyposResult struct {
	Skipped   string `json:"skipped,omitempty"`
	Error     string `json:"error,omitempty"`
	Domains   int    `json:"domains"`
	Addresses int    `json:"addresses"`
	// Groups are the figures per group of slips (the published sources,
	// each generated kind) and Real those of the addresses whose domain
	// takes mail.
	Groups []TypoGroup `json:"groups"`
	// Generated, Published and All sum the groups.
	Generated TypoGroup `json:"generated"`
	Published TypoGroup `json:"published"`
	All       TypoGroup `json:"all"`
	// TakesMail counts the addresses whose domain takes mail (the real
	// domains, slips that are another real domain or were registered to
	// catch mistyped mail) and FalseSuggestions the suggestions they got:
	// each one is wrong.
	TakesMail        int `json:"takes_mail"`
	FalseSuggestions int `json:"false_suggestions"`
	// BatchSuggestions is the first batch's suggestions.csv rows: every
	// one is a false suggestion (its addresses all take mail).
	BatchSuggestions int `json:"batch_suggestions"`
	// Wrong lists suggestions that are not the address meant, Missed the
	// published slips that got none (at most 40 each).
	Wrong  []string `json:"wrong,omitempty"`
	Missed []string `json:"missed,omitempty"`
	// Seconds is how long the single validations took.
	Seconds float64 `json:"seconds"`
}

// TypoGroup is a group's figures: slips whose typed domain takes no mail
// (Slips), those that got the address meant (Right), another one (Wrong)
// or none.
type TypoGroup struct {
	Name  string `json:"name"`
	Slips int    `json:"slips"`
	Right int    `json:"right"`
	Wrong int    `json:"wrong"`
}

// Precision is the share of suggestions that are right; Recall the share
// of slips that got the address meant.
func (g TypoGroup) Precision() float64 { return ratio(g.Right, g.Right+g.Wrong) }
func (g TypoGroup) Recall() float64    { return ratio(g.Right, g.Slips) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (g *TypoGroup) add(o TypoGroup) {
	g.Slips, g.Right, g.Wrong = g.Slips+o.Slips, g.Right+o.Right, g.Wrong+o.Wrong
}

func (t *TyposResult) status() (bool, string) {
	if t == nil {
		return false, ""
	}
	return true, t.Skipped
}

// typosEgress are the first egress addresses of A's and B's verifyd in
// scenario 10.
var typosEgress = []string{"127.0.0.98", "127.0.0.114"}

// scenarioTypos is scenario 10.
func (r *runner) scenarioTypos(ctx context.Context) error {
	o := r.o
	w, emails, err := r.profileWorld(ctx, "typos", world.ProfileTypos, o.TypoDomains)
	if err != nil {
		return err
	}
	defer func() { _ = w.Proc.Stop(10 * time.Second) }()
	for _, i := range r.order(1) {
		run := r.runs[i]
		res := &TyposResult{Domains: w.Domains, Addresses: len(emails)}
		run.Scenarios.Typos = res
		if ctx.Err() != nil {
			res.Skipped = "not run: " + ctx.Err().Error()
			continue
		}
		v, err := r.startOn(ctx, run, w, "typos", typosEgress[i], nil)
		if err != nil {
			return err
		}
		if err := r.typosRun(ctx, v, w, res); err != nil {
			res.Error = err.Error()
			r.logf("typos %s: %v", run.Label, err)
		}
		if err := v.Stop(); err != nil {
			r.logf("typos %s: stopping verifyd: %v", run.Label, err)
		}
		pause(ctx)
	}
	return nil
}

// typoGroupOf splits a typos-profile group ("generated deletion ·
// nxdomain · unknown") into the slip's group and the typed domain's fate.
func typoGroupOf(group string) (name, fate string) {
	name, rest, _ := strings.Cut(group, " · ")
	fate, _, _ = strings.Cut(rest, " · ")
	return name, fate
}

// typosRun teaches the account its domains, then validates the typed
// addresses and judges the suggestions.
func (r *runner) typosRun(ctx context.Context, v *Verifyd, w *World, res *TyposResult) error {
	var known, typed []string
	for _, e := range w.Expected {
		switch g, _ := typoGroupOf(e.Group); g {
		case world.TypoGroupMeant, world.TypoGroupReal:
			known = append(known, e.Email)
		default:
			typed = append(typed, e.Email)
		}
	}
	rb, err := r.uploadBatch(ctx, v, known)
	if err != nil {
		return err
	}
	if rb.res.Skipped != "" || rb.res.Error != "" {
		res.Skipped = cmp.Or(rb.res.Skipped, rb.res.Error)
		return nil
	}
	rb.wait(ctx, 5*time.Minute)
	if rb.res.Error != "" {
		return fmt.Errorf("the batch of the real domains: %s", rb.res.Error)
	}
	status, data, err := rb.api.do(ctx, "GET", "/v1/jobs/"+rb.res.JobID+"/suggestions.csv", nil)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound:
		res.Skipped = "this verifyd makes no suggestions (GET /v1/jobs/{id}/suggestions.csv is 404)"
		return nil
	case status != http.StatusOK:
		return fmt.Errorf("suggestions.csv: %s", httpFailure(status, data))
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return fmt.Errorf("suggestions.csv: %w", err)
	}
	res.BatchSuggestions = len(rows) - 1

	// Every address one at a time: the typed ones, and the real domains'
	// again (now that the account knows them).
	all := append(slices.Clone(typed), known...)
	dym := make([]string, len(all))
	bodies := validateBodies(all, false)
	client := NewClient(v.Addr, 32, r.o.RequestTimeout)
	defer client.CloseIdleConnections()
	start := time.Now()
	st := Load{
		Name:   "typos",
		Client: client, Path: "/v1/validate", Key: v.Key,
		Concurrency: 32, Count: len(all), Duration: 10 * time.Minute, Timeout: r.o.RequestTimeout,
		Body: func(i int) []byte { return bodies[i] },
		Check: func(i, status int, body []byte, _ time.Duration) string {
			if status != http.StatusOK {
				return httpFailure(status, body)
			}
			var rc struct {
				DidYouMean *struct {
					Email string `json:"email"`
				} `json:"did_you_mean"`
			}
			if err := json.Unmarshal(body, &rc); err != nil {
				return "HTTP 200 without a receipt"
			}
			if rc.DidYouMean != nil {
				dym[i] = rc.DidYouMean.Email
			}
			return ""
		},
	}.Run(ctx)
	res.Seconds = round3(time.Since(start).Seconds())
	if st.OK < len(all) {
		return fmt.Errorf("%d of %d validations answered (%s)", st.OK, len(all), errSummary(st.Errors))
	}
	groups := map[string]*TypoGroup{}
	for i, email := range all {
		e := w.Expect[lower(email)]
		g, fate := typoGroupOf(e.Group)
		if e.Meant == "" {
			res.TakesMail++
			if dym[i] != "" {
				res.FalseSuggestions++
				if len(res.Wrong) < 40 {
					res.Wrong = append(res.Wrong, fmt.Sprintf("%s → %s (%s: its domain takes mail)", email, dym[i], cmp.Or(fate, g)))
				}
			}
			continue
		}
		tg := groups[g]
		if tg == nil {
			tg = &TypoGroup{Name: g}
			groups[g] = tg
		}
		tg.Slips++
		switch dym[i] {
		case e.Meant:
			tg.Right++
		case "":
			if !strings.HasPrefix(g, "generated ") && len(res.Missed) < 40 {
				res.Missed = append(res.Missed, fmt.Sprintf("%s (meant %s; %s)", email, e.Meant, g))
			}
		default:
			tg.Wrong++
			if len(res.Wrong) < 40 {
				res.Wrong = append(res.Wrong, fmt.Sprintf("%s → %s (meant %s; %s)", email, dym[i], e.Meant, g))
			}
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		g := *groups[n]
		res.Groups = append(res.Groups, g)
		if strings.HasPrefix(n, "generated ") {
			res.Generated.add(g)
		} else {
			res.Published.add(g)
		}
		res.All.add(g)
	}
	res.Generated.Name, res.Published.Name, res.All.Name = "generated slips", "published corpus", "all"
	r.logf("typos %s: generated precision %.4f recall %.4f; published precision %.4f recall %.4f; %d false suggestions of %d addresses that take mail",
		v.Label, res.Generated.Precision(), res.Generated.Recall(), res.Published.Precision(), res.Published.Recall(), res.FalseSuggestions, res.TakesMail)
	return nil
}

// typosSection writes scenario 10.
func typosSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 10. Did you mean\n\n")
	p("A world of the typos profile (`mailworld -profile typos`, bench/world/README.md, \"The typos profile\"): the large providers and businesses, each with one address that exists, and addresses at typed domains, each labelled with the address the person meant. ")
	p("The typed domains are the published corpus (bench/world/typos.txt: Word to the Wise's typo traps, the tests of the email_typo gem and of mailcheck) and one generated slip of each kind of every real domain (a letter left out or doubled, two swapped, a key beside the right one on a QWERTY keyboard, a slip in the top-level part). ")
	p("Most typed domains do not exist; a tenth are parked (null MX); some take mail (registered to catch mistyped mail, or another real domain), and then no suggestion is right. ")
	p("The account first validates every real domain's address (a batch), then every address one at a time; each receipt's `did_you_mean` is compared with the address meant. *Precision*: suggestions that are the address meant; *recall*: slips whose domain takes no mail that got it.\n\n")
	for _, run := range res.Runs {
		t := run.Scenarios.Typos
		if !runHeading(w, res, run, t) {
			continue
		}
		if t.Error != "" {
			p("**Error: %s.**\n\n", t.Error)
		}
		p("World: %s domains, %s addresses; the single validations took %.1f s.\n\n", itoa(t.Domains), itoa(t.Addresses), t.Seconds)
		p("| slips | typed domain takes no mail | suggested, right | suggested, wrong | **precision** | **recall** |\n|---|---:|---:|---:|---:|---:|\n")
		row := func(g TypoGroup, bold bool) {
			name := g.Name
			if bold {
				name = "**" + name + "**"
			}
			p("| %s | %s | %s | %s | %.2f %% | %.2f %% |\n", name, itoa(g.Slips), itoa(g.Right), itoa(g.Wrong), 100*g.Precision(), 100*g.Recall())
		}
		for _, g := range t.Groups {
			row(g, false)
		}
		row(t.Generated, true)
		row(t.Published, true)
		row(t.All, true)
		p("\n**False suggestions on domains that take mail: %s of %s addresses** (the real domains' addresses, slips that are another real domain or take mail), and %s in the batch's suggestions.csv.\n\n",
			itoa(t.FalseSuggestions), itoa(t.TakesMail), itoa(t.BatchSuggestions))
		if len(t.Wrong) > 0 {
			p("Wrong suggestions:\n\n")
			for _, s := range t.Wrong {
				p("- `%s`\n", s)
			}
			p("\n")
		}
		if len(t.Missed) > 0 {
			p("Published slips without a suggestion (none is made for two slips in one part, a dot moved or left out, a letter replaced by one not beside it, letters moved further than a swap, an extra key typed beside the right one, a slip in a name of three letters or fewer):\n\n")
			for _, s := range t.Missed {
				p("- `%s`\n", s)
			}
			p("\n")
		}
	}
}
