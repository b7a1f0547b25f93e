package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no args", nil, 2, "Usage"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command frobnicate"},
		{"project without create", []string{"project"}, 2, "project create"},
		{"cluster bad sub", []string{"cluster", "explode"}, 2, "cluster status|remove"},
		{"unknown flag", []string{"serve", "--no-such-flag"}, 2, "no-such-flag"},
		{"stray argument", []string{"version", "extra"}, 0, ""},
		{"project create without server", []string{"project", "create", "--admin-token", "x"}, 2, "--server is required"},
		{"cluster remove without id", []string{"cluster", "remove", "--server", "http://127.0.0.1:1", "--admin-token", "x"}, 2, "--node-id"},
		{"backup without out", []string{"backup", "--server", "http://127.0.0.1:1", "--admin-token", "x"}, 2, "--out"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, 2, "log-level"},
		{"bad cors origin", []string{"serve", "--cors-origins", "https://ok.example.com, not-an-origin"}, 2, `bad --cors-origins (EDGEBASE_CORS_ORIGINS): invalid argument: "not-an-origin" is not an origin`},
		{"cors origin with a path", []string{"serve", "--cors-origins", "https://app.example.com/login"}, 2, "--cors-origins"},
		{"zero query scan limit", []string{"serve", "--query-scan-limit", "0"}, 2, "--query-scan-limit must be 1 or more"},
		{"bad query scan limit", []string{"serve", "--query-scan-limit", "many"}, 2, "query-scan-limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, errs)
			}
			if !strings.Contains(errs, tc.msg) {
				t.Fatalf("stderr %q does not mention %q", errs, tc.msg)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "edgebase ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestFlagsReadEnvAndCommandLineWins(t *testing.T) {
	t.Setenv("EDGEBASE_SERVER", "http://from-env")
	t.Setenv("EDGEBASE_ADMIN_TOKEN", "env-token")
	fs := newFlags("x")
	server := fs.String("server", "", "")
	token := fs.String("admin-token", "", "")
	if err := parse(fs, []string{"--server", "http://from-flag"}); err != nil {
		t.Fatal(err)
	}
	if *server != "http://from-flag" || *token != "env-token" {
		t.Fatalf("server %q token %q", *server, *token)
	}
	t.Setenv("EDGEBASE_EDGE", "maybe")
	fs = newFlags("y")
	fs.Bool("edge", false, "")
	if err := parse(fs, nil); err == nil || !strings.Contains(err.Error(), "EDGEBASE_EDGE") {
		t.Fatalf("bad env value not reported: %v", err)
	}
}

