package harness

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgDots parses an SVG, failing on malformed XML, and returns the centres
// of the series' dots (circles inside <g class="series">) and the texts.
func svgDots(t *testing.T, b []byte) (dots [][2]float64, texts []string, width, height float64) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	depthSeries := 0
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch e.Name.Local {
			case "svg":
				width, _ = strconv.ParseFloat(attr["width"], 64)
				height, _ = strconv.ParseFloat(attr["height"], 64)
				if e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("svg namespace %q", e.Name.Space)
				}
			case "g":
				if attr["class"] == "series" || depthSeries > 0 {
					depthSeries++
				}
			case "circle":
				if depthSeries > 0 {
					x, errx := strconv.ParseFloat(attr["cx"], 64)
					y, erry := strconv.ParseFloat(attr["cy"], 64)
					if errx != nil || erry != nil {
						t.Fatalf("circle %v", attr)
					}
					dots = append(dots, [2]float64{x, y})
				}
			case "text":
				inText = true
			}
		case xml.EndElement:
			if e.Name.Local == "g" && depthSeries > 0 {
				depthSeries--
			}
			if e.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(e))
			}
		}
	}
	return dots, texts, width, height
}

func TestChartSVGWellFormedAndInRange(t *testing.T) {
	for _, logY := range []bool{false, true} {
		c := Chart{
			Title: "latency <against> throughput & more", XLabel: "probes/s", YLabel: "ms", LogY: logY,
			Series: []Series{
				{Name: "p50", Points: []Point{{100, 120, "c=16"}, {800, 130, "c=64"}, {1600, 180, "c=256"}, {1700, 900, "c=1024"}}},
				{Name: "p99", Dashed: true, Points: []Point{{100, 300, ""}, {800, 350, ""}, {1600, 800, ""}, {1700, 5100, ""}}},
			},
			Guides: []Guide{{X: 1500, Label: "target 1,500/s"}},
		}
		var b bytes.Buffer
		if err := c.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		dots, texts, w, h := svgDots(t, b.Bytes())
		if w != 1040 || h != 560 {
			t.Errorf("size %vx%v", w, h)
		}
		if len(dots) != 8 {
			t.Fatalf("%d dots, want 8", len(dots))
		}
		left, right := float64(marginLeft), w-marginRight
		top, bottom := float64(marginTop), h-marginBottom
		for _, d := range dots {
			if d[0] < left || d[0] > right || d[1] < top || d[1] > bottom {
				t.Errorf("log=%v: dot %v outside the plot area [%v,%v]x[%v,%v]", logY, d, left, right, top, bottom)
			}
		}
		// Higher throughput is further right, higher latency further up.
		if !(dots[0][0] < dots[1][0] && dots[1][0] < dots[2][0]) {
			t.Errorf("x not increasing: %v", dots[:4])
		}
		if !(dots[3][1] < dots[0][1]) || !(dots[7][1] < dots[3][1]) {
			t.Errorf("y not decreasing with latency: %v", dots)
		}
		joined := strings.Join(texts, "|")
		for _, want := range []string{"latency <against> throughput & more", "probes/s", "c=1024", "target 1,500/s", "p99"} {
			if !strings.Contains(joined, want) {
				t.Errorf("log=%v: no text %q in %q", logY, want, joined)
			}
		}
	}
}

func TestChartSVGDegenerate(t *testing.T) {
	// No points, a NaN, a zero on a log axis: still a well-formed file.
	for _, c := range []Chart{
		{Title: "empty"},
		{Title: "odd", LogY: true, Series: []Series{{Name: "s", Points: []Point{{math.NaN(), 1, ""}, {10, 0, ""}, {20, 5, ""}}}}},
		{Title: "one", Series: []Series{{Name: "s", Points: []Point{{0, 0, ""}}}}},
	} {
		var b bytes.Buffer
		if err := c.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		dots, _, w, h := svgDots(t, b.Bytes())
		for _, d := range dots {
			if math.IsNaN(d[0]) || math.IsNaN(d[1]) || d[0] < 0 || d[0] > w || d[1] < 0 || d[1] > h {
				t.Errorf("%s: dot %v", c.Title, d)
			}
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		hi   float64
		want string
	}{
		{1785, "0,500,1000,1500,2000"},
		{9.5, "0,2,4,6,8,10"},
		{0.5, "0,0.1,0.2,0.3,0.4,0.5"},
	} {
		var s []string
		for _, v := range linearTicks(0, tc.hi, 6) {
			s = append(s, strconv.FormatFloat(v, 'g', -1, 64))
		}
		if got := strings.Join(s, ","); got != tc.want {
			t.Errorf("ticks to %v: %s, want %s", tc.hi, got, tc.want)
		}
	}
	if got := logTicks(10, 1000); len(got) != 7 || got[0] != 10 || got[6] != 1000 {
		t.Errorf("log ticks %v", got)
	}
	if formatTick(1500) != "1,500" || formatTick(0.25) != "0.25" || formatTick(1234567) != "1,234,567" || formatTick(-2000) != "-2,000" {
		t.Errorf("formatTick: %s %s %s %s", formatTick(1500), formatTick(0.25), formatTick(1234567), formatTick(-2000))
	}
}
