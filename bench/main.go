// Command bench is edgebase's load generator and scenario runner. It starts
// its own clusters of the real binary on loopback (or uses running nodes
// given with --target), warms up, runs each scenario several times and prints
// one table (or JSON) of throughput, latency percentiles, CPU seconds and
// peak RSS per node. It speaks only the public HTTP API.
//
//	go run ./bench                       # every scenario, 1-node and 3-node clusters
//	go run ./bench --nodes 3 --scenarios W2,R2 --runs 5
//	go run ./bench --compare --nodes 1,3 --scenarios W1,W2,R1,R2,S1   # against etcd, interleaved
//	go run ./bench --nodes 1 --scenarios Q1,Q2,Q3 --peer pocketbase   # queries against PocketBase
//	go run ./bench --peer pocketbase --runs 3                         # Q1,Q2,W1,W64,HOT,R64,L32,RT, 1 node against PocketBase
//	go run ./bench --target http://127.0.0.1:8080,http://127.0.0.1:8081 --admin-token T
//	go run ./bench --wan --wan-quick --wan-args "--wan"                   # issue 24: edge nodes on a simulated WAN (wan.go)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
)

type options struct {
	nodes       []int
	scenarios   []*scenario
	ops         int // 0: each scenario's default
	runs        int
	warmup      int // -1: a tenth of the ops
	clients     int
	valueSize   int
	docs        int
	accounts    int
	subscribers int     // realtime scenarios: WebSocket subscribers
	jsDocs      int     // JS: documents of the SDK memory measurement
	rate        float64 // RT1/RT1F: writes per second
	json        bool
	targets     []string
	adminToken  string
	allowRemote bool
	bin         string
	keep        bool
	reqTimeout  time.Duration
	runTimeout  time.Duration
	serveArgs   []string
	devices     int           // P1: devices registered for the fan-out
	schedules   int           // P2: schedules per run
	fcmLatency  time.Duration // push: the FCM stand-in's answer time per message
	fcm         *fcmfake.Server
	// compare: run the compared workloads (compared) against edgebase and
	// etcd, interleaved (compare.go).
	compare  bool
	compared []compareSpec
	etcdBin  string
	// peer: the compared system, peerEtcd (--compare) or peerPocketBase;
	// solo: selected scenarios without a counterpart there, run on
	// edgebase alone in the same pass (Q3 with PocketBase).
	peer  string
	solo  []*scenario
	pbBin string
	// Query scenarios (query.go): documents of Q1 and Q2, and how long
	// each of their runs lasts.
	q1Docs        int
	q2Docs        int
	queryDuration time.Duration
	// Q3 (query_live.go): the live query's subscribers, its writes per
	// second and the share of them that move a document in or out.
	q3Subscribers int
	q3Rate        float64
	// wan: the WAN measurements (--wan, wan.go) instead of the scenarios.
	wan wanOptions
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "1,3", "cluster sizes to start, comma-separated (--peer pocketbase: 1 unless given)")
	scen := fs.String("scenarios", "", "scenarios to run, comma-separated (default all: "+strings.Join(scenarioNames(), ",")+")")
	fs.IntVar(&o.ops, "ops", 0, "measured operations per run (default: per scenario, see --list)")
	fs.IntVar(&o.runs, "runs", 3, "measured runs per scenario")
	fs.IntVar(&o.warmup, "warmup", -1, "warm-up operations before the runs (default: a tenth of --ops)")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients of the multi-client scenarios")
	fs.IntVar(&o.valueSize, "value-size", 256, "bytes of the value each written document holds")
	fs.IntVar(&o.docs, "docs", 1000, "documents written up front for the read scenarios")
	fs.IntVar(&o.accounts, "accounts", 64, "end-user accounts registered up front for the login scenarios")
	fs.IntVar(&o.jsDocs, "js-docs", 10000, "documents held by the SDK subscription of the JS scenario (whose heap it measures) and of JSC (whose cache it measures)")
	fs.IntVar(&o.subscribers, "subscribers", 1000, "WebSocket subscribers of the realtime scenarios (RT*), all connected to one node")
	fs.Float64Var(&o.rate, "rate", 10, "writes per second of the paced realtime scenarios (RT1, RT1F)")
	fs.BoolVar(&o.json, "json", false, "print the results as one JSON object on stdout (the table goes to stderr)")
	target := fs.String("target", "", "comma-separated URLs of a running cluster's nodes to use instead of starting one")
	fs.StringVar(&o.adminToken, "admin-token", "", "admin token of the --target cluster")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow --target URLs that are not loopback addresses")
	fs.StringVar(&o.bin, "bin", "", "edgebase binary to run (default: go build ./cmd/edgebase into a temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (data and node logs)")
	fs.DurationVar(&o.reqTimeout, "request-timeout", 10*time.Second, "timeout of one HTTP request")
	fs.DurationVar(&o.runTimeout, "run-timeout", 60*time.Second, "a run stops (and is flagged) after this long")
	fs.IntVar(&o.devices, "devices", 20000, "P1: devices registered up front (100 per user) that every fan-out reaches")
	fs.IntVar(&o.schedules, "schedules", 200, "P2: schedules per run, due over the next 10 seconds")
	fs.DurationVar(&o.fcmLatency, "fcm-latency", 5*time.Millisecond, "push: the FCM stand-in answers each message after this long")
	serveArgs := fs.String("serve-args", "", "extra flags for every started node, space-separated (e.g. \"--raft-snapshot-threshold 4096\")")
	fs.BoolVar(&o.compare, "compare", false, "run --scenarios ("+strings.Join(compareNames(peerEtcd), ",")+"; S1 = our RT1F) against edgebase and a Debian etcd cluster of the same size, interleaved, and print the ratios (= --peer etcd)")
	fs.StringVar(&o.peer, "peer", "", "compare against this peer: etcd (as --compare) or pocketbase (--scenarios "+strings.Join(compareNames(peerPocketBase), ",")+" side by side with one PocketBase process, built from bench/pocketbase; other selected scenarios, e.g. Q3, run on edgebase alone in the same pass)")
	fs.StringVar(&o.etcdBin, "etcd", "", "etcd binary for --compare (default "+etcdBin+" or etcd on PATH)")
	fs.StringVar(&o.pbBin, "pocketbase-bin", "", "the PocketBase peer's binary for --peer pocketbase (default: go build bench/pocketbase, cached under the temporary directory)")
	fs.IntVar(&o.q1Docs, "q1-docs", 100000, "Q1: documents of the indexed collection")
	fs.IntVar(&o.q2Docs, "q2-docs", 5000, "Q2: documents of the collection without an index")
	fs.DurationVar(&o.queryDuration, "query-duration", 10*time.Second, "Q1, Q2: how long each run (each round of both systems) lasts")
	fs.IntVar(&o.q3Subscribers, "q3-subscribers", 1000, "Q3: live-query subscribers")
	fs.Float64Var(&o.q3Rate, "q3-rate", 10, "Q3: writes per second (10% move a document in or out of the window)")
	o.wan.register(fs)
	list := fs.Bool("list", false, "list the scenarios and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := o.wan.finish(); err != nil {
		return nil, err
	}
	nodesGiven := false
	fs.Visit(func(f *flag.Flag) { nodesGiven = nodesGiven || f.Name == "nodes" })
	if o.peer == peerPocketBase && !nodesGiven {
		*nodes = "1" // PocketBase is one process: one edgebase node against it
	}
	if *list {
		for _, s := range scenarios {
			if s.Timed {
				fmt.Fprintf(stderr, "%-4s  %9s  %s\n", s.Name, "timed", s.What)
				continue
			}
			fmt.Fprintf(stderr, "%-4s  %5d ops  %s\n", s.Name, s.DefaultOps, s.What)
		}
		for _, cs := range compareSpecs {
			if s, ok := findOursScenario(cs.Ours); ok && isPBPeerScenario(s) {
				fmt.Fprintf(stderr, "%-4s  %5d ops  edgebase's side of --peer pocketbase --scenarios %s: %s\n", s.Name, s.DefaultOps, cs.Name, s.What)
			}
		}
		return nil, errListed
	}
	for _, f := range strings.Split(*nodes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 9 {
			return nil, fmt.Errorf("--nodes: %q is not a cluster size from 1 to 9", f)
		}
		o.nodes = append(o.nodes, n)
	}
	compareGiven := o.compare
	switch o.peer {
	case "":
		if o.compare {
			o.peer = peerEtcd
		}
	case peerEtcd, peerPocketBase:
		o.compare = true
	default:
		return nil, fmt.Errorf("--peer: %q is not etcd or pocketbase", o.peer)
	}
	if o.compare && o.peer != peerEtcd && compareGiven {
		return nil, errors.New("--compare is --peer etcd: give one of them")
	}
	names := scenarioNames()
	if o.compare {
		names = compareNames(o.peer)
	}
	if strings.TrimSpace(*scen) != "" {
		names = strings.Split(*scen, ",")
	}
	if o.compare {
		var ours []string
		for _, name := range names {
			name = strings.ToUpper(strings.TrimSpace(name))
			cs, ok := findCompareSpec(name, o.peer)
			if !ok {
				// With PocketBase, a query scenario without a counterpart
				// (Q3) runs on edgebase alone in the same pass.
				if s, found := findScenario(name); found && o.peer == peerPocketBase && strings.HasPrefix(name, "Q") {
					o.solo = append(o.solo, s)
					continue
				}
				return nil, fmt.Errorf("--scenarios: %q cannot be compared with %s (have %s)", name, o.peer, strings.Join(compareNames(o.peer), ","))
			}
			o.compared = append(o.compared, cs)
			ours = append(ours, cs.Ours)
		}
		names = ours
	}
	find := findScenario
	if o.compare {
		find = findOursScenario // the end-user sides of the PocketBase comparisons too
	}
	for _, name := range names {
		s, ok := find(strings.ToUpper(strings.TrimSpace(name)))
		if !ok {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ","))
		}
		o.scenarios = append(o.scenarios, s)
	}
	for _, u := range strings.Split(*target, ",") {
		if u = strings.TrimSpace(u); u != "" {
			if !o.allowRemote {
				if err := checkLoopback(u); err != nil {
					return nil, err
				}
			}
			o.targets = append(o.targets, u)
		}
	}
	o.serveArgs = strings.Fields(*serveArgs)
	switch {
	case len(o.targets) > 0 && o.compare:
		return nil, errors.New("--compare starts its own clusters: it does not take --target")
	case len(o.targets) > 0 && o.adminToken == "":
		return nil, errors.New("--target needs --admin-token (the bench creates a project)")
	case len(o.targets) == 0 && len(o.nodes) == 0:
		return nil, errors.New("--nodes names no cluster size")
	case len(o.scenarios) == 0 && len(o.solo) == 0:
		return nil, errors.New("--scenarios names no scenario")
	case o.q1Docs < qLimit || o.q2Docs < qLimit || o.q3Subscribers < 1 || o.queryDuration <= 0 || !(o.q3Rate > 0 && o.q3Rate <= 1000):
		return nil, fmt.Errorf("--q1-docs and --q2-docs must be at least %d, --q3-subscribers and --query-duration positive, --q3-rate from above 0 to 1000", qLimit)
	case o.ops < 0 || o.runs < 1 || o.clients < 1 || o.valueSize < 0 || o.docs < 1 || o.accounts < 1 || o.subscribers < 1 || o.jsDocs < 1:
		return nil, errors.New("--ops, --runs, --clients, --value-size, --docs, --accounts and --subscribers must be positive")
	case !(o.rate > 0 && o.rate <= 100000):
		return nil, errors.New("--rate must be above 0 (writes per second)")
	case o.valueSize > 900<<10:
		return nil, errors.New("--value-size must stay below the 1 MiB document limit")
	case o.reqTimeout <= 0 || o.runTimeout <= 0:
		return nil, errors.New("timeouts must be positive")
	case o.devices < 1 || o.devices > fcmfake.MaxDeliveries || o.schedules < 1 || o.fcmLatency < 0:
		return nil, fmt.Errorf("--devices must be from 1 to %d, --schedules positive, --fcm-latency not negative", fcmfake.MaxDeliveries)
	}
	return o, nil
}

