package main

// --compare (--peer etcd): the same workloads against edgebase and against a
// Debian etcd cluster of the same size on the same machine, interleaved round
// by round (ours, etcd, ours, etcd, ...) so that machine noise hits both, and
// a table of the ratios edgebase/etcd. --peer pocketbase does the same
// against one PocketBase process: the query scenarios (query_pocketbase.go)
// and the end-user workloads W1, W64, HOT, R64, L32 and RT
// (pocketbase_peer.go, pocketbase_rt.go).

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// compareSpec pairs a compared workload with the edgebase scenario it runs.
type compareSpec struct {
	Name string // the comparison's name (S1 for realtime)
	Ours string // our scenario
	What string // the peer's side
	Peer string // the peer it runs against: peerEtcd or peerPocketBase
}

// The peers of --peer.
const (
	peerEtcd       = "etcd"
	peerPocketBase = "pocketbase"
)

var compareSpecs = []compareSpec{
	{"W1", "W1", "etcd: 1 client, POST /v3/kv/put of a new key to the leader", peerEtcd},
	{"W2", "W2", "etcd: --clients clients, POST /v3/kv/put of new keys to the leader", peerEtcd},
	{"R1", "R1", "etcd: --clients clients, POST /v3/kv/range serializable=true on the followers", peerEtcd},
	{"R2", "R2", "etcd: --clients clients, POST /v3/kv/range (linearizable) on the followers", peerEtcd},
	{"S1", "RT1F", "etcd: --subscribers POST /v3/watch streams on a key prefix on a follower, paced puts at --rate to the leader", peerEtcd},
	{"Q1", "Q1", "PocketBase: --clients clients, GET /api/collections/orders/records?filter=(status='open')&sort=-createdAt&perPage=20&skipTotal=1 as an end user, SQLite index (status, createdAt DESC)", peerPocketBase},
	{"Q2", "Q2", "PocketBase: as Q1 on orders_unindexed (no index of its own)", peerPocketBase},
	{"W1", "W1U", "PocketBase: 1 client, POST /api/collections/notes/records as the end user", peerPocketBase},
	{"W64", "W64", "PocketBase: 64 clients, POST /api/collections/notes/records (distinct records) as the end user", peerPocketBase},
	{"HOT", "HOTU", "PocketBase: 64 clients, PATCH /api/collections/notes/records/{id} of one record (field v) as the end user", peerPocketBase},
	{"R64", "R64", "PocketBase: 64 clients, GET /api/collections/notes/records/{id} of one record as the end user", peerPocketBase},
	{"L32", "L32", "PocketBase: 32 clients, POST /api/collections/users/auth-with-password as the one end user", peerPocketBase},
	{"RT", "RTU", "PocketBase: --subscribers SSE streams (GET /api/realtime, POST /api/realtime subscribing notes with the end user's token); paced creates at --rate as the end user", peerPocketBase},
}

func findCompareSpec(name, peer string) (compareSpec, bool) {
	for _, s := range compareSpecs {
		if s.Name == name && s.Peer == peer {
			return s, true
		}
	}
	return compareSpec{}, false
}

// compareNames are the scenarios compared with peer.
func compareNames(peer string) []string {
	var n []string
	for _, s := range compareSpecs {
		if s.Peer == peer {
			n = append(n, s.Name)
		}
	}
	return n
}

// sideResult is one system's figures in a comparison.
type sideResult struct {
	Ops        int            `json:"ops"`
	Errors     int            `json:"errors"`
	ErrorKinds map[string]int `json:"errorKinds,omitempty"`
	// Shed: 503 answers with Retry-After in a scenario that expects them
	// (L32): neither ops nor errors.
	Shed         int            `json:"shed,omitempty"`
	ShedKinds    map[string]int `json:"shedKinds,omitempty"`
	RunOpsPerSec []float64      `json:"runOpsPerSec"`
	OpsPerSec    float64        `json:"opsPerSec"` // median run
	OpsPerSecMin float64        `json:"opsPerSecMin"`
	OpsPerSecMax float64        `json:"opsPerSecMax"`
	P50Ms        float64        `json:"p50Ms"`
	P99Ms        float64        `json:"p99Ms"`
	P999Ms       float64        `json:"p999Ms"`
	Nodes        []nodeResult   `json:"nodes,omitempty"`
	// BenchCPUSecondsPerRun is the load generator's CPU during this side's
	// rounds; OtherCPUSecondsPerRun the machine's busy CPU that was neither
	// the bench nor these nodes (other processes: noise).
	BenchCPUSecondsPerRun float64 `json:"benchCpuSecondsPerRun"`
	OtherCPUSecondsPerRun float64 `json:"otherCpuSecondsPerRun"`
	TimedOut              bool    `json:"timedOut,omitempty"`
	Failed                string  `json:"failed,omitempty"`
}

