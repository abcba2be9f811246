package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// soakHeading starts the soak's section of RESULTS.md; the section runs to
// the next "## " heading.
const soakHeading = "## Soak"

// soakBefore are the headings of RESULTS.md the soak's section goes
// before, the first found; without any, it goes at the end.
var soakBefore = []string{"## Comparison: B / A", "## Notes", "## verifyd's configuration"}

// sectionBounds returns where the section whose heading line starts with
// heading begins and ends in doc; ok is false when there is none.
func sectionBounds(doc, heading string) (start, end int, ok bool) {
	start = headingAt(doc, heading, 0)
	if start < 0 {
		return 0, 0, false
	}
	end = headingAt(doc, "## ", start+1)
	if end < 0 {
		end = len(doc)
	}
	return start, end, true
}

// headingAt is the offset of the first line at or after from that starts
// with prefix, or -1. Lines of fenced code blocks are not headings.
func headingAt(doc, prefix string, from int) int {
	fenced := false
	for i := 0; i < len(doc); {
		end := len(doc)
		if j := strings.IndexByte(doc[i:], '\n'); j >= 0 {
			end = i + j
		}
		line := doc[i:end]
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		} else if !fenced && i >= from && strings.HasPrefix(line, prefix) {
			return i
		}
		i = end + 1
	}
	return -1
}

// extractSection returns the section of doc under heading, or "".
func extractSection(doc, heading string) string {
	start, end, ok := sectionBounds(doc, heading)
	if !ok {
		return ""
	}
	return doc[start:end]
}

// spliceSection puts section into doc: in place of the one under heading,
// or before the first of soakBefore, or at the end.
func spliceSection(doc, heading, section string) string {
	if !strings.HasSuffix(section, "\n\n") {
		section = strings.TrimRight(section, "\n") + "\n\n"
	}
	if start, end, ok := sectionBounds(doc, heading); ok {
		if end == len(doc) {
			section = strings.TrimRight(section, "\n") + "\n"
		}
		return doc[:start] + section + doc[end:]
	}
	for _, h := range soakBefore {
		if i := headingAt(doc, h, 0); i >= 0 {
			return doc[:i] + section + doc[i:]
		}
	}
	if strings.TrimSpace(doc) == "" {
		doc = "# verifybench results\n\n"
	} else if !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + strings.TrimRight(section, "\n") + "\n"
}

