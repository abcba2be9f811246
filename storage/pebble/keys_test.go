package pebble

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/storage"
)

// No record prefix is a prefix of another: a scan sees one record type.
func TestPrefixesDisjoint(t *testing.T) {
	ps := []string{prefixAccount, prefixAccountJob, prefixAPIKey, prefixLedger, prefixHold, prefixResult,
		prefixHistory, prefixIdem, prefixIdemExpiry, prefixCache, prefixJob, prefixJobActive, prefixJobAddr,
		prefixJobResult, prefixOutbox, prefixDeadLetter, prefixHookLast, prefixMeta, prefixUser, prefixUserEmail,
		prefixSession, prefixInvite, prefixVerdict, prefixOutcome, prefixOutcomeID, prefixOutcomeAdr, prefixOutcomeSet, prefixFact}
	for i, a := range ps {
		if !strings.HasSuffix(a, "/") {
			t.Errorf("prefix %q does not end in /", a)
		}
		for j, b := range ps {
			if i != j && strings.HasPrefix(b, a) {
				t.Errorf("prefix %q is a prefix of %q", a, b)
			}
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte("ab"), []byte("ac")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("\xff\xff"), nil},
	} {
		if got := prefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Key order is the wanted order: ledger and job indexes ascending,
// history positions descending, outbox by due time.
func TestKeyOrder(t *testing.T) {
	sorted := func(keys ...[]byte) bool {
		return sort.SliceIsSorted(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	}
	if !sorted(ledgerKey("a", 1), ledgerKey("a", 2), ledgerKey("a", 256), ledgerKey("a", 1<<40)) {
		t.Error("ledger keys out of order")
	}
	if !sorted(jobAddrKey("j", 0), jobAddrKey("j", 1), jobAddrKey("j", 255), jobAddrKey("j", 99_999)) {
		t.Error("jobaddr keys out of order")
	}
	if !sorted(histKey("a", 's', 3_000_000), histKey("a", 's', 2_000_001), histKey("a", 's', 2_000_000), histKey("a", 's', 0)) {
		t.Error("history keys are not newest first")
	}
	if !sorted(outboxKey(5, "z"), outboxKey(6, "a"), outboxKey(1000, "a")) {
		t.Error("outbox keys out of order")
	}
	// One account's keys never interleave with another's whose id
	// extends it.
	if bytes.HasPrefix(ledgerKey("acct_10", 1), ledgerPrefix("acct_1")) {
		t.Error("ledger prefix of acct_1 covers acct_10")
	}
	if got := histPos(histKey("a", 'b', 123_000_042)); got != 123_000_042 {
		t.Errorf("histPos = %d", got)
	}
	acct, seq, ok := parseHoldKey(holdKey("acct_x", 77))
	if !ok || acct != "acct_x" || seq != 77 {
		t.Errorf("parseHoldKey = %q %d %v", acct, seq, ok)
	}
}

func TestIdemKeyDistinct(t *testing.T) {
	// Without the separator, ("ab", "c") and ("a", "bc") would collide.
	if bytes.Equal(idemKey("a", "ab", "c"), idemKey("a", "a", "bc")) {
		t.Error("idem keys collide")
	}
	if bytes.Equal(idemKey("a", "validate", "k"), idemKey("b", "validate", "k")) {
		t.Error("idem keys of two accounts collide")
	}
}

// The value decoders never panic and never return values sharing the
// input buffer, whatever the bytes.
func FuzzDecode(f *testing.F) {
	r := storage.Result{ID: "x", Account: "a", Email: "e@x", Status: "valid", Kind: storage.KindSingle, Receipt: []byte("{}")}
	f.Add(encodeResult(&r, 5))
	f.Add(encodeResultPointer("job", 3))
	f.Add(encodeRow(&r))
	f.Add(encodeEntry(storage.Entry{Kind: storage.EntryCharge, Ref: "r"}))
	f.Add(encodeIdem(&storage.IdemRecord{IdemRef: storage.IdemRef{Endpoint: "e", Key: "k"}, Response: storage.IdemResponse{Header: []storage.HeaderField{{Name: "a", Value: "b"}}}}))
	f.Add(encodeCacheEntry("id", 7))
	f.Add(encodeHold(storage.Hold{N: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeResult(b)
		decodeRow(storage.KindSingle, 0, b)
		decodeEntry("a", 1, b)
		decodeIdem("a", b)
		decodeCacheEntry(b)
		decodeHold("a", 1, b)
	})
}