// comparison is one row of the comparison table (the JSON's "comparisons").
type comparison struct {
	Scenario    string `json:"scenario"`
	Ours        string `json:"edgebaseScenario"`
	ClusterSize int    `json:"clusterSize"`
	Clients     int    `json:"clients"`
	OpsPerRun   int    `json:"opsPerRun"`
	Warmup      int    `json:"warmupOps"`
	// RunSeconds: each round of a timed scenario (Q1, Q2) lasts this long
	// on both sides (OpsPerRun is then 0).
	RunSeconds float64    `json:"runSeconds,omitempty"`
	Rounds     int        `json:"rounds"`
	Edgebase   sideResult `json:"edgebase"`
	// PeerName is the compared system (etcd, pocketbase); Peer its figures.
	PeerName string     `json:"peerName"`
	Peer     sideResult `json:"peer"`
	// ThroughputRatio is edgebase/peer of the median ops/s (above 1: ours
	// faster); P99Ratio edgebase/peer of p99 (below 1: ours lower).
	ThroughputRatio float64 `json:"throughputRatio"`
	P99Ratio        float64 `json:"p99Ratio"`
}

func (c *comparison) flagged() bool {
	return c.Edgebase.Errors > 0 || c.Peer.Errors > 0 || c.Edgebase.Failed != "" || c.Peer.Failed != "" ||
		c.Edgebase.TimedOut || c.Peer.TimedOut
}

// ratios fills the ratio fields (0 where a denominator is 0).
func (c *comparison) ratios() {
	c.ThroughputRatio, c.P99Ratio = 0, 0
	if c.Peer.OpsPerSec > 0 {
		c.ThroughputRatio = round(c.Edgebase.OpsPerSec/c.Peer.OpsPerSec, 2)
	}
	if c.Peer.P99Ms > 0 {
		c.P99Ratio = round(c.Edgebase.P99Ms/c.Peer.P99Ms, 2)
	}
}

// runFunc is one measured run of a side.
type runFunc func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int)

// side is one system prepared for one compared scenario.
type side struct {
	run    runFunc
	settle func(ctx context.Context)
	close  func()
	nodes  []*benchNode
	leader *benchNode

	// accumulated over the rounds
	all    histogram
	rates  []float64
	res    sideResult
	cpu    []cpuTime
	peak   []int64
	rounds int
	bench  float64 // CPU seconds of the bench during the rounds
	other  float64 // busy CPU seconds of the machine during the rounds, less the bench and the nodes
}

// measure runs one measured round of s, with the CPU and peak RSS of its
// processes around it.
func (s *side) measure(ctx context.Context, ops int) runResult {
	if s.cpu == nil {
		s.cpu, s.peak = make([]cpuTime, len(s.nodes)), make([]int64, len(s.nodes))
	}
	before := make([]cpuTime, len(s.nodes))
	for i, n := range s.nodes {
		if pid := n.pid(); pid > 0 {
			before[i], _ = cpuSeconds(pid)
			resetPeakRSS(pid)
		}
	}
	self0, _ := cpuSeconds(0)
	sys0, sysErr := systemCPU()
	rr, h, kinds, shed := s.run(ctx, ops)
	self1, _ := cpuSeconds(0)
	sys1, err := systemCPU()
	bench := self1.sub(self0).total()
	s.bench += bench
	other := sys1 - sys0 - bench
	if sysErr != nil || err != nil {
		other = 0
	}
	for i, n := range s.nodes {
		if pid := n.pid(); pid > 0 {
			if after, err := cpuSeconds(pid); err == nil {
				d := after.sub(before[i])
				s.cpu[i].user += d.user
				s.cpu[i].system += d.system
				other -= d.total()
			}
			if p, err := peakRSS(pid); err == nil {
				s.peak[i] = max(s.peak[i], p)
			}
		}
	}
	s.other += max(other, 0)
	s.rounds++
	s.all.merge(h)
	s.rates = append(s.rates, rr.OpsPerSec)
	s.res.Ops += rr.Ops
	s.res.Errors += rr.Errors
	s.res.TimedOut = s.res.TimedOut || rr.TimedOut
	for k, v := range kinds {
		if s.res.ErrorKinds == nil {
			s.res.ErrorKinds = map[string]int{}
		}
		s.res.ErrorKinds[k] += v
	}
	s.res.Shed += rr.Shed
	for k, v := range shed {
		if s.res.ShedKinds == nil {
			s.res.ShedKinds = map[string]int{}
		}
		s.res.ShedKinds[k] += v
	}
	if s.settle != nil {
		s.settle(ctx)
	}
	return rr
}

