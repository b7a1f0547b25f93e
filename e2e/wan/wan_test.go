package wan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/wan"
	"github.com/edgebase/edgebase/realtime/client"
)

// The tests of this file run in this order; TestWANFailover kills the
// leader and must stay last (it restores the cluster anyway: see the
// package comment in main_test.go).

// httpClient keeps connections alive, so that a timed request costs the
// round trips of the request itself, not of a new connection.
var httpClient = &http.Client{Timeout: 20 * time.Second}

// leaderRegion is the region of the node that leads now.
func leaderRegion(t *testing.T, ctx context.Context, c *wan.Cluster) (string, wan.Region) {
	t.Helper()
	id, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Spec(id)
	if !ok {
		t.Fatalf("the leader %q is not a node of the topology", id)
	}
	return id, s.Region
}

// edgeIn is the edge node of region r.
func edgeIn(t *testing.T, c *wan.Cluster, r wan.Region) string {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.Edge && n.Region == r {
			return n.ID
		}
	}
	t.Fatalf("no edge node in %s", r)
	return ""
}

// write sets the document path to data through base as the project's
// owner and returns the revision it committed at and how long it took.
func write(ctx context.Context, c *wan.Cluster, base, path string, data map[string]any) (uint64, time.Duration, error) {
	start := time.Now()
	r, err := proctest.DoJSON(ctx, httpClient, 5*time.Second, http.MethodPost, base+"/api/db", c.OwnerHeaders(),
		map[string]any{"collection": path, "data": data})
	took := time.Since(start)
	if err != nil {
		return 0, took, err
	}
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		return 0, took, fmt.Errorf("POST /api/db %s: %s", path, r)
	}
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil {
		return 0, took, fmt.Errorf("POST /api/db %s: X-Revision %q: %w", path, r.Header.Get("X-Revision"), err)
	}
	return rev, took, nil
}

// read gets the document path through base: query is "" (strong) or
// "&consistency=local"; minRev, when not 0, is sent as X-Min-Revision.
func read(ctx context.Context, c *wan.Cluster, base, path, query string, minRev uint64) (map[string]any, time.Duration, error) {
	h := c.OwnerHeaders()
	if minRev > 0 {
		h["X-Min-Revision"] = strconv.FormatUint(minRev, 10)
	}
	start := time.Now()
	r, err := proctest.DoJSON(ctx, httpClient, 10*time.Second, http.MethodGet, base+"/api/db?collection="+path+query, h, nil)
	took := time.Since(start)
	if err != nil {
		return nil, took, err
	}
	if r.Status != http.StatusOK {
		return nil, took, fmt.Errorf("GET /api/db %s%s: %s", path, query, r)
	}
	var doc struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		return nil, took, fmt.Errorf("GET /api/db %s: %w", path, err)
	}
	return doc.Data, took, nil
}

