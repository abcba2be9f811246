package main

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

// touch creates the named files (and directories, for names ending in "/")
// in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if strings.HasSuffix(n, "/") {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte("# written by verifyd-egress@"+n+".service\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadEgressDir(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir,
		"192.0.2.20", "192.0.2.3", "2001:db8::10",
		"2001:0db8:0:0::10", // the same address, spelled out
		"::ffff:192.0.2.3",  // IPv4-mapped: the same as 192.0.2.3
		".192.0.2.99.tmp",   // a writer's temporary file
	)
	got, err := readEgressDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.3", "192.0.2.20", "2001:db8::10"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestReadEgressDirBadFiles shows that bad names are named in the error
// while the good addresses still come back.
func TestReadEgressDirBadFiles(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "192.0.2.1", "mail.example.com", "0.0.0.0", "ff02::1", "fe80::1%eth0", "198.51.100.7", "sub/")
	got, err := readEgressDir(dir)
	if want := []string{"192.0.2.1", "198.51.100.7"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if err == nil {
		t.Fatal("bad files not reported")
	}
	for _, bad := range []string{"mail.example.com", "0.0.0.0", "ff02::1", "fe80::1%eth0", "sub"} {
		if !strings.Contains(err.Error(), filepath.Join(dir, bad)+":") {
			t.Errorf("error does not name %s:\n%v", bad, err)
		}
	}
	if !strings.Contains(err.Error(), "ignored 5 file(s)") {
		t.Errorf("error does not count the files: %v", err)
	}
}

func TestReadEgressDirMissingOrOff(t *testing.T) {
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "none")} {
		got, err := readEgressDir(dir)
		if got != nil || err != nil {
			t.Fatalf("readEgressDir(%q) = %q, %v; want nothing", dir, got, err)
		}
	}
	// A file where the directory should be is an error.
	f := filepath.Join(t.TempDir(), "file")
	touch(t, filepath.Dir(f), "file")
	if _, err := readEgressDir(f); err == nil {
		t.Fatal("a file as addresses_dir accepted")
	}
}

func TestEgressAddresses(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "192.0.2.30", "192.0.2.10", "2001:db8::1", "bogus")
	got, err := egressAddresses(config.Egress{
		Addresses:    []string{"192.0.2.20", "192.0.2.10"},
		AddressesDir: dir,
	})
	want := []netip.Addr{
		netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.10"), // configuration order
		netip.MustParseAddr("192.0.2.30"), netip.MustParseAddr("2001:db8::1"), // then the directory's new ones
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad file not reported: %v", err)
	}

	// No file, no configured address: the pool's system address (empty).
	got, err = egressAddresses(config.Egress{AddressesDir: filepath.Join(dir, "none")})
	if len(got) != 0 || err != nil {
		t.Fatalf("got %v, %v; want nothing", got, err)
	}
}

// egressHelper is the script behind verifyd-egress@.service.
const egressHelper = "../../systemd/verifyd-egress.sh"

