package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// findSocket's order: -socket, $VERIFYD_ADMIN_SOCKET, admin.socket of the
// configuration; and the systemd runtime directory's socket when the
// configuration names none and the one verifyd would derive from the data
// dir is not there.
func TestFindSocket(t *testing.T) {
	dir := t.TempDir()
	old := systemdSocket
	systemdSocket = filepath.Join(dir, "run", "admin.sock")
	t.Cleanup(func() { systemdSocket = old })
	t.Setenv(SocketEnv, "")
	t.Setenv("RUNTIME_DIRECTORY", "")

	named := filepath.Join(dir, "named.toml")
	write(t, named, "data_dir = "+quote(filepath.Join(dir, "data"))+"\n[admin]\nsocket = "+quote(filepath.Join(dir, "cfg.sock"))+"\n")
	bare := filepath.Join(dir, "bare.toml")
	write(t, bare, "data_dir = "+quote(filepath.Join(dir, "data"))+"\n")

	check := func(flag, cfg, wantPath, wantSource string) {
		t.Helper()
		path, source, err := findSocket(flag, cfg)
		if err != nil || path != wantPath || !strings.Contains(source, wantSource) {
			t.Errorf("findSocket(%q, %q) = %q, %q, %v; want %q from %q", flag, cfg, path, source, err, wantPath, wantSource)
		}
	}
	check("/x.sock", named, "/x.sock", "-socket")
	t.Setenv(SocketEnv, "/env.sock")
	check("", named, "/env.sock", SocketEnv)
	t.Setenv(SocketEnv, "")
	check("", named, filepath.Join(dir, "cfg.sock"), "admin.socket of "+named)
	// No socket named: the data dir's, since neither exists yet…
	derived := filepath.Join(dir, "data", "admin.sock")
	check("", bare, derived, "admin.socket of "+bare)
	// …then systemd's, which exists while the derived one does not…
	write(t, systemdSocket, "")
	check("", bare, systemdSocket, "systemd's runtime directory")
	// …but never in place of a named socket, nor of a derived one that
	// exists.
	check("", named, filepath.Join(dir, "cfg.sock"), "admin.socket of "+named)
	write(t, derived, "")
	check("", bare, derived, "admin.socket of "+bare)

	if _, _, err := findSocket("", filepath.Join(dir, "missing.toml")); err == nil {
		t.Error("a missing configuration file gave no error")
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func quote(s string) string { return `"` + s + `"` }
