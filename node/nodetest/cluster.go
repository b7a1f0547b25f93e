// Package nodetest starts real edgebase nodes in-process for tests: real
// Badger directories, real Raft over loopback TCP, real HTTP servers.
package nodetest

import (
	"context"
	"crypto/x509"
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
	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/triggers"
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
	// RecentLogin overrides the recent-login window of second-factor changes.
	RecentLogin time.Duration
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
	// TLS serves every node's HTTP port over HTTPS with a certificate from
	// the cluster's throwaway CA (Cluster.CA); node-to-node calls trust it.
	TLS bool
	// RaftTLS wraps the Raft transport in mutual TLS with that CA.
	RaftTLS bool
	// CORSOrigins are the operator's browser origins (--cors-origins).
	CORSOrigins []string
	// QueryScanLimit is --query-scan-limit (0: the default, 10,000); tests
	// set it small to reach index_required with few documents.
	QueryScanLimit int
	// HashQueue is --hash-queue (0: the default, 2 per CPU; -1: no bound).
	HashQueue int
	// AllowPrivateHosts is --allow-private-hosts (tests name 127.0.0.1 to
	// let a project use a local SMTP server or OIDC provider).
	AllowPrivateHosts []string
	// AllowPrivateWebhooks is --allow-private-webhooks (tests name
	// 127.0.0.1 for a local webhook receiver); TriggerTuning sizes and
	// times trigger deliveries (tests shorten the backoff and retries).
	AllowPrivateWebhooks []string
	TriggerTuning        triggers.Tuning
	// SMTPDefault is the operator's SMTP server (--smtp-*).
	SMTPDefault auth.SMTPSettings
	// MailRootCAs verifies SMTP servers' certificates; MailTuning sizes
	// the mail sender's retries.
	MailRootCAs *x509.CertPool
	MailTuning  mail.Tuning
}

// Cluster is a set of in-process nodes sharing a cluster secret.
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*Member
	// CA issued the nodes' certificates (nil without TLS or RaftTLS).
	CA *testpki.CA
	// Client talks to the nodes: it trusts CA when TLS is on.
	Client *http.Client
	base   string          // parent of the members' data dirs
	taken  map[string]bool // addresses handed out to members
}

// Member is one node slot: it keeps its id, ports and data dir across restarts.
type Member struct {
	ID       string
	Edge     bool
	DataDir  string
	HTTPAddr string
	RaftAddr string
	Node     *node.Node // nil while stopped
	// TLS holds the member's certificate files when the cluster uses TLS.
	TLS  testpki.Files
	logs *lockedBuffer
	tls  bool
}

// URL is the member's HTTP base URL.
func (m *Member) URL() string {
	if m.tls {
		return "https://" + m.HTTPAddr
	}
	return "http://" + m.HTTPAddr
}

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
	base := t.TempDir()
	c := &Cluster{t: t, opts: opts, Client: http.DefaultClient, base: base, taken: map[string]bool{}}
	if opts.TLS || opts.RaftTLS {
		c.CA = testpki.NewCA(t, "edgebase test CA")
	}
	if opts.TLS {
		c.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: c.CA.ClientConfig()}}
		t.Cleanup(c.Client.CloseIdleConnections)
	}
	for i := 0; i < opts.Voters+opts.Edges; i++ {
		id := fmt.Sprintf("n%d", i+1)
		if i >= opts.Voters {
			id = fmt.Sprintf("e%d", i-opts.Voters+1)
		}
		c.newMember(id, i >= opts.Voters)
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

// newMember adds a stopped member slot with fresh ports and a data dir.
func (c *Cluster) newMember(id string, edge bool) *Member {
	m := &Member{ID: id, Edge: edge, DataDir: filepath.Join(c.base, fmt.Sprintf("n%d", len(c.Nodes)+1)),
		HTTPAddr: freeAddr(c.t, c.taken), RaftAddr: freeAddr(c.t, c.taken), logs: &lockedBuffer{}, tls: c.opts.TLS}
	if c.CA != nil {
		m.TLS = c.CA.WriteFiles(c.t, c.base, m.ID)
	}
	c.Nodes = append(c.Nodes, m)
	return m
}

// AddMember adds a new member (a voter, or an edge), starts it so that it
// joins the running cluster, and waits until it is ready; it returns its index.
func (c *Cluster) AddMember(edge bool) int {
	c.t.Helper()
	prefix, n := "n", 1
	if edge {
		prefix = "e"
	}
	for _, m := range c.Nodes {
		if m.Edge == edge {
			n++
		}
	}
	c.newMember(fmt.Sprintf("%s%d", prefix, n), edge)
	i := len(c.Nodes) - 1
	c.StartMember(i)
	c.WaitReady(i, 20*time.Second)
	return i
}

// Stop stops member i gracefully (leadership handed over when it leads,
// HTTP drained), as on SIGTERM.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if n := c.Nodes[i].Node; n != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			c.t.Logf("close %s: %v", c.Nodes[i].ID, err)
		}
		c.Nodes[i].Node = nil
	}
}

