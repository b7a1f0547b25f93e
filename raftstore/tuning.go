package raftstore

import (
	"errors"
	"fmt"
	"time"
)

// WANTuning is the --wan preset: timings for members whose round trips reach
// about 250 ms (regions on different continents). docs/operations.md
// explains each; the measurements behind them are in docs/edge.md:
//
//   - MaxRPCsInFlight 64: appends in flight to one follower at once. Raft's
//     default, 2, suits a LAN; on a 150 ms link the leader then sends its
//     next append (the one that carries the new commit index) only when an
//     answer comes back, so an edge learns of a commit a whole round trip
//     after the entry, not one way: live delivery at a far edge doubled.
//   - HeartbeatTimeout 500 ms: a follower campaigns after 0.5-1 s
//     (randomised) without contact; the leader sends a heartbeat every tenth
//     of it (50 ms), so even a 125 ms one-way delay with 20% jitter leaves
//     several heartbeats of slack, and failover stays under 2 s.
//   - ElectionTimeout 500 ms: a candidate's vote round (one round trip plus
//     an fsync) fits twice before it starts another. It matters after a
//     split vote (the two surviving voters of three time out within a
//     round trip of each other and each votes for itself, in about one
//     failover in three): each then waits 0.5-1 s, not 1-2 s, before
//     trying again. Measured: failover 2.9-3.5 s with 1 s, under 2 s with
//     500 ms (docs/edge.md).
//   - LeaderLeaseTimeout 500 ms: a leader steps down when a quorum has not
//     answered for this long; two 250 ms round trips.
//   - CommitTimeout 2 ms: followers and edges learn a commit index only with
//     the next append, which the leader sends at the latest after 1-2 commit
//     timeouts when nothing else is sent, so this bounds the extra delay of
//     live delivery at an edge: measured at the ap edge (75 ms one way,
//     ±7.5 ms jitter), 81.0 / 90.4 ms p50 / p99 with 5 ms and 79.0-79.8 /
//     85.9-86.2 with 2 ms; the us edge 6.5 -> 1.7 ms p50. The price is an
//     empty append to each follower every 2-4 ms while idle (about 330 a
//     second each) instead of every 5-10 ms.
//   - MaxAppendEntries 512: fewer, larger appends on a long pipe.
//   - TrailingLogs 50000: an edge cut off for minutes catches up from the
//     log rather than by a snapshot sent across the WAN.
func WANTuning() Tuning {
	t := DefaultTuning()
	t.HeartbeatTimeout = 500 * time.Millisecond
	t.ElectionTimeout = 500 * time.Millisecond
	t.LeaderLeaseTimeout = 500 * time.Millisecond
	t.CommitTimeout = 2 * time.Millisecond
	t.MaxAppendEntries = 512
	t.MaxRPCsInFlight = 64
	t.TrailingLogs = 50000
	return t
}

// Effective is t with every zero field given its default, as Open uses it.
func (t Tuning) Effective() Tuning { return t.withDefaults() }

// Validate refuses timings Raft cannot run with, on the effective values
// (Open calls it): negative durations, a heartbeat timeout longer than the
// election timeout, a leader lease longer than the heartbeat timeout, and
// values under Raft's minimums.
func (t Tuning) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat timeout", t.HeartbeatTimeout}, {"election timeout", t.ElectionTimeout},
		{"leader lease timeout", t.LeaderLeaseTimeout}, {"commit timeout", t.CommitTimeout}, {"snapshot interval", t.SnapshotInterval}} {
		if d.v < 0 {
			return fmt.Errorf("raft %s %v is negative", d.name, d.v)
		}
	}
	t = t.withDefaults()
	switch {
	case t.HeartbeatTimeout < 5*time.Millisecond || t.ElectionTimeout < 5*time.Millisecond || t.LeaderLeaseTimeout < 5*time.Millisecond:
		return errors.New("raft heartbeat, election and leader lease timeouts must be at least 5ms")
	case t.CommitTimeout < time.Millisecond:
		return errors.New("raft commit timeout must be at least 1ms")
	case t.HeartbeatTimeout > t.ElectionTimeout:
		return fmt.Errorf("raft heartbeat timeout %v is longer than the election timeout %v", t.HeartbeatTimeout, t.ElectionTimeout)
	case t.LeaderLeaseTimeout > t.HeartbeatTimeout:
		return fmt.Errorf("raft leader lease timeout %v is longer than the heartbeat timeout %v", t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	case t.MaxAppendEntries < 0 || t.MaxAppendEntries > 1024:
		return fmt.Errorf("raft max append entries %d is not in 1-1024", t.MaxAppendEntries)
	case t.MaxRPCsInFlight < 1 || t.MaxRPCsInFlight > 1024:
		return fmt.Errorf("raft appends in flight %d is not in 1-1024", t.MaxRPCsInFlight)
	}
	return nil
}

// String lists the Raft timings (logs).
func (t Tuning) String() string {
	return fmt.Sprintf("heartbeat=%v election=%v leaderLease=%v commit=%v maxAppendEntries=%d maxInFlight=%d trailingLogs=%d snapshotThreshold=%d snapshotInterval=%v",
		t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout, t.CommitTimeout, t.MaxAppendEntries, t.MaxRPCsInFlight, t.TrailingLogs, t.SnapshotThreshold, t.SnapshotInterval)
}

// Tuning returns the effective Raft timings this store runs with.
func (s *Store) Tuning() Tuning { return s.cfg.Tuning }
