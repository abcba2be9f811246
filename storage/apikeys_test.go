package storage

import (
	"strings"
	"testing"
)

func FuzzParseKey(f *testing.F) {
	f.Add("svc_live_abcdefghijkl_" + strings.Repeat("A", 43))
	f.Add("svc_live__")
	f.Fuzz(func(t *testing.T, s string) {
		prefix, secret, ok := ParseKey(s)
		if !ok {
			return
		}
		if s != keyLead+prefix+"_"+secret || len(prefix) != KeyPrefixLen || strings.Contains(prefix, "_") || strings.Contains(secret, "_") {
			t.Fatalf("ParseKey(%q) = %q, %q", s, prefix, secret)
		}
	})
}
