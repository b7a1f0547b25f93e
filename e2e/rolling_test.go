package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// writeEvery is each load writer's pace: a steady rate, not a flood, so
	// that a refused window measures the cluster and not a saturated host.
	writeEvery = 20 * time.Millisecond
	// writeTimeout bounds one write attempt, client side. A write that has
	// no answer by then counts as failed (outcome unknown).
	writeTimeout = 2 * time.Second
	// refusedLimit is the most a restart may cost the writers whose node
	// stays up: from their first failed write to their last.
	refusedLimit = 5 * time.Second
	// rollPrefix is the collection every load document lives in.
	rollPrefix = "roll"
)

// outcome is what one write attempt got.
type outcome int

const (
	acked      outcome = iota // 201 with a document and its revision
	refused                   // an HTTP error status
	dialFailed                // no connection: certainly not sent
	transport                 // the connection failed after it was made
	timedOut                  // no answer within writeTimeout
)

func (o outcome) String() string {
	return [...]string{"acked", "refused", "dial-failed", "transport-error", "timeout"}[o]
}

// attempt is one write the load made.
type attempt struct {
	writer     string
	node       string // the node it was sent to
	coll       string
	data       map[string]any
	start, end time.Time
	outcome    outcome
	status     int    // refused: the HTTP status
	code       string // refused: the error code
	revision   uint64 // acked: the document's revision
	bad        bool   // a success status that does not acknowledge this write
	err        string
}

// failed is true for every outcome but an acknowledgement.
func (a *attempt) failed() bool { return a.outcome != acked }

// loadWriter writes unique documents through one node at a steady pace.
type loadWriter struct {
	name string
	node string
	c    *client // its own connection pool
}

// load is the write load: every attempt of every writer, in order per writer.
type load struct {
	token   string
	writers []*loadWriter
	mu      sync.Mutex
	log     []*attempt
}

func (l *load) record(a *attempt) {
	l.mu.Lock()
	l.log = append(l.log, a)
	l.mu.Unlock()
}

// attempts returns a copy of the log so far.
func (l *load) attempts() []*attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}

// run writes until ctx ends.
func (l *load) run(ctx context.Context, w *loadWriter) {
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	pad := strings.Repeat("x", 64)
	for seq := 0; ; seq++ {
		coll := fmt.Sprintf("%s/%s-%06d", rollPrefix, w.name, seq)
		data := map[string]any{"writer": w.name, "seq": seq, "via": w.node, "pad": pad}
		a := &attempt{writer: w.name, node: w.node, coll: coll, data: data, start: time.Now()}
		r, err := w.c.doJSONTimeout(writeTimeout, http.MethodPost, "/api/db", bearer(l.token),
			map[string]any{"collection": coll, "data": data})
		a.end = time.Now()
		classify(a, r, err)
		l.record(a)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// classify fills in an attempt's outcome from what the call returned.
func classify(a *attempt, r *response, err error) {
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		a.outcome, a.err = timedOut, err.Error()
	case errors.As(err, &op) && op.Op == "dial":
		a.outcome, a.err = dialFailed, err.Error()
	case err != nil:
		a.outcome, a.err = transport, err.Error()
	case r.status == http.StatusCreated || r.status == http.StatusOK:
		var d document
		if err := r.decode(&d); err != nil || r.status != http.StatusCreated || d.Collection != a.coll || !sameJSON(d.Data, a.data) || d.Revision == 0 {
			// A new document must be created (201), as sent: anything
			// else is a bug of its own, which the test reports.
			a.outcome, a.status, a.bad, a.err = refused, r.status, true, fmt.Sprintf("bad acknowledgement %s (%v)", r, err)
			return
		}
		a.outcome, a.revision = acked, d.Revision
	default:
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &e)
		a.outcome, a.status, a.code, a.err = refused, r.status, e.Error.Code, r.String()
	}
}

// restartRecord is one rolling step: when it began (stop issued), when the
// container was down, started, ready and caught up.
type restartRecord struct {
	svc                        string
	wasLeader                  bool
	stopIssued, stopped        time.Time
	exitCode                   int
	shutdown                   time.Duration // from "shutting down" in its log to its exit
	started, ready, caughtUp   time.Time
	leaderAfter                string
	counted, countedFailed     int
	pinnedAcked, pinnedFailed  int
	maxAckLatency              time.Duration
	failuresByOutcome          map[string]int
	pinnedFirstFail, pinnedEnd time.Time
}

