package outcomes

import (
	"testing"
	"time"
)

func TestPAV(t *testing.T) {
	y := [10]float64{0.1, 0.3, 0.2, 0.2, 0.5, 0.4, 0.9, 0.8, 0.95, 1}
	w := [10]float64{1, 1, 1, 1, 1, 3, 1, 1, 1, 1}
	got := pav(y, w)
	for i := 1; i < 10; i++ {
		if got[i] < got[i-1] {
			t.Fatalf("not monotone: %v", got)
		}
	}
	// 0.3, 0.2, 0.2 pool to 0.2333; 0.5 and 0.4×3 to 0.425; 0.9, 0.8 to 0.85.
	want := [10]float64{0.1, 0.7 / 3, 0.7 / 3, 0.7 / 3, 0.425, 0.425, 0.85, 0.85, 0.95, 1}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("pav = %v, want %v", got, want)
		}
	}
}

func TestFit(t *testing.T) {
	day := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	// No outcomes: the prior, the raw score itself (at the midpoints).
	m := Fit([10]int{}, [10]int{}, day)
	if m.Outcomes != 0 || m.Version != "2026-11-26/0" || m.Score(95) != 95 || m.Score(4) != 5 || m.Score(50) != 50 {
		t.Fatalf("empty fit: %+v, 95→%d 50→%d", m, m.Score(95), m.Score(50))
	}
	// Many outcomes: the measured shares. 90-100: 970 of 1000 delivered;
	// 50-59: 300 of 1000 (a catch-all heavy list); 0-9: 20 of 1000.
	var d, b [10]int
	d[9], b[9] = 970, 30
	d[5], b[5] = 300, 700
	d[0], b[0] = 20, 980
	m = Fit(d, b, day)
	if m.Outcomes != 3000 || m.Version != "2026-11-26/3000" {
		t.Fatalf("fit %+v", m)
	}
	if s := m.Score(95); s != 97 {
		t.Errorf("95 → %d, want 97", s)
	}
	if s := m.Score(55); s < 30 || s > 33 { // 0.302 at 54.5, toward the empty 60-69 bucket's prior
		t.Errorf("55 → %d, want about 30", s)
	}
	if s := m.Score(2); s != 2 {
		t.Errorf("2 → %d, want 2", s)
	}
	for raw := 1; raw <= 100; raw++ {
		if m.Score(raw) < m.Score(raw-1) {
			t.Fatalf("the calibrated score falls from %d to %d", raw-1, raw)
		}
	}
	// A bucket with few outcomes moves little from its raw score: 2 of 2
	// bounced at 70-79 is shrunk toward 0.745, and then pooled with its
	// neighbours only as far as monotonicity needs.
	d, b = [10]int{}, [10]int{}
	b[7] = 2
	m = Fit(d, b, day)
	if s := m.Score(75); s < 55 || s > 70 {
		t.Errorf("75 with two bounces → %d", s)
	}
}
