package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/realtime/client"
)

func TestRealtimeScenarios(t *testing.T) {
	o := &options{clients: 10, subscribers: 7}
	for _, name := range []string{"RT1", "RT1F", "RT2"} {
		s, ok := findScenario(name)
		if !ok {
			t.Fatalf("no scenario %s", name)
		}
		if s.Realtime == nil || s.Op != nil || s.Clients(o) != 7 {
			t.Errorf("%s: Realtime %v, Op set %v, clients %d; want a realtime scenario with --subscribers clients", name, s.Realtime, s.Op != nil, s.Clients(o))
		}
	}
	rt1, _ := findScenario("RT1")
	rt1f, _ := findScenario("RT1F")
	rt2, _ := findScenario("RT2")
	if !rt1.Realtime.paced || rt1.Realtime.onFollower || !rt1.Realtime.cutsAreErrors {
		t.Errorf("RT1 = %+v: paced, on the leader, cuts are errors", *rt1.Realtime)
	}
	if !rt1f.Realtime.paced || !rt1f.Realtime.onFollower {
		t.Errorf("RT1F = %+v: paced, on a follower", *rt1f.Realtime)
	}
	if rt2.Realtime.paced || rt2.Realtime.onFollower || rt2.Realtime.cutsAreErrors {
		t.Errorf("RT2 = %+v: back to back, on the leader, cuts counted apart", *rt2.Realtime)
	}
	// On one node there is no follower: RT1F says so (and gets the note).
	one := &benchNode{id: "n1"}
	e := &env{c: &cluster{nodes: []*benchNode{one}, leader: one}}
	if got := rt1f.Target(e); !strings.Contains(got, "single node n1") {
		t.Errorf("RT1F target on one node = %q", got)
	}
	two := &benchNode{id: "n2"}
	e.c = &cluster{nodes: []*benchNode{one, two}, leader: one}
	if got := rt1f.Target(e); got != "subscribers on follower n2" {
		t.Errorf("RT1F target on two nodes = %q", got)
	}
}

