package harness

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	c.add(email, expected, "", got, "", false)
}

// AddWithReason counts one address by verdict and checks.reason.
func (c *Confusion) AddWithReason(email, expStatus, expReason, gotStatus, gotReason string) {
	c.add(email, expStatus, expReason, gotStatus, gotReason, true)
}

func (c *Confusion) add(email, expStatus, expReason, gotStatus, gotReason string, withReason bool) {
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
