package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
)

const endpointBatch = "POST /v1/batch"

// Scheduler runs the jobs POST /v1/batch creates (batch.Scheduler).
type Scheduler interface {
	// Add schedules a job just created, with its addresses.
	Add(j storage.Job, addrs []string)
}

// URLChecker judges a batch's webhookUrl when it is posted
// (webhook.Dispatcher.CheckPosted): nil, or why it is refused.
type URLChecker interface {
	CheckPosted(raw string) error
}

// accepted is spec §2.7's 202 body.
type accepted struct {
	JobID           string   `json:"job_id"`
	Status          string   `json:"status"`
	CreditsReserved int64    `json:"credits_reserved"`
	Progress        progress `json:"progress"`
	StatusURL       string   `json:"status_url"`
}

type progress struct {
	Processed int `json:"processed"`
	Total     int `json:"total"`
}

func acceptedBody(j storage.Job) ([]byte, error) {
	return json.Marshal(accepted{
		JobID: j.ID, Status: string(storage.JobQueued), CreditsReserved: j.Reserved,
		Progress: progress{Processed: 0, Total: j.Total}, StatusURL: webhook.JobPath(j.ID),
	})
}

// postBatch is POST /v1/batch (spec §4.2): Idempotency-Key, strict body,
// then one synced write of the job, its addresses, the reservation of one
// credit per unique lower-cased address and the idempotent response; then
// the scheduler takes the job.
func (s *Server) postBatch(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	account := c.Account
	body := ctx.PostBody()
	if len(body) > s.opts.MaxBodyBytes {
		httpapi.WriteError(ctx, httpapi.BodyTooLarge(s.opts.MaxBodyBytes))
		return
	}
	if !httpapi.RequireJSON(ctx) {
		return
	}
	idem, done := s.idem.Begin(ctx, account, endpointBatch, body)
	if done {
		return
	}
	req, issues := decodeBatch(body, s.opts.MaxEmails, s.opts.Webhooks)
	if len(issues) > 0 {
		idem.Answer(ctx, httpapi.BadRequest("invalid request body", issues))
		return
	}
	addrs := normalize(req.Emails)
	var resp []byte
	spec := storage.JobSpec{
		Account: account, Addresses: addrs, ListName: req.ListName, WebhookURL: req.WebhookURL,
		Idem: idem.Ref,
		Respond: func(j storage.Job) (storage.IdemResponse, error) {
			b, err := acceptedBody(j)
			resp = b
			return storage.IdemResponse{Status: fasthttp.StatusAccepted,
				Header: []storage.HeaderField{{Name: "Location", Value: webhook.JobPath(j.ID)}}, Body: b}, err
		},
	}
	if lost := idem.Lost; lost != nil {
		// The key BeginIdem could not record: the job's write records
		// it, so that a retry replays this 202 instead of creating a
		// second job.
		spec.Idem, spec.IdemHash = &lost.Ref, lost.Hash
	}
	job, err := s.db.CreateJob(httpapi.Context(ctx), spec)
	var ice *storage.InsufficientCreditsError
	switch {
	case errors.As(err, &ice):
		// Not recorded for the Idempotency-Key: the answer depends on
		// the balance, not on the request, and a retry after a top-up
		// must be processed (server/httpapi/README.md, "Idempotency").
		idem.Abort()
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest,
			Message: fmt.Sprintf("insufficient credits: %d needed, %d available", ice.Needed, ice.Available()),
			Details: map[string]any{"currentCredits": ice.Available(), "needed": ice.Needed, "deltaShortfall": ice.Shortfall()}})
		return
	case err != nil:
		idem.Abort()
		s.internal(ctx, "create job", err)
		return
	}
	if resp == nil {
		if resp, err = acceptedBody(job); err != nil {
			s.internal(ctx, "encode job", err)
			return
		}
	}
	jobsCreated.Inc()
	s.opts.Batch.Add(job, addrs)
	s.log.Info("job created", "job", job.ID, "account", account, "addresses", job.Total,
		"duplicates", len(req.Emails)-len(addrs), "webhook", req.WebhookURL != "")
	ctx.Response.Header.Set("Location", webhook.JobPath(job.ID))
	ctx.Response.Header.SetContentType("application/json")
	ctx.SetStatusCode(fasthttp.StatusAccepted)
	ctx.SetBody(resp)
}

