package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/realtime/client"
)

// Realtime scenarios (RT*). --subscribers WebSocket connections, made with
// the Go client library (realtime/client) from this process, all subscribe
// to one path prefix on one node (prefix: true, like the members of one chat
// room). A writer creates one new document under it per write through the
// leader's REST API; new documents, so that every change is a create the
// subscribers can tell apart (one hot document is the HOT scenario's). Every
// write carries its run,
// its sequence number and its send time, read
// on the bench's monotonic clock just before the request, so that each
// subscriber measures change-to-delivery latency on the same clock when the
// change comes out of its Events channel. Every subscriber must get every
// successful write exactly once, with the revision the write's X-Revision
// announced, in revision order: anything else is an error.

// rtSpec shapes a realtime scenario.
type rtSpec struct {
	// onFollower: the subscribers connect to the first follower (on one
	// node, to the node); otherwise to the leader. The writer always writes
	// through the leader.
	onFollower bool
	// paced: the writer starts --rate writes a second on a fixed schedule,
	// open loop (a slow write does not delay the next one; at most
	// rtInFlight at a time); otherwise one client writes back to back.
	paced bool
	// cutsAreErrors: a connection the node cuts (4008 slow consumer, ...)
	// is an error. Otherwise it is counted apart; either way the client
	// library reconnects and resumes with since, so no change may be missed.
	cutsAreErrors bool
}

const (
	// rtDialers is how many subscribers connect at a time.
	rtDialers = 64
	// rtInFlight bounds the paced writer's concurrent requests.
	rtInFlight = 64
	// rtEventBuffer is each subscription's Events capacity. The library's
	// default (4096 events, allocated up front) would cost hundreds of KiB
	// per subscriber in the bench; a consumer goroutine empties it anyway.
	rtEventBuffer = 128
	// rtIdlePause lets the node's memory settle before and after connecting.
	rtIdlePause = 2 * time.Second
)

// rtStall ends the wait for deliveries when none arrived for this long.
var rtStall = 10 * time.Second

// rtResult is a realtime scenario's own figures (the JSON's "realtime").
// Counts are over the measured runs.
type rtResult struct {
	Subscribers int    `json:"subscribers"`
	Node        string `json:"node"`   // the node the subscribers are connected to
	Prefix      string `json:"prefix"` // the path they all subscribe to, prefix: true
	// RatePerSec is the paced writer's schedule; 0: back to back.
	RatePerSec   float64 `json:"ratePerSec"`
	Writes       int     `json:"writes"`
	WriteErrors  int     `json:"writeErrors"`
	WritesPerSec float64 `json:"writesPerSec"` // median run
	WriteP50Ms   float64 `json:"writeP50Ms"`
	WriteP99Ms   float64 `json:"writeP99Ms"`
	// LateWrites: paced writes started more than one interval behind the
	// schedule (the writer could not keep --rate).
	LateWrites       int     `json:"lateWrites,omitempty"`
	Deliveries       int     `json:"deliveries"`
	DeliveriesPerSec float64 `json:"deliveriesPerSec"` // median run
	// Missed: (subscriber, successful write) pairs never delivered.
	// Duplicates: a write delivered twice to one subscriber. WrongRevision:
	// delivered with another revision than the write's X-Revision.
	// OutOfOrder: a revision not above the subscriber's previous one.
	Missed        int `json:"missed"`
	Duplicates    int `json:"duplicates"`
	WrongRevision int `json:"wrongRevision"`
	OutOfOrder    int `json:"outOfOrder"`
	// Cuts are connections lost during the runs, by close code (4008: the
	// node's queue for a slow subscriber filled); Reconnects, how many
	// times subscribers reconnected and resumed; Lost, subscribers whose
	// connection ended for good.
	Cuts       map[string]int `json:"cuts,omitempty"`
	Reconnects int            `json:"reconnects"`
	Lost       int            `json:"lost"`
	// ConnectSeconds is the time to connect and subscribe every subscriber
	// (rtDialers at a time).
	ConnectSeconds float64 `json:"connectSeconds"`
	// Memory of the node the subscribers are on: VmRSS before connecting
	// and with every subscriber connected and idle, and the difference per
	// connection. BenchKiBPerConnection is the same for the bench process.
	NodeRSSBeforeMiB      float64 `json:"nodeRssBeforeMiB,omitempty"`
	NodeRSSIdleMiB        float64 `json:"nodeRssIdleMiB,omitempty"`
	NodeKiBPerConnection  float64 `json:"nodeKiBPerConnection,omitempty"`
	BenchKiBPerConnection float64 `json:"benchKiBPerConnection,omitempty"`
	// The Go runtime's share of it, from the node's /metrics at the same
	// two moments: heap in use and goroutine stacks in use, per connection.
	NodeHeapKiBPerConnection  float64 `json:"nodeHeapKiBPerConnection,omitempty"`
	NodeStackKiBPerConnection float64 `json:"nodeStackKiBPerConnection,omitempty"`
	// File descriptor limits (soft RLIMIT_NOFILE) of the bench and that node.
	BenchFDLimit int64 `json:"benchFdLimit,omitempty"`
	NodeFDLimit  int64 `json:"nodeFdLimit,omitempty"`
}

