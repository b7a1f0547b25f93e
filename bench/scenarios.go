package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// scenario is one row kind of the results table. Later scenarios (realtime,
// push, comparisons) are new entries in the scenarios table.
type scenario struct {
	Name string
	What string // one line for the docs and --list
	// Clients is how many concurrent clients issue the operations.
	Clients func(o *options) int
	// DefaultOps is the number of measured operations per run (--ops overrides).
	DefaultOps int
	// Target says which nodes the operations go to, for the table.
	Target func(e *env) string
	// Prepare runs once per cluster before the warm-up (may be nil).
	Prepare func(ctx context.Context, e *env) error
	// Op performs operation i (0-based within the run) for client c.
	Op func(ctx context.Context, e *env, c, i int) error
	// ExpectShed: a 503 with Retry-After is an expected answer (the node
	// shedding load), counted as shed rather than as an error; the client
	// waits the Retry-After before its next operation.
	ExpectShed bool
	// Realtime, when set, makes this a realtime scenario (see realtime.go):
	// it has no Op; --subscribers WebSocket subscribers are connected once
	// (after Prepare), an operation is one REST write they all receive,
	// and the table's ops are deliveries.
	Realtime *rtSpec
	// Push scenarios (push.go): FCM marks a scenario that needs the FCM
	// stand-in; Ops fixes the operations per run (--ops does not apply, and
	// the default warm-up is one whole run); Run replaces the run loop; and
	// Summary adds the scenario's own figures to its result.
	FCM     bool
	Ops     func(o *options) int
	Run     func(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int)
	Summary func(e *env, s *scenario, r *result)
	// Timed: each run lasts --query-duration rather than a number of
	// operations (its Run ignores ops); the warm-up is one run.
	Timed bool
}

