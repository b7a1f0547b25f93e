package node_test

// Realtime across a cluster: subscribers on followers and on an edge node
// must receive every acknowledged write made through other nodes, once, in
// revision order, across dropped connections, a killed node and a restarted
// follower. Every check compares the full sequence a subscriber received
// with the sequence reconstructed from the writes' answers (X-Revision and
// the returned document), and the state implied by snapshot + changes with
// what REST reads return.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgebase/edgebase/internal/proctest"

	"github.com/edgebase/edgebase/internal/streamcheck"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/realtime/client"
)

// rtWait bounds every wait for a condition (generous: -race on 2 busy cores).
const rtWait = 60 * time.Second

func TestRealtimeCluster(t *testing.T) {
	t0 := time.Now()
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1})
	edge := 3
	leader := c.Leader(10 * time.Second)
	p := c.CreateProject(leader)
	t.Logf("cluster of 3 voters + 1 edge ready in %v; leader %s", time.Since(t0).Round(time.Millisecond), c.Nodes[leader].ID)
	rc := &rtCluster{c: c, p: p, edge: edge}

	t.Run("StreamToFollowerAndEdge", func(t *testing.T) { testRTStream(t, rc) })
	t.Run("ProxyCutsResume", func(t *testing.T) { testRTProxyCuts(t, rc) })
	t.Run("KilledNodeResumeElsewhere", func(t *testing.T) { testRTKilledNode(t, rc) })
	t.Run("AccessAndLogout", func(t *testing.T) { testRTAccess(t, rc) })
	t.Run("RestartedFollowerReplays", func(t *testing.T) { testRTRestartedFollower(t, rc) })
}

type rtCluster struct {
	c    *nodetest.Cluster
	p    nodetest.Project
	edge int
}

// roles returns the leader and the running voter followers. Call it only
// while no member is being killed or started.
func (rc *rtCluster) roles(t *testing.T) (leader int, voters []int) {
	t.Helper()
	leader = rc.c.Leader(20 * time.Second)
	for _, i := range rc.c.Followers(leader) {
		if !rc.c.Nodes[i].Edge {
			voters = append(voters, i)
		}
	}
	if len(voters) != 2 {
		t.Fatalf("want 2 running voter followers besides leader %s, have %v", rc.c.Nodes[leader].ID, voters)
	}
	return leader, voters
}

// ---- HTTP ----

var rtHTTP = &http.Client{Timeout: 20 * time.Second}

type rtResp struct {
	status int
	hdr    http.Header
	body   []byte
}

func (r *rtResp) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

func rtRequest(ctx context.Context, base, method, path string, headers map[string]string, body any) (*rtResp, error) {
	r, err := proctest.DoJSON(ctx, rtHTTP, 0, method, base+path, headers, body)
	if err != nil {
		return nil, err
	}
	return &rtResp{status: r.Status, hdr: r.Header, body: r.Body}, nil
}

func rtStamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// ---- writes ----

// rtWriter writes through fixed nodes and records every answer in a ledger.
// Its nodes are captured at creation: it never reads the cluster's members
// while another goroutine kills or restarts one.
type rtWriter struct {
	t      *testing.T
	ctx    context.Context
	pid    string
	tok    string
	l      *streamcheck.Ledger
	urls   []string
	ids    []string
	stores []*raftstore.Store
}

func (rc *rtCluster) writer(t *testing.T, ctx context.Context, l *streamcheck.Ledger, via ...int) *rtWriter {
	w := &rtWriter{t: t, ctx: ctx, pid: rc.p.ID, tok: rc.p.OwnerToken, l: l}
	for _, i := range via {
		m := rc.c.Nodes[i]
		if m.Node == nil {
			t.Fatalf("writer via %s: not running", m.ID)
		}
		w.urls = append(w.urls, m.URL())
		w.ids = append(w.ids, m.ID)
		w.stores = append(w.stores, m.Node.Store)
	}
	return w
}

func (w *rtWriter) hdr() map[string]string {
	return map[string]string{"Authorization": "Bearer " + w.tok}
}

// ambiguous reports whether a failed write may have been applied.
func rtAmbiguous(r *rtResp, err error) bool {
	return err != nil || r.status >= 500
}

// docEvent reads a write's answer: the document and its X-Revision, which
// must agree.
func (w *rtWriter) docEvent(r *rtResp, coll, what string) (streamcheck.Event, bool) {
	var d struct {
		Collection string          `json:"collection"`
		Data       json.RawMessage `json:"data"`
		Revision   uint64          `json:"revision"`
		UpdateTime string          `json:"updateTime"`
	}
	rev, perr := strconv.ParseUint(r.hdr.Get("X-Revision"), 10, 64)
	if err := json.Unmarshal(r.body, &d); err != nil || perr != nil || rev == 0 || d.Revision != rev || d.Collection != coll || d.UpdateTime == "" {
		w.t.Errorf("%s %s: X-Revision %q and answer %s disagree or are incomplete", what, coll, r.hdr.Get("X-Revision"), r)
		return streamcheck.Event{}, false
	}
	return streamcheck.Event{Rev: rev, Coll: coll, Type: client.TypeSet, Data: streamcheck.Compact(d.Data), UpdateTime: d.UpdateTime}, true
}

// retry runs one write until it is acknowledged or refused: an answer that
// may mean "applied" is recorded (unknown outcome) before the retry.
func (w *rtWriter) retry(what, coll string, try func(attempt int) (*rtResp, streamcheck.Event, error), done func(r *rtResp) bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		r, maybe, err := try(attempt)
		switch {
		case err == nil && (r.status == http.StatusOK || r.status == http.StatusCreated):
			return done(r)
		case rtAmbiguous(r, err):
			detail := fmt.Sprint(err)
			if err == nil {
				detail = r.String()
			}
			w.l.Unknown(what+" unknown outcome", coll+": "+detail, maybe)
		case r.status == http.StatusConflict:
			w.l.Retried(what+" 409", coll+": "+r.String()) // not applied
		default:
			w.t.Errorf("%s %s: %s", what, coll, r)
			return false
		}
		if w.ctx.Err() != nil || time.Now().After(deadline) {
			w.t.Errorf("%s %s: not acknowledged within 30s: %v", what, coll, w.ctx.Err())
			return false
		}
		// Pacing between retries during an election, not synchronisation.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-w.ctx.Done():
		}
	}
}

// post creates or replaces coll with data plus the attempt number.
func (w *rtWriter) post(node int, coll string, data map[string]any) (streamcheck.Event, bool) {
	var ev streamcheck.Event
	ok := w.retry("POST", coll, func(attempt int) (*rtResp, streamcheck.Event, error) {
		d := map[string]any{"a": attempt}
		for k, v := range data {
			d[k] = v
		}
		b, _ := json.Marshal(d)
		r, err := rtRequest(w.ctx, w.urls[node], http.MethodPost, "/api/db", w.hdr(), map[string]any{"collection": coll, "data": d})
		return r, streamcheck.Event{Coll: coll, Type: client.TypeSet, Data: string(b)}, err
	}, func(r *rtResp) bool {
		var ok bool
		if ev, ok = w.docEvent(r, coll, "POST"); ok {
			w.l.Ack(false, ev)
		}
		return ok
	})
	return ev, ok
}

// put sets field f of coll to a unique value.
func (w *rtWriter) put(node int, coll, value string) bool {
	return w.retry("PUT", coll, func(attempt int) (*rtResp, streamcheck.Event, error) {
		v := fmt.Sprintf("%s.%d", value, attempt)
		r, err := rtRequest(w.ctx, w.urls[node], http.MethodPut, "/api/db?collection="+url.QueryEscape(coll), w.hdr(),
			map[string]any{"oldKey": "f", "newKey": "f", "value": v, "type": "string"})
		return r, streamcheck.Event{Coll: coll, Type: client.TypeSet, Marker: `"f":"` + v + `"`}, err
	}, func(r *rtResp) bool {
		ev, ok := w.docEvent(r, coll, "PUT")
		if ok {
			if !strings.Contains(ev.Data, `"f":"`+value+".") {
				w.t.Errorf("PUT %s: answered data %s without the new field", coll, ev.Data)
			}
			w.l.Ack(false, ev)
		}
		return ok
	})
}

// del deletes coll; a 404 after an attempt of unknown outcome means that
// attempt deleted it.
func (w *rtWriter) del(node int, coll string) bool {
	unknownBefore := false
	return w.retry("DELETE", coll, func(attempt int) (*rtResp, streamcheck.Event, error) {
		r, err := rtRequest(w.ctx, w.urls[node], http.MethodDelete, "/api/db?collection="+url.QueryEscape(coll), w.hdr(), nil)
		if err == nil && r.status == http.StatusNotFound && unknownBefore {
			r = &rtResp{status: http.StatusOK, hdr: http.Header{"X-Already": {"1"}}}
		}
		if rtAmbiguous(r, err) {
			unknownBefore = true
		}
		return r, streamcheck.Event{Coll: coll, Type: client.TypeDelete}, err
	}, func(r *rtResp) bool {
		if r.hdr.Get("X-Already") != "" {
			return true
		}
		var out struct {
			Deleted  bool   `json:"deleted"`
			Revision uint64 `json:"revision"`
		}
		rev, perr := strconv.ParseUint(r.hdr.Get("X-Revision"), 10, 64)
		if err := json.Unmarshal(r.body, &out); err != nil || perr != nil || !out.Deleted || out.Revision != rev || rev == 0 {
			w.t.Errorf("DELETE %s: X-Revision %q and answer %s disagree", coll, r.hdr.Get("X-Revision"), r)
			return false
		}
		w.l.Ack(false, streamcheck.Event{Rev: rev, Coll: coll, Type: client.TypeDelete})
		return true
	})
}

