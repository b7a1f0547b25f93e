package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestResumedLeaderHeartbeatDivergence replays, deterministically, what
// robustness found in pause-leader (docs/robustness.md): a leader cut off
// while its main loop sits in the leader loop, a new leader elected by the
// others, and the new leader's heartbeat reaching the old one before any of
// its AppendEntries do. Raft handles that heartbeat on the transport's
// goroutine: unguarded, it gives the old leader the new term while its
// leader loop goes on, so the next write the old leader takes is appended
// with the new leader's term, kept when it follows the new leader (same
// index, same term: a duplicate to raft) and applied on it alone.
//
// The nodes are real: Badger log stores behind raft's LogCache, our FSM,
// raft's NetworkTransport over loopback TCP. The test controls the order
// with a partition in the stream layer and a gate on n1's RPC consumer,
// which holds every RPC for raft's main loop (AppendEntries, votes) while
// heartbeats take the fast path.
func TestResumedLeaderHeartbeatDivergence(t *testing.T) {
	t.Run("guarded", func(t *testing.T) { runResumedLeader(t, true) })
	// Without the guard the divergence must show: this proves the scenario
	// still reproduces the bug. If it stops diverging, hashicorp/raft has
	// fixed hashicorp/raft#695 (see heartbeat.go) and the guard can go.
	t.Run("unguarded", func(t *testing.T) { runResumedLeader(t, false) })
}

func runResumedLeader(t *testing.T, guarded bool) {
	tn := newTestNet()
	nodes := make([]*hbNode, 3)
	for i, id := range []string{"n1", "n2", "n3"} {
		// n1 never times out on its own: as leader it keeps its lease, as
		// it would while stopped; the others elect quickly.
		nodes[i] = startHBNode(t, tn, id, id == "n1", guarded)
	}
	n1 := nodes[0]
	conf := raft.Configuration{}
	for _, n := range nodes {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(n.id), Address: n.addr, Suffrage: raft.Voter})
	}
	for _, n := range nodes {
		if err := n.r.BootstrapCluster(conf).Error(); err != nil {
			t.Fatalf("bootstrap %s: %v", n.id, err)
		}
	}

	// n1 leads (n2 or n3 wins first; leadership is handed to n1).
	first := waitHBLeader(t, nodes, 0)
	if first != n1 {
		if err := first.r.LeadershipTransferToServer(raft.ServerID(n1.id), n1.addr).Error(); err != nil {
			t.Fatalf("transfer leadership from %s to n1: %v", first.id, err)
		}
	}
	waitFor(t, 10*time.Second, "n1 leads", func() bool { return n1.r.State() == raft.Leader })
	oldTerm := n1.r.CurrentTerm()
	idx := hbApply(t, n1, "kv/a")
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.id+" applies kv/a", func() bool { return n.fsm.applied.get() >= idx })
	}
	base := n1.r.LastIndex()

	// Cut n1 off; n2 and n3 elect a leader of a newer term.
	n1.gate.hold()
	tn.isolate(n1.id, nodes)
	newLeader := waitHBLeader(t, nodes[1:], oldTerm)
	newTerm := newLeader.r.CurrentTerm()
	t.Logf("n1 cut off in term %d at index %d; %s leads term %d", oldTerm, base, newLeader.id, newTerm)
	hbApply(t, newLeader, "kv/b")

	// The new leader reaches n1 again; only its heartbeats get through to
	// raft (everything else waits at the gate).
	var refusedBefore uint64
	if guarded {
		refusedBefore = n1.guard.refused.Load()
	}
	tn.unblock(newLeader.id, n1.id)
	waitFor(t, 10*time.Second, "a heartbeat of the new term reaches n1", func() bool {
		if guarded {
			return n1.guard.refused.Load() > refusedBefore
		}
		return n1.r.CurrentTerm() > oldTerm
	})
	if guarded {
		if term, state := n1.r.CurrentTerm(), n1.r.State(); term != oldTerm || state != raft.Leader {
			t.Fatalf("a heartbeat changed n1 off raft's main loop: term %d (was %d), state %v", term, oldTerm, state)
		}
	}

	// A write n1 takes now, as a resumed leader takes the ones queued while
	// it was stopped.
	x := n1.r.Apply(hbCommand(t, "kv/x"), 5*time.Second)
	waitFor(t, 10*time.Second, "n1 appends kv/x", func() bool { return n1.r.LastIndex() > base })
	var xl raft.Log
	if err := n1.logs.GetLog(base+1, &xl); err != nil {
		t.Fatalf("n1's entry %d: %v", base+1, err)
	}
	t.Logf("n1 appended kv/x at index %d with term %d", xl.Index, xl.Term)

	n1.gate.release()
	tn.heal()
	if err := x.Error(); err == nil {
		t.Errorf("kv/x, written on a deposed leader, was acknowledged at %d", x.Index())
	}
	last := hbApply(t, newLeader, "kv/c")
	for _, n := range nodes {
		waitFor(t, 20*time.Second, n.id+" applies kv/c", func() bool { return n.fsm.applied.get() >= last })
	}

	diverged := hbCompare(t, newLeader, n1, last)
	switch {
	case guarded && diverged != "":
		t.Fatalf("n1 diverged from %s: %s", newLeader.id, diverged)
	case !guarded && diverged == "":
		t.Fatalf("without the guard n1 did not diverge: hashicorp/raft#695 fixed upstream? (n1 appended kv/x with term %d)", xl.Term)
	case !guarded:
		t.Logf("without the guard, as expected: %s", diverged)
	}
}

