package realtime

import (
	"context"
	"sync"
)

// outQueue is a connection's bounded queue of outgoing messages. Unlike a
// buffered channel it allocates as it fills, so an idle connection costs a
// few words instead of the whole bound: what matters with 10,000 sockets.
//
// The queue also decides when its connection's writer runs: a message
// queued while no writer runs starts one (start), and the writer ends when
// idle finds the queue empty. closing keeps it running until it has closed
// the connection.
type outQueue struct {
	mu      sync.Mutex
	items   [][]byte
	head    int
	max     int
	running bool // a writer runs
	closing bool // the connection was killed: the writer must close it
	start   func()
	room    chan struct{} // a message was taken (capacity 1)
}

// newOutQueue makes a queue whose start runs a writer (in a new goroutine).
func newOutQueue(max int, start func()) *outQueue {
	return &outQueue{max: max, start: start, room: make(chan struct{}, 1)}
}

// wakeLocked marks the writer running and reports whether it must start.
func (q *outQueue) wakeLocked() bool {
	if q.running {
		return false
	}
	q.running = true
	return true
}

// idle ends the writer's turn if there is nothing left to do.
func (q *outQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head < len(q.items) || q.closing {
		return false
	}
	q.running = false
	return true
}

// close makes sure a writer runs to close the connection.
func (q *outQueue) close() {
	q.mu.Lock()
	q.closing = true
	start := q.wakeLocked()
	q.mu.Unlock()
	if start {
		q.start()
	}
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
	start := q.wakeLocked()
	q.mu.Unlock()
	if start {
		q.start()
	}
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
