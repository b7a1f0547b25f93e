package proctest

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// issued holds every port FreePort has handed out in this test process,
// with the lock file that reserves it for the process's lifetime.
var issued = struct {
	sync.Mutex
	ports map[int]*os.File
}{ports: map[int]*os.File{}}

// Reserved ports come from below the kernel's ephemeral range, so that no
// outgoing connection (every HTTP client and Raft dial of every test) and
// no ":0" listener can take one between FreePort's check and the node
// process binding it — in CI a node's HTTP port was taken that way — and
// above the fixed ports of docker-compose.yml (18081..) and Prometheus.
const reservedLow = 20000

// ephemeralLow is the kernel's first ephemeral port (32768 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil {
				return lo
			}
		}
	}
	return 32768
}

// FreePort is a loopback TCP port free when it was asked for (a node
// process binds it a moment later), that no other FreePort call of this or
// any other test process holds: each port is reserved by an exclusive lock
// on a file in the temp dir, held until the process exits (the kernel drops
// it then, even on a crash), so the test binaries `go test ./...` runs in
// parallel never hand out the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	issued.Lock()
	defer issued.Unlock()
	lo, hi := reservedLow, ephemeralLow()
	if hi-lo < 1000 {
		// An unusual ephemeral range: fall back to asking the kernel.
		return kernelPort(t)
	}
	dir := filepath.Join(os.TempDir(), "edgebase-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("free port: %v", err)
	}
	n := hi - lo
	start := rand.IntN(n)
	for i := range n {
		port := lo + (start+i)%n
		if _, ok := issued.ports[port]; ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		if !tryLock(f) {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close() // releases the lock: something else listens there
			continue
		}
		_ = l.Close()
		issued.ports[port] = f
		return port
	}
	t.Fatalf("free port: none of %d..%d is free", lo, hi-1)
	return 0
}

// kernelPort asks the kernel for a port no FreePort call returned before.
func kernelPort(t testing.TB) int {
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if _, ok := issued.ports[port]; !ok {
			issued.ports[port] = nil
			return port
		}
	}
	t.Fatalf("free port: 1000 asks gave only ports handed out before")
	return 0
}
