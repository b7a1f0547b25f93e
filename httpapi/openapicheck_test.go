package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/edgebase/edgebase/docs"
	"github.com/edgebase/edgebase/raftstore"
)

// Every response the suite's client receives is checked against
// docs/openapi.json by pb33f/libopenapi-validator: status, Content-Type,
// body schema and declared headers. A problem is reported by mustSend to
// the test that made the request; one no test can own (a request sent from
// another goroutine through send or client.Do) fails the run in TestMain,
// with the list. Responses the document cannot describe are checked by
// hand against the rules it states: an unknown path answers 404 in the
// error shape, a method the path does not list answers 405 in the error
// shape with Allow naming the documented methods, and HEAD on a GET route
// answers as the GET without a body.

// apiCheck is built by TestMain before any test runs.
var apiCheck *openAPIChecker

func TestMain(m *testing.M) {
	var err error
	if apiCheck, err = newOpenAPIChecker(docs.OpenAPI()); err != nil {
		fmt.Fprintln(os.Stderr, "docs/openapi.json:", err)
		os.Exit(1)
	}
	code := m.Run()
	checked, skipped, orphans := apiCheck.summary()
	if testing.Verbose() || len(orphans) > 0 {
		fmt.Fprintf(os.Stderr, "openapi: %d responses validated against docs/openapi.json (%d of the nodes' internal transport skipped)\n", checked, skipped)
	}
	if len(orphans) > 0 {
		fmt.Fprintf(os.Stderr, "openapi: %d responses do not match docs/openapi.json:\n", len(orphans))
		for _, o := range orphans {
			fmt.Fprintln(os.Stderr, "  "+o)
		}
		code = 1
	}
	os.Exit(code)
}

// openAPIChecker validates responses against one document.
type openAPIChecker struct {
	mu      sync.Mutex // the validator's caches are not documented as safe for concurrent use
	full    validator.Validator
	noBody  validator.Validator // HEAD answered as GET: status and headers only
	schemas schema_validation.SchemaValidator
	errSch  *base.Schema
	paths   []docPath

	checked int
	skipped int
	orphans []string
}

// docPath is one path of the document with its methods.
type docPath struct {
	template string
	segs     []string
	methods  []string // upper case, as the document lists them
}

func newOpenAPIChecker(spec []byte) (*openAPIChecker, error) {
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, err
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	full := validator.NewValidatorFromV3Model(&model.Model)
	noBody := validator.NewValidatorFromV3Model(&model.Model, config.WithoutResponseBodyValidation())
	c := &openAPIChecker{full: full, noBody: noBody, schemas: schema_validation.NewSchemaValidator()}
	errProxy := model.Model.Components.Schemas.GetOrZero("Error")
	if errProxy == nil {
		return nil, fmt.Errorf("no Error schema")
	}
	c.errSch = errProxy.Schema()
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		c.paths = append(c.paths, docPath{template: path, segs: strings.Split(path, "/"), methods: operationMethods(item)})
	}
	return c, nil
}

// operationMethods lists the methods a path item has operations for.
func operationMethods(item *v3.PathItem) []string {
	var out []string
	for m, op := range item.GetOperations().FromOldest() {
		if op != nil {
			out = append(out, strings.ToUpper(m))
		}
	}
	sort.Strings(out)
	return out
}

// match finds the document path of p: a literal path wins over one with
// parameters, as in the document's and Go's routing.
func (c *openAPIChecker) match(p string) *docPath {
	segs := strings.Split(p, "/")
	var best *docPath
	bestParams := 0
	for i := range c.paths {
		d := &c.paths[i]
		if len(d.segs) != len(segs) {
			continue
		}
		params, ok := 0, true
		for j, s := range d.segs {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				params++
				ok = ok && segs[j] != ""
				continue
			}
			ok = ok && s == segs[j]
		}
		if ok && (best == nil || params < bestParams) {
			best, bestParams = d, params
		}
	}
	return best
}

