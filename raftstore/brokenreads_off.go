//go:build !brokenreads

package raftstore

// brokenStrongReads is false in every real build. The robustness suite's
// negative test builds with -tags brokenreads to prove that its checker
// catches a follower answering strong reads from its local state.
const brokenStrongReads = false
