package authsig

import (
	"errors"
	"strings"
	"testing"
)

func TestMTASTS(t *testing.T) {
	tests := []struct {
		name    string
		records []string
		enabled bool
		id      string
		wantErr string // substring of Err; "" means Err == nil
	}{
		{"no records", nil, false, "", ""},
		{"other TXT only", []string{"v=spf1 -all"}, false, "", ""},
		{"minimal", []string{"v=STSv1; id=20160831085700Z"}, true, "20160831085700Z", ""},
		{"trailing semicolon", []string{"v=STSv1; id=20190429T010101;"}, true, "20190429T010101", ""},
		{"no space, tabs around ;", []string{"v=STSv1;id=abc\t;\text=1"}, true, "abc", ""},
		{"id of 32", []string{"v=STSv1; id=" + strings.Repeat("a", 32)}, true, strings.Repeat("a", 32), ""},
		{"extension field", []string{"v=STSv1; id=1; foo_bar-1.x=value"}, true, "1", ""},
		{"among other TXT", []string{"hello", "v=STSv1; id=1"}, true, "1", ""},

		{"v=STSv10", []string{"v=STSv10; id=1"}, false, "", ""},
		{"lower-case version value", []string{"v=stsv1; id=1"}, false, "", ""},
		{"upper-case version tag", []string{"V=STSv1; id=1"}, false, "", ""},
		{"leading space", []string{" v=STSv1; id=1"}, false, "", ""},
		{"two records", []string{"v=STSv1; id=1", "v=STSv1; id=2"}, false, "", "more than one record"},
		{"no id", []string{"v=STSv1;"}, false, "", "no id="},
		{"version only", []string{"v=STSv1"}, false, "", "no id="},
		{"empty id", []string{"v=STSv1; id="}, false, "", "id is not"},
		{"id of 33", []string{"v=STSv1; id=" + strings.Repeat("a", 33)}, false, "", "id is not"},
		{"id with punctuation", []string{"v=STSv1; id=2016-08-31"}, false, "", "id is not"},
		{"upper-case id tag", []string{"v=STSv1; ID=1"}, false, "", "no id="},
		{"duplicate id", []string{"v=STSv1; id=1; id=2"}, false, "", "duplicate"},
		{"space around =", []string{"v=STSv1; id = 1"}, false, "", "whitespace around"},
		{"space around version =", []string{"v = STSv1; id=1"}, false, "", "whitespace around"},
		{"extension with =", []string{"v=STSv1; id=1; x=a=b"}, false, "", "bad extension value"},
		{"empty extension", []string{"v=STSv1; id=1; x="}, false, "", "bad extension value"},
		{"garbage field", []string{"v=STSv1; id=1; junk"}, false, "", "without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MTASTS(tt.records)
			if got.Enabled != tt.enabled || got.ID != tt.id {
				t.Errorf("MTASTS(%q) = %v id %q (err %v), want %v id %q", tt.records, got.Enabled, got.ID, got.Err, tt.enabled, tt.id)
			}
			switch {
			case tt.wantErr == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
	if res := MTASTS([]string{"v=STSv1; id=1", "v=STSv1; id=1"}); !errors.Is(res.Err, ErrMultipleRecords) {
		t.Errorf("two records: Err = %v", res.Err)
	}
}

func FuzzMTASTS(f *testing.F) {
	f.Add("v=STSv1; id=20160831085700Z;")
	f.Add("v=STSv1;id=a;ext=1")
	f.Add("v=STSv1; id=1; id=2")
	f.Fuzz(func(t *testing.T, txt string) {
		res := MTASTS([]string{txt})
		if res.Enabled != (res.ID != "") || (res.Enabled && res.Err != nil) {
			t.Fatalf("MTASTS(%q) = %+v", txt, res)
		}
		if res.Enabled && (len(res.ID) > 32 || !isAlnumString(res.ID) || !IsMTASTSRecord(txt)) {
			t.Fatalf("MTASTS(%q) accepted id %q", txt, res.ID)
		}
	})
}
