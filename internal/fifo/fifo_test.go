package fifo

import "testing"

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
