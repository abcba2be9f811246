package authsig

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestSPF(t *testing.T) {
	tests := []struct {
		name     string
		records  []string
		want     SPFPosture
		redirect string
		lookups  int
		wantErr  string // substring of Err; "" means Err == nil
	}{
		// Missing or not SPF.
		{"no records", nil, SPFNone, "", 0, ""},
		{"other TXT only", []string{"google-site-verification=abc", "MS=ms123"}, SPFNone, "", 0, ""},
		{"v=spf10 is not v=spf1", []string{"v=spf10 -all"}, SPFNone, "", 0, ""},
		{"v=spf1 glued to a term", []string{"v=spf1-all"}, SPFNone, "", 0, ""},
		{"leading space", []string{" v=spf1 -all"}, SPFNone, "", 0, ""},
		{"tab after version", []string{"v=spf1\t-all"}, SPFNone, "", 0, ""},
		{"spf2.0 sender id", []string{"spf2.0/pra -all"}, SPFNone, "", 0, ""},

		// Well-formed postures.
		{"strict", []string{"v=spf1 -all"}, SPFStrict, "", 0, ""},
		{"upper-case version and all", []string{"V=SPF1 MX -ALL"}, SPFStrict, "", 1, ""},
		{"softfail", []string{"v=spf1 include:_spf.google.com ~all"}, SPFSoftfail, "", 1, ""},
		{"neutral", []string{"v=spf1 mx ?all"}, SPFNeutral, "", 1, ""},
		{"pass with +all", []string{"v=spf1 +all"}, SPFPass, "", 0, ""},
		{"pass with bare all", []string{"v=spf1 all"}, SPFPass, "", 0, ""},
		{"no all, no redirect: neutral (§4.7)", []string{"v=spf1 mx a"}, SPFNeutral, "", 2, ""},
		{"version only: neutral", []string{"v=spf1"}, SPFNeutral, "", 0, ""},
		{"version and spaces", []string{"v=spf1   "}, SPFNeutral, "", 0, ""},
		{"many spaces between terms", []string{"v=spf1  ip4:192.0.2.0/24   ip6:2001:db8::/32  -all  "}, SPFStrict, "", 0, ""},
		{"first all decides", []string{"v=spf1 ~all -all"}, SPFSoftfail, "", 0, ""},
		{"terms after all are not counted", []string{"v=spf1 -all include:a.example mx"}, SPFStrict, "", 0, ""},
		{"strings joined by the caller", []string{"v=spf1 ip4:192.0.2.0/24 " + "include:spf.example.net ~all"}, SPFSoftfail, "", 1, ""},
		{"SPF record among other TXT", []string{"MS=ms1", "v=spf1 -all", "other"}, SPFStrict, "", 0, ""},
		{"redirect", []string{"v=spf1 redirect=_spf.example.com"}, SPFRedirect, "_spf.example.com", 1, ""},
		{"upper-case redirect", []string{"v=spf1 mx REDIRECT=_spf.example.com"}, SPFRedirect, "_spf.example.com", 2, ""},
		{"redirect ignored when all present", []string{"v=spf1 redirect=_spf.example.com -all"}, SPFStrict, "", 0, ""},
		{"exp does not change posture", []string{"v=spf1 -all exp=explain.%{d}"}, SPFStrict, "", 0, ""},
		{"unknown modifier ignored", []string{"v=spf1 foo=bar.%{d} moo.x-1=  -all"}, SPFStrict, "", 0, ""},
		{"every mechanism form", []string{"v=spf1 a:mail.example.com a/24 a//64 a:example.com/24//64 mx mx:example.com/28 ptr ptr:example.com ip4:192.0.2.1 ip6:::ffff:192.0.2.1/128 exists:%{ir}.%{l1r+-}._spf.%{d} include:example.net -all"}, SPFStrict, "", 10, ""},
		{"macros at the end of a domain-spec", []string{"v=spf1 exists:%{i}._spf.%{d2} include:%{d}.%% -all"}, SPFStrict, "", 2, ""},
		{"trailing dot", []string{"v=spf1 include:example.com. -all"}, SPFStrict, "", 1, ""},
		{"numeric toplabel with hyphen", []string{"v=spf1 a:host.1-2 -all"}, SPFStrict, "", 1, ""},
		{"ten lookups is the limit", []string{"v=spf1 " + strings.Repeat("mx ", 10) + "-all"}, SPFStrict, "", 10, ""},

		// Ambiguous.
		{"two SPF records", []string{"v=spf1 -all", "v=spf1 ~all"}, SPFPermError, "", 0, "more than one record"},
		{"two SPF records, different case", []string{"v=spf1 -all", "V=SPF1 -all"}, SPFPermError, "", 0, "more than one record"},

		// Malformed.
		{"unknown mechanism", []string{"v=spf1 foo -all"}, SPFPermError, "", 0, "unknown mechanism"},
		{"bad qualifier", []string{"v=spf1 *all"}, SPFPermError, "", 0, "unknown mechanism"},
		{"qualifier alone", []string{"v=spf1 -"}, SPFPermError, "", 0, "unknown mechanism"},
		{"qualifier on a modifier", []string{"v=spf1 -redirect=example.com"}, SPFPermError, "", 0, "unknown mechanism"},
		{"tab inside the record", []string{"v=spf1 mx\t-all"}, SPFPermError, "", 0, "unknown mechanism"},
		{"all with an argument", []string{"v=spf1 all:example.com"}, SPFPermError, "", 0, "no argument"},
		{"include without domain", []string{"v=spf1 include -all"}, SPFPermError, "", 0, "needs"},
		{"include with empty domain", []string{"v=spf1 include: -all"}, SPFPermError, "", 0, "empty domain-spec"},
		{"single-label include", []string{"v=spf1 include:localhost -all"}, SPFPermError, "", 0, "toplabel"},
		{"all-numeric toplabel", []string{"v=spf1 a:192.0.2.1 -all"}, SPFPermError, "", 0, "toplabel"},
		{"ptr with cidr", []string{"v=spf1 ptr/24 -all"}, SPFPermError, "", 0, "ptr"},
		{"ip4 out of range", []string{"v=spf1 ip4:300.1.1.1 -all"}, SPFPermError, "", 0, "bad ip4"},
		{"ip4 with leading zero", []string{"v=spf1 ip4:192.0.2.01 -all"}, SPFPermError, "", 0, "bad ip4"},
		{"ip4 cidr 33", []string{"v=spf1 ip4:192.0.2.0/33 -all"}, SPFPermError, "", 0, "out of range"},
		{"ip4 cidr with leading zero", []string{"v=spf1 ip4:192.0.2.0/024 -all"}, SPFPermError, "", 0, "bad cidr"},
		{"ip4 with ip6 address", []string{"v=spf1 ip4:2001:db8::1 -all"}, SPFPermError, "", 0, "not an ip4"},
		{"ip6 with ip4 address", []string{"v=spf1 ip6:192.0.2.1 -all"}, SPFPermError, "", 0, "not an ip6"},
		{"ip6 with zone", []string{"v=spf1 ip6:fe80::1%eth0 -all"}, SPFPermError, "", 0, "ip6"},
		{"ip6 cidr 129", []string{"v=spf1 ip6:2001:db8::/129 -all"}, SPFPermError, "", 0, "out of range"},
		{"ip4 without network", []string{"v=spf1 ip4 -all"}, SPFPermError, "", 0, "needs"},
		{"a cidr 33", []string{"v=spf1 a/33 -all"}, SPFPermError, "", 0, "out of range"},
		{"a bad dual cidr", []string{"v=spf1 a:example.com/24/64 -all"}, SPFPermError, "", 0, "out of range"},
		{"a empty cidr", []string{"v=spf1 mx/ -all"}, SPFPermError, "", 0, "junk"},
		{"duplicate redirect", []string{"v=spf1 redirect=a.example redirect=b.example"}, SPFPermError, "", 0, "redirect= more than once"},
		{"duplicate exp", []string{"v=spf1 exp=a.example EXP=b.example -all"}, SPFPermError, "", 0, "exp= more than once"},
		{"empty redirect", []string{"v=spf1 redirect="}, SPFPermError, "", 0, "empty domain-spec"},
		{"lone percent", []string{"v=spf1 include:50%.example.com -all"}, SPFPermError, "", 0, "bad macro"},
		{"unclosed macro", []string{"v=spf1 exists:%{d -all"}, SPFPermError, "", 0, "bad macro"},
		{"unknown macro letter", []string{"v=spf1 exists:%{z}.example.com -all"}, SPFPermError, "", 0, "unknown letter"},
		{"exp-only macro letter", []string{"v=spf1 exists:%{t}.example.com -all"}, SPFPermError, "", 0, "exp text"},
		{"zero digit transformer", []string{"v=spf1 exists:%{d0}.example.com -all"}, SPFPermError, "", 0, "zero digit"},
		{"bad delimiter", []string{"v=spf1 exists:%{d2r!}.example.com -all"}, SPFPermError, "", 0, "bad delimiter"},
		{"bad macro in unknown modifier", []string{"v=spf1 foo=%q -all"}, SPFPermError, "", 0, "bad macro"},
		{"non-ASCII term", []string{"v=spf1 include:exämple.com -all"}, SPFPermError, "", 0, "bad character"},
		{"eleven lookups", []string{"v=spf1 " + strings.Repeat("a ", 11) + "-all"}, SPFPermError, "", 11, "more than 10"},
		{"syntax error after all", []string{"v=spf1 -all foo"}, SPFPermError, "", 0, "unknown mechanism"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SPF(tt.records)
			if got.Posture != tt.want || got.Redirect != tt.redirect || got.Lookups != tt.lookups {
				t.Errorf("SPF(%q) = %v redirect %q lookups %d (err %v), want %v redirect %q lookups %d",
					tt.records, got.Posture, got.Redirect, got.Lookups, got.Err, tt.want, tt.redirect, tt.lookups)
			}
			switch {
			case tt.wantErr == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
}

func TestSPFPostureString(t *testing.T) {
	want := map[SPFPosture]string{
		SPFNone: "none", SPFStrict: "strict", SPFSoftfail: "softfail", SPFNeutral: "neutral",
		SPFPass: "pass", SPFRedirect: "redirect", SPFPermError: "permerror",
	}
	for p, s := range want {
		if p.String() != s {
			t.Errorf("%d.String() = %q, want %q", p, p.String(), s)
		}
	}
	if s := SPFPosture(99).String(); s != "SPFPosture(99)" {
		t.Errorf("out of range String() = %q", s)
	}
}

func TestParseSPFRecord(t *testing.T) {
	rec, err := ParseSPF("v=spf1 ~ip4:192.0.2.0/24 ?MX:Example.com/28//64 include:_spf.example.net -all redirect=x.example exp=e.%{d}")
	if err != nil {
		t.Fatal(err)
	}
	want := &SPFRecord{
		Mechanisms: []SPFMechanism{
			{Qualifier: '~', Name: "ip4", Prefix: netip.MustParsePrefix("192.0.2.0/24"), CIDR4: -1, CIDR6: -1},
			{Qualifier: '?', Name: "mx", Domain: "Example.com", CIDR4: 28, CIDR6: 64},
			{Qualifier: '+', Name: "include", Domain: "_spf.example.net", CIDR4: -1, CIDR6: -1},
			{Qualifier: '-', Name: "all", CIDR4: -1, CIDR6: -1},
		},
		Redirect:    "x.example",
		Explanation: "e.%{d}",
	}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("ParseSPF = %+v\nwant %+v", rec, want)
	}
	if got := rec.Includes(); !reflect.DeepEqual(got, []string{"_spf.example.net"}) {
		t.Errorf("Includes() = %q", got)
	}
	if s := rec.String(); s != "v=spf1 ~ip4:192.0.2.0/24 ?mx:Example.com/28//64 include:_spf.example.net -all redirect=x.example exp=e.%{d}" {
		t.Errorf("String() = %q", s)
	}
}

// mapLookup is a TXTLookup over a map; names listed in fail return an error.
func mapLookup(m map[string][]string, fail ...string) (TXTLookup, *[]string) {
	var asked []string
	return func(name string) ([]string, error) {
		asked = append(asked, name)
		for _, f := range fail {
			if f == name {
				return nil, errors.New("SERVFAIL")
			}
		}
		return m[name], nil
	}, &asked
}

func TestFollowSPF(t *testing.T) {
	chain := func(n int) map[string][]string {
		m := map[string][]string{}
		for i := range n {
			m[fmt.Sprintf("d%d.example", i)] = []string{fmt.Sprintf("v=spf1 include:d%d.example -all", i+1)}
		}
		m[fmt.Sprintf("d%d.example", n)] = []string{"v=spf1 -all"}
		return m
	}
	tests := []struct {
		name     string
		zone     map[string][]string
		fail     []string
		want     SPFPosture
		redirect string
		lookups  int
		wantErr  error  // errors.Is on Err
		lookErr  bool   // FollowSPF itself fails
		asked    string // comma-joined names looked up, when set
	}{
		{name: "no record", zone: map[string][]string{}, want: SPFNone},
		{name: "plain strict", zone: map[string][]string{"d0.example": {"v=spf1 mx -all"}}, want: SPFStrict, lookups: 1},
		{name: "include posture does not matter",
			zone: map[string][]string{
				"d0.example":     {"v=spf1 include:spf.mail.test -all"},
				"spf.mail.test":  {"v=spf1 ip4:192.0.2.0/24 ?all"},
				"unused.example": {"v=spf1 +all"},
			},
			want: SPFStrict, lookups: 1, asked: "d0.example,spf.mail.test"},
		{name: "redirect followed",
			zone: map[string][]string{
				"d0.example":      {"v=spf1 redirect=_spf.d0.example"},
				"_spf.d0.example": {"v=spf1 ip4:192.0.2.1 ~all"},
			},
			want: SPFSoftfail, lookups: 1},
		{name: "redirect chain with upper-case and trailing dot",
			zone: map[string][]string{
				"d0.example": {"v=spf1 redirect=A.example."},
				"a.example":  {"v=spf1 redirect=b.example"},
				"b.example":  {"v=spf1 mx"},
			},
			want: SPFNeutral, lookups: 3},
		{name: "redirect to a domain without SPF", zone: map[string][]string{"d0.example": {"v=spf1 redirect=none.example"}},
			want: SPFPermError, lookups: 1, wantErr: ErrSPFNoTarget},
		{name: "include of a domain without SPF", zone: map[string][]string{"d0.example": {"v=spf1 include:none.example -all"}},
			want: SPFPermError, lookups: 1, wantErr: ErrSPFNoTarget},
		{name: "include of an invalid name", zone: map[string][]string{"d0.example": {"v=spf1 include:a..example -all"}},
			want: SPFPermError, lookups: 1, wantErr: ErrSPFNoTarget, asked: "d0.example"},
		{name: "include of a broken record",
			zone: map[string][]string{"d0.example": {"v=spf1 include:bad.example -all"}, "bad.example": {"v=spf1 bogus"}},
			want: SPFPermError, lookups: 1},
		{name: "include of a domain with two records",
			zone: map[string][]string{"d0.example": {"v=spf1 include:two.example -all"}, "two.example": {"v=spf1 -all", "v=spf1 +all"}},
			want: SPFPermError, lookups: 1, wantErr: ErrMultipleRecords},
		{name: "ten includes deep is fine", zone: chain(10), want: SPFStrict, lookups: 10},
		{name: "eleven includes deep is too many", zone: chain(11), want: SPFPermError, lookups: 11, wantErr: ErrSPFTooManyLookups},
		{name: "redirect loop ends on the limit",
			zone: map[string][]string{"d0.example": {"v=spf1 redirect=b.example"}, "b.example": {"v=spf1 redirect=d0.example"}},
			want: SPFPermError, lookups: 11, wantErr: ErrSPFTooManyLookups},
		{name: "include loop ends on the limit",
			zone: map[string][]string{"d0.example": {"v=spf1 include:d0.example -all"}},
			want: SPFPermError, lookups: 11, wantErr: ErrSPFTooManyLookups},
		{name: "lookups add up across includes",
			zone: map[string][]string{
				"d0.example": {"v=spf1 mx a include:i1.example include:i2.example -all"},
				"i1.example": {"v=spf1 a mx ptr exists:%{i}.x.example ~all"},
				"i2.example": {"v=spf1 include:i3.example"},
				"i3.example": {"v=spf1 a mx"},
			},
			want: SPFPermError, lookups: 11, wantErr: ErrSPFTooManyLookups},
		{name: "include after all is never reached",
			zone: map[string][]string{"d0.example": {"v=spf1 -all include:none.example"}},
			want: SPFStrict, asked: "d0.example"},
		{name: "macro include is counted, not fetched",
			zone: map[string][]string{"d0.example": {"v=spf1 include:%{l}._spf.example.com -all"}},
			want: SPFStrict, lookups: 1, asked: "d0.example"},
		{name: "macro redirect cannot be followed",
			zone: map[string][]string{"d0.example": {"v=spf1 redirect=%{l}._spf.example.com"}},
			want: SPFRedirect, redirect: "%{l}._spf.example.com", lookups: 1},
		{name: "lookup failure at the top", zone: map[string][]string{}, fail: []string{"d0.example"}, lookErr: true},
		{name: "lookup failure in an include",
			zone: map[string][]string{"d0.example": {"v=spf1 include:i.example -all"}},
			fail: []string{"i.example"}, lookErr: true},
		{name: "lookup failure in a redirect",
			zone: map[string][]string{"d0.example": {"v=spf1 redirect=i.example"}},
			fail: []string{"i.example"}, lookErr: true},
		{name: "top record broken", zone: map[string][]string{"d0.example": {"v=spf1 -all -all include"}},
			want: SPFPermError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup, asked := mapLookup(tt.zone, tt.fail...)
			got, err := FollowSPF("D0.example.", lookup)
			if tt.lookErr {
				if err == nil {
					t.Fatalf("FollowSPF = %+v, want a lookup error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("FollowSPF error = %v", err)
			}
			if got.Posture != tt.want || got.Redirect != tt.redirect || got.Lookups != tt.lookups {
				t.Errorf("FollowSPF = %v redirect %q lookups %d (err %v), want %v redirect %q lookups %d",
					got.Posture, got.Redirect, got.Lookups, got.Err, tt.want, tt.redirect, tt.lookups)
			}
			if tt.wantErr != nil && !errors.Is(got.Err, tt.wantErr) {
				t.Errorf("Err = %v, want %v", got.Err, tt.wantErr)
			}
			if (got.Posture == SPFPermError || got.Posture == SPFRedirect) && got.Err == nil {
				t.Errorf("posture %v without a reason", got.Posture)
			}
			if tt.asked != "" && strings.Join(*asked, ",") != tt.asked {
				t.Errorf("looked up %q, want %q", *asked, tt.asked)
			}
		})
	}
}

func FuzzSPF(f *testing.F) {
	for _, s := range []string{
		"v=spf1 -all",
		"v=spf1 include:_spf.google.com ~all",
		"v=spf1 a mx ip4:192.0.2.0/24 ip6:2001:db8::/32 ?all",
		"v=spf1 a:example.com/24//64 mx:%{d}/28 ptr exists:%{ir}.%{l1r+-}._spf.%{d} redirect=x.example exp=e.%{d2}",
		"v=spf1 redirect=_spf.example.com",
		"V=SPF1 foo=bar -ALL",
		"v=spf1 include:%{z}",
		"v=spf1 ip6:::ffff:1.2.3.4/96",
		"v=spf10",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, txt string) {
		res := SPF([]string{txt})
		if res.Posture > SPFPermError {
			t.Fatalf("SPF(%q): posture %d out of range", txt, res.Posture)
		}
		if (res.Posture == SPFRedirect) != (res.Redirect != "") {
			t.Fatalf("SPF(%q): posture %v with redirect %q", txt, res.Posture, res.Redirect)
		}
		if (res.Posture == SPFPermError) != (res.Err != nil) {
			t.Fatalf("SPF(%q): posture %v with err %v", txt, res.Posture, res.Err)
		}
		if (res.Posture == SPFNone) != !IsSPFRecord(txt) {
			t.Fatalf("SPF(%q): posture %v but IsSPFRecord = %v", txt, res.Posture, IsSPFRecord(txt))
		}
		rec, err := ParseSPF(txt)
		if err != nil {
			if res.Record != nil {
				t.Fatalf("SPF(%q) kept a record that ParseSPF rejects: %v", txt, err)
			}
			return
		}
		if rec.Lookups() > len(rec.Mechanisms)+1 {
			t.Fatalf("ParseSPF(%q): %d lookups for %d mechanisms", txt, rec.Lookups(), len(rec.Mechanisms))
		}
		// The canonical form parses back to the same record.
		again, err := ParseSPF(rec.String())
		if err != nil || !reflect.DeepEqual(again, rec) {
			t.Fatalf("round trip of %q via %q: %+v, %v", txt, rec.String(), again, err)
		}
	})
}

// FuzzFollowSPF walks a small zone whose records the fuzzer writes: it must
// end, stay within the lookup budget and never panic.
func FuzzFollowSPF(f *testing.F) {
	f.Add("v=spf1 include:b.example -all", "v=spf1 redirect=a.example")
	f.Add("v=spf1 redirect=b.example", "v=spf1 include:a.example include:b.example")
	f.Add("v=spf1 mx redirect=%{d}.b.example", "v=spf1 ~all")
	f.Fuzz(func(t *testing.T, a, b string) {
		lookup, asked := mapLookup(map[string][]string{"a.example": {a}, "b.example": {b}})
		res, err := FollowSPF("a.example", lookup)
		if err != nil {
			t.Fatalf("FollowSPF: %v", err)
		}
		if len(*asked) > SPFLookupLimit+2 {
			t.Fatalf("FollowSPF made %d lookups", len(*asked))
		}
		if res.Lookups > SPFLookupLimit+1 || res.Posture > SPFPermError {
			t.Fatalf("FollowSPF = %+v", res)
		}
		if res.Posture == SPFPermError && res.Err == nil {
			t.Fatalf("permerror without a reason")
		}
	})
}

const benchSPF = "v=spf1 ip4:192.0.2.0/24 ip4:198.51.100.0/24 ip6:2001:db8::/32 a mx:mail.example.com/28 " +
	"include:_spf.google.com include:spf.protection.outlook.com include:servers.mcsv.net " +
	"exists:%{i}._spf.example.com ~all"

func BenchmarkParseSPF(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSPF(benchSPF); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSPF(b *testing.B) {
	records := []string{"google-site-verification=abcdefghijklmnopqrstuvwxyz", benchSPF, "MS=ms12345678"}
	b.ReportAllocs()
	for b.Loop() {
		if res := SPF(records); res.Posture != SPFSoftfail {
			b.Fatal(res.Posture)
		}
	}
}
