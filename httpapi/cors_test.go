package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

// The origins of these tests: appA is listed by project A, appB by project
// B, ops by the operator (--cors-origins), and evil by nobody.
const (
	appA = "https://a.example.com"
	appB = "http://localhost:5173"
	ops  = "https://console.example.com"
	evil = "https://evil.example.com"
)

// newCORSEnv starts one node whose operator allows ops, with project A
// (e.p) listing appA and project B listing appB.
func newCORSEnv(t *testing.T) (*env, nodetest.Project) {
	t.Helper()
	c := nodetest.Start(t, nodetest.Options{Voters: 1, CORSOrigins: []string{"HTTPS://Console.Example.com:443/"}})
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	e.user = e.mustRegister(t, e.p, "")
	e.other = e.mustRegister(t, e.p, "")
	b := c.CreateProject(0)
	e.mustSetOrigins(t, e.p, "/api/origins", appA)
	e.mustSetOrigins(t, b, "/api/origins", appB)
	return e, b
}

// mustSetOrigins replaces project p's allowed origins through route (as
// its owner) and checks the list that comes back.
func (e *env) mustSetOrigins(t testing.TB, p nodetest.Project, route string, origins ...string) {
	t.Helper()
	if origins == nil {
		origins = []string{}
	}
	r := e.mustSend(t, http.MethodPut, route, projectHeaders(p, p.OwnerToken), mustJSON(t, map[string]any{"origins": origins}))
	if r.Status != http.StatusOK {
		t.Fatalf("PUT %s %v: status %d: %s", route, origins, r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var got struct{ Origins []string }
	mustDecode(t, r.Body, &got)
	if !slices.Equal(got.Origins, origins) {
		t.Fatalf("PUT %s: origins %v, want %v", route, got.Origins, origins)
	}
	if r.Header.Get("X-Revision") == "" {
		t.Errorf("PUT %s: no X-Revision", route)
	}
}

// mustGetOrigins reads project p's list through route as its owner.
func (e *env) mustGetOrigins(t testing.TB, p nodetest.Project, route string) []string {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, route, projectHeaders(p, p.OwnerToken), "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", route, r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var got struct{ Origins []string }
	mustDecode(t, r.Body, &got)
	if got.Origins == nil {
		t.Fatalf("GET %s: origins is not a list: %s", route, r.Body)
	}
	return got.Origins
}

// preflightHeaders is what a browser sends before a cross-origin POST
// with a JSON body and the project headers.
func preflightHeaders(origin string) map[string]string {
	return map[string]string{
		"Origin":                         origin,
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization,content-type,x-api-key,x-project-id",
	}
}

// checkPreflightOK asserts a preflight passed for origin.
func checkPreflightOK(t testing.TB, r reply, origin string) {
	t.Helper()
	if r.Status != http.StatusNoContent {
		t.Fatalf("preflight from %s: status %d, want 204: %s", origin, r.Status, r.Body)
	}
	if len(r.Body) != 0 {
		t.Errorf("204 preflight has a body: %q", r.Body)
	}
	h := r.Header
	if got := h.Get("Access-Control-Allow-Origin"); got != origin {
		t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, origin)
	}
	if !slices.Contains(h.Values("Vary"), "Origin") {
		t.Errorf("Vary = %q, want Origin", h.Values("Vary"))
	}
	methods := splitList(h.Get("Access-Control-Allow-Methods"))
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE"} {
		if !slices.Contains(methods, m) {
			t.Errorf("Access-Control-Allow-Methods %v lacks %s", methods, m)
		}
	}
	allowed := splitList(strings.ToLower(h.Get("Access-Control-Allow-Headers")))
	for _, name := range []string{"authorization", "content-type", "x-project-id", "x-api-key", "if-match", "x-min-revision", "x-request-id"} {
		if !slices.Contains(allowed, name) {
			t.Errorf("Access-Control-Allow-Headers %v lacks %s", allowed, name)
		}
	}
	if h.Get("Access-Control-Max-Age") == "" {
		t.Errorf("no Access-Control-Max-Age")
	}
	if h.Get("X-Request-Id") == "" {
		t.Errorf("no X-Request-Id")
	}
}