var errListed = errors.New("listed")

func scenarioNames() []string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.Name)
	}
	return n
}

// maxClients is the most concurrent clients any selected scenario uses.
func (o *options) maxClients() int {
	n := 1
	for _, s := range slices.Concat(o.scenarios, o.solo) {
		n = max(n, s.Clients(o))
	}
	return n
}

func (o *options) opsFor(s *scenario) int {
	if s.Timed {
		return 0
	}
	if s.Ops != nil {
		return s.Ops(o)
	}
	if o.ops > 0 {
		return o.ops
	}
	return s.DefaultOps
}

func (o *options) warmupFor(s *scenario) int {
	if s.Timed {
		// A timed scenario's warm-up is one run (none with --warmup 0).
		if o.warmup == 0 {
			return 0
		}
		return 1
	}
	if o.warmup >= 0 {
		return o.warmup
	}
	if s.Ops != nil {
		return o.opsFor(s)
	}
	return max(o.opsFor(s)/10, 1)
}

// report is the whole output (the --json shape).
type report struct {
	Machine machineInfo `json:"machine"`
	Command string      `json:"command"`
	Started string      `json:"started"`
	Seconds float64     `json:"seconds"`
	// LoadStart and LoadEnd are the 1-minute load averages around the run.
	LoadStart string    `json:"loadAverageStart,omitempty"`
	LoadEnd   string    `json:"loadAverageEnd,omitempty"`
	Runs      int       `json:"runs"`
	Results   []*result `json:"results"`
	// Comparisons: --compare's rows (edgebase and etcd side by side).
	Comparisons []*comparison `json:"comparisons,omitempty"`
}

type runResult struct {
	Ops    int `json:"ops"`
	Errors int `json:"errors"`
	// Shed counts 503 answers with Retry-After in scenarios that expect
	// them (A2): the node refusing work under overload. Not errors.
	Shed        int     `json:"shed,omitempty"`
	WallSeconds float64 `json:"wallSeconds"`
	OpsPerSec   float64 `json:"opsPerSec"`
	TimedOut    bool    `json:"timedOut,omitempty"`
	// Realtime scenarios: Ops are deliveries; these are the writes behind
	// them and the connections the node cut during the run.
	Writes       int     `json:"writes,omitempty"`
	WritesPerSec float64 `json:"writesPerSec,omitempty"`
	Cuts         int     `json:"cuts,omitempty"`
}

type nodeResult struct {
	ID               string  `json:"id"`
	Leader           bool    `json:"leader"`
	CPUSecondsPerRun float64 `json:"cpuSecondsPerRun"`
	// CPUSystemSecondsPerRun is the kernel's share of CPUSecondsPerRun
	// (syscalls: fsync, network).
	CPUSystemSecondsPerRun float64 `json:"cpuSystemSecondsPerRun"`
	PeakRSSMiB             float64 `json:"peakRssMiB"`
	// StartRSSMiB is the resident set when the measured runs began (where
	// the peak was reset to): what the peak grew from.
	StartRSSMiB float64 `json:"startRssMiB,omitempty"`
	// PeakIsLifetime: the peak could not be reset before the runs, so it is
	// the process's peak since it started.
	PeakIsLifetime bool `json:"peakIsLifetime,omitempty"`
	// Unmeasured: not a process the bench started (--target): no CPU or RSS.
	Unmeasured bool `json:"unmeasured,omitempty"`
}

