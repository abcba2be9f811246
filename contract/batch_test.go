package contract

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// batchBody is the JSON of a batch request.
func batchBody(emails []string, extra ...string) string {
	m := map[string]any{"emails": emails}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// postBatch posts a batch and wants 202; it returns the accepted body.
func postBatch(t testing.TB, c *client, emails []string, extra ...string) map[string]any {
	t.Helper()
	return c.post("/v1/batch", batchBody(emails, extra...)).want(t, 202).obj(t)
}

// jobFields is §2.8: "All fields are always present."
var jobFields = map[string]fieldKind{
	"job_id":           kUUID,
	"status":           kString,
	"progress":         kObject,
	"credits_reserved": kInt,
	"created_at":       kDateTime,
	"started_at":       kDateTimeOrNull,
	"completed_at":     kDateTimeOrNull,
	"results_url":      kStringOrNull,
}

// jobProblems lists how a job breaks §2.8 and the state rules of §3.
func jobProblems(j map[string]any, id string) []string {
	bad := checkFields(j, jobFields, false)
	if j["job_id"] != id {
		bad = append(bad, fmt.Sprintf("job_id %v, want %s", j["job_id"], id))
	}
	st, _ := j["status"].(string)
	if !contains(jobStatuses, st) {
		bad = append(bad, fmt.Sprintf("status %q is not in the job status enumeration", st))
	}
	p := obj(j["progress"])
	processed, ok1 := asInt(p["processed"])
	total, ok2 := asInt(p["total"])
	if !ok1 || !ok2 {
		bad = append(bad, fmt.Sprintf("progress %s is not {processed: integer, total: integer}", show(j["progress"])))
	} else if processed < 0 || processed > total {
		bad = append(bad, fmt.Sprintf("progress %d of %d", processed, total))
	}
	switch st {
	case "completed":
		// §3: "completed_at set; results_url populated". §2.8
		// results_url: "path /v1/jobs/<job_id>/results.csv".
		if j["completed_at"] == nil {
			bad = append(bad, "completed, but completed_at is null")
		}
		if want := "/v1/jobs/" + id + "/results.csv"; j["results_url"] != want {
			bad = append(bad, fmt.Sprintf("completed, but results_url is %v, want %s", show(j["results_url"]), want))
		}
		if j["started_at"] == nil {
			bad = append(bad, "completed, but started_at is null")
		}
		if ok1 && ok2 && processed != total {
			bad = append(bad, fmt.Sprintf("completed with %d of %d processed", processed, total))
		}
	case "running":
		// §3: "While running, started_at is set, completed_at is null,
		// and results_url is null."
		if j["started_at"] == nil {
			bad = append(bad, "running, but started_at is null")
		}
		fallthrough
	default:
		// §2.8: completed_at "null until the job ends"; results_url
		// "populated only when status is completed, otherwise null".
		if st != "failed" && j["completed_at"] != nil {
			bad = append(bad, fmt.Sprintf("%s, but completed_at is %v", st, j["completed_at"]))
		}
		if j["results_url"] != nil {
			bad = append(bad, fmt.Sprintf("%s, but results_url is %v", st, j["results_url"]))
		}
	}
	return bad
}

// waitJob polls GET /v1/jobs/{id} (from a client of its own, so that the
// polls spend no other client's rate limit) until the job has ended, and
// returns it. Every answer on the way must be a valid job.
func waitJob(t testing.TB, key, id string) map[string]any {
	t.Helper()
	c := newClient(t, key)
	var j map[string]any
	waitUntil(t, 90*time.Second, 250*time.Millisecond, func() bool {
		r := c.get("/v1/jobs/"+id).want(t, 200)
		j = r.obj(t)
		if p := jobProblems(j, id); len(p) > 0 {
			t.Fatalf("job %s: %v: %s", id, p, r)
		}
		return j["status"] == "completed" || j["status"] == "failed"
	}, func() string { return fmt.Sprintf("job %s did not end: %s", id, show(j)) })
	if j["status"] != "completed" {
		t.Fatalf("job %s failed: %s", id, show(j))
	}
	return j
}

// fetchCSV downloads a job's results.csv and checks §4.4's form; it
// returns the rows after the header.
func fetchCSV(t testing.TB, c *client, id string) [][]string {
	t.Helper()
	r := c.get("/v1/jobs/"+id+"/results.csv").want(t, 200)
	// §4.4: "content type text/csv, Content-Disposition header with an
	// attachment filename ending in .csv"
	if mt := mediaType(r.header.Get("Content-Type")); mt != "text/csv" {
		t.Errorf("Content-Type %q, want text/csv", r.header.Get("Content-Type"))
	}
	disp, params, err := mime.ParseMediaType(r.header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || !strings.HasSuffix(params["filename"], ".csv") {
		t.Errorf("Content-Disposition %q is not an attachment with a filename ending in .csv (%v)", r.header.Get("Content-Disposition"), err)
	}
	rd := csv.NewReader(strings.NewReader(string(r.body)))
	rows, err := rd.ReadAll()
	if err != nil {
		t.Fatalf("results.csv is not CSV: %v\n%s", err, r.body)
	}
	// §4.4: "The first line is the header row with these columns in
	// this order: email, status, score, is_disposable, is_role_based,
	// is_catch_all, is_free_provider, mx_host, latency_ms, probed_at."
	if len(rows) == 0 || !slices.Equal(rows[0], csvHeader) {
		t.Fatalf("results.csv header %q, want %q", rows[:min(1, len(rows))], csvHeader)
	}
	for _, row := range rows[1:] {
		for _, p := range csvRowProblems(row) {
			t.Errorf("results.csv row %q: %s", row, p)
		}
	}
	return rows[1:]
}

// csvRowProblems checks one row of results.csv.
func csvRowProblems(row []string) []string {
	var bad []string
	if row[0] == "" {
		bad = append(bad, "empty email")
	}
	// §2.3: the verdict enumeration.
	if !contains(verdicts, row[1]) {
		bad = append(bad, fmt.Sprintf("status %q is not a verdict", row[1]))
	}
	// §2.4 score: integer 0 to 100.
	if n, err := strconv.Atoi(row[2]); err != nil || n < 0 || n > 100 {
		bad = append(bad, fmt.Sprintf("score %q is not an integer 0 to 100", row[2]))
	}
	// §4.4: "Booleans are written as true/false."
	for i := 3; i <= 6; i++ {
		if row[i] != "true" && row[i] != "false" {
			bad = append(bad, fmt.Sprintf("%s %q is not true/false", csvHeader[i], row[i]))
		}
	}
	// latency_ms is §2.4's integer (§2.9: "integer or null": empty).
	if row[8] != "" {
		if n, err := strconv.Atoi(row[8]); err != nil || n < 0 {
			bad = append(bad, fmt.Sprintf("latency_ms %q is not an integer", row[8]))
		}
	}
	if !isoMillisUTC.MatchString(row[9]) {
		bad = append(bad, fmt.Sprintf("probed_at %q is not ISO 8601 UTC with milliseconds", row[9]))
	}
	return bad
}

// TestSpec2_2BatchLowerCasedAndDeduplicated checks that a batch names and
// counts lower-cased, unique addresses.
//
// §2.2 emails: "Lower-cased and de-duplicated by the service." §1.4: "A
// batch reserves N credits at enqueue, where N is the count of unique
// lower-cased addresses." §3: "credits_reserved equals the count of
// unique lower-cased addresses; progress.processed is 0 and
// progress.total is that count".
//
// Decision: the stored rows, results.csv and the history name the
// lower-cased address; Ann@Shop.test and ann@shop.test are one address.
func TestSpec2_2BatchLowerCasedAndDeduplicated(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 50)
	c := newClient(t, a.mint(t))
	emails := []string{"Ann@Shop.test", "ann@shop.test", "BOB@shop.test", "bob@SHOP.TEST", "Bob@Shop.Test", "X@Gone.Test", "ann@shop.test"}
	want := []string{"ann@shop.test", "bob@shop.test", "x@gone.test"}
	acc := postBatch(t, c, emails)
	id, _ := acc["job_id"].(string)
	if n, _ := asInt(acc["credits_reserved"]); n != 3 {
		t.Errorf("credits_reserved %v for %q, want 3", acc["credits_reserved"], emails)
	}
	if tot, _ := asInt(obj(acc["progress"])["total"]); tot != 3 {
		t.Errorf("progress.total %v, want 3", show(acc["progress"]))
	}
	job := waitJob(t, c.key, id)
	if tot, _ := asInt(obj(job["progress"])["total"]); tot != 3 {
		t.Errorf("the job's progress.total %v, want 3", show(job["progress"]))
	}
	var got []string
	for _, row := range fetchCSV(t, c, id) {
		got = append(got, row[0])
		if row[0] == "ann@shop.test" || row[0] == "bob@shop.test" {
			if row[1] != "valid" {
				t.Errorf("%s: %s, want valid (the MX accepts it)", row[0], row[1])
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("results.csv names %q, want %q", got, want)
	}
	var hist []string
	for _, row := range allResults(t, c.key, "kind=batch") {
		hist = append(hist, row["email"].(string))
	}
	slices.Sort(hist)
	if !slices.Equal(hist, want) {
		t.Errorf("the history names %q, want %q", hist, want)
	}
	// Each unique address costs one credit.
	if b := balance(t, c); b != 47 {
		t.Errorf("balance %d after a batch of 3 unique addresses, want 47", b)
	}
}

// TestSpec2_2BatchRequestRules checks the body rules of POST /v1/batch.
// The account has no credits, so a body the service wrongly accepts
// starts no job: it is refused for credits instead, without
// details.issues, which fails the test.
//
// §2.2: emails "array of string (email format, each max 320)", "yes",
// "1 to 100,000 items"; webhookUrl "string, URI"; listName "max 200
// characters"; "No other properties are allowed." §4.2: "400: invalid
// body or insufficient credits". §8: "emails per batch 1 to 100,000".
//
// Decision: each of these is 400 with details.issues; a syntactically
// bad item with "@" does not refuse the batch (it becomes a row,
// TestSpec4_4ResultsCSV).
func TestSpec2_2BatchRequestRules(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 0)
	key := a.mint(t)
	c := newClient(t, key)
	addr321 := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 246) + ".gone.test"
	if len(addr321) != 321 {
		t.Fatalf("test bug: %d", len(addr321))
	}
	for _, tc := range []struct{ name, body string }{
		{"no emails", `{}`},
		{"emails null", `{"emails":null}`},
		{"emails a string", `{"emails":"ann@shop.test"}`},
		{"emails an object", `{"emails":{"0":"ann@shop.test"}}`},
		{"emails empty", `{"emails":[]}`},
		{"an item a number", `{"emails":["ann@shop.test",42]}`},
		{"an item null", `{"emails":["ann@shop.test",null]}`},
		{"an item of 321 characters", batchBody([]string{"ann@shop.test", addr321})},
		{"an item without @", `{"emails":["ann@shop.test","nobody"]}`},
		{"an item empty", `{"emails":["ann@shop.test",""]}`},
		{"listName of 201 characters", batchBody([]string{"ann@shop.test"}, "listName", strings.Repeat("n", 201))},
		{"listName a number", `{"emails":["ann@shop.test"],"listName":7}`},
		{"webhookUrl not a URI", batchBody([]string{"ann@shop.test"}, "webhookUrl", "not a uri")},
		{"webhookUrl a number", `{"emails":["ann@shop.test"],"webhookUrl":1}`},
		{"another property", `{"emails":["ann@shop.test"],"priority":"high"}`},
		{"body an array", `["ann@shop.test"]`},
		{"body not JSON", `emails=ann@shop.test`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c.post("/v1/batch", tc.body).wantError(t, 400, "BAD_REQUEST")
			if err := issuesErr(d); err != nil {
				t.Errorf("%v: %s", err, show(d))
			}
		})
	}
	// Within the limits the body is accepted, and refused only for
	// credits: details.needed is the count of unique addresses.
	for _, tc := range []struct {
		name   string
		body   string
		needed int64
	}{
		{"listName of 200 characters", batchBody([]string{"ann@shop.test"}, "listName", strings.Repeat("n", 200)), 1},
		{"an item of 320 characters", batchBody([]string{addr321[1:]}), 1},
		{"webhookUrl a URI", batchBody([]string{"ann@shop.test", "bob@shop.test"}, "webhookUrl", "http://127.0.0.1:9/hook"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c.post("/v1/batch", tc.body).wantError(t, 400, "BAD_REQUEST")
			if n, ok := asInt(d["needed"]); !ok || n != tc.needed || d["issues"] != nil {
				t.Errorf("details %s, want only the credit refusal with needed %d", show(d), tc.needed)
			}
		})
	}
	// 100,000 addresses are allowed, 100,001 are not. Each is sent from a
	// client of its own: the batch rate limit is 30 a minute.
	t.Run("100,000 items", func(t *testing.T) {
		t.Parallel()
		d := newClient(t, key).post("/v1/batch", batchBody(manyAddresses(100000, 0))).wantError(t, 400, "BAD_REQUEST")
		if n, ok := asInt(d["needed"]); !ok || n != 100000 || d["issues"] != nil {
			t.Errorf("details %s, want the credit refusal with needed 100000 (the count limit accepted it)", show(d))
		}
	})
	t.Run("100,001 items", func(t *testing.T) {
		t.Parallel()
		d := newClient(t, key).post("/v1/batch", batchBody(manyAddresses(100001, 0))).wantError(t, 400, "BAD_REQUEST")
		if err := issuesErr(d); err != nil {
			t.Fatalf("%v: %s", err, show(d))
		}
		if ps := issuePaths(d); !slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(p, "emails") }) {
			t.Errorf("issues %q do not name emails", ps)
		}
	})
}

