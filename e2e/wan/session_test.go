package wan_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/wan"
	"github.com/edgebase/edgebase/realtime/client"
)

// Session consistency across edges: a user writes through the edge in us,
// moves, and reads at once through the edge in ap with consistency=local.
// e-ap hears of the write some 75 ms (one way from the leader) later; with
// the session (X-Min-Revision / minRevision) it waits until it has applied
// the write and the user reads it every time; without, it answers what it
// has, which is stale at least once over the iterations (the control that
// proves the check can fail).

const sessionIterations = 20

func sessionConfigs(c *wan.Cluster, sess *client.SessionRevision) (us, ap client.Config) {
	pid, key := c.Project()
	us = client.Config{URL: c.URL(wan.US, edgeOf(c, wan.US)), Token: c.OwnerToken(), ProjectID: pid, APIKey: key,
		Session: sess, HTTPClient: httpClient}
	ap = us
	ap.URL = c.URL(wan.AP, edgeOf(c, wan.AP))
	return us, ap
}

// edgeOf is the edge node of region r ("" when there is none).
func edgeOf(c *wan.Cluster, r wan.Region) string {
	for _, n := range c.Nodes() {
		if n.Edge && n.Region == r {
			return n.ID
		}
	}
	return ""
}

type sessDoc struct {
	I int `json:"i"`
}

func TestWANSessionMove(t *testing.T) {
	c := sharedCluster(t)
	edgeIn(t, c, wan.US)
	edgeIn(t, c, wan.AP)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess := client.NewSessionRevision(0)
	us, ap := sessionConfigs(c, sess)
	noSess := ap
	noSess.Session = nil
	const path = "wan-session/rest"

	stale := 0
	var waited []time.Duration
	for i := 1; i <= sessionIterations; i++ {
		// With the session: the read at e-ap must see the write.
		rev, err := client.SetDoc(ctx, us, path, sessDoc{I: 2 * i})
		if err != nil {
			t.Fatalf("iteration %d: write through e-us: %v", i, err)
		}
		if sess.Revision() < rev {
			t.Fatalf("iteration %d: the session is at %d after a write at %d", i, sess.Revision(), rev)
		}
		start := time.Now()
		d, err := client.GetDoc(ctx, ap, path, client.Local())
		waited = append(waited, time.Since(start))
		if err != nil {
			t.Fatalf("iteration %d: local read at e-ap with the session: %v", i, err)
		}
		var got sessDoc
		if err := json.Unmarshal(d.Data, &got); err != nil || got.I != 2*i || d.Revision < rev {
			t.Fatalf("iteration %d: read at e-ap with the session (min %d) = %s at %d, want {\"i\":%d} at >= %d", i, rev, d.Data, d.Revision, 2*i, rev)
		}

		// The control: the same read without the session header.
		rev, err = client.SetDoc(ctx, us, path, sessDoc{I: 2*i + 1})
		if err != nil {
			t.Fatalf("iteration %d: control write: %v", i, err)
		}
		d, err = client.GetDoc(ctx, noSess, path, client.Local())
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusNotFound:
			stale++ // the document is not there yet at all
		case err != nil:
			t.Fatalf("iteration %d: control read at e-ap: %v", i, err)
		default:
			if err := json.Unmarshal(d.Data, &got); err != nil {
				t.Fatalf("iteration %d: control read: %s: %v", i, d.Data, err)
			}
			if got.I != 2*i+1 || d.Revision < rev {
				stale++
			}
		}
	}
	t.Logf("%d iterations: the session read at e-ap waited median %v, max %v; the control read was stale %d times",
		sessionIterations, median(waited).Round(time.Millisecond), maxDuration(waited).Round(time.Millisecond), stale)
	if c.NodeLinksSimulated() && stale == 0 {
		t.Fatalf("the control read without the session was never stale in %d iterations: e-ap does not lag, so the check proves nothing", sessionIterations)
	}

	t.Run("socket", func(t *testing.T) {
		// Subscribing at e-ap right after a write through e-us: the
		// snapshot holds the write.
		conn, err := client.Dial(ctx, ap)
		if err != nil {
			t.Fatalf("dial e-ap: %v", err)
		}
		defer func() { _ = conn.Close() }()
		const spath = "wan-session/socket"
		for i := 1; i <= 5; i++ {
			rev, err := client.SetDoc(ctx, us, spath, sessDoc{I: i})
			if err != nil {
				t.Fatalf("iteration %d: write: %v", i, err)
			}
			sub, err := conn.Subscribe(ctx, spath, false)
			if err != nil {
				t.Fatalf("iteration %d: subscribe at e-ap: %v", i, err)
			}
			docs := sub.Documents()
			if sub.Revision() < rev || len(docs) != 1 {
				t.Fatalf("iteration %d: snapshot at %d with %d documents, want the write at %d", i, sub.Revision(), len(docs), rev)
			}
			var got sessDoc
			if err := json.Unmarshal(docs[0].Data, &got); err != nil || got.I != i {
				t.Fatalf("iteration %d: snapshot document %s, want {\"i\":%d}", i, docs[0].Data, i)
			}
			if err := sub.Unsubscribe(ctx); err != nil {
				t.Fatalf("iteration %d: unsubscribe: %v", i, err)
			}
		}
	})
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestWANSessionMoveJS runs the same move with the JavaScript SDK:
// clients/js/test/wan-session.wan.mjs under node --test.
func TestWANSessionMoveJS(t *testing.T) {
	c := sharedCluster(t)
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("EDGEBASE_REQUIRE_NODE") == "1" {
			t.Fatalf("node is not installed and EDGEBASE_REQUIRE_NODE=1")
		}
		t.Skip("node is not installed: skipping the JavaScript session test (set EDGEBASE_REQUIRE_NODE=1 to fail instead)")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "clients", "js", "test", "wan-session.wan.mjs")
	pid, key := c.Project()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", script)
	cmd.Env = append(os.Environ(),
		"EDGEBASE_WAN_US_URL="+c.URL(wan.US, edgeOf(c, wan.US)),
		"EDGEBASE_WAN_AP_URL="+c.URL(wan.AP, edgeOf(c, wan.AP)),
		"EDGEBASE_PROJECT_ID="+pid,
		"EDGEBASE_API_KEY="+key,
		"EDGEBASE_WAN_ITERATIONS="+strconv.Itoa(sessionIterations),
		"EDGEBASE_WAN_REQUIRE_STALE="+map[bool]string{true: "1", false: "0"}[c.NodeLinksSimulated()],
	)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test %s:\n%s", filepath.Base(script), out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}
