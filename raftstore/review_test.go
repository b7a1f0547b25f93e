package raftstore

// Review tests: multi-node clusters of real Stores (Raft over loopback TCP,
// node-to-node HTTP over httptest servers) that probe cluster semantics.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type rvNode struct {
	id       string
	dir      string
	raftAddr string
	srv      *httptest.Server
	h        atomic.Pointer[http.Handler]
	s        *Store
}

type rvCluster struct {
	t     *testing.T
	tune  Tuning
	nodes []*rvNode
}

func rvTuning() Tuning {
	return Tuning{
		HeartbeatTimeout:   250 * time.Millisecond,
		ElectionTimeout:    250 * time.Millisecond,
		LeaderLeaseTimeout: 125 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// newRVCluster starts n voters: n1 bootstraps, the others are joined through
// n1, and every node registers its node record.
func newRVCluster(t *testing.T, n int, tune Tuning) *rvCluster {
	t.Helper()
	c := &rvCluster{t: t, tune: tune}
	base := t.TempDir()
	for i := 0; i < n; i++ {
		nd := &rvNode{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), raftAddr: "127.0.0.1:0"}
		nd.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := nd.h.Load()
			if h == nil {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			(*h).ServeHTTP(w, r)
		}))
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.s != nil {
				_ = nd.s.Close()
			}
			nd.srv.Close()
		}
	})
	c.open(0)
	mustEventually(t, 10*time.Second, "n1 leader", func() (bool, string) { return c.nodes[0].s.IsLeader(), "" })
	if err := c.nodes[0].s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("n1 record: %v", err)
	}
	for i := 1; i < n; i++ {
		c.open(i)
		// Adding a voter may cost n1 its leadership for a moment on a
		// loaded machine: then the join is refused with ErrNoLeader, and
		// asked again (adding the same voter twice is harmless).
		mustEventually(t, 30*time.Second, "join "+c.nodes[i].id, func() (bool, string) {
			err := c.nodes[0].s.Join(ctxT(t, 10*time.Second), JoinRequest{ID: c.nodes[i].id, RaftAddr: c.nodes[i].raftAddr, HTTPAddr: c.nodes[i].srv.URL, Voter: true, TxnVersion: txnVersionLatest})
			if errors.Is(err, ErrNoLeader) {
				return false, err.Error()
			}
			if err != nil {
				t.Fatalf("join %s: %v", c.nodes[i].id, err)
			}
			return true, ""
		})
	}
	for i := 1; i < n; i++ {
		if err := c.nodes[i].s.EnsureNodeRecord(ctxT(t, 15*time.Second)); err != nil {
			t.Fatalf("%s record: %v", c.nodes[i].id, err)
		}
	}
	return c
}

func (c *rvCluster) open(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	var ln net.Listener
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		ln, err = net.Listen("tcp", nd.raftAddr)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("listen %s: %v", nd.raftAddr, err)
	}
	nd.raftAddr = ln.Addr().String()
	s, err := Open(Config{
		NodeID: nd.id, Dir: nd.dir, RaftListener: ln, RaftAdvertise: nd.raftAddr, HTTPAdvertise: nd.srv.URL,
		Bootstrap: i == 0, Secret: testSecret, Voter: true, Logger: testLogger(), Tuning: c.tune,
	})
	if err != nil {
		_ = ln.Close()
		c.t.Fatalf("open %s: %v", nd.id, err)
	}
	nd.s = s
	h := s.InternalHandler()
	nd.h.Store(&h)
}

func (c *rvCluster) close(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	nd.h.Store(nil)
	if nd.s != nil {
		_ = nd.s.Close()
		nd.s = nil
	}
}

func (c *rvCluster) leader() int {
	c.t.Helper()
	l := -1
	mustEventually(c.t, 15*time.Second, "a leader", func() (bool, string) {
		for i, nd := range c.nodes {
			if nd.s != nil && nd.s.IsLeader() {
				l = i
				return true, ""
			}
		}
		return false, "none"
	})
	return l
}

// ---- Restore + NoSnapshotRestoreOnStart ------------------------------------------------

