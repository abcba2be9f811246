package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/storage"
)

// mountTmpfs mounts a tmpfs of size bytes at a new directory until the
// test ends (as root, as CI runs; elsewhere the test is skipped).
func mountTmpfs(t *testing.T, size int64, mode string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited file system needs root (CI runs as root)")
	}
	// Not t.TempDir: its parents are 0700, which PostgreSQL's account
	// could not enter.
	dir, err := os.MkdirTemp("", "verifyd-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=%s", size, mode)); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// fill writes a ballast file that leaves about leave bytes free on dir's
// file system (looking again after every MiB: verifyd writes meanwhile),
// and returns its path.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		n := int64(st.Bavail)*st.Bsize - leave
		if n <= 0 {
			return path
		}
		if _, err := f.Write(chunk[:min(int64(len(chunk)), n)]); errors.Is(err, syscall.ENOSPC) {
			return path // verifyd or PostgreSQL wrote meanwhile: full it is
		} else if err != nil {
			t.Fatalf("ballast: %v", err)
		}
	}
}

// startedJob posts a batch of addrs and waits until it has results.
func startedJob(t *testing.T, c *client, addrs []string) string {
	t.Helper()
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, addrs, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitFor(t, func() bool {
		p := c.do("GET", "/v1/jobs/"+id, c.key, "").json(t)["progress"].(map[string]any)
		return p["processed"].(float64) > 0
	})
	return id
}

// TestDiskFull: the data directory's disk fills up (a 512 MiB tmpfs,
// filled by a ballast file to below storage.min_free_bytes) while
// verifyd validates and runs a job. Validations answer 500 INTERNAL in
// the envelope (spec §7: the code's one status) with Retry-After and charge nothing (with or without an
// Idempotency-Key); reads still answer; the running job pauses, not
// fails. Once the ballast is deleted everything goes on by itself,
// without a restart: validations answer 200, the keyed ones too, the job
// completes with one result per address, and the balance adds up.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, 512<<20, "0700")
	run, addrs := fleetWorld(t, 40, 50, 150*time.Millisecond)
	in := startIn(t, mnt, batchConfig(run, "", "concurrency = 4\n")+"[storage]\nmin_free_bytes = 134217728\n")
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	more := int64(len(addrs))
	if _, err := ac.AdjustCredits(context.Background(), acct.ID, adminapi.AdjustCredits{Add: &more}); err != nil {
		t.Fatal(err)
	}
	start := balance(t, c, c.key)
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"m0@f0.test"}`); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	id := startedJob(t, c, addrs)

	ballast := fill(t, mnt, 16<<20)
	t.Logf("disk full at %v", c.do("GET", "/v1/jobs/"+id, c.key, "").json(t)["progress"])
	// The guard looks at the disk every 250 ms: the first refusal comes
	// at once or a moment later.
	var full reply
	charged := 1 // validations answered 200
	waitFor(t, func() bool {
		full = c.do("POST", "/v1/validate", c.key, `{"email":"m1@f0.test"}`)
		if full.status == 200 {
			charged++
		}
		return full.status != 200
	})
	d := full.wantError(t, 500, "INTERNAL")
	if full.header.Get("Retry-After") == "" || d["retryAfter"] == nil {
		t.Fatalf("a full disk's 500 without Retry-After: %v %s", full.header, full.body)
	}
	if bytes.Contains(full.body, []byte("pebble")) || bytes.Contains(full.body, []byte("no space")) {
		t.Fatalf("internal text in the answer: %s", full.body)
	}
	c.do("POST", "/v1/validate", c.key, `{"email":"m2@f0.test"}`, "Idempotency-Key", "disk-full-0001").wantError(t, 500, "INTERNAL")
	c.do("POST", "/v1/batch", c.key, batchBody(t, addrs[:5], nil)).wantError(t, 500, "INTERNAL")
	// Reads answer; nothing was charged for the refusals.
	paused := balance(t, c, c.key)
	if paused != start-charged-len(addrs) {
		t.Fatalf("balance %d with the disk full, want %d (%d validations and the job's reservation)", paused, start-charged-len(addrs), charged)
	}
	if r := c.do("GET", "/v1/results?limit=5", c.key, ""); r.status != 200 {
		t.Fatalf("history with the disk full: %d %s", r.status, r.body)
	}
	// The job pauses: running, and no progress over a few seconds.
	job := c.do("GET", "/v1/jobs/"+id, c.key, "").json(t)
	time.Sleep(3 * time.Second)
	later := c.do("GET", "/v1/jobs/"+id, c.key, "").json(t)
	if later["status"] != "running" || fmt.Sprint(later["progress"]) != fmt.Sprint(job["progress"]) {
		t.Fatalf("the job with the disk full: %v, then %v", job, later)
	}
	t.Logf("with the disk full: job at %v", later["progress"])

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		r := c.do("POST", "/v1/validate", c.key, `{"email":"m1@f0.test"}`)
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			var st unix.Statfs_t
			unix.Statfs(mnt, &st)
			out, _ := exec.Command("du", "-a", mnt).CombinedOutput()
			t.Logf("free %d bytes; du:\n%s", int64(st.Bavail)*st.Bsize, out)
			in.mu.Lock()
			t.Fatalf("a minute after space was freed: %d %s; verifyd logged:\n%s", r.status, r.body, strings.Join(in.stderr[max(0, len(in.stderr)-30):], "\n"))
		}
	}
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"m2@f0.test"}`, "Idempotency-Key", "disk-full-0001"); r.status != 200 || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("the keyed retry once space is freed: %d %s", r.status, r.body)
	}
	done := waitDone(t, c, c.key, id, 3*time.Minute)
	if done["status"] != "completed" || done["progress"].(map[string]any)["processed"] != float64(len(addrs)) {
		t.Fatalf("job %v", done)
	}
	rows, err := csv.NewReader(strings.NewReader(string(c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "").body))).ReadAll()
	if err != nil || len(rows) != len(addrs)+1 {
		t.Fatalf("CSV: %d rows, %v", len(rows)-1, err)
	}
	if b := balance(t, c, c.key); b != start-charged-2-len(addrs) {
		t.Fatalf("balance %d at the end, want %d: %d validations and the job", b, start-charged-2-len(addrs), charged+2)
	}
	// verifyd is still the process it was: no restart happened.
	if err := in.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("verifyd is gone: %v", err)
	}
}

