package authsig

import (
	"errors"
	"strings"
	"testing"
)

func TestTrust(t *testing.T) {
	keys := TrustKeys{"acme-2025.1": 5, "low_key": 2, "zero": 0}
	tests := []struct {
		name      string
		records   []string
		keys      TrustKeys
		certified bool
		level     int
		keyID     string
		wantErr   string // substring of Err; "" means Err == nil
	}{
		{"no records", nil, keys, false, 0, "", ""},
		{"other TXT only", []string{"v=spf1 -all", "hello"}, keys, false, 0, "", ""},
		{"certified", []string{"v=SVC1; k=acme-2025.1; l=4"}, keys, true, 4, "acme-2025.1", ""},
		{"either order, trailing ;", []string{"v=SVC1;l=5;k=acme-2025.1;"}, keys, true, 5, "acme-2025.1", ""},
		{"spaces around ;", []string{"v=SVC1 ; k=acme-2025.1 ;\tl=3"}, keys, true, 3, "acme-2025.1", ""},
		{"level capped at the grant", []string{"v=SVC1; k=low_key; l=5"}, keys, true, 2, "low_key", ""},
		{"among other TXT", []string{"hello", "v=SVC1; k=low_key; l=1"}, keys, true, 1, "low_key", ""},

		{"unknown key", []string{"v=SVC1; k=someone; l=5"}, keys, false, 0, "", "not issued"},
		{"key id is case-sensitive", []string{"v=SVC1; k=ACME-2025.1; l=5"}, keys, false, 0, "", "not issued"},
		{"key granted level 0", []string{"v=SVC1; k=zero; l=1"}, keys, false, 0, "", "not issued"},
		{"no programme configured", []string{"v=SVC1; k=acme-2025.1; l=4"}, nil, false, 0, "", "not issued"},
		{"two records", []string{"v=SVC1; k=acme-2025.1; l=4", "v=SVC1; k=low_key; l=1"}, keys, false, 0, "", "more than one record"},
		{"level 0", []string{"v=SVC1; k=acme-2025.1; l=0"}, keys, false, 0, "", "level is not"},
		{"level 6", []string{"v=SVC1; k=acme-2025.1; l=6"}, keys, false, 0, "", "level is not"},
		{"level 05", []string{"v=SVC1; k=acme-2025.1; l=05"}, keys, false, 0, "", "level is not"},
		{"level +3", []string{"v=SVC1; k=acme-2025.1; l=+3"}, keys, false, 0, "", "level is not"},
		{"no level", []string{"v=SVC1; k=acme-2025.1"}, keys, false, 0, "", "want exactly"},
		{"no key", []string{"v=SVC1; l=3"}, keys, false, 0, "", "want exactly"},
		{"empty key", []string{"v=SVC1; k=; l=3"}, keys, false, 0, "", "key id is not"},
		{"key of 65", []string{"v=SVC1; k=" + strings.Repeat("k", 65) + "; l=3"}, keys, false, 0, "", "key id is not"},
		{"key with slash", []string{"v=SVC1; k=a/b; l=3"}, keys, false, 0, "", "key id is not"},
		{"extra tag", []string{"v=SVC1; k=acme-2025.1; l=3; x=1"}, keys, false, 0, "", "want exactly"},
		{"duplicate tag", []string{"v=SVC1; k=acme-2025.1; k=low_key"}, keys, false, 0, "", "duplicate"},
		{"space around =", []string{"v=SVC1; k = acme-2025.1; l=3"}, keys, false, 0, "", "whitespace around"},
		{"upper-case tag", []string{"v=SVC1; K=acme-2025.1; l=3"}, keys, false, 0, "", "unknown tag"},
		{"v=SVC10", []string{"v=SVC10; k=acme-2025.1; l=3"}, keys, false, 0, "", ""},
		{"lower-case version", []string{"v=svc1; k=acme-2025.1; l=3"}, keys, false, 0, "", ""},
		{"leading space", []string{" v=SVC1; k=acme-2025.1; l=3"}, keys, false, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Trust(tt.records, tt.keys)
			if got.Certified != tt.certified || got.Level != tt.level || got.KeyID != tt.keyID {
				t.Errorf("Trust(%q) = %+v, want certified %v level %d key %q", tt.records, got, tt.certified, tt.level, tt.keyID)
			}
			switch {
			case tt.wantErr == "" && got.Err != nil:
				t.Errorf("Err = %v, want nil", got.Err)
			case tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)):
				t.Errorf("Err = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
	if res := Trust([]string{"v=SVC1; k=x; l=1"}, keys); !errors.Is(res.Err, ErrTrustUnknownKey) || res.Claim == nil {
		t.Errorf("unknown key: %+v", res)
	}
}

func FuzzTrust(f *testing.F) {
	f.Add("v=SVC1; k=acme-2025.1; l=4")
	f.Add("v=SVC1;l=5;k=a;")
	f.Fuzz(func(t *testing.T, txt string) {
		res := Trust([]string{txt}, TrustKeys{"a": 3, "acme-2025.1": 5})
		if res.Certified != (res.Level > 0) || res.Certified != (res.KeyID != "") {
			t.Fatalf("Trust(%q) = %+v", txt, res)
		}
		if res.Level < 0 || res.Level > TrustMaxLevel || (res.KeyID == "a" && res.Level > 3) {
			t.Fatalf("Trust(%q): level %d", txt, res.Level)
		}
		if res.Certified && (res.Err != nil || res.Claim == nil || res.Claim.KeyID != res.KeyID) {
			t.Fatalf("Trust(%q) = %+v", txt, res)
		}
	})
}
