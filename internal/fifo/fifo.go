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

// Lane is a priority of Lanes: Urgent before Normal before Background.
type Lane uint8

// The lanes, in the order Pop serves them.
const (
	Urgent     Lane = iota // a caller with a budget of seconds (a real-time validation)
	Normal                 // a batch's work
	Background             // work nobody waits for yet (a cache refresh)
	numLanes
)

// Lanes is a waiting line of one FIFO per Lane: an item is served after
// every item of the lanes before its own, and an item waiting can be moved
// to a lane before its own (a more pressing caller joined it). An item is
// in Lanes at most once; T is usually a pointer. Not safe for concurrent
// use.
type Lanes[T comparable] struct {
	lanes [numLanes]Queue[T]
	// waiting holds every item pushed and not yet popped, with its lane.
	// A promoted item stays in its old lane too, where Pop skips it once
	// it is no longer waiting there.
	waiting map[T]Lane
}

// Push adds v at the tail of lane.
func (l *Lanes[T]) Push(v T, lane Lane) {
	if l.waiting == nil {
		l.waiting = make(map[T]Lane)
	}
	l.waiting[v] = lane
	l.lanes[lane].Push(v)
}

// Promote moves v, when it waits in a lane after to, to the tail of to,
// and reports whether it did.
func (l *Lanes[T]) Promote(v T, to Lane) bool {
	if lane, ok := l.waiting[v]; !ok || lane <= to {
		return false
	}
	l.waiting[v] = to
	l.lanes[to].Push(v)
	return true
}

// Len is the number of items waiting.
func (l *Lanes[T]) Len() int { return len(l.waiting) }

// Pop removes and returns the head of the first lane with an item waiting;
// ok is false when nothing waits.
func (l *Lanes[T]) Pop() (v T, ok bool) {
	for i := range l.lanes {
		q := &l.lanes[i]
		for {
			v, ok := q.Pop()
			if !ok {
				break
			}
			if lane, waiting := l.waiting[v]; !waiting || lane != Lane(i) {
				continue // promoted, and served (or waiting) in another lane
			}
			delete(l.waiting, v)
			return v, true
		}
	}
	return v, false
}
