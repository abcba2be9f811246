package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClassify: each licence the package meets is named; a text it does
// not know is not guessed at.
func TestClassify(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"Apache License\n Version 2.0, January 2004", "Apache-2.0"},
		{"Permission is hereby granted, free of charge, to any person", "Expat"},
		{"Redistribution and use in source and binary forms ... Neither the name of Google Inc.", "BSD-3-clause"},
		{"Redistribution and use in source and binary forms, with or without\nmodification", "BSD-2-clause"},
		{"Permission to use, copy, modify, and/or distribute this software", "ISC"},
		{"Mozilla Public License Version 2.0", "MPL-2.0"},
		{"GNU GENERAL PUBLIC LICENSE Version 3", ""},
		{"All rights reserved.", ""},
	} {
		if got := classify(c.text); got != c.want {
			t.Errorf("classify(%.30q) = %q, want %q", c.text, got, c.want)
		}
	}
	if got := declared("x\npackage.json \"license\": \"MIT\"\n"); got != "Expat" {
		t.Errorf("declared MIT = %q", got)
	}
	if got := declared("package.json \"license\": \"GPL-3.0\""); got != "" {
		t.Errorf("declared GPL-3.0 = %q, want none", got)
	}
}

// TestCopyrightLine: the holder's line, never a sentence of the licence.
func TestCopyrightLine(t *testing.T) {
	apache := "subject to the terms and conditions of this License, each Contributor hereby grants to You a perpetual,\n" +
		"copyright license to reproduce, prepare Derivative Works of,\n"
	if got := copyrightLine(apache, "fallback"); got != "fallback" {
		t.Errorf("Apache text: %q", got)
	}
	if got := copyrightLine("MIT License\n\nCopyright (c) 2019 VictoriaMetrics\n\nPermission ...", "x"); got != "2019 VictoriaMetrics" {
		t.Errorf("MIT text: %q", got)
	}
}

// TestRunWritesCopyright: the copyright file of this test's own binary
// (standard library only: the modules of the verifyd binaries are named
// by make deb, which fails on a licence it cannot name) has the DEP-5
// header, a list's paragraph from its declared licence and holder, and
// the text of each licence used.
func TestRunWritesCopyright(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lists := t.TempDir()
	if err := os.WriteFile(filepath.Join(lists, "l.txt"), []byte("x\npackage.json \"license\": \"MIT\"\nCopyright 2020 Someone\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := run(&b, lists, []string{exe}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
		"Files: usr/share/verifyd/lists/l.txt\nCopyright: 2020 Someone\nLicense: Expat", "\nLicense: Expat\n Permission is hereby granted"} {
		if !strings.Contains(out, want) {
			t.Errorf("copyright lacks %q:\n%s", want, out)
		}
	}
}
