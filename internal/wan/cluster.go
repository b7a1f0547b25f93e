package wan

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// Options configure Start.
type Options struct {
	Bin      string                           // edgebase binary (required)
	ProxyBin string                           // wanproxy binary (required): toxiproxy server, module e2e/wanproxy
	Dir      string                           // parent dir for data dirs and logs (required)
	Profile  Profile                          // nil RTT: DefaultProfile() (with this FreeConnect)
	Nodes    []NodeSpec                       // nil: DefaultTopology(); the first bootstraps and must be a voter
	NodeArgs []string                         // extra serve flags for every node (e.g. "--wan")
	Logf     func(format string, args ...any) // nil: discard

	// StartTimeout bounds each wait of Start (a node's /readyz, the
	// cluster's health, the project reaching every node); 0: 60 s.
	StartTimeout time.Duration
}

// node is one node slot: its ports, data dir and process survive Kill and
// Restart.
type node struct {
	spec     NodeSpec
	httpPort int
	raftPort int
	dataDir  string
	proc     *proctest.Proc
}

func (n *node) httpAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.httpPort) }
func (n *node) raftAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.raftPort) }

// Cluster is a running cluster on the simulated network. Its methods are
// safe for concurrent use.
type Cluster struct {
	o       Options
	logf    func(format string, args ...any)
	hc      *http.Client
	ports   proctest.Ports
	proxy   *proctest.Proc
	tp      *toxiproxy
	nodes   []*node
	byID    map[string]*node
	listen  map[link]string // proxy listen address (host:port) of each link
	connect bool            // the binary knows --connect-to

	adminToken, clusterSecret, secretKey string
	projectID, apiKey, ownerToken        string
	ownerEmail, ownerPassword            string

	mu       sync.Mutex
	profile  Profile
	disabled map[link]bool // proxies Partition disabled
	closed   bool
}

// Start starts the wanproxy, creates its proxies, starts every node (the
// first bootstraps; the others join it through their own region's proxy,
// edges with --edge), waits until every node answers /readyz and the
// first node reports every member healthy with a leader, then creates a
// project (and logs its owner in) and waits until every node has applied
// it. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Bin == "" || o.ProxyBin == "" || o.Dir == "" {
		return nil, errors.New("wan: Options.Bin, ProxyBin and Dir are required")
	}
	if o.Profile.RTT == nil {
		free := o.Profile.FreeConnect
		o.Profile = DefaultProfile()
		o.Profile.FreeConnect = free
	}
	if o.Nodes == nil {
		o.Nodes = DefaultTopology()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if err := validateNodes(o.Nodes); err != nil {
		return nil, err
	}
	if err := o.Profile.validate(regionsOf(o.Nodes)); err != nil {
		return nil, err
	}
	c = &Cluster{
		o:             o,
		logf:          o.Logf,
		hc:            &http.Client{Timeout: 30 * time.Second},
		byID:          map[string]*node{},
		listen:        map[link]string{},
		disabled:      map[link]bool{},
		profile:       cloneProfile(o.Profile),
		adminToken:    "wan-admin-" + randomHex(16),
		clusterSecret: "wan-secret-" + randomHex(16),
		secretKey:     randomHex(32),
		ownerEmail:    "wan-owner@example.com",
		ownerPassword: "wan owner password " + randomHex(8),
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	defer func() {
		if err != nil {
			err = c.withLogs(err)
			_ = c.Close()
			c = nil
		}
	}()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return c, fmt.Errorf("wan: %w", err)
	}
	if c.connect, err = HasFlag(ctx, o.Bin, "connect-to"); err != nil {
		return c, err
	}
	if !c.connect {
		c.logf("wan: %s has no --connect-to: node-to-node traffic bypasses the simulated WAN (only clients see it)", o.Bin)
	}
	for _, s := range o.Nodes {
		n := &node{spec: s, dataDir: filepath.Join(o.Dir, s.ID)}
		if n.httpPort, err = c.ports.Get(); err != nil {
			return c, err
		}
		if n.raftPort, err = c.ports.Get(); err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, n)
		c.byID[s.ID] = n
	}
	if err := c.startProxy(ctx); err != nil {
		return c, err
	}
	for i, n := range c.nodes {
		n.proc = &proctest.Proc{ID: n.spec.ID, Bin: o.Bin, Args: c.nodeArgs(n, i == 0),
			Env: []string{"EDGEBASE_SECRET_KEY=" + c.secretKey}, LogPath: filepath.Join(o.Dir, n.spec.ID+".log")}
	}
	// The first node bootstraps and must lead before the others join it.
	if err := c.nodes[0].proc.Start(); err != nil {
		return c, fmt.Errorf("wan: %w", err)
	}
	if err := c.waitReady(ctx, c.nodes[0]); err != nil {
		return c, err
	}
	for _, n := range c.nodes[1:] {
		if err := n.proc.Start(); err != nil {
			return c, fmt.Errorf("wan: %w", err)
		}
	}
	for _, n := range c.nodes[1:] {
		if err := c.waitReady(ctx, n); err != nil {
			return c, err
		}
	}
	if err := c.waitHealthy(ctx, o.StartTimeout); err != nil {
		return c, err
	}
	if err := c.createProject(ctx); err != nil {
		return c, err
	}
	c.logf("wan: %d nodes up, project %s", len(c.nodes), c.projectID)
	return c, nil
}

