package raftstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The live tree commits without fsync (openTreeDB): a power loss may cut it
// back to an earlier applied index, and the Raft log (fsynced before every
// commit) must then bring it back to every acknowledged write at start. A
// power loss is simulated by putting back a copy of the tree taken earlier,
// with the applied index it had then.
func TestStore_TreeBehindTheLogIsRebuiltAtStart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot bool // a snapshot (and log compaction) after the copy
	}{
		{"replayed from the log", false},
		{"restored from the snapshot, then replayed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tune := func(c *Config) { c.Tuning.TrailingLogs = 1 } // compact the log on snapshot
			s := openTestStore(t, dir, "127.0.0.1:0", tune)
			addr := s.cfg.RaftAdvertise
			mustLeader(t, s)
			want := map[string]*Document{}
			write := func(from, to int) {
				for i := from; i < to; i++ {
					res := mustTxn(t, s, put(fmt.Sprintf("p1/t/d%02d", i), fmt.Sprintf(`{"i":%d}`, i)))
					want[res.Docs[0].Path] = res.Docs[0]
				}
			}
			write(0, 10)
			early := s.AppliedIndex()
			mustCloseStore(t, s)
			saved := filepath.Join(t.TempDir(), "tree")
			copyDir(t, filepath.Join(dir, "tree"), saved)

			s = reopenStore(t, dir, addr, tune)
			mustLeader(t, s)
			write(10, 20)
			if tc.snapshot {
				if err := s.Snapshot(); err != nil {
					t.Fatalf("Snapshot: %v", err)
				}
				if first, err := s.logs.FirstIndex(); err != nil || first <= early {
					t.Fatalf("log not compacted past the copy (%d): first index %d, %v", early, first, err)
				}
				write(20, 25)
			}
			last := s.AppliedIndex()
			mustCloseStore(t, s)

			// The power loss: the tree goes back to what it held at `early`.
			if err := os.RemoveAll(filepath.Join(dir, "tree")); err != nil {
				t.Fatal(err)
			}
			copyDir(t, saved, filepath.Join(dir, "tree"))

			s = reopenStore(t, dir, addr, tune)
			t.Cleanup(func() { _ = s.Close() })
			if got := s.AppliedIndex(); tc.snapshot && got <= early {
				t.Fatalf("tree behind the snapshot not restored at open: applied %d", got)
			}
			mustLeader(t, s)
			if err := s.WaitRead(ctxT(t, 10*time.Second), Strong, 0); err != nil {
				t.Fatalf("WaitRead after restart: %v", err)
			}
			if got := s.AppliedIndex(); got < last {
				t.Fatalf("applied %d after restart, want at least %d", got, last)
			}
			assertStoreDocs(t, s, want)
			res := mustTxn(t, s, put("p1/t/after", `{}`))
			if res.Revision <= last {
				t.Fatalf("revision after restart %d, want > %d", res.Revision, last)
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatalf("copy %s to %s: %v", from, to, err)
	}
}
