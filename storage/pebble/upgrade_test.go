package pebble

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/verifyd/verifyd/storage"
)

// TestUpgradeJobReasons: a data directory at schema version 1 (jobs
// without Reasons, as b4dd917 wrote them) is upgraded at Open: each job's
// results are counted by verdict and reason from their receipts, and the
// directory is at version 2. A version that is not a number is refused.
// cmd/verifyd's TestOldDataDir opens a directory b4dd917 itself wrote.
func TestUpgradeJobReasons(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10)
	var ids []string
	for range 2 {
		j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addresses(4)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.StartJob(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// A result with reason "" has no receipt.
	res := func(i int, status, reason string) storage.JobResult {
		r := storage.Result{Email: fmt.Sprintf("user%d@example.com", i), Status: status, Score: 50, Reason: reason}
		if reason != "" {
			r.Receipt = fmt.Appendf(nil, `{"status":%q,"checks":{"reason":%q}}`, status, reason)
		}
		return storage.JobResult{Index: i, Result: r}
	}
	// The first job completes; the second is still running.
	if _, err := db.PutJobResults(t.Context(), ids[0], []storage.JobResult{res(0, "valid", "ok"), res(1, "valid", "ok"),
		res(2, "invalid", "mailbox_not_found"), res(3, "unknown", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FinishJob(t.Context(), ids[0], storage.JobFinish{Status: storage.JobCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutJobResults(t.Context(), ids[1], []storage.JobResult{res(2, "risky", "catch_all")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{
		ids[0]: {"valid/ok": 2, "invalid/mailbox_not_found": 1},
		ids[1]: {"risky/catch_all": 1},
	}
	check := func(when string) {
		t.Helper()
		for _, id := range ids {
			j, err := db.Job(t.Context(), id)
			if err != nil || !maps.Equal(j.Reasons, want[id]) {
				t.Fatalf("%s: job %s reasons %v, %v; want %v", when, id, j.Reasons, err, want[id])
			}
		}
	}
	check("as written")

	// Back to version 1: the jobs' records lose their reasons.
	b := db.pdb.NewBatch()
	for _, id := range ids {
		v, err := db.get(jobKey(id))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "reasons")
		v, _ = json.Marshal(m)
		b.Set(jobKey(id), v, nil)
	}
	b.Set(keyMetaVersion, []byte("1"), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	check("upgraded from version 1")
	if v, err := db.get(keyMetaVersion); err != nil || string(v) != fmt.Sprint(schemaVersion) {
		t.Fatalf("version after the upgrade: %q, %v", v, err)
	}
	// The running job goes on counting.
	j, err := db.PutJobResults(t.Context(), ids[1], []storage.JobResult{res(0, "valid", "ok")})
	if err != nil || j.Reasons["valid/ok"] != 1 || j.Reasons["risky/catch_all"] != 1 {
		t.Fatalf("after the upgrade: %+v, %v", j, err)
	}

	b = db.pdb.NewBatch()
	b.Set(keyMetaVersion, []byte("two"), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(db.dir, testOptions(db.clock)); err == nil || !strings.Contains(err.Error(), "not a version") {
		t.Fatalf("version %q: %v", "two", err)
	}
}

// TestUpgradeVerdictIndex: a directory at schema version 2 has no verdict
// index; the upgrade to 3 indexes its single and batch results, so
// outcomes match them.
func TestUpgradeVerdictIndex(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10)
	h, err := db.Hold(t.Context(), acct, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	single, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "ann@example.com", Status: "valid", Score: 90}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addresses(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutJobResults(t.Context(), j.ID, []storage.JobResult{{Index: 0, Result: storage.Result{Email: "user0@example.com", Status: "invalid", Score: 2}}}); err != nil {
		t.Fatal(err)
	}
	qs := []storage.VerdictQuery{{Email: "ann@example.com", Before: db.clock.Now()}, {Email: "user0@example.com", Before: db.clock.Now()}}
	check := func(when string, want bool) {
		t.Helper()
		vs, ok, err := db.LatestVerdicts(t.Context(), acct, qs)
		if err != nil || ok[0] != want || ok[1] != want || (want && (vs[0].ResultID != single.Result.ID || vs[1].Status != "invalid")) {
			t.Fatalf("%s: verdicts %+v %v %v", when, vs, ok, err)
		}
	}
	check("as written", true)
	// Back to version 2: no index.
	b := db.pdb.NewBatch()
	if err := db.scanPrefix([]byte(prefixVerdict), func(k, _ []byte) (bool, error) { return true, b.Delete(k, nil) }); err != nil {
		t.Fatal(err)
	}
	b.Set(keyMetaVersion, []byte("2"), nil)
	if err := db.commit(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)
	check("upgraded from version 2", true)
}
