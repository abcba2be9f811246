package web

import (
	"sync"
	"time"
)

// throttle slows down password guessing: after free consecutive failed
// logins of one key (an account's email, or a source address), the next
// attempt must wait 1 s, then 2 s, 4 s, ... up to maxDelay; an attempt
// during the wait is refused (429) without checking the password, so
// guessing cannot go faster than the delays allow. A success clears the
// key (the login clears only the account's, not the address's); a count
// with no failure for forgetAfter starts again from zero. Counts live in
// memory: a restart forgets them, and an attacker who can restart the box
// has won already. An entry idle for a day goes.
//
// Why refuse rather than sleep: a sleeping handler holds a connection
// and a goroutine per attempt, which is its own denial of service.
type throttle struct {
	now      func() time.Time
	free     int
	maxDelay time.Duration

	mu       sync.Mutex
	m        map[string]*failures
	n        int             // calls since the last sweep
	inFlight map[string]bool // keys with an attempt being checked
}

// forgetAfter is how long after its last failure a count starts again.
const forgetAfter = time.Hour

type failures struct {
	count int
	last  time.Time
}

func newThrottle(now func() time.Time, free int, maxDelay time.Duration) *throttle {
	return &throttle{now: now, free: free, maxDelay: maxDelay, m: map[string]*failures{}, inFlight: map[string]bool{}}
}

// delay is the wait after n consecutive failures.
func (t *throttle) delay(n int) time.Duration {
	if n < t.free {
		return 0
	}
	d := time.Second << min(n-t.free, 20)
	return min(d, t.maxDelay)
}

// wait returns how long key must still wait before its next attempt.
func (t *throttle) wait(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.m[key]
	if f == nil || t.now().Sub(f.last) >= forgetAfter {
		return 0
	}
	if left := f.last.Add(t.delay(f.count)).Sub(t.now()); left > 0 {
		return left
	}
	return 0
}

// fail counts a failed attempt of key.
func (t *throttle) fail(key string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n++; t.n >= 1024 {
		t.n = 0
		for k, f := range t.m {
			if now.Sub(f.last) > 24*time.Hour {
				delete(t.m, k)
			}
		}
	}
	f := t.m[key]
	if f == nil {
		f = &failures{}
		t.m[key] = f
	}
	if now.Sub(f.last) >= forgetAfter {
		f.count = 0
	}
	f.count++
	f.last = now
}

// succeed clears key.
func (t *throttle) succeed(key string) {
	t.mu.Lock()
	delete(t.m, key)
	t.mu.Unlock()
}

// begin claims the check of one attempt for each key, or reports false
// when an attempt of one of them is being checked: guesses sent at once
// would all pass wait before the first failure is counted, so they take
// turns. end gives the keys back.
func (t *throttle) begin(keys ...string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if t.inFlight[k] {
			return false
		}
	}
	for _, k := range keys {
		t.inFlight[k] = true
	}
	return true
}

func (t *throttle) end(keys ...string) {
	t.mu.Lock()
	for _, k := range keys {
		delete(t.inFlight, k)
	}
	t.mu.Unlock()
}
