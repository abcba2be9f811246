package harness

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/verifyd/verifyd/bench/world"
)

// Verdicts in the order the matrices list them (spec §2.3).
var verdictOrder = []string{"valid", "invalid", "risky", "unknown", "disposable", "spamtrap"}

// Confusion is a confusion matrix of verdicts: how often the world expected
// one verdict (row) and verifyd gave another (column), with the agreement on
// checks.reason beside it when reasons were compared.
type Confusion struct {
	// Labels name the rows and the columns, in order: the verdicts of
	// spec §2.3, then any other value seen, sorted.
	Labels []string `json:"labels"`
	// Counts[i][j] is how many addresses expected Labels[i] got Labels[j].
	Counts [][]int `json:"counts"`
	// Total is the number of addresses compared, Agree those whose verdict
	// matched.
	Total int `json:"total"`
	Agree int `json:"agree"`
	// ReasonTotal and ReasonAgree count the addresses whose checks.reason
	// was compared too, and those where verdict and reason both matched.
	ReasonTotal int `json:"reason_total,omitempty"`
	ReasonAgree int `json:"reason_agree,omitempty"`
	// Mismatches are up to 20 examples of disagreement, for the report.
	Mismatches []Mismatch `json:"mismatches,omitempty"`
	// MismatchKinds counts disagreements by "expected status/reason →
	// got status/reason".
	MismatchKinds map[string]int `json:"mismatch_kinds,omitempty"`
	// Groups tallies the addresses by the world's Expectation.Group (the
	// real-world profile labels each address with the kind of server and
	// mailbox it was made for); nil when the world labels none.
	Groups map[string]*GroupTally `json:"groups,omitempty"`
}

// GroupTally is the agreement within one group of addresses.
type GroupTally struct {
	// Expected is the world's verdict (status/reason) for the group, or
	// "mixed" when its addresses expect different ones.
	Expected string `json:"expected"`
	Total    int    `json:"total"`
	Agree    int    `json:"agree"`
	// ReasonAgree counts verdict and reason both agreeing, when reasons
	// were compared.
	ReasonAgree int `json:"reason_agree"`
}

// Mismatch is one address where verifyd and the world disagree.
type Mismatch struct {
	Email          string `json:"email"`
	ExpectedStatus string `json:"expected_status"`
	ExpectedReason string `json:"expected_reason,omitempty"`
	GotStatus      string `json:"got_status"`
	GotReason      string `json:"got_reason,omitempty"`
}

const maxMismatchExamples = 20

// NewConfusion returns an empty matrix over the verdicts of spec §2.3.
func NewConfusion() *Confusion {
	c := &Confusion{Labels: slices.Clone(verdictOrder), MismatchKinds: map[string]int{}}
	c.Counts = make([][]int, len(c.Labels))
	for i := range c.Counts {
		c.Counts[i] = make([]int, len(c.Labels))
	}
	return c
}

// index returns the row and column of label, adding it when new (the
// matrix stays square).
func (c *Confusion) index(label string) int {
	if i := slices.Index(c.Labels, label); i >= 0 {
		return i
	}
	c.Labels = append(c.Labels, label)
	for i := range c.Counts {
		c.Counts[i] = append(c.Counts[i], 0)
	}
	c.Counts = append(c.Counts, make([]int, len(c.Labels)))
	// Keep the spec's verdicts first and the others sorted after them.
	extra := c.Labels[len(verdictOrder):]
	if !slices.IsSorted(extra) {
		c.resort()
	}
	return slices.Index(c.Labels, label)
}

func (c *Confusion) resort() {
	old := slices.Clone(c.Labels)
	oldCounts := c.Counts
	slices.Sort(c.Labels[len(verdictOrder):])
	pos := make([]int, len(old)) // old index -> new index
	for i, l := range old {
		pos[i] = slices.Index(c.Labels, l)
	}
	c.Counts = make([][]int, len(c.Labels))
	for i := range c.Counts {
		c.Counts[i] = make([]int, len(c.Labels))
	}
	for i := range oldCounts {
		for j, n := range oldCounts[i] {
			c.Counts[pos[i]][pos[j]] = n
		}
	}
}

// Add counts one address by verdict only.
func (c *Confusion) Add(email, expected, got string) {
	c.add(email, "", expected, "", got, "", false)
}

// AddWithReason counts one address by verdict and checks.reason.
func (c *Confusion) AddWithReason(email, expStatus, expReason, gotStatus, gotReason string) {
	c.add(email, "", expStatus, expReason, gotStatus, gotReason, true)
}

// AddExpected counts one address against the world's expectation e, in
// e's group, by verdict and, withReason, by checks.reason.
func (c *Confusion) AddExpected(e world.Expectation, gotStatus, gotReason string, withReason bool) {
	c.add(e.Email, e.Group, e.Status, e.Reason, gotStatus, gotReason, withReason)
}

