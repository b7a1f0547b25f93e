package main

// RT's PocketBase side: --subscribers server-sent event streams of the end
// user (GET /api/realtime, PB_CONNECT, then POST /api/realtime subscribing
// the clientId to the notes collection with the user's token); a paced
// writer, the same user, creates --rate records a second, each holding the
// run, its sequence number and its send time on the bench's monotonic
// clock, as our RT writes do, so each subscriber measures write-sent to
// event-received latency. Every subscriber must get every successful write
// once: a missed or duplicated delivery, or a stream that ended, is an error.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rtHTTPClient is a client for long-lived streams: no overall timeout, no
// pool limits that would queue the dials.
func rtHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:              nil,
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression: true,
	}}
}

// pbRealtime is RT's PocketBase side.
type pbRealtime struct {
	pe        *pbEnv
	base      time.Time
	hc        *http.Client
	subs      []*pbSubscriber
	runID     int
	delivered atomic.Int64
}

// pbSubscriber is one SSE stream with its subscription; consume records its
// deliveries, the run reads them under mu.
type pbSubscriber struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	ended  chan struct{}

	mu    sync.Mutex
	run   int
	got   []bool
	n     int
	dups  int
	stray int
	lat   []time.Duration
	last  time.Duration
	err   error // why the stream ended
}

func startPBRealtime(ctx context.Context, pe *pbEnv, logf func(string, ...any)) (*pbRealtime, error) {
	n := pe.o.subscribers
	if _, _, err := checkRealtimeLimits(pe.node, n); err != nil {
		return nil, err
	}
	rt := &pbRealtime{pe: pe, base: time.Now(), hc: rtHTTPClient()}
	t0 := time.Now()
	rt.subs = make([]*pbSubscriber, n)
	err := parallel(ctx, n, rtDialers, func(i int) error {
		x, err := rt.connect(ctx)
		if err != nil {
			return fmt.Errorf("SSE subscriber %d of %d: %w", i+1, n, err)
		}
		rt.subs[i] = x
		return nil
	})
	if err != nil {
		var kept []*pbSubscriber
		for _, x := range rt.subs {
			if x != nil {
				kept = append(kept, x)
			}
		}
		rt.subs = kept
		rt.close()
		return nil, err
	}
	logf("bench: RT pocketbase: %d SSE subscribers of %s in %.1fs", n, pbNotes, time.Since(t0).Seconds())
	return rt, nil
}

// pbConnectTimeout bounds one stream's opening and subscription.
const pbConnectTimeout = 30 * time.Second

// connect opens one stream, reads its PB_CONNECT and subscribes its client
// to the notes collection as the end user. The stream lives until close.
func (rt *pbRealtime) connect(ctx context.Context) (*pbSubscriber, error) {
	pe := rt.pe
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(pbConnectTimeout, cancel)
	fail := func(err error) (*pbSubscriber, error) {
		timer.Stop()
		cancel()
		return nil, err
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, pe.node.url+"/api/realtime", nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := rt.hc.Do(req)
	if err != nil {
		return fail(fmt.Errorf("GET /api/realtime: %w", err))
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		_ = resp.Body.Close()
		return fail(sseStatusError(resp.StatusCode, ct, b))
	}
	r := newSSEReader(resp.Body)
	clientID, err := pbConnectID(r)
	if err != nil {
		_ = resp.Body.Close()
		return fail(err)
	}
	sub, _ := json.Marshal(map[string]any{"clientId": clientID, "subscriptions": []string{pbNotes}}) // cannot fail
	if _, err := pe.do(sctx, http.MethodPost, "/api/realtime", pe.userToken, sub); err != nil {
		_ = resp.Body.Close()
		return fail(fmt.Errorf("POST /api/realtime: %w", err))
	}
	if !timer.Stop() {
		_ = resp.Body.Close()
		return fail(errors.New("connect timed out"))
	}
	x := &pbSubscriber{body: resp.Body, cancel: cancel, ended: make(chan struct{})}
	go x.consume(rt, r)
	return x, nil
}

// pbConnectID reads the stream's first event, PB_CONNECT, and returns its
// clientId.
func pbConnectID(r *sseReader) (string, error) {
	ev, err := r.next()
	if err != nil {
		return "", fmt.Errorf("read PB_CONNECT: %w", err)
	}
	var d struct {
		ClientID string `json:"clientId"`
	}
	if ev.Event != "PB_CONNECT" || json.Unmarshal(ev.Data, &d) != nil || d.ClientID == "" {
		return "", fmt.Errorf("first event %q %.100q, want PB_CONNECT with a clientId", ev.Event, ev.Data)
	}
	return d.ClientID, nil
}

// pbRecordEvent reads the record of a collection event's data
// {"action","record"}: the run, sequence number and send time it holds.
func pbRecordEvent(data []byte) (run, seq int, sent time.Duration, ok bool) {
	var d struct {
		Action string          `json:"action"`
		Record json.RawMessage `json:"record"`
	}
	if json.Unmarshal(data, &d) != nil || d.Action != "create" || len(d.Record) == 0 {
		return 0, 0, 0, false
	}
	return parseRTData(d.Record)
}

// consume records each notes event until the stream ends.
func (x *pbSubscriber) consume(rt *pbRealtime, r *sseReader) {
	defer close(x.ended)
	for {
		ev, err := r.next()
		if err != nil {
			x.mu.Lock()
			x.err = err
			x.mu.Unlock()
			return
		}
		if ev.Event != pbNotes {
			continue
		}
		now := time.Since(rt.base)
		run, seq, sent, ok := pbRecordEvent(ev.Data)
		x.mu.Lock()
		switch {
		case !ok || run != x.run || seq < 0 || seq >= len(x.got):
			x.stray++
		case x.got[seq]:
			x.dups++
		default:
			x.got[seq] = true
			x.n++
			x.lat = append(x.lat, now-sent)
			x.last = now
			rt.delivered.Add(1)
		}
		x.mu.Unlock()
	}
}

func (x *pbSubscriber) isEnded() bool {
	select {
	case <-x.ended:
		return true
	default:
		return false
	}
}

// body is write seq of run: a notes record with the run, the sequence
// number, the send time (read now) and the value.
func (rt *pbRealtime) body(run, seq int) []byte {
	v := rt.pe.value
	b := make([]byte, 0, len(v)+80)
	b = append(b, `{"r":`...)
	b = strconv.AppendInt(b, int64(run), 10)
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, int64(time.Since(rt.base)), 10)
	b = append(b, `,"v":`...)
	b = append(b, v...)
	return append(b, '}')
}

