package main

// Q3: a live query. --q3-subscribers WebSocket subscribers on the leader
// each subscribe to "open orders of q3orders, newest first, 20 at a time"
// (SubscribeQuery, the same body as POST /api/db/query); a paced writer
// writes --q3-rate documents a second through the leader. 9 writes in 10
// change the total of a document that stays in the window (one "modified"
// event per subscriber); 1 in 10 moves a document into the window (a new
// newest open order: "added", and the 20th leaves, "removed") or back out
// (that order closed: "removed", and the 21st comes back, "added"), in
// turn. A sample is one event at one subscriber: its arrival minus the
// write's acknowledgement (the answer to the POST; an event that arrives
// before the answer counts 0), matched by the revision it carries.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/realtime/client"
)

const (
	q3Coll = "q3orders"
	// q3Docs orders are seeded, every other one open: 100 open orders,
	// five windows' worth.
	q3Docs = 200
	// q3Stable: the writer's "modified" writes go to the newest q3Stable
	// seeded open orders, which stay in the window whatever the moves do
	// (a move shifts the window by at most one).
	q3Stable = 10
)

// q3State is Q3's subscribers on one env.
type q3State struct {
	node *benchNode
	hc   *http.Client
	log  *rtLog
	base time.Time
	subs []*q3Sub
	run  int
	// events delivered in the current run, over all subscribers
	delivered atomic.Int64
}

// q3Sub is one live-query subscriber and what it received.
type q3Sub struct {
	conn  *client.Conn
	sub   *client.Subscription
	ended chan struct{}

	mu     sync.Mutex
	events []q3Event
}

type q3Event struct {
	rev  uint64
	recv time.Duration // since q3State.base
}

// q3Query is the live query: open orders of q3orders, newest first, 20.
func q3Query() query.Query {
	return query.Query{
		Collection: q3Coll,
		Where:      []query.Filter{{Field: "status", Op: "==", Value: json.RawMessage(`"open"`)}},
		OrderBy:    []query.Order{{Field: "createdAt", Direction: "desc"}},
		Limit:      qLimit,
	}
}

// q3Order is seeded order i: open when i is even, createdAt growing with i.
func q3Order(i int) order {
	st := "closed"
	if i%2 == 0 {
		st = "open"
	}
	return order{Status: st, Total: float64(i), CreatedAt: qBaseTime + int64(i)*1000, Owner: "u" + strconv.Itoa(i%10)}
}

// prepareQ3 seeds q3orders and connects the subscribers (once per env).
func prepareQ3(ctx context.Context, e *env) error {
	if e.q3 != nil {
		return nil
	}
	logf := e.logf()
	writes := make([]map[string]any, 0, q3Docs)
	for i := range q3Docs {
		writes = append(writes, map[string]any{"op": "set", "collection": q3Coll + "/" + qDocID(i), "data": q3Order(i)})
	}
	body, err := json.Marshal(map[string]any{"writes": writes})
	if err != nil {
		return err
	}
	rev, err := e.postAs(ctx, e.c.leader, "/api/db/batch", "batch", body)
	if err != nil {
		return fmt.Errorf("seed %s: %w", q3Coll, err)
	}
	n := e.o.q3Subscribers
	node := e.c.leader
	if _, _, err := checkRealtimeLimits(node, n); err != nil {
		return err
	}
	if err := e.read(ctx, node, q3Coll+"/"+qDocID(0), true, rev, false); err != nil {
		return fmt.Errorf("read %s on %s: %w", q3Coll, node.id, err)
	}
	qs := &q3State{node: node, base: time.Now(), log: &rtLog{cuts: map[string]int{}},
		hc: &http.Client{Transport: &http.Transport{
			Proxy:              nil,
			DialContext:        (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			DisableCompression: true,
		}}}
	t0 := time.Now()
	qs.subs = make([]*q3Sub, n)
	err = parallel(ctx, n, rtDialers, func(i int) error {
		s, err := qs.connect(ctx, e)
		if err != nil {
			return fmt.Errorf("live-query subscriber %d of %d on %s: %w", i+1, n, node.id, err)
		}
		qs.subs[i] = s
		return nil
	})
	if err != nil {
		qs.subs = slices.DeleteFunc(qs.subs, func(s *q3Sub) bool { return s == nil })
		qs.close()
		return err
	}
	e.q3 = qs
	logf("bench: Q3: %d live-query subscribers on %s in %.1fs", n, node.id, time.Since(t0).Seconds())
	return nil
}

// connect dials one subscriber and subscribes it to the live query (3
// attempts); the first window must be the 20 newest open orders.
func (qs *q3State) connect(ctx context.Context, e *env) (*q3Sub, error) {
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
			URL: qs.node.url, Token: e.pr.Token, ProjectID: e.pr.ID, APIKey: e.pr.APIKey,
			HTTPClient: qs.hc, Logger: slog.New(qs.log), Reconnect: true,
			EventBuffer: rtEventBuffer, PingInterval: -1,
		})
		if err != nil {
			cancel()
			continue
		}
		var sub *client.Subscription
		sub, err = conn.SubscribeQuery(dctx, q3Query())
		cancel()
		if err != nil {
			_ = conn.CloseNow()
			continue
		}
		if w := sub.Window(); len(w) != qLimit || w[0].Collection != q3Coll+"/"+qDocID(q3Docs-2) {
			_ = conn.CloseNow()
			return nil, fmt.Errorf("first window: %d documents, want %d starting with %s", len(w), qLimit, qDocID(q3Docs-2))
		}
		s := &q3Sub{conn: conn, sub: sub, ended: make(chan struct{})}
		go s.consume(qs, sub.Events())
		return s, nil
	}
	return nil, err
}

func (s *q3Sub) consume(qs *q3State, events <-chan client.Event) {
	defer close(s.ended)
	for ev := range events {
		if ev.Kind != client.KindChange {
			continue
		}
		now := time.Since(qs.base)
		s.mu.Lock()
		s.events = append(s.events, q3Event{rev: ev.Revision, recv: now})
		s.mu.Unlock()
		qs.delivered.Add(1)
	}
}

func (qs *q3State) close() {
	var wg sync.WaitGroup
	for _, s := range qs.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.conn.Close()
			<-s.ended
		}()
	}
	wg.Wait()
	qs.hc.CloseIdleConnections()
}

// q3Write is one write of a run and when it was sent and acknowledged.
type q3Write struct {
	rev      uint64
	events   int // events it causes at each subscriber
	sent     time.Duration
	ack      time.Duration
	modifies bool
}

// q3Plan is write k of run: the document it writes, the data, and the
// events it causes at each subscriber. Every 10th write moves a document
// into the window (k/10 even: a new newest open order) or back out of it
// (odd: that order closed); the others change the total of one of the
// q3Stable newest seeded open orders.
func q3Plan(run, k int) (path string, data order, events int) {
	if k%10 == 9 {
		m := k / 10
		o := order{Status: "open", Total: float64(k), CreatedAt: qBaseTime + int64(q3Docs)*1000 + int64(run)*1_000_000 + int64(m/2), Owner: "mover"}
		if m%2 == 1 {
			o.Status = "closed"
		}
		return q3Coll + "/m" + strconv.Itoa(run) + "-" + strconv.Itoa(m/2), o, 2
	}
	i := q3Docs - 2 - 2*(k%q3Stable)
	o := q3Order(i)
	o.Total = float64(run*1_000_000 + k)
	return q3Coll + "/" + qDocID(i), o, 1
}

