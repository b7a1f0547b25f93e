package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
)

const (
	adminToken    = "robustness-admin-token"
	clusterSecret = "robustness-cluster-secret"
	ownerEmail    = "owner@example.com"
	ownerPassword = "owner password 123"

	// electionTimeout is every node's --raft-election-timeout: short, so a
	// run sees several elections in a few seconds.
	electionTimeout = 500 * time.Millisecond
)

// builds holds the binaries TestMain builds (or copies from make test-bins'
// directory): the product, and on demand the deliberately broken one for the
// negative test.
type builds struct {
	root string // the module root
	dir  string // where binaries go (world-readable: nodes run as other users)

	good string

	brokenOnce sync.Once
	broken     string
	brokenErr  error
}

var bins builds

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		fmt.Fprintf(os.Stderr, "robustness: cannot locate go.mod (go env GOMOD: %q, %v)\n", gomod, err)
		return 1
	}
	bins.root = filepath.Dir(gomod)
	dir, err := os.MkdirTemp("", "edgebase-robustness-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		return 1
	}
	bins.dir = dir
	if bins.good, err = build(); err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		return 1
	}
	return m.Run()
}

// build returns ./cmd/edgebase built with the given build tags, in bins.dir:
// copied from $EDGEBASE_TEST_BIN_DIR (make test-bins) when it is there, else
// built with no time limit but go test's (a cold build on a loaded machine
// can take minutes).
func build(tags ...string) (string, error) {
	return testbin.Edgebase(context.Background(), testbin.Options{Tags: tags, Dir: bins.dir, Copy: true, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "robustness: "+format+"\n", args...)
	}})
}

// brokenBinary is edgebase built with -tags brokenreads: followers answer
// strong reads from their local state without asking the leader.
func brokenBinary(t *testing.T) string {
	t.Helper()
	bins.brokenOnce.Do(func() { bins.broken, bins.brokenErr = build("brokenreads") })
	if bins.brokenErr != nil {
		t.Fatal(bins.brokenErr)
	}
	return bins.broken
}

// freePort returns a loopback port reserved for this test process
// (proctest.FreePort); taken records the cluster's ports.
func freePort(t *testing.T, taken map[int]bool) int {
	t.Helper()
	p := proctest.FreePort(t)
	taken[p] = true
	return p
}

// ---- one node ----

// node is one node slot: its process (see proctest.Proc), id, role, ports
// and data dir survive restarts.
type node struct {
	*proctest.Proc
	id       string
	voter    bool
	uid      int // 0: the test's own user
	dataDir  string
	httpPort int
	raftPort int
}

func (n *node) url() string { return fmt.Sprintf("http://127.0.0.1:%d", n.httpPort) }

// ---- the cluster ----

type clusterOpts struct {
	bin   string   // edgebase binary (default: the product)
	extra []string // flags added to every node's serve command
	env   []string // added to every node's environment
	// tmpfs gives these nodes (by id) a data dir on a tmpfs of the given
	// size in MiB, which a test can fill (root only).
	tmpfs map[string]int
}

// cluster is three voters (n1 bootstraps, n2 and n3 join) and one edge node.
type cluster struct {
	t     *testing.T
	ctx   context.Context
	bin   string
	base  string
	nodes []*node
	net   *netFaults // nil when partitions cannot be made here
	http  *http.Client
	pr    project
}

func (c *cluster) voters() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.voter {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) byID(id string) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// startCluster starts the four nodes, waits until all are ready and n1 sees
// three voters and a leader, and creates the project the clients use.
func startCluster(t *testing.T, ctx context.Context, opts clusterOpts) *cluster {
	t.Helper()
	base, err := os.MkdirTemp("", "edgebase-robustness-run-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	c := &cluster{t: t, ctx: ctx, bin: opts.bin, base: base,
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	if c.bin == "" {
		c.bin = bins.good
	}
	asRoot := os.Geteuid() == 0
	taken := map[int]bool{}
	for i, id := range []string{"n1", "n2", "n3", "e1"} {
		n := &node{id: id, voter: id != "e1", dataDir: filepath.Join(base, id),
			httpPort: freePort(t, taken), raftPort: freePort(t, taken)}
		n.Proc = &proctest.Proc{ID: id, Bin: c.bin, LogPath: filepath.Join(base, id+".log"), Env: opts.env}
		if asRoot {
			// Each node runs as its own user so that iptables can tell its
			// connections apart (see netFaults).
			n.uid = 42101 + i
			n.UID = n.uid
			if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if mib := opts.tmpfs[id]; mib > 0 {
				if err := mountTmpfs(n.dataDir, mib, n.uid); err != nil {
					t.Skipf("no tmpfs for %s here: %v", id, err)
				}
				dir := n.dataDir
				t.Cleanup(func() {
					if err := unmount(dir); err != nil {
						t.Errorf("unmount %s: %v", dir, err)
					}
				})
			}
			if err := os.Chown(n.dataDir, n.uid, n.uid); err != nil {
				t.Fatal(err)
			}
		}
		n.Args = []string{"serve",
			"--node-id", id,
			"--data-dir", n.dataDir,
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", n.httpPort),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", n.raftPort),
			"--advertise-http", n.url(),
			"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", n.raftPort),
			"--admin-token", adminToken,
			"--cluster-secret", clusterSecret,
			"--raft-election-timeout", electionTimeout.String(),
		}
		if id != "n1" {
			n.Args = append(n.Args, "--join", c.nodes[0].url())
		}
		if id == "e1" {
			n.Args = append(n.Args, "--edge")
		}
		n.Args = append(n.Args, opts.extra...)
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(c.shutdown)
	if asRoot {
		nf, err := newNetFaults(c.nodes)
		if err != nil {
			t.Logf("network partitions are not available here: %v", err)
		} else {
			c.net = nf
			t.Cleanup(func() {
				if err := nf.close(); err != nil {
					t.Errorf("remove iptables rules: %v", err)
				}
			})
		}
	}
	if err := c.nodes[0].Start(); err != nil {
		t.Fatal(err)
	}
	// Start-up bounds are generous: they bound setup, not a property under
	// test, and `make test` runs other packages beside this one on two cores.
	c.mustReady(c.nodes[0], 60*time.Second)
	for _, n := range c.nodes[1:] {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		c.mustReady(n, 60*time.Second)
	}
	c.checkFor(60*time.Second, "three voters and a leader", func() error {
		st, err := c.status(c.nodes[0])
		if err != nil {
			return err
		}
		return st.Healthy(3, "")
	})
	c.pr = c.mustCreateProject(c.nodes[0])
	return c
}

