// Package node runs one edgebase node: it opens the replicated store, builds
// the services and the HTTP server, bootstraps or joins the cluster, runs the
// leader-only duties and shuts everything down in order.
package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/httpapi"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/realtime"
	"github.com/edgebase/edgebase/triggers"
)

// Config is one node's configuration (the serve command's flags).
type Config struct {
	NodeID        string
	DataDir       string
	HTTPAddr      string // listen address, e.g. ":8080"
	RaftAddr      string // listen address, e.g. ":7000"
	AdvertiseHTTP string // URL other nodes use; derived from HTTPAddr when empty
	AdvertiseRaft string // host:port other nodes dial; derived from RaftAddr when empty
	Join          []string
	Edge          bool
	AdminToken    string
	ClusterSecret string
	Dev           bool
	// Version is the build's version, shown by edgebase_build_info
	// (cmd/edgebase sets it; empty is "dev").
	Version string
	// SecretKey (64 hex digits or base64 of 32 bytes) encrypts TOTP secrets
	// at rest; SecretKeyFile names a file holding it. Every node of a
	// cluster needs the same key. --dev makes one in the data dir.
	SecretKey     string
	SecretKeyFile string
	// SessionTTL is how long a session lasts (default 30 days).
	SessionTTL time.Duration
	// RecentLogin is how long after proving the password a session may
	// change the second factor (default auth.DefaultRecentLogin).
	RecentLogin time.Duration
	// TrustedProxies may name the client in X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// CORSOrigins are browser origins allowed for every project, on top of
	// each project's own list (--cors-origins): CORS and realtime.
	CORSOrigins []string
	// QueryScanLimit is how many documents a query may examine without an
	// index that serves it before it is refused with index_required
	// (--query-scan-limit; 0: raftstore.DefaultQueryScanLimit).
	QueryScanLimit int
	// AllowPrivateHosts are the private or loopback hosts tenants may name
	// (--allow-private-hosts): IPs, CIDRs, host names.
	AllowPrivateHosts []string
	// AllowPrivateWebhooks are the private or loopback hosts trigger
	// webhooks may call (--allow-private-webhooks): IPs, CIDRs, host names.
	AllowPrivateWebhooks []string
	// TriggerTuning sizes and times the leader's trigger deliveries (zero
	// fields: the defaults).
	TriggerTuning triggers.Tuning
	// PublicURL is the base URL browsers reach the cluster at (--public-url;
	// default AdvertiseHTTP): OAuth callbacks, links in emails.
	PublicURL string
	// SMTPDefault is the operator's SMTP server (--smtp-*), for projects
	// that set none.
	SMTPDefault auth.SMTPSettings
	// AuditRetention bounds the security audit log (--audit-retention).
	AuditRetention time.Duration
	// MailTuning overrides the mail sender's timings (tests; zero fields:
	// the defaults).
	MailTuning mail.Tuning
	// MailRootCAs verifies SMTP servers' certificates (nil: the system's
	// roots; tests name their own CA).
	MailRootCAs *x509.CertPool
	// SweepInterval is how often the leader removes expired sessions,
	// tickets and rate-limit windows (default 1 minute).
	SweepInterval time.Duration
	// Limits overrides the brute-force limits (tests use small ones).
	Limits *auth.Limits
	// ChangeLogRetention is how long realtime can resume with since
	// (default 1 hour).
	ChangeLogRetention time.Duration
	// FCMEndpoint points the FCM SDK at another FCM-compatible endpoint
	// (local development, tests); empty is Google's.
	FCMEndpoint string
	// PushSender replaces the FCM sender (nil: FCM through the SDK).
	PushSender push.Sender
	// PushTuning sizes the push dispatcher.
	PushTuning push.Tuning
	// TLSCertFile and TLSKeyFile (PEM) make the HTTP port serve HTTPS, and
	// the derived advertised URL https://. TLSCAFile is the PEM bundle that
	// node-to-node HTTPS calls trust (default: the system roots).
	TLSCertFile, TLSKeyFile, TLSCAFile string
	// RaftTLSCertFile, RaftTLSKeyFile and RaftTLSCAFile (all or none) wrap
	// the Raft transport in mutual TLS: each node's certificate must be
	// signed by the CA and valid for the host of its advertised Raft address
	// in both the server and the client role.
	RaftTLSCertFile, RaftTLSKeyFile, RaftTLSCAFile string

	Logger *slog.Logger
	// Out receives the human banner of --dev (default stdout).
	Out    io.Writer
	Tuning raftstore.Tuning
	// ConnectTo maps a member's advertised host:port to the host:port this
	// node dials instead, on every node-to-node connection (--connect-to;
	// raftstore.Config.ConnectTo).
	ConnectTo map[string]string
	// HashParams overrides argon2id parameters (tests use cheap ones).
	HashParams *auth.HashParams
	// HashQueue bounds the callers waiting for a password-hashing slot
	// (--hash-queue): 0 is auth.DefaultHashQueuePerSlot per slot, < 0
	// unbounded. Beyond it a caller is answered 503 overloaded at once.
	HashQueue int
	Clock     auth.Clock
}

