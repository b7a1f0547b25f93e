package raftstore

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/testpki"
)

// mtlsConfig is what node builds from the --raft-tls-* files: the node's
// certificate and the CA in both roles.
func mtlsConfig(t *testing.T, ca *testpki.CA, name string) *tls.Config {
	t.Helper()
	c, err := raftTLSConfig(&tls.Config{Certificates: []tls.Certificate{ca.TLSCertificate(t, name)}, RootCAs: ca.Pool, ClientCAs: ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsPair dials a listenerLayer with clientTLS (nil: plain TCP) against one
// with serverTLS, both with the same cluster secret, and sends "hello".
func tlsPair(t *testing.T, clientTLS, serverTLS *tls.Config) (dialErr, readErr error) {
	t.Helper()
	return layerPair(t, &listenerLayer{secret: []byte("s3cret"), tls: clientTLS}, &listenerLayer{secret: []byte("s3cret"), tls: serverTLS})
}

func TestRaftTLSMutual(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	other := testpki.NewCA(t, "someone else's CA")
	serverCfg := mtlsConfig(t, ca, "n1")

	t.Run("same CA", func(t *testing.T) {
		if dErr, rErr := tlsPair(t, mtlsConfig(t, ca, "n2"), serverCfg); dErr != nil || rErr != nil {
			t.Fatalf("dial %v, read %v", dErr, rErr)
		}
	})
	t.Run("client certificate from another CA", func(t *testing.T) {
		// The client trusts our CA (so it would accept the server) but its
		// own certificate is signed by another one.
		foreign := other.TLSCertificate(t, "intruder")
		c := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12,
			// Shown even though the server asks for its own CA's certificates.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }}
		dErr, rErr := tlsPair(t, c, serverCfg)
		if dErr == nil || !errors.Is(rErr, errHandshake) {
			t.Fatalf("foreign client certificate accepted: dial %v, read %v", dErr, rErr)
		}
	})
	t.Run("client without certificate", func(t *testing.T) {
		c := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
		dErr, rErr := tlsPair(t, c, serverCfg)
		if dErr == nil || !errors.Is(rErr, errHandshake) {
			t.Fatalf("client without certificate accepted: dial %v, read %v", dErr, rErr)
		}
	})
	t.Run("server certificate from another CA", func(t *testing.T) {
		dErr, rErr := tlsPair(t, mtlsConfig(t, ca, "n2"), mtlsConfig(t, other, "impostor"))
		if dErr == nil || !strings.Contains(dErr.Error(), "tls") || rErr == nil {
			t.Fatalf("impostor server accepted: dial %v, read %v", dErr, rErr)
		}
	})
	t.Run("plain TCP client", func(t *testing.T) {
		dErr, rErr := tlsPair(t, nil, serverCfg)
		if dErr == nil || !errors.Is(rErr, errHandshake) {
			t.Fatalf("plain client accepted by a TLS server: dial %v, read %v", dErr, rErr)
		}
	})
	t.Run("TLS client, plain server", func(t *testing.T) {
		if dErr, rErr := tlsPair(t, mtlsConfig(t, ca, "n2"), nil); dErr == nil || rErr == nil {
			t.Fatalf("TLS client talked to a plain server: dial %v, read %v", dErr, rErr)
		}
	})
}

// A TLS peer that never finishes its handshake is cut off by the deadline
// instead of holding raft's connection goroutine.
func TestRaftTLSSilentClientTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the handshake timeout")
	}
	ca := testpki.NewCA(t, "cluster CA")
	addr, got := acceptOne(t, &listenerLayer{secret: []byte("s3cret"), tls: mtlsConfig(t, ca, "n1")}, func(conn net.Conn) error {
		_, err := conn.Read(make([]byte, 1))
		return err
	})
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()
	select {
	case err := <-got:
		if !errors.Is(err, errHandshake) {
			t.Fatalf("silent client: %v, want errHandshake", err)
		}
	case <-time.After(handshakeTimeout + 5*time.Second):
		t.Fatal("silent client not cut off")
	}
}

func TestRaftTLSConfigChecks(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	cert := ca.TLSCertificate(t, "n1")
	if _, err := raftTLSConfig(&tls.Config{RootCAs: ca.Pool, ClientCAs: ca.Pool}); err == nil {
		t.Fatal("no certificate accepted")
	}
	if _, err := raftTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool}); err == nil {
		t.Fatal("no ClientCAs accepted: the server side would not verify clients")
	}
	c, err := raftTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS10})
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientAuth != tls.RequireAndVerifyClientCert || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("client auth %v, min version %x", c.ClientAuth, c.MinVersion)
	}
	if c, _ := raftTLSConfig(nil); c != nil {
		t.Fatal("nil config must stay nil (plain TCP)")
	}
}
