// Package nodetest starts real edgebase nodes in-process for tests: real
// Badger directories, real Raft over loopback TCP, real HTTP servers.
package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

// AdminToken and Secret are what every test cluster uses.
const (
	AdminToken = "test-admin-token"
	Secret     = "test-cluster-secret"
	// SecretKey encrypts TOTP secrets in test clusters (32 bytes in hex).
	SecretKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
)

// Clock is a settable clock shared by every node of a test cluster, so tests
// move time (tickets, TOTP steps, session expiry, rate-limit windows)
// instead of sleeping.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Options shape a test cluster.
type Options struct {
	Voters int // default 1
	Edges  int
	Tuning raftstore.Tuning
	// Verbose sends node logs to the test log (default: only on failure).
	Verbose bool
	// Clock drives the auth service of every node (default: the wall clock).
	Clock auth.Clock
	// Limits overrides the brute-force limits.
	Limits *auth.Limits
	// SessionTTL overrides the session lifetime.
	SessionTTL time.Duration
	// SweepInterval overrides how often the leader sweeps (default: an hour,
	// so that tests sweep explicitly with Accounts.Sweep).
	SweepInterval time.Duration
	// NoSecretKey starts the nodes without a secret key (TOTP off).
	NoSecretKey bool
	// ChangeLogRetention overrides how long the change log keeps changes.
	ChangeLogRetention time.Duration
	// FCMEndpoint points every node's FCM sender at a stand-in.
	FCMEndpoint string
	// PushTuning sizes the push dispatcher.
	PushTuning push.Tuning
}

// Cluster is a set of in-process nodes sharing a cluster secret.
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*Member
}

// Member is one node slot: it keeps its id, ports and data dir across restarts.
type Member struct {
	ID       string
	Edge     bool
	DataDir  string
	HTTPAddr string
	RaftAddr string
	Node     *node.Node // nil while stopped
	logs     *lockedBuffer
}

// URL is the member's HTTP base URL.
func (m *Member) URL() string { return "http://" + m.HTTPAddr }

// FastTuning makes elections and snapshots quick enough for tests on a busy
// 2-core machine without being flaky.
func FastTuning() raftstore.Tuning {
	return raftstore.Tuning{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// cheapHash keeps argon2id real but fast in tests.
var cheapHash = auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

// Start launches a cluster and waits until every node is ready.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Voters == 0 {
		opts.Voters = 1
	}
	if opts.Tuning == (raftstore.Tuning{}) {
		opts.Tuning = FastTuning()
	}
	c := &Cluster{t: t, opts: opts}
	base := t.TempDir()
	taken := map[string]bool{}
	for i := 0; i < opts.Voters+opts.Edges; i++ {
		m := &Member{ID: fmt.Sprintf("n%d", i+1), Edge: i >= opts.Voters, DataDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			HTTPAddr: freeAddr(t, taken), RaftAddr: freeAddr(t, taken), logs: &lockedBuffer{}}
		if m.Edge {
			m.ID = fmt.Sprintf("e%d", i-opts.Voters+1)
		}
		c.Nodes = append(c.Nodes, m)
	}
	t.Cleanup(func() {
		for _, m := range c.Nodes {
			if m.Node != nil {
				m.Node.Kill()
			}
		}
		if t.Failed() || opts.Verbose {
			for _, m := range c.Nodes {
				t.Logf("---- logs of %s ----\n%s", m.ID, m.logs.String())
			}
		}
	})
	for i := range c.Nodes {
		c.StartMember(i)
		if i == 0 {
			c.WaitReady(0, 15*time.Second)
		}
	}
	for i := range c.Nodes {
		c.WaitReady(i, 20*time.Second)
	}
	return c
}

