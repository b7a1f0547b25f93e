package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// Mutual TLS on the Raft transport (Config.RaftTLS). The cluster-secret
// handshake of transport.go still runs, inside the TLS session: a stolen
// node certificate alone does not let a stranger in, nor does the secret
// alone, and the bytes on the wire are encrypted.

// raftTLSConfig checks an operator's Raft TLS configuration and returns the
// copy the transport uses: mutual by construction (each side presents a
// certificate and verifies the other's against the same CA), TLS 1.2 or
// later.
func raftTLSConfig(c *tls.Config) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	if len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetClientCertificate == nil {
		return nil, errors.New("raftstore: RaftTLS needs this node's certificate")
	}
	if c.RootCAs == nil || c.ClientCAs == nil {
		return nil, errors.New("raftstore: RaftTLS needs the cluster CA as both RootCAs and ClientCAs")
	}
	out := c.Clone()
	out.ClientAuth = tls.RequireAndVerifyClientCert
	if out.MinVersion < tls.VersionTLS12 {
		out.MinVersion = tls.VersionTLS12
	}
	// Raft speaks its own protocol; no ALPN games.
	out.NextProtos = nil
	return out, nil
}

// dialTLS runs the client side of the TLS handshake on conn, verifying the
// server's certificate for the host part of addr (the advertised Raft
// address the configuration names).
func dialTLS(conn net.Conn, base *tls.Config, addr string, timeout time.Duration) (*tls.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: %w", addr, err)
	}
	c := base.Clone()
	c.ServerName = host
	tc := tls.Client(conn, c)
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, handshakeTimeout))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

// acceptTLS runs the server side of the handshake, bounded like the
// cluster-secret one so that a silent client cannot hold a goroutine.
func acceptTLS(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: tls: %v", errHandshake, err)
	}
	return nil
}