// A follower that receives a snapshot stores it in raft's snapshot store
// BEFORE fsm.Restore switches the tree to it. If the node stops between the
// two (kill -9 during db.Load, or Restore failing: disk full, I/O error), it
// restarts with the OLD tree while raft, with NoSnapshotRestoreOnStart,
// believes everything up to the snapshot index is applied. The entries
// between the old tree's applied index and the snapshot index are never
// applied on that node: permanent divergence, and strong reads on it miss
// acknowledged writes. The test widens the crash window deterministically by
// making the CURRENT switch fail (CURRENT.tmp is a directory) while the
// follower receives the snapshot, then restarts it normally.
func TestReviewRestoreInterruptedThenRestartDivergesForever(t *testing.T) {
	tune := rvTuning()
	tune.TrailingLogs = 2
	c := newRVCluster(t, 3, tune)
	l := c.leader()
	f := (l + 1) % 3
	ls := c.nodes[l].s
	mustTxn(t, ls, put("p/a", `{"v":"a"}`))
	mustEventually(t, 10*time.Second, "follower to apply p/a", func() (bool, string) {
		return c.nodes[f].s.AppliedIndex() >= ls.AppliedIndex(), ""
	})

	// The follower goes down; the cluster moves on and compacts its log.
	c.close(f)
	for i := 0; i < 20; i++ {
		mustTxn(t, ls, put(fmt.Sprintf("p/b%02d", i), `{"v":"b"}`))
	}
	if err := ls.Snapshot(); err != nil {
		t.Fatalf("leader snapshot: %v", err)
	}
	mustTxn(t, ls, put("p/c", `{"v":"c"}`))

	// The follower comes back and is sent the snapshot; Restore stops before
	// switching CURRENT (as a crash there would).
	obstacle := filepath.Join(c.nodes[f].dir, "tree", currentFile+".tmp")
	if err := os.MkdirAll(filepath.Join(obstacle, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	c.open(f)
	snapDir := filepath.Join(c.nodes[f].dir, "snapshots")
	mustEventually(t, 20*time.Second, "follower to store the leader's snapshot and attempt Restore", func() (bool, string) {
		ents, _ := os.ReadDir(snapDir)
		n := 0
		for _, e := range ents {
			if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
				n++
			}
		}
		_, err := os.Stat(filepath.Join(c.nodes[f].dir, "tree", "tree-1"))
		return n > 0 && err == nil, fmt.Sprintf("%d snapshots", n)
	})
	time.Sleep(300 * time.Millisecond)
	c.close(f)

	// Leadership moves while the follower is down (any election does: a
	// leader restart, a whole-cluster restart). The new leader starts the
	// follower at its last log index, not at the failed snapshot.
	if err := ls.TransferLeadership(); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	mustEventually(t, 10*time.Second, "the other voter to lead", func() (bool, string) {
		for i, nd := range c.nodes {
			if i != l && nd.s != nil && nd.s.IsLeader() {
				return true, ""
			}
		}
		return false, ""
	})
	ls = c.nodes[c.leader()].s

	// Normal restart, nothing in the way any more.
	if err := os.RemoveAll(obstacle); err != nil {
		t.Fatal(err)
	}
	c.open(f)
	fs := c.nodes[f].s
	mustTxn(t, ls, put("p/d", `{"v":"d"}`))
	want := ls.AppliedIndex()
	mustEventually(t, 20*time.Second, "restarted follower to catch up", func() (bool, string) {
		return fs.AppliedIndex() >= want, fmt.Sprintf("applied %d, leader %d", fs.AppliedIndex(), want)
	})
	if err := fs.WaitRead(ctxT(t, 10*time.Second), Strong, 0); err != nil {
		t.Fatalf("strong read on follower: %v", err)
	}
	var missing []string
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("p/b%02d", i)
		if d, err := fs.Get(p); err != nil || d == nil {
			missing = append(missing, p)
		}
	}
	for _, p := range []string{"p/a", "p/c", "p/d"} {
		if d, err := fs.Get(p); err != nil || d == nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("follower %s caught up to applied index %d (leader %d) and passed a strong read, but lacks %d acknowledged documents the leader has: %v",
			c.nodes[f].id, fs.AppliedIndex(), ls.AppliedIndex(), len(missing), missing)
	}
}

// ---- error classification during a graceful leadership transfer ------------------------

