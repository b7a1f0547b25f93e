package node_test

// Metrics of a 3-voter cluster: real traffic (writes, logins, a realtime
// subscription, push through the FCM stand-in, a scheduled notification)
// must move the matching series on the nodes that did the work, every node
// must agree on the Raft facts, and GET /metrics must stay within bounds:
// every family named edgebase_* with help text, and no route label taken
// from a path a client sent.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/realtime/client"
)

// scrape is one node's /metrics, parsed.
type scrape struct {
	node string
	raw  string
	fams map[string]*dto.MetricFamily
}

// scrapeOnce GETs base/metrics (no token) and parses the text format.
func scrapeOnce(ctx context.Context, id, base string) (*scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics on %s: %w", id, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics on %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics on %s: %d %s", id, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return nil, fmt.Errorf("GET /metrics on %s: Content-Type %q", id, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics of %s: %w", id, err)
	}
	return &scrape{node: id, raw: string(b), fams: fams}, nil
}

func mustScrape(t *testing.T, c *nodetest.Cluster, i int) *scrape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := scrapeOnce(ctx, c.Nodes[i].ID, c.Nodes[i].URL())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// matches reports whether m has every label pair of kv (name, value, ...).
func matches(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// sum adds the values (for a histogram: the sample counts) of the series of
// name whose labels include kv; ok is false when there is none.
func (s *scrape) sum(name string, kv ...string) (v float64, ok bool) {
	f := s.fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if matches(m, kv) {
			v += sampleValue(m)
			ok = true
		}
	}
	return v, ok
}

// must is sum that fails the test when the series is absent.
func (s *scrape) must(t *testing.T, name string, kv ...string) float64 {
	t.Helper()
	v, ok := s.sum(name, kv...)
	if !ok {
		t.Fatalf("%s: no %s%v in /metrics", s.node, name, kv)
	}
	return v
}