var scenarios = []scenario{
	{
		Name:       "W1",
		What:       "serial writes: 1 client creates documents one after another through the leader",
		Clients:    func(*options) int { return 1 },
		DefaultOps: 1000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Op: func(ctx context.Context, e *env, c, i int) error {
			_, err := e.write(ctx, e.c.leader)
			return err
		},
	},
	{
		Name:       "W2",
		What:       "concurrent writes: --clients clients create documents through the leader",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Op: func(ctx context.Context, e *env, c, i int) error {
			_, err := e.write(ctx, e.c.leader)
			return err
		},
	},
	{
		Name:       "HOT",
		What:       "one hot document: --clients clients write the same document (plain POST, the owner's token) through the leader; every write must succeed",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Op: func(ctx context.Context, e *env, c, i int) error {
			_, err := e.post(ctx, e.c.leader, "bench/hot")
			return err
		},
	},
	{
		Name:       "W3",
		What:       "forwarded writes: as W2, clients spread over the followers, which forward to the leader",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 6000,
		Target:     func(e *env) string { return e.followerNames() },
		Op: func(ctx context.Context, e *env, c, i int) error {
			_, err := e.write(ctx, e.follower(c))
			return err
		},
	},
	{
		Name:       "R1",
		What:       "local reads: --clients clients GET one of --docs documents with consistency=local on the followers",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 20000,
		Target:     func(e *env) string { return e.followerNames() },
		Prepare:    populate,
		Op: func(ctx context.Context, e *env, c, i int) error {
			return e.read(ctx, e.follower(c), e.readDoc(i), true, 0, false)
		},
	},
	{
		Name:       "R2",
		What:       "strong reads: as R1 with the default (linearizable) consistency: a read-index round trip to the leader",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 20000,
		Target:     func(e *env) string { return e.followerNames() },
		Prepare:    populate,
		Op: func(ctx context.Context, e *env, c, i int) error {
			return e.read(ctx, e.follower(c), e.readDoc(i), false, 0, false)
		},
	},
	{
		Name:       "R3",
		What:       "read-your-writes: write through the leader, then read it through a follower with X-Min-Revision (one op = both)",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 4000,
		Target: func(e *env) string {
			return "write " + e.c.leader.id + ", read " + e.followerNames()
		},
		Op: func(ctx context.Context, e *env, c, i int) error {
			w, err := e.write(ctx, e.c.leader)
			if err != nil {
				return err
			}
			return e.read(ctx, e.follower(c), w.coll, true, w.rev, true)
		},
	},
	{
		Name:       "S2",
		What:       "one slow subscriber: each run is W2 twice through the leader (order alternating by run), without and with a WebSocket subscriber on the leader that subscribes to the written prefix and never reads; the row is the half with it, the note compares the p99s",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Op: func(ctx context.Context, e *env, c, i int) error {
			_, err := e.write(ctx, e.c.leader)
			return err
		},
		Run:     runSlowSubscriber,
		Summary: summarizeSlow,
	},
	{
		Name:       "A1",
		What:       "login throughput: --clients clients log in (correct password) as one of --accounts accounts, round-robin over all nodes; a 503 + Retry-After (the node's hashing queue full) counts as shed and its client waits the Retry-After",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 300,
		Target:     func(e *env) string { return e.nodeNames() },
		Prepare:    registerAccounts,
		Op: func(ctx context.Context, e *env, c, i int) error {
			return e.login(ctx, e.node(c), e.account(i))
		},
		ExpectShed: true,
	},
	{
		Name:       "A2",
		What:       "login flood: as A1 with 4x --clients clients, far more than hashing slots; 503 + Retry-After counts as shed, not as an error",
		Clients:    func(o *options) int { return 4 * o.clients },
		DefaultOps: 512,
		Target:     func(e *env) string { return e.nodeNames() },
		Prepare:    registerAccounts,
		Op: func(ctx context.Context, e *env, c, i int) error {
			return e.login(ctx, e.node(c), e.account(i))
		},
		ExpectShed: true,
	},
	{
		Name:       "RT1",
		What:       "change-to-delivery latency: --subscribers subscribers of one path prefix on the leader; a writer creates --rate documents a second under it through the leader (ops = writes)",
		Clients:    func(o *options) int { return o.subscribers },
		DefaultOps: 150,
		Target:     func(e *env) string { return "subscribers on leader " + e.c.leader.id },
		Realtime:   &rtSpec{paced: true, cutsAreErrors: true},
	},
	{
		Name:       "RT1F",
		What:       "as RT1 with the subscribers on a follower (the writer still writes through the leader)",
		Clients:    func(o *options) int { return o.subscribers },
		DefaultOps: 150,
		Target: func(e *env) string {
			n := e.follower(0)
			if n == e.c.leader {
				return "subscribers on single node " + n.id
			}
			return "subscribers on follower " + n.id
		},
		Realtime: &rtSpec{onFollower: true, paced: true, cutsAreErrors: true},
	},
	{
		Name:       "RT2",
		What:       "deliveries per second: as RT1, but the writer writes back to back, as fast as one client can; cuts (4008) are counted, each cut subscriber resumes",
		Clients:    func(o *options) int { return o.subscribers },
		DefaultOps: 300,
		Target:     func(e *env) string { return "subscribers on leader " + e.c.leader.id },
		Realtime:   &rtSpec{},
	},
	{
		Name:       "P1",
		What:       "push fan-out: --devices devices (100 per user) registered up front; a run is one send-to-project, measured from its 202 until the FCM stand-in (--fcm-latency per message) has a message for every device (ops = messages)",
		Clients:    func(*options) int { return 1 },
		DefaultOps: 20000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Prepare:    preparePushAudience,
		Op:         fanOutOp,
		FCM:        true,
		Ops:        func(o *options) int { return o.devices },
		Run:        runFanOut,
		Summary:    summarizePush,
	},
	{
		Name:       "P2",
		What:       "scheduler lateness: --clients clients create --schedules schedules for a one-device user, due over the next 10 whole seconds; a sample is the message's arrival at the FCM stand-in minus its sendAt (ops = schedules)",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 200,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Prepare:    prepareSchedules,
		Op:         createSchedule,
		FCM:        true,
		Ops:        func(o *options) int { return o.schedules },
		Run:        runSchedules,
		Summary:    summarizePush,
	},
	{
		Name:       "JS",
		What:       "JavaScript SDK subscriber: one clients/js subscriber in a Node process (bench/js/subscriber.mjs) on the leader; a run ramps batched changes through 1k..40k/s (7 steps), 2 s a step, until it falls behind (ops = change events; ops/s = the SDK's event rate at the highest rate it kept up with); also the heap of a subscription holding --js-docs documents",
		Clients:    func(*options) int { return 1 },
		DefaultOps: len(jsRates),
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Prepare:    prepareJS,
		Ops:        func(*options) int { return len(jsRates) },
		Run:        runJS,
		Summary:    summarizeJS,
	},
	{
		Name:       "JSC",
		What:       "JavaScript SDK persistent cache: a subscription of --js-docs documents (~200 bytes of JSON each) on the leader, cached with the file adapter (bench/js/cachecost.mjs); a run fills a new cache, then each op is a fresh Node process timed from createClient to the cached snapshot (also: until resumed, bytes a document on disk, the memory adapter's heap and opens, and the server's snapshot without persistence)",
		Clients:    func(*options) int { return 1 },
		DefaultOps: 5,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Prepare:    prepareJSCache,
		Run:        runJSCache,
		Summary:    summarizeJSCache,
	},
	{
		Name:    "Q1",
		What:    "indexed query: --q1-docs orders {status (4 values), total, createdAt, owner} in orders, index [status, createdAt desc] declared (PUT /api/db/indexes) and ready; --clients clients POST /api/db/query status == one of the 4 (in turn), orderBy createdAt desc, limit 20, round-robin over all nodes, for --query-duration a run; each answer checked (20 documents of that status, newest first)",
		Clients: func(o *options) int { return o.clients },
		Target:  func(e *env) string { return e.nodeNames() },
		Prepare: prepareQ1,
		Run:     runQuery(qIndexedColl),
		Timed:   true,
	},
	{
		Name:    "Q2",
		What:    "unindexed query: as Q1 on --q2-docs orders in orders_unindexed, no declared index",
		Clients: func(o *options) int { return o.clients },
		Target:  func(e *env) string { return e.nodeNames() },
		Prepare: prepareQ2,
		Run:     runQuery(qUnindexedColl),
		Timed:   true,
	},
	{
		Name:       "Q3",
		What:       "live query: --q3-subscribers WebSocket subscribers on the leader subscribe to status == open, orderBy createdAt desc, limit 20 over 200 orders (100 open); a writer writes --q3-rate documents a second through the leader, 9 in 10 change an order in the window, 1 in 10 moves one in or out (ops = change events received; latency: event arrival minus the write's acknowledgement)",
		Clients:    func(o *options) int { return o.q3Subscribers },
		DefaultOps: 150,
		Target:     func(e *env) string { return "subscribers on leader " + e.c.leader.id },
		Prepare:    prepareQ3,
		Run:        runQ3,
		Summary:    summarizeQ3,
	},
	{
		Name:       "TRG",
		What:       "webhook triggers: each run declares a webhook trigger (PUT /api/triggers/{name}) on a collection of its own, pointing at a receiver on loopback in the bench that checks every delivery's signature, then three phases of --ops writes through the leader: --clients clients as fast as they go (the row: ops = first deliveries, ops/s = webhooks per second from the first to the last, latency = arrival minus the payload's commit time), the same paced at 2,000 writes/s (the targets' verdict), and a backlog written while the trigger is disabled, then delivered; a missing or refused event is an error",
		Clients:    func(o *options) int { return o.clients },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		Run:        runTriggers,
		Summary:    summarizeTriggers,
	},
}

