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

	c := mustStartCluster(t, ctx, clusterOpts{bin: prior})
	healthy := func() {
		t.Helper()
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			for _, p := range c.nodes {
				if !p.Running() {
					t.Fatalf("%s stopped: %v\n%s", p.id, p.WaitErr(), p.LogTail(8<<10))
				}
			}
			st, err := c.clusterStatus(c.nodes[0])
			if err != nil {
				return err
			}
			return st.Healthy(3, "")
		})
	}
	pr := c.mustCreateProject(c.nodes[0])

	var written []string
	var last uint64
	writeEverywhere := func(step string) {
		t.Helper()
		for _, p := range c.nodes {
			coll := fmt.Sprintf("users/%s/upgrade/%s-via-%s", pr.OwnerID, step, p.id)
			_, rev := c.mustWrite(p, pr, coll, map[string]any{"step": step, "via": p.id})
			written = append(written, coll)
			last = max(last, rev)
		}
	}
	writeEverywhere("before")

	for _, p := range c.nodes {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", p.id, err)
		}
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit within 30s of SIGTERM", p.id)
		}
		p.Bin = binPath
		p.mustStart()
		c.mustReady(p, 60*time.Second)
		healthy()
		writeEverywhere("after-" + p.id)
		healthy()
	}

	for _, p := range c.nodes {
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			if !p.LogContains("writing txn entries of version 3") {
				return fmt.Errorf("%s has not switched to txn entries decided in Apply (version 3)", p.id)
			}
			return nil
		})
	}
	writeEverywhere("binary")
	healthy()
	for _, p := range c.nodes {
		for _, coll := range written {
			r, err := c.getDoc(p, pr, coll, "", last)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != 200 || !strings.Contains(string(r.body), `"step"`) {
				t.Fatalf("%s on %s after the upgrade: %s", coll, p.id, r)
			}
		}
	}
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

	c := mustStartCluster(t, ctx, clusterOpts{bin: prior})
	healthy := func() {
		t.Helper()
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			for _, p := range c.nodes {
				if !p.Running() {
					t.Fatalf("%s stopped: %v\n%s", p.id, p.WaitErr(), p.LogTail(8<<10))
				}
			}
			st, err := c.clusterStatus(c.nodes[0])
			if err != nil {
				return err
			}
			return st.Healthy(3, "")
		})
	}
	pr := c.mustCreateProject(c.nodes[0])
	for _, p := range c.nodes {
		if _, err := os.Stat(filepath.Join(p.dataDir, "raft")); err != nil {
			t.Fatalf("the older binary's %s has no Badger Raft log: %v", p.id, err)
		}
	}

	var written []string
	var last uint64
	writeEverywhere := func(step string, n int) {
		t.Helper()
		for _, p := range c.nodes {
			for i := range n {
				coll := fmt.Sprintf("users/%s/wal/%s-via-%s-%d", pr.OwnerID, step, p.id, i)
				_, rev := c.mustWrite(p, pr, coll, map[string]any{"step": step, "via": p.id})
				written = append(written, coll)
				last = max(last, rev)
			}
		}
	}
	writeEverywhere("before", 20)

	for i, p := range c.nodes {
		if i == 0 {
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM %s: %v", p.id, err)
			}
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not exit within 30s of SIGTERM", p.id)
			}
		} else {
			p.mustKill9()
		}
		p.Bin = binPath
		p.mustStart()
		c.mustReady(p, 60*time.Second)
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
		healthy()
		writeEverywhere("after-"+p.id, 5)
		healthy()
	}

	// A node on raft-wal killed again comes back from its own WAL.
	victim := c.nodes[1]
	victim.mustKill9()
	for _, p := range []*proc{c.nodes[0], c.nodes[2]} {
		for i := range 5 {
			coll := fmt.Sprintf("users/%s/wal/while-%s-down-via-%s-%d", pr.OwnerID, victim.id, p.id, i)
			_, rev := c.mustWrite(p, pr, coll, map[string]any{"step": "down", "via": p.id})
			written = append(written, coll)
			last = max(last, rev)
		}
	}
	victim.mustStart()
	c.mustReady(victim, 60*time.Second)
	healthy()
	writeEverywhere("end", 2)

	for _, p := range c.nodes {
		for _, coll := range written {
			r, err := c.getDoc(p, pr, coll, "", last)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != 200 || !strings.Contains(string(r.body), `"step"`) {
				t.Fatalf("%s on %s after the upgrade: %s", coll, p.id, r)
			}
		}
	}
}
