// Command edgebase is the single binary: it serves a node and talks to a
// running cluster as an operator tool. It holds flags and wiring only.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // quiet hours need IANA zones even FROM scratch

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/triggers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `edgebase: a replicated backend (auth, documents, realtime, push) in one binary.

Usage:
  edgebase serve [--node-id ID] [--data-dir ./data] [--http-addr :8080] [--raft-addr :7000]
                 [--advertise-http URL] [--advertise-raft HOST:PORT] [--join URL[,URL]]
                 [--edge] [--admin-token T] [--cluster-secret S] [--dev]
                 [--secret-key-file FILE | --secret-key KEY] [--session-ttl 720h] [--recent-login-window 5m]
                 [--register-limit-addr 100] [--register-limit-project 10000]
                 [--trusted-proxies CIDR[,CIDR]] [--cors-origins URL[,URL]] [--changelog-retention 1h] [--fcm-endpoint URL] [--push-inflight 8] [--log-level info]
                 [--tls-cert FILE --tls-key FILE] [--tls-ca FILE]
                 [--raft-tls-cert FILE --raft-tls-key FILE --raft-tls-ca FILE]
                 [--wan] [--raft-heartbeat-timeout D] [--raft-election-timeout D]
                 [--raft-leader-lease-timeout D] [--raft-commit-timeout D] [--raft-trailing-logs N] [--raft-max-inflight N]
                 [--connect-to FROM=TO[,FROM=TO]] [--pprof-addr 127.0.0.1:6060]
  edgebase project create --server URL --admin-token T --name N --owner-email E --owner-password P [--json] [--ca-file FILE]
  edgebase project set-owner --server URL --admin-token T --project ID --email E [--ca-file FILE]
  edgebase cluster status|remove --server URL --admin-token T [--node-id ID] [--ca-file FILE]
  edgebase backup --server URL --admin-token T --out FILE [--ca-file FILE]
  edgebase backup --from-data-dir DIR --out FILE      (offline, from a stopped node's data)
  edgebase restore --from FILE --data-dir DIR [--node-id ID] [--raft-addr :7000] [--advertise-raft HOST:PORT]
  edgebase healthcheck [--url http://127.0.0.1:8080/readyz] [--ca-file FILE]
  edgebase version

Every flag can also be set as EDGEBASE_<FLAG>, e.g. EDGEBASE_DATA_DIR.

TLS (off by default): --tls-cert/--tls-key serve HTTPS on --http-addr (the
derived advertised URL is then https://) and --tls-ca is the PEM bundle that
node-to-node HTTPS calls trust (default: the system roots). The three
--raft-tls-* flags wrap the Raft transport in mutual TLS: every node's
certificate must be signed by that CA, valid for the host of its
--advertise-raft address, for both server and client authentication.
--ca-file is the CA an operator command trusts for an https:// URL.

Node-to-node routing: --connect-to FROM=TO (repeatable) makes every
connection this node opens to another member's advertised host:port FROM
(Raft, forwarded writes, read index, join) go to TO instead; TLS still
verifies FROM's name.

Profiling (off by default): --pprof-addr serves net/http/pprof
(/debug/pprof/..., including mutex and block profiles) on its own listener,
without authentication: bind it to loopback only.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(args[1:], stdout, stderr)
	case "project":
		switch {
		case len(args) >= 2 && args[1] == "create":
			err = projectCreate(args[2:], stdout)
		case len(args) >= 2 && args[1] == "set-owner":
			err = projectSetOwner(args[2:], stdout)
		default:
			err = usageError("project create|set-owner ...")
		}
	case "cluster":
		if len(args) < 2 || (args[1] != "status" && args[1] != "remove") {
			err = usageError("cluster status|remove ...")
			break
		}
		err = cluster(args[1], args[2:], stdout)
	case "backup":
		err = backup(args[1:], stdout)
	case "restore":
		err = restore(args[1:], stdout)
	case "healthcheck":
		err = healthcheck(args[1:])
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "edgebase", version)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
	default:
		err = usageError("unknown command " + args[0])
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "edgebase: %s\n\n%s", string(ue), usage)
			return 2
		}
		fmt.Fprintln(stderr, "edgebase:", err)
		return 1
	}
	return 0
}

type usageError string

func (u usageError) Error() string { return string(u) }

// newFlags returns a flag set whose flags default from EDGEBASE_* variables.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse applies EDGEBASE_<FLAG> values first, then the command line.
func parse(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "EDGEBASE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s: %w", env, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument " + fs.Arg(0))
	}
	return nil
}

func serve(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve")
	var cfg node.Config
	var wan bool
	var join, logLevel, trustedProxies, corsOrigins, pprofAddr, privateHosts, privateWebhooks string
	limits := auth.DefaultLimits()
	fs.StringVar(&cfg.NodeID, "node-id", "", "stable node id (default: generated and kept in the data dir)")
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "directory for the Raft log, snapshots and the document tree")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", ":8080", "HTTP listen address (REST, WebSocket, /metrics, health)")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", ":7000", "Raft listen address")
	fs.StringVar(&cfg.AdvertiseHTTP, "advertise-http", "", "URL other nodes use to reach this node's HTTP port")
	fs.StringVar(&cfg.AdvertiseRaft, "advertise-raft", "", "host:port other nodes use to reach this node's Raft port")
	fs.StringVar(&join, "join", "", "comma-separated URLs of cluster members to join (none: bootstrap a new cluster)")
	fs.BoolVar(&cfg.Edge, "edge", false, "join as a non-voting edge node")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token for the /admin operator endpoints")
	fs.StringVar(&cfg.ClusterSecret, "cluster-secret", "", "shared secret authenticating node-to-node calls")
	fs.BoolVar(&cfg.Dev, "dev", false, "development mode: create and print a demo project")
	fs.StringVar(&cfg.SecretKey, "secret-key", "", "key encrypting TOTP secrets: 64 hex digits or base64 of 32 bytes, the same on every node (prefer EDGEBASE_SECRET_KEY or --secret-key-file to keep it out of ps)")
	fs.StringVar(&cfg.SecretKeyFile, "secret-key-file", "", "file holding the secret key")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", auth.DefaultSessionTTL, "how long a session token lasts")
	fs.IntVar(&limits.RegisterPerAddr.Max, "register-limit-addr", limits.RegisterPerAddr.Max, "accounts one client address may register per hour (0: no limit)")
	fs.IntVar(&limits.RegisterPerProject.Max, "register-limit-project", limits.RegisterPerProject.Max, "accounts a project may gain per hour (0: no limit)")
	fs.DurationVar(&cfg.RecentLogin, "recent-login-window", auth.DefaultRecentLogin, "how long after proving the password a session may change the second factor without proving it again")
	fs.DurationVar(&cfg.ChangeLogRetention, "changelog-retention", time.Hour, "how long each node keeps changes for realtime clients resuming with since")
	fs.IntVar(&cfg.PushTuning.InFlight, "push-inflight", 8, "push batches (of up to 500 messages, 50 requests each) the leader sends at once; raise it with the round trip to FCM")
	fs.StringVar(&cfg.FCMEndpoint, "fcm-endpoint", "", "an FCM-compatible endpoint for push (e.g. http://127.0.0.1:9099/v1 for a local stand-in); empty is Google's FCM")
	fs.StringVar(&trustedProxies, "trusted-proxies", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For names the client")
	fs.StringVar(&corsOrigins, "cors-origins", "", "comma-separated browser origins (e.g. https://app.example.com) allowed for every project, besides each project's own list (PUT /api/origins)")
	fs.IntVar(&cfg.HashQueue, "hash-queue", 0, "password checks (logins, registrations) that may wait for a hashing slot; beyond them one is answered 503 overloaded with Retry-After (0: 2 per CPU; -1: no bound)")
	fs.IntVar(&cfg.QueryScanLimit, "query-scan-limit", raftstore.DefaultQueryScanLimit, "documents a query may examine without an index that serves it before it is refused with index_required (declare indexes with PUT /api/db/indexes)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	// Accounts: email, OAuth, audit.
	fs.StringVar(&privateHosts, "allow-private-hosts", "", "comma-separated IPs, CIDRs or host names on a private or loopback network that tenants may name (SMTP servers, OIDC issuers); others are refused")
	fs.StringVar(&privateWebhooks, "allow-private-webhooks", "", "comma-separated IPs, CIDRs or host names on a private or loopback network that trigger webhooks may call; others are refused")
	fs.IntVar(&cfg.TriggerTuning.InFlight, "trigger-in-flight", triggers.DefaultInFlight, "trigger actions (webhooks, pushes, derived writes) the leader runs at once, over all document paths")
	fs.DurationVar(&cfg.TriggerTuning.Timeout, "trigger-timeout", triggers.DefaultTimeout, "how long one webhook attempt may take")
	fs.DurationVar(&cfg.TriggerTuning.MinBackoff, "trigger-min-backoff", triggers.DefaultMinBackoff, "wait after a trigger's first failed attempt (doubled per failure, with jitter; a receiver's Retry-After replaces it)")
	fs.DurationVar(&cfg.TriggerTuning.MaxBackoff, "trigger-max-backoff", triggers.DefaultMaxBackoff, "longest wait between a trigger's attempts")
	fs.DurationVar(&cfg.TriggerTuning.RetryFor, "trigger-retry-for", triggers.DefaultRetryFor, "how long a failing trigger event is retried after its first attempt before it becomes a dead letter")
	fs.IntVar(&cfg.TriggerTuning.MaxDepth, "trigger-max-depth", triggers.DefaultMaxDepth, "loop limit: a change made by a chain of this many derived writes fires no trigger")
	fs.StringVar(&cfg.PublicURL, "public-url", "", "base URL browsers reach the cluster at, for OAuth callbacks and links in emails (default: --advertise-http)")
	fs.StringVar(&cfg.SMTPDefault.Host, "smtp-host", "", "the cluster's default SMTP server, for projects that set none (PUT /api/auth/smtp)")
	fs.IntVar(&cfg.SMTPDefault.Port, "smtp-port", 587, "port of --smtp-host")
	fs.StringVar(&cfg.SMTPDefault.Username, "smtp-username", "", "SMTP user name of --smtp-host")
	fs.StringVar(&cfg.SMTPDefault.Password, "smtp-password", "", "SMTP password of --smtp-host (prefer EDGEBASE_SMTP_PASSWORD)")
	fs.StringVar(&cfg.SMTPDefault.From, "smtp-from", "", "sender address of the cluster's default SMTP server")
	fs.StringVar(&cfg.SMTPDefault.FromName, "smtp-from-name", "", "sender name of the cluster's default SMTP server")
	fs.StringVar(&cfg.SMTPDefault.Security, "smtp-security", "starttls", "starttls, tls (implicit, port 465) or none (only for a host in --allow-private-hosts)")
	fs.DurationVar(&cfg.AuditRetention, "audit-retention", auth.DefaultAuditRetention, "how long the security audit log keeps an entry")
	// Raft tuning (operators rarely need these; tests make snapshots frequent).
	fs.Uint64Var(&cfg.Tuning.SnapshotThreshold, "raft-snapshot-threshold", 0, "log entries between snapshots (default 16384)")
	fs.Uint64Var(&cfg.Tuning.TrailingLogs, "raft-trailing-logs", 0, "log entries kept after a snapshot, so a follower or edge that was away catches up from the log instead of a snapshot (default 10240; --wan 50000)")
	fs.DurationVar(&cfg.Tuning.SnapshotInterval, "raft-snapshot-interval", 0, "how often to check whether to snapshot (default 60s)")
	fs.DurationVar(&cfg.Tuning.ElectionTimeout, "raft-election-timeout", 0, "how long a candidate waits for votes before it tries again; without --raft-heartbeat-timeout it sets that too (default 1s; --wan 500ms)")
	fs.DurationVar(&cfg.Tuning.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "how long a follower goes without hearing from the leader before it campaigns (randomised up to twice this; the leader sends a heartbeat every tenth of it); at most the election timeout (default: the election timeout; --wan 500ms)")
	fs.DurationVar(&cfg.Tuning.LeaderLeaseTimeout, "raft-leader-lease-timeout", 0, "a leader that has not heard from a quorum for this long steps down; at most the heartbeat timeout (default: half the heartbeat timeout; --wan 500ms)")
	fs.DurationVar(&cfg.Tuning.CommitTimeout, "raft-commit-timeout", 0, "longest wait before the leader sends an append without new entries, which is how followers and edges learn the commit index: it bounds the delivery delay at an edge (default 5ms; --wan 2ms)")
	fs.IntVar(&cfg.Tuning.MaxRPCsInFlight, "raft-max-inflight", 0, "appends the leader keeps in flight to one follower or edge; more than 2 lets the commit index reach a far edge one way after the entry instead of a round trip (default 2; --wan 64; 1 turns pipelining off)")
	fs.BoolVar(&wan, "wan", false, "Raft settings for members up to ~250 ms round trip apart (regions on several continents): 64 appends in flight per follower, heartbeat 500ms, election 500ms, leader lease 500ms (2 round trips), commit 2ms, max append entries 512, trailing logs 50000 (a cut-off edge catches up from the log); explicit --raft-* flags override it (docs/operations.md, docs/edge.md)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "PEM certificate: serve HTTPS on --http-addr (with --tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLSCAFile, "tls-ca", "", "PEM bundle node-to-node HTTPS calls trust (default: the system roots)")
	fs.StringVar(&cfg.RaftTLSCertFile, "raft-tls-cert", "", "PEM certificate of this node on the Raft transport (mutual TLS; with --raft-tls-key and --raft-tls-ca)")
	fs.StringVar(&cfg.RaftTLSKeyFile, "raft-tls-key", "", "PEM private key of --raft-tls-cert")
	fs.StringVar(&cfg.RaftTLSCAFile, "raft-tls-ca", "", "PEM CA that signs every node's Raft certificate")
	connect := connectToFlag{}
	fs.Var(connect, "connect-to", "FROM=TO[,FROM=TO...] (repeatable; both host:port): every node-to-node connection this node makes to a member's advertised address FROM (Raft, forwarded writes, read index, join) dials TO instead; TLS still verifies FROM's name")
	fs.StringVar(&pprofAddr, "pprof-addr", "", "serve net/http/pprof on this separate, unauthenticated address (e.g. 127.0.0.1:6060); empty: off")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkTLSFlags(cfg); err != nil {
		return err
	}
	if len(connect) > 0 {
		cfg.ConnectTo = connect
	}
	tuning, err := resolveTuning(cfg.Tuning, wan)
	if err != nil {
		return usageError(err.Error())
	}
	cfg.Tuning = tuning
	if limits.RegisterPerAddr.Max < 0 || limits.RegisterPerProject.Max < 0 {
		return usageError("--register-limit-addr and --register-limit-project must be 0 (no limit) or more")
	}
	cfg.Limits = &limits
	if cfg.QueryScanLimit < 1 {
		return usageError("--query-scan-limit must be 1 or more")
	}
	for _, u := range strings.Split(join, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.Join = append(cfg.Join, u)
		}
	}
	proxies, err := parseProxies(trustedProxies)
	if err != nil {
		return usageError("bad --trusted-proxies (EDGEBASE_TRUSTED_PROXIES): " + err.Error())
	}
	cfg.TrustedProxies = proxies
	if cfg.CORSOrigins, err = parseOrigins(corsOrigins); err != nil {
		return usageError("bad --cors-origins (EDGEBASE_CORS_ORIGINS): " + err.Error())
	}
	for _, h := range strings.Split(privateHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowPrivateHosts = append(cfg.AllowPrivateHosts, h)
		}
	}
	if _, err := auth.NewHostPolicy(cfg.AllowPrivateHosts); err != nil {
		return usageError("bad --allow-private-hosts (EDGEBASE_ALLOW_PRIVATE_HOSTS): " + err.Error())
	}
	for _, h := range strings.Split(privateWebhooks, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowPrivateWebhooks = append(cfg.AllowPrivateWebhooks, h)
		}
	}
	if _, err := auth.NewHostPolicy(cfg.AllowPrivateWebhooks); err != nil {
		return usageError("bad --allow-private-webhooks (EDGEBASE_ALLOW_PRIVATE_WEBHOOKS): " + err.Error())
	}
	if t := cfg.TriggerTuning; t.InFlight < 1 || t.Timeout <= 0 || t.MinBackoff <= 0 || t.MaxBackoff < t.MinBackoff || t.RetryFor <= 0 || t.MaxDepth < 1 {
		return usageError("--trigger-in-flight and --trigger-max-depth must be 1 or more, the trigger durations positive, --trigger-max-backoff at least --trigger-min-backoff")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return usageError("bad --log-level " + logLevel)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Out = stdout
	cfg.Version = version
	if pprofAddr != "" {
		stop, err := startPprof(pprofAddr, cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	n, err := node.Start(cfg)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	cfg.Logger.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A shutdown that takes longer than a container's usual grace period
	// says where it waits, before the orchestrator's SIGKILL hides it.
	slow := time.AfterFunc(slowShutdown, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		cfg.Logger.Warn("shutdown is slow; where every goroutine waits", "after", slowShutdown, "goroutines", string(buf))
	})
	defer slow.Stop()
	return n.Close(ctx)
}

// resolveTuning applies the --wan preset under the --raft-* flags given
// (non-zero) and checks the result: explicit flags override the preset; the
// election timeout alone still sets the heartbeat timeout too; a value the
// preset derives from an overridden one (the lease from the heartbeat) is
// derived again. It returns the effective timings.
func resolveTuning(t raftstore.Tuning, wan bool) (raftstore.Tuning, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"--raft-heartbeat-timeout", t.HeartbeatTimeout}, {"--raft-election-timeout", t.ElectionTimeout},
		{"--raft-leader-lease-timeout", t.LeaderLeaseTimeout}, {"--raft-commit-timeout", t.CommitTimeout}, {"--raft-snapshot-interval", t.SnapshotInterval}} {
		if f.v < 0 {
			return t, fmt.Errorf("%s %v is negative", f.name, f.v)
		}
	}
	if t.HeartbeatTimeout > 0 && t.ElectionTimeout > 0 && t.HeartbeatTimeout > t.ElectionTimeout {
		return t, fmt.Errorf("--raft-heartbeat-timeout %v is longer than --raft-election-timeout %v", t.HeartbeatTimeout, t.ElectionTimeout)
	}
	if wan {
		p := raftstore.WANTuning()
		switch {
		case t.HeartbeatTimeout == 0 && t.ElectionTimeout == 0:
			t.HeartbeatTimeout, t.ElectionTimeout = p.HeartbeatTimeout, p.ElectionTimeout
			if t.LeaderLeaseTimeout == 0 {
				t.LeaderLeaseTimeout = p.LeaderLeaseTimeout
			}
		case t.ElectionTimeout == 0:
			t.ElectionTimeout = max(p.ElectionTimeout, t.HeartbeatTimeout)
		}
		t = t.Under(p)
	}
	eff := t.Effective()
	if t.LeaderLeaseTimeout > 0 && t.LeaderLeaseTimeout > eff.HeartbeatTimeout {
		return t, fmt.Errorf("--raft-leader-lease-timeout %v is longer than the heartbeat timeout %v", t.LeaderLeaseTimeout, eff.HeartbeatTimeout)
	}
	if err := eff.Validate(); err != nil {
		return t, fmt.Errorf("--raft-* timings: %w", err)
	}
	return eff, nil
}

// connectToFlag collects --connect-to values (and EDGEBASE_CONNECT_TO): each
// one a comma-separated list of FROM=TO, merged; one FROM may name one TO.
type connectToFlag map[string]string

func (c connectToFlag) String() string { return raftstore.FormatConnectTo(c) }

func (c connectToFlag) Set(v string) error {
	m, err := raftstore.ParseConnectTo(v)
	if err != nil {
		return err
	}
	for from, to := range m {
		if prev, ok := c[from]; ok && prev != to {
			return fmt.Errorf("%s is mapped twice (to %s and to %s)", from, prev, to)
		}
		c[from] = to
	}
	return nil
}

// slowShutdown is when a shutdown still under way logs every goroutine's
// stack: well past a normal one (milliseconds, docs/operations.md) and
// before docker's 10 s grace period ends.
const slowShutdown = 5 * time.Second

// parseProxies reads a comma-separated list of addresses and CIDRs.
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			f = netip.PrefixFrom(a, a.BitLen()).String()
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// parseOrigins reads a comma-separated list of browser origins.
func parseOrigins(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return auth.CanonicalOrigins(out)
}

// client is an operator's connection to a running node.
type client struct {
	server, token string
	http          *http.Client
}

// operatorFlags are the flags every operator command that calls a node
// shares.
type operatorFlags struct{ server, token, caFile *string }

func addOperatorFlags(fs *flag.FlagSet) operatorFlags {
	return operatorFlags{
		server: fs.String("server", "", "URL of any node"),
		token:  fs.String("admin-token", "", "admin token"),
		caFile: fs.String("ca-file", "", "PEM CA to trust for an https:// server (default: the system roots)"),
	}
}

// client is the node client the flags name, its requests bounded by
// timeout (0: none).
func (o operatorFlags) client(timeout time.Duration) (*client, error) {
	c, err := newClient(*o.server, *o.token)
	if err != nil {
		return nil, err
	}
	if c.http, err = httpClientFor(*o.caFile, timeout); err != nil {
		return nil, err
	}
	return c, nil
}

func newClient(server, token string) (*client, error) {
	if server == "" {
		return nil, usageError("--server is required")
	}
	if token == "" {
		return nil, usageError("--admin-token is required")
	}
	return &client{server: strings.TrimRight(server, "/"), token: token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

func (c *client) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.server+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: status %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode response: %w", err)
		}
	}
	return nil
}

func projectCreate(args []string, stdout io.Writer) error {
	fs := newFlags("project create")
	op := addOperatorFlags(fs)
	name := fs.String("name", "", "project name")
	email := fs.String("owner-email", "", "owner account email")
	password := fs.String("owner-password", "", "owner account password")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := op.client(60 * time.Second)
	if err != nil {
		return err
	}
	var out struct {
		ProjectID string `json:"projectId"`
		APIKey    string `json:"apiKey"`
		OwnerID   string `json:"ownerId"`
	}
	if err := c.do(http.MethodPost, "/admin/projects", map[string]string{"name": *name, "ownerEmail": *email, "ownerPassword": *password}, &out); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "project id: %s\nAPI key:    %s\nowner id:   %s\n", out.ProjectID, out.APIKey, out.OwnerID)
	return nil
}

// projectSetOwner makes an account of a project an owner: the operator's
// way back into a project whose owners are gone or locked out.
func projectSetOwner(args []string, stdout io.Writer) error {
	fs := newFlags("project set-owner")
	op := addOperatorFlags(fs)
	pid := fs.String("project", "", "project id")
	email := fs.String("email", "", "email of the account to make an owner")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *pid == "" || *email == "" {
		return usageError("project set-owner needs --project and --email")
	}
	c, err := op.client(60 * time.Second)
	if err != nil {
		return err
	}
	var out struct {
		User struct {
			ID    string `json:"id"`
			Email string `json:"email"`
			Role  string `json:"role"`
		} `json:"user"`
	}
	if err := c.do(http.MethodPut, "/admin/projects/"+url.PathEscape(*pid)+"/owner", map[string]string{"email": *email}, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (%s) is now %s of project %s\n", out.User.Email, out.User.ID, out.User.Role, *pid)
	return nil
}

func cluster(sub string, args []string, stdout io.Writer) error {
	fs := newFlags("cluster " + sub)
	op := addOperatorFlags(fs)
	id := fs.String("node-id", "", "node to remove")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := op.client(60 * time.Second)
	if err != nil {
		return err
	}
	if sub == "remove" {
		if *id == "" {
			return usageError("cluster remove needs --node-id")
		}
		if err := c.do(http.MethodDelete, "/admin/cluster/nodes/"+url.PathEscape(*id), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s\n", *id)
		return nil
	}
	var st json.RawMessage
	if err := c.do(http.MethodGet, "/admin/cluster", nil, &st); err != nil {
		return err
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, st, "", "  ")
	fmt.Fprintln(stdout, pretty.String())
	return nil
}

func backup(args []string, stdout io.Writer) error {
	fs := newFlags("backup")
	server := fs.String("server", "", "URL of any node")
	token := fs.String("admin-token", "", "admin token")
	out := fs.String("out", "", "file to write")
	caFile := fs.String("ca-file", "", "PEM CA to trust for an https:// server (default: the system roots)")
	fromDir := fs.String("from-data-dir", "", "back up a STOPPED node's data dir instead of asking a server (disaster recovery)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError("backup needs --out")
	}
	if *fromDir != "" {
		if *server != "" {
			return usageError("backup takes --server or --from-data-dir, not both")
		}
		return backupOffline(*fromDir, *out, stdout)
	}
	c, err := newClient(*server, *token)
	if err != nil {
		return err
	}
	// No overall timeout: a large backup takes as long as it takes.
	if c.http, err = httpClientFor(*caFile, 0); err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodGet, c.server+"/admin/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return responseError(http.MethodGet, "/admin/backup", resp.StatusCode, b)
	}
	info, err := saveBackup(resp.Body, *out)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if tr := resp.Trailer.Get("X-Revision"); tr != "" && tr != strconv.FormatUint(info.Revision, 10) {
		return fmt.Errorf("backup: the server reports revision %s, the file holds %d", tr, info.Revision)
	}
	fmt.Fprintf(stdout, "wrote %d bytes to %s: revision %d, %d records, served by node %s at %s\n",
		info.Bytes, *out, info.Revision, info.Records, info.NodeID, info.CreatedAt.Format(time.RFC3339))
	return nil
}

// backupOffline writes a backup of a stopped node's data dir.
func backupOffline(dir, out string, stdout io.Writer) error {
	id := ""
	if b, err := os.ReadFile(filepath.Join(dir, "node-id")); err == nil {
		id = strings.TrimSpace(string(b))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pr, pw := io.Pipe()
	go func() {
		_, err := raftstore.BackupDir(ctx, dir, id, time.Now(), pw)
		pw.CloseWithError(err)
	}()
	info, err := saveBackup(pr, out)
	_ = pr.Close() // stops the writer when saving failed first
	if err != nil {
		return fmt.Errorf("backup of %s: %w", dir, err)
	}
	fmt.Fprintf(stdout, "wrote %d bytes to %s: revision %d, %d records, from the data dir %s (node %q) at %s\n",
		info.Bytes, out, info.Revision, info.Records, dir, info.NodeID, info.CreatedAt.Format(time.RFC3339))
	return nil
}

// saveBackup writes the stream to out (through out.partial, renamed only
// once the whole stream has passed raftstore's checks) and describes it.
func saveBackup(body io.Reader, out string) (raftstore.BackupInfo, error) {
	tmp := out + ".partial"
	// A backup holds password hashes and sealed secrets: owner-only.
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return raftstore.BackupInfo{}, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	type verified struct {
		info raftstore.BackupInfo
		err  error
	}
	pr, pw := io.Pipe()
	done := make(chan verified, 1)
	go func() {
		info, err := raftstore.VerifyBackup(pr)
		pr.CloseWithError(err) // a failed check stops the copy below
		done <- verified{info, err}
	}()
	_, copyErr := io.Copy(io.MultiWriter(f, pw), body)
	pw.CloseWithError(copyErr)
	v := <-done
	switch {
	case copyErr != nil && (v.err == nil || errors.Is(v.err, copyErr)):
		return raftstore.BackupInfo{}, copyErr // the stream broke (or the check stopped it)
	case v.err != nil && copyErr != nil:
		return raftstore.BackupInfo{}, fmt.Errorf("%w (the stream broke: %v)", v.err, copyErr)
	case v.err != nil:
		return raftstore.BackupInfo{}, v.err
	}
	if err := f.Sync(); err != nil {
		return raftstore.BackupInfo{}, err
	}
	keep = true
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return raftstore.BackupInfo{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		_ = os.Remove(tmp)
		return raftstore.BackupInfo{}, err
	}
	if d, err := os.Open(filepath.Dir(out)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return v.info, nil
}

// responseError describes a failed operator call from its JSON error body.
func responseError(method, path string, status int, body []byte) error {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return fmt.Errorf("%s %s: %d %s: %s", method, path, status, e.Error.Code, e.Error.Message)
	}
	return fmt.Errorf("%s %s: status %d", method, path, status)
}

// restore seeds a new single-node cluster's data dir from a backup, offline.
func restore(args []string, stdout io.Writer) error {
	fs := newFlags("restore")
	from := fs.String("from", "", "backup file written by edgebase backup")
	dataDir := fs.String("data-dir", "", "data directory of the new node: absent or empty")
	nodeID := fs.String("node-id", "", "id the node will run with (default: generated and kept in the data dir)")
	raftAddr := fs.String("raft-addr", ":7000", "Raft listen address the node will be served with")
	advertiseRaft := fs.String("advertise-raft", "", "host:port other nodes will use to reach the node's Raft port (default: derived from --raft-addr, as serve does)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *from == "" {
		return usageError("restore needs --from FILE")
	}
	if *dataDir == "" {
		return usageError("restore needs --data-dir DIR")
	}
	adv := *advertiseRaft
	if adv == "" {
		var err error
		if adv, err = advertisedRaft(*raftAddr); err != nil {
			return usageError(err.Error())
		}
	}
	id := *nodeID
	if id == "" {
		var raw [4]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return fmt.Errorf("restore: random node id: %w", err)
		}
		id = "node-" + hex.EncodeToString(raw[:])
	}
	f, err := os.Open(*from)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer func() { _ = f.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := raftstore.Restore(ctx, raftstore.RestoreConfig{Dir: *dataDir, NodeID: id, RaftAdvertise: adv, From: f})
	if err != nil {
		return fmt.Errorf("restore from %s: %w", *from, err)
	}
	// serve without --node-id reads its id from here (as it keeps a generated one).
	if err := os.WriteFile(filepath.Join(*dataDir, "node-id"), []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	b := res.Backup
	fmt.Fprintf(stdout, "restored revision %d (%d records from node %s, taken %s) into %s\n",
		b.Revision, b.Records, b.NodeID, b.CreatedAt.Format(time.RFC3339), *dataDir)
	if len(res.OldMembers) > 0 {
		fmt.Fprintf(stdout, "dropped the old cluster's member records: %s\n", strings.Join(res.OldMembers, ", "))
	}
	if len(res.OldRemovals) > 0 {
		fmt.Fprintf(stdout, "dropped the old cluster's removal records: %s\n", strings.Join(res.OldRemovals, ", "))
	}
	fmt.Fprintf(stdout, "node %s is the sole voter of a new cluster, at Raft address %s; start it without --join:\n"+
		"  edgebase serve --data-dir %s --node-id %s --advertise-raft %s ...\n"+
		"then add members with serve --join.\n", id, adv, *dataDir, id, adv)
	return nil
}

// advertisedRaft derives the Raft address serve advertises for a listen
// address: an unspecified host is 127.0.0.1. Port 0 cannot be known offline.
func advertisedRaft(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("bad --raft-addr %q: %v", listen, err)
	}
	if port == "0" || port == "" {
		return "", fmt.Errorf("--raft-addr %q has no fixed port: give --advertise-raft HOST:PORT", listen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// healthcheck exits non-zero unless the URL answers 200 (for container
// health checks, where the image has no shell or curl).
func healthcheck(args []string) error {
	fs := newFlags("healthcheck")
	u := fs.String("url", "http://127.0.0.1:8080/readyz", "URL to check")
	caFile := fs.String("ca-file", "", "PEM CA to trust for an https:// URL (default: the system roots)")
	if err := parse(fs, args); err != nil {
		return err
	}
	hc, err := httpClientFor(*caFile, 3*time.Second)
	if err != nil {
		return err
	}
	resp, err := hc.Get(*u)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", *u, resp.StatusCode)
	}
	return nil
}
