package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func TestCompareSpecs(t *testing.T) {
	for _, name := range []string{"W1", "W2", "R1", "R2", "S1"} {
		cs, ok := findCompareSpec(name, peerEtcd)
		if !ok {
			t.Fatalf("no compared scenario %s", name)
		}
		s, ok := findScenario(cs.Ours)
		if !ok {
			t.Fatalf("%s compares our %s, which does not exist", name, cs.Ours)
		}
		if name == "S1" && (s.Realtime == nil || !s.Realtime.onFollower || !s.Realtime.paced) {
			t.Errorf("S1 must be our paced realtime scenario on a follower (RT1F), is %s", s.Name)
		}
	}
}

func TestParseFlagsCompare(t *testing.T) {
	o, err := parseFlags([]string{"--compare", "--scenarios", "w2, s1", "--nodes", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.compare || len(o.compared) != 2 || o.compared[0].Name != "W2" || o.compared[1].Name != "S1" {
		t.Fatalf("compared %+v", o.compared)
	}
	if len(o.scenarios) != 2 || o.scenarios[0].Name != "W2" || o.scenarios[1].Name != "RT1F" {
		t.Errorf("our scenarios %v, want W2 and RT1F", o.scenarios)
	}
	if o.maxClients() != o.subscribers {
		t.Errorf("maxClients %d, want the subscribers %d (the HTTP client is sized from it)", o.maxClients(), o.subscribers)
	}
	o, err = parseFlags([]string{"--compare"}, io.Discard)
	if err != nil || len(o.compared) != 5 {
		t.Errorf("--compare alone: %v, %d compared; want all 5", err, len(o.compared))
	}
	for _, bad := range [][]string{
		{"--compare", "--scenarios", "A1"},
		{"--compare", "--scenarios", "RT1F"},
		{"--compare", "--target", "http://127.0.0.1:1", "--admin-token", "x"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestComparisonRatios(t *testing.T) {
	c := &comparison{Edgebase: sideResult{OpsPerSec: 300, P99Ms: 5}, Peer: sideResult{OpsPerSec: 200, P99Ms: 10}}
	c.ratios()
	if c.ThroughputRatio != 1.5 || c.P99Ratio != 0.5 {
		t.Errorf("ratios %v %v, want 1.5 and 0.5", c.ThroughputRatio, c.P99Ratio)
	}
	c = &comparison{Edgebase: sideResult{OpsPerSec: 300, P99Ms: 5}, Peer: sideResult{Failed: "boom"}}
	c.ratios()
	if c.ThroughputRatio != 0 || c.P99Ratio != 0 || !c.flagged() {
		t.Errorf("against a failed side: ratios %v %v flagged %v; want 0, 0, flagged", c.ThroughputRatio, c.P99Ratio, c.flagged())
	}
}

// TestSideRounds: a side accumulates its rounds (median ops/s, merged
// latencies, errors by kind) and reports them once.
func TestSideRounds(t *testing.T) {
	rates := []float64{100, 300, 200}
	round := 0
	s := &side{nodes: []*benchNode{{id: "x1"}}, settle: func(context.Context) {}, close: func() {},
		run: func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
			var h histogram
			for i := range ops {
				h.add(time.Duration(round*ops+i+1) * time.Millisecond)
			}
			rr := runResult{Ops: ops, OpsPerSec: rates[round]}
			kinds := map[string]int{}
			if round == 1 {
				rr.Errors = 2
				kinds["etcd /v3/kv/put 503"] = 2
			}
			round++
			return rr, &h, kinds, nil
		}}
	for range rates {
		s.measure(context.Background(), 100)
	}
	r := s.finish()
	if r.Ops != 300 || r.Errors != 2 || r.ErrorKinds["etcd /v3/kv/put 503"] != 2 {
		t.Errorf("ops %d errors %d kinds %v", r.Ops, r.Errors, r.ErrorKinds)
	}
	if r.OpsPerSec != 200 || r.OpsPerSecMin != 100 || r.OpsPerSecMax != 300 || len(r.RunOpsPerSec) != 3 {
		t.Errorf("rates %+v", r)
	}
	if r.P50Ms != 150 || r.P99Ms != 297 {
		t.Errorf("p50 %v p99 %v over the merged rounds, want 150 and 297", r.P50Ms, r.P99Ms)
	}
	if len(r.Nodes) != 1 || !r.Nodes[0].Unmeasured {
		t.Errorf("a node without a process: %+v, want unmeasured", r.Nodes)
	}
}

func TestPrintCompareTable(t *testing.T) {
	ok := &comparison{Scenario: "W2", PeerName: "etcd", ClusterSize: 3, Clients: 64, OpsPerRun: 6000,
		Edgebase: sideResult{OpsPerSec: 3000, OpsPerSecMin: 2900, OpsPerSecMax: 3100, P99Ms: 40,
			Nodes: []nodeResult{{ID: "n1", Leader: true, CPUSecondsPerRun: 1.5, PeakRSSMiB: 120}, {ID: "n2", CPUSecondsPerRun: 0.5, PeakRSSMiB: 80}}},
		Peer: sideResult{OpsPerSec: 2000, OpsPerSecMin: 1900, OpsPerSecMax: 2100, P99Ms: 80,
			Nodes: []nodeResult{{ID: "e1", CPUSecondsPerRun: 0.7, PeakRSSMiB: 40}, {ID: "e2", Leader: true, CPUSecondsPerRun: 1.2, PeakRSSMiB: 50}}}}
	ok.ratios()
	bad := &comparison{Scenario: "S1", ClusterSize: 1, Edgebase: sideResult{Errors: 3, ErrorKinds: map[string]int{"delivery missed": 3}}, PeerName: "etcd", Peer: sideResult{Failed: "watchers: boom"}}
	rep := &report{Runs: 3, Comparisons: []*comparison{ok, bad}}
	var b strings.Builder
	printTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		"side by side with etcd", "3000 [2900-3100]", "2000 [1900-2100]", "1.50x", "0.50x",
		"n1* 1.50 n2 0.50", "e1 0.70 e2* 1.20", "120/80", "40/50",
		"3/0 !", "note: S1 1 nodes etcd: FAILED: watchers: boom", "note: S1 1 nodes edgebase: 3 × delivery missed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "nodes  scen  clients  target") {
		t.Errorf("compare-only report printed the empty scenario table:\n%s", out)
	}
}
