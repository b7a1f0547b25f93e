package wan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ports hands out loopback ports below the kernel's ephemeral range, each
// reserved by an exclusive lock on a file in the temp dir's
// edgebase-test-ports (the same files internal/proctest's FreePort locks,
// so test processes running in parallel never share a port), held until
// release. Ports from below the ephemeral range cannot be taken by an
// outgoing connection between the check and the node (or proxy) binding
// it, nor when a partitioned proxy listens again.
type ports struct {
	held map[int]*os.File
}

const reservedLow = 20000

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

// get returns a port free a moment ago and reserved until release.
func (p *ports) get() (int, error) {
	if p.held == nil {
		p.held = map[int]*os.File{}
	}
	lo, hi := reservedLow, ephemeralLow()
	if hi-lo < 1000 {
		return p.kernelPort()
	}
	dir := filepath.Join(os.TempDir(), "edgebase-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("wan: free port: %w", err)
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
			return 0, fmt.Errorf("wan: free port: %w", err)
		}
		if !tryLock(f) {
			_ = f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close()
			continue
		}
		_ = l.Close()
		p.held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("wan: free port: none of %d..%d is free", lo, hi-1)
}

func (p *ports) kernelPort() (int, error) {
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("wan: free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if _, ok := p.held[port]; !ok {
			p.held[port] = nil
			return port, nil
		}
	}
	return 0, errors.New("wan: free port: 1000 asks gave only ports handed out before")
}

// release drops every reservation.
func (p *ports) release() {
	for port, f := range p.held {
		if f != nil {
			_ = f.Close()
		}
		delete(p.held, port)
	}
}
