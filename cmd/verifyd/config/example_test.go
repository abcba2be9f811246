package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// examplePath is the commented configuration "make install" puts at
// /etc/verifyd/verifyd.toml.
const examplePath = "../../../systemd/verifyd.toml.example"

// TestShippedExampleParses: the installed default file must load, and must
// point verifyd and verifyctl at the unit's directories.
func TestShippedExampleParses(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}
	if c.DataDir != "/var/lib/verifyd" || c.Admin.Socket != "/run/verifyd/admin.sock" {
		t.Fatalf("example: data_dir %q, admin.socket %q; want the unit's StateDirectory and RuntimeDirectory", c.DataDir, c.Admin.Socket)
	}
	if c.Egress.AddressesDir != "/run/verifyd-egress" || c.Probe.ListsDir != "/etc/verifyd/lists" {
		t.Fatalf("example: egress.addresses_dir %q, probe.lists_dir %q", c.Egress.AddressesDir, c.Probe.ListsDir)
	}

	// The commented lines are examples an operator uncomments: they must
	// be valid too.
	b, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	all := regexp.MustCompile(`(?m)^#(\w+\s*=)`).ReplaceAllString(string(b), "$1")
	if _, err := Parse(all); err != nil {
		t.Fatalf("the example with every key uncommented does not load: %v", err)
	}
}

// TestShippedExampleIsComplete: every key of Config appears in the example,
// set or commented, so an operator sees every knob. A new field needs a
// line there.
func TestShippedExampleIsComplete(t *testing.T) {
	b, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`^\[(\w+)\]$`)
	key := regexp.MustCompile(`^#?\s*(\w+)\s*=`)
	have := map[string]bool{}
	prefix := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			prefix = m[1] + "."
		} else if m := key.FindStringSubmatch(line); m != nil {
			have[prefix+m[1]] = true
		}
	}
	for _, k := range tomlKeys(reflect.TypeFor[Config](), "") {
		if !have[k] {
			t.Errorf("systemd/verifyd.toml.example does not mention %s", k)
		}
	}
}

// tomlKeys lists the dotted TOML keys of the struct type t.
func tomlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, tomlKeys(f.Type, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}
