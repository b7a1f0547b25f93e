package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func testBatch(rev uint64) Batch {
	return Batch{Revision: rev, Events: []Event{{Revision: rev, Path: fmt.Sprintf("p/d%d", rev), Type: EventSet}}}
}

// publishAll publishes batches from..to in a goroutine and fails the test if
// that does not finish within the deadline (publish must never block).
func publishAll(t *testing.T, f *Feed, from, to uint64, deadline time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := from; r <= to; r++ {
			f.publish(testBatch(r))
		}
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("publishing %d batches did not finish within %v: publish blocked", to-from+1, deadline)
	}
}

// readN reads n batches from sub, failing on a closed channel or a deadline.
func readN(t *testing.T, sub *Subscription, n int, deadline time.Duration) []Batch {
	t.Helper()
	var out []Batch
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for len(out) < n {
		select {
		case b, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed after %d of %d batches: %v", len(out), n, sub.Err())
			}
			out = append(out, b)
		case <-timer.C:
			t.Fatalf("got %d of %d batches within %v", len(out), n, deadline)
		}
	}
	return out
}

func assertRevisions(t *testing.T, batches []Batch, from uint64) {
	t.Helper()
	for i, b := range batches {
		want := from + uint64(i)
		if b.Revision != want || len(b.Events) != 1 || b.Events[0].Revision != want || b.Events[0].Path != fmt.Sprintf("p/d%d", want) {
			t.Fatalf("batch %d: %+v, want revision %d", i, b, want)
		}
	}
}

func TestFeed_SubscribersReceiveBatchesInOrder(t *testing.T) {
	f := newFeed()
	a, b := f.Subscribe(200), f.Subscribe(200)
	publishAll(t, f, 1, 150, 5*time.Second)
	assertRevisions(t, readN(t, a, 150, time.Second), 1)
	assertRevisions(t, readN(t, b, 150, time.Second), 1)
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("errors on live subscriptions: %v, %v", a.Err(), b.Err())
	}
	// A late subscriber sees only what is published after it joined.
	c := f.Subscribe(10)
	publishAll(t, f, 151, 152, time.Second)
	assertRevisions(t, readN(t, c, 2, time.Second), 151)
}

func TestFeed_LaggingSubscriberIsDroppedWithoutBlocking(t *testing.T) {
	const n = 1000
	f := newFeed()
	slow := f.Subscribe(1) // never reads
	fast := f.Subscribe(n)
	var got []Batch
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b := range fast.C() {
			got = append(got, b)
			if len(got) == n {
				return
			}
		}
	}()
	publishAll(t, f, 1, n, 5*time.Second)
	waitGroupWithin(t, &wg, 5*time.Second, "reader")
	assertRevisions(t, got, 1)
	if fast.Err() != nil {
		t.Fatalf("reading subscriber ended: %v", fast.Err())
	}

	if !errors.Is(slow.Err(), ErrLagged) {
		t.Fatalf("slow subscriber Err() = %v, want ErrLagged", slow.Err())
	}
	// What it had queued is still delivered, then the channel is closed.
	first, ok := <-slow.C()
	if !ok || first.Revision != 1 {
		t.Fatalf("slow subscriber's queued batch: %+v ok=%v, want revision 1", first, ok)
	}
	select {
	case b, ok := <-slow.C():
		if ok {
			t.Fatalf("slow subscriber got batch %d after being dropped", b.Revision)
		}
	case <-time.After(time.Second):
		t.Fatal("slow subscriber's channel not closed")
	}
	f.mu.Lock()
	_, stillThere := f.subs[slow]
	f.mu.Unlock()
	if stillThere {
		t.Fatal("dropped subscriber still registered")
	}
}

// A subscriber with a queue of one that keeps up is never dropped.
func TestFeed_KeepingUpWithBufferOneIsEnough(t *testing.T) {
	f := newFeed()
	sub := f.Subscribe(0) // rounds up to 1
	if cap(sub.ch) != 1 {
		t.Fatalf("Subscribe(0) queue %d, want 1", cap(sub.ch))
	}
	for r := uint64(1); r <= 200; r++ {
		publishAll(t, f, r, r, time.Second)
		assertRevisions(t, readN(t, sub, 1, time.Second), r)
	}
	if sub.Err() != nil {
		t.Fatalf("Err() = %v", sub.Err())
	}
}

func TestFeed_CloseEndsSubscription(t *testing.T) {
	f := newFeed()
	closed, other := f.Subscribe(4), f.Subscribe(4)
	closed.Close()
	closed.Close() // idempotent
	if !errors.Is(closed.Err(), ErrClosed) {
		t.Fatalf("Err() after Close = %v, want ErrClosed", closed.Err())
	}
	if _, ok := <-closed.C(); ok {
		t.Fatal("channel open after Close")
	}
	publishAll(t, f, 1, 3, time.Second) // must not send on the closed channel
	assertRevisions(t, readN(t, other, 3, time.Second), 1)

	// A dropped subscriber keeps ErrLagged even if its owner closes it later.
	lag := f.Subscribe(1)
	publishAll(t, f, 4, 5, time.Second)
	lag.Close()
	if !errors.Is(lag.Err(), ErrLagged) {
		t.Fatalf("Err() = %v after lag then Close, want ErrLagged", lag.Err())
	}
}

