// Package storagetest is the specification of the storage contract
// (storage/contract.go): one compliance suite that every backend runs,
// the way database/sql drivers share theirs, so that a guarantee tested
// on one backend is tested on the other. storage/pebble runs it on a
// Pebble database, storage/postgres on a real PostgreSQL
// (internal/pgtest), each with one call:
//
//	func TestContract(t *testing.T) { storagetest.Run(t, backend) }
//
// Run, step by step:
//
//  1. Every subtest opens its own empty store with Backend.Open, on a
//     test Clock that moves only when the subtest says so, and may
//     restart it with Backend.Reopen (on PostgreSQL: another box of the
//     same database, the first one's process stopped).
//  2. The store is wrapped in a recorder (recorder.go, generated from
//     contract.go by internal/recordergen) that implements storage.Store,
//     and storage.JobLeases when the backend does, and records the name
//     of every method called.
//  3. The subtests run: accounts, keys, credits, charges, results,
//     history, cache, idempotency, jobs, outbox, users, sessions,
//     secrets, the fleet's job leases (when the backend implements
//     storage.JobLeases), the arguments every backend refuses with the
//     same words (storage/check.go), and the scripted scenarios of
//     testdata/*.txt (scenario.go).
//  4. Last, AllMethodsCalled fails naming every method of storage.Store
//     (and storage.JobLeases) that no subtest called: the method sets
//     are read with reflect, so a method added to the contract is
//     checked without editing the suite.
package storagetest

//go:generate go run ./internal/recordergen

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Clock is a test clock: time passes only when the test says so. A store
// takes its Now as its clock (of records' times and expiries; a backend's
// leases between processes run on real time).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed instant with milliseconds.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 11, 21, 10, 0, 0, 123_000_000, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set sets the clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Backend opens the stores of the suite.
type Backend[S storage.Store] struct {
	// Open returns a new, empty store on the clock c (its Now is every
	// stored time and expiry), closed when the test ends.
	Open func(t *testing.T, c *Clock) S
	// Reopen closes s and opens its data again, on the same clock, as a
	// restart does (on PostgreSQL, another box of the same database: s's
	// process has stopped).
	Reopen func(t *testing.T, s S) S
}

// backend is the Backend the subtests get: its stores are recorders.
type backend = Backend[storage.Store]

// subtests are the suite, in the order Run runs them.
var subtests = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"Accounts", testAccounts},
	{"Keys", testKeys},
	{"Ledger", testLedger},
	{"NoOverdraft", testNoOverdraft},
	{"ChargeSealAndIdem", testChargeSealAndIdem},
	{"ChargeDirect", testChargeDirect},
	{"StaleHolds", testStaleHolds},
	{"HistoryPaging", testHistoryPaging},
	{"HistoryLateRows", testHistoryLateRows},
	{"ResultsAndCache", testResultsAndCache},
	{"DailyCounts", testDailyCounts},
	{"Idempotency", testIdempotency},
	{"IdempotencyConcurrent", testIdempotencyConcurrent},
	{"IdempotencyPurge", testIdempotencyPurge},
	{"IdemLostKey", testIdemLostKey},
	{"JobLifecycle", testJobLifecycle},
	{"JobFailRefund", testJobFailRefund},
	{"JobIdempotency", testJobIdempotency},
	{"JobsConcurrentReservations", testJobsConcurrentReservations},
	{"BatchHistoryAndCache", testBatchHistoryAndCache},
	{"JobLeases", testJobLeases},
	{"Outbox", testOutbox},
	{"OutboxEventsAndResend", testOutboxEventsAndResend},
	{"UsersAndInvites", testUsersAndInvites},
	{"UserAdmin", testUserAdmin},
	{"Sessions", testSessions},
	{"SessionAccount", testSessionAccount},
	{"OpenRegistration", testOpenRegistration},
	{"Secret", testSecret},
	{"OutcomeMatching", testOutcomeMatching},
	{"OutcomeRepeats", testOutcomeRepeats},
	{"Outcomes", testOutcomes},
	{"InvalidArguments", testInvalidArguments},
	{"Scenarios", testScenarios},
}

