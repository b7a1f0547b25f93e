package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edgebase/edgebase/internal/hookcheck"
	"github.com/edgebase/edgebase/realtime/client"
)

// triggerFaults move the leader, which runs the triggers.
var triggerFaults = []string{"kill-leader", "pause-leader", "partition-leader"}

const (
	hookCollection = "hooks"
	hookPaths      = 12
	// maxRedeliveredPerChange bounds the re-deliveries one leadership change
	// may cause: what the old leader had delivered past its last committed
	// checkpoint (100ms of deliveries) and had in flight (one per path
	// here). A few hundred writes a second at most leave it far above what
	// a correct runner re-sends, and far below re-sending the run.
	maxRedeliveredPerChange = 100
	// hookSlack widens the window around an observed leadership change
	// (the watcher polls every 50ms; an election under load takes longer
	// to show).
	hookSlack = time.Second
	// hookWindow bounds how long after a leadership change its
	// re-deliveries may come: the new leader re-sends at once; a paused
	// leader finishes what it had in flight when it resumes, after the
	// fault's hold (6 s in the long profile).
	hookWindow = 15 * time.Second
)

// TestRobustnessTriggers writes documents of a collection a webhook
// trigger watches, through random nodes, while the leader, which runs the
// triggers, is killed, paused or cut off, and checks with a real receiver
// (internal/hookcheck) that every committed change (acknowledged, or of
// unknown outcome and committed) was delivered at least once, signed, with
// first deliveries in revision order per path and duplicates only around a
// leadership change.
func TestRobustnessTriggers(t *testing.T) {
	p := currentProfile(t)
	for _, name := range triggerFaults {
		i := slices.IndexFunc(faultCases, func(f faultCase) bool { return f.name == name })
		fc := faultCases[i]
		for _, seed := range p.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", fc.name, seed), func(t *testing.T) { runTriggerFault(t, fc, seed, p) })
		}
	}
}