// While a leadership transfer is in progress (Node.Close does one), raft
// refuses new entries with ErrLeadershipTransferInProgress WITHOUT appending
// them. applyLocal maps that to ErrUnknownOutcome (503 to clients, and on
// the forwarding path too), although the command certainly was not appended
// and Propose could simply retry with the next leader.
func TestReviewLeadershipTransferRefusalIsNotUnknownOutcome(t *testing.T) {
	c := newRVCluster(t, 3, rvTuning())
	var bad []string
	var mu sync.Mutex
	for round := 0; round < 3 && len(bad) == 0; round++ {
		l := c.leader()
		ls := c.nodes[l].s
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p := fmt.Sprintf("p/r%d/w%d/%d", round, w, i)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := ls.Txn(ctx, &Txn{Time: 1, Ops: []Op{put(p, `{}`)}})
					cancel()
					if err != nil && errors.Is(err, ErrUnknownOutcome) && strings.Contains(err.Error(), "leadership transfer in progress") {
						mu.Lock()
						bad = append(bad, p+": "+err.Error())
						mu.Unlock()
					}
				}
			}(w)
		}
		time.Sleep(100 * time.Millisecond)
		if err := ls.TransferLeadership(); err != nil {
			t.Logf("transfer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d writes refused by raft before being appended were reported as unknown outcome, e.g. %s", len(bad), bad[0])
	}
}

// ---- shutdown ---------------------------------------------------------------------------

// raft.Apply may enqueue a future into the (buffered, BatchApplyCh) apply
// channel just before or even after Shutdown; raft never answers such a
// future, and logFuture.Error has no shutdown case. applyLocal waits on
// f.Error() with neither ctx nor s.stop, so a write racing Store.Close hangs
// forever (an HTTP handler goroutine that never returns).
func TestReviewProposeDuringCloseReturns(t *testing.T) {
	for attempt := 0; attempt < 5; attempt++ {
		s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
		mustLeader(t, s)
		var wg sync.WaitGroup
		var started atomic.Int64
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := s.Txn(ctx, &Txn{Time: 1, Ops: []Op{put(fmt.Sprintf("p/w%d/%d", w, i), `{}`)}})
					cancel()
					started.Add(1)
					if err != nil {
						return
					}
				}
			}(w)
		}
		mustEventually(t, 10*time.Second, "writes to flow", func() (bool, string) { return started.Load() > 200, "" })
		if err := s.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			var stuck []string
			for _, g := range strings.Split(string(buf), "\n\n") {
				if strings.Contains(g, "applyLocal") {
					stuck = append(stuck, g)
				}
			}
			if len(stuck) > 0 {
				t.Logf("%d goroutines stuck in applyLocal, e.g.:\n%s", len(stuck), stuck[0])
			}
			t.Fatalf("attempt %d: writers still blocked in Txn 5s after Store.Close (deadline of their ctx: 30s)", attempt)
		}
	}
}

// ---- strong reads across nodes and leadership changes (property; passes) ----------------

// Strong reads on every node (leader and followers, which ask the leader for
// its read index over HTTP) see every write acknowledged before they began,
// while writes are forwarded from all nodes and leadership moves repeatedly.
func TestReviewStrongReadsLinearizableAcrossTransfers(t *testing.T) {
	c := newRVCluster(t, 3, rvTuning())
	var acked atomic.Uint64
	stop := make(chan struct{})
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := c.nodes[w].s.Txn(ctx, &Txn{Time: 1, Ops: []Op{put(fmt.Sprintf("p/w%d/%d", w, i), `{}`)}})
				cancel()
				if err != nil || !res.OK() {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				for {
					cur := acked.Load()
					if res.Revision <= cur || acked.CompareAndSwap(cur, res.Revision) {
						break
					}
				}
			}
		}(w)
	}
	var reads atomic.Int64
	for r := 0; r < 6; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			s := c.nodes[r%3].s
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := acked.Load()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := s.WaitRead(ctx, Strong, 0)
				cancel()
				if err != nil {
					continue // unavailable during an election: allowed
				}
				reads.Add(1)
				if got := s.AppliedIndex(); got < before {
					errs <- fmt.Errorf("%s: strong read at applied %d missed acknowledged revision %d", s.NodeID(), got, before)
					return
				}
			}
		}(r)
	}
	for i := 0; i < 4; i++ {
		time.Sleep(700 * time.Millisecond)
		_ = c.nodes[c.leader()].s.TransferLeadership()
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 || acked.Load() == 0 {
		t.Fatalf("no reads (%d) or writes (%d)", reads.Load(), acked.Load())
	}
}
