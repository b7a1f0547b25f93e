package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
)

// syncBuffer is written by the node's leader goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
}

var bannerRE = regexp.MustCompile(`project id\s+: (\S+)\n\s+API key\s+: (\S+)\n\s+owner login\s+: (\S+) / (\S+)\n\s+admin token\s+: (\S+)`)

func startDev(t *testing.T, dir string) (*node.Node, *syncBuffer, []string) {
	t.Helper()
	out := &syncBuffer{}
	hp := auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}
	n, err := node.Start(node.Config{DataDir: dir, HTTPAddr: freePort(t), RaftAddr: freePort(t), Dev: true,
		Out: out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tuning: nodetest.FastTuning(), HashParams: &hp})
	if err != nil {
		t.Fatalf("start dev node: %v", err)
	}
	var m []string
	nodetest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if m = bannerRE.FindStringSubmatch(out.String()); m == nil {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	return n, out, m
}

func TestDevModePrintsAWorkingDemoProjectOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n, _, m := startDev(t, dir)
	pid, key, email, pw, admin := m[1], m[2], m[3], m[4], m[5]
	st, body, err := nodetest.DoJSON(context.Background(), n.HTTPURL(), http.MethodPost, "/api/auth",
		map[string]string{"X-Project-Id": pid, "X-API-Key": key}, map[string]string{"action": "login", "email": email, "password": pw})
	if err != nil || st != http.StatusOK || !bytes.Contains(body, []byte(`"role":"owner"`)) {
		t.Fatalf("login with the printed credentials: %d %s %v", st, body, err)
	}
	st, _, err = nodetest.DoJSON(context.Background(), n.HTTPURL(), http.MethodGet, "/admin/cluster", map[string]string{"Authorization": "Bearer " + admin}, nil)
	if err != nil || st != http.StatusOK {
		t.Fatalf("printed admin token: %d %v", st, err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}

	// A restart prints the same project and does not make another.
	n2, _, m2 := startDev(t, dir)
	defer func() { _ = n2.Close(context.Background()) }()
	if m2[1] != pid || m2[2] != key || m2[4] != pw {
		t.Fatalf("restart printed another project: %v vs %v", m2[1:], m[1:])
	}
	st, body, err = nodetest.DoJSON(context.Background(), n2.HTTPURL(), http.MethodPost, "/api/auth",
		map[string]string{"X-Project-Id": pid, "X-API-Key": key}, map[string]string{"action": "login", "email": email, "password": pw})
	if err != nil || st != http.StatusOK {
		t.Fatalf("login after restart: %d %s %v", st, body, err)
	}
}
