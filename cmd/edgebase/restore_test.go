package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

func TestRestoreUsageErrors(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "x.backup")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no flags", []string{"restore"}, "--from"},
		{"no data dir", []string{"restore", "--from", backup}, "--data-dir"},
		{"no backup", []string{"restore", "--data-dir", t.TempDir()}, "--from"},
		{"unknown flag", []string{"restore", "--from", backup, "--data-dir", t.TempDir(), "--join", "http://x"}, "join"},
		{"stray argument", []string{"restore", "--from", backup, "--data-dir", t.TempDir(), "now"}, "unexpected argument"},
		{"raft port unknown offline", []string{"restore", "--from", backup, "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:0"}, "--advertise-raft"},
		{"bad raft addr", []string{"restore", "--from", backup, "--data-dir", t.TempDir(), "--raft-addr", "nonsense"}, "--raft-addr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(errs, tc.msg) || !strings.Contains(errs, "edgebase restore --from FILE") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 with usage mentioning %q", code, out, errs, tc.msg)
			}
		})
	}
}

func TestRestoreRefusals(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.backup")
	if err := os.WriteFile(garbage, []byte("this is not a backup at all"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A non-empty data dir is refused before the backup is even opened.
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "node-id"), []byte("n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "restore", "--from", filepath.Join(t.TempDir(), "missing"), "--data-dir", used)
	if code != 1 || !strings.Contains(errs, "missing") {
		t.Fatalf("missing backup file: %d %q", code, errs)
	}
	code, _, errs = runCLI(t, "restore", "--from", garbage, "--data-dir", used)
	if code != 1 || !strings.Contains(errs, "not empty") || !strings.Contains(errs, "node-id") {
		t.Fatalf("non-empty dir: %d %q", code, errs)
	}
	if es, _ := os.ReadDir(used); len(es) != 1 {
		t.Fatalf("refused restore changed the dir: %v", es)
	}
	if b, _ := os.ReadFile(filepath.Join(used, "node-id")); string(b) != "n1\n" {
		t.Fatalf("refused restore changed node-id: %q", b)
	}

	// Garbage is refused and leaves no data dir behind.
	fresh := filepath.Join(t.TempDir(), "fresh")
	code, _, errs = runCLI(t, "restore", "--from", garbage, "--data-dir", fresh)
	if code != 1 || !strings.Contains(errs, "not a valid edgebase backup") {
		t.Fatalf("garbage backup: %d %q", code, errs)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("failed restore left %s (%v)", fresh, err)
	}
}

// The operator's round trip through the CLI: backup reports its size and
// revision, restore reports what it did and leaves a data dir serve can use.
func TestBackupThenRestoreCLI(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	c.CreateProject(0)
	file := filepath.Join(t.TempDir(), "cluster.backup")
	code, out, errs := runCLI(t, "backup", "--server", c.Nodes[0].URL(), "--admin-token", nodetest.AdminToken, "--out", file)
	if code != 0 {
		t.Fatalf("backup: %d %s", code, errs)
	}
	m := regexp.MustCompile(`^wrote (\d+) bytes to (.+): revision (\d+), (\d+) records, served by node (\S+) at `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("backup output %q", out)
	}
	st, err := os.Stat(file)
	if err != nil || strconv.FormatInt(st.Size(), 10) != m[1] || m[2] != file || m[5] != c.Nodes[0].ID {
		t.Fatalf("backup output %q; file %v, %v", out, st, err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file mode %v, want 0600 (it holds secrets)", st.Mode().Perm())
	}
	if _, err := os.Stat(file + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("backup left %s.partial (%v)", file, err)
	}
	rev := m[3]

	dir := filepath.Join(t.TempDir(), "restored")
	code, out, errs = runCLI(t, "restore", "--from", file, "--data-dir", dir, "--advertise-raft", "127.0.0.1:17000")
	if code != 0 {
		t.Fatalf("restore: %d %s", code, errs)
	}
	id, err := os.ReadFile(filepath.Join(dir, "node-id"))
	if err != nil || !strings.HasPrefix(string(id), "node-") {
		t.Fatalf("generated node-id %q, %v", id, err)
	}
	nodeID := strings.TrimSpace(string(id))
	for _, want := range []string{"restored revision " + rev + " ", "node " + nodeID + " is the sole voter", "127.0.0.1:17000", "dropped the old cluster's member records: " + c.Nodes[0].ID} {
		if !strings.Contains(out, want) {
			t.Fatalf("restore output %q lacks %q", out, want)
		}
	}
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"node-id", "raft-wal", "snapshots", "tree"}) {
		t.Fatalf("restored dir holds %v", names)
	}

	// Twice into the same dir: refused.
	code, _, errs = runCLI(t, "restore", "--from", file, "--data-dir", dir, "--node-id", "x")
	if code != 1 || !strings.Contains(errs, "not empty") {
		t.Fatalf("second restore: %d %q", code, errs)
	}
	// The restored dir is a stopped node's data: it backs up offline, at
	// the same revision.
	offline := filepath.Join(t.TempDir(), "offline.backup")
	code, out, errs = runCLI(t, "backup", "--from-data-dir", dir, "--out", offline)
	if code != 0 || !strings.Contains(out, "revision "+rev+",") || !strings.Contains(out, fmt.Sprintf("(node %q)", nodeID)) {
		t.Fatalf("offline backup: %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, "backup", "--from-data-dir", dir, "--server", "http://x", "--out", offline); code != 2 || !strings.Contains(errs, "not both") {
		t.Fatalf("offline and online at once: %d %q", code, errs)
	}
	empty := t.TempDir()
	if code, _, errs := runCLI(t, "backup", "--from-data-dir", empty, "--out", filepath.Join(empty, "x.backup")); code != 1 || !strings.Contains(errs, "no edgebase data") {
		t.Fatalf("offline backup of an empty dir: %d %q", code, errs)
	}
	if es, _ := os.ReadDir(empty); len(es) != 0 {
		t.Fatalf("failed offline backup left %v", es)
	}

	// An explicit id is kept for serve.
	dir2 := filepath.Join(t.TempDir(), "restored2")
	if code, _, errs := runCLI(t, "restore", "--from", file, "--data-dir", dir2, "--node-id", "dr1", "--raft-addr", "0.0.0.0:7100"); code != 0 {
		t.Fatalf("restore --node-id: %d %s", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, "node-id")); string(b) != "dr1\n" {
		t.Fatalf("node-id file %q", b)
	}
}

// backup keeps nothing of a stream that is not a whole backup, and says why.
func TestBackupRefusesBrokenStreams(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	good := filepath.Join(t.TempDir(), "good.backup")
	if code, _, errs := runCLI(t, "backup", "--server", c.Nodes[0].URL(), "--admin-token", nodetest.AdminToken, "--out", good); code != 0 {
		t.Fatalf("backup: %d %s", code, errs)
	}
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		status int
		body   []byte
		msg    string
	}{
		{"truncated", http.StatusOK, whole[:len(whole)/2], "truncated"},
		{"not a backup", http.StatusOK, []byte("<html>proxy login</html>"), "not a valid edgebase backup"},
		{"error status", http.StatusServiceUnavailable, []byte(`{"error":{"code":"no_leader","message":"no leader"}}`), "503 no_leader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write(tc.body)
			}))
			defer srv.Close()
			out := filepath.Join(t.TempDir(), "b.backup")
			code, _, errs := runCLI(t, "backup", "--server", srv.URL, "--admin-token", "x", "--out", out)
			if code != 1 || !strings.Contains(errs, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want 1 mentioning %q", code, errs, tc.msg)
			}
			for _, p := range []string{out, out + ".partial"} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Fatalf("failed backup left %s (%v)", p, err)
				}
			}
		})
	}
}
