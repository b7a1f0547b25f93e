package node_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// TestCORSFollowersAnswerPreflight: an origin a project owner allows
// through the leader passes preflight on every follower and the edge node
// once it applied the change, and stops passing there once its removal is
// applied. A preflight names no project, so each node judges it by its own
// view of every project's list.
func TestCORSFollowersAnswerPreflight(t *testing.T) {
	t.Parallel()
	const app = "http://localhost:5173"
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1})
	leader := c.Leader(10 * time.Second)
	p := c.CreateProject(leader)
	others := c.Followers(leader)
	if len(others) != 3 {
		t.Fatalf("followers %v, want 3 (two voters and the edge)", others)
	}

	preflight := func(i int) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodOptions, c.Nodes[i].URL()+"/api/db", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", app)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-api-key,x-project-id")
		resp, err := c.Client.Do(req)
		if err != nil {
			t.Fatalf("preflight on %s: %v", c.Nodes[i].ID, err)
		}
		_ = resp.Body.Close()
		return resp
	}
	setOrigins := func(origins ...string) uint64 {
		t.Helper()
		body := strings.NewReader(`{"origins":["` + strings.Join(origins, `","`) + `"]}`)
		if len(origins) == 0 {
			body = strings.NewReader(`{"origins":[]}`)
		}
		req, err := http.NewRequest(http.MethodPut, c.Nodes[leader].URL()+"/api/origins", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Project-Id", p.ID)
		req.Header.Set("X-API-Key", p.APIKey)
		req.Header.Set("Authorization", "Bearer "+p.OwnerToken)
		resp, err := c.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		rev, err := strconv.ParseUint(resp.Header.Get("X-Revision"), 10, 64)
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("PUT /api/origins %v: status %d, X-Revision %q", origins, resp.StatusCode, resp.Header.Get("X-Revision"))
		}
		return rev
	}
	waitApplied := func(i int, rev uint64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Nodes[i].Node.Store.WaitApplied(ctx, rev); err != nil {
			t.Fatalf("%s did not apply revision %d: %v", c.Nodes[i].ID, rev, err)
		}
	}

	// Every node has judged the origin (and built its view) before the
	// owner allows it.
	for i := range c.Nodes {
		if resp := preflight(i); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight on %s before the origin is allowed: status %d, ACAO %q", c.Nodes[i].ID, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	rev := setOrigins(app)
	for _, i := range others {
		waitApplied(i, rev)
		resp := preflight(i)
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != app {
			t.Fatalf("preflight on %s after the origin is allowed at %d: status %d, ACAO %q", c.Nodes[i].ID, rev, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		// The real request through this node is readable too.
		req, _ := http.NewRequest(http.MethodGet, c.Nodes[i].URL()+"/api/db?consistency=local&collection=docs/none", nil)
		req.Header.Set("Origin", app)
		req.Header.Set("X-Project-Id", p.ID)
		req.Header.Set("X-API-Key", p.APIKey)
		req.Header.Set("Authorization", "Bearer "+p.OwnerToken)
		r, err := c.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if r.StatusCode != http.StatusNotFound || r.Header.Get("Access-Control-Allow-Origin") != app {
			t.Fatalf("GET on %s from %s: status %d, ACAO %q", c.Nodes[i].ID, app, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	rev = setOrigins()
	for _, i := range others {
		waitApplied(i, rev)
		if resp := preflight(i); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight on %s after the origin is removed at %d: status %d, ACAO %q", c.Nodes[i].ID, rev, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}
