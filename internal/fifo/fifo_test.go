package fifo

import (
	"fmt"
	"testing"
)

// Pushes and pops interleaved come out in order, through the compaction
// of the space before the head, and popped slots are cleared.
func TestQueue(t *testing.T) {
	var q Queue[*int]
	if _, ok := q.Pop(); ok {
		t.Fatal("empty queue popped")
	}
	in, out := 0, 0
	for round := range 50 {
		for range 100 + round*7 {
			v := in
			q.Push(&v)
			in++
		}
		for range 90 + round*5 {
			v, ok := q.Pop()
			if !ok || *v != out {
				t.Fatalf("popped %v, %v; want %d", v, ok, out)
			}
			out++
		}
		if q.Len() != in-out {
			t.Fatalf("Len %d, want %d", q.Len(), in-out)
		}
		for i := range q.head {
			if q.items[i] != nil {
				t.Fatalf("slot %d before the head still holds %d", i, *q.items[i])
			}
		}
	}
	for q.Len() > 0 {
		v, _ := q.Pop()
		if *v != out {
			t.Fatalf("popped %d, want %d", *v, out)
		}
		out++
	}
	if out != in || len(q.items) != 0 {
		t.Fatalf("drained %d of %d, %d slots left", out, in, len(q.items))
	}
}

// Lanes serves each lane in turn, each in order, and a promoted item once,
// from the lane it was promoted to.
func TestLanes(t *testing.T) {
	var l Lanes[string]
	l.Push("b1", Background)
	l.Push("n1", Normal)
	l.Push("b2", Background)
	l.Push("n2", Normal)
	l.Push("u1", Urgent)
	l.Push("n3", Normal)
	l.Push("b3", Background)
	if !l.Promote("n2", Urgent) || l.Promote("n2", Urgent) || l.Promote("u1", Urgent) || l.Promote("x", Urgent) {
		t.Fatal("Promote to Urgent: want true only for a waiting item of a later lane, once")
	}
	if !l.Promote("b2", Normal) || l.Promote("b2", Background) || l.Promote("n1", Normal) {
		t.Fatal("Promote to Normal: want true only from Background")
	}
	if !l.Promote("b2", Urgent) {
		t.Fatal("Promote from Normal, after a promotion from Background: refused")
	}
	l.Push("u2", Urgent)
	if l.Len() != 8 {
		t.Fatalf("Len %d, want 8", l.Len())
	}
	var got []string
	for {
		v, ok := l.Pop()
		if !ok {
			break
		}
		got = append(got, v)
		if v == "n1" {
			l.Push("u3", Urgent) // pushed while serving: still ahead of n3
		}
	}
	want := "[u1 n2 b2 u2 n1 u3 n3 b1 b3]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("popped %s, want %s", s, want)
	}
	if l.Len() != 0 || l.Promote("n3", Urgent) {
		t.Errorf("after draining: Len %d", l.Len())
	}
}
