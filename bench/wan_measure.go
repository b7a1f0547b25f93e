package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/wan"
	"github.com/edgebase/edgebase/realtime/client"
)

// wanEnv is one WAN cluster and the bench's project on it.
type wanEnv struct {
	c      *wan.Cluster
	hc     *http.Client
	pr     proctest.Project
	prof   wan.Profile
	o      *wanOptions
	dir    string
	logf   func(string, ...any)
	region map[string]wan.Region // node id → its region
	voters []string
}

const (
	wanReqTimeout = 10 * time.Second
	// wanWarmup requests per client before each latency measurement open
	// its connections (their handshakes are not what is measured).
	wanWarmup = 2
	// wanSnapshotArgs force e-ap's catch-up through a snapshot (9b): few
	// trailing logs, frequent snapshots.
	wanSnapshotArgs = "--raft-trailing-logs 64 --raft-snapshot-threshold 128 --raft-snapshot-interval 1s"
)

func edgeOf(r wan.Region) string { return "e-" + string(r) }

// nextEdge is the edge a client of region r reads from in the
// read-your-writes measurement: another region's (us→eu→ap→us).
func nextEdge(r wan.Region) string {
	for i, x := range wanRegions {
		if x == r {
			return edgeOf(wanRegions[(i+1)%len(wanRegions)])
		}
	}
	return edgeOf(wanRegions[0])
}

// measureWAN starts the cluster and runs the selected measurements.
func measureWAN(ctx context.Context, o *options, bin, proxy, tmp string, rep *wanReport, logf func(string, ...any)) ([]*wanRow, error) {
	w := &o.wan
	var rows []*wanRow
	add := func(r *wanRow) {
		if r == nil {
			return
		}
		rows = append(rows, r)
		if r.Failed != "" {
			logf("%s %s: FAILED: %s", r.ID, r.Measurement, r.Failed)
		} else {
			logf("%s %s: done in %.1fs", r.ID, r.Measurement, r.Seconds)
		}
	}
	needMain := false
	for n := 1; n <= 10; n++ {
		needMain = needMain || w.wants(n)
	}
	if needMain {
		e, err := startWANEnv(ctx, o, bin, proxy, filepath.Join(tmp, "main"), w.args, logf)
		if err != nil {
			return rows, err
		}
		steps := []struct {
			n int
			f func(context.Context) *wanRow
		}{
			{1, func(ctx context.Context) *wanRow {
				return e.latencyRow(ctx, "1", "local read (consistency=local) at own edge", func(ctx context.Context, r wan.Region, _ int) (time.Duration, error) {
					_, d, err := e.read(ctx, e.c.URL(r, edgeOf(r)), "wan/read", true, 0)
					return d, err
				})
			}},
			{2, func(ctx context.Context) *wanRow {
				return e.latencyRow(ctx, "2a", "strong read at own edge", func(ctx context.Context, r wan.Region, _ int) (time.Duration, error) {
					_, d, err := e.read(ctx, e.c.URL(r, edgeOf(r)), "wan/read", false, 0)
					return d, err
				})
			}},
			{2, func(ctx context.Context) *wanRow {
				leader, err := e.c.Leader(ctx)
				if err != nil {
					return &wanRow{ID: "2b", Measurement: "strong read at the leader", Failed: err.Error()}
				}
				return e.latencyRow(ctx, "2b", "strong read at the leader", func(ctx context.Context, r wan.Region, _ int) (time.Duration, error) {
					_, d, err := e.read(ctx, e.c.URL(r, leader), "wan/read", false, 0)
					return d, err
				})
			}},
			{3, func(ctx context.Context) *wanRow {
				row := e.latencyRow(ctx, "3", "read-your-writes: write via own edge, local read at the next region's edge with X-Min-Revision (the read's latency)", func(ctx context.Context, r wan.Region, i int) (time.Duration, error) {
					coll := fmt.Sprintf("wan/ryw/%s/%d", r, i)
					rev, _, err := e.write(ctx, e.c.URL(r, edgeOf(r)), coll)
					if err != nil {
						return 0, err
					}
					_, d, err := e.read(ctx, e.c.URL(r, nextEdge(r)), coll, true, rev)
					return d, err
				})
				row.Notes = append(row.Notes, "the read goes from the client's region to the next region's edge (us→e-eu, eu→e-ap, ap→e-us), so it pays that round trip plus any wait for the write to arrive there")
				return row
			}},
			{4, func(ctx context.Context) *wanRow {
				return e.latencyRow(ctx, "4a", "write via own edge (forwarded)", func(ctx context.Context, r wan.Region, i int) (time.Duration, error) {
					_, d, err := e.write(ctx, e.c.URL(r, edgeOf(r)), fmt.Sprintf("wan/we/%s/%d", r, i))
					return d, err
				})
			}},
			{4, func(ctx context.Context) *wanRow {
				leader, err := e.c.Leader(ctx)
				if err != nil {
					return &wanRow{ID: "4b", Measurement: "write at the leader", Failed: err.Error()}
				}
				return e.latencyRow(ctx, "4b", "write at the leader", func(ctx context.Context, r wan.Region, i int) (time.Duration, error) {
					_, d, err := e.write(ctx, e.c.URL(r, leader), fmt.Sprintf("wan/wl/%s/%d", r, i))
					return d, err
				})
			}},
			{5, func(ctx context.Context) *wanRow {
				return e.latencyRow(ctx, "5", "batch write (10 sets) via own edge", func(ctx context.Context, r wan.Region, i int) (time.Duration, error) {
					_, d, err := e.batch(ctx, e.c.URL(r, edgeOf(r)), fmt.Sprintf("wan/b/%s/%d", r, i), 10)
					return d, err
				})
			}},
			{6, e.delivery},
			{7, e.resume},
			{10, e.soak},
			// The partition before the failover: with the leader still in
			// us, the writer in us is 1 ms from it.
			{9, func(ctx context.Context) *wanRow {
				return e.catchUp(ctx, "9a", "edge catch-up after a partition (default trailing logs)")
			}},
			{8, e.failover},
		}
		for _, s := range steps {
			if ctx.Err() != nil {
				break
			}
			if w.wants(s.n) {
				add(s.f(ctx))
			}
		}
		if err := e.c.Close(); err != nil {
			logf("close cluster: %v", err)
		}
		e.hc.CloseIdleConnections()
	}
	if w.wants(9) && ctx.Err() == nil {
		args := append(append([]string(nil), w.args...), strings.Fields(wanSnapshotArgs)...)
		e, err := startWANEnv(ctx, o, bin, proxy, filepath.Join(tmp, "snapshot"), args, logf)
		if err != nil {
			add(&wanRow{ID: "9b", Measurement: "edge catch-up after a partition (" + wanSnapshotArgs + ")", Failed: err.Error()})
			return rows, nil
		}
		add(e.catchUp(ctx, "9b", "edge catch-up after a partition ("+wanSnapshotArgs+")"))
		if err := e.c.Close(); err != nil {
			logf("close cluster: %v", err)
		}
		e.hc.CloseIdleConnections()
	}
	return rows, ctx.Err()
}