type result struct {
	ClusterSize  int            `json:"clusterSize"`
	Scenario     string         `json:"scenario"`
	What         string         `json:"what"`
	Target       string         `json:"target"`
	Clients      int            `json:"clients"`
	OpsPerRun    int            `json:"opsPerRun"`
	Warmup       int            `json:"warmupOps"`
	Runs         []runResult    `json:"runs"`
	Ops          int            `json:"ops"`
	Errors       int            `json:"errors"`
	ErrorKinds   map[string]int `json:"errorKinds,omitempty"`
	Shed         int            `json:"shed,omitempty"`
	ShedKinds    map[string]int `json:"shedKinds,omitempty"`
	OpsPerSec    float64        `json:"opsPerSec"` // median run
	OpsPerSecMin float64        `json:"opsPerSecMin"`
	OpsPerSecMax float64        `json:"opsPerSecMax"`
	P50Ms        float64        `json:"p50Ms"`
	P95Ms        float64        `json:"p95Ms"`
	P99Ms        float64        `json:"p99Ms"`
	P999Ms       float64        `json:"p999Ms"`
	MeanMs       float64        `json:"meanMs"`
	MaxMs        float64        `json:"maxMs"`
	Nodes        []nodeResult   `json:"nodes,omitempty"`
	// BenchCPUSecondsPerRun is the load generator's own CPU: on a small
	// machine it competes with the nodes.
	BenchCPUSecondsPerRun float64 `json:"benchCpuSecondsPerRun"`
	// OtherCPUSecondsPerRun is the machine's busy CPU time not spent by
	// the nodes or the bench: other processes competing for the CPUs.
	OtherCPUSecondsPerRun float64 `json:"otherCpuSecondsPerRun"`
	// Realtime: the realtime scenarios' own figures (deliveries, missed,
	// cuts, memory per connection).
	Realtime *rtResult `json:"realtime,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
	Failed   string    `json:"failed,omitempty"`

	// Push: the push scenarios' own figures (per-run throughput, history
	// check, duplicates, connections to the FCM stand-in, lateness).
	Push *pushResult `json:"push,omitempty"`

	// SlowSubscriber: S2's p99 of W2 with and without the slow subscriber.
	SlowSubscriber *slowResult `json:"slowSubscriber,omitempty"`

	// JS: the JavaScript SDK subscriber's ramps and heap (jssdk.go).
	JS *jsResult `json:"js,omitempty"`

	// JSCache: the JavaScript SDK's persistent cache costs (jscache.go).
	JSCache *jscResult `json:"jsCache,omitempty"`
	// Triggers: TRG's own figures (webhooks/s, commit-to-webhook latency, duplicates, missing; triggers.go).
	Triggers *trgResult `json:"triggers,omitempty"`
}

func (r *result) flagged() bool { return r.Errors > 0 || r.Failed != "" || r.timedOut() }

func (r *result) timedOut() bool {
	for _, x := range r.Runs {
		if x.TimedOut {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, errListed) {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	rep := &report{Started: started.UTC().Format(time.RFC3339), Runs: o.runs,
		Command: "go run ./bench" + quoteArgs(args), LoadStart: loadAverage()}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }

	root, err := repoRoot(ctx)
	if err != nil && (o.bin == "" && len(o.targets) == 0) {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.Machine = machine(ctx, root)
	if o.wan.enabled {
		return runWAN(ctx, o, root, stdout, stderr)
	}

	hc := newHTTPClient(o)
	stopFCM, err := startFCMStandIn(o, logf)
	if err != nil {
		fmt.Fprintln(stderr, "bench: FCM stand-in:", err)
		return 1
	}
	defer stopFCM()
	if len(o.targets) > 0 {
		c, err := attachCluster(ctx, hc, o.targets, o.adminToken)
		if err != nil {
			fmt.Fprintln(stderr, "bench: --target:", err)
			return 1
		}
		logf("bench: using %d running node(s), leader %s", len(c.nodes), c.leader.id)
		rep.Results = append(rep.Results, benchCluster(ctx, hc, c, o, logf)...)
	} else {
		tmp, err := os.MkdirTemp("", "edgebase-bench-")
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		if o.keep {
			logf("bench: keeping %s", tmp)
		} else {
			defer func() { _ = os.RemoveAll(tmp) }()
		}
		bin := o.bin
		if bin == "" {
			bin = filepath.Join(tmp, "edgebase")
			t := time.Now()
			if err := buildBinary(ctx, root, bin); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return 1
			}
			logf("bench: built %s in %v", bin, time.Since(t).Round(time.Millisecond))
		}
		peerBin := o.etcdBin
		switch {
		case o.peer == peerEtcd && peerBin == "":
			if peerBin, err = findEtcd(); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return 1
			}
		case o.peer == peerPocketBase && len(o.compared) > 0:
			if peerBin = o.pbBin; peerBin == "" {
				if peerBin, err = buildPocketBase(ctx, root, logf); err != nil {
					fmt.Fprintln(stderr, "bench:", err)
					return 1
				}
			}
		}
		for _, size := range o.nodes {
			if ctx.Err() != nil {
				break
			}
			if o.compare {
				cmps, solo, err := compareCluster(ctx, hc, bin, peerBin, tmp, size, o, logf)
				if err != nil {
					fmt.Fprintln(stderr, "bench:", err)
					return 1
				}
				rep.Comparisons = append(rep.Comparisons, cmps...)
				rep.Results = append(rep.Results, solo...)
				hc.CloseIdleConnections()
				continue
			}
			dir := filepath.Join(tmp, fmt.Sprintf("cluster%d", size))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return 1
			}
			t := time.Now()
			c, err := startCluster(ctx, hc, bin, dir, size, o.serveArgs)
			if err != nil {
				fmt.Fprintf(stderr, "bench: start %d-node cluster: %v\n", size, err)
				return 1
			}
			logf("bench: %d-node cluster ready in %v, leader %s", size, time.Since(t).Round(time.Millisecond), c.leader.id)
			rep.Results = append(rep.Results, benchCluster(ctx, hc, c, o, logf)...)
			c.stop()
			hc.CloseIdleConnections()
		}
	}
	rep.Seconds = time.Since(started).Seconds()
	rep.LoadEnd = loadAverage()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted")
	}

	table := stdout
	if o.json {
		table = stderr
	}
	printTable(table, rep)
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	for _, r := range rep.Results {
		if r.flagged() {
			return 1
		}
	}
	for _, c := range rep.Comparisons {
		if c.flagged() {
			return 1
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// quoteArgs renders args for the report (quoted only where needed).
func quoteArgs(args []string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			a = strconv.Quote(a)
		}
		b.WriteString(a)
	}
	return b.String()
}

// newHTTPClient keeps enough idle keep-alive connections per node for every
// client, so that runs measure requests, not TCP handshakes.
func newHTTPClient(o *options) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // loopback: never through a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no total limit
		MaxIdleConnsPerHost: 2*o.maxClients() + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: o.reqTimeout + 30*time.Second}
}

// benchCluster runs every selected scenario against one cluster.
func benchCluster(ctx context.Context, hc *http.Client, c *cluster, o *options, logf func(string, ...any)) []*result {
	size := len(c.nodes)
	var out []*result
	pr, err := createProject(ctx, hc, c)
	if err != nil {
		for _, s := range o.scenarios {
			out = append(out, &result{ClusterSize: size, Scenario: s.Name, What: s.What, Failed: err.Error()})
		}
		logf("bench: %d-node cluster: %v", size, err)
		return out
	}
	e := newEnv(hc, c, pr, o)
	e.log = logf
	defer e.close()
	for _, s := range o.scenarios {
		if ctx.Err() != nil {
			break
		}
		r := runScenario(ctx, e, s, logf)
		if s.Realtime == nil {
			for _, n := range c.nodes {
				e.used[n] = true
			}
		}
		out = append(out, r)
		if r.Failed != "" {
			logf("bench: [%d nodes] %s failed: %s", size, s.Name, r.Failed)
		}
	}
	return out
}

// runScenario prepares, warms up, runs and measures one scenario.
func runScenario(ctx context.Context, e *env, s *scenario, logf func(string, ...any)) *result {
	o, c := e.o, e.c
	r := &result{ClusterSize: len(c.nodes), Scenario: s.Name, What: s.What, Target: s.Target(e),
		Clients: s.Clients(o), OpsPerRun: o.opsFor(s), Warmup: o.warmupFor(s), ErrorKinds: map[string]int{}, ShedKinds: map[string]int{}}
	if !c.leaderKnown {
		r.Notes = append(r.Notes, "the leader is none of the --target URLs: leader traffic went to "+c.leader.url)
	}
	if len(c.nodes) == 1 && strings.Contains(r.Target, "single node") {
		r.Notes = append(r.Notes, s.Name+" on one node: no followers, so it ran against the only node")
	}
	if s.Prepare != nil {
		if err := s.Prepare(ctx, e); err != nil {
			r.Failed = "prepare: " + err.Error()
			return r
		}
	}
	c.settle(ctx, e.hc)
	runFn := func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
		return runOnce(ctx, e, s, r.Clients, ops)
	}
	var rt *rtSession
	if s.Realtime != nil {
		// Connect the subscribers once: warm-up and runs write to them all.
		var err error
		if rt, err = startRealtime(ctx, e, s, logf); err != nil {
			r.Failed = "subscribers: " + err.Error()
			return r
		}
		defer rt.close(logf)
		runFn = rt.run
	}
	if s.Run != nil {
		runFn = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
			return s.Run(ctx, e, s, ops)
		}
	}
	if r.Warmup > 0 {
		w, _, kinds, _ := runFn(ctx, r.Warmup)
		if w.Errors > 0 {
			logf("bench: [%d nodes] %s warm-up: %d errors %v", len(c.nodes), s.Name, w.Errors, kinds)
		}
		c.settle(ctx, e.hc)
	}

	cpu0, reset := make([]cpuTime, len(c.nodes)), make([]bool, len(c.nodes))
	rss0 := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		if pid := n.pid(); pid > 0 {
			cpu0[i], _ = cpuSeconds(pid)
			reset[i] = resetPeakRSS(pid)
			rss0[i], _ = currentRSS(pid)
		}
	}
	self0, _ := cpuSeconds(0)
	sys0, sysErr := systemCPU()

	var all histogram
	var rates []float64
	for run := 1; run <= o.runs && ctx.Err() == nil; run++ {
		rr, h, kinds, shed := runFn(ctx, o.opsFor(s))
		if ctx.Err() != nil {
			break // interrupted: not a result
		}
		if rr.TimedOut {
			r.Notes = append(r.Notes, fmt.Sprintf("run %d stopped by --run-timeout after %d ops", run, rr.Ops+rr.Errors))
		}
		r.Runs = append(r.Runs, rr)
		all.merge(h)
		rates = append(rates, rr.OpsPerSec)
		r.Ops += rr.Ops
		r.Errors += rr.Errors
		for k, v := range kinds {
			r.ErrorKinds[k] += v
		}
		r.Shed += rr.Shed
		for k, v := range shed {
			r.ShedKinds[k] += v
		}
		shedNote := ""
		if s.ExpectShed {
			shedNote = fmt.Sprintf(", %d shed (503)", rr.Shed)
		}
		if rt != nil {
			shedNote = fmt.Sprintf(" (%d writes = %.0f/s, %d cuts)", rr.Writes, rr.WritesPerSec, rr.Cuts)
		}
		logf("bench: [%d nodes] %s run %d/%d: %d ops in %.2fs = %.0f ops/s, p50 %s p95 %s p99 %s, %d errors%s",
			len(c.nodes), s.Name, run, o.runs, rr.Ops, rr.WallSeconds, rr.OpsPerSec,
			fmtDur(h.percentile(50)), fmtDur(h.percentile(95)), fmtDur(h.percentile(99)), rr.Errors, shedNote)
		c.settle(ctx, e.hc)
	}
	if ctx.Err() != nil && len(r.Runs) < o.runs {
		if len(r.Runs) == 0 {
			r.Failed = "interrupted before a run completed"
			return r
		}
		r.Notes = append(r.Notes, fmt.Sprintf("interrupted after %d of %d runs", len(r.Runs), o.runs))
	}
	runs := float64(max(len(r.Runs), 1))
	self1, _ := cpuSeconds(0)
	r.BenchCPUSecondsPerRun = self1.sub(self0).total() / runs
	sys1, err := systemCPU()
	other := (sys1 - sys0) / runs
	if sysErr != nil || err != nil {
		other = 0
	}
	other -= r.BenchCPUSecondsPerRun
	for i, n := range c.nodes {
		nr := nodeResult{ID: n.id, Leader: n == c.leader}
		if pid := n.pid(); pid > 0 {
			if cpu1, err := cpuSeconds(pid); err == nil {
				d := cpu1.sub(cpu0[i])
				nr.CPUSecondsPerRun = d.total() / runs
				nr.CPUSystemSecondsPerRun = round(d.system/runs, 2)
				other -= nr.CPUSecondsPerRun
			}
			if p, err := peakRSS(pid); err == nil {
				nr.PeakRSSMiB = float64(p) / (1 << 20)
			}
			nr.StartRSSMiB = round(float64(rss0[i])/(1<<20), 1)
			nr.PeakIsLifetime = !reset[i]
		} else {
			nr.Unmeasured = true
		}
		r.Nodes = append(r.Nodes, nr)
	}
	r.OtherCPUSecondsPerRun = round(max(other, 0), 2)
	r.BenchCPUSecondsPerRun = round(r.BenchCPUSecondsPerRun, 2)
	for i := range r.Nodes {
		r.Nodes[i].CPUSecondsPerRun = round(r.Nodes[i].CPUSecondsPerRun, 2)
		r.Nodes[i].PeakRSSMiB = round(r.Nodes[i].PeakRSSMiB, 1)
	}
	if len(r.ErrorKinds) == 0 {
		r.ErrorKinds = nil
	}
	if len(r.ShedKinds) == 0 {
		r.ShedKinds = nil
	}
	if len(rates) > 0 {
		r.OpsPerSec, r.OpsPerSecMin, r.OpsPerSecMax = median(rates), slices.Min(rates), slices.Max(rates)
	}
	r.P50Ms, r.P95Ms = ms(all.percentile(50)), ms(all.percentile(95))
	r.P99Ms, r.P999Ms = ms(all.percentile(99)), ms(all.percentile(99.9))
	r.MeanMs, r.MaxMs = ms(all.mean()), ms(all.max())
	if rt != nil {
		r.Realtime = rt.summary(r)
		r.Notes = append(r.Notes, rt.notes...)
	}
	if s.Summary != nil {
		s.Summary(e, s, r)
	}
	return r
}

// runOnce performs ops operations of s with clients concurrent clients,
// bounded by --run-timeout. Failed operations count as errors (by kind)
// and add no latency sample; throughput counts successful operations. In a
// scenario that expects shedding, a 503 with Retry-After is counted as shed
// (by kind, not an error) and its client waits the Retry-After.
func runOnce(ctx context.Context, e *env, s *scenario, clients, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	rctx, cancel := context.WithTimeout(ctx, e.o.runTimeout)
	defer cancel()
	hs := make([]histogram, clients)
	kinds := make([]map[string]int, clients)
	sheds := make([]map[string]int, clients)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		kinds[c], sheds[c] = map[string]int{}, map[string]int{}
		hs[c].samples = make([]time.Duration, 0, ops/clients+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(ops) || rctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := s.Op(rctx, e, c, int(i))
				d := time.Since(t0)
				switch {
				case err == nil:
					hs[c].add(d)
				case rctx.Err() != nil:
					// cut by the run deadline or an interrupt: neither a result nor an error
				default:
					var oe *opError
					isOp := errors.As(err, &oe)
					switch {
					case isOp && oe.shed && s.ExpectShed:
						sheds[c][oe.kind]++
						if oe.retryAfter > 0 {
							select {
							case <-rctx.Done():
							case <-time.After(oe.retryAfter):
							}
						}
					case isOp:
						kinds[c][oe.kind]++
					default:
						kinds[c][err.Error()]++
					}
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var all histogram
	merged, shed := map[string]int{}, map[string]int{}
	rr := runResult{WallSeconds: wall.Seconds(), TimedOut: rctx.Err() != nil && ctx.Err() == nil}
	for c := range clients {
		all.merge(&hs[c])
		for k, v := range kinds[c] {
			merged[k] += v
			rr.Errors += v
		}
		for k, v := range sheds[c] {
			shed[k] += v
			rr.Shed += v
		}
	}
	rr.Ops = all.count()
	rr.OpsPerSec = round(throughput(rr.Ops, wall), 1)
	rr.WallSeconds = round(rr.WallSeconds, 3)
	return rr, &all, merged, shed
}

// ---- machine ----

type machineInfo struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpuModel,omitempty"`
	MemTotalMiB int64  `json:"memTotalMiB,omitempty"`
	OS          string `json:"os"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"goVersion"`
	Commit      string `json:"commit,omitempty"`
	Dirty       bool   `json:"dirty,omitempty"`
}