// runHelper runs the egress helper with a fake systemctl that records its
// arguments in systemctl.log beside runtimeDir.
func runHelper(t *testing.T, runtimeDir string, args ...string) (string, error) {
	t.Helper()
	parent := filepath.Dir(runtimeDir)
	fake := filepath.Join(parent, "systemctl")
	script := "#!/bin/sh\necho \"$*\" >>" + filepath.Join(parent, "systemctl.log") + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", append([]string{egressHelper}, args...)...)
	cmd.Env = append(os.Environ(), "RUNTIME_DIRECTORY="+runtimeDir, "SYSTEMCTL="+fake)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestEgressHelperAgreesWithVerifyd: the unit's check must never refuse an
// address verifyd takes, and refuses the mistakes an operator makes.
func TestEgressHelperAgreesWithVerifyd(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := filepath.Join(t.TempDir(), "egress")
	good := []string{
		"192.0.2.1", "127.0.0.2", "255.255.255.255", "0.0.0.1", "10.0.0.0",
		"::1", "2001:db8::1", "2001:DB8:0:0:0:0:0:1", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
		"::ffff:192.0.2.1", "1:2:3:4:5:6:192.0.2.1", "fe80::1", "2001:db8:0:0:1::",
	}
	// Random addresses in the forms netip prints and the fully expanded one.
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		var b16 [16]byte
		for i := range b16 {
			b16[i] = byte(r.IntN(4)) // many zero groups, so "::" appears
		}
		b16[0] = 0x20
		a6 := netip.AddrFrom16(b16)
		a4 := netip.AddrFrom4([4]byte{byte(1 + r.IntN(222)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		good = append(good, a6.String(), a6.StringExpanded(), a4.String())
	}
	for _, a := range good {
		if _, err := egressAddr(a); err != nil {
			t.Fatalf("test row %q is not good for verifyd: %v", a, err)
		}
		if out, err := runHelper(t, dir, "check", a); err != nil {
			t.Errorf("helper refuses %q, which verifyd takes: %s", a, out)
		}
	}
	bad := []string{
		"", "1.2.3", "192.0.2.010", "256.1.1.1", "1.2.3.4.5", "192.0.2.1/24", "host.example",
		"0.0.0.0", "224.0.0.1", "239.255.255.255", "::", "::0.0.0.0", "ff02::1", "FF05::2",
		"1::2::3", ":1::2", "1::2:", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::", "12345::1",
		"fe80::1%eth0", "::1.2.3", "-x", "..", "../etc",
	}
	for _, a := range bad {
		out, err := runHelper(t, dir, "check", a)
		if err == nil {
			t.Errorf("helper accepts %q", a)
		}
		if _, verr := egressAddr(a); verr == nil {
			t.Errorf("test row %q is good for verifyd", a)
		}
		if !strings.HasPrefix(out, "verifyd-egress: ") {
			t.Errorf("helper on %q says %q", a, out)
		}
	}
}

// TestEgressHelperStartStop: what the unit writes is what verifyd reads,
// and each start and stop asks for a reload.
func TestEgressHelperStartStop(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := filepath.Join(t.TempDir(), "egress") // created by the first start
	for _, a := range []string{"192.0.2.10", "2001:db8::10"} {
		if out, err := runHelper(t, dir, "start", a); err != nil {
			t.Fatalf("start %s: %v: %s", a, err, out)
		}
	}
	if out, err := runHelper(t, dir, "start", "192.0.2.300"); err == nil {
		t.Fatalf("start of a bad address succeeded: %s", out)
	}
	got, err := readEgressDir(dir)
	if want := []string{"192.0.2.10", "2001:db8::10"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("after start: %q, %v; want %q", got, err, want)
	}
	if out, err := runHelper(t, dir, "stop", "192.0.2.10"); err != nil {
		t.Fatalf("stop: %v: %s", err, out)
	}
	got, err = readEgressDir(dir)
	if want := []string{"2001:db8::10"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("after stop: %q, %v; want %q", got, err, want)
	}
	calls, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "systemctl.log"))
	if err != nil {
		t.Fatal(err)
	}
	reload := "--no-block try-reload-or-restart verifyd.service\n"
	if want := strings.Repeat(reload, 3); string(calls) != want {
		t.Fatalf("systemctl calls:\n%s\nwant three reloads (two starts, one stop)", calls)
	}
}

// TestEgressHeloNames: an address says the name of egress.helo_names, else
// the one its verifyd-egress@ unit wrote from HELO_NAME; a bad file is
// named in the error and its address keeps working without a name.
func TestEgressHeloNames(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := filepath.Join(t.TempDir(), "egress")
	for a, name := range map[string]string{"192.0.2.10": "probe1.example.com", "192.0.2.11": "probe2.example.com", "192.0.2.12": ""} {
		t.Setenv("HELO_NAME", name)
		if out, err := runHelper(t, dir, "start", a); err != nil {
			t.Fatalf("start %s: %v: %s", a, err, out)
		}
	}
	t.Setenv("HELO_NAME", "not a name")
	if out, err := runHelper(t, dir, "start", "192.0.2.13"); err == nil || !strings.Contains(out, "not a host name") {
		t.Fatalf("a bad HELO_NAME: %v: %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "192.0.2.14"), []byte("helo_name = a.example\nhelo_name = b.example\n"), 0o644)
	names, err := egressHeloNames(config.Egress{AddressesDir: dir,
		HeloNames: map[string]string{"192.0.2.11": "override.example.com", "2001:db8::1": "v6.example.com"}})
	want := map[netip.Addr]string{
		netip.MustParseAddr("192.0.2.10"):  "probe1.example.com",
		netip.MustParseAddr("192.0.2.11"):  "override.example.com", // the configuration wins
		netip.MustParseAddr("2001:db8::1"): "v6.example.com",
	}
	if !maps.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	if err == nil || !strings.Contains(err.Error(), "192.0.2.14") || !strings.Contains(err.Error(), "second helo_name") {
		t.Errorf("error %v, want one naming 192.0.2.14", err)
	}
	for _, tc := range []struct{ in, name, err string }{
		{"# verifyd-egress@x.service\n", "", ""},
		{"# c\n\nhelo_name = probe1.example.com\n", "probe1.example.com", ""},
		{"helo_name=probe1.example.com", "probe1.example.com", ""},
		{"helo = x.example\n", "", "want helo_name"},
		{"helo_name = -bad.example\n", "", "not a host name"},
		{"helo_name = \n", "", "not a host name"},
	} {
		name, err := parseEgressFile([]byte(tc.in))
		if name != tc.name || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %q, %v; want %q, %q", tc.in, name, err, tc.name, tc.err)
		}
	}
}