// StartMember (re)starts member i on its ports and data dir.
func (c *Cluster) StartMember(i int) {
	c.t.Helper()
	m := c.Nodes[i]
	var join []string
	if i > 0 {
		for j, o := range c.Nodes {
			if j != i {
				join = append(join, o.URL())
			}
		}
	}
	hp := cheapHash
	var err error
	key := SecretKey
	if c.opts.NoSecretKey {
		key = ""
	}
	sweep := c.opts.SweepInterval
	if sweep == 0 {
		sweep = time.Hour
	}
	// The port may still be in TIME_WAIT after a kill; retry briefly.
	for attempt := 0; attempt < 50; attempt++ {
		m.Node, err = node.Start(node.Config{
			NodeID: m.ID, DataDir: m.DataDir, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr,
			Join: join, Edge: m.Edge, AdminToken: AdminToken, ClusterSecret: Secret,
			Logger: slog.New(slog.NewTextHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Out:    io.Discard, Tuning: c.opts.Tuning, HashParams: &hp,
			Clock: c.opts.Clock, Limits: c.opts.Limits, SessionTTL: c.opts.SessionTTL,
			SweepInterval: sweep, SecretKey: key, ChangeLogRetention: c.opts.ChangeLogRetention,
			FCMEndpoint: c.opts.FCMEndpoint, PushTuning: c.opts.PushTuning,
		})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", m.ID, err)
	}
}

// Kill stops member i abruptly (Raft shutdown without leadership transfer).
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if n := c.Nodes[i].Node; n != nil {
		n.Kill()
		c.Nodes[i].Node = nil
	}
}

// WaitReady polls member i's /readyz until it answers 200.
func (c *Cluster) WaitReady(i int, timeout time.Duration) {
	c.t.Helper()
	m := c.Nodes[i]
	CheckFor(c.t, timeout, 50*time.Millisecond, func() error {
		resp, err := http.Get(m.URL() + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s /readyz: %d", m.ID, resp.StatusCode)
		}
		return nil
	})
}

// Leader returns the index of the member that is leader, polling until one
// of the running members says it is.
func (c *Cluster) Leader(timeout time.Duration) int {
	c.t.Helper()
	leader := -1
	CheckFor(c.t, timeout, 20*time.Millisecond, func() error {
		for i, m := range c.Nodes {
			if m.Node != nil && m.Node.Store.IsLeader() {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no leader among running members")
	})
	return leader
}

// Followers returns the running members other than the leader (voters and edges).
func (c *Cluster) Followers(leader int) []int {
	var out []int
	for i, m := range c.Nodes {
		if i != leader && m.Node != nil {
			out = append(out, i)
		}
	}
	return out
}

// Project is a created project with an owner session.
type Project struct {
	ID, APIKey, OwnerID, OwnerToken string
}

// CreateProject creates a project through member i and logs its owner in.
func (c *Cluster) CreateProject(i int) Project {
	c.t.Helper()
	const pw = "owner password 123"
	var created struct{ ProjectID, APIKey, OwnerID string }
	st := c.Do(i, http.MethodPost, "/admin/projects", map[string]string{"Authorization": "Bearer " + AdminToken},
		map[string]string{"name": "test", "ownerEmail": "owner@example.com", "ownerPassword": pw}, &created)
	if st != http.StatusCreated {
		c.t.Fatalf("create project: status %d", st)
	}
	var login struct{ Token string }
	st = c.Do(i, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": created.ProjectID, "X-API-Key": created.APIKey},
		map[string]string{"action": "login", "email": "owner@example.com", "password": pw}, &login)
	if st != http.StatusOK || login.Token == "" {
		c.t.Fatalf("owner login: status %d", st)
	}
	return Project{ID: created.ProjectID, APIKey: created.APIKey, OwnerID: created.OwnerID, OwnerToken: login.Token}
}

// Do sends a JSON request to member i and decodes a JSON answer into out
// (when non-nil); it returns the status. Transport errors fail the test.
func (c *Cluster) Do(i int, method, path string, headers map[string]string, body any, out any) int {
	c.t.Helper()
	st, b, err := DoJSON(context.Background(), c.Nodes[i].URL(), method, path, headers, body)
	if err != nil {
		c.t.Fatalf("%s %s on %s: %v", method, path, c.Nodes[i].ID, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return st
}

// DoJSON is one JSON request; body nil sends no body.
func DoJSON(ctx context.Context, base, method, path string, headers map[string]string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// CheckFor polls f every step until it returns nil, failing the test with
// f's last error after total.
func CheckFor(t testing.TB, total, step time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", total, err)
		}
		time.Sleep(step)
	}
}

// freeAddr returns a loopback address that is free now and not already in
// taken (the kernel may hand a just-closed port out again, and the cluster's
// nodes only bind theirs later), and adds it to taken.
func freeAddr(t testing.TB, taken map[string]bool) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		if !taken[addr] {
			taken[addr] = true
			return addr
		}
	}
}

// lockedBuffer collects a node's log lines safely across goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("EDGEBASE_TEST_LOGS") == "1" {
		_, _ = os.Stderr.Write(p)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