// check returns what is wrong with resp (whose body is body) as the answer
// to req, or nothing.
func (c *openAPIChecker) check(req *http.Request, resp *http.Response, body []byte) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.HasPrefix(req.URL.Path, raftstore.InternalPrefix) {
		// The nodes' own transport (Raft forwarding, read index), which
		// the node routes before the API and guards with the cluster
		// secret: not part of the public API the document describes.
		c.skipped++
		return nil
	}
	c.checked++
	r := resp
	r.Body = io.NopCloser(bytes.NewReader(body))
	var problems []string
	if resp.Header.Get("X-Request-Id") == "" {
		problems = append(problems, "no X-Request-Id")
	}
	d := c.match(req.URL.EscapedPath())
	switch {
	case d == nil:
		// Not a documented path: the catch-all 404 (or an edge refusal
		// that judges no route) in the error shape.
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusRequestURITooLong &&
			resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge && resp.StatusCode != http.StatusRequestEntityTooLarge {
			problems = append(problems, fmt.Sprintf("status %d for a path the document does not list (want 404 not_found)", resp.StatusCode))
		}
		problems = append(problems, c.errorShape(resp, body)...)
	case slices.Contains(d.methods, req.Method):
		problems = append(problems, c.validate(c.full, req, r)...)
	case req.Method == http.MethodHead && slices.Contains(d.methods, http.MethodGet):
		get := req.Clone(req.Context())
		get.Method = http.MethodGet
		problems = append(problems, c.validate(c.noBody, get, r)...)
		if len(body) > 0 {
			problems = append(problems, "HEAD answered with a body")
		}
	case strings.HasPrefix(d.template, "/admin/") && resp.StatusCode == http.StatusUnauthorized:
		// The admin guard runs before the method check: a caller without
		// the admin token learns nothing about the route.
		problems = append(problems, c.errorShape(resp, body)...)
	default:
		problems = append(problems, c.methodNotAllowed(d, resp, body)...)
	}
	return problems
}

func (c *openAPIChecker) validate(v validator.Validator, req *http.Request, resp *http.Response) []string {
	ok, errs := v.ValidateHttpResponse(req, resp)
	if ok {
		return nil
	}
	return describe(errs)
}

// errorShape checks body against the Error schema.
func (c *openAPIChecker) errorShape(resp *http.Response, body []byte) []string {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return []string{fmt.Sprintf("Content-Type %q, want application/json", ct)}
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(c.errSch, body); !ok {
		return describe(errs)
	}
	return nil
}

// methodNotAllowed checks the answer to a method the path does not
// document: 405 method_not_allowed, with Allow = the documented methods
// (HEAD, which every GET route answers, and the CORS preflight aside).
func (c *openAPIChecker) methodNotAllowed(d *docPath, resp *http.Response, body []byte) []string {
	if resp.StatusCode != http.StatusMethodNotAllowed {
		return []string{fmt.Sprintf("status %d for a method %s does not document (want 405)", resp.StatusCode, d.template)}
	}
	problems := c.errorShape(resp, body)
	var e struct{ Error struct{ Code string } }
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "method_not_allowed" {
		problems = append(problems, "405 with code "+e.Error.Code)
	}
	if got, want := allowSet(resp.Header.Get("Allow")), documentedSet(d.methods); got != want {
		problems = append(problems, fmt.Sprintf("Allow %q, but %s documents %s", resp.Header.Get("Allow"), d.template, want))
	}
	return problems
}

