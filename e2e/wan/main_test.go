// Package wan_test runs edgebase's default WAN topology (internal/wan:
// voters v-us1, v-us2, v-eu1, edges e-us, e-eu, e-ap; us-eu 80 ms, us-ap
// 150 ms, eu-ap 220 ms, ±10% jitter) on a toxiproxy-simulated network, once
// for the whole package, and checks what an edge node buys.
//
// SHARING THE CLUSTER. Every test file of this package gets the one cluster
// from sharedCluster(t): it is started on the first call (3-5 s; the whole
// package takes about 20 s with -race) and closed by TestMain after all
// tests. The project's owner (OwnerHeaders, OwnerToken) may do anything. A test that changes the cluster
// must put it back before it returns: heal partitions (Heal), restore the
// jitter (SetJitter(c.Profile() as started: 0.10)), restart killed nodes
// (Restart) and wait until it is healthy again (WaitHealthy). Tests must not
// assume which voter leads (failover moves the leader; ask Leader) and
// should use their own document paths (e.g. a collection named after the
// test).
//
// ORDER. go test runs the files in name order and the tests of a file in
// source order. In wan_test.go: TestWANReads, TestWANForwardedWrite,
// TestWANLiveDelivery (they only write), TestWANPartition (cuts ap off with
// doubled jitter, then heals and restores the jitter), TestWANFailover
// (kills the leader; last of the file). Each restores what it disturbed
// (failover: Restart + WaitHealthy), so tests of files that sort after
// wan_test.go still find all six nodes healthy, with another leader
// possibly; files sorting before it (session_test.go) run on the fresh
// cluster.
//
// The binaries come from $EDGEBASE_TEST_BIN_DIR (make test-bins builds
// edgebase and wanproxy there); without them every test skips, saying so.
// EDGEBASE_E2E_LOGS=1 prints every node's log tail after each test; it is
// printed anyway when a test fails.
package wan_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/testbin"
	"github.com/edgebase/edgebase/internal/wan"
)

var shared struct {
	once    sync.Once
	c       *wan.Cluster
	err     error
	skip    string // why the tests skip ("" when they run)
	dir     string
	started time.Duration
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "wan e2e: close:", err)
		}
	}
	if shared.dir != "" && (code == 0 || os.Getenv("EDGEBASE_E2E_KEEP") == "") {
		_ = os.RemoveAll(shared.dir)
	} else if shared.dir != "" {
		fmt.Fprintln(os.Stderr, "wan e2e: kept the nodes' data and logs in", shared.dir)
	}
	os.Exit(code)
}

// sharedCluster is the package's one cluster (see the package comment),
// started on the first call with NodeArgs ["--wan"] when the binary has
// that flag. It skips the test when the binaries are missing and fails it
// when the cluster did not start. When the test fails (or with
// EDGEBASE_E2E_LOGS=1) it prints every node's log tail at the test's end.
func sharedCluster(t *testing.T) *wan.Cluster {
	t.Helper()
	shared.once.Do(startShared)
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("the shared WAN cluster did not start: %v", shared.err)
	}
	c := shared.c
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("EDGEBASE_E2E_LOGS") == "1" {
			for _, n := range c.Nodes() {
				t.Logf("---- output of %s (%s) ----\n%s", n.ID, c.LogPath(n.ID), c.LogTail(n.ID, 3<<10))
			}
		}
	})
	return c
}

func startShared() {
	binDir := os.Getenv(testbin.DirEnv)
	if binDir == "" {
		shared.skip = fmt.Sprintf("the WAN tests need the edgebase and wanproxy binaries of `make test-bins` in $%s (unset)", testbin.DirEnv)
		return
	}
	bin, proxyBin := filepath.Join(binDir, "edgebase"), filepath.Join(binDir, "wanproxy")
	for _, b := range []string{bin, proxyBin} {
		if fi, err := os.Stat(b); err != nil || !fi.Mode().IsRegular() {
			shared.skip = fmt.Sprintf("the WAN tests need %s (`make test-bins TEST_BIN_DIR=%s` builds it): %v", b, binDir, err)
			return
		}
	}
	shared.dir, shared.err = os.MkdirTemp("", "edgebase-wan-e2e-")
	if shared.err != nil {
		return
	}
	var args []string
	hasWAN, err := wan.HasFlag(context.Background(), bin, "wan")
	if err != nil {
		shared.err = err
		return
	}
	if hasWAN {
		args = append(args, "--wan")
	} else {
		fmt.Fprintln(os.Stderr, "wan e2e: the edgebase binary has no --wan: the nodes run with the default Raft timing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	shared.c, shared.err = wan.Start(ctx, wan.Options{
		Bin: bin, ProxyBin: proxyBin, Dir: shared.dir, NodeArgs: args,
		Logf: func(format string, a ...any) { fmt.Fprintf(os.Stderr, "wan e2e: "+format+"\n", a...) },
	})
	shared.started = time.Since(start)
	if shared.err == nil {
		fmt.Fprintf(os.Stderr, "wan e2e: the shared cluster started in %v\n", shared.started.Round(time.Millisecond))
	}
}
