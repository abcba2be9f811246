package harness

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// TestLearnNoise: a figure's band is its largest |ln B/A| over the
// rounds, widened by a quarter, at least MinBand; a figure with no ratio
// (A is 0) gets none.
func TestLearnNoise(t *testing.T) {
	round := func(cache, p99, agree, zero float64) *Result {
		return &Result{Mode: "short", Machine: Machine{CPUModel: "test CPU", CPUs: 2}, Runs: []*RunResult{{Binary: "/x/verifyd"}},
			Ratios: []Ratio{
				{Figure: "cache c=256 throughput/s", A: 1000, B: 1000 * cache, Ratio: cache, Better: "higher"},
				{Figure: "fresh c=64 p99 ms", A: 10, B: 10 * p99, Ratio: p99, Better: "lower"},
				{Figure: "verdict agreement %", A: 99.5, B: 99.5 * agree, Ratio: agree, Better: "higher"},
				{Figure: "nothing", A: 0, B: zero, Ratio: 0, Better: "lower"},
			}}
	}
	n := LearnNoise([]*Result{round(1.05, 0.90, 1, 3), round(0.97, 1.10, 1, 4), nil, round(1.02, 1.01, 1, 5)})
	if n.Rounds != 3 || n.Machine.CPUModel != "test CPU" || n.Binary != "/x/verifyd" {
		t.Fatalf("noise %+v", n)
	}
	want := map[string]float64{
		"cache c=256 throughput/s": math.Exp(1.25*math.Log(1.05)) - 1,
		"fresh c=64 p99 ms":        math.Exp(1.25*math.Abs(math.Log(0.90))) - 1,
		"verdict agreement %":      MinBand,
	}
	for name, band := range want {
		f := n.Figures[name]
		if f == nil || math.Abs(f.Band-band) > 0.001 || len(f.Ratios) != 3 {
			t.Errorf("%s: %+v, want band %.3f from 3 ratios", name, f, band)
		}
	}
	if n.Figures["nothing"] != nil {
		t.Errorf("a figure without a ratio has a band: %+v", n.Figures["nothing"])
	}

	// The file round-trips.
	path := filepath.Join(t.TempDir(), "noise.json")
	if err := n.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadNoise(path)
	if err != nil || back.Rounds != 3 || back.Figures["fresh c=64 p99 ms"].Band != n.Figures["fresh c=64 p99 ms"].Band {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if none, err := ReadNoise(filepath.Join(t.TempDir(), "absent.json")); none != nil || err != nil {
		t.Errorf("a missing file: %v, %v; want nil, nil", none, err)
	}
}

// TestRegressions: A is worse when B/A is above 1 + band for a figure
// where higher is better, below 1 / (1 + band) where lower is better;
// within the band, or better, is no regression; a figure no noise run
// measured takes DefaultBand.
func TestRegressions(t *testing.T) {
	noise := &Noise{Figures: map[string]*NoiseFigure{
		"cache throughput": {Band: 0.10},
		"fresh p99":        {Band: 0.20},
		"batch s":          {Band: 0.05},
	}}
	ratios := []Ratio{
		{Figure: "cache throughput", A: 7000, B: 7800, Ratio: 7800.0 / 7000, Better: "higher"}, // B 11 % faster: beyond 10 %
		{Figure: "fresh p99", A: 12, B: 10, Ratio: 10.0 / 12, Better: "lower"},                 // B 20 % lower: within 20 %
		{Figure: "batch s", A: 60, B: 48, Ratio: 0.8, Better: "lower"},                         // B 25 % quicker: beyond 5 %
		{Figure: "batch rate", A: 100, B: 50, Ratio: 0.5, Better: "higher"},                    // A better
		{Figure: "unmeasured CPU", A: 1, B: 0.8, Ratio: 0.8, Better: "lower"},                  // 25 % beyond the default 15 %
		{Figure: "zero", A: 0, B: 3, Better: "lower"},
	}
	got := Regressions(ratios, noise)
	names := make([]string, len(got))
	for i, g := range got {
		names[i] = g.Figure
	}
	want := []string{"batch s", "unmeasured CPU", "cache throughput"}
	if len(got) != len(want) {
		t.Fatalf("regressions %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("regressions %v, want %v (the farthest beyond first)", names, want)
		}
	}
	if g := got[0]; !g.Learned || math.Abs(g.Beyond-(1.25/1.05-1)) > 0.001 {
		t.Errorf("batch s: %+v, want learned, beyond %.3f", g, 1.25/1.05-1)
	}
	if g := got[1]; g.Learned || g.Band != DefaultBand {
		t.Errorf("unmeasured CPU: %+v, want the default band", g)
	}
	if len(Regressions(ratios, nil)) != 3 { // 11 % is within the default 15 %; 25 % twice beyond it; 20 % beyond it
		t.Errorf("without a noise file: %+v", Regressions(ratios, nil))
	}
}

// TestNoiseMerge: bands learned on other scenarios of the same machine
// and mode are kept beside the new ones (a figure both measured is the
// new run's); another machine's are not.
func TestNoiseMerge(t *testing.T) {
	m := Machine{CPUModel: "test CPU", CPUs: 2}
	old := &Noise{Machine: m, Mode: "short", Scenarios: []string{"fresh", "cache"}, Figures: map[string]*NoiseFigure{
		"fresh c=16 p99 ms":        {Better: "lower", Band: 0.1},
		"cache c=256 throughput/s": {Better: "higher", Band: 0.2},
	}}
	n := &Noise{Machine: m, Mode: "short", Scenarios: []string{"fairness", "cache"}, Figures: map[string]*NoiseFigure{
		"fairness B beside A s":    {Better: "lower", Band: 0.9},
		"cache c=256 throughput/s": {Better: "higher", Band: 0.05},
	}}
	if !n.Merge(old) {
		t.Fatal("same machine and mode: not merged")
	}
	if len(n.Figures) != 3 || n.Figures["fresh c=16 p99 ms"].Band != 0.1 || n.Figures["cache c=256 throughput/s"].Band != 0.05 ||
		n.Figures["fairness B beside A s"].Band != 0.9 {
		t.Errorf("merged figures %v", n.Figures)
	}
	if want := []string{"fresh", "cache", "fairness"}; !slices.Equal(n.Scenarios, want) {
		t.Errorf("scenarios %v, want %v", n.Scenarios, want)
	}
	other := &Noise{Machine: Machine{CPUModel: "other CPU", CPUs: 2}, Mode: "short", Figures: map[string]*NoiseFigure{"x": {}}}
	if n.Merge(other) || n.Figures["x"] != nil {
		t.Error("another machine's bands merged")
	}
}
