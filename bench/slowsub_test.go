package main

import (
	"strings"
	"testing"
	"time"
)

// TestSummarizeSlow: S2's figures come from the measured runs only (the
// warm-up run first is left out), with the ratio with/without.
func TestSummarizeSlow(t *testing.T) {
	run := func(without, with time.Duration, cut string) slowRun {
		var r slowRun
		for range 100 {
			r.without.add(without)
			r.with.add(with)
		}
		r.cut = cut
		return r
	}
	e := &env{slow: &slowState{runs: []slowRun{
		run(time.Second, time.Second, "warm-up"),
		run(10*time.Millisecond, 15*time.Millisecond, "close 4008 slow_consumer"),
		run(10*time.Millisecond, 15*time.Millisecond, "not cut (still open)"),
	}}}
	r := &result{Runs: make([]runResult, 2)}
	summarizeSlow(e, nil, r)
	x := r.SlowSubscriber
	if x == nil || x.P99WithoutMs != 10 || x.P99WithMs != 15 || x.P99Ratio != 1.5 {
		t.Fatalf("slow subscriber figures %+v, want p99 10 ms without, 15 ms with, ratio 1.5", x)
	}
	if x.Cuts["close 4008 slow_consumer"] != 1 || x.Cuts["not cut (still open)"] != 1 || x.Cuts["warm-up"] != 0 {
		t.Errorf("cuts %v", x.Cuts)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "ratio 1.50") {
		t.Errorf("notes %q", r.Notes)
	}
}
