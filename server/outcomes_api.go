package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/outcomes"
	"github.com/verifyd/verifyd/server/receipt"
)

// outcomesSummary is POST /v1/outcomes' 200 body (outcomes.Summary).
type outcomesSummary struct {
	Received       int `json:"received"`
	Stored         int `json:"stored"`
	Duplicates     int `json:"duplicates"`
	Matched        int `json:"matched"`
	Unmatched      int `json:"unmatched"`
	Bounced        int `json:"bounced"`
	FalseNegatives int `json:"false_negatives"`
}

// postOutcomes is POST /v1/outcomes (docs/api.md): up to 100,000 delivery
// outcomes as JSON lines or CSV, all valid or none stored; each stored
// once by its event id.
func (s *Server) postOutcomes(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	body := ctx.PostBody()
	if len(body) > s.opts.MaxOutcomesBody {
		httpapi.WriteError(ctx, httpapi.BodyTooLarge(s.opts.MaxOutcomesBody))
		return
	}
	ct := string(ctx.Request.Header.ContentType())
	format, err := outcomes.FormatOf(ct)
	if err != nil {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest,
			Message: err.Error(), Details: map[string]any{"issues": []httpapi.Issue{{Path: "Content-Type",
				Message: fmt.Sprintf("must be application/x-ndjson or text/csv, not %q", ct)}}}})
		return
	}
	outs, issues := outcomes.Parse(format, body)
	if issues != nil {
		httpapi.WriteError(ctx, httpapi.BadRequest("invalid outcomes; none was stored", issues))
		return
	}
	sum, err := s.opts.Outcomes.Record(httpapi.Context(ctx), c.Account, outs)
	if err != nil {
		s.internal(ctx, "record outcomes", err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, outcomesSummary{
		Received: sum.Received, Stored: sum.Stored, Duplicates: sum.Duplicates, Matched: sum.Matched,
		Unmatched: sum.Unmatched, Bounced: sum.Bounced, FalseNegatives: sum.FalseNegatives,
	})
}

// accuracyJSON is GET /v1/accuracy's answer (outcomes.Report).
type accuracyJSON struct {
	From             string                    `json:"from"`
	To               string                    `json:"to"`
	Days             int                       `json:"days"`
	Outcomes         int                       `json:"outcomes"`
	Matched          int                       `json:"matched"`
	Unmatched        int                       `json:"unmatched"`
	Confusion        map[string]map[string]int `json:"confusion"`
	PrecisionValid   *float64                  `json:"precision_valid"`
	PrecisionInvalid *float64                  `json:"precision_invalid"`
	CatchAll         catchAllJSON              `json:"catch_all"`
	FalseNegatives   int                       `json:"false_negatives"`
	ByProvider       []outcomes.Slice          `json:"by_provider"`
	ByReason         []outcomes.Slice          `json:"by_reason"`
	ByDomain         []outcomes.Slice          `json:"by_domain"`
	WorstDomains     []outcomes.Slice          `json:"worst_domains"`
	Daily            []outcomes.Slice          `json:"daily"`
	Reliability      []outcomes.Bucket         `json:"reliability"`
	// Calibration is the model the account's scores are calibrated with
	// now; null until it has enough outcomes.
	Calibration *calibrationJSON `json:"calibration"`
}

type calibrationJSON struct {
	Model    string `json:"model"`
	Outcomes int    `json:"outcomes"`
	// Scores are the calibrated scores of the raw scores 0, 10, … 100.
	Scores    []int               `json:"scores"`
	Providers []providerModelJSON `json:"providers"`
}

type providerModelJSON struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Outcomes int    `json:"outcomes"`
	Scores   []int  `json:"scores"`
}

// scoresOf is a model's calibrated scores of the raw scores 0, 10, … 100.
func scoresOf(m *outcomes.Model) []int {
	out := make([]int, 0, 11)
	for raw := 0; raw <= 100; raw += 10 {
		out = append(out, m.Score(raw))
	}
	return out
}

type catchAllJSON struct {
	Outcomes     int      `json:"outcomes"`
	Bounced      int      `json:"bounced"`
	BouncedShare *float64 `json:"bounced_share"`
}

// AccuracyOf measures an account's outcomes (every account's: "") over
// the last days days, top entries per list: GET /v1/accuracy's answer,
// and the dashboard's.
func (s *Server) AccuracyOf(ctx context.Context, account string, days, top int) (any, error) {
	now := time.Now().UTC()
	since := now.Add(-time.Duration(days) * 24 * time.Hour)
	r, err := outcomes.Accuracy(ctx, s.db, account, since, now, top)
	if err != nil {
		return nil, err
	}
	out := accuracyJSON{From: receipt.FormatTime(r.From), To: receipt.FormatTime(r.To), Days: days,
		Outcomes: r.Outcomes, Matched: r.Matched, Unmatched: r.Unmatched, Confusion: r.Confusion,
		PrecisionValid: r.PrecisionValid, PrecisionInvalid: r.PrecisionInvalid,
		CatchAll:       catchAllJSON{Outcomes: r.CatchAll, Bounced: r.CatchAllBounced},
		FalseNegatives: r.FalseNegatives, ByProvider: r.ByProvider, ByReason: r.ByReason,
		ByDomain: r.ByDomain, WorstDomains: r.WorstDomains, Daily: r.Daily, Reliability: r.Reliability}
	if r.CatchAll > 0 {
		f := float64(r.CatchAllBounced) / float64(r.CatchAll)
		out.CatchAll.BouncedShare = &f
	}
	if s.opts.Outcomes != nil && account != "" {
		if all, ps := s.opts.Outcomes.Models(account); all != nil {
			c := &calibrationJSON{Model: all.Version, Outcomes: all.Outcomes, Scores: scoresOf(all), Providers: []providerModelJSON{}}
			for p, m := range ps {
				c.Providers = append(c.Providers, providerModelJSON{Provider: p, Model: m.Version, Outcomes: m.Outcomes, Scores: scoresOf(m)})
			}
			slices.SortFunc(c.Providers, func(a, b providerModelJSON) int { return strings.Compare(a.Provider, b.Provider) })
			out.Calibration = c
		}
	}
	return out, nil
}

// accuracyArgs reads the query of GET /v1/accuracy: days (1 to 365,
// default 30) and top (1 to 100, default 10).
func accuracyArgs(args *fasthttp.Args) (days, top int, issues []httpapi.Issue) {
	days, top = 30, 10
	num := func(name string, lo, hi int, v *int) {
		if !args.Has(name) {
			return
		}
		n, err := strconv.Atoi(string(args.Peek(name)))
		if err != nil || n < lo || n > hi {
			issues = append(issues, httpapi.Issue{Path: name, Message: fmt.Sprintf("must be an integer from %d to %d", lo, hi)})
			return
		}
		*v = n
	}
	num("days", 1, 365, &days)
	num("top", 1, 100, &top)
	return days, top, append(issues, httpapi.QueryIssues(args, "days", "top")...)
}

// getAccuracy is GET /v1/accuracy (docs/api.md): the account's accuracy
// measured on its delivery outcomes.
func (s *Server) getAccuracy(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	days, top, issues := accuracyArgs(ctx.QueryArgs())
	if issues != nil {
		httpapi.WriteError(ctx, httpapi.BadRequest("invalid query", issues))
		return
	}
	out, err := s.AccuracyOf(httpapi.Context(ctx), c.Account, days, top)
	if err != nil {
		s.internal(ctx, "accuracy", err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, out)
}