// Node is a running node.
type Node struct {
	cfg      Config
	logger   *slog.Logger
	Store    *raftstore.Store
	Accounts *auth.Service
	Realtime *realtime.Server
	Push     *push.Service
	// Mail delivers the email outbox while this node leads.
	Mail *mail.Sender
	// Triggers is the owner API of triggers; TriggerRunner delivers them
	// while this node leads.
	Triggers      *triggers.Service
	TriggerRunner *triggers.Runner
	// built is closed once the services above are set: leader duties,
	// which the store may start at once, wait for it.
	built    chan struct{}
	httpLn   net.Listener
	httpSrv  *http.Server
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	devOnce  sync.Once
	once     sync.Once
	closeErr error
}

// Start opens the store, starts serving HTTP and, in the background, joins
// the cluster and registers this node's addresses.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./data"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	var err error
	if cfg.NodeID == "" {
		if cfg.NodeID, err = persistedValue(cfg.DataDir, "node-id", "node-", 4); err != nil {
			return nil, err
		}
	}
	if cfg.Dev {
		if cfg.AdminToken == "" {
			if cfg.AdminToken, err = persistedValue(cfg.DataDir, "dev-admin-token", "eba_", 16); err != nil {
				return nil, err
			}
		}
		if cfg.ClusterSecret == "" {
			if cfg.ClusterSecret, err = persistedValue(cfg.DataDir, "dev-cluster-secret", "", 16); err != nil {
				return nil, err
			}
		}
	}
	sealer, err := loadSealer(&cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.Join) > 0 && cfg.ClusterSecret == "" {
		return nil, errors.New("--join needs --cluster-secret (the same on every node)")
	}
	if cfg.CORSOrigins, err = auth.CanonicalOrigins(cfg.CORSOrigins); err != nil {
		return nil, fmt.Errorf("--cors-origins: %w", err)
	}
	tlsc, err := loadTLS(&cfg)
	if err != nil {
		return nil, err
	}
	if err := advertiseScheme(cfg.AdvertiseHTTP, tlsc.server != nil); err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("node", cfg.NodeID)
	if cfg.AdminToken == "" {
		logger.Warn("no --admin-token: operator endpoints (/admin) refuse every request")
	}
	if sealer == nil {
		logger.Warn("no secret key (--secret-key-file or EDGEBASE_SECRET_KEY): the TOTP authenticator is off")
	}

	// The node's own metrics registry, served at /metrics.
	reg, err := newRegistry(cfg)
	if err != nil {
		return nil, err
	}
	httpLn, err := net.Listen("tcp", orDefault(cfg.HTTPAddr, ":8080"))
	if err != nil {
		return nil, fmt.Errorf("listen http: %w", err)
	}
	raftLn, err := net.Listen("tcp", orDefault(cfg.RaftAddr, ":7000"))
	if err != nil {
		_ = httpLn.Close()
		return nil, fmt.Errorf("listen raft: %w", err)
	}
	if cfg.AdvertiseHTTP == "" {
		scheme := "http://"
		if tlsc.server != nil {
			scheme = "https://"
		}
		cfg.AdvertiseHTTP = scheme + advertisable(httpLn.Addr())
	}
	if tlsc.server != nil {
		httpLn = tls.NewListener(httpLn, tlsc.server)
	}
	if cfg.AdvertiseRaft == "" {
		cfg.AdvertiseRaft = advertisable(raftLn.Addr())
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, logger: logger, httpLn: httpLn, ctx: ctx, cancel: cancel, built: make(chan struct{})}
	n.Store, err = raftstore.Open(raftstore.Config{
		NodeID:             cfg.NodeID,
		Dir:                filepath.Join(cfg.DataDir),
		RaftListener:       raftLn,
		RaftAdvertise:      cfg.AdvertiseRaft,
		HTTPAdvertise:      cfg.AdvertiseHTTP,
		Bootstrap:          len(cfg.Join) == 0,
		Secret:             cfg.ClusterSecret,
		Voter:              !cfg.Edge,
		OnLeader:           n.leaderDuties,
		Decider:            auth.NewDecider(),
		Tuning:             cfg.Tuning,
		ConnectTo:          cfg.ConnectTo,
		ChangeLogRetention: cfg.ChangeLogRetention,
		Logger:             logger,
		Registerer:         reg,
		HTTPTLS:            tlsc.client,
		RaftTLS:            tlsc.raft,
		Peers:              cfg.Join,
	})
	if err != nil {
		cancel()
		_ = httpLn.Close()
		_ = raftLn.Close()
		return nil, err
	}
	hashParams, hashOpts := auth.DefaultHashParams(), []auth.HasherOption(nil)
	if cfg.HashParams != nil {
		hashParams = *cfg.HashParams
	}
	if cfg.HashQueue != 0 {
		hashOpts = append(hashOpts, auth.WithHashQueue(max(cfg.HashQueue, -1)))
	}
	hasher := auth.NewHasher(hashParams, 0, hashOpts...)
	if err := hasher.RegisterMetrics(reg); err != nil {
		n.abort()
		return nil, err
	}
	hostPolicy, err := auth.NewHostPolicy(cfg.AllowPrivateHosts)
	if err != nil {
		n.abort()
		return nil, fmt.Errorf("allowed private hosts: %w", err)
	}
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = cfg.AdvertiseHTTP
	}
	n.Accounts, err = auth.NewService(auth.Config{Store: n.Store, Hasher: hasher, Clock: cfg.Clock, Logger: logger,
		SessionTTL: cfg.SessionTTL, RecentLogin: cfg.RecentLogin, Sealer: sealer, Limits: cfg.Limits, Registerer: reg,
		OnSecurityChange: n.securityNotice, HostPolicy: hostPolicy, PublicURL: strings.TrimSuffix(publicURL, "/"),
		SMTPDefault: cfg.SMTPDefault, AuditRetention: cfg.AuditRetention})
	if err != nil {
		n.abort()
		return nil, err
	}
	n.Realtime, err = realtime.New(realtime.Config{Store: n.Store, Accounts: n.Accounts, Logger: logger, Registerer: reg,
		Origins: cfg.CORSOrigins, QueryScanLimit: cfg.QueryScanLimit})
	if err != nil {
		n.abort()
		return nil, err
	}
	var pushSealer push.Sealer
	if sealer != nil {
		pushSealer = sealer
	}
	sender := cfg.PushSender
	if sender == nil {
		fcm := push.NewFCMSender(cfg.FCMEndpoint, logger)
		// One idle connection per request in flight: batches × the SDK's
		// 50 workers per SendEach.
		fcm.MaxConns = max(fcm.MaxConns, push.DefaultInFlight(cfg.PushTuning.InFlight)*50+12)
		sender = fcm
	}
	n.Push, err = push.NewService(push.Config{Store: n.Store, Clock: cfg.Clock, Sealer: pushSealer, Sender: sender,
		Feed: n.Store.Feed(), Logger: logger, Tuning: cfg.PushTuning, Registerer: reg, FCMEndpoint: cfg.FCMEndpoint})
	if err != nil {
		n.abort()
		return nil, err
	}
	// Tenants' SMTP servers are dialled through the host policy (checked
	// again at connect time); the operator's own server directly.
	n.Mail, err = mail.New(mail.Config{Store: n.Store, Source: n.Accounts, Feed: n.Store.Feed(), Clock: cfg.Clock,
		Dial: hostPolicy.DialContext(&net.Dialer{Timeout: 30 * time.Second}), RootCAs: cfg.MailRootCAs,
		Logger: logger, Registerer: reg, Tuning: cfg.MailTuning, HELO: heloName(publicURL)})
	if err != nil {
		n.abort()
		return nil, err
	}
	// Webhooks are dialled through their own host policy (checked at PUT
	// and again at connect time, against DNS rebinding).
	hookPolicy, err := auth.NewHostPolicyFlag(cfg.AllowPrivateWebhooks, "--allow-private-webhooks")
	if err != nil {
		n.abort()
		return nil, fmt.Errorf("allowed private webhook hosts: %w", err)
	}
	var trigSealer triggers.Sealer
	if sealer != nil {
		trigSealer = sealer
	}
	n.Triggers, err = triggers.NewService(triggers.ServiceConfig{Store: n.Store, Sealer: trigSealer, Hosts: hookPolicy,
		Clock: cfg.Clock, Logger: logger})
	if err != nil {
		n.abort()
		return nil, err
	}
	n.TriggerRunner, err = triggers.NewRunner(triggers.RunnerConfig{Store: n.Store, Feed: n.Store.Feed(), Push: n.Push,
		Sealer: trigSealer, Dial: hookPolicy.DialContext(&net.Dialer{Timeout: 30 * time.Second}), Clock: cfg.Clock,
		Logger: logger, Registerer: reg, Tuning: cfg.TriggerTuning})
	if err != nil {
		n.abort()
		return nil, err
	}
	api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store, Accounts: n.Accounts, AdminToken: cfg.AdminToken, Logger: logger,
		Realtime:       n.Realtime,
		Push:           n.Push,
		Triggers:       n.Triggers,
		TrustedProxies: cfg.TrustedProxies,
		CORSOrigins:    cfg.CORSOrigins,
		QueryScanLimit: cfg.QueryScanLimit,
		Registerer:     reg,
		Metrics:        metricsHandler(reg)})
	if err != nil {
		n.abort()
		return nil, err
	}
	// No ServeMux in front: it would redirect an unclean path in plain text
	// before the API could answer it in the JSON error shape.
	internal := n.Store.InternalHandler()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, raftstore.InternalPrefix) && path.Clean(p) == p {
			internal.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	close(n.built)
	n.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "err", err)
		}
	}()
	n.wg.Add(1)
	go n.joinAndRegister()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.Accounts.RunSessionTouches(n.ctx) // sessions' lastUsedAt, off the requests' path
	}()
	if cfg.Dev {
		n.printDevBanner()
	}
	logger.Info("node started", "http", cfg.AdvertiseHTTP, "raft", cfg.AdvertiseRaft, "edge", cfg.Edge, "join", strings.Join(cfg.Join, ","),
		"raftTLS", tlsc.raft != nil, "connectTo", raftstore.FormatConnectTo(cfg.ConnectTo),
		"raftTuning", n.Store.Tuning().String())
	return n, nil
}

func (n *Node) abort() {
	n.cancel()
	if n.Realtime != nil {
		n.Realtime.Abort()
	}
	_ = n.httpLn.Close()
	_ = n.Store.Close()
}

// joinAndRegister asks the cluster to add this node (first start only), then
// records its addresses in the tree so others can forward to it.
func (n *Node) joinAndRegister() {
	defer n.wg.Done()
	if len(n.cfg.Join) > 0 && !n.Store.HasState() {
		if err := n.Store.JoinCluster(n.ctx, n.cfg.Join); err != nil {
			n.logger.Error("could not join the cluster", "err", err)
			return
		}
	}
	if err := n.Store.EnsureNodeRecord(n.ctx); err != nil && n.ctx.Err() == nil {
		n.logger.Error("could not register node address", "err", err)
	}
}

// leaderDuties runs while this node leads (after the Barrier that applies
// every earlier entry): the --dev demo project, the push scheduler and
// dispatcher, the mail sender, the trigger runner, and the sweep of expired auth records. ctx ends when
// leadership is lost.
func (n *Node) leaderDuties(ctx context.Context) {
	select {
	case <-n.built:
	case <-ctx.Done():
		return
	}
	if n.cfg.Dev {
		n.ensureDevProject(ctx)
	}
	var pushDone sync.WaitGroup
	pushDone.Add(1)
	go func() {
		defer pushDone.Done()
		n.Push.Run(ctx)
	}()
	defer pushDone.Wait()
	pushDone.Add(1)
	go func() {
		defer pushDone.Done()
		n.Mail.Run(ctx)
	}()
	pushDone.Add(1)
	go func() {
		defer pushDone.Done()
		n.TriggerRunner.Run(ctx)
	}()
	every := n.cfg.SweepInterval
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := n.Accounts.Sweep(ctx); err != nil && ctx.Err() == nil {
				n.logger.Warn("sweep of expired auth records failed", "err", err)
			}
		}
	}
}

