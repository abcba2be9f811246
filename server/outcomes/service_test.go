package outcomes

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// readCounter is a real store that counts its AddressEvidence reads.
type readCounter struct {
	*pebble.DB
	reads atomic.Int64
}

func (c *readCounter) AddressEvidence(ctx context.Context, account, email string) (storage.Outcome, bool, error) {
	c.reads.Add(1)
	return c.DB.AddressEvidence(ctx, account, email)
}

// TestEvidenceReadOnlyWhenThereIsSome: a validation of an account that
// never reported outcomes reads no evidence; one of an account that did
// reads it, and its bounce changes the verdict. Two services on one
// store are two boxes of a fleet: the one that records the outcomes sees
// them at once; the other, which knew the account had none, sees them at
// its next refresh (Options.Refresh), and from then on every later
// bounce at once, since it reads the account's evidence each time.
func TestEvidenceReadOnlyWhenThereIsSome(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), pebble.Options{Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1,
		CacheSize: 8 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := &readCounter{DB: db}
	ctx := t.Context()
	quiet, silent := mkAccount(t, db), mkAccount(t, db)

	// Refresh of an hour: the test calls refresh itself.
	opts := Options{DB: store, Refresh: time.Hour, Retention: -1}
	box1, box2 := New(opts), New(opts)
	t.Cleanup(box1.Close)
	t.Cleanup(box2.Close)

	learned := func(s *Service, account, email string) *probe.Learned {
		t.Helper()
		l, err := s.Learned(ctx, account, email, "mx.shop.example", probe.StatusValid)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	before := store.reads.Load()
	if l := learned(box1, quiet, "ann@shop.example"); l != nil {
		t.Fatalf("an account without outcomes learned %+v", l)
	}
	if l := learned(box2, silent, "ann@shop.example"); l != nil || store.reads.Load() != before {
		t.Fatalf("validations of accounts without outcomes read evidence %d times (learned %+v)", store.reads.Load()-before, l)
	}

	// quiet's first bounce, recorded by box 1.
	bounce := func(id, email string, at time.Time) storage.Outcome {
		return storage.Outcome{EventID: id, Email: email, Event: storage.OutcomeHardBounce, At: at, Source: "api",
			SMTPCode: 550, Enhanced: "5.1.1", Diagnostic: "550 5.1.1 <" + email + ">: Recipient address rejected: User unknown"}
	}
	if _, err := box1.Record(ctx, quiet, []storage.Outcome{bounce("b-1", "ann@shop.example", time.Now().Add(-time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if l := learned(box1, quiet, "Ann@shop.example"); l == nil || l.Kind != probe.LearnedAddress {
		t.Fatalf("box 1, which recorded the bounce: learned %+v, want the address bounced", l)
	}
	// Box 2 knew quiet had none: it reads nothing until it refreshes.
	reads := store.reads.Load()
	if l := learned(box2, quiet, "ann@shop.example"); l != nil || store.reads.Load() != reads {
		t.Fatalf("box 2 before its refresh: learned %+v, %d reads", l, store.reads.Load()-reads)
	}
	box2.refresh()
	if l := learned(box2, quiet, "ann@shop.example"); l == nil || l.Kind != probe.LearnedAddress {
		t.Fatalf("box 2 after its refresh: learned %+v, want the address bounced", l)
	}
	// From then on another box's bounce counts at once.
	if _, err := box1.Record(ctx, quiet, []storage.Outcome{bounce("b-2", "bob@shop.example", time.Now().Add(-time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if l := learned(box2, quiet, "bob@shop.example"); l == nil || l.Kind != probe.LearnedAddress {
		t.Fatalf("box 2, bob's bounce recorded by box 1 after the refresh: learned %+v", l)
	}
	// silent still costs nothing.
	reads = store.reads.Load()
	learned(box1, silent, "ann@shop.example")
	learned(box2, silent, "ann@shop.example")
	if store.reads.Load() != reads {
		t.Errorf("an account without outcomes read evidence %d times", store.reads.Load()-reads)
	}
}

func mkAccount(t *testing.T, db *pebble.DB) string {
	t.Helper()
	a, err := db.CreateAccount(t.Context(), "test", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}
