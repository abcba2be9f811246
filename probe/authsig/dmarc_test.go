package authsig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDMARC(t *testing.T) {
	type want struct {
		status       DMARCStatus
		p, sp, np    string
		aspf, adkim  string
		rua          bool
		pct          int
		fo           string
		ri           uint32
		testing      bool
		psd          string
		warnings     int
		errSubstring string
	}
	found := func(p, sp string) want {
		return want{status: DMARCFound, p: p, sp: sp, np: sp, aspf: "r", adkim: "r", pct: 100, fo: "0", ri: 86400, psd: "u"}
	}
	with := func(w want, f func(*want)) want { f(&w); return w }
	none := func(err string) want { return want{errSubstring: err} }

	tests := []struct {
		name    string
		records []string
		want    want
	}{
		// Missing, or not DMARC.
		{"no records", nil, none("")},
		{"other TXT only", []string{"v=spf1 -all", "hello"}, none("")},
		{"v=DMARC10", []string{"v=DMARC10; p=reject"}, none("")},
		{"version value is case-sensitive", []string{"v=dmarc1; p=reject"}, none("")},
		{"missing separator after version", []string{"v=DMARC1 p=reject"}, none("")},
		{"version not first", []string{"p=reject; v=DMARC1"}, none("")},

		// Well-formed.
		{"minimal", []string{"v=DMARC1; p=reject"}, found("reject", "reject")},
		{"among other TXT", []string{"MS=1", "v=DMARC1; p=quarantine;", "v=spf1 -all"}, found("quarantine", "quarantine")},
		{"sp overrides", []string{"v=DMARC1; p=reject; sp=none"}, found("reject", "none")},
		{"np", []string{"v=DMARC1; p=none; np=reject"}, with(found("none", "none"), func(w *want) { w.np = "reject" })},
		{"everything", []string{"v=DMARC1; p=reject; sp=quarantine; adkim=s; aspf=s; pct=50; fo=1:d:s; ri=3600; t=y; psd=n; rua=mailto:agg@example.com,mailto:agg@example.net!10m; ruf=mailto:f@example.com"},
			with(found("reject", "quarantine"), func(w *want) {
				w.aspf, w.adkim, w.rua, w.pct, w.fo, w.ri, w.testing, w.psd = "s", "s", true, 50, "1:d:s", 3600, true, "n"
			})},
		{"upper-case tags and values", []string{"V=DMARC1; P=Quarantine; SP=NONE; ADKIM=S; Aspf=s; RUA=MAILTO:Agg@Example.COM; PCT=0"},
			with(found("quarantine", "none"), func(w *want) { w.aspf, w.adkim, w.rua, w.pct = "s", "s", true, 0 })},
		{"whitespace variants", []string{"  v = DMARC1 ;p = none ;\tsp=reject ; "}, found("none", "reject")},
		{"strings joined by the caller", []string{"v=DMARC1; p=reject; rua=mailto:a@exa" + "mple.com"},
			with(found("reject", "reject"), func(w *want) { w.rua = true })},
		{"no p: p=none (RFC 9989)", []string{"v=DMARC1; rua=mailto:a@example.com"},
			with(found("none", "none"), func(w *want) { w.rua = true })},
		{"version only: p=none", []string{"v=DMARC1"}, found("none", "none")},
		{"same tag twice, same value", []string{"v=DMARC1; p=reject; P=REJECT"}, found("reject", "reject")},

		// Bad tags other than the policies: skipped, defaults used.
		{"unknown tag ignored", []string{"v=DMARC1; p=reject; foo=bar"}, found("reject", "reject")},
		{"garbage tag-spec", []string{"v=DMARC1; p=reject; garbage;; 9=x"},
			with(found("reject", "reject"), func(w *want) { w.warnings = 2 })},
		{"bad alignment", []string{"v=DMARC1; p=none; aspf=x; adkim=strict"},
			with(found("none", "none"), func(w *want) { w.warnings = 2 })},
		{"bad pct", []string{"v=DMARC1; p=none; pct=101"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"signed pct", []string{"v=DMARC1; p=none; pct=+5"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"bad fo", []string{"v=DMARC1; p=none; fo=2"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"fo repeats", []string{"v=DMARC1; p=none; fo=d:d"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"bad ri", []string{"v=DMARC1; p=none; ri=-1"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"bad t and psd", []string{"v=DMARC1; p=none; t=maybe; psd=x"}, with(found("none", "none"), func(w *want) { w.warnings = 2 })},
		{"aspf twice, different", []string{"v=DMARC1; p=none; aspf=s; aspf=r"}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"rua without a valid mailto", []string{"v=DMARC1; p=none; rua=https://example.com/r,mailto:nobody"},
			with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"rua empty", []string{"v=DMARC1; p=none; rua="}, with(found("none", "none"), func(w *want) { w.warnings = 1 })},
		{"rua percent-encoded", []string{"v=DMARC1; p=none; rua=mailto:%64marc@example.com"},
			with(found("none", "none"), func(w *want) { w.rua = true })},
		{"rua single-label domain", []string{"v=DMARC1; p=none; rua=mailto:a@localhost"},
			with(found("none", "none"), func(w *want) { w.warnings = 1 })},

		// Bad policies: the rua rule of RFC 7489 §6.6.3 step 6.
		{"invalid p with valid rua: p=none", []string{"v=DMARC1; p=block; rua=mailto:a@example.com"},
			with(found("none", "none"), func(w *want) { w.rua, w.warnings = true, 1 })},
		{"invalid p without rua: none", []string{"v=DMARC1; p=block"}, none("invalid p=")},
		{"empty p without rua: none", []string{"v=DMARC1; p="}, none("invalid p=")},
		{"invalid sp with valid rua", []string{"v=DMARC1; p=reject; sp=maybe; rua=mailto:a@example.com"},
			with(found("none", "none"), func(w *want) { w.rua, w.warnings = true, 1 })},
		{"invalid np without rua", []string{"v=DMARC1; p=reject; np=x"}, none("invalid p=")},
		{"p twice, different, without rua", []string{"v=DMARC1; p=reject; p=none"}, none("invalid p=")},
		{"p twice, different, with rua", []string{"v=DMARC1; p=reject; p=none; rua=mailto:a@example.com"},
			with(found("none", "none"), func(w *want) { w.rua, w.warnings = true, 2 })},
		{"invalid p, invalid rua", []string{"v=DMARC1; p=x; rua=mailto:broken"}, none("invalid p=")},
		{"invalid p, conflicting rua", []string{"v=DMARC1; p=x; rua=mailto:a@example.com; rua=mailto:b@example.com"}, none("invalid p=")},
		{"rua twice, different: ignored", []string{"v=DMARC1; p=reject; rua=mailto:a@example.com; RUA=mailto:b@example.com"},
			with(found("reject", "reject"), func(w *want) { w.warnings = 1 })},
		{"rua twice, same", []string{"v=DMARC1; p=reject; rua=mailto:a@example.com; rua=mailto:a@example.com"},
			with(found("reject", "reject"), func(w *want) { w.rua = true })},

		// Ambiguous.
		{"two records", []string{"v=DMARC1; p=reject", "v=DMARC1; p=none"}, none("more than one record")},
		{"two records, one broken", []string{"v=DMARC1; p=reject", "v=DMARC1; p=x"}, none("more than one record")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DMARC(tt.records)
			w := tt.want
			if got.Status != w.status {
				t.Fatalf("DMARC(%q) = %v (err %v, warnings %q), want %v", tt.records, got.Status, got.Err, got.Warnings, w.status)
			}
			switch {
			case w.errSubstring == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case w.errSubstring != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), w.errSubstring)):
				t.Errorf("Err = %v, want one containing %q", got.Err, w.errSubstring)
			}
			if got.Status != DMARCFound {
				if got.Record != nil {
					t.Errorf("Record = %+v with status none", got.Record)
				}
				return
			}
			r := got.Record
			gotW := want{
				status: got.Status, p: r.Policy.String(), sp: r.SubdomainPolicy.String(), np: r.NonexistentPolicy.String(),
				aspf: r.ASPF.String(), adkim: r.ADKIM.String(), rua: r.RUASet(), pct: r.Percent, fo: r.FailureOptions,
				ri: r.ReportInterval, testing: r.Testing, psd: r.PSD, warnings: len(got.Warnings),
			}
			if gotW != w {
				t.Errorf("DMARC(%q) =\n %+v\nwant\n %+v\nwarnings %q", tt.records, gotW, w, got.Warnings)
			}
		})
	}
}

func TestDMARCURIs(t *testing.T) {
	got := parseDMARCURIs(" mailto:a@example.com , mailto:b@example.net!10m,https://example.org/r, mailto:c@example.org!x ,mailto:d@example.com!5")
	want := []string{"mailto:a@example.com", "mailto:b@example.net", "mailto:d@example.com"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseDMARCURIs = %q, want %q", got, want)
	}
}

func TestDMARCStrings(t *testing.T) {
	for p, want := range map[DMARCPolicy]string{DMARCPolicyUnset: "", DMARCPolicyNone: "none", DMARCPolicyQuarantine: "quarantine", DMARCPolicyReject: "reject"} {
		if p.String() != want {
			t.Errorf("policy %d = %q, want %q", p, p.String(), want)
		}
	}
	if AlignRelaxed.String() != "r" || AlignStrict.String() != "s" {
		t.Error("alignment strings")
	}
	if DMARCNone.String() != "none" || DMARCFound.String() != "found" {
		t.Error("status strings")
	}
}

func TestDiscoverDMARC(t *testing.T) {
	zone := map[string][]string{
		"_dmarc.example.com":         {"v=DMARC1; p=reject; sp=quarantine"},
		"_dmarc.own.example.com":     {"v=DMARC1; p=none"},
		"_dmarc.two.example.com":     {"v=DMARC1; p=none", "v=DMARC1; p=reject"},
		"_dmarc.broken.example.com":  {"v=DMARC1; p=bogus"},
		"_dmarc.other.example.com":   {"v=spf1 -all"},
		"_dmarc.example.co.uk":       {"v=DMARC1; p=quarantine"},
		"_dmarc.alpha.test":          {"v=DMARC1; p=reject"},
		"_dmarc.nodmarc.example.org": nil,
	}
	tests := []struct {
		domain    string
		status    DMARCStatus
		at        string
		effective DMARCPolicy
		inherited bool
		asked     string
		fail      string
	}{
		{"example.com", DMARCFound, "example.com", DMARCPolicyReject, false, "_dmarc.example.com", ""},
		{"Example.COM.", DMARCFound, "example.com", DMARCPolicyReject, false, "_dmarc.example.com", ""},
		{"mail.example.com", DMARCFound, "example.com", DMARCPolicyQuarantine, true, "_dmarc.mail.example.com,_dmarc.example.com", ""},
		{"own.example.com", DMARCFound, "own.example.com", DMARCPolicyNone, false, "_dmarc.own.example.com", ""},
		{"other.example.com", DMARCFound, "example.com", DMARCPolicyQuarantine, true, "_dmarc.other.example.com,_dmarc.example.com", ""},
		// Several records, or a broken one, at the domain: no fallback.
		{"two.example.com", DMARCNone, "two.example.com", DMARCPolicyUnset, false, "_dmarc.two.example.com", ""},
		{"broken.example.com", DMARCNone, "broken.example.com", DMARCPolicyUnset, false, "_dmarc.broken.example.com", ""},
		{"a.b.example.co.uk", DMARCFound, "example.co.uk", DMARCPolicyQuarantine, true, "_dmarc.a.b.example.co.uk,_dmarc.example.co.uk", ""},
		{"mx1.alpha.test", DMARCFound, "alpha.test", DMARCPolicyReject, true, "_dmarc.mx1.alpha.test,_dmarc.alpha.test", ""},
		{"example.org", DMARCNone, "", DMARCPolicyUnset, false, "_dmarc.example.org", ""},
		{"nodmarc.example.org", DMARCNone, "", DMARCPolicyUnset, false, "_dmarc.nodmarc.example.org,_dmarc.example.org", ""},
		{"mail.example.com", DMARCNone, "", DMARCPolicyUnset, false, "_dmarc.mail.example.com", "_dmarc.mail.example.com"},
		{"mail.example.com", DMARCNone, "", DMARCPolicyUnset, false, "_dmarc.mail.example.com,_dmarc.example.com", "_dmarc.example.com"},
	}
	for _, tt := range tests {
		lookup, asked := mapLookup(zone, tt.fail)
		got, err := DiscoverDMARC(tt.domain, lookup)
		if tt.fail != "" {
			if err == nil {
				t.Errorf("DiscoverDMARC(%q) with %s failing: no error", tt.domain, tt.fail)
			}
			continue
		}
		if err != nil {
			t.Errorf("DiscoverDMARC(%q): %v", tt.domain, err)
			continue
		}
		if got.Status != tt.status || got.Domain != tt.at || got.EffectivePolicy(tt.domain) != tt.effective || got.Inherited(tt.domain) != tt.inherited {
			t.Errorf("DiscoverDMARC(%q) = %v at %q effective %q inherited %v (err %v), want %v at %q effective %q inherited %v",
				tt.domain, got.Status, got.Domain, got.EffectivePolicy(tt.domain), got.Inherited(tt.domain), got.Err,
				tt.status, tt.at, tt.effective, tt.inherited)
		}
		if strings.Join(*asked, ",") != tt.asked {
			t.Errorf("DiscoverDMARC(%q) asked %q, want %q", tt.domain, *asked, tt.asked)
		}
	}
}

func TestDMARCMultipleIsSentinel(t *testing.T) {
	if res := DMARC([]string{"v=DMARC1; p=none", "v=DMARC1; p=none"}); !errors.Is(res.Err, ErrMultipleRecords) {
		t.Errorf("Err = %v", res.Err)
	}
}

func FuzzDMARC(f *testing.F) {
	for _, s := range []string{
		"v=DMARC1; p=reject",
		"v=DMARC1; p=none; sp=quarantine; adkim=s; aspf=r; pct=50; fo=1:d; ri=3600; rua=mailto:a@example.com!10m; ruf=mailto:b@example.com",
		"V=DMARC1; P=x; RUA=mailto:a@example.com",
		"v=DMARC1; p=reject; p=none",
		"v=DMARC1;;garbage; t=y; psd=n; np=reject",
		"v=DMARC1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, txt string) {
		res := DMARC([]string{txt})
		if !IsDMARCRecord(txt) && (res.Status != DMARCNone || res.Err != nil) {
			t.Fatalf("DMARC(%q) = %+v for a non-DMARC record", txt, res)
		}
		switch res.Status {
		case DMARCNone:
			if res.Record != nil {
				t.Fatalf("DMARC(%q): none with a record", txt)
			}
		case DMARCFound:
			r := res.Record
			if r == nil || res.Err != nil {
				t.Fatalf("DMARC(%q): found with record %v, err %v", txt, r, res.Err)
			}
			// Found implies every policy is set.
			for _, p := range []DMARCPolicy{r.Policy, r.SubdomainPolicy, r.NonexistentPolicy} {
				if p < DMARCPolicyNone || p > DMARCPolicyReject || p.String() == "" {
					t.Fatalf("DMARC(%q): found with policy %d", txt, p)
				}
			}
			if r.Percent < 0 || r.Percent > 100 || (r.PSD != "y" && r.PSD != "n" && r.PSD != "u") ||
				r.ASPF > AlignStrict || r.ADKIM > AlignStrict || !validFO(r.FailureOptions) {
				t.Fatalf("DMARC(%q): found with %+v", txt, r)
			}
			for _, u := range append(append([]string{}, r.RUA...), r.RUF...) {
				if !validMailtoURI(u) {
					t.Fatalf("DMARC(%q): invalid URI %q kept", txt, u)
				}
			}
		default:
			t.Fatalf("DMARC(%q): status %d", txt, res.Status)
		}
	})
}

const benchDMARC = "v=DMARC1; p=quarantine; sp=reject; adkim=s; aspf=r; pct=100; fo=1:d; ri=86400; " +
	"rua=mailto:dmarc-agg@example.com,mailto:reports@dmarc.example.net!10m; ruf=mailto:dmarc-forensic@example.com"

func BenchmarkParseDMARC(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseDMARC(benchDMARC); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDMARC(b *testing.B) {
	records := []string{"v=spf1 -all", benchDMARC}
	b.ReportAllocs()
	for b.Loop() {
		if res := DMARC(records); res.Status != DMARCFound {
			b.Fatal(res.Err)
		}
	}
}