// startWANEnv starts a WAN cluster in dir with args on every node, creates
// the bench's project on it and writes the document the reads read.
func startWANEnv(ctx context.Context, o *options, bin, proxy, dir string, args []string, logf func(string, ...any)) (*wanEnv, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	t := time.Now()
	logf("starting the WAN cluster in %s (node args %q)", dir, args)
	c, err := wan.Start(ctx, wan.Options{
		Bin: bin, ProxyBin: proxy, Dir: dir, Profile: o.wan.profile(), NodeArgs: args,
		Logf: logf,
	})
	if err != nil {
		return nil, fmt.Errorf("start the WAN cluster: %w", err)
	}
	e := &wanEnv{c: c, hc: newWANHTTPClient(wanReqTimeout), prof: o.wan.profile(), o: &o.wan, dir: dir, logf: logf, region: map[string]wan.Region{}}
	for _, n := range c.Nodes() {
		e.region[n.ID] = n.Region
		if !n.Edge {
			e.voters = append(e.voters, n.ID)
		}
	}
	fail := func(err error) (*wanEnv, error) {
		_ = c.Close()
		return nil, err
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		return fail(fmt.Errorf("leader: %w", err))
	}
	e.pr.ID, e.pr.APIKey = c.Project()
	e.pr.Token = c.OwnerToken()
	o.wan.linksSimulated = c.NodeLinksSimulated()
	if !c.NodeLinksSimulated() {
		logf("WARNING: %s has no --connect-to: node-to-node traffic bypasses the simulated WAN", bin)
	}
	rev, _, err := e.write(ctx, c.DirectURL(leader), "wan/read")
	if err != nil {
		return fail(fmt.Errorf("write wan/read: %w", err))
	}
	for _, n := range c.Nodes() {
		if _, _, err := e.read(ctx, c.DirectURL(n.ID), "wan/read", true, rev); err != nil {
			return fail(fmt.Errorf("wan/read on %s: %w", n.ID, err))
		}
	}
	logf("WAN cluster ready in %v, leader %s", time.Since(t).Round(time.Millisecond), leader)
	return e, nil
}

