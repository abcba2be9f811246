package harness

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	if !r.o.Profile || v.Config.Metrics == "" {
		return func() {}
	}
	secs := int(min(max(l.Duration, time.Second), time.Minute).Seconds())
	dir := filepath.Join(r.work, "profiles")
	name := fmt.Sprintf("%s-%s-c%d", v.Label, strings.Trim(strings.ReplaceAll(l.Path, "/", "_"), "_"), l.Concurrency)
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