// txn commits one multi-document transaction through node's store: three
// documents created, the first one then changed again in the same
// transaction (one change per document and revision: its final state).
func (w *rtWriter) txn(node int, base string, n int) bool {
	a, b, cc := base+"-a", base+"-b", base+"-c"
	full := func(p string) string { return w.pid + "/" + p }
	put := func(p string) raftstore.Op {
		d, _ := json.Marshal(map[string]any{"txn": n, "doc": p[len(p)-1:]})
		return raftstore.Op{Kind: raftstore.OpPut, Path: full(p), Data: d}
	}
	fv, _ := json.Marshal(fmt.Sprintf("again-%d", n))
	ops := []raftstore.Op{put(a), put(b), put(cc), {Kind: raftstore.OpSetField, Path: full(a), Field: "f", Data: fv}}
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	res, err := w.stores[node].Txn(ctx, &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil {
		w.l.Unknown("txn unknown outcome", base+": "+err.Error(),
			streamcheck.Event{Coll: a, Type: client.TypeSet, Marker: string(fv)},
			streamcheck.Event{Coll: b, Type: client.TypeSet, Marker: fmt.Sprintf(`"txn":%d`, n)},
			streamcheck.Event{Coll: cc, Type: client.TypeSet, Marker: fmt.Sprintf(`"txn":%d`, n)})
		return false
	}
	if !res.OK() || len(res.Docs) != len(ops) {
		w.t.Errorf("txn %s via %s refused: %+v", base, w.ids[node], res)
		return false
	}
	last := map[string]*raftstore.Document{}
	for i, op := range ops {
		last[op.Path] = res.Docs[i]
	}
	var evs []streamcheck.Event
	for _, p := range []string{a, b, cc} {
		d := last[full(p)]
		if d == nil || d.Revision != res.Revision {
			w.t.Errorf("txn %s: document %s after the commit: %+v (revision %d)", base, p, d, res.Revision)
			return false
		}
		evs = append(evs, streamcheck.Event{Rev: res.Revision, Coll: p, Type: client.TypeSet, Data: streamcheck.Compact(d.Data), UpdateTime: rtStamp(d.UpdateTime)})
	}
	if !strings.Contains(evs[0].Data, string(fv)) {
		w.t.Errorf("txn %s: final state of %s is %s, lacks the second change", base, a, evs[0].Data)
	}
	w.l.Ack(true, evs...)
	return true
}

// rtWorkload runs writers goroutines of ops operations each under prefix:
// creates (also nested ones), replacements, field updates and deletes of
// the goroutine's own documents, alternating over the writer's nodes, and
// with txnEvery > 0 goroutine 0 also commits a transaction every txnEvery
// operations.
type rtWorkload struct {
	w        *rtWriter
	prefix   string
	writers  int
	ops      int
	txnEvery int
	wg       sync.WaitGroup
	started  atomic.Int64
	stop     atomic.Bool // ends the operations early
}

func (wl *rtWorkload) start() {
	for g := 0; g < wl.writers; g++ {
		wl.wg.Add(1)
		go func() {
			defer wl.wg.Done()
			wl.run(g)
		}()
	}
}

func (wl *rtWorkload) wait() { wl.wg.Wait() }

func (wl *rtWorkload) run(g int) {
	var live []string // own documents that exist
	for n := 0; n < wl.ops && !wl.stop.Load() && wl.w.ctx.Err() == nil; n++ {
		wl.started.Add(1)
		node := (g + n) % len(wl.w.urls)
		if g == 0 && wl.txnEvery > 0 && n%wl.txnEvery == wl.txnEvery-1 {
			wl.w.txn(node, fmt.Sprintf("%s/txn%03d", wl.prefix, n), n)
			continue
		}
		switch k := n % 10; {
		case k == 6 && len(live) > 0:
			wl.w.put(node, live[n%len(live)], fmt.Sprintf("g%d-n%d", g, n))
		case k == 7 && len(live) > 0:
			i := (n * 7) % len(live)
			if wl.w.del(node, live[i]) {
				live = slices.Delete(live, i, i+1)
			}
		case k == 8:
			wl.w.post(node, fmt.Sprintf("%s/nest/g%d-%03d/leaf", wl.prefix, g, n), map[string]any{"g": g, "n": n, "deep": true})
		case k == 9 && len(live) > 0:
			wl.w.post(node, live[(n*3)%len(live)], map[string]any{"g": g, "n": n, "replaced": true})
		default:
			coll := fmt.Sprintf("%s/g%d-%03d", wl.prefix, g, n)
			if _, ok := wl.w.post(node, coll, map[string]any{"g": g, "n": n}); ok {
				live = append(live, coll)
			}
		}
	}
}

// fence is one more acknowledged write under prefix: once a subscriber has
// it, it has everything acknowledged before.
func (w *rtWriter) fence(t *testing.T, prefix, name string) uint64 {
	t.Helper()
	ev, ok := w.post(0, prefix+"/fence-"+name, map[string]any{"fence": name})
	if !ok {
		t.Fatalf("fence write %s failed", name)
	}
	return ev.Rev
}

// ---- subscribers ----

func rtConfig(rc *rtCluster, base, tok string, reconnect bool) client.Config {
	return client.Config{URL: base, Token: tok, ProjectID: rc.p.ID, APIKey: rc.p.APIKey, Reconnect: reconnect,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

// rtDial connects and subscribes to prefix (and everything under it); the
// subscription's events are collected until it ends.
func rtDial(t *testing.T, name string, cfg client.Config, prefix string, opts ...client.SubOption) *rtCollector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, cfg.URL, err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	return rtSubscribe(t, name, conn, prefix, opts...)
}

// rtCollector is a subscription's collector and the connection it runs on.
type rtCollector struct {
	*streamcheck.Collector
	conn *client.Conn
}

func rtSubscribe(t *testing.T, name string, conn *client.Conn, prefix string, opts ...client.SubOption) *rtCollector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := conn.Subscribe(ctx, prefix, true, opts...)
	if err != nil {
		t.Fatalf("%s: subscribe %s: %v", name, prefix, err)
	}
	// Start is exact only while no change of prefix is in flight (callers
	// subscribe snapshot collectors before their writes start).
	return &rtCollector{Collector: streamcheck.NewCollector(name, sub), conn: conn}
}

// ---- checks ----

type rtDoc struct {
	Data string
	Rev  uint64
}

// rtState applies received changes to a snapshot.
func rtState(docs []client.Document, evs []streamcheck.Event) map[string]rtDoc {
	st := map[string]rtDoc{}
	for _, d := range docs {
		st[d.Collection] = rtDoc{Data: streamcheck.Compact(d.Data), Rev: d.Revision}
	}
	for _, e := range evs {
		if e.Type == client.TypeDelete {
			delete(st, e.Coll)
		} else {
			st[e.Coll] = rtDoc{Data: e.Data, Rev: e.Rev}
		}
	}
	return st
}

// rtTruth reads every path ever written under prefix through node i (strong
// GETs), and the listing of prefix's direct children, which must name no
// document the ledger does not know.
func (rc *rtCluster) rtTruth(t *testing.T, i int, prefix string, l *streamcheck.Ledger) map[string]rtDoc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rtWait)
	defer cancel()
	base := rc.c.Nodes[i].URL()
	h := map[string]string{"Authorization": "Bearer " + rc.p.OwnerToken}
	paths := map[string]bool{}
	for _, p := range l.Paths() {
		paths[p] = true
	}
	truth := map[string]rtDoc{}
	for p := range paths {
		r, err := rtRequest(ctx, base, http.MethodGet, "/api/db?collection="+url.QueryEscape(p), h, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		switch r.status {
		case http.StatusNotFound:
		case http.StatusOK:
			var d struct {
				Data     json.RawMessage `json:"data"`
				Revision uint64          `json:"revision"`
			}
			if err := json.Unmarshal(r.body, &d); err != nil {
				t.Fatalf("GET %s: %s", p, r)
			}
			truth[p] = rtDoc{Data: streamcheck.Compact(d.Data), Rev: d.Revision}
		default:
			t.Fatalf("GET %s on %s: %s", p, rc.c.Nodes[i].ID, r)
		}
	}
	token := ""
	for page := 0; page < 100; page++ {
		q := "/api/db?list=true&limit=1000&collection=" + url.QueryEscape(prefix)
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		r, err := rtRequest(ctx, base, http.MethodGet, q, h, nil)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("list %s: %v %v", prefix, r, err)
		}
		var out struct {
			Documents []struct {
				Collection string          `json:"collection"`
				Data       json.RawMessage `json:"data"`
				Revision   uint64          `json:"revision"`
			} `json:"documents"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("list %s: %s", prefix, r)
		}
		for _, d := range out.Documents {
			if got, ok := truth[d.Collection]; !ok || got.Rev != d.Revision || got.Data != streamcheck.Compact(d.Data) {
				t.Errorf("listing of %s shows %s rev %d %s; GETs gave %+v (known: %v)", prefix, d.Collection, d.Revision, d.Data, got, ok)
			}
		}
		if token = out.NextPageToken; token == "" {
			break
		}
	}
	return truth
}

// rtCheckState compares the state implied by snapshot + changes with REST.
func rtCheckState(t streamcheck.Reporter, name string, state, truth map[string]rtDoc) {
	t.Helper()
	n := 0
	for p, w := range truth {
		if g, ok := state[p]; !ok || g != w {
			if n++; n <= 8 {
				t.Errorf("%s: snapshot+changes give %s = %+v (present %v); REST has %+v", name, p, g, ok, w)
			}
		}
	}
	for p, g := range state {
		if _, ok := truth[p]; !ok {
			if n++; n <= 8 {
				t.Errorf("%s: snapshot+changes hold %s = %+v; REST has no such document", name, p, g)
			}
		}
	}
	if n > 8 {
		t.Errorf("%s: %d documents differ in all", name, n)
	}
}

// rtMerge joins what a subscriber received before its connection died with
// what a new subscription resumed with since = the last revision it saw
// minus one returned: the changes of that last revision it already has are
// dropped (the protocol's rule), nothing at or below since may come back.
func rtMerge(t streamcheck.Reporter, name string, before, after []streamcheck.Event, since uint64) []streamcheck.Event {
	t.Helper()
	out := slices.Clone(before)
	last := uint64(0)
	if len(before) > 0 {
		last = before[len(before)-1].Rev
	}
	have := map[string]bool{}
	for _, e := range before {
		if e.Rev == last {
			have[e.Coll] = true
		}
	}
	for _, e := range after {
		if e.Rev <= since {
			t.Errorf("%s: resumed with since %d, got %v at or below it", name, since, e)
		}
		if e.Rev == last && have[e.Coll] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// ---- a. a stream of writes to a follower's and an edge node's subscribers ----

func testRTStream(t *testing.T, rc *rtCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, voters := rc.roles(t)
	sf, wf := voters[0], voters[1]
	const prefix = "rta"
	l := streamcheck.NewLedger()
	w := rc.writer(t, ctx, l, leader, wf)
	// Seed documents, so that the snapshots are not empty and the stream
	// updates and deletes documents the subscribers got in their snapshot.
	for i := 0; i < 40; i++ {
		w.post(i%2, fmt.Sprintf("%s/seed-%02d", prefix, i), map[string]any{"seed": i})
	}
	seedMax := l.Max()
	subs := []*rtCollector{
		rtDial(t, "follower "+rc.c.Nodes[sf].ID, rtConfig(rc, rc.c.Nodes[sf].URL(), rc.p.OwnerToken, true), prefix),
		rtDial(t, "edge "+rc.c.Nodes[rc.edge].ID, rtConfig(rc, rc.c.Nodes[rc.edge].URL(), rc.p.OwnerToken, true), prefix),
	}
	for _, s := range subs {
		if len(s.Docs) != 40 || s.Start < seedMax {
			t.Fatalf("%s: snapshot of %d documents at revision %d, want the 40 seeds (last at %d)", s.Name, len(s.Docs), s.Start, seedMax)
		}
	}
	// A stream of 500 operations: 4 goroutines, through the leader and the
	// other follower; creates, nested creates, replacements, field updates,
	// deletes (of seeds too), and transactions of several documents.
	start := time.Now()
	for i := 0; i < 10; i++ {
		node := i % 2
		coll := fmt.Sprintf("%s/seed-%02d", prefix, i)
		if i%2 == 0 {
			w.del(node, coll)
		} else {
			w.put(node, coll, fmt.Sprintf("seed-%d", i))
		}
	}
	wl := &rtWorkload{w: w, prefix: prefix, writers: 4, ops: 123, txnEvery: 20}
	wl.start()
	wl.wait()
	fence := w.fence(t, prefix, "a")
	t.Logf("%s in %v", l.Summary(), time.Since(start).Round(time.Millisecond))
	for _, s := range subs {
		s.WaitRev(t, fence, rtWait)
	}
	t.Logf("every subscriber had the fence (rev %d) %v after the writes started", fence, time.Since(start).Round(time.Millisecond))
	truth := rc.rtTruth(t, leader, prefix, l)
	for _, s := range subs {
		got, other := s.Snapshot()
		if len(other) > 0 {
			t.Errorf("%s: unexpected events %v (the connection was never cut)", s.Name, other)
		}
		streamcheck.Check(t, s.Name, got, s.Start, l)
		rtCheckState(t, s.Name, rtState(s.Docs, got), truth)
		if s.conn.Reconnects() != 0 {
			t.Errorf("%s: %d reconnects", s.Name, s.conn.Reconnects())
		}
		t.Logf("%s: snapshot of %d documents at %d, then %d changes up to %d", s.Name, len(s.Docs), s.Start, len(got), s.Last())
	}
}

// ---- b. connections cut by a proxy while writes continue ----

// rtProxy forwards TCP connections to a node and cuts them on demand. In the
// server-to-client direction it forwards whole WebSocket frames, so it can
// cut right after a chosen message: in the middle of a transaction's
// changes, for instance.
type rtProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	pipes    map[*rtPipe]struct{}
	arm      func(payload []byte) bool
	cuts     int
	accepted int
	cutMsg   string
}

type rtPipe struct {
	client, server net.Conn
	once           sync.Once
}

func (p *rtPipe) close() {
	p.once.Do(func() {
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

func rtStartProxy(t *testing.T, target string) *rtProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &rtProxy{ln: ln, target: target, pipes: map[*rtPipe]struct{}{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				px.serve(cl)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		px.cutAll()
		wg.Wait()
	})
	return px
}

func (px *rtProxy) url() string { return "http://" + px.ln.Addr().String() }

func (px *rtProxy) serve(cl net.Conn) {
	up, err := net.DialTimeout("tcp", px.target, 5*time.Second)
	if err != nil {
		_ = cl.Close()
		return
	}
	pp := &rtPipe{client: cl, server: up}
	px.mu.Lock()
	px.pipes[pp] = struct{}{}
	px.accepted++
	px.mu.Unlock()
	defer func() {
		pp.close()
		px.mu.Lock()
		delete(px.pipes, pp)
		px.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, cl)
		pp.close()
	}()
	px.downstream(pp)
	pp.close()
	<-done
}

// downstream forwards the HTTP answer, then frame by frame.
func (px *rtProxy) downstream(pp *rtPipe) {
	br := bufio.NewReader(pp.server)
	first := true
	upgraded := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if first {
			upgraded = strings.Contains(line, " 101 ")
			first = false
		}
		if _, err := io.WriteString(pp.client, line); err != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	if !upgraded {
		_, _ = io.Copy(pp.client, br)
		return
	}
	hdr := make([]byte, 14)
	for {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return
		}
		hl := 2
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(br, hdr[2:4]); err != nil {
				return
			}
			n, hl = uint64(binary.BigEndian.Uint16(hdr[2:4])), 4
		case 127:
			if _, err := io.ReadFull(br, hdr[2:10]); err != nil {
				return
			}
			n, hl = binary.BigEndian.Uint64(hdr[2:10]), 10
		}
		if hdr[1]&0x80 != 0 { // masked (servers do not mask; be general)
			if _, err := io.ReadFull(br, hdr[hl:hl+4]); err != nil {
				return
			}
			hl += 4
		}
		if n > 64<<20 {
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return
		}
		if _, err := pp.client.Write(append(slices.Clone(hdr[:hl]), payload...)); err != nil {
			return
		}
		px.mu.Lock()
		cut := px.arm != nil && hdr[0]&0x0f == 1 && px.arm(payload)
		if cut {
			px.arm = nil
			px.cuts++
			px.cutMsg = string(payload)
		}
		px.mu.Unlock()
		if cut {
			return
		}
	}
}

// cutAll drops every open connection (the proxy keeps accepting).
func (px *rtProxy) cutAll() int {
	px.mu.Lock()
	pipes := make([]*rtPipe, 0, len(px.pipes))
	for p := range px.pipes {
		pipes = append(pipes, p)
	}
	if len(pipes) > 0 {
		px.cuts++
	}
	px.mu.Unlock()
	for _, p := range pipes {
		p.close()
	}
	return len(pipes)
}

func (px *rtProxy) state() (cuts, accepted int, msg string) {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.cuts, px.accepted, px.cutMsg
}

func rtWaitCond(t *testing.T, what string, total time.Duration, f func() error) {
	t.Helper()
	nodetest.CheckFor(t, total, 5*time.Millisecond, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

func testRTProxyCuts(t *testing.T, rc *rtCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, voters := rc.roles(t)
	sf, wf := voters[0], voters[1]
	const prefix = "rtb"
	l := streamcheck.NewLedger()
	w := rc.writer(t, ctx, l, leader, wf)
	pxF := rtStartProxy(t, rc.c.Nodes[sf].HTTPAddr)
	pxE := rtStartProxy(t, rc.c.Nodes[rc.edge].HTTPAddr)
	subs := []*rtCollector{
		rtDial(t, "follower "+rc.c.Nodes[sf].ID+" via proxy", rtConfig(rc, pxF.url(), rc.p.OwnerToken, true), prefix),
		rtDial(t, "edge "+rc.c.Nodes[rc.edge].ID+" via proxy", rtConfig(rc, pxE.url(), rc.p.OwnerToken, true), prefix),
	}
	pxs := []*rtProxy{pxF, pxE}
	// First cut: right after the first change of a transaction of three
	// documents, so the client has seen part of a revision.
	inTxn := func(payload []byte) bool {
		return bytes.Contains(payload, []byte(`"op":"change"`)) && bytes.Contains(payload, []byte(`/txn`))
	}
	for _, px := range pxs {
		px.mu.Lock()
		px.arm = inTxn
		px.mu.Unlock()
	}
	start := time.Now()
	// Writes go on until every cut is done and 100 more operations after.
	wl := &rtWorkload{w: w, prefix: prefix, writers: 4, ops: 1000, txnEvery: 8}
	wl.start()
	for k, px := range pxs {
		s := subs[k]
		rtWaitCond(t, s.Name+" cut in a transaction", rtWait, func() error {
			if cuts, _, _ := px.state(); cuts < 1 {
				return errors.New("no transaction change passed yet")
			}
			return nil
		})
		rtWaitCond(t, s.Name+" reconnect 1", rtWait, func() error {
			if n := s.conn.Reconnects(); n < 1 {
				return fmt.Errorf("%d reconnects", n)
			}
			return nil
		})
		_, _, msg := px.state()
		t.Logf("%s: cut after %s", s.Name, msg)
	}
	// Second cut: wherever the stream is, once 60 more changes arrived.
	for k, px := range pxs {
		s := subs[k]
		s.WaitCount(t, s.Count()+60, rtWait)
		if px.cutAll() == 0 {
			t.Fatalf("%s: no connection to cut", s.Name)
		}
	}
	// Third cut: as soon as the client has reconnected, most likely while
	// the server replays the change log for it.
	for k, px := range pxs {
		s := subs[k]
		rtWaitCond(t, s.Name+" reconnect 2", rtWait, func() error {
			if n := s.conn.Reconnects(); n < 2 {
				return fmt.Errorf("%d reconnects", n)
			}
			return nil
		})
		px.cutAll()
	}
	acks := l.Acks()
	rtWaitCond(t, "100 more writes", rtWait, func() error {
		if n := l.Acks(); n < acks+100 {
			return fmt.Errorf("%d", n-acks)
		}
		return nil
	})
	wl.stop.Store(true)
	wl.wait()
	fence := w.fence(t, prefix, "b")
	t.Logf("%s in %v", l.Summary(), time.Since(start).Round(time.Millisecond))
	for _, s := range subs {
		s.WaitRev(t, fence, rtWait)
		// The fence may have come in the last replay, before its resumed.
		s.WaitFor(t, "a resumed event last", rtWait, func(_ []streamcheck.Event, other []string) bool {
			return len(other) > 0 && strings.HasPrefix(other[len(other)-1], client.KindResumed+" ")
		})
	}
	truth := rc.rtTruth(t, leader, prefix, l)
	for k, s := range subs {
		got, other := s.Snapshot()
		streamcheck.Check(t, s.Name, got, s.Start, l)
		rtCheckState(t, s.Name, rtState(s.Docs, got), truth)
		cuts, accepted, _ := pxs[k].state()
		// Every reconnect resumes; a session cut before the server's
		// resumed answer (the third cut may be) shows no resumed event.
		resumed := 0
		for _, o := range other {
			if strings.HasPrefix(o, client.KindResumed+" ") {
				resumed++
			} else {
				t.Errorf("%s: unexpected event %s", s.Name, o)
			}
		}
		if cuts != 3 || s.conn.Reconnects() != 3 || resumed < 1 || resumed > 3 || accepted != 4 {
			t.Errorf("%s: %d cuts, %d reconnects, %d resumed events, %d connections through the proxy; want 3, 3, 1..3, 4",
				s.Name, cuts, s.conn.Reconnects(), resumed, accepted)
		}
		if len(other) > 0 && !strings.HasPrefix(other[len(other)-1], client.KindResumed+" ") {
			t.Errorf("%s: the last session did not resume: %v", s.Name, other)
		}
		t.Logf("%s: %d changes up to %d across %d reconnects", s.Name, len(got), s.Last(), s.conn.Reconnects())
	}
}

// ---- c. the subscriber's node is killed; resume on other nodes ----

func testRTKilledNode(t *testing.T, rc *rtCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, voters := rc.roles(t)
	victim, other := voters[0], voters[1]
	const prefix = "rtc"
	l := streamcheck.NewLedger()
	w := rc.writer(t, ctx, l, leader, other)
	for i := 0; i < 20; i++ {
		w.post(i%2, fmt.Sprintf("%s/seed-%02d", prefix, i), map[string]any{"seed": i})
	}
	a := rtDial(t, "subscriber on "+rc.c.Nodes[victim].ID, rtConfig(rc, rc.c.Nodes[victim].URL(), rc.p.OwnerToken, false), prefix)
	// Another one on the same node keeps reconnecting to it: once the node
	// is back it resumes there, from its own change log.
	back := rtDial(t, "reconnecting subscriber on "+rc.c.Nodes[victim].ID, rtConfig(rc, rc.c.Nodes[victim].URL(), rc.p.OwnerToken, true), prefix)
	start := time.Now()
	wl := &rtWorkload{w: w, prefix: prefix, writers: 4, ops: 100, txnEvery: 10}
	wl.start()
	a.WaitCount(t, 120, rtWait)
	killAt := time.Now()
	rc.c.Kill(victim)
	select {
	case <-a.Closed():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: Events still open 20s after its node was killed", a.Name)
	}
	before, _ := a.Snapshot()
	last := before[len(before)-1].Rev
	endTime, endErr := a.End()
	t.Logf("killed %s %v after the writes started; its subscriber ended %v later with %d changes up to %d (%v)",
		rc.c.Nodes[victim].ID, killAt.Sub(start).Round(time.Millisecond), endTime.Sub(killAt).Round(time.Millisecond), len(before), last, endErr)
	if wl.started.Load() >= int64(wl.writers*wl.ops) {
		t.Logf("note: the workload was already complete when the node died")
	}
	// Resume on the other voter and on the edge node: their change logs
	// hold the same changes.
	since := last - 1
	resumed := []*rtCollector{
		rtDial(t, "resumed on "+rc.c.Nodes[other].ID, rtConfig(rc, rc.c.Nodes[other].URL(), rc.p.OwnerToken, true), prefix, client.Since(since)),
		rtDial(t, "resumed on "+rc.c.Nodes[rc.edge].ID, rtConfig(rc, rc.c.Nodes[rc.edge].URL(), rc.p.OwnerToken, true), prefix, client.Since(since)),
	}
	wl.wait()
	fence := w.fence(t, prefix, "c")
	t.Logf("%s in %v", l.Summary(), time.Since(start).Round(time.Millisecond))
	for _, s := range resumed {
		s.WaitRev(t, fence, rtWait)
	}
	truth := rc.rtTruth(t, leader, prefix, l)
	for _, s := range resumed {
		after, other := s.Snapshot()
		if len(other) > 0 {
			t.Errorf("%s: unexpected events %v", s.Name, other)
		}
		merged := rtMerge(t, s.Name, before, after, since)
		streamcheck.Check(t, a.Name+" then "+s.Name, merged, a.Start, l)
		rtCheckState(t, a.Name+" then "+s.Name, rtState(a.Docs, merged), truth)
		t.Logf("%s: %d changes after since %d", s.Name, len(after), since)
	}
	rc.c.StartMember(victim)
	rc.c.WaitReady(victim, 30*time.Second)
	back.WaitRev(t, fence, rtWait)
	// The fence may have come in the replay, before the resumed answer.
	back.WaitFor(t, "the resumed event", rtWait, func(_ []streamcheck.Event, other []string) bool { return len(other) > 0 })
	got, kinds := back.Snapshot()
	streamcheck.Check(t, back.Name, got, back.Start, l)
	rtCheckState(t, back.Name, rtState(back.Docs, got), truth)
	if back.conn.Reconnects() != 1 || len(kinds) != 1 || !strings.HasPrefix(kinds[0], client.KindResumed+" ") {
		t.Errorf("%s: %d reconnects, events %v; want one reconnect and one resumed", back.Name, back.conn.Reconnects(), kinds)
	}
	t.Logf("%s: resumed on the restarted node; %d changes up to %d", back.Name, len(got), back.Last())
}

// ---- d. access: another user's paths, and a logout ----

type rtUser struct {
	ID, Token string
}

func (rc *rtCluster) register(t *testing.T, i int, email string) rtUser {
	t.Helper()
	var reg struct {
		Token string
		User  struct{ ID string }
	}
	hdr := map[string]string{"X-Project-Id": rc.p.ID, "X-API-Key": rc.p.APIKey}
	if st := rc.c.Do(i, http.MethodPost, "/api/auth", hdr, map[string]string{"action": "register", "email": email, "password": "a long enough password", "name": "U"}, &reg); st != http.StatusCreated || reg.Token == "" {
		t.Fatalf("register %s: %d", email, st)
	}
	return rtUser{ID: reg.User.ID, Token: reg.Token}
}

func testRTAccess(t *testing.T, rc *rtCluster) {
	leader, voters := rc.roles(t)
	nodes := []int{voters[0], rc.edge}
	alice := rc.register(t, leader, "rt-alice@example.com")
	bob := rc.register(t, leader, "rt-bob@example.com")
	mine := "users/" + alice.ID

	var aliceSubs, bobSubs []*rtCollector
	for _, i := range nodes {
		id := rc.c.Nodes[i].ID
		// Bob may not subscribe to Alice's paths, prefix or single document.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		bc, err := client.Dial(ctx, rtConfig(rc, rc.c.Nodes[i].URL(), bob.Token, true))
		cancel()
		if err != nil {
			t.Fatalf("bob dial %s: %v", id, err)
		}
		t.Cleanup(func() { _ = bc.CloseNow() })
		for _, sub := range []struct {
			path   string
			prefix bool
		}{{mine, true}, {mine + "/notes", false}, {"users", true}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			s, err := bc.Subscribe(ctx, sub.path, sub.prefix)
			cancel()
			var e *client.Error
			if err == nil || !errors.As(err, &e) || e.Code != "forbidden" {
				t.Errorf("bob subscribes to %s (prefix %v) on %s: %v (subscribed: %v); want error forbidden", sub.path, sub.prefix, id, err, s != nil)
			}
		}
		// ... the refusal ends that subscription only: his own path works.
		bobSubs = append(bobSubs, rtSubscribe(t, "bob on "+id, bc, "users/"+bob.ID))
		aliceSubs = append(aliceSubs, rtDial(t, "alice on "+id, rtConfig(rc, rc.c.Nodes[i].URL(), alice.Token, true), mine))
	}
	// Both see their own writes, through the leader.
	for _, u := range []rtUser{alice, bob} {
		var d struct{ Revision uint64 }
		if st := rc.c.Do(leader, http.MethodPost, "/api/db", bearerH(u.Token), map[string]any{"collection": "users/" + u.ID + "/notes/n1", "data": map[string]int{"x": 1}}, &d); st != http.StatusCreated {
			t.Fatalf("write as %s: %d", u.ID, st)
		}
		subs := aliceSubs
		if u == bob {
			subs = bobSubs
		}
		for _, s := range subs {
			s.WaitRev(t, d.Revision, rtWait)
		}
	}
	for _, s := range bobSubs {
		if got, _ := s.Snapshot(); len(got) != 1 || strings.Contains(got[0].Coll, alice.ID) {
			t.Errorf("%s received %v", s.Name, got)
		}
	}

	// Alice logs out through the leader: her streams on the follower and on
	// the edge node end with 4001 and session_ended, promptly.
	hdr := map[string]string{"X-Project-Id": rc.p.ID, "X-API-Key": rc.p.APIKey, "Authorization": "Bearer " + alice.Token}
	if st := rc.c.Do(leader, http.MethodPost, "/api/auth", hdr, map[string]string{"action": "logout"}, nil); st != http.StatusOK {
		t.Fatalf("logout: %d", st)
	}
	loggedOut := time.Now()
	for _, s := range aliceSubs {
		select {
		case <-s.conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still open 10s after the logout", s.Name)
		}
		took := time.Since(loggedOut)
		err := s.conn.Err()
		var e *client.Error
		if websocket.CloseStatus(err) != 4001 || !errors.As(err, &e) || e.Code != "session_ended" {
			t.Errorf("%s ended with %v (close status %d); want session_ended and 4001", s.Name, err, websocket.CloseStatus(err))
		}
		select {
		case <-s.Closed():
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Events not closed after the connection ended", s.Name)
		}
		if s.conn.Reconnects() != 0 {
			t.Errorf("%s: reconnected %d times after 4001", s.Name, s.conn.Reconnects())
		}
		if took > 5*time.Second {
			t.Errorf("%s: closed %v after the logout", s.Name, took)
		}
		t.Logf("%s: closed %v after the logout: %v", s.Name, took.Round(time.Millisecond), err)
	}
	// The token is refused at the upgrade now, on both; Bob is unaffected.
	for k, i := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := client.Dial(ctx, rtConfig(rc, rc.c.Nodes[i].URL(), alice.Token, true))
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "invalid_token" {
			t.Errorf("dial %s with the logged-out token: %v; want 401 invalid_token", rc.c.Nodes[i].ID, err)
		}
		if err := bobSubs[k].conn.Ping(ctx); err != nil {
			t.Errorf("%s: ping after alice's logout: %v", bobSubs[k].Name, err)
		}
		cancel()
	}
}

// ---- e. a follower stopped while changes are committed, then restarted ----

func testRTRestartedFollower(t *testing.T, rc *rtCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, voters := rc.roles(t)
	victim, other := voters[1], voters[0]
	const prefix = "rte"
	l := streamcheck.NewLedger()
	w := rc.writer(t, ctx, l, leader, other)
	first, ok := w.post(0, prefix+"/before-0", map[string]any{"before": 0})
	if !ok {
		t.Fatal("first write failed")
	}
	for i := 1; i < 20; i++ {
		w.post(i%2, fmt.Sprintf("%s/before-%d", prefix, i), map[string]any{"before": i})
	}
	since := first.Rev - 1
	// The victim has the writes so far (a strong read on it waits for them).
	var d struct{ Revision uint64 }
	if st := rc.c.Do(victim, http.MethodGet, "/api/db?collection="+prefix+"/before-19", bearerH(rc.p.OwnerToken), nil, &d); st != http.StatusOK {
		t.Fatalf("read on %s: %d", rc.c.Nodes[victim].ID, st)
	}
	rc.c.Kill(victim)
	start := time.Now()
	down := &rtWorkload{w: w, prefix: prefix + "/down", writers: 4, ops: 50, txnEvery: 10}
	down.start()
	down.wait()
	t.Logf("while %s was down: %s in %v", rc.c.Nodes[victim].ID, l.Summary(), time.Since(start).Round(time.Millisecond))

	rc.c.StartMember(victim)
	restarted := time.Now()
	vurl := rc.c.Nodes[victim].URL()
	// A snapshot subscriber first, with no write in flight; dial as soon as
	// the node answers (header auth waits for a strong read, so it has
	// caught up by the time it says ready).
	var snap *rtCollector
	rtWaitCond(t, "dial the restarted node", rtWait, func() error {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		conn, err := client.Dial(dctx, rtConfig(rc, vurl, rc.p.OwnerToken, true))
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = conn.CloseNow() })
		snap = rtSubscribe(t, "snapshot on restarted "+rc.c.Nodes[victim].ID, conn, prefix)
		return nil
	})
	t.Logf("subscribed on %s %v after its restart", rc.c.Nodes[victim].ID, time.Since(restarted).Round(time.Millisecond))
	up := &rtWorkload{w: w, prefix: prefix + "/up", writers: 4, ops: 50, txnEvery: 10}
	up.start()
	// The since subscriber joins while writes run.
	resumed := rtDial(t, "since on restarted "+rc.c.Nodes[victim].ID, rtConfig(rc, vurl, rc.p.OwnerToken, true), prefix, client.Since(since))
	up.wait()
	fence := w.fence(t, prefix, "e")
	t.Logf("%s in %v", l.Summary(), time.Since(start).Round(time.Millisecond))
	for _, s := range []*rtCollector{snap, resumed} {
		s.WaitRev(t, fence, rtWait)
	}
	truth := rc.rtTruth(t, leader, prefix, l)
	for _, s := range []*rtCollector{snap, resumed} {
		got, other := s.Snapshot()
		if len(other) > 0 {
			t.Errorf("%s: unexpected events %v", s.Name, other)
		}
		if s == resumed {
			streamcheck.Check(t, s.Name, got, since, l)
			if want := len(l.Expected(since)); len(got) < want {
				t.Errorf("%s: %d changes, want at least %d", s.Name, len(got), want)
			}
		} else {
			streamcheck.Check(t, s.Name, got, s.Start, l)
		}
		state := rtState(s.Docs, got)
		// The since subscriber started from nothing before the first write:
		// its changes alone are the whole state.
		rtCheckState(t, s.Name, state, truth)
		t.Logf("%s: %d documents in the snapshot, %d changes up to %d", s.Name, len(s.Docs), len(got), s.Last())
	}
}

// ---- the checks themselves can fail ----

type rtRecorder struct{ errs []string }

func (r *rtRecorder) Helper() {}
func (r *rtRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestRealtimeStreamCheckCatchesFaults feeds the stream comparison a
// correct sequence and every kind of fault the cluster tests look for.
func TestRealtimeStreamCheckCatchesFaults(t *testing.T) {
	l := streamcheck.NewLedger()
	set := func(rev uint64, coll string) streamcheck.Event {
		return streamcheck.Event{Rev: rev, Coll: coll, Type: client.TypeSet, Data: fmt.Sprintf(`{"r":%d}`, rev), UpdateTime: "t" + strconv.FormatUint(rev, 10)}
	}
	l.Ack(false, set(10, "p/a"))
	l.Ack(false, set(12, "p/b"))
	l.Ack(true, set(13, "p/txn1-a"), set(13, "p/txn1-b"))
	l.Ack(false, streamcheck.Event{Rev: 15, Coll: "p/a", Type: client.TypeDelete})
	l.Ack(false, set(20, "p/c"))
	l.Unknown("test", "503", streamcheck.Event{Coll: "p/d", Type: client.TypeSet, Data: `{"x":1}`})
	good := []streamcheck.Event{set(10, "p/a"), set(12, "p/b"), set(13, "p/txn1-b"), set(13, "p/txn1-a"), {Rev: 15, Coll: "p/a", Type: client.TypeDelete}, set(20, "p/c")}
	check := func(name string, got []streamcheck.Event, above uint64, wantErr bool) {
		t.Helper()
		r := &rtRecorder{}
		streamcheck.Check(r, name, got, above, l)
		if (len(r.errs) > 0) != wantErr {
			t.Errorf("%s: errors %q, want errors: %v", name, r.errs, wantErr)
		}
	}
	with := func(f func(evs []streamcheck.Event) []streamcheck.Event) []streamcheck.Event {
		return f(slices.Clone(good))
	}
	check("correct", good, 0, false)
	check("correct above 12", good[2:], 12, false)
	check("correct with the landing of an unknown write", with(func(e []streamcheck.Event) []streamcheck.Event {
		return slices.Insert(e, 5, streamcheck.Event{Rev: 17, Coll: "p/d", Type: client.TypeSet, Data: `{"x":1}`})
	}), 0, false)
	check("gap", with(func(e []streamcheck.Event) []streamcheck.Event { return slices.Delete(e, 1, 2) }), 0, true)
	check("half a transaction", with(func(e []streamcheck.Event) []streamcheck.Event { return slices.Delete(e, 2, 3) }), 0, true)
	check("duplicate", with(func(e []streamcheck.Event) []streamcheck.Event { return slices.Insert(e, 2, e[1]) }), 0, true)
	check("duplicate in a transaction", with(func(e []streamcheck.Event) []streamcheck.Event { return slices.Insert(e, 3, e[2]) }), 0, true)
	check("out of order", with(func(e []streamcheck.Event) []streamcheck.Event { e[0], e[1] = e[1], e[0]; return e }), 0, true)
	check("wrong data", with(func(e []streamcheck.Event) []streamcheck.Event { e[1].Data = `{"r":0}`; return e }), 0, true)
	check("wrong update time", with(func(e []streamcheck.Event) []streamcheck.Event { e[1].UpdateTime = "x"; return e }), 0, true)
	check("wrong type", with(func(e []streamcheck.Event) []streamcheck.Event { e[4].Type = client.TypeSet; return e }), 0, true)
	check("extra change", with(func(e []streamcheck.Event) []streamcheck.Event { return append(e, set(30, "p/z")) }), 0, true)
	check("unknown write landing twice", with(func(e []streamcheck.Event) []streamcheck.Event {
		d := streamcheck.Event{Rev: 17, Coll: "p/d", Type: client.TypeSet, Data: `{"x":1}`}
		return slices.Insert(e, 5, d, streamcheck.Event{Rev: 18, Coll: d.Coll, Type: d.Type, Data: d.Data})
	}), 0, true)
	check("shared revision outside a transaction", with(func(e []streamcheck.Event) []streamcheck.Event { e[1].Rev = 10; return e }), 0, true)
	check("at or below the start", good, 10, true)

	// The merge drops exactly the already-seen part of the last revision.
	r := &rtRecorder{}
	merged := rtMerge(r, "merge", good[:3], good[2:], 12)
	if len(r.errs) > 0 || !slices.Equal(merged, good) {
		t.Errorf("merge: %v %q, want %v", merged, r.errs, good)
	}
	r = &rtRecorder{}
	rtMerge(r, "merge", good[:3], good[1:], 12)
	if len(r.errs) == 0 {
		t.Errorf("merge accepted a replay below since")
	}
	// The state comparison notices a missing, an extra and a stale document.
	st := rtState(nil, good)
	truth := map[string]rtDoc{"p/b": {`{"r":12}`, 12}, "p/txn1-a": {`{"r":13}`, 13}, "p/txn1-b": {`{"r":13}`, 13}, "p/c": {`{"r":20}`, 20}}
	for name, tr := range map[string]map[string]rtDoc{
		"missing": {"p/b": truth["p/b"], "p/txn1-a": truth["p/txn1-a"], "p/txn1-b": truth["p/txn1-b"], "p/c": truth["p/c"], "p/e": {`{}`, 21}},
		"extra":   {"p/b": truth["p/b"], "p/txn1-a": truth["p/txn1-a"], "p/txn1-b": truth["p/txn1-b"]},
		"stale":   {"p/b": truth["p/b"], "p/txn1-a": truth["p/txn1-a"], "p/txn1-b": truth["p/txn1-b"], "p/c": {`{"r":20}`, 19}},
	} {
		r := &rtRecorder{}
		rtCheckState(r, name, st, tr)
		if len(r.errs) == 0 {
			t.Errorf("state check %s: no error", name)
		}
	}
	r = &rtRecorder{}
	rtCheckState(r, "same", st, truth)
	if len(r.errs) > 0 {
		t.Errorf("state check of equal states: %q", r.errs)
	}
}

// TestRealtimeFollowerCatchesUpBySnapshot stops a follower while so much is
// written that the leader compacts its log: the restarted follower catches
// up by installing a snapshot, and realtime on it still resumes from before
// the stop: the client that kept reconnecting to it, and a new subscription
// with since, both get every change (the change log travels in the
// snapshot).
func TestRealtimeFollowerCatchesUpBySnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tun := nodetest.FastTuning()
	tun.SnapshotThreshold = 32
	tun.TrailingLogs = 8
	tun.SnapshotInterval = time.Second
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Tuning: tun})
	leader := c.Leader(10 * time.Second)
	rc := &rtCluster{c: c, p: c.CreateProject(leader), edge: -1}
	fs := c.Followers(leader)
	victim, other := fs[0], fs[1]
	const prefix = "rts"
	l := streamcheck.NewLedger()
	w := rc.writer(t, ctx, l, leader, other)
	first, ok := w.post(0, prefix+"/before-0", map[string]any{"before": 0})
	if !ok {
		t.Fatal("first write failed")
	}
	for i := 1; i < 20; i++ {
		w.post(i%2, fmt.Sprintf("%s/before-%d", prefix, i), map[string]any{"before": i})
	}
	since := first.Rev - 1
	back := rtDial(t, "reconnecting subscriber on "+c.Nodes[victim].ID, rtConfig(rc, c.Nodes[victim].URL(), rc.p.OwnerToken, true), prefix)
	onOther := rtDial(t, "subscriber on "+c.Nodes[other].ID, rtConfig(rc, c.Nodes[other].URL(), rc.p.OwnerToken, true), prefix)

	c.Kill(victim)
	start := time.Now()
	down := &rtWorkload{w: w, prefix: prefix + "/down", writers: 4, ops: 60, txnEvery: 10}
	down.start()
	down.wait()
	if err := c.Nodes[leader].Node.Store.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for i := 0; i < 20; i++ { // a log tail after the snapshot
		w.post(i%2, fmt.Sprintf("%s/tail-%d", prefix, i), map[string]any{"tail": i})
	}
	t.Logf("while %s was down: %s in %v", c.Nodes[victim].ID, l.Summary(), time.Since(start).Round(time.Millisecond))
	c.StartMember(victim)
	c.WaitReady(victim, 30*time.Second)
	resumed := rtDial(t, "since on restarted "+c.Nodes[victim].ID, rtConfig(rc, c.Nodes[victim].URL(), rc.p.OwnerToken, true), prefix, client.Since(since))
	up := &rtWorkload{w: w, prefix: prefix + "/up", writers: 2, ops: 40, txnEvery: 10}
	up.start()
	up.wait()
	fence := w.fence(t, prefix, "s")
	for _, s := range []*rtCollector{back, onOther, resumed} {
		s.WaitRev(t, fence, rtWait)
	}
	// It reconnected to the restarted node and resumed there (the fence may
	// have come in the replay, before the resumed answer).
	back.WaitFor(t, "the resumed event", rtWait, func(_ []streamcheck.Event, other []string) bool { return len(other) > 0 })
	if n := back.conn.Reconnects(); n < 1 {
		t.Errorf("%s: %d reconnects", back.Name, n)
	}
	if gen := rtTreeGeneration(t, c.Nodes[victim].DataDir); gen < 1 {
		t.Errorf("%s caught up without installing a snapshot (tree generation %d): this test did not test what it says", c.Nodes[victim].ID, gen)
	}
	truth := rc.rtTruth(t, leader, prefix, l)
	for _, s := range []*rtCollector{back, onOther, resumed} {
		got, other := s.Snapshot()
		above := s.Start
		if s == resumed {
			above = since
		}
		streamcheck.Check(t, s.Name, got, above, l)
		rtCheckState(t, s.Name, rtState(s.Docs, got), truth)
		for _, o := range other {
			if !strings.HasPrefix(o, client.KindResumed+" ") {
				t.Errorf("%s: unexpected event %s (the change log should reach back)", s.Name, o)
			}
		}
		t.Logf("%s: %d changes up to %d, %d reconnects, events %v", s.Name, len(got), s.Last(), s.conn.Reconnects(), other)
	}
}

func rtTreeGeneration(t *testing.T, dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "tree", "CURRENT"))
	if err != nil {
		return -1
	}
	g, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("tree/CURRENT: %q", b)
	}
	return g
}
