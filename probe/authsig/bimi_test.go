package authsig

import (
	"strings"
	"testing"
)

func TestBIMI(t *testing.T) {
	const logo, vmc = "https://brand.example.com/logo.svg", "https://brand.example.com/vmc.pem"
	tests := []struct {
		name                   string
		records                []string
		enabled, vmcOK, declin bool
		wantErr                string // substring of Err; "" means Err == nil
	}{
		{"no records", nil, false, false, false, ""},
		{"logo only", []string{"v=BIMI1; l=" + logo}, true, false, false, ""},
		{"logo and vmc", []string{"v=BIMI1; l=" + logo + "; a=" + vmc + ";"}, true, true, false, ""},
		{"logo, empty a", []string{"v=BIMI1; l=" + logo + "; a=;"}, true, false, false, ""},
		{"evidence only: logo comes from the VMC", []string{"v=BIMI1; l=; a=" + vmc}, true, true, false, ""},
		{"declination", []string{"v=BIMI1; l=; a=;"}, false, false, true, ""},
		{"declination without a", []string{"v=BIMI1; l="}, false, false, true, ""},
		{"whitespace around =", []string{"v = BIMI1 ; l = " + logo}, true, false, false, ""},
		{"unknown tags ignored", []string{"v=BIMI1; l=" + logo + "; avp=brand; lps=true"}, true, false, false, ""},
		{"upper-case scheme", []string{"v=BIMI1; l=HTTPS://brand.example.com/logo.svg"}, true, false, false, ""},

		{"v=BIMI10", []string{"v=BIMI10; l=" + logo}, false, false, false, ""},
		{"lower-case version value", []string{"v=bimi1; l=" + logo}, false, false, false, ""},
		{"two records", []string{"v=BIMI1; l=" + logo, "v=BIMI1; l=; a=;"}, false, false, false, "more than one record"},
		{"no l", []string{"v=BIMI1; a=" + vmc}, false, false, false, "no l="},
		{"upper-case L", []string{"v=BIMI1; L=" + logo}, false, false, false, "no l="},
		{"http logo", []string{"v=BIMI1; l=http://brand.example.com/logo.svg"}, false, false, false, "not a single https"},
		{"logo list", []string{"v=BIMI1; l=" + logo + "," + logo}, false, false, false, "not a single https"},
		{"logo on an IP", []string{"v=BIMI1; l=https://192.0.2.1/logo.svg"}, false, false, false, "not a single https"},
		{"relative logo", []string{"v=BIMI1; l=/logo.svg"}, false, false, false, "not a single https"},
		{"http vmc", []string{"v=BIMI1; l=" + logo + "; a=http://brand.example.com/vmc.pem"}, false, false, false, "not a single https"},
		{"duplicate l", []string{"v=BIMI1; l=" + logo + "; l="}, false, false, false, "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BIMI(tt.records)
			if got.Enabled != tt.enabled || got.VMC != tt.vmcOK || got.Declined != tt.declin {
				t.Errorf("BIMI(%q) = %+v, want enabled %v vmc %v declined %v", tt.records, got, tt.enabled, tt.vmcOK, tt.declin)
			}
			switch {
			case tt.wantErr == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
	if got := BIMIName("default", "Example.com"); got != "default._bimi.example.com" {
		t.Errorf("BIMIName = %q", got)
	}
}

func FuzzBIMI(f *testing.F) {
	f.Add("v=BIMI1; l=https://brand.example.com/logo.svg; a=https://brand.example.com/vmc.pem;")
	f.Add("v=BIMI1; l=; a=;")
	f.Fuzz(func(t *testing.T, txt string) {
		res := BIMI([]string{txt})
		if res.VMC && !res.Enabled {
			t.Fatalf("BIMI(%q): vmc without bimi", txt)
		}
		if res.Enabled && (res.Declined || res.Err != nil || (res.Location == "" && res.Evidence == "")) {
			t.Fatalf("BIMI(%q) = %+v", txt, res)
		}
		if res.VMC != (res.Evidence != "") {
			t.Fatalf("BIMI(%q): vmc %v with evidence %q", txt, res.VMC, res.Evidence)
		}
	})
}
