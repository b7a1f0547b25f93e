package raftstore

import (
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func statsOf(t *testing.T, f *fsm, pid string, budget int, maxBytes int64) ProjectStats {
	t.Helper()
	var st ProjectStats
	if err := f.view(func(txn *badger.Txn) error {
		st = projectStats(txn, pid, budget, maxBytes)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// User documents are counted with their data's bytes; reserved subtrees,
// other projects and the project's neighbours in key order are not.
func TestProjectStats(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	mustOK(t, f, 1, &Txn{Time: testTime(1), Ops: []Op{
		put("p/_users/u1", `{"email":"a@b.c"}`), put("p/_rules", `{}`), put("p/_sessions/u1/s", `{}`),
		put("p/a", `{"x":1}`), put("p/a/b", `{"y":22}`), put("p/z_", `{}`),
		put("p-2/a", `{"x":1}`), put("p0/a", `{}`), put("q/a", `{}`),
	}})
	mustOK(t, f, 2, &Txn{Time: testTime(2), Ops: []Op{put("p/users/u1", `{"n":"ada"}`)}})
	mustOK(t, f, 3, &Txn{Time: testTime(3), Ops: []Op{put("p/_users/u2", `{}`)}}) // system state: not a write of user data

	st := statsOf(t, f, "p", 0, 1<<20)
	wantBytes := int64(len(`{"x":1}`) + len(`{"y":22}`) + len(`{}`) + len(`{"n":"ada"}`))
	if st.Documents != 4 || st.Bytes != wantBytes || st.Approximate {
		t.Fatalf("stats = %+v, want 4 documents, %d bytes, exact", st, wantBytes)
	}
	if st.LastRevision != 2 || st.LastWriteTime != testTime(2) {
		t.Fatalf("last write = rev %d at %d, want rev 2 at %d", st.LastRevision, st.LastWriteTime, testTime(2))
	}
	if st := statsOf(t, f, "p", 2, 1<<20); st.Documents != 2 || !st.Approximate {
		t.Fatalf("budget 2: %+v", st)
	}
	// The byte bound: the first document ({"x":1}, 7 bytes) reaches 5.
	if st := statsOf(t, f, "p", 0, 5); st.Documents != 1 || !st.Approximate {
		t.Fatalf("byte bound 5: %+v", st)
	}
	if st := statsOf(t, f, "empty", 0, 1<<20); st.Documents != 0 || st.LastRevision != 0 || st.Approximate {
		t.Fatalf("empty project: %+v", st)
	}
}