// ---- requests ----

// do sends one request as the project's owner, with the headers every
// request of the interface carries (the bearer token, X-Project-Id and
// X-API-Key, as the SDKs send them), and returns the answer and its latency.
func (e *wanEnv) do(ctx context.Context, timeout time.Duration, method, u string, hdr map[string]string, body any) (*proctest.Response, time.Duration, error) {
	h := map[string]string{"Authorization": "Bearer " + e.pr.Token, "X-Project-Id": e.pr.ID, "X-API-Key": e.pr.APIKey}
	for k, v := range hdr {
		h[k] = v
	}
	t := time.Now()
	r, err := proctest.DoJSON(ctx, e.hc, timeout, method, u, h, body)
	return r, time.Since(t), err
}

// write creates or replaces coll through base and returns X-Revision.
func (e *wanEnv) write(ctx context.Context, base, coll string) (uint64, time.Duration, error) {
	return e.writeTimeout(ctx, wanReqTimeout, base, coll)
}

func (e *wanEnv) writeTimeout(ctx context.Context, timeout time.Duration, base, coll string) (uint64, time.Duration, error) {
	r, d, err := e.do(ctx, timeout, http.MethodPost, base+"/api/db", nil,
		map[string]any{"collection": coll, "data": map[string]any{"v": coll, "at": time.Now().UnixNano()}})
	if err != nil {
		return 0, d, fmt.Errorf("POST %s: %w", coll, err)
	}
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		return 0, d, fmt.Errorf("POST %s: %s", coll, r)
	}
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		return 0, d, fmt.Errorf("POST %s: no X-Revision in %s", coll, r)
	}
	return rev, d, nil
}

// batch commits n sets under prefix in one POST /api/db/batch.
func (e *wanEnv) batch(ctx context.Context, base, prefix string, n int) (uint64, time.Duration, error) {
	writes := make([]map[string]any, n)
	for i := range writes {
		writes[i] = map[string]any{"op": "set", "collection": prefix + "/" + strconv.Itoa(i), "data": map[string]any{"i": i}}
	}
	r, d, err := e.do(ctx, wanReqTimeout, http.MethodPost, base+"/api/db/batch", nil, map[string]any{"writes": writes})
	if err != nil {
		return 0, d, fmt.Errorf("POST batch %s: %w", prefix, err)
	}
	if r.Status != http.StatusOK {
		return 0, d, fmt.Errorf("POST batch %s: %s", prefix, r)
	}
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		return 0, d, fmt.Errorf("POST batch %s: no X-Revision in %s", prefix, r)
	}
	return rev, d, nil
}

