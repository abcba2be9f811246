package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
)

// keptWorld is one domain, kept.test, on one host at ip (mod changes
// it), with mailboxes ann, bob, cat, dan, eve, fay, gus, hal, ivy, jon,
// kim and lea; any other local part is unknown (550 5.1.1).
func keptWorld(t *testing.T, ip string, mod func(*world.Host)) *world.World {
	h := &world.Host{Name: "mx.kept.test", IP: ip}
	if mod != nil {
		mod(h)
	}
	return behaviourWorld(t, []behaviour{{hosts: []*world.Host{h},
		domain: &world.Domain{Name: "kept.test", MX: []world.MX{{Pref: 10, Host: "mx.kept.test"}},
			Mailboxes: ok("ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lea")}}})
}

// verifyAll validates each address in turn; want is the verdict of
// each: valid for a mailbox of the world (250), invalid for an unknown
// one (550 5.1.1, RFC 3463 X.1.1).
func verifyAll(t *testing.T, eng *Engine, emails ...string) {
	t.Helper()
	for _, email := range emails {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := eng.Verify(ctx, email)
		cancel()
		want := StatusValid
		if strings.HasPrefix(email, "ghost") {
			want = StatusInvalid
		}
		if r.Status != want {
			t.Errorf("%s: %s/%s, want %s", email, r.Status, r.Reason, want)
		}
	}
}

// rcptsOf lists the RCPTs of each session of the log, the catch-all
// probe's (verifyd-…) left out.
func rcptsOf(sessions []world.Session) [][]string {
	var out [][]string
	for _, s := range sessions {
		var rs []string
		for _, r := range s.Rcpts {
			if !strings.HasPrefix(r.Addr, "verifyd-") {
				rs = append(rs, strings.TrimSuffix(r.Addr, "@kept.test"))
			}
		}
		out = append(out, rs)
	}
	return out
}

// TestKeptSessions: real-time validations one after another to one MX
// host share a session, each in a transaction of its own (RSET between),
// until the session has run sessionUses transactions or met
// sessionRefusals refusals; a kept session nobody takes is ended (QUIT)
// after idleSession; NoSessionReuse opens one session a validation.
func TestKeptSessions(t *testing.T) {
	e := startEnv(t, keptWorld(t, "127.81.20.1", nil), envOptions{})
	log := e.run.Log()

	// Twelve mailboxes: ten transactions in the first session, the
	// other two in a second one.
	emails := []string{"ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lea"}
	for i := range emails {
		emails[i] += "@kept.test"
	}
	verifyAll(t, e.engine, emails...)
	// The second session, kept after lea, ends by itself within
	// idleSession: no Wait.
	if !log.Wait(2, idleSession+5*time.Second) {
		t.Fatalf("%d sessions ended, want 2 (the second QUIT after %v idle)", len(log.Sessions()), idleSession)
	}
	ss := log.Sessions()
	got := rcptsOf(ss)
	if len(ss) != 2 || len(got[0]) != sessionUses || len(got[1]) != len(emails)-sessionUses || !ss[0].Quit || !ss[1].Quit {
		t.Fatalf("sessions' RCPTs %v (QUIT %v, %v), want %d then %d, each ended by QUIT", got, ss[0].Quit, len(ss) > 1 && ss[1].Quit,
			sessionUses, len(emails)-sessionUses)
	}

	// Refusals: a session that met sessionRefusals is not kept.
	log.Reset()
	var ghosts []string
	for i := range sessionRefusals + 2 {
		ghosts = append(ghosts, fmt.Sprintf("ghost%d@kept.test", i))
	}
	verifyAll(t, e.engine, ghosts...)
	e.engine.Wait()
	log.Wait(2, 5*time.Second)
	if got := rcptsOf(log.Sessions()); len(got) != 2 || len(got[0]) != sessionRefusals || len(got[1]) != 2 {
		t.Errorf("sessions' RCPTs %v, want %d refused ones in the first, the other 2 in a second", got, sessionRefusals)
	}

	// Without reuse: a session a validation.
	log.Reset()
	plain := e.engineWith(t, e.res, func(o *Options) { o.NoSessionReuse = true })
	verifyAll(t, plain, "ann@kept.test", "bob@kept.test", "cat@kept.test")
	plain.Wait()
	log.Wait(3, 5*time.Second)
	if got := rcptsOf(log.Sessions()); len(got) != 3 {
		t.Errorf("NoSessionReuse: sessions' RCPTs %v, want three sessions", got)
	}
}