// TestComposeRollingRestart restarts the three voters of docker-compose.yml
// one at a time (SIGTERM, then start again, each caught up before the next;
// the leader last, checked to be the leader right before) under a steady
// write load through every node. The writers whose node stays up may see
// writes refused for at most refusedLimit per restart; afterwards every
// acknowledged write is on every node with the acknowledged content and
// revision, every write with an unknown outcome is either there intact or
// absent, every write refused before it was sent is absent, and the cluster
// is whole again (3 voters, 1 non-voter, one leader, applied indexes equal).
//
// It skips like TestComposeCluster without Docker (EDGEBASE_REQUIRE_DOCKER=1
// makes that a failure) and prints the containers' logs when it fails
// (always with EDGEBASE_E2E_LOGS=1).
func TestComposeRollingRestart(t *testing.T) {
	testStart := time.Now()
	cl := startComposeCluster(t)
	leader := cl.awaitFormed(t)
	followers := without(voters, leader)
	t.Logf("leader %s, followers %v", leader, followers)
	proj := cl.newProject(t, leader, "e1")
	h := &harness{t: t, c: cl.c, nodes: cl.nodes, adminToken: cl.adminToken, token: proj.token, written: map[string]map[string]any{}}

	// The load: one writer pinned to each voter, two on the edge node (which
	// is never restarted). Each has its own connections.
	ld := &load{token: proj.token}
	for _, n := range []string{"n1", "n2", "n3", "e1", "e1"} {
		name := fmt.Sprintf("w%d-%s", len(ld.writers)+1, n)
		ld.writers = append(ld.writers, &loadWriter{name: name, node: n,
			c: &client{name: n, base: cl.nodes[n].base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}})
	}
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range ld.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ld.run(ctx, w)
		}()
	}
	halted := false
	halt := func() {
		if !halted {
			halted = true
			stopLoad()
			wg.Wait()
			for _, w := range ld.writers {
				w.c.http.CloseIdleConnections()
			}
		}
	}
	t.Cleanup(halt)

	// A steady state first: every writer acknowledged, nothing failed.
	checkFor(t, 30*time.Second, 100*time.Millisecond, "every writer acknowledged a few writes", func() error {
		n := map[string]int{}
		for _, a := range ld.attempts() {
			if a.outcome == acked {
				n[a.writer]++
			}
		}
		for _, w := range ld.writers {
			if n[w.name] < 25 {
				return fmt.Errorf("acknowledged writes per writer: %v", n)
			}
		}
		return nil
	})
	for _, a := range ld.attempts() {
		if a.failed() {
			t.Fatalf("before any restart, %s's write %s through %s failed: %s %s", a.writer, a.coll, a.node, a.outcome, a.err)
		}
	}

	// Followers first, the leader last.
	order := append(slices.Clone(followers), leader)
	var steps []*restartRecord
	for i, svc := range order {
		steps = append(steps, rollOne(h, ld, svc, i == len(order)-1))
	}
	// A moment of steady load after the last step, then stop it.
	last := steps[len(steps)-1].caughtUp
	checkFor(t, 30*time.Second, 100*time.Millisecond, "every writer acknowledged a write after the last restart", func() error {
		seen := map[string]bool{}
		for _, a := range ld.attempts() {
			if a.outcome == acked && a.start.After(last) {
				seen[a.writer] = true
			}
		}
		if len(seen) != len(ld.writers) {
			return fmt.Errorf("writers with an acknowledged write since: %v", slices.Sorted(maps.Keys(seen)))
		}
		return nil
	})
	halt()
	loadEnd := time.Now()
	log := ld.attempts()
	for _, a := range log {
		if a.bad {
			t.Errorf("%s through %s: %s", a.coll, a.node, a.err)
		}
	}

	// Refused windows, per restart: every attempt is charged to the step in
	// progress when it started (from one stop to the next, the last one to
	// the end of the load); those of writers pinned to the restarted node
	// are recorded but not counted.
	measureWindows(t, log, steps, loadEnd)

	// Nothing acknowledged is lost, on any node; nothing is corrupted.
	verifyLoad(h, log, steps)

	// The cluster is whole again: 3 voters and e1 as non-voter, one leader
	// every node agrees on, applied indexes converged.
	final := h.agreeOnLeader(services, "")
	converge(h, final)
	t.Logf("rolling restart test done in %v", time.Since(testStart).Round(time.Millisecond))
}