// finish computes the side's summary from its rounds.
func (s *side) finish() sideResult {
	r := s.res
	r.RunOpsPerSec = s.rates
	if len(s.rates) > 0 {
		r.OpsPerSec, r.OpsPerSecMin, r.OpsPerSecMax = median(s.rates), slices.Min(s.rates), slices.Max(s.rates)
	}
	r.P50Ms, r.P99Ms, r.P999Ms = ms(s.all.percentile(50)), ms(s.all.percentile(99)), ms(s.all.percentile(99.9))
	rounds := float64(max(s.rounds, 1))
	r.BenchCPUSecondsPerRun, r.OtherCPUSecondsPerRun = round(s.bench/rounds, 2), round(s.other/rounds, 2)
	for i, n := range s.nodes {
		nr := nodeResult{ID: n.id, Leader: n == s.leader}
		if n.pid() <= 0 || s.cpu == nil {
			nr.Unmeasured = true
		} else {
			nr.CPUSecondsPerRun = round(s.cpu[i].total()/rounds, 2)
			nr.CPUSystemSecondsPerRun = round(s.cpu[i].system/rounds, 2)
			nr.PeakRSSMiB = round(float64(s.peak[i])/(1<<20), 1)
		}
		r.Nodes = append(r.Nodes, nr)
	}
	return r
}

// compareCluster starts a size-node edgebase cluster and the peer (a
// size-member etcd cluster, or one PocketBase process) and runs every
// compared scenario against both, interleaved; then the scenarios without
// a counterpart (o.solo) against edgebase alone.
func compareCluster(ctx context.Context, hc *http.Client, bin, peerBin, tmp string, size int, o *options, logf func(string, ...any)) ([]*comparison, []*result, error) {
	dir := filepath.Join(tmp, fmt.Sprintf("cluster%d", size))
	edir := filepath.Join(tmp, fmt.Sprintf("%s%d", o.peer, size))
	for _, d := range []string{dir, edir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, err
		}
	}
	t := time.Now()
	c, err := startCluster(ctx, hc, bin, dir, size, o.serveArgs)
	if err != nil {
		return nil, nil, fmt.Errorf("start %d-node edgebase cluster: %w", size, err)
	}
	defer c.stop()
	logf("bench: %d-node edgebase cluster ready in %v, leader %s", size, time.Since(t).Round(time.Millisecond), c.leader.id)
	pr, err := createProject(ctx, hc, c)
	if err != nil {
		return nil, nil, fmt.Errorf("%d-node cluster: %w", size, err)
	}
	e := newEnv(hc, c, pr, o)
	e.log = logf
	defer e.close()
	var peerSide func(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error)
	if len(o.compared) > 0 {
		t = time.Now()
		switch o.peer {
		case peerPocketBase:
			pe, err := startPocketBase(ctx, hc, peerBin, edir, o, e.value)
			if err != nil {
				return nil, nil, fmt.Errorf("start the PocketBase peer: %w", err)
			}
			defer pe.stop()
			logf("bench: PocketBase peer ready in %v", time.Since(t).Round(time.Millisecond))
			peerSide = pe.side
		default:
			ec, err := startEtcd(ctx, hc, peerBin, edir, size)
			if err != nil {
				return nil, nil, fmt.Errorf("start %d-member etcd cluster: %w", size, err)
			}
			defer ec.stop()
			logf("bench: %d-member etcd cluster ready in %v, leader %s", size, time.Since(t).Round(time.Millisecond), ec.leader.id)
			peerSide = newEtcdEnv(hc, ec, o, e.value).side
		}
	}
	// Our side: the scenario on e, or, for the end-user workloads against
	// PocketBase, as the project's one end user.
	user := newEBUser(e)
	oursFor := func(ctx context.Context, spec compareSpec, s *scenario) (*side, error) {
		if isPBPeerScenario(s) {
			return user.side(ctx, spec, s, logf)
		}
		return oursSide(ctx, e, s, logf)
	}
	var out []*comparison
	for _, spec := range o.compared {
		if ctx.Err() != nil {
			break
		}
		out = append(out, compareScenario(ctx, e, o.peer, oursFor, peerSide, spec, logf))
	}
	var solo []*result
	for _, s := range o.solo {
		if ctx.Err() != nil {
			break
		}
		r := runScenario(ctx, e, s, logf)
		r.Notes = append(r.Notes, fmt.Sprintf("no %s counterpart: edgebase alone, in the --peer run", o.peer))
		if r.Failed != "" {
			logf("bench: [%d nodes] %s failed: %s", size, s.Name, r.Failed)
		}
		solo = append(solo, r)
	}
	return out, solo, nil
}