// jobJSON is spec §2.8's batch job, with two additive fields (list_name,
// breakdown); every field is always present.
type jobJSON struct {
	JobID           string   `json:"job_id"`
	Status          string   `json:"status"`
	Progress        progress `json:"progress"`
	CreditsReserved int64    `json:"credits_reserved"`
	CreatedAt       string   `json:"created_at"`
	StartedAt       *string  `json:"started_at"`
	CompletedAt     *string  `json:"completed_at"`
	ResultsURL      *string  `json:"results_url"`
	ListName        *string  `json:"list_name"`
	// Breakdown has every verdict (probe.Statuses), with none too.
	Breakdown map[string]verdictCount `json:"breakdown"`
}

// verdictCount is one verdict of a job's breakdown: its results, and
// those by reason (checks.reason).
type verdictCount struct {
	Count   int            `json:"count"`
	Reasons map[string]int `json:"reasons"`
}

// breakdown is a job's results by verdict and reason.
func breakdown(j storage.Job) map[string]verdictCount {
	out := make(map[string]verdictCount, len(probe.Statuses))
	for _, st := range probe.Statuses {
		out[string(st)] = verdictCount{Count: j.Counts[string(st)], Reasons: map[string]int{}}
	}
	for k, n := range j.Reasons {
		st, reason := storage.SplitReasonKey(k)
		if v, ok := out[st]; ok {
			v.Reasons[reason] = n
		}
	}
	return out
}

func jobView(j storage.Job) jobJSON {
	v := jobJSON{
		JobID: j.ID, Status: string(j.Status), Progress: progress{Processed: j.Processed, Total: j.Total},
		CreditsReserved: j.Reserved, CreatedAt: receipt.FormatTime(j.CreatedAt),
		Breakdown: breakdown(j),
	}
	if j.ListName != "" {
		v.ListName = &j.ListName
	}
	if !j.StartedAt.IsZero() {
		t := receipt.FormatTime(j.StartedAt)
		v.StartedAt = &t
	}
	if !j.Active() && !j.CompletedAt.IsZero() {
		t := receipt.FormatTime(j.CompletedAt)
		v.CompletedAt = &t
	}
	if j.Status == storage.JobCompleted {
		u := webhook.ResultsPath(j.ID)
		v.ResultsURL = &u
	}
	return v
}

// ownJob returns the caller's job named by the path, or answers 404 (spec
// §4.3: unknown, or another account's).
func (s *Server) ownJob(ctx *fasthttp.RequestCtx, account string) (storage.Job, bool) {
	id, _ := ctx.UserValue("id").(string)
	j, err := s.db.AccountJob(httpapi.Context(ctx), account, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeNotFound, Message: "job not found"})
		return storage.Job{}, false
	case err != nil:
		s.internal(ctx, "get job", err)
		return storage.Job{}, false
	}
	return j, true
}

// getJob is GET /v1/jobs/{id} (spec §4.3).
func (s *Server) getJob(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	j, ok := s.ownJob(ctx, c.Account)
	if !ok {
		return
	}
	b, err := json.Marshal(jobView(j))
	if err != nil {
		s.internal(ctx, "encode job", err)
		return
	}
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
}

// getResults is GET /v1/jobs/{id}/results.csv (spec §4.4): 400 until the
// job has completed, then the CSV, streamed from storage through a pipe,
// within the download caps (downloadGate).
// A storage error in the middle ends the response without the final
// chunk, so the client sees a broken transfer, never a short file that
// looks whole.
func (s *Server) getResults(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	filter, issues := statusFilter(ctx.QueryArgs())
	if issues != nil {
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: "invalid query", Details: map[string]any{"issues": issues}})
		return
	}
	s.download(ctx, c, "results.csv", func(id string) string {
		name := "job-" + id
		for _, st := range probe.Statuses {
			if filter[string(st)] {
				name += "-" + string(st)
			}
		}
		return name
	}, func(w io.Writer, db Store, id string) (int, error) {
		return writeCSV(context.Background(), w, db, id, filter)
	})
}

// getSuggestions serves GET /v1/jobs/{id}/suggestions.csv: the job's
// addresses that have a did-you-mean, with it (writeSuggestions).
// results.csv keeps spec §4.4's ten columns.
func (s *Server) getSuggestions(ctx *fasthttp.RequestCtx, c *httpapi.Caller) {
	s.download(ctx, c, "suggestions.csv", func(id string) string { return "job-" + id + "-suggestions" },
		func(w io.Writer, db Store, id string) (int, error) {
			return writeSuggestions(context.Background(), w, db, id)
		})
}

