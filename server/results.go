package server

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// balance is GET /v1/balance (spec §4.5).
func (s *Server) balance(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	cr, err := s.db.Credits(httpapi.Context(ctx), c.Account)
	if err != nil {
		s.internal(ctx, "balance", err)
		return
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, map[string]int64{"credits": cr.Balance})
}

// historyRow is spec §2.9's ResultItem; null fields are JSON null.
type historyRow struct {
	ID         string  `json:"id"`
	Email      string  `json:"email"`
	Status     string  `json:"status"`
	Score      int     `json:"score"`
	Kind       string  `json:"kind"`
	JobID      *string `json:"job_id"`
	LatencyMs  *int64  `json:"latency_ms"`
	ProbedAt   string  `json:"probed_at"`
	CachedFrom *string `json:"cached_from"`
	// ResultID is the UUID of the stored result the row shows: what
	// cached_from names (spec §2.9 types it a UUID, while id is the
	// row's number), so a client can follow a cached row to its source.
	// Additive, always present.
	ResultID string `json:"result_id"`
}

type historyPage struct {
	Results    []historyRow `json:"results"`
	NextCursor *string      `json:"next_cursor"`
}

// results is GET /v1/results (spec §4.6). The cursor is lossless: see
// storage.FormatCursor. A parameter given is checked even when empty
// (cursor=, limit=): only an absent one takes its default.
func (s *Server) results(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	args := ctx.QueryArgs()
	var issues []httpapi.Issue
	limit := 50
	if args.Has("limit") {
		n, err := strconv.Atoi(string(args.Peek("limit")))
		if err != nil || n < 1 || n > 200 {
			issues = append(issues, httpapi.Issue{Path: "limit", Message: "must be an integer from 1 to 200"})
		}
		limit = n
	}
	kind := storage.HistoryAll
	if args.Has("kind") {
		switch v := args.Peek("kind"); string(v) {
		case "single", "batch", "all":
			kind = string(v)
		default:
			issues = append(issues, httpapi.Issue{Path: "kind", Message: "must be single, batch or all"})
		}
	}
	cursor := string(args.Peek("cursor"))
	if args.Has("cursor") {
		if _, err := storage.ParseCursor(cursor); cursor == "" || err != nil {
			issues = append(issues, httpapi.Issue{Path: "cursor", Message: "must be an ISO 8601 date-time (the next_cursor of the previous page)"})
		}
	}
	issues = append(issues, httpapi.QueryIssues(args, "limit", "kind", "cursor")...)
	if issues != nil {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: "invalid query", Details: map[string]any{"issues": issues}})
		return
	}
	page, err := s.db.ListHistory(httpapi.Context(ctx), c.Account, kind, cursor, limit)
	if errors.Is(err, storage.ErrInvalid) {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: fmt.Sprintf("invalid query: %v", err)})
		return
	}
	if err != nil {
		s.internal(ctx, "history", err)
		return
	}
	out := historyPage{Results: make([]historyRow, len(page.Rows))}
	for i, r := range page.Rows {
		h := historyRow{
			ID: strconv.FormatUint(r.ID, 10), Email: r.Email, Status: r.Status, Score: r.Score,
			Kind: r.Kind, ProbedAt: receipt.FormatTime(r.ProbedAt), ResultID: r.ResultID,
		}
		if r.JobID != "" {
			h.JobID = &r.JobID
		}
		if r.LatencyMs >= 0 {
			h.LatencyMs = &r.LatencyMs
		}
		if r.CachedFrom != "" {
			h.CachedFrom = &r.CachedFrom
		}
		out.Results[i] = h
	}
	if page.NextCursor != "" {
		out.NextCursor = &page.NextCursor
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, out)
}
