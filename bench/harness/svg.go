package harness

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Chart is a line chart written as a standalone SVG file: one polyline with
// a dot per point for each series, axes with ticks and labels, a legend,
// and optional vertical guide lines (a target). Made for the harness's
// latency-against-throughput plot; it needs no plotting library.
type Chart struct {
	Title    string
	Subtitle string
	XLabel   string
	YLabel   string
	// LogY draws the y axis in decades (1, 2, 5 × 10^k); values ≤ 0 are
	// left out. Latency percentiles span orders of magnitude, so the
	// harness uses it when max/min > 20.
	LogY   bool
	Series []Series
	// Guides are vertical dashed lines at an x value, labelled.
	Guides []Guide
	// Width and Height in pixels; defaults 1040 × 560.
	Width, Height int
}

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string // any SVG colour; default from a palette
	Dashed bool
	Points []Point
}

// Point is one dot; Label, when set, is written beside it.
type Point struct {
	X, Y  float64
	Label string
}

// Guide is a labelled vertical line.
type Guide struct {
	X     float64
	Label string
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// Plot area margins.
const (
	marginLeft   = 80
	marginRight  = 250
	marginTop    = 64
	marginBottom = 64
)

// WriteSVG writes the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	if c.Width == 0 {
		c.Width = 1040
	}
	if c.Height == 0 {
		c.Height = 560
	}
	x0, x1 := float64(marginLeft), float64(c.Width-marginRight)
	y0, y1 := float64(c.Height-marginBottom), float64(marginTop) // y0 bottom

	// Data ranges.
	xmax, ymin, ymax := 0.0, math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) || (c.LogY && p.Y <= 0) {
				continue
			}
			xmax = math.Max(xmax, p.X)
			ymin = math.Min(ymin, p.Y)
			ymax = math.Max(ymax, p.Y)
		}
	}
	for _, g := range c.Guides {
		if finite(g.X) {
			xmax = math.Max(xmax, g.X)
		}
	}
	if math.IsInf(ymin, 1) { // no points
		ymin, ymax = 1, 10
	}
	xticks := linearTicks(0, xmax*1.05, 6)
	xhi := xticks[len(xticks)-1]
	var yticks []float64
	var ylo, yhi float64
	if c.LogY {
		ylo = math.Pow(10, math.Floor(math.Log10(ymin)))
		yhi = math.Pow(10, math.Ceil(math.Log10(ymax)))
		if yhi <= ylo {
			yhi = ylo * 10
		}
		yticks = logTicks(ylo, yhi)
	} else {
		yticks = linearTicks(0, ymax*1.05, 6)
		ylo, yhi = 0, yticks[len(yticks)-1]
	}
	px := func(x float64) float64 { return x0 + (x1-x0)*x/xhi }
	py := func(y float64) float64 {
		if c.LogY {
			return y0 - (y0-y1)*(math.Log10(y)-math.Log10(ylo))/(math.Log10(yhi)-math.Log10(ylo))
		}
		return y0 - (y0-y1)*(y-ylo)/(yhi-ylo)
	}

	b := bufio.NewWriter(w)
	f := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	f(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		c.Width, c.Height, c.Width, c.Height)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%d" y="26" font-size="17" font-weight="bold">%s</text>`+"\n", marginLeft, esc(c.Title))
	if c.Subtitle != "" {
		f(`<text x="%d" y="46" fill="#555">%s</text>`+"\n", marginLeft, esc(c.Subtitle))
	}

	// Grid and ticks.
	f(`<g class="grid" stroke="#e4e4e4" stroke-width="1">` + "\n")
	for _, t := range xticks {
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(t), y0, px(t), y1)
	}
	for _, t := range yticks {
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, py(t), x1, py(t))
	}
	f("</g>\n")
	f(`<g class="axes" stroke="#333" stroke-width="1.2">` + "\n")
	f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, y0, x1, y0)
	f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, y0, x0, y1)
	for _, t := range xticks {
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(t), y0, px(t), y0+5)
	}
	for _, t := range yticks {
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0-5, py(t), x0, py(t))
	}
	f("</g>\n")
	f(`<g class="tick-labels" fill="#333">` + "\n")
	for _, t := range xticks {
		f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(t), y0+20, esc(formatTick(t)))
	}
	for _, t := range yticks {
		f(`<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-8, py(t), esc(formatTick(t)))
	}
	f("</g>\n")
	f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, c.Height-18, esc(c.XLabel))
	f(`<text transform="translate(22 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(c.YLabel))

	// Guides.
	for _, g := range c.Guides {
		if !finite(g.X) || g.X < 0 {
			continue
		}
		gx := px(g.X)
		f(`<line class="guide" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="6 4"/>`+"\n", gx, y0, gx, y1)
		f(`<text x="%.1f" y="%.1f" fill="#666" font-size="12">%s</text>`+"\n", gx+4, y0-8, esc(g.Label))
	}

	// Series.
	for i, s := range c.Series {
		color := s.Color
		if color == "" {
			color = palette[i%len(palette)]
		}
		var pts []string
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) || (c.LogY && p.Y <= 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.X), py(p.Y)))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="7 4"`
		}
		f(`<g class="series" data-name="%s">`+"\n", esc(s.Name))
		if len(pts) > 1 {
			f(`<polyline fill="none" stroke="%s" stroke-width="2.2"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		}
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) || (c.LogY && p.Y <= 0) {
				continue
			}
			f(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n",
				px(p.X), py(p.Y), color, esc(fmt.Sprintf("%s: %s/s, %s ms %s", s.Name, formatTick(p.X), formatTick(p.Y), p.Label)))
			if p.Label != "" {
				f(`<text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`+"\n", px(p.X)+6, py(p.Y)-6, color, esc(p.Label))
			}
		}
		f("</g>\n")
		// Legend entry.
		ly := float64(marginTop) + 10 + float64(i)*22
		lx := x1 + 20
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.2"%s/>`+"\n", lx, ly, lx+26, ly, color, dash)
		f(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", lx+13, ly, color)
		f(`<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+34, ly, esc(s.Name))
	}
	f("</svg>\n")
	return b.Flush()
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// linearTicks returns about n round ticks (1, 2 or 5 × 10^k apart) from lo
// to at least hi.
func linearTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	mant, exp := niceStep((hi - lo) / float64(n-1))
	// Tick k is k·mant·10^exp, computed so that 0.1 steps give 0.3, not
	// 0.30000000000000004.
	tick := func(k int64) float64 {
		if exp < 0 {
			return float64(k*mant) / math.Pow(10, float64(-exp))
		}
		return float64(k*mant) * math.Pow(10, float64(exp))
	}
	step := tick(1)
	var t []float64
	for k := int64(math.Floor(lo / step)); ; k++ {
		v := tick(k)
		t = append(t, v)
		if v >= hi-step*1e-9 {
			break
		}
	}
	return t
}

// niceStep returns the round step (mant·10^exp, mant 1, 2 or 5) at or
// above raw.
func niceStep(raw float64) (mant int64, exp int) {
	exp = int(math.Floor(math.Log10(raw)))
	switch m := raw / math.Pow(10, float64(exp)); {
	case m <= 1.000001:
		return 1, exp
	case m <= 2:
		return 2, exp
	case m <= 5:
		return 5, exp
	default:
		return 1, exp + 1
	}
}

// logTicks returns 1, 2, 5 × 10^k from lo to hi (both powers of ten).
func logTicks(lo, hi float64) []float64 {
	var t []float64
	for d := lo; d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := d * m; v <= hi*1.0001 {
				t = append(t, v)
			}
		}
	}
	return t
}

// formatTick writes 1234567 as "1,234,567", 0.25 as "0.25".
func formatTick(v float64) string {
	if v != math.Trunc(v) || math.Abs(v) < 1 && v != 0 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return groupThousands(int64(v))
}

// groupThousands writes n with comma separators.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