// heloName is the host of the public URL, the name the mail sender greets
// SMTP servers with ("" when it has none or is an IP: go-mail's default).
func heloName(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	h := u.Hostname()
	if _, err := netip.ParseAddr(h); err != nil && h != "" && h != "localhost" {
		return h
	}
	return ""
}

// loadSealer reads the secret key from the config, its file, or (--dev) a
// key file kept in the data dir. No key at all is allowed: TOTP is then off.
func loadSealer(cfg *Config) (*auth.Sealer, error) {
	if cfg.SecretKey != "" && cfg.SecretKeyFile != "" {
		return nil, errors.New("give the secret key once: --secret-key (EDGEBASE_SECRET_KEY) or --secret-key-file, not both")
	}
	key := cfg.SecretKey
	if cfg.SecretKeyFile != "" {
		b, err := os.ReadFile(cfg.SecretKeyFile)
		if err != nil {
			return nil, fmt.Errorf("read secret key file: %w", err)
		}
		// A named file must hold a key: an empty one is a mistake, not "no key".
		raw, err := auth.ParseSecretKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("secret key file %s: %w", cfg.SecretKeyFile, err)
		}
		return auth.NewSealer(raw)
	}
	if key == "" && cfg.Dev {
		v, err := persistedValue(cfg.DataDir, "dev-secret-key", "", auth.SecretKeyLen)
		if err != nil {
			return nil, err
		}
		key = v
	}
	if key == "" {
		return nil, nil
	}
	raw, err := auth.ParseSecretKey(key)
	if err != nil {
		return nil, err
	}
	return auth.NewSealer(raw)
}

