package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
)

// Operator-requested leadership transfer (POST /admin/cluster/leader).

var (
	// ErrNotVoter means a leadership transfer named a member that is not a
	// voter (an edge node): it cannot lead.
	ErrNotVoter = errors.New("the node is not a voter and cannot lead")
	// ErrNoOtherVoter means a transfer to "any other voter" was asked of a
	// cluster whose leader is its only voter.
	ErrNoOtherVoter = errors.New("the cluster has no other voter to lead")
)

// transferPoll is how often a transfer looks for the new leader.
const transferPoll = 20 * time.Millisecond

// TransferLeadershipTo hands leadership to voter id ("" = any other voter)
// and returns the id of the new leader once it is known here. Any node
// serves it: a follower forwards it to the leader, then waits until it sees
// the new leader too. Naming the current leader changes nothing and answers
// its id. ErrUnknownNode for an id that is not a member, ErrNotVoter for a
// non-voter, ErrNoOtherVoter when the leader is the only voter, ErrNoLeader
// when no leader is known.
func (s *Store) TransferLeadershipTo(ctx context.Context, id string) (string, error) {
	if err := s.removedErr(); err != nil {
		return "", err
	}
	if !s.IsLeader() {
		return s.forwardTransfer(ctx, id)
	}
	servers, err := s.configuration()
	if err != nil {
		return "", err
	}
	var target *raft.Server
	others := 0
	for i, srv := range servers {
		if srv.Suffrage == raft.Voter && string(srv.ID) != s.cfg.NodeID {
			others++
		}
		if string(srv.ID) == id {
			target = &servers[i]
		}
	}
	switch {
	case id != "" && target == nil:
		return "", ErrUnknownNode
	case target != nil && target.Suffrage != raft.Voter:
		return "", ErrNotVoter
	case id == s.cfg.NodeID:
		return id, nil
	case others == 0:
		return "", ErrNoOtherVoter
	}
	var f raft.Future
	if target != nil {
		f = s.raft.LeadershipTransferToServer(target.ID, target.Address)
	} else {
		f = s.raft.LeadershipTransfer()
	}
	if err := f.Error(); err != nil {
		// The target did not take over in time (unreachable, behind):
		// nothing changed, the operator may retry.
		return "", fmt.Errorf("%w: transfer leadership: %v", ErrTimeout, err)
	}
	s.logger.Info("leadership transferred on request", "to", id)
	return s.awaitLeader(ctx, func(l string) bool { return l != "" && l != s.cfg.NodeID && (id == "" || l == id) })
}

// awaitLeader polls this node's view of the leader until ok accepts it or
// ctx ends (ErrNoLeader).
func (s *Store) awaitLeader(ctx context.Context, ok func(string) bool) (string, error) {
	t := time.NewTicker(transferPoll)
	defer t.Stop()
	for {
		if l := s.LeaderID(); ok(l) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return "", ErrNoLeader
		case <-s.stop:
			return "", ErrClosed
		case <-t.C:
		}
	}
}

// forwardTransfer asks the leader to transfer, then waits until this node
// knows the new leader. While no leader is known, or the one asked is no
// longer leader, it asks again (until ctx ends: ErrNoLeader).
func (s *Store) forwardTransfer(ctx context.Context, id string) (string, error) {
	body, _ := json.Marshal(map[string]string{"id": id})
	for {
		if s.IsLeader() {
			return s.TransferLeadershipTo(ctx, id)
		}
		base, err := s.leaderURL()
		if err == nil {
			var out struct {
				Leader string `json:"leader"`
			}
			_, err = s.internalCall(ctx, base, "transfer", body, &out)
			switch {
			case err == nil:
				return s.awaitLeader(ctx, func(l string) bool { return l == out.Leader })
			case errors.Is(err, ErrUnknownNode), errors.Is(err, ErrNotVoter), errors.Is(err, ErrNoOtherVoter):
				return "", err
			case !errors.Is(err, errRetry):
				return "", fmt.Errorf("%w: forward leadership transfer: %v", ErrTimeout, err)
			}
		}
		select {
		case <-ctx.Done():
			return "", ErrNoLeader
		case <-s.stop:
			return "", ErrClosed
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serveTransfer is the leader's side of forwardTransfer (internal/transfer).
func (s *Store) serveTransfer(w http.ResponseWriter, r *http.Request) {
	if !s.IsLeader() {
		internalError(w, "not leader", http.StatusMisdirectedRequest)
		return
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		internalError(w, "bad transfer request", http.StatusBadRequest)
		return
	}
	leader, err := s.TransferLeadershipTo(r.Context(), req.ID)
	switch {
	case errors.Is(err, ErrUnknownNode):
		internalError(w, ErrUnknownNode.Error(), http.StatusNotFound)
	case errors.Is(err, ErrNotVoter), errors.Is(err, ErrNoOtherVoter):
		internalError(w, err.Error(), http.StatusConflict)
	case err != nil:
		internalError(w, err.Error(), http.StatusServiceUnavailable)
	default:
		writeJSON(w, map[string]string{"leader": leader})
	}
}