func validateNodes(specs []NodeSpec) error {
	if len(specs) == 0 {
		return errors.New("wan: no nodes")
	}
	if specs[0].Edge {
		return fmt.Errorf("wan: the first node (%s) bootstraps the cluster and cannot be an edge", specs[0].ID)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if s.ID == "" || s.Region == "" {
			return fmt.Errorf("wan: node %+v needs an ID and a Region", s)
		}
		if seen[s.ID] {
			return fmt.Errorf("wan: node id %s twice", s.ID)
		}
		seen[s.ID] = true
	}
	return nil
}

func regionsOf(specs []NodeSpec) []Region {
	var rs []Region
	for _, s := range specs {
		if !slices.Contains(rs, s.Region) {
			rs = append(rs, s.Region)
		}
	}
	return rs
}

func cloneProfile(p Profile) Profile {
	out := Profile{RTT: make(map[[2]Region]time.Duration, len(p.RTT)), Jitter: p.Jitter, FreeConnect: p.FreeConnect}
	for k, v := range p.RTT {
		out.RTT[k] = v
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// HasFlag reports whether `bin serve` defines the flag --name: it parses
// `serve -name=x -zz-unknown-probe`, which fails on one flag or the other
// and never starts a node (serve's usage text does not list every flag).
func HasFlag(ctx context.Context, bin, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "-"+name+"=x", "-zz-unknown-probe").CombinedOutput()
	if err == nil || ctx.Err() != nil {
		return false, fmt.Errorf("wan: probing %s for --%s: %v: %s", bin, name, err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), "flag provided but not defined: -"+name) {
			return false, nil
		}
	}
	return true, nil
}

// links are every proxy: one per source region, node and port kind.
func (c *Cluster) links() []link {
	var ls []link
	for _, r := range regionsOf(c.o.Nodes) {
		for _, n := range c.nodes {
			for _, k := range []portKind{kindRaft, kindHTTP} {
				ls = append(ls, link{From: r, To: n.spec.ID, Kind: k})
			}
		}
	}
	return ls
}

// upstream is the real address behind a link.
func (c *Cluster) upstream(l link) string {
	n := c.byID[l.To]
	if l.Kind == kindRaft {
		return n.raftAddr()
	}
	return n.httpAddr()
}

