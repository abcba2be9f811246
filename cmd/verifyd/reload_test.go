package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

// TestReloadEgressPool changes the egress pool with SIGHUP while a slow
// validation runs from the address being removed: that session finishes
// from it (drain), later sessions leave from the new address only, as the
// world's session log shows. A broken file is then refused with the
// running configuration kept.
func TestReloadEgressPool(t *testing.T) {
	run := testWorld(t, 300*time.Millisecond) // each reply 300 ms: a session of ~2 s
	dir := t.TempDir()
	cfgWith := func(addr string) string {
		c := strings.Replace(worldConfig(run, ""), `addresses = ["127.0.0.2", "127.0.0.3"]`, fmt.Sprintf("addresses = [%q]", addr), 1)
		return strings.Replace(c, `log_level = "warn"`, `log_level = "info"`, 1)
	}
	in := startIn(t, dir, cfgWith("127.0.0.2"))
	c := &client{t: t, base: in.base, key: in.key}

	var wg sync.WaitGroup
	wg.Add(1)
	var slow reply
	go func() {
		defer wg.Done()
		slow = c.do("POST", "/v1/validate", c.key, `{"email":"ann@catch.test"}`)
	}()
	// Once its session is open, move the pool to 127.0.0.5.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if run.SMTP.Open() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow validation never connected")
		}
	}
	writeConfig(t, dir, cfgWith("127.0.0.5"))
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog(t, "reloaded", "egress: added 127.0.0.5")
	in.waitLog(t, "reloaded", "egress: draining 127.0.0.2")
	wg.Wait()
	if slow.status != 200 || !strings.Contains(string(slow.body), `"status":"risky"`) {
		t.Fatalf("the validation in flight during the reload: %d %s", slow.status, slow.body)
	}
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"bob@catch.test"}`); r.status != 200 {
		t.Fatalf("after the reload: %d %s", r.status, r.body)
	}
	run.Log().Wait(2, 10*time.Second)
	var from []string
	for _, s := range run.Log().Sessions() {
		from = append(from, s.Client)
	}
	if len(from) < 2 || from[0] != "127.0.0.2" || from[len(from)-1] != "127.0.0.5" {
		t.Fatalf("sessions came from %v: want the drained 127.0.0.2 first, then 127.0.0.5", from)
	}
	for _, f := range from[1:] {
		if f == "127.0.0.2" {
			t.Fatalf("a session left from the drained address after the reload: %v", from)
		}
	}

	// A broken file is refused; the running configuration stays.
	writeConfig(t, dir, cfgWith("127.0.0.5")+"\nbogus = 1\n")
	in.cmd.Process.Signal(syscall.SIGHUP)
	in.waitLog(t, "new configuration refused", "bogus")
	if r := c.do("GET", "/v1/balance", c.key, ""); r.status != 200 {
		t.Fatalf("after a refused reload: %d", r.status)
	}
}

func writeConfig(t *testing.T, dir, config string) {
	t.Helper()
	config = "data_dir = " + quote(filepath.Join(dir, "data")) + "\n" + config
	if err := os.WriteFile(filepath.Join(dir, "verifyd.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNeedsRestartNamesEverySection: a reload names each section it
// cannot apply (before: storage, jobs, auth and demo_account changed
// silently, neither applied nor reported).
func TestNeedsRestartNamesEverySection(t *testing.T) {
	cur := config.Defaults()
	next := cur
	next.Storage.CallTimeout = time.Minute
	next.Jobs.Concurrency++
	next.Auth.Registration = "open"
	next.DemoAccount = !cur.DemoAccount
	got := needsRestart(cur, next)
	for _, want := range []string{"storage", "jobs", "auth", "demo_account"} {
		if !slices.Contains(got, want) {
			t.Errorf("needsRestart = %q, lacks %s", got, want)
		}
	}
	if n := needsRestart(cur, cur); len(n) != 0 {
		t.Errorf("no change: %q", n)
	}
}
