package raftstore

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func childPage(t *testing.T, f *fsm, parent, after string, limit int, scan *childScan) ([]Child, string) {
	t.Helper()
	var out []Child
	var next string
	err := f.view(func(txn *badger.Txn) error {
		var err error
		out, next, err = listChildSegments(txn, parent, after, limit, scan)
		return err
	})
	if err != nil {
		t.Fatalf("listChildSegments(%q, %q, %d): %v", parent, after, limit, err)
	}
	return out, next
}

// allChildren pages through every child of parent, limit at a time.
func allChildren(t *testing.T, f *fsm, parent string, limit int) []Child {
	t.Helper()
	all := []Child{}
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("children of %q: paging does not end", parent)
		}
		page, next := childPage(t, f, parent, after, limit, nil)
		if len(page) > limit {
			t.Fatalf("page of %d children, limit %d", len(page), limit)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		if len(page) != limit {
			t.Fatalf("page of %d children (limit %d) with a continuation %q", len(page), limit, next)
		}
		if next != page[len(page)-1].Name {
			t.Fatalf("continuation %q is not the last name of the page %q", next, page[len(page)-1].Name)
		}
		after = next
	}
}

// bruteChildren computes the children of parent from every path written.
func bruteChildren(paths []string, parent string) []Child {
	by := map[string]*Child{}
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, parent+"/")
		if !ok || rest == "" {
			continue
		}
		name, below, deep := strings.Cut(rest, "/")
		if name == "" || strings.HasPrefix(name, "_") {
			continue
		}
		c := by[name]
		if c == nil {
			c = &Child{Name: name}
			by[name] = c
		}
		if deep && below != "" {
			c.Children = true
		} else if !deep {
			c.Document = true
		}
	}
	out := make([]Child, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func putAll(t *testing.T, f *fsm, paths []string) {
	t.Helper()
	idx := uint64(1)
	for len(paths) > 0 {
		n := min(len(paths), MaxTxnOps)
		ops := make([]Op, 0, n)
		for _, p := range paths[:n] {
			ops = append(ops, put(p, `{"v":1}`))
		}
		mustOK(t, f, idx, &Txn{Ops: ops})
		idx++
		paths = paths[n:]
	}
}

func TestChildren_NestedTree(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	paths := []string{
		// "k" holds only a subtree, and siblings extend its name with
		// bytes below '/': "k" must still come first.
		"p/k/x", "p/k/y/z", "p/k-1", "p/k.2/y", "p/k0",
		// "a" is a document with a subtree; "b" only a document.
		"p/a", "p/a/b/c", "p/b",
		// reserved state at the root and around '_' (0x5f): '^' and '`' are listed.
		"p/_users/u1", "p/_rules", "p/_origins", "p/^caret", "p/`tick/x",
		// other projects and the cluster's state never leak in.
		"p2/a", "pp/a", "_sys/sessions/x", "p-/a",
	}
	putAll(t, f, paths)
	want := []Child{
		{Name: "^caret", Document: true},
		{Name: "`tick", Children: true},
		{Name: "a", Document: true, Children: true},
		{Name: "b", Document: true},
		{Name: "k", Children: true},
		{Name: "k-1", Document: true},
		{Name: "k.2", Children: true},
		{Name: "k0", Document: true},
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		if got := allChildren(t, f, "p", limit); !reflect.DeepEqual(got, want) {
			t.Errorf("limit %d: children of p =\n%+v\nwant\n%+v", limit, got, want)
		}
	}
	if got, want := allChildren(t, f, "p/k", 100), []Child{{Name: "x", Document: true}, {Name: "y", Children: true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("children of p/k = %+v, want %+v", got, want)
	}
	if got := allChildren(t, f, "p/b", 100); len(got) != 0 {
		t.Errorf("children of a leaf = %+v", got)
	}
	if got := allChildren(t, f, "nope", 100); len(got) != 0 {
		t.Errorf("children of a missing path = %+v", got)
	}
	// A page of exactly the remaining children has no continuation.
	page, next := childPage(t, f, "p", "k", 3, nil)
	if len(page) != 3 || next != "" {
		t.Errorf("last page of exactly limit: %+v, next %q", page, next)
	}
	// Continuing after a name that holds only a subtree skips it.
	page, _ = childPage(t, f, "p", "k", 1, nil)
	if len(page) != 1 || page[0].Name != "k-1" {
		t.Errorf("after k: %+v", page)
	}
}

// The byte-order trees of List's tests, listed as segments.
func TestChildren_ListTree(t *testing.T) {
	f := listTree(t)
	got := allChildren(t, f, "p/c", 3)
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	want := []string{" sp", "!x", "a", "a-b", "a.b", "a0", "ab", "ghost", "z", "~tilde", "é"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %q, want %q", names, want)
	}
	for _, c := range got {
		wantDoc := c.Name != "ghost"
		wantKids := map[string]bool{"a": true, "a-b": true, "a.b": true, "a0": true, "ghost": true, "z": true, "é": true}[c.Name]
		if c.Document != wantDoc || c.Children != wantKids {
			t.Errorf("%q: document %v children %v, want %v %v", c.Name, c.Document, c.Children, wantDoc, wantKids)
		}
	}
}

// Random trees over an alphabet of bytes around '/' and '_' agree with
// the children computed from the paths, at every page size.
func TestChildren_MatchesBruteForce(t *testing.T) {
	alphabet := []string{" ", "-", ".", "0", "a", "b", "_", "`", "é"}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 7))
		f := mustOpenFSM(t, t.TempDir())
		seen := map[string]bool{}
		var paths []string
		for len(paths) < 300 {
			depth := 1 + r.IntN(3)
			segs := make([]string, depth)
			for i := range segs {
				n := 1 + r.IntN(3)
				var b strings.Builder
				for range n {
					b.WriteString(alphabet[r.IntN(len(alphabet))])
				}
				segs[i] = b.String()
			}
			p := "p/" + strings.Join(segs, "/")
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
		putAll(t, f, paths)
		parents := []string{"p"}
		for _, c := range bruteChildren(paths, "p") {
			if c.Children {
				parents = append(parents, "p/"+c.Name)
			}
		}
		for _, parent := range parents {
			want := bruteChildren(paths, parent)
			for _, limit := range []int{1, 2, 3, 7, 1000} {
				if got := allChildren(t, f, parent, limit); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d, children of %q, limit %d:\n got %+v\nwant %+v", seed, parent, limit, got, want)
				}
			}
		}
	}
}

