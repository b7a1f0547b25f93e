package raftstore

import (
	"errors"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// heartbeatGuard wraps the Raft transport so that raft's heartbeat fast path
// can never change this node's term or role.
//
// hashicorp/raft (v1.8.0, and main as of hashicorp/raft#695) answers a
// heartbeat on the transport's goroutine, not on its main loop, and a
// heartbeat with a newer term there sets the node's term and makes it a
// follower. A deposed leader whose main loop is still in its leader loop
// (say it was paused, then resumed: it takes up the writes queued meanwhile)
// then appends those writes with the new leader's term: dispatchLogs reads
// the term afresh. The new leader's entries at the same indexes carry the
// same term, so when this node follows it, raft's consistency check takes
// them for duplicates and keeps this node's own: it applies writes the
// cluster never committed and never applies the ones it did. That is the
// divergence robustness found in pause-leader (docs/robustness.md).
//
// The guard lets a heartbeat take the fast path only when it cannot change
// anything: its term is older than ours (raft ignores it), or it is ours and
// we are a follower (raft only notes the contact). Any other heartbeat
// (a newer term, or a leader or candidate hearing of its own term's leader)
// is answered with an error, which the sender counts as a failed heartbeat
// and retries; the new leader's next AppendEntries, which it sends at
// least every CommitTimeout, reaches the main loop, which steps down in
// order. A follower thus keeps the fast path in the steady state (its
// purpose: not timing out while its disk is slow).
type heartbeatGuard struct {
	raft.Transport
	node    atomic.Pointer[raft.Raft]
	refused atomic.Uint64
}

// heartbeatGuardPreVote is a heartbeatGuard over a transport that supports
// pre-vote: raft asks the transport it is given, so the wrapper must not hide it.
type heartbeatGuardPreVote struct {
	*heartbeatGuard
	pv raft.WithPreVote
}

func (g heartbeatGuardPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return g.pv.RequestPreVote(id, target, args, resp)
}

// errHeartbeatDeferred answers a heartbeat that would have changed this
// node's term or role outside raft's main loop.
var errHeartbeatDeferred = errors.New("heartbeat deferred: it would change this node's term or role outside raft's main loop")

// guardHeartbeats wraps t. attach must be called with the Raft instance that
// uses it; until then every heartbeat is refused.
func guardHeartbeats(t raft.Transport) (raft.Transport, *heartbeatGuard) {
	g := &heartbeatGuard{Transport: t}
	if pv, ok := t.(raft.WithPreVote); ok {
		return heartbeatGuardPreVote{heartbeatGuard: g, pv: pv}, g
	}
	return g, g
}

func (g *heartbeatGuard) attach(r *raft.Raft) { g.node.Store(r) }

// SetHeartbeatHandler installs raft's fast path behind the guard.
func (g *heartbeatGuard) SetHeartbeatHandler(fn func(rpc raft.RPC)) {
	if fn == nil {
		g.Transport.SetHeartbeatHandler(nil)
		return
	}
	g.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if g.harmless(rpc) {
			fn(rpc)
			return
		}
		g.refused.Add(1)
		rpc.Respond(nil, errHeartbeatDeferred)
	})
}

// harmless reports whether raft may handle the heartbeat off its main loop.
// A node's term only grows, and it leads only in a term newer than the one
// it followed in, so a heartbeat found harmless here stays so when raft
// handles it just after: a leader can never be deposed by one. What remains
// is what raft does on every heartbeat today: a follower whose election
// timer fires in the instructions between this check and raft's own may be
// turned from candidate back into follower.
func (g *heartbeatGuard) harmless(rpc raft.RPC) bool {
	r := g.node.Load()
	req, ok := rpc.Command.(*raft.AppendEntriesRequest)
	if r == nil || !ok {
		return false
	}
	term := r.CurrentTerm()
	return req.Term < term || (req.Term == term && r.State() == raft.Follower)
}

// Close closes the wrapped transport if it can be closed (raft closes the
// transport it was given on shutdown).
func (g *heartbeatGuard) Close() error {
	if c, ok := g.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
