package proctest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("FreePort returned %d twice", p)
		}
		seen[p] = true
	}
}

// TestFreePortReservedAcrossProcesses: a port FreePort returned lies below
// the kernel's ephemeral range and stays locked, so a second open of its
// lock file (what another test process would do) cannot take it.
func TestFreePortReservedAcrossProcesses(t *testing.T) {
	if ephemeralLow()-reservedLow < 1000 {
		t.Skip("ephemeral range starts too low for reserved ports")
	}
	p := FreePort(t)
	if p < reservedLow || p >= ephemeralLow() {
		t.Fatalf("FreePort = %d, want in [%d, %d)", p, reservedLow, ephemeralLow())
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "edgebase-test-ports", strconv.Itoa(p)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if runtime.GOOS != "windows" && tryLock(f) {
		t.Fatalf("port %d's lock was taken by a second open: another process could reuse it", p)
	}
}
