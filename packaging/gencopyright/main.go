// Command gencopyright writes the Debian copyright file of the verifyd
// package (DEP-5, https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/):
// verifyd's own terms, the licence of each list whose data it ships
// (probe/lists/data/LICENSES), and the licence of every Go module compiled
// into the binaries given, read from the module cache. A module whose
// licence it cannot name fails the build: the package never ships code
// under terms nobody read.
//
//	go run ./packaging/gencopyright -lists probe/lists/data/LICENSES bin/verifyd bin/verifyctl >copyright
package main

import (
	"bufio"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	lists := flag.String("lists", "probe/lists/data/LICENSES", "directory of the lists' licence files")
	flag.Parse()
	if err := run(os.Stdout, *lists, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "gencopyright:", err)
		os.Exit(1)
	}
}

// dep is one Go module compiled in.
type dep struct {
	path, version string
	license       string // the SPDX-like short name Debian uses
	copyright     string
}

func run(w io.Writer, listsDir string, binaries []string) error {
	if len(binaries) == 0 {
		return errors.New("no binaries given")
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	cache := strings.TrimSpace(string(modcache))
	seen := map[string]bool{}
	var deps []dep
	for _, b := range binaries {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			return err
		}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			if seen[m.Path] {
				continue
			}
			seen[m.Path] = true
			d, err := readDep(cache, m.Path, m.Version)
			if err != nil {
				return err
			}
			deps = append(deps, d)
		}
	}
	slices.SortFunc(deps, func(a, b dep) int { return strings.Compare(a.path, b.path) })

	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	p("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
	p("Upstream-Name: verifyd\nSource: https://github.com/verifyd/verifyd\n\n")
	p("Files: *\nCopyright: 2026 The verifyd authors\nLicense: proprietary\n")
	p(" verifyd is licensed to each customer under the terms of the customer's\n")
	p(" verifyd agreement. The third-party parts listed below keep their own\n licences.\n\n")

	used := map[string]bool{}
	entries, err := os.ReadDir(listsDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".txt")
		b, err := os.ReadFile(filepath.Join(listsDir, e.Name()))
		if err != nil {
			return err
		}
		// The file's second line is the package's declared licence
		// (probe/lists/update.sh writes it); its text follows.
		lic := declared(string(b))
		if lic == "" {
			lic = classify(string(b))
		}
		if lic == "" {
			return fmt.Errorf("%s: cannot name the licence", e.Name())
		}
		used[lic] = true
		p("Files: usr/share/verifyd/lists/%s.txt\nCopyright: %s\nLicense: %s\n\n", name, copyrightLine(string(b), "the authors of the npm package "+name), lic)
	}
	for _, d := range deps {
		used[d.license] = true
		p("Files: go/pkg/mod/%s@%s/*\nCopyright: %s\nLicense: %s\n\n", d.path, d.version, d.copyright, d.license)
	}
	for _, lic := range slices.Sorted(maps.Keys(used)) {
		p("License: %s\n%s\n", lic, indent(licenseText[lic]))
	}
	return bw.Flush()
}

// readDep finds the module's licence file in the module cache.
func readDep(cache, path, version string) (dep, error) {
	dir := filepath.Join(cache, escapePath(path)+"@"+version)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dep{}, fmt.Errorf("%s@%s: %w (run go mod download)", path, version, err)
	}
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if !strings.HasPrefix(n, "LICENSE") && !strings.HasPrefix(n, "LICENCE") && !strings.HasPrefix(n, "COPYING") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return dep{}, err
		}
		lic := classify(string(b))
		if lic == "" {
			return dep{}, fmt.Errorf("%s@%s: cannot name the licence in %s", path, version, e.Name())
		}
		return dep{path: path, version: version, license: lic, copyright: copyrightLine(string(b), "the authors of "+path)}, nil
	}
	return dep{}, fmt.Errorf("%s@%s: no licence file", path, version)
}