// download streams a CSV file of a completed job of the caller's account,
// written by write, under the downloads' gate; name gives the file's
// name (without .csv) for Content-Disposition.
func (s *Server) download(ctx *fasthttp.RequestCtx, c *httpapi.Caller, what string, name func(id string) string,
	write func(w io.Writer, db Store, id string) (int, error)) {
	account := c.Account
	j, ok := s.ownJob(ctx, account)
	if !ok {
		return
	}
	if j.Status != storage.JobCompleted {
		msg := fmt.Sprintf("job is %s; its results are available once it has completed", j.Status)
		if j.Status == storage.JobFailed {
			msg = "job failed; it has no results to download"
		}
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeBadRequest, Message: msg, Details: map[string]any{"status": string(j.Status)}})
		return
	}
	release, ok := s.downloads.acquire(account)
	if !ok {
		csvRefused.Inc()
		ctx.Response.Header.Set("Retry-After", "5")
		httpapi.WriteError(ctx, &httpapi.APIError{Code: httpapi.CodeRateLimited, Message: "too many " + what + " downloads under way; retry after 5 seconds",
			Details: map[string]any{"retryAfter": 5, "limit": "csv_downloads"}})
		return
	}
	csvDownloads.Inc()
	id := j.ID
	pr, pw := io.Pipe()
	db, log := s.db, s.log
	go func() {
		// The place is held until the writer ends: the whole file sent,
		// or the client gone (http.write_timeout cuts one that stopped
		// reading, which closes the pipe).
		defer release()
		// Not the request's context: the download outlives the handler.
		rows, err := write(pw, db, id)
		csvRows.Add(rows)
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			log.Error(what+" broken off", "job", id, "rows", rows, "err", err)
		}
		pw.CloseWithError(err)
	}()
	ctx.Response.Header.SetContentType("text/csv; charset=utf-8")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+name(id)+`.csv"`)
	ctx.SetBodyStream(pr, -1)
}

// statusFilter reads results.csv's query: status, a comma-separated list
// of verdicts (status=valid,risky), the rows to keep; nil keeps every row.
func statusFilter(args *fasthttp.Args) (map[string]bool, []httpapi.Issue) {
	issues := httpapi.QueryIssues(args, "status")
	if !args.Has("status") || issues != nil {
		return nil, issues
	}
	keep := map[string]bool{}
	for v := range strings.SplitSeq(string(args.Peek("status")), ",") {
		if !slices.Contains(probe.Statuses, probe.Status(v)) {
			return nil, []httpapi.Issue{{Path: "status", Message: "must be a comma-separated list of verdicts: valid, invalid, risky, unknown, disposable, spamtrap"}}
		}
		keep[v] = true
	}
	return keep, nil
}

// downloadGate caps the results.csv downloads streaming at once, in total
// and per account. A download holds a Pebble iterator, a goroutine and
// its buffers, and decodes a receipt per row; without a cap, 200 clients
// that never read held 50 MB and slowed every other request.
type downloadGate struct {
	mu         sync.Mutex
	max, perAc int
	n          int
	byAccount  map[string]int
}

func newDownloadGate(max, perAccount int) *downloadGate {
	return &downloadGate{max: max, perAc: perAccount, byAccount: map[string]int{}}
}

// acquire takes a place for account; release gives it back (once).
func (g *downloadGate) acquire(account string) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n >= g.max || g.byAccount[account] >= g.perAc {
		return nil, false
	}
	g.n++
	g.byAccount[account]++
	csvActive.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.n--
			if g.byAccount[account]--; g.byAccount[account] <= 0 {
				delete(g.byAccount, account)
			}
			csvActive.Dec()
		})
	}, true
}

// AccountJobs is the dashboard's list of an account's jobs, newest first:
// {"jobs": [spec §2.8 jobs]}.
func (s *Server) AccountJobs(ctx context.Context, account string, limit int) (any, error) {
	js, err := s.db.ListAccountJobs(ctx, account, limit)
	if err != nil {
		return nil, err
	}
	out := struct {
		Jobs []jobJSON `json:"jobs"`
	}{Jobs: make([]jobJSON, 0, len(js))}
	for _, j := range js {
		out.Jobs = append(out.Jobs, jobView(j))
	}
	return out, nil
}