// TestFleetDiskFull: the fleet database's disk fills up (PostgreSQL's
// directory on a 256 MiB tmpfs, filled by a ballast file). Validations
// answer an error in the envelope and charge nothing; the running job
// pauses; once space is freed (and PostgreSQL runs again, if it stopped)
// everything goes on by itself: validations answer 200, the job
// completes with one result per address, and the ledger adds up.
func TestFleetDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, 256<<20, "0755")
	srv := pgtest.StartIn(t, mnt)
	ctx := context.Background()
	dsn, db := fleetOn(t, srv)
	run, addrs := fleetWorld(t, 40, 50, 150*time.Millisecond)
	boxes := startBoxes(t, 1, dsn, batchConfig(run, "", "concurrency = 4\n"))
	in := boxes[0]
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	more := int64(len(addrs))
	if _, err := ac.AdjustCredits(ctx, acct.ID, adminapi.AdjustCredits{Add: &more}); err != nil {
		t.Fatal(err)
	}
	start := balance(t, c, c.key)
	id := startedJob(t, c, addrs)
	ballast := fill(t, mnt, 0)
	charged := 0
	var full reply
	for i := 0; ; i++ {
		full = c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":"m%d@f1.test"}`, i))
		if full.status != 200 {
			break
		}
		charged++
		if i > 1000 {
			t.Fatal("validations still answer 200 with the database's disk full")
		}
	}
	if full.status != 500 {
		t.Fatalf("with the database's disk full: %d %s", full.status, full.body)
	}
	full.wantError(t, full.status, "INTERNAL")
	t.Logf("with the database's disk full: %d %s (PostgreSQL running: %v)", full.status, full.body, srv.Running())
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"k@f2.test"}`, "Idempotency-Key", "pg-disk-full-1"); r.status == 200 {
		t.Fatalf("a keyed validation with the database's disk full: %d %s", r.status, r.body)
	}
	// The job pauses: running, no progress, not failed.
	job := c.do("GET", "/v1/jobs/"+id, c.key, "").json(t)
	time.Sleep(3 * time.Second)
	if later := c.do("GET", "/v1/jobs/"+id, c.key, "").json(t); later["status"] != "running" || fmt.Sprint(later["progress"]) != fmt.Sprint(job["progress"]) {
		t.Fatalf("the job with the database's disk full: %v, then %v", job, later)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if !srv.Running() {
		t.Log("PostgreSQL stopped on the full disk; started again")
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return c.do("POST", "/v1/validate", c.key, `{"email":"m0@f2.test"}`).status == 200 })
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"k@f2.test"}`, "Idempotency-Key", "pg-disk-full-1"); r.status != 200 || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("the keyed retry once space is freed: %d %s", r.status, r.body)
	}
	charged += 2
	done := waitDone(t, c, c.key, id, 3*time.Minute)
	if done["status"] != "completed" || done["progress"].(map[string]any)["processed"] != float64(len(addrs)) {
		t.Fatalf("job %v", done)
	}
	n := 0
	if err := db.JobResults(t.Context(), id, func(storage.Result) error { n++; return nil }); err != nil || n != len(addrs) {
		t.Fatalf("%d results for %d addresses (%v)", n, len(addrs), err)
	}
	charges := chargeEntries(t, db, acct.ID)
	if charges != charged {
		t.Errorf("%d charge entries for %d validations answered 200", charges, charged)
	}
	if cr, _ := db.Credits(t.Context(), acct.ID); cr.Held != 0 || cr.Balance != int64(start-charged-len(addrs)) {
		t.Errorf("credits %+v, want balance %d and nothing held", cr, start-charged-len(addrs))
	}
}