// checkNoCORS asserts an answer carries no Access-Control-* header.
func checkNoCORS(t testing.TB, r reply) {
	t.Helper()
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Access-Control-") {
			t.Errorf("status %d carries %s: %q", r.Status, k, r.Header.Values(k))
		}
	}
}

// checkCORS asserts an answer a browser on origin may read.
func checkCORS(t testing.TB, r reply, origin string) {
	t.Helper()
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != origin {
		t.Errorf("status %d: Access-Control-Allow-Origin = %q, want %q", r.Status, got, origin)
	}
	if !slices.Contains(r.Header.Values("Vary"), "Origin") {
		t.Errorf("status %d: Vary = %q, want Origin", r.Status, r.Header.Values("Vary"))
	}
	exposed := splitList(strings.ToLower(r.Header.Get("Access-Control-Expose-Headers")))
	for _, name := range []string{"x-revision", "x-request-id", "retry-after", "etag"} {
		if !slices.Contains(exposed, name) {
			t.Errorf("status %d: Access-Control-Expose-Headers %v lacks %s", r.Status, exposed, name)
		}
	}
	if r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("Access-Control-Allow-Credentials is set: the API takes bearer tokens, not cookies")
	}
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func TestCORSPreflight(t *testing.T) {
	e, _ := newCORSEnv(t)
	cases := []struct {
		name, url string
		headers   map[string]string
		ok        bool
	}{
		{"listed by a project", "/api/db", preflightHeaders(appA), true},
		{"listed by another project", "/api/auth", preflightHeaders(appB), true},
		{"allowed by the operator", "/api/db", preflightHeaders(ops), true},
		{"operator, admin route", "/admin/cluster", preflightHeaders(ops), true},
		{"node's own origin", "/api/db", preflightHeaders(e.base), true},
		{"a project's header is ignored", "/api/db", mergeHeaders(preflightHeaders(appA), map[string]string{"X-Project-Id": "nope"}), true},
		{"listed by nobody", "/api/db", preflightHeaders(evil), false},
		{"another port of a listed host", "/api/db", preflightHeaders("https://a.example.com:8443"), false},
		{"another scheme of a listed host", "/api/db", preflightHeaders("http://a.example.com"), false},
		{"not an origin", "/api/db", preflightHeaders("null"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.mustSend(t, http.MethodOptions, tc.url, tc.headers, "")
			if tc.ok {
				checkPreflightOK(t, r, tc.headers["Origin"])
				return
			}
			if r.Status != http.StatusForbidden {
				t.Fatalf("status %d, want 403: %s", r.Status, r.Body)
			}
			checkError(t, r, http.StatusForbidden, "origin_not_allowed", "")
			checkNoCORS(t, r)
		})
	}

	// An OPTIONS that is not a preflight (no Origin, or no
	// Access-Control-Request-Method) is a method the route does not serve.
	for name, h := range map[string]map[string]string{
		"no Origin":                        {"Access-Control-Request-Method": "POST"},
		"no Access-Control-Request-Method": {"Origin": appA},
		"neither":                          {},
	} {
		t.Run("not a preflight: "+name, func(t *testing.T) {
			t.Parallel()
			r := e.mustSend(t, http.MethodOptions, "/api/db", h, "")
			checkError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
			if r.Header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
			if h["Origin"] == "" {
				checkNoCORS(t, r)
			}
		})
	}
}

func mergeHeaders(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestCORSRealRequests(t *testing.T) {
	e, b := newCORSEnv(t)
	a := e.p
	admin := map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}
	withOrigin := func(h map[string]string, origin string) map[string]string {
		return mergeHeaders(h, map[string]string{"Origin": origin})
	}
	cases := []struct {
		name, method, url string
		headers           map[string]string
		body              string
		status            int
		allow             bool // the answer carries the CORS headers for Origin
	}{
		// The request's project from X-Project-Id.
		{"project origin, its project", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, a.OwnerToken), appA), "", http.StatusNotFound, true},
		{"project origin, write", http.MethodPost, "/api/db", withOrigin(projectHeaders(a, a.OwnerToken), appA), `{"collection":"docs/cors","data":{"x":1}}`, http.StatusCreated, true},
		{"project origin, other project", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(b, b.OwnerToken), appA), "", http.StatusNotFound, false},
		{"other project's origin", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, a.OwnerToken), appB), "", http.StatusNotFound, false},
		{"unlisted origin", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, a.OwnerToken), evil), "", http.StatusNotFound, false},
		// The request's project from the bearer session.
		{"project from the session", http.MethodGet, docQuery("docs/none"), withOrigin(bearer(a.OwnerToken), appA), "", http.StatusNotFound, true},
		{"session of another project", http.MethodGet, docQuery("docs/none"), withOrigin(bearer(b.OwnerToken), appA), "", http.StatusNotFound, false},
		{"invalid token is no project", http.MethodGet, docQuery("docs/none"), withOrigin(bearer("ebt_nope"), appA), "", http.StatusUnauthorized, false},
		// Error answers are readable by an allowed origin.
		{"401 missing token", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, ""), appA), "", http.StatusUnauthorized, true},
		{"401 bad API key", http.MethodPost, "/api/auth", withOrigin(map[string]string{"X-Project-Id": a.ID, "X-API-Key": "ebk_wrong"}, appA), `{"action":"login","email":"x@example.com","password":"whatever123"}`, http.StatusUnauthorized, true},
		{"403 not an owner", http.MethodGet, "/api/origins", withOrigin(projectHeaders(a, e.user.Token), appA), "", http.StatusForbidden, true},
		{"403 project mismatch", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, b.OwnerToken), appA), "", http.StatusForbidden, true},
		{"405", http.MethodPatch, "/api/db", withOrigin(projectHeaders(a, a.OwnerToken), appA), "", http.StatusMethodNotAllowed, true},
		{"415", http.MethodPost, "/api/db", withOrigin(mergeHeaders(projectHeaders(a, a.OwnerToken), map[string]string{"Content-Type": "text/plain"}), appA), `{}`, http.StatusUnsupportedMediaType, true},
		// Operator origins pass everywhere; project origins only on the
		// project's own API.
		{"operator origin, a project", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(b, b.OwnerToken), ops), "", http.StatusNotFound, true},
		{"operator origin, admin", http.MethodGet, "/admin/cluster", withOrigin(admin, ops), "", http.StatusOK, true},
		{"operator origin, admin refused", http.MethodGet, "/admin/cluster", withOrigin(nil, ops), "", http.StatusUnauthorized, true},
		{"operator origin, healthz", http.MethodGet, "/healthz", withOrigin(nil, ops), "", http.StatusOK, true},
		{"operator origin, readyz", http.MethodGet, "/readyz", withOrigin(nil, ops), "", http.StatusOK, true},
		{"operator origin, no route", http.MethodGet, "/nothing", withOrigin(nil, ops), "", http.StatusNotFound, true},
		{"project origin, admin", http.MethodGet, "/admin/cluster", withOrigin(mergeHeaders(admin, map[string]string{"X-Project-Id": a.ID}), appA), "", http.StatusOK, false},
		{"project origin, healthz", http.MethodGet, "/healthz", withOrigin(map[string]string{"X-Project-Id": a.ID}, appA), "", http.StatusOK, false},
		// The node's own origin and requests without Origin need nothing.
		{"same origin", http.MethodGet, docQuery("docs/none"), withOrigin(projectHeaders(a, a.OwnerToken), e.base), "", http.StatusNotFound, false},
		{"no Origin", http.MethodGet, docQuery("docs/none"), projectHeaders(a, a.OwnerToken), "", http.StatusNotFound, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.mustSend(t, tc.method, tc.url, tc.headers, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status >= 400 {
				checkError(t, r, tc.status, "", "")
			}
			if tc.allow {
				checkCORS(t, r, tc.headers["Origin"])
			} else {
				checkNoCORS(t, r)
			}
		})
	}
}

func TestCORSPublicAssets(t *testing.T) {
	e, _ := newCORSEnv(t)
	// The demo page names no project: any project's origin may read it,
	// as for a preflight.
	for origin, allow := range map[string]bool{appA: true, appB: true, ops: true, evil: false} {
		r := e.mustSend(t, http.MethodGet, "/_/live", map[string]string{"Origin": origin}, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET /_/live from %s: status %d", origin, r.Status)
		}
		if allow {
			checkCORS(t, r, origin)
		} else {
			checkNoCORS(t, r)
		}
	}
}