// runQ3 is one run: ops writes paced at --q3-rate, then the wait until
// every subscriber has every event (or rtStall without progress, or
// --run-timeout). Ops are events received; the writer writes serially (a
// move and its undo stay in order).
func runQ3(ctx context.Context, e *env, _ *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	qs := e.q3
	o := e.o
	kinds := map[string]int{}
	if qs == nil {
		kinds["Q3 not prepared"]++
		return runResult{Errors: 1}, &histogram{}, kinds, nil
	}
	qs.run++
	run := qs.run
	for _, s := range qs.subs {
		s.mu.Lock()
		s.events = s.events[:0]
		s.mu.Unlock()
	}
	qs.delivered.Store(0)
	wctx, cancel := context.WithTimeout(ctx, o.runTimeout)
	defer cancel()
	interval := time.Duration(float64(time.Second) / o.q3Rate)
	start := time.Now()
	var writes []q3Write
	errs := 0
	for k := 0; k < ops && wctx.Err() == nil; k++ {
		sleepCtx(wctx, time.Until(start.Add(time.Duration(k)*interval)))
		path, data, events := q3Plan(run, k)
		body, _ := json.Marshal(map[string]any{"collection": path, "data": data}) // plain struct: cannot fail
		sent := time.Since(qs.base)
		rev, err := e.postBody(wctx, e.c.leader, body)
		ack := time.Since(qs.base)
		if err != nil {
			if wctx.Err() == nil {
				errs++
				kinds[err.Error()]++
			}
			continue
		}
		writes = append(writes, q3Write{rev: rev, events: events, sent: sent, ack: ack, modifies: events == 1})
	}
	// A move left open at the end (an odd number of moves) is undone
	// outside the measurement, so every run starts from the seeded window.
	if moves := (ops + 1) / 10; moves%2 == 1 && ctx.Err() == nil {
		path, data, _ := q3Plan(run, 10*moves+9)
		body, _ := json.Marshal(map[string]any{"collection": path, "data": data})
		if rev, err := e.postBody(ctx, e.c.leader, body); err == nil {
			writes = append(writes, q3Write{rev: rev, events: 2, sent: -1})
		}
	}
	writeWall := time.Since(start)
	writerCut := wctx.Err() != nil && ctx.Err() == nil
	var expected int64
	for _, w := range writes {
		expected += int64(w.events) * int64(len(qs.subs))
	}
	drained := waitDelivered(ctx, &qs.delivered, expected, o.runTimeout)
	lat, fromSend, missed, stray, lost := q3Latencies(qs, writes)
	for k, v := range map[string]int{"Q3 event missed": missed, "Q3 event of no write of the run": stray, "Q3 subscription ended": lost} {
		if v > 0 {
			kinds[k] += v
		}
	}
	e.q3FromSend.merge(fromSend)
	wall := writeWall.Seconds()
	return runResult{
		Ops: lat.count(), Errors: errs + missed + stray + lost,
		WallSeconds: round(wall, 3), OpsPerSec: round(throughput(lat.count(), writeWall), 1),
		TimedOut: writerCut || (!drained && ctx.Err() == nil),
		Writes:   len(writes), WritesPerSec: round(throughput(len(writes), writeWall), 1),
	}, lat, kinds, nil
}

// q3Latencies matches every subscriber's events to the writes, in order:
// a write causes w.events events, and the node sends them in the order of
// the writes, each with a revision at or after its write's (a live query's
// event carries the revision its window is exact at, which may be a later
// write's when the node read ahead to refill the window). So the events are
// taken in arrival order, w.events for each write in turn; an event with a
// revision before its write's, or after every write's events, is stray.
// The latency of each event is from its write's acknowledgement (0 when it
// arrived first) and from its sending. Also: events missing, subscriptions
// that ended. The undo write of a run (sent < 0) is expected, not measured.
func q3Latencies(qs *q3State, writes []q3Write) (lat, fromSend *histogram, missed, stray, lost int) {
	lat, fromSend = &histogram{}, &histogram{}
	for _, s := range qs.subs {
		j, got := 0, 0 // the write the next event belongs to, and its events so far
		s.mu.Lock()
		for _, ev := range s.events {
			if j >= len(writes) || ev.rev < writes[j].rev {
				stray++
				continue
			}
			w := writes[j]
			if w.sent >= 0 {
				lat.add(max(ev.recv-w.ack, 0))
				fromSend.add(ev.recv - w.sent)
			}
			if got++; got == w.events {
				j, got = j+1, 0
			}
		}
		s.mu.Unlock()
		for ; j < len(writes); j++ {
			missed += writes[j].events - got
			got = 0
		}
		select {
		case <-s.ended:
			lost++
		default:
		}
	}
	return lat, fromSend, missed, stray, lost
}

// summarizeQ3 notes the latency from the write's sending as well.
func summarizeQ3(e *env, _ *scenario, r *result) {
	h := &e.q3FromSend
	if h.count() == 0 {
		return
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d subscribers of one live query on %s; latency from the write's acknowledgement; from its sending instead (commit included): p50 %s, p99 %s, max %s",
		e.o.q3Subscribers, e.q3.node.id, fmtDur(h.percentile(50)), fmtDur(h.percentile(99)), fmtDur(h.max())))
	if cuts, _ := e.q3.log.counts(); len(cuts) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("connections cut and resumed: %v", cuts))
	}
}
