package raftstore

import (
	"errors"
	"fmt"
	"time"
)

// WANTuning is the --wan preset: timings for members whose round trips reach
// about 250 ms (regions on different continents), where DefaultTuning's LAN
// values risk false elections under jitter. docs/operations.md explains each:
//
//   - HeartbeatTimeout 1 s: a follower campaigns after 1-2 s (randomised)
//     without contact; the leader sends a heartbeat every tenth of it
//     (100 ms), so a 125 ms one-way delay with 20% jitter leaves about eight
//     missed heartbeats of slack, and failover stays under 3 s.
//   - ElectionTimeout 1.5 s: a candidate's vote round (one round trip plus
//     an fsync) fits several times before it starts another.
//   - LeaderLeaseTimeout 750 ms: a leader steps down when a quorum has not
//     answered for this long; three 250 ms round trips.
//   - CommitTimeout 5 ms: kept short, since followers and edges learn a
//     commit index only with the next append; it bounds the extra delay of
//     live delivery at an edge.
//   - MaxAppendEntries 512: fewer, larger appends on a long pipe.
//   - TrailingLogs 50000: an edge cut off for minutes catches up from the
//     log rather than by a snapshot sent across the WAN.
func WANTuning() Tuning {
	t := DefaultTuning()
	t.HeartbeatTimeout = 1000 * time.Millisecond
	t.ElectionTimeout = 1500 * time.Millisecond
	t.LeaderLeaseTimeout = 750 * time.Millisecond
	t.CommitTimeout = 5 * time.Millisecond
	t.MaxAppendEntries = 512
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
	}
	return nil
}

// String lists the Raft timings (logs).
func (t Tuning) String() string {
	return fmt.Sprintf("heartbeat=%v election=%v leaderLease=%v commit=%v maxAppendEntries=%d trailingLogs=%d snapshotThreshold=%d snapshotInterval=%v",
		t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout, t.CommitTimeout, t.MaxAppendEntries, t.TrailingLogs, t.SnapshotThreshold, t.SnapshotInterval)
}

// Tuning returns the effective Raft timings this store runs with.
func (s *Store) Tuning() Tuning { return s.cfg.Tuning }