func TestParseFlagsRealtime(t *testing.T) {
	var out strings.Builder
	if _, err := parseFlags([]string{"--list"}, &out); !errors.Is(err, errListed) {
		t.Fatalf("--list: %v", err)
	}
	for _, name := range []string{"RT1 ", "RT1F ", "RT2 "} {
		if !strings.Contains(out.String(), "\n"+name) {
			t.Errorf("--list does not show %s:\n%s", name, out.String())
		}
	}
	o, err := parseFlags([]string{"--scenarios", "rt1,RT2", "--subscribers", "10000", "--rate", "2.5", "--ops", "40"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.subscribers != 10000 || o.rate != 2.5 || o.opsFor(o.scenarios[0]) != 40 || o.maxClients() != 10000 {
		t.Errorf("subscribers %d rate %v ops %d maxClients %d", o.subscribers, o.rate, o.opsFor(o.scenarios[0]), o.maxClients())
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil || o.subscribers != 1000 || o.rate != 10 {
		t.Errorf("defaults: %v, subscribers %d rate %v", err, o.subscribers, o.rate)
	}
	for _, bad := range [][]string{{"--subscribers", "0"}, {"--rate", "0"}, {"--rate", "-1"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestRealtimeBodyRoundTrip(t *testing.T) {
	rs := &rtSession{e: &env{value: []byte(`"abcXYZ019"`)}, prefix: "bench/rt/rt1", base: time.Now().Add(-time.Hour)}
	b := rs.body(3, 17)
	var req struct {
		Collection string          `json:"collection"`
		Data       json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	if req.Collection != "bench/rt/rt1/m3-17" || !strings.HasPrefix(req.Collection, rs.prefix+"/") {
		t.Errorf("collection %q", req.Collection)
	}
	run, seq, sent, ok := parseRTData(req.Data)
	if !ok || run != 3 || seq != 17 || sent < time.Hour || sent > time.Hour+time.Minute {
		t.Errorf("parseRTData(%s) = %d %d %v %v", req.Data, run, seq, sent, ok)
	}
}

func TestParseRTData(t *testing.T) {
	for _, tc := range []struct {
		data     string
		run, seq int
		sent     time.Duration
		ok       bool
	}{
		{`{"r":1,"s":2,"t":3000,"v":"abc"}`, 1, 2, 3000, true},
		{`{"v":"abc","t":3000,"s":2,"r":1}`, 1, 2, 3000, true},
		{`{"r": 1, "s": 2, "t": 3000}`, 1, 2, 3000, true},
		{`{"r":1,"s":2,"t":3.5e3}`, 1, 2, 3500, true}, // re-encoded number: the JSON fallback
		{`{"r":1,"s":2}`, 0, 0, 0, false},
		{`{"r":"1","s":2,"t":3}`, 0, 0, 0, false},
		{`null`, 0, 0, 0, false},
		{``, 0, 0, 0, false},
	} {
		run, seq, sent, ok := parseRTData([]byte(tc.data))
		if run != tc.run || seq != tc.seq || sent != tc.sent || ok != tc.ok {
			t.Errorf("parseRTData(%s) = %d %d %v %v; want %d %d %v %v", tc.data, run, seq, sent, ok, tc.run, tc.seq, tc.sent, tc.ok)
		}
	}
}

func TestCloseKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("read: %w", websocket.CloseError{Code: 4008, Reason: "slow consumer"}), "close 4008 slow_consumer"},
		{websocket.CloseError{Code: 4009}, "close 4009 lagged"},
		{websocket.CloseError{Code: websocket.StatusGoingAway}, "close 1001 going away"},
		{websocket.CloseError{Code: 4999}, "close 4999"},
		{io.EOF, "connection dropped without a close frame"},
		{errors.New("reset by peer"), "connection error"},
		{nil, "connection lost"},
	} {
		if got := closeKind(tc.err); got != tc.want {
			t.Errorf("closeKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestFDLimit(t *testing.T) {
	limit, err := fdLimit(0)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	open, err := openFDs(0)
	if err != nil || limit < 1 || open < 3 || int64(open) > limit {
		t.Errorf("limit %d, open %d, %v", limit, open, err)
	}
	// A node process that is not ours (pid 0 means: none) is not checked.
	if _, _, err := checkRealtimeLimits(&benchNode{id: "n1"}, 10); err != nil {
		t.Errorf("10 subscribers: %v", err)
	}
	if _, _, err := checkRealtimeLimits(&benchNode{id: "n1"}, int(limit)); err == nil || !strings.Contains(err.Error(), "hard ulimit -n") {
		t.Errorf("%d subscribers: %v, want a hint to raise ulimit -n", limit, err)
	}
}

func TestPrintRealtimeTable(t *testing.T) {
	rep := &report{Runs: 3, Results: []*result{
		{ClusterSize: 1, Scenario: "RT1", Clients: 1000, Target: "subscribers on leader n1", Ops: 900000, OpsPerSec: 49800,
			Realtime: &rtResult{Subscribers: 1000, Node: "n1", Prefix: "bench/rt/rt1", RatePerSec: 50, Writes: 900, WritesPerSec: 50,
				WriteP50Ms: 2.5, WriteP99Ms: 9, Deliveries: 900000, DeliveriesPerSec: 49800, ConnectSeconds: 1.2,
				NodeRSSBeforeMiB: 80, NodeRSSIdleMiB: 130, NodeKiBPerConnection: 51.2, BenchKiBPerConnection: 60}},
		{ClusterSize: 1, Scenario: "RT2", Clients: 1000, Ops: 10, Realtime: &rtResult{Subscribers: 1000, Node: "n1",
			Cuts: map[string]int{"close 4008 slow_consumer": 3}}},
		{ClusterSize: 3, Scenario: "RT1F", Failed: "subscribers: boom", Realtime: &rtResult{}},
	}}
	var b strings.Builder
	printTable(&b, rep)
	out := b.String()
	for _, want := range []string{"deliveries/s", "node KiB/conn", "80 -> 130", "51.2", "50/s", "max"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n1      RT") != 4 { // both rows in both tables; the failed one in neither
		t.Errorf("rows:\n%s", out)
	}
}

// TestRealtimeRunAccounting drives rtSession.run against a fake REST API
// that hands every write to fake subscribers, with faults injected: the
// accounting must find each one.
func TestRealtimeRunAccounting(t *testing.T) {
	defer func(d time.Duration) { rtStall = d }(rtStall)
	rtStall = 300 * time.Millisecond
	const subs = 4
	chans := make([]chan client.Event, subs)
	for i := range chans {
		chans[i] = make(chan client.Event, 1024)
	}
	var mu sync.Mutex
	rev := uint64(100)
	faults := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Collection string          `json:"collection"`
			Data       json.RawMessage `json:"data"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/api/db" || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, seq, _, _ := parseRTData(req.Data)
		mu.Lock()
		defer mu.Unlock()
		if faults && seq == 9 {
			w.WriteHeader(http.StatusServiceUnavailable) // a failed write: expected by nobody
			return
		}
		rev += 10
		ev := client.Event{Kind: client.KindChange, Revision: rev, Collection: req.Collection, Type: client.TypeSet, Data: req.Data}
		for i, ch := range chans {
			e := ev
			switch {
			case ch == nil:
				continue // that subscriber ended
			case !faults:
			case i == 0 && seq == 3:
				continue // missed
			case i == 1 && seq == 5:
				ch <- e // duplicated
			case i == 2 && seq == 7:
				e.Revision-- // another revision than X-Revision, still in order
			}
			ch <- e
		}
		w.Header().Set("X-Revision", strconv.FormatUint(rev, 10))
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	leader := &benchNode{id: "n1", url: srv.URL}
	e := &env{hc: srv.Client(), c: &cluster{nodes: []*benchNode{leader}, leader: leader},
		o: &options{reqTimeout: time.Second, runTimeout: 5 * time.Second, rate: 1000}, value: []byte(`"v"`)}
	rs := &rtSession{e: e, spec: &rtSpec{}, node: leader, prefix: "bench/rt/t", base: time.Now(), log: &rtLog{cuts: map[string]int{}}}
	for i := range subs {
		s := &rtSubscriber{ended: make(chan struct{})}
		rs.subs = append(rs.subs, s)
		go s.consume(rs, chans[i])
	}

	rr, h, kinds, _ := rs.run(context.Background(), 12)
	x := rs.history[0]
	if x.writes != 11 || x.writeErrors != 1 || x.missed != 1 || x.dups != 1 || x.wrong != 1 || x.disorder != 0 || x.lost != 0 {
		t.Errorf("writes %d, write errors %d, missed %d, dups %d, wrong %d, disorder %d, lost %d; want 11 1 1 1 1 0 0",
			x.writes, x.writeErrors, x.missed, x.dups, x.wrong, x.disorder, x.lost)
	}
	if rr.Ops != 4*11-1 || h.count() != rr.Ops || rr.Errors != 4 || rr.Writes != 11 || !rr.TimedOut {
		t.Errorf("run = %+v, %d samples; want 43 deliveries, 4 errors, cut short by the missing delivery", rr, h.count())
	}
	for _, k := range []string{"POST 503  (no Retry-After)", "delivery missed (a subscriber never got a successful write)",
		"delivery duplicated (a subscriber got a write twice)", "delivery with another revision than the write's X-Revision"} {
		if kinds[k] != 1 {
			t.Errorf("kinds %v lack %q once", kinds, k)
		}
	}

	// A clean second run (paced) is complete, ordered and error-free, and
	// the first run's deliveries do not leak into it.
	mu.Lock()
	faults = false
	mu.Unlock()
	rs.spec.paced = true
	rr, h, kinds, _ = rs.run(context.Background(), 20)
	if rr.Ops != 4*20 || rr.Errors != 0 || rr.TimedOut || len(kinds) != 0 || h.count() != 80 || h.percentile(0) < 0 {
		t.Errorf("clean run = %+v, kinds %v", rr, kinds)
	}
	// An ended subscriber is lost, and its deliveries missed.
	mu.Lock()
	close(chans[3])
	chans[3] = nil
	mu.Unlock()
	<-rs.subs[3].ended
	rr, _, kinds, _ = rs.run(context.Background(), 5)
	if rs.history[2].lost != 1 || rs.history[2].missed != 5 || rr.Errors != 6 || rr.TimedOut {
		t.Errorf("run with an ended subscriber = %+v, %+v, kinds %v", rr, rs.history[2], kinds)
	}
	r := &result{Runs: []runResult{rr}, OpsPerSec: rr.OpsPerSec}
	if sum := rs.summary(r); sum.Writes != 5 || sum.Missed != 5 || sum.Lost != 1 || sum.RatePerSec != 0 {
		t.Errorf("summary of the last run = %+v", sum)
	}
}
