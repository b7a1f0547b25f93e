package main

import "testing"

// The subscriber is polled until it has every change of a step: the polls'
// counts add up, the span runs from the first poll's first event to the
// last poll's last, and the lag percentiles keep the worst poll's.
func TestJSStepTotals(t *testing.T) {
	var tot jsStepTotals
	tot.add(0, 0, 0, 0, 0, 0, 0, 0, 0) // a poll before any event changes nothing
	tot.add(600, 1000, 1300, 0, 1, 0, 5, 40, 90)
	tot.add(0, 0, 0, 0, 0, 0, 0, 0, 0)
	tot.add(400, 1400, 1500, 1, 0, 2, 7, 30, 120)
	if tot.events != 1000 || tot.lastMs-tot.firstMs != 500 || tot.resets != 1 || tot.disconnects != 1 || tot.outOfOrder != 2 {
		t.Fatalf("totals %+v", tot)
	}
	if tot.p50 != 7 || tot.p99 != 40 || tot.max != 120 {
		t.Fatalf("lags %+v: want the worst poll's", tot)
	}
}

// The ramp's rates rise, so the first step it falls behind at ends the run.
func TestJSRatesRise(t *testing.T) {
	for i := 1; i < len(jsRates); i++ {
		if jsRates[i] <= jsRates[i-1] {
			t.Fatalf("jsRates %v do not rise", jsRates)
		}
	}
	if jsRates[0]*int(jsStep.Seconds()) < jsBatch {
		t.Fatalf("the first step writes less than one batch")
	}
}
