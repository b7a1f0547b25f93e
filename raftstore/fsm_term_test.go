package raftstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// termLog frames a put of path as the raft entry at (idx, term).
func termLog(t *testing.T, idx, term uint64, path string) *raft.Log {
	t.Helper()
	l := txnLog(t, idx, &Txn{Time: testTime(idx), Ops: []Op{put(path, `{}`)}})
	l.Term = term
	return l
}

// applyRefused applies logs and returns what the FSM stopped with ("" if
// it did not stop).
func applyRefused(f *fsm, logs ...*raft.Log) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f.ApplyBatch(logs)
	return ""
}

// The FSM keeps the term of the entry at its applied index, in the tree's
// transaction, and stops on an entry that contradicts it instead of skipping
// it as already applied (the replay after a restart) or applying it.
func TestFSM_EntryContradictingTheAppliedTermIsFatal(t *testing.T) {
	dir := t.TempDir()
	f := mustOpenFSM(t, dir)
	f.ApplyBatch([]*raft.Log{termLog(t, 1, 2, "t/a"), termLog(t, 2, 2, "t/b"), termLog(t, 3, 3, "t/c")})
	if idx, term := f.applied.get(), f.appliedTerm.Load(); idx != 3 || term != 3 {
		t.Fatalf("applied (%d, %d), want (3, 3)", idx, term)
	}

	check := func(f *fsm) {
		t.Helper()
		for _, c := range []struct {
			name string
			logs []*raft.Log
		}{
			{"the applied index with another term", []*raft.Log{termLog(t, 3, 4, "t/x")}},
			{"the applied index with an older term", []*raft.Log{termLog(t, 3, 2, "t/x")}},
			{"an earlier index with a newer term", []*raft.Log{termLog(t, 2, 4, "t/x")}},
			{"a replay, then an entry after it of an older term", []*raft.Log{termLog(t, 3, 3, "t/c"), termLog(t, 4, 2, "t/x")}},
			{"an entry older than the one before it in the batch", []*raft.Log{termLog(t, 4, 5, "t/d"), termLog(t, 5, 4, "t/x")}},
		} {
			msg := applyRefused(f, c.logs...)
			if msg == "" || !strings.Contains(msg, errDiverged.Error()) {
				t.Errorf("%s: the FSM went on (stopped with %q)", c.name, msg)
			}
			if idx, term := f.applied.get(), f.appliedTerm.Load(); idx != 3 || term != 3 {
				t.Fatalf("%s: applied (%d, %d) after the refusal, want (3, 3)", c.name, idx, term)
			}
			for _, p := range []string{"t/x", "t/d"} {
				if d := getDocT(t, f, p); d != nil {
					t.Fatalf("%s: %s was written (revision %d)", c.name, p, d.Revision)
				}
			}
		}
		// A replay that agrees is skipped, as before.
		if msg := applyRefused(f, termLog(t, 1, 2, "t/a"), termLog(t, 2, 2, "t/b"), termLog(t, 3, 3, "t/c")); msg != "" {
			t.Fatalf("a faithful replay stopped the FSM: %s", msg)
		}
	}
	check(f)

	// Kept across a restart: raft replays its log over the tree then.
	mustCloseFSM(t, f)
	f = mustOpenFSM(t, dir)
	check(f)

	// And in a snapshot, for a replica restored from it.
	g := mustOpenFSM(t, t.TempDir())
	if err := g.Restore(nopCloser{bytes.NewReader(mustSnapshot(t, f))}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	check(g)
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// A tree applied before the term was kept checks nothing until it applies
// an entry.
func TestFSM_TreeWithoutAppliedTermChecksNothing(t *testing.T) {
	dir := t.TempDir()
	f := mustOpenFSM(t, dir)
	f.ApplyBatch([]*raft.Log{termLog(t, 1, 2, "t/a")})
	if err := f.db.Update(func(txn *badger.Txn) error { return txn.Delete(keyAppliedTerm) }); err != nil {
		t.Fatal(err)
	}
	mustCloseFSM(t, f)
	f = mustOpenFSM(t, dir)
	if term := f.appliedTerm.Load(); term != 0 {
		t.Fatalf("applied term %d, want 0 (unknown)", term)
	}
	if msg := applyRefused(f, termLog(t, 1, 7, "t/a")); msg != "" {
		t.Fatalf("replay over a tree of unknown term stopped the FSM: %s", msg)
	}
	f.ApplyBatch([]*raft.Log{termLog(t, 2, 3, "t/b")})
	if msg := applyRefused(f, termLog(t, 2, 4, "t/b")); !strings.Contains(msg, errDiverged.Error()) {
		t.Fatalf("once an entry is applied, its term is checked (stopped with %q)", msg)
	}
}

// An offline restore starts a new cluster at restoreTerm: the tree's applied
// term is that one, not the old cluster's, or the new cluster's entries
// would look older than the applied one.
func TestRestore_AppliedTermIsTheNewClusters(t *testing.T) {
	src := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, src)
	seedStore(t, src)
	if term := src.fsm.appliedTerm.Load(); term <= restoreTerm {
		t.Fatalf("source applied term %d: the test needs one above %d", term, restoreTerm)
	}
	backup, _ := mustBackup(t, src)
	dir := filepath.Join(t.TempDir(), "restored")
	mustRestoreDir(t, dir, "r1", freeAddr(t), backup)
	f := mustOpenFSM(t, filepath.Join(dir, "tree"))
	if term := f.appliedTerm.Load(); term != restoreTerm {
		t.Fatalf("restored tree's applied term %d, want %d", term, restoreTerm)
	}
}