func TestOriginsList(t *testing.T) {
	e, b := newCORSEnv(t)
	a := e.p

	// /api/origins and /api/realtime/origins are one list, both ways, and
	// a PUT canonicalises.
	e.mustSetOrigins(t, a, "/api/realtime/origins", appA, "https://x.example.com")
	if got := e.mustGetOrigins(t, a, "/api/origins"); !slices.Equal(got, []string{appA, "https://x.example.com"}) {
		t.Fatalf("GET /api/origins after PUT /api/realtime/origins = %v", got)
	}
	r := e.mustSend(t, http.MethodPut, "/api/origins", projectHeaders(a, a.OwnerToken), `{"origins":["HTTPS://A.Example.com:443/"]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT: status %d: %s", r.Status, r.Body)
	}
	if got := e.mustGetOrigins(t, a, "/api/realtime/origins"); !slices.Equal(got, []string{appA}) {
		t.Fatalf("GET /api/realtime/origins after PUT /api/origins = %v, want [%s]", got, appA)
	}
	if got := e.mustGetOrigins(t, b, "/api/origins"); !slices.Equal(got, []string{appB}) {
		t.Fatalf("project B's list = %v, want [%s]: lists are per project", got, appB)
	}

	// Refusals change nothing.
	for _, route := range []string{"/api/origins", "/api/realtime/origins"} {
		e.run(t, []scenario{
			{name: route + " user GET", as: "user", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, status: 403, code: "forbidden"},
			{name: route + " user PUT", as: "user", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"origins":["https://evil.example.com"]}`, status: 403, code: "forbidden"},
			{name: route + " no token", as: "none", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, status: 401, code: "missing_token"},
			{name: route + " no key", url: route, status: 401, code: "missing_api_key"},
			{name: route + " bad first", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"origins":["not an origin"]}`, status: 400, code: "invalid_argument", field: "origins[0]"},
			{name: route + " bad second", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"origins":["https://ok.example.com","https://x.example.com/path"]}`, status: 400, code: "invalid_argument", field: "origins[1]"},
			{name: route + " bad scheme", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"origins":["ftp://x.example.com"]}`, status: 400, code: "invalid_argument", field: "origins[0]"},
			{name: route + " missing", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{}`, status: 400, code: "invalid_argument", field: "origins"},
			{name: route + " not a list", method: "PUT", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"origins":"https://x.example.com"}`, status: 400, code: "invalid_argument", field: "origins"},
			{name: route + " DELETE", method: "DELETE", url: route, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, status: 405, code: "method_not_allowed"},
		})
	}
	if got := e.mustGetOrigins(t, a, "/api/origins"); !slices.Equal(got, []string{appA}) {
		t.Fatalf("refused PUTs changed the list: %v", got)
	}
}

// TestCORSOriginRemoved: once a project drops an origin, neither its
// preflight nor its real requests pass; adding one makes it pass.
func TestCORSOriginRemoved(t *testing.T) {
	e, b := newCORSEnv(t)
	a := e.p
	const late = "https://late.example.com"
	// A refused preflight first, so that the node has built its view of
	// every project's list before the change.
	if r := e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(late), ""); r.Status != http.StatusForbidden {
		t.Fatalf("preflight from an unlisted origin: status %d", r.Status)
	}
	e.mustSetOrigins(t, b, "/api/origins", appB, late)
	checkPreflightOK(t, e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(late), ""), late)

	checkPreflightOK(t, e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(appA), ""), appA)
	checkCORS(t, e.mustSend(t, http.MethodGet, docQuery("docs/none"), mergeHeaders(projectHeaders(a, a.OwnerToken), map[string]string{"Origin": appA}), ""), appA)
	e.mustSetOrigins(t, a, "/api/origins")
	r := e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(appA), "")
	checkError(t, r, http.StatusForbidden, "origin_not_allowed", "")
	checkNoCORS(t, r)
	checkNoCORS(t, e.mustSend(t, http.MethodGet, docQuery("docs/none"), mergeHeaders(projectHeaders(a, a.OwnerToken), map[string]string{"Origin": appA}), ""))
	// The others still pass.
	checkPreflightOK(t, e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(appB), ""), appB)
	checkPreflightOK(t, e.mustSend(t, http.MethodOptions, "/api/db", preflightHeaders(ops), ""), ops)
}