// skipUnlessSimulated skips the rest of a test (its timing checks) when
// the nodes do not reach each other through the simulated WAN.
func skipUnlessSimulated(t *testing.T, c *wan.Cluster) {
	t.Helper()
	if !c.NodeLinksSimulated() {
		t.Skip("the edgebase binary has no --connect-to: node-to-node traffic bypasses the simulated WAN, so its timing is not checked")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestWANReads: a strong read at the edge in ap costs a round trip to the
// leader (in us), a local one does not.
func TestWANReads(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, lr := leaderRegion(t, ctx, c)
	rtt := c.Profile().Between(wan.AP, lr)
	ap := c.URL(wan.AP, "e-ap")
	rev, _, err := write(ctx, c, c.URL(wan.US, "e-us"), "wanreads/doc", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	// The edge has the document before the timing starts (and the
	// connection to it is open).
	if _, _, err := read(ctx, c, ap, "wanreads/doc", "&consistency=local", rev); err != nil {
		t.Fatal(err)
	}

	var strong, local []time.Duration
	for range 5 {
		d, took, err := read(ctx, c, ap, "wanreads/doc", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d["n"] != float64(1) {
			t.Fatalf("strong read at e-ap: data %v, want n=1", d)
		}
		strong = append(strong, took)
	}
	for range 10 {
		d, took, err := read(ctx, c, ap, "wanreads/doc", "&consistency=local", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d["n"] != float64(1) {
			t.Fatalf("local read at e-ap: data %v, want n=1", d)
		}
		local = append(local, took)
	}
	ms, ml := median(strong), median(local)
	t.Logf("at e-ap, leader %s in %s (RTT %v): strong read median %v (%v), local read median %v (%v)",
		leader, lr, rtt, ms, strong, ml, local)
	if ml >= 30*time.Millisecond {
		t.Errorf("local read at e-ap: median %v, want < 30ms", ml)
	}
	skipUnlessSimulated(t, c)
	if min := time.Duration(0.9 * float64(rtt)); ms < min {
		t.Errorf("strong read at e-ap: median %v < 0.9 x RTT(ap, %s) = %v: the reads do not cross the simulated WAN", ms, lr, min)
	}
}

// TestWANForwardedWrite: a write through the edge in eu is forwarded to the
// leader, and the edge in ap serves it once it has applied its revision.
func TestWANForwardedWrite(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, lr := leaderRegion(t, ctx, c)
	rtt := c.Profile().Between(wan.EU, lr)
	rev, took, err := write(ctx, c, c.URL(wan.EU, "e-eu"), "wanforward/doc", map[string]any{"via": "e-eu"})
	if err != nil {
		t.Fatal(err)
	}
	d, readTook, err := read(ctx, c, c.URL(wan.AP, "e-ap"), "wanforward/doc", "&consistency=local", rev)
	if err != nil {
		t.Fatalf("read at e-ap with X-Min-Revision %d: %v", rev, err)
	}
	if d["via"] != "e-eu" {
		t.Fatalf("read at e-ap with X-Min-Revision %d: data %v, want via=e-eu", rev, d)
	}
	t.Logf("write via e-eu (leader in %s, RTT %v): %v, revision %d; read at e-ap with X-Min-Revision: %v", lr, rtt, took, rev, readTook)
	skipUnlessSimulated(t, c)
	if lr != wan.EU {
		if min := time.Duration(0.9 * float64(rtt)); took < min {
			t.Errorf("write via e-eu took %v < 0.9 x RTT(eu, %s) = %v: it did not cross the simulated WAN", took, lr, min)
		}
	}
}

// TestWANLiveDelivery: a change written through the edge in us reaches a
// subscriber at the edge in ap no sooner than the one-way latency from the
// leader to ap.
func TestWANLiveDelivery(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, lr := leaderRegion(t, ctx, c)
	oneWay := c.Profile().OneWay(lr, wan.AP)
	pid, key := c.Project()
	conn, err := client.Dial(ctx, client.Config{URL: c.URL(wan.AP, "e-ap"), Token: c.OwnerToken(), ProjectID: pid, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.CloseNow() }()
	sub, err := conn.Subscribe(ctx, "wanlive", true)
	if err != nil {
		t.Fatal(err)
	}
	const path = "wanlive/doc"
	start := time.Now()
	rev, took, err := write(ctx, c, c.URL(wan.US, "e-us"), path, map[string]any{"at": start.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if ev.Kind != client.KindChange || ev.Collection != path {
				continue
			}
			delay := time.Since(start)
			t.Logf("change %d written via e-us (%v) delivered at e-ap after %v (one-way %s->ap %v)", ev.Revision, took, delay, lr, oneWay)
			if ev.Revision != rev {
				t.Errorf("change revision %d, the write's %d", ev.Revision, rev)
			}
			skipUnlessSimulated(t, c)
			if min := time.Duration(0.9 * float64(oneWay)); delay < min {
				t.Errorf("delivered after %v < 0.9 x one-way %s->ap = %v: the change did not cross the simulated WAN", delay, lr, min)
			}
			return
		case <-ctx.Done():
			t.Fatalf("change of %s (revision %d) not delivered at e-ap: %v", path, rev, ctx.Err())
		}
	}
}

// TestWANPartition cuts ap off from us and eu: the edge in ap still serves
// a local read at once, a client in us cannot reach it and a write through
// it fails; no voter's term moves (an edge takes no part in elections) and,
// with the jitter doubled meanwhile, the cluster writes again once healed.
func TestWANPartition(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rev, _, err := write(ctx, c, c.URL(wan.US, "e-us"), "wanpartition/doc", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := read(ctx, c, c.URL(wan.AP, "e-ap"), "wanpartition/doc", "&consistency=local", rev); err != nil {
		t.Fatal(err)
	}
	terms := map[string]uint64{}
	for _, n := range c.Nodes() {
		if !n.Edge {
			if terms[n.ID], err = c.Term(ctx, n.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	jitter := c.Profile().Jitter
	if err := c.SetJitter(2 * jitter); err != nil {
		t.Fatal(err)
	}
	healed := false
	heal := func() {
		if !healed {
			healed = true
			if err := c.Heal(); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() {
		heal()
		if err := c.SetJitter(jitter); err != nil {
			t.Error(err)
		}
	}()
	for _, r := range []wan.Region{wan.US, wan.EU} {
		if err := c.Partition(wan.AP, r); err != nil {
			t.Fatal(err)
		}
	}
	if d, _, err := read(ctx, c, c.URL(wan.AP, "e-ap"), "wanpartition/doc", "&consistency=local", 0); err != nil || d["n"] != float64(1) {
		t.Errorf("local read at the cut-off e-ap: %v, %v; want n=1 (its own state)", d, err)
	}
	if _, _, err := read(ctx, c, c.URL(wan.US, "e-ap"), "wanpartition/doc", "&consistency=local", 0); err == nil {
		t.Error("a client in us reached e-ap across the partition")
	}
	// The edge answers 503 no_leader after its own wait (5 s); 2 s of it
	// are enough to see that the write does not go through.
	cutCtx, cutCancel := context.WithTimeout(ctx, 2*time.Second)
	defer cutCancel()
	if _, took, err := write(cutCtx, c, c.URL(wan.AP, "e-ap"), "wanpartition/cut", map[string]any{"n": 2}); err == nil {
		t.Error("a write through the cut-off e-ap succeeded")
	} else {
		t.Logf("a write through the cut-off e-ap failed after %v: %v", took.Round(time.Millisecond), err)
	}
	heal()
	took, err := retryWrite(ctx, c, c.URL(wan.AP, "e-ap"), "wanpartition/healed", 15*time.Second)
	if err != nil {
		t.Fatalf("after Heal: %v", err)
	}
	t.Logf("after Heal (jitter %v) a write through e-ap succeeded within %v", 2*jitter, took.Round(time.Millisecond))
	for id, before := range terms {
		after, err := c.Term(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("%s: term %d -> %d while an edge was cut off", id, before, after)
		}
	}
}

// retryWrite writes through base until a write succeeds, at most total; it
// returns how long that took.
func retryWrite(ctx context.Context, c *wan.Cluster, base, path string, total time.Duration) (time.Duration, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	var err error
	for wctx.Err() == nil {
		if _, _, err = write(wctx, c, base, path, map[string]any{"at": time.Now().UnixNano()}); err == nil {
			return time.Since(start), nil
		}
		time.Sleep(50 * time.Millisecond) // between attempts, not a synchronisation
	}
	return 0, fmt.Errorf("no write through %s succeeded within %v; last: %w", base, total, err)
}

// TestWANFailover kills the leader: a write through the edge of every
// region succeeds within 10 s. It then restarts the old leader and waits
// until the cluster is healthy again. It must stay the last test of this
// file.
func TestWANFailover(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, _ := leaderRegion(t, ctx, c)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	defer func() {
		if err := c.Restart(ctx, leader); err != nil {
			t.Errorf("restart %s: %v", leader, err)
			return
		}
		if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
			t.Errorf("after restarting %s: %v", leader, err)
		}
	}()

	regions := []wan.Region{wan.US, wan.EU, wan.AP}
	took := make([]time.Duration, len(regions))
	errs := make([]error, len(regions))
	var wg sync.WaitGroup
	for i, r := range regions {
		base := c.URL(r, edgeIn(t, c, r))
		wg.Go(func() {
			_, errs[i] = retryWrite(ctx, c, base, "wanfailover/"+string(r), time.Until(killed.Add(10*time.Second)))
			took[i] = time.Since(killed)
		})
	}
	wg.Wait()
	newLeader, err := c.WaitLeader(ctx, leader, 5*time.Second)
	if err != nil {
		t.Error(err)
	}
	for i, r := range regions {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		t.Logf("failover from %s to %s: first write via the %s edge succeeded %v after the kill", leader, newLeader, r, took[i].Round(time.Millisecond))
	}
}
