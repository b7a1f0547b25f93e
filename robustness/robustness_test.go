package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edgebase/edgebase/internal/proctest"
)

// profile is how hard a run pushes: the short one runs in CI (one seed per
// fault), the long one through `make robustness`.
type profile struct {
	name  string
	seeds []uint64
	// warm is how long the load runs before the fault, hold how long the
	// fault lasts, after how long the load runs once the cluster is whole.
	warm, hold, after time.Duration
}

func currentProfile(t *testing.T) profile {
	p := profile{name: "short", seeds: []uint64{1}, warm: 1500 * time.Millisecond, hold: 2500 * time.Millisecond, after: 1500 * time.Millisecond}
	if os.Getenv("EDGEBASE_ROBUSTNESS") == "long" {
		p = profile{name: "long", seeds: []uint64{1, 2, 3, 4, 5}, warm: 3 * time.Second, hold: 6 * time.Second, after: 4 * time.Second}
	}
	if s := os.Getenv("EDGEBASE_ROBUSTNESS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EDGEBASE_ROBUSTNESS_SEED=%q: %v", s, err)
		}
		p.seeds = []uint64{seed}
	}
	return p
}

// requireFaults: in CI every fault must run; elsewhere one that this machine
// cannot make (partitions need root and iptables) is skipped with a reason.
func requireFaults() bool { return os.Getenv("EDGEBASE_REQUIRE_FAULTS") == "1" }

// faultCase is one kind of fault: inject it, keep it for the profile's hold
// time, and heal it, leaving every node running.
type faultCase struct {
	name      string
	needsNet  bool           // iptables and a user per node
	needsRoot bool           // e.g. to mount a tmpfs
	tmpfs     map[string]int // see clusterOpts.tmpfs
	extra     []string       // serve flags for every node
	run       func(r *run)
}

