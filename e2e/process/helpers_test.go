// Package process runs the real edgebase binary as separate OS processes on
// loopback and kills them with SIGKILL: the multi-process counterpart of the
// in-process node/nodetest harness.
package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
)

const (
	adminToken    = "process-e2e-admin-token"
	clusterSecret = "process-e2e-cluster-secret"
	ownerEmail    = "owner@example.com"
	ownerPassword = "owner password 123"
)

// binPath is the edgebase binary TestMain finds (make test-bins) or builds
// once for the package.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "edgebase-process-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "process e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// No time limit but go test's (it kills the test binary a minute after
	// -timeout): on a loaded machine with a cold cache the build can take
	// minutes. `make test` builds it beforehand.
	binPath, err = testbin.Edgebase(context.Background(), testbin.Options{Dir: tmp, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "process e2e: "+format+"\n", args...)
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "process e2e:", err)
		return 1
	}
	return m.Run()
}

// checkFor calls f every step until it returns nil, failing the test with
// f's last error once total has passed. It returns how long it took.
func checkFor(t *testing.T, total, step time.Duration, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(total)
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if !time.Now().Add(step).Before(deadline) {
			t.Fatalf("condition not met within %v: %v", total, err)
		}
		time.Sleep(step)
	}
}

// ---- HTTP ----

// httpClient is used for every call but the writer's; each call also has a
// context deadline.
var httpClient = &http.Client{Timeout: 15 * time.Second}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) String() string {
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// doJSON sends body (nil: none) as JSON and reads the whole answer, within
// timeout and ctx.
func doJSON(ctx context.Context, client *http.Client, timeout time.Duration, method, u string, headers map[string]string, body any) (*response, error) {
	r, err := proctest.DoJSON(ctx, client, timeout, method, u, headers, body)
	if err != nil {
		return nil, err
	}
	return &response{status: r.Status, header: r.Header, body: r.Body}, nil
}

// ---- processes ----

// proc is one node slot: id, ports, data dir and (in proctest.Proc) flags,
// environment and log survive restarts.
type proc struct {
	*proctest.Proc
	t        *testing.T
	id       string
	dataDir  string
	httpPort int
	raftPort int
}

func (p *proc) url() string { return fmt.Sprintf("http://127.0.0.1:%d", p.httpPort) }

// mustStart launches the process with its flags (the same every time).
func (p *proc) mustStart() {
	p.t.Helper()
	if err := p.Start(); err != nil {
		p.t.Fatal(err)
	}
}

// mustKill9 sends SIGKILL and waits until the process is gone.
func (p *proc) mustKill9() {
	p.t.Helper()
	if err := p.Kill9(); err != nil {
		p.t.Fatal(err)
	}
}

// ---- cluster ----

type clusterOpts struct {
	// env is added to every node's environment (EDGEBASE_* tuning).
	env []string
	// bin is the edgebase binary the nodes run (default: binPath).
	bin string
	// voters is the cluster's size (default 3); args are added to every
	// node's flags.
	voters int
	args   []string
}

type cluster struct {
	t     *testing.T
	ctx   context.Context // the test's deadline
	nodes []*proc
}

func (c *cluster) byID(id string) *proc {
	for _, p := range c.nodes {
		if p.id == id {
			return p
		}
	}
	return nil
}

// newProc is a node slot under base with fresh loopback ports and the flags
// every node of these tests runs with (add --join, TLS or env to taste).
func newProc(t *testing.T, base, id string) *proc {
	p := &proc{t: t, id: id, dataDir: filepath.Join(base, id), httpPort: proctest.FreePort(t), raftPort: proctest.FreePort(t)}
	p.Proc = &proctest.Proc{ID: id, Bin: binPath, LogPath: filepath.Join(base, id+".log")}
	p.Args = []string{"serve",
		"--node-id", p.id,
		"--data-dir", p.dataDir,
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", p.httpPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", p.raftPort),
		"--advertise-http", p.url(),
		"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", p.raftPort),
		"--admin-token", adminToken,
		"--cluster-secret", clusterSecret,
	}
	return p
}

// killAtCleanup kills, when the test ends, every node nodes() returns that
// is still running, and prints the last tail bytes of each one's output when
// the test failed (or always with EDGEBASE_E2E_LOGS=1).
func killAtCleanup(t *testing.T, nodes func() []*proc, tail int64) {
	t.Cleanup(func() {
		for _, p := range nodes() {
			p.KillIfRunning()
		}
		if t.Failed() || os.Getenv("EDGEBASE_E2E_LOGS") == "1" {
			for _, p := range nodes() {
				t.Logf("---- output of %s (%s) ----\n%s", p.id, p.LogPath, p.LogTail(tail))
			}
		}
	})
}

// mustStartCluster starts opts.voters voters (default three): n1
// bootstraps, the others join it. It returns once every node is ready and
// n1 reports them all voters and a leader.
func mustStartCluster(t *testing.T, ctx context.Context, opts clusterOpts) *cluster {
	t.Helper()
	voters := opts.voters
	if voters == 0 {
		voters = 3
	}
	base := t.TempDir()
	c := &cluster{t: t, ctx: ctx}
	for i := 1; i <= voters; i++ {
		p := newProc(t, base, fmt.Sprintf("n%d", i))
		p.Env = opts.env
		if opts.bin != "" {
			p.Bin = opts.bin
		}
		p.Args = append(p.Args, opts.args...)
		c.nodes = append(c.nodes, p)
	}
	for _, p := range c.nodes[1:] {
		p.Args = append(p.Args, "--join", c.nodes[0].url())
	}
	killAtCleanup(t, func() []*proc { return c.nodes }, 48<<10)
	// Start-up bounds are generous: they bound setup, not a property under
	// test, and `make test` runs other packages beside this one on two cores.
	c.nodes[0].mustStart()
	c.mustReady(c.nodes[0], 60*time.Second)
	for _, p := range c.nodes[1:] {
		p.mustStart()
	}
	for _, p := range c.nodes {
		c.mustReady(p, 60*time.Second)
	}
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		st, err := c.clusterStatus(c.nodes[0])
		if err != nil {
			return err
		}
		return st.Healthy(voters, "")
	})
	return c
}

// mustReady polls p's /readyz until it answers 200, failing early when the
// process exits.
func (c *cluster) mustReady(p *proc, total time.Duration) time.Duration {
	c.t.Helper()
	return checkFor(c.t, total, 50*time.Millisecond, func() error {
		if !p.Running() {
			c.t.Fatalf("%s exited while waiting for /readyz: %v\n%s", p.id, p.WaitErr(), p.LogTail(8<<10))
		}
		r, err := doJSON(c.ctx, httpClient, 3*time.Second, http.MethodGet, p.url()+"/readyz", nil, nil)
		if err != nil {
			return fmt.Errorf("%s /readyz: %w", p.id, err)
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("%s /readyz: %s", p.id, r)
		}
		return nil
	})
}

type clusterStatus = proctest.ClusterStatus

// clusterStatus is GET /admin/cluster on p.
func (c *cluster) clusterStatus(p *proc) (*clusterStatus, error) {
	r, err := doJSON(c.ctx, httpClient, 5*time.Second, http.MethodGet, p.url()+"/admin/cluster", map[string]string{"Authorization": "Bearer " + adminToken}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s /admin/cluster: %w", p.id, err)
	}
	if r.status != http.StatusOK {
		return nil, fmt.Errorf("%s /admin/cluster: %s", p.id, r)
	}
	var st clusterStatus
	if err := json.Unmarshal(r.body, &st); err != nil {
		return nil, fmt.Errorf("%s /admin/cluster: decode %q: %w", p.id, r.body, err)
	}
	return &st, nil
}

// mustLeader asks p who leads (polling until a leader is known) and returns
// that node.
func (c *cluster) mustLeader(p *proc, total time.Duration) *proc {
	c.t.Helper()
	var leader *proc
	checkFor(c.t, total, 50*time.Millisecond, func() error {
		st, err := c.clusterStatus(p)
		if err != nil {
			return err
		}
		if leader = c.byID(st.Leader); leader == nil {
			return fmt.Errorf("%s knows no leader: %+v", p.id, *st)
		}
		return nil
	})
	return leader
}

// ---- project and documents ----

type project = proctest.Project

// mustCreateProject runs `edgebase project create --json` against p and logs
// the owner in through p.
func (c *cluster) mustCreateProject(p *proc) project {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	pr, err := proctest.CreateProject(ctx, httpClient, binPath, p.url(), adminToken, "kill-nine", ownerEmail, ownerPassword)
	if err != nil {
		c.t.Fatalf("on %s: %v", p.id, err)
	}
	return pr
}

// doc is a document as the API returns it.
type doc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

