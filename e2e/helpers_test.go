package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/repo"
)

// checkFor calls fn every step until it returns nil, and fails the test with
// fn's last error when timeout passes first. It returns how long it took.
func checkFor(t *testing.T, timeout, step time.Duration, what string, fn func() error) time.Duration {
	t.Helper()
	took, err := waitFor(timeout, step, fn)
	if err != nil {
		t.Fatalf("%s: not true within %v: %v", what, timeout, err)
	}
	return took
}

// waitFor is checkFor without the test: the last error when timeout passes.
func waitFor(timeout, step time.Duration, fn func() error) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := fn()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Now().Add(step).After(deadline) {
			return time.Since(start), err
		}
		time.Sleep(step)
	}
}

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readEnvFile parses KEY=VALUE lines (comments and blanks skipped).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		env[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// run executes a command with a time limit and returns its combined output.
func run(timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	return runWith(timeout, dir, env, nil, name, args...)
}

// runWith is run with stdin (nil: none).
func runWith(timeout time.Duration, dir string, env []string, stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (time limit %v)", ctx.Err(), timeout)
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// compose drives one docker-compose project.
type compose struct {
	cmd     []string // "docker-compose" or "docker", "compose"
	file    string
	project string
	dir     string
	env     []string
}

// composeCommand finds docker-compose, or the docker compose plugin.
func composeCommand() ([]string, error) {
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	if _, err := run(20*time.Second, "", os.Environ(), "docker", "compose", "version"); err == nil {
		return []string{"docker", "compose"}, nil
	}
	return nil, errors.New("neither docker-compose nor the docker compose plugin is installed")
}

func (c *compose) run(timeout time.Duration, args ...string) (string, error) {
	all := append(append([]string{}, c.cmd[1:]...), "-p", c.project, "-f", c.file)
	all = append(all, args...)
	return run(timeout, c.dir, c.env, c.cmd[0], all...)
}

// client talks JSON to one node.
type client struct {
	name string
	base string
	http *http.Client
}

func newClient(name, base string) *client {
	return &client{name: name, base: base, http: &http.Client{Timeout: 5 * time.Second}}
}

// response is what doJSON saw.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) String() string {
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// decode unmarshals the body into v.
func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("decoding %q: %w", r.body, err)
	}
	return nil
}

// doJSON sends body (nil for none) as JSON with the given headers.
func (c *client) doJSON(method, path string, headers map[string]string, body any) (*response, error) {
	return c.doJSONTimeout(c.http.Timeout, method, path, headers, body)
}

