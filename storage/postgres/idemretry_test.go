package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/faultproxy"
	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
)

// TestBeginIdemAfterLinkReset: a link reset breaks the connections the
// pool holds; the next BeginIdem's first write fails before anything
// reaches the server, and it is tried again on another connection
// instead of failing (the request then went on without its key: a key
// answered already was answered 500 instead of replayed).
func TestBeginIdemAfterLinkReset(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	if _, err := Migrate(ctx, newPool(t, srv, "fleet")); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	dsn := strings.Replace(srv.DSN("fleet"), srv.Addr(), proxy.Addr(), 1)
	db, err := Open(ctx, dsn, Options{Box: "a", Lease: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	acct, err := db.CreateAccount(ctx, "reset", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(i int) storage.IdemRef {
		return storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: fmt.Sprintf("key-%08d", i)}
	}
	// Fill the pool: several connections, idle now.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := db.BeginIdem(ctx, ref(i), []byte("h")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for round := range 3 {
		cut := proxy.Reset()
		before := idemRetries.Get()
		out, _, err := db.BeginIdem(ctx, ref(100+round), []byte("h"))
		if err != nil {
			t.Fatalf("round %d: BeginIdem after a reset that cut %d connections: %v (tried again %d times)", round, cut, err, idemRetries.Get()-before)
		}
		if out != storage.IdemNew {
			t.Fatalf("round %d: %v, want a new record", round, out)
		}
		t.Logf("round %d: %d connections cut, BeginIdem tried again %d times", round, cut, idemRetries.Get()-before)
	}
}
