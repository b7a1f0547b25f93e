package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// The scenario tests below go through real HTTP against a real in-process
// node (Badger, Raft over loopback, the real router), one node per top-level
// test, and describe each request as a row of a table: who calls, method,
// URL, headers, raw body, the expected status and error code or JSON, and
// what must be stored afterwards.

// client bounds every request so that a server that hangs fails the test
// instead of stalling the whole package, and checks every response against
// docs/openapi.json (openapicheck_test.go).
var client = &http.Client{Timeout: 60 * time.Second, Transport: checkingTransport{next: http.DefaultTransport}}

// account is a registered user with a live session.
type account struct {
	ID, Email, Token string
}

// env is one running node with a project, its owner and two users.
type env struct {
	c     *nodetest.Cluster
	base  string
	p     nodetest.Project
	user  account
	other account
	// extra are further placeholders a test adds before running tables.
	extra vars
	seq   atomic.Int64
}

// newEnv starts one node, creates a project and registers two users.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	e.user = e.mustRegister(t, e.p, "")
	e.other = e.mustRegister(t, e.p, "")
	return e
}

// uniq returns a name no other scenario of this process uses.
func (e *env) uniq() string {
	return fmt.Sprintf("r%d", e.seq.Add(1))
}

const userPassword = "correct horse battery"

// mustRegister registers a fresh account in project p (a generated email
// when email is "").
func (e *env) mustRegister(t testing.TB, p nodetest.Project, email string) account {
	t.Helper()
	if email == "" {
		email = e.uniq() + "@example.com"
	}
	body := fmt.Sprintf(`{"action":"register","email":%q,"password":%q,"name":"Ada"}`, email, userPassword)
	r := e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("register %s: status %d: %s", email, r.Status, r.Body)
	}
	var out struct {
		Token string
		User  struct{ ID, Email string }
	}
	mustDecode(t, r.Body, &out)
	return account{ID: out.User.ID, Email: out.User.Email, Token: out.Token}
}