// writeSoakSection writes the soak's section of RESULTS.md.
func writeSoakSection(w io.Writer, res *Result, jsonRel, plotRel string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	s := res.Soak
	length := time.Duration(s.Seconds * float64(time.Second))
	warm := time.Duration(s.WarmupSeconds * float64(time.Second))
	p("%s: %s of steady mixed load\n\n", soakHeading, fmtLength(length))
	p("Written by `verifybench -soak` (bench/README.md, \"Soak\"), which replaces this section only: the sections around it are the last run of the scenarios'.\n\n")
	m := res.Machine
	p("| | |\n|---|---|\n")
	p("| date | %s (%s of load; %s with the setup and the drain) |\n", res.StartedAt.Format("2006-01-02 15:04:05 UTC"), fmtLength(length), (time.Duration(res.Seconds * float64(time.Second))).Round(time.Second))
	p("| command | `%s` |\n", res.Command)
	p("| machine | %s, %d CPUs, %.1f GiB RAM, Linux %s, %s |\n", orDash(m.CPUModel), m.CPUs, float64(m.MemTotal)/(1<<30), orDash(m.Kernel), m.GoVersion)
	if res.Git != "" {
		p("| code | %s |\n", res.Git)
	}
	wo := res.World.Options
	p("| world | %s domains (seed %d), %s hosts, %s addresses; %s before every SMTP reply; STARTTLS %.0f %%, catch-all %.0f %%, greylisting %.0f %%, tarpits %.0f %%, auth records %.0f %% |\n",
		itoa(res.World.Domains), wo.Seed, itoa(res.World.Hosts), itoa(res.World.Addresses), fmtDur(wo.Latency), 100*wo.STARTTLS, 100*wo.CatchAll, 100*wo.Greylist, 100*wo.Tarpit, 100*wo.Auth)
	for _, run := range res.Runs {
		built := ""
		if run.Built {
			built = " (built from this tree by the harness)"
		}
		p("| verifyd | `%s`%s: one box on Pebble |\n", run.Binary, built)
	}
	p("| result | [`%s`](%s) |\n\n", filepath.Base(jsonRel), jsonRel)

	l := s.Load
	retry := make([]string, len(l.HookRetry))
	for i, d := range l.HookRetry {
		retry[i] = fmtDur(time.Duration(d * float64(time.Second)))
	}
	p("**The load**, steady for %s: fresh single validations (`POST /v1/validate`) at %s a second, cycling over the world's addresses; `cache: true` validations at %s a second of addresses the singles validated (verdicts other than unknown); a batch of %s addresses every %s, polled every 500 ms to its end and its CSV downloaded, with a `webhookUrl` on a receiver the harness runs on loopback (`webhooks.allow_private`), which answers 500 to %.0f %% of the attempts at random so that verifyd retries (`webhooks.retry_schedule` %s; `jobs.retry_window` %s). The singles are sent at their pace whatever the answers' latency, at most %d of each kind in flight.\n\n",
		fmtLength(length), ftoa(l.FreshPerSecond), ftoa(l.CachePerSecond), itoa(l.BatchSize), fmtLength(time.Duration(l.BatchEverySec*float64(time.Second))),
		100*l.HookFail, strings.Join(retry, ", "), fmtLength(time.Duration(l.RetryWindowSec*float64(time.Second))), l.InFlight)
	p("**The samples**, every %s from the load's start: verifyd's `VmRSS` (`/proc/<pid>/status`), the entries of `/proc/<pid>/fd`, `go_goroutines` from its `/metrics`, and Pebble's size on disk, the sum of the file sizes under `<data_dir>/db` (`du -b`, the write-ahead log included; once Pebble recycles the log's files it moves in steps, at memtable flushes; Pebble's own `verifyd_storage_pebble_disk_usage_bytes`, in the JSON, lags it until then). The first %s are the warm-up and are left out of the table. *Slope* is the least-squares line's through the samples after the warm-up, per hour; *growth* is the slope times the soak's length (%s). A metric is **flat** when its growth is at most %.0f %% of its median after the warm-up, or the metric's floor when that is larger (%s): a leak shows as a steady slope, a cache filling up to its bound as a rise that levels off.\n\n",
		fmtDur(time.Duration(s.SampleSeconds*float64(time.Second))), fmtLength(warm), fmtLength(length), 100*s.Tolerance, soakFloors())
	if s.Error != "" {
		p("**Error:** %s\n\n", oneLine(s.Error))
	}
	p("**Verdict: %s.**\n\n", s.Verdict)
	p("| metric | first after warm-up | median | max | last | slope /h | growth over %s | tolerance | flat |\n", fmtLength(length))
	p("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range s.Metrics {
		name := f.Name
		if f.Unit != "" {
			name += ", " + f.Unit
		}
		flat := "**no**"
		if f.Flat {
			flat = "yes"
		}
		if f.Samples < 3 {
			flat = "—"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, fmtNum(f.First), fmtNum(f.Median), fmtNum(f.Max), fmtNum(f.Last),
			signed(f.SlopePerHour), signed(f.Growth), fmtNum(f.Tolerance), flat)
	}
	p("\n")
	if plotRel != "" {
		p("![the soak's samples](%s)\n\n", plotRel)
	}
	if first, last, ok := soakEnds(s.Samples, s.WarmupSeconds); ok {
		p("Beside them, first after the warm-up → last: Go heap in use %s → %s MB, what the Go runtime holds from the OS %s → %s MB (RSS beyond it is mostly memory allocated outside Go: Pebble's block cache and memtables, with cgo), the `cache: true` memo %s → %s MB, the resolver's cache %s → %s entries, Pebble's own `verifyd_storage_pebble_disk_usage_bytes` %s → %s MB",
			fmtNum(first.HeapInuseMB), fmtNum(last.HeapInuseMB), fmtNum(first.GoHeldMB), fmtNum(last.GoHeldMB), fmtNum(first.MemoMB), fmtNum(last.MemoMB),
			fmtNum(first.ResolverEntries), fmtNum(last.ResolverEntries), fmtNum(first.PebbleMetricMB), fmtNum(last.PebbleMetricMB))
		if s.DiskPerRecord > 0 {
			p("; Pebble grew %s bytes a record stored (an answered validation or a batch address)", fmtNum(s.DiskPerRecord))
		}
		p(". verifyd used %.2f cores over the load (%s CPU-s), the world %.2f.\n\n", s.Verifyd.Cores, fmtNum(s.Verifyd.CPUSeconds), s.World.Cores)
	}

	p("### Requests\n\n")
	p("| kind | sent | ok | errors | not sent (in-flight bound) | p50 ms | p99 ms | max ms |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range s.Kinds {
		nerr := 0
		for _, n := range k.Errors {
			nerr += n
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", k.Kind, itoa(int(k.Sent)), itoa(int(k.OK)), itoa(nerr), itoa(int(k.NotSent)),
			fmtNum(k.Latency.P50), fmtNum(k.Latency.P99), fmtNum(k.Latency.Max))
	}
	p("\nA batch job's latency is from its upload to its end; its errors are jobs that failed or had not ended when the soak stopped waiting.\n\n")
	for _, k := range s.Kinds {
		if len(k.Errors) > 0 {
			p("Errors of %s:%s\n\n", k.Kind, strings.TrimPrefix(errSummary(k.Errors), ";"))
		}
	}
	h := s.Webhooks
	var evs []string
	for _, typ := range sortedKeys(h.Events) {
		evs = append(evs, fmt.Sprintf("%s %s", itoa(h.Events[typ]), typ))
	}
	p("**Webhooks.** %s attempts reached the receiver: %s answered 500 on purpose, %s accepted; %s events (%s), %s of them accepted after a retry, %s accepted twice. %s jobs ended, each owing an event: %s had none accepted when the soak stopped waiting (%s after the last job ended).",
		itoa(h.Attempts), itoa(h.Answered500), itoa(h.Accepted), itoa(sumCounts(h.Events)), orDash(strings.Join(evs, ", ")), itoa(h.Retried), itoa(h.Duplicates),
		itoa(h.JobsEnded), itoa(len(h.Missing)), fmtDur(soakHookGrace))
	if len(h.Verifyd) > 0 {
		var vs []string
		for _, k := range sortedKeys(h.Verifyd) {
			vs = append(vs, fmt.Sprintf("`%s` %s", k, itoa(int(h.Verifyd[k]))))
		}
		p(" verifyd's counters: %s.", strings.Join(vs, ", "))
	}
	p("\n\n")
	p("<details><summary>verifyd's configuration for the soak</summary>\n\n```toml\n%s```\n\n</details>\n\n", res.Settings.Verifyd)
}