func allowSet(allow string) string {
	var out []string
	for _, m := range strings.Split(allow, ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodHead {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func documentedSet(methods []string) string {
	var out []string
	for _, m := range methods {
		if m != http.MethodHead && m != http.MethodOptions {
			out = append(out, m)
		}
	}
	return strings.Join(out, ",")
}

// describe renders the validator's errors, one line each.
func describe(errs []*liberrors.ValidationError) []string {
	var out []string
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			s += fmt.Sprintf(" [%s: %s]", f.FieldPath, f.Reason)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		out = append(out, "invalid (the validator gave no detail)")
	}
	return out
}

func (c *openAPIChecker) orphan(problems []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orphans = append(c.orphans, problems...)
}

func (c *openAPIChecker) summary() (checked, skipped int, orphans []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked, c.skipped, slices.Clone(c.orphans)
}

// checkingTransport is the suite's transport: it reads every response in
// full and checks it before handing it on.
type checkingTransport struct{ next http.RoundTripper }

// reportKey carries a request's *[]string sink of problems: mustSend
// reports them to its test.
type reportKey struct{}

func (t checkingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || apiCheck == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	check := *resp
	problems := apiCheck.check(req, &check, body)
	if len(problems) == 0 {
		return resp, nil
	}
	where := fmt.Sprintf("%s %s → %d: ", req.Method, req.URL.RequestURI(), resp.StatusCode)
	for i := range problems {
		problems[i] = where + problems[i]
	}
	if sink, ok := req.Context().Value(reportKey{}).(*[]string); ok {
		*sink = append(*sink, problems...)
	} else {
		apiCheck.orphan(problems)
	}
	return resp, nil
}

// checkedContext returns the context of one request whose problems with
// the document report fails t with.
func checkedContext(t testing.TB) (context.Context, func()) {
	var problems []string
	ctx := context.WithValue(context.Background(), reportKey{}, &problems)
	return ctx, func() {
		t.Helper()
		for _, p := range problems {
			t.Errorf("response does not match docs/openapi.json: %s", p)
		}
	}
}

// TestOpenAPICheckCatchesBadResponses proves the check fails responses that
// break the document, and passes the same responses made right.
func TestOpenAPICheckCatchesBadResponses(t *testing.T) {
	c, err := newOpenAPIChecker(docs.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	const goodDoc = `{"collection":"a/b","data":{"x":1},"revision":7,"createTime":"2026-01-02T03:04:05Z","updateTime":"2026-01-02T03:04:05Z"}`
	jsonHdr := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Request-Id": {"r1"}}
	cases := []struct {
		name, method, target string
		status               int
		header               http.Header
		body                 string
		bad                  bool
	}{
		{"document", "GET", "/api/db?collection=a/b", 200, jsonHdr, goodDoc, false},
		{"document without revision", "GET", "/api/db?collection=a/b", 200, jsonHdr,
			`{"collection":"a/b","data":{"x":1},"createTime":"2026-01-02T03:04:05Z","updateTime":"2026-01-02T03:04:05Z"}`, true},
		{"document with an extra member", "GET", "/api/db?collection=a/b", 200, jsonHdr,
			`{"collection":"a/b","data":{},"revision":7,"createTime":"2026-01-02T03:04:05Z","updateTime":"2026-01-02T03:04:05Z","path":"p/a/b"}`, true},
		{"write without X-Revision", "POST", "/api/db", 201, jsonHdr, goodDoc, true},
		{"write with X-Revision", "POST", "/api/db", 201, withHeader(jsonHdr, "X-Revision", "7"), goodDoc, false},
		{"undocumented status", "POST", "/api/db", 202, withHeader(jsonHdr, "X-Revision", "7"), goodDoc, true},
		{"no X-Request-Id", "GET", "/healthz", 200, http.Header{"Content-Type": {"application/json"}}, `{"status":"ok"}`, true},
		{"error", "GET", "/api/db?collection=a", 404, jsonHdr, `{"error":{"code":"not_found","message":"no document at a"}}`, false},
		{"error with an unknown code", "GET", "/api/db?collection=a", 404, jsonHdr, `{"error":{"code":"gone","message":"no document at a"}}`, true},
		{"error without message", "GET", "/api/db?collection=a", 404, jsonHdr, `{"error":{"code":"not_found"}}`, true},
		{"429 without Retry-After", "POST", "/api/auth", 429, jsonHdr, `{"error":{"code":"rate_limited","message":"slow down"}}`, true},
		{"429 with Retry-After", "POST", "/api/auth", 429, withHeader(jsonHdr, "Retry-After", "3"), `{"error":{"code":"rate_limited","message":"slow down"}}`, false},
		{"login answer of no action", "POST", "/api/auth", 200, jsonHdr, `{"requiresTotp":true,"token":"ebt_x"}`, true},
		{"unknown route", "GET", "/api/nope", 404, jsonHdr, `{"error":{"code":"not_found","message":"no such route"}}`, false},
		{"unknown route answering 200", "GET", "/api/nope", 200, jsonHdr, `{}`, true},
		{"405 with Allow", "PATCH", "/api/db", 405, withHeader(jsonHdr, "Allow", "GET, POST, PUT, DELETE"), `{"error":{"code":"method_not_allowed","message":"no"}}`, false},
		{"405 whose Allow disagrees", "PATCH", "/api/db", 405, withHeader(jsonHdr, "Allow", "GET, POST"), `{"error":{"code":"method_not_allowed","message":"no"}}`, true},
		{"HEAD of a GET route", "HEAD", "/api/db/rules", 200, jsonHdr, ``, false},
		{"HEAD with a body", "HEAD", "/api/db/rules", 200, jsonHdr, `{"rules":[]}`, true},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, "http://node"+tc.target, nil)
		resp := &http.Response{StatusCode: tc.status, Header: tc.header, Request: req}
		problems := c.check(req, resp, []byte(tc.body))
		if tc.bad && len(problems) == 0 {
			t.Errorf("%s: the check passed a response that breaks the document", tc.name)
		}
		if !tc.bad && len(problems) > 0 {
			t.Errorf("%s: the check failed a valid response: %v", tc.name, problems)
		}
	}
}

func withHeader(h http.Header, k, v string) http.Header {
	out := h.Clone()
	out.Set(k, v)
	return out
}
