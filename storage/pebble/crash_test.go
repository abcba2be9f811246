package pebble

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// The crash test: a child process (this test binary again, running
// TestCrashChild) validates and runs batch jobs on one account as fast as
// it can, printing each charge and each ended job once the call returned,
// and is killed with SIGKILL at a random moment. The parent then opens the
// database (which releases the holds the child left) and checks that no
// charge the child saw is lost, that none is doubled, and that every
// credit is accounted for. SIGKILL loses no page cache, so this tests the
// atomicity of the batches, not the fsyncs (that is Pebble's part, and
// every batch here is a pebble.Sync one).

const (
	crashDirEnv     = "VERIFYD_STORAGE_CRASH_DIR"
	crashAccountEnv = "VERIFYD_STORAGE_CRASH_ACCOUNT"
	// crashNowEnv hands the parent's test clock to the child: the instant
	// (RFC 3339, nanoseconds) the child's clock reads. A clock shared by two
	// processes is passed explicitly, never left to the real time of one
	// of them (the outbox's due times would then disagree with the
	// parent's clock).
	crashNowEnv  = "VERIFYD_STORAGE_CRASH_NOW"
	crashInitial = 1_000_000
)

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs as the child of TestCrash")
	}
	acct := os.Getenv(crashAccountEnv)
	now, err := time.Parse(time.RFC3339Nano, os.Getenv(crashNowEnv))
	if err != nil {
		fmt.Println("open: the parent's clock:", err)
		os.Exit(2)
	}
	c := newClock()
	c.Set(now)
	db, err := Open(dir, Options{Now: c.Now, Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	fail := func(err error) {
		say("error %v", err)
		os.Exit(3)
	}
	say("ready")
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				h, err := db.Hold(t.Context(), acct, 1, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					fail(err)
				}
				if i%5 == 4 {
					if _, err := db.Release(t.Context(), h, "engine error"); err != nil {
						fail(err)
					}
					continue
				}
				c, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: result(fmt.Sprintf("w%d-%d@example.com", w, i), "valid")})
				if err != nil {
					fail(err)
				}
				say("charged %s", c.Result.ID)
			}
		}()
	}
	go func() {
		for {
			j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addresses(40)})
			if err != nil {
				fail(err)
			}
			if _, err := db.StartJob(t.Context(), j.ID); err != nil {
				fail(err)
			}
			n := 40
			if rand.IntN(2) == 0 {
				n = rand.IntN(40) // fails midway
			}
			for i := 0; i < n; i += 8 {
				var rs []storage.JobResult
				for k := i; k < min(n, i+8); k++ {
					rs = append(rs, storage.JobResult{Index: k, Result: result(fmt.Sprintf("user%d@example.com", k), "valid")})
				}
				if _, err := db.PutJobResults(t.Context(), j.ID, rs); err != nil {
					fail(err)
				}
			}
			status := storage.JobCompleted
			if n < 40 {
				status = storage.JobFailed
			}
			j, err = db.FinishJob(t.Context(), j.ID, storage.JobFinish{Status: status, Event: func(j storage.Job) (*storage.Event, error) {
				return &storage.Event{Account: j.Account, Type: "batch." + string(j.Status), URL: "https://h.example/", Body: []byte(j.ID)}, nil
			}})
			if err != nil {
				fail(err)
			}
			say("job %s %d", j.ID, j.Used)
		}
	}()
	select {} // until killed
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	db := openTest(t)
	acct := db.account(t, crashInitial)
	db.Close()

	charged := make(map[string]bool) // result ids the child saw charged
	ended := make(map[string]int64)  // job id → used, as the child saw it end
	for iter := range 5 {
		lines := runCrashChild(t, db.dir, acct, db.clock.Now(), time.Duration(100+rand.IntN(500))*time.Millisecond)
		n := 0
		for _, l := range lines {
			switch f := strings.Fields(l); {
			case len(f) == 2 && f[0] == "charged":
				charged[f[1]] = true
				n++
			case len(f) == 3 && f[0] == "job":
				var used int64
				fmt.Sscan(f[2], &used)
				ended[f[1]] = used
			case strings.HasPrefix(l, "error"), strings.HasPrefix(l, "open"):
				t.Fatalf("child: %s", l)
			}
		}
		t.Logf("iteration %d: the child charged %d before the kill", iter, n)

		d, err := Open(db.dir, testOptions(db.clock))
		if err != nil {
			t.Fatal(err)
		}
		checkCrashInvariants(t, d, acct, charged, ended)
		d.Close()
	}
	if len(charged) == 0 || len(ended) == 0 {
		t.Errorf("the child did too little to test: %d charges, %d jobs", len(charged), len(ended))
	}
}