// TestKeptSessionClosed: a server that closes a kept session (no answer
// to the next RCPT, or a 421 to it) has the validation asked again in a
// new session, with the right verdict, and the egress address does not
// cool for it (nothing was refused).
func TestKeptSessionClosed(t *testing.T) {
	for i, mode := range []string{world.DropClose, world.Drop421} {
		t.Run(mode, func(t *testing.T) {
			ip := fmt.Sprintf("127.81.20.%d", 10+i)
			// A validation's RCPT and, the first time, the catch-all
			// probe's: the session's third RCPT is never answered.
			e := startEnv(t, keptWorld(t, ip, func(h *world.Host) { h.DropAfterRcpts, h.DropMode = 2, mode }), envOptions{})
			stale := sessionsStale.Get()
			verifyAll(t, e.engine, "ann@kept.test", "bob@kept.test", "cat@kept.test", "ghost@kept.test", "dan@kept.test")
			e.engine.Wait()
			if n := sessionsStale.Get() - stale; n == 0 {
				t.Errorf("no kept session found closed, want some")
			}
			for _, a := range e.pool.Snapshot() {
				for _, c := range a.Cooldowns {
					t.Errorf("egress %s cools for %s (%s) after sessions the server closed", a.Addr, c.Dest, c.Cause)
				}
			}
		})
	}
}

// TestKeptSessionNotWhenWaited: a session is not kept while another
// validation waits for its egress slot (egress.max_conns_per_host
// reached): it ends, and the one waiting goes ahead at once; a kept
// session ends when a validation starts to wait for its slot. Kept
// sessions here wait an hour unused, so a validation left waiting for
// one would run out of its budget.
func TestKeptSessionNotWhenWaited(t *testing.T) {
	e := startEnv(t, keptWorld(t, "127.81.20.20", func(h *world.Host) {
		h.CommandLatency = map[string]world.Duration{"RCPT": world.Duration(time.Second)}
	}), envOptions{egress: egress.Options{Addresses: egressPool[:1], MaxConnsPerHost: 1}})
	e.engine.keeper.wait = time.Hour
	inflight := func() int {
		n := 0
		for _, a := range e.pool.Snapshot() {
			n += a.InFlight
		}
		return n
	}
	done := make(chan *Result, 2)
	run := func(email string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- e.engine.Verify(ctx, email)
	}
	go run("ann@kept.test")
	for deadline := time.Now().Add(10 * time.Second); inflight() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	// The first holds the only slot through its RCPT's second: the
	// second waits for it, and has it the moment the first's session
	// ends.
	go run("bob@kept.test")
	for range 2 {
		r := <-done
		t.Logf("%s: %s in %v", r.Email, r.Status, r.Latency)
		if r.Status != StatusValid {
			t.Errorf("%s: %s/%s, want valid (a validation waited for a slot a kept session held?)", r.Email, r.Status, r.Reason)
		}
	}

	// A session kept while nobody waited (ann's, now idle, holding the
	// only slot for an hour): another engine on the same pool, which
	// cannot take it, starts to wait for the slot, and the wait ends the
	// kept session (egress.Pool.OnWait).
	verifyAll(t, e.engine, "cat@kept.test")
	other := e.engineWith(t, e.res)
	verifyAll(t, other, "dan@kept.test")
	other.Wait()
	e.engine.Wait()
}

// TestKeptSessionGreylistBackoff: ann's validation is greylisted, waits
// the pair's cooldown, is accepted and keeps its session; bob's, right
// after, takes that session and is greylisted too (the server greylists
// each recipient: postgrey's triplets). Its pair cools for the first step
// again, not the doubled one, as it would after a session that ended
// well: ann's transaction went well though its session's Release had not
// come. With the doubled step bob's budget could not wait it out, and he
// was answered unknown (the short bench world: one address of 508 took
// 6.1 s instead of 3.2).
func TestKeptSessionGreylistBackoff(t *testing.T) {
	const step = 2 * time.Second
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mx.kept.test", IP: "127.81.20.5"}},
		domain: &world.Domain{Name: "kept.test", MX: []world.MX{{Pref: 10, Host: "mx.kept.test"}},
			Policy: world.PolicyGreylist, GreylistDelay: world.Duration(step), Mailboxes: ok("ann", "bob")}}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:1], GreylistCooldown: step, MaxCooldown: time.Minute}})
	reusedBefore := sessionsReused.Get()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r := e.engine.Verify(ctx, "ann@kept.test")
	cancel()
	if r.Status != StatusValid {
		t.Fatalf("ann: %s/%s, want valid after waiting out the greylisting", r.Status, r.Reason)
	}
	// A budget for one step and the retry, not for two steps.
	ctx, cancel = context.WithTimeout(context.Background(), step+step*3/5)
	r = e.engine.Verify(ctx, "bob@kept.test")
	cancel()
	if r.Status != StatusValid {
		t.Errorf("bob: %s/%s, want valid after one step of cooldown", r.Status, r.Reason)
	}
	e.engine.Wait()
	if sessionsReused.Get() == reusedBefore {
		t.Error("no kept session was taken: the test shows nothing")
	}
}