// exitReason is the line of a node's output that tells why it stopped: a
// panic or fatal error, else the last error logged, else the last line.
func exitReason(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			return strings.Join(lines[i:min(i+12, len(lines))], "\n")
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"ERROR"`) {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

var faultCases = []faultCase{
	{name: "kill-leader", run: func(r *run) {
		l := r.c.leader(20 * time.Second)
		r.event("kill -9 leader %s", l.id)
		r.must(l.Kill9())
		r.awaitLeaderOtherThan(l)
		r.holdFault()
		r.event("restart %s", l.id)
		r.c.restart(l)
	}},
	{name: "kill-follower", run: func(r *run) {
		f := r.follower()
		r.event("kill -9 follower %s", f.id)
		r.must(f.Kill9())
		r.holdFault()
		r.event("restart %s", f.id)
		r.c.restart(f)
	}},
	{name: "pause-leader", run: func(r *run) {
		// SIGSTOP past the election timeout: the others elect a new leader
		// while the old one still believes it leads; SIGCONT brings the
		// deposed leader back, which must step down, not serve stale state.
		l := r.c.leader(20 * time.Second)
		r.event("SIGSTOP leader %s", l.id)
		r.must(l.Signal(syscall.SIGSTOP))
		r.awaitLeaderOtherThan(l)
		r.holdFault()
		r.event("SIGCONT %s", l.id)
		r.must(l.Signal(syscall.SIGCONT))
	}},
	{name: "partition-follower", needsNet: true, run: func(r *run) {
		f := r.follower()
		r.event("partition follower %s from every node", f.id)
		r.must(r.c.net.isolate(f, r.c.nodes))
		r.holdFault()
		r.event("heal")
		r.must(r.c.net.heal())
	}},
	{name: "partition-leader", needsNet: true, run: func(r *run) {
		l := r.c.leader(20 * time.Second)
		r.event("partition leader %s from every node", l.id)
		r.must(r.c.net.isolate(l, r.c.nodes))
		r.awaitLeaderOtherThan(l)
		r.holdFault()
		r.event("heal")
		r.must(r.c.net.heal())
	}},
	{name: "snapshot-catchup", needsNet: true,
		extra: []string{"--raft-snapshot-threshold", "64", "--raft-trailing-logs", "32", "--raft-snapshot-interval", "100ms"},
		run: func(r *run) {
			// Cut a follower off until the leader has compacted its log past
			// what the follower holds: healing must install a snapshot.
			f := r.follower()
			st, err := r.c.status(f)
			r.must(err)
			m := st.Node(f.id)
			if m == nil {
				r.t.Fatalf("%s is not in its own cluster status: %+v", f.id, *st)
			}
			behind := m.AppliedIndex
			r.event("partition follower %s at applied index %d", f.id, behind)
			r.must(r.c.net.isolate(f, r.c.nodes))
			r.holdFault()
			var snap uint64
			r.checkFor(60*time.Second, "the leader's log compacted past the follower", func() error {
				l := r.c.leader(10*time.Second, r.without(f)...)
				snap = proctest.LatestSnapshotIndex(l.dataDir)
				if snap <= behind+64 {
					return fmt.Errorf("leader %s has its latest snapshot at %d, the follower is at %d", l.id, snap, behind)
				}
				return nil
			})
			r.event("heal (leader snapshot at %d)", snap)
			r.must(r.c.net.heal())
			r.checkFor(60*time.Second, f.id+" restored the leader's snapshot", func() error {
				// The FSM logs each snapshot it restores; the follower was
				// never restarted, so this one came from the leader.
				if !strings.Contains(f.LogTail(1<<20), `"msg":"restored snapshot"`) {
					return fmt.Errorf("%s has not restored a snapshot", f.id)
				}
				return nil
			})
		}},
	{name: "full-disk", needsRoot: true, tmpfs: map[string]int{"n3": 256}, run: func(r *run) {
		// n3's data dir is a small tmpfs: fill it, keep it full while
		// the load goes on, then free the space and bring n3 back (it may
		// have stopped on the failed writes, which is allowed; serving
		// wrong answers is not).
		n := r.c.byID("n3")
		r.victim = n.id
		filled, err := fillDisk(n.dataDir, "filler")
		r.must(err)
		r.event("filled %s's data dir (%d MiB more)", n.id, filled>>20)
		r.holdFault()
		r.must(os.Remove(filepath.Join(n.dataDir, "filler")))
		r.event("freed the space; %s running: %v", n.id, n.Running())
		if !n.Running() {
			r.event("%s stopped on the full disk: %s", n.id, exitReason(n.LogTail(256<<10)))
			r.c.restart(n)
		}
	}},
	{name: "restart-all", run: func(r *run) {
		r.event("kill -9 every node")
		var wg sync.WaitGroup
		errs := make([]error, len(r.c.nodes))
		for i, n := range r.c.nodes {
			wg.Go(func() { errs[i] = n.Kill9() })
		}
		wg.Wait()
		for _, err := range errs {
			r.must(err)
		}
		r.holdFault()
		r.event("start every node")
		for _, n := range r.c.nodes {
			r.must(n.Start())
		}
		for _, n := range r.c.nodes {
			r.c.mustReady(n, 60*time.Second)
		}
	}},
}

// TestRobustness runs every fault with every seed of the profile.
func TestRobustness(t *testing.T) {
	p := currentProfile(t)
	for _, fc := range faultCases {
		for _, seed := range p.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", fc.name, seed), func(t *testing.T) {
				res := runFault(t, fc, seed, p, bins.good)
				res.requireCorrect(t)
			})
		}
	}
}

// TestCheckerCatchesStaleReads is the negative check: a build whose
// followers answer strong reads from local state (-tags brokenreads) must
// fail the linearizability check when a follower is partitioned, so the
// checker is proven able to fail.
func TestCheckerCatchesStaleReads(t *testing.T) {
	p := currentProfile(t)
	bin := brokenBinary(t)
	var fc faultCase
	for _, f := range faultCases {
		if f.name == "partition-follower" {
			fc = f
		}
	}
	res := runFault(t, fc, p.seeds[0], p, bin)
	if res.lin == porcupine.Ok {
		t.Fatalf("the linearizability check passed a build that serves strong reads from a partitioned follower's local state (%d operations)", len(res.recs))
	}
	if res.lin != porcupine.Illegal {
		t.Fatalf("the check ended %v, want Illegal", res.lin)
	}
	stale := 0
	for _, rec := range res.recs {
		if rec.Input.Kind == OpGet && rec.Node == res.victim && rec.Output.Outcome == OutOK {
			stale++
		}
	}
	t.Logf("porcupine found the history illegal; %d strong reads answered by the partitioned follower %s (report: %s)", stale, res.victim, res.reportDir)
	// The query check must catch the same build: a strong query the
	// partitioned follower answers locally misses creates acknowledged
	// elsewhere.
	caught := ""
	for _, f := range res.failures {
		if strings.HasPrefix(f, "query round on "+res.victim) {
			caught = f
			break
		}
	}
	if caught == "" {
		t.Fatalf("the query check passed a build that serves strong queries from a partitioned follower's local state; failures: %v", res.failures)
	}
	t.Logf("the query check caught it too: %s", caught)
}

// ---- one run ----

type run struct {
	t      *testing.T
	c      *cluster
	p      profile
	seed   uint64
	rng    *rand.Rand
	start  time.Time
	victim string

	mu     sync.Mutex
	events []string
}

// result is what a run recorded and what the checkers said.
type result struct {
	name      string
	seed      uint64
	recs      []Record
	lin       porcupine.CheckResult
	victim    string
	failures  []string
	reportDir string
}

func (r *run) event(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", time.Since(r.start).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.events = append(r.events, line)
	r.mu.Unlock()
	r.t.Log(line)
}

func (r *run) must(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) checkFor(total time.Duration, what string, f func() error) {
	r.t.Helper()
	r.c.checkFor(total, what, f)
}

func (r *run) holdFault() {
	select {
	case <-time.After(r.p.hold):
	case <-r.c.ctx.Done():
	}
}

// follower picks a follower voter with the run's rng.
func (r *run) follower() *node {
	l := r.c.leader(20 * time.Second)
	var fs []*node
	for _, n := range r.c.voters() {
		if n != l {
			fs = append(fs, n)
		}
	}
	f := fs[r.rng.IntN(len(fs))]
	r.victim = f.id
	return f
}

func (r *run) without(x *node) []*node {
	var out []*node
	for _, n := range r.c.voters() {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

// awaitLeaderOtherThan waits until the other voters agree on a new leader.
func (r *run) awaitLeaderOtherThan(old *node) {
	r.t.Helper()
	r.victim = old.id
	others := r.without(old)
	r.checkFor(30*time.Second, "a new leader", func() error {
		for _, n := range others {
			st, err := r.c.status(n)
			if err != nil {
				return err
			}
			if st.Leader == "" || st.Leader == old.id {
				return fmt.Errorf("%s still names leader %q", n.id, st.Leader)
			}
		}
		return nil
	})
	l := r.c.leader(10*time.Second, others...)
	r.event("new leader %s", l.id)
}

// runFault starts a cluster with bin, runs the workload and the stream
// recorders across fault fc, heals, and checks everything. It saves a
// report when a check fails.
func runFault(t *testing.T, fc faultCase, seed uint64, p profile, bin string) *result {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if fc.needsRoot && os.Geteuid() != 0 {
		t.Skipf("%s needs root (mount a tmpfs)", fc.name)
	}
	if fc.needsNet && os.Geteuid() != 0 {
		if requireFaults() {
			t.Fatalf("%s needs root (iptables, a user per node) and EDGEBASE_REQUIRE_FAULTS=1", fc.name)
		}
		t.Skipf("%s needs root for iptables and a user per node; run as root (CI does, with EDGEBASE_REQUIRE_FAULTS=1)", fc.name)
	}
	c := startCluster(t, ctx, clusterOpts{bin: bin, extra: fc.extra, tmpfs: fc.tmpfs})
	if fc.needsNet && c.net == nil {
		if requireFaults() {
			t.Fatalf("%s: network partitions are not available here (see the log above)", fc.name)
		}
		t.Skipf("%s: network partitions are not available here (see the log above)", fc.name)
	}
	r := &run{t: t, c: c, p: p, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), start: time.Now()}
	res := &result{name: fc.name, seed: seed}
	t.Cleanup(func() {
		if t.Failed() && res.reportDir == "" {
			res.reportDir = saveReport(t, r, res, porcupine.LinearizationInfo{}, nil)
		}
	})

	// Streams on every node, opened before the load.
	var recorders []*streamRecorder
	for _, n := range c.nodes {
		var s *streamRecorder
		// A node may not have applied the owner's login yet (the broken
		// build checks the token on local state): retry until it has.
		r.checkFor(20*time.Second, "a realtime stream on "+n.id, func() error {
			var err error
			s, err = c.startStream(ctx, "live-"+n.id, n, nil)
			return err
		})
		recorders = append(recorders, s)
	}

	// The access workload's keys, each in a project of its own.
	guards := setupGuarded(c, []guardKind{guardRules, guardRole})
	r.event("guarded keys: %s", guardedNames(guards))

	w := newWorkload(c)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var clients sync.WaitGroup
	id := 0
	for _, n := range c.nodes {
		per := 2
		if !n.voter {
			per = 1
		}
		for range per {
			id++
			clientID, crng := id, rand.New(rand.NewPCG(seed, uint64(id)))
			clients.Go(func() { w.runClient(loadCtx, clientID, n, crng) })
		}
	}
	w.startGuarded(loadCtx, &clients, guards, seed, 100)
	// Strong queries through every node, judged against the creates
	// acknowledged before each round.
	r.checkFor(20*time.Second, "the log index declared", func() error { return c.declareLogIndex(c.nodes[0]) })
	qcheck := &queryChecker{}
	for _, n := range c.nodes {
		clients.Go(func() { qcheck.run(loadCtx, w, n) })
	}
	r.checkFor(30*time.Second, "the load started", func() error {
		if w.okCount() < 20 {
			return fmt.Errorf("%d operations answered", w.okCount())
		}
		return nil
	})
	time.Sleep(p.warm) // load before the fault: a duration of the run, not a wait for an event
	fc.run(r)
	r.event("fault healed; waiting for every node")
	for _, n := range c.nodes {
		c.mustReady(n, 60*time.Second)
	}
	c.checkFor(30*time.Second, "three voters and a leader", func() error {
		st, err := c.status(c.nodes[0])
		if err != nil {
			return err
		}
		return st.Healthy(3, "")
	})
	time.Sleep(p.after) // load on the whole cluster again
	stopLoad()
	clients.Wait()
	r.event("load stopped")

	// One last acknowledged write through the leader marks the end: every
	// stream must reach it and every node must hold it.
	leader := c.leader(20 * time.Second)
	final := w.do(0, leader, Input{Kind: OpPut, Key: kvKey(0), Value: "final"})
	if final.Output.Outcome != OutOK {
		t.Fatalf("final write through %s: %s", leader.id, final.Err)
	}
	w.record(final)
	recs, creates := w.snapshot()
	res.recs, res.victim = recs, r.victim
	var maxRev uint64
	for _, rec := range recs {
		maxRev = max(maxRev, rec.Output.Rev)
	}
	for _, cr := range creates {
		maxRev = max(maxRev, cr.Rev)
	}
	counts := map[Outcome]int{}
	for _, rec := range recs {
		counts[rec.Output.Outcome]++
	}
	r.event("%d operations (ok %d, not found %d, precondition %d, forbidden %d, failed %d, unknown %d), %d acknowledged creates, max revision %d",
		len(recs), counts[OutOK], counts[OutNotFound], counts[OutPrecondition], counts[OutForbidden], counts[OutFailed], counts[OutUnknown], len(creates), maxRev)
	for _, g := range guards {
		st := accessStats(recs, g.key)
		r.event("%s (by %s): %s", g.key, g.kind, st)
		if err := st.exercised(); err != nil {
			res.failures = append(res.failures, fmt.Sprintf("access workload on %s: %v", g.key, err))
		}
	}

	// 1. Linearizability.
	var info porcupine.LinearizationInfo
	checkStart := time.Now()
	res.lin, info = Check(recs, 90*time.Second)
	if res.lin != porcupine.Ok {
		res.failures = append(res.failures, fmt.Sprintf("linearizability: porcupine says %v", res.lin))
	}
	r.event("linearizability: %v in %v", res.lin, time.Since(checkStart).Round(time.Millisecond))
	// The checker can fail on this very history: with one refused write of
	// a guarded key turned into an acknowledged one, committed right after
	// a completed revoke, it must say Illegal.
	for _, g := range guards {
		bad, i, ok := acceptRefusedWrite(recs, g.key)
		if !ok {
			res.failures = append(res.failures, fmt.Sprintf("access workload on %s: no write refused after a completed revoke to test the checker with", g.key))
			continue
		}
		got, _ := Check(bad, 90*time.Second)
		if got != porcupine.Illegal {
			res.failures = append(res.failures, fmt.Sprintf("linearizability: with %s's refused write %s accepted, porcupine says %v, want Illegal", g.key, describeOp(bad[i].Input, bad[i].Output), got))
		}
		r.event("checker self-test on %s: %q (client %d on %s, refused at %.3fs) accepted instead: %v", g.key, describeOp(bad[i].Input, bad[i].Output),
			bad[i].Client, bad[i].Node, time.Duration(bad[i].Call).Seconds(), got)
	}

	// 2. Every node holds every acknowledged create, and all converge, the
	// guarded keys' projects too.
	res.failures = append(res.failures, convergence(c, maxRev, creates)...)
	for _, g := range guards {
		res.failures = append(res.failures, converged(c, g.owner.Headers(), guardedCollection, maxRev)...)
	}

	// 2b. Queries: every answered round held every create acknowledged before
	// it, once each and in order; every node's index answers its listing.
	rounds, unanswered, qfail := qcheck.result()
	r.event("queries: %d rounds judged, %d not answered under the fault", rounds, unanswered)
	if rounds == 0 {
		res.failures = append(res.failures, "queries: no query round was answered")
	}
	res.failures = append(res.failures, qfail...)
	res.failures = append(res.failures, queryConvergence(c, maxRev)...)

	// 3. Streams: the live ones reach the final write, then resumed ones
	// replay from the middle of the history on every node.
	var streams []Stream
	for _, s := range recorders {
		if err := waitFor(ctx, 30*time.Second, func() error {
			if got := s.last(); got < final.Output.Rev {
				return fmt.Errorf("%s delivered up to %d, the final write is %d", s.name, got, final.Output.Rev)
			}
			return nil
		}); err != nil {
			res.failures = append(res.failures, "realtime: "+err.Error())
		}
		st, err := s.stop()
		if err != nil {
			res.failures = append(res.failures, "realtime: "+err.Error())
		}
		streams = append(streams, st)
	}
	mid := midRevision(streams)
	for _, n := range c.nodes {
		s, err := c.startStream(ctx, "resumed-"+n.id, n, &mid)
		if err != nil {
			res.failures = append(res.failures, "realtime resume: "+err.Error())
			continue
		}
		if err := waitFor(ctx, 30*time.Second, func() error {
			if got := s.last(); got < final.Output.Rev {
				return fmt.Errorf("%s (since %d) delivered up to %d, the final write is %d", s.name, mid, got, final.Output.Rev)
			}
			return nil
		}); err != nil {
			res.failures = append(res.failures, "realtime resume: "+err.Error())
		}
		st, err := s.stop()
		if err != nil {
			res.failures = append(res.failures, "realtime resume: "+err.Error())
		}
		streams = append(streams, st)
	}
	for _, err := range CheckStreams(streams, ackedChanges(recs), false) {
		res.failures = append(res.failures, "realtime: "+err.Error())
	}
	events := 0
	for _, s := range streams {
		events += len(s.Events)
	}
	r.event("%d streams delivered %d events (resume from revision %d)", len(streams), events, mid)

	if len(res.failures) > 0 || res.lin != porcupine.Ok {
		res.reportDir = saveReport(t, r, res, info, streams)
	}
	return res
}

// requireCorrect fails the test with every failure and how to replay it.
func (res *result) requireCorrect(t *testing.T) {
	t.Helper()
	if len(res.failures) == 0 {
		return
	}
	t.Errorf("%d checks failed for %s with seed %d (report: %s; replay: EDGEBASE_ROBUSTNESS_SEED=%d go test ./robustness -run 'TestRobustness/%s/')",
		len(res.failures), res.name, res.seed, res.reportDir, res.seed, res.name)
	for _, f := range res.failures {
		t.Error(f)
	}
}

// ackedChanges are the acknowledged writes to the kv keys as the change
// events they must show up as (the streams watch kv of the main project).
func ackedChanges(recs []Record) []StreamEvent {
	var out []StreamEvent
	for _, rec := range recs {
		if rec.Output.Outcome != OutOK || !strings.HasPrefix(rec.Input.Key, kvCollection+"/") {
			continue
		}
		if k := rec.Input.Kind; k != OpPut && k != OpCAS && k != OpDelete {
			continue
		}
		ev := StreamEvent{Revision: rec.Output.Rev, Collection: rec.Input.Key, Type: "set"}
		if rec.Input.Kind == OpDelete {
			ev.Type = "delete"
		} else {
			ev.Data, _ = json.Marshal(map[string]string{"v": rec.Input.Value})
		}
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b StreamEvent) int { return int(a.Revision) - int(b.Revision) })
	return out
}

// midRevision is a revision in the middle of what the live streams saw.
func midRevision(streams []Stream) uint64 {
	var revs []uint64
	for _, s := range streams {
		for _, e := range s.Events {
			revs = append(revs, e.Revision)
		}
	}
	if len(revs) == 0 {
		return 0
	}
	slices.Sort(revs)
	return revs[len(revs)/2]
}

// convergence reads kv and log from every node once it applied maxRev and
// requires identical listings that hold every acknowledged create.
func convergence(c *cluster, maxRev uint64, creates []ackedCreate) []string {
	var failures []string
	for _, coll := range []string{kvCollection, logCollection} {
		var ref []byte
		var refNode string
		for _, n := range c.nodes {
			docs, raw, err := listAll(c, n, c.pr.Headers(), coll, maxRev)
			if err != nil {
				failures = append(failures, fmt.Sprintf("convergence: list %s on %s: %v", coll, n.id, err))
				continue
			}
			if ref == nil {
				ref, refNode = raw, n.id
			} else if string(raw) != string(ref) {
				failures = append(failures, fmt.Sprintf("convergence: %s on %s differs from %s:\n%s\n%s", coll, n.id, refNode, raw, ref))
			}
			if coll != logCollection {
				continue
			}
			have := map[string]string{}
			for _, d := range docs {
				var v struct {
					V string `json:"v"`
				}
				_ = json.Unmarshal(d.Data, &v)
				have[d.Collection] = v.V
			}
			missing := 0
			for _, cr := range creates {
				if have[cr.Path] != cr.Value {
					missing++
					if missing <= 5 {
						failures = append(failures, fmt.Sprintf("lost write: %s=%s (revision %d, acknowledged by %s) is not on %s", cr.Path, cr.Value, cr.Rev, cr.Node, n.id))
					}
				}
			}
			if missing > 5 {
				failures = append(failures, fmt.Sprintf("lost writes: %d acknowledged creates in all are not on %s", missing, n.id))
			}
		}
	}
	return failures
}

// converged requires identical listings of coll (with headers' project)
// on every node once it applied maxRev.
func converged(c *cluster, headers map[string]string, coll string, maxRev uint64) []string {
	var failures []string
	var ref []byte
	var refNode string
	for _, n := range c.nodes {
		_, raw, err := listAll(c, n, headers, coll, maxRev)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("convergence: list %s of project %s on %s: %v", coll, headers["X-Project-Id"], n.id, err))
		case ref == nil:
			ref, refNode = raw, n.id
		case string(raw) != string(ref):
			failures = append(failures, fmt.Sprintf("convergence: %s of project %s on %s differs from %s:\n%s\n%s", coll, headers["X-Project-Id"], n.id, refNode, raw, ref))
		}
	}
	return failures
}

type listedDoc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

// listAll pages through coll on n with headers (local reads once n applied
// minRev) and returns the documents and their canonical bytes.
func listAll(c *cluster, n *node, headers map[string]string, coll string, minRev uint64) ([]listedDoc, []byte, error) {
	var all []listedDoc
	token := ""
	h := maps.Clone(headers)
	h["X-Min-Revision"] = strconv.FormatUint(minRev, 10)
	for page := 0; page < 1000; page++ {
		q := "/api/db?list=true&consistency=local&limit=200&collection=" + url.QueryEscape(coll)
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		r, err := c.do(n, 30*time.Second, http.MethodGet, q, h, nil)
		if err != nil {
			return nil, nil, err
		}
		if r.Status != http.StatusOK {
			return nil, nil, fmt.Errorf("%s", r)
		}
		var out struct {
			Documents     []listedDoc `json:"documents"`
			NextPageToken string      `json:"nextPageToken"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			return nil, nil, err
		}
		all = append(all, out.Documents...)
		if out.NextPageToken == "" {
			raw, err := json.Marshal(all)
			return all, raw, err
		}
		token = out.NextPageToken
	}
	return nil, nil, fmt.Errorf("more than 1000 pages")
}

