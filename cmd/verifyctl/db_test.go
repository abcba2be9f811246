package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/verifyd/verifyd/internal/pgtest"
)

// TestDBCommands: db status of an empty database says it is not usable,
// db migrate applies every version (the DSN from --dsn or
// $VERIFYD_PG_DSN), a second migrate applies none, and status then says
// usable; a DSN that does not parse is a usage error.
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
	if r.code != 0 {
		t.Fatalf("db status: %d %s", r.code, r.stderr)
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
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Usable || st.Version != st.Known {
		t.Fatalf("status after migrate: %+v, %v (%s)", st, err, r.stderr)
	}
	if r := execCtl(t, "", nil, "db", "status", "--dsn", "postgres://[::1"); r.code != 2 {
		t.Fatalf("a DSN that does not parse: %d %s", r.code, r.stderr)
	}
	if r := execCtl(t, "", []string{PGDSNEnv + "="}, "db", "status"); r.code != 2 {
		t.Fatalf("no DSN: %d %s", r.code, r.stderr)
	}
}
