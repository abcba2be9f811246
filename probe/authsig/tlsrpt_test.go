package authsig

import (
	"reflect"
	"strings"
	"testing"
)

func TestTLSRPT(t *testing.T) {
	tests := []struct {
		name    string
		records []string
		enabled bool
		rua     []string
		wantErr string // substring of Err; "" means Err == nil
	}{
		{"no records", nil, false, nil, ""},
		{"mailto", []string{"v=TLSRPTv1; rua=mailto:tlsrpt@example.com"}, true, []string{"mailto:tlsrpt@example.com"}, ""},
		{"https", []string{"v=TLSRPTv1;rua=https://reporting.example.com/v1/tlsrpt"}, true, []string{"https://reporting.example.com/v1/tlsrpt"}, ""},
		{"both, spaces around comma", []string{"v=TLSRPTv1; rua=mailto:a@example.com , https://r.example.com/x;"}, true,
			[]string{"mailto:a@example.com", "https://r.example.com/x"}, ""},
		{"upper-case schemes", []string{"v=TLSRPTv1; rua=MAILTO:a@example.com,HTTPS://r.example.com/"}, true,
			[]string{"MAILTO:a@example.com", "HTTPS://r.example.com/"}, ""},
		{"unknown scheme ignored", []string{"v=TLSRPTv1; rua=ftp://x.example.com/,mailto:a@example.com"}, true, []string{"mailto:a@example.com"}, ""},
		{"extension", []string{"v=TLSRPTv1; rua=mailto:a@example.com; ext.1=x"}, true, []string{"mailto:a@example.com"}, ""},

		{"v=TLSRPTv10", []string{"v=TLSRPTv10; rua=mailto:a@example.com"}, false, nil, ""},
		{"lower-case version value", []string{"v=tlsrptv1; rua=mailto:a@example.com"}, false, nil, ""},
		{"two records", []string{"v=TLSRPTv1; rua=mailto:a@example.com", "v=TLSRPTv1; rua=mailto:b@example.com"}, false, nil, "more than one record"},
		{"no rua", []string{"v=TLSRPTv1;"}, false, nil, "no rua="},
		{"upper-case rua", []string{"v=TLSRPTv1; RUA=mailto:a@example.com"}, false, nil, "no rua="},
		{"duplicate rua", []string{"v=TLSRPTv1; rua=mailto:a@example.com; rua=mailto:b@example.com"}, false, nil, "duplicate"},
		{"empty rua", []string{"v=TLSRPTv1; rua="}, false, nil, "bad URI"},
		{"relative URI", []string{"v=TLSRPTv1; rua=tlsrpt@example.com"}, false, nil, "bad URI"},
		{"unencoded !", []string{"v=TLSRPTv1; rua=mailto:a@example.com!10m"}, false, nil, "bad URI"},
		{"only unusable URIs", []string{"v=TLSRPTv1; rua=ftp://x.example.com/,mailto:nobody"}, false, nil, "no usable"},
		{"https to an IP", []string{"v=TLSRPTv1; rua=https://192.0.2.1/r"}, false, nil, "no usable"},
		{"space around =", []string{"v=TLSRPTv1; rua = mailto:a@example.com"}, false, nil, "whitespace around"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TLSRPT(tt.records)
			if got.Enabled != tt.enabled || !reflect.DeepEqual(got.RUA, tt.rua) {
				t.Errorf("TLSRPT(%q) = %v %q (err %v), want %v %q", tt.records, got.Enabled, got.RUA, got.Err, tt.enabled, tt.rua)
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

func FuzzTLSRPT(f *testing.F) {
	f.Add("v=TLSRPTv1; rua=mailto:tlsrpt@example.com")
	f.Add("v=TLSRPTv1;rua=https://r.example.com/x,mailto:a@b.example;x=1;")
	f.Fuzz(func(t *testing.T, txt string) {
		res := TLSRPT([]string{txt})
		if res.Enabled != (len(res.RUA) > 0) || (res.Enabled && res.Err != nil) {
			t.Fatalf("TLSRPT(%q) = %+v", txt, res)
		}
		for _, u := range res.RUA {
			// Schemes are case-insensitive (RFC 3986 §3.1).
			scheme, _, _ := strings.Cut(strings.ToLower(u), ":")
			if scheme != "mailto" && scheme != "https" {
				t.Fatalf("TLSRPT(%q) kept %q", txt, u)
			}
		}
	})
}