// runCrashChild runs the child on dir with its clock at now, SIGKILLs it
// after d (counted from its "ready") and returns its output lines.
func runCrashChild(t *testing.T, dir, acct string, now time.Time, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashAccountEnv+"="+acct,
		crashNowEnv+"="+now.Format(time.RFC3339Nano))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan []string)
	go func() {
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
			lines = append(lines, sc.Text())
		}
		done <- lines
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child did not start")
	}
	time.Sleep(d)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lines := <-done
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v; output %q", err, lines)
	}
	return lines
}

func checkCrashInvariants(t *testing.T, db *DB, acct string, charged map[string]bool, ended map[string]int64) {
	t.Helper()
	es := checkLedger(t, db, acct)
	if hs, err := db.Holds(t.Context(), acct); err != nil || len(hs) != 0 {
		t.Fatalf("%d holds after Open (%v)", len(hs), err)
	}
	// Every hold ends exactly once, by a charge or a release.
	holdEnds := make(map[uint64]int)
	charges := make(map[string]int) // result id → charges
	reserves := make(map[string]int64)
	uses := make(map[string]int64)
	refunds := make(map[string]int64)
	var added int64
	for _, e := range es {
		switch e.Kind {
		case storage.EntryHold:
			holdEnds[e.Seq] += 0
		case storage.EntryCharge:
			holdEnds[e.HoldSeq]++
			charges[e.Ref]++
		case storage.EntryRelease:
			holdEnds[e.HoldSeq]++
		case storage.EntryAdd:
			added += e.Amount
		case storage.EntryReserve:
			reserves[e.Ref] += e.Amount
		case storage.EntryUse:
			uses[e.Ref] += e.Amount
		case storage.EntryRefund:
			refunds[e.Ref] += e.Amount
		}
	}
	for seq, n := range holdEnds {
		if n != 1 {
			t.Fatalf("hold %d ended %d times", seq, n)
		}
	}
	// Every charge the child saw is there, once, with its result; every
	// charge has a result and every single result a charge.
	for id := range charged {
		if charges[id] != 1 {
			t.Fatalf("result %s charged %d times", id, charges[id])
		}
	}
	singles := 0
	db.scanPrefix(histPrefix(acct, histKindSingle), func(_, v []byte) (bool, error) {
		r, err := decodeRow(storage.KindSingle, 0, v)
		if err != nil || charges[r.ResultID] != 1 {
			t.Fatalf("history row %+v (%v) without its charge", r, err)
		}
		singles++
		return true, nil
	})
	for id, n := range charges {
		if _, err := db.GetResult(t.Context(), id); err != nil || n != 1 {
			t.Fatalf("charge %s (%d) without its result: %v", id, n, err)
		}
	}
	if singles != len(charges) {
		t.Fatalf("%d single rows, %d charges", singles, len(charges))
	}
	// Every reservation belongs to a job; an active job has spent nothing
	// yet, an ended one used its processed count and got the rest back.
	var charged2, inJobs int64
	for _, n := range charges {
		charged2 += int64(n)
	}
	for id, r := range reserves {
		j, err := db.Job(t.Context(), id)
		if err != nil {
			t.Fatalf("reservation for job %s: %v", id, err)
		}
		results := 0
		db.scanPrefix(jobResultPrefix(id), func(_, _ []byte) (bool, error) { results++; return true, nil })
		if j.Processed != results || r != int64(j.Total) {
			t.Fatalf("job %+v: %d results, %d reserved", j, results, r)
		}
		if j.Active() {
			if uses[id] != 0 || refunds[id] != 0 {
				t.Fatalf("active job %s settled", id)
			}
			inJobs += r
			continue
		}
		if uses[id] != int64(j.Processed) || refunds[id] != r-uses[id] {
			t.Fatalf("job %+v: used %d, refunded %d", j, uses[id], refunds[id])
		}
		inJobs += uses[id]
	}
	for id, used := range ended {
		if j, err := db.Job(t.Context(), id); err != nil || j.Active() || j.Used != used {
			t.Fatalf("job %s ended with %d used, now %+v, %v", id, used, j, err)
		}
	}
	crBal, err := db.Credits(t.Context(), acct)
	if err != nil {
		t.Fatal(err)
	}
	bal := crBal.Balance
	if added != crashInitial || bal != added-charged2-inJobs {
		t.Fatalf("balance %d, want %d − %d charged − %d in jobs", bal, added, charged2, inJobs)
	}
	// One event per ended job.
	evs, err := db.DueEvents(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var finished int
	for id := range reserves {
		j, err := db.Job(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Active() {
			finished++
		}
	}
	if len(evs) != finished {
		t.Fatalf("%d events for %d ended jobs", len(evs), finished)
	}
}
