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

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
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
