package proctest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StopPoll, returned by Poll's function, ends the poll at once with the
// error it wraps (a process that exited will not become ready).
type StopPoll struct{ Err error }

func (s StopPoll) Error() string { return s.Err.Error() }

func (s StopPoll) Unwrap() error { return s.Err }

// Poll calls f every 50 ms until it returns nil, ctx ends, total passes or
// f returns a StopPoll. The error names the last failure of f.
func Poll(ctx context.Context, total time.Duration, f func() error) error {
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop StopPoll
		if errors.As(err, &stop) {
			return stop.Err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", total, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