// Subscribers come and go while Apply publishes; nothing may panic (a send on
// a closed channel) or race.
func TestFeed_CloseConcurrentWithPublish(t *testing.T) {
	f := newFeed()
	stop := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for r := uint64(1); ; r++ {
			select {
			case <-stop:
				return
			default:
				f.publish(testBatch(r))
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s := f.Subscribe(1 + i%3)
				if i%2 == 0 {
					<-s.C()
				}
				s.Close()
				for range s.C() {
				}
				if err := s.Err(); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLagged) {
					t.Errorf("Err() = %v", err)
					return
				}
			}
		}()
	}
	waitGroupWithin(t, &wg, 10*time.Second, "subscribers closing while publishing")
	close(stop)
	select {
	case <-pubDone:
	case <-time.After(5 * time.Second):
		t.Fatal("publisher stuck")
	}
	f.mu.Lock()
	n := len(f.subs)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d subscriptions left registered", n)
	}
}

// The FSM publishes from Apply; a subscriber that never reads must not stall it.
func TestFeed_SlowSubscriberNeverStallsApply(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	slow := f.feed.Subscribe(1)
	var logs []*raft.Log
	for i := uint64(1); i <= 50; i++ {
		logs = append(logs, txnLog(t, i, &Txn{Time: testTime(i), Ops: []Op{put(fmt.Sprintf("s/d%d", i), `{}`)}}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		applyInBatches(f, logs, func() int { return 1 })
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("apply stalled behind a subscriber that does not read")
	}
	if !errors.Is(slow.Err(), ErrLagged) {
		t.Fatalf("Err() = %v, want ErrLagged", slow.Err())
	}
	if got := f.applied.get(); got != 50 {
		t.Fatalf("applied %d, want 50", got)
	}
}

// ---- indexWaiter -------------------------------------------------------------

func waitAsync(w *indexWaiter, ctx context.Context, idx uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.wait(ctx, idx) }()
	return ch
}

func mustNotReturn(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early: %v", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

func mustReturn(t *testing.T, ch <-chan error, what string, want error) {
	t.Helper()
	select {
	case err := <-ch:
		if !errors.Is(err, want) {
			t.Fatalf("%s returned %v, want %v", what, err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

func TestIndexWaiter_ReturnsOnSet(t *testing.T) {
	w := newIndexWaiter()
	ctx := context.Background()
	mustReturn(t, waitAsync(w, ctx, 0), "wait(0)", nil)
	w.set(5)
	mustReturn(t, waitAsync(w, ctx, 5), "wait for the current index", nil)
	mustReturn(t, waitAsync(w, ctx, 3), "wait for a past index", nil)

	w10a, w10b, w12 := waitAsync(w, ctx, 10), waitAsync(w, ctx, 10), waitAsync(w, ctx, 12)
	w.set(9)
	mustNotReturn(t, w10a, "wait(10) at 9")
	w.set(10)
	mustReturn(t, w10a, "wait(10)", nil)
	mustReturn(t, w10b, "second wait(10)", nil)
	mustNotReturn(t, w12, "wait(12) at 10")
	// A restore may move the index back; waiters keep waiting.
	w.set(2)
	mustNotReturn(t, w12, "wait(12) at 2")
	if got := w.get(); got != 2 {
		t.Fatalf("get() = %d after set(2)", got)
	}
	w.set(100)
	mustReturn(t, w12, "wait(12)", nil)
}

func TestIndexWaiter_RespectsContext(t *testing.T) {
	w := newIndexWaiter()
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(w, ctx, 1)
	mustNotReturn(t, ch, "wait(1)")
	cancel()
	mustReturn(t, ch, "cancelled wait", context.Canceled)

	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	mustReturn(t, waitAsync(w, dctx, 1), "wait past its deadline", context.DeadlineExceeded)
	// An already satisfied wait succeeds even with a dead context.
	w.set(1)
	if err := w.wait(ctx, 1); err != nil {
		t.Fatalf("satisfied wait with cancelled ctx: %v", err)
	}
}

func TestIndexWaiter_ConcurrentSetAndWait(t *testing.T) {
	w := newIndexWaiter()
	const top = 500
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for idx := uint64(g); idx <= top; idx += 16 {
				if err := w.wait(ctx, idx); err != nil {
					errs <- fmt.Errorf("wait(%d): %w", idx, err)
					return
				}
				if got := w.get(); got < idx {
					errs <- fmt.Errorf("wait(%d) returned at %d", idx, got)
					return
				}
			}
		}(g)
	}
	for i := uint64(1); i <= top; i++ {
		w.set(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// waitGroupWithin waits for wg, failing the test after d instead of hanging.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v", what, d)
	}
}
