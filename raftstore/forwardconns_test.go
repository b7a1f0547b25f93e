package raftstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// forwardConnsMetric reads edgebase_forward_connections_total from reg.
func forwardConnsMetric(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "edgebase_forward_connections_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("edgebase_forward_connections_total is not registered")
	return 0
}

// Forwarded writes reuse kept-alive connections: 200 of them from a
// follower, four at a time, open a handful of connections, not 200. A new
// leader gets a connection as soon as the follower learns of it, so the
// first forwarded write after a failover dials nothing.
func TestForwardedWritesReuseConnections(t *testing.T) {
	nodes := newCTNodes(t, 3)
	reg := prometheus.NewRegistry()
	f := nodes[2]
	f.conf = func(c *Config) { c.Registerer = reg }
	openCT(t, nodes[0], true)
	mustEventually(t, 10*time.Second, "n1 leader", func() (bool, string) { return nodes[0].s.IsLeader(), "" })
	if err := nodes[0].s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("n1 record: %v", err)
	}
	joinCT(t, nodes[0], nodes[1])
	joinCT(t, nodes[0], f)
	if f.s.IsLeader() {
		t.Fatal("the follower under test leads")
	}

	before := forwardConnsMetric(t, reg)
	const writes, workers = 200, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < writes; i += workers {
				res, err := f.s.Txn(ctxT(t, 10*time.Second), &Txn{Time: time.Now().UnixNano(), Ops: []Op{put(fmt.Sprintf("p/w%03d", i), `{"v":1}`)}})
				if err != nil || !res.OK() {
					errs <- fmt.Errorf("forwarded write %d: %+v %v", i, res, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := forwardConnsMetric(t, reg)
	t.Logf("%d forwarded writes (%d at a time) opened %v connections (%v before them)", writes, workers, after-before, before)
	if after < 1 {
		t.Fatal("no internal connection was ever counted")
	}
	if opened := after - before; opened > workers+2 {
		t.Fatalf("%d forwarded writes opened %v connections, want at most %d", writes, opened, workers+2)
	}

	// Failover to the other voter: the follower warms a connection to it
	// before any write, and its next writes dial nothing more.
	other := nodes[1]
	if other.s.IsLeader() {
		other = nodes[0]
	}
	warm := forwardConnsMetric(t, reg)
	if _, err := f.s.TransferLeadershipTo(ctxT(t, 20*time.Second), other.id); err != nil {
		t.Fatalf("transfer leadership to %s: %v", other.id, err)
	}
	mustEventually(t, 10*time.Second, "a connection to the new leader", func() (bool, string) {
		return f.s.LeaderID() == other.id && forwardConnsMetric(t, reg) > warm, fmt.Sprintf("leader %q", f.s.LeaderID())
	})
	// Transfer itself was forwarded; once the new leader's connection is
	// there, sequential writes open none.
	warmed := forwardConnsMetric(t, reg)
	for i := 0; i < 20; i++ {
		mustTxn(t, f.s, put(fmt.Sprintf("p/after%02d", i), `{}`))
	}
	if got := forwardConnsMetric(t, reg); got != warmed {
		t.Fatalf("writes to the new leader opened %v connections after it was warmed", got-warmed)
	}
}
