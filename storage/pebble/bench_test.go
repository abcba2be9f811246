package pebble

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// benchDB opens a database on the real clock.
func benchDB(b *testing.B) *DB {
	b.Helper()
	db, err := Open(b.TempDir(), Options{Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func benchAccounts(b *testing.B, db *DB, n int, credits int64) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		a, err := db.CreateAccount(b.Context(), "bench", storage.PlanEnterprise)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = a.ID
		if credits == 0 {
			continue
		}
		if _, err := db.AddCredits(b.Context(), a.ID, credits, ""); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// The hot path of one validation: hold a credit (a synced batch), then
// charge it with the result, its history row and its cache entry (another
// synced batch), from many goroutines at once as the HTTP server does.
// validations/s is the figure to read.
func BenchmarkValidation(b *testing.B) {
	receipt := make([]byte, 900) // a signed receipt is about this big
	for _, bc := range []struct {
		name     string
		accounts int
		idem     bool
	}{
		{"one-account", 1, false},
		{"64-accounts", 64, false},
		{"one-account-idempotency-key", 1, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			db := benchDB(b)
			accts := benchAccounts(b, db, bc.accounts, 1<<40)
			var next atomic.Int64
			b.SetParallelism(16) // 32 goroutines on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					acct := accts[int(i)%len(accts)]
					var ref *storage.IdemRef
					if bc.idem {
						ref = &storage.IdemRef{Account: acct, Endpoint: "validate", Key: fmt.Sprint("key-", i)}
						if _, _, err := db.BeginIdem(b.Context(), *ref, []byte("hash")); err != nil {
							b.Fatal(err)
						}
					}
					h, err := db.Hold(b.Context(), acct, 1, "")
					if err != nil {
						b.Fatal(err)
					}
					req := storage.ChargeRequest{Result: storage.Result{
						Email: fmt.Sprintf("user%d@example.com", i), Status: "valid", Score: 97, LatencyMs: 120,
					}}
					if bc.idem {
						req.Idem = ref
						req.Seal = func(storage.Result, int64) (storage.Sealed, error) {
							return storage.Sealed{Receipt: receipt, Response: storage.IdemResponse{Status: 200, Body: receipt}}, nil
						}
					} else {
						req.Result.Receipt = receipt
					}
					if _, err := db.Charge(b.Context(), h, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "validations/s")
		})
	}
}

// CreateJob of the largest batch: 100,000 addresses and the reservation in
// one synced batch.
func BenchmarkCreateJob100k(b *testing.B) {
	db := benchDB(b)
	acct := benchAccounts(b, db, 1, 1<<40)[0]
	addrs := addresses(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := db.CreateJob(b.Context(), storage.JobSpec{Account: acct, Addresses: addrs}); err != nil {
			b.Fatal(err)
		}
	}
}

// Results of a running job, 100 per synced batch.
func BenchmarkPutJobResults100(b *testing.B) {
	db := benchDB(b)
	acct := benchAccounts(b, db, 1, 1<<40)[0]
	receipt := make([]byte, 900)
	var j storage.Job
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if next == 0 {
			b.StopTimer()
			var err error
			if j, err = db.CreateJob(b.Context(), storage.JobSpec{Account: acct, Addresses: addresses(100_000)}); err == nil {
				_, err = db.StartJob(b.Context(), j.ID)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		rs := make([]storage.JobResult, 100)
		for k := range rs {
			rs[k] = storage.JobResult{Index: next + k, Result: storage.Result{Email: fmt.Sprintf("user%d@example.com", next+k), Status: "valid", Receipt: receipt}}
		}
		if _, err := db.PutJobResults(b.Context(), j.ID, rs); err != nil {
			b.Fatal(err)
		}
		next = (next + 100) % 100_000
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "results/s")
}

// A page of 50 history rows of an account with 20,000 (two kinds), the
// first page and one deep in.
func BenchmarkListHistory50(b *testing.B) {
	db := benchDB(b)
	acct := benchAccounts(b, db, 1, 1<<40)[0]
	addrs := addresses(10_000)
	j, err := db.CreateJob(b.Context(), storage.JobSpec{Account: acct, Addresses: addrs})
	if err == nil {
		_, err = db.StartJob(b.Context(), j.ID)
	}
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(addrs); i += 500 {
		var rs []storage.JobResult
		for k := i; k < i+500; k++ {
			rs = append(rs, storage.JobResult{Index: k, Result: storage.Result{Email: addrs[k], Status: "valid", Receipt: make([]byte, 900)}})
		}
		if _, err := db.PutJobResults(b.Context(), j.ID, rs); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10_000 {
		h, err := db.Hold(b.Context(), acct, 1, "")
		if err == nil {
			_, err = db.Charge(b.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: addrs[i], Status: "valid", Receipt: make([]byte, 900)}})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	mid, err := db.ListHistory(b.Context(), acct, storage.HistoryAll, "", 10_000)
	if err != nil || mid.NextCursor == "" {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, kind, cursor string }{
		{"first-page-all", storage.HistoryAll, ""},
		{"deep-page-all", storage.HistoryAll, mid.NextCursor},
		{"deep-page-batch", storage.HistoryBatch, mid.NextCursor},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := db.ListHistory(b.Context(), acct, bc.kind, bc.cursor, 50)
				if err != nil || len(p.Rows) != 50 {
					b.Fatal(len(p.Rows), err)
				}
			}
		})
	}
}

// Authentication of a request: parse, look up, hash, compare.
func BenchmarkVerifyKey(b *testing.B) {
	db := benchDB(b)
	acct := benchAccounts(b, db, 1, 0)[0]
	key, _, err := db.MintKey(b.Context(), acct, []string{storage.ScopeValidateRead, storage.ScopeValidateWrite}, "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.VerifyKey(b.Context(), key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The cache lookup of a validation with cache: true.
func BenchmarkLookupCache(b *testing.B) {
	db := benchDB(b)
	acct := benchAccounts(b, db, 1, 1<<40)[0]
	for i := range 1000 {
		h, _ := db.Hold(b.Context(), acct, 1, "")
		if _, err := db.Charge(b.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: fmt.Sprintf("u%d@example.com", i), Status: "valid", Receipt: make([]byte, 900)}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok, err := db.LookupCache(b.Context(), acct, fmt.Sprintf("u%d@example.com", i%1000), time.Hour); err != nil || !ok {
			b.Fatal(ok, err)
		}
		i++
	}
}

// The read every fresh validation of a valid or risky address makes since
// outcomes are learned from (server/outcomes, Learned): the account's
// latest evidence about the address, in an account with no outcomes (a
// miss, the common case) and in one with 10,000 stored (a hit). Set
// against verifyd's CPU per fresh probe (bench/RESULTS.md), it is what the
// learning costs the hot path.
func BenchmarkAddressEvidence(b *testing.B) {
	for _, bc := range []struct {
		name     string
		outcomes int
	}{{"no-outcomes", 0}, {"10k-outcomes-hit", 10_000}} {
		b.Run(bc.name, func(b *testing.B) {
			db := benchDB(b)
			acct := benchAccounts(b, db, 1, 0)[0]
			now := time.Now()
			var outs []storage.Outcome
			for i := range bc.outcomes {
				outs = append(outs, storage.Outcome{EventID: fmt.Sprint("e", i), Email: fmt.Sprintf("user%d@example.com", i),
					Event: storage.OutcomeHardBounce, At: now, Source: "api", SMTPCode: 550, Enhanced: "5.1.1"})
				if len(outs) == 1000 {
					if _, err := db.PutOutcomes(b.Context(), acct, outs); err != nil {
						b.Fatal(err)
					}
					outs = outs[:0]
				}
			}
			n := max(bc.outcomes, 1)
			var i int
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, ok, err := db.AddressEvidence(b.Context(), acct, fmt.Sprintf("user%d@example.com", i%n))
				if err != nil || ok != (bc.outcomes > 0) {
					b.Fatalf("evidence %v, %v", ok, err)
				}
				i++
			}
		})
	}
}
