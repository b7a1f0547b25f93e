package main

import (
	"context"
	"sync"
	"sync/atomic"
)

// parallel runs f(i) for i in [0, n) on workers goroutines and returns the
// first error (the others stop taking work).
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range max(min(workers, n), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				stop := firstErr != nil
				mu.Unlock()
				if i >= n || stop || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