// hbCompare compares two nodes' Raft logs (index, term, type, data) up to
// last and their documents; "" when they agree.
func hbCompare(t *testing.T, a, b *hbNode, last uint64) string {
	t.Helper()
	var diffs []string
	for i := uint64(1); i <= last; i++ {
		var la, lb raft.Log
		if err := a.logs.GetLog(i, &la); err != nil {
			t.Fatalf("%s's entry %d: %v", a.id, i, err)
		}
		if err := b.logs.GetLog(i, &lb); err != nil {
			t.Fatalf("%s's entry %d: %v", b.id, i, err)
		}
		if la.Term != lb.Term || la.Type != lb.Type || !bytes.Equal(la.Data, lb.Data) {
			diffs = append(diffs, fmt.Sprintf("entry %d: %s has term %d %v, %s has term %d %v", i, a.id, la.Term, la.Type, b.id, lb.Term, lb.Type))
		}
	}
	for _, p := range []string{"kv/a", "kv/b", "kv/x", "kv/c"} {
		da, db := getDocT(t, a.fsm, p), getDocT(t, b.fsm, p)
		if (da == nil) != (db == nil) || (da != nil && da.Revision != db.Revision) {
			diffs = append(diffs, fmt.Sprintf("document %s: %s has %s, %s has %s", p, a.id, docRev(da), b.id, docRev(db)))
		}
	}
	return strings.Join(diffs, "; ")
}

func docRev(d *Document) string {
	if d == nil {
		return "none"
	}
	return fmt.Sprintf("revision %d", d.Revision)
}

type hbNode struct {
	id    string
	addr  raft.ServerAddress
	logs  *logStore
	fsm   *fsm
	gate  *gatedTransport
	guard *heartbeatGuard // nil: unguarded
	r     *raft.Raft
}

func startHBNode(t *testing.T, tn *testNet, id string, patient, guarded bool) *hbNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &hbNode{id: id, addr: raft.ServerAddress(ln.Addr().String())}
	tn.add(id, string(n.addr))
	n.logs = mustOpenLogStore(t, t.TempDir())
	n.fsm = mustOpenFSM(t, t.TempDir())
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &testStream{Listener: ln, self: id, tn: tn}, MaxPool: 4, Timeout: 10 * time.Second,
		Logger: hclog.NewNullLogger(),
	})
	n.gate = newGatedTransport(nt)
	var trans raft.Transport = n.gate
	if guarded {
		trans, n.guard = guardHeartbeats(n.gate)
	}
	cache, err := raft.NewLogCache(logCacheEntries, n.logs)
	if err != nil {
		t.Fatal(err)
	}
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.Logger = hclog.NewNullLogger()
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	if patient {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Minute, time.Minute, time.Minute
	}
	c.CommitTimeout = 5 * time.Millisecond
	c.BatchApplyCh = true
	c.NoSnapshotRestoreOnStart = true
	c.SnapshotThreshold, c.SnapshotInterval = 1<<40, time.Hour
	n.r, err = raft.NewRaft(c, n.fsm, cache, n.logs, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	if n.guard != nil {
		n.guard.attach(n.r)
	}
	t.Cleanup(func() {
		_ = n.r.Shutdown().Error()
		n.gate.stop()
	})
	return n
}

