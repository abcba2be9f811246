package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startProfile takes a CPU profile of v over the load l, when -profile
// is on (v serves pprof on its metrics listener), into
// <work>/profiles/<label>-<path>-c<concurrency>-<n>.pprof; the returned
// func waits for it. The profile lasts the load's Duration (at least 1 s,
// at most 60 s): a load that ends sooner leaves idle time in it, which a
// CPU profile does not count.
func (r *runner) startProfile(v *Verifyd, l Load) func() {
	what := l.Name
	if what == "" {
		what = strings.Trim(strings.ReplaceAll(l.Path, "/", "_"), "_")
	}
	name := fmt.Sprintf("%s-%s-c%d", v.Label, what, l.Concurrency)
	return r.startProfileAs(v, name, l.Duration)
}

// startProfileAs is startProfile under any name, over d (at least 1 s, at
// most 60 s).
func (r *runner) startProfileAs(v *Verifyd, name string, d time.Duration) func() {
	if !r.o.Profile || v.Config.Metrics == "" {
		return func() {}
	}
	secs := int(min(max(d, time.Second), time.Minute).Seconds())
	dir := filepath.Join(r.work, "profiles")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			r.logf("profile: %v", err)
			return
		}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", v.Config.Metrics, secs)
		c := http.Client{Timeout: time.Duration(secs+30) * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			r.logf("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			r.logf("profile %s: HTTP %d", name, resp.StatusCode)
			return
		}
		path := filepath.Join(dir, name+".pprof")
		for n := 2; ; n++ {
			if _, err := os.Stat(path); err != nil {
				break
			}
			path = filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, n))
		}
		f, err := os.Create(path)
		if err != nil {
			r.logf("profile %s: %v", name, err)
			return
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			r.logf("profile %s: %v", name, err)
		}
		f.Close()
		r.logf("CPU profile of verifyd %s: %s", v.Label, path)
	}()
	return func() { <-done }
}

// ProfileSummary is one CPU profile of verifyd boiled down to its hottest
// paths, from `go tool pprof -top`.
type ProfileSummary struct {
	// Name is the file's name without .pprof: <label>-<load>.
	Name string `json:"name"`
	// Header is pprof's line of duration and samples.
	Header string `json:"header"`
	// Cum are the functions with the most time in them and below (the
	// paths), runtime and scheduler frames left out; Flat those with the
	// most time in themselves.
	Cum  []ProfileRow `json:"cum"`
	Flat []ProfileRow `json:"flat"`
}

// ProfileRow is one function of a profile: its own share of the samples
// and the share of it and what it calls.
type ProfileRow struct {
	Func    string  `json:"func"`
	FlatPct float64 `json:"flat_pct"`
	CumPct  float64 `json:"cum_pct"`
}

// profileOrder is the scenarios in the order they run.
var profileOrder = []string{"fresh", "cache-seed", "cache", "batch", "mixed", "realworld"}

// profileRows is how many rows of each kind a summary keeps.
const profileRows = 12

// summarizeProfiles reads every profile of the run with the go tool (the
// one that built the harness); a profile it cannot read is left out.
func (r *runner) summarizeProfiles(ctx context.Context) []ProfileSummary {
	goBin, err := exec.LookPath("go")
	if err != nil {
		r.logf("profiles: no go tool to read them: %v", err)
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(r.work, "profiles", "*.pprof"))
	// In the order of the scenarios, then of concurrency.
	order := func(f string) (string, int, int) {
		name := strings.TrimSuffix(filepath.Base(f), ".pprof")
		label, rest, _ := strings.Cut(name, "-")
		rank := len(profileOrder)
		for i, sc := range profileOrder {
			if strings.HasPrefix(rest, sc) {
				rank = i
			}
		}
		c := 0
		if i := strings.LastIndex(rest, "-c"); i >= 0 {
			c, _ = strconv.Atoi(rest[i+2:])
		}
		return label, rank, c
	}
	slices.SortStableFunc(files, func(a, b string) int {
		la, ra, ca := order(a)
		lb, rb, cb := order(b)
		return cmp.Or(cmp.Compare(la, lb), cmp.Compare(ra, rb), cmp.Compare(ca, cb))
	})
	var out []ProfileSummary
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pprof")
		var bin string
		for _, run := range r.runs {
			if strings.HasPrefix(name, run.Label+"-") {
				bin = run.Binary
			}
		}
		if bin == "" {
			continue
		}
		s := ProfileSummary{Name: name}
		cum, err := exec.CommandContext(ctx, goBin, "tool", "pprof", "-top", "-cum", "-nodecount=200", bin, f).Output()
		if err != nil {
			r.logf("profile %s: %v", name, err)
			continue
		}
		flat, err := exec.CommandContext(ctx, goBin, "tool", "pprof", "-top", "-nodecount=40", bin, f).Output()
		if err != nil {
			r.logf("profile %s: %v", name, err)
			continue
		}
		s.Header, s.Cum = parseTop(cum, true)
		_, s.Flat = parseTop(flat, false)
		out = append(out, s)
	}
	return out
}

// parseTop reads `go tool pprof -top` output: the "Duration: …" line and
// the rows (flat flat% sum% cum cum% name). With paths, runtime frames,
// the goroutine entry points and wrappers that every stack shares are
// left out, so the rows name what the time is spent on.
func parseTop(b []byte, paths bool) (header string, rows []ProfileRow) {
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Duration:") {
			header = strings.TrimSpace(line)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") || !strings.HasSuffix(f[4], "%") {
			continue
		}
		flat, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cum, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		fn := strings.Join(f[5:], " ")
		if paths {
			if sharedFrame(fn) {
				continue
			}
			// A caller with the same share as its one callee says
			// nothing more: keep the deeper, more specific frame.
			if n := len(rows); n > 0 && rows[n-1].CumPct == cum {
				rows[n-1] = ProfileRow{Func: fn, FlatPct: flat, CumPct: cum}
				continue
			}
		}
		if len(rows) == profileRows {
			break
		}
		rows = append(rows, ProfileRow{Func: fn, FlatPct: flat, CumPct: cum})
	}
	return header, rows
}

// sharedFrame reports a frame that sits on most stacks without saying
// what the time goes to: the runtime's scheduler and goroutine entries,
// the HTTP server's and the worker pools' loops, middleware closures.
func sharedFrame(fn string) bool {
	for _, p := range []string{"runtime.", "github.com/valyala/fasthttp.(*workerPool)", "github.com/valyala/fasthttp.(*Server).serveConn",
		"github.com/panjf2000/ants", "github.com/fasthttp/router.", "syscall.", "internal/runtime/syscall", "internal/poll."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	// Closures (…func7) are the middleware and pool wrappers around the
	// named functions below them.
	if i := strings.LastIndex(fn, ".func"); i >= 0 {
		if _, err := strconv.Atoi(strings.TrimSuffix(fn[i+5:], " (inline)")); err == nil {
			return true
		}
	}
	return false
}
