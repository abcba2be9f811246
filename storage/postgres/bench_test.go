package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
)

// The read every fresh validation of a valid or risky address makes in a
// fleet since outcomes are learned from (server/outcomes, Learned): one
// query for the account's latest evidence about the address, here in an
// account with no outcomes, the common case. A round trip to a
// PostgreSQL on loopback; the CPU it costs both sides is the figure to
// set against verifyd's CPU per fresh probe. Skipped without PostgreSQL,
// as the tests.
func BenchmarkAddressEvidence(b *testing.B) {
	srv := pgtest.Start(b)
	pool := newPool(b, srv, "bench_evidence")
	if _, err := Migrate(context.Background(), pool); err != nil {
		b.Fatal(err)
	}
	db, err := Open(context.Background(), srv.DSN("bench_evidence"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	a, err := db.CreateAccount(b.Context(), "bench", storage.PlanEnterprise)
	if err != nil {
		b.Fatal(err)
	}
	var i int
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := db.AddressEvidence(b.Context(), a.ID, fmt.Sprintf("user%d@example.com", i)); err != nil || ok {
			b.Fatalf("evidence %v, %v", ok, err)
		}
		i++
	}
}