// rcptSecond makes a host answer each RCPT round trip after a second.
var rcptSecond = map[string]world.Duration{"RCPT": world.Duration(time.Second)}

// startWhenBusy runs Verify(first) and, once its session holds an egress
// slot (so it is counted in use: keeper.begin comes before the Acquire),
// Verify(second); it returns both results, first's first.
func startWhenBusy(t *testing.T, e *env, first, second string) [2]*Result {
	t.Helper()
	var out [2]*Result
	done := make(chan struct{}, 2)
	run := func(i int, email string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out[i] = e.engine.Verify(ctx, email)
		done <- struct{}{}
	}
	inflight := func() int {
		n := 0
		for _, a := range e.pool.Snapshot() {
			n += a.InFlight
		}
		return n
	}
	go run(0, first)
	for deadline := time.Now().Add(10 * time.Second); inflight() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	go run(1, second)
	<-done
	<-done
	return out
}

// TestSessionHandedOver: a validation that finds the session to its MX
// address in use by another waits for it and, when that one's
// transaction ends well, takes it over (RSET, MAIL, RCPT): the server
// sees one session with both recipients, each in a transaction of its
// own, instead of two at once.
func TestSessionHandedOver(t *testing.T) {
	// Each RCPT round trip takes a second: ann's session is in use for
	// two (her RCPT, then the catch-all probe's) after bob's validation
	// starts, however slow the machine is to start it.
	e := startEnv(t, keptWorld(t, "127.81.20.30", func(h *world.Host) { h.CommandLatency = rcptSecond }), envOptions{})
	e.engine.keeper.handoff = time.Minute // a loaded machine's slowness is no timeout here
	log := e.run.Log()
	taken := awaited.taken.Get()
	rs := startWhenBusy(t, e, "ann@kept.test", "bob@kept.test")
	for _, r := range rs {
		if r.Status != StatusValid {
			t.Errorf("%s: %s/%s, want valid", r.Email, r.Status, r.Reason)
		}
	}
	e.engine.Wait() // the session, kept after bob, ends after idleSession
	log.Wait(1, 5*time.Second)
	if got := rcptsOf(log.Sessions()); len(got) != 1 || strings.Join(got[0], " ") != "ann bob" {
		t.Errorf("sessions' RCPTs %v, want one session: ann, then bob", got)
	}
	if n := awaited.taken.Get() - taken; n != 1 {
		t.Errorf("%d sessions handed over, want 1", n)
	}
}

// TestSessionHandoffEndsBadly: the session a validation waits for meets
// a greylisting, so it is not kept: the validation waiting is told at
// once (not at the wait's bound) and opens its own, and both are
// answered once the greylisting is waited out.
func TestSessionHandoffEndsBadly(t *testing.T) {
	const step = time.Second
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mx.kept.test", IP: "127.81.20.31", CommandLatency: rcptSecond}},
		domain: &world.Domain{Name: "kept.test", MX: []world.MX{{Pref: 10, Host: "mx.kept.test"}},
			Policy: world.PolicyGreylist, GreylistDelay: world.Duration(step), Mailboxes: ok("ann", "bob")}}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:1], GreylistCooldown: step, MaxCooldown: time.Minute}})
	e.engine.keeper.handoff = time.Minute
	none, timeouts := awaited.none.Get(), awaited.timeout.Get()
	rs := startWhenBusy(t, e, "ann@kept.test", "bob@kept.test")
	for _, r := range rs {
		if r.Status != StatusValid {
			t.Errorf("%s: %s/%s, want valid after the greylisting", r.Email, r.Status, r.Reason)
		}
	}
	e.engine.Wait()
	if n := awaited.none.Get() - none; n != 1 {
		t.Errorf("%d waits told no session would come, want 1 (bob's, when ann's session met the greylisting)", n)
	}
	if n := awaited.timeout.Get() - timeouts; n != 0 {
		t.Errorf("%d waits ran out, want none", n)
	}
}
