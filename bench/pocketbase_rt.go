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
	"strings"
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
	rtTally
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
	x := &pbSubscriber{body: resp.Body, cancel: cancel, rtTally: rtTally{ended: make(chan struct{})}}
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
			x.fail(err)
			return
		}
		if ev.Event != pbNotes {
			continue
		}
		now := time.Since(rt.base)
		run, seq, sent, ok := pbRecordEvent(ev.Data)
		if x.record(run, seq, sent, now, ok) {
			rt.delivered.Add(1)
		}
	}
}

// body is write seq of run: a notes record with the run, the sequence
// number, the send time (read now) and the value.
func (rt *pbRealtime) body(run, seq int) []byte {
	v := rt.pe.value
	b := rtHead(rt.base, run, seq, len(v))
	b = append(b, v...)
	return append(b, '}')
}

// run is one run: ops paced creates at --rate, then the wait until every
// subscriber has every successful one (or rtStall without progress, or
// --run-timeout). Ops are deliveries, as in ours.
func (rt *pbRealtime) run(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	pe := rt.pe
	rt.runID++
	id := rt.runID
	return rtPacedRun(ctx, pe.o, rt.base, &rt.delivered, tallies(rt.subs), id, ops, "pocketbase", "pocketbase SSE stream", func(wctx context.Context, i int) error {
		_, err := pe.createNote(wctx, rt.body(id, i))
		return err
	})
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