// manyAddresses returns n distinct lower-case addresses on gone.test, each
// pad characters longer than the shortest.
func manyAddresses(n, pad int) []string {
	out := make([]string, n)
	p := strings.Repeat("p", pad)
	for i := range out {
		out[i] = fmt.Sprintf("u%06d%s@gone.test", i, p)
	}
	return out
}

// TestSpec2_7BatchAccepted checks the 202 of POST /v1/batch.
//
// §2.7: job_id "string, UUID", status "required, always queued",
// credits_reserved "integer", progress "object {processed: integer,
// total: integer}", status_url "path of the job resource:
// /v1/jobs/<job_id>". §3: "progress.processed is 0 and progress.total is
// that count".
func TestSpec2_7BatchAccepted(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 20)
	c := newClient(t, a.mint(t))
	r := c.post("/v1/batch", batchBody([]string{"ann@shop.test", "x@gone.test", "zed@shop.test"}, "listName", "contract")).want(t, 202)
	m := r.obj(t)
	for _, p := range checkFields(m, map[string]fieldKind{
		"job_id": kUUID, "status": kString, "credits_reserved": kInt, "progress": kObject, "status_url": kString,
	}, false) {
		t.Error(p)
	}
	id, _ := m["job_id"].(string)
	if m["status"] != "queued" {
		t.Errorf("status %v, want queued", m["status"])
	}
	if n, _ := asInt(m["credits_reserved"]); n != 3 {
		t.Errorf("credits_reserved %v, want 3", m["credits_reserved"])
	}
	p := obj(m["progress"])
	if proc, ok := asInt(p["processed"]); !ok || proc != 0 {
		t.Errorf("progress.processed %v, want 0", p["processed"])
	}
	if tot, ok := asInt(p["total"]); !ok || tot != 3 {
		t.Errorf("progress.total %v, want 3", p["total"])
	}
	if m["status_url"] != "/v1/jobs/"+id {
		t.Errorf("status_url %v, want /v1/jobs/%s", m["status_url"], id)
	}
	if mt := mediaType(r.header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
	}
	// The status_url is the job.
	c.get(m["status_url"].(string)).want(t, 200)
	waitJob(t, c.key, id)
}

