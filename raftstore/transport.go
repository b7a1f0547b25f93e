package raftstore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// listenerLayer is a raft.StreamLayer over a listener we already hold, so a
// node can bind its Raft port before it knows what to advertise (":0" in
// tests).
//
// Every connection, in both directions, first proves knowledge of the
// cluster secret with a mutual HMAC challenge: hashicorp/raft itself accepts
// AppendEntries from anyone who can reach the port, which would let a
// stranger commit arbitrary entries. That authenticates but does not
// encrypt; with tls set (Config.RaftTLS) each connection is first wrapped in
// mutual TLS and the challenge runs inside it (tls.go).
type listenerLayer struct {
	net.Listener
	advertise net.Addr
	secret    []byte
	tls       *tls.Config // nil: plain TCP
	// dial opens the TCP connection (Config.ConnectTo applied, dial.go);
	// nil: a plain dial of the address.
	dial dialFunc
}

// handshakeTimeout bounds the challenge on both sides.
const handshakeTimeout = 5 * time.Second

// raftMagic opens every Raft connection; it versions the handshake.
var raftMagic = []byte("EBRAFT1\n")

// errHandshake means the peer did not prove the cluster secret.
var errHandshake = errors.New("raft peer failed the cluster-secret handshake")

func (l *listenerLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	dial := l.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	conn, err := dial(ctx, "tcp", string(addr))
	cancel()
	if err != nil {
		return nil, err
	}
	// TLS verifies the advertised name even when ConnectTo dialed elsewhere.
	if l.tls != nil {
		tc, err := dialTLS(conn, l.tls, string(addr), timeout)
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("raft dial %s: %w", addr, err)
		}
		conn = tc
	}
	if err := clientHandshake(conn, l.secret); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("raft dial %s: %w", addr, err)
	}
	return conn, nil
}

// Accept hands raft a connection whose handshake runs on its first read, in
// raft's per-connection goroutine, so a slow or hostile client cannot stall
// the accept loop.
func (l *listenerLayer) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.tls != nil {
		conn = tls.Server(conn, l.tls)
	}
	return &serverConn{Conn: conn, secret: l.secret}, nil
}

func (l *listenerLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.Listener.Addr()
}

type serverConn struct {
	net.Conn
	secret []byte
	once   sync.Once
	err    error
}

func (c *serverConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		if tc, ok := c.Conn.(*tls.Conn); ok {
			c.err = acceptTLS(tc)
		}
		if c.err == nil {
			c.err = serverHandshake(c.Conn, c.secret)
		}
		if c.err != nil {
			_ = c.Conn.Close()
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

func (c *serverConn) Write(p []byte) (int, error) {
	// Raft reads a request before it writes anything, so a failed or pending
	// handshake never lets a response out.
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Write(p)
}

func mac(secret []byte, role string, a, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(role))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// clientHandshake: send magic + client nonce; read server nonce + server
// proof; check it; send client proof.
func clientHandshake(conn net.Conn, secret []byte) error {
	if len(secret) == 0 {
		return errHandshake
	}
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	cn := make([]byte, 32)
	if _, err := rand.Read(cn); err != nil {
		return err
	}
	if _, err := conn.Write(append(append([]byte{}, raftMagic...), cn...)); err != nil {
		return err
	}
	buf := make([]byte, 32+sha256.Size)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return errHandshake
	}
	sn, proof := buf[:32], buf[32:]
	if !hmac.Equal(proof, mac(secret, "server", cn, sn)) {
		return errHandshake
	}
	_, err := conn.Write(mac(secret, "client", cn, sn))
	return err
}

// serverHandshake is the accepting side of clientHandshake.
func serverHandshake(conn net.Conn, secret []byte) error {
	if len(secret) == 0 {
		return errHandshake
	}
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	buf := make([]byte, len(raftMagic)+32)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return errHandshake
	}
	if !hmac.Equal(buf[:len(raftMagic)], raftMagic) {
		return errHandshake
	}
	cn := buf[len(raftMagic):]
	sn := make([]byte, 32)
	if _, err := rand.Read(sn); err != nil {
		return err
	}
	if _, err := conn.Write(append(append([]byte{}, sn...), mac(secret, "server", cn, sn)...)); err != nil {
		return errHandshake
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return errHandshake
	}
	if !hmac.Equal(proof, mac(secret, "client", cn, sn)) {
		return errHandshake
	}
	return nil
}

// hostAddr is an advertised "host:port" kept as written; it is resolved on
// every dial, so DNS changes (container restarts) are followed.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }
