package raftstore

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// listenerLayer is a raft.StreamLayer over a listener we already hold, so a
// node can bind its Raft port before it knows what to advertise (":0" in
// tests) and so that a TLS listener can be slotted in later.
type listenerLayer struct {
	net.Listener
	advertise net.Addr
}

func (l *listenerLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (l *listenerLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.Listener.Addr()
}

// hostAddr is an advertised "host:port" kept as written; it is resolved on
// every dial, so DNS changes (container restarts) are followed.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }
