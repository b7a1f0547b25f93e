package httpapi

import (
	"testing"

	"github.com/edgebase/edgebase/raftstore"
)

// The project statistics cache answers only for the applied index the
// figures were read at, and an approximate figure only for a budget no
// larger than the one it had.
func TestStatsCache(t *testing.T) {
	c := newStatsCache()
	c.put("p", raftstore.ProjectStats{Documents: 3, AppliedIndex: 5}, 100)
	if st, ok := c.get("p", 5, 1000); !ok || st.Documents != 3 {
		t.Fatalf("same index: %+v %v", st, ok)
	}
	if _, ok := c.get("p", 6, 100); ok {
		t.Fatal("a newer applied index must miss")
	}
	if _, ok := c.get("q", 5, 100); ok {
		t.Fatal("another project must miss")
	}
	c.put("a", raftstore.ProjectStats{Documents: 10, Approximate: true, AppliedIndex: 5}, 10)
	if _, ok := c.get("a", 5, 20); ok {
		t.Fatal("an approximate figure must miss for a larger budget")
	}
	if st, ok := c.get("a", 5, 10); !ok || !st.Approximate {
		t.Fatalf("approximate, same budget: %+v %v", st, ok)
	}
	for i := 0; i < maxCachedStats+1; i++ {
		c.put(string(rune('A'+i%26))+string(rune(i)), raftstore.ProjectStats{AppliedIndex: 5}, 1)
	}
	if len(c.m) > maxCachedStats {
		t.Fatalf("cache holds %d entries, bound %d", len(c.m), maxCachedStats)
	}
}
