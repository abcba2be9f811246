package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/postgres"
)

// TestDBCommands: db status of an empty database says it is not usable,
// db migrate applies every version (the DSN from --dsn or
// $VERIFYD_PG_DSN), a second migrate applies none, and status then says
// usable; a DSN that does not parse is a usage error. db export and db
// import move a stopped box's data into the database, once.
func TestDBCommands(t *testing.T) {
	srv := pgtest.Start(t)
	if err := srv.CreateDatabase(context.Background(), "fleet"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("fleet")
	var st struct {
		Version int    `json:"version"`
		Known   int    `json:"known"`
		Usable  bool   `json:"usable"`
		Detail  string `json:"detail"`
	}
	r := execCtl(t, "", nil, "-json", "db", "status", "--dsn", dsn)
	if r.code != 1 {
		t.Fatalf("db status of an empty database exits %d, want 1: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Usable || st.Version != 0 || st.Known < 1 {
		t.Fatalf("status of an empty database: %+v, %v", st, err)
	}
	r = execCtl(t, "", []string{PGDSNEnv + "=" + dsn}, "db", "migrate")
	if r.code != 0 {
		t.Fatalf("db migrate: %d %s", r.code, r.stderr)
	}
	contains(t, "db migrate", r.stdout, "applied", "1")
	r = execCtl(t, "", nil, "db", "migrate", "--dsn", dsn)
	if r.code != 0 {
		t.Fatalf("second db migrate: %d %s", r.code, r.stderr)
	}
	contains(t, "second db migrate", r.stdout, "already up to date")
	r = execCtl(t, "", nil, "-json", "db", "status", "--dsn", dsn)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Usable || st.Version != st.Known || r.code != 0 {
		t.Fatalf("status after migrate: %d %+v, %v (%s)", r.code, st, err, r.stderr)
	}
	// A schema newer than this binary (a later release migrated it):
	// not usable, exit status 1, in text as in JSON.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', now())`, st.Known+1); err != nil {
		t.Fatal(err)
	}
	r = execCtl(t, "", nil, "db", "status", "--dsn", dsn)
	if r.code != 1 || !strings.Contains(r.stdout, "usable") || !strings.Contains(r.stdout, "no:") {
		t.Fatalf("status of a newer schema: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := conn.Exec(context.Background(), `DELETE FROM schema_migrations WHERE version = $1`, st.Known+1); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	if r := execCtl(t, "", nil, "db", "status", "--dsn", "postgres://[::1"); r.code != 2 {
		t.Fatalf("a DSN that does not parse: %d %s", r.code, r.stderr)
	}
	if r := execCtl(t, "", []string{PGDSNEnv + "="}, "db", "status"); r.code != 2 {
		t.Fatalf("no DSN: %d %s", r.code, r.stderr)
	}

	// Export a stopped box's data directory and import it: the counts on
	// both sides, and the account and its balance in the database. A
	// second import is refused.
	dir := t.TempDir()
	box, err := pebble.Open(filepath.Join(dir, "db"), pebble.Options{PurgeInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := box.CreateAccount(t.Context(), "moved", storage.PlanFree)
	box.AddCredits(t.Context(), acct.ID, 42, "")
	h, _ := box.Hold(t.Context(), acct.ID, 2, "")
	if _, err := box.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "a@x.test", Status: "valid"}}); err != nil {
		t.Fatal(err)
	}
	box.Close()
	file := filepath.Join(t.TempDir(), "export.jsonl")
	r = execCtl(t, "", nil, "db", "export", "--data-dir", dir, "--out", file)
	if r.code != 0 {
		t.Fatalf("db export: %d %s", r.code, r.stderr)
	}
	contains(t, "db export", r.stderr, "account", "entry", "result")
	r = execCtl(t, "", nil, "-json", "db", "import", "--dsn", dsn, "--in", file)
	if r.code != 0 {
		t.Fatalf("db import: %d %s", r.code, r.stderr)
	}
	var counts map[string]int
	if err := json.Unmarshal([]byte(r.stdout), &counts); err != nil || counts["account"] != 1 || counts["entry"] != 3 || counts["result"] != 1 {
		t.Fatalf("import counts %s (%v)", r.stdout, err)
	}
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if c, err := db.Credits(t.Context(), acct.ID); err != nil || c.Balance != 40 {
		t.Fatalf("the imported account: %+v, %v", c, err)
	}
	if r := execCtl(t, "", nil, "db", "import", "--dsn", dsn, "--in", file); r.code == 0 || !strings.Contains(r.stderr, "holds accounts already") {
		t.Fatalf("a second import: %d %s", r.code, r.stderr)
	}
	if r := execCtl(t, "", nil, "db", "export"); r.code != 2 {
		t.Fatalf("export without --data-dir: %d %s", r.code, r.stderr)
	}
}
