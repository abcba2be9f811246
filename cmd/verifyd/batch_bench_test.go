package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// BenchmarkBatch100k is the benchmark: 100,000 addresses over the
// generated 10,000-domain world (100 ms per SMTP reply, 5% catch-all, 3%
// greylisting, 1% tarpits, STARTTLS on 30% of hosts), posted to a real
// verifyd (built without -race) as one batch. It reports the upload time,
// the time to completion, the CSV download time, verifyd's peak RSS and
// how many CSV rows differ from the world's expected verdicts, and when
// 99% of the addresses were processed (the bulk, without the tail the
// world's tarpits hold for smtp.command_timeout). Run it with
//
//	go test -run '^$' -bench Batch100k -benchtime 1x -count 3 ./cmd/verifyd/
//
// The greylisting domains accept a retry after 2 s; egress.greylist_cooldown
// is set to 3 s to match (with the default 1 min, their addresses finish a
// minute later). Tarpits cost smtp.command_timeout (default 30 s):
// smtp.greeting_timeout is set to it, as before that key existed (default
// 60 s), so figures compare across versions.
func BenchmarkBatch100k(b *testing.B) {
	w, exp, err := world.Generate(world.GenOptions{
		Domains: 10000, Seed: 1, CatchAll: 0.05, Greylist: 0.03, Tarpit: 0.01,
		STARTTLS: 0.3, RoleMailbox: true, Latency: world.Duration(100 * time.Millisecond),
		FirstIP: "127.80.0.1",
	})
	if err != nil {
		b.Fatal(err)
	}
	run, err := world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { run.Close() })
	bin := filepath.Join(b.TempDir(), "verifyd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	emails := make([]string, len(exp))
	want := make(map[string]string, len(exp))
	for i, x := range exp {
		emails[i] = x.Email
		want[strings.ToLower(x.Email)] = x.Status
	}
	body, _ := json.Marshal(map[string]any{"emails": emails, "listName": "bench"})
	cfg := fmt.Sprintf(`
log_format = "json"
log_level = "warn"
demo_account = true
[http]
listen = "127.0.0.1:0"
[metrics]
listen = ""
[resolver]
upstreams = [%q]
[smtp]
port = %d
helo_name = "verifyd.bench.test"
greeting_timeout = "30s"
[egress]
addresses = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9"]
greylist_cooldown = "3s"
[probe]
lists_dir = "/nonexistent"
[rate_limits]
disabled = true
`, run.DNS.Addr(), run.SMTP.Port())

	var upload, p99, complete, download, rss []float64
	for range b.N {
		dir := b.TempDir()
		in := startBench(b, bin, dir, cfg)
		ac := adminapi.NewClient(filepath.Join(dir, "data", "admin.sock"))
		as, err := ac.Accounts(context.Background())
		if err != nil || len(as) == 0 {
			b.Fatalf("accounts: %v", err)
		}
		n := int64(len(emails))
		if _, err := ac.AdjustCredits(context.Background(), as[0].ID, adminapi.AdjustCredits{Add: &n}); err != nil {
			b.Fatal(err)
		}
		ac.Close()

		t0 := time.Now()
		req, _ := http.NewRequest("POST", in.base+"/v1/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+in.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		up := time.Since(t0)
		if resp.StatusCode != 202 {
			b.Fatalf("upload: %d %s", resp.StatusCode, rb)
		}
		var acc struct {
			JobID string `json:"job_id"`
		}
		json.Unmarshal(rb, &acc)

		var job map[string]any
		var at99 time.Duration
		for {
			job = getJSON(b, in, "/v1/jobs/"+acc.JobID)
			if p, ok := job["progress"].(map[string]any); ok && at99 == 0 && p["processed"].(float64) >= 0.99*float64(len(emails)) {
				at99 = time.Since(t0)
			}
			if job["status"] == "completed" || job["status"] == "failed" {
				break
			}
			if time.Since(t0) > 15*time.Minute {
				b.Fatalf("not done in 15 min: %v", job)
			}
			time.Sleep(100 * time.Millisecond)
		}
		done := time.Since(t0)
		if job["status"] != "completed" {
			b.Fatalf("job %v", job)
		}

		t1 := time.Now()
		req, _ = http.NewRequest("GET", in.base+"/v1/jobs/"+acc.JobID+"/results.csv", nil)
		req.Header.Set("Authorization", "Bearer "+in.key)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		rows, mismatches := 0, map[string]int{}
		cr := csv.NewReader(bufio.NewReaderSize(resp.Body, 1<<20))
		cr.ReuseRecord = true
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatalf("CSV row %d: %v", rows, err)
			}
			if rows > 0 {
				if w := want[rec[0]]; w != rec[1] {
					mismatches[w+"→"+rec[1]]++
				}
			}
			rows++
		}
		resp.Body.Close()
		dl := time.Since(t1)
		hwm := peakRSS(in.cmd.Process.Pid)
		in.cmd.Process.Kill()
		in.cmd.Wait()
		if rows != len(emails)+1 {
			b.Fatalf("CSV has %d rows, want %d", rows-1, len(emails))
		}
		b.Logf("upload %v, 99%% processed %v, completion %v, CSV %v (%d rows), peak RSS %.0f MiB, verdicts differing from the world's: %v",
			up.Round(time.Millisecond), at99.Round(time.Millisecond), done.Round(time.Millisecond), dl.Round(time.Millisecond), rows-1, hwm, mismatches)
		upload = append(upload, up.Seconds())
		p99 = append(p99, at99.Seconds())
		complete = append(complete, done.Seconds())
		download = append(download, dl.Seconds())
		rss = append(rss, hwm)
	}
	b.ReportMetric(mean(upload), "upload-s")
	b.ReportMetric(mean(p99), "99pct-s")
	b.ReportMetric(mean(complete), "complete-s")
	b.ReportMetric(mean(download), "csv-s")
	b.ReportMetric(mean(rss), "peak-rss-MiB")
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// peakRSS is the process's VmHWM in MiB.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

func getJSON(b *testing.B, in *instance, path string) map[string]any {
	req, _ := http.NewRequest("GET", in.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+in.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// startBench is startIn for a benchmark, with another binary.
func startBench(b *testing.B, bin, dir, config string) *instance {
	b.Helper()
	cfgPath := filepath.Join(dir, "verifyd.toml")
	config = "data_dir = " + quote(filepath.Join(dir, "data")) + "\n" + config
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfgPath)
	stderr, _ := cmd.StderrPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	keyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`(svc_live_\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				keyc <- m[1]
			}
		}
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`API on (http://[0-9.:]+)`)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	in := &instance{cmd: cmd, dir: dir}
	select {
	case in.base = <-found:
	case <-time.After(60 * time.Second):
		b.Fatal("verifyd did not say where it listens")
	}
	select {
	case in.key = <-keyc:
	case <-time.After(5 * time.Second):
		b.Fatal("no demo key")
	}
	return in
}
