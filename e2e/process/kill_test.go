package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// ackedWrite is one write the server acknowledged (2xx with X-Revision).
type ackedWrite struct {
	i     int
	coll  string
	rev   uint64
	sent  time.Time
	acked time.Time
}

// streamWriter writes stream/k%05d documents one after the other through one
// node, recording every acknowledged write in acknowledgement order.
type streamWriter struct {
	c        *cluster
	via      *proc
	pr       project
	client   *http.Client
	stop     chan struct{}
	stopOnce func() // closes stop once
	done     chan struct{}
	nAcks    atomic.Int64

	mu        sync.Mutex
	acks      []ackedWrite
	attempts  int
	failures  map[string]int // kind of failure -> count
	lastFail  string
	anomalies []string // 2xx answers that break the contract
}

func startWriter(t *testing.T, c *cluster, via *proc, pr project) *streamWriter {
	w := &streamWriter{c: c, via: via, pr: pr, stop: make(chan struct{}), done: make(chan struct{}),
		client: &http.Client{Timeout: 12 * time.Second}, failures: map[string]int{}}
	var once sync.Once
	w.stopOnce = func() { once.Do(func() { close(w.stop) }) }
	t.Cleanup(func() { w.stopOnce(); <-w.done })
	go w.run()
	return w
}

