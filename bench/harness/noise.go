package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"
)

// The noise band of a figure is how far B/A strays when A and B are the
// same binary: runs on a shared machine differ by tens of percent, and a
// ratio inside that spread says nothing. verifybench -noise N runs one
// binary against itself N times and keeps, per figure, every round's
// ratio and the band learned from them (Noise, bench/results/noise.json);
// -compare then reports every figure whose ratio lies beyond its band on
// the worse side (Regressions).
const (
	// MinBand is the narrowest band: a few figures (an agreement, a
	// count) do not move between runs of one binary, and a change of a
	// fraction of a percent in a throughput is no finding either.
	MinBand = 0.02
	// DefaultBand is the band of a figure no noise run measured.
	DefaultBand = 0.15
	// bandWidening widens the largest deviation seen: N rounds see
	// less than the whole spread, the fewer the less.
	bandWidening = 1.25
)

// Noise is the noise bands learned on one machine.
type Noise struct {
	Schema    int       `json:"schema"`
	CreatedAt time.Time `json:"created_at"`
	Command   string    `json:"command,omitempty"`
	Machine   Machine   `json:"machine"`
	Mode      string    `json:"mode"`
	Scenarios []string  `json:"scenarios,omitempty"`
	Binary    string    `json:"binary"`
	Rounds    int       `json:"rounds"`
	// Figures by name: each round's B/A and the band.
	Figures map[string]*NoiseFigure `json:"figures"`
}

// NoiseFigure is one figure's ratios over the rounds and its band: a
// ratio r is noise when |ln r| <= ln(1+Band).
type NoiseFigure struct {
	Better string    `json:"better"`
	Ratios []float64 `json:"ratios"`
	Band   float64   `json:"band"`
}

// LearnNoise makes the bands from the results of runs of one binary
// against itself: per figure, the largest |ln B/A| of the rounds, widened
// by a quarter, and at least MinBand.
func LearnNoise(results []*Result) *Noise {
	n := &Noise{Schema: 1, CreatedAt: time.Now().UTC(), Figures: map[string]*NoiseFigure{}}
	for _, res := range results {
		if res == nil {
			continue
		}
		n.Rounds++
		n.Machine, n.Mode = res.Machine, res.Mode
		if len(res.Runs) > 0 {
			n.Binary = res.Runs[0].Binary
		}
		for _, r := range res.Ratios {
			if r.A == 0 || r.Ratio <= 0 {
				continue
			}
			f := n.Figures[r.Figure]
			if f == nil {
				f = &NoiseFigure{Better: r.Better}
				n.Figures[r.Figure] = f
			}
			f.Ratios = append(f.Ratios, r.Ratio)
		}
	}
	for _, f := range n.Figures {
		dev := 0.0
		for _, r := range f.Ratios {
			dev = math.Max(dev, math.Abs(math.Log(r)))
		}
		f.Band = round3(math.Max(MinBand, math.Exp(bandWidening*dev)-1))
	}
	return n
}

// Merge keeps the bands of old that n did not learn, when old was learned
// on the same machine and mode: the bands of scenarios learned in several
// runs (the short ones together, a slow one alone) add up in one file. A
// figure both learned is n's. It reports whether old was merged.
func (n *Noise) Merge(old *Noise) bool {
	if old == nil || old.Machine.CPUModel != n.Machine.CPUModel || old.Machine.CPUs != n.Machine.CPUs || old.Mode != n.Mode {
		return false
	}
	for name, f := range old.Figures {
		if _, ok := n.Figures[name]; !ok {
			n.Figures[name] = f
		}
	}
	scenarios := slices.Clone(old.Scenarios)
	for _, s := range n.Scenarios {
		if !slices.Contains(scenarios, s) {
			scenarios = append(scenarios, s)
		}
	}
	n.Scenarios = scenarios
	return true
}

// ReadNoise reads a noise file; a missing file is (nil, nil).
func ReadNoise(path string) (*Noise, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n Noise
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n.Schema != 1 {
		return nil, fmt.Errorf("%s: schema %d, want 1", path, n.Schema)
	}
	return &n, nil
}

// Write writes the noise file.
func (n *Noise) Write(path string) error {
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Regression is a figure whose B/A lies beyond its noise band on A's
// worse side: A (the binary under test) did worse than B (the one it is
// compared with) by more than runs of one binary differ.
type Regression struct {
	Figure string  `json:"figure"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Ratio  float64 `json:"b_over_a"`
	Better string  `json:"better"`
	// Band is the figure's noise band; Learned is false when no noise
	// run measured the figure (DefaultBand).
	Band    float64 `json:"band"`
	Learned bool    `json:"learned"`
	// Beyond is how far A is worse than the band allows, as a fraction
	// (0.10: 10 % past the edge of the band).
	Beyond float64 `json:"beyond"`
}

// Regressions lists the ratios worse than their bands, the farthest
// beyond first. noise may be nil (every band DefaultBand). A figure
// where A is 0 has no ratio and is left out.
func Regressions(ratios []Ratio, noise *Noise) []Regression {
	var out []Regression
	for _, r := range ratios {
		if r.A == 0 || r.Ratio <= 0 {
			continue
		}
		band, learned := DefaultBand, false
		if noise != nil {
			if f := noise.Figures[r.Figure]; f != nil {
				band, learned = f.Band, true
			}
		}
		// How much better B is than A, as a factor above 1.
		var bBetter float64
		switch r.Better {
		case "higher":
			bBetter = r.Ratio
		case "lower":
			bBetter = 1 / r.Ratio
		default:
			continue
		}
		if bBetter <= 1+band {
			continue
		}
		out = append(out, Regression{Figure: r.Figure, A: r.A, B: r.B, Ratio: r.Ratio, Better: r.Better,
			Band: band, Learned: learned, Beyond: round3(bBetter/(1+band) - 1)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Beyond > out[j].Beyond })
	return out
}

// NoiseMismatch says why bands learned elsewhere may not fit this run:
// another machine, mode or set of scenarios; "" when they fit.
func NoiseMismatch(n *Noise, res *Result, scenarios []string) string {
	switch {
	case n == nil:
		return ""
	case n.Machine.CPUModel != res.Machine.CPUModel || n.Machine.CPUs != res.Machine.CPUs:
		return fmt.Sprintf("the bands were learned on %s (%d CPUs), this run is on %s (%d CPUs)",
			n.Machine.CPUModel, n.Machine.CPUs, res.Machine.CPUModel, res.Machine.CPUs)
	case n.Mode != res.Mode:
		return fmt.Sprintf("the bands were learned in %s mode, this run is %s", n.Mode, res.Mode)
	case !slices.Equal(n.Scenarios, scenarios):
		return fmt.Sprintf("the bands were learned on scenarios %v, this run has %v", n.Scenarios, scenarios)
	}
	return ""
}