func runTriggerFault(t *testing.T, fc faultCase, seed uint64, p profile) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if fc.needsNet && os.Geteuid() != 0 {
		if requireFaults() {
			t.Fatalf("%s needs root (iptables, a user per node) and EDGEBASE_REQUIRE_FAULTS=1", fc.name)
		}
		t.Skipf("%s needs root for iptables and a user per node", fc.name)
	}
	recv := hookcheck.New(t, nil) // closed after the nodes: cleanups run last first
	c := startCluster(t, ctx, clusterOpts{extra: []string{
		"--allow-private-webhooks", "127.0.0.1",
		"--trigger-min-backoff", "50ms",
		"--trigger-max-backoff", "200ms",
		"--trigger-retry-for", "2m", // nothing may go dead here: the receiver heals within the run
	}})
	if fc.needsNet && c.net == nil {
		if requireFaults() {
			t.Fatalf("%s: network partitions are not available here", fc.name)
		}
		t.Skipf("%s: network partitions are not available here", fc.name)
	}
	r := &run{t: t, c: c, p: p, seed: seed, rng: mrand.New(mrand.NewPCG(seed, 0x7a16)), start: time.Now()}
	leader := c.leader(20 * time.Second)
	resp, err := c.do(leader, 15*time.Second, http.MethodPut, "/api/triggers/hooks", c.pr.Headers(), map[string]any{
		"match": hookCollection + "/{id}", "action": map[string]any{"webhook": map[string]any{"url": recv.URL() + "/hooks"}}})
	var def struct {
		Action struct {
			Webhook struct {
				Secret string `json:"secret"`
			} `json:"webhook"`
		} `json:"action"`
	}
	if err != nil || resp.Status != http.StatusCreated || json.Unmarshal(resp.Body, &def) != nil || def.Action.Webhook.Secret == "" {
		t.Fatalf("PUT trigger: %v %v", resp, err)
	}
	defRev, err := strconv.ParseUint(resp.Header.Get("X-Revision"), 10, 64)
	if err != nil {
		t.Fatalf("PUT trigger: X-Revision %q", resp.Header.Get("X-Revision"))
	}
	recv.SetSecret("hooks", def.Action.Webhook.Secret)

	stopWatch := watchTerms(ctx, r)

	// Writers through random running nodes: sets with data unique in the
	// run (so that a committed change names its write), one in ten a
	// delete.
	var mu sync.Mutex
	var writes []HookWrite
	writeCtx, stopWrites := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		rng := mrand.New(mrand.NewPCG(seed, uint64(100+w)))
		wg.Go(func() {
			for k := 0; writeCtx.Err() == nil; k++ {
				var live []*node
				for _, nd := range c.nodes {
					if nd.Running() && !nd.Paused() {
						live = append(live, nd)
					}
				}
				if len(live) == 0 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				nd := live[rng.IntN(len(live))]
				path := fmt.Sprintf("%s/p%02d", hookCollection, rng.IntN(hookPaths))
				var data json.RawMessage
				if rng.IntN(10) > 0 {
					data = json.RawMessage(fmt.Sprintf(`{"w":%d,"k":%d}`, w, k))
				}
				hwr := hookWrite(c, nd, path, data)
				mu.Lock()
				writes = append(writes, hwr)
				mu.Unlock()
				select {
				case <-writeCtx.Done():
				case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
				}
			}
		})
	}
	time.Sleep(p.warm) // writes before the fault: a duration of the run
	deliveredAtFault := len(recv.Deliveries())
	// Two paths' receiver fails across the fault: their events park (a
	// durable queue) under the old leader and are retried by the new one,
	// in order, once the receiver heals.
	failing := []string{hookCollection + "/p00", hookCollection + "/p01"}
	for _, path := range failing {
		recv.Script(path, hookcheck.Rule{Status: http.StatusServiceUnavailable})
	}
	fc.run(r)
	r.event("fault healed; waiting for every node")
	for _, n := range c.nodes {
		c.mustReady(n, 60*time.Second)
	}
	for _, path := range failing {
		recv.Clear(path)
	}
	r.event("the receiver accepts %v again", failing)
	time.Sleep(p.after) // writes on the whole cluster again
	stopWrites()
	wg.Wait()

	// A fence: once it is committed, every earlier write has its fate
	// settled (committed, or never to be), so the change log up to it is
	// the whole truth.
	leader = c.leader(20 * time.Second)
	fence := hookWrite(c, leader, hookCollection+"/fence", json.RawMessage(`{"fence":true}`))
	if fence.Outcome != OutOK {
		t.Fatalf("the fence write: %+v", fence)
	}
	mu.Lock()
	writes = append(writes, fence)
	all := slices.Clone(writes)
	mu.Unlock()
	committed, err := committedHooks(ctx, c, leader, defRev, fence.Rev)
	if err != nil {
		t.Fatal(err)
	}
	expected, unknownCommitted, errs := HookExpected("hooks", all, committed)
	for _, err := range errs {
		t.Error(err)
	}
	counts := map[Outcome]int{}
	for _, w := range all {
		counts[w.Outcome]++
	}

	c.checkFor(90*time.Second, "every committed change delivered", func() error {
		rep, _ := recv.Check(expected, hookcheck.Options{})
		if rep.Missing > 0 {
			return fmt.Errorf("%d of %d changes not delivered yet, e.g. %v", rep.Missing, rep.Expected, rep.MissingList[:min(3, len(rep.MissingList))])
		}
		return nil
	})
	var lcs []hookcheck.LeaderChange
	for _, at := range stopWatch() {
		lcs = append(lcs, hookcheck.LeaderChange{At: at})
	}
	rep, errs := recv.Check(expected, hookcheck.Options{Changes: lcs, Slack: hookSlack, Window: hookWindow, MaxPerChange: maxRedeliveredPerChange})
	r.event("%d writes (%d acknowledged, %d of unknown outcome, %d of them committed), %d changes, %d requests to the receiver (%d at the fault): %d delivered, %d duplicates %v per change, %d refused; %d term changes seen",
		len(all), counts[OutOK], counts[OutUnknown], unknownCommitted, len(expected), rep.Requests, deliveredAtFault,
		rep.Delivered, rep.Duplicates, rep.PerChange, rep.Refused, len(lcs))
	if len(lcs) == 0 {
		t.Errorf("the fault started no election: nothing was proven")
	}
	if deliveredAtFault == 0 {
		t.Errorf("nothing was delivered before the fault: the failover was not exercised")
	}
	if rep.Refused == 0 {
		t.Errorf("the receiver refused nothing during the fault: no event was parked across it")
	}
	if rej := recv.Rejections(); len(rej) > 0 {
		t.Errorf("the receiver rejected %d requests (signature or wire format), first %s", len(rej), rej[0])
	}
	for _, err := range errs {
		t.Error(err)
	}
	for _, err := range hookSelfTest(expected, recv.Deliveries(), lcs) {
		t.Error(err)
	}
	if t.Failed() {
		res := &result{name: "triggers-" + fc.name, seed: seed}
		dir := saveReport(t, r, res, porcupine.LinearizationInfo{}, nil)
		b, _ := json.MarshalIndent(map[string]any{"writes": all, "committed": committed, "deliveries": recv.Deliveries(), "changes": lcs}, "", "  ")
		if err := os.WriteFile(dir+"/triggers.json", b, 0o644); err != nil {
			t.Log(err)
		}
		t.Errorf("replay: EDGEBASE_ROBUSTNESS_SEED=%d go test ./robustness -run 'TestRobustnessTriggers/%s/'", seed, fc.name)
	}
}