func (w *streamWriter) run() {
	defer close(w.done)
	for i := 0; i < 100000; i++ {
		select {
		case <-w.stop:
			return
		default:
		}
		coll := fmt.Sprintf("stream/k%05d", i)
		sent := time.Now()
		// The client timeout (12 s) is longer than the server's write timeout
		// (10 s), so a write waiting out an election is not abandoned early.
		r, err := doJSON(w.c.ctx, w.client, 12*time.Second, http.MethodPost, w.via.url()+"/api/db", w.pr.Headers(),
			map[string]any{"collection": coll, "data": map[string]int{"i": i}})
		w.mu.Lock()
		w.attempts++
		switch {
		case err != nil:
			w.fail("transport", fmt.Sprintf("%s: %v", coll, err))
		case r.status == http.StatusOK || r.status == http.StatusCreated:
			var d doc
			rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
			derr := json.Unmarshal(r.body, &d)
			want := fmt.Sprintf(`{"i":%d}`, i)
			if perr != nil || derr != nil || rev == 0 || d.Revision != rev || d.Collection != coll || string(d.Data) != want ||
				r.status != http.StatusCreated {
				w.anomalies = append(w.anomalies, fmt.Sprintf("%s: X-Revision %q, %s", coll, r.header.Get("X-Revision"), r))
			}
			if perr == nil && rev > 0 {
				w.acks = append(w.acks, ackedWrite{i: i, coll: coll, rev: rev, sent: sent, acked: time.Now()})
				w.nAcks.Add(1)
			}
		default:
			code := ""
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if json.Unmarshal(r.body, &e) == nil {
				code = e.Error.Code
			}
			w.fail(fmt.Sprintf("%d %s", r.status, code), fmt.Sprintf("%s: %s", coll, r))
		}
		failed := err != nil || (r.status != http.StatusOK && r.status != http.StatusCreated)
		w.mu.Unlock()
		if failed {
			// Back off a little so an election is not hammered; this is
			// pacing, not synchronisation.
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// fail records one failed attempt; w.mu is held.
func (w *streamWriter) fail(kind, detail string) {
	w.failures[kind]++
	w.lastFail = detail
}

// halt stops the writer after its current request and waits for it.
func (w *streamWriter) halt() {
	w.stopOnce()
	<-w.done
}

func (w *streamWriter) snapshot() ([]ackedWrite, int, map[string]int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := make(map[string]int, len(w.failures))
	for k, v := range w.failures {
		f[k] = v
	}
	return append([]ackedWrite(nil), w.acks...), w.attempts, f, append([]string(nil), w.anomalies...)
}

// mustWaitAcks polls the acknowledgement counter until it reaches n.
func (w *streamWriter) mustWaitAcks(t *testing.T, n int64, total time.Duration) {
	t.Helper()
	checkFor(t, total, 10*time.Millisecond, func() error {
		select {
		case <-w.done:
			t.Fatalf("writer stopped early at %d acknowledged writes", w.nAcks.Load())
		default:
		}
		if got := w.nAcks.Load(); got < n {
			w.mu.Lock()
			defer w.mu.Unlock()
			return fmt.Errorf("%d of %d acknowledged writes (attempts %d, failures %v, last %s)", got, n, w.attempts, w.failures, w.lastFail)
		}
		return nil
	})
}

// firstAckSentAfter is the first acknowledged write whose request left after at.
func (w *streamWriter) firstAckSentAfter(at time.Time) (ackedWrite, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.acks {
		if a.sent.After(at) {
			return a, true
		}
	}
	return ackedWrite{}, false
}

func (w *streamWriter) firstAck() ackedWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acks[0]
}

// readProbe repeats a strong GET of one document on one node until it
// answers 200 with that document.
type readProbe struct {
	p        *proc
	done     chan struct{}
	ok       time.Time // when the first 200 arrived
	fails    int
	lastFail string
}

func startReadProbe(c *cluster, p *proc, pr project, coll string, since time.Time) *readProbe {
	pb := &readProbe{p: p, done: make(chan struct{})}
	go func() {
		defer close(pb.done)
		for time.Since(since) < 30*time.Second && c.ctx.Err() == nil {
			r, err := c.getDoc(p, pr, coll, "", 0)
			var d doc
			if err == nil && r.status == http.StatusOK && json.Unmarshal(r.body, &d) == nil && d.Collection == coll {
				pb.ok = time.Now()
				return
			}
			pb.fails++
			if err != nil {
				pb.lastFail = err.Error()
			} else {
				pb.lastFail = r.String()
			}
			time.Sleep(20 * time.Millisecond) // pacing between tries
		}
	}()
	return pb
}

// mustWait waits for the probe to finish and fails unless it succeeded.
func (pb *readProbe) mustWait(t *testing.T, total time.Duration) {
	t.Helper()
	select {
	case <-pb.done:
	case <-time.After(total):
		t.Fatalf("strong read probe on %s still running after %v", pb.p.id, total)
	}
	if pb.ok.IsZero() {
		t.Fatalf("strong reads on %s never succeeded after the kill (%d tries, last: %s)", pb.p.id, pb.fails, pb.lastFail)
	}
}

func (w *streamWriter) maxRev() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m uint64
	for _, a := range w.acks {
		m = max(m, a.rev)
	}
	return m
}

// TestKillNineMidStreamAndRestart kills the leader with SIGKILL while a
// sequential writer streams documents through a follower, then restarts it
// and checks no acknowledged write was lost or applied twice.
func TestKillNineMidStreamAndRestart(t *testing.T) {
	const n = 150 // acknowledged writes per phase
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))

	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	var followers []*proc
	for _, p := range c.nodes {
		if p != leader {
			followers = append(followers, p)
		}
	}
	via := followers[0]
	pr := c.mustCreateProject(via)
	t.Logf("leader %s; writing through follower %s; project %s", leader.id, via.id, pr.ID)

	w := startWriter(t, c, via, pr)
	w.mustWaitAcks(t, n, 30*time.Second)

	// kill -9 the leader mid-stream.
	if cur := c.mustLeader(via, 5*time.Second); cur != leader {
		t.Fatalf("leadership moved from %s to %s before the kill", leader.id, cur.id)
	}
	acksAtKill := w.nAcks.Load()
	killAt := time.Now()
	leader.mustKill9()
	t.Logf("kill -9 %s after %d acknowledged writes", leader.id, acksAtKill)

	// Strong reads on each survivor from the moment of the kill: whichever of
	// them is elected must serve them again within the budget too.
	probeDoc := w.firstAck().coll
	var probes []*readProbe
	for _, p := range followers {
		probes = append(probes, startReadProbe(c, p, pr, probeDoc, killAt))
	}

	deadline := killAt.Add(5 * time.Second)
	var newLeader string
	checkFor(t, time.Until(deadline), 20*time.Millisecond, func() error {
		st, err := c.clusterStatus(via)
		if err != nil {
			return err
		}
		if st.Leader == "" || st.Leader == leader.id || c.byID(st.Leader) == nil {
			return fmt.Errorf("%s reports leader %q (killed: %s)", via.id, st.Leader, leader.id)
		}
		newLeader = st.Leader
		return nil
	})
	electedIn := time.Since(killAt)
	// Wait longer than the 5 s budget so that a slow failover is measured and
	// reported, and the durability checks below still run.
	var first ackedWrite
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		var ok bool
		if first, ok = w.firstAckSentAfter(killAt); !ok {
			return fmt.Errorf("no write sent after the kill was acknowledged (%d acks in all)", w.nAcks.Load())
		}
		return nil
	})
	resumedIn := first.acked.Sub(killAt)
	t.Logf("new leader %s seen %v after the kill; first write sent after the kill (%s, rev %d) acknowledged after %v",
		newLeader, electedIn.Round(time.Millisecond), first.coll, first.rev, resumedIn.Round(time.Millisecond))
	if resumedIn > 5*time.Second {
		_, _, failures, _ := w.snapshot()
		w.mu.Lock()
		last := w.lastFail
		w.mu.Unlock()
		t.Errorf("writes through %s resumed %v after kill -9 of leader %s, want <= 5s (new leader %s after %v; writer failures %v; last: %s)",
			via.id, resumedIn.Round(time.Millisecond), leader.id, newLeader, electedIn.Round(time.Millisecond), failures, last)
	}

	for _, pb := range probes {
		pb.mustWait(t, 30*time.Second)
		took := pb.ok.Sub(killAt)
		t.Logf("strong GET %s on %s answered 200 again %v after the kill (%d failed tries before, last: %s)",
			probeDoc, pb.p.id, took.Round(time.Millisecond), pb.fails, pb.lastFail)
		if took > 5*time.Second {
			t.Errorf("strong reads on %s resumed %v after kill -9 of leader %s, want <= 5s (new leader %s; last failure: %s)",
				pb.p.id, took.Round(time.Millisecond), leader.id, newLeader, pb.lastFail)
		}
	}

	w.mustWaitAcks(t, acksAtKill+n, 30*time.Second)

	// Restart the killed node with the same flags and data dir.
	leader.mustStart()
	readyIn := c.mustReady(leader, 30*time.Second)
	acksAtRestart := w.nAcks.Load()
	w.mustWaitAcks(t, acksAtRestart+n/3, 30*time.Second) // keep streaming with all three up
	target := w.maxRev()
	caughtUpIn := checkFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		st, err := c.clusterStatus(leader)
		if err != nil {
			return err
		}
		if err := st.Healthy(3, ""); err != nil {
			return err
		}
		me := st.Node(leader.id)
		if me == nil || me.AppliedIndex < target {
			return fmt.Errorf("%s applied %+v, want >= %d", leader.id, me, target)
		}
		return nil
	})
	t.Logf("restarted %s: ready %v after the restart, applied past rev %d %v later", leader.id,
		readyIn.Round(time.Millisecond), target, caughtUpIn.Round(time.Millisecond))

	w.halt()
	acks, attempts, failures, anomalies := w.snapshot()
	t.Logf("writer: %d attempts, %d acknowledged, failures %v", attempts, len(acks), failures)
	for _, a := range anomalies {
		t.Errorf("acknowledged write broke the contract: %s", a)
	}

	// (c) A sequential writer's acknowledged revisions strictly increase.
	for k := 1; k < len(acks); k++ {
		if acks[k].rev <= acks[k-1].rev {
			t.Errorf("revisions not increasing in acknowledgement order: %s rev %d after %s rev %d",
				acks[k].coll, acks[k].rev, acks[k-1].coll, acks[k-1].rev)
		}
	}

	// A fence written after the writer stopped: every stream write that can
	// ever commit (acknowledged or not) is at or below its revision, so
	// waiting for it makes the listings comparable. It is >= every ack.
	_, fenceRev := c.mustWrite(via, pr, "fence/kill-nine", map[string]bool{"done": true})
	minRev := max(fenceRev, w.maxRev())

	// (a) Every acknowledged document is readable, with its data, through a
	// strong read on every node (including the restarted one).
	for _, p := range c.nodes {
		checkAcked(t, c, p, pr, acks)
	}

	// (b) The restarted node's state equals the others', document for
	// document: an entry applied twice would change a revision or time.
	var names []string
	var lists [][]doc
	for _, p := range c.nodes {
		l := c.mustListAll(p, pr, "stream", minRev, 200)
		names, lists = append(names, p.id), append(lists, l)
	}
	compareListings(t, names, lists)
	byColl := map[string]doc{}
	for _, d := range lists[0] {
		byColl[d.Collection] = d
	}
	for _, a := range acks {
		d, ok := byColl[a.coll]
		if !ok {
			t.Errorf("acknowledged %s (rev %d) missing from the listing on %s", a.coll, a.rev, names[0])
			continue
		}
		if d.Revision != a.rev || string(d.Data) != fmt.Sprintf(`{"i":%d}`, a.i) {
			t.Errorf("listing on %s has %s as rev %d data %s, acknowledged rev %d", names[0], a.coll, d.Revision, d.Data, a.rev)
		}
	}
	if len(lists[0]) < len(acks) || len(lists[0]) > attempts {
		t.Errorf("listing holds %d documents; %d acknowledged, %d attempted", len(lists[0]), len(acks), attempts)
	}
	t.Logf("%d acknowledged documents verified on %d nodes; listings of %d documents identical at rev >= %d; total %v",
		len(acks), len(c.nodes), len(lists[0]), minRev, time.Since(t0).Round(time.Millisecond))
}

