package contract

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// historyFields is §2.9's history row.
var historyFields = map[string]fieldKind{
	"id":          kString,
	"email":       kString,
	"status":      kString,
	"score":       kInt,
	"kind":        kString,
	"job_id":      kUUIDOrNull,
	"latency_ms":  kIntOrNull,
	"probed_at":   kDateTime,
	"cached_from": kStringOrNull,
	// Decision: additive, the UUID of the stored result the row shows
	// (what a later row's cached_from names).
	"result_id": kUUID,
}

// rowProblems lists how a history row breaks §2.9.
func rowProblems(row map[string]any) []string {
	bad := checkFields(row, historyFields, false)
	// §2.9 id: "numeric identifier serialized as a string".
	if id, ok := row["id"].(string); ok && !isDigits(id) {
		bad = append(bad, fmt.Sprintf("id %q is not a numeric identifier", id))
	}
	if s, ok := row["status"].(string); ok && !contains(verdicts, s) {
		bad = append(bad, fmt.Sprintf("status %q is not a verdict", s))
	}
	if n, ok := asInt(row["score"]); ok && (n < 0 || n > 100) {
		bad = append(bad, fmt.Sprintf("score %d is not 0 to 100", n))
	}
	k, _ := row["kind"].(string)
	if !contains(resultKinds, k) {
		bad = append(bad, fmt.Sprintf("kind %q is not single or batch", k))
	}
	// §2.9 job_id: "owning batch job; null for single probes".
	if k == "single" && row["job_id"] != nil {
		bad = append(bad, fmt.Sprintf("a single row has job_id %v", row["job_id"]))
	}
	if k == "batch" && row["job_id"] == nil {
		bad = append(bad, "a batch row has no job_id")
	}
	return bad
}

// page is one GET /v1/results answer, checked against §2.9.
func resultsPage(t testing.TB, c *client, query string) ([]map[string]any, any) {
	t.Helper()
	r := c.get("/v1/results?"+query).want(t, 200)
	m := r.obj(t)
	// §2.9: "Page: {results: array of history row, next_cursor: string
	// date-time or null}."
	for _, p := range checkFields(m, map[string]fieldKind{"next_cursor": kDateTimeOrNull}, false) {
		t.Fatalf("%s: %s", p, r)
	}
	list, ok := m["results"].([]any)
	if !ok {
		t.Fatalf("results is not an array: %s", r)
	}
	var rows []map[string]any
	for _, e := range list {
		row := obj(e)
		for _, p := range rowProblems(row) {
			t.Errorf("row %s: %s", show(e), p)
		}
		rows = append(rows, row)
	}
	return rows, m["next_cursor"]
}

// walk follows next_cursor from the first page to the last, with query
// (limit, kind) on each, and checks §4.6's paging rules on the way.
func walk(t testing.TB, key, query string) []map[string]any {
	t.Helper()
	c := newClient(t, key)
	var all []map[string]any
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 500 {
			t.Fatalf("more than 500 pages with %q", query)
		}
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		rows, next := resultsPage(t, c, strings.TrimPrefix(q, "&"))
		if cursor != "" {
			// §4.6 cursor: "rows strictly older than it are returned"
			ct, _ := parseDateTime(cursor)
			for _, row := range rows {
				if pt, _ := parseDateTime(row["probed_at"]); !pt.Before(ct) {
					t.Errorf("cursor %s returned a row probed at %v: not strictly older", cursor, row["probed_at"])
				}
			}
		}
		all = append(all, rows...)
		if next == nil {
			return all
		}
		if len(rows) == 0 {
			t.Fatalf("an empty page with next_cursor %v (%q)", next, query)
		}
		cursor = next.(string)
	}
}

// allResults is every history row of the key's account, newest first.
func allResults(t testing.TB, key, query string) []map[string]any {
	t.Helper()
	return walk(t, key, strings.TrimPrefix("limit=200&"+query, "&"))
}

