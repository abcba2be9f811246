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

// Lanes is a waiting line of two FIFOs: urgent items are served before
// normal ones, and an item waiting in the normal lane can be moved to the
// urgent one (an urgent caller joined it). An item is in Lanes at most
// once; T is usually a pointer. Not safe for concurrent use.
type Lanes[T comparable] struct {
	urgent, normal Queue[T]
	// waiting holds every item pushed and not yet popped, with whether it
	// is in the urgent lane. A promoted item stays in the normal lane too,
	// where Pop skips it once it is no longer waiting.
	waiting map[T]bool
}

// Push adds v at the tail of its lane.
func (l *Lanes[T]) Push(v T, urgent bool) {
	if l.waiting == nil {
		l.waiting = make(map[T]bool)
	}
	l.waiting[v] = urgent
	if urgent {
		l.urgent.Push(v)
	} else {
		l.normal.Push(v)
	}
}

// Promote moves v, when it waits in the normal lane, to the urgent lane's
// tail, and reports whether it did.
func (l *Lanes[T]) Promote(v T) bool {
	if urgent, ok := l.waiting[v]; !ok || urgent {
		return false
	}
	l.waiting[v] = true
	l.urgent.Push(v)
	return true
}

// Len is the number of items waiting.
func (l *Lanes[T]) Len() int { return len(l.waiting) }

// Pop removes and returns the urgent lane's head, else the normal lane's;
// ok is false when nothing waits.
func (l *Lanes[T]) Pop() (v T, ok bool) {
	for _, q := range []*Queue[T]{&l.urgent, &l.normal} {
		for {
			v, ok := q.Pop()
			if !ok {
				break
			}
			if _, waiting := l.waiting[v]; !waiting {
				continue // promoted, and popped from the urgent lane already
			}
			delete(l.waiting, v)
			return v, true
		}
	}
	return v, false
}
