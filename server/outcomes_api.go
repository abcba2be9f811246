package server

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/outcomes"
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
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Status: fasthttp.StatusUnsupportedMediaType,
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
