package storagetest

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Scenarios: the files of testdata/ script the credit arithmetic of
// holds, charges and jobs, in the manner of Pebble's datadriven tests.
// Each block is a command, "----", and the output it must produce: for a
// command that changes credits, the ledger entries it wrote, of every
// account. They run on every backend (Run's subtest Scenarios), so both
// must write the same entries.
//
//	VERIFYD_REWRITE=1 go test -run 'TestContract/Scenarios' ./storage/pebble/
//
// rewrites the expected outputs from what the backend does (then review
// the diff, and run both backends).
//
// Commands (key=value arguments; accounts, holds and jobs are named by
// the script and made on first use):
//
//	add acct= n= [note=]     AddCredits
//	set acct= n= [note=]     SetCredits
//	hold acct= n= as=        Hold, named as
//	charge hold=             Charge of a named hold, with a result
//	release hold= [note=]    Release
//	job acct= n= as=         CreateJob of n addresses, then StartJob
//	results job= n=          PutJobResults of the next n addresses
//	finish job= status=      FinishJob
//	restart                  Backend.Reopen (on PostgreSQL another box
//	                         takes over), then the clock moves 1 s on
//	balance acct=            Credits
//
// The holds a restart releases are written by the store itself, with a
// note of its own: Pebble's "released at open", PostgreSQL's "released:
// its verifyd stopped (boot <id>)". The output shows that note as
// note=<released by the store>: the rule (released, uncharged, at the
// restart) is the same, the text is the backend's.

//go:embed testdata/*.txt
var scenarioFiles embed.FS

// rewriteEnv names the environment variable that makes the scenarios
// rewrite their expected outputs.
const rewriteEnv = "VERIFYD_REWRITE"

func testScenarios(t *testing.T, b backend) {
	files, err := fs.Glob(scenarioFiles, "testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatal("no scenarios", err)
	}
	for _, f := range files {
		t.Run(path.Base(f), func(t *testing.T) { runScenario(t, b, f) })
	}
}

type scenarioBlock struct {
	line     int
	comment  string // the comment lines before the command, kept by a rewrite
	cmd      string
	expected string
}

func parseScenario(t *testing.T, name string, text string) []scenarioBlock {
	var blocks []scenarioBlock
	var comment strings.Builder
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			comment.WriteString(l + "\n")
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		blk := scenarioBlock{line: i + 1, comment: comment.String(), cmd: l}
		comment.Reset()
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ----", name, i+1)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		blk.expected = strings.Join(out, "\n")
		blocks = append(blocks, blk)
	}
	return blocks
}

// scenario is the state of one scenario run.
type scenario struct {
	b        backend
	s        storage.Store
	clock    *Clock
	accounts map[string]string // name → id
	holds    map[string]storage.Hold
	jobs     map[string]string // name → job id
	seen     map[string]uint64 // account name → last ledger seq shown
}