func findScenario(name string) (*scenario, bool) {
	for i := range scenarios {
		if scenarios[i].Name == name {
			return &scenarios[i], true
		}
	}
	return nil, false
}

// env is what scenarios run against: one cluster, its project, the options.
type env struct {
	hc    *http.Client
	c     *cluster
	pr    project
	o     *options
	value []byte // the JSON string literal of the value, quotes included

	seq       atomic.Uint64 // documents written so far (names bench/w<n>)
	populated bool
	popMu     sync.Mutex

	accounts []benchAccount // registered by registerAccounts
	accMu    sync.Mutex

	// used marks nodes that served a scenario (or held realtime
	// subscribers) before: their RSS holds freed memory new allocations reuse.
	used map[*benchNode]bool

	push *pushState // the push scenarios' setup (push.go)
	slow *slowState // S2's runs (slowsub.go)
	js   *jsState   // the JS scenario's Node subscriber (jssdk.go)
	jsc  *jscState  // the JSC scenario's cache measurements (jscache.go)
	q    *qState    // the query scenarios' seeded collections (query.go)
	q3   *q3State   // Q3's live-query subscribers (query_live.go)
	trg  *trgState  // TRG's runs: per-run receiver figures (triggers.go)
	// q3FromSend: Q3's latencies from each write's sending, over the runs.
	q3FromSend histogram

	log func(string, ...any) // progress lines (stderr); nil: none
}