// shutdown resumes and kills every node, and prints their logs when the
// test failed.
func (c *cluster) shutdown() {
	for _, n := range c.nodes {
		n.KillIfRunning()
	}
	if c.t.Failed() || os.Getenv("EDGEBASE_ROBUSTNESS_LOGS") == "1" {
		for _, n := range c.nodes {
			c.t.Logf("---- last output of %s (%s) ----\n%s", n.id, n.LogPath, n.LogTail(12<<10))
		}
	}
}

// checkFor calls f every 50ms until it returns nil, failing the test with
// f's last error once total has passed.
func (c *cluster) checkFor(total time.Duration, what string, f func() error) {
	c.t.Helper()
	if err := waitFor(c.ctx, total, f); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor calls f every 50ms until it returns nil; the error is f's last
// one once total has passed.
func waitFor(ctx context.Context, total time.Duration, f func() error) error {
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", total, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mustReady polls n's /readyz until 200, failing early if the process exits.
func (c *cluster) mustReady(n *node, total time.Duration) {
	c.t.Helper()
	c.checkFor(total, n.id+" ready", func() error {
		if !n.Running() {
			c.t.Fatalf("%s exited while waiting for /readyz: %v\n%s", n.id, n.WaitErr(), n.LogTail(8<<10))
		}
		r, err := c.do(n, 3*time.Second, http.MethodGet, "/readyz", nil, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("/readyz: %s", r)
		}
		return nil
	})
}

// restart starts n again and waits until it is ready.
func (c *cluster) restart(n *node) {
	c.t.Helper()
	if err := n.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mustReady(n, 60*time.Second)
}

// ---- HTTP ----

type response = proctest.Response

// do sends body (nil: none) as JSON to n and reads the whole answer.
func (c *cluster) do(n *node, timeout time.Duration, method, path string, headers map[string]string, body any) (*response, error) {
	r, err := proctest.DoJSON(c.ctx, c.http, timeout, method, n.url()+path, headers, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, n.id, err)
	}
	return r, nil
}

type clusterStatus = proctest.ClusterStatus

// status is GET /admin/cluster on n.
func (c *cluster) status(n *node) (*clusterStatus, error) {
	r, err := c.do(n, 3*time.Second, http.MethodGet, "/admin/cluster", map[string]string{"Authorization": "Bearer " + adminToken}, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("%s /admin/cluster: %s", n.id, r)
	}
	var st clusterStatus
	if err := json.Unmarshal(r.Body, &st); err != nil {
		return nil, fmt.Errorf("%s /admin/cluster: decode %q: %w", n.id, r.Body, err)
	}
	return &st, nil
}

// leader asks the given nodes in turn who leads and returns the first
// answer that names a running, unpaused voter.
func (c *cluster) leader(total time.Duration, askVia ...*node) *node {
	c.t.Helper()
	if len(askVia) == 0 {
		askVia = c.voters()
	}
	var leader *node
	c.checkFor(total, "a known leader", func() error {
		var errs []error
		for _, n := range askVia {
			st, err := c.status(n)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if l := c.byID(st.Leader); l != nil && l.Running() && !l.Paused() {
				leader = l
				return nil
			}
			errs = append(errs, fmt.Errorf("%s names leader %q", n.id, st.Leader))
		}
		return errors.Join(errs...)
	})
	return leader
}

// ---- project ----

type project = proctest.Project

// mustCreateProject runs `edgebase project create --json` against n and logs
// the owner in.
func (c *cluster) mustCreateProject(n *node) project {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	pr, err := proctest.CreateProject(ctx, c.http, c.bin, n.url(), adminToken, "robustness", ownerEmail, ownerPassword)
	if err != nil {
		c.t.Fatalf("on %s: %v", n.id, err)
	}
	return pr
}