// startProxy starts the wanproxy, creates every link's proxy on a reserved
// port and its two latency toxics.
func (c *Cluster) startProxy(ctx context.Context) error {
	c.proxy = &proctest.Proc{ID: "wanproxy", Bin: c.o.ProxyBin, Args: []string{"-host", "127.0.0.1", "-port", "0"},
		LogPath: filepath.Join(c.o.Dir, "wanproxy.log")}
	if err := c.proxy.Start(); err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	var api string
	err := proctest.Poll(ctx, 20*time.Second, func() error {
		if !c.proxy.Running() {
			return proctest.StopPoll{Err: fmt.Errorf("wan: wanproxy exited: %v", c.proxy.WaitErr())}
		}
		if api = apiAddr(c.proxy.LogPath); api == "" {
			return errors.New("wan: wanproxy has not printed its API address")
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.tp = &toxiproxy{base: "http://" + api, hc: c.hc}
	var cfgs []proxyConfig
	for _, l := range c.links() {
		port, err := c.ports.Get()
		if err != nil {
			return err
		}
		c.listen[l] = fmt.Sprintf("127.0.0.1:%d", port)
		cfgs = append(cfgs, proxyConfig{Name: l.name(), Listen: c.listen[l], Upstream: c.upstream(l), Enabled: true})
	}
	if err := c.tp.populate(ctx, cfgs); err != nil {
		return err
	}
	for _, l := range c.links() {
		for _, tc := range linkToxics(c.profile, l.From, c.byID[l.To].spec.Region) {
			err := c.tp.addToxic(ctx, l.name(), tc)
			if err != nil && tc.Type == toxicHandshakeType && !c.profile.FreeConnect {
				// A wanproxy built before the handshake toxic existed.
				c.logf("wan: %s has no handshake toxic (rebuild it: make test-bins): new connections cost no round trip (%v)", c.o.ProxyBin, err)
				c.profile.FreeConnect = true
				err = nil
			}
			if err != nil {
				return err
			}
		}
	}
	c.logf("wan: wanproxy at %s with %d proxies", api, len(cfgs))
	return nil
}

// apiAddr is the address the wanproxy printed ("api host:port") in its log.
func apiAddr(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	addr := ""
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "api "); ok {
			addr = strings.TrimSpace(a) // the last start's
		}
	}
	return addr
}

// nodeArgs are n's serve flags: its real addresses, --connect-to every
// other node's ports through its region's proxies, --join the first node
// through its region's proxy, --edge, then Options.NodeArgs.
func (c *Cluster) nodeArgs(n *node, bootstrap bool) []string {
	args := []string{"serve",
		"--node-id", n.spec.ID,
		"--data-dir", n.dataDir,
		"--http-addr", n.httpAddr(),
		"--raft-addr", n.raftAddr(),
		"--advertise-http", "http://" + n.httpAddr(),
		"--advertise-raft", n.raftAddr(),
		"--admin-token", c.adminToken,
		"--cluster-secret", c.clusterSecret,
	}
	if c.connect {
		if m := c.connectTo(n); m != "" {
			args = append(args, "--connect-to", m)
		}
	}
	if !bootstrap {
		args = append(args, "--join", c.url(n.spec.Region, c.nodes[0].spec.ID))
	}
	if n.spec.Edge {
		args = append(args, "--edge")
	}
	return append(args, c.o.NodeArgs...)
}

// connectTo is n's --connect-to value: every other node's real HTTP and
// Raft address to the proxy from n's region.
func (c *Cluster) connectTo(n *node) string {
	var pairs []string
	for _, o := range c.nodes {
		if o == n {
			continue
		}
		for _, k := range []portKind{kindRaft, kindHTTP} {
			l := link{From: n.spec.Region, To: o.spec.ID, Kind: k}
			pairs = append(pairs, c.upstream(l)+"="+c.listen[l])
		}
	}
	return strings.Join(pairs, ",")
}

// waitReady polls n's /readyz (directly) until it answers 200.
func (c *Cluster) waitReady(ctx context.Context, n *node) error {
	err := proctest.Poll(ctx, c.o.StartTimeout, func() error {
		if !n.proc.Running() {
			return proctest.StopPoll{Err: fmt.Errorf("%s exited: %v", n.spec.ID, n.proc.WaitErr())}
		}
		r, err := proctest.DoJSON(ctx, c.hc, 5*time.Second, http.MethodGet, c.DirectURL(n.spec.ID)+"/readyz", nil, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("/readyz: %s", r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("wan: %s not ready: %w", n.spec.ID, err)
	}
	return nil
}

// status is GET /admin/cluster on node (directly).
func (c *Cluster) status(ctx context.Context, id string) (*proctest.ClusterStatus, error) {
	r, err := proctest.DoJSON(ctx, c.hc, 10*time.Second, http.MethodGet, c.DirectURL(id)+"/admin/cluster",
		map[string]string{"Authorization": "Bearer " + c.adminToken}, nil)
	if err != nil {
		return nil, fmt.Errorf("wan: GET /admin/cluster on %s: %w", id, err)
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("wan: GET /admin/cluster on %s: %s", id, r)
	}
	var st proctest.ClusterStatus
	if err := json.Unmarshal(r.Body, &st); err != nil {
		return nil, fmt.Errorf("wan: GET /admin/cluster on %s: %w", id, err)
	}
	return &st, nil
}

// running are the nodes whose process runs.
func (c *Cluster) running() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.proc != nil && n.proc.Running() {
			out = append(out, n)
		}
	}
	return out
}

// healthy checks st: every node of the topology a member (voters as
// voters, edges as non-voters), every voter leader or follower, a leader
// among them.
func (c *Cluster) healthy(st *proctest.ClusterStatus) error {
	voters := 0
	for _, n := range c.nodes {
		m := st.Node(n.spec.ID)
		if m == nil {
			return fmt.Errorf("%s is not a member", n.spec.ID)
		}
		if m.Voter == n.spec.Edge {
			return fmt.Errorf("%s: voter=%v, want %v", n.spec.ID, m.Voter, !n.spec.Edge)
		}
		if !n.spec.Edge {
			voters++
		}
	}
	return st.Healthy(voters, "")
}

// waitHealthy polls /admin/cluster on the running nodes until one reports
// the whole topology healthy with a leader.
func (c *Cluster) waitHealthy(ctx context.Context, total time.Duration) error {
	err := proctest.Poll(ctx, total, func() error {
		var errs []error
		for _, n := range c.running() {
			if n.spec.Edge {
				continue
			}
			st, err := c.status(ctx, n.spec.ID)
			if err == nil {
				err = c.healthy(st)
			}
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", n.spec.ID, err))
		}
		if len(errs) == 0 {
			return errors.New("no voter is running")
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("wan: cluster not healthy: %w", err)
	}
	return nil
}

// WaitHealthy waits (at most total) until a running voter reports every
// node of the topology a member, every voter leader or follower and a
// leader (for a test that restarted a node).
func (c *Cluster) WaitHealthy(ctx context.Context, total time.Duration) error {
	return c.waitHealthy(ctx, total)
}

// createProject makes the cluster's project through the leader, logs its
// owner in and waits until every node has applied it.
func (c *Cluster) createProject(ctx context.Context) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	base := c.DirectURL(leader)
	r, err := proctest.DoJSON(ctx, c.hc, 30*time.Second, http.MethodPost, base+"/admin/projects",
		map[string]string{"Authorization": "Bearer " + c.adminToken},
		map[string]string{"name": "wan-" + randomHex(4), "ownerEmail": c.ownerEmail, "ownerPassword": c.ownerPassword})
	if err != nil {
		return fmt.Errorf("wan: create project: %w", err)
	}
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		return fmt.Errorf("wan: create project: %s", r)
	}
	var created struct {
		ProjectID string `json:"projectId"`
		APIKey    string `json:"apiKey"`
	}
	if err := json.Unmarshal(r.Body, &created); err != nil || created.ProjectID == "" || created.APIKey == "" {
		return fmt.Errorf("wan: create project: unexpected answer %s", r)
	}
	c.projectID, c.apiKey = created.ProjectID, created.APIKey
	r, err = proctest.DoJSON(ctx, c.hc, 30*time.Second, http.MethodPost, base+"/api/auth",
		map[string]string{"X-Project-Id": c.projectID, "X-API-Key": c.apiKey},
		map[string]string{"action": "login", "email": c.ownerEmail, "password": c.ownerPassword})
	if err != nil {
		return fmt.Errorf("wan: owner login: %w", err)
	}
	var login struct {
		Token string `json:"token"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &login) != nil || login.Token == "" {
		return fmt.Errorf("wan: owner login: %s", r)
	}
	c.ownerToken = login.Token
	return c.WaitApplied(ctx, c.o.StartTimeout)
}

// WaitApplied waits (at most total) until every running node has applied
// the leader's applied index as it was when called.
func (c *Cluster) WaitApplied(ctx context.Context, total time.Duration) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	target, err := c.metric(ctx, leader, "edgebase_raft_applied_index")
	if err != nil {
		return err
	}
	for _, n := range c.running() {
		err := proctest.Poll(ctx, total, func() error {
			v, err := c.metric(ctx, n.spec.ID, "edgebase_raft_applied_index")
			if err != nil {
				return err
			}
			if v < target {
				return fmt.Errorf("applied %v < %v", v, target)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("wan: %s has not caught up with %s: %w", n.spec.ID, leader, err)
		}
	}
	return nil
}

// metric is the value of the unlabelled gauge name on node's /metrics.
func (c *Cluster) metric(ctx context.Context, id, name string) (float64, error) {
	r, err := proctest.DoJSON(ctx, c.hc, 10*time.Second, http.MethodGet, c.DirectURL(id)+"/metrics", nil, nil)
	if err != nil {
		return 0, fmt.Errorf("wan: GET /metrics on %s: %w", id, err)
	}
	if r.Status != http.StatusOK {
		return 0, fmt.Errorf("wan: GET /metrics on %s: %d", id, r.Status)
	}
	v, err := parseMetric(string(r.Body), name)
	if err != nil {
		return 0, fmt.Errorf("wan: /metrics on %s: %w", id, err)
	}
	return v, nil
}

// parseMetric finds the sample of the unlabelled metric name in a
// Prometheus text exposition.
func parseMetric(text, name string) (float64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("no sample of %s", name)
}

// Close stops every node (SIGTERM, then SIGKILL after 10 s) and the
// wanproxy, and drops the port reservations. The data dirs and logs stay
// in Options.Dir.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, n := range c.nodes {
		if n.proc == nil {
			continue
		}
		wg.Go(func() { errs[i] = stop(n.proc, 10*time.Second) })
	}
	wg.Wait()
	if c.proxy != nil {
		errs = append(errs, stop(c.proxy, 5*time.Second))
	}
	c.ports.Release()
	c.hc.CloseIdleConnections()
	return errors.Join(errs...)
}

// stop ends a running process: SIGTERM, SIGKILL after grace.
func stop(p *proctest.Proc, grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil && p.Running() {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(grace):
	}
	if err := p.Kill9(); err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	return fmt.Errorf("wan: %s did not exit within %v of SIGTERM: killed", p.ID, grace)
}

// withLogs adds the last output of every node that exited to err.
func (c *Cluster) withLogs(err error) error {
	for _, n := range c.nodes {
		if n.proc != nil && !n.proc.Running() && n.proc.Done() != nil {
			err = fmt.Errorf("%w\n---- last output of %s ----\n%s", err, n.spec.ID, n.proc.LogTail(4<<10))
		}
	}
	if c.proxy != nil && !c.proxy.Running() && c.proxy.Done() != nil {
		err = fmt.Errorf("%w\n---- last output of the wanproxy ----\n%s", err, c.proxy.LogTail(4<<10))
	}
	return err
}