// hookWrite sets data at path through n (nil data: deletes it), and
// classifies the answer.
func hookWrite(c *cluster, n *node, path string, data json.RawMessage) HookWrite {
	w := HookWrite{Path: path, Data: data, Node: n.id}
	var resp *response
	var err error
	if data != nil {
		resp, err = c.do(n, 4*time.Second, http.MethodPost, "/api/db", c.pr.Headers(), map[string]any{"collection": path, "data": data})
	} else {
		resp, err = c.do(n, 4*time.Second, http.MethodDelete, "/api/db?collection="+url.QueryEscape(path), c.pr.Headers(), nil)
	}
	w.Outcome = outcome(resp, err)
	switch {
	case err != nil:
		w.Err = err.Error()
	case w.Outcome == OutOK:
		rev, perr := strconv.ParseUint(resp.Header.Get("X-Revision"), 10, 64)
		if perr != nil || rev == 0 {
			// A 2xx without its revision: keep it out of the acknowledged.
			w.Outcome, w.Err = OutUnknown, fmt.Sprintf("X-Revision %q: %s", resp.Header.Get("X-Revision"), resp)
		}
		w.Rev = rev
	default:
		w.Err = resp.String()
	}
	return w
}

// watchTerms polls every voter's Raft term every 50ms, each voter on its
// own so that a paused or cut-off one delays no other; each rise of the
// highest term seen is a (possible) leadership change. stop ends the
// watch and returns when each was seen. Leadership can only move with a
// new term (the push and trigger runs use it to excuse duplicates).
func watchTerms(ctx context.Context, r *run) (stop func() []time.Time) {
	var mu sync.Mutex
	var changes []time.Time
	var maxTerm uint64
	watchCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, n := range r.c.voters() {
		wg.Go(func() {
			for watchCtx.Err() == nil {
				if term, err := raftTerm(watchCtx, r.c, n); err == nil {
					mu.Lock()
					if term > maxTerm {
						if maxTerm != 0 {
							changes = append(changes, time.Now())
							r.event("term %d -> %d (seen by %s)", maxTerm, term, n.id)
						}
						maxTerm = term
					}
					mu.Unlock()
				}
				select {
				case <-watchCtx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	return func() []time.Time {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(changes)
	}
}

// committedHooks reads every committed change of the hook collection after
// since, up to the fence revision, from a realtime stream resumed with
// since through n: the truth the deliveries are judged against.
func committedHooks(ctx context.Context, c *cluster, n *node, since, fence uint64) ([]HookChange, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, client.Config{URL: n.url(), Token: c.pr.Token, ProjectID: c.pr.ID, APIKey: c.pr.APIKey, EventBuffer: 1 << 16})
	if err != nil {
		return nil, fmt.Errorf("realtime dial %s: %w", n.id, err)
	}
	defer func() { _ = conn.CloseNow() }()
	sub, err := conn.Subscribe(ctx, hookCollection, true, client.Since(since))
	if err != nil {
		return nil, fmt.Errorf("subscribe on %s since %d: %w", n.id, since, err)
	}
	var out []HookChange
	for {
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("the stream since %d reached %d changes and not the fence at %d: %w", since, len(out), fence, ctx.Err())
		case ev, ok := <-sub.Events():
			if !ok {
				return out, fmt.Errorf("the stream since %d ended before the fence at %d", since, fence)
			}
			if ev.Kind == client.KindResumed {
				continue // the end of the replay: live changes follow
			}
			if ev.Kind != client.KindChange {
				return out, fmt.Errorf("the stream since %d: unexpected %s event at %d", since, ev.Kind, ev.Revision)
			}
			out = append(out, HookChange{Revision: ev.Revision, Path: ev.Collection, Delete: ev.Type == client.TypeDelete, Data: ev.Data})
			if ev.Revision >= fence {
				return out, nil
			}
		}
	}
}

// hookSelfTest proves the check able to fail on this very run: it breaks
// the recorded deliveries three ways (an event's copies dropped, two first
// deliveries of a path swapped, a copy added an hour later) and each must
// be caught.
func hookSelfTest(expected []hookcheck.Expected, ds []hookcheck.Delivery, changes []hookcheck.LeaderChange) []error {
	opts := hookcheck.Options{Changes: changes, Slack: hookSlack, Window: hookWindow, MaxPerChange: maxRedeliveredPerChange}
	caught := func(ds []hookcheck.Delivery, kind hookcheck.Kind) bool {
		_, errs := hookcheck.Check(expected, ds, opts)
		for _, err := range errs {
			var v *hookcheck.Violation
			if errors.As(err, &v) && v.Kind == kind {
				return true
			}
		}
		return false
	}
	var errs []error
	if len(expected) == 0 {
		return []error{fmt.Errorf("checker self-test: nothing expected")}
	}
	// Drop every copy of one event.
	victim := expected[len(expected)/2]
	var dropped []hookcheck.Delivery
	for _, d := range ds {
		if d.Payload.ID != victim.ID() {
			dropped = append(dropped, d)
		}
	}
	if !caught(dropped, hookcheck.Missing) {
		errs = append(errs, fmt.Errorf("checker self-test: %s dropped from the deliveries, and no missing event found", victim.ID()))
	}
	// Swap the arrival of the first accepted deliveries of two events of
	// one path.
	first := map[string]int{} // event id -> index of its first acceptance
	byPath := map[string][]int{}
	for i, d := range ds {
		if _, seen := first[d.Payload.ID]; !d.Accepted() || seen {
			continue
		}
		first[d.Payload.ID] = i
		byPath[d.Payload.Path] = append(byPath[d.Payload.Path], i)
	}
	swappedOK := false
	for _, idx := range byPath {
		if len(idx) < 2 {
			continue
		}
		sw := slices.Clone(ds)
		a, b := idx[0], idx[1]
		sw[a].Seq, sw[b].Seq = sw[b].Seq, sw[a].Seq
		swappedOK = caught(sw, hookcheck.Order)
		if !swappedOK {
			errs = append(errs, fmt.Errorf("checker self-test: the first deliveries of %s and %s swapped, and no order violation found", ds[a].Payload.ID, ds[b].Payload.ID))
		}
		break
	}
	if !swappedOK && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("checker self-test: no path with two accepted events to swap"))
	}
	// A copy of an accepted event an hour later, far from any change.
	for _, d := range ds {
		if !d.Accepted() {
			continue
		}
		dup := d
		dup.Seq, dup.Received, dup.At = len(ds)+1, d.Received.Add(time.Hour), d.At.Add(time.Hour)
		if !caught(append(slices.Clone(ds), dup), hookcheck.Duplicate) {
			errs = append(errs, fmt.Errorf("checker self-test: a copy of %s an hour later, and no duplicate found", d.Payload.ID))
		}
		break
	}
	return errs
}
