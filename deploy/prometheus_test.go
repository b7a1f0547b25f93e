package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrometheusFiles runs promtool on the deployment's Prometheus files: the
// alert rules are valid, their unit tests (alerts_test.yml: each alert fires
// when it should and stays silent on a healthy cluster) pass, and the
// compose scrape configuration, rules included, is valid.
func TestPrometheusFiles(t *testing.T) {
	bin := needPromtool(t)
	dir := filepath.Join(repoRoot(t), "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		out, err := promtool(t, bin, dir, nil, args...)
		if err != nil {
			t.Errorf("%v\n%s", err, out)
			continue
		}
		t.Logf("promtool %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
	}
}

// TestPromtoolCatchesMistakes shows that the checks above can fail: an
// invalid expression fails `check rules`, an alert whose threshold moved
// fails the unit tests, and a config naming a missing rules file fails
// `check config`.
func TestPromtoolCatchesMistakes(t *testing.T) {
	bin := needPromtool(t)
	alerts := string(mustRead(t, "deploy/prometheus/alerts.yml"))
	tests := string(mustRead(t, "deploy/prometheus/alerts_test.yml"))
	config := string(mustRead(t, "deploy/prometheus/prometheus.yml"))
	cases := []struct {
		name, file, old, new string
		args                 []string
	}{
		{"bad expression", "alerts.yml", "up{job=\"edgebase\"} == 0", "up{job=\"edgebase\"} == == 0", []string{"check", "rules", "alerts.yml"}},
		{"moved threshold", "alerts.yml", "edgebase_raft_last_contact_seconds{job=\"edgebase\"} > 10", "edgebase_raft_last_contact_seconds{job=\"edgebase\"} > 1000",
			[]string{"test", "rules", "alerts_test.yml"}},
		{"missing rules file", "prometheus.yml", "  - alerts.yml", "  - no-such-alerts.yml", []string{"check", "config", "prometheus.yml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"alerts.yml": alerts, "alerts_test.yml": tests, "prometheus.yml": config}
			if !strings.Contains(files[c.file], c.old) {
				t.Fatalf("%s no longer contains %q: update this case", c.file, c.old)
			}
			files[c.file] = strings.Replace(files[c.file], c.old, c.new, 1)
			for name, body := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := promtool(t, bin, dir, nil, c.args...)
			if err == nil {
				t.Fatalf("promtool %s accepted the broken copy:\n%s", strings.Join(c.args, " "), out)
			}
			t.Logf("refused, as expected: %s", strings.TrimSpace(tail(out, 4)))
		})
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
