package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
)

// A data directory written by an earlier release, opened by this one.
//
// testdata/datadir-b4dd917/data is the data directory verifyd of commit
// b4dd917 (schema version 1) wrote, and expect.json what it answered
// then: TestGenerateOldDataDir made both, once, by running that binary
// against the world below:
//
//	git worktree add /tmp/b4dd917 b4dd917
//	(cd /tmp/b4dd917 && go build -o /tmp/old/verifyd ./cmd/verifyd)
//	VERIFYD_OLD_BINARY=/tmp/old/verifyd go test -run TestGenerateOldDataDir ./cmd/verifyd/
//
// TestOldDataDir opens a copy with this build and checks that it serves
// all of it.
const oldDataDir = "testdata/datadir-b4dd917"

// oldData is expect.json: what the old binary answered, and the world's
// truth about the job's addresses.
type oldData struct {
	Commit string `json:"commit"`
	// Key and Key2 are API keys of the demo account and of a second one.
	Key      string `json:"key"`
	Key2     string `json:"key2"`
	Account  string `json:"account"`
	Account2 string `json:"account2"`
	Balance  int    `json:"balance"`
	Balance2 int    `json:"balance2"`
	// UserEmail and Password sign in an operator of the dashboard.
	UserEmail string `json:"user_email"`
	Password  string `json:"password"`
	// Receipts are the signed receipts of the demo account's single
	// validations, in order of Singles.
	Singles  []string          `json:"singles"`
	Receipts []json.RawMessage `json:"receipts"`
	JWKS     json.RawMessage   `json:"jwks"`
	// History is GET /v1/results?limit=200 of the demo account.
	History json.RawMessage `json:"history"`
	// JobID's GET /v1/jobs/{id} and results.csv.
	JobID string          `json:"job_id"`
	Job   json.RawMessage `json:"job"`
	CSV   string          `json:"csv"`
	// Breakdown is the job's results by verdict and reason as the world
	// and the CSV say (the old binary had no breakdown to answer).
	Breakdown map[string]map[string]int `json:"breakdown"`
}

// oldDataWorld is the world both tests run against: the batch world's
// domains without greylisting.
func oldDataWorld(t *testing.T) *world.Running {
	t.Helper()
	return startWorld(t, &world.World{
		Hosts: []*world.Host{
			{Name: "mx.shop.test", IP: "127.72.0.1", TLS: "1.3"},
			{Name: "mx.catch.test", IP: "127.72.0.2"},
			{Name: "mx.mailinator.com", IP: "127.72.0.3"},
		},
		Domains: []*world.Domain{
			{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK, "info": world.MailboxOK, "bob": world.MailboxOK}},
			{Name: "catch.test", MX: []world.MX{{Pref: 10, Host: "mx.catch.test"}}, Policy: world.PolicyCatchAll},
			{Name: "mailinator.com", MX: []world.MX{{Pref: 10, Host: "mx.mailinator.com"}}, Policy: world.PolicyCatchAll},
			{Name: "gone.test", NXDomain: true},
		},
	})
}

// oldDataConfig is the configuration of both: cached results of any age
// answer cache: true, so the test means the same on any date.
func oldDataConfig(run *world.Running) string {
	c := batchConfig(run, "", "")
	c = strings.Replace(c, `log_level = "warn"`, `log_level = "info"`, 1)
	return strings.Replace(c, "[probe]\n", "[probe]\ncache_max_age = \"876000h\"\n", 1)
}

var oldJobAddrs = []string{"ann@shop.test", "bob@shop.test", "info@shop.test", "zed@shop.test", "yan@shop.test",
	"any@catch.test", "x@mailinator.com", "x@gone.test", "not an address@", `"john,doe"@catch.test`}

