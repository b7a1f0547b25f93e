package realtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgebase/edgebase/raftstore"
)

// applyMsgs is a subscriber applying diffWindows's messages as docs/api.md
// tells it to.
func applyMsgs(t *testing.T, win []string, msgs []string, idx []int, paths []string) []string {
	t.Helper()
	w := slices.Clone(win)
	for i, typ := range msgs {
		at := slices.Index(w, paths[i])
		switch typ {
		case "removed":
			if at != idx[i] {
				t.Fatalf("removed %s at %d, held at %d (%v)", paths[i], idx[i], at, w)
			}
			w = slices.Delete(w, at, at+1)
		case "added":
			if at >= 0 {
				t.Fatalf("added %s, already held (%v)", paths[i], w)
			}
			w = slices.Insert(w, idx[i], paths[i])
		case "modified":
			if at < 0 {
				t.Fatalf("modified %s, not held (%v)", paths[i], w)
			}
			w = slices.Delete(w, at, at+1)
			w = slices.Insert(w, idx[i], paths[i])
		}
	}
	return w
}

// TestDiffWindows: applying the messages turns any window into any other;
// a single changed document moving either way sends one message, and
// documents that did not change are never sent when one document changes.
func TestDiffWindows(t *testing.T) {
	mk := func(names []string, revs map[string]uint64) []qdoc {
		out := make([]qdoc, 0, len(names))
		for _, n := range names {
			out = append(out, qdoc{doc: &raftstore.Document{Path: "p/c/" + n, Revision: revs[n]}})
		}
		return out
	}
	run := func(cur, next []string, curRev, nextRev map[string]uint64) (msgs []string, idx []int, paths []string) {
		diffWindows(mk(cur, curRev), mk(next, nextRev), func(typ string, d *raftstore.Document, index int) {
			msgs, idx, paths = append(msgs, typ), append(idx, index), append(paths, d.Path[len("p/c/"):])
		})
		return
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 3000; n++ {
		pool := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		cur := slices.Clone(pool[:rng.IntN(6)])
		curRev, nextRev := map[string]uint64{}, map[string]uint64{}
		for _, p := range pool {
			curRev[p] = 1
			nextRev[p] = 1
			if rng.IntN(3) == 0 {
				nextRev[p] = 2
			}
		}
		// next: the unchanged documents of cur keep their order; changed
		// and new ones go anywhere.
		var next []string
		for _, p := range cur {
			if nextRev[p] == 1 && rng.IntN(4) != 0 {
				next = append(next, p)
			}
		}
		for _, p := range pool {
			if slices.Contains(next, p) || rng.IntN(2) == 0 || (slices.Contains(cur, p) && nextRev[p] == 1) {
				continue
			}
			next = slices.Insert(next, rng.IntN(len(next)+1), p)
		}
		msgs, idx, paths := run(cur, next, curRev, nextRev)
		if got := applyMsgs(t, cur, msgs, idx, paths); !slices.Equal(got, next) {
			t.Fatalf("%v → %v: messages %v %v %v give %v", cur, next, msgs, paths, idx, got)
		}
	}
	// One document changes and moves: one message, whichever way.
	revs := map[string]uint64{"a": 1, "b": 1, "c": 1, "d": 1}
	moved := map[string]uint64{"a": 1, "b": 2, "c": 1, "d": 1}
	for _, tc := range []struct{ cur, next []string }{
		{[]string{"a", "b", "c", "d"}, []string{"a", "c", "d", "b"}},
		{[]string{"a", "c", "d", "b"}, []string{"b", "a", "c", "d"}},
		{[]string{"a", "b", "c", "d"}, []string{"a", "b", "c", "d"}},
	} {
		msgs, idx, paths := run(tc.cur, tc.next, revs, moved)
		if got := fmt.Sprint(msgs, paths); got != "[modified] [b]" {
			t.Errorf("%v → %v: %v %v %v, want one modified b", tc.cur, tc.next, msgs, paths, idx)
		}
	}
}
