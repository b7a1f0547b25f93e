//go:build brokenreads

package raftstore

// brokenStrongReads makes followers answer strong reads from local state
// without asking the leader: a deliberately broken build for the robustness
// suite's negative test (never build a release with -tags brokenreads).
const brokenStrongReads = true
