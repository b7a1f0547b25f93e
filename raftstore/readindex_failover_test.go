package raftstore

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// A leader that crashes takes its connections with it without closing them
// (or leaves an address nothing answers on): a follower's read-index request
// to it hangs. Every strong read and every write on the follower waits for
// that one coalesced round, so before readIndexAttemptTimeout they all
// stalled for the round's full 5 s even once a new leader had been elected
// (seen in the docker-compose test: writers on the surviving nodes refused
// for about 4 s after a SIGKILL of the leader, the election itself taking
// under 2 s). Now the attempt gives up and the follower asks the successor.
func TestForwardedReadIndexMovesOnFromAHungLeader(t *testing.T) {
	c := newRVCluster(t, 3, rvTuning())
	l := c.leader()
	f := (l + 1) % 3
	if _, err := c.nodes[f].s.ReadIndex(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("read index on %s before the crash: %v", c.nodes[f].id, err)
	}

	// The leader's HTTP side now accepts requests and never answers; its
	// Raft side stops: a crashed host as the follower sees it.
	var hang http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c.nodes[l].h.Store(&hang)
	_ = c.nodes[l].s.Close()
	c.nodes[l].s = nil
	crashed := time.Now()

	// The follower still takes the old leader for the leader for a moment,
	// so its first attempt goes there and hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	err := c.nodes[f].s.WaitRead(ctx, Strong, 0)
	took := time.Since(crashed)
	if err != nil {
		t.Fatalf("strong read on %s after the leader %s crashed: %v after %v", c.nodes[f].id, c.nodes[l].id, err, took.Round(time.Millisecond))
	}
	// Election (a few 250 ms timeouts) plus at most one hung attempt.
	if limit := 3 * time.Second; took > limit {
		t.Fatalf("strong read on %s took %v after the leader crashed, more than %v", c.nodes[f].id, took.Round(time.Millisecond), limit)
	}
	t.Logf("strong read on %s done %v after the leader %s crashed", c.nodes[f].id, took.Round(time.Millisecond), c.nodes[l].id)
}