func (c *Confusion) add(email, group, expStatus, expReason, gotStatus, gotReason string, withReason bool) {
	if group != "" {
		defer func(total, agree, reasonAgree int) {
			if c.Groups == nil {
				c.Groups = map[string]*GroupTally{}
			}
			exp := expStatus
			if withReason {
				exp += "/" + expReason
			}
			g := c.Groups[group]
			if g == nil {
				g = &GroupTally{Expected: exp}
				c.Groups[group] = g
			}
			if g.Expected != exp {
				g.Expected = "mixed"
			}
			g.Total++
			g.Agree += c.Agree - agree
			g.ReasonAgree += c.ReasonAgree - reasonAgree
		}(c.Total, c.Agree, c.ReasonAgree)
	}
	if expStatus == "" {
		expStatus = "(none)"
	}
	if gotStatus == "" {
		gotStatus = "(none)"
	}
	c.index(expStatus)
	c.index(gotStatus) // may reorder the labels: look both up again
	i, j := slices.Index(c.Labels, expStatus), slices.Index(c.Labels, gotStatus)
	c.Counts[i][j]++
	c.Total++
	ok := expStatus == gotStatus
	if ok {
		c.Agree++
	}
	if withReason {
		c.ReasonTotal++
		if ok && expReason == gotReason {
			c.ReasonAgree++
		} else {
			ok = false
		}
	}
	if ok {
		return
	}
	kind := expStatus + "/" + expReason + " → " + gotStatus + "/" + gotReason
	if !withReason {
		kind = expStatus + " → " + gotStatus
	}
	c.MismatchKinds[kind]++
	if len(c.Mismatches) < maxMismatchExamples {
		c.Mismatches = append(c.Mismatches, Mismatch{email, expStatus, expReason, gotStatus, gotReason})
	}
}

// Agreement is the fraction of addresses whose verdict matched (0 when
// nothing was compared).
func (c *Confusion) Agreement() float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Agree) / float64(c.Total)
}

// ReasonAgreement is the fraction of addresses whose verdict and reason
// both matched, among those compared with reasons.
func (c *Confusion) ReasonAgreement() float64 {
	if c.ReasonTotal == 0 {
		return 0
	}
	return float64(c.ReasonAgree) / float64(c.ReasonTotal)
}

// Get returns the count of expected → got.
func (c *Confusion) Get(expected, got string) int {
	i, j := slices.Index(c.Labels, expected), slices.Index(c.Labels, got)
	if i < 0 || j < 0 {
		return 0
	}
	return c.Counts[i][j]
}

// WriteMarkdown writes the matrix as a Markdown table: rows expected,
// columns got, rows and columns that are all zero left out.
func (c *Confusion) WriteMarkdown(w io.Writer) {
	used := make([]bool, len(c.Labels))
	for i := range c.Counts {
		for j, n := range c.Counts[i] {
			if n > 0 {
				used[i], used[j] = true, true
			}
		}
	}
	var cols []int
	for i, u := range used {
		if u {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		fmt.Fprintln(w, "(nothing compared)")
		return
	}
	var b strings.Builder
	b.WriteString("| expected ↓ / got → |")
	for _, j := range cols {
		fmt.Fprintf(&b, " %s |", c.Labels[j])
	}
	b.WriteString(" total | agree |\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|\n")
	for _, i := range cols {
		row := 0
		for _, n := range c.Counts[i] {
			row += n
		}
		if row == 0 {
			continue
		}
		fmt.Fprintf(&b, "| **%s** |", c.Labels[i])
		for _, j := range cols {
			n := c.Counts[i][j]
			switch {
			case n == 0:
				b.WriteString(" · |")
			case i == j:
				fmt.Fprintf(&b, " **%s** |", groupThousands(int64(n)))
			default:
				fmt.Fprintf(&b, " %s |", groupThousands(int64(n)))
			}
		}
		fmt.Fprintf(&b, " %s | %.1f %% |\n", groupThousands(int64(row)), 100*float64(c.Counts[i][i])/float64(row))
	}
	io.WriteString(w, b.String())
}

// WriteGroups writes the agreement per group as a Markdown table, sorted by
// group; nothing when the world labelled no group.
func (c *Confusion) WriteGroups(w io.Writer, withReason bool) {
	if len(c.Groups) == 0 {
		return
	}
	names := make([]string, 0, len(c.Groups))
	for n := range c.Groups {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintf(w, "By kind of server and mailbox (the world's groups):\n\n")
	if withReason {
		fmt.Fprintf(w, "| group | expected | addresses | verdict agrees | verdict and reason agree |\n|---|---|---:|---:|---:|\n")
	} else {
		fmt.Fprintf(w, "| group | expected | addresses | verdict agrees |\n|---|---|---:|---:|\n")
	}
	for _, n := range names {
		g := c.Groups[n]
		fmt.Fprintf(w, "| %s | %s | %d | %d |", n, g.Expected, g.Total, g.Agree)
		if withReason {
			fmt.Fprintf(w, " %d |", g.ReasonAgree)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
