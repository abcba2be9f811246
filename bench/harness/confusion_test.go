package harness

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestConfusionCounts(t *testing.T) {
	c := NewConfusion()
	c.AddWithReason("a@x.test", "valid", "ok", "valid", "ok")
	c.AddWithReason("b@x.test", "valid", "role_based", "valid", "ok") // verdict agrees, reason not
	c.AddWithReason("c@x.test", "invalid", "mailbox_not_found", "unknown", "timeout")
	c.AddWithReason("d@x.test", "risky", "catch_all", "risky", "catch_all")
	c.Add("e@x.test", "unknown", "unknown")

	if c.Total != 5 || c.Agree != 4 {
		t.Fatalf("total %d agree %d, want 5, 4", c.Total, c.Agree)
	}
	if c.ReasonTotal != 4 || c.ReasonAgree != 2 {
		t.Fatalf("reasons %d/%d, want 2/4", c.ReasonAgree, c.ReasonTotal)
	}
	if got := c.Agreement(); got != 0.8 {
		t.Errorf("agreement %v", got)
	}
	if got := c.ReasonAgreement(); got != 0.5 {
		t.Errorf("reason agreement %v", got)
	}
	for _, tc := range []struct {
		exp, got string
		n        int
	}{{"valid", "valid", 2}, {"invalid", "unknown", 1}, {"invalid", "invalid", 0}, {"risky", "risky", 1}, {"unknown", "unknown", 1}} {
		if n := c.Get(tc.exp, tc.got); n != tc.n {
			t.Errorf("%s → %s: %d, want %d", tc.exp, tc.got, n, tc.n)
		}
	}
	if c.MismatchKinds["invalid/mailbox_not_found → unknown/timeout"] != 1 || c.MismatchKinds["valid/role_based → valid/ok"] != 1 || len(c.MismatchKinds) != 2 {
		t.Errorf("mismatch kinds %v", c.MismatchKinds)
	}
	if len(c.Mismatches) != 2 || c.Mismatches[1].Email != "c@x.test" {
		t.Errorf("mismatches %+v", c.Mismatches)
	}
}

func TestConfusionUnknownLabelsStaySquareAndSorted(t *testing.T) {
	c := NewConfusion()
	c.Add("a", "valid", "zzz-weird")
	c.Add("b", "aaa-other", "valid")
	c.Add("c", "valid", "valid")
	want := append(append([]string{}, verdictOrder...), "aaa-other", "zzz-weird")
	if strings.Join(c.Labels, ",") != strings.Join(want, ",") {
		t.Fatalf("labels %v, want %v", c.Labels, want)
	}
	if len(c.Counts) != len(c.Labels) {
		t.Fatalf("%d rows for %d labels", len(c.Counts), len(c.Labels))
	}
	sum := 0
	for _, row := range c.Counts {
		if len(row) != len(c.Labels) {
			t.Fatalf("row of %d for %d labels", len(row), len(c.Labels))
		}
		for _, n := range row {
			sum += n
		}
	}
	if sum != 3 || c.Get("valid", "zzz-weird") != 1 || c.Get("aaa-other", "valid") != 1 || c.Get("valid", "valid") != 1 {
		t.Errorf("counts moved when labels were re-sorted: %v %v", c.Labels, c.Counts)
	}
	// The matrix survives JSON.
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Confusion
	if err := json.Unmarshal(b, &back); err != nil || back.Get("valid", "zzz-weird") != 1 {
		t.Errorf("JSON round trip: %v %s", err, b)
	}
}

func TestConfusionMarkdown(t *testing.T) {
	c := NewConfusion()
	for range 3 {
		c.Add("a", "valid", "valid")
	}
	c.Add("b", "invalid", "unknown")
	var b bytes.Buffer
	c.WriteMarkdown(&b)
	out := b.String()
	for _, want := range []string{
		"| expected ↓ / got → | valid | invalid | unknown | total | agree |",
		"| **valid** | **3** | · | · | 3 | 100.0 % |",
		"| **invalid** | · | · | 1 | 1 | 0.0 % |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "risky") || strings.Contains(out, "| **unknown**") {
		t.Errorf("all-zero rows or columns shown:\n%s", out)
	}
	var empty bytes.Buffer
	NewConfusion().WriteMarkdown(&empty)
	if !strings.Contains(empty.String(), "nothing compared") {
		t.Errorf("empty matrix: %q", empty.String())
	}
}