func TestOperatorCommandsAgainstACluster(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	url := c.Nodes[1].URL()

	code, out, errs := runCLI(t, "project", "create", "--server", url, "--admin-token", nodetest.AdminToken,
		"--name", "cli", "--owner-email", "cli@example.com", "--owner-password", "a fine password", "--json")
	if code != 0 {
		t.Fatalf("project create: %d %s", code, errs)
	}
	var created struct{ ProjectID, APIKey, OwnerID string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ProjectID == "" || !strings.HasPrefix(created.APIKey, "ebk_") || created.OwnerID == "" {
		t.Fatalf("project create output %q: %v", out, err)
	}
	if code, _, errs := runCLI(t, "project", "create", "--server", url, "--admin-token", "wrong",
		"--name", "cli", "--owner-email", "x@example.com", "--owner-password", "a fine password"); code != 1 || !strings.Contains(errs, "invalid_token") {
		t.Fatalf("wrong admin token: %d %q", code, errs)
	}

	// A document to find in the backup.
	var login struct{ Token string }
	if st := c.Do(0, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": created.ProjectID, "X-API-Key": created.APIKey},
		map[string]string{"action": "login", "email": "cli@example.com", "password": "a fine password"}, &login); st != http.StatusOK {
		t.Fatalf("login: %d", st)
	}
	if st := c.Do(0, http.MethodPost, "/api/db", map[string]string{"Authorization": "Bearer " + login.Token},
		map[string]any{"collection": "backup/me", "data": map[string]string{"keep": "this"}}, nil); st != http.StatusCreated {
		t.Fatalf("write: %d", st)
	}
	// The operator makes a registered account an owner of the project.
	var reg struct {
		Token string
		User  struct{ ID string }
	}
	if st := c.Do(2, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": created.ProjectID, "X-API-Key": created.APIKey},
		map[string]string{"action": "register", "email": "second@example.com", "password": "another fine password"}, &reg); st != http.StatusCreated {
		t.Fatalf("register: %d", st)
	}
	if code, out, errs := runCLI(t, "project", "set-owner", "--server", url, "--admin-token", nodetest.AdminToken,
		"--project", created.ProjectID, "--email", "Second@Example.com"); code != 0 || !strings.Contains(out, "is now owner") {
		t.Fatalf("project set-owner: %d %q %q", code, out, errs)
	}
	var me struct{ User struct{ Role string } }
	if st := c.Do(0, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": created.ProjectID, "X-API-Key": created.APIKey, "Authorization": "Bearer " + reg.Token},
		map[string]string{"action": "me"}, &me); st != http.StatusOK || me.User.Role != "owner" {
		t.Fatalf("me after set-owner: %d role %q, want owner", st, me.User.Role)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--project", created.ProjectID, "--email", "nobody@example.com"}, 1, "not_found"},
		{[]string{"--project", "nosuchproject", "--email", "second@example.com"}, 1, "not_found"},
		{[]string{"--project", created.ProjectID, "--email", "not an email"}, 1, "invalid_argument"},
		{[]string{"--project", created.ProjectID}, 2, "--project and --email"},
	} {
		args := append([]string{"project", "set-owner", "--server", url, "--admin-token", nodetest.AdminToken}, tc.args...)
		if code, _, errs := runCLI(t, args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("set-owner %v: %d %q, want %d with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}

	file := filepath.Join(t.TempDir(), "snap.bak")
	if code, _, errs := runCLI(t, "backup", "--server", url, "--admin-token", nodetest.AdminToken, "--out", file); code != 0 {
		t.Fatalf("backup: %d %s", code, errs)
	}
	assertBackupHolds(t, file, created.ProjectID+"/backup/me", `{"keep":"this"}`)

	code, out, errs = runCLI(t, "cluster", "status", "--server", url, "--admin-token", nodetest.AdminToken)
	if code != 0 {
		t.Fatalf("cluster status: %d %s", code, errs)
	}
	var st struct {
		Leader string
		Nodes  []struct{ ID, State string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Nodes) != 3 || st.Leader == "" {
		t.Fatalf("cluster status %q: %v", out, err)
	}

	leader := c.Leader(5 * time.Second)
	victim := c.Followers(leader)[0]
	if code, _, errs := runCLI(t, "cluster", "remove", "--server", c.Nodes[leader].URL(), "--admin-token", nodetest.AdminToken, "--node-id", c.Nodes[victim].ID); code != 0 {
		t.Fatalf("cluster remove: %d %s", code, errs)
	}
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if n := len(c.Nodes[leader].Node.Store.LeaderID()); n == 0 {
			return os.ErrNotExist
		}
		code, out, _ := runCLI(t, "cluster", "status", "--server", c.Nodes[leader].URL(), "--admin-token", nodetest.AdminToken)
		if code != 0 || strings.Contains(out, `"`+c.Nodes[victim].ID+`"`) {
			return os.ErrExist
		}
		return nil
	})
	if code, _, errs := runCLI(t, "cluster", "remove", "--server", c.Nodes[leader].URL(), "--admin-token", nodetest.AdminToken, "--node-id", "nope"); code != 1 || !strings.Contains(errs, "not_found") {
		t.Fatalf("removing an unknown node: %d %q", code, errs)
	}
}

// assertBackupHolds reads a backup file (checking it whole) and finds the
// document.
func assertBackupHolds(t *testing.T, file, path, data string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	found := false
	_, err = raftstore.ReadBackup(f, func(k, v []byte) error {
		if string(k) == "t"+path {
			found = true
			if !bytes.HasSuffix(v, []byte(data)) {
				t.Fatalf("backup value %q does not end with %s", v, data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read backup: %v", err)
	}
	if !found {
		t.Fatalf("document %s not in backup", path)
	}
}

func TestQueryScanLimitFromEnv(t *testing.T) {
	t.Setenv("EDGEBASE_QUERY_SCAN_LIMIT", "-5")
	code, _, errs := runCLI(t, "serve")
	if code != 2 || !strings.Contains(errs, "--query-scan-limit must be 1 or more") {
		t.Fatalf("exit %d, stderr %q; want 2 naming --query-scan-limit", code, errs)
	}
}
