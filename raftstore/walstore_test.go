package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// badgerLogWith writes a Badger Raft log (the layout before raft-wal) in
// dir/raft holding entries first..last and the given stable keys.
func badgerLogWith(t *testing.T, dir string, first, last uint64, term, voteTerm uint64, cand string) {
	t.Helper()
	s, err := openLogStore(filepath.Join(dir, badgerLogDirName), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := first; i <= last && last > 0; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: 1 + i/100, Type: raft.LogCommand,
			Data: fmt.Appendf(nil, "entry %d", i), Extensions: []byte{byte(i)}, AppendedAt: time.Unix(0, int64(i)).UTC()})
		if len(batch) == 200 {
			mustStoreLogs(t, s, batch...)
			batch = nil
		}
	}
	if len(batch) > 0 {
		mustStoreLogs(t, s, batch...)
	}
	if term > 0 {
		if err := s.SetUint64([]byte("CurrentTerm"), term); err != nil {
			t.Fatal(err)
		}
	}
	if voteTerm > 0 {
		if err := s.SetUint64([]byte("LastVoteTerm"), voteTerm); err != nil {
			t.Fatal(err)
		}
		if err := s.Set([]byte("LastVoteCand"), []byte(cand)); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, s)
}

func mustOpenRaftLog(t *testing.T, dir string) raftLog {
	t.Helper()
	l, err := openRaftLog(dir, 1<<20, testLogger())
	if err != nil {
		t.Fatalf("openRaftLog: %v", err)
	}
	return l
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: want it gone, stat says %v", path, err)
	}
}

// checkMigrated checks that l holds exactly what badgerLogWith wrote.
func checkMigrated(t *testing.T, l raftLog, first, last, term, voteTerm uint64, cand string) {
	t.Helper()
	gotFirst, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	gotLast, err := l.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if gotFirst != first || gotLast != last {
		t.Fatalf("bounds [%d, %d], want [%d, %d]", gotFirst, gotLast, first, last)
	}
	for i := first; i <= last && last > 0; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if e.Index != i || e.Term != 1+i/100 || e.Type != raft.LogCommand || string(e.Data) != fmt.Sprintf("entry %d", i) ||
			!bytes.Equal(e.Extensions, []byte{byte(i)}) || !e.AppendedAt.Equal(time.Unix(0, int64(i))) {
			t.Fatalf("entry %d came out as %+v", i, e)
		}
	}
	if first > 1 {
		var e raft.Log
		if err := l.GetLog(first-1, &e); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) before the first: %v, want ErrLogNotFound", first-1, err)
		}
	}
	if got, err := l.GetUint64([]byte("CurrentTerm")); err != nil || got != term {
		t.Fatalf("CurrentTerm %d (%v), want %d", got, err, term)
	}
	if got, err := l.GetUint64([]byte("LastVoteTerm")); err != nil || got != voteTerm {
		t.Fatalf("LastVoteTerm %d (%v), want %d", got, err, voteTerm)
	}
	if got, err := l.Get([]byte("LastVoteCand")); err != nil || string(got) != cand {
		t.Fatalf("LastVoteCand %q (%v), want %q", got, err, cand)
	}
}

// A node whose Raft log is still in Badger gets every entry (a truncated
// head included) and the stable keys in raft-wal at its first start; the
// Badger log is gone after, and a second start opens the WAL as it is.
func TestOpenRaftLogMigratesBadgerLog(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		first, last          uint64
		term, voteTerm       uint64
		cand                 string
		wantTerm, wantVoteTm uint64
	}{
		{name: "entries after a snapshot", first: 4097, last: 5321, term: 7, voteTerm: 6, cand: "n2"},
		{name: "from the first entry", first: 1, last: 900, term: 3, voteTerm: 3, cand: "n1"},
		{name: "stable keys only", term: 2},
		{name: "never voted", first: 1, last: 3, term: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			badgerLogWith(t, dir, tc.first, tc.last, tc.term, tc.voteTerm, tc.cand)
			l := mustOpenRaftLog(t, dir)
			checkMigrated(t, l, tc.first, tc.last, tc.term, tc.voteTerm, tc.cand)
			mustNotExist(t, filepath.Join(dir, badgerLogDirName))
			mustNotExist(t, filepath.Join(dir, walDirName+walMigratingSuffix))
			// The next entry appends where the migrated log ends.
			next := tc.last + 1
			if tc.last == 0 {
				next = 1
			}
			if err := l.StoreLogs([]*raft.Log{{Index: next, Term: 9, Type: raft.LogCommand, Data: []byte("after")}}); err != nil {
				t.Fatalf("append after migration: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpenRaftLog(t, dir)
			defer l.Close()
			var e raft.Log
			if err := l.GetLog(next, &e); err != nil || string(e.Data) != "after" {
				t.Fatalf("entry %d after reopening: %+v, %v", next, e, err)
			}
			if got, _ := l.GetUint64([]byte("CurrentTerm")); got != tc.term {
				t.Fatalf("CurrentTerm after reopening %d, want %d", got, tc.term)
			}
		})
	}
}