// read GETs coll through base (local: consistency=local; minRev > 0:
// X-Min-Revision, and a document older than minRev is a stale read) and
// returns the document's revision.
func (e *wanEnv) read(ctx context.Context, base, coll string, local bool, minRev uint64) (uint64, time.Duration, error) {
	u := base + "/api/db?collection=" + url.QueryEscape(coll)
	if local {
		u += "&consistency=local"
	}
	var hdr map[string]string
	if minRev > 0 {
		hdr = map[string]string{"X-Min-Revision": strconv.FormatUint(minRev, 10)}
	}
	r, d, err := e.do(ctx, wanReqTimeout, http.MethodGet, u, hdr, nil)
	if err != nil {
		return 0, d, fmt.Errorf("GET %s: %w", coll, err)
	}
	if r.Status != http.StatusOK {
		return 0, d, fmt.Errorf("GET %s: %s", coll, r)
	}
	var doc struct {
		Revision uint64 `json:"revision"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil || doc.Revision == 0 {
		return 0, d, fmt.Errorf("GET %s: not a document: %s", coll, r)
	}
	if doc.Revision < minRev {
		return doc.Revision, d, fmt.Errorf("GET %s: stale read: revision %d below X-Min-Revision %d", coll, doc.Revision, minRev)
	}
	return doc.Revision, d, nil
}

// leaderInfo is the leader and each client region's round trip to it.
func (e *wanEnv) leaderInfo(ctx context.Context) (string, map[wan.Region]time.Duration, error) {
	leader, err := e.c.Leader(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("leader: %w", err)
	}
	rtt := map[wan.Region]time.Duration{}
	for _, r := range wanRegions {
		rtt[r] = e.prof.Between(r, e.region[leader])
	}
	return leader, rtt, nil
}

// ---- latency rows ----

// latencyRow runs f --wan-samples times per region, sequentially within a
// region (after wanWarmup unmeasured calls), the regions concurrently.
func (e *wanEnv) latencyRow(ctx context.Context, id, what string, f func(ctx context.Context, r wan.Region, i int) (time.Duration, error)) *wanRow {
	t := time.Now()
	row := &wanRow{ID: id, Measurement: what, Regions: map[string]*wanCell{}}
	leader, rtt, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = leader
	e.logf("%s %s (%d samples per region)...", id, what, e.o.samples)
	var mu sync.Mutex
	var wg sync.WaitGroup
	firstErr := map[wan.Region]error{}
	for _, r := range wanRegions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h histogram
			errs := 0
			var first error
			for i := 0; i < wanWarmup+e.o.samples && ctx.Err() == nil; i++ {
				d, err := f(ctx, r, i)
				switch {
				case err != nil:
					if i >= wanWarmup {
						errs++
					}
					if first == nil {
						first = err
					}
				case i >= wanWarmup:
					h.add(d)
				}
			}
			mu.Lock()
			row.Regions[string(r)] = cellFrom(&h, errs, rtt[r])
			if first != nil {
				firstErr[r] = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, r := range wanRegions {
		if err := firstErr[r]; err != nil {
			row.Notes = append(row.Notes, fmt.Sprintf("%s: first error: %v", r, err))
		}
	}
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

// ---- realtime ----

// wanSub is one subscription and the revisions it received, with when.
type wanSub struct {
	conn *client.Conn
	mu   sync.Mutex
	got  map[uint64]time.Time
}

// subscribe dials node through the client region's proxy and subscribes
// to prefix; its changes are recorded until the connection closes.
func (e *wanEnv) subscribe(ctx context.Context, r wan.Region, node, prefix string) (*wanSub, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := client.Dial(dctx, client.Config{
		URL: e.c.URL(r, node), Token: e.pr.Token, ProjectID: e.pr.ID, APIKey: e.pr.APIKey,
		HTTPClient: e.hc, Logger: slog.New(slog.DiscardHandler),
		Reconnect: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		PingInterval: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", node, r, err)
	}
	sub, err := conn.Subscribe(dctx, prefix, true)
	if err != nil {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("subscribe on %s from %s: %w", node, r, err)
	}
	s := &wanSub{conn: conn, got: map[uint64]time.Time{}}
	go func() {
		for ev := range sub.Events() {
			if ev.Kind != client.KindChange {
				continue
			}
			now := time.Now()
			s.mu.Lock()
			if _, ok := s.got[ev.Revision]; !ok {
				s.got[ev.Revision] = now
			}
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// missing counts the revisions of revs s has not received.
func (s *wanSub) missing(revs []uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range revs {
		if _, ok := s.got[r]; !ok {
			n++
		}
	}
	return n
}

func (s *wanSub) at(rev uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.got[rev]
	return t, ok
}

// waitAll polls until every sub has every revision of revs, or total ends.
func waitAll(ctx context.Context, total time.Duration, revs []uint64, subs ...*wanSub) error {
	return proctest.Poll(ctx, total, func() error {
		for _, s := range subs {
			if n := s.missing(revs); n > 0 {
				return fmt.Errorf("%d of %d changes not delivered", n, len(revs))
			}
		}
		return nil
	})
}

// delivery (6): a writer in us writes at the leader; a subscriber per
// region on its own edge; latency = delivery − the write's answer.
func (e *wanEnv) delivery(ctx context.Context) *wanRow {
	t := time.Now()
	row := &wanRow{ID: "6", Measurement: "commit-to-delivery at own edge (writer in us at the leader; receive − ack)", Regions: map[string]*wanCell{}}
	leader, rtt, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = leader
	e.logf("6 commit-to-delivery (%d writes)...", e.o.samples)
	subs := map[wan.Region]*wanSub{}
	defer func() {
		for _, s := range subs {
			_ = s.conn.Close()
		}
	}()
	for _, r := range wanRegions {
		s, err := e.subscribe(ctx, r, edgeOf(r), "wan/rt")
		if err != nil {
			row.Failed = err.Error()
			return row
		}
		subs[r] = s
	}
	type ack struct {
		rev uint64
		at  time.Time
	}
	var acks []ack
	base := e.c.URL(wan.US, leader)
	for i := 0; i < wanWarmup+e.o.samples && ctx.Err() == nil; i++ {
		rev, _, err := e.write(ctx, base, "wan/rt/"+strconv.Itoa(i))
		at := time.Now()
		if err != nil {
			row.Failed = err.Error()
			return row
		}
		if i >= wanWarmup {
			acks = append(acks, ack{rev, at})
		}
		sleepCtx(ctx, 50*time.Millisecond) // paced: each change is delivered on its own
	}
	revs := make([]uint64, len(acks))
	for i, a := range acks {
		revs[i] = a.rev
	}
	var all []*wanSub
	for _, s := range subs {
		all = append(all, s)
	}
	if err := waitAll(ctx, 30*time.Second, revs, all...); err != nil {
		row.Notes = append(row.Notes, "not every change arrived within 30 s: "+err.Error())
	}
	for _, r := range wanRegions {
		var h histogram
		missing := 0
		for _, a := range acks {
			got, ok := subs[r].at(a.rev)
			if !ok {
				missing++
				continue
			}
			h.add(got.Sub(a.at))
		}
		c := cellFrom(&h, missing, rtt[r])
		row.Regions[string(r)] = c
	}
	row.Notes = append(row.Notes, fmt.Sprintf("the writer in us is %v from the leader %s (one way %v): the ack arrives that long after the commit; the goal is delivery <= one-way leader→region + 10 ms, and a negative figure is a change delivered before the writer had its answer",
		e.prof.Between(wan.US, e.region[leader]), leader, e.prof.Between(wan.US, e.region[leader])/2))
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

// resume (7): per region, kill -9 its edge, write 50 documents under the
// subscriber's prefix, restart the edge: time from the Restart call until
// the subscriber (reconnecting to the same edge) has all 50.
func (e *wanEnv) resume(ctx context.Context) *wanRow {
	const missed = 50
	t := time.Now()
	row := &wanRow{ID: "7", Measurement: fmt.Sprintf("resume after an edge restart: Restart call → subscriber has the %d changes written while the edge was down", missed), Regions: map[string]*wanCell{}}
	leader, rtt, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = leader
	for _, r := range wanRegions {
		if ctx.Err() != nil {
			break
		}
		edge := edgeOf(r)
		e.logf("7 resume on %s...", edge)
		d, restart, err := e.resumeOne(ctx, r, edge, leader, missed)
		var h histogram
		errs := 0
		if err != nil {
			errs = 1
			row.Notes = append(row.Notes, fmt.Sprintf("%s: %v", r, err))
		} else {
			h.add(d)
			row.Notes = append(row.Notes, fmt.Sprintf("%s: restarting %s (start to /readyz) took %v of it", r, edge, restart.Round(time.Millisecond)))
		}
		row.Regions[string(r)] = cellFrom(&h, errs, rtt[r])
	}
	row.Notes = append(row.Notes, "one sample per region; kill -9; the client reconnects with backoff 50–500 ms")
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

func (e *wanEnv) resumeOne(ctx context.Context, r wan.Region, edge, leader string, missed int) (total, restart time.Duration, err error) {
	prefix := "wan/rs/" + string(r)
	s, err := e.subscribe(ctx, r, edge, prefix)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = s.conn.Close() }()
	if err := e.c.Kill(edge); err != nil {
		return 0, 0, fmt.Errorf("kill %s: %w", edge, err)
	}
	restarted := false
	defer func() {
		if !restarted {
			if rerr := e.c.Restart(ctx, edge); rerr != nil {
				e.logf("restart %s: %v", edge, rerr)
			}
		}
	}()
	base := e.c.URL(wan.US, leader)
	revs := make([]uint64, 0, missed)
	for i := range missed {
		rev, _, err := e.write(ctx, base, fmt.Sprintf("%s/%d", prefix, i))
		if err != nil {
			return 0, 0, err
		}
		revs = append(revs, rev)
	}
	t0 := time.Now()
	restarted = true
	if err := e.c.Restart(ctx, edge); err != nil {
		return 0, 0, fmt.Errorf("restart %s: %w", edge, err)
	}
	restart = time.Since(t0)
	if err := waitAll(ctx, 60*time.Second, revs, s); err != nil {
		return 0, restart, fmt.Errorf("after restarting %s: %w", edge, err)
	}
	return time.Since(t0), restart, nil
}

// ---- faults ----

// failover (8): kill -9 the leader; every region starts a write through its
// own edge every 50 ms (each with its own 5 s timeout) until one succeeds:
// time from the kill to that first success. Then the old leader restarts.
func (e *wanEnv) failover(ctx context.Context) *wanRow {
	t := time.Now()
	row := &wanRow{ID: "8", Measurement: "failover: kill -9 the leader → first successful write via own edge (an attempt every 50 ms)", Regions: map[string]*wanCell{}}
	old, _, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = old
	e.logf("8 failover: killing %s...", old)
	results := make(map[wan.Region]foResult)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	var t0 time.Time
	for _, r := range wanRegions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res := e.firstWrite(ctx, r, t0)
			mu.Lock()
			results[r] = res
			mu.Unlock()
		}()
	}
	t0 = time.Now()
	if err := e.c.Kill(old); err != nil {
		close(start)
		wg.Wait()
		row.Failed = fmt.Sprintf("kill %s: %v", old, err)
		return row
	}
	close(start)
	wg.Wait()
	newLeader := ""
	if err := proctest.Poll(ctx, 30*time.Second, func() error {
		l, err := e.c.Leader(ctx)
		if err != nil {
			return err
		}
		if l == old {
			return errors.New("still " + old)
		}
		newLeader = l
		return nil
	}); err != nil {
		row.Notes = append(row.Notes, "no new leader seen: "+err.Error())
	}
	for _, r := range wanRegions {
		res := results[r]
		var h histogram
		errs := 0
		if res.err != nil {
			errs = 1
			row.Notes = append(row.Notes, fmt.Sprintf("%s: %v", r, res.err))
		} else {
			h.add(res.d)
		}
		row.Regions[string(r)] = cellFrom(&h, errs, e.prof.Between(r, e.region[newLeader]))
		row.Notes = append(row.Notes, fmt.Sprintf("%s: %d attempts", r, res.attempts))
	}
	rt := time.Now()
	if err := e.c.Restart(ctx, old); err != nil {
		row.Notes = append(row.Notes, fmt.Sprintf("restart %s: %v", old, err))
	} else {
		row.Notes = append(row.Notes, fmt.Sprintf("new leader %s; %s restarted in %v", newLeader, old, time.Since(rt).Round(time.Millisecond)))
	}
	row.Notes = append(row.Notes, "one sample per region; RTT column: to the new leader; goal < 3 s")
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

// foResult is one region's outcome of the failover measurement.
type foResult struct {
	d        time.Duration // kill → first successful write
	attempts int
	err      error
}

// firstWrite starts a write from r through its edge every 50 ms until one
// succeeds (or 30 s pass) and returns when that answer came, after t0.
func (e *wanEnv) firstWrite(ctx context.Context, r wan.Region, t0 time.Time) foResult {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan time.Duration, 1)
	var lastErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	base := e.c.URL(r, edgeOf(r))
	attempts := 0
	for {
		attempts++
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, err := e.writeTimeout(ctx, 5*time.Second, base, fmt.Sprintf("wan/fo/%s/%d", r, i))
			if err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
				return
			}
			select {
			case done <- time.Since(t0):
			default:
			}
		}(attempts)
		select {
		case d := <-done:
			cancel() // the attempts still in flight are not needed
			return foResult{d: d, attempts: attempts}
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			return foResult{attempts: attempts, err: fmt.Errorf("no write succeeded within 30 s: %v", lastErr)}
		case <-tick.C:
		}
	}
}
