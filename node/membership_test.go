package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

var adminH = map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}

// mustRemove removes id through member via with DELETE /admin/cluster/nodes.
func mustRemove(t *testing.T, c *nodetest.Cluster, via int, id string) {
	t.Helper()
	var out struct{ Removed string }
	if st := c.Do(via, http.MethodDelete, "/admin/cluster/nodes/"+id, adminH, nil, &out); st != http.StatusOK || out.Removed != id {
		t.Fatalf("remove %s via %s: status %d, %+v", id, c.Nodes[via].ID, st, out)
	}
}

// strongGet reads path from member i's store after a strong read.
func strongGet(t *testing.T, c *nodetest.Cluster, i int, path string) *raftstore.Document {
	t.Helper()
	var d *raftstore.Document
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		s := c.Nodes[i].Node.Store
		if err := s.WaitRead(context.Background(), raftstore.Strong, 0); err != nil {
			return err
		}
		var err error
		d, err = s.Get(path)
		return err
	})
	return d
}

// members is the ids in member i's configuration.
func members(t *testing.T, c *nodetest.Cluster, i int) []string {
	t.Helper()
	st, err := c.Nodes[i].Node.Store.Status(context.Background())
	if err != nil {
		t.Fatalf("status on %s: %v", c.Nodes[i].ID, err)
	}
	var ids []string
	for _, n := range st.Nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// errorCode is the code of an API error body.
func errorCode(b []byte) string {
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}

// A running follower that is removed notices, writes the marker, stops
// serving (not ready, writes and reads refused with node_removed), cannot
// start again with its data dir, and joins again once the dir is wiped.
func TestRemovedFollowerStopsServingAndRejoinsOnlyWiped(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	leader := c.Leader(10 * time.Second)
	f := c.Followers(leader)
	victim, other := f[0], f[1]
	vid := c.Nodes[victim].ID
	p := c.CreateProject(leader)
	rev := mustWrite(t, c, victim, p.OwnerToken, "m/before", map[string]bool{"ok": true})
	nodetest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if c.Nodes[victim].Node.Store.AppliedIndex() < rev {
			return errors.New("victim behind")
		}
		return nil
	})

	// Removal through the other follower: forwarded to the leader.
	mustRemove(t, c, other, vid)

	vs := c.Nodes[victim].Node.Store
	nodetest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		if vs.Removed() == nil {
			return fmt.Errorf("%s does not know it was removed", vid)
		}
		return nil
	})
	marker := filepath.Join(c.Nodes[victim].DataDir, raftstore.RemovedMarkerFile)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("removal marker: %v", err)
	}
	h := map[string]string{"Authorization": "Bearer " + p.OwnerToken}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"write", http.MethodPost, "/api/db", map[string]any{"collection": "m/after", "data": map[string]int{"x": 1}}},
		{"strong read", http.MethodGet, "/api/db?collection=m/before", nil},
		{"local read", http.MethodGet, "/api/db?collection=m/before&consistency=local", nil},
	} {
		st, b, err := nodetest.DoJSON(context.Background(), c.Nodes[victim].URL(), tc.method, tc.path, h, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if st != http.StatusServiceUnavailable || errorCode(b) != "node_removed" || !strings.Contains(string(b), "wipe --data-dir") {
			t.Fatalf("%s on the removed node: %d %s, want 503 node_removed", tc.name, st, b)
		}
	}
	st, b, err := nodetest.DoJSON(context.Background(), c.Nodes[victim].URL(), http.MethodGet, "/readyz", nil, nil)
	if err != nil || st != http.StatusServiceUnavailable || !strings.Contains(string(b), "was removed from the cluster") {
		t.Fatalf("removed node /readyz: %d %s %v", st, b, err)
	}

	// The cluster: two members, a tombstone, no node record.
	if ids := members(t, c, leader); len(ids) != 2 {
		t.Fatalf("members after removal: %v", ids)
	}
	if d := strongGet(t, c, leader, raftstore.RemovedPath(vid)); d == nil {
		t.Fatal("no tombstone for the removed node")
	}
	if d := strongGet(t, c, leader, raftstore.NodeRecordPath(vid)); d != nil {
		t.Fatal("node record of the removed node still there")
	}

	// It cannot start again with its data dir.
	if err := c.Nodes[victim].Node.Close(context.Background()); err != nil {
		t.Logf("close removed node: %v", err)
	}
	c.Nodes[victim].Node = nil
	cfg := c.MemberConfig(victim)
	n, err := node.Start(cfg)
	if err == nil {
		n.Kill()
		t.Fatal("removed node started again with its old data dir")
	}
	if !errors.Is(err, raftstore.ErrRemoved) || !strings.Contains(err.Error(), "node "+vid+" was removed from the cluster at ") ||
		!strings.Contains(err.Error(), "wipe --data-dir to join again as a new member") {
		t.Fatalf("restart of a removed node: %v", err)
	}

	// Wiped, it joins again under the same id as a new member.
	if err := os.RemoveAll(c.Nodes[victim].DataDir); err != nil {
		t.Fatal(err)
	}
	c.StartMember(victim)
	c.WaitReady(victim, 20*time.Second)
	if ids := members(t, c, leader); len(ids) != 3 {
		t.Fatalf("members after rejoin: %v", ids)
	}
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if d := strongGet(t, c, leader, raftstore.RemovedPath(vid)); d != nil {
			return errors.New("tombstone not cleared by the rejoin")
		}
		return nil
	})
	if d := mustRead(t, c, victim, p.OwnerToken, "collection=m/before"); d.Revision != rev {
		t.Fatalf("rejoined node reads rev %d, want %d", d.Revision, rev)
	}
	mustWrite(t, c, victim, p.OwnerToken, "m/rejoined", map[string]bool{"ok": true})
	// Its restart with state is an ordinary one now.
	if err := c.Nodes[victim].Node.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.StartMember(victim)
	c.WaitReady(victim, 20*time.Second)
}

