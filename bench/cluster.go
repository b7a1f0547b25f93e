package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// benchNode is one edgebase process the bench started, or one --target URL.
type benchNode struct {
	id      string // node id (from /admin/cluster for targets, when known)
	url     string // base URL, no trailing slash
	dataDir string
	logPath string

	cmd  *exec.Cmd // nil for --target nodes
	done chan struct{}
	mu   sync.Mutex
	err  error // the process's exit status once done is closed
}

func (n *benchNode) pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *benchNode) running() bool {
	if n.cmd == nil {
		return true
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// logTail is the last max bytes of a started node's output.
func (n *benchNode) logTail(max int64) string {
	if n.logPath == "" {
		return ""
	}
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if int64(len(b)) > max {
		b = b[int64(len(b))-max:]
	}
	return string(b)
}

// cluster is the set of nodes a bench pass runs against.
type cluster struct {
	nodes      []*benchNode
	external   bool // --target: not started (and not stopped) by us
	adminToken string
	leader     *benchNode // the node that led when the pass began
	// leaderKnown is false when the leader is none of the --target URLs:
	// then "leader" traffic goes to the first target, which forwards.
	leaderKnown bool
}

// followers are the nodes other than the leader; on a single node, the node.
func (c *cluster) followers() []*benchNode {
	var out []*benchNode
	for _, n := range c.nodes {
		if n != c.leader {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = append(out, c.leader)
	}
	return out
}

// repoRoot is the directory of the module's go.mod.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("cannot locate go.mod (run from inside the repository): go env GOMOD = %q, %v", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

// buildBinary compiles ./cmd/edgebase (static, like the release build) to out.
// Only ctx bounds it: a cold build on a loaded 2-core machine can take
// minutes, and an interrupt (ctx) still stops it.
func buildBinary(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/edgebase")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/edgebase: %v\n%s", err, b)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCluster starts size nodes of bin on loopback under dir: n1 bootstraps,
// the others join it. It returns once every node is ready and n1 reports
// size voters and a leader. On error the nodes already started are stopped.
func startCluster(ctx context.Context, hc *http.Client, bin, dir string, size int, extra []string) (c *cluster, err error) {
	c = &cluster{adminToken: "bench-admin-" + randomHex(16)}
	secret := "bench-secret-" + randomHex(16)
	defer c.stopOnError(&err)
	for i := 1; i <= size; i++ {
		httpPort, err := freePort()
		if err != nil {
			return c, err
		}
		raftPort, err := freePort()
		if err != nil {
			return c, err
		}
		id := fmt.Sprintf("n%d", i)
		n := &benchNode{id: id, url: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
			dataDir: filepath.Join(dir, id), logPath: filepath.Join(dir, id+".log")}
		args := []string{"serve",
			"--node-id", id,
			"--data-dir", n.dataDir,
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", raftPort),
			"--advertise-http", n.url,
			"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", raftPort),
			"--admin-token", c.adminToken,
			"--cluster-secret", secret,
			"--log-level", "warn",
			// TRG's webhook receiver listens on loopback in the bench.
			"--allow-private-webhooks", "127.0.0.1",
		}
		if i > 1 {
			args = append(args, "--join", c.nodes[0].url)
		}
		args = append(args, extra...)
		c.nodes = append(c.nodes, n)
		if err := n.start(bin, args); err != nil {
			return c, err
		}
		if i == 1 {
			// The others join through n1, so it must lead first.
			if err := c.waitReady(ctx, hc, n, 30*time.Second); err != nil {
				return c, err
			}
		}
	}
	for _, n := range c.nodes {
		if err := c.waitReady(ctx, hc, n, 30*time.Second); err != nil {
			return c, err
		}
	}
	if err := c.findLeader(ctx, hc, size, 30*time.Second); err != nil {
		return c, err
	}
	return c, nil
}

// start runs the binary with args, its output appended to the node's log.
// --dev is never passed: the bench creates its own project.
func (n *benchNode) start(bin string, args []string) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	fmt.Fprintf(f, "==== %s: edgebase %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	// Only the bench configures the node: ignore EDGEBASE_* in our environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EDGEBASE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The bench registers its users from one address: no registration
	// limit (an environment variable, which older binaries ignore).
	cmd.Env = append(cmd.Env, "EDGEBASE_REGISTER_LIMIT_ADDR=0")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(n.done)
	}()
	return nil
}

// stop ends the processes we started: SIGTERM, then SIGKILL after 10 s.
// stopOnError, deferred by the cluster starters, stops a cluster that did not
// start (*err set) and adds the last output of every node that exited to
// the error.
func (c *cluster) stopOnError(err *error) {
	if *err == nil {
		return
	}
	for _, n := range c.nodes {
		if tail := n.logTail(4 << 10); tail != "" && !n.running() {
			*err = fmt.Errorf("%w\n---- last output of %s ----\n%s", *err, n.id, tail)
		}
	}
	c.stop()
}

func (c *cluster) stop() {
	if c == nil || c.external {
		return
	}
	for _, n := range c.nodes {
		if n.cmd != nil && n.running() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(10 * time.Second)
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.done:
		case <-deadline:
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.done
		}
	}
}