func machine(ctx context.Context, root string) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if f := strings.Fields(line); len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					m.MemTotalMiB = kb / 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if root != "" {
		cmd := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD")
		cmd.Dir = root
		if b, err := cmd.Output(); err == nil {
			m.Commit = strings.TrimSpace(string(b))
		}
		cmd = exec.CommandContext(ctx, "git", "status", "--porcelain")
		cmd.Dir = root
		if b, err := cmd.Output(); err == nil {
			m.Dirty = len(strings.TrimSpace(string(b))) > 0
		}
	}
	return m
}

// ---- table ----

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtMs(x float64) string { return fmtDur(time.Duration(x * float64(time.Millisecond))) }

func printTable(w io.Writer, rep *report) {
	m := rep.Machine
	fmt.Fprintf(w, "edgebase bench, %s, %.0fs\n", rep.Started, rep.Seconds)
	model := ""
	if m.CPUModel != "" {
		model = " (" + m.CPUModel + ")"
	}
	fmt.Fprintf(w, "machine: %d CPUs%s, %.1f GiB RAM, %s, kernel %s\n", m.CPUs, model, float64(m.MemTotalMiB)/1024, m.OS, m.Kernel)
	commit := m.Commit
	if m.Dirty {
		commit += " (working tree has uncommitted changes)"
	}
	fmt.Fprintf(w, "go: %s, commit: %s\n", m.GoVersion, commit)
	fmt.Fprintf(w, "command: %s\n", rep.Command)
	if rep.LoadStart != "" {
		fmt.Fprintf(w, "load average: %s at start, %s at end\n", rep.LoadStart, rep.LoadEnd)
	}
	fmt.Fprintf(w, "ops: successful measured ops of all runs; ops/s: median of %d runs [min-max]; latencies over all measured ops; CPU: seconds per run per node (* leader), of the bench itself, and of every other process on the machine; RSS: peak MiB during the runs\n\n", rep.Runs)

	if len(rep.Results) == 0 {
		printCompareTable(w, rep)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "nodes\tscen\tclients\ttarget\tops\terrors\tops/s\t[min-max]\tp50\tp95\tp99\tp99.9\tnode CPU s\tpeak RSS MiB\tbench CPU s\tother CPU s\t")
	var notes []string
	for _, r := range rep.Results {
		errs := strconv.Itoa(r.Errors)
		if r.flagged() {
			errs += " !"
		}
		if r.Failed != "" {
			fmt.Fprintf(tw, "%d\t%s\t\t\t\t!\tFAILED\t\t\t\t\t\t\t\t\t\t\n", r.ClusterSize, r.Scenario)
			notes = append(notes, fmt.Sprintf("%d nodes %s: FAILED: %s", r.ClusterSize, r.Scenario, r.Failed))
			continue
		}
		var cpu, rss []string
		for _, n := range r.Nodes {
			mark := ""
			if n.Leader && len(r.Nodes) > 1 {
				mark = "*"
			}
			if n.Unmeasured {
				cpu = append(cpu, fmt.Sprintf("%s%s -", n.ID, mark))
				rss = append(rss, "-")
				continue
			}
			cpu = append(cpu, fmt.Sprintf("%s%s %.2f", n.ID, mark, n.CPUSecondsPerRun))
			lifetime := ""
			if n.PeakIsLifetime {
				lifetime = "^"
			}
			rss = append(rss, fmt.Sprintf("%.0f%s", n.PeakRSSMiB, lifetime))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%.0f\t[%.0f-%.0f]\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t\n",
			r.ClusterSize, r.Scenario, r.Clients, r.Target, r.Ops, errs, r.OpsPerSec, r.OpsPerSecMin, r.OpsPerSecMax,
			fmtMs(r.P50Ms), fmtMs(r.P95Ms), fmtMs(r.P99Ms), fmtMs(r.P999Ms), strings.Join(cpu, " "), strings.Join(rss, "/"), r.BenchCPUSecondsPerRun, r.OtherCPUSecondsPerRun)
		for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
			notes = append(notes, fmt.Sprintf("%d nodes %s: %d × %s", r.ClusterSize, r.Scenario, r.ErrorKinds[k], k))
		}
		for _, k := range slices.Sorted(maps.Keys(r.ShedKinds)) {
			notes = append(notes, fmt.Sprintf("%d nodes %s: %d × %s with Retry-After: load shed, expected here, not an error", r.ClusterSize, r.Scenario, r.ShedKinds[k], k))
		}
		for _, n := range r.Notes {
			notes = append(notes, fmt.Sprintf("%d nodes %s: %s", r.ClusterSize, r.Scenario, n))
		}
	}
	_ = tw.Flush()
	printRealtimeTable(w, rep)
	printPushTable(w, rep)
	printCompareTable(w, rep)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	for _, r := range rep.Results {
		for _, n := range r.Nodes {
			if n.PeakIsLifetime {
				fmt.Fprintln(w, "note: ^ peak RSS since the process started (the peak could not be reset)")
				return
			}
		}
	}
}
