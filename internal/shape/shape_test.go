package shape

import (
	"bytes"
	"encoding/json"
	"os/exec"
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
	{"server/admin/adminapi", 0}, {"server/openapi", 0}, {"server/conns", 0},
	{"storage/", 1}, {"resolver", 1},
	{"egress", 2}, {"probe/", 2},
	{"probe", 3},
	{"server/", 4},
	{"server", 5},
	{"cmd/", 6},
	{"bench/", 7},
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

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list -deps over the module, without tests.
func list(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
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
	checked := map[string]bool{}
	for _, p := range list(t) {
		name := strings.TrimPrefix(p.ImportPath, module)
		layer, ok := layerOf(name)
		if !ok {
			t.Errorf("%s: no layer in the folder map: give its folder one here and in README.md", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			in := strings.TrimPrefix(imp, module)
			if l, _ := layerOf(in); l > layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): dependencies point downward", name, layer, in, l)
			}
			if in == "server" && !strings.HasPrefix(name, "cmd/") {
				t.Errorf("%s imports server: only the commands wire it", name)
			}
			if strings.HasPrefix(name, "storage/") && in != "storage" && !strings.HasPrefix(in, "internal/") && !strings.HasPrefix(name, in+"/") {
				t.Errorf("%s imports %s: a backend knows only the contract", name, in)
			}
		}
		for _, below := range []string{"server/batch", "server/webhook"} {
			if name != below && !strings.HasPrefix(name, below+"/") {
				continue
			}
			checked[below] = true
			for _, d := range p.Deps {
				if d == module+"server" || d == "github.com/valyala/fasthttp" || strings.HasPrefix(d, "github.com/valyala/fasthttp/") ||
					strings.HasPrefix(d, "github.com/fasthttp/") {
					t.Errorf("%s depends on %s: the work below HTTP has no HTTP server code", name, d)
				}
			}
		}
	}
	for _, below := range []string{"server/batch", "server/webhook"} {
		if !checked[below] {
			t.Errorf("%s is not in the module any more: update the test", below)
		}
	}
}

// TestShapeCanFail: the rules catch what they are for, on made-up
// import lists.
func TestShapeCanFail(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"probe", "server/receipt", false},
		{"storage", "probe", false},
		{"server/batch", "probe", true},
		{"server", "server/httpapi", true},
		{"cmd/verifyd", "server", true},
		{"resolver", "egress", false},
	} {
		a, _ := layerOf(c.pkg)
		b, _ := layerOf(c.imp)
		if (b <= a) != c.ok {
			t.Errorf("%s importing %s: allowed %v, want %v", c.pkg, c.imp, b <= a, c.ok)
		}
	}
}