func runScenario(t *testing.T, b backend, name string) {
	text, err := scenarioFiles.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClock()
	s := &scenario{
		b:        b,
		s:        b.Open(t, c),
		clock:    c,
		accounts: map[string]string{},
		holds:    map[string]storage.Hold{},
		jobs:     map[string]string{},
		seen:     map[string]uint64{},
	}
	rewrite := os.Getenv(rewriteEnv) != ""
	var rewritten strings.Builder
	for _, blk := range parseScenario(t, name, string(text)) {
		got := strings.TrimRight(s.run(t, blk.cmd), "\n")
		if rewrite {
			fmt.Fprintf(&rewritten, "%s%s\n----\n%s\n\n", blk.comment, blk.cmd, got)
			continue
		}
		if got != blk.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", name, blk.line, blk.cmd, got, blk.expected)
		}
	}
	if rewrite {
		_, src, _, ok := runtime.Caller(0)
		if !ok {
			t.Fatal("cannot find the scenarios' directory to rewrite them")
		}
		dst := filepath.Join(filepath.Dir(src), filepath.FromSlash(name))
		if err := os.WriteFile(dst, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run executes one command line: a verb and key=value arguments.
func (s *scenario) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	args := map[string]string{}
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	n := func() int64 {
		v, err := strconv.ParseInt(args["n"], 10, 64)
		if err != nil {
			t.Fatalf("%s: n=%q", line, args["n"])
		}
		return v
	}
	acct := func() string {
		name := args["acct"]
		if _, ok := s.accounts[name]; !ok {
			a, err := s.s.CreateAccount(t.Context(), name, storage.PlanFree)
			if err != nil {
				t.Fatal(err)
			}
			s.accounts[name] = a.ID
		}
		return s.accounts[name]
	}
	job := func() string { return s.jobs[args["job"]] }
	ctx := t.Context()
	var err error
	switch f[0] {
	case "add":
		_, err = s.s.AddCredits(ctx, acct(), n(), args["note"])
	case "set":
		_, err = s.s.SetCredits(ctx, acct(), n(), args["note"])
	case "hold":
		var h storage.Hold
		if h, err = s.s.Hold(ctx, acct(), n(), args["as"]); err == nil {
			s.holds[args["as"]] = h
		}
	case "charge":
		_, err = s.s.Charge(ctx, s.holds[args["hold"]], storage.ChargeRequest{Result: result(args["hold"]+"@example.com", "valid")})
	case "release":
		_, err = s.s.Release(ctx, s.holds[args["hold"]], args["note"])
	case "job":
		var j storage.Job
		if j, err = s.s.CreateJob(ctx, storage.JobSpec{Account: acct(), Addresses: Addresses(int(n()))}); err == nil {
			s.jobs[args["as"]] = j.ID
			_, err = s.s.StartJob(ctx, j.ID)
		}
	case "results":
		j, err := s.s.Job(ctx, job())
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		var rs []storage.JobResult
		for i := range int(n()) {
			idx := j.Processed + i
			rs = append(rs, storage.JobResult{Index: idx, Result: result(fmt.Sprintf("user%d@example.com", idx), "valid")})
		}
		if j, err = s.s.PutJobResults(ctx, job(), rs); err == nil {
			return fmt.Sprintf("job %s %s processed=%d/%d\n", args["job"], j.Status, j.Processed, j.Total)
		}
		return s.errorLine(err)
	case "finish":
		_, err = s.s.FinishJob(ctx, job(), storage.JobFinish{Status: storage.JobStatus(args["status"])})
	case "restart":
		s.s = s.b.Reopen(t, s.s)
		s.clock.Advance(time.Second)
		return s.newEntries(t, true)
	case "balance":
		var c storage.Credits
		if c, err = s.s.Credits(ctx, acct()); err == nil {
			return fmt.Sprintf("balance=%d held=%d available=%d\n", c.Balance, c.Held, c.Available())
		}
	default:
		t.Fatalf("unknown command %q", line)
	}
	if err != nil {
		return s.errorLine(err)
	}
	return s.newEntries(t, false)
}

// errorLine prints an error with the scenario's names for the ids.
func (s *scenario) errorLine(err error) string {
	var ice *storage.InsufficientCreditsError
	if errors.As(err, &ice) {
		return fmt.Sprintf("insufficient credits: current=%d held=%d needed=%d shortfall=%d\n", ice.Current, ice.Held, ice.Needed, ice.Shortfall())
	}
	msg := strings.TrimPrefix(err.Error(), "storage: ")
	for name, id := range s.accounts {
		msg = strings.ReplaceAll(msg, id, name)
	}
	for name, id := range s.jobs {
		msg = strings.ReplaceAll(msg, id, name)
	}
	return "error: " + msg + "\n"
}

// newEntries prints the ledger entries written since the last call, of
// every account, named by account name. byStore: the store wrote them
// itself (a restart), and their notes are its own.
func (s *scenario) newEntries(t *testing.T, byStore bool) string {
	var b strings.Builder
	names := make([]string, 0, len(s.accounts))
	for name := range s.accounts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		es, err := s.s.Ledger(t.Context(), s.accounts[name], s.seen[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			fmt.Fprintf(&b, "%s#%d %s amount=%d delta=%d balance=%d held=%d", name, e.Seq, e.Kind, e.Amount, e.Delta, e.Balance, e.Held)
			if e.HoldSeq != 0 {
				fmt.Fprintf(&b, " hold=#%d", e.HoldSeq)
			}
			switch {
			case byStore && e.Note != "":
				b.WriteString(" note=<released by the store>")
			case e.Note != "":
				fmt.Fprintf(&b, " note=%q", e.Note)
			}
			b.WriteString("\n")
			s.seen[name] = e.Seq
		}
	}
	if b.Len() == 0 {
		return "(no entries)\n"
	}
	return b.String()
}
