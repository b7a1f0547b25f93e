package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/wan"
)

func TestWANFlags(t *testing.T) {
	parse := func(args ...string) (*wanOptions, error) {
		var w wanOptions
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		w.register(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return &w, w.finish()
	}
	w, err := parse("--wan")
	if err != nil {
		t.Fatal(err)
	}
	if w.samples != wanDefaultSamples || w.partition != 20*time.Second || w.soak != 0 || w.wants(10) || !w.wants(1) || !w.wants(9) {
		t.Errorf("defaults: %+v", w)
	}
	if p := w.profile(); p.Jitter != wan.DefaultProfile().Jitter {
		t.Errorf("jitter %v, want the profile's", p.Jitter)
	}
	w, err = parse("--wan", "--wan-quick", "--wan-args", "--wan --raft-trailing-logs 9", "--wan-measure", "1,10", "--wan-soak", "1m", "--wan-jitter", "0")
	if err != nil {
		t.Fatal(err)
	}
	if w.samples != wanQuickSamples || w.partition != 5*time.Second || !slices.Equal(w.args, []string{"--wan", "--raft-trailing-logs", "9"}) {
		t.Errorf("quick: %+v", w)
	}
	if !w.wants(1) || w.wants(2) || !w.wants(10) || w.profile().Jitter != 0 {
		t.Errorf("--wan-measure 1,10 with a soak and jitter 0: %+v", w)
	}
	for _, bad := range [][]string{
		{"--wan-quick"}, // without --wan
		{"--wan", "--wan-measure", "11"},
		{"--wan", "--wan-measure", "x"},
		{"--wan", "--wan-jitter", "1"},
		{"--wan", "--wan-samples", "-1"},
		{"--wan", "--wan-duration", "10ms"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWANTable(t *testing.T) {
	var h histogram
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	c := cellFrom(&h, 2, 80*time.Millisecond)
	if c.N != 100 || c.Errors != 2 || c.P50Ms != 50 || c.P99Ms != 99 || c.MaxMs != 100 || c.RTTToLeaderMs != 80 {
		t.Fatalf("cell %+v", c)
	}
	var one histogram
	one.add(1500 * time.Microsecond)
	rows := []*wanRow{
		{ID: "1", Measurement: "local read", Leader: "v-us1", Regions: map[string]*wanCell{
			"us": cellFrom(&one, 0, time.Millisecond), "eu": c, "ap": cellFrom(&histogram{}, 1, 150*time.Millisecond),
		}, Notes: []string{"a note"}},
		{ID: "9a", Measurement: "catch-up", Leader: "v-us1", Regions: map[string]*wanCell{"ap": cellFrom(&one, 0, 150*time.Millisecond)}, Failed: "boom"},
	}
	var b bytes.Buffer
	writeWANReport(&b, &wanReport{Command: "go run ./bench --wan", Profile: wan.DefaultProfile(), Samples: 100, Rows: rows})
	out := b.String()
	for _, want := range []string{
		"us-eu 80ms, us-ap 150ms, eu-ap 220ms, intra-region 1ms", "jitter ±10%",
		"| # | measurement | leader | us p50 | us p99 | eu p50 | eu p99 | ap p50 | ap p99 | RTT to leader us/eu/ap | n/region |",
		"| 1 | local read | v-us1 | 1.50 | 1.50 | 50.0 | 99.0 | – | – | 1/80/– | 100 (3 failed) |",
		"| 9a | catch-up | v-us1 | – | – | – | – | 1.50 | 1.50 | –/–/150 | 1 FAILED |",
		"- 1: a note", "- 9a: FAILED: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// One JSON line for the run, then one per measurement.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1+len(rows) {
		t.Fatalf("%d JSON lines, want %d:\n%s", len(lines), 1+len(rows), out)
	}
	var got wanRow
	if err := json.Unmarshal([]byte(lines[1]), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "1" || got.Regions["eu"].P99Ms != 99 || got.Regions["us"].RTTToLeaderMs != 1 {
		t.Errorf("JSON line %s", lines[1])
	}
}

func TestWANHelpers(t *testing.T) {
	if nextEdge(wan.US) != "e-eu" || nextEdge(wan.EU) != "e-ap" || nextEdge(wan.AP) != "e-us" {
		t.Error("nextEdge")
	}
	got := electionsBetween(map[string]uint64{"v-us1": 2, "v-us2": 2, "v-eu1": 2}, map[string]uint64{"v-us1": 3, "v-us2": 2, "v-eu1": 4})
	if !slices.Equal(got, []string{"v-eu1", "v-us1"}) {
		t.Errorf("electionsBetween = %v", got)
	}
}