// write creates or replaces one document through p and returns it with its
// X-Revision (an error unless the answer is 200/201 with a matching revision).
func (c *cluster) write(p *proc, pr project, coll string, data any) (doc, uint64, error) {
	var d doc
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodPost, p.url()+"/api/db", pr.Headers(),
		map[string]any{"collection": coll, "data": data})
	if err != nil {
		return d, 0, fmt.Errorf("POST /api/db %s on %s: %w", coll, p.id, err)
	}
	if r.status != http.StatusOK && r.status != http.StatusCreated {
		return d, 0, fmt.Errorf("POST /api/db %s on %s: %s", coll, p.id, r)
	}
	if err := json.Unmarshal(r.body, &d); err != nil {
		return d, 0, fmt.Errorf("POST /api/db %s on %s: decode %q: %w", coll, p.id, r.body, err)
	}
	rev, err := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 || rev != d.Revision || d.Collection != coll {
		return d, 0, fmt.Errorf("POST /api/db %s on %s: X-Revision %q, document %+v", coll, p.id, r.header.Get("X-Revision"), d)
	}
	return d, rev, nil
}

// mustWrite is write that fails the test on error.
func (c *cluster) mustWrite(p *proc, pr project, coll string, data any) (doc, uint64) {
	c.t.Helper()
	d, rev, err := c.write(p, pr, coll, data)
	if err != nil {
		c.t.Fatal(err)
	}
	return d, rev
}

// getDoc reads one document from p; query adds e.g. "&consistency=local".
func (c *cluster) getDoc(p *proc, pr project, coll, query string, minRev uint64) (*response, error) {
	h := pr.Headers()
	if minRev > 0 {
		h["X-Min-Revision"] = strconv.FormatUint(minRev, 10)
	}
	return doJSON(c.ctx, httpClient, 15*time.Second, http.MethodGet, p.url()+"/api/db?collection="+url.QueryEscape(coll)+query, h, nil)
}

// mustListAll pages through the direct children of coll on p with
// consistency=local after waiting for minRev (X-Min-Revision on every page).
func (c *cluster) mustListAll(p *proc, pr project, coll string, minRev uint64, pageSize int) []doc {
	c.t.Helper()
	var all []doc
	token := ""
	for page := 0; ; page++ {
		if page > 10000 {
			c.t.Fatalf("list %s on %s: more than 10000 pages", coll, p.id)
		}
		q := fmt.Sprintf("&list=true&consistency=local&limit=%d", pageSize)
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		r, err := c.getDoc(p, pr, coll, q, minRev)
		if err != nil {
			c.t.Fatalf("list %s on %s: %v", coll, p.id, err)
		}
		if r.status != http.StatusOK {
			c.t.Fatalf("list %s on %s (page %d): %s", coll, p.id, page, r)
		}
		var out struct {
			Documents     []doc  `json:"documents"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			c.t.Fatalf("list %s on %s: decode: %v", coll, p.id, err)
		}
		if len(out.Documents) > pageSize {
			c.t.Fatalf("list %s on %s: %d documents on a page of %d", coll, p.id, len(out.Documents), pageSize)
		}
		all = append(all, out.Documents...)
		if out.NextPageToken == "" {
			return all
		}
		if out.NextPageToken == token {
			c.t.Fatalf("list %s on %s: page token did not advance", coll, p.id)
		}
		token = out.NextPageToken
	}
}

// compareListings fails unless every listing equals the first one, field by
// field, and names the first difference.
func compareListings(t *testing.T, names []string, lists [][]doc) {
	t.Helper()
	ref := lists[0]
	for k := 1; k < len(lists); k++ {
		l := lists[k]
		if len(l) != len(ref) {
			t.Errorf("listing on %s has %d documents, on %s %d", names[k], len(l), names[0], len(ref))
		}
		for i := 0; i < len(l) && i < len(ref); i++ {
			a, b := ref[i], l[i]
			if a.Collection != b.Collection || !bytes.Equal(a.Data, b.Data) || a.Revision != b.Revision ||
				a.CreateTime != b.CreateTime || a.UpdateTime != b.UpdateTime {
				t.Errorf("document %d differs: %s has %+v (data %s), %s has %+v (data %s)",
					i, names[0], a, a.Data, names[k], b, b.Data)
				break
			}
		}
	}
}

// treeGeneration reads data-dir/tree/CURRENT (-1 when absent).
func treeGeneration(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "tree", "CURRENT"))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