// escapePath is the module cache's form of a module path: each upper-case
// letter as '!' and its lower case (golang.org/x/mod/module.EscapePath).
func escapePath(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

var declaredRE = regexp.MustCompile(`(?m)^package\.json "license": "([^"]+)"`)

// declared is the Debian name of the licence a list's package.json
// declares, or "".
func declared(text string) string {
	m := declaredRE.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	switch m[1] {
	case "MIT":
		return "Expat"
	case "ISC", "Apache-2.0", "MPL-2.0":
		return m[1]
	case "BSD-2-Clause":
		return "BSD-2-clause"
	case "BSD-3-Clause":
		return "BSD-3-clause"
	}
	return ""
}

// classify names the licence of a licence file's text, or "".
func classify(text string) string {
	t := strings.Join(strings.Fields(text), " ")
	switch {
	case strings.Contains(t, "Apache License") && strings.Contains(t, "Version 2.0"):
		return "Apache-2.0"
	case strings.Contains(t, "Mozilla Public License Version 2.0") || strings.Contains(t, "Mozilla Public License, version 2.0"):
		return "MPL-2.0"
	case strings.Contains(t, "Permission is hereby granted, free of charge"):
		return "Expat"
	case strings.Contains(t, "Redistribution and use in source and binary forms"):
		if strings.Contains(t, "Neither the name") || strings.Contains(t, "names of its contributors") {
			return "BSD-3-clause"
		}
		return "BSD-2-clause"
	case strings.Contains(t, "Permission to use, copy, modify, and/or distribute") ||
		strings.Contains(t, "Permission to use, copy, modify, and distribute"):
		return "ISC"
	}
	return ""
}

var yearRE = regexp.MustCompile(`\b(19|20)\d\d\b`)

var copyrightRE = regexp.MustCompile(`(?im)^\s*Copyright\s+(?:\(c\)\s*|©\s*)?(.+)$`)

// copyrightLine is the first copyright holder line of text, or fallback.
func copyrightLine(text, fallback string) string {
	for _, m := range copyrightRE.FindAllStringSubmatch(text, -1) {
		s := strings.TrimSpace(m[1])
		l := strings.ToLower(s)
		// A holder's line has a year; the licences' own sentences
		// ("copyright license to reproduce", "copyright notice") have
		// none, or say "license".
		if yearRE.MatchString(s) && !strings.Contains(l, "license") && !strings.Contains(l, "notice") &&
			!strings.Contains(l, "holders and contributors") && !strings.HasPrefix(s, "[") {
			return s
		}
	}
	return fallback
}

// indent formats a licence text as a DEP-5 field's continuation lines.
func indent(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.TrimSpace(l) == "" {
			b.WriteString(" .\n")
			continue
		}
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}

// licenseText is each licence's text as the copyright file states it:
// by reference to /usr/share/common-licenses where Debian ships it,
// whole otherwise (the copyright holders' names are in each Files
// paragraph).
var licenseText = map[string]string{
	"Apache-2.0": "On Debian systems, the complete text of the Apache License, Version 2.0,\ncan be found in /usr/share/common-licenses/Apache-2.0.",
	"MPL-2.0":    "On Debian systems, the complete text of the Mozilla Public License,\nVersion 2.0, can be found in /usr/share/common-licenses/MPL-2.0.",
	"Expat": `Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.`,
	"BSD-3-clause": `Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

1. Redistributions of source code must retain the above copyright notice,
   this list of conditions and the following disclaimer.
2. Redistributions in binary form must reproduce the above copyright notice,
   this list of conditions and the following disclaimer in the documentation
   and/or other materials provided with the distribution.
3. Neither the name of the copyright holder nor the names of its
   contributors may be used to endorse or promote products derived from this
   software without specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE
LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE)
ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
POSSIBILITY OF SUCH DAMAGE.`,
	"BSD-2-clause": `Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

1. Redistributions of source code must retain the above copyright notice,
   this list of conditions and the following disclaimer.
2. Redistributions in binary form must reproduce the above copyright notice,
   this list of conditions and the following disclaimer in the documentation
   and/or other materials provided with the distribution.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE
LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE)
ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
POSSIBILITY OF SUCH DAMAGE.`,
	"ISC": `Permission to use, copy, modify, and/or distribute this software for any
purpose with or without fee is hereby granted, provided that the above
copyright notice and this permission notice appear in all copies.

THE SOFTWARE IS PROVIDED "AS IS" AND THE AUTHOR DISCLAIMS ALL WARRANTIES
WITH REGARD TO THIS SOFTWARE INCLUDING ALL IMPLIED WARRANTIES OF
MERCHANTABILITY AND FITNESS. IN NO EVENT SHALL THE AUTHOR BE LIABLE FOR
ANY SPECIAL, DIRECT, INDIRECT, OR CONSEQUENTIAL DAMAGES OR ANY DAMAGES
WHATSOEVER RESULTING FROM LOSS OF USE, DATA OR PROFITS, WHETHER IN AN
ACTION OF CONTRACT, NEGLIGENCE OR OTHER TORTIOUS ACTION, ARISING OUT OF
OR IN CONNECTION WITH THE USE OR PERFORMANCE OF THIS SOFTWARE.`,
}