// soakFloors lists the metrics' floors.
func soakFloors() string {
	var out []string
	for _, m := range soakMetrics {
		name := strings.SplitN(m.name, " (", 2)[0]
		if m.unit != "" {
			name = m.unit + " of " + name
		}
		out = append(out, ftoa(m.floor)+" "+name)
	}
	return strings.Join(out, ", ")
}

// soakEnds are the first sample after the warm-up and the last.
func soakEnds(samples []SoakSample, warm float64) (first, last SoakSample, ok bool) {
	for _, s := range samples {
		if s.T < warm {
			continue
		}
		if !ok {
			first, ok = s, true
		}
		last = s
	}
	return first, last, ok
}

func signed(f float64) string {
	if f > 0 {
		return "+" + fmtNum(f)
	}
	return fmtNum(f)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// writeSoakPlot draws each metric over the soak, over its median after
// the warm-up, so the four share one axis.
func writeSoakPlot(path string, res *Result) error {
	s := res.Soak
	c := Chart{
		Title:  "verifyd soak: each metric over its median after the warm-up (in the legend)",
		XLabel: "minutes since the load started",
		YLabel: "value / median after warm-up",
		Guides: []Guide{{X: s.WarmupSeconds / 60, Label: "end of warm-up"}},
	}
	c.Subtitle = fmt.Sprintf("%s, %s of steady mixed load, a sample every %s; verdict in bench/RESULTS.md, \"Soak\"",
		res.StartedAt.Format("2006-01-02 15:04 UTC"), fmtLength(time.Duration(s.Seconds*float64(time.Second))), fmtDur(time.Duration(s.SampleSeconds*float64(time.Second))))
	for i, m := range soakMetrics {
		var med float64
		for _, f := range s.Metrics {
			if f.Key == m.key {
				med = f.Median
			}
		}
		if med <= 0 {
			continue
		}
		short := map[string]string{"pebble_disk": "Pebble"}[m.key]
		if short == "" {
			short = strings.SplitN(m.name, " (", 2)[0]
		}
		ser := Series{Name: fmt.Sprintf("%s (%s%s)", short, fmtNum(med), unitSuffix(m.unit)), Color: palette[i%len(palette)]}
		for _, smp := range s.Samples {
			if v, ok := m.get(smp); ok {
				ser.Points = append(ser.Points, Point{X: smp.T / 60, Y: v / med})
			}
		}
		c.Series = append(c.Series, ser)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
