package raftstore

// A node that comes back with its data dir but on another Raft address
// (dynamic ports, a moved host, a restore made with another
// --advertise-raft than the one it is served with) starts Raft with a
// configuration that still names its old address, and nobody reaches it
// there: as a follower the leader keeps dialing the old address and it never
// catches up; as the leader, the others dial the old address once leadership
// moves. hashicorp/raft replaces the address of a server id that is already
// in the configuration when AddVoter (or AddNonvoter) names it again with
// the same suffrage (nextConfiguration), so the address is healed that way:
//
//   - a leader whose own entry differs, after its barrier, re-adds itself
//     with its transport's address. That is safe for the leader itself:
//     nextConfiguration keeps the suffrage and only replaces the address,
//     replication and the commitment go by server id and skip the leader
//     (startStopReplication), and followers learn the leader's address from
//     every RPC header anyway, so nothing restarts and it does not step down.
//     Removing and adding itself instead would make it step down;
//   - a follower whose own entry differs asks the members (its --join list
//     and the node records in its tree) with a join request marked
//     Readdress; the leader serves it by re-adding the id with its current
//     suffrage and the address the node gives. It retries with backoff until
//     its own configuration names its new address or the store closes.
//
// A readdress only ever updates a member. The leader refuses one for an id
// that is not in its configuration (ErrUnknownNode), and unlike a join it
// never clears a removal tombstone; the check and the change are serialised
// with removals on the leader (Store.membershipMu), so a removal that
// committed is always seen. A node does not ask at all once it knows it was
// removed or its own configuration no longer names it: a node removed while
// away is never brought back by this path (membership.go decides its fate).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

const (
	// readdressMinBackoff and readdressMaxBackoff pace a follower's requests.
	readdressMinBackoff = 250 * time.Millisecond
	readdressMaxBackoff = 5 * time.Second
	// readdressWarnAfter is how long a follower asks before it warns that
	// its address is still not updated.
	readdressWarnAfter = 30 * time.Second
)

// ownServer returns this node's entry in its latest configuration.
func (s *Store) ownServer() (raft.Server, bool, error) {
	servers, err := s.configuration()
	if err != nil {
		return raft.Server{}, false, err
	}
	for _, srv := range servers {
		if string(srv.ID) == s.cfg.NodeID {
			return srv, true, nil
		}
	}
	return raft.Server{}, false, nil
}

// readdressMember, on the leader, replaces member id's Raft address with
// addr, keeping its suffrage. It reports whether the configuration changed;
// ErrUnknownNode when id is not a member.
func (s *Store) readdressMember(id string, addr raft.ServerAddress) (bool, error) {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	servers, err := s.configuration()
	if err != nil {
		return false, err
	}
	var cur raft.Server
	found := false
	for _, srv := range servers {
		if string(srv.ID) == id {
			cur, found = srv, true
			break
		}
	}
	if !found {
		return false, ErrUnknownNode
	}
	if cur.Address == addr {
		return false, nil
	}
	var f raft.IndexFuture
	if cur.Suffrage == raft.Nonvoter {
		f = s.raft.AddNonvoter(cur.ID, addr, 0, 10*time.Second)
	} else {
		f = s.raft.AddVoter(cur.ID, addr, 0, 10*time.Second)
	}
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return false, fmt.Errorf("update the raft address of %s: %w", id, ErrNoLeader)
		case errors.Is(err, raft.ErrRaftShutdown):
			return false, ErrClosed
		}
		return false, fmt.Errorf("update the raft address of %s: %w", id, err)
	}
	s.logger.Info("raft address of a member updated", "id", id, "from", string(cur.Address), "to", string(addr))
	return true, nil
}

// readdressSelfAsLeader runs in establish: a leader whose own entry names an
// old address puts its transport's address there.
func (s *Store) readdressSelfAsLeader() {
	_, err := s.readdressMember(s.cfg.NodeID, s.transport.LocalAddr())
	switch {
	case err == nil, errors.Is(err, ErrUnknownNode):
		// Updated, already right, or (a leader being removed) not ours to fix.
	default:
		s.logger.Warn("could not update this leader's raft address in the configuration; retrying", "err", err)
	}
}

// healAddress runs on a node that started with state until its own entry in
// the configuration names the address it listens on, the node learns it is
// not (or no longer) a member, or the store closes.
func (s *Store) healAddress() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	want := s.transport.LocalAddr()
	backoff := readdressMinBackoff
	var started time.Time
	warned := false
	for {
		if s.removed.Load() != nil {
			return
		}
		own, in, err := s.ownServer()
		switch {
		case err != nil:
			s.logger.Debug("raft address check: no configuration", "err", err)
		case !in:
			if started.IsZero() {
				s.logger.Debug("this node's configuration does not name it; its raft address is not checked")
			} else {
				s.logger.Warn("this node's configuration no longer names it; its raft address is not updated")
			}
			return
		case own.Address == want:
			if !started.IsZero() {
				s.logger.Info("this node's raft address is updated in the configuration", "raft", string(want), "took", time.Since(started).Round(time.Millisecond))
			}
			return
		default:
			if started.IsZero() {
				started = time.Now()
				s.logger.Info("this node's raft address changed since its configuration was written; asking the cluster to update it",
					"configured", string(own.Address), "raft", string(want))
			}
			err = s.askReaddress(ctx, want)
			if errors.Is(err, ErrUnknownNode) {
				s.logger.Warn("the cluster does not know this node as a member; its raft address is not updated")
				return
			}
			if err != nil {
				s.logger.Debug("raft address not updated yet", "err", err)
				if !warned && time.Since(started) > readdressWarnAfter {
					warned = true
					s.logger.Warn("the cluster still dials this node at its old raft address; retrying",
						"configured", string(own.Address), "raft", string(want), "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, readdressMaxBackoff)
	}
}

// askReaddress asks for this node's entry to name addr: directly when this
// node leads, otherwise through the members it knows of.
func (s *Store) askReaddress(ctx context.Context, addr raft.ServerAddress) error {
	if s.IsLeader() {
		_, err := s.readdressMember(s.cfg.NodeID, addr)
		return err
	}
	peers := s.peerURLs()
	if len(peers) == 0 {
		return errors.New("no members known to ask (no --join list and no node records)")
	}
	req := JoinRequest{ID: s.cfg.NodeID, RaftAddr: string(addr), HTTPAddr: s.cfg.HTTPAdvertise, Voter: s.cfg.Voter, Readdress: true}
	via, err := s.askMembers(ctx, peers, req)
	if err != nil {
		return err
	}
	s.logger.Debug("the cluster accepted this node's new raft address", "via", via)
	return nil
}
