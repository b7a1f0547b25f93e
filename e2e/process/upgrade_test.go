package process

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/testbin"
)

// priorRelease is the last commit of main whose binary writes its Raft
// entries only in the JSON encoding (before raftstore's binary one). The
// upgrade test builds it from the repository's history.
const priorRelease = "c762ba987ef3a0c2e9647fa0533312478bf859fd"

// priorBadgerLog is the last commit of main whose binary keeps the Raft log
// in Badger (before raft-wal): its data dirs have raft/, not raft-wal/.
const priorBadgerLog = "cd22b944e03465e1b0a4800680def4e58b42d8ec"

// buildPrior builds priorRelease's edgebase binary, or skips the test where
// the history is not there (an archive or a shallow clone; .ci/run says which
// it has).
func buildPrior(t *testing.T) string {
	t.Helper()
	return buildPriorAt(t, priorRelease)
}

// buildPriorAt builds the edgebase binary of commit priorRelease, or skips
// the test as buildPrior does.
func buildPriorAt(t *testing.T, priorRelease string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", priorRelease+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history: no older binary to upgrade from", priorRelease)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", root, priorRelease, src))
	if b, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", priorRelease, err, b)
	}
	bin := filepath.Join(t.TempDir(), "edgebase-prior")
	// No time limit but the test's deadline: the older tree's packages are
	// not in a fresh build cache, and on a loaded machine that takes minutes.
	ctx, cancel := testbin.Context(t)
	defer cancel()
	start := time.Now()
	if err := testbin.Build(ctx, src, bin, ""); err != nil {
		t.Fatalf("build %s: %v", priorRelease, err)
	}
	t.Logf("built %s's binary in %v", priorRelease[:12], time.Since(start).Round(time.Millisecond))
	return bin
}

// upgradeRun is a rolling upgrade's cluster, started on an older binary,
// and the documents written through it.
type upgradeRun struct {
	t       *testing.T
	c       *cluster
	pr      project
	written []string
	last    uint64
}

func startUpgradeRun(t *testing.T, ctx context.Context, prior string) *upgradeRun {
	t.Helper()
	c := mustStartCluster(t, ctx, clusterOpts{bin: prior})
	return &upgradeRun{t: t, c: c, pr: c.mustCreateProject(c.nodes[0])}
}

// healthy waits until every node runs and the cluster has 3 healthy voters;
// a node that stopped fails the test.
func (u *upgradeRun) healthy() {
	u.t.Helper()
	checkFor(u.t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, p := range u.c.nodes {
			if !p.Running() {
				u.t.Fatalf("%s stopped: %v\n%s", p.id, p.WaitErr(), p.LogTail(8<<10))
			}
		}
		st, err := u.c.clusterStatus(u.c.nodes[0])
		if err != nil {
			return err
		}
		return st.Healthy(3, "")
	})
}

// write writes n documents named after step through each of nodes.
func (u *upgradeRun) write(step string, n int, nodes ...*proc) {
	u.t.Helper()
	for _, p := range nodes {
		for i := range n {
			coll := fmt.Sprintf("users/%s/upgrade/%s-via-%s-%d", u.pr.OwnerID, step, p.id, i)
			_, rev := u.c.mustWrite(p, u.pr, coll, map[string]any{"step": step, "via": p.id})
			u.written = append(u.written, coll)
			u.last = max(u.last, rev)
		}
	}
}

// writeEverywhere writes one document through every node.
func (u *upgradeRun) writeEverywhere(step string) { u.write(step, 1, u.c.nodes...) }

// restartOn stops p (SIGTERM, or kill -9 when kill9) and starts it on bin.
func (u *upgradeRun) restartOn(p *proc, bin string, kill9 bool) {
	u.t.Helper()
	if kill9 {
		p.mustKill9()
	} else {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			u.t.Fatalf("SIGTERM %s: %v", p.id, err)
		}
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			u.t.Fatalf("%s did not exit within 30s of SIGTERM", p.id)
		}
	}
	p.Bin = bin
	p.mustStart()
	u.c.mustReady(p, 60*time.Second)
}