// HTTPURL is the node's advertised base URL.
func (n *Node) HTTPURL() string { return n.cfg.AdvertiseHTTP }

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Close shuts the node down: hands leadership over when it leads, drains
// HTTP, then stops Raft and closes the databases.
func (n *Node) Close(ctx context.Context) error {
	n.once.Do(func() {
		n.transferOnClose(ctx)
		n.cancel()
		// Realtime connections are hijacked: http.Server does not see them.
		n.Realtime.Close()
		// Drain in-flight requests briefly. Shutdown counts connections that
		// never sent a request as busy for 5 s, so cap the wait and then close.
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		if err := n.httpSrv.Shutdown(sctx); err != nil {
			_ = n.httpSrv.Close()
		}
		scancel()
		n.closeErr = n.Store.Close()
		n.wg.Wait()
	})
	return n.closeErr
}

// Kill stops the node abruptly (tests): no leadership transfer, no draining.
func (n *Node) Kill() {
	n.once.Do(func() {
		n.cancel()
		n.Realtime.Abort()
		_ = n.httpSrv.Close()
		n.closeErr = n.Store.Close()
		n.wg.Wait()
	})
}

// transferOnCloseTimeout bounds the leadership hand-over at shutdown. Raft
// answers a transfer within its election timeout, but a transfer that never
// returns (hashicorp/raft#696: a replication worker gone while the transfer
// waits on it) must not keep the node from stopping: the followers elect a
// leader without our help once we are gone.
const transferOnCloseTimeout = 5 * time.Second

// transferOnClose hands leadership over, waiting at most
// transferOnCloseTimeout or until ctx ends.
func (n *Node) transferOnClose(ctx context.Context) {
	done := make(chan error, 1)
	go func() { done <- n.Store.TransferLeadership() }()
	t := time.NewTimer(transferOnCloseTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			n.logger.Warn("leadership transfer on shutdown failed", "err", err)
		}
	case <-t.C:
		n.logger.Warn("leadership transfer on shutdown did not finish; stopping without it", "waited", transferOnCloseTimeout)
	case <-ctx.Done():
		n.logger.Warn("leadership transfer on shutdown cut short", "err", ctx.Err())
	}
}