// A migration cut short (kill -9 while copying) leaves a partial WAL in the
// staging dir and the Badger log whole: the next start copies again from
// scratch. One cut after the rename leaves both logs: the WAL is complete,
// so the next start keeps it and deletes the Badger log.
func TestOpenRaftLogAfterInterruptedMigration(t *testing.T) {
	t.Run("during the copy", func(t *testing.T) {
		dir := t.TempDir()
		badgerLogWith(t, dir, 10, 500, 4, 4, "n3")
		// A partial copy: a WAL in the staging dir holding other entries.
		partial, err := openWAL(filepath.Join(dir, walDirName+walMigratingSuffix), 1<<20, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		if err := partial.StoreLogs([]*raft.Log{{Index: 10, Term: 99, Data: []byte("torn")}}); err != nil {
			t.Fatal(err)
		}
		if err := partial.Close(); err != nil {
			t.Fatal(err)
		}
		l := mustOpenRaftLog(t, dir)
		defer l.Close()
		checkMigrated(t, l, 10, 500, 4, 4, "n3")
		mustNotExist(t, filepath.Join(dir, badgerLogDirName))
		mustNotExist(t, filepath.Join(dir, walDirName+walMigratingSuffix))
	})
	t.Run("after the rename", func(t *testing.T) {
		dir := t.TempDir()
		badgerLogWith(t, dir, 1, 50, 2, 2, "n1")
		src, err := openLogStore(filepath.Join(dir, badgerLogDirName), testLogger())
		if err != nil {
			t.Fatal(err)
		}
		done, err := openWAL(filepath.Join(dir, walDirName), 1<<20, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := copyRaftLog(context.Background(), done, src); err != nil {
			t.Fatal(err)
		}
		// The WAL gets one more entry the Badger log lacks: the next start
		// must keep the WAL, not copy over it.
		if err := done.StoreLogs([]*raft.Log{{Index: 51, Term: 3, Data: []byte("only in the wal")}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []interface{ Close() error }{done, src} {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		l := mustOpenRaftLog(t, dir)
		defer l.Close()
		if last, _ := l.LastIndex(); last != 51 {
			t.Fatalf("last index %d, want 51 (the WAL kept)", last)
		}
		mustNotExist(t, filepath.Join(dir, badgerLogDirName))
	})
}

// A data dir whose raft-wal path is a file, not a directory, is refused
// with an error naming it, and nothing is changed.
func TestOpenRaftLogRefusesAFileInPlaceOfTheLog(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, walDirName)
	if err := os.WriteFile(p, []byte("not a log"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openRaftLog(dir, 1<<20, testLogger())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(walDirName)) {
		t.Fatalf("openRaftLog over a file: %v", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "not a log" {
		t.Fatalf("the file was changed: %q, %v", b, err)
	}
}

// A single-node store written before raft-wal (its Raft log in Badger, made
// here by copying a store's WAL back into Badger) starts on raft-wal with
// every document and the same Raft state, and takes new writes.
func TestStoreMigratesItsBadgerLog(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, "127.0.0.1:0", nil)
	mustLeader(t, s)
	var last *TxnResult
	for i := range 50 {
		last = mustTxn(t, s, put(fmt.Sprintf("p1/notes/n%02d", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	term := s.raft.CurrentTerm()
	mustCloseStore(t, s)

	// Turn the data dir into the layout before raft-wal.
	w, err := openWAL(filepath.Join(dir, walDirName), 0, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	b, err := openLogStore(filepath.Join(dir, badgerLogDirName), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	first, lastIdx, err := copyRaftLog(context.Background(), b, w)
	if err != nil {
		t.Fatal(err)
	}
	if lastIdx < last.Revision {
		t.Fatalf("the log ends at %d, before the last write's revision %d", lastIdx, last.Revision)
	}
	for _, c := range []interface{ Close() error }{w, b} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, walDirName)); err != nil {
		t.Fatal(err)
	}

	s = openTestStore(t, dir, "127.0.0.1:0", nil)
	mustLeader(t, s)
	mustNotExist(t, filepath.Join(dir, badgerLogDirName))
	if got, err := s.logs.FirstIndex(); err != nil || got != first {
		t.Fatalf("first index after migration %d (%v), want %d", got, err, first)
	}
	if got, err := s.logs.LastIndex(); err != nil || got < lastIdx {
		t.Fatalf("last index after migration %d (%v), want at least %d", got, err, lastIdx)
	}
	if s.raft.CurrentTerm() < term {
		t.Fatalf("term went back: %d, was %d", s.raft.CurrentTerm(), term)
	}
	for i := range 50 {
		d := mustGet(t, s, fmt.Sprintf("p1/notes/n%02d", i))
		if string(d.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("n%02d after migration: %s", i, d.Data)
		}
	}
	after := mustTxn(t, s, put("p1/notes/after", `{"after":true}`))
	if after.Revision <= last.Revision {
		t.Fatalf("a write after migration got revision %d, not after %d", after.Revision, last.Revision)
	}
	mustCloseStore(t, s)
}
