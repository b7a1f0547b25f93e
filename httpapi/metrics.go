package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// routeMux is the API's ServeMux that also remembers the patterns
// registered on it: the route label of a request is the pattern the mux
// matched only when it is one of these, so no path a client sends (the mux
// reports a raw path for some redirects) ever becomes a label value.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers a handler and remembers its pattern.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// HandleFunc registers a handler and remembers its pattern.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// routeOther is the route label of everything no registered pattern serves
// (the catch-all 404 included), so a path never becomes a label value.
const routeOther = "other"

// routeLabels maps every registered pattern to its label: itself, but the
// catch-all "/" is "other". Built once in New, read-only after.
func routeLabels(patterns []string) map[string]string {
	out := make(map[string]string, len(patterns))
	for _, p := range patterns {
		out[p] = p
	}
	out["/"] = routeOther
	return out
}

// route is the label of the pattern the mux matched ("other" unless it is
// one the API registered).
func (s *Server) route(pattern string) string {
	if l, ok := s.routeLabels[pattern]; ok {
		return l
	}
	return routeOther
}

// httpMetrics are the request collectors. Labels stay bounded whatever
// clients send: route is a registered pattern or "other", method one of the
// standard methods or "other", code a status code. The children of a route
// and method are created on their first request and kept, so a request
// costs two map reads and a few atomic adds, and allocates nothing. A nil
// *httpMetrics records nothing.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	routes   map[string]*routeMetrics // by route label; read-only once set
}

// numMethods is the number of method label values: the standard methods
// and "other" for any other token a client sends.
const numMethods = 8

type routeMetrics struct {
	byMethod [numMethods]methodMetrics
}

type methodMetrics struct {
	state atomic.Pointer[methodState] // nil until the first request; copy on write
}

// methodState is a route and method's histogram and the counters of the
// status codes seen so far (a handful).
type methodState struct {
	duration prometheus.Observer
	codes    []codeCounter
}

type codeCounter struct {
	code    int
	counter prometheus.Counter
}

func newHTTPMetrics(reg prometheus.Registerer, labels map[string]string) (*httpMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgebase_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgebase_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern and method (for WebSocket upgrades: until the upgrade).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgebase_http_requests_in_flight",
			Help: "HTTP requests being answered now (upgraded WebSocket connections are not counted).",
		}),
		routes: map[string]*routeMetrics{routeOther: {}},
	}
	for _, l := range labels {
		m.routes[l] = &routeMetrics{}
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func methodIndex(method string) int {
	switch method {
	case http.MethodGet:
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodPatch:
		return 4
	case http.MethodDelete:
		return 5
	case http.MethodOptions:
		return 6
	}
	return numMethods - 1
}

func methodLabel(i int) string {
	switch i {
	case 0:
		return http.MethodGet
	case 1:
		return http.MethodHead
	case 2:
		return http.MethodPost
	case 3:
		return http.MethodPut
	case 4:
		return http.MethodPatch
	case 5:
		return http.MethodDelete
	case 6:
		return http.MethodOptions
	}
	return "other"
}

// children returns the histogram and the counter of a status code for a
// route and method, creating them on first use.
func (mm *methodMetrics) children(m *httpMetrics, route string, method int, code int) (prometheus.Observer, prometheus.Counter) {
	for {
		cur := mm.state.Load()
		if cur != nil {
			for _, c := range cur.codes {
				if c.code == code {
					return cur.duration, c.counter
				}
			}
		}
		next := &methodState{}
		if cur != nil {
			next.duration = cur.duration
			next.codes = append(next.codes, cur.codes...)
		} else {
			next.duration = m.duration.WithLabelValues(route, methodLabel(method))
		}
		c := m.requests.WithLabelValues(route, methodLabel(method), strconv.Itoa(code))
		next.codes = append(next.codes, codeCounter{code, c})
		if mm.state.CompareAndSwap(cur, next) {
			return next.duration, c
		}
	}
}

// observe records one answered request; route is a label from routeLabels.
func (m *httpMetrics) observe(route, method string, code int, d time.Duration) {
	rm := m.routes[route]
	if rm == nil {
		route, rm = routeOther, m.routes[routeOther]
	}
	mi := methodIndex(method)
	obs, c := rm.byMethod[mi].children(m, route, mi, code)
	c.Inc()
	obs.Observe(d.Seconds())
}

// statusWriter records the status and size of an answer, and reports the
// request once (finish) when the handler returns or upgrades the connection
// to a WebSocket, whichever comes first. Optional interfaces of the server's
// writer (hijack, deadlines) are reached through Unwrap, as
// http.ResponseController and the WebSocket library do.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64

	srv   *Server
	req   *http.Request // its Pattern is set by the mux before the handler runs
	id    string
	start time.Time
	done  bool
}

// finish counts and logs the request; only the first call does anything.
// It runs on the handler's goroutine (WriteHeader or ServeHTTP's defer).
func (w *statusWriter) finish() {
	if w.done {
		return
	}
	w.done = true
	d := time.Since(w.start)
	route := w.srv.route(w.req.Pattern)
	code := w.code()
	if m := w.srv.metrics; m != nil {
		m.inFlight.Dec()
		m.observe(route, w.req.Method, code, d)
	}
	// The access log names the route pattern, never the path or the query
	// (they may carry ids and tokens), and no header or body.
	ctx := w.req.Context()
	if w.srv.logger.Enabled(ctx, slog.LevelDebug) {
		w.srv.logger.LogAttrs(ctx, slog.LevelDebug, "http request",
			slog.String("request_id", w.id),
			slog.String("method", methodLabel(methodIndex(w.req.Method))),
			slog.String("route", route),
			slog.Int("status", code),
			slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.Int64("bytes", w.bytes))
	}
}

func (w *statusWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if w.status == 0 {
		w.status = code
		if code == http.StatusSwitchingProtocols {
			// The connection becomes a WebSocket and the handler runs on
			// for its lifetime: the HTTP request ends here.
			w.finish()
		}
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController and websocket.Accept find the
// server's own writer (flush, deadlines, hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush is here for callers that test for http.Flusher directly.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// handleMetrics serves the node's registry (GET /metrics, no token, like
// /healthz: Prometheus scrapes it).
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, methodNotAllowed("GET"))
		return
	}
	s.metricsPage.ServeHTTP(w, r)
}
