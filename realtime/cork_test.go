package realtime

import (
	"net"
	"sync"
	"testing"
	"time"
)

func newTestCork(t *testing.T) (*corkConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	pool := &sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}
	return &corkConn{Conn: a, pool: pool, head: []byte("early")}, b
}

// TestCorkConnBatchesInOrder: what is written while corked reaches the peer
// in one write, in order, only at uncork; bytes the HTTP server had read
// ahead come out of Read first.
func TestCorkConnBatchesInOrder(t *testing.T) {
	c, peer := newTestCork(t)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := peer.Read(b) // net.Pipe: one Read per Write, at most len(b)
		got <- b[:n]
	}()
	c.cork()
	for _, s := range []string{"one,", "two,", "three"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// net.Pipe's Write waits for the peer's Read: had a corked write gone
	// through, the peer would have read "one," alone.
	if err := c.uncork(time.Second); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "one,two,three" {
		t.Fatalf("peer got %q in one write, want %q", b, "one,two,three")
	}
	go func() { _, _ = peer.Write([]byte("later")) }()
	b := make([]byte, 16)
	var all []byte
	for len(all) < len("earlylater") {
		n, err := c.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b[:n]...)
	}
	if string(all) != "earlylater" {
		t.Fatalf("read %q, want %q", all, "earlylater")
	}
}

// TestCorkConnCloseDuringStuckWrite: Close does not wait for a batch stuck
// on a peer that does not read; it ends that write.
func TestCorkConnCloseDuringStuckWrite(t *testing.T) {
	c, _ := newTestCork(t) // the peer never reads
	c.cork()
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.uncork(time.Minute) }()
	// Wait until the uncork holds the lock (its write is stuck).
	deadline := time.Now().Add(5 * time.Second)
	for c.mu.TryLock() {
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("uncork never started")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("stuck write ended with %v, want an error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
}
