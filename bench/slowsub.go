package main

// S2: one slow subscriber does not move W2's p99. Each run is two halves of
// the same W2 workload through the leader (in alternating order from run to
// run), one with no subscriber and one
// while a raw WebSocket subscriber on the leader subscribes to the written
// prefix and then never reads its socket (with a tiny receive buffer, so
// the node's writes to it stall at once). The node should cut it (close
// 4008) rather than let it slow the write path. Each half writes new
// documents under its own prefix, so the subscriber's snapshot is empty.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// slowRcvBuf is the slow subscriber's socket receive buffer (the kernel
// doubles it and enforces a minimum).
const slowRcvBuf = 4 << 10

// slowState is S2's record of its runs (warm-up included).
type slowState struct {
	runs []slowRun
}

type slowRun struct {
	without, with histogram
	// cut is how the slow subscriber's connection ended, read after the
	// half that had it ("" if still open when the bench drained it).
	cut string
}

// slowResult is S2's own figures (the JSON's "slowSubscriber").
type slowResult struct {
	P99WithoutMs float64 `json:"p99WithoutMs"`
	P99WithMs    float64 `json:"p99WithMs"`
	// P99Ratio is with/without: 1.0 means the slow subscriber did not
	// move W2's p99.
	P99Ratio float64 `json:"p99Ratio"`
	// Cuts counts how the slow subscriber ended, per run.
	Cuts map[string]int `json:"cuts"`
}

// runSlowSubscriber is one S2 run: W2 without, then with, the slow
// subscriber. The run's figures (ops/s, latencies) are the half with it.
func runSlowSubscriber(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	if e.slow == nil {
		e.slow = &slowState{}
	}
	n := len(e.slow.runs)
	var sr slowRun
	clients := s.Clients(e.o)
	half := func(prefix string) (runResult, *histogram, map[string]int, map[string]int) {
		w := *s
		w.Op = func(ctx context.Context, e *env, c, i int) error {
			_, err := e.post(ctx, e.c.leader, prefix+"/w"+strconv.Itoa(i))
			return err
		}
		return runOnce(ctx, e, &w, clients, ops)
	}
	base := "bench/s2/" + strconv.Itoa(n)
	without := func() (runResult, *histogram, map[string]int, map[string]int) {
		rr, h, kinds, shed := half(base + "a")
		sr.without = *h
		e.c.settle(ctx, e.hc)
		return rr, h, kinds, shed
	}
	with := func() (runResult, *histogram, map[string]int, map[string]int) {
		prefix := base + "b"
		conn, err := dialSlowSubscriber(ctx, e, e.c.leader, prefix)
		if err != nil {
			return runResult{Errors: 1}, &histogram{}, map[string]int{"slow subscriber: " + err.Error(): 1}, nil
		}
		rr, h, kinds, shed := half(prefix)
		sr.with = *h
		sr.cut = drainSlowSubscriber(ctx, conn)
		e.c.settle(ctx, e.hc)
		return rr, h, kinds, shed
	}
	// Alternate the order of the halves from run to run, so that neither
	// always runs on a fuller store.
	var rr0 runResult
	var kinds0 map[string]int
	var rr runResult
	var h *histogram
	var kinds, shed map[string]int
	if n%2 == 0 {
		rr0, _, kinds0, _ = without()
		rr, h, kinds, shed = with()
	} else {
		rr, h, kinds, shed = with()
		rr0, _, kinds0, _ = without()
	}
	for k, v := range kinds0 {
		kinds["without: "+k] += v
	}
	rr.Errors += rr0.Errors
	e.slow.runs = append(e.slow.runs, sr)
	return rr, h, kinds, shed
}

// dialSlowSubscriber connects a raw WebSocket to n with a tiny receive
// buffer, waits for ready, subscribes to prefix and waits for the (empty)
// snapshot; from then on nobody reads it.
func dialSlowSubscriber(ctx context.Context, e *env, n *benchNode, prefix string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d := &net.Dialer{Timeout: 10 * time.Second, Control: setRcvBuf(slowRcvBuf)}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext, DisableCompression: true}}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+e.pr.Token)
	h.Set("X-Project-Id", e.pr.ID)
	h.Set("X-API-Key", e.pr.APIKey)
	u := "ws" + strings.TrimPrefix(n.url, "http") + "/api/realtime"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	if err := expectOp(ctx, conn, "ready"); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	sub, _ := json.Marshal(map[string]any{"op": "subscribe", "id": "slow", "collection": prefix, "prefix": true})
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err := expectOp(ctx, conn, "snapshot"); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	return conn, nil
}

// expectOp reads one message and checks its op.
func expectOp(ctx context.Context, conn *websocket.Conn, op string) error {
	_, b, err := conn.Read(ctx)
	if err != nil {
		return fmt.Errorf("wait for %s: %w", op, err)
	}
	var f struct {
		Op   string `json:"op"`
		Code string `json:"code"`
	}
	if json.Unmarshal(b, &f) != nil || f.Op != op {
		return fmt.Errorf("wait for %s: got %.200s", op, b)
	}
	return nil
}

// drainSlowSubscriber reads what the node sent (for at most 10 s) to learn
// whether and how it ended the connection, then closes it.
func drainSlowSubscriber(ctx context.Context, conn *websocket.Conn) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	defer func() { _ = conn.CloseNow() }()
	for {
		_, _, err := conn.Read(ctx)
		if err == nil {
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return "not cut (still open)"
		}
		return closeKind(err)
	}
}

// summarizeSlow adds S2's with/without figures over the measured runs.
func summarizeSlow(e *env, s *scenario, r *result) {
	if e.slow == nil {
		return
	}
	runs := e.slow.runs[max(len(e.slow.runs)-len(r.Runs), 0):]
	var without, with histogram
	res := &slowResult{Cuts: map[string]int{}}
	for _, x := range runs {
		without.merge(&x.without)
		with.merge(&x.with)
		if x.cut != "" {
			res.Cuts[x.cut]++
		}
	}
	res.P99WithoutMs, res.P99WithMs = ms(without.percentile(99)), ms(with.percentile(99))
	if res.P99WithoutMs > 0 {
		res.P99Ratio = round(res.P99WithMs/res.P99WithoutMs, 2)
	}
	r.SlowSubscriber = res
	cuts := make([]string, 0, len(res.Cuts))
	for k, v := range res.Cuts {
		cuts = append(cuts, fmt.Sprintf("%d × %s", v, k))
	}
	r.Notes = append(r.Notes, fmt.Sprintf("W2 p99 without the slow subscriber %s, with it %s: ratio %.2f; the slow subscriber ended: %s",
		fmtMs(res.P99WithoutMs), fmtMs(res.P99WithMs), res.P99Ratio, strings.Join(cuts, ", ")))
}
