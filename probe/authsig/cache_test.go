package authsig

import (
	"fmt"
	"testing"
	"time"
)

func TestTTLCacheBoundAndExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newTTLCache[int](10)
	for i := range 100 {
		c.put(fmt.Sprint(i), i, now, time.Minute, false)
		if n := len(c.m); n > 10 {
			t.Fatalf("%d entries after %d puts, bound 10", n, i+1)
		}
	}
	// The newest survive a purge.
	if v, ok := c.get("99", now); !ok || v != 99 {
		t.Errorf("newest entry: %v, %v", v, ok)
	}
	if _, ok := c.get("0", now); ok {
		t.Error("oldest entry kept")
	}
	if _, ok := c.get("99", now.Add(time.Minute)); ok {
		t.Error("entry kept past its ttl")
	}
	c.update("99", now, time.Hour, func(v int) int { return v + 1 })
	if v, _ := c.get("99", now.Add(30*time.Minute)); v != 100 {
		t.Errorf("updated value %d, want 100 kept for the new ttl", v)
	}
	c.update("gone", now, time.Hour, func(v int) int { return v + 1 })
	if v, _ := c.get("gone", now); v != 1 {
		t.Errorf("update of a missing key started from %d", v-1)
	}
}

func TestTTLCacheRefresh(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newTTLCache[int](10)
	c.put("a", 1, now, 100*time.Second, true)
	c.put("b", 2, now, 100*time.Second, false)
	if _, ok, refresh := c.getRefresh("a", now.Add(89*time.Second)); !ok || refresh {
		t.Errorf("at 89 s of 100: ok %v refresh %v, want a hit without refresh", ok, refresh)
	}
	if v, ok, refresh := c.getRefresh("a", now.Add(90*time.Second)); !ok || !refresh || v != 1 {
		t.Errorf("at 90 s of 100: %v ok %v refresh %v, want a hit asking for a refresh", v, ok, refresh)
	}
	if _, ok, refresh := c.getRefresh("a", now.Add(95*time.Second)); !ok || refresh {
		t.Errorf("second hit in the last tenth: ok %v refresh %v, want no second refresh", ok, refresh)
	}
	if _, ok, refresh := c.getRefresh("b", now.Add(99*time.Second)); !ok || refresh {
		t.Errorf("entry put without refresh: ok %v refresh %v", ok, refresh)
	}
	if _, ok, _ := c.getRefresh("a", now.Add(100*time.Second)); ok {
		t.Error("hit past the ttl")
	}
}
