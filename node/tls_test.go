package node_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
)

// A cluster with TLS on the client HTTP port and mutual TLS on Raft does
// everything a plain one does: joins over https, forwards writes and read
// indexes from followers over https, fails over and takes a node back.
func TestTLSClusterReplicatesForwardsAndFailsOver(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3, TLS: true, RaftTLS: true})
	for _, m := range c.Nodes {
		if !strings.HasPrefix(m.Node.HTTPURL(), "https://") {
			t.Fatalf("%s advertises %s, want an https:// URL", m.ID, m.Node.HTTPURL())
		}
	}
	leader := c.Leader(10 * time.Second)
	f := c.Followers(leader)
	// Project creation through a follower: forwarded over https.
	p := c.CreateProject(f[0])
	for i := 0; i < 10; i++ {
		coll := fmt.Sprintf("tls/t%d", i)
		rev := mustWrite(t, c, f[0], p.OwnerToken, coll, map[string]int{"i": i})
		// Strong read on the other follower: its read index comes over https.
		d := mustRead(t, c, f[1], p.OwnerToken, "collection="+coll)
		if d.Revision != rev {
			t.Fatalf("read %s on %s: rev %d, want %d", coll, c.Nodes[f[1]].ID, d.Revision, rev)
		}
	}

	// Failover: the survivors elect a leader over mutual TLS.
	old := c.Nodes[leader].ID
	c.Kill(leader)
	newLeader := c.Leader(10 * time.Second)
	if c.Nodes[newLeader].ID == old {
		t.Fatalf("leader still %s after it was killed", old)
	}
	var via int
	for _, j := range c.Followers(newLeader) {
		via = j
	}
	rev := mustWrite(t, c, via, p.OwnerToken, "tls/after", map[string]bool{"failover": true})
	if d := mustRead(t, c, newLeader, p.OwnerToken, "collection=tls/after"); d.Revision != rev {
		t.Fatalf("after failover: rev %d, want %d", d.Revision, rev)
	}

	// The killed node comes back over TLS and catches up.
	c.StartMember(leader)
	c.WaitReady(leader, 20*time.Second)
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if got := c.Nodes[leader].Node.Store.AppliedIndex(); got < rev {
			return fmt.Errorf("%s applied %d, want >= %d", old, got, rev)
		}
		return nil
	})
	if d := mustRead(t, c, leader, p.OwnerToken, "collection=tls/after&consistency=local"); d.Revision != rev {
		t.Fatalf("restarted %s: rev %d, want %d", old, d.Revision, rev)
	}
}

// Strangers on the Raft port are refused and the cluster does not notice:
// a plain TCP client, and a TLS client whose certificate another CA signed.
// On the HTTP port, an HTTPS client trusting the CA is served, a plain
// HTTP request and a client not trusting the CA are not.
func TestTLSRefusesStrangers(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3, TLS: true, RaftTLS: true})
	leader := c.Leader(10 * time.Second)
	target := c.Nodes[c.Followers(leader)[0]]

	// Plain TCP speaking our handshake's opening bytes.
	raw, err := net.DialTimeout("tcp", target.RaftAddr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = raw.Write(append([]byte("EBRAFT1\n"), make([]byte, 32)...))
	n, err := io.ReadFull(raw, make([]byte, 64))
	_ = raw.Close()
	if err == nil || isTimeout(err) {
		t.Fatalf("plain TCP client on the Raft port: read %d bytes, err %v; want the connection refused", n, err)
	}

	// TLS with a certificate from another CA (trusting ours, so the
	// client side would be happy).
	other := testpki.NewCA(t, "another CA")
	foreign := other.TLSCertificate(t, "intruder")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", target.RaftAddr, &tls.Config{
		// Sent even though the server asks for certificates of its own CA.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil },
		RootCAs:              c.CA.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err == nil {
		// TLS 1.3: the server's verdict on our certificate arrives as an
		// alert on the first read.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write(append([]byte("EBRAFT1\n"), make([]byte, 32)...))
		n, err = io.ReadFull(conn, make([]byte, 64))
		_ = conn.Close()
		if err == nil || isTimeout(err) {
			t.Fatalf("foreign certificate on the Raft port: read %d bytes, err %v; want a refusal", n, err)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("foreign certificate: %v; want the server to reject the certificate it was shown", err)
	}
	t.Logf("foreign certificate refused: %v", err)

	// The cluster is untouched: same leader, everyone ready, writes commit.
	// (Status gives each member a second to answer; -race on a busy
	// machine may need another try.)
	nodetest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		st, err := c.Nodes[leader].Node.Store.Status(context.Background())
		if err != nil {
			return err
		}
		if st.Leader == "" {
			return errors.New("no leader")
		}
		for _, m := range st.Nodes {
			if m.State != "leader" && m.State != "follower" {
				return fmt.Errorf("after the strangers: %s is %q", m.ID, m.State)
			}
		}
		return nil
	})
	for i := range c.Nodes {
		c.WaitReady(i, 5*time.Second)
	}
	p := c.CreateProject(leader)
	mustWrite(t, c, c.Followers(leader)[0], p.OwnerToken, "tls/still", map[string]bool{"ok": true})

	// HTTP port: HTTPS with the CA is ready; plain HTTP is not served; a
	// client without the CA refuses the server.
	resp, err := c.Client.Get(target.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("https /readyz: %d, TLS %v", resp.StatusCode, resp.TLS)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + target.HTTPAddr + "/readyz"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP request to the TLS port answered 200")
		}
	}
	if resp, err := plain.Get(target.URL() + "/readyz"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("client without the CA accepted the node's certificate: %d", resp.StatusCode)
	}
	// TLS 1.1 is refused.
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: c.CA.Pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(target.URL() + "/readyz"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("TLS 1.1 client served: %d", resp.StatusCode)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Bad TLS files and flags given by halves fail the start with a message
// that names the problem.
func TestTLSConfigErrorsFailStart(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	good := ca.WriteFiles(t, dir, "n1")
	other := ca.WriteFiles(t, filepath.Join(dir), "n2")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name string
		set  func(*node.Config)
		want string
	}{
		{"cert without key", func(c *node.Config) { c.TLSCertFile = good.Cert }, "--tls-cert and --tls-key"},
		{"missing cert file", func(c *node.Config) { c.TLSCertFile, c.TLSKeyFile = missing, good.Key }, "missing.pem"},
		{"key of another certificate", func(c *node.Config) { c.TLSCertFile, c.TLSKeyFile = good.Cert, other.Key }, "private key does not match"},
		{"garbage certificate", func(c *node.Config) { c.TLSCertFile, c.TLSKeyFile = garbage, good.Key }, "--tls-cert"},
		{"garbage CA", func(c *node.Config) { c.TLSCAFile = garbage }, "no PEM certificate"},
		{"raft TLS partial", func(c *node.Config) { c.RaftTLSCertFile, c.RaftTLSKeyFile = good.Cert, good.Key }, "all three or none"},
		{"raft CA missing", func(c *node.Config) {
			c.RaftTLSCertFile, c.RaftTLSKeyFile, c.RaftTLSCAFile = good.Cert, good.Key, missing
		}, "--raft-tls-ca"},
		{"http advertise with TLS", func(c *node.Config) {
			c.TLSCertFile, c.TLSKeyFile, c.AdvertiseHTTP = good.Cert, good.Key, "http://127.0.0.1:1"
		}, "https://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.Config{NodeID: "n1", DataDir: filepath.Join(t.TempDir(), "d"), HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
				ClusterSecret: "s", Out: io.Discard, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			tc.set(&cfg)
			n, err := node.Start(cfg)
			if err == nil {
				n.Kill()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
