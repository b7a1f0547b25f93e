package raftstore

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// handshakePair dials a listenerLayer with clientSecret against one with
// serverSecret and sends "hello".
func handshakePair(t *testing.T, clientSecret, serverSecret string) (dialErr, readErr error) {
	t.Helper()
	return layerPair(t, &listenerLayer{secret: []byte(clientSecret)}, &listenerLayer{secret: []byte(serverSecret)})
}

// layerPair serves server on a fresh loopback listener, dials it with client
// (its secret and TLS; the listener is set here), writes "hello" and returns
// the dial error and the server side's error reading the payload.
func layerPair(t *testing.T, client, server *listenerLayer) (dialErr, readErr error) {
	t.Helper()
	addr, got := acceptOne(t, server, func(conn net.Conn) error {
		buf := make([]byte, 5)
		_, err := io.ReadFull(conn, buf)
		if err == nil && string(buf) != "hello" {
			err = errors.New("payload corrupted: " + string(buf))
		}
		return err
	})
	client.Listener = server.Listener
	conn, dialErr := client.Dial(raft.ServerAddress(addr), 3*time.Second)
	if dialErr == nil {
		_, _ = conn.Write([]byte("hello"))
		defer func() { _ = conn.Close() }()
	}
	select {
	case readErr = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("server side did not finish")
	}
	return dialErr, readErr
}

// acceptOne serves server on a fresh loopback listener (closed when the test
// ends), accepts one connection and sends what read returns on it (or the
// accept's error) to the channel. It returns the listener's address.
func acceptOne(t *testing.T, server *listenerLayer, read func(net.Conn) error) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	server.Listener = ln
	got := make(chan error, 1)
	go func() {
		conn, err := server.Accept()
		if err != nil {
			got <- err
			return
		}
		defer func() { _ = conn.Close() }()
		got <- read(conn)
	}()
	return ln.Addr().String(), got
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
	addr, got := acceptOne(t, &listenerLayer{secret: []byte("s3cret")}, func(conn net.Conn) error {
		_, err := conn.Read(make([]byte, 64))
		return err
	})
	raw, err := net.Dial("tcp", addr)
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
