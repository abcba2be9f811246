package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/verifyd/verifyd/"

// layers gives each of the module's folders its layer, the longest
// prefix deciding; a package may import its own layer or lower ones.
var layers = []struct {
	prefix string
	layer  int
}{
	{"internal/", 0}, {"dnsbl", 0}, {"systemd/", 0}, {"storage", 0},
	{"server/admin/adminapi", 0}, {"server/webhook/hookapi", 0}, {"server/openapi", 0}, {"server/conns", 0},
	{"storage/", 1}, {"resolver", 1},
	{"egress", 2}, {"probe/", 2},
	{"probe", 3},
	{"server/httpapi", 4}, {"server/receipt", 4},
	{"server/", 5},
	{"server", 6},
	{"cmd/", 7},
	{"bench/", 8}, {"packaging/", 8}, {"contract", 8},
}

func layerOf(pkg string) (int, bool) {
	best, layer := -1, 0
	for _, l := range layers {
		if (pkg == l.prefix || strings.HasPrefix(pkg, l.prefix)) && len(l.prefix) > best {
			best, layer = len(l.prefix), l.layer
		}
	}
	return layer, best >= 0
}

// leaves are the packages under server/ that build on nothing else of
// server/ but what is listed: the HTTP kit every front end shares, the
// receipt schema, and the wire formats verifyctl imports.
var leaves = map[string][]string{
	"server/httpapi":         {"server/conns"},
	"server/receipt":         nil,
	"server/conns":           nil,
	"server/admin/adminapi":  nil,
	"server/webhook/hookapi": {"server/admin/adminapi"},
}

// backends may be imported only by the commands, the benchmarks and
// their own subpackages: everything else reaches storage through the
// contract.
var backends = []string{"storage/pebble", "storage/postgres", "storage/storagetest"}

// pkg is what go list says of a package (not of its tests: a test may
// wire what its package must not import).
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func under(name, dir string) bool { return name == dir || strings.HasPrefix(name, dir+"/") }

// violations is what p breaks of the rules in doc.go.
func violations(p pkg) []string {
	var out []string
	name := strings.TrimPrefix(p.ImportPath, module)
	layer, ok := layerOf(name)
	if !ok {
		return []string{name + ": no layer: give its folder one here and in README.md's folder map"}
	}
	for _, imp := range p.Imports {
		if !strings.HasPrefix(imp, module) {
			continue
		}
		in := strings.TrimPrefix(imp, module)
		if l, _ := layerOf(in); l > layer {
			out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): dependencies point downward", name, layer, in, l))
		}
		if in == "server" && !under(name, "cmd") && !under(name, "bench") {
			out = append(out, name+" imports server: only the commands wire it")
		}
		if under(name, "storage") && name != "storage" && in != "storage" && !under(in, "internal") && !strings.HasPrefix(name, in+"/") {
			out = append(out, fmt.Sprintf("%s imports %s: a backend knows only the contract", name, in))
		}
		for _, b := range backends {
			if under(in, b) && !under(name, "cmd") && !under(name, "bench") && !under(name, b) {
				out = append(out, fmt.Sprintf("%s imports the backend %s: reach storage through the contract", name, in))
			}
		}
		if allowed, leaf := leaves[name]; leaf && under(in, "server") && !slices.Contains(allowed, in) {
			out = append(out, fmt.Sprintf("%s imports %s: it is a leaf of server/", name, in))
		}
	}
	if under(name, "server/batch") || under(name, "server/webhook") {
		for _, d := range p.Deps {
			if d == module+"server" || under(d, "github.com/valyala/fasthttp") || under(d, "github.com/fasthttp/router") {
				out = append(out, fmt.Sprintf("%s depends on %s: the work below HTTP has no HTTP server code", name, d))
			}
		}
	}
	return out
}

// list runs go list over the module, without tests.
func list(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "-deps=false", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if len(ps) < 20 {
		t.Fatalf("go list found %d packages", len(ps))
	}
	return ps
}

func TestShape(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range list(t) {
		seen[strings.TrimPrefix(p.ImportPath, module)] = true
		for _, v := range violations(p) {
			t.Error(v)
		}
	}
	for _, must := range []string{"server", "server/httpapi", "server/batch", "server/webhook", "storage", "storage/pebble", "storage/postgres"} {
		if !seen[must] {
			t.Errorf("%s is not in the module any more: update the test", must)
		}
	}
}

// TestShapeCanFail: each rule catches what it is for, on made-up
// packages.
func TestShapeCanFail(t *testing.T) {
	p := func(name string, imports ...string) pkg {
		q := pkg{ImportPath: module + name}
		for _, i := range imports {
			if strings.Contains(i, ".") && !strings.HasPrefix(i, "github.com/verifyd") {
				q.Deps = append(q.Deps, i)
				continue
			}
			q.Imports = append(q.Imports, module+i)
			q.Deps = append(q.Deps, module+i)
		}
		return q
	}
	for _, c := range []struct {
		p    pkg
		want string // a fragment of the violation, "" for none
	}{
		{p("probe", "server/receipt"), "point downward"},
		{p("storage", "probe"), "point downward"},
		{p("resolver", "egress"), "point downward"},
		{p("server/web", "server"), "only the commands"},
		{p("storage/pebble", "probe/address"), "only the contract"},
		{p("server/batch", "storage/postgres"), "through the contract"},
		{p("server/httpapi", "server/web"), "leaf of server/"},
		{p("server/receipt", "server/httpapi"), "leaf of server/"},
		{p("server/webhook", "github.com/valyala/fasthttp"), "no HTTP server code"},
		{p("newfolder"), "no layer"},
		{p("server/batch", "probe", "server/webhook", "storage"), ""},
		{p("server", "server/httpapi", "server/batch"), ""},
		{p("cmd/verifyd", "server", "storage/pebble"), ""},
		{p("storage/pebble/pebbletest", "storage/pebble", "storage"), ""},
	} {
		vs := violations(c.p)
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s %v: %q, want none", c.p.ImportPath, c.p.Imports, vs)
		case c.want != "" && !strings.Contains(strings.Join(vs, "\n"), c.want):
			t.Errorf("%s %v: %q, want one saying %q", c.p.ImportPath, c.p.Imports, vs, c.want)
		}
	}
}