// rtRun is what one run (warm-up included) of a realtime scenario saw.
type rtRun struct {
	writes, writeErrors, late       int
	writeWall                       time.Duration
	writeLat                        histogram
	deliveries, missed, dups, wrong int
	disorder, stray, lost           int
	cuts                            map[string]int
	reconnects                      int
}

// rtSession is one realtime scenario's subscribers on one cluster.
type rtSession struct {
	e      *env
	s      *scenario
	spec   *rtSpec
	node   *benchNode // where the subscribers are
	prefix string     // the path they subscribe to (prefix: true)
	base   time.Time  // zero of the send timestamps
	hc     *http.Client
	log    *rtLog
	subs   []*rtSubscriber

	runID     int
	delivered atomic.Int64 // deliveries recorded in the current run
	history   []rtRun
	res       rtResult
	notes     []string
}

// rtSubscriber is one connection with its one subscription. The consumer
// goroutine records deliveries; the run reads them under mu.
type rtSubscriber struct {
	conn  *client.Conn
	sub   *client.Subscription
	ended chan struct{} // the consumer returned: Events was closed

	mu       sync.Mutex
	run      int      // the run being recorded
	revs     []uint64 // revision received for each write of the run; 0: none
	got      int      // distinct writes received in the run
	dups     int      // writes received again
	stray    int      // changes of no current run, or unreadable
	disorder int      // revisions not above the previous one
	lastRev  uint64   // last revision received
	lat      []time.Duration
	last     time.Duration // receive time of the last delivery (since base)
}

