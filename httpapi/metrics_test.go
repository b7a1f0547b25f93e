package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// The parts the routes below never reach: any call panics, which the
// server turns into a 500, so a test that needs them fails loudly.
type noStore struct{ Store }
type noCluster struct{ Cluster }
type noAccounts struct{ Accounts }

// syncBuffer is a log sink shared with the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// mustMetricsServer is a Server with metrics on a fresh registry, /metrics
// served, and its debug log captured.
func mustMetricsServer(t *testing.T) (*Server, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	s, err := New(Config{Store: noStore{}, Cluster: noCluster{}, Accounts: noAccounts{}, Registerer: reg,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return s, reg, logs
}

// requestCounts gathers edgebase_http_requests_total as route|method|code → value.
func requestCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "edgebase_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelOf(m, "route")+"|"+labelOf(m, "method")+"|"+labelOf(m, "code")] = m.GetCounter().GetValue()
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// TestRouteLabelIsBounded sends paths and methods a client controls and
// checks that none of them becomes a label value: every request is counted
// under a registered pattern or "other", and under a standard method or
// "other".
func TestRouteLabelIsBounded(t *testing.T) {
	s, reg, _ := mustMetricsServer(t)
	cases := []struct {
		name, method, target string
		route, wantMethod    string
		code                 int
	}{
		{"healthz", http.MethodGet, "/healthz", "/healthz", "GET", 200},
		{"metrics", http.MethodGet, "/metrics", "/metrics", "GET", 200},
		{"metrics refuses POST", http.MethodPost, "/metrics", "/metrics", "POST", 405},
		{"unknown path", http.MethodGet, "/no/such/route", routeOther, "GET", 404},
		{"path under /api/db", http.MethodGet, "/api/db/users/ada-4f2c9", routeOther, "GET", 404},
		{"query string", http.MethodGet, "/nothing?token=eba_0123456789abcdef", routeOther, "GET", 404},
		{"encoded path", http.MethodGet, "/api/%2e%2e/admin/cluster%3Fx", routeOther, "GET", 404},
		// An unclean path is refused before routing (no redirect).
		{"dot segments", http.MethodGet, "/api/db/../../healthz", routeOther, "GET", 404},
		{"double slash", http.MethodGet, "//healthz", routeOther, "GET", 404},
		// CONNECT paths are not cleaned; the mux may report a raw path as the pattern.
		{"CONNECT", http.MethodConnect, "/zz-" + strings.Repeat("c", 30), routeOther, "other", 404},
		{"pattern with a wildcard", http.MethodPost, "/admin/cluster/nodes/n-7f3a", "/admin/cluster/nodes/{id}", "POST", 401},
		{"made-up method", "BREW", "/healthz", "/healthz", "other", 405},
		{"made-up method, made-up path", "X-" + strings.Repeat("A", 40), "/" + strings.Repeat("b", 200), routeOther, "other", 404},
	}
	want := map[string]float64{}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "http://node"+c.target, nil)
		if c.target == "//healthz" {
			req.URL.Path = "//healthz"
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != c.code {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.code)
		}
		want[c.route+"|"+c.wantMethod+"|"+itoa(uint64(c.code))]++
	}
	got := requestCounts(t, reg)
	// /metrics counts itself only after gathering: its own line may be missing.
	for k, v := range want {
		if got[k] != v {
			t.Errorf("requests_total{%s} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	allowedRoutes := map[string]bool{routeOther: true, "/healthz": true, "/metrics": true, "/admin/cluster/nodes/{id}": true}
	allowedMethods := map[string]bool{"GET": true, "POST": true, "other": true}
	for k := range got {
		parts := strings.Split(k, "|")
		if !allowedRoutes[parts[0]] || !allowedMethods[parts[1]] {
			t.Errorf("unexpected label values %q", k)
		}
	}
	if v := gaugeValue(t, reg, "edgebase_http_requests_in_flight"); v != 0 {
		t.Errorf("in flight after every request returned: %v", v)
	}
}

func TestRouteLabel(t *testing.T) {
	s, _, _ := mustMetricsServer(t)
	for pattern, want := range map[string]string{
		"":                        routeOther,
		"/":                       routeOther,
		"/api/db":                 "/api/db",
		"/api/authenticator/{op}": "/api/authenticator/{op}",
		"/metrics":                "/metrics",
		"/api/db/users/ada":       routeOther, // a path, not a registered pattern
		"/api/authenticator/x":    routeOther,
	} {
		if got := s.route(pattern); got != want {
			t.Errorf("route(%q) = %q, want %q", pattern, got, want)
		}
	}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		if got := methodLabel(methodIndex(m)); got != m {
			t.Errorf("method %s is labelled %s", m, got)
		}
	}
	for _, m := range []string{"get", "CONNECT", "TRACE", "PROPFIND", ""} {
		if got := methodLabel(methodIndex(m)); got != "other" {
			t.Errorf("method %q is labelled %s, want other", m, got)
		}
	}
	// A label the metrics do not know (never produced by route) is counted as other.
	reg := prometheus.NewRegistry()
	m, err := newHTTPMetrics(reg, routeLabels([]string{"/a"}))
	if err != nil {
		t.Fatal(err)
	}
	m.observe("/a", http.MethodGet, 200, 0)
	m.observe("/not-registered", http.MethodGet, 200, 0)
	if got := requestCounts(t, reg); len(got) != 2 || got["/a|GET|200"] != 1 || got["other|GET|200"] != 1 {
		t.Fatalf("requests_total %v", got)
	}
}

// TestObserveAllocs: counting a request on a route seen before allocates
// nothing (the benchmarks run at 20k requests/s).
func TestObserveAllocs(t *testing.T) {
	m, err := newHTTPMetrics(prometheus.NewRegistry(), routeLabels([]string{"/api/db"}))
	if err != nil {
		t.Fatal(err)
	}
	m.observe("/api/db", http.MethodGet, 200, 1000)
	if n := testing.AllocsPerRun(1000, func() { m.observe("/api/db", http.MethodGet, 200, 1000) }); n != 0 {
		t.Fatalf("observe allocates %v times per request", n)
	}
}

// TestAccessLog: one debug line per request with the route pattern, never
// the path, the query string, a header or the body.
func TestAccessLog(t *testing.T) {
	s, _, logs := mustMetricsServer(t)
	const secret = "eba_supersecret0123456789"
	req := httptest.NewRequest(http.MethodPost, "http://node/admin/cluster/nodes/victim?token="+secret,
		strings.NewReader(`{"password":"`+secret+`"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("X-API-Key", secret)
	req.Header.Set("X-Request-Id", "req-42")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Header().Get("X-Request-Id") != "req-42" {
		t.Fatalf("X-Request-Id %q, want req-42", w.Header().Get("X-Request-Id"))
	}
	out := logs.String()
	if strings.Contains(out, secret) || strings.Contains(out, "victim") {
		t.Fatalf("the access log shows a path, query, header or body value:\n%s", out)
	}
	var line struct {
		Msg        string  `json:"msg"`
		RequestID  string  `json:"request_id"`
		Method     string  `json:"method"`
		Route      string  `json:"route"`
		Status     int     `json:"status"`
		DurationMS float64 `json:"duration_ms"`
		Bytes      int64   `json:"bytes"`
	}
	found := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line.Msg != "http request" {
			continue
		}
		found++
		if line.RequestID != "req-42" || line.Method != "POST" || line.Route != "/admin/cluster/nodes/{id}" ||
			line.Status != http.StatusUnauthorized || line.Bytes != int64(w.Body.Len()) || line.DurationMS < 0 {
			t.Fatalf("access log line %+v; response %d with %d bytes", line, w.Code, w.Body.Len())
		}
	}
	if found != 1 {
		t.Fatalf("%d access log lines, want 1:\n%s", found, out)
	}
}

// TestAccessLogOffAboveDebug: at info level nothing is logged per request.
func TestAccessLogOffAboveDebug(t *testing.T) {
	logs := &syncBuffer{}
	s, err := New(Config{Store: noStore{}, Cluster: noCluster{}, Accounts: noAccounts{},
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://node/healthz", nil))
	if out := logs.String(); out != "" {
		t.Fatalf("logged at info level: %s", out)
	}
	// Without a Registerer there is no /metrics route and nothing is counted.
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://node/metrics", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("/metrics without metrics: %d", w.Code)
	}
	_, _ = io.Copy(io.Discard, w.Body)
}

// BenchmarkServeHTTP measures the middleware around a trivial route, with
// and without metrics (the access log is off at info level).
func BenchmarkServeHTTP(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "metrics_off"
		if on {
			name = "metrics_on"
		}
		b.Run(name, func(b *testing.B) {
			var reg prometheus.Registerer
			if on {
				reg = prometheus.NewRegistry()
			}
			s, err := New(Config{Store: noStore{}, Cluster: noCluster{}, Accounts: noAccounts{}, Registerer: reg})
			if err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "http://node/healthz", nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					s.ServeHTTP(w, req)
				}
			})
		})
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
