package main

import (
	"math"
	"slices"
	"sort"
	"time"
)

// histogram keeps every latency sample; percentiles sort them once. A bench
// run records at most a few hundred thousand samples, so exact beats an
// approximate bucket scheme here.
type histogram struct {
	samples []time.Duration
	sorted  bool
}

func (h *histogram) add(d time.Duration) {
	h.samples = append(h.samples, d)
	h.sorted = false
}

// merge appends o's samples to h.
func (h *histogram) merge(o *histogram) {
	h.samples = append(h.samples, o.samples...)
	h.sorted = false
}

func (h *histogram) count() int { return len(h.samples) }

func (h *histogram) sort() {
	if !h.sorted {
		slices.Sort(h.samples)
		h.sorted = true
	}
}

// percentile is the nearest-rank percentile p (0 < p <= 100): the smallest
// sample such that at least p% of all samples are <= it. An empty histogram
// gives 0; p <= 0 gives the minimum.
func (h *histogram) percentile(p float64) time.Duration {
	n := len(h.samples)
	if n == 0 {
		return 0
	}
	h.sort()
	if p <= 0 {
		return h.samples[0]
	}
	if p >= 100 {
		return h.samples[n-1]
	}
	// Nudge down by a hair so that p/100*n landing on an integer through
	// floating-point noise (99.9% of 1000 = 999.0000000000001) is not
	// rounded up to the next rank.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return h.samples[rank-1]
}

func (h *histogram) max() time.Duration { return h.percentile(100) }

func (h *histogram) mean() time.Duration {
	if len(h.samples) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range h.samples {
		sum += d
	}
	return sum / time.Duration(len(h.samples))
}

// throughput is operations per second over a wall-clock interval.
func throughput(ops int, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(ops) / wall.Seconds()
}

// median of xs (the mean of the middle two for an even count); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// ms converts a duration to float milliseconds (for JSON), to the microsecond.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

// round x to n decimals.
func round(x float64, n int) float64 {
	p := math.Pow(10, float64(n))
	return math.Round(x*p) / p
}
