package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestOneAddressTwoPaths: a single validation and a batch of the same
// mixed-case address verify, store and answer the same address — its
// local part's case kept (RFC 5321 §2.4: only the receiving host may
// read it), its domain folded — with the same verdict: the receipt, the
// CSV row and both history rows name it alike. Before, the batch
// lower-cased the whole address (verifying another spelling than the one
// uploaded) while the single validation kept it.
func TestOneAddressTwoPaths(t *testing.T) {
	run := batchWorld(t, 0)
	in := startIn(t, t.TempDir(), batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	const want = "Ann@shop.test"
	for _, spelling := range []string{"Ann@Shop.TEST", `"Ann"@SHOP.test`} {
		b, _ := json.Marshal(map[string]string{"email": spelling})
		r := c.do("POST", "/v1/validate", c.key, string(b))
		m := r.json(t)
		if r.status != 200 || m["email"] != want || m["status"] != "valid" {
			t.Fatalf("validate %s: %d %s", spelling, r.status, r.body)
		}
	}
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"Ann@Shop.TEST", "ANN@shop.test", `"Ann"@SHOP.test`, "info@SHOP.test"}, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	acc := r.json(t)
	if acc["credits_reserved"] != 2.0 {
		t.Errorf("reserved %v for two unique addresses", acc["credits_reserved"])
	}
	id := acc["job_id"].(string)
	waitDone(t, c, c.key, id, 60*time.Second)
	rows, err := csv.NewReader(strings.NewReader(string(c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "").body))).ReadAll()
	if err != nil || len(rows) != 3 || rows[1][0] != want || rows[1][1] != "valid" || rows[2][0] != "info@shop.test" {
		t.Fatalf("CSV %q %v", rows, err)
	}
	// History: the two single validations and the batch row name the
	// address alike, with one verdict.
	hist := c.do("GET", "/v1/results?limit=10", c.key, "").json(t)["results"].([]any)
	kinds := map[string]int{}
	for _, h := range hist {
		row := h.(map[string]any)
		if !strings.EqualFold(row["email"].(string), want) {
			continue
		}
		kinds[row["kind"].(string)]++
		if row["email"] != want || row["status"] != "valid" {
			t.Errorf("history row %v, want %s valid", row, want)
		}
	}
	if kinds["single"] != 2 || kinds["batch"] != 1 {
		t.Errorf("history rows of %s by kind: %v", want, kinds)
	}
}