// A node that was down while it was removed learns it at start: it asks the
// members, writes the marker and refuses to start (and from then on refuses
// without asking).
func TestNodeRemovedWhileOfflineRefusesToStart(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	leader := c.Leader(10 * time.Second)
	victim := c.Followers(leader)[0]
	vid := c.Nodes[victim].ID
	if err := c.Nodes[victim].Node.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Nodes[victim].Node = nil
	mustRemove(t, c, leader, vid)

	n, err := node.Start(c.MemberConfig(victim))
	if err == nil {
		n.Kill()
		t.Fatal("a node removed while offline started with its old state")
	}
	if !errors.Is(err, raftstore.ErrRemoved) || !strings.Contains(err.Error(), "wipe --data-dir") {
		t.Fatalf("start of a node removed while offline: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Nodes[victim].DataDir, raftstore.RemovedMarkerFile)); err != nil {
		t.Fatalf("no marker after learning of the removal at start: %v", err)
	}
	// The marker alone now refuses it, even with every peer gone.
	for i := range c.Nodes {
		if i != victim {
			c.Kill(i)
		}
	}
	start := time.Now()
	if n, err := node.Start(c.MemberConfig(victim)); err == nil {
		n.Kill()
		t.Fatal("started despite the marker")
	} else if !errors.Is(err, raftstore.ErrRemoved) {
		t.Fatalf("start with the marker: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("refusing on the marker took %v", took)
	}
}

// Only a definite answer from a live member counts: a node with state whose
// peers are all down, or hang, or refuse to say, starts normally.
func TestNodeWithUnreachablePeersStartsNormally(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	for i := range c.Nodes {
		c.Kill(i)
	}
	// A peer that accepts and never answers, and one that says 503.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
		<-r.Context().Done()
	}))
	defer func() {
		hang.CloseClientConnections()
		hang.Close()
	}()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	cfg := c.MemberConfig(1)
	cfg.Join = append([]string{hang.URL, busy.URL}, cfg.Join...)
	start := time.Now()
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatalf("node with unreachable peers did not start: %v", err)
	}
	took := time.Since(start)
	c.Nodes[1].Node = n
	if took > 6*time.Second {
		t.Fatalf("start took %v with unreachable peers", took)
	}
	if _, err := os.Stat(filepath.Join(c.Nodes[1].DataDir, raftstore.RemovedMarkerFile)); err == nil {
		t.Fatal("marker written without a definite answer")
	}
	t.Logf("started in %v with every peer down or silent", took.Round(time.Millisecond))
	c.StartMember(0)
	c.StartMember(2)
	for i := range c.Nodes {
		c.WaitReady(i, 30*time.Second)
	}
	if n.Store.Removed() != nil {
		t.Fatal("node thinks it was removed")
	}
}

// Removing the leader itself: it hands leadership over, the new leader
// removes it, and it then knows it was removed like any other node.
func TestRemoveLeaderItselfMarksIt(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	leader := c.Leader(10 * time.Second)
	id := c.Nodes[leader].ID
	mustRemove(t, c, leader, id)
	nodetest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		if c.Nodes[leader].Node.Store.Removed() == nil {
			return fmt.Errorf("old leader %s does not know it was removed", id)
		}
		return nil
	})
	other := c.Followers(leader)[0]
	nl := c.Leader(10 * time.Second)
	if nl == leader {
		t.Fatalf("removed node %s still leads", id)
	}
	if ids := members(t, c, other); len(ids) != 2 {
		t.Fatalf("members: %v", ids)
	}
	if d := strongGet(t, c, other, raftstore.RemovedPath(id)); d == nil {
		t.Fatal("no tombstone for the removed leader")
	}
	for _, i := range c.Followers(leader) {
		c.WaitReady(i, 10*time.Second)
	}
}

// Removing an unknown id answers 404 with the API's error shape, through the
// leader and through a follower (forwarded).
func TestRemoveUnknownNodeIs404(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 2})
	leader := c.Leader(10 * time.Second)
	for _, i := range []int{leader, c.Followers(leader)[0]} {
		st, b, err := nodetest.DoJSON(context.Background(), c.Nodes[i].URL(), http.MethodDelete, "/admin/cluster/nodes/nope", adminH, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st != http.StatusNotFound || errorCode(b) != "not_found" || !strings.Contains(string(b), "nope") {
			t.Fatalf("remove unknown via %s: %d %s", c.Nodes[i].ID, st, b)
		}
	}
}
