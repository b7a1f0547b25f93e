package raftstore

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// handshakePair runs a dial with clientSecret against an accept with serverSecret.
func handshakePair(t *testing.T, clientSecret, serverSecret string) (dialErr, readErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	server := &listenerLayer{Listener: ln, secret: []byte(serverSecret)}
	client := &listenerLayer{Listener: ln, secret: []byte(clientSecret)}
	got := make(chan error, 1)
	go func() {
		conn, err := server.Accept()
		if err != nil {
			got <- err
			return
		}
		defer func() { _ = conn.Close() }()
		buf := make([]byte, 5)
		_, err = io.ReadFull(conn, buf)
		if err == nil && string(buf) != "hello" {
			err = errors.New("payload corrupted: " + string(buf))
		}
		got <- err
	}()
	conn, dialErr := client.Dial(raft.ServerAddress(ln.Addr().String()), 2*time.Second)
	if dialErr == nil {
		_, _ = conn.Write([]byte("hello"))
		defer func() { _ = conn.Close() }()
	}
	select {
	case readErr = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("server side did not finish")
	}
	return dialErr, readErr
}

func TestRaftHandshake(t *testing.T) {
	if dErr, rErr := handshakePair(t, "s3cret", "s3cret"); dErr != nil || rErr != nil {
		t.Fatalf("same secret: dial %v, read %v", dErr, rErr)
	}
	if dErr, rErr := handshakePair(t, "wrong", "s3cret"); dErr == nil || rErr == nil {
		t.Fatalf("wrong secret accepted: dial %v, read %v", dErr, rErr)
	}
	if _, rErr := handshakePair(t, "", "s3cret"); rErr == nil {
		t.Fatal("empty client secret accepted by the server")
	}
	if dErr, rErr := handshakePair(t, "", ""); dErr == nil || rErr == nil {
		t.Fatalf("empty secrets must refuse every connection: dial %v, read %v", dErr, rErr)
	}
}

// A peer that speaks raft without the handshake is cut off before raft reads.
func TestRaftHandshakeRefusesRawPeers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	server := &listenerLayer{Listener: ln, secret: []byte("s3cret")}
	got := make(chan error, 1)
	go func() {
		conn, err := server.Accept()
		if err != nil {
			got <- err
			return
		}
		defer func() { _ = conn.Close() }()
		_, err = conn.Read(make([]byte, 64))
		got <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()
	// The first bytes of a raft RPC: the type byte, then msgpack.
	_, _ = raw.Write(append([]byte{0}, make([]byte, 63)...))
	select {
	case err := <-got:
		if !errors.Is(err, errHandshake) {
			t.Fatalf("raw peer: read error %v, want errHandshake", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("raw peer not refused")
	}
}
