package raftstore

import "errors"

// Sentinel errors of the store. Raft's own errors are translated into these
// where they enter the package, so callers never see raft types.
var (
	// ErrNoLeader means no leader is known or reachable right now; retry later.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader means this node is not the leader (internal endpoints).
	ErrNotLeader = errors.New("not the leader")
	// ErrUnknownOutcome means a proposal may or may not have been committed
	// (leadership was lost or the leader became unreachable after sending).
	ErrUnknownOutcome = errors.New("outcome of the write is unknown")
	// ErrTimeout means a read could not reach the required consistency in time,
	// or a write ran out of its caller's time before it was proposed.
	ErrTimeout = errors.New("timed out waiting for the cluster")
	// ErrClosed means the store has been shut down.
	ErrClosed = errors.New("store closed")
	// ErrLagged means a change-feed subscriber fell behind and was dropped.
	ErrLagged = errors.New("change feed subscriber fell behind")
	// ErrEntryTooLarge means a command is larger than one entry may be.
	ErrEntryTooLarge = errors.New("command too large")
	// ErrForbidden means an internal call did not carry the cluster secret.
	ErrForbidden = errors.New("cluster secret missing or wrong")
	// ErrUnknownNode means a membership call named a node that is not a member.
	ErrUnknownNode = errors.New("unknown node")
	// ErrLastVoter means a removal named the only voter: the configuration
	// left would have no voter, so no quorum, and nothing could ever commit.
	ErrLastVoter = errors.New("cannot remove the only voter; the cluster would have no quorum")
	// ErrRemoved means this node was removed from the cluster: it serves
	// neither writes nor reads, and its data dir must be wiped before it can
	// join again as a new member.
	ErrRemoved = errors.New("node removed from the cluster")
)
