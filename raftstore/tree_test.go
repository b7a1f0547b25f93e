package raftstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// treeChildren are the direct children of "p/c" that listTree creates, in the
// byte order List must return them. Several sort around '/' (0x2f): ' ' '!'
// '-' '.' are below it, '0' right above it.
var treeChildren = []string{" sp", "!x", "a", "a-b", "a.b", "a0", "ab", "z", "~tilde", "é"}

// listTree builds a tree under p/ with direct children of p/c, deeper
// descendants, and siblings of p/c whose keys share its prefix.
func listTree(t *testing.T) *fsm {
	t.Helper()
	f := mustOpenFSM(t, t.TempDir())
	var ops []Op
	for _, name := range treeChildren {
		ops = append(ops, put("p/c/"+name, fmt.Sprintf(`{"name":%q}`, name)))
	}
	for _, deep := range []string{
		"a/b", "a/b/c", "a/a", "a-b/x", "a.b/y/z", "ghost/deep/er", "z/y", "a0/!", "é/x",
	} {
		ops = append(ops, put("p/c/"+deep, `{"deep":true}`))
	}
	for _, sib := range []string{"p/c", "p/c0", "p/cc", "p/c-other/x", "p/c.x", "p/b/a", "p/d/a"} {
		ops = append(ops, put(sib, `{"sibling":true}`))
	}
	mustOK(t, f, 1, &Txn{Ops: ops})
	return f
}

func list(t *testing.T, f *fsm, parent, after string, limit int) ([]*Document, string) {
	t.Helper()
	var docs []*Document
	var next string
	err := f.view(func(txn *badger.Txn) error {
		var err error
		docs, next, err = listChildren(txn, parent, after, limit)
		return err
	})
	if err != nil {
		t.Fatalf("listChildren(%q, %q, %d): %v", parent, after, limit, err)
	}
	return docs, next
}

func names(parent string, docs []*Document) []string {
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, strings.TrimPrefix(d.Path, parent+"/"))
	}
	return out
}

func TestListChildren_DirectChildrenOnlyInOrder(t *testing.T) {
	f := listTree(t)
	docs, next := list(t, f, "p/c", "", 100)
	if got := names("p/c", docs); !slices.Equal(got, treeChildren) {
		t.Fatalf("children %q, want %q", got, treeChildren)
	}
	if next != "" {
		t.Fatalf("next %q on the only page, want \"\"", next)
	}
	for _, d := range docs {
		name := strings.TrimPrefix(d.Path, "p/c/")
		if string(d.Data) != fmt.Sprintf(`{"name":%q}`, name) || d.Revision != 1 {
			t.Errorf("%s: data %s revision %d", d.Path, d.Data, d.Revision)
		}
	}
	if !slices.IsSorted(treeChildren) {
		t.Fatal("treeChildren not in byte order")
	}
}

func TestListChildren_PagingVisitsEveryChildOnce(t *testing.T) {
	f := listTree(t)
	for limit := 1; limit <= 5; limit++ {
		t.Run(fmt.Sprintf("limit-%d", limit), func(t *testing.T) {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > len(treeChildren) {
					t.Fatalf("more than %d pages: %q", pages, got)
				}
				docs, next := list(t, f, "p/c", after, limit)
				if len(docs) > limit {
					t.Fatalf("page of %d, limit %d", len(docs), limit)
				}
				page := names("p/c", docs)
				got = append(got, page...)
				if next == "" {
					break
				}
				if len(page) == 0 || next != page[len(page)-1] {
					t.Fatalf("next %q, want the last name of page %q", next, page)
				}
				after = next
			}
			if !slices.Equal(got, treeChildren) {
				t.Fatalf("paged children %q, want each of %q exactly once", got, treeChildren)
			}
		})
	}
}

func TestListChildren_AfterSkipsOnlyThatChildAndItsSubtree(t *testing.T) {
	f := listTree(t)
	for _, c := range []struct {
		after string
		want  []string
	}{
		{"a", []string{"a-b", "a.b", "a0"}},
		{"a-b", []string{"a.b", "a0", "ab"}},
		{"a.", []string{"a.b", "a0", "ab"}}, // not a child itself
		{"a.b", []string{"a0", "ab", "z"}},
		{"a0", []string{"ab", "z", "~tilde"}},
		{"!", []string{"!x", "a", "a-b"}},
		{"~tilde", []string{"é"}},
		{"é", nil},
		{"zz", []string{"~tilde", "é"}},
	} {
		docs, _ := list(t, f, "p/c", c.after, 3)
		if got := names("p/c", docs); !slices.Equal(got, c.want) {
			t.Errorf("after %q: %q, want %q", c.after, got, c.want)
		}
	}
}

