package proctest

import (
	"net"
	"sync"
	"testing"
)

// issued holds every port FreePort has handed out in this test process.
// Ports are a resource of the whole machine, not of one test, so the record
// is process-wide: the kernel may give the same free port to two asks in a
// row (it did in CI: two nodes of one cluster got the same Raft port, and
// the second could not bind it).
var issued = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort is a loopback TCP port that was free when it was asked for (a
// node process binds it a moment later), and that no other FreePort call of
// this process returned.
func FreePort(t testing.TB) int {
	t.Helper()
	issued.Lock()
	defer issued.Unlock()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !issued.ports[port] {
			issued.ports[port] = true
			return port
		}
	}
	t.Fatalf("free port: 1000 asks gave only ports handed out before")
	return 0
}