// mustLogout ends the session of tok.
func (e *env) mustLogout(t testing.TB, p nodetest.Project, tok string) {
	t.Helper()
	r := e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey, "Authorization": "Bearer " + tok}, `{"action":"logout"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("logout: status %d: %s", r.Status, r.Body)
	}
}

// reply is a response read in full.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// send is one request. A non-empty body is sent as application/json unless
// headers say otherwise; a header with an empty value is removed.
func (e *env) send(ctx context.Context, method, target string, headers map[string]string, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+target, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func (e *env) mustSend(t testing.TB, method, target string, headers map[string]string, body string) reply {
	t.Helper()
	ctx, reportAPI := checkedContext(t)
	r, err := e.send(ctx, method, target, headers, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	reportAPI()
	return r
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func mustDecode(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %.300q: %v", b, err)
	}
}

// mustJSON marshals v; for building bodies.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// doc is a document as the API returns it.
type doc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

// docPath returns the query string that addresses path.
func docQuery(path string) string { return "/api/db?collection=" + url.QueryEscape(path) }

// mustPut creates or replaces path with data (a JSON object) as tok.
func (e *env) mustPut(t testing.TB, tok, path, data string) doc {
	t.Helper()
	r := e.mustSend(t, http.MethodPost, "/api/db", bearer(tok), fmt.Sprintf(`{"collection":%s,"data":%s}`, mustJSON(t, path), data))
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("write %s: status %d: %.300s", path, r.Status, r.Body)
	}
	return checkDoc(t, r, path, true)
}

// get reads path as the owner; ok is false on 404.
func (e *env) get(t testing.TB, path string) (doc, bool) {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, docQuery(path), bearer(e.p.OwnerToken), "")
	switch r.Status {
	case http.StatusOK:
		return checkDoc(t, r, path, false), true
	case http.StatusNotFound:
		checkError(t, r, http.StatusNotFound, "not_found", "")
		return doc{}, false
	}
	t.Fatalf("read back %s: status %d: %.300s", path, r.Status, r.Body)
	return doc{}, false
}

// checkDoc asserts the document shape {collection, data, revision,
// createTime, updateTime} and, for a write, that X-Revision is the revision.
func checkDoc(t testing.TB, r reply, path string, write bool) doc {
	t.Helper()
	checkJSONResponse(t, r)
	var keys map[string]json.RawMessage
	mustDecode(t, r.Body, &keys)
	for _, k := range []string{"collection", "data", "revision", "createTime", "updateTime"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("document has no %q: %.300s", k, r.Body)
		}
	}
	if len(keys) != 5 {
		t.Errorf("document has %d members, want 5: %.300s", len(keys), r.Body)
	}
	var d doc
	mustDecode(t, r.Body, &d)
	if d.Collection != path {
		t.Errorf("collection = %q, want %q", d.Collection, path)
	}
	if len(d.Data) == 0 || d.Data[0] != '{' {
		t.Errorf("data is not an object: %.100s", d.Data)
	}
	if d.Revision == 0 {
		t.Errorf("revision is 0")
	}
	ct, err1 := time.Parse(time.RFC3339Nano, d.CreateTime)
	ut, err2 := time.Parse(time.RFC3339Nano, d.UpdateTime)
	if err1 != nil || err2 != nil {
		t.Errorf("createTime %q / updateTime %q are not RFC 3339", d.CreateTime, d.UpdateTime)
	} else if ut.Before(ct) {
		t.Errorf("updateTime %v before createTime %v", ut, ct)
	}
	if write {
		checkRevisionHeader(t, r, d.Revision)
	}
	return d
}

func checkRevisionHeader(t testing.TB, r reply, rev uint64) {
	t.Helper()
	if got := r.Header.Get("X-Revision"); got != strconv.FormatUint(rev, 10) {
		t.Errorf("X-Revision = %q, want %d", got, rev)
	}
}

// checkJSONResponse asserts what every response carries: a request id and a
// JSON content type.
func checkJSONResponse(t testing.TB, r reply) {
	t.Helper()
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("status %d: no X-Request-Id", r.Status)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		t.Errorf("status %d: Content-Type = %q, want application/json", r.Status, r.Header.Get("Content-Type"))
	}
	if !json.Valid(r.Body) {
		t.Errorf("status %d: body is not JSON: %.300q", r.Status, r.Body)
	}
}

// checkError asserts the one error shape
// {"error":{"code","message"[,"field"]}} with the given status, code (when
// non-empty) and field (when non-empty; "-" means no field).
func checkError(t testing.TB, r reply, status int, code, field string) {
	t.Helper()
	checkJSONResponse(t, r)
	if r.Status != status {
		t.Errorf("status = %d, want %d: %.300s", r.Status, status, r.Body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatalf("error body is not a JSON object: %.300q", r.Body)
	}
	if len(top) != 1 || top["error"] == nil {
		t.Errorf("error body must be exactly {\"error\":{...}}: %.300s", r.Body)
	}
	var detail map[string]any
	if err := json.Unmarshal(top["error"], &detail); err != nil {
		t.Fatalf("error member is not an object: %.300s", r.Body)
	}
	for k, v := range detail {
		s, ok := v.(string)
		switch {
		case k != "code" && k != "message" && k != "field":
			t.Errorf("error has unexpected member %q: %s", k, r.Body)
		case !ok || s == "":
			t.Errorf("error.%s must be a non-empty string: %s", k, r.Body)
		}
	}
	if detail["code"] == nil || detail["message"] == nil {
		t.Errorf("error needs code and message: %s", r.Body)
	}
	if code != "" && detail["code"] != code {
		t.Errorf("error.code = %v, want %q: %s", detail["code"], code, r.Body)
	}
	switch field {
	case "":
	case "-":
		if detail["field"] != nil {
			t.Errorf("error.field = %v, want none: %s", detail["field"], r.Body)
		}
	default:
		if detail["field"] != field {
			t.Errorf("error.field = %v, want %q: %s", detail["field"], field, r.Body)
		}
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("status %d without Retry-After", status)
		}
	}
	if status >= 500 {
		low := strings.ToLower(string(r.Body))
		for _, leak := range []string{"badger", "raft", ".go:", "goroutine", "panic", "runtime error"} {
			if strings.Contains(low, leak) {
				t.Errorf("5xx leaks internals (%q): %s", leak, r.Body)
			}
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// jsonSubset reports whether every member of want appears, recursively, in
// got; arrays must have the same length and match element by element;
// scalars must be equal.
func jsonSubset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonSubset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonSubset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

// vars are the placeholders of a scenario: {path}, {rand}, {owner}, ...
type vars map[string]string

func (v vars) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	pairs := make([]string, 0, 2*len(v))
	for k, val := range v {
		pairs = append(pairs, "{"+k+"}", val)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// scenario is one row of a table: a request and what must come of it.
type scenario struct {
	name string
	// as is who calls: "owner" (default), "user", "other" or "none" (no
	// Authorization header).
	as      string
	method  string // default GET
	url     string
	headers map[string]string // "" value removes a header
	body    string            // raw, sent as is (placeholders expanded)
	// path is the template of {path}, the document the scenario works on
	// (default "docs/{rand}"); seed is JSON data written there first, by the
	// owner, so every scenario has its own fresh document.
	path  string
	seed  string
	setup func(t *testing.T, e *env, v vars)

	status int
	code   string // error code, for status >= 400
	field  string // error field ("-": none)
	json   string // JSON whose members must all be in the response
	// doc requires the response to be the document at {path} (with
	// X-Revision equal to its revision when the method writes).
	doc  bool
	data string // exact data of the returned document
	// stored is the data that must be at {path} afterwards ("absent": none);
	// unchanged requires the seeded document untouched (or still absent).
	stored    string
	unchanged bool
	check     func(t *testing.T, e *env, v vars, r reply)
}

// run runs every scenario as a parallel subtest.
func (e *env) run(t *testing.T, scs []scenario) {
	t.Helper()
	seen := map[string]bool{}
	for _, sc := range scs {
		if seen[sc.name] {
			t.Fatalf("duplicate scenario name %q", sc.name)
		}
		seen[sc.name] = true
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			e.runOne(t, sc)
		})
	}
}

func (e *env) vars() vars {
	v := vars{
		"rand": e.uniq(), "pid": e.p.ID, "key": e.p.APIKey,
		"owner": e.p.OwnerToken, "ownerUid": e.p.OwnerID,
		"user": e.user.Token, "uid": e.user.ID,
		"other": e.other.Token, "otherUid": e.other.ID,
	}
	for k, val := range e.extra {
		v[k] = val
	}
	return v
}

func (e *env) runOne(t *testing.T, sc scenario) {
	v := e.vars()
	pathT := sc.path
	if pathT == "" {
		pathT = "docs/{rand}"
	}
	v["path"] = v.expand(pathT)
	var seeded doc
	if sc.seed != "" {
		seeded = e.mustPut(t, e.p.OwnerToken, v["path"], sc.seed)
		v["rev"] = strconv.FormatUint(seeded.Revision, 10)
		v["stale"] = strconv.FormatUint(seeded.Revision-1, 10)
	}
	if sc.setup != nil {
		sc.setup(t, e, v)
	}
	headers := map[string]string{}
	switch sc.as {
	case "", "owner":
		headers["Authorization"] = "Bearer " + e.p.OwnerToken
	case "user":
		headers["Authorization"] = "Bearer " + e.user.Token
	case "other":
		headers["Authorization"] = "Bearer " + e.other.Token
	case "none":
	default:
		t.Fatalf("unknown caller %q", sc.as)
	}
	for k, val := range sc.headers {
		headers[k] = v.expand(val)
	}
	method := sc.method
	if method == "" {
		method = http.MethodGet
	}
	target := sc.url
	if target == "" {
		target = "/api/db"
	}
	r := e.mustSend(t, method, v.expand(target), headers, v.expand(sc.body))
	if r.Status != sc.status {
		t.Fatalf("%s %s: status %d, want %d: %.500s", method, v.expand(target), r.Status, sc.status, r.Body)
	}
	if sc.status >= 400 {
		checkError(t, r, sc.status, sc.code, sc.field)
	} else {
		checkJSONResponse(t, r)
	}
	if sc.doc {
		checkDoc(t, r, v["path"], method != http.MethodGet)
	}
	if sc.json != "" {
		var want, got any
		if err := json.Unmarshal([]byte(v.expand(sc.json)), &want); err != nil {
			t.Fatalf("bad expected JSON %q: %v", sc.json, err)
		}
		mustDecode(t, r.Body, &got)
		if !jsonSubset(want, got) {
			t.Errorf("response %.500s does not contain %s", r.Body, v.expand(sc.json))
		}
	}
	if sc.data != "" {
		var d doc
		mustDecode(t, r.Body, &d)
		if !jsonEqual(d.Data, []byte(v.expand(sc.data))) {
			t.Errorf("data = %.300s, want %s", d.Data, v.expand(sc.data))
		}
	}
	if sc.unchanged {
		got, ok := e.get(t, v["path"])
		switch {
		case sc.seed == "" && ok:
			t.Errorf("rejected write created %s: %.300s", v["path"], got.Data)
		case sc.seed != "" && !ok:
			t.Errorf("rejected write deleted %s", v["path"])
		case sc.seed != "" && (got.Revision != seeded.Revision || !bytes.Equal(got.Data, seeded.Data)):
			t.Errorf("rejected write changed %s: rev %d data %.300s, was rev %d data %.300s", v["path"], got.Revision, got.Data, seeded.Revision, seeded.Data)
		}
	}
	if sc.stored != "" {
		got, ok := e.get(t, v["path"])
		switch {
		case sc.stored == "absent" && ok:
			t.Errorf("%s still exists: %.300s", v["path"], got.Data)
		case sc.stored != "absent" && !ok:
			t.Errorf("%s does not exist, want %s", v["path"], v.expand(sc.stored))
		case sc.stored != "absent" && !jsonEqual(got.Data, []byte(v.expand(sc.stored))):
			t.Errorf("stored data of %s = %.300s, want %s", v["path"], got.Data, v.expand(sc.stored))
		}
	}
	if sc.check != nil {
		sc.check(t, e, v, r)
	}
}
