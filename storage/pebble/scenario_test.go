package pebble

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// Scenario files in testdata/ script the credit arithmetic, in the manner
// of Pebble's datadriven tests: each block is a command, "----", and the
// output it must produce, which for a command that changes credits is the
// ledger entries it wrote. go test -run TestScenarios -rewrite rewrites the
// expected outputs from what the code does (then review the diff).

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scenarios")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatal("no scenarios", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScenario(t, f) })
	}
}

type scenarioBlock struct {
	line     int
	comment  string // the comment lines before the command, kept by -rewrite
	cmd      string
	expected string
}

func parseScenario(t *testing.T, path string) []scenarioBlock {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []scenarioBlock
	var comment strings.Builder
	lines := strings.Split(string(b), "\n")
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
			t.Fatalf("%s:%d: command without ----", path, i+1)
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
	db       *testDB
	accounts map[string]string // name → id
	holds    map[string]storage.Hold
	jobs     map[string]string // name → job id
	seen     map[string]uint64 // account name → last ledger seq shown
}

func runScenario(t *testing.T, path string) {
	s := &scenario{
		db:       openTest(t),
		accounts: map[string]string{},
		holds:    map[string]storage.Hold{},
		jobs:     map[string]string{},
		seen:     map[string]uint64{},
	}
	blocks := parseScenario(t, path)
	var rewritten strings.Builder
	for _, blk := range blocks {
		got := strings.TrimRight(s.run(t, blk.cmd), "\n")
		if *rewrite {
			fmt.Fprintf(&rewritten, "%s%s\n----\n%s\n\n", blk.comment, blk.cmd, got)
			continue
		}
		if got != blk.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, blk.line, blk.cmd, got, blk.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
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
			a, err := s.db.CreateAccount(t.Context(), name, storage.PlanFree)
			if err != nil {
				t.Fatal(err)
			}
			s.accounts[name] = a.ID
		}
		return s.accounts[name]
	}
	job := func() string { return s.jobs[args["job"]] }
	var err error
	switch f[0] {
	case "add":
		_, err = s.db.AddCredits(t.Context(), acct(), n(), args["note"])
	case "set":
		_, err = s.db.SetCredits(t.Context(), acct(), n(), args["note"])
	case "hold":
		var h storage.Hold
		if h, err = s.db.Hold(t.Context(), acct(), n(), args["as"]); err == nil {
			s.holds[args["as"]] = h
		}
	case "charge":
		_, err = s.db.Charge(t.Context(), s.holds[args["hold"]], storage.ChargeRequest{Result: result(args["hold"]+"@example.com", "valid")})
	case "release":
		_, err = s.db.Release(t.Context(), s.holds[args["hold"]], args["note"])
	case "job":
		addrs := addresses(int(n()))
		var j storage.Job
		if j, err = s.db.CreateJob(t.Context(), storage.JobSpec{Account: acct(), Addresses: addrs}); err == nil {
			s.jobs[args["as"]] = j.ID
			_, err = s.db.StartJob(t.Context(), j.ID)
		}
	case "results":
		j, _ := s.db.Job(t.Context(), job())
		var rs []storage.JobResult
		for i := 0; i < int(n()); i++ {
			idx := j.Processed + i
			rs = append(rs, storage.JobResult{Index: idx, Result: result(fmt.Sprintf("user%d@example.com", idx), "valid")})
		}
		if j, err = s.db.PutJobResults(t.Context(), job(), rs); err == nil {
			return fmt.Sprintf("job %s %s processed=%d/%d\n", args["job"], j.Status, j.Processed, j.Total)
		}
	case "finish":
		_, err = s.db.FinishJob(t.Context(), job(), storage.JobFinish{Status: storage.JobStatus(args["status"])})
	case "restart":
		s.db.reopen(t)
		s.db.clock.Advance(time.Second)
	case "balance":
		var c storage.Credits
		if c, err = s.db.Credits(t.Context(), acct()); err == nil {
			return fmt.Sprintf("balance=%d held=%d available=%d\n", c.Balance, c.Held, c.Available())
		}
	default:
		t.Fatalf("unknown command %q", line)
	}
	if err != nil {
		var ice *storage.InsufficientCreditsError
		if errors.As(err, &ice) {
			return fmt.Sprintf("insufficient credits: current=%d held=%d needed=%d shortfall=%d\n", ice.Current, ice.Held, ice.Needed, ice.Shortfall())
		}
		// Ids are random: show the scenario's names instead.
		msg := strings.TrimPrefix(err.Error(), "storage: ")
		for name, id := range s.accounts {
			msg = strings.ReplaceAll(msg, id, name)
		}
		for name, id := range s.jobs {
			msg = strings.ReplaceAll(msg, id, name)
		}
		return "error: " + msg + "\n"
	}
	return s.newEntries(t)
}

// newEntries prints the ledger entries written since the last call, of
// every account, named by account name.
func (s *scenario) newEntries(t *testing.T) string {
	var b strings.Builder
	names := make([]string, 0, len(s.accounts))
	for name := range s.accounts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		es, err := s.db.Ledger(t.Context(), s.accounts[name], s.seen[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			fmt.Fprintf(&b, "%s#%d %s amount=%d delta=%d balance=%d held=%d", name, e.Seq, e.Kind, e.Amount, e.Delta, e.Balance, e.Held)
			if e.HoldSeq != 0 {
				fmt.Fprintf(&b, " hold=#%d", e.HoldSeq)
			}
			if e.Note != "" {
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
