package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// TestBackupRestore takes a backup while verifyd runs, stops it, starts a
// verifyd on the restored copy and reads the same balance, history and
// receipt key set; the backup also answers the egress listing.
func TestBackupRestore(t *testing.T) {
	run := testWorld(t, 0)
	dir := t.TempDir()
	cfg := worldConfig(run, "")
	in := startIn(t, dir, cfg)
	c := &client{t: t, base: in.base, key: in.key}
	for _, e := range []string{"ann@shop.test", "zed@shop.test", "any@catch.test"} {
		if r := c.do("POST", "/v1/validate", c.key, `{"email":"`+e+`"}`); r.status != 200 {
			t.Fatalf("%s: %d", e, r.status)
		}
	}
	balance := c.do("GET", "/v1/balance", c.key, "").body
	history := c.do("GET", "/v1/results", c.key, "").body
	jwks := c.do("GET", "/.well-known/jwks.json", "", "").body

	adm := adminapi.NewClient(filepath.Join(dir, "data", "admin.sock"))
	defer adm.Close()
	var egress []map[string]any
	if err := adm.Do(context.Background(), http.MethodGet, "/v1/egress", nil, &egress); err != nil || len(egress) != 2 {
		t.Fatalf("egress list: %v %v", egress, err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := adm.Do(context.Background(), http.MethodPost, "/v1/backup", map[string]string{"dir": backup}, nil); err != nil {
		t.Fatal(err)
	}
	if err := adm.Do(context.Background(), http.MethodPost, "/v1/backup", map[string]string{"dir": backup}, nil); err == nil {
		t.Fatal("a backup over an existing directory was accepted")
	}
	// After the backup, more work that the restored copy must not have.
	c.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test"}`)
	in.cmd.Process.Signal(syscall.SIGTERM)
	in.cmd.Wait()

	// Restore: the backup is a data dir.
	rdir := t.TempDir()
	if err := os.Rename(backup, filepath.Join(rdir, "data")); err != nil {
		t.Fatal(err)
	}
	in2 := startIn(t, rdir, cfg)
	if in2.key != "" {
		t.Fatal("the restored copy created a demo account: it lost the accounts")
	}
	c2 := &client{t: t, base: in2.base, key: c.key}
	if got := c2.do("GET", "/v1/balance", c.key, "").body; string(got) != string(balance) {
		t.Errorf("restored balance %s, want %s", got, balance)
	}
	if got := c2.do("GET", "/v1/results", c.key, "").body; string(got) != string(history) {
		t.Errorf("restored history differs:\n%s\nwant\n%s", got, history)
	}
	if got := c2.do("GET", "/.well-known/jwks.json", "", "").body; string(got) != string(jwks) {
		t.Errorf("restored key set differs")
	}
	if r := c2.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test"}`); r.status != 200 || !strings.Contains(string(r.body), `"kid":"v1"`) {
		t.Errorf("validation on the restored copy: %d %s", r.status, r.body)
	}
}
