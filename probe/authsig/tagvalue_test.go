package authsig

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTagList(t *testing.T) {
	tests := []struct {
		in      string
		want    TagList
		wantErr string // substring; "" means success
	}{
		{"", nil, ""},
		{"   ", nil, ""},
		{"v=DKIM1", TagList{{"v", "DKIM1"}}, ""},
		{"v=DKIM1;", TagList{{"v", "DKIM1"}}, ""},
		{"v=DKIM1; ", TagList{{"v", "DKIM1"}}, ""},
		{"v=DKIM1;k=rsa;p=abc", TagList{{"v", "DKIM1"}, {"k", "rsa"}, {"p", "abc"}}, ""},
		// FWS around names, "=" and values; CRLF folds; tabs.
		{" v = DKIM1 ;\tk\t=\trsa\r\n ; p=\r\n abc ", TagList{{"v", "DKIM1"}, {"k", "rsa"}, {"p", "abc"}}, ""},
		// Inner whitespace in a value is kept (DKIM p= strips it later).
		{"p=MIIB IjAN\r\n Bgkq", TagList{{"p", "MIIB IjAN\r\n Bgkq"}}, ""},
		// Empty values.
		{"p=", TagList{{"p", ""}}, ""},
		{"l=; a=;", TagList{{"l", ""}, {"a", ""}}, ""},
		// A value may contain "=" and ":".
		{"rua=mailto:a@b.example?subject=x=y", TagList{{"rua", "mailto:a@b.example?subject=x=y"}}, ""},
		// Names: ALPHA *ALNUMPUNC, case kept.
		{"x_1=a; X=b", TagList{{"x_1", "a"}, {"X", "b"}}, ""},
		{"1x=a", nil, "bad tag name"},
		{"_x=a", nil, "bad tag name"},
		{"x-y=a", nil, "bad tag name"},
		{"=a", nil, "bad tag name"},
		{"a b=c", nil, "bad tag name"},
		// Duplicates, exact-case.
		{"p=a; p=b", nil, "duplicate tag"},
		{"p=a; p=a", nil, "duplicate tag"},
		{"p=a; P=b", TagList{{"p", "a"}, {"P", "b"}}, ""},
		// Empty tag-specs other than one trailing.
		{"v=1;;p=2", nil, "empty tag-spec"},
		{";v=1", nil, "empty tag-spec"},
		{"v=1;;", nil, "empty tag-spec"},
		// Missing "=".
		{"v=1; junk", nil, "without"},
		// Bad value octets.
		{"p=a\x00b", nil, "bad character"},
		{"p=caf\xc3\xa9", nil, "bad character"},
		{"p=a\x7fb", nil, "bad character"},
	}
	for _, tt := range tests {
		got, err := ParseTagList(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTagList(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTagList(%q) error = %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseTagList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTagListGet(t *testing.T) {
	l := TagList{{"v", "1"}, {"p", ""}}
	if v, ok := l.Get("p"); !ok || v != "" {
		t.Errorf("Get(p) = %q, %v; want \"\", true", v, ok)
	}
	if _, ok := l.Get("P"); ok {
		t.Error("Get(P) found a tag; names are case-sensitive")
	}
}

func TestParseTagsLenient(t *testing.T) {
	l, errs := parseTags("V=DMARC1;; P=reject; bad; p=none; 9x=1;", tagSyntax{
		record: "dmarc", validName: isTagName, foldNames: true, lenient: true,
	})
	want := TagList{{"v", "DMARC1"}, {"p", "reject"}, {"p", "none"}}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("tags = %q, want %q", l, want)
	}
	if len(errs) != 2 {
		t.Errorf("errors = %v, want two (\"bad\" and \"9x=1\")", errs)
	}
}

func TestVersionTag(t *testing.T) {
	tests := []struct {
		txt              string
		fold, leadingWS  bool
		wantDMARC1Record bool
	}{
		{"v=DMARC1", false, false, true},
		{"v=DMARC1;p=none", false, false, true},
		{"v = DMARC1 ; p=none", false, false, true},
		{"V=DMARC1; p=none", false, false, false},
		{"V=DMARC1; p=none", true, false, true},
		{" v=DMARC1", false, false, false},
		{" v=DMARC1", false, true, true},
		{"v=DMARC1 p=none", false, false, false},
		{"v=DMARC10; p=none", false, false, false},
		{"v=dmarc1; p=none", true, true, false},
		{"v", false, false, false},
		{"", false, false, false},
	}
	for _, tt := range tests {
		if got := versionTag(tt.txt, "v", "DMARC1", tt.fold, tt.leadingWS); got != tt.wantDMARC1Record {
			t.Errorf("versionTag(%q, fold=%v, ws=%v) = %v, want %v", tt.txt, tt.fold, tt.leadingWS, got, tt.wantDMARC1Record)
		}
	}
}

// FuzzTagList checks that the parser never panics and that what it accepts
// is well-formed and survives a round trip.
func FuzzTagList(f *testing.F) {
	for _, s := range []string{
		"", "v=DKIM1; k=rsa; p=MIGfMA0", "a=;b=", "x = y ;", "p=a;;", "a=b=c", "\r\n a=b\r\n ;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseTagList(s)
		if err != nil {
			if l != nil {
				t.Fatalf("ParseTagList(%q) returned tags with an error", s)
			}
			return
		}
		seen := map[string]bool{}
		var b strings.Builder
		for i, tag := range l {
			if !isTagName(tag.Name) {
				t.Fatalf("ParseTagList(%q): bad name %q accepted", s, tag.Name)
			}
			if seen[tag.Name] {
				t.Fatalf("ParseTagList(%q): duplicate %q accepted", s, tag.Name)
			}
			seen[tag.Name] = true
			if tag.Value != trimWS(tag.Value) || strings.ContainsRune(tag.Value, ';') {
				t.Fatalf("ParseTagList(%q): value %q not trimmed or holds ';'", s, tag.Value)
			}
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(tag.Name + "=" + tag.Value)
		}
		again, err := ParseTagList(b.String())
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("round trip of %q via %q: %q, %v", s, b.String(), again, err)
		}
	})
}
