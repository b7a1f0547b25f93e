package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/edgebase/edgebase/node/nodetest"
)

// TLS flags given by halves are usage errors (exit 2) before anything
// starts, from the command line and from the environment alike.
func TestServeTLSFlagValidation(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	f := ca.WriteFiles(t, dir, "n1")
	base := []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		msg  string
	}{
		{"cert without key", []string{"--tls-cert", f.Cert}, nil, "--tls-cert and --tls-key"},
		{"key without cert", []string{"--tls-key", f.Key}, nil, "--tls-cert and --tls-key"},
		{"cert from env without key", nil, map[string]string{"EDGEBASE_TLS_CERT": f.Cert}, "--tls-cert and --tls-key"},
		{"raft TLS without CA", []string{"--raft-tls-cert", f.Cert, "--raft-tls-key", f.Key}, nil, "all three or none"},
		{"raft TLS CA only", []string{"--raft-tls-ca", f.CA}, nil, "all three or none"},
		{"raft TLS key from env only", nil, map[string]string{"EDGEBASE_RAFT_TLS_KEY": f.Key}, "all three or none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, _, errs := runCLI(t, append(append([]string{}, base...), tc.args...)...)
			if code != 2 || !strings.Contains(errs, tc.msg) || !strings.Contains(errs, "Usage") {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errs, tc.msg)
			}
		})
	}
	// A key that does not match its certificate is not a usage error but a
	// failed start with the reason.
	other := ca.WriteFiles(t, t.TempDir(), "n2")
	code, _, errs := runCLI(t, append(append([]string{}, base...), "--tls-cert", f.Cert, "--tls-key", other.Key)...)
	if code != 1 || !strings.Contains(errs, "private key does not match") {
		t.Fatalf("mismatched key: exit %d, stderr %q", code, errs)
	}
}

// healthcheck and cluster status reach an HTTPS node with --ca-file (or
// EDGEBASE_CA_FILE) and fail without it.
func TestHealthcheckAndClusterStatusOverHTTPS(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 1, TLS: true})
	url := c.Nodes[0].URL()
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("node URL %s", url)
	}
	caFile := c.CA.WriteCA(t, t.TempDir())

	if code, _, errs := runCLI(t, "healthcheck", "--url", url+"/readyz", "--ca-file", caFile); code != 0 {
		t.Fatalf("healthcheck with --ca-file: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "healthcheck", "--url", url+"/readyz"); code != 1 || !strings.Contains(errs, "certificate") {
		t.Fatalf("healthcheck without the CA: %d %q, want 1 and a certificate error", code, errs)
	}
	if code, _, errs := runCLI(t, "healthcheck", "--url", url+"/readyz", "--ca-file", filepath.Join(t.TempDir(), "none.pem")); code != 1 || !strings.Contains(errs, "--ca-file") {
		t.Fatalf("healthcheck with a missing CA file: %d %q", code, errs)
	}
	t.Setenv("EDGEBASE_CA_FILE", caFile)
	if code, _, errs := runCLI(t, "healthcheck", "--url", url+"/readyz"); code != 0 {
		t.Fatalf("healthcheck with EDGEBASE_CA_FILE: %d %s", code, errs)
	}
	code, out, errs := runCLI(t, "cluster", "status", "--server", url, "--admin-token", nodetest.AdminToken)
	if code != 0 {
		t.Fatalf("cluster status over https: %d %s", code, errs)
	}
	var st struct {
		Leader string
		Nodes  []struct{ ID, HTTPAddr, State string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Nodes) != 1 || st.Nodes[0].State != "leader" ||
		!strings.HasPrefix(st.Nodes[0].HTTPAddr, "https://") {
		t.Fatalf("cluster status %q: %v", out, err)
	}
}