// ---- reports ----

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._=-]+`)

// saveReport writes the history, porcupine's visualisation, the streams,
// the run's events and every node's log under the reports directory
// (EDGEBASE_ROBUSTNESS_REPORTS, default robustness/reports in the module).
func saveReport(t *testing.T, r *run, res *result, info porcupine.LinearizationInfo, streams []Stream) string {
	base := os.Getenv("EDGEBASE_ROBUSTNESS_REPORTS")
	if base == "" {
		base = filepath.Join(bins.root, "robustness", "reports")
	}
	dir := filepath.Join(base, unsafeName.ReplaceAllString(t.Name(), "_")+"-"+time.Now().UTC().Format("20060102T150405"))
	if _, err := WriteReport(dir, res.recs, info); err != nil {
		t.Logf("report: %v", err)
	}
	write := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Logf("report %s: %v", name, err)
		}
	}
	r.mu.Lock()
	write("run.json", map[string]any{"test": t.Name(), "seed": res.seed, "fault": res.name, "events": r.events, "failures": res.failures,
		"replay": fmt.Sprintf("EDGEBASE_ROBUSTNESS_SEED=%d go test ./robustness -run '%s'", res.seed, t.Name())})
	r.mu.Unlock()
	if streams != nil {
		write("streams.json", streams)
	}
	for _, n := range r.c.nodes {
		b, err := os.ReadFile(n.LogPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, n.id+".log"), b, 0o644)
		}
		if err != nil {
			t.Logf("report log of %s: %v", n.id, err)
		}
	}
	t.Logf("report saved in %s", dir)
	return dir
}
