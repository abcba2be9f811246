// Package fifo is a first-in first-out queue on a slice, for the waiting
// lines of verifyd's worker pools (resolver queries, auth-signal
// collections). It is not safe for concurrent use: its owner locks.
package fifo

// Queue is a FIFO of T. The zero value is an empty queue.
type Queue[T any] struct {
	items []T
	head  int // index of the head in items
}

// Push appends v at the tail.
func (q *Queue[T]) Push(v T) { q.items = append(q.items, v) }

// Len is the number of items waiting.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Pop removes and returns the head; ok is false when the queue is empty.
// A popped slot is zeroed, so the queue holds no reference to it, and the
// space before the head is reclaimed once it is most of the slice.
func (q *Queue[T]) Pop() (v T, ok bool) {
	if q.head == len(q.items) {
		return v, false
	}
	v = q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head > 1024 && q.head > len(q.items)/2:
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v, true
}