// startRealtime connects and subscribes --subscribers subscribers to the
// scenario's node and measures that node's memory before and after.
func startRealtime(ctx context.Context, e *env, s *scenario, logf func(string, ...any)) (*rtSession, error) {
	o, c := e.o, e.c
	node := c.leader
	if s.Realtime.onFollower {
		node = e.follower(0)
	}
	rs := &rtSession{e: e, s: s, spec: s.Realtime, node: node, prefix: "bench/rt/" + strings.ToLower(s.Name),
		base: time.Now(), log: &rtLog{cuts: map[string]int{}}}
	n := o.subscribers
	rs.res = rtResult{Subscribers: n, Node: node.id, Prefix: rs.prefix}
	if s.Realtime.paced {
		rs.res.RatePerSec = o.rate
	}
	var err error
	if rs.res.BenchFDLimit, rs.res.NodeFDLimit, err = checkRealtimeLimits(node, n); err != nil {
		return nil, err
	}

	// One document under the prefix before anyone subscribes (each
	// snapshot holds it), and the node has it.
	rev, err := e.postBody(ctx, c.leader, rs.body(0, 0))
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", rs.docPath(0, 0), err)
	}
	if err := e.read(ctx, node, rs.docPath(0, 0), true, rev, false); err != nil {
		return nil, fmt.Errorf("read %s on %s: %w", rs.docPath(0, 0), node.id, err)
	}
	c.settle(ctx, e.hc)
	sleepCtx(ctx, rtIdlePause)
	pid := node.pid()
	var rss0 int64
	if pid > 0 {
		rss0, _ = currentRSS(pid)
	}
	bench0, _ := currentRSS(0)
	mem0, mem0Err := nodeGoMemory(ctx, e.hc, node.url)

	// One client and transport for every upgrade request: each upgraded
	// connection leaves the transport's pool, so nothing is shared after.
	rs.hc = &http.Client{Transport: &http.Transport{
		Proxy:              nil,
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression: true,
	}}
	t0 := time.Now()
	rs.subs = make([]*rtSubscriber, n)
	var done atomic.Int64
	firstErr := parallel(ctx, n, rtDialers, func(i int) error {
		sub, err := rs.connect(ctx)
		if err != nil {
			return fmt.Errorf("subscriber %d of %d on %s: %w", i+1, n, node.id, err)
		}
		rs.subs[i] = sub
		if d := done.Add(1); n >= 5000 && d%2000 == 0 {
			logf("bench: %s: %d of %d subscribers connected in %v", s.Name, d, n, time.Since(t0).Round(time.Millisecond))
		}
		return nil
	})
	if firstErr != nil {
		rs.subs = slices.DeleteFunc(rs.subs, func(s *rtSubscriber) bool { return s == nil })
		rs.close(logf)
		return nil, firstErr
	}
	rs.res.ConnectSeconds = round(time.Since(t0).Seconds(), 2)
	sleepCtx(ctx, rtIdlePause)
	if pid > 0 {
		if rss1, err := currentRSS(pid); err == nil && rss0 > 0 {
			rs.res.NodeRSSBeforeMiB = round(float64(rss0)/(1<<20), 1)
			rs.res.NodeRSSIdleMiB = round(float64(rss1)/(1<<20), 1)
			rs.res.NodeKiBPerConnection = round(float64(rss1-rss0)/1024/float64(n), 1)
		}
	}
	if mem1, err := nodeGoMemory(ctx, e.hc, node.url); err == nil && mem0Err == nil {
		rs.res.NodeHeapKiBPerConnection = round(float64(mem1.heapInuse-mem0.heapInuse)/1024/float64(n), 1)
		rs.res.NodeStackKiBPerConnection = round(float64(mem1.stackInuse-mem0.stackInuse)/1024/float64(n), 1)
	} else {
		rs.notes = append(rs.notes, fmt.Sprintf("node heap per connection unknown: %v", errors.Join(mem0Err, err)))
	}
	if bench1, err := currentRSS(0); err == nil && bench0 > 0 && !rtBenchUsed {
		// Only the first subscribers of the process: later ones reuse
		// memory the earlier ones freed.
		rs.res.BenchKiBPerConnection = round(float64(bench1-bench0)/1024/float64(n), 1)
	}
	rtBenchUsed = true
	if e.used[node] && pid > 0 {
		rs.notes = append(rs.notes, fmt.Sprintf("node KiB/conn may understate: %s served scenarios before this one, and the Go runtime keeps memory they freed for reuse; run this scenario first on its cluster for that figure", node.id))
	}
	e.used[node] = true
	logf("bench: %s: %d subscribers of %s on %s in %.1fs; node RSS %.0f -> %.0f MiB (%.1f KiB per connection; Go heap %.1f, stacks %.1f KiB)",
		s.Name, n, rs.prefix, node.id, rs.res.ConnectSeconds, rs.res.NodeRSSBeforeMiB, rs.res.NodeRSSIdleMiB, rs.res.NodeKiBPerConnection,
		rs.res.NodeHeapKiBPerConnection, rs.res.NodeStackKiBPerConnection)
	return rs, nil
}

// goMemory is what a node's /metrics says of its Go runtime's memory.
type goMemory struct{ heapInuse, stackInuse float64 }