// close stops what the scenarios left running.
func (e *env) close() {
	if e.js != nil {
		e.js.stop()
		e.js = nil
	}
	if e.q3 != nil {
		e.q3.close()
		e.q3 = nil
	}
}

func newEnv(hc *http.Client, c *cluster, pr project, o *options) *env {
	// Printable pseudo-random letters: no JSON escaping, no compressible run.
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	v := make([]byte, 0, o.valueSize+2)
	v = append(v, '"')
	for range o.valueSize {
		v = append(v, letters[r.IntN(len(letters))])
	}
	v = append(v, '"')
	return &env{hc: hc, c: c, pr: pr, o: o, value: v, used: map[*benchNode]bool{}}
}

// follower is the node client c talks to in follower scenarios.
func (e *env) follower(c int) *benchNode {
	f := e.c.followers()
	return f[c%len(f)]
}

func (e *env) followerNames() string {
	f := e.c.followers()
	if len(f) == 1 && f[0] == e.c.leader {
		return "single node " + f[0].id
	}
	s := "followers"
	for _, n := range f {
		s += " " + n.id
	}
	return s
}

func (e *env) readDoc(i int) string {
	return "bench/r" + strconv.Itoa(i%e.o.docs)
}

// opError is a failed operation: a transport error or a non-2xx answer.
type opError struct {
	kind   string // grouping key for the report, e.g. "POST 503 unavailable"
	status int    // the HTTP status; 0 for a transport error
	// shed: a 503 with Retry-After, the node refusing work it has no room
	// for. Scenarios with ExpectShed count it apart from the errors.
	shed       bool
	retryAfter time.Duration
}

func (e *opError) Error() string { return e.kind }

func statusError(method string, resp *http.Response, body []byte) error {
	var eb struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &eb)
	oe := &opError{kind: fmt.Sprintf("%s %d %s", method, resp.StatusCode, eb.Error.Code), status: resp.StatusCode}
	if resp.StatusCode == http.StatusServiceUnavailable {
		if resp.Header.Get("Retry-After") == "" {
			oe.kind += " (no Retry-After)"
		} else {
			oe.shed, oe.retryAfter = true, retryAfter(resp.Header)
		}
	}
	return oe
}

func transportError(method string, err error) error {
	kind := "transport error"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		kind = "timeout"
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	}
	return &opError{kind: method + " " + kind}
}

// written is one write's document path and committed revision.
type written struct {
	coll string
	rev  uint64
}

// write creates the next bench/w<n> document through n.
func (e *env) write(ctx context.Context, n *benchNode) (written, error) {
	coll := "bench/w" + strconv.FormatUint(e.seq.Add(1), 10)
	rev, err := e.post(ctx, n, coll)
	return written{coll: coll, rev: rev}, err
}