// persistedValue reads data-dir/name, or creates it as prefix plus n random
// bytes in hex.
func persistedValue(dir, name, prefix string, n int) (string, error) {
	p := filepath.Join(dir, name)
	if b, err := os.ReadFile(p); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("random %s: %w", name, err)
	}
	v := prefix + hex.EncodeToString(raw)
	if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return v, nil
}

// advertisable turns a listen address into one others can dial: an
// unspecified host becomes 127.0.0.1 (set --advertise-* on real networks).
func advertisable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// devProject is the demo project --dev creates once and prints at every start.
type devProject struct {
	ProjectID     string `json:"projectId"`
	APIKey        string `json:"apiKey"`
	OwnerID       string `json:"ownerId"`
	OwnerEmail    string `json:"ownerEmail"`
	OwnerPassword string `json:"ownerPassword"`
	AdminToken    string `json:"adminToken"`
}

const devProjectFile = "dev-project.json"

func (n *Node) ensureDevProject(ctx context.Context) {
	p := filepath.Join(n.cfg.DataDir, devProjectFile)
	if _, err := os.Stat(p); err == nil {
		return
	}
	var raw [9]byte
	if _, err := rand.Read(raw[:]); err != nil {
		n.logger.Error("dev project: random password", "err", err)
		return
	}
	pw := "demo-" + hex.EncodeToString(raw[:])
	var created *auth.ProjectCreated
	for {
		var err error
		created, err = n.Accounts.CreateProject(ctx, "Demo", "owner@example.com", pw)
		if err == nil {
			break
		}
		n.logger.Warn("dev project not created yet", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	dp := devProject{ProjectID: created.ProjectID, APIKey: created.APIKey, OwnerID: created.OwnerID,
		OwnerEmail: "owner@example.com", OwnerPassword: pw, AdminToken: n.cfg.AdminToken}
	b, _ := json.MarshalIndent(dp, "", "  ")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		n.logger.Error("dev project: save", "err", err)
		return
	}
	n.printDevBanner()
}

// printDevBanner prints the demo project if it exists (once per start).
func (n *Node) printDevBanner() {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, devProjectFile))
	if err != nil {
		return
	}
	var dp devProject
	if json.Unmarshal(b, &dp) != nil {
		return
	}
	n.devOnce.Do(func() {
		base := n.cfg.AdvertiseHTTP
		fmt.Fprintf(n.cfg.Out, `
edgebase dev node ready at %s
  project id     : %s
  API key        : %s
  owner login    : %s / %s
  admin token    : %s
Try:
  curl -s %s/api/auth -H 'Content-Type: application/json' \
    -H 'X-Project-Id: %s' -H 'X-API-Key: %s' \
    -d '{"action":"login","email":"%s","password":"%s"}'
Watch documents change live (log in there as the owner, then write under notes/):
  %s/_/live#project=%s&key=%s&path=notes&prefix=1
Admin console (sign in as the owner above, or as the operator with the admin token):
  %s/_/#/signin?project=%s&key=%s
`, base, dp.ProjectID, dp.APIKey, dp.OwnerEmail, dp.OwnerPassword, dp.AdminToken,
			base, dp.ProjectID, dp.APIKey, dp.OwnerEmail, dp.OwnerPassword, base, dp.ProjectID, dp.APIKey,
			base, dp.ProjectID, dp.APIKey)
	})
}

// securityTexts are the notifications an account gets when its security
// changes (auth.Config.OnSecurityChange).
var securityTexts = map[string][2]string{
	"totp-enrolled":  {"Authenticator setup started", "An authenticator app is being added to your account. If this was not you, change your password now."},
	"totp-enabled":   {"Two-step verification is on", "An authenticator app now protects your account. If this was not you, change your password now."},
	"totp-disabled":  {"Two-step verification is off", "The authenticator app was removed from your account. If this was not you, change your password now."},
	"password-reset": {"Your password was reset", "Every session of your account was ended. If this was not you, reset your password again and turn on an authenticator."},
}

// securityNotice sends the account a security notification over every
// channel; a failure is logged, never the answer to the change itself.
func (n *Node) securityNotice(ctx context.Context, pid, uid, what string) {
	texts, ok := securityTexts[what]
	if !ok || n.Push == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := n.Push.SecurityNotice(ctx, pid, uid, texts[0], texts[1]); err != nil {
		n.logger.Warn("security notification not queued", "project", pid, "user", uid, "what", what, "err", err)
	}
}
