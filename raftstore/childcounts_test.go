package raftstore

import (
	"reflect"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func countChildren(t *testing.T, f *fsm, parent string, budget int) ([]ChildCount, bool) {
	t.Helper()
	var out []ChildCount
	var complete bool
	if err := f.view(func(txn *badger.Txn) error {
		out, complete = countByChild(txn, parent, budget)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out, complete
}

// Documents are counted by their first segment under the parent, however
// deep; siblings that sort between "a" and "a/..." do not split a group.
func TestCountByChild(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	mustOK(t, f, 1, &Txn{Ops: []Op{
		put("p/_topics/a/u1", `{}`), put("p/_topics/a/u2", `{}`), put("p/_topics/a/u3/deep", `{}`),
		put("p/_topics/a-b/u1", `{}`), put("p/_topics/a", `{}`),
		put("p/_topics/news/u9", `{}`),
		put("p/_topicsx/zz/u1", `{}`), put("p/other/u1", `{}`),
	}})
	got, complete := countChildren(t, f, "p/_topics", 0)
	want := []ChildCount{{"a", 4}, {"a-b", 1}, {"news", 1}}
	if !complete || !reflect.DeepEqual(got, want) {
		t.Fatalf("counts = %+v (complete %v), want %+v", got, complete, want)
	}
	got, complete = countChildren(t, f, "p/_topics", 3)
	if complete || len(got) == 0 {
		t.Fatalf("a budget of 3 keys of 6: %+v, complete %v", got, complete)
	}
	total := 0
	for _, g := range got {
		total += g.Count
	}
	if total != 3 {
		t.Fatalf("a budget of 3 counted %d documents: %+v", total, got)
	}
	if got, complete := countChildren(t, f, "p/none", 0); !complete || len(got) != 0 {
		t.Fatalf("empty directory: %+v %v", got, complete)
	}
}