func TestListChildren_NextOnlyWhenMoreRemain(t *testing.T) {
	f := listTree(t)
	n := len(treeChildren)
	if _, next := list(t, f, "p/c", "", n); next != "" {
		t.Errorf("limit == children: next %q, want \"\"", next)
	}
	if docs, next := list(t, f, "p/c", "", n-1); next != treeChildren[n-2] || len(docs) != n-1 {
		t.Errorf("limit == children-1: %d docs, next %q, want %d and %q", len(docs), next, n-1, treeChildren[n-2])
	}
	// The last child has deep descendants after it: they must not make a next page.
	if docs, next := list(t, f, "p/c", "~tilde", 1); next != "" || !slices.Equal(names("p/c", docs), []string{"é"}) {
		t.Errorf("last page: %q next %q", names("p/c", docs), next)
	}
}

func TestListChildren_ParentWithOnlyDeepDescendants(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	mustOK(t, f, 1, &Txn{Ops: []Op{
		put("q/deep/x/y", `{}`), put("q/deep/x/z/w", `{}`), put("q/deep/-/a", `{}`), put("q/deep0", `{}`), put("q/deep", `{}`),
	}})
	for _, parent := range []string{"q/deep", "q/deep/x/z", "q/none", "q/deep/x/y"} {
		docs, next := list(t, f, parent, "", 10)
		want := 0
		if parent == "q/deep/x/z" {
			want = 1 // w
		}
		if len(docs) != want || next != "" {
			t.Errorf("list %s: %q next %q, want %d docs", parent, names(parent, docs), next, want)
		}
	}
	// Many deep descendants between two children are skipped.
	var ops []Op
	for i := 0; i < 300; i++ {
		ops = append(ops, put(fmt.Sprintf("r/a/%03d/leaf", i), `{}`))
	}
	ops = append(ops, put("r/a", `{}`), put("r/b", `{}`))
	mustOK(t, f, 2, &Txn{Ops: ops})
	docs, next := list(t, f, "r", "", 1)
	if got := names("r", docs); !slices.Equal(got, []string{"a"}) || next != "a" {
		t.Fatalf("first page %q next %q", got, next)
	}
	docs, next = list(t, f, "r", "a", 1)
	if got := names("r", docs); !slices.Equal(got, []string{"b"}) || next != "" {
		t.Fatalf("second page %q next %q", got, next)
	}
}

// Limits below one are refused by the HTTP layer, but List is exported: it
// must not panic on them (refusing them with an error is fine).
func TestListChildren_NonPositiveLimitDoesNotPanic(t *testing.T) {
	f := listTree(t)
	for _, limit := range []int{0, -1} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("limit %d: panic: %v", limit, p)
				}
			}()
			var docs []*Document
			err := f.view(func(txn *badger.Txn) error {
				var err error
				docs, _, err = listChildren(txn, "p/c", "", limit)
				return err
			})
			if err == nil && len(docs) != 0 {
				t.Errorf("limit %d: %d documents and no error", limit, len(docs))
			}
		}()
	}
}

func TestTree_DocEncodingRoundTrip(t *testing.T) {
	d := &Document{Path: "p/x", Data: []byte(`{"a":1}`), Revision: 7, CreateRevision: 3, CreateTime: -5, UpdateTime: 1 << 62}
	got, err := decodeDoc("p/x", encodeDoc(d))
	if err != nil || !sameDoc(got, d) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {docVersion}, append([]byte{9}, make([]byte, docHeaderLen)...)} {
		if _, err := decodeDoc("p/x", bad); err == nil {
			t.Errorf("decodeDoc(%x) accepted", bad)
		}
	}
	// Data is copied out of Badger's buffer.
	b := encodeDoc(d)
	got, _ = decodeDoc("p/x", b)
	b[len(b)-2] = 'X'
	if string(got.Data) != `{"a":1}` {
		t.Fatalf("decoded data aliases the input: %s", got.Data)
	}
}

func TestTree_MarshalSortedKeepsValuesVerbatim(t *testing.T) {
	out, code := editFields([]byte(`{"b": 1.50, "a": {"z" : 12345678901234567890}, "c":"\u00e9"}`), func(m map[string]json.RawMessage) OpError {
		m["d"] = json.RawMessage(`1e400`)
		return ErrCodeNone
	})
	if code != ErrCodeNone {
		t.Fatalf("editFields: %s", code)
	}
	if want := `{"a":{"z" : 12345678901234567890},"b":1.50,"c":"\u00e9","d":1e400}`; string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
	if _, code := editFields([]byte(`[1]`), func(map[string]json.RawMessage) OpError { return ErrCodeNone }); code != ErrCodeInvalid {
		t.Fatalf("editFields of an array: %q, want invalid", code)
	}
}