// TestGenerateOldDataDir writes testdata/datadir-b4dd917 with the binary
// named by $VERIFYD_OLD_BINARY (see oldDataDir); skipped without it.
func TestGenerateOldDataDir(t *testing.T) {
	old := os.Getenv("VERIFYD_OLD_BINARY")
	if old == "" {
		t.Skip("VERIFYD_OLD_BINARY is not set: the fixture is generated once, by hand")
	}
	saved := binary
	binary = old
	defer func() { binary = saved }()

	run := oldDataWorld(t)
	dir := t.TempDir()
	in := startIn(t, dir, oldDataConfig(run))
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	ctx := context.Background()
	exp := oldData{Commit: "b4dd917", Key: in.key, Account: demoAccount(t, ac).ID,
		UserEmail: "ops@example.test", Password: "correct horse battery staple"}

	second, err := ac.CreateAccount(ctx, adminapi.CreateAccount{Name: "Second account", Plan: "growth", Credits: 50})
	if err != nil {
		t.Fatal(err)
	}
	minted, err := ac.MintKey(ctx, second.ID, adminapi.MintKey{Scopes: []string{"validate:read", "validate:write"}, Label: "old"})
	if err != nil {
		t.Fatal(err)
	}
	exp.Account2, exp.Key2 = second.ID, minted.Token
	if _, err := ac.AddUser(ctx, adminapi.AddUser{Email: exp.UserEmail, Password: exp.Password, Operator: true}); err != nil {
		t.Fatal(err)
	}

	exp.Singles = []string{"ann@shop.test", "zed@shop.test", "info@shop.test", "any@catch.test", "x@gone.test"}
	for i, e := range exp.Singles {
		r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":%q}`, e), "Idempotency-Key", fmt.Sprintf("old-single-%04d", i))
		if r.status != 200 {
			t.Fatalf("validate %s: %d %s", e, r.status, r.body)
		}
		exp.Receipts = append(exp.Receipts, json.RawMessage(r.body))
	}
	if r := c.do("POST", "/v1/validate", exp.Key2, `{"email":"ann@shop.test"}`); r.status != 200 {
		t.Fatalf("validate with the second account: %d %s", r.status, r.body)
	}

	r := c.do("POST", "/v1/batch", c.key, batchBody(t, oldJobAddrs, map[string]any{"listName": "Old list"}))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	exp.JobID = r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, exp.JobID, 60*time.Second)
	exp.Job = c.do("GET", "/v1/jobs/"+exp.JobID, c.key, "").body
	csvr := c.do("GET", "/v1/jobs/"+exp.JobID+"/results.csv", c.key, "")
	if csvr.status != 200 {
		t.Fatalf("results.csv: %d", csvr.status)
	}
	exp.CSV = string(csvr.body)
	exp.Breakdown = map[string]map[string]int{}
	for _, row := range readCSV(t, exp.CSV)[1:] {
		reason := rowReason(run, row)
		if exp.Breakdown[row[1]] == nil {
			exp.Breakdown[row[1]] = map[string]int{}
		}
		exp.Breakdown[row[1]][reason]++
	}
	exp.History = c.do("GET", "/v1/results?limit=200", c.key, "").body
	exp.JWKS = c.do("GET", "/.well-known/jwks.json", "", "").body
	exp.Balance, exp.Balance2 = balance(t, c, c.key), balance(t, c, exp.Key2)
	stopVerifyd(t, in)

	out, err := filepath.Abs(oldDataDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dir, "data"), filepath.Join(out, "data"))
	b, err := json.MarshalIndent(exp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "expect.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// rowReason is the checks.reason the world's truth gives a results.csv
// row: its reason, but disposable_domain for a disposable verdict (the
// world knows no disposable lists) and role_based for a valid role
// address (the engine names it so, probe/verdict.go).
func rowReason(run *world.Running, row []string) string {
	switch {
	case row[1] == world.StatusDisposable:
		return "disposable_domain"
	case row[4] == "true" && row[1] == "valid":
		return "role_based"
	}
	return run.World.Expect(row[0]).Reason
}

// copyTree copies the regular files and directories under src to dst
// (sockets and the like are left out).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readCSV(t *testing.T, s string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestOldDataDir opens a copy of the data directory b4dd917 wrote
// (oldDataDir) with this build: the directory is upgraded once (schema 1
// to 2), and verifyd serves what the old one did: both accounts' keys
// and balances, the history page byte for byte, the job with the
// breakdown the world's truth gives, its CSV byte for byte (and
// filtered), the old signing key in the key set, the old receipts valid
// against it, cached results (cache: true), the dashboard user's
// password. A second start does not upgrade again.
func TestOldDataDir(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(oldDataDir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp oldData
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	run := oldDataWorld(t)
	dir := t.TempDir()
	copyTree(t, filepath.Join(oldDataDir, "data"), filepath.Join(dir, "data"))
	in := startIn(t, dir, oldDataConfig(run))
	in.waitLog(t, "data directory upgraded", `"from":1`, `"to":2`)
	c := &client{t: t, base: in.base, key: exp.Key}

	check := func(when string, spent int) {
		t.Helper()
		if got := balance(t, c, exp.Key); got != exp.Balance-spent {
			t.Errorf("%s: balance %d, want %d", when, got, exp.Balance-spent)
		}
		if got := balance(t, c, exp.Key2); got != exp.Balance2 {
			t.Errorf("%s: second account's balance %d, want %d", when, got, exp.Balance2)
		}
		// The job: what the old binary answered, and the new fields.
		var job, oldJob map[string]any
		if err := json.Unmarshal(c.do("GET", "/v1/jobs/"+exp.JobID, c.key, "").body, &job); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(exp.Job, &oldJob); err != nil {
			t.Fatal(err)
		}
		for k, v := range oldJob {
			if fmt.Sprint(job[k]) != fmt.Sprint(v) {
				t.Errorf("%s: job %s %v, the old binary said %v", when, k, job[k], v)
			}
		}
		if job["list_name"] != "Old list" {
			t.Errorf("%s: list_name %v", when, job["list_name"])
		}
		bd, _ := job["breakdown"].(map[string]any)
		for st, reasons := range exp.Breakdown {
			v, _ := bd[st].(map[string]any)
			n := 0
			for _, k := range reasons {
				n += k
			}
			want := map[string]any{}
			for r, k := range reasons {
				want[r] = float64(k)
			}
			if v["count"] != float64(n) || fmt.Sprint(v["reasons"]) != fmt.Sprint(want) {
				t.Errorf("%s: breakdown of %s %v; want count %d, reasons %v", when, st, v, n, reasons)
			}
		}
		// The CSV, byte for byte; filtered, its invalid rows.
		if got := c.do("GET", "/v1/jobs/"+exp.JobID+"/results.csv", c.key, ""); got.status != 200 || string(got.body) != exp.CSV {
			t.Errorf("%s: results.csv %d:\n%s\nthe old binary's:\n%s", when, got.status, got.body, exp.CSV)
		}
		var invalid []string
		for _, row := range readCSV(t, exp.CSV)[1:] {
			if row[1] == "invalid" {
				invalid = append(invalid, strings.Join(row, ","))
			}
		}
		got := readCSV(t, string(c.do("GET", "/v1/jobs/"+exp.JobID+"/results.csv?status=invalid", c.key, "").body))
		var gotRows []string
		for _, row := range got[1:] {
			gotRows = append(gotRows, strings.Join(row, ","))
		}
		if len(invalid) == 0 || !slices.Equal(gotRows, invalid) {
			t.Errorf("%s: status=invalid rows %q, want %q", when, gotRows, invalid)
		}
	}
	check("upgraded", 0)

	// History, exactly as the old binary served it (read before the
	// validations below add rows), but for the additive result_id of each
	// row, taken out once checked: a UUID, each row its own.
	body := c.do("GET", "/v1/results?limit=200", c.key, "").body
	var got, want struct {
		Results []map[string]any `json:"results"`
		Next    any              `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(exp.History, &want); err != nil {
		t.Fatal(err)
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ids := map[any]bool{}
	for _, row := range got.Results {
		if id, _ := row["result_id"].(string); !uuid.MatchString(id) || ids[id] {
			t.Errorf("history row %v: result_id not a UUID of its own", row)
		}
		ids[row["result_id"]] = true
		delete(row, "result_id")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history:\n%s\nthe old binary's:\n%s", body, exp.History)
	}
	// The old signing key is in the key set, and the old receipts verify.
	jwks := c.do("GET", "/.well-known/jwks.json", "", "").body
	oldKeys, err := receipt.ParseJWKS(exp.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	newKeys, err := receipt.ParseJWKS(jwks)
	if err != nil {
		t.Fatal(err)
	}
	for _, kid := range oldKeys.Kids() {
		if !slices.Contains(newKeys.Kids(), kid) {
			t.Errorf("the key set %s lacks the old key %s", jwks, kid)
		}
	}
	for i, r := range exp.Receipts {
		if _, err := newKeys.Verify(r); err != nil {
			t.Errorf("old receipt of %s: %v", exp.Singles[i], err)
		}
	}
	// cache: true answers from the old result (the job's, the newest of
	// ann@shop.test), signed now.
	var ann []string
	for _, row := range readCSV(t, exp.CSV) {
		if row[0] == "ann@shop.test" {
			ann = row
		}
	}
	cached := c.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test","cache":true}`)
	if m := cached.json(t); cached.status != 200 || m["cached"] != true || ann == nil || m["probed_at"] != ann[9] || m["status"] != ann[1] {
		t.Errorf("cache: true: %d %s; the old result: %q", cached.status, cached.body, ann)
	} else if _, err := newKeys.Verify(cached.body); err != nil {
		t.Errorf("the cached answer's signature: %v", err)
	}
	// A fresh validation is signed with a key the set has.
	fresh := c.do("POST", "/v1/validate", c.key, `{"email":"bob@shop.test"}`)
	if fresh.status != 200 {
		t.Fatalf("fresh validation: %d %s", fresh.status, fresh.body)
	}
	if _, err := receipt.Verify(fresh.body, c.do("GET", "/.well-known/jwks.json", "", "").body); err != nil {
		t.Errorf("a fresh receipt: %v", err)
	}
	// The dashboard user's password, hashed by the old binary.
	if st, _, _ := authCall(t, in.base, "POST", "/auth/login", fmt.Sprintf(`{"email":%q,"password":%q}`, exp.UserEmail, exp.Password), "", ""); st != 200 {
		t.Errorf("login of the old user: %d", st)
	}

	// A restart: no second upgrade, the same answers.
	stopVerifyd(t, in)
	in = startIn(t, dir, oldDataConfig(run))
	c.base = in.base
	check("restarted", 2) // the two validations above
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, l := range in.stderr {
		if strings.Contains(l, "data directory upgraded") {
			t.Errorf("the second start upgraded again: %s", l)
		}
	}
}
