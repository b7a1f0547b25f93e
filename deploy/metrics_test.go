package deploy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgebase/edgebase/node/nodetest"
)

const dashboardFile = "deploy/grafana/edgebase-dashboard.json"

// metricKind says how a family of the metrics contract shows up.
type metricKind struct {
	histogram bool // exposed as _bucket, _sum and _count
	// labelled: a vector whose children appear once first used (a route, a
	// failure reason), so an idle node may not expose it yet.
	labelled bool
}

// contractFamilies are the metric families of the contract between the node
// (node, httpapi, raftstore, realtime, push, auth) and the deployment files.
// TestMetricNamesExported checks this list against a running node, so it
// cannot drift from what the node serves; the dashboard and the alerts may
// use only these names.
func contractFamilies() map[string]metricKind {
	plain, hist, vec := metricKind{}, metricKind{histogram: true}, metricKind{labelled: true}
	return map[string]metricKind{
		"edgebase_build_info": plain,
		"edgebase_node_info":  plain,

		"edgebase_http_requests_total":           vec,
		"edgebase_http_request_duration_seconds": {histogram: true, labelled: true},
		"edgebase_http_requests_in_flight":       plain,

		"edgebase_raft_state":                           plain,
		"edgebase_raft_is_leader":                       plain,
		"edgebase_raft_has_leader":                      plain,
		"edgebase_raft_term":                            plain,
		"edgebase_raft_commit_index":                    plain,
		"edgebase_raft_applied_index":                   plain,
		"edgebase_raft_last_log_index":                  plain,
		"edgebase_raft_last_contact_seconds":            plain,
		"edgebase_raft_leader_changes_total":            plain,
		"edgebase_raft_apply_duration_seconds":          hist,
		"edgebase_raft_voters":                          plain,
		"edgebase_raft_nonvoters":                       plain,
		"edgebase_badger_lsm_size_bytes":                plain,
		"edgebase_badger_vlog_size_bytes":               plain,
		"edgebase_raft_log_size_bytes":                  plain,
		"edgebase_changefeed_subscribers":               plain,
		"edgebase_changefeed_lag_revisions":             plain,
		"edgebase_changefeed_dropped_subscribers_total": plain,

		"edgebase_realtime_connections":       plain,
		"edgebase_realtime_subscriptions":     plain,
		"edgebase_realtime_events_sent_total": plain,
		"edgebase_realtime_drops_total":       vec,

		"edgebase_push_notifications_queued_total": plain,
		"edgebase_push_messages_sent_total":        plain,
		"edgebase_push_messages_failed_total":      plain,
		"edgebase_push_tokens_pruned_total":        plain,
		"edgebase_push_messages_skipped_total":     plain,
		"edgebase_push_messages_deferred_total":    plain,
		"edgebase_push_scheduler_lateness_seconds": hist,
		"edgebase_push_backlog_jobs":               plain,
		"edgebase_push_oldest_job_age_seconds":     plain,

		"edgebase_auth_logins_total":         vec,
		"edgebase_auth_login_failures_total": vec,
		"edgebase_auth_rate_limited_total":   vec,

		// The Go and process collectors, registered with the edgebase_ prefix.
		"edgebase_process_resident_memory_bytes": plain,
		"edgebase_process_cpu_seconds_total":     plain,
		"edgebase_go_goroutines":                 plain,
	}
}

// metricName matches an edgebase metric name anywhere in a file.
var metricName = regexp.MustCompile(`\bedgebase_[a-z][a-z0-9_]*`)

// referencedFamilies maps every metric family that a file mentions (in an
// expression, an annotation or a description) to the files mentioning it.
// Histogram series (_bucket, _sum, _count) count as their family; a name
// that is no family of the contract is kept as written.
func referencedFamilies(t *testing.T, files ...string) map[string][]string {
	t.Helper()
	contract := contractFamilies()
	refs := map[string][]string{}
	for _, f := range files {
		for _, name := range metricName.FindAllString(string(mustRead(t, f)), -1) {
			fam := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && contract[base].histogram {
					fam = base
				}
			}
			if !slices.Contains(refs[fam], f) {
				refs[fam] = append(refs[fam], f)
			}
		}
	}
	return refs
}

