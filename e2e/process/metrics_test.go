package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// mustPromtool returns the path of promtool, skipping the test when it is
// missing unless EDGEBASE_REQUIRE_PROMTOOL=1 (as CI sets it).
func mustPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("EDGEBASE_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("EDGEBASE_REQUIRE_PROMTOOL=1 but promtool is not on PATH (Debian: apt-get install prometheus): %v", err)
	}
	t.Skipf("promtool is not on PATH (Debian: apt-get install prometheus): skipping the check of /metrics; EDGEBASE_REQUIRE_PROMTOOL=1 makes this a failure")
	return ""
}

// TestMetricsPromtool runs a 3-node cluster of the real binary, sends some
// of every kind of traffic, and has `promtool check metrics` judge every
// node's /metrics: any complaint (a bad name, a missing help text, a
// counter without _total, a malformed line) fails the test.
func TestMetricsPromtool(t *testing.T) {
	promtool := mustPromtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := mustStartCluster(t, ctx, clusterOpts{})
	leader := c.mustLeader(c.nodes[0], 20*time.Second)
	pr := c.mustCreateProject(leader)

	// Traffic on every node: writes (forwarded by followers), strong and
	// local reads, a wrong password, a 404 on a random path, a realtime
	// connection that subscribes, sees a change and closes.
	var b [8]byte
	_, _ = rand.Read(b[:])
	random := hex.EncodeToString(b[:])
	for i, p := range c.nodes {
		_, rev := c.mustWrite(p, pr, fmt.Sprintf("metrics/%s-%d", random, i), map[string]int{"i": i})
		if r, err := c.getDoc(p, pr, fmt.Sprintf("metrics/%s-%d", random, i), "&consistency=local", rev); err != nil || r.status != http.StatusOK {
			t.Fatalf("read on %s: %v %v", p.id, r, err)
		}
		r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodPost, p.url()+"/api/auth",
			map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
			map[string]string{"action": "login", "email": ownerEmail, "password": "wrong password"})
		if err != nil || r.status != http.StatusUnauthorized {
			t.Fatalf("wrong password on %s: %v %v", p.id, r, err)
		}
		if r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodGet, p.url()+"/api/db/"+random, pr.Headers(), nil); err != nil || r.status != http.StatusNotFound {
			t.Fatalf("GET /api/db/%s on %s: %v %v", random, p.id, r, err)
		}
	}
	follower := c.nodes[0]
	if follower == leader {
		follower = c.nodes[1]
	}
	func() {
		dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
		defer dcancel()
		conn, err := client.Dial(dctx, client.Config{URL: follower.url(), Token: pr.Token, ProjectID: pr.ID, APIKey: pr.APIKey})
		if err != nil {
			t.Fatalf("realtime dial %s: %v", follower.id, err)
		}
		defer func() { _ = conn.CloseNow() }()
		sub, err := conn.Subscribe(dctx, "live", true)
		if err != nil {
			t.Fatalf("subscribe on %s: %v", follower.id, err)
		}
		c.mustWrite(leader, pr, "live/"+random, map[string]bool{"ok": true})
		for ev := range sub.Events() {
			if ev.Kind == client.KindChange {
				break
			}
		}
		if err := conn.Close(); err != nil {
			t.Fatalf("realtime close: %v", err)
		}
	}()

	for _, p := range c.nodes {
		r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodGet, p.url()+"/metrics", nil, nil)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("GET /metrics on %s (no token): %v %v", p.id, r, err)
		}
		body := string(r.body)
		// The traffic shows, on the node's own terms.
		for _, want := range []string{
			`edgebase_build_info{goversion="`,
			`edgebase_node_info{node_id="` + p.id + `",voter="true"} 1`,
			`edgebase_http_requests_total{code="401",method="POST",route="/api/auth"} 1`,
			`edgebase_http_requests_total{code="404",method="GET",route="other"}`,
			`edgebase_auth_login_failures_total{reason="bad_credentials"} 1`,
			`edgebase_raft_voters 3`,
			`edgebase_raft_has_leader 1`,
			`edgebase_go_goroutines `,
			`edgebase_process_resident_memory_bytes `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics of %s lacks %q", p.id, want)
			}
		}
		if strings.Contains(body, random) {
			t.Errorf("/metrics of %s shows a path a client sent", p.id)
		}
		cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(r.body)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics on %s's /metrics: %v\n%s", p.id, err, out)
		}
	}
}