// nodeGoMemory reads the heap and stack bytes in use from a node's /metrics
// (Prometheus text format).
func nodeGoMemory(ctx context.Context, hc *http.Client, base string) (goMemory, error) {
	var m goMemory
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return m, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return m, fmt.Errorf("GET %s/metrics: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		var dst *float64
		switch name {
		case "edgebase_go_memstats_heap_inuse_bytes":
			dst = &m.heapInuse
		case "edgebase_go_memstats_stack_inuse_bytes":
			dst = &m.stackInuse
		}
		if !ok || dst == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return m, fmt.Errorf("%s/metrics: %s: %w", base, name, err)
		}
		*dst = v
		found++
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read %s/metrics: %w", base, err)
	}
	if found != 2 {
		return m, fmt.Errorf("%s/metrics: no Go heap and stack gauges", base)
	}
	return m, nil
}

// rtBenchUsed: this process has held subscribers before.
var rtBenchUsed bool

// connect dials one subscriber and subscribes it (3 attempts).
func (rs *rtSession) connect(ctx context.Context) (*rtSubscriber, error) {
	e := rs.e
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			sleepCtx(ctx, time.Duration(attempt)*500*time.Millisecond)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var conn *client.Conn
		conn, err = client.Dial(dctx, client.Config{
			URL: rs.node.url, Token: e.pr.Token, ProjectID: e.pr.ID, APIKey: e.pr.APIKey,
			HTTPClient:  rs.hc,
			Logger:      slog.New(rs.log),
			Reconnect:   true,
			EventBuffer: rtEventBuffer,
			// The node pings every 30 s; the client's own pings would only
			// add traffic to what is measured.
			PingInterval: -1,
		})
		if err != nil {
			cancel()
			continue
		}
		var sub *client.Subscription
		sub, err = conn.Subscribe(dctx, rs.prefix, true)
		cancel()
		if err != nil {
			_ = conn.CloseNow()
			continue
		}
		s := &rtSubscriber{conn: conn, sub: sub, ended: make(chan struct{})}
		go s.consume(rs, sub.Events())
		return s, nil
	}
	return nil, err
}

// consume records each change the subscription delivers on events.
func (s *rtSubscriber) consume(rs *rtSession, events <-chan client.Event) {
	defer close(s.ended)
	for ev := range events {
		if ev.Kind != client.KindChange {
			continue // resumed after a reconnect (the log counts those)
		}
		now := time.Since(rs.base)
		run, seq, sent, ok := parseRTData(ev.Data)
		s.mu.Lock()
		switch {
		case !ok || run != s.run || seq < 0 || seq >= len(s.revs):
			s.stray++
		case s.revs[seq] != 0:
			s.dups++
		default:
			s.revs[seq] = ev.Revision
			s.got++
			s.lat = append(s.lat, now-sent)
			s.last = now
			if ev.Revision <= s.lastRev {
				s.disorder++
			}
			rs.delivered.Add(1)
		}
		if ev.Revision > s.lastRev {
			s.lastRev = ev.Revision
		}
		s.mu.Unlock()
	}
}

func (s *rtSubscriber) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// docPath is the document write seq of run creates (run 0: the one written
// before subscribing).
func (rs *rtSession) docPath(run, seq int) string {
	return rs.prefix + "/m" + strconv.Itoa(run) + "-" + strconv.Itoa(seq)
}

// body is the POST /api/db request of write seq of run: a new document
// holding the run, the sequence number, the send time (on the bench's
// monotonic clock, read now) and the --value-size value.
func (rs *rtSession) body(run, seq int) []byte {
	v := rs.e.value
	b := make([]byte, 0, len(rs.prefix)+len(v)+120)
	b = append(b, `{"collection":"`...)
	b = append(b, rs.docPath(run, seq)...)
	b = append(b, `","data":{"r":`...)
	b = strconv.AppendInt(b, int64(run), 10)
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, int64(time.Since(rs.base)), 10)
	b = append(b, `,"v":`...)
	b = append(b, v...)
	return append(b, "}}"...)
}

var rtKeys = [3][]byte{[]byte(`"r":`), []byte(`"s":`), []byte(`"t":`)}

