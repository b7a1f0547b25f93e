package edgebasejs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/oidcpeer"
	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/internal/testbin"
)

// requireEnv makes a missing node or tsc a failure instead of a skip (CI).
const requireEnv = "EDGEBASE_REQUIRE_NODE"

const (
	adminToken    = "sdk-js-admin-token"
	clusterSecret = "sdk-js-cluster-secret"
	ownerEmail    = "owner@example.com"
	ownerPassword = "owner password 123"
	// secretKey turns the authenticator on (TOTP tests) and seals SMTP
	// passwords and OAuth client secrets.
	secretKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	// The OpenID provider the accounts tests sign in with.
	oidcProvider     = "peer"
	oidcClientID     = "sdk-js"
	oidcClientSecret = "sdk-js-oidc-secret"
)

// mustTool returns the path of a command, skipping the test without it
// unless requireEnv is set.
func mustTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s is not installed and %s=1", name, requireEnv)
		}
		t.Skipf("%s is not installed: skipping the JavaScript SDK tests (set %s=1 to fail instead)", name, requireEnv)
	}
	return p
}

// nodeMajor is the major version of the node binary.
func nodeMajor(t *testing.T, node string) int {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil {
		t.Fatalf("node version %q: %v", out, err)
	}
	return major
}

// testNode is one edgebase process the SDK talks to. restart kills it with
// SIGKILL and starts it again on the same data dir and port, with extra
// flags for that run.
type testNode struct {
	t    *testing.T
	ctx  context.Context
	proc *proctest.Proc
	base []string
	url  string
	mu   sync.Mutex
}

// mustStartNode starts the node; its default SMTP server is mail (a real
// go-smtp server of the test), so the accounts tests read the codes the
// node emails.
func mustStartNode(t *testing.T, ctx context.Context, bin string, mail *smtptest.Server) *testNode {
	t.Helper()
	dir := t.TempDir()
	httpPort, raftPort := proctest.FreePort(t), proctest.FreePort(t)
	n := &testNode{t: t, ctx: ctx, url: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	n.base = []string{"serve",
		"--node-id", "n1",
		"--data-dir", filepath.Join(dir, "data"),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", raftPort),
		"--advertise-http", n.url,
		"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", raftPort),
		"--admin-token", adminToken,
		"--cluster-secret", clusterSecret,
		"--secret-key", secretKey,
		// test/triggers.test.mjs runs its own webhook receiver on loopback.
		"--allow-private-webhooks", "127.0.0.1",
		"--trigger-min-backoff", "50ms", "--trigger-max-backoff", "200ms", "--trigger-retry-for", "3s",
		"--register-limit-addr", "0",
		"--smtp-host", mail.Host(),
		"--smtp-port", strconv.Itoa(mail.Port()),
		"--smtp-from", "noreply@sdk-js.example",
		"--smtp-security", "none",
		"--allow-private-hosts", mail.Host(),
	}
	n.proc = &proctest.Proc{ID: "n1", Bin: bin, Args: n.base, LogPath: filepath.Join(dir, "n1.log")}
	t.Cleanup(func() {
		n.proc.KillIfRunning()
		if t.Failed() || os.Getenv("EDGEBASE_E2E_LOGS") == "1" {
			t.Logf("---- node output ----\n%s", n.proc.LogTail(32<<10))
		}
	})
	if err := n.proc.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.waitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *testNode) waitReady(total time.Duration) error {
	deadline := time.Now().Add(total)
	var last string
	for time.Now().Before(deadline) {
		if !n.proc.Running() {
			return fmt.Errorf("node exited: %v\n%s", n.proc.WaitErr(), n.proc.LogTail(8<<10))
		}
		r, err := proctest.DoJSON(n.ctx, http.DefaultClient, 3*time.Second, http.MethodGet, n.url+"/readyz", nil, nil)
		if err == nil && r.Status == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = r.String()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node not ready within %v: %s", total, last)
}

// restart is SIGKILL, then a start with the base flags plus extra, then
// waiting for /readyz.
func (n *testNode) restart(extra []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.proc.Kill9(); err != nil {
		return err
	}
	n.proc.Args = append(append([]string{}, n.base...), extra...)
	if err := n.proc.Start(); err != nil {
		return err
	}
	return n.waitReady(60 * time.Second)
}

// mailMessage is what GET /mail shows of one email.
type mailMessage struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	Code    string   `json:"code"`
}

