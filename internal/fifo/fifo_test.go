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

// Lanes serves urgent items first, each lane in order, and a promoted item
// once, from the urgent lane.
func TestLanes(t *testing.T) {
	var l Lanes[string]
	l.Push("n1", false)
	l.Push("n2", false)
	l.Push("u1", true)
	l.Push("n3", false)
	if !l.Promote("n2") || l.Promote("n2") || l.Promote("u1") || l.Promote("x") {
		t.Fatal("Promote: want true only for a waiting normal item, once")
	}
	l.Push("u2", true)
	if l.Len() != 5 {
		t.Fatalf("Len %d, want 5", l.Len())
	}
	var got []string
	for {
		v, ok := l.Pop()
		if !ok {
			break
		}
		got = append(got, v)
		if v == "n1" {
			l.Push("u3", true) // pushed while serving: still ahead of n3
		}
	}
	want := "[u1 n2 u2 n1 u3 n3]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("popped %s, want %s", s, want)
	}
	if l.Len() != 0 || l.Promote("n3") {
		t.Errorf("after draining: Len %d", l.Len())
	}
}