func hbCommand(t *testing.T, path string) []byte {
	t.Helper()
	b, err := EncodeTxn(&Txn{Time: time.Now().UnixNano(), Ops: []Op{put(path, `{"p":"`+path+`"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hbApply commits a put of path through leader n and returns its index.
func hbApply(t *testing.T, n *hbNode, path string) uint64 {
	t.Helper()
	f := n.r.Apply(hbCommand(t, path), 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("apply %s on %s: %v", path, n.id, err)
	}
	if res, ok := f.Response().(*TxnResult); !ok || !res.OK() {
		t.Fatalf("apply %s on %s: %v", path, n.id, f.Response())
	}
	return f.Index()
}

// waitHBLeader waits for a leader among nodes of a term above minTerm.
func waitHBLeader(t *testing.T, nodes []*hbNode, minTerm uint64) *hbNode {
	t.Helper()
	var l *hbNode
	waitFor(t, 20*time.Second, fmt.Sprintf("a leader of a term above %d", minTerm), func() bool {
		for _, n := range nodes {
			if n.r.State() == raft.Leader && n.r.CurrentTerm() > minTerm {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatedTransport holds the RPCs for raft's main loop while held; heartbeats
// (the transport's fast path) are not held.
type gatedTransport struct {
	*raft.NetworkTransport
	out  chan raft.RPC
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGatedTransport(nt *raft.NetworkTransport) *gatedTransport {
	g := &gatedTransport{NetworkTransport: nt, out: make(chan raft.RPC), done: make(chan struct{}), open: make(chan struct{})}
	close(g.open)
	go g.forward()
	return g
}

func (g *gatedTransport) Consumer() <-chan raft.RPC { return g.out }

func (g *gatedTransport) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gatedTransport) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *gatedTransport) stop() { g.once.Do(func() { close(g.done) }) }

func (g *gatedTransport) forward() {
	in := g.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-g.done:
			return
		}
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		case <-g.done:
			return
		}
		select {
		case g.out <- rpc:
		case <-g.done:
			return
		}
	}
}

// testNet partitions nodes by refusing dials between them and closing the
// connections already dialed.
type testNet struct {
	mu      sync.Mutex
	ids     map[string]string // address -> node id
	blocked map[[2]string]bool
	conns   map[[2]string][]net.Conn
}

func newTestNet() *testNet {
	return &testNet{ids: map[string]string{}, blocked: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
}

func (tn *testNet) add(id, addr string) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.ids[addr] = id
}

// isolate cuts id off from every other node, both ways.
func (tn *testNet) isolate(id string, nodes []*hbNode) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	for _, n := range nodes {
		if n.id == id {
			continue
		}
		for _, k := range [][2]string{{id, n.id}, {n.id, id}} {
			tn.blocked[k] = true
			for _, c := range tn.conns[k] {
				_ = c.Close()
			}
			delete(tn.conns, k)
		}
	}
}

func (tn *testNet) unblock(from, to string) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	delete(tn.blocked, [2]string{from, to})
}

func (tn *testNet) heal() {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.blocked = map[[2]string]bool{}
}

var errPartitioned = errors.New("test network: partitioned")

type testStream struct {
	net.Listener
	self string
	tn   *testNet
}

func (s *testStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s.tn.mu.Lock()
	k := [2]string{s.self, s.tn.ids[string(addr)]}
	blocked := s.tn.blocked[k]
	s.tn.mu.Unlock()
	if blocked {
		return nil, errPartitioned
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	s.tn.mu.Lock()
	defer s.tn.mu.Unlock()
	if s.tn.blocked[k] {
		_ = c.Close()
		return nil, errPartitioned
	}
	s.tn.conns[k] = append(s.tn.conns[k], c)
	return c, nil
}
