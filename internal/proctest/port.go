package proctest

import (
	"net"
	"testing"
)

// FreePort is a loopback TCP port that was free when it was asked for (a
// node process binds it a moment later).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
