package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// tlsSetup is what the TLS options turn into. Every field is nil when its
// option is off: plain HTTP and plain TCP stay the default.
type tlsSetup struct {
	// server is the HTTPS configuration of the client HTTP port.
	server *tls.Config
	// client is the TLS configuration of node-to-node HTTP calls (the CA of
	// --tls-ca, or the system roots).
	client *tls.Config
	// raft is the mutual TLS configuration of the Raft transport.
	raft *tls.Config
}

// loadTLS reads the certificate files named in cfg. Missing files, bad PEM
// and a key that does not match its certificate fail the start.
func loadTLS(cfg *Config) (tlsSetup, error) {
	var out tlsSetup
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return out, errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	if cfg.TLSCertFile != "" {
		cert, err := loadKeyPair("--tls-cert", cfg.TLSCertFile, "--tls-key", cfg.TLSKeyFile)
		if err != nil {
			return out, err
		}
		// HTTP/1.1 only: WebSocket upgrades need it.
		out.server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	if cfg.TLSCAFile != "" {
		pool, err := loadCA("--tls-ca", cfg.TLSCAFile)
		if err != nil {
			return out, err
		}
		out.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	} else if out.server != nil {
		out.client = &tls.Config{MinVersion: tls.VersionTLS12}
	}

	set := 0
	for _, f := range []string{cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile} {
		if f != "" {
			set++
		}
	}
	switch set {
	case 0:
	case 3:
		cert, err := loadKeyPair("--raft-tls-cert", cfg.RaftTLSCertFile, "--raft-tls-key", cfg.RaftTLSKeyFile)
		if err != nil {
			return out, err
		}
		pool, err := loadCA("--raft-tls-ca", cfg.RaftTLSCAFile)
		if err != nil {
			return out, err
		}
		out.raft = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	default:
		return out, errors.New("--raft-tls-cert, --raft-tls-key and --raft-tls-ca go together: give all three or none")
	}
	return out, nil
}

func loadKeyPair(certFlag, certFile, keyFlag, keyFile string) (tls.Certificate, error) {
	for _, f := range [][2]string{{certFlag, certFile}, {keyFlag, keyFile}} {
		if _, err := os.Stat(f[1]); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", f[0], f[1], err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s with %s %s: %w", certFlag, certFile, keyFlag, keyFile, err)
	}
	return cert, nil
}

func loadCA(flag, file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in the file", flag, file)
	}
	return pool, nil
}

// advertiseScheme refuses an explicit http:// --advertise-http on a port
// that serves HTTPS: other nodes would speak plain HTTP to it. (The reverse
// may be a TLS-terminating proxy in front of a plain port, so it is allowed.)
func advertiseScheme(adv string, https bool) error {
	if https && strings.HasPrefix(adv, "http://") {
		return fmt.Errorf("--advertise-http %s: the HTTP port serves HTTPS (--tls-cert), so other nodes must be told an https:// URL", adv)
	}
	return nil
}
