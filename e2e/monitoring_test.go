package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

const promImage = "edgebase-prometheus:dev" // the image of docker-compose.yml's prometheus service

// TestComposeMonitoring starts docker-compose.yml with the "monitoring"
// profile: the four nodes and Prometheus, configured by
// deploy/prometheus/prometheus.yml with the rules of alerts.yml. It requires
// that Prometheus scrapes all four nodes, sees exactly one leader and every
// node's identity, has loaded every alert rule, and raises none of the
// cluster-health alerts on the healthy cluster; and that promtool accepts
// each node's /metrics.
//
// It needs Docker and docker-compose (skipped without them unless
// EDGEBASE_REQUIRE_DOCKER=1) and the host's Prometheus and promtool (Debian's
// prometheus package; skipped without them unless EDGEBASE_REQUIRE_DOCKER=1
// or EDGEBASE_REQUIRE_PROMTOOL=1).
func TestComposeMonitoring(t *testing.T) {
	promtool := hostPrometheusTools(t)
	cl := startComposeCluster(t)
	buildPrometheusImage(t, cl.root)

	// Prometheus joins the running project: same services, plus the profile.
	promPort := freePort(t)
	cl.c.env = append(cl.c.env, fmt.Sprintf("EB_PROM_PORT=%d", promPort))
	t.Cleanup(func() {
		// Before startComposeCluster's own cleanup (cleanups run last
		// first): without the profile, down would leave Prometheus behind.
		if t.Failed() || os.Getenv("EDGEBASE_E2E_LOGS") == "1" {
			out, err := cl.c.run(time.Minute, "--profile", "monitoring", "logs", "--no-color", "--tail=100", "prometheus")
			t.Logf("prometheus logs (%v):\n%s", err, out)
		}
		if out, err := cl.c.run(3*time.Minute, "--profile", "monitoring", "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("docker-compose --profile monitoring down -v: %v\n%s", err, out)
		}
	})
	if out, err := cl.c.run(3*time.Minute, "--profile", "monitoring", "up", "-d", "--no-build"); err != nil {
		t.Fatalf("docker-compose --profile monitoring up -d: %v\n%s", err, out)
	}
	prom := newClient("prometheus", fmt.Sprintf("http://127.0.0.1:%d", promPort))
	t.Logf("prometheus on 127.0.0.1:%d", promPort)

	leader := cl.awaitFormed(t)
	t.Logf("cluster formed, leader %s", leader)

	// 1. Every node is a target of job "edgebase", and up.
	took := checkFor(t, 90*time.Second, time.Second, "prometheus scrapes the four nodes", func() error {
		return edgebaseTargetsUp(prom)
	})
	t.Logf("all four targets up after %v", took.Round(time.Millisecond))

	// 2. What Prometheus stores is the cluster: one leader, every node once.
	checkFor(t, 60*time.Second, time.Second, "sum(edgebase_raft_is_leader) == 1", func() error {
		v, err := instantScalar(prom, `sum(edgebase_raft_is_leader{job="edgebase"})`)
		if err != nil {
			return err
		}
		if v != 1 {
			return fmt.Errorf("sum(edgebase_raft_is_leader) = %v, want 1", v)
		}
		return nil
	})
	checkFor(t, 30*time.Second, time.Second, "edgebase_node_info of every node", func() error {
		ids, err := labelValues(prom, `edgebase_node_info{job="edgebase"}`, "node_id")
		if err != nil {
			return err
		}
		if !slices.Equal(ids, []string{"e1", "n1", "n2", "n3"}) {
			return fmt.Errorf("node ids %v, want e1 n1 n2 n3", ids)
		}
		return nil
	})
	leaders, err := labelValues(prom, `edgebase_raft_is_leader{job="edgebase"} == 1`, "instance")
	if err != nil || !slices.Equal(leaders, []string{leader + ":8080"}) {
		t.Errorf("instances reporting is_leader 1: %v (%v), want %s:8080", leaders, err, leader)
	}

	// 3. Every rule of alerts.yml is loaded, and the healthy cluster raises
	// none of the alerts about its health (they may be pending or firing for
	// a moment while the cluster forms: wait for them to clear).
	want := alertNames(t, filepath.Join(cl.root, "deploy", "prometheus", "alerts.yml"))
	checkFor(t, 30*time.Second, time.Second, "the alert rules loaded", func() error {
		got, err := loadedAlertRules(prom)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("alert rules loaded %v, want %v", got, want)
		}
		return nil
	})
	health := []string{"EdgebaseNoLeader", "EdgebaseNodeDown", "EdgebaseNodeWithoutLeader", "EdgebaseFollowerLag", "EdgebaseFollowerLostContact"}
	checkFor(t, 90*time.Second, 2*time.Second, "no cluster-health alert on the healthy cluster", func() error {
		active, err := activeAlerts(prom)
		if err != nil {
			return err
		}
		var bad []string
		for _, a := range health {
			if state, ok := active[a]; ok {
				bad = append(bad, a+" "+state)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("pending or firing: %v", bad)
		}
		return nil
	})

	// 4. promtool accepts every node's /metrics.
	for _, s := range services {
		body, err := get(cl.nodes[s], "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		out, err := runWith(time.Minute, "", nil, body, promtool, "check", "metrics")
		if err != nil {
			t.Errorf("promtool check metrics on %s's /metrics: %v\n%s", s, err, out)
		}
	}
}

// hostPrometheusTools returns promtool's path once both Prometheus (for the
// image) and promtool are installed; otherwise it skips, or fails when
// EDGEBASE_REQUIRE_DOCKER=1 or EDGEBASE_REQUIRE_PROMTOOL=1.
func hostPrometheusTools(t *testing.T) string {
	t.Helper()
	promtool, err1 := exec.LookPath("promtool")
	_, err2 := os.Stat(prometheusBinary())
	if err1 == nil && err2 == nil {
		return promtool
	}
	msg := fmt.Sprintf("the host's promtool (%v) and prometheus (%v) are needed (Debian package prometheus)", err1, err2)
	if os.Getenv("EDGEBASE_REQUIRE_DOCKER") == "1" || os.Getenv("EDGEBASE_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("EDGEBASE_REQUIRE_DOCKER or EDGEBASE_REQUIRE_PROMTOOL is 1 but %s", msg)
	}
	t.Skipf("skipping the monitoring end-to-end test: %s", msg)
	return ""
}

// prometheusBinary is what deploy/prometheus/stage-rootfs.sh packs.
func prometheusBinary() string {
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	return "/usr/bin/prometheus"
}

// buildPrometheusImage stages the image's context with
// deploy/prometheus/stage-rootfs.sh (as `make image-prometheus` does) in a
// temporary directory and builds promImage from deploy/prometheus/Dockerfile.
func buildPrometheusImage(t *testing.T, root string) {
	t.Helper()
	start := time.Now()
	ctxDir := filepath.Join(t.TempDir(), "prometheus-image")
	if out, err := run(5*time.Minute, root, os.Environ(), filepath.Join(root, "deploy", "prometheus", "stage-rootfs.sh"), ctxDir); err != nil {
		t.Fatalf("staging the prometheus image: %v\n%s", err, out)
	}
	if out, err := run(20*time.Minute, "", os.Environ(), "docker", "build", "-q", "-t", promImage,
		"-f", filepath.Join(root, "deploy", "prometheus", "Dockerfile"), ctxDir); err != nil {
		t.Fatalf("docker build %s: %v\n%s", promImage, err, out)
	}
	if out, err := run(time.Minute, "", os.Environ(), "docker", "image", "prune", "-f", "--filter", "label=org.opencontainers.image.title=edgebase-prometheus"); err != nil {
		t.Logf("pruning old prometheus images: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", promImage, time.Since(start).Round(time.Millisecond))
}

// promAPI is the envelope of every Prometheus API answer.
type promAPI struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// promGet calls a Prometheus API path and decodes its data into v.
func promGet(prom *client, path string, v any) error {
	r, err := prom.doJSONTimeout(5*time.Second, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	var env promAPI
	if err := r.decode(&env); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if r.status != http.StatusOK || env.Status != "success" {
		return fmt.Errorf("GET %s: %d %s: %s", path, r.status, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// edgebaseTargetsUp is nil once job "edgebase" has the four nodes as active
// targets, each healthy.
func edgebaseTargetsUp(prom *client) error {
	var data struct {
		ActiveTargets []struct {
			Labels    map[string]string `json:"labels"`
			Health    string            `json:"health"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := promGet(prom, "/api/v1/targets?state=active", &data); err != nil {
		return err
	}
	up := map[string]bool{}
	var problems []string
	for _, tg := range data.ActiveTargets {
		if tg.Labels["job"] != "edgebase" {
			continue
		}
		inst := tg.Labels["instance"]
		if tg.Health == "up" {
			up[inst] = true
		} else {
			problems = append(problems, fmt.Sprintf("%s %s %s", inst, tg.Health, tg.LastError))
		}
	}
	var want []string
	for _, s := range services {
		want = append(want, s+":8080")
	}
	for _, w := range want {
		if !up[w] {
			return fmt.Errorf("target %s is not up (not up: %v)", w, problems)
		}
	}
	if len(up) != len(want) {
		return fmt.Errorf("targets up %v, want exactly %v", up, want)
	}
	return nil
}

// instantQuery runs a PromQL instant query and returns its vector.
func instantQuery(prom *client, q string) ([]struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := promGet(prom, "/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %q, want vector", q, data.ResultType)
	}
	return data.Result, nil
}

// instantScalar is the value of a query that returns one sample.
func instantScalar(prom *client, q string) (float64, error) {
	res, err := instantQuery(prom, q)
	if err != nil {
		return 0, err
	}
	if len(res) != 1 {
		return 0, fmt.Errorf("query %s: %d samples, want 1", q, len(res))
	}
	s, ok := res[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("query %s: value %v", q, res[0].Value)
	}
	return strconv.ParseFloat(s, 64)
}

// labelValues is the sorted values of label across a query's samples.
func labelValues(prom *client, q, label string) ([]string, error) {
	res, err := instantQuery(prom, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range res {
		out = append(out, r.Metric[label])
	}
	slices.Sort(out)
	return out, nil
}

// loadedAlertRules is the sorted names of the alerting rules Prometheus runs
// in group "edgebase".
func loadedAlertRules(prom *client) ([]string, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := promGet(prom, "/api/v1/rules?type=alert", &data); err != nil {
		return nil, err
	}
	var names []string
	for _, g := range data.Groups {
		if g.Name != "edgebase" {
			continue
		}
		for _, r := range g.Rules {
			if r.Type == "alerting" {
				names = append(names, r.Name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// activeAlerts maps the alerts pending or firing to their state.
func activeAlerts(prom *client) (map[string]string, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := promGet(prom, "/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	active := map[string]string{}
	for _, a := range data.Alerts {
		active[a.Labels["alertname"]] = a.State
	}
	return active, nil
}

// alertNames is the sorted alert names a rules file defines.
func alertNames(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*-\s*alert:\s*(\S+)\s*$`).FindAllSubmatch(b, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) == 0 {
		t.Fatalf("%s defines no alert", path)
	}
	slices.Sort(names)
	return names
}

// get is a plain GET of a node's path; a non-200 answer is an error.
func get(c *client, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s on %s: %w", path, c.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s on %s: %w", path, c.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %d %s", path, c.name, resp.StatusCode, tail(string(b), 5))
	}
	return b, nil
}
