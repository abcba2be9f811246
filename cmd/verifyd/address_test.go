package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestOneAddressTwoPaths: every spelling of an address is asked the same
// question and gets the same verdict (server/README.md, "Address case").
// A batch lower-cases its addresses, as spec §2.2 says ("Lower-cased and
// de-duplicated by the service"): its CSV row, its history row and its
// reservation count the lower-cased address. A single validation's
// receipt echoes the local part as the client spelled it, the domain
// folded. The engine sends RCPT TO with the local part lower-cased on
// both paths, as the world's session log shows. On a447808 the batch kept
// the first spelling ("Ann@shop.test" in the CSV) and the RCPT kept the
// case: this test failed there.
func TestOneAddressTwoPaths(t *testing.T) {
	run := batchWorld(t, 0)
	in := startIn(t, t.TempDir(), batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	for spelling, echo := range map[string]string{
		"Ann@Shop.TEST":   "Ann@shop.test",
		`"Ann"@SHOP.test`: "Ann@shop.test",
		"ANN@shop.test":   "ANN@shop.test",
		"ann@shop.test":   "ann@shop.test",
	} {
		b, _ := json.Marshal(map[string]string{"email": spelling})
		r := c.do("POST", "/v1/validate", c.key, string(b))
		m := r.json(t)
		if r.status != 200 || m["email"] != echo || m["status"] != "valid" {
			t.Fatalf("validate %s: %d %s, want email %s valid", spelling, r.status, r.body, echo)
		}
	}
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"Ann@Shop.TEST", "ANN@shop.test", `"Ann"@SHOP.test`, "INFO@SHOP.test"}, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	acc := r.json(t)
	if acc["credits_reserved"] != 2.0 || acc["progress"].(map[string]any)["total"] != 2.0 {
		t.Errorf("reserved %v, progress %v for two unique lower-cased addresses", acc["credits_reserved"], acc["progress"])
	}
	id := acc["job_id"].(string)
	waitDone(t, c, c.key, id, 60*time.Second)
	rows, err := csv.NewReader(strings.NewReader(string(c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "").body))).ReadAll()
	if err != nil || len(rows) != 3 || rows[1][0] != "ann@shop.test" || rows[1][1] != "valid" || rows[2][0] != "info@shop.test" {
		t.Fatalf("CSV %q %v, want the rows of ann@shop.test (valid) and info@shop.test", rows, err)
	}
	// History: the four single validations as spelled, the batch row
	// lower-cased, all with one verdict.
	hist := c.do("GET", "/v1/results?limit=10", c.key, "").json(t)["results"].([]any)
	kinds := map[string]int{}
	for _, h := range hist {
		row := h.(map[string]any)
		email := row["email"].(string)
		if !strings.EqualFold(email, "ann@shop.test") {
			continue
		}
		kinds[row["kind"].(string)]++
		if row["status"] != "valid" || row["kind"] == "batch" && email != "ann@shop.test" {
			t.Errorf("history row %v", row)
		}
	}
	if kinds["single"] != 4 || kinds["batch"] != 1 {
		t.Errorf("history rows of ann@shop.test by kind: %v", kinds)
	}
	// What the engine asked: the local part lower-cased, every time. The
	// world logs a session when it ends, and the singles' may have been
	// kept open for the next (probe/README.md, "Kept sessions"): it ends
	// by itself within 2 s.
	count := func() (asked int) {
		for _, s := range run.Log().Sessions() {
			for _, rc := range s.Rcpts {
				if strings.EqualFold(rc.Addr, "ann@shop.test") {
					asked++
				}
			}
		}
		return asked
	}
	for deadline := time.Now().Add(10 * time.Second); count() < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	asked := 0
	for _, s := range run.Log().Sessions() {
		for _, rc := range s.Rcpts {
			if strings.EqualFold(rc.Addr, "ann@shop.test") {
				asked++
				if rc.Addr != "ann@shop.test" {
					t.Errorf("RCPT TO:<%s>, want the local part lower-cased", rc.Addr)
				}
			}
		}
	}
	if asked < 5 {
		t.Errorf("the world saw %d RCPTs of ann@shop.test, want one per validation and one for the batch (5)", asked)
	}
}