// Run runs the whole suite on the backend b, then fails if it left a
// method of the contract uncalled (AllMethodsCalled).
func Run[S storage.Store](t *testing.T, b Backend[S]) {
	calls := &callSet{names: map[string]bool{}}
	leases := reflect.TypeFor[S]().Implements(reflect.TypeFor[storage.JobLeases]())
	rb := backend{
		Open: func(t *testing.T, c *Clock) storage.Store {
			return wrap(b.Open(t, c), calls)
		},
		Reopen: func(t *testing.T, s storage.Store) storage.Store {
			return wrap(b.Reopen(t, unwrap[S](t, s)), calls)
		},
	}
	ran := 0
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			ran++
			st.run(t, rb)
		})
	}
	t.Run("AllMethodsCalled", func(t *testing.T) {
		if ran < len(subtests) {
			t.Skipf("%d of %d subtests ran (-run): the calls of the whole suite are not known", ran, len(subtests))
		}
		want := methodNames(reflect.TypeFor[storage.Store]())
		if leases {
			want = append(want, methodNames(reflect.TypeFor[storage.JobLeases]())...)
		}
		if missed := calls.missing(want); len(missed) > 0 {
			t.Errorf("no subtest calls %s: add a subtest that uses and checks them", strings.Join(missed, ", "))
		}
	})
}

// methodNames returns the names of the interface type's methods.
func methodNames(it reflect.Type) []string {
	out := make([]string, it.NumMethod())
	for i := range out {
		out[i] = it.Method(i).Name
	}
	return out
}

// callSet is the names of the methods called, by every recorder of one
// Run.
type callSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (c *callSet) add(name string) {
	c.mu.Lock()
	c.names[name] = true
	c.mu.Unlock()
}

// missing returns the names of want never added, sorted.
func (c *callSet) missing(want []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range want {
		if !c.names[m] {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// recorder is a storage.Store that records the name of each method
// called and hands the call to s (its methods are in recorder.go).
type recorder struct {
	s     storage.Store
	calls *callSet
}

func (rec *recorder) called(name string) { rec.calls.add(name) }

// leaseRecorder is a recorder of a store that implements
// storage.JobLeases too.
type leaseRecorder struct {
	*recorder
	l storage.JobLeases
}

var (
	_ storage.Store     = (*recorder)(nil)
	_ storage.Store     = (*leaseRecorder)(nil)
	_ storage.JobLeases = (*leaseRecorder)(nil)
)

// wrap returns s in a recorder that adds to calls.
func wrap(s storage.Store, calls *callSet) storage.Store {
	rec := &recorder{s: s, calls: calls}
	if l, ok := s.(storage.JobLeases); ok {
		return &leaseRecorder{recorder: rec, l: l}
	}
	return rec
}

// unwrap returns the backend's store in a recorder.
func unwrap[S storage.Store](t *testing.T, s storage.Store) S {
	t.Helper()
	var inner storage.Store
	switch rec := s.(type) {
	case *recorder:
		inner = rec.s
	case *leaseRecorder:
		inner = rec.s
	default:
		t.Fatalf("Reopen of a %T, not a store the suite opened", s)
	}
	out, ok := inner.(S)
	if !ok {
		t.Fatalf("Reopen of a %T, not the backend's %s", inner, reflect.TypeFor[S]())
	}
	return out
}

// leases returns s's storage.JobLeases, or skips the test when the
// backend has none (it does not share its jobs between boxes).
func leases(t *testing.T, s storage.Store) storage.JobLeases {
	t.Helper()
	l, ok := s.(storage.JobLeases)
	if !ok {
		t.Skip("the backend does not implement storage.JobLeases")
	}
	return l
}

// noErr fails the test now when err is not nil: the calls that make a
// subtest's records are checked, so that a failure is reported where it
// happens rather than as a wrong result further on.
func noErr(t testing.TB, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