// run is one run: ops paced creates at --rate, then the wait until every
// subscriber has every successful one (or rtStall without progress, or
// --run-timeout). Ops are deliveries, as in ours.
func (rt *pbRealtime) run(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	pe, o := rt.pe, rt.pe.o
	rt.runID++
	id := rt.runID
	for _, x := range rt.subs {
		x.mu.Lock()
		x.run, x.n, x.dups, x.stray, x.last = id, 0, 0, 0, 0
		x.got = make([]bool, ops)
		x.lat = x.lat[:0]
		x.mu.Unlock()
	}
	rt.delivered.Store(0)
	kinds := map[string]int{}
	ok := make([]bool, ops)
	var mu sync.Mutex
	var writeErrs int
	wctx, cancel := context.WithTimeout(ctx, o.runTimeout)
	defer cancel()
	start := time.Now()
	startOff := time.Since(rt.base)
	interval := time.Duration(float64(time.Second) / o.rate)
	sem := make(chan struct{}, rtInFlight)
	var wg sync.WaitGroup
schedule:
	for i := 0; i < ops; i++ {
		sleepCtx(wctx, time.Until(start.Add(time.Duration(i)*interval)))
		select {
		case sem <- struct{}{}:
		case <-wctx.Done():
			break schedule
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := pe.createNote(wctx, rt.body(id, i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok[i] = true
			case wctx.Err() != nil:
			default:
				writeErrs++
				kinds[err.Error()]++
			}
		}()
	}
	wg.Wait()
	writeWall := time.Since(start)
	writerCut := wctx.Err() != nil && ctx.Err() == nil
	writes := 0
	for _, b := range ok {
		if b {
			writes++
		}
	}
	expected := int64(writes) * int64(len(rt.subs))
	deadline := time.Now().Add(o.runTimeout)
	last, lastChange := int64(-1), time.Now()
	drained := false
	for ctx.Err() == nil {
		d := rt.delivered.Load()
		if d >= expected {
			drained = true
			break
		}
		if d != last {
			last, lastChange = d, time.Now()
		}
		if time.Since(lastChange) > rtStall || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
	var all histogram
	var lastRecv time.Duration
	var deliveries, missed, dups, lost int
	for _, x := range rt.subs {
		x.mu.Lock()
		for i, b := range ok {
			if b && !x.got[i] {
				missed++
			}
		}
		deliveries += x.n
		dups += x.dups
		all.samples = append(all.samples, x.lat...)
		lastRecv = max(lastRecv, x.last)
		x.mu.Unlock()
		if x.isEnded() {
			lost++
		}
	}
	for k, v := range map[string]int{
		"pocketbase delivery missed": missed, "pocketbase delivery duplicated": dups, "pocketbase SSE stream ended": lost,
	} {
		if v > 0 {
			kinds[k] += v
		}
	}
	wall := writeWall
	if lastRecv > startOff {
		wall = max(wall, lastRecv-startOff)
	}
	return runResult{
		Ops: deliveries, Errors: writeErrs + missed + dups + lost,
		WallSeconds: round(wall.Seconds(), 3), OpsPerSec: round(throughput(deliveries, wall), 1),
		TimedOut: writerCut || (!drained && ctx.Err() == nil),
		Writes:   writes, WritesPerSec: round(throughput(writes, writeWall), 1),
	}, &all, kinds, nil
}

// close ends every stream and waits for its reader.
func (rt *pbRealtime) close() {
	for _, x := range rt.subs {
		x.cancel()
		_ = x.body.Close()
	}
	for _, x := range rt.subs {
		<-x.ended
	}
	rt.hc.CloseIdleConnections()
}
