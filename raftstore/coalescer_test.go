package raftstore

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// roundFn numbers its calls in start order and blocks each until that very
// round is released.
type roundFn struct {
	mu      sync.Mutex
	started int
	release map[int]chan struct{}
}

func newRoundFn() *roundFn { return &roundFn{release: map[int]chan struct{}{}} }

func (r *roundFn) ch(n int) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.release[n]
	if !ok {
		c = make(chan struct{})
		r.release[n] = c
	}
	return c
}

func (r *roundFn) fn(ctx context.Context) (uint64, error) {
	r.mu.Lock()
	r.started++
	n := r.started
	r.mu.Unlock()
	select {
	case <-r.ch(n):
		return uint64(n), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (r *roundFn) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// A caller arriving while a round is in flight gets a round of its own at
// once (below the limit) instead of waiting for that round and then the
// next; at the limit, newcomers share one pending round, which starts as
// soon as a round ends, and never take a result of a round that started
// before they arrived.
func TestCoalescer_OverlappingRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoundFn()
		c := newCoalescer(r.fn)
		c.max = 2
		ctx := context.Background()
		ask := func(out chan<- uint64) { go func() { v, _ := c.do(ctx); out <- v }() }

		a := make(chan uint64, 1)
		ask(a)
		synctest.Wait()
		if r.count() != 1 {
			t.Fatalf("%d rounds after the first caller, want 1", r.count())
		}
		b := make(chan uint64, 1)
		ask(b)
		synctest.Wait()
		if r.count() != 2 {
			t.Fatalf("%d rounds: the second caller waits for round 1 instead of starting its own", r.count())
		}

		// Two rounds in flight: ten newcomers share a pending round 3.
		const waiters = 10
		rest := make(chan uint64, waiters)
		for i := 0; i < waiters; i++ {
			ask(rest)
		}
		synctest.Wait()
		if r.count() != 2 || len(rest) != 0 {
			t.Fatalf("%d rounds, %d answers while two rounds run (limit 2)", r.count(), len(rest))
		}

		// Round 2 ends first: only b is answered, and round 3 starts.
		close(r.ch(2))
		synctest.Wait()
		if got := <-b; got != 2 {
			t.Fatalf("second caller got round %d, want 2", got)
		}
		if len(a) != 0 || len(rest) != 0 {
			t.Fatal("a caller of another round was answered by round 2")
		}
		if r.count() != 3 {
			t.Fatalf("%d rounds after round 2 ended, want round 3 started", r.count())
		}
		// Round 1 ends: a only; the ten still wait for their round 3.
		close(r.ch(1))
		synctest.Wait()
		if got := <-a; got != 1 {
			t.Fatalf("first caller got round %d, want 1", got)
		}
		if len(rest) != 0 {
			t.Fatal("a newcomer got the result of round 1, which started before it arrived")
		}
		close(r.ch(3))
		synctest.Wait()
		if len(rest) != waiters {
			t.Fatalf("%d of %d newcomers answered", len(rest), waiters)
		}
		for i := 0; i < waiters; i++ {
			if got := <-rest; got != 3 {
				t.Fatalf("newcomer got round %d, want the shared round 3", got)
			}
		}
		if r.count() != 3 {
			t.Fatalf("%d rounds for 12 callers, want 3", r.count())
		}
	})
}

// The default limit lets maxReadIndexRounds rounds overlap, then shares.
func TestCoalescer_DefaultLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoundFn()
		c := newCoalescer(r.fn)
		out := make(chan uint64, maxReadIndexRounds+5)
		for i := 0; i < maxReadIndexRounds+5; i++ {
			go func() { v, _ := c.do(context.Background()); out <- v }()
			synctest.Wait()
		}
		if r.count() != maxReadIndexRounds {
			t.Fatalf("%d rounds in flight, want %d", r.count(), maxReadIndexRounds)
		}
		for n := 1; n <= maxReadIndexRounds+1; n++ {
			close(r.ch(n))
		}
		synctest.Wait()
		if len(out) != maxReadIndexRounds+5 || r.count() != maxReadIndexRounds+1 {
			t.Fatalf("%d answers, %d rounds; want %d and %d", len(out), r.count(), maxReadIndexRounds+5, maxReadIndexRounds+1)
		}
	})
}