// TestDeploymentMetricNames: the dashboard and the alert rules use only
// names of the contract, and the dashboard shows every family of it.
func TestDeploymentMetricNames(t *testing.T) {
	contract := contractFamilies()
	refs := referencedFamilies(t, dashboardFile, "deploy/prometheus/alerts.yml", "deploy/prometheus/alerts_test.yml")
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		if _, ok := contract[name]; !ok {
			t.Errorf("%s (used in %v) is not a metric the node exports", name, refs[name])
		}
	}
	inDashboard := referencedFamilies(t, dashboardFile)
	notShown := map[string]bool{"edgebase_node_info": true} // identity, for joins in ad-hoc queries
	for _, name := range slices.Sorted(maps.Keys(contract)) {
		if _, ok := inDashboard[name]; !ok && !notShown[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
	for _, a := range []string{"edgebase_raft_is_leader", "edgebase_raft_applied_index", "edgebase_push_oldest_job_age_seconds"} {
		if !slices.Contains(refs[a], "deploy/prometheus/alerts.yml") {
			t.Errorf("alerts.yml does not use %s (no leader, follower lag, dispatcher backlog)", a)
		}
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// loadDashboard decodes the dashboard strictly enough to notice damage.
func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw := mustRead(t, dashboardFile)
	if !json.Valid(raw) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows (collapsed rows keep their panels inside).
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestGrafanaDashboard: valid JSON, a templated Prometheus data source and
// an instance variable, and every panel queries that data source with at
// least one expression selecting the edgebase job.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both and a schema of Grafana 9 or later", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["DS_PROMETHEUS"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("template variables %v: want DS_PROMETHEUS (datasource) and instance (query)", vars)
	}
	ids := map[int]string{}
	queries := 0
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos x=%d w=%d does not fit 24 columns", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: datasource %+v, want uid ${DS_PROMETHEUS}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q, target %s: no expr", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `job="edgebase"`) {
				t.Errorf("panel %q, target %s: %q does not select job=\"edgebase\"", p.Title, tg.RefID, tg.Expr)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${DS_PROMETHEUS}" {
				t.Errorf("panel %q, target %s: datasource %+v", p.Title, tg.RefID, tg.Datasource)
			}
		}
	}
	if queries < 30 {
		t.Errorf("only %d queries in the dashboard", queries)
	}
}

// TestDashboardQueriesParse hands every dashboard expression to promtool as
// a recording rule (Grafana's variables replaced by values), so a PromQL
// syntax error in a panel fails here rather than on a screen.
func TestDashboardQueriesParse(t *testing.T) {
	bin := needPromtool(t)
	d := loadDashboard(t)
	repl := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			expr, err := json.Marshal(repl.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "      - record: dashboard:panel%d:%s\n        expr: %s\n", p.ID, strings.ToLower(tg.RefID), expr)
			n++
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, bin, "", nil, "check", "rules", file)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%d dashboard queries parse: %s", n, strings.TrimSpace(tail(out, 1)))
}

// TestMetricNamesExported starts a real node and an edge node (in-process,
// real Raft and HTTP), drives a little traffic through them, and scrapes
// /metrics: promtool accepts the page, every family of the contract that is
// not a labelled vector is there, and every name the dashboard and the
// alerts use is exported (or a labelled vector not used yet).
func TestMetricNamesExported(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 1, Edges: 1})
	p := c.CreateProject(0)
	// A failed login and a database write: a failure reason and more routes.
	headers := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if st := c.Do(1, http.MethodPost, "/api/auth", headers, map[string]string{"action": "login", "email": "owner@example.com", "password": "wrong password"}, nil); st == http.StatusOK {
		t.Fatalf("a login with a wrong password: status %d", st)
	}
	if st := c.Do(1, http.MethodPost, "/api/db", map[string]string{"Authorization": "Bearer " + p.OwnerToken},
		map[string]any{"collection": "metrics/doc", "data": map[string]any{"n": 1}}, nil); st != http.StatusCreated {
		t.Fatalf("write through the edge node: status %d", st)
	}

	contract := contractFamilies()
	exported := map[string]bool{}
	pages := map[string][]byte{}
	for i, m := range c.Nodes {
		body := scrape(t, c.Client, m.URL()+"/metrics")
		pages[m.ID] = body
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("/metrics of %s does not parse: %v", m.ID, err)
		}
		for name := range fams {
			exported[name] = true
		}
		if i == 0 {
			for _, name := range slices.Sorted(maps.Keys(contract)) {
				if _, ok := fams[name]; !ok && !contract[name].labelled {
					t.Errorf("%s does not export %s", m.ID, name)
				}
			}
		}
		// The dashboard's state timeline adds up these four states.
		var states []string
		if f := fams["edgebase_raft_state"]; f != nil {
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "state" {
						states = append(states, l.GetValue())
					}
				}
			}
		}
		if slices.Sort(states); !slices.Equal(states, []string{"candidate", "follower", "leader", "shutdown"}) {
			t.Errorf("%s: edgebase_raft_state has states %v, want candidate, follower, leader, shutdown", m.ID, states)
		}
	}
	t.Logf("%d metric families exported by %d nodes", len(exported), len(c.Nodes))
	var unused []string
	for name, k := range contract {
		if k.labelled && !exported[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		t.Logf("labelled families with no child yet (not checked): %v", slices.Sorted(slices.Values(unused)))
	}
	var extra []string
	for name := range exported {
		if _, ok := contract[name]; !ok && strings.HasPrefix(name, "edgebase_") &&
			!strings.HasPrefix(name, "edgebase_go_") && !strings.HasPrefix(name, "edgebase_process_") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		t.Logf("exported but not in the contract (unused by the dashboard and alerts): %v", slices.Sorted(slices.Values(extra)))
	}
	refs := referencedFamilies(t, dashboardFile, "deploy/prometheus/alerts.yml")
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		if !exported[name] && !contract[name].labelled {
			t.Errorf("%s (used in %v) is exported by no node", name, refs[name])
		}
	}

	t.Run("promtool check metrics", func(t *testing.T) {
		bin := needPromtool(t)
		for id, body := range pages {
			out, err := promtool(t, bin, "", body, "check", "metrics")
			if err != nil {
				t.Errorf("/metrics of %s: %v\n%s", id, err, out)
			}
		}
	})
}

// scrape GETs a metrics page.
func scrape(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}