// serveControl answers POST /restart (optional ?changelogRetention=2s) and
// GET /mail?to=<address> (the emails the node sent there, oldest first) for
// the Node tests, on loopback; it returns the base URL.
func serveControl(t *testing.T, n *testNode, mail *smtptest.Server) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mail", func(w http.ResponseWriter, r *http.Request) {
		out := []mailMessage{}
		for _, m := range mail.To(r.URL.Query().Get("to")) {
			out = append(out, mailMessage{To: m.To, Subject: m.Subject, Text: m.Text, HTML: m.HTML, Code: smtptest.Code(m)})
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			t.Logf("control: /mail: %v", err)
		}
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		var extra []string
		if v := r.URL.Query().Get("changelogRetention"); v != "" {
			extra = append(extra, "--changelog-retention", v)
		}
		start := time.Now()
		if err := n.restart(extra); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		t.Logf("control: node restarted %v in %v", extra, time.Since(start).Round(time.Millisecond))
		w.WriteHeader(http.StatusNoContent)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// TestNodeSDK runs clients/js/test/*.test.mjs with `node --test` against a
// real node process: every SDK method, its errors, TOTP, batches, realtime,
// resuming across a SIGKILL restart of the node, and the accounts API with
// a real SMTP server and a real OpenID provider.
func TestNodeSDK(t *testing.T) {
	node := mustTool(t, "node")
	major := nodeMajor(t, node)
	if major < 18 {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("node %d is too old: the tests need Node >= 18 (global fetch)", major)
		}
		t.Skipf("node %d is too old: the tests need Node >= 18 (global fetch)", major)
	}
	files, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in clients/js/test: %v", err)
	}
	ctx, cancel := testbin.Context(t)
	defer cancel()
	bin, err := testbin.Edgebase(ctx, testbin.Options{Dir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	mail := smtptest.Start(t)
	n := mustStartNode(t, ctx, bin, mail)
	pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
	pr, err := proctest.CreateProject(pctx, http.DefaultClient, bin, n.url, adminToken, "sdk-js", ownerEmail, ownerPassword)
	pcancel()
	if err != nil {
		t.Fatal(err)
	}
	control := serveControl(t, n, mail)
	// A real OpenID provider (zitadel's OP, e2e/oidcpeer) that calls the
	// node back at its callback URL (the public URL is --advertise-http).
	peerBin, err := oidcpeer.Binary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	peer := oidcpeer.Start(t, peerBin, oidcpeer.Options{ClientID: oidcClientID, ClientSecret: oidcClientSecret,
		RedirectURIs: []string{n.url + "/api/auth/oauth/" + oidcProvider + "/callback"},
		UserEmail:    "oidc-user@example.com", Users: []string{"oidc-linked@example.com", "oidc-unverified@example.com:unverified"}})
	env := append(os.Environ(),
		"EDGEBASE_URL="+n.url,
		"EDGEBASE_PROJECT_ID="+pr.ID,
		"EDGEBASE_API_KEY="+pr.APIKey,
		"EDGEBASE_ADMIN_TOKEN="+adminToken,
		"EDGEBASE_OWNER_EMAIL="+ownerEmail,
		"EDGEBASE_OWNER_PASSWORD="+ownerPassword,
		"EDGEBASE_CONTROL_URL="+control,
		"EDGEBASE_SMTP_HOST="+mail.Host(),
		"EDGEBASE_SMTP_PORT="+strconv.Itoa(mail.Port()),
		"EDGEBASE_OIDC_PROVIDER="+oidcProvider,
		"EDGEBASE_OIDC_ISSUER="+peer.Issuer,
		"EDGEBASE_OIDC_CLIENT_ID="+oidcClientID,
		"EDGEBASE_OIDC_CLIENT_SECRET="+oidcClientSecret,
		"EDGEBASE_OIDC_PASSWORD="+peer.Password,
	)
	args := []string{"--test"}
	if major == 20 || major == 21 {
		// Node 22 has WebSocket on by default; before 20 the tests use
		// their own (test/wsshim.mjs).
		args = append(args, "--experimental-websocket")
	}
	// One file at a time, in order: a test that restarts the node must not
	// cut another file's requests.
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
			defer rcancel()
			cmd := exec.CommandContext(rctx, node, append(args, f)...)
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("node %s: %v after %v\n%s", strings.Join(cmd.Args[1:], " "), err, time.Since(start).Round(time.Millisecond), out.String())
			}
			t.Logf("node %s passed in %v\n%s", strings.Join(cmd.Args[1:], " "), time.Since(start).Round(time.Millisecond), out.String())
		})
	}
}

// TestTypes checks edgebase.d.ts with tsc --strict over test/usage.ts, a
// typed use of every method.
func TestTypes(t *testing.T) {
	tsc := mustTool(t, "tsc")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsc, "--noEmit", "--strict", "--target", "es2020", "--module", "es2020",
		"--moduleResolution", "node", "--lib", "es2020,dom", filepath.Join("test", "usage.ts"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}
