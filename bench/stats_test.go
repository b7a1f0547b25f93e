package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var h histogram
	// 1..1000 ms in a shuffled order: percentiles must not depend on it.
	for _, i := range rand.New(rand.NewPCG(7, 7)).Perm(1000) {
		h.add(time.Duration(i+1) * time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{0, 1 * time.Millisecond},
		{0.1, 1 * time.Millisecond},
		{50, 500 * time.Millisecond},
		{99, 990 * time.Millisecond},
		{99.9, 999 * time.Millisecond},
		{100, 1000 * time.Millisecond},
	} {
		if got := h.percentile(tc.p); got != tc.want {
			t.Errorf("p%v of 1..1000ms = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got, want := h.mean(), 500500*time.Microsecond; got != want {
		t.Errorf("mean = %v, want %v", got, want)
	}
}

func TestPercentileSmallAndEmpty(t *testing.T) {
	var h histogram
	if got := h.percentile(50); got != 0 {
		t.Errorf("empty p50 = %v, want 0", got)
	}
	h.add(3 * time.Millisecond)
	for _, p := range []float64{1, 50, 99.9} {
		if got := h.percentile(p); got != 3*time.Millisecond {
			t.Errorf("one sample p%v = %v, want 3ms", p, got)
		}
	}
	// Ten samples: p50 is the 5th, p99 and p99.9 the largest.
	var g histogram
	for i := 10; i >= 1; i-- {
		g.add(time.Duration(i))
	}
	if got := g.percentile(50); got != 5 {
		t.Errorf("p50 of 1..10 = %v, want 5", got)
	}
	if got := g.percentile(99); got != 10 {
		t.Errorf("p99 of 1..10 = %v, want 10", got)
	}
	// merge keeps every sample and re-sorts.
	g.merge(&h)
	if g.count() != 11 || g.max() != 3*time.Millisecond {
		t.Errorf("after merge: count %d max %v, want 11 and 3ms", g.count(), g.max())
	}
}

func TestThroughputAndMedian(t *testing.T) {
	if got := throughput(2000, 4*time.Second); got != 500 {
		t.Errorf("throughput = %v, want 500", got)
	}
	if got := throughput(10, 0); got != 0 {
		t.Errorf("throughput over no time = %v, want 0", got)
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := []byte("1234 (edge base (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 5000 1000000 2000 18446744073709551615")
	got, err := parseStatCPU(line)
	if err != nil || got.user != 2.5 || got.system != 0.75 || got.total() != 3.25 {
		t.Errorf("parseStatCPU = %+v, %v; want user 2.5, system 0.75", got, err)
	}
	sys, err := parseSystemCPU([]byte("cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	if err != nil || sys != 1.61 {
		t.Errorf("parseSystemCPU = %v, %v; want 1.61", sys, err)
	}
}
