package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"

	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// csvHeader is spec §4.4's header row, in its order.
var csvHeader = []string{"email", "status", "score", "is_disposable", "is_role_based", "is_catch_all",
	"is_free_provider", "mx_host", "latency_ms", "probed_at"}

// csvFlags is what a row needs of a stored receipt.
type csvFlags struct {
	Checks struct {
		MXHost         string `json:"mx_host"`
		IsDisposable   bool   `json:"is_disposable"`
		IsRoleBased    bool   `json:"is_role_based"`
		IsFreeProvider bool   `json:"is_free_provider"`
		IsCatchAll     bool   `json:"is_catch_all"`
	} `json:"checks"`
}

// writeCSV streams the job's results as spec §4.4's CSV (RFC 4180: CRLF
// line ends, fields with commas, quotes or line breaks quoted, quotes
// doubled), one row per address in upload order, straight from storage:
// one row in memory at a time. A filter keeps the rows of the verdicts it
// holds; nil keeps all.
func writeCSV(ctx context.Context, w io.Writer, db Store, jobID string, filter map[string]bool) (rows int, err error) {
	var f csvFlags
	return streamJobCSV(ctx, w, db, jobID, csvHeader, func(r storage.Result, row []string) bool {
		if filter != nil && !filter[r.Status] {
			return false
		}
		f = csvFlags{}
		if len(r.Receipt) > 0 {
			_ = json.Unmarshal(r.Receipt, &f) // a missing flag reads false
		}
		c := &f.Checks
		row[0] = r.Email
		row[1] = r.Status
		row[2] = strconv.Itoa(r.Score)
		row[3] = strconv.FormatBool(c.IsDisposable)
		row[4] = strconv.FormatBool(c.IsRoleBased)
		row[5] = strconv.FormatBool(c.IsCatchAll)
		row[6] = strconv.FormatBool(c.IsFreeProvider)
		row[7] = c.MXHost
		row[8] = ""
		if r.LatencyMs >= 0 {
			row[8] = strconv.FormatInt(r.LatencyMs, 10)
		}
		row[9] = receipt.FormatTime(r.ProbedAt)
		return true
	})
}

// suggestionsHeader is suggestions.csv's header row.
var suggestionsHeader = []string{"email", "did_you_mean", "reason", "status"}

// writeSuggestions streams the job's results that have a did-you-mean
// (the receipt's did_you_mean, docs/api.md) as CSV, in upload order: the
// address, the address probably meant, the reason (domain_typo,
// tld_typo or local_part_typo) and the address's verdict. The same CSV
// form as writeCSV's.
func writeSuggestions(ctx context.Context, w io.Writer, db Store, jobID string) (rows int, err error) {
	var f struct {
		DidYouMean *receipt.DidYouMean `json:"did_you_mean"`
	}
	return streamJobCSV(ctx, w, db, jobID, suggestionsHeader, func(r storage.Result, row []string) bool {
		// Only a receipt that names a suggestion is decoded.
		if len(r.Receipt) == 0 || !bytes.Contains(r.Receipt, didYouMeanKey) {
			return false
		}
		f.DidYouMean = nil
		if json.Unmarshal(r.Receipt, &f) != nil || f.DidYouMean == nil {
			return false
		}
		row[0], row[1], row[2], row[3] = r.Email, f.DidYouMean.Email, f.DidYouMean.Reason, r.Status
		return true
	})
}

var didYouMeanKey = []byte(`"did_you_mean"`)

// streamJobCSV writes header, then a row for each of the job's results
// that fill keeps (fill writes the row's fields into row, reused), as
// RFC 4180 CSV with CRLF line ends, one row in memory at a time; it
// returns the rows written.
func streamJobCSV(ctx context.Context, w io.Writer, db Store, jobID string, header []string,
	fill func(r storage.Result, row []string) bool) (rows int, err error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	cw.UseCRLF = true
	if err := cw.Write(header); err != nil {
		return 0, err
	}
	row := make([]string, len(header))
	err = db.JobResults(ctx, jobID, func(r storage.Result) error {
		if !fill(r, row) {
			return nil
		}
		rows++
		return cw.Write(row)
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	if err == nil {
		err = bw.Flush()
	}
	return rows, err
}