// TestSpec2_9HistoryRows checks the rows single validations and a batch
// add to the history.
//
// §2.9: id "numeric identifier serialized as a string"; kind "single or
// batch"; job_id "owning batch job; null for single probes"; cached_from
// "source result when the row was served from cache". §1.3: "a
// cursor-paginated history of the account's recent results (single and
// batch)".
func TestSpec2_9HistoryRows(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 20)
	key := a.mint(t)
	c := newClient(t, key)
	singles := map[string]string{}
	for _, e := range []string{"ann@shop.test", "x@gone.test"} {
		_, m := validate(t, c, e)
		singles[e] = m["status"].(string)
	}
	job := postBatch(t, c, []string{"bob@shop.test", "zed@shop.test", "y@gone.test"})["job_id"].(string)
	waitJob(t, key, job)
	rows := allResults(t, key, "")
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5 (2 single, 3 batch): %s", len(rows), show(rows))
	}
	for _, row := range rows {
		e := row["email"].(string)
		if st, ok := singles[e]; ok {
			if row["kind"] != "single" || row["job_id"] != nil || row["status"] != st {
				t.Errorf("single %s: kind %v, job_id %v, status %v (receipt %s)", e, row["kind"], row["job_id"], row["status"], st)
			}
		} else if row["kind"] != "batch" || row["job_id"] != job {
			t.Errorf("batch row %s: kind %v, job_id %v, want batch, %s", e, row["kind"], row["job_id"], job)
		}
		if row["cached_from"] != nil {
			t.Errorf("%s: cached_from %v without cache", e, row["cached_from"])
		}
	}
	// §4.3, §4.4, §4.6: "Free of credits." The polls of the job, the
	// pages of the history and a download cost nothing.
	fetchCSV(t, c, job)
	c.get("/v1/jobs/"+job).want(t, 200)
	if b := balance(t, c); b != 15 {
		t.Errorf("balance %d, want 15: 5 addresses validated from 20, reads are free", b)
	}
	// The ids are distinct.
	ids := map[string]bool{}
	for _, row := range rows {
		ids[row["id"].(string)] = true
	}
	if len(ids) != len(rows) {
		t.Errorf("ids repeat: %s", show(rows))
	}
}

// TestSpec4_6ResultsQuery checks the query parameters of GET /v1/results.
//
// §4.6: limit "integer", "1 to 200, default 50"; cursor "string, ISO
// 8601 date-time"; kind "single, batch, all", "default all".
//
// Decision: a value outside these rules is 400 BAD_REQUEST with
// details.issues.
func TestSpec4_6ResultsQuery(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 0)
	c := newClient(t, a.mint(t))
	for _, q := range []string{"limit=0", "limit=201", "limit=-1", "limit=x", "limit=1.5", "limit=",
		"cursor=yesterday", "cursor=2026-13-45T99:00:00Z", "cursor=", "cursor=1700000000",
		"kind=other", "kind=SINGLE", "kind="} {
		t.Run(q, func(t *testing.T) {
			d := c.get("/v1/results?"+q).wantError(t, 400, "BAD_REQUEST")
			if err := issuesErr(d); err != nil {
				t.Errorf("%v: %s", err, show(d))
			}
		})
	}
	for _, q := range []string{"limit=1", "limit=200", "kind=single", "kind=batch", "kind=all",
		"cursor=" + url.QueryEscape("2026-11-21T10:00:00.123Z"), "cursor=" + url.QueryEscape("2026-11-21T10:00:00+02:00")} {
		c.get("/v1/results?"+q).want(t, 200)
	}
}

