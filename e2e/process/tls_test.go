package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testpki"
)

// TestTLSClusterOfProcesses runs three real processes with HTTPS on the
// client port and mutual TLS on Raft (certificates from a throwaway CA):
// n2 and n3 join over https, a write through a follower is forwarded to the
// leader over https and read back with strong reads on every node, and the
// binary's healthcheck and cluster status reach the nodes with --ca-file.
func TestTLSClusterOfProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := t.TempDir()
	ca := testpki.NewCA(t, "process e2e CA")
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.ClientConfig()}}
	defer client.CloseIdleConnections()

	caFile := ca.WriteCA(t, base)
	var nodes []*proc
	urlOf := map[*proc]string{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		f := ca.WriteFiles(t, base, id)
		p := &proc{t: t, id: id, dataDir: filepath.Join(base, id), httpPort: proctest.FreePort(t), raftPort: proctest.FreePort(t)}
		p.Proc = &proctest.Proc{ID: id, Bin: binPath, LogPath: filepath.Join(base, id+".log")}
		urlOf[p] = fmt.Sprintf("https://127.0.0.1:%d", p.httpPort)
		p.Args = []string{"serve", "--node-id", id, "--data-dir", p.dataDir,
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", p.httpPort), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", p.raftPort),
			"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", p.raftPort), // --advertise-http derived: https://
			"--admin-token", adminToken, "--cluster-secret", clusterSecret,
			"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
			"--raft-tls-cert", f.Cert, "--raft-tls-key", f.Key, "--raft-tls-ca", f.CA,
		}
		nodes = append(nodes, p)
	}
	for _, p := range nodes[1:] {
		p.Args = append(p.Args, "--join", urlOf[nodes[0]])
	}
	killAtCleanup(t, func() []*proc { return nodes }, 32<<10)
	ready := func(p *proc) {
		t.Helper()
		checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			if !p.Running() {
				t.Fatalf("%s exited: %v\n%s", p.id, p.WaitErr(), p.LogTail(8<<10))
			}
			r, err := doJSON(ctx, client, 3*time.Second, http.MethodGet, urlOf[p]+"/readyz", nil, nil)
			if err != nil {
				return err
			}
			if r.status != http.StatusOK {
				return fmt.Errorf("%s /readyz: %s", p.id, r)
			}
			return nil
		})
	}
	start := time.Now()
	nodes[0].mustStart()
	ready(nodes[0])
	for _, p := range nodes[1:] {
		p.mustStart()
	}
	for _, p := range nodes {
		ready(p)
	}
	t.Logf("3 TLS nodes ready in %v", time.Since(start).Round(time.Millisecond))

	// Cluster status through the binary, over https with --ca-file.
	var st clusterStatus
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		out, err := exec.CommandContext(ctx, binPath, "cluster", "status", "--server", urlOf[nodes[2]],
			"--admin-token", adminToken, "--ca-file", caFile).CombinedOutput()
		if err != nil {
			return fmt.Errorf("cluster status: %v: %s", err, out)
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("cluster status output %q: %v", out, err)
		}
		return st.Healthy(3, "")
	})
	for _, n := range st.Nodes {
		if !strings.HasPrefix(n.HTTPAddr, "https://") {
			t.Fatalf("%s advertises %s, want https://", n.ID, n.HTTPAddr)
		}
	}
	var leader, follower *proc
	for _, p := range nodes {
		if p.id == st.Leader {
			leader = p
		} else if follower == nil {
			follower = p
		}
	}

	// A project and a write through a follower (both forwarded over https).
	r, err := doJSON(ctx, client, 20*time.Second, http.MethodPost, urlOf[follower]+"/admin/projects",
		map[string]string{"Authorization": "Bearer " + adminToken},
		map[string]string{"name": "tls", "ownerEmail": ownerEmail, "ownerPassword": ownerPassword})
	if err != nil || r.status != http.StatusCreated {
		t.Fatalf("create project via %s: %v %v", follower.id, r, err)
	}
	var pr project
	var created struct{ ProjectID, APIKey string }
	_ = json.Unmarshal(r.body, &created)
	pr.ID, pr.APIKey = created.ProjectID, created.APIKey
	r, err = doJSON(ctx, client, 20*time.Second, http.MethodPost, urlOf[follower]+"/api/auth",
		map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "login", "email": ownerEmail, "password": ownerPassword})
	var login struct{ Token string }
	if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &login) != nil {
		t.Fatalf("login via %s: %v %v", follower.id, r, err)
	}
	pr.Token = login.Token
	r, err = doJSON(ctx, client, 15*time.Second, http.MethodPost, urlOf[follower]+"/api/db", pr.Headers(),
		map[string]any{"collection": "tls/one", "data": map[string]string{"over": "tls"}})
	if err != nil || r.status != http.StatusCreated {
		t.Fatalf("write via %s: %v %v", follower.id, r, err)
	}
	for _, p := range nodes {
		r, err := doJSON(ctx, client, 15*time.Second, http.MethodGet, urlOf[p]+"/api/db?collection=tls/one", pr.Headers(), nil)
		var d doc
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil || string(d.Data) != `{"over":"tls"}` {
			t.Fatalf("strong read on %s: %v %v", p.id, r, err)
		}
	}

	// The binary's healthcheck: fine with the CA, refused without it.
	for _, p := range nodes {
		if out, err := exec.CommandContext(ctx, binPath, "healthcheck", "--url", urlOf[p]+"/readyz", "--ca-file", caFile).CombinedOutput(); err != nil {
			t.Fatalf("healthcheck %s: %v: %s", p.id, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, binPath, "healthcheck", "--url", urlOf[leader]+"/readyz")
	cmd.Env = append(os.Environ(), "EDGEBASE_CA_FILE=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Fatalf("healthcheck without the CA: %v: %s", err, out)
	}
	t.Logf("leader %s; write via %s read on all three; total %v", leader.id, follower.id, time.Since(start).Round(time.Millisecond))
}