// post creates or replaces coll with {"v": value} and returns X-Revision.
func (e *env) post(ctx context.Context, n *benchNode, coll string) (uint64, error) {
	body := make([]byte, 0, len(coll)+len(e.value)+40)
	body = append(body, `{"collection":"`...)
	body = append(body, coll...)
	body = append(body, `","data":{"v":`...)
	body = append(body, e.value...)
	body = append(body, "}}"...)
	return e.postBody(ctx, n, body)
}

// postBody sends body (a whole POST /api/db request) to n and returns
// X-Revision.
func (e *env) postBody(ctx context.Context, n *benchNode, body []byte) (uint64, error) {
	return e.postAs(ctx, n, "/api/db", "POST", body)
}

// postAs POSTs the JSON body to route on n with the owner's token and
// returns X-Revision; label names the request in error kinds.
func (e *env) postAs(ctx context.Context, n *benchNode, route, label string, body []byte) (uint64, error) {
	return e.sendRev(ctx, n, http.MethodPost, route, label, body, http.StatusOK, http.StatusCreated)
}

// sendRev sends the JSON body to route on n with method and e's token and
// returns X-Revision; a status other than the wanted ones is an error, and
// label names the request in error kinds.
func (e *env) sendRev(ctx context.Context, n *benchNode, method, route, label string, body []byte, want ...int) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.reqTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.url+route, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.pr.Token)
	resp, err := e.hc.Do(req)
	if err != nil {
		return 0, transportError(label, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return 0, transportError(label, err)
	}
	if !slices.Contains(want, resp.StatusCode) {
		return 0, statusError(label, resp, b)
	}
	rev, err := strconv.ParseUint(resp.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		return 0, &opError{kind: label + " without X-Revision"}
	}
	return rev, nil
}

// read GETs coll from n (local: consistency=local; minRev > 0: with
// X-Min-Revision; own: the document was written at minRev, so an older
// revision is a stale read and counts as an error).
func (e *env) read(ctx context.Context, n *benchNode, coll string, local bool, minRev uint64, own bool) error {
	u := n.url + "/api/db?collection=" + url.QueryEscape(coll)
	if local {
		u += "&consistency=local"
	}
	ctx, cancel := context.WithTimeout(ctx, e.o.reqTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.pr.Token)
	if minRev > 0 {
		req.Header.Set("X-Min-Revision", strconv.FormatUint(minRev, 10))
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return transportError("GET", err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return transportError("GET", err)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError("GET", resp, b)
	}
	if own {
		var d struct {
			Revision uint64 `json:"revision"`
		}
		if json.Unmarshal(b, &d) != nil || d.Revision < minRev {
			return &opError{kind: "GET stale read (revision below X-Min-Revision)"}
		}
	}
	return nil
}

// populate writes the --docs documents the read scenarios read (once per
// cluster), through the leader with --clients writers, then waits until the
// followers have applied them.
func populate(ctx context.Context, e *env) error {
	e.popMu.Lock()
	defer e.popMu.Unlock()
	if e.populated {
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var maxRev uint64
	for c := 0; c < min(e.o.clients, e.o.docs); c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= e.o.docs || ctx.Err() != nil {
					return
				}
				var rev uint64
				var err error
				for attempt := 0; attempt < 3; attempt++ {
					if rev, err = e.post(ctx, e.c.leader, "bench/r"+strconv.Itoa(i)); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("populate bench/r%d: %w", i, err)
				}
				maxRev = max(maxRev, rev)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Every follower has the documents before anything is measured.
	for _, n := range e.c.followers() {
		if err := e.read(ctx, n, "bench/r0", true, maxRev, false); err != nil {
			return fmt.Errorf("populate: catch-up read on %s: %w", n.id, err)
		}
	}
	e.populated = true
	return nil
}
