package httpapi

import (
	"sync"
	"time"
)

// logLimiter lets through at most burst lines per second of one kind (the
// 5xx error lines), so that a client repeating a failing request cannot fill
// the log; the lines it held back are counted into the next one let through.
type logLimiter struct {
	mu         sync.Mutex
	now        func() time.Time
	burst      int
	window     time.Time
	used       int
	suppressed int
}

func newLogLimiter(burst int, now func() time.Time) *logLimiter {
	return &logLimiter{burst: burst, now: now}
}

// allow reports whether a line may be written now and, if so, how many were
// held back since the last one written.
func (l *logLimiter) allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.window) >= time.Second {
		l.window, l.used = now, 0
	}
	if l.used >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.used++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
