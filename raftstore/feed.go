package raftstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// EventType says what happened to a path.
type EventType string

const (
	// EventSet means the document was created or replaced or had a field changed.
	EventSet EventType = "set"
	// EventDelete means the document was removed.
	EventDelete EventType = "delete"
)

// Event is one change in the tree, in commit order.
type Event struct {
	Revision uint64
	Path     string // full path, project id first
	Type     EventType
	Doc      *Document // the document after the change; nil for deletes
	// Before is the document as committed before the change's entry (nil:
	// it did not exist): what triggers tell a create from an update by,
	// and hand to webhooks. It is kept for user documents only (not under
	// SystemPrefix, no reserved "_" segment after the project); others
	// have nil.
	Before *Document
	// Time is the commit's time: the Txn's Time, the proposer's clock in
	// Unix nanoseconds (0 for entries without one).
	Time int64
}

// Batch is what one ApplyBatch committed. Reset marks a snapshot restore: the
// state jumped to Revision and subscribers must resynchronise from state.
type Batch struct {
	Revision uint64
	Events   []Event
	Reset    bool
}

// Feed fans committed batches out to subscribers without ever blocking Apply:
// each subscriber has a bounded queue, and one that is full is dropped (its
// channel closed, Err reports ErrLagged) so it can resume from its last revision.
type Feed struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	// recent is a ring of the revisions of the last published batches, one
	// longer than the largest subscriber queue, and published counts the
	// batches: together they tell a subscriber's lag from its queue length
	// (metrics, at scrape time).
	recent    []uint64
	published uint64
	dropped   atomic.Uint64 // subscribers cut off for lagging
}

// newFeed returns an empty feed.
func newFeed() *Feed { return &Feed{subs: map[*Subscription]struct{}{}} }

// Subscription receives batches in commit order until it is closed or dropped.
type Subscription struct {
	feed *Feed
	ch   chan Batch
	err  atomic.Pointer[error]
	once sync.Once
}

// Subscribe registers a subscriber with a queue of buffer batches.
func (f *Feed) Subscribe(buffer int) *Subscription {
	if buffer < 1 {
		buffer = 1
	}
	s := &Subscription{feed: f, ch: make(chan Batch, buffer)}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	if len(f.recent) < buffer+1 {
		f.growRecent(buffer + 1)
	}
	f.mu.Unlock()
	return s
}

// Wake calls wake whenever a committed batch holds an event that match
// accepts, and once after each subscription is made (for what committed
// before it), until ctx ends: how a leader-only loop (the push dispatcher,
// the mail sender) learns of new work without polling. A subscription cut
// off for lagging is made again. buffer sizes its queue (Subscribe).
func (f *Feed) Wake(ctx context.Context, buffer int, match func(Event) bool, wake func()) {
	for ctx.Err() == nil {
		sub := f.Subscribe(buffer)
		wake()
	read:
		for {
			select {
			case <-ctx.Done():
				sub.Close()
				return
			case b, ok := <-sub.C():
				if !ok {
					break read // lagged: subscribe again
				}
				for _, ev := range b.Events {
					if match(ev) {
						wake()
						break
					}
				}
			}
		}
	}
}

// growRecent resizes the ring of recent revisions to n, keeping what it
// holds. Callers hold f.mu.
func (f *Feed) growRecent(n int) {
	ring := make([]uint64, n)
	if old := uint64(len(f.recent)); old > 0 {
		for seq := f.published; seq > 0 && f.published-seq < old; seq-- {
			ring[seq%uint64(n)] = f.recent[seq%old]
		}
	}
	f.recent = ring
}

// C is the subscriber's queue; it is closed when the subscription ends.
func (s *Subscription) C() <-chan Batch { return s.ch }

// Err says why C was closed: ErrLagged, or ErrClosed after Close.
func (s *Subscription) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Close ends the subscription.
func (s *Subscription) Close() { s.end(ErrClosed) }

func (s *Subscription) end(err error) {
	s.once.Do(func() {
		s.err.Store(&err)
		s.feed.mu.Lock()
		delete(s.feed.subs, s)
		s.feed.mu.Unlock()
		close(s.ch)
	})
}

// publish is called by the FSM goroutine only, so sends never race with each
// other; a subscriber that cannot take the batch at once is dropped.
func (f *Feed) publish(b Batch) {
	f.mu.Lock()
	var lagged []*Subscription
	for s := range f.subs {
		select {
		case s.ch <- b:
		default:
			lagged = append(lagged, s)
		}
	}
	f.published++
	if n := uint64(len(f.recent)); n > 0 {
		f.recent[f.published%n] = b.Revision
	}
	f.mu.Unlock()
	for _, s := range lagged {
		f.dropped.Add(1)
		s.end(ErrLagged)
	}
}

// indexWaiter tracks a monotonically increasing index and lets callers wait
// for it to reach a value.
type indexWaiter struct {
	mu   sync.Mutex
	idx  uint64
	wake chan struct{}
}

func newIndexWaiter() *indexWaiter { return &indexWaiter{wake: make(chan struct{})} }

func (w *indexWaiter) get() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idx
}

// set moves the index (a restore may move it anywhere) and wakes all waiters.
func (w *indexWaiter) set(idx uint64) {
	w.mu.Lock()
	w.idx = idx
	close(w.wake)
	w.wake = make(chan struct{})
	w.mu.Unlock()
}

// wait blocks until the index is at least idx or ctx ends.
func (w *indexWaiter) wait(ctx context.Context, idx uint64) error {
	for {
		w.mu.Lock()
		cur, wake := w.idx, w.wake
		w.mu.Unlock()
		if cur >= idx {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