// checkAcked reads every acknowledged document from p with a strong read,
// a few at a time, and reports each one missing or different.
func checkAcked(t *testing.T, c *cluster, p *proc, pr project, acks []ackedWrite) {
	t.Helper()
	work := make(chan ackedWrite)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				msg := ""
				r, err := c.getDoc(p, pr, a.coll, "", 0)
				var d doc
				switch {
				case err != nil:
					msg = err.Error()
				case r.status != http.StatusOK:
					msg = r.String()
				case json.Unmarshal(r.body, &d) != nil:
					msg = "undecodable: " + r.String()
				case d.Collection != a.coll || d.Revision != a.rev || string(d.Data) != fmt.Sprintf(`{"i":%d}`, a.i):
					msg = fmt.Sprintf("got %+v data %s, acknowledged rev %d", d, d.Data, a.rev)
				}
				if msg != "" {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("%s: %s", a.coll, msg))
					mu.Unlock()
				}
			}
		}()
	}
	for _, a := range acks {
		work <- a
	}
	close(work)
	wg.Wait()
	sort.Strings(errs)
	if len(errs) > 0 {
		if len(errs) > 10 {
			errs = append(errs[:10], fmt.Sprintf("... and %d more", len(errs)-10))
		}
		t.Errorf("strong GET on %s: %d of %d acknowledged documents wrong:\n%s", p.id, len(errs), len(acks), strings.Join(errs, "\n"))
	}
}

// TestKillNineFollowerCatchesUpAfterSnapshot kills a follower, writes enough
// through the leader that the leader compacts its log past the follower's
// position, and checks the restarted follower catches up by installing a
// snapshot and serves every document locally.
func TestKillNineFollowerCatchesUpAfterSnapshot(t *testing.T) {
	const docs = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	// Frequent snapshots: every 64 entries, keeping 16, checked every 500ms
	// (raft's default interval of 60s would never fire within the test).
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{
		"EDGEBASE_RAFT_SNAPSHOT_THRESHOLD=64",
		"EDGEBASE_RAFT_TRAILING_LOGS=16",
		"EDGEBASE_RAFT_SNAPSHOT_INTERVAL=500ms",
	}})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	var follower *proc
	for _, p := range c.nodes {
		if p != leader {
			follower = p
			break
		}
	}
	pr := c.mustCreateProject(leader)

	st, err := c.clusterStatus(leader)
	if err != nil {
		t.Fatal(err)
	}
	genBefore, err := treeGeneration(follower.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	follower.mustKill9()
	var followerApplied uint64
	if m := st.Node(follower.id); m != nil {
		followerApplied = m.AppliedIndex
	}
	t.Logf("kill -9 follower %s (applied about %d, tree generation %d); leader %s", follower.id, followerApplied, genBefore, leader.id)

	// 1,000 documents through the leader, 8 writers at a time.
	writeStart := time.Now()
	revs := make([]uint64, docs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	next := atomic.Int64{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= docs {
					return
				}
				coll := fmt.Sprintf("bulk/d%04d", i)
				d, rev, err := c.write(leader, pr, coll, map[string]int{"i": i})
				if err == nil && string(d.Data) != fmt.Sprintf(`{"i":%d}`, i) {
					err = fmt.Errorf("%s: answered data %s", coll, d.Data)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					revs[i] = rev
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d writes failed with one follower down; first: %s", len(errs), docs, errs[0])
	}
	var maxRev uint64
	for _, r := range revs {
		maxRev = max(maxRev, r)
	}
	t.Logf("wrote %d documents through %s in %v (max rev %d)", docs, leader.id, time.Since(writeStart).Round(time.Millisecond), maxRev)

	// The leader must have compacted its log past the follower's position,
	// or the follower would catch up from the log alone.
	var snapIdx uint64
	_, snapErr := waitUntil(15*time.Second, 50*time.Millisecond, func() error {
		if snapIdx = proctest.LatestSnapshotIndex(leader.dataDir); snapIdx <= followerApplied+32 {
			return fmt.Errorf("leader's latest snapshot is at index %d", snapIdx)
		}
		return nil
	})
	if snapErr != nil {
		t.Skipf("the leader took no snapshot past index %d within 15s (%v) after %d writes: the binary ignores "+
			"EDGEBASE_RAFT_SNAPSHOT_THRESHOLD / EDGEBASE_RAFT_TRAILING_LOGS / EDGEBASE_RAFT_SNAPSHOT_INTERVAL "+
			"(needed feature: serve flags --raft-snapshot-threshold, --raft-trailing-logs, --raft-snapshot-interval)",
			followerApplied+32, snapErr, docs)
	}
	t.Logf("leader %s snapshot at index %d", leader.id, snapIdx)

	follower.mustStart()
	readyIn := c.mustReady(follower, 40*time.Second)
	caughtUpIn := checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err := c.clusterStatus(follower)
		if err != nil {
			return err
		}
		if err := st.Healthy(3, ""); err != nil {
			return err
		}
		if me := st.Node(follower.id); me == nil || me.AppliedIndex < maxRev {
			return fmt.Errorf("%s applied %+v, want >= %d", follower.id, me, maxRev)
		}
		return nil
	})
	t.Logf("restarted %s: ready after %v, caught up to rev %d %v later", follower.id,
		readyIn.Round(time.Millisecond), maxRev, caughtUpIn.Round(time.Millisecond))

	// It serves every document from its own state.
	got := c.mustListAll(follower, pr, "bulk", maxRev, 300)
	if len(got) != docs {
		t.Errorf("%s lists %d documents under bulk locally, want %d", follower.id, len(got), docs)
	}
	for k, d := range got {
		if k >= docs {
			break
		}
		want := fmt.Sprintf("bulk/d%04d", k)
		if d.Collection != want || d.Revision != revs[k] || string(d.Data) != fmt.Sprintf(`{"i":%d}`, k) {
			t.Errorf("%s document %d: %+v data %s, want %s rev %d", follower.id, k, d, d.Data, want, revs[k])
			break
		}
	}
	compareListings(t, []string{leader.id, follower.id}, [][]doc{c.mustListAll(leader, pr, "bulk", maxRev, 300), got})
	// One strong point read too, through the restarted node.
	if r, err := c.getDoc(follower, pr, "bulk/d0999", "", 0); err != nil || r.status != http.StatusOK {
		t.Errorf("strong GET bulk/d0999 on %s: %v %v", follower.id, r, err)
	}

	// It caught up by installing a snapshot.
	gen, err := treeGeneration(follower.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// The log line follows the switch to the new generation (after the old
	// database is closed), so give it a moment.
	_, logErr := waitUntil(10*time.Second, 50*time.Millisecond, func() error {
		if !follower.LogContains(`"restored snapshot"`) {
			return fmt.Errorf("no \"restored snapshot\" in the log of %s", follower.id)
		}
		return nil
	})
	restoredLogged := logErr == nil
	if gen <= 0 && !restoredLogged {
		t.Errorf("%s caught up without installing a snapshot: tree/CURRENT generation %d, no \"restored snapshot\" in its log "+
			"(leader snapshot at %d, follower was at %d)", follower.id, gen, snapIdx, followerApplied)
	}
	if gen <= genBefore {
		t.Errorf("%s tree generation %d after catch-up, %d before: no new generation installed", follower.id, gen, genBefore)
	}
	t.Logf("%s tree generation %d -> %d, \"restored snapshot\" logged: %v; total %v",
		follower.id, genBefore, gen, restoredLogged, time.Since(t0).Round(time.Millisecond))
}

// waitUntil is checkFor without failing: it returns f's last error after total.
func waitUntil(total, step time.Duration, f func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := f()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start)+step > total {
			return time.Since(start), err
		}
		time.Sleep(step)
	}
}