// checkEverywhere reads every written document on every node.
func (u *upgradeRun) checkEverywhere() {
	u.t.Helper()
	for _, p := range u.c.nodes {
		for _, coll := range u.written {
			r, err := u.c.getDoc(p, u.pr, coll, "", u.last)
			if err != nil {
				u.t.Fatal(err)
			}
			if r.status != 200 || !strings.Contains(string(r.body), `"step"`) {
				u.t.Fatalf("%s on %s after the upgrade: %s", coll, p.id, r)
			}
		}
	}
}

// A rolling upgrade from the binary before the binary Raft entry encoding:
// three voters of the older binary are restarted one at a time on this one,
// with writes through every node after each step. No node may stop (an older
// binary stops on an entry it cannot decode), no write may fail, every node
// switches to the binary encoding once all run this binary, and every
// document is there on every node at the end.
func TestRollingUpgradeFromJSONEntries(t *testing.T) {
	prior := buildPrior(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	u := startUpgradeRun(t, ctx, prior)
	u.writeEverywhere("before")
	for _, p := range u.c.nodes {
		u.restartOn(p, binPath, false)
		u.healthy()
		u.writeEverywhere("after-" + p.id)
		u.healthy()
	}
	for _, p := range u.c.nodes {
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			if !p.LogContains("writing txn entries of version 3") {
				return fmt.Errorf("%s has not switched to txn entries decided in Apply (version 3)", p.id)
			}
			return nil
		})
	}
	u.writeEverywhere("binary")
	u.healthy()
	u.checkEverywhere()
}

// A rolling upgrade from the binary that kept the Raft log in Badger: three
// voters of the older binary, with documents written, are stopped one at a
// time (SIGTERM for the first, kill -9 for the others, so a Badger log that
// was never closed is migrated too) and started on this binary, which moves
// each node's Raft log into raft-wal at start. Writes go through every node
// after each step; at the end every node has every document, its data dir
// has raft-wal/ and no raft/, and a node killed again restarts from its WAL.
func TestRollingUpgradeToRaftWAL(t *testing.T) {
	prior := buildPriorAt(t, priorBadgerLog)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	u := startUpgradeRun(t, ctx, prior)
	nodes := u.c.nodes
	for _, p := range nodes {
		if _, err := os.Stat(filepath.Join(p.dataDir, "raft")); err != nil {
			t.Fatalf("the older binary's %s has no Badger Raft log: %v", p.id, err)
		}
	}
	u.write("before", 20, nodes...)

	for i, p := range nodes {
		u.restartOn(p, binPath, i > 0)
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			if !p.LogContains("migrated the Raft log from Badger to raft-wal") {
				return fmt.Errorf("%s has not logged its migration", p.id)
			}
			return nil
		})
		if _, err := os.Stat(filepath.Join(p.dataDir, "raft")); !os.IsNotExist(err) {
			t.Fatalf("%s still has its Badger Raft log after migrating: %v", p.id, err)
		}
		if _, err := os.Stat(filepath.Join(p.dataDir, "raft-wal")); err != nil {
			t.Fatalf("%s has no raft-wal after migrating: %v", p.id, err)
		}
		u.healthy()
		u.write("after-"+p.id, 5, nodes...)
		u.healthy()
	}

	// A node on raft-wal killed again comes back from its own WAL, and
	// catches up with what was written while it was down.
	victim := nodes[1]
	victim.mustKill9()
	u.write("while-"+victim.id+"-down", 5, nodes[0], nodes[2])
	victim.mustStart()
	u.c.mustReady(victim, 60*time.Second)
	u.healthy()
	u.write("end", 2, nodes...)
	u.checkEverywhere()
}
