package egress

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStateSurvivesRestart(t *testing.T) {
	store := &memStore{}
	withStore := func(o *Options) { o.Store = store }
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, withStore)
	t0 := e.clk.Now()
	e.acquire(t, "127.0.0.10", "127.0.0.1").Release(OutcomeGreylisted) // until t0+1m
	e.acquire(t, "127.0.0.11", "127.0.0.2").Release(OutcomeGreylisted) // until t0+1m
	e.clk.Advance(time.Minute)
	e.acquire(t, "127.0.0.11", "127.0.0.2").Release(OutcomeGreylisted) // until t0+3m, 2nd
	e.acquire(t, "127.0.0.12", "127.0.0.2").Release(OutcomeOK)
	if err := e.p.Disable(ip("127.0.0.2"), "listed on zen.example"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(-30 * time.Second) // save while the first cooldown still runs
	if err := e.p.Close(); err != nil {
		t.Fatal(err)
	}
	var saved savedState
	if err := json.Unmarshal(store.data, &saved); err != nil || len(saved.Cooldowns) != 2 {
		t.Fatalf("saved %s: %v", store.data, err)
	}

	// Restart at t0+2m: the first cooldown has expired, the second has not.
	e2 := newEnv(t, []string{"127.0.0.2", "127.0.0.1", "127.0.0.3"}, func(o *Options) {
		o.Store = store
		o.Now = func() time.Time { return t0.Add(2 * time.Minute) }
	})
	if got := e2.p.CooldownUntil(ip("127.0.0.1"), ip("127.0.0.10")); !got.IsZero() {
		t.Errorf("expired cooldown kept until %v", got)
	}
	if got := e2.p.CooldownUntil(ip("127.0.0.2"), ip("127.0.0.11")); !got.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("cooldown until %v, want %v", got, t0.Add(3*time.Minute))
	}
	st, _ := e2.status("127.0.0.2")
	if !st.Disabled || st.DisabledReason != "listed on zen.example" || st.Sessions != 3 ||
		st.Outcomes[OutcomeGreylisted] != 2 || st.Outcomes[OutcomeOK] != 1 {
		t.Errorf("restored 127.0.0.2: %+v", st)
	}
	if len(st.Cooldowns) != 1 || st.Cooldowns[0].Repeats != 2 {
		t.Errorf("restored cooldowns: %+v", st.Cooldowns)
	}
	if st, _ := e2.status("127.0.0.3"); st.Sessions != 0 {
		t.Errorf("new address: %+v", st)
	}
	// The expired pair was dropped with its backoff: it starts over at 1m.
	e2.acquire(t, "127.0.0.10", "127.0.0.1").Release(OutcomeGreylisted)
	if got := e2.p.CooldownUntil(ip("127.0.0.1"), ip("127.0.0.10")); !got.Equal(t0.Add(3 * time.Minute)) {
		t.Errorf("cooldown of the dropped pair until %v, want %v", got, t0.Add(3*time.Minute))
	}
}

func TestStateBackoffContinuesAfterRestart(t *testing.T) {
	store := &memStore{}
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.Store = store })
	e.acquire(t, mx, "").Release(OutcomeGreylisted)
	e.p.Close()
	e2 := newEnv(t, []string{"127.0.0.1"}, func(o *Options) {
		o.Store = store
		o.Now = e.clk.Now
	})
	e.clk.Advance(time.Minute)
	e2.acquire(t, mx, "").Release(OutcomeGreylisted)
	if got := e2.p.CooldownUntil(ip("127.0.0.1"), ip(mx)).Sub(e.clk.Now()); got != 2*time.Minute {
		t.Fatalf("second cooldown after restart: %v, want 2m", got)
	}
}

func TestStateSavedPeriodicallyWhenDirty(t *testing.T) {
	store := &memStore{}
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.Store = store })
	e.p.maintain()
	if store.saves != 0 {
		t.Fatalf("%d saves of an unchanged state", store.saves)
	}
	e.acquire(t, mx, "").Release(OutcomeOK)
	e.p.maintain()
	e.p.maintain()
	if store.saves != 1 || !strings.Contains(string(store.data), `"ok":1`) {
		t.Fatalf("%d saves, state %s", store.saves, store.data)
	}
}

func TestStateLoadProblems(t *testing.T) {
	for _, bad := range []string{"{", `{"version":99}`, `[1,2]`} {
		store := &memStore{data: []byte(bad)}
		e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.Store = store })
		if st, _ := e.status("127.0.0.1"); st.Sessions != 0 {
			t.Errorf("state %q: %+v", bad, st)
		}
	}
	// Unknown outcome names and addresses no longer in the pool are skipped.
	store := &memStore{data: []byte(`{"version":1,"addresses":[{"addr":"127.0.0.1","sessions":5,"outcomes":{"ok":4,"future":1}},{"addr":"127.0.0.9","sessions":7}],` +
		`"cooldowns":[{"addr":"127.0.0.9","dest":"127.0.0.10","until":"2099-01-01T00:00:00Z","repeats":1}]}`)}
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.Store = store })
	if st, _ := e.status("127.0.0.1"); st.Sessions != 5 || st.Outcomes[OutcomeOK] != 4 || len(st.Outcomes) != 1 {
		t.Errorf("restored: %+v", st)
	}
	if e.p.sweep(e.clk.Now()) != 0 {
		t.Error("cooldown of an address not in the pool restored")
	}

	failing := &memStore{loadErr: errors.New("disk on fire")}
	_, err := New(Options{Store: failing, Logger: quietLogger})
	if err == nil || !strings.Contains(err.Error(), "egress: load state: disk on fire") {
		t.Fatalf("New with a failing store: %v", err)
	}
}
