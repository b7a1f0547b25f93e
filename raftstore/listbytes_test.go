package raftstore

import (
	"fmt"
	"strings"
	"testing"
)

// A page of large documents ends early, by bytes, and paging still visits
// every child exactly once.
func TestListChildren_PageEndsAtByteBudget(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	big := `{"v":"` + strings.Repeat("x", 900<<10) + `"}`
	for i := 0; i < 12; i++ {
		mustOK(t, f, uint64(i+1), &Txn{Ops: []Op{put(fmt.Sprintf("p/big/d%02d", i), big)}})
	}
	docs, next := list(t, f, "p/big", "", 1000)
	if len(docs) >= 12 || next == "" {
		t.Fatalf("first page has %d documents (next %q); want it cut by the %d-byte budget", len(docs), next, maxListBytes)
	}
	seen := len(docs)
	for next != "" {
		docs, next = list(t, f, "p/big", next, 1000)
		seen += len(docs)
	}
	if seen != 12 {
		t.Fatalf("paging saw %d documents, want 12", seen)
	}
}
