// Package storetest opens real stores for the domain packages' tests: a
// single-voter raftstore.Store on Badger in the test's temporary directory,
// with a real Raft transport on loopback, leading before it is returned.
package storetest

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// Open opens a single-voter store with cfg's settings (its zero fields:
// the node id n1, a directory of t's, a loopback Raft listener, a test
// secret, a silent logger), closes it when t ends, and waits (at most 30
// s) until it leads.
func Open(t testing.TB, cfg raftstore.Config) *raftstore.Store {
	t.Helper()
	if cfg.RaftListener == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.RaftListener = ln
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "n1"
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.RaftAdvertise == "" {
		cfg.RaftAdvertise = cfg.RaftListener.Addr().String()
	}
	if cfg.HTTPAdvertise == "" {
		cfg.HTTPAdvertise = "http://127.0.0.1:1"
	}
	if cfg.Secret == "" {
		cfg.Secret = "store-test-secret-0123456789abcdef"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Bootstrap, cfg.Voter = true, true
	s, err := raftstore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for !s.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the store did not become leader within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}