// compareScenario prepares both sides, warms each up, then runs --runs
// rounds of ours then the peer's.
func compareScenario(ctx context.Context, e *env, peer string, oursFor func(ctx context.Context, spec compareSpec, s *scenario) (*side, error), peerSide func(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error), spec compareSpec, logf func(string, ...any)) *comparison {
	o := e.o
	s, _ := findOursScenario(spec.Ours)
	cmp := &comparison{Scenario: spec.Name, Ours: s.Name, ClusterSize: len(e.c.nodes), Clients: s.Clients(o),
		OpsPerRun: o.opsFor(s), Warmup: o.warmupFor(s), Rounds: o.runs, PeerName: peer}
	if s.Timed {
		cmp.RunSeconds = o.queryDuration.Seconds()
	}
	ours, err := oursFor(ctx, spec, s)
	if err != nil {
		cmp.Edgebase.Failed = err.Error()
		logf("bench: [%d nodes] %s edgebase: %v", cmp.ClusterSize, spec.Name, err)
		return cmp
	}
	defer ours.close()
	theirs, err := peerSide(ctx, spec, s, logf)
	if err != nil {
		cmp.Peer.Failed = err.Error()
		logf("bench: [%d nodes] %s %s: %v", cmp.ClusterSize, spec.Name, peer, err)
		return cmp
	}
	defer theirs.close()
	for _, x := range []struct {
		name string
		s    *side
	}{{"edgebase", ours}, {peer, theirs}} {
		if cmp.Warmup > 0 {
			w, _, kinds, _ := x.s.run(ctx, cmp.Warmup)
			if w.Errors > 0 {
				logf("bench: [%d nodes] %s %s warm-up: %d errors %v", cmp.ClusterSize, spec.Name, x.name, w.Errors, kinds)
			}
			x.s.settle(ctx)
		}
	}
	for round := 1; round <= o.runs && ctx.Err() == nil; round++ {
		for _, x := range []struct {
			name string
			s    *side
		}{{"edgebase", ours}, {peer, theirs}} {
			rr := x.s.measure(ctx, cmp.OpsPerRun)
			shed := ""
			if rr.Shed > 0 {
				shed = fmt.Sprintf(", %d shed (503)", rr.Shed)
			}
			logf("bench: [%d nodes] %s round %d/%d %-8s: %d ops in %.2fs = %.0f ops/s, %d errors%s",
				cmp.ClusterSize, spec.Name, round, o.runs, x.name, rr.Ops, rr.WallSeconds, rr.OpsPerSec, rr.Errors, shed)
		}
	}
	cmp.Edgebase, cmp.Peer = ours.finish(), theirs.finish()
	cmp.ratios()
	return cmp
}

// oursSide prepares our scenario s on e (its Prepare, or its realtime
// subscribers).
func oursSide(ctx context.Context, e *env, s *scenario, logf func(string, ...any)) (*side, error) {
	sd := &side{nodes: e.c.nodes, leader: e.c.leader, settle: func(ctx context.Context) { e.c.settle(ctx, e.hc) }, close: func() {}}
	if s.Prepare != nil {
		if err := s.Prepare(ctx, e); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	e.c.settle(ctx, e.hc)
	if s.Realtime != nil {
		rt, err := startRealtime(ctx, e, s, logf)
		if err != nil {
			return nil, fmt.Errorf("subscribers: %w", err)
		}
		sd.run, sd.close = rt.run, func() { rt.close(logf) }
		return sd, nil
	}
	if s.Run != nil {
		sd.run = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
			return s.Run(ctx, e, s, ops)
		}
		return sd, nil
	}
	clients := s.Clients(e.o)
	sd.run = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
		return runOnce(ctx, e, s, clients, ops)
	}
	return sd, nil
}

// ---- etcd side ----

