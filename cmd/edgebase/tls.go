package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/edgebase/edgebase/node"
)

// checkTLSFlags catches TLS flags given by halves before anything starts.
func checkTLSFlags(cfg node.Config) error {
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return usageError("--tls-cert and --tls-key (EDGEBASE_TLS_CERT, EDGEBASE_TLS_KEY) go together: give both or neither")
	}
	n := 0
	for _, f := range []string{cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile} {
		if f != "" {
			n++
		}
	}
	if n != 0 && n != 3 {
		return usageError("--raft-tls-cert, --raft-tls-key and --raft-tls-ca (EDGEBASE_RAFT_TLS_*) go together: give all three or none")
	}
	return nil
}

// httpClientFor is an operator command's client: it trusts the PEM CA in
// caFile for https:// URLs (none: the system roots).
func httpClientFor(caFile string, timeout time.Duration) (*http.Client, error) {
	if caFile == "" {
		return &http.Client{Timeout: timeout}, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in the file", caFile)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Proxy:           http.ProxyFromEnvironment,
	}}, nil
}