// parseRTData reads run, seq and send time from a delivered document. The
// value holds only letters and digits, so the keys cannot occur in it; a
// document in another shape falls back to a JSON decode.
func parseRTData(data []byte) (run, seq int, sent time.Duration, ok bool) {
	var v [3]int64
	for k, key := range rtKeys {
		i := bytes.Index(data, key)
		if i < 0 {
			return parseRTDataJSON(data)
		}
		j := i + len(key)
		for j < len(data) && data[j] == ' ' {
			j++
		}
		start := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if j == start || j-start > 18 || (j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ' ') {
			return parseRTDataJSON(data)
		}
		n, err := strconv.ParseInt(string(data[start:j]), 10, 64)
		if err != nil {
			return parseRTDataJSON(data)
		}
		v[k] = n
	}
	return int(v[0]), int(v[1]), time.Duration(v[2]), true
}

func parseRTDataJSON(data []byte) (run, seq int, sent time.Duration, ok bool) {
	var d struct {
		R *int64   `json:"r"`
		S *int64   `json:"s"`
		T *float64 `json:"t"`
	}
	if json.Unmarshal(data, &d) != nil || d.R == nil || d.S == nil || d.T == nil {
		return 0, 0, 0, false
	}
	return int(*d.R), int(*d.S), time.Duration(*d.T), true
}

// run is one run of a realtime scenario: ops writes, then the wait until
// every subscriber has every successful one (or none arrived for rtStall, or
// --run-timeout passed). Ops are deliveries; their latency is receive time
// minus the write's send time; the wall time runs from the first write to
// the last delivery.
func (rs *rtSession) run(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	e, o := rs.e, rs.e.o
	rs.runID++
	id := rs.runID
	for _, s := range rs.subs {
		s.mu.Lock()
		s.run, s.got, s.dups, s.stray, s.disorder, s.last = id, 0, 0, 0, 0, 0
		if cap(s.revs) >= ops {
			s.revs = s.revs[:ops]
			clear(s.revs)
		} else {
			s.revs = make([]uint64, ops)
		}
		s.lat = s.lat[:0]
		s.mu.Unlock()
	}
	rs.delivered.Store(0)
	cuts0, reconnects0 := rs.log.counts()
	var rr rtRun
	kinds := map[string]int{}
	revs := make([]uint64, ops)
	var mu sync.Mutex // kinds, rr.writeLat, rr.writeErrors

	wctx, cancel := context.WithTimeout(ctx, o.runTimeout)
	defer cancel()
	start := time.Now()
	startOff := time.Since(rs.base)
	write := func(i int) {
		t0 := time.Now()
		rev, err := e.postBody(wctx, e.c.leader, rs.body(id, i))
		d := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			revs[i] = rev
			rr.writeLat.add(d)
		case wctx.Err() != nil:
			// cut by the run deadline or an interrupt: not a result
		default:
			rr.writeErrors++
			kinds[err.Error()]++
		}
	}
	if rs.spec.paced {
		interval := time.Duration(float64(time.Second) / o.rate)
		sem := make(chan struct{}, rtInFlight)
		var wg sync.WaitGroup
	schedule:
		for i := 0; i < ops; i++ {
			due := start.Add(time.Duration(i) * interval)
			sleepCtx(wctx, time.Until(due))
			select {
			case sem <- struct{}{}:
			case <-wctx.Done():
				break schedule
			}
			if time.Since(due) > interval {
				rr.late++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				write(i)
			}()
		}
		wg.Wait()
	} else {
		for i := 0; i < ops && wctx.Err() == nil; i++ {
			write(i)
		}
	}
	rr.writeWall = time.Since(start)
	writerCut := wctx.Err() != nil && ctx.Err() == nil

	var succ []int
	for i, r := range revs {
		if r != 0 {
			succ = append(succ, i)
		}
	}
	rr.writes = len(succ)

	// Wait for the deliveries.
	expected := int64(len(succ)) * int64(len(rs.subs))
	deadline := time.Now().Add(o.runTimeout)
	last, lastChange := int64(-1), time.Now()
	drained := false
	for ctx.Err() == nil {
		d := rs.delivered.Load()
		if d >= expected && rs.complete(succ) {
			drained = true
			break
		}
		if d != last {
			last, lastChange = d, time.Now()
		}
		if time.Since(lastChange) > rtStall || time.Now().After(deadline) {
			if rs.complete(succ) { // the rest are subscribers that ended
				drained = true
			}
			break
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}

	var all histogram
	var lastRecv time.Duration
	for _, s := range rs.subs {
		s.mu.Lock()
		for _, i := range succ {
			switch {
			case s.revs[i] == 0:
				rr.missed++
			case s.revs[i] != revs[i]:
				rr.wrong++
			}
		}
		rr.deliveries += s.got
		rr.dups += s.dups
		rr.stray += s.stray
		rr.disorder += s.disorder
		all.samples = append(all.samples, s.lat...)
		lastRecv = max(lastRecv, s.last)
		s.mu.Unlock()
		if s.isEnded() {
			rr.lost++
		}
	}
	cuts1, reconnects1 := rs.log.counts()
	rr.cuts = map[string]int{}
	cuts := 0
	for k, v := range cuts1 {
		if d := v - cuts0[k]; d > 0 {
			rr.cuts[k] = d
			cuts += d
		}
	}
	rr.reconnects = reconnects1 - reconnects0

	for k, v := range map[string]int{
		"delivery missed (a subscriber never got a successful write)":        rr.missed,
		"delivery duplicated (a subscriber got a write twice)":               rr.dups,
		"delivery with another revision than the write's X-Revision":         rr.wrong,
		"delivery out of revision order":                                     rr.disorder,
		"subscriber connection ended for good (the client stopped resuming)": rr.lost,
	} {
		if v > 0 {
			kinds[k] += v
		}
	}
	errs := rr.writeErrors + rr.missed + rr.dups + rr.wrong + rr.disorder + rr.lost
	if rs.spec.cutsAreErrors {
		for k, v := range rr.cuts {
			kinds["subscriber cut: "+k] += v
			errs += v
		}
	}
	wall := rr.writeWall
	if lastRecv > startOff {
		wall = max(wall, lastRecv-startOff)
	}
	res := runResult{
		Ops:          rr.deliveries,
		Errors:       errs,
		WallSeconds:  round(wall.Seconds(), 3),
		OpsPerSec:    round(throughput(rr.deliveries, wall), 1),
		TimedOut:     writerCut || (!drained && ctx.Err() == nil),
		Writes:       rr.writes,
		WritesPerSec: round(throughput(rr.writes, rr.writeWall), 1),
		Cuts:         cuts,
	}
	rs.history = append(rs.history, rr)
	return res, &all, kinds, nil
}

