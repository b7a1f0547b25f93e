package realtime

import (
	"context"
	"sync"
)

// outQueue is a connection's bounded queue of outgoing messages. Unlike a
// buffered channel it allocates as it fills, so an idle connection costs a
// few words instead of the whole bound: what matters with 10,000 sockets.
type outQueue struct {
	mu    sync.Mutex
	items [][]byte
	head  int
	max   int
	ready chan struct{} // a message was queued (capacity 1)
	room  chan struct{} // a message was taken (capacity 1)
}

func newOutQueue(max int) *outQueue {
	return &outQueue{max: max, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tryPush queues msg unless the queue is full.
func (q *outQueue) tryPush(msg []byte) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, msg)
	q.mu.Unlock()
	signal(q.ready)
	return true
}

// push queues msg, waiting for room until ctx ends.
func (q *outQueue) push(ctx context.Context, msg []byte) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.tryPush(msg) {
			return nil
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pop takes the oldest message, if any.
func (q *outQueue) pop() ([]byte, bool) {
	q.mu.Lock()
	if q.head == len(q.items) {
		q.mu.Unlock()
		return nil, false
	}
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		// Drained: start over, and let a burst's large array go.
		if cap(q.items) > 64 {
			q.items = nil
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	q.mu.Unlock()
	signal(q.room)
	return msg, true
}
