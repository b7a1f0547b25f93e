package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/docs"
	"github.com/edgebase/edgebase/realtime"
)

// The router and docs/openapi.json must list the same routes with the same
// methods. The routes come from the mux (every pattern New registers, with
// every optional part on); the methods from the handlers themselves: a
// method is allowed when the route answers anything but 405 to it.

type noPush struct{ Push }

type noTriggers struct{ Triggers }

const probeAdminToken = "admin-probe"

// mustFullServer is a Server with every optional route registered (realtime,
// push, metrics); the parts behind the routes are never reached by a request
// without credentials, or panic into a 500.
func mustFullServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Store: noStore{}, Cluster: noCluster{}, Accounts: noAccounts{}, AdminToken: probeAdminToken,
		Realtime: new(realtime.Server), Push: noPush{}, Triggers: noTriggers{}, Metrics: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// docMethods reads the document's paths and the methods each lists
// (upper case), with encoding/json rather than the validator library.
func docMethods(t *testing.T) map[string][]string {
	t.Helper()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("docs/openapi.json is OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	out := map[string][]string{}
	for p, item := range doc.Paths {
		for k := range item {
			switch k {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out[p] = append(out[p], strings.ToUpper(k))
			}
		}
		sort.Strings(out[p])
	}
	return out
}

// closedParams are patterns whose wildcard takes a fixed set of values, each
// documented as a path of its own; any other value is 404.
var closedParams = map[string][]string{
	"/api/authenticator/{op}":   {"enroll", "confirm", "verify"},
	"/api/auth/users/{id}/{op}": {"disable", "enable", "revoke-sessions"},
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	s := mustFullServer(t)
	documented := docMethods(t)
	covered := map[string]bool{}
	for _, pat := range s.mux.patterns {
		if pat == "/" {
			continue // the catch-all 404, in the document's error shape
		}
		paths := []string{pat}
		if vals, ok := closedParams[pat]; ok {
			paths = nil
			for _, v := range vals {
				paths = append(paths, pat[:strings.LastIndex(pat, "{")]+v)
			}
		}
		for _, p := range paths {
			covered[p] = true
			if _, ok := documented[p]; !ok {
				t.Errorf("the router registers %s, but docs/openapi.json has no path %s", pat, p)
			}
		}
	}
	for p := range documented {
		if !covered[p] {
			t.Errorf("docs/openapi.json lists %s, which the router does not register", p)
		}
	}
	for pat, vals := range closedParams {
		if !slices.Contains(s.mux.patterns, pat) {
			t.Errorf("closedParams names %s, which the router does not register", pat)
			continue
		}
		other := pat[:strings.LastIndex(pat, "{")] + "not-" + vals[0]
		if code := probe(s, http.MethodPost, other); code != http.StatusNotFound {
			t.Errorf("POST %s: status %d, want 404 (only %v are routes)", other, code, vals)
		}
	}
}

// probe sends a request without body or credentials (but the admin token)
// and returns the status.
func probe(s *Server, method, target string) int {
	req := httptest.NewRequest(method, "http://node"+target, nil)
	req.Header.Set("Authorization", "Bearer "+probeAdminToken)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w.Code
}

func TestOpenAPIMethodsMatchHandlers(t *testing.T) {
	s := mustFullServer(t)
	for p, methods := range docMethods(t) {
		target := concretePath(p)
		var allowed []string
		for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodPatch, http.MethodPost, http.MethodPut} {
			if probe(s, m, target) != http.StatusMethodNotAllowed {
				allowed = append(allowed, m)
			}
		}
		var want []string
		for _, m := range methods {
			if m != http.MethodHead && m != http.MethodOptions {
				want = append(want, m)
			}
		}
		if !slices.Equal(allowed, want) {
			t.Errorf("%s: the handler allows %v, docs/openapi.json documents %v", p, allowed, want)
		}
		// Every GET route answers HEAD (asGet): a documented HEAD needs a GET.
		if slices.Contains(methods, http.MethodHead) && !slices.Contains(methods, http.MethodGet) {
			t.Errorf("%s documents HEAD without GET", p)
		}
		// The preflight is answered on every path, before routing.
		if !slices.Contains(methods, http.MethodOptions) {
			t.Errorf("%s does not document the CORS preflight (options)", p)
		}
		req := httptest.NewRequest(http.MethodOptions, "http://node"+target, nil)
		req.Header.Set("Origin", "http://node") // the node's own origin: allowed without asking Accounts
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			t.Errorf("preflight of %s: status %d, want 204", p, w.Code)
		}
	}
}

// concretePath fills each {param} of a document path with a plain value.
func concretePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "x1"
		}
	}
	return strings.Join(segs, "/")
}

func TestOpenAPIServed(t *testing.T) {
	s := mustFullServer(t)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req := httptest.NewRequest(method, "http://node/api/openapi.json", nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%s /api/openapi.json: status %d: %s", method, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", method, ct)
		}
		if cl := w.Header().Get("Content-Length"); cl != itoa(uint64(len(docs.OpenAPI()))) {
			t.Errorf("%s: Content-Length %q, want %d", method, cl, len(docs.OpenAPI()))
		}
		want := docs.OpenAPI()
		if method == http.MethodHead {
			want = nil
		}
		if !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("%s: body is not docs/openapi.json (%d bytes)", method, w.Body.Len())
		}
	}
	if code := probe(s, http.MethodPost, "/api/openapi.json"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/openapi.json: status %d, want 405", code)
	}
}

// errorCodeRE finds the error codes the Go code defines, in the forms the
// packages use: auth's refusal and Code methods, push's and realtime's
// error literals, httpapi's newError, badField and apiError, query's Code
// constants.
var errorCodeRE = regexp.MustCompile(`(?:refusal\(http\.\w+, |code: +|httpError\{http\.\w+, |newError\(http\.\w+, |Code: +|badField\("[^"]*", |Code\(\) string +\{ return |\bCode[A-Z]\w* += +)"([a-z_]+)"`)

// TestOpenAPIErrorCodesComplete: the document's ErrorCode enum is exactly
// the set of codes the code defines, so a new code cannot ship undocumented
// (the response check catches only the codes the suite happens to see).
func TestOpenAPIErrorCodesComplete(t *testing.T) {
	defined := map[string]string{}
	for _, dir := range []string{".", "../auth", "../push", "../realtime", "../raftstore", "../query", "../triggers"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range errorCodeRE.FindAllSubmatch(src, -1) {
				defined[string(m[1])] = f
			}
		}
	}
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.ErrorCode.Enum
	for code, f := range defined {
		if !slices.Contains(enum, code) {
			t.Errorf("%s defines error code %q, which docs/openapi.json's ErrorCode does not list", f, code)
		}
	}
	for _, code := range enum {
		if _, ok := defined[code]; !ok {
			t.Errorf("docs/openapi.json lists error code %q, which no code defines", code)
		}
	}
}