// TestSpec3JobLifecycle follows a job on a slow host from queued to
// completed, and checks every state it shows.
//
// §3: "Batch job states: queued, running, completed, failed." "While
// running, started_at is set, completed_at is null, and results_url is
// null." Completed: "completed_at set; results_url populated". §2.8 "All
// fields are always present." §4.4: "400 BAD_REQUEST when the job has not
// completed yet."
func TestSpec3JobLifecycle(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	key := a.mint(t)
	c := newClient(t, key)
	acc := postBatch(t, c, []string{"ann@slow.test", "x@gone.test"})
	id := acc["job_id"].(string)
	order := map[string]int{"queued": 0, "running": 1, "completed": 2, "failed": 2}
	var seen []string
	last := -1
	var lastProcessed int64
	csvChecked := false
	var j map[string]any
	waitUntil(t, 90*time.Second, 250*time.Millisecond, func() bool {
		r := c.get("/v1/jobs/"+id).want(t, 200)
		j = r.obj(t)
		for _, p := range jobProblems(j, id) {
			t.Fatalf("%s: %s", p, r)
		}
		st := j["status"].(string)
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		// A job moves only forward, and its progress never goes back.
		if order[st] < last {
			t.Fatalf("the job went back to %s after %q", st, seen)
		}
		last = order[st]
		processed, _ := asInt(obj(j["progress"])["processed"])
		if processed < lastProcessed {
			t.Fatalf("progress.processed went from %d to %d", lastProcessed, processed)
		}
		lastProcessed = processed
		if st != "completed" && st != "failed" && !csvChecked {
			csvChecked = true
			x := c.get("/v1/jobs/" + id + "/results.csv")
			if x.status != 400 {
				// Unless the job completed in between, this is wrong.
				now := c.get("/v1/jobs/"+id).want(t, 200).obj(t)
				if now["status"] != "completed" {
					t.Errorf("results.csv of a %s job: %s", st, x)
				} else {
					t.Logf("the job completed while results.csv was requested; not conclusive")
					csvChecked = false
				}
			} else if err := x.envelopeErr(400, "BAD_REQUEST"); err != nil {
				t.Errorf("results.csv of a %s job: %v: %s", st, err, x)
			}
		}
		return st == "completed" || st == "failed"
	}, func() string { return fmt.Sprintf("job %s did not end; states %q; last %s", id, seen, show(j)) })
	if j["status"] != "completed" {
		t.Fatalf("the job failed: %s", show(j))
	}
	if !slices.Contains(seen, "running") {
		t.Errorf("the job was never seen running (states %q): the host's replies take seconds", seen)
	}
	if !csvChecked {
		t.Errorf("results.csv was never requested before completion")
	}
	// The times are ordered.
	created, _ := parseDateTime(j["created_at"])
	started, _ := parseDateTime(j["started_at"])
	completed, _ := parseDateTime(j["completed_at"])
	if started.Before(created) || completed.Before(started) {
		t.Errorf("created_at %v, started_at %v, completed_at %v are out of order", j["created_at"], j["started_at"], j["completed_at"])
	}
	if n, _ := asInt(j["credits_reserved"]); n != 2 {
		t.Errorf("credits_reserved %v, want 2", j["credits_reserved"])
	}
}

