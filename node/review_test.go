package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// Removing the node that currently leads (`edgebase cluster remove --node-id
// <leader>`): RemoveNode runs raft.RemoveServer on the leader itself, which
// with raft's default ShutdownOnRemove shuts that node's Raft down once the
// change commits. RemoveNode then proposes the deletion of the node record
// through the same, now dead, store: no leader is ever known, Propose retries
// until the 15 s request deadline and the operator gets an error although
// the member was removed, and _sys/nodes/<id> is never deleted.
func TestReviewRemoveLeaderItself(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	l := c.Leader(10 * time.Second)
	id := c.Nodes[l].ID
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, body, err := nodetest.DoJSON(ctx, c.Nodes[l].URL(), http.MethodDelete, "/admin/cluster/nodes/"+id,
		map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	var other int
	for _, j := range c.Followers(l) {
		other = j
	}
	// The member is gone from the configuration either way.
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		cs, err := c.Nodes[other].Node.Store.Status(context.Background())
		if err != nil {
			return err
		}
		for _, n := range cs.Nodes {
			if n.ID == id {
				return errStr("still a member")
			}
		}
		if cs.Leader == "" || cs.Leader == id {
			return errStr("no new leader yet")
		}
		return nil
	})
	// Give the record deletion every chance to have happened.
	var rec *raftstore.Document
	nodetest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		s := c.Nodes[other].Node.Store
		if err := s.WaitRead(context.Background(), raftstore.Strong, 0); err != nil {
			return err
		}
		rec, err = s.Get(raftstore.NodeRecordPath(id))
		return err
	})
	if st != http.StatusOK || rec != nil {
		t.Fatalf("removing the leader %s: status %d after %v (%s); its node record still present: %v",
			id, st, took.Round(time.Millisecond), body, rec != nil)
	}
}

type errStr string

func (e errStr) Error() string { return string(e) }