// A child with many descendants costs a few seeks, not one step per
// descendant.
func TestChildren_SkipsDescendants(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	var paths []string
	for i := range 3000 {
		paths = append(paths, fmt.Sprintf("p/big/d%04d/x", i), fmt.Sprintf("p/doc/d%04d", i))
	}
	paths = append(paths, "p/doc", "p/a", "p/zz/y", "p/_users/u")
	for i := range 500 {
		paths = append(paths, fmt.Sprintf("p/_users/u%03d", i))
	}
	putAll(t, f, paths)
	var scan childScan
	got, next := childPage(t, f, "p", "", 100, &scan)
	want := []Child{
		{Name: "a", Document: true},
		{Name: "big", Children: true},
		{Name: "doc", Document: true, Children: true},
		{Name: "zz", Children: true},
	}
	if !reflect.DeepEqual(got, want) || next != "" {
		t.Fatalf("children = %+v, next %q; want %+v", got, next, want)
	}
	t.Logf("%d iterator steps", scan.steps)
	// One seek to start, one per reserved block, at most three per child.
	if scan.steps > 2+3*len(want) {
		t.Errorf("listing 4 children over %d documents took %d iterator steps", len(paths), scan.steps)
	}
}

func TestChildren_NonPositiveLimit(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	for _, limit := range []int{0, -1} {
		err := f.view(func(txn *badger.Txn) error {
			_, _, err := listChildSegments(txn, "p", "", limit, nil)
			return err
		})
		if err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
}