// TestSpec4_4ResultsCSV checks a completed job's CSV: its form (fetchCSV)
// and each address's verdict against the world (worldTruths).
//
// §4.4: "One row per address; mx_host may be empty. Booleans are written
// as true/false."
//
// Decision: an address with "@" but bad syntax does not refuse the batch:
// it is a row, invalid (the reason is not in the CSV).
func TestSpec4_4ResultsCSV(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 50)
	key := a.mint(t)
	c := newClient(t, key)
	var emails []string
	for _, tr := range worldTruths {
		emails = append(emails, tr.email)
	}
	emails = append(emails, "bad address@shop.test")
	acc := postBatch(t, c, emails)
	id := acc["job_id"].(string)
	waitJob(t, key, id)
	rows := fetchCSV(t, c, id)
	byEmail := map[string][]string{}
	for _, row := range rows {
		if _, dup := byEmail[row[0]]; dup {
			t.Errorf("%s has two rows", row[0])
		}
		byEmail[row[0]] = row
	}
	if len(rows) != len(emails) {
		t.Errorf("%d rows for %d addresses", len(rows), len(emails))
	}
	for _, tr := range worldTruths {
		row, ok := byEmail[tr.email]
		if !ok {
			t.Errorf("no row for %s", tr.email)
			continue
		}
		flags := map[string]any{}
		for i := 3; i <= 6; i++ {
			flags[csvHeader[i]] = row[i] == "true"
		}
		// The CSV has no reason column, nor syntax and mx.
		want := truth{email: tr.email, status: tr.status, flags: map[string]bool{}}
		for k, v := range tr.flags {
			if _, ok := flags[k]; ok {
				want.flags[k] = v
			}
		}
		for _, p := range truthProblems(want, row[1], "", flags) {
			t.Errorf("%s: %s", tr.email, p)
		}
	}
	if row := byEmail["bad address@shop.test"]; row == nil || row[1] != "invalid" {
		t.Errorf("the malformed address's row is %q, want status invalid", row)
	}
}

// TestSpec4_3UnknownJob checks the 404 of a job that does not exist.
//
// §4.3: "404 when the job does not exist or belongs to another account."
// §4.4: the same for results.csv.
//
// Decision: an id that is not a UUID names no job: 404 NOT_FOUND too.
func TestSpec4_3UnknownJob(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 0)
	c := newClient(t, a.mint(t))
	for _, id := range []string{"6f1c2a7e-3b0d-4c55-9a1e-0c8b2f4d7e91", "00000000-0000-0000-0000-000000000000", "not-a-uuid", "42"} {
		for _, p := range []string{"/v1/jobs/" + id, "/v1/jobs/" + id + "/results.csv"} {
			c.get(p).wantError(t, 404, "NOT_FOUND")
		}
	}
}
