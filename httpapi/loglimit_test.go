package httpapi

import (
	"testing"
	"time"
)

func TestLogLimiter_BurstPerSecondAndCountsWhatItHeldBack(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLogLimiter(3, func() time.Time { return now })
	for i := range 3 {
		if ok, n := l.allow(); !ok || n != 0 {
			t.Fatalf("line %d: %v %d, want allowed", i, ok, n)
		}
	}
	for i := range 5 {
		if ok, _ := l.allow(); ok {
			t.Fatalf("line %d past the burst was allowed", 3+i)
		}
	}
	now = now.Add(999 * time.Millisecond)
	if ok, _ := l.allow(); ok {
		t.Fatal("allowed before the second was over")
	}
	now = now.Add(time.Millisecond)
	if ok, n := l.allow(); !ok || n != 6 {
		t.Fatalf("first line of the next second: %v, held back %d, want 6", ok, n)
	}
	if ok, n := l.allow(); !ok || n != 0 {
		t.Fatalf("second line: %v %d", ok, n)
	}
}