// labelValues lists the values label takes in name's series.
func (s *scrape) labelValues(name, label string) []string {
	seen := map[string]bool{}
	if f := s.fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// checkAllNodes polls until f holds for a fresh scrape of every node.
func checkAllNodes(t *testing.T, c *nodetest.Cluster, total time.Duration, f func(all []*scrape) error) []*scrape {
	t.Helper()
	var all []*scrape
	nodetest.CheckFor(t, total, 100*time.Millisecond, func() error {
		all = all[:0]
		for i, m := range c.Nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s, err := scrapeOnce(ctx, m.ID, c.Nodes[i].URL())
			cancel()
			if err != nil {
				return err
			}
			all = append(all, s)
		}
		return f(all)
	})
	return all
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestMetricsCluster(t *testing.T) {
	pc := startPushCluster(t, 0, push.Tuning{})
	c, p := pc.c, pc.p
	leader := c.Leader(20 * time.Second)
	f := c.Followers(leader)[0]
	fid := c.Nodes[f].ID
	apiH := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	before := mustScrape(t, c, f)

	t.Run("writes", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			st := c.Do(f, http.MethodPost, "/api/db", pc.owner(), map[string]any{"collection": fmt.Sprintf("metrics/d%d", i), "data": map[string]int{"n": i}}, nil)
			if st != http.StatusCreated && st != http.StatusOK {
				t.Fatalf("POST /api/db on %s: %d", fid, st)
			}
		}
		after := mustScrape(t, c, f)
		written := func(s *scrape) float64 {
			a, _ := s.sum("edgebase_http_requests_total", "route", "/api/db", "method", "POST", "code", "201")
			b, _ := s.sum("edgebase_http_requests_total", "route", "/api/db", "method", "POST", "code", "200")
			return a + b
		}
		if got := written(after) - written(before); got != 3 {
			t.Fatalf("%s: requests_total{route=/api/db,method=POST,code=200|201} rose by %v, want 3", fid, got)
		}
		if after.must(t, "edgebase_http_request_duration_seconds", "route", "/api/db", "method", "POST") < 3 {
			t.Fatalf("%s: fewer than 3 /api/db POSTs timed", fid)
		}
		// Proposals forwarded by the follower are applied and timed on the leader.
		if n := mustScrape(t, c, leader).must(t, "edgebase_raft_apply_duration_seconds"); n < 3 {
			t.Fatalf("leader timed %v applies, want at least 3", n)
		}
	})

	t.Run("logins", func(t *testing.T) {
		if st := c.Do(f, http.MethodPost, "/api/auth", apiH, map[string]string{"action": "login", "email": "owner@example.com", "password": "not the password"}, nil); st != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d", st)
		}
		if st := c.Do(f, http.MethodPost, "/api/auth", apiH, map[string]string{"action": "login", "email": "owner@example.com", "password": "owner password 123"}, nil); st != http.StatusOK {
			t.Fatalf("login: %d", st)
		}
		after := mustScrape(t, c, f)
		if d := after.must(t, "edgebase_auth_logins_total", "result", "success") - before.must(t, "edgebase_auth_logins_total", "result", "success"); d != 1 {
			t.Errorf("%s: logins_total{result=success} rose by %v, want 1", fid, d)
		}
		if d := after.must(t, "edgebase_auth_login_failures_total", "reason", "bad_credentials") - before.must(t, "edgebase_auth_login_failures_total", "reason", "bad_credentials"); d != 1 {
			t.Errorf("%s: login_failures_total{reason=bad_credentials} rose by %v, want 1", fid, d)
		}
		if v := after.must(t, "edgebase_auth_logins_total", "result", "mfa_required"); v != 0 {
			t.Errorf("%s: logins_total{result=mfa_required} = %v without TOTP", fid, v)
		}
	})

	t.Run("realtime", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := client.Dial(ctx, client.Config{URL: c.Nodes[f].URL(), Token: p.OwnerToken, ProjectID: p.ID, APIKey: p.APIKey})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.CloseNow() }()
		sub, err := conn.Subscribe(ctx, "live", true)
		if err != nil {
			t.Fatal(err)
		}
		sentBefore := mustScrape(t, c, f).must(t, "edgebase_realtime_events_sent_total")
		checkAllNodes(t, c, 20*time.Second, func(all []*scrape) error {
			for i, s := range all {
				want := 0.0
				if i == f {
					want = 1
				}
				if v, _ := s.sum("edgebase_realtime_connections"); v != want {
					return fmt.Errorf("%s: realtime_connections %v, want %v", s.node, v, want)
				}
				if v, _ := s.sum("edgebase_realtime_subscriptions"); v != want {
					return fmt.Errorf("%s: realtime_subscriptions %v, want %v", s.node, v, want)
				}
			}
			return nil
		})
		if st := c.Do(leader, http.MethodPost, "/api/db", pc.owner(), map[string]any{"collection": "live/a", "data": map[string]int{"n": 1}}, nil); st != http.StatusCreated && st != http.StatusOK {
			t.Fatalf("write live/a: %d", st)
		}
		for ev := range sub.Events() {
			if ev.Kind == client.KindChange {
				break
			}
		}
		if d := mustScrape(t, c, f).must(t, "edgebase_realtime_events_sent_total") - sentBefore; d != 1 {
			t.Errorf("%s: realtime_events_sent_total rose by %v, want 1", fid, d)
		}
		if err := conn.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		checkAllNodes(t, c, 20*time.Second, func(all []*scrape) error {
			for _, s := range all {
				if v := s.must(t, "edgebase_realtime_connections"); v != 0 {
					return fmt.Errorf("%s: realtime_connections %v after close", s.node, v)
				}
				if v := s.must(t, "edgebase_realtime_subscriptions"); v != 0 {
					return fmt.Errorf("%s: realtime_subscriptions %v after close", s.node, v)
				}
				// A normal close is not a drop.
				if v, _ := s.sum("edgebase_realtime_drops_total"); v != 0 {
					return fmt.Errorf("%s: realtime_drops_total %v", s.node, v)
				}
			}
			return nil
		})
	})

	t.Run("push", func(t *testing.T) {
		tokens := []string{pushFakeToken("metrics", 1, 1), pushFakeToken("metrics", 1, 2)}
		u := pc.registerHTTP(f, "metrics-user@example.com", tokens)
		queuedBefore := mustScrape(t, c, f).must(t, "edgebase_push_notifications_queued_total")
		leaderQueuedBefore := mustScrape(t, c, leader).must(t, "edgebase_push_notifications_queued_total")
		ack := pc.send(f, "/api/notifications/send-to-user/"+u.id, map[string]any{"title": "metrics"}, len(tokens))
		pc.waitSent(f, ack.NotificationID)
		if d := mustScrape(t, c, f).must(t, "edgebase_push_notifications_queued_total") - queuedBefore; d != 1 {
			t.Errorf("%s: push_notifications_queued_total rose by %v, want 1 (the send it accepted)", fid, d)
		}
		// A schedule due now: the leader's scheduler fires it.
		var sc struct {
			ID string `json:"id"`
		}
		st, err := pc.call(f, http.MethodPost, "/api/notifications/schedule", pc.owner(),
			map[string]any{"title": "scheduled", "sendAt": time.Now().UTC().Format(time.RFC3339Nano), "target": map[string]string{"userId": u.id}}, &sc)
		if err != nil || st != http.StatusCreated {
			t.Fatalf("schedule: %d %v", st, err)
		}
		all := checkAllNodes(t, c, pushWait, func(all []*scrape) error {
			var sent float64
			for _, s := range all {
				v, _ := s.sum("edgebase_push_messages_sent_total")
				sent += v
				if jobs, _ := s.sum("edgebase_push_backlog_jobs"); jobs != 0 {
					return fmt.Errorf("%s: push_backlog_jobs %v", s.node, jobs)
				}
			}
			if sent != float64(2*len(tokens)) {
				return fmt.Errorf("push_messages_sent_total over the nodes %v, want %d (fcm saw %d)", sent, 2*len(tokens), pc.fcm.Total())
			}
			return nil
		})
		ls := all[leader]
		if v := ls.must(t, "edgebase_push_messages_sent_total"); v != float64(2*len(tokens)) {
			t.Errorf("leader: push_messages_sent_total %v, want %d", v, 2*len(tokens))
		}
		for _, name := range []string{"edgebase_push_messages_failed_total", "edgebase_push_tokens_pruned_total",
			"edgebase_push_messages_skipped_total", "edgebase_push_messages_deferred_total"} {
			if v := ls.must(t, name); v != 0 {
				t.Errorf("leader: %s %v, want 0", name, v)
			}
		}
		if n := ls.must(t, "edgebase_push_scheduler_lateness_seconds"); n != 1 {
			t.Errorf("leader: scheduler_lateness_seconds has %v samples, want 1", n)
		}
		if d := ls.must(t, "edgebase_push_notifications_queued_total") - leaderQueuedBefore; d != 1 {
			t.Errorf("leader: push_notifications_queued_total rose by %v, want 1 (the schedule it fired)", d)
		}
		for _, s := range all {
			if v := s.must(t, "edgebase_push_oldest_job_age_seconds"); v != 0 {
				t.Errorf("%s: push_oldest_job_age_seconds %v with no job", s.node, v)
			}
		}
		if pc.fcm.Total() != 2*len(tokens) {
			t.Errorf("fcm stand-in saw %d messages, want %d", pc.fcm.Total(), 2*len(tokens))
		}
	})

	t.Run("raft", func(t *testing.T) {
		// A strong read on every node, then every node has applied the same.
		for i := range c.Nodes {
			if st := c.Do(i, http.MethodGet, "/api/db?collection=metrics/d0", pc.owner(), nil, nil); st != http.StatusOK {
				t.Fatalf("strong read on %s: %d", c.Nodes[i].ID, st)
			}
		}
		all := checkAllNodes(t, c, 20*time.Second, func(all []*scrape) error {
			applied := all[0].must(t, "edgebase_raft_applied_index")
			term := all[0].must(t, "edgebase_raft_term")
			leaders := 0.0
			for _, s := range all {
				if v := s.must(t, "edgebase_raft_applied_index"); v != applied {
					return fmt.Errorf("applied index %s %v, %s %v", all[0].node, applied, s.node, v)
				}
				if v := s.must(t, "edgebase_raft_term"); v != term || v <= 0 {
					return fmt.Errorf("term %s %v, %s %v", all[0].node, term, s.node, v)
				}
				if v := s.must(t, "edgebase_changefeed_lag_revisions"); v != 0 {
					return fmt.Errorf("%s: changefeed_lag_revisions %v at rest", s.node, v)
				}
				leaders += s.must(t, "edgebase_raft_is_leader")
			}
			if leaders != 1 {
				return fmt.Errorf("raft_is_leader sums to %v", leaders)
			}
			return nil
		})
		for i, s := range all {
			isLeader := i == leader
			want := map[string]float64{"leader": 0, "follower": 1, "candidate": 0, "shutdown": 0}
			if isLeader {
				want["leader"], want["follower"] = 1, 0
			}
			for st, v := range want {
				if got := s.must(t, "edgebase_raft_state", "state", st); got != v {
					t.Errorf("%s: raft_state{state=%s} %v, want %v", s.node, st, got, v)
				}
			}
			if got := s.must(t, "edgebase_raft_is_leader"); got != map[bool]float64{true: 1, false: 0}[isLeader] {
				t.Errorf("%s: raft_is_leader %v", s.node, got)
			}
			for name, want := range map[string]float64{"edgebase_raft_has_leader": 1, "edgebase_raft_voters": 3, "edgebase_raft_nonvoters": 0} {
				if got := s.must(t, name); got != want {
					t.Errorf("%s: %s %v, want %v", s.node, name, got, want)
				}
			}
			applied := s.must(t, "edgebase_raft_applied_index")
			if ci, li := s.must(t, "edgebase_raft_commit_index"), s.must(t, "edgebase_raft_last_log_index"); ci < applied || li < ci {
				t.Errorf("%s: applied %v, commit %v, last log %v: want applied <= commit <= last", s.node, applied, ci, li)
			}
			contact := s.must(t, "edgebase_raft_last_contact_seconds")
			if (isLeader && contact != 0) || contact < 0 || contact > 5 {
				t.Errorf("%s: raft_last_contact_seconds %v (leader %v)", s.node, contact, isLeader)
			}
			if v := s.must(t, "edgebase_raft_leader_changes_total"); v < 1 {
				t.Errorf("%s: raft_leader_changes_total %v, want >= 1", s.node, v)
			}
			s.must(t, "edgebase_badger_lsm_size_bytes", "db", "tree")
			s.must(t, "edgebase_badger_vlog_size_bytes", "db", "tree")
			// The Raft log's segment files are preallocated: never empty.
			if v := s.must(t, "edgebase_raft_log_size_bytes"); v <= 0 {
				t.Errorf("%s: raft_log_size_bytes %v, want > 0", s.node, v)
			}
			// Every node's realtime hub subscribes; the leader's push
			// dispatcher, mail sender and trigger runner too.
			wantSubs := 1.0
			if isLeader {
				wantSubs = 4
			}
			if v := s.must(t, "edgebase_changefeed_subscribers"); v != wantSubs {
				t.Errorf("%s: changefeed_subscribers %v, want %v", s.node, v, wantSubs)
			}
			s.must(t, "edgebase_changefeed_dropped_subscribers_total")
			if v := s.must(t, "edgebase_build_info", "version", "dev"); v != 1 {
				t.Errorf("%s: build_info %v", s.node, v)
			}
			if v := s.must(t, "edgebase_node_info", "node_id", c.Nodes[i].ID, "voter", "true"); v != 1 {
				t.Errorf("%s: node_info %v", s.node, v)
			}
			// This scrape itself is the one request in flight.
			if v := s.must(t, "edgebase_http_requests_in_flight"); v != 1 {
				t.Errorf("%s: http_requests_in_flight %v during a scrape, want 1", s.node, v)
			}
			for _, name := range []string{"edgebase_go_goroutines", "edgebase_process_resident_memory_bytes"} {
				s.must(t, name)
			}
		}
	})

	t.Run("names and help", func(t *testing.T) {
		for i := range c.Nodes {
			s := mustScrape(t, c, i)
			for name, fam := range s.fams {
				if !strings.HasPrefix(name, "edgebase_") {
					t.Errorf("%s: family %s is not named edgebase_*", s.node, name)
				}
				if strings.TrimSpace(fam.GetHelp()) == "" {
					t.Errorf("%s: family %s has no help text", s.node, name)
				}
			}
		}
	})

	t.Run("route cardinality", func(t *testing.T) {
		routes := func(s *scrape) map[string]bool {
			out := map[string]bool{}
			for _, name := range []string{"edgebase_http_requests_total", "edgebase_http_request_duration_seconds"} {
				for _, v := range s.labelValues(name, "route") {
					out[v] = true
				}
			}
			return out
		}
		known := routes(mustScrape(t, c, f))
		secret := randomHex(t, 12)
		paths := []string{
			"/api/db/" + secret,
			"/api/db/users/" + secret + "/profile",
			"/" + secret,
			"/api/notifications/send-to-user/" + secret + "/x",
			"/api/db?collection=" + secret,
			"/admin/cluster/nodes/" + secret, // a registered pattern with a wildcard
		}
		for _, path := range paths {
			if _, _, err := nodetest.DoJSON(context.Background(), c.Nodes[f].URL(), http.MethodGet, path, pc.owner(), nil); err != nil {
				t.Fatal(err)
			}
		}
		after := mustScrape(t, c, f)
		if strings.Contains(after.raw, secret) {
			t.Fatalf("a path a client sent shows in /metrics of %s", fid)
		}
		for r := range routes(after) {
			if !known[r] && r != "other" && r != "/api/db" && r != "/admin/cluster/nodes/{id}" {
				t.Errorf("new route label value %q after requesting random paths", r)
			}
		}
		if v := after.must(t, "edgebase_http_requests_total", "route", "other", "method", "GET", "code", "404"); v < 4 {
			t.Errorf("%s: requests_total{route=other,method=GET,code=404} %v, want >= 4", fid, v)
		}
	})
}