// complete reports whether every subscriber still connected has every write
// in succ.
func (rs *rtSession) complete(succ []int) bool {
	for _, s := range rs.subs {
		if s.isEnded() {
			continue
		}
		s.mu.Lock()
		ok := s.got >= len(succ)
		if ok {
			for _, i := range succ {
				if s.revs[i] == 0 {
					ok = false
					break
				}
			}
		}
		s.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// summary fills the realtime figures of r from its measured runs (the last
// len(r.Runs) runs: a warm-up came first).
func (rs *rtSession) summary(r *result) *rtResult {
	res := rs.res
	runs := rs.history[max(len(rs.history)-len(r.Runs), 0):]
	var wl histogram
	var wrates []float64
	var stray int
	for i, x := range runs {
		res.Writes += x.writes
		res.WriteErrors += x.writeErrors
		res.LateWrites += x.late
		res.Deliveries += x.deliveries
		res.Missed += x.missed
		res.Duplicates += x.dups
		res.WrongRevision += x.wrong
		res.OutOfOrder += x.disorder
		res.Reconnects += x.reconnects
		res.Lost = max(res.Lost, x.lost)
		stray += x.stray
		for k, v := range x.cuts {
			if res.Cuts == nil {
				res.Cuts = map[string]int{}
			}
			res.Cuts[k] += v
		}
		wl.merge(&x.writeLat)
		if i < len(r.Runs) {
			wrates = append(wrates, r.Runs[i].WritesPerSec)
		}
	}
	res.WritesPerSec = median(wrates)
	res.DeliveriesPerSec = r.OpsPerSec
	res.WriteP50Ms, res.WriteP99Ms = ms(wl.percentile(50)), ms(wl.percentile(99))
	if res.LateWrites > 0 {
		rs.notes = append(rs.notes, fmt.Sprintf("%d writes started more than one interval behind the --rate schedule (%d in flight at most)", res.LateWrites, rtInFlight))
	}
	if stray > 0 {
		rs.notes = append(rs.notes, fmt.Sprintf("%d changes arrived outside their run (late or unreadable)", stray))
	}
	if !rs.spec.cutsAreErrors {
		for _, k := range slices.Sorted(maps.Keys(res.Cuts)) {
			rs.notes = append(rs.notes, fmt.Sprintf("%d × subscriber cut (%s), resumed by the client: counted, not an error", res.Cuts[k], k))
		}
	}
	return &res
}

// close closes every subscriber (rtDialers at a time) and waits for them.
func (rs *rtSession) close(logf func(string, ...any)) {
	t := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(rs.subs), 4*rtDialers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rs.subs) {
					return
				}
				s := rs.subs[i]
				_ = s.conn.Close()
				<-s.ended
			}
		}()
	}
	wg.Wait()
	if rs.hc != nil {
		rs.hc.CloseIdleConnections()
	}
	if len(rs.subs) >= 5000 {
		logf("bench: %s: %d subscribers closed in %v", rs.s.Name, len(rs.subs), time.Since(t).Round(time.Millisecond))
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// rtLog is the client library's logger for every subscriber: it counts the
// connections lost (by close code) and the reconnects, and prints nothing.
type rtLog struct {
	mu         sync.Mutex
	cuts       map[string]int
	reconnects int
}

func (h *rtLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *rtLog) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "realtime connection lost, reconnecting", "realtime connection lost", "realtime connection ended":
		var err error
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				err, _ = a.Value.Any().(error)
			}
			return true
		})
		k := closeKind(err)
		h.mu.Lock()
		h.cuts[k]++
		h.mu.Unlock()
	case "realtime reconnected":
		h.mu.Lock()
		h.reconnects++
		h.mu.Unlock()
	}
	return nil
}