// MoveRaftPort gives stopped member i a new Raft port, as when a node comes
// back with its data dir on another address (dynamic ports, a moved host);
// the next StartMember listens and advertises there. It returns the new
// address.
func (c *Cluster) MoveRaftPort(i int) string {
	c.t.Helper()
	m := c.Nodes[i]
	if m.Node != nil {
		c.t.Fatalf("MoveRaftPort: %s is running; stop it first", m.ID)
	}
	m.RaftAddr = freeAddr(c.t, c.taken)
	return m.RaftAddr
}

// StartMember (re)starts member i on its ports and data dir.
func (c *Cluster) StartMember(i int) {
	c.t.Helper()
	m := c.Nodes[i]
	cfg := c.MemberConfig(i)
	var err error
	// The port may still be in TIME_WAIT after a kill; retry briefly.
	for attempt := 0; attempt < 50; attempt++ {
		m.Node, err = node.Start(cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", m.ID, err)
	}
}

// MemberConfig is the configuration StartMember starts member i with (tests
// that expect a start to fail call node.Start with it themselves).
func (c *Cluster) MemberConfig(i int) node.Config {
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
	key := SecretKey
	if c.opts.NoSecretKey {
		key = ""
	}
	sweep := c.opts.SweepInterval
	if sweep == 0 {
		sweep = time.Hour
	}
	cfg := node.Config{
		NodeID: m.ID, DataDir: m.DataDir, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr,
		Join: join, Edge: m.Edge, AdminToken: AdminToken, ClusterSecret: Secret,
		Logger: slog.New(slog.NewTextHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Out:    io.Discard, Tuning: c.opts.Tuning, HashParams: &hp,
		Clock: c.opts.Clock, Limits: c.opts.limits(), SessionTTL: c.opts.SessionTTL, RecentLogin: c.opts.RecentLogin,
		SweepInterval: sweep, SecretKey: key, ChangeLogRetention: c.opts.ChangeLogRetention,
		FCMEndpoint: c.opts.FCMEndpoint, PushTuning: c.opts.PushTuning, CORSOrigins: c.opts.CORSOrigins,
		QueryScanLimit:    c.opts.QueryScanLimit,
		HashQueue:         c.opts.HashQueue,
		AllowPrivateHosts: c.opts.AllowPrivateHosts, SMTPDefault: c.opts.SMTPDefault,
		MailRootCAs: c.opts.MailRootCAs, MailTuning: c.opts.MailTuning,
		AllowPrivateWebhooks: c.opts.AllowPrivateWebhooks, TriggerTuning: c.opts.TriggerTuning,
	}
	if c.opts.TLS {
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = m.TLS.Cert, m.TLS.Key, m.TLS.CA
	}
	if c.opts.RaftTLS {
		cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile = m.TLS.Cert, m.TLS.Key, m.TLS.CA
	}
	return cfg
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
		resp, err := c.Client.Get(m.URL() + "/readyz")
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
	st, b, err := doJSON(context.Background(), c.Client, c.Nodes[i].URL(), method, path, headers, body)
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
	return doJSON(ctx, http.DefaultClient, base, method, path, headers, body)
}

func doJSON(ctx context.Context, client *http.Client, base, method, path string, headers map[string]string, body any) (int, []byte, error) {
	r, err := proctest.DoJSON(ctx, client, 0, method, base+path, headers, body)
	if err != nil {
		return 0, nil, err
	}
	return r.Status, r.Body, nil
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

// limits are the node's limits: Options.Limits, or the defaults without the
// registration limits (tests register many accounts from one loopback
// address; the tests of those limits set them).
func (o Options) limits() *auth.Limits {
	if o.Limits != nil {
		return o.Limits
	}
	l := auth.DefaultLimits()
	l.RegisterPerAddr, l.RegisterPerProject = auth.LimitRule{}, auth.LimitRule{}
	return &l
}
