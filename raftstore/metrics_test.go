package raftstore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFeedStats: the lag of the slowest subscriber follows what it has
// taken from its queue, and subscribers cut off for lagging are counted.
func TestFeedStats(t *testing.T) {
	f := newFeed()
	check := func(what string, subs int, lag, dropped uint64) {
		t.Helper()
		gs, gl, gd := f.stats()
		if gs != subs || gl != lag || gd != dropped {
			t.Fatalf("%s: subscribers %d, lag %d, dropped %d; want %d, %d, %d", what, gs, gl, gd, subs, lag, dropped)
		}
	}
	check("empty", 0, 0, 0)
	fast := f.Subscribe(16)
	slow := f.Subscribe(4)
	check("idle", 2, 0, 0)
	f.publish(testBatch(10))
	f.publish(testBatch(12))
	f.publish(testBatch(15))
	// Nothing taken yet: everything from revision 10 on is pending.
	check("three queued", 2, 6, 0)
	for range 3 {
		<-fast.C()
	}
	<-slow.C() // slow took revision 10
	check("slow took one", 2, 5, 0)
	<-slow.C()
	<-slow.C()
	check("all taken", 2, 0, 0)

	// A subscriber with a larger queue grows the ring; what it holds stays.
	f.publish(testBatch(20))
	big := f.Subscribe(64)
	f.publish(testBatch(21))
	check("after growing", 3, 6, 0) // fast and slow still hold 20 and 21, after taking 15
	for _, s := range []*Subscription{fast, slow} {
		<-s.C()
		<-s.C()
	}
	check("big holds one", 3, 1, 0) // big holds 21 only: it subscribed after 20
	<-big.C()
	check("caught up", 3, 0, 0)

	// slow's queue of 4 overflows on the fifth batch: it is dropped.
	for rev := uint64(30); rev < 35; rev++ {
		f.publish(testBatch(rev))
	}
	if _, ok := <-slow.C(); ok {
		for range slow.C() {
		}
	}
	if err := slow.Err(); err != ErrLagged {
		t.Fatalf("slow ended with %v, want ErrLagged", err)
	}
	check("slow dropped", 2, 34-21, 1)
	fast.Close()
	big.Close()
	check("closed", 0, 0, 1)
}

func TestBadgerFileSizes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("000001.sst", 10000)
	write("000002.sst", 5000)
	write("000001.vlog", 20000)
	write("00001.mem", 40000)
	write("MANIFEST", 100)
	lsm, vlog, err := badgerFileSizes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Allocated sizes round up to blocks; they are never below the lengths
	// of these fully written files, and .mem and MANIFEST do not count.
	if lsm < 15000 || lsm >= 15000+2*65536 || vlog < 20000 || vlog >= 20000+65536 {
		t.Fatalf("lsm %d, vlog %d; want about 15000 and 20000", lsm, vlog)
	}
	if _, _, err := badgerFileSizes(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory gave no error")
	}
}