func (h *rtLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *rtLog) WithGroup(string) slog.Handler      { return h }

func (h *rtLog) counts() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.cuts), h.reconnects
}

// closeKind names why a connection was lost: its close code, or a network error.
func closeKind(err error) string {
	switch code := websocket.CloseStatus(err); code {
	case -1:
		if err == nil {
			return "connection lost"
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			return "connection dropped without a close frame"
		}
		return "connection error"
	case 4008:
		return "close 4008 slow_consumer"
	case 4009:
		return "close 4009 lagged"
	case 4001:
		return "close 4001 unauthenticated"
	case websocket.StatusGoingAway:
		return "close 1001 going away"
	default:
		return "close " + strconv.Itoa(int(code))
	}
}

// checkRealtimeLimits makes sure n more sockets fit in the bench's and the
// node's open-file limits and in the ephemeral port range, and returns the
// two limits (0: unknown). A node started by the bench inherits the bench's
// limits (Go gives a child the original soft limit back), and, being a Go
// program, raises its soft limit to the hard one minus one at start, as the
// bench did: the hard limit is what counts.
func checkRealtimeLimits(node *benchNode, n int) (bench, nodeLimit int64, err error) {
	const margin = 256
	check := func(pid int, who string) (int64, error) {
		limit, err := fdLimit(pid)
		if err != nil {
			return 0, nil // no /proc: cannot tell
		}
		open, _ := openFDs(pid)
		if need := int64(open + n + margin); limit < need {
			return limit, fmt.Errorf("%s may open %d files (soft RLIMIT_NOFILE) and has %d open; %d subscribers need about %d: raise the hard ulimit -n (Go programs, the bench and the nodes it starts, raise their soft limit to it)", who, limit, open, n, need)
		}
		return limit, nil
	}
	if bench, err = check(0, "the bench"); err != nil {
		return bench, 0, err
	}
	if pid := node.pid(); pid > 0 {
		if nodeLimit, err = check(pid, "node "+node.id); err != nil {
			return bench, nodeLimit, err
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ := strconv.Atoi(f[0])
			hi, _ := strconv.Atoi(f[1])
			if ports := hi - lo + 1; ports > 0 && n > ports-1000 {
				return bench, nodeLimit, fmt.Errorf("%d subscribers from one address need more ephemeral ports than net.ipv4.ip_local_port_range has (%d)", n, ports)
			}
		}
	}
	return bench, nodeLimit, nil
}

// fdLimit is the soft open-file limit of a process (pid 0: this one).
func fdLimit(pid int) (int64, error) {
	f, err := os.Open(procPath(pid, "limits"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Max open files") {
			continue
		}
		fs := strings.Fields(strings.TrimPrefix(line, "Max open files"))
		if len(fs) == 0 {
			break
		}
		if fs[0] == "unlimited" {
			return 1 << 40, nil
		}
		return strconv.ParseInt(fs[0], 10, 64)
	}
	return 0, fmt.Errorf("no open-file limit in %s", procPath(pid, "limits"))
}

// openFDs is how many files a process has open.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir(procPath(pid, "fd"))
	return len(ents), err
}

// printRealtimeTable prints the realtime scenarios' own figures.
func printRealtimeTable(w io.Writer, rep *report) {
	var rows []*result
	for _, r := range rep.Results {
		if r.Realtime != nil && r.Failed == "" {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nrealtime (RT rows above: clients = subscribers, all on one node and subscribed to one prefix, each write a new document under it; ops = deliveries, ops/s = deliveries/s, latencies = write sent -> change received):\n")
	fmt.Fprintf(w, "writes: successful writes of all runs, writes/s median run, write p50/p99 the REST round trip; missed/dup/wrong rev/order must be 0; cuts: connections the node closed (each resumed by the client); node RSS: the subscribers' node before connecting -> with all connected and idle\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "nodes\tscen\tsubs\ton\trate\twrites\twrites/s\twrite p50\twrite p99\tdeliveries\tdeliveries/s\tmissed\tdup\twrong rev\torder\tcuts\tconnect s\tnode RSS MiB\tnode KiB/conn\tbench KiB/conn\t")
	for _, r := range rows {
		x := r.Realtime
		rate := "max"
		if x.RatePerSec > 0 {
			rate = strconv.FormatFloat(x.RatePerSec, 'f', -1, 64) + "/s"
		}
		cuts := 0
		for _, v := range x.Cuts {
			cuts += v
		}
		rss, per := "-", "-"
		if x.NodeRSSIdleMiB > 0 {
			rss = fmt.Sprintf("%.0f -> %.0f", x.NodeRSSBeforeMiB, x.NodeRSSIdleMiB)
			per = fmt.Sprintf("%.1f", x.NodeKiBPerConnection)
		}
		goPer := "-"
		if x.NodeHeapKiBPerConnection != 0 || x.NodeStackKiBPerConnection != 0 {
			goPer = fmt.Sprintf("%.1f / %.1f", x.NodeHeapKiBPerConnection, x.NodeStackKiBPerConnection)
		}
		benchPer := "-"
		if x.BenchKiBPerConnection != 0 {
			benchPer = fmt.Sprintf("%.1f", x.BenchKiBPerConnection)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%d\t%.0f\t%s\t%s\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t\n",
			r.ClusterSize, r.Scenario, x.Subscribers, x.Node, rate, x.Writes, x.WritesPerSec, fmtMs(x.WriteP50Ms), fmtMs(x.WriteP99Ms),
			x.Deliveries, x.DeliveriesPerSec, x.Missed, x.Duplicates, x.WrongRevision, x.OutOfOrder, cuts,
			x.ConnectSeconds, rss, per, goPer, benchPer)
	}
	_ = tw.Flush()
}