func (c *client) doJSONTimeout(timeout time.Duration, method, path string, headers map[string]string, body any) (*response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, c.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: reading body: %w", method, path, c.name, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// expect fails the test unless the call succeeded with one of the statuses.
func expect(t *testing.T, what string, r *response, err error, statuses ...int) *response {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, s := range statuses {
		if r.status == s {
			return r
		}
	}
	t.Fatalf("%s: got %s, want status %v", what, r, statuses)
	return nil
}

// bearer is an Authorization header.
func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// clusterNode and clusterStatus are GET /admin/cluster.
type clusterNode struct {
	ID           string `json:"id"`
	HTTPAddr     string `json:"httpAddr"`
	RaftAddr     string `json:"raftAddr"`
	Voter        bool   `json:"voter"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

type clusterStatus struct {
	Leader string        `json:"leader"`
	Nodes  []clusterNode `json:"nodes"`
}

func (c *client) cluster(adminToken string) (*clusterStatus, error) {
	r, err := c.doJSONTimeout(3*time.Second, http.MethodGet, "/admin/cluster", bearer(adminToken), nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/cluster on %s: %s", c.name, r)
	}
	var cs clusterStatus
	if err := r.decode(&cs); err != nil {
		return nil, err
	}
	return &cs, nil
}

// document is the database area's document.
type document struct {
	Collection string         `json:"collection"`
	Data       map[string]any `json:"data"`
	Revision   uint64         `json:"revision"`
}

// sameJSON compares two values by their JSON encodings (numbers normalised).
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	na, _ := json.Marshal(va)
	nb, _ := json.Marshal(vb)
	return bytes.Equal(na, nb)
}

// composeCluster is docker-compose.yml running under a project of its own.
type composeCluster struct {
	c          *compose
	root       string
	ports      map[string]int     // service → published HTTP port on 127.0.0.1
	nodes      map[string]*client // service → client of its published port
	adminToken string             // from deploy/compose.env
}

// startComposeCluster builds the image and starts docker-compose.yml (three
// voters and one edge node) under a project name of its own, on free host
// ports. It skips without a Docker engine or docker-compose, unless
// EDGEBASE_REQUIRE_DOCKER=1 (as CI sets it), where it fails. At cleanup the
// containers' logs are printed when the test failed, or always with
// EDGEBASE_E2E_LOGS=1, and the project is taken down with its volumes.
func startComposeCluster(t *testing.T) *composeCluster {
	t.Helper()
	requireDocker := os.Getenv("EDGEBASE_REQUIRE_DOCKER") == "1"
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if requireDocker {
			t.Fatalf("EDGEBASE_REQUIRE_DOCKER=1 but %s", msg)
		}
		t.Skipf("skipping the docker-compose end-to-end test: %s (EDGEBASE_REQUIRE_DOCKER=1 turns this into a failure)", msg)
	}
	if testing.Short() && !requireDocker {
		t.Skip("skipping the docker-compose end-to-end test in -short mode")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		unavailable("the docker command is not installed")
	}
	if out, err := run(30*time.Second, "", os.Environ(), "docker", "info"); err != nil {
		unavailable("no Docker engine answers: %v\n%s", err, tail(out, 20))
	}
	composeCmd, err := composeCommand()
	if err != nil {
		unavailable("%v", err)
	}

	root := repoRoot(t)
	buildImage(t, root)

	ports := map[string]int{}
	env := os.Environ()
	for _, s := range services {
		ports[s] = freePort(t)
		env = append(env, fmt.Sprintf("EB_%s_PORT=%d", strings.ToUpper(s), ports[s]))
	}
	c := &compose{
		cmd:     composeCmd,
		file:    filepath.Join(root, "docker-compose.yml"),
		project: "ebe2e" + randomHex(t, 4),
		dir:     root,
		env:     env,
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("EDGEBASE_E2E_LOGS") == "1" {
			out, err := c.run(time.Minute, "logs", "--no-color", "--timestamps", "--tail=300")
			t.Logf("docker-compose logs (%v):\n%s", err, out)
		}
		out, err := c.run(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5")
		if err != nil {
			t.Errorf("docker-compose down -v: %v\n%s", err, out)
		}
	})
	if out, err := c.run(3*time.Minute, "up", "-d", "--no-build"); err != nil {
		t.Fatalf("docker-compose up -d: %v\n%s", err, out)
	}
	t.Logf("compose project %s: ports %v", c.project, ports)

	adminToken := readEnvFile(t, filepath.Join(root, "deploy", "compose.env"))["EDGEBASE_ADMIN_TOKEN"]
	if adminToken == "" {
		t.Fatal("deploy/compose.env sets no EDGEBASE_ADMIN_TOKEN")
	}
	nodes := map[string]*client{}
	for _, s := range services {
		nodes[s] = newClient(s, fmt.Sprintf("http://127.0.0.1:%d", ports[s]))
	}
	return &composeCluster{c: c, root: root, ports: ports, nodes: nodes, adminToken: adminToken}
}

// awaitFormed waits until every node is ready (/readyz, then /healthz) and
// every node sees the same 4-member cluster and leader, which it returns.
func (cl *composeCluster) awaitFormed(t *testing.T) string {
	t.Helper()
	nodes := cl.nodes
	took := checkFor(t, 150*time.Second, 500*time.Millisecond, "/readyz 200 on every node", func() error {
		return allReady(nodes, services)
	})
	t.Logf("all nodes ready after %v", took.Round(time.Millisecond))
	for _, s := range services {
		r, err := nodes[s].doJSON(http.MethodGet, "/healthz", nil, nil)
		expect(t, "GET /healthz on "+s, r, err, http.StatusOK)
	}
	var leader string
	checkFor(t, 60*time.Second, 500*time.Millisecond, "one leader and 4 members seen by every node", func() error {
		seen := map[string]bool{}
		for _, s := range services {
			cs, err := nodes[s].cluster(cl.adminToken)
			if err != nil {
				return err
			}
			if err := checkMembers(cs, services); err != nil {
				return fmt.Errorf("GET /admin/cluster on %s: %w", s, err)
			}
			seen[cs.Leader] = true
			leader = cs.Leader
		}
		if len(seen) != 1 {
			return fmt.Errorf("nodes disagree on the leader: %v", seen)
		}
		return nil
	})
	return leader
}

// project is a project created through the admin API and its owner's session.
type project struct {
	id      string
	apiKey  string
	ownerID string
	token   string // the owner's session token
}

// newProject creates a project through node createVia with the admin token
// and logs its owner in through node loginVia.
func (cl *composeCluster) newProject(t *testing.T, createVia, loginVia string) project {
	t.Helper()
	const ownerEmail, ownerPassword = "owner@e2e.example.com", "e2e-Owner-pw-4821-kQz"
	r, err := cl.nodes[createVia].doJSON(http.MethodPost, "/admin/projects", bearer(cl.adminToken), map[string]string{
		"name": "e2e", "ownerEmail": ownerEmail, "ownerPassword": ownerPassword,
	})
	expect(t, "POST /admin/projects on "+createVia, r, err, http.StatusCreated)
	var proj struct {
		ProjectID string `json:"projectId"`
		APIKey    string `json:"apiKey"`
		OwnerID   string `json:"ownerId"`
	}
	if err := r.decode(&proj); err != nil || proj.ProjectID == "" || proj.APIKey == "" || proj.OwnerID == "" {
		t.Fatalf("POST /admin/projects: want projectId, apiKey, ownerId; got %s (%v)", r, err)
	}

	r, err = cl.nodes[loginVia].doJSON(http.MethodPost, "/api/auth",
		map[string]string{"X-Project-Id": proj.ProjectID, "X-API-Key": proj.APIKey},
		map[string]string{"action": "login", "email": ownerEmail, "password": ownerPassword})
	expect(t, "login on "+loginVia, r, err, http.StatusOK)
	var login struct {
		RequiresTotp bool   `json:"requiresTotp"`
		Token        string `json:"token"`
		User         struct {
			ID    string `json:"id"`
			Email string `json:"email"`
			Role  string `json:"role"`
		} `json:"user"`
	}
	if err := r.decode(&login); err != nil {
		t.Fatal(err)
	}
	if login.RequiresTotp || login.Token == "" || login.User.ID != proj.OwnerID ||
		login.User.Email != ownerEmail || login.User.Role != "owner" {
		t.Fatalf("login: want requiresTotp false, a token and the owner (%s, owner role); got %s", proj.OwnerID, r)
	}
	return project{id: proj.ProjectID, apiKey: proj.APIKey, ownerID: proj.OwnerID, token: login.Token}
}
