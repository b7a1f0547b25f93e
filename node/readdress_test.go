package node_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// A node that comes back with its data dir on another Raft address
// (raftstore/readdress.go) is healed: the configuration names the new
// address, it catches up, and it can lead.

// raftAddrIn is member id's Raft address in the configuration member via
// reports (GET /admin/cluster).
func raftAddrIn(t *testing.T, c *nodetest.Cluster, via int, id string) string {
	t.Helper()
	var st raftstore.ClusterStatus
	if code := c.Do(via, http.MethodGet, "/admin/cluster", adminH, nil, &st); code != http.StatusOK {
		t.Fatalf("GET /admin/cluster on %s: %d", c.Nodes[via].ID, code)
	}
	for _, n := range st.Nodes {
		if n.ID == id {
			return n.RaftAddr
		}
	}
	return ""
}

// waitRaftAddr waits until member via's configuration names id at want.
func waitRaftAddr(t *testing.T, c *nodetest.Cluster, via int, id, want string) {
	t.Helper()
	nodetest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		if got := raftAddrIn(t, c, via, id); got != want {
			return fmt.Errorf("%s's configuration names %s at %q, want %q", c.Nodes[via].ID, id, got, want)
		}
		return nil
	})
}

// waitRecordRaftAddr waits until member id's node record (read strongly on
// member via) holds want as its Raft address.
func waitRecordRaftAddr(t *testing.T, c *nodetest.Cluster, via int, id, want string) {
	t.Helper()
	nodetest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		d := strongGet(t, c, via, raftstore.NodeRecordPath(id))
		if d == nil {
			return fmt.Errorf("no node record for %s", id)
		}
		if !strings.Contains(string(d.Data), `"raftAddr":"`+want+`"`) {
			return fmt.Errorf("node record of %s: %s, want raftAddr %s", id, d.Data, want)
		}
		return nil
	})
}

// mustReadBoth reads coll through member i strongly, then locally with
// X-Min-Revision, and checks both give revision rev.
func mustReadBoth(t *testing.T, c *nodetest.Cluster, i int, tok, coll string, rev uint64) {
	t.Helper()
	if d := mustRead(t, c, i, tok, "collection="+coll); d.Revision != rev {
		t.Fatalf("strong read of %s on %s: rev %d, want %d", coll, c.Nodes[i].ID, d.Revision, rev)
	}
	var d doc
	h := map[string]string{"Authorization": "Bearer " + tok, "X-Min-Revision": strconv.FormatUint(rev, 10)}
	if st := c.Do(i, http.MethodGet, "/api/db?consistency=local&collection="+coll, h, nil, &d); st != http.StatusOK || d.Revision != rev {
		t.Fatalf("local read of %s with X-Min-Revision %d on %s: status %d rev %d", coll, rev, c.Nodes[i].ID, st, d.Revision)
	}
}

// mustLead hands leadership from member from (the leader) to member to,
// which must be the only other voter running, and waits until to leads.
func mustLead(t *testing.T, c *nodetest.Cluster, from, to int) {
	t.Helper()
	nodetest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		if c.Nodes[to].Node.Store.IsLeader() {
			return nil
		}
		if c.Nodes[from].Node.Store.IsLeader() {
			if err := c.Nodes[from].Node.Store.TransferLeadership(); err != nil {
				return err
			}
		}
		return fmt.Errorf("%s does not lead yet", c.Nodes[to].ID)
	})
}

