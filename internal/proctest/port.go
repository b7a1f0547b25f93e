package proctest

import (
	"errors"
	"fmt"
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
var issued Ports

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
	port, err := issued.Get()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

// Ports reserves loopback ports as FreePort does, for code outside tests
// too (the WAN harness, the bench): each port handed out is locked (a file
// in the temp dir's edgebase-test-ports, shared by every process) until
// Release or the process's exit. The zero value is ready to use.
type Ports struct {
	mu   sync.Mutex
	held map[int]*os.File // nil file: a port the kernel picked (no lock)
}

// Get returns a port free a moment ago and reserved until Release.
func (p *Ports) Get() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = map[int]*os.File{}
	}
	lo, hi := reservedLow, ephemeralLow()
	if hi-lo < 1000 {
		// An unusual ephemeral range: fall back to asking the kernel.
		return p.kernelPort()
	}
	dir := filepath.Join(os.TempDir(), "edgebase-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("port lock dir: %w", err)
	}
	n := hi - lo
	start := rand.IntN(n)
	for i := range n {
		port := lo + (start+i)%n
		if _, ok := p.held[port]; ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, fmt.Errorf("port lock file: %w", err)
		}
		if !tryLock(f) {
			_ = f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close() // releases the lock: something else listens there
			continue
		}
		_ = l.Close()
		p.held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("none of %d..%d is free", lo, hi-1)
}

// kernelPort asks the kernel for a port not handed out before.
func (p *Ports) kernelPort() (int, error) {
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("listen: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if _, ok := p.held[port]; !ok {
			p.held[port] = nil
			return port, nil
		}
	}
	return 0, errors.New("1000 asks gave only ports handed out before")
}

// Release drops every reservation p holds.
func (p *Ports) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for port, f := range p.held {
		if f != nil {
			_ = f.Close()
		}
		delete(p.held, port)
	}
}