// rollOne stops svc gracefully (SIGTERM, the node hands leadership over),
// requires that it exited cleanly, waits for the load to make progress
// without it, starts it again and waits until it is ready and caught up.
// With mustBeLeader it first requires that svc is the cluster's leader,
// without it that svc is not.
func rollOne(h *harness, ld *load, svc string, mustBeLeader bool) *restartRecord {
	t := h.t
	t.Helper()
	rec := &restartRecord{svc: svc}
	// Every member up and in agreement before a voter goes down.
	before := h.agreeOnLeader(services, "")
	rec.wasLeader = before == svc
	if mustBeLeader && !rec.wasLeader {
		// On a loaded machine an election during an earlier step may have
		// moved the leadership to a node already restarted: hand it back, so
		// that the leader is still the node restarted last.
		t.Logf("the leadership moved to %s during the earlier steps: transferring it to %s", before, svc)
		r, err := h.nodes[before].doJSON(http.MethodPost, "/admin/cluster/leader", bearer(h.adminToken), map[string]string{"id": svc})
		expect(t, "POST /admin/cluster/leader", r, err, http.StatusOK)
		before = h.agreeOnLeader(services, svc)
		rec.wasLeader = before == svc
	}
	if mustBeLeader && !rec.wasLeader {
		t.Fatalf("restarting %s as the leader, but the leader is %s", svc, before)
	}
	if !mustBeLeader && rec.wasLeader {
		t.Fatalf("restarting %s as a follower, but it is the leader", svc)
	}

	rec.stopIssued = time.Now()
	if out, err := h.c.run(time.Minute, "stop", "-t", "10", svc); err != nil {
		t.Fatalf("docker-compose stop %s: %v\n%s", svc, err, out)
	}
	rec.stopped = time.Now()
	rec.exitCode, rec.shutdown = h.exitOf(svc)
	if rec.exitCode != 0 {
		t.Errorf("%s exited with status %d on SIGTERM, want 0 (a clean shutdown within the grace period)", svc, rec.exitCode)
	}
	// Keep it down until the others have acknowledged a fair number of
	// writes, so that it has entries to catch up on when it comes back.
	checkFor(t, 30*time.Second, 20*time.Millisecond, "writes acknowledged by the others while "+svc+" is down", func() error {
		n := 0
		for _, a := range ld.attempts() {
			if a.outcome == acked && a.node != svc && a.start.After(rec.stopped) {
				n++
			}
		}
		if n < 50 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	if out, err := h.c.run(time.Minute, "start", svc); err != nil {
		t.Fatalf("docker-compose start %s: %v\n%s", svc, err, out)
	}
	rec.started = time.Now()
	checkFor(t, 60*time.Second, 100*time.Millisecond, "/readyz 200 on the restarted "+svc, func() error {
		return allReady(h.nodes, []string{svc})
	})
	rec.ready = time.Now()

	// Caught up: the restarted node has applied at least what the leader
	// had applied when it became ready, and every member answers.
	var target uint64
	checkFor(t, 30*time.Second, 100*time.Millisecond, "the leader's applied index", func() error {
		cs, err := h.nodes["e1"].cluster(h.adminToken)
		if err != nil {
			return err
		}
		for _, n := range cs.Nodes {
			if n.ID == cs.Leader && n.AppliedIndex > 0 {
				target = n.AppliedIndex
				return nil
			}
		}
		return fmt.Errorf("no applied index for the leader %q in %+v", cs.Leader, cs.Nodes)
	})
	checkFor(t, 30*time.Second, 100*time.Millisecond, svc+" caught up", func() error {
		cs, err := h.nodes["e1"].cluster(h.adminToken)
		if err != nil {
			return err
		}
		if err := checkMembers(cs, services); err != nil {
			return err
		}
		for _, n := range cs.Nodes {
			if n.State == "unreachable" {
				return fmt.Errorf("%s is unreachable", n.ID)
			}
			if n.ID == svc && n.AppliedIndex < target {
				return fmt.Errorf("%s applied %d, the leader had %d", svc, n.AppliedIndex, target)
			}
		}
		rec.leaderAfter = cs.Leader
		return nil
	})
	rec.caughtUp = time.Now()
	t.Logf("restart %s (leader: %v): stop took %v (the node exited %v after it logged \"shutting down\"), start %v, ready %v after start, caught up %v later; leader now %s",
		svc, rec.wasLeader, rec.stopped.Sub(rec.stopIssued).Round(time.Millisecond), rec.shutdown.Round(time.Millisecond), rec.started.Sub(rec.stopped).Round(time.Millisecond),
		rec.ready.Sub(rec.started).Round(time.Millisecond), rec.caughtUp.Sub(rec.ready).Round(time.Millisecond), rec.leaderAfter)
	if rec.wasLeader && rec.leaderAfter == svc {
		// Possible (it may win an election again), but worth seeing.
		t.Logf("%s is the leader again after its restart", svc)
	}
	return rec
}

// measureWindows charges every attempt to the restart in progress when it
// started (the first restart also takes the steady load before it) and
// requires each restart's refused window, over the writers whose
// node stayed up, to be at most refusedLimit.
func measureWindows(t *testing.T, log []*attempt, steps []*restartRecord, loadEnd time.Time) {
	t.Helper()
	for i, st := range steps {
		end := loadEnd
		if i+1 < len(steps) {
			end = steps[i+1].stopIssued
		}
		begin := st.stopIssued
		if i == 0 {
			begin = time.Time{} // and the steady load before it
		}
		inStep := func(a *attempt) bool { return !a.start.Before(begin) && a.start.Before(end) }
		st.failuresByOutcome = map[string]int{}
		var first, lastFail time.Time
		samples := map[string]string{} // the pinned writer's failures: kind → first
		for _, a := range log {
			if !inStep(a) {
				continue
			}
			if a.node == st.svc {
				if a.failed() {
					if _, ok := samples[failureKind(a)]; !ok {
						samples[failureKind(a)] = fmt.Sprintf("%s at +%v", a.err, offset(st.stopIssued, a.start))
					}
					st.pinnedFailed++
					if st.pinnedFirstFail.IsZero() {
						st.pinnedFirstFail = a.start
					}
					st.pinnedEnd = a.end
				} else {
					st.pinnedAcked++
				}
				continue
			}
			st.counted++
			if !a.failed() {
				st.maxAckLatency = max(st.maxAckLatency, a.end.Sub(a.start))
				continue
			}
			st.countedFailed++
			st.failuresByOutcome[failureKind(a)]++
			if first.IsZero() || a.start.Before(first) {
				first = a.start
			}
			if a.end.After(lastFail) {
				lastFail = a.end
			}
		}
		window := time.Duration(0)
		if !first.IsZero() {
			window = lastFail.Sub(first)
		}
		pinnedDown := time.Duration(0)
		if !st.pinnedFirstFail.IsZero() {
			pinnedDown = st.pinnedEnd.Sub(st.pinnedFirstFail)
		}
		t.Logf("restart %d of %s (leader: %v): refused window %v for the writers on other nodes "+
			"(%d writes, %d acknowledged, %d failed %v, first failure %v after the stop was issued; slowest acknowledged write %v); "+
			"the writer on %s: %d acknowledged, %d failed over %v",
			i+1, st.svc, st.wasLeader, window.Round(time.Millisecond),
			st.counted, st.counted-st.countedFailed, st.countedFailed, st.failuresByOutcome, offset(st.stopIssued, first),
			st.maxAckLatency.Round(time.Millisecond), st.svc, st.pinnedAcked, st.pinnedFailed, pinnedDown.Round(time.Millisecond))
		for _, k := range slices.Sorted(maps.Keys(samples)) {
			t.Logf("  the writer on %s, first %s: %s", st.svc, k, samples[k])
		}
		shown := 0
		for _, a := range log {
			if a.failed() && a.node != st.svc && inStep(a) {
				if shown++; shown <= 10 || window > refusedLimit {
					t.Logf("  %s via %s at +%v (took %v): %s", a.writer, a.node, offset(st.stopIssued, a.start),
						a.end.Sub(a.start).Round(time.Millisecond), a.err)
				}
			}
		}
		if window > refusedLimit {
			t.Errorf("restart of %s: writes through the nodes that stayed up failed for %v (from %v to %v after the stop was issued), more than %v",
				st.svc, window.Round(time.Millisecond), offset(st.stopIssued, first), offset(st.stopIssued, lastFail), refusedLimit)
		}
		if st.counted-st.countedFailed == 0 {
			t.Errorf("restart of %s: no write through the nodes that stayed up was acknowledged", st.svc)
		}
	}
}

func failureKind(a *attempt) string {
	if a.outcome == refused {
		return fmt.Sprintf("%d %s", a.status, a.code)
	}
	return a.outcome.String()
}

func offset(from, at time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return at.Sub(from).Round(time.Millisecond)
}

// verifyLoad reads the load's documents back from every node with strong
// listings and checks each attempt against them: acknowledged writes are
// there with the acknowledged content and revision; writes with an unknown
// outcome are there intact or absent; writes refused before they were sent
// (no connection) or refused as never proposed (no_leader) are absent; and
// nothing is there that no writer wrote. The acknowledged writes that were in
// flight while a node was stopping are also read one by one on every node.
func verifyLoad(h *harness, log []*attempt, steps []*restartRecord) {
	t := h.t
	t.Helper()
	byColl := map[string]*attempt{}
	counts := map[string]int{}
	for _, a := range log {
		byColl[a.coll] = a
		counts[failureKind(a)]++
	}
	t.Logf("load: %d write attempts: %v", len(log), counts)
	for _, svc := range services {
		docs := listAll(h, svc)
		present, unknownPresent, unknownAbsent, problems := 0, 0, 0, 0
		problem := func(format string, args ...any) {
			t.Helper()
			if problems++; problems <= 20 {
				t.Errorf("on %s: "+format, append([]any{svc}, args...)...)
			}
		}
		for _, a := range log {
			d, ok := docs[a.coll]
			switch {
			case a.outcome == acked && !ok:
				problem("%s acknowledged by %s at revision %d is missing", a.coll, a.node, a.revision)
			case a.outcome == acked && (d.Revision != a.revision || !sameJSON(d.Data, a.data)):
				problem("%s is %v at revision %d; acknowledged %v at revision %d", a.coll, d.Data, d.Revision, a.data, a.revision)
			case !ok && a.outcome != acked:
				unknownAbsent++
			case ok && (a.outcome == dialFailed || (a.outcome == refused && a.code == "no_leader")):
				problem("%s is there (revision %d) although the write was refused before it was proposed: %s", a.coll, d.Revision, a.err)
			case ok && !sameJSON(d.Data, a.data):
				problem("%s (outcome %s) is %v, the write sent %v", a.coll, failureKind(a), d.Data, a.data)
			case ok && a.outcome != acked:
				unknownPresent++
			}
			if ok {
				present++
			}
		}
		for coll := range docs {
			if byColl[coll] == nil {
				problem("%s is there but no writer wrote it", coll)
			}
		}
		if problems > 20 {
			t.Errorf("on %s: %d problems in all", svc, problems)
		}
		t.Logf("on %s: %d load documents; of the writes not acknowledged, %d are there and %d are not", svc, present, unknownPresent, unknownAbsent)
	}

	// One by one: the acknowledged writes in flight around each stop.
	var risky []*attempt
	for _, a := range log {
		for _, st := range steps {
			if a.outcome == acked && a.end.After(st.stopIssued.Add(-time.Second)) && a.start.Before(st.stopped) {
				risky = append(risky, a)
				break
			}
		}
	}
	for _, svc := range services {
		for _, a := range risky {
			readDoc(t, h.nodes[svc], h.token, a.coll, a.data)
		}
	}
	t.Logf("read %d acknowledged writes made while a node was stopping one by one on every node", len(risky))
}

// listAll lists every load document on node svc, strongly, page by page.
func listAll(h *harness, svc string) map[string]document {
	t := h.t
	t.Helper()
	docs := map[string]document{}
	token := ""
	for {
		path := "/api/db?list=true&limit=1000&collection=" + url.QueryEscape(rollPrefix)
		if token != "" {
			path += "&pageToken=" + url.QueryEscape(token)
		}
		r, err := h.nodes[svc].doJSONTimeout(15*time.Second, http.MethodGet, path, bearer(h.token), nil)
		expect(t, "list "+rollPrefix+" on "+svc, r, err, http.StatusOK)
		var page struct {
			Documents     []document `json:"documents"`
			NextPageToken string     `json:"nextPageToken"`
		}
		if err := r.decode(&page); err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Documents {
			if _, dup := docs[d.Collection]; dup {
				t.Fatalf("list on %s: %s twice", svc, d.Collection)
			}
			docs[d.Collection] = d
		}
		if page.NextPageToken == "" {
			return docs
		}
		token = page.NextPageToken
	}
}

// converge waits until the status on node leader shows 3 voters, 1
// non-voter, one of them in state leader, and every member at the same
// applied index (the load has stopped, so they must meet).
func converge(h *harness, leader string) {
	t := h.t
	t.Helper()
	checkFor(t, 30*time.Second, 200*time.Millisecond, "applied indexes converge", func() error {
		cs, err := h.nodes[leader].cluster(h.adminToken)
		if err != nil {
			return err
		}
		if err := checkMembers(cs, services); err != nil {
			return err
		}
		idx := map[string]uint64{}
		states := map[string]string{}
		for _, n := range cs.Nodes {
			idx[n.ID], states[n.ID] = n.AppliedIndex, n.State
		}
		want := idx[cs.Leader]
		for _, s := range services {
			if idx[s] != want {
				return fmt.Errorf("applied indexes %v", idx)
			}
		}
		nVoters, nNonvoters := 0, 0
		for _, n := range cs.Nodes {
			if n.Voter {
				nVoters++
			} else {
				nNonvoters++
			}
		}
		leaders := 0
		for _, st := range states {
			if st == "leader" {
				leaders++
			}
		}
		if nVoters != 3 || nNonvoters != 1 || leaders != 1 || states[cs.Leader] != "leader" {
			return fmt.Errorf("%d voters, %d non-voters, %d leaders (leader %q); states %v", nVoters, nNonvoters, leaders, cs.Leader, states)
		}
		t.Logf("converged: leader %s, states %v, applied index %d on every node", cs.Leader, states, want)
		return nil
	})
}

// exitOf reads how a stopped service's container ended: the process's exit
// status, and how long it ran after the node logged "shutting down" (the
// SIGTERM arriving) until it exited (0 when either is unknown).
func (h *harness) exitOf(svc string) (int, time.Duration) {
	t := h.t
	t.Helper()
	id := h.containerID(svc)
	out, err := run(time.Minute, "", os.Environ(), "docker", "inspect", "-f", "{{.State.ExitCode}} {{.State.FinishedAt}}", id)
	if err != nil {
		t.Fatalf("docker inspect %s: %v\n%s", id, err, out)
	}
	var code int
	var finished string
	if _, err := fmt.Sscan(out, &code, &finished); err != nil {
		t.Fatalf("docker inspect %s: %q: %v", id, out, err)
	}
	end, err := time.Parse(time.RFC3339Nano, finished)
	if err != nil {
		return code, 0
	}
	logs, err := h.c.run(time.Minute, "logs", "--no-color", "--timestamps", svc)
	if err != nil {
		t.Logf("docker-compose logs %s: %v", svc, err)
		return code, 0
	}
	var began time.Time
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"shutting down"`) {
			continue
		}
		// "n1_1  | 2006-01-02T15:04:05.999999999Z {...}"
		_, rest, _ := strings.Cut(line, "| ")
		stamp, _, _ := strings.Cut(rest, " ")
		if ts, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			began = ts
		}
	}
	if began.IsZero() || end.Before(began) {
		return code, 0
	}
	return code, end.Sub(began)
}
