package node_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// readIndexRounds reads edgebase_read_index_rounds_total from member i's
// /metrics.
func readIndexRounds(t *testing.T, c *nodetest.Cluster, i int) float64 {
	t.Helper()
	resp, err := c.Client.Get(c.Nodes[i].URL() + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", c.Nodes[i].ID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "edgebase_read_index_rounds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("edgebase_read_index_rounds_total %q: %v", v, err)
			}
			return f
		}
	}
	t.Fatalf("%s exports no edgebase_read_index_rounds_total", c.Nodes[i].ID)
	return 0
}

// A write at an edge that carries the project's API key (as every SDK
// request does) costs one round trip to the leader: the key is checked on
// the edge's state, not after a read-index round. A wrong key is still
// refused and writes nothing, and a key created on another node a moment
// ago is taken (the edge looks again after a strong read).
func TestEdgeWriteWithAPIKeyTakesNoReadIndexRound(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1})
	leader := c.Leader(10 * time.Second)
	p := c.CreateProject(leader)
	edge := len(c.Nodes) - 1
	h := map[string]string{"Authorization": "Bearer " + p.OwnerToken, "X-Project-Id": p.ID, "X-API-Key": p.APIKey}

	// The first request of the token at the edge may need a strong read
	// (the session was made on the leader); warm it up.
	if st := c.Do(edge, http.MethodPost, "/api/db", h, map[string]any{"collection": "notes/warm", "data": map[string]any{"v": 0}}, nil); st/100 != 2 {
		t.Fatalf("warm-up write at the edge: status %d", st)
	}
	before := readIndexRounds(t, c, edge)
	for i := range 10 {
		if st := c.Do(edge, http.MethodPost, "/api/db", h, map[string]any{"collection": fmt.Sprintf("notes/n%d", i), "data": map[string]any{"v": i}}, nil); st/100 != 2 {
			t.Fatalf("write %d at the edge: status %d", i, st)
		}
	}
	if after := readIndexRounds(t, c, edge); after != before {
		t.Fatalf("10 writes with an API key at the edge ran %v read-index rounds, want 0", after-before)
	}

	bad := map[string]string{"Authorization": "Bearer " + p.OwnerToken, "X-Project-Id": p.ID, "X-API-Key": "ebk_wrong"}
	var e struct{ Error struct{ Code string } }
	if st := c.Do(edge, http.MethodPost, "/api/db", bad, map[string]any{"collection": "notes/n0", "data": map[string]any{"v": "bad"}}, &e); st != http.StatusUnauthorized || e.Error.Code != "invalid_api_key" {
		t.Fatalf("write with a wrong key: status %d code %q, want 401 invalid_api_key", st, e.Error.Code)
	}
	var doc struct{ Data struct{ V any } }
	if st := c.Do(edge, http.MethodGet, "/api/db?collection=notes/n0", h, nil, &doc); st != http.StatusOK || doc.Data.V != float64(0) {
		t.Fatalf("after the refused write n0 is %v (status %d), want 0", doc.Data.V, st)
	}

	// A key made on the leader is taken at once by the edge.
	var made struct{ Key string }
	if st := c.Do(leader, http.MethodPost, "/api/keys", h, map[string]string{"name": "fresh"}, &made); st != http.StatusCreated || made.Key == "" {
		t.Fatalf("create a key on the leader: status %d", st)
	}
	fresh := map[string]string{"Authorization": "Bearer " + p.OwnerToken, "X-Project-Id": p.ID, "X-API-Key": made.Key}
	if st := c.Do(edge, http.MethodPost, "/api/db", fresh, map[string]any{"collection": "notes/fresh", "data": map[string]any{"v": 1}}, nil); st/100 != 2 {
		t.Fatalf("write at the edge with a key just made on the leader: status %d", st)
	}
}