// exitedWhileStarting is a poll-stopping error when n's process has
// exited (what names the kind of process, e.g. "etcd "), else nil.
func (n *benchNode) exitedWhileStarting(what string) error {
	if n.running() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return proctest.StopPoll{Err: fmt.Errorf("%s%s exited while starting: %v", what, n.id, n.err)}
}

// waitReady polls n's /readyz until it answers 200.
func (c *cluster) waitReady(ctx context.Context, hc *http.Client, n *benchNode, total time.Duration) error {
	return proctest.Poll(ctx, total, func() error {
		if err := n.exitedWhileStarting(""); err != nil {
			return err
		}
		r, err := call(ctx, hc, http.MethodGet, n.url+"/readyz", nil, nil)
		if err != nil {
			return fmt.Errorf("%s /readyz: %w", n.id, err)
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("%s /readyz: %s", n.id, r)
		}
		return nil
	})
}

type memberStatus struct {
	ID           string `json:"id"`
	HTTPAddr     string `json:"httpAddr"`
	Voter        bool   `json:"voter"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

type clusterStatus struct {
	Leader string         `json:"leader"`
	Nodes  []memberStatus `json:"nodes"`
}

// status is GET /admin/cluster on n.
func (c *cluster) status(ctx context.Context, hc *http.Client, n *benchNode) (*clusterStatus, error) {
	r, err := call(ctx, hc, http.MethodGet, n.url+"/admin/cluster", map[string]string{"Authorization": "Bearer " + c.adminToken}, nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/cluster on %s: %s", n.url, r)
	}
	var st clusterStatus
	if err := json.Unmarshal(r.body, &st); err != nil {
		return nil, fmt.Errorf("GET /admin/cluster on %s: %w", n.url, err)
	}
	return &st, nil
}

// findLeader waits until the first node reports voters healthy voters (0:
// any number) and a leader, names the nodes after their members (for
// --target) and sets c.leader. A leader that is none of our nodes leaves
// c.leader at the first node.
func (c *cluster) findLeader(ctx context.Context, hc *http.Client, voters int, total time.Duration) error {
	var st *clusterStatus
	err := proctest.Poll(ctx, total, func() error {
		var err error
		if st, err = c.status(ctx, hc, c.nodes[0]); err != nil {
			return err
		}
		if st.Leader == "" {
			return fmt.Errorf("no leader yet")
		}
		n := 0
		for _, m := range st.Nodes {
			if m.Voter {
				n++
				if m.State != "leader" && m.State != "follower" {
					return fmt.Errorf("member %s is %s", m.ID, m.State)
				}
			}
		}
		if voters > 0 && n != voters {
			return fmt.Errorf("%d voters, want %d", n, voters)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.leader = c.nodes[0]
	for _, n := range c.nodes {
		for _, m := range st.Nodes {
			if sameURL(m.HTTPAddr, n.url) {
				n.id = m.ID
			}
		}
		if n.id == st.Leader {
			c.leader, c.leaderKnown = n, true
		}
	}
	return nil
}

// settle waits (at most 10 s) until every member has applied the same index,
// so that one scenario's replication backlog does not land on the next.
func (c *cluster) settle(ctx context.Context, hc *http.Client) {
	_ = proctest.Poll(ctx, 10*time.Second, func() error {
		st, err := c.status(ctx, hc, c.leader)
		if err != nil {
			return err
		}
		for _, m := range st.Nodes {
			if m.AppliedIndex != st.Nodes[0].AppliedIndex {
				return fmt.Errorf("members differ")
			}
		}
		return nil
	})
}

func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// attachCluster uses running nodes (--target) instead of starting any.
func attachCluster(ctx context.Context, hc *http.Client, urls []string, adminToken string) (*cluster, error) {
	c := &cluster{external: true, adminToken: adminToken}
	for i, u := range urls {
		c.nodes = append(c.nodes, &benchNode{id: fmt.Sprintf("target%d", i+1), url: strings.TrimRight(u, "/")})
	}
	for _, n := range c.nodes {
		if err := c.waitReady(ctx, hc, n, 10*time.Second); err != nil {
			return nil, err
		}
	}
	if err := c.findLeader(ctx, hc, 0, 10*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// checkLoopback refuses a target that is not a loopback address.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--target %q is not an http(s) URL", raw)
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--target %q is not a loopback address (pass --allow-remote to bench another machine)", raw)
}

// project is the bench's project and its owner's session.
type project struct {
	ID, APIKey, Token string
}

// createProject makes a project through POST /admin/projects and logs its
// owner in through POST /api/auth.
func createProject(ctx context.Context, hc *http.Client, c *cluster) (project, error) {
	var pr project
	email, password := "bench-owner@example.com", "bench owner password "+randomHex(8)
	r, err := call(ctx, hc, http.MethodPost, c.leader.url+"/admin/projects",
		map[string]string{"Authorization": "Bearer " + c.adminToken},
		map[string]string{"name": "bench-" + randomHex(4), "ownerEmail": email, "ownerPassword": password})
	if err != nil {
		return pr, fmt.Errorf("create project: %w", err)
	}
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		return pr, fmt.Errorf("create project: %s", r)
	}
	var created struct {
		ProjectID string `json:"projectId"`
		APIKey    string `json:"apiKey"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil || created.ProjectID == "" || created.APIKey == "" {
		return pr, fmt.Errorf("create project: unexpected answer %s", r)
	}
	pr.ID, pr.APIKey = created.ProjectID, created.APIKey
	r, err = call(ctx, hc, http.MethodPost, c.leader.url+"/api/auth",
		map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "login", "email": email, "password": password})
	if err != nil {
		return pr, fmt.Errorf("owner login: %w", err)
	}
	var login struct {
		RequiresTotp bool   `json:"requiresTotp"`
		Token        string `json:"token"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &login) != nil || login.Token == "" || login.RequiresTotp {
		return pr, fmt.Errorf("owner login: %s", r)
	}
	pr.Token = login.Token
	return pr, nil
}

// ---- plain HTTP for setup calls ----

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) String() string {
	b := bytes.TrimSpace(r.body)
	if len(b) > 300 {
		b = append(b[:300:300], "..."...)
	}
	return fmt.Sprintf("%d %s", r.status, b)
}

// call sends body (nil: none) as JSON and reads the answer, within 30 s.
func call(ctx context.Context, hc *http.Client, method, u string, headers map[string]string, body any) (*response, error) {
	r, err := proctest.DoJSON(ctx, hc, 30*time.Second, method, u, headers, body)
	if err != nil {
		return nil, err
	}
	return &response{status: r.Status, header: r.Header, body: r.Body}, nil
}