// TestSpec4_6ResultsPaging checks paging over a history of 63 rows, many
// in the same millisecond.
//
// §4.6: "Returns the account's recent results (single probes and batch
// results), newest first." limit "default 50"; cursor "the probed_at of
// the last row of the previous page; rows strictly older than it are
// returned"; kind "filter by origin"; "next_cursor of the previous page is
// passed as cursor for the next page; next_cursor is null on the last
// page."
//
// Decision: paging is lossless: walking every page with any limit
// returns each row exactly once, newest first.
func TestSpec4_6ResultsPaging(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	key := a.mint(t)
	c := newClient(t, key)
	validate(t, c, "first@gone.test")
	job := postBatch(t, c, manyAddresses(60, 0))["job_id"].(string)
	waitJob(t, key, job)
	validate(t, c, "second@gone.test")
	validate(t, c, "third@gone.test")

	all := allResults(t, key, "")
	if len(all) != 63 {
		t.Fatalf("%d rows, want 63", len(all))
	}
	if all[0]["email"] != "third@gone.test" || all[1]["email"] != "second@gone.test" || all[62]["email"] != "first@gone.test" {
		t.Errorf("not newest first: first rows %v, %v, last %v", all[0]["email"], all[1]["email"], all[62]["email"])
	}
	ids := func(rows []map[string]any) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r["id"].(string))
		}
		return out
	}
	want := ids(all)
	t.Run("newest first", func(t *testing.T) {
		for i := 1; i < len(all); i++ {
			p, _ := parseDateTime(all[i-1]["probed_at"])
			q, _ := parseDateTime(all[i]["probed_at"])
			if q.After(p) {
				t.Errorf("row %d (%v) is newer than row %d (%v)", i, all[i]["probed_at"], i-1, all[i-1]["probed_at"])
			}
		}
	})
	t.Run("default limit 50", func(t *testing.T) {
		rows, next := resultsPage(t, newClient(t, key), "")
		if len(rows) != 50 || next == nil {
			t.Errorf("%d rows, next_cursor %v; want 50 and a cursor", len(rows), next)
		}
	})
	for _, limit := range []int{1, 7, 50, 62, 63, 200} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			t.Parallel()
			got := walk(t, key, fmt.Sprintf("limit=%d", limit))
			if !slices.Equal(ids(got), want) {
				t.Errorf("walking with limit %d gave ids\n%q\nwant\n%q", limit, ids(got), want)
			}
		})
	}
	t.Run("kind", func(t *testing.T) {
		t.Parallel()
		single := walk(t, key, "limit=2&kind=single")
		batch := walk(t, key, "limit=25&kind=batch")
		every := walk(t, key, "limit=40&kind=all")
		for _, r := range single {
			if r["kind"] != "single" {
				t.Errorf("kind=single returned %s", show(r))
			}
		}
		for _, r := range batch {
			if r["kind"] != "batch" || r["job_id"] != job {
				t.Errorf("kind=batch returned %s", show(r))
			}
		}
		if len(single) != 3 || len(batch) != 60 || !slices.Equal(ids(every), want) {
			t.Errorf("kind=single %d rows, kind=batch %d, kind=all %d; want 3, 60, 63", len(single), len(batch), len(every))
		}
	})
	t.Run("a cursor of the client's own", func(t *testing.T) {
		t.Parallel()
		// The batch rows' probed_at: the rows strictly older are the
		// batch rows probed before it and the first single validation.
		cursor := all[30]["probed_at"].(string)
		ct, _ := parseDateTime(cursor)
		var older []string
		for _, r := range all {
			if pt, _ := parseDateTime(r["probed_at"]); pt.Before(ct) {
				older = append(older, r["id"].(string))
			}
		}
		got := walk(t, key, "limit=200&cursor="+url.QueryEscape(cursor))
		if !slices.Equal(ids(got), older) {
			t.Errorf("cursor %s gave ids %q, want the rows strictly older: %q", cursor, ids(got), older)
		}
		// A cursor before everything: an empty last page.
		rows, next := resultsPage(t, newClient(t, key), "cursor="+url.QueryEscape(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)))
		if len(rows) != 0 || next != nil {
			t.Errorf("a cursor of 2000: %d rows, next_cursor %v", len(rows), next)
		}
	})
}