// etcdEnv is the etcd cluster a comparison runs against.
type etcdEnv struct {
	hc      *http.Client
	c       *cluster
	o       *options
	value   []byte // the raw value (--value-size letters)
	value64 []byte // base64 of value
	seq     atomic.Uint64

	populated bool
}

// newEtcdEnv uses ours' value (a JSON string literal, quotes included) as
// the raw value, so both store the same letters.
func newEtcdEnv(hc *http.Client, c *cluster, o *options, jsonValue []byte) *etcdEnv {
	v := jsonValue[1 : len(jsonValue)-1]
	return &etcdEnv{hc: hc, c: c, o: o, value: v, value64: b64.AppendEncode(nil, v)}
}

func (ee *etcdEnv) follower(c int) *benchNode {
	f := ee.c.followers()
	return f[c%len(f)]
}

func (ee *etcdEnv) put(ctx context.Context, n *benchNode) error {
	_, err := etcdPut(ctx, ee.hc, ee.o.reqTimeout, n.url, "bench/w"+strconv.FormatUint(ee.seq.Add(1), 10), ee.value64)
	return err
}

// populate writes the --docs keys the read scenarios read and waits until
// every follower serves the last of them locally.
func (ee *etcdEnv) populate(ctx context.Context) error {
	if ee.populated {
		return nil
	}
	err := parallel(ctx, ee.o.docs, ee.o.clients, func(i int) error {
		_, err := etcdPut(ctx, ee.hc, ee.o.reqTimeout, ee.c.leader.url, "bench/r"+strconv.Itoa(i), ee.value64)
		if err != nil {
			return fmt.Errorf("populate bench/r%d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	last := "bench/r" + strconv.Itoa(ee.o.docs-1)
	for _, n := range ee.c.followers() {
		err := proctest.Poll(ctx, 10*time.Second, func() error {
			_, err := etcdGet(ctx, ee.hc, ee.o.reqTimeout, n.url, last, true)
			return err
		})
		if err != nil {
			return fmt.Errorf("populate: catch-up read on %s: %w", n.id, err)
		}
	}
	ee.populated = true
	return nil
}

// side prepares the etcd counterpart of spec (our scenario s gives the
// client count and, through runOnce, the run loop).
func (ee *etcdEnv) side(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error) {
	sd := &side{nodes: ee.c.nodes, leader: ee.c.leader, settle: func(ctx context.Context) { settleEtcd(ctx, ee.hc, ee.c) }, close: func() {}}
	var op func(ctx context.Context, c, i int) error
	timeout := ee.o.reqTimeout
	switch spec.Name {
	case "W1", "W2":
		op = func(ctx context.Context, c, i int) error { return ee.put(ctx, ee.c.leader) }
	case "R1", "R2":
		if err := ee.populate(ctx); err != nil {
			return nil, err
		}
		serializable := spec.Name == "R1"
		op = func(ctx context.Context, c, i int) error {
			_, err := etcdGet(ctx, ee.hc, timeout, ee.follower(c).url, "bench/r"+strconv.Itoa(i%ee.o.docs), serializable)
			return err
		}
	case "S1":
		ws, err := startEtcdWatchers(ctx, ee, logf)
		if err != nil {
			return nil, fmt.Errorf("watchers: %w", err)
		}
		sd.run, sd.close = ws.run, ws.close
		settleEtcd(ctx, ee.hc, ee.c)
		return sd, nil
	default:
		return nil, fmt.Errorf("no etcd counterpart of %s", spec.Name)
	}
	settleEtcd(ctx, ee.hc, ee.c)
	// runOnce drives the op through a copy of our scenario (same clients,
	// same run loop, same --run-timeout); the env only lends its options.
	es := *s
	es.Op = func(ctx context.Context, _ *env, c, i int) error { return op(ctx, c, i) }
	e := &env{o: ee.o}
	clients := s.Clients(ee.o)
	sd.run = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
		return runOnce(ctx, e, &es, clients, ops)
	}
	return sd, nil
}

// ---- S1 on etcd: watch streams ----

// etcdWatchers is S1's etcd side: --subscribers watch streams on one prefix
// on a follower; a paced writer puts a new key under it per write through
// the leader, its value holding the run, the sequence number and the send
// time (as ours does), so each watcher measures change-to-delivery latency.
type etcdWatchers struct {
	ee        *etcdEnv
	node      *benchNode
	prefix    string
	base      time.Time
	hc        *http.Client
	ws        []*etcdWatcher
	runID     int
	delivered atomic.Int64
}

type etcdWatcher struct {
	w *etcdWatch
	rtTally
}

// rtTally is one S1 stream's deliveries (an etcd watch or a PocketBase SSE
// stream): its consumer records them, the run reads them under mu.
type rtTally struct {
	ended chan struct{}

	mu    sync.Mutex
	run   int
	got   []bool
	n     int
	dups  int
	stray int
	lat   []time.Duration
	last  time.Duration
	err   error // why the stream ended
}

// tally is x itself, for tallies.
func (x *rtTally) tally() *rtTally { return x }

// tallies is the tallies of streams.
func tallies[S interface{ tally() *rtTally }](streams []S) []*rtTally {
	t := make([]*rtTally, len(streams))
	for k, x := range streams {
		t[k] = x.tally()
	}
	return t
}

// fail records why the stream ended.
func (x *rtTally) fail(err error) {
	x.mu.Lock()
	x.err = err
	x.mu.Unlock()
}

// record counts write seq of run, sent at sent and received at now (both
// since base; ok false for an event that does not parse): a delivery,
// a duplicate or a stray. It reports whether it was a delivery.
func (x *rtTally) record(run, seq int, sent, now time.Duration, ok bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case !ok || run != x.run || seq < 0 || seq >= len(x.got):
		x.stray++
	case x.got[seq]:
		x.dups++
	default:
		x.got[seq] = true
		x.n++
		x.lat = append(x.lat, now-sent)
		x.last = now
		return true
	}
	return false
}

func startEtcdWatchers(ctx context.Context, ee *etcdEnv, logf func(string, ...any)) (*etcdWatchers, error) {
	n := ee.o.subscribers
	node := ee.follower(0)
	if _, _, err := checkRealtimeLimits(node, n); err != nil {
		return nil, err
	}
	ws := &etcdWatchers{ee: ee, node: node, prefix: "bench/rt/s1/", base: time.Now(),
		hc: &http.Client{Transport: &http.Transport{
			Proxy:              nil,
			DialContext:        (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			DisableCompression: true,
		}}}
	t0 := time.Now()
	ws.ws = make([]*etcdWatcher, n)
	err := parallel(ctx, n, rtDialers, func(i int) error {
		w, err := openEtcdWatch(ctx, ws.hc, node.url, ws.prefix)
		if err != nil {
			return fmt.Errorf("watcher %d of %d on %s: %w", i+1, n, node.id, err)
		}
		x := &etcdWatcher{w: w, rtTally: rtTally{ended: make(chan struct{})}}
		ws.ws[i] = x
		go x.consume(ws)
		return nil
	})
	if err != nil {
		ws.ws = slices.DeleteFunc(ws.ws, func(x *etcdWatcher) bool { return x == nil })
		ws.close()
		return nil, err
	}
	logf("bench: S1 etcd: %d watchers of %s on %s in %.1fs", n, ws.prefix, node.id, time.Since(t0).Seconds())
	return ws, nil
}

// consume records each event of the stream until it ends.
func (x *etcdWatcher) consume(ws *etcdWatchers) {
	defer close(x.ended)
	for {
		m, err := x.w.next()
		if err != nil {
			x.fail(err)
			return
		}
		now := time.Since(ws.base)
		for _, ev := range m.Result.Events {
			run, seq, sent, ok := parseRTData(ev.KV.Value)
			if x.record(run, seq, sent, now, ok) {
				ws.delivered.Add(1)
			}
		}
	}
}

func (x *rtTally) isEnded() bool {
	select {
	case <-x.ended:
		return true
	default:
		return false
	}
}

// value is write seq of run: the same shape as our realtime documents.
func (ws *etcdWatchers) value(run, seq int) []byte {
	v := ws.ee.value
	b := rtHead(ws.base, run, seq, len(v))
	b = append(b, '"')
	b = append(b, v...)
	return append(b, `"}`...)
}

// rtHead starts the JSON of write seq of run, with room for a value of n
// bytes: {"r":run,"s":seq,"t":the send time (read now, since base),"v":
// and the caller appends the value and the closing brace.
func rtHead(base time.Time, run, seq, n int) []byte {
	b := make([]byte, 0, n+80)
	b = append(b, `{"r":`...)
	b = strconv.AppendInt(b, int64(run), 10)
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, int64(time.Since(base)), 10)
	return append(b, `,"v":`...)
}

// run is one run: ops paced puts at --rate, then the wait until every
// watcher has every successful one (or rtStall without progress, or
// --run-timeout). Ops are deliveries, as in ours.
func (ws *etcdWatchers) run(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	ee, o := ws.ee, ws.ee.o
	ws.runID++
	id := ws.runID
	return rtPacedRun(ctx, o, ws.base, &ws.delivered, tallies(ws.ws), id, ops, "etcd", "etcd watch stream", func(wctx context.Context, i int) error {
		key := ws.prefix + "m" + strconv.Itoa(id) + "-" + strconv.Itoa(i)
		_, err := etcdPut(wctx, ee.hc, o.reqTimeout, ee.c.leader.url, key, b64.AppendEncode(nil, ws.value(id, i)))
		return err
	})
}

// rtPacedRun is one S1 run of id over subs: ops writes paced at --rate
// (write(wctx, i) makes write i of the run, at most rtInFlight at a time),
// then the wait until every stream has every successful one (or rtStall
// without progress, or --run-timeout). Ops are deliveries, as in ours;
// system and stream name the error kinds.
func rtPacedRun(ctx context.Context, o *options, base time.Time, delivered *atomic.Int64, subs []*rtTally, id, ops int, system, stream string, write func(wctx context.Context, i int) error) (runResult, *histogram, map[string]int, map[string]int) {
	for _, x := range subs {
		x.mu.Lock()
		x.run, x.n, x.dups, x.stray, x.last = id, 0, 0, 0, 0
		x.got = make([]bool, ops)
		x.lat = x.lat[:0]
		x.mu.Unlock()
	}
	delivered.Store(0)
	kinds := map[string]int{}
	ok := make([]bool, ops)
	var mu sync.Mutex
	var writeErrs int
	wctx, cancel := context.WithTimeout(ctx, o.runTimeout)
	defer cancel()
	start := time.Now()
	startOff := time.Since(base)
	interval := time.Duration(float64(time.Second) / o.rate)
	sem := make(chan struct{}, rtInFlight)
	var wg sync.WaitGroup
schedule:
	for i := 0; i < ops; i++ {
		sleepCtx(wctx, time.Until(start.Add(time.Duration(i)*interval)))
		select {
		case sem <- struct{}{}:
		case <-wctx.Done():
			break schedule
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := write(wctx, i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok[i] = true
			case wctx.Err() != nil:
			default:
				writeErrs++
				kinds[err.Error()]++
			}
		}()
	}
	wg.Wait()
	writeWall := time.Since(start)
	writerCut := wctx.Err() != nil && ctx.Err() == nil
	writes := 0
	for _, b := range ok {
		if b {
			writes++
		}
	}
	drained := waitDelivered(ctx, delivered, int64(writes)*int64(len(subs)), o.runTimeout)
	var all histogram
	var lastRecv time.Duration
	var deliveries, missed, dups, lost int
	for _, x := range subs {
		x.mu.Lock()
		for i, b := range ok {
			if b && !x.got[i] {
				missed++
			}
		}
		deliveries += x.n
		dups += x.dups
		all.samples = append(all.samples, x.lat...)
		lastRecv = max(lastRecv, x.last)
		x.mu.Unlock()
		if x.isEnded() {
			lost++
		}
	}
	for k, v := range map[string]int{
		system + " delivery missed": missed, system + " delivery duplicated": dups, stream + " ended": lost,
	} {
		if v > 0 {
			kinds[k] += v
		}
	}
	wall := writeWall
	if lastRecv > startOff {
		wall = max(wall, lastRecv-startOff)
	}
	return runResult{
		Ops: deliveries, Errors: writeErrs + missed + dups + lost,
		WallSeconds: round(wall.Seconds(), 3), OpsPerSec: round(throughput(deliveries, wall), 1),
		TimedOut: writerCut || (!drained && ctx.Err() == nil),
		Writes:   writes, WritesPerSec: round(throughput(writes, writeWall), 1),
	}, &all, kinds, nil
}

// waitDelivered waits until delivered reaches expected (true), or until
// it has not moved for rtStall, timeout has passed or ctx is done (false).
func waitDelivered(ctx context.Context, delivered *atomic.Int64, expected int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	last, lastChange := int64(-1), time.Now()
	for ctx.Err() == nil {
		d := delivered.Load()
		if d >= expected {
			return true
		}
		if d != last {
			last, lastChange = d, time.Now()
		}
		if time.Since(lastChange) > rtStall || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
	return false
}

func (ws *etcdWatchers) close() {
	for _, x := range ws.ws {
		x.w.close()
	}
	for _, x := range ws.ws {
		<-x.ended
	}
	ws.hc.CloseIdleConnections()
}

// ---- table ----

func printCompareTable(w io.Writer, rep *report) {
	if len(rep.Comparisons) == 0 {
		return
	}
	peer := rep.Comparisons[0].PeerName
	fmt.Fprintf(w, "\nside by side with %[1]s (interleaved rounds: edgebase, %[1]s, edgebase, %[1]s, ...; ops/s: median of the rounds; ratio = edgebase/%[1]s: ops/s above 1 and p99 below 1 favour edgebase; CPU: seconds per round per node (* leader); RSS: peak MiB during the rounds; bench/other CPU: the load generator's and every other process's CPU seconds per round, edgebase rounds/%[1]s rounds)\n\n", peer)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scen\tnodes\tclients\tops/run\tedgebase ops/s\t%[1]s ops/s\tratio\tp99 edgebase\tp99 %[1]s\tp99 ratio\tCPU s edgebase\tCPU s %[1]s\tRSS MiB edgebase\tRSS MiB %[1]s\tbench CPU s\tother CPU s\terrors eb/%[1]s\t\n", peer)
	var notes []string
	for _, c := range rep.Comparisons {
		for _, x := range []struct {
			who string
			r   *sideResult
		}{{"edgebase", &c.Edgebase}, {c.PeerName, &c.Peer}} {
			if x.r.Failed != "" {
				notes = append(notes, fmt.Sprintf("%s %d nodes %s: FAILED: %s", c.Scenario, c.ClusterSize, x.who, x.r.Failed))
			}
			for _, k := range slices.Sorted(maps.Keys(x.r.ErrorKinds)) {
				notes = append(notes, fmt.Sprintf("%s %d nodes %s: %d × %s", c.Scenario, c.ClusterSize, x.who, x.r.ErrorKinds[k], k))
			}
			for _, k := range slices.Sorted(maps.Keys(x.r.ShedKinds)) {
				notes = append(notes, fmt.Sprintf("%s %d nodes %s: %d × %s with Retry-After: load shed, neither an op nor an error", c.Scenario, c.ClusterSize, x.who, x.r.ShedKinds[k], k))
			}
			if x.r.TimedOut {
				notes = append(notes, fmt.Sprintf("%s %d nodes %s: a round stopped by --run-timeout", c.Scenario, c.ClusterSize, x.who))
			}
		}
		errs := fmt.Sprintf("%d/%d", c.Edgebase.Errors, c.Peer.Errors)
		if c.flagged() {
			errs += " !"
		}
		perRun := strconv.Itoa(c.OpsPerRun)
		if c.RunSeconds > 0 {
			perRun = fmt.Sprintf("%gs", c.RunSeconds)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f/%.2f\t%.2f/%.2f\t%s\t\n",
			c.Scenario, c.ClusterSize, c.Clients, perRun,
			fmtRate(&c.Edgebase), fmtRate(&c.Peer), fmtRatio(c.ThroughputRatio),
			fmtMs(c.Edgebase.P99Ms), fmtMs(c.Peer.P99Ms), fmtRatio(c.P99Ratio),
			fmtNodesCPU(c.Edgebase.Nodes), fmtNodesCPU(c.Peer.Nodes), fmtNodesRSS(c.Edgebase.Nodes), fmtNodesRSS(c.Peer.Nodes),
			c.Edgebase.BenchCPUSecondsPerRun, c.Peer.BenchCPUSecondsPerRun, c.Edgebase.OtherCPUSecondsPerRun, c.Peer.OtherCPUSecondsPerRun, errs)
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func fmtRate(r *sideResult) string {
	if r.Failed != "" {
		return "FAILED"
	}
	return fmt.Sprintf("%.0f [%.0f-%.0f]", r.OpsPerSec, r.OpsPerSecMin, r.OpsPerSecMax)
}

func fmtRatio(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

func fmtNodesCPU(ns []nodeResult) string {
	var s []string
	for _, n := range ns {
		mark := ""
		if n.Leader && len(ns) > 1 {
			mark = "*"
		}
		if n.Unmeasured {
			s = append(s, n.ID+mark+" -")
			continue
		}
		s = append(s, fmt.Sprintf("%s%s %.2f", n.ID, mark, n.CPUSecondsPerRun))
	}
	return strings.Join(s, " ")
}

func fmtNodesRSS(ns []nodeResult) string {
	var s []string
	for _, n := range ns {
		if n.Unmeasured {
			s = append(s, "-")
			continue
		}
		s = append(s, fmt.Sprintf("%.0f", n.PeakRSSMiB))
	}
	return strings.Join(s, "/")
}