// A follower stopped and started again with its data dir on a new Raft
// port asks the cluster to update its address: it catches up (strong and
// local reads of writes made while it was down), the leader's configuration
// and its node record name the new address, and it can lead the cluster.
func TestFollowerBackOnNewRaftPortIsReaddressed(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	p := c.CreateProject(0)
	leader := c.Leader(10 * time.Second)
	fs := c.Followers(leader)
	f, other := fs[0], fs[1]
	fid := c.Nodes[f].ID
	mustWrite(t, c, leader, p.OwnerToken, "moved/before", map[string]bool{"ok": true})

	c.Stop(f)
	var last uint64
	for i := 0; i < 20; i++ {
		last = mustWrite(t, c, leader, p.OwnerToken, fmt.Sprintf("moved/d%02d", i), map[string]int{"i": i})
	}
	old := c.Nodes[f].RaftAddr
	moved := c.MoveRaftPort(f)
	if moved == old {
		t.Fatalf("new raft address %s is the old one", moved)
	}
	c.StartMember(f)
	c.WaitReady(f, 30*time.Second)
	mustReadBoth(t, c, f, p.OwnerToken, "moved/d19", last)
	waitRaftAddr(t, c, leader, fid, moved)
	waitRaftAddr(t, c, other, fid, moved)
	waitRecordRaftAddr(t, c, leader, fid, moved)

	// Make it the leader: with the third voter down, it is the only one
	// leadership can go to, and it needs the old leader's vote and acks.
	c.Stop(other)
	rev := mustWrite(t, c, leader, p.OwnerToken, "moved/other-down", map[string]bool{"ok": true})
	if err := c.Nodes[f].Node.Store.WaitApplied(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	mustLead(t, c, leader, f)
	rev = mustWrite(t, c, f, p.OwnerToken, "moved/f-leads", map[string]bool{"ok": true})
	mustReadBoth(t, c, leader, p.OwnerToken, "moved/f-leads", rev)
	waitRaftAddr(t, c, f, fid, moved)
	// The third voter comes back and catches up from the new leader.
	c.StartMember(other)
	c.WaitReady(other, 30*time.Second)
	mustReadBoth(t, c, other, p.OwnerToken, "moved/f-leads", rev)
}

// The leader stopped gracefully (leadership moves) and started again with
// its data dir on a new Raft port is readdressed by the new leader and
// catches up.
func TestLeaderBackOnNewRaftPortIsReaddressed(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	p := c.CreateProject(0)
	old := c.Leader(10 * time.Second)
	oid := c.Nodes[old].ID
	mustWrite(t, c, old, p.OwnerToken, "lmoved/before", map[string]bool{"ok": true})

	c.Stop(old)
	nl := c.Leader(10 * time.Second)
	var last uint64
	for i := 0; i < 20; i++ {
		last = mustWrite(t, c, nl, p.OwnerToken, fmt.Sprintf("lmoved/d%02d", i), map[string]int{"i": i})
	}
	moved := c.MoveRaftPort(old)
	c.StartMember(old)
	c.WaitReady(old, 30*time.Second)
	mustReadBoth(t, c, old, p.OwnerToken, "lmoved/d19", last)
	waitRaftAddr(t, c, nl, oid, moved)
	waitRecordRaftAddr(t, c, nl, oid, moved)
	// A write through it still commits.
	rev := mustWrite(t, c, old, p.OwnerToken, "lmoved/after", map[string]bool{"ok": true})
	mustReadBoth(t, c, nl, p.OwnerToken, "lmoved/after", rev)
}

// A single node started again with its data dir on a new Raft port leads,
// updates its own entry, serves writes, and a node that joins it afterwards
// replicates and can lead (it dials the single node at the new address).
func TestSingleNodeBackOnNewRaftPortIsReaddressed(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	p := c.CreateProject(0)
	mustWrite(t, c, 0, p.OwnerToken, "solo/before", map[string]bool{"ok": true})
	c.Stop(0)
	moved := c.MoveRaftPort(0)
	c.StartMember(0)
	c.WaitReady(0, 20*time.Second)
	soloJoinsAndLeads(t, c, p, moved)
}

// soloJoinsAndLeads checks that the only member (0), back on Raft address
// moved, leads with that address in its configuration, takes writes, and
// that a second voter joining it replicates and can lead.
func soloJoinsAndLeads(t *testing.T, c *nodetest.Cluster, p nodetest.Project, moved string) {
	t.Helper()
	if !c.Nodes[0].Node.Store.IsLeader() {
		t.Fatal("the only voter does not lead")
	}
	waitRaftAddr(t, c, 0, c.Nodes[0].ID, moved)
	rev := mustWrite(t, c, 0, p.OwnerToken, "solo/after", map[string]bool{"ok": true})
	waitRecordRaftAddr(t, c, 0, c.Nodes[0].ID, moved)

	j := c.AddMember(false)
	mustReadBoth(t, c, j, p.OwnerToken, "solo/after", rev)
	mustLead(t, c, 0, j)
	rev = mustWrite(t, c, j, p.OwnerToken, "solo/second-leads", map[string]bool{"ok": true})
	mustReadBoth(t, c, 0, p.OwnerToken, "solo/second-leads", rev)
	waitRaftAddr(t, c, j, c.Nodes[0].ID, moved)
}

// A node restored from a backup with one --advertise-raft and then served
// on another Raft address heals its configuration the same way.
func TestRestoredNodeServedOnAnotherRaftAddress(t *testing.T) {
	t.Parallel()
	src := nodetest.Start(t, nodetest.Options{Voters: 1})
	p := src.CreateProject(0)
	rev := mustWrite(t, src, 0, p.OwnerToken, "solo/backed-up", map[string]bool{"ok": true})
	var backup bytes.Buffer
	if _, err := src.Nodes[0].Node.Store.Backup(context.Background(), &backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	src.Stop(0)

	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	c.Stop(0)
	if err := os.RemoveAll(c.Nodes[0].DataDir); err != nil {
		t.Fatal(err)
	}
	// Restored for an address it will not be served on.
	const restoredFor = "127.0.0.1:1"
	if _, err := raftstore.Restore(context.Background(), raftstore.RestoreConfig{Dir: c.Nodes[0].DataDir, NodeID: c.Nodes[0].ID,
		RaftAdvertise: restoredFor, From: &backup}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	moved := c.MoveRaftPort(0)
	c.StartMember(0)
	c.WaitReady(0, 20*time.Second)
	mustReadBoth(t, c, 0, p.OwnerToken, "solo/backed-up", rev)
	soloJoinsAndLeads(t, c, p, moved)
}

// Removing the only voter is refused with 409 last_voter, through the voter
// and through an edge (forwarded), and the cluster goes on committing.
func TestRemoveOnlyVoterIs409(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 1, Edges: 1})
	p := c.CreateProject(0)
	for _, i := range []int{0, 1} {
		st, b, err := nodetest.DoJSON(context.Background(), c.Nodes[i].URL(), http.MethodDelete, "/admin/cluster/nodes/n1", adminH, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st != http.StatusConflict || errorCode(b) != "last_voter" ||
			!strings.Contains(string(b), "cannot remove the only voter; the cluster would have no quorum") {
			t.Fatalf("remove the only voter via %s: %d %s", c.Nodes[i].ID, st, b)
		}
	}
	if ids := members(t, c, 0); len(ids) != 2 {
		t.Fatalf("members after the refused removals: %v", ids)
	}
	rev := mustWrite(t, c, 1, p.OwnerToken, "still/works", map[string]bool{"ok": true})
	mustReadBoth(t, c, 1, p.OwnerToken, "still/works", rev)
	// Removing the edge (a non-voter) is still allowed.
	mustRemove(t, c, 0, c.Nodes[1].ID)
}

// postReaddress sends member via's internal join endpoint a readdress
// request, as a node that came back on another Raft address does.
func postReaddress(t *testing.T, c *nodetest.Cluster, via int, req raftstore.JoinRequest) (int, string) {
	t.Helper()
	req.Readdress = true
	st, b, err := nodetest.DoJSON(context.Background(), c.Nodes[via].URL(), http.MethodPost, raftstore.InternalPrefix+"join",
		map[string]string{raftstore.SecretHeader: nodetest.Secret}, req)
	if err != nil {
		t.Fatal(err)
	}
	return st, string(b)
}

// A readdress never brings a removed node back: the leader (asked directly
// or through a follower) refuses an id that is not a member, and the
// tombstone stays.
func TestReaddressNeverReaddsARemovedNode(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	leader := c.Leader(10 * time.Second)
	victim := c.Followers(leader)[0]
	vid := c.Nodes[victim].ID
	mustRemove(t, c, leader, vid)
	c.Stop(victim)
	other := c.Followers(leader)[0]
	for _, via := range []int{leader, other} {
		st, body := postReaddress(t, c, via, raftstore.JoinRequest{ID: vid, RaftAddr: "127.0.0.1:1", HTTPAddr: c.Nodes[victim].URL(), Voter: true})
		if st != http.StatusNotFound || !strings.Contains(body, raftstore.ErrUnknownNode.Error()) {
			t.Fatalf("readdress of removed %s via %s: %d %s", vid, c.Nodes[via].ID, st, body)
		}
	}
	if ids := members(t, c, leader); len(ids) != 2 {
		t.Fatalf("members after the refused readdress: %v", ids)
	}
	if d := strongGet(t, c, leader, raftstore.RemovedPath(vid)); d == nil {
		t.Fatal("the refused readdress cleared the tombstone")
	}
}

// A readdress keeps the member's suffrage whatever the request says, and an
// edge that comes back on a new Raft port stays a non-voter there.
func TestReaddressKeepsSuffrage(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 1, Edges: 1})
	p := c.CreateProject(0)
	eid := c.Nodes[1].ID
	c.Stop(1)
	rev := mustWrite(t, c, 0, p.OwnerToken, "edge/while-down", map[string]bool{"ok": true})
	moved := c.MoveRaftPort(1)
	if st, body := postReaddress(t, c, 0, raftstore.JoinRequest{ID: eid, RaftAddr: moved, HTTPAddr: c.Nodes[1].URL(), Voter: true}); st != http.StatusOK {
		t.Fatalf("readdress of %s: %d %s", eid, st, body)
	}
	c.StartMember(1)
	c.WaitReady(1, 20*time.Second)
	mustReadBoth(t, c, 1, p.OwnerToken, "edge/while-down", rev)
	var st raftstore.ClusterStatus
	if code := c.Do(0, http.MethodGet, "/admin/cluster", adminH, nil, &st); code != http.StatusOK {
		t.Fatalf("GET /admin/cluster: %d", code)
	}
	for _, n := range st.Nodes {
		if n.ID == eid && (n.Voter || n.RaftAddr != moved) {
			t.Fatalf("edge after readdress: %+v, want a non-voter at %s", n, moved)
		}
	}
}
