package contract

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedModuleImports are the only packages of this module the suite may
// import: the simulated world is the test harness, not product code.
var allowedModuleImports = []string{
	"github.com/verifyd/verifyd/bench/world",
	"github.com/verifyd/verifyd/internal/leaktest",
}

// TestIndependence checks that the suite reads only the specification:
// its files import the standard library, golang.org/x/... and the
// simulated world, and nothing else of verifyd (no server, storage,
// probe or cmd package, no generated types); and no string in them
// names the OpenAPI document or the docs.
func TestIndependence(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkg struct {
		ImportPath                         string
		Imports, TestImports, XTestImports []string
		GoFiles, TestGoFiles, XTestGoFiles []string
	}
	if err := json.Unmarshal(out, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.ImportPath != "github.com/verifyd/verifyd/contract" {
		t.Fatalf("go list answered for %s", pkg.ImportPath)
	}
	imports := slices.Concat(pkg.Imports, pkg.TestImports, pkg.XTestImports)
	slices.Sort(imports)
	imports = slices.Compact(imports)
	if len(imports) == 0 || len(pkg.TestGoFiles) == 0 {
		t.Fatalf("go list found no imports or no test files: %s", out)
	}
	args := append([]string{"list", "-f", "{{.ImportPath}} {{.Standard}}"}, imports...)
	out, err = exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		seen++
		switch {
		case std == "true":
		case strings.HasPrefix(path, "golang.org/x/"):
		case slices.Contains(allowedModuleImports, path):
		default:
			t.Errorf("the contract suite imports %s: it may import only the standard library, golang.org/x/... and %v", path, allowedModuleImports)
		}
	}
	if seen != len(imports) {
		t.Errorf("go list described %d of %d imports", seen, len(imports))
	}
	// No literal names the generated OpenAPI document, the docs or the
	// server's sources.
	forbidden := regexp.MustCompile(forbiddenPattern)
	fset := token.NewFileSet()
	for _, name := range slices.Concat(pkg.GoFiles, pkg.TestGoFiles, pkg.XTestGoFiles) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && s != forbiddenPattern && forbidden.MatchString(s) {
					t.Errorf("%s: the string %q names something the suite must not read", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
	}
}

// forbiddenPattern matches what no string of the suite may name: the
// generated OpenAPI document, the docs, the server's sources, the
// specification's file (the suite quotes it instead).
const forbiddenPattern = `(?i)openapi|docs/|\.\./(server|storage|probe|internal)|/work/shared|spec\.md`

// readmeSections are the sections of the specification the README's
// table must have a row for.
var readmeSections = []string{"1", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12",
	"3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "5", "6", "7", "8", "9"}

// TestReadmeTable checks README.md's table of sections and tests against
// the package: every Test function is listed, every listed test exists,
// and every section of the specification has a row.
func TestReadmeTable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	sections := map[string]bool{}
	testName := regexp.MustCompile(`\bTest[A-Za-z0-9_]+`)
	sc := bufio.NewScanner(strings.NewReader(string(readme)))
	inTable := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "| Spec section |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(sections) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 || strings.Trim(cells[0], " -:") == "" {
			continue // the separator row
		}
		sec := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cells[0]), "§"))
		sections[sec] = true
		tests := testName.FindAllString(cells[len(cells)-1], -1)
		if len(tests) == 0 {
			t.Errorf("README: the row of section %s lists no test", sec)
		}
		for _, n := range tests {
			listed[n] = true
		}
	}
	if len(sections) == 0 {
		t.Fatal("README.md has no table beginning with \"| Spec section |\"")
	}
	for _, s := range readmeSections {
		if !sections[s] {
			t.Errorf("README: no row for section %s", s)
		}
	}

	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			defined[fn.Name.Name] = true
		}
	}
	if len(defined) < 10 {
		t.Fatalf("found only %d tests in %v", len(defined), files)
	}
	for n := range defined {
		if !listed[n] {
			t.Errorf("README: %s is not in the table", n)
		}
	}
	for n := range listed {
		if !defined[n] {
			t.Errorf("README: the table lists %s, which does not exist", n)
		}
	}
}
