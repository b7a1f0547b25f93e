package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// TestDB covers /api/db through HTTP against one real node. Each group is a
// table of independent scenarios run in parallel; every scenario works on a
// document of its own.
func TestDB(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	e.extra = vars{"pid2": p2.ID, "key2": p2.APIKey, "owner2": p2.OwnerToken}

	t.Run("create-replace", func(t *testing.T) { t.Parallel(); e.run(t, createReplaceScenarios()) })
	t.Run("get", func(t *testing.T) { t.Parallel(); e.run(t, getScenarios()) })
	t.Run("list", func(t *testing.T) { t.Parallel(); e.run(t, listScenarios()) })
	t.Run("list-paging", func(t *testing.T) { t.Parallel(); testListPaging(t, e) })
	t.Run("update-field", func(t *testing.T) { t.Parallel(); e.run(t, updateFieldScenarios()) })
	t.Run("delete", func(t *testing.T) { t.Parallel(); e.run(t, deleteScenarios()) })
	t.Run("if-match", func(t *testing.T) { t.Parallel(); e.run(t, ifMatchScenarios()) })
	t.Run("if-match-race", func(t *testing.T) { t.Parallel(); testIfMatchRace(t, e) })
	t.Run("concurrent-field-writes", func(t *testing.T) { t.Parallel(); testConcurrentFieldWrites(t, e) })
	t.Run("bad-path", func(t *testing.T) { t.Parallel(); e.run(t, badPathScenarios()) })
	t.Run("good-path", func(t *testing.T) { t.Parallel(); e.run(t, goodPathScenarios()) })
	t.Run("bad-body", func(t *testing.T) { t.Parallel(); e.run(t, badBodyScenarios()) })
	t.Run("number-out-of-range", func(t *testing.T) { t.Parallel(); testNumberOutOfRange(t, e) })
	t.Run("sizes", func(t *testing.T) { t.Parallel(); e.run(t, sizeScenarios()) })
	t.Run("token", func(t *testing.T) { t.Parallel(); e.run(t, tokenScenarios()) })
	t.Run("default-rules", func(t *testing.T) { t.Parallel(); e.run(t, defaultRulesScenarios()) })
	t.Run("custom-rules", func(t *testing.T) { t.Parallel(); testCustomRules(t, e) })
	t.Run("consistency", func(t *testing.T) { t.Parallel(); e.run(t, consistencyScenarios()) })
	t.Run("min-revision-far-future", func(t *testing.T) { t.Parallel(); testMinRevisionFuture(t, e) })
}

// post builds a POST /api/db body for {path}.
func post(data string) string { return `{"collection":"{path}","data":` + data + `}` }

func createReplaceScenarios() []scenario {
	return []scenario{
		{name: "create is 201 with the document", method: "POST", body: post(`{"a":1,"s":"x","n":{"k":[1,2]}}`),
			status: 201, doc: true, data: `{"a":1,"s":"x","n":{"k":[1,2]}}`, stored: `{"a":1,"s":"x","n":{"k":[1,2]}}`},
		{name: "create of an empty object", method: "POST", body: post(`{}`), status: 201, doc: true, data: `{}`, stored: `{}`},
		{name: "create at a deep path", method: "POST", path: "docs/{rand}/sub/deeper/x", body: post(`{"a":1}`),
			status: 201, doc: true, stored: `{"a":1}`},
		{name: "replace is 200 and drops old fields", method: "POST", seed: `{"a":1,"b":2}`, body: post(`{"c":3}`),
			status: 200, doc: true, data: `{"c":3}`, stored: `{"c":3}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var d doc
				mustDecode(t, r.Body, &d)
				if strconv.FormatUint(d.Revision, 10) == v["rev"] {
					t.Errorf("replace kept revision %d", d.Revision)
				}
			}},
		{name: "replace keeps createTime and moves updateTime", method: "POST", seed: `{"a":1}`, body: post(`{"a":2}`),
			status: 200, doc: true,
			setup: func(t *testing.T, e *env, v vars) {
				d, _ := e.get(t, v["path"])
				v["createTime"], v["updateTime"] = d.CreateTime, d.UpdateTime
			},
			check: func(t *testing.T, e *env, v vars, r reply) {
				var d doc
				mustDecode(t, r.Body, &d)
				if d.CreateTime != v["createTime"] {
					t.Errorf("createTime %s, was %s", d.CreateTime, v["createTime"])
				}
				if d.UpdateTime == v["updateTime"] {
					t.Errorf("updateTime did not move from %s", d.UpdateTime)
				}
			}},
		{name: "unknown request fields are ignored", method: "POST", body: `{"collection":"{path}","data":{"a":1},"extra":{"x":[1]},"merge":true}`,
			status: 201, doc: true, stored: `{"a":1}`},
		{name: "numbers keep their precision", method: "POST", body: post(`{"big":12345678901234567890,"f":0.1}`),
			status: 201, doc: true, check: func(t *testing.T, e *env, v vars, r reply) {
				d, _ := e.get(t, v["path"])
				if !strings.Contains(string(d.Data), "12345678901234567890") {
					t.Errorf("big integer lost precision: %s", d.Data)
				}
			}},
		{name: "HTML-significant characters round-trip", method: "POST", body: post(`{"s":"<a href='x'>&amp;</a>\u2028"}`),
			status: 201, doc: true, stored: `{"s":"<a href='x'>&amp;</a>\u2028"}`},
		{name: "X-Request-Id from the client is echoed", method: "POST", body: post(`{}`), headers: map[string]string{"X-Request-Id": "client-id_1.2"},
			status: 201, check: func(t *testing.T, e *env, v vars, r reply) {
				if got := r.Header.Get("X-Request-Id"); got != "client-id_1.2" {
					t.Errorf("X-Request-Id = %q, want the client's", got)
				}
			}},
		{name: "a malformed X-Request-Id is replaced", method: "POST", body: post(`{}`), headers: map[string]string{"X-Request-Id": "bad id!<script>"},
			status: 201, check: func(t *testing.T, e *env, v vars, r reply) {
				if got := r.Header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, " !<") {
					t.Errorf("X-Request-Id = %q, want a fresh safe id", got)
				}
			}},
	}
}

func getScenarios() []scenario {
	return []scenario{
		{name: "found", seed: `{"a":1}`, url: "/api/db?collection={path}", status: 200, doc: true, data: `{"a":1}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var d doc
				mustDecode(t, r.Body, &d)
				if strconv.FormatUint(d.Revision, 10) != v["rev"] {
					t.Errorf("revision %d, want %s", d.Revision, v["rev"])
				}
			}},
		{name: "missing is 404 not_found", url: "/api/db?collection={path}", status: 404, code: "not_found"},
		{name: "parent of a document is not a document", seed: `{"a":1}`, path: "docs/{rand}/child",
			url: "/api/db?collection=docs/{rand}", status: 404, code: "not_found"},
		{name: "list=bogus is 400", seed: `{"a":1}`, url: "/api/db?collection={path}&list=bogus", status: 400, code: "invalid_argument", field: "list"},
		{name: "list=false reads the document", seed: `{"a":1}`, url: "/api/db?collection={path}&list=false", status: 200, doc: true},
		{name: "no collection parameter", url: "/api/db", status: 400, code: "invalid_path", field: "collection"},
		{name: "error responses carry a request id too", url: "/api/db?collection={path}", headers: map[string]string{"X-Request-Id": "err-1"},
			status: 404, code: "not_found", check: func(t *testing.T, e *env, v vars, r reply) {
				if got := r.Header.Get("X-Request-Id"); got != "err-1" {
					t.Errorf("X-Request-Id = %q", got)
				}
			}},
		{name: "PATCH is 405", method: "PATCH", seed: `{"a":1}`, url: "/api/db?collection={path}", body: `{"a":2}`,
			status: 405, code: "method_not_allowed", unchanged: true},
		{name: "OPTIONS is 405", method: "OPTIONS", url: "/api/db?collection={path}", status: 405, code: "method_not_allowed"},
	}
}

func listScenarios() []scenario {
	q := "/api/db?collection={path}&list=true"
	var out []scenario
	for _, l := range []string{"0", "1001", "x", "-1", "1.5", ""} {
		if l == "" {
			continue
		}
		out = append(out, scenario{name: "limit=" + l + " is 400", url: q + "&limit=" + l, status: 400, code: "invalid_argument", field: "limit"})
	}
	for name, tok := range map[string]string{
		"not base64":       "!!!",
		"encodes a slash":  base64.RawURLEncoding.EncodeToString([]byte("a/b")),
		"padded base64":    base64.URLEncoding.EncodeToString([]byte("ab")),
		"standard base64+": "a+b/",
	} {
		out = append(out, scenario{name: "pageToken " + name + " is 400", url: q + "&pageToken=" + url.QueryEscape(tok), status: 400, code: "invalid_argument", field: "pageToken"})
	}
	out = append(out,
		scenario{name: "empty parent lists nothing", url: q, status: 200, check: func(t *testing.T, e *env, v vars, r reply) {
			if string(r.Body) != "{\"documents\":[]}\n" {
				t.Errorf("body = %q, want an empty documents array and no nextPageToken", r.Body)
			}
		}},
		scenario{name: "limit=1000 is allowed", url: q + "&limit=1000", status: 200, json: `{"documents":[]}`},
		scenario{name: "limit=1 is allowed", url: q + "&limit=1", status: 200, json: `{"documents":[]}`},
		scenario{name: "bad path is 400", url: "/api/db?collection=a//b&list=true", status: 400, code: "invalid_path", field: "collection"},
		scenario{name: "list without a token is 401", as: "none", url: q, status: 401, code: "missing_token"},
	)
	return out
}

type listPage struct {
	Documents     []doc  `json:"documents"`
	NextPageToken string `json:"nextPageToken"`
}

// testListPaging pages through 7 children with limit 3: 3+3+1, ordered by
// key, with neither grandchildren nor siblings of the parent listed.
func testListPaging(t *testing.T, e *env) {
	parent := "lists/" + e.uniq()
	own := e.p.OwnerToken
	// Written out of order; the listing must come back sorted.
	for _, c := range []string{"c4", "c0", "c6", "c2", "c1", "c5", "c3"} {
		e.mustPut(t, own, parent+"/"+c, fmt.Sprintf(`{"name":%q}`, c))
	}
	e.mustPut(t, own, parent, `{"parent":true}`)
	e.mustPut(t, own, parent+"/c1/sub", `{"grandchild":true}`)
	e.mustPut(t, own, parent+"/c3/x/y", `{"deep":true}`)
	e.mustPut(t, own, parent+"/c9/only-grandchild", `{"deep":true}`)
	e.mustPut(t, own, parent+"x/c0", `{"sibling":true}`)
	e.mustPut(t, own, parent+"x", `{"sibling":true}`)

	var got []string
	token := ""
	var sizes []int
	for page := 0; page < 5; page++ {
		q := docQuery(parent) + "&list=true&limit=3"
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		r := e.mustSend(t, http.MethodGet, q, bearer(own), "")
		if r.Status != http.StatusOK {
			t.Fatalf("list page %d: %d %s", page, r.Status, r.Body)
		}
		checkJSONResponse(t, r)
		var lp listPage
		mustDecode(t, r.Body, &lp)
		sizes = append(sizes, len(lp.Documents))
		for _, d := range lp.Documents {
			got = append(got, d.Collection)
			if d.Revision == 0 || d.CreateTime == "" || d.UpdateTime == "" {
				t.Errorf("listed document lacks metadata: %+v", d)
			}
			name := d.Collection[strings.LastIndexByte(d.Collection, '/')+1:]
			if !jsonEqual(d.Data, []byte(fmt.Sprintf(`{"name":%q}`, name))) {
				t.Errorf("listed %s with data %s", d.Collection, d.Data)
			}
		}
		token = lp.NextPageToken
		if token == "" {
			break
		}
	}
	var want []string
	for i := 0; i < 7; i++ {
		want = append(want, fmt.Sprintf("%s/c%d", parent, i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Errorf("page sizes %v, want [3 3 1]", sizes)
	}

	// Exactly a page's worth: no token after the last page.
	r := e.mustSend(t, http.MethodGet, docQuery(parent)+"&list=true&limit=7", bearer(own), "")
	var lp listPage
	mustDecode(t, r.Body, &lp)
	if r.Status != http.StatusOK || len(lp.Documents) != 7 || lp.NextPageToken != "" {
		t.Errorf("limit=7: status %d, %d documents, token %q; want 7 and no token", r.Status, len(lp.Documents), lp.NextPageToken)
	}
	// Default limit lists all 7.
	r = e.mustSend(t, http.MethodGet, docQuery(parent)+"&list=true", bearer(own), "")
	lp = listPage{}
	mustDecode(t, r.Body, &lp)
	if len(lp.Documents) != 7 {
		t.Errorf("default limit: %d documents, want 7", len(lp.Documents))
	}
}

// updateFieldBody is a PUT body.
func updateFieldBody(oldKey, newKey, value, typ string) string {
	b := fmt.Sprintf(`{"oldKey":%q,"newKey":%q,"value":%s`, oldKey, newKey, value)
	if typ != "" {
		b += fmt.Sprintf(`,"type":%q`, typ)
	}
	return b + "}"
}

func updateFieldScenarios() []scenario {
	const seed = `{"a":1,"b":"x"}`
	u := "/api/db?collection={path}"
	out := []scenario{
		{name: "set an existing field", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", "5", ""),
			status: 200, doc: true, data: `{"a":5,"b":"x"}`, stored: `{"a":5,"b":"x"}`},
		{name: "set creates a missing field", method: "PUT", url: u, seed: seed, body: updateFieldBody("c", "c", "true", "boolean"),
			status: 200, doc: true, data: `{"a":1,"b":"x","c":true}`, stored: `{"a":1,"b":"x","c":true}`},
		{name: "set a field whose name has dots and spaces", method: "PUT", url: u, seed: seed, body: updateFieldBody("x.y z", "x.y z", "1", ""),
			status: 200, doc: true, stored: `{"a":1,"b":"x","x.y z":1}`},
		{name: "set a field to null without a type", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", "null", ""),
			status: 200, doc: true, data: `{"a":null,"b":"x"}`, stored: `{"a":null,"b":"x"}`},
		{name: "rename with a new value", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "z", "7", "integer"),
			status: 200, doc: true, data: `{"b":"x","z":7}`, stored: `{"b":"x","z":7}`},
		{name: "rename a missing oldKey is 404", method: "PUT", url: u, seed: seed, body: updateFieldBody("q", "z", "7", ""),
			status: 404, code: "field_not_found", unchanged: true},
		{name: "rename onto an existing key is 409", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "b", "7", ""),
			status: 409, code: "field_exists", field: "newKey", unchanged: true},
		{name: "missing document is 404", method: "PUT", url: u, body: updateFieldBody("a", "a", "1", ""),
			status: 404, code: "not_found", stored: "absent"},
		{name: "missing document is 404 on rename too", method: "PUT", url: u, body: updateFieldBody("a", "b", "1", ""),
			status: 404, code: "not_found", stored: "absent"},
		{name: "unknown type is 400", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", `"2024-01-01"`, "date"),
			status: 400, code: "invalid_argument", field: "type", unchanged: true},
		{name: "type of the wrong JSON type", method: "PUT", url: u, seed: seed, body: `{"oldKey":"a","newKey":"a","value":1,"type":1}`,
			status: 400, code: "invalid_argument", field: "type", unchanged: true},
		{name: "missing oldKey", method: "PUT", url: u, seed: seed, body: `{"newKey":"a","value":1}`,
			status: 400, code: "invalid_argument", field: "oldKey", unchanged: true},
		{name: "empty oldKey", method: "PUT", url: u, seed: seed, body: `{"oldKey":"","newKey":"a","value":1}`,
			status: 400, code: "invalid_argument", field: "oldKey", unchanged: true},
		{name: "oldKey of the wrong JSON type", method: "PUT", url: u, seed: seed, body: `{"oldKey":["a"],"newKey":"a","value":1}`,
			status: 400, code: "invalid_argument", field: "oldKey", unchanged: true},
		{name: "missing newKey", method: "PUT", url: u, seed: seed, body: `{"oldKey":"a","value":1}`,
			status: 400, code: "invalid_argument", field: "newKey", unchanged: true},
		{name: "newKey of the wrong JSON type", method: "PUT", url: u, seed: seed, body: `{"oldKey":"a","newKey":false,"value":1}`,
			status: 400, code: "invalid_argument", field: "newKey", unchanged: true},
		{name: "missing value", method: "PUT", url: u, seed: seed, body: `{"oldKey":"a","newKey":"a","type":"string"}`,
			status: 400, code: "invalid_argument", field: "value", unchanged: true},
		{name: "bad JSON", method: "PUT", url: u, seed: seed, body: `{"oldKey":"a",`,
			status: 400, code: "invalid_json", unchanged: true},
		{name: "body is an array", method: "PUT", url: u, seed: seed, body: `["a","a",1]`,
			status: 400, code: "invalid_argument", unchanged: true},
		{name: "no Content-Type is 415", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", "2", ""),
			headers: map[string]string{"Content-Type": ""}, status: 415, code: "unsupported_media_type", unchanged: true},
		{name: "text/plain is 415", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", "2", ""),
			headers: map[string]string{"Content-Type": "text/plain"}, status: 415, code: "unsupported_media_type", unchanged: true},
		{name: "no token is 401", as: "none", method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", "2", ""),
			status: 401, code: "missing_token", unchanged: true},
		{name: "no collection is 400", method: "PUT", url: "/api/db", body: updateFieldBody("a", "a", "2", ""),
			status: 400, code: "invalid_path", field: "collection"},
	}
	types := []struct {
		typ, value string
		ok         bool
	}{
		{"string", `"s"`, true}, {"string", `""`, true}, {"string", `5`, false}, {"string", `null`, false}, {"string", `["s"]`, false},
		{"number", `1.5`, true}, {"number", `-2e3`, true}, {"number", `0`, true}, {"number", `"1"`, false}, {"number", `true`, false},
		{"integer", `3`, true}, {"integer", `-4`, true}, {"integer", `1.5`, false}, {"integer", `"3"`, false}, {"integer", `null`, false},
		{"boolean", `false`, true}, {"boolean", `true`, true}, {"boolean", `"true"`, false}, {"boolean", `0`, false},
		{"object", `{"k":[1]}`, true}, {"object", `{}`, true}, {"object", `[]`, false}, {"object", `"{}"`, false},
		{"array", `[1,"x",null]`, true}, {"array", `[]`, true}, {"array", `{}`, false}, {"array", `"[]"`, false},
		{"null", `null`, true}, {"null", `0`, false}, {"null", `"null"`, false}, {"null", `false`, false},
		{"timestamp", `"2024-05-01T12:00:00Z"`, true}, {"timestamp", `"2024-05-01T12:00:00.123456789+02:00"`, true},
		{"timestamp", `"2024-05-01"`, false}, {"timestamp", `"yesterday"`, false}, {"timestamp", `1714564800`, false}, {"timestamp", `null`, false},
	}
	for _, tc := range types {
		sc := scenario{method: "PUT", url: u, seed: seed, body: updateFieldBody("a", "a", tc.value, tc.typ)}
		if tc.ok {
			sc.name = fmt.Sprintf("type %s accepts %s", tc.typ, tc.value)
			sc.status, sc.doc = 200, true
			sc.data = `{"a":` + tc.value + `,"b":"x"}`
			sc.stored = sc.data
		} else {
			sc.name = fmt.Sprintf("type %s refuses %s", tc.typ, tc.value)
			sc.status, sc.code, sc.field, sc.unchanged = 400, "invalid_argument", "value", true
		}
		out = append(out, sc)
	}
	return out
}

func deleteScenarios() []scenario {
	u := "/api/db?collection={path}"
	return []scenario{
		{name: "delete a document", method: "DELETE", url: u, seed: `{"a":1}`, status: 200, stored: "absent",
			check: func(t *testing.T, e *env, v vars, r reply) {
				var got map[string]json.RawMessage
				mustDecode(t, r.Body, &got)
				if len(got) != 2 || string(got["deleted"]) != "true" {
					t.Errorf("body %s, want {\"deleted\":true,\"revision\":N}", r.Body)
				}
				var rev uint64
				mustDecode(t, got["revision"], &rev)
				checkRevisionHeader(t, r, rev)
				if seeded, _ := strconv.ParseUint(v["rev"], 10, 64); rev <= seeded {
					t.Errorf("delete revision %d not after the write's %d", rev, seeded)
				}
				// The same path can be created again.
				if d := e.mustPut(t, e.p.OwnerToken, v["path"], `{"again":true}`); d.Revision <= rev {
					t.Errorf("recreated at revision %d <= delete revision %d", d.Revision, rev)
				}
			}},
		{name: "deleting a document keeps the documents below it", method: "DELETE", url: u, seed: `{"a":1}`, status: 200, stored: "absent",
			setup: func(t *testing.T, e *env, v vars) { e.mustPut(t, e.p.OwnerToken, v["path"]+"/child", `{"c":1}`) },
			check: func(t *testing.T, e *env, v vars, r reply) {
				if d, ok := e.get(t, v["path"]+"/child"); !ok || !jsonEqual(d.Data, []byte(`{"c":1}`)) {
					t.Errorf("child of a deleted document: found %v, data %s", ok, d.Data)
				}
			}},
		{name: "delete a missing document is 404", method: "DELETE", url: u, status: 404, code: "not_found", stored: "absent"},
		{name: "delete twice is 404 the second time", method: "DELETE", url: u, seed: `{"a":1}`, status: 404, code: "not_found",
			setup: func(t *testing.T, e *env, v vars) {
				if r := e.mustSend(t, "DELETE", docQuery(v["path"]), bearer(e.p.OwnerToken), ""); r.Status != 200 {
					t.Fatalf("first delete: %d %s", r.Status, r.Body)
				}
			}},
		{name: "delete a field", method: "DELETE", url: u + "&field=a", seed: `{"a":1,"b":"x"}`,
			status: 200, doc: true, data: `{"b":"x"}`, stored: `{"b":"x"}`},
		{name: "delete the last field leaves an empty document", method: "DELETE", url: u + "&field=a", seed: `{"a":1}`,
			status: 200, doc: true, data: `{}`, stored: `{}`},
		{name: "delete a field with an escaped name", method: "DELETE", url: u + "&field=" + url.QueryEscape("x y&z"), seed: `{"x y&z":1,"b":2}`,
			status: 200, doc: true, stored: `{"b":2}`},
		{name: "delete an unknown field is 404", method: "DELETE", url: u + "&field=q", seed: `{"a":1}`,
			status: 404, code: "field_not_found", field: "field", unchanged: true},
		{name: "delete a field of a missing document is 404", method: "DELETE", url: u + "&field=a",
			status: 404, code: "not_found", stored: "absent"},
		{name: "empty field= is 400", method: "DELETE", url: u + "&field=", seed: `{"a":1}`,
			status: 400, code: "invalid_argument", field: "field", unchanged: true},
		{name: "no token is 401", as: "none", method: "DELETE", url: u, seed: `{"a":1}`,
			status: 401, code: "missing_token", unchanged: true},
		{name: "no collection is 400", method: "DELETE", url: "/api/db", status: 400, code: "invalid_path", field: "collection"},
	}
}

func ifMatchScenarios() []scenario {
	u := "/api/db?collection={path}"
	im := func(v string) map[string]string { return map[string]string{"If-Match": v} }
	seed := `{"a":1}`
	return []scenario{
		{name: "POST with the current revision", method: "POST", seed: seed, headers: im("{rev}"), body: post(`{"a":2}`),
			status: 200, doc: true, stored: `{"a":2}`},
		{name: "POST with a quoted revision", method: "POST", seed: seed, headers: im(`"{rev}"`), body: post(`{"a":2}`),
			status: 200, doc: true, stored: `{"a":2}`},
		{name: "POST with a stale revision is 412", method: "POST", seed: seed, headers: im("{stale}"), body: post(`{"a":2}`),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "POST with a future revision is 412", method: "POST", seed: seed, headers: im("99999999"), body: post(`{"a":2}`),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "POST If-Match 0 creates", method: "POST", headers: im("0"), body: post(`{"a":2}`),
			status: 201, doc: true, stored: `{"a":2}`},
		{name: "POST If-Match 0 on an existing document is 412", method: "POST", seed: seed, headers: im("0"), body: post(`{"a":2}`),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "POST If-Match N on a missing document is 412", method: "POST", headers: im("5"), body: post(`{"a":2}`),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "POST garbage If-Match is 400", method: "POST", seed: seed, headers: im("abc"), body: post(`{"a":2}`),
			status: 400, code: "invalid_argument", field: "If-Match", unchanged: true},
		{name: "POST negative If-Match is 400", method: "POST", seed: seed, headers: im("-1"), body: post(`{"a":2}`),
			status: 400, code: "invalid_argument", field: "If-Match", unchanged: true},
		{name: "PUT with the current revision", method: "PUT", url: u, seed: seed, headers: im("{rev}"), body: updateFieldBody("a", "a", "2", ""),
			status: 200, doc: true, stored: `{"a":2}`},
		{name: "PUT with a stale revision is 412", method: "PUT", url: u, seed: seed, headers: im("{stale}"), body: updateFieldBody("a", "a", "2", ""),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "PUT rename with a stale revision is 412", method: "PUT", url: u, seed: seed, headers: im("{stale}"), body: updateFieldBody("a", "b", "2", ""),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "PUT If-Match 0 on an existing document is 412", method: "PUT", url: u, seed: seed, headers: im("0"), body: updateFieldBody("a", "a", "2", ""),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "PUT garbage If-Match is 400", method: "PUT", url: u, seed: seed, headers: im("W/\"x\""), body: updateFieldBody("a", "a", "2", ""),
			status: 400, code: "invalid_argument", field: "If-Match", unchanged: true},
		{name: "DELETE with the current revision", method: "DELETE", url: u, seed: seed, headers: im("{rev}"),
			status: 200, stored: "absent"},
		{name: "DELETE with a stale revision is 412", method: "DELETE", url: u, seed: seed, headers: im("{stale}"),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "DELETE field with the current revision", method: "DELETE", url: u + "&field=a", seed: `{"a":1,"b":2}`, headers: im("{rev}"),
			status: 200, doc: true, stored: `{"b":2}`},
		{name: "DELETE field with a stale revision is 412", method: "DELETE", url: u + "&field=a", seed: seed, headers: im("{stale}"),
			status: 412, code: "precondition_failed", unchanged: true},
		{name: "DELETE with If-Match on a missing document is 412", method: "DELETE", url: u, headers: im("5"),
			status: 412, code: "precondition_failed", stored: "absent"},
		{name: "DELETE garbage If-Match is 400", method: "DELETE", url: u, seed: seed, headers: im("1.5"),
			status: 400, code: "invalid_argument", field: "If-Match", unchanged: true},
	}
}

// testIfMatchRace: of several writers racing with the same If-Match exactly
// one wins; the others get 412 and the winner's data is what stays.
func testIfMatchRace(t *testing.T, e *env) {
	path := "race/" + e.uniq()
	d := e.mustPut(t, e.p.OwnerToken, path, `{"n":0}`)
	const writers = 6
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := bearer(e.p.OwnerToken)
			h["If-Match"] = strconv.FormatUint(d.Revision, 10)
			r, err := e.send(context.Background(), http.MethodPost, "/api/db", h, fmt.Sprintf(`{"collection":%q,"data":{"n":%d}}`, path, i+1))
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
				return
			}
			statuses[i] = r.Status
			if r.Status != http.StatusOK {
				checkError(t, r, http.StatusPreconditionFailed, "precondition_failed", "")
			}
		}()
	}
	wg.Wait()
	won := -1
	for i, st := range statuses {
		if st == http.StatusOK {
			if won >= 0 {
				t.Errorf("writers %d and %d both won with the same If-Match", won, i)
			}
			won = i
		}
	}
	if won < 0 {
		t.Fatalf("no writer won: %v", statuses)
	}
	got, _ := e.get(t, path)
	if !jsonEqual(got.Data, []byte(fmt.Sprintf(`{"n":%d}`, won+1))) {
		t.Errorf("stored %s, want the winner's {\"n\":%d}", got.Data, won+1)
	}
}

// testConcurrentFieldWrites: concurrent field updates without If-Match all
// land (the server retries a lost race instead of dropping a write).
func testConcurrentFieldWrites(t *testing.T, e *env) {
	path := "concurrent/" + e.uniq()
	e.mustPut(t, e.p.OwnerToken, path, `{}`)
	const writers = 4
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprintf("f%d", i)
			r, err := e.send(context.Background(), http.MethodPut, docQuery(path), bearer(e.p.OwnerToken), updateFieldBody(k, k, strconv.Itoa(i), "integer"))
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("writer %d: %v %d %s", i, err, r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	got, _ := e.get(t, path)
	if !jsonEqual(got.Data, []byte(`{"f0":0,"f1":1,"f2":2,"f3":3}`)) {
		t.Errorf("stored %s, want every field", got.Data)
	}
}

// jsonString renders s as a JSON string literal escaping only what JSON
// requires, so that invalid UTF-8 reaches the server as raw bytes.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// replaceInvalidBytes replaces each byte of s that is not part of valid
// UTF-8 with U+FFFD, as encoding/json does when it decodes a string.
func replaceInvalidBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

var badPaths = []struct{ name, path string }{
	{"empty", ""},
	{"empty segment", "a//b"},
	{"leading slash", "/a"},
	{"trailing slash", "a/"},
	{"only a slash", "/"},
	{"dot segment", "./a"},
	{"lone dot", "."},
	{"dotdot segment", "a/../b"},
	{"trailing dotdot", "a/.."},
	{"system root", "_sys/x"},
	{"reserved segment", "a/_b"},
	{"reserved last segment", "a/b/_rules"},
	{"control char", "a\x01b"},
	{"newline", "a\nb"},
	{"DEL", "a\x7fb"},
	{"C1 control", "a\u0085b"},
	{"101 segments", strings.TrimSuffix(strings.Repeat("a/", 101), "/")},
	{"1501 bytes", strings.Repeat("x", 1501)},
	{"invalid UTF-8", "a\xffb"},
	{"truncated UTF-8", "a\xe6\x96"},
}

func badPathScenarios() []scenario {
	var out []scenario
	for _, bp := range badPaths {
		q := "/api/db?collection=" + url.QueryEscape(bp.path)
		postBad := scenario{name: "POST " + bp.name, method: "POST", body: `{"collection":` + jsonString(bp.path) + `,"data":{"a":1}}`,
			status: 400, code: "invalid_path", field: "collection"}
		if !utf8.ValidString(bp.path) {
			// Invalid UTF-8 inside a JSON body may be refused as bad JSON
			// or as a bad path, but must not be stored under a path with
			// U+FFFD substituted for the bytes the client sent.
			postBad.code, postBad.field = "", ""
			postBad.path, postBad.stored = replaceInvalidBytes(bp.path), "absent"
		}
		out = append(out, postBad,
			scenario{name: "GET " + bp.name, url: q, status: 400, code: "invalid_path", field: "collection"},
			scenario{name: "GET list " + bp.name, url: q + "&list=true", status: 400, code: "invalid_path", field: "collection"},
			scenario{name: "PUT " + bp.name, method: "PUT", url: q, body: updateFieldBody("a", "a", "1", ""),
				status: 400, code: "invalid_path", field: "collection"},
			scenario{name: "DELETE " + bp.name, method: "DELETE", url: q, status: 400, code: "invalid_path", field: "collection"},
		)
	}
	// POST with a path the rules could not see: nothing may be stored
	// anywhere the path normalises to.
	out = append(out,
		scenario{name: "POST collection null", method: "POST", body: `{"collection":null,"data":{}}`, status: 400, field: "collection"},
		scenario{name: "POST collection missing", method: "POST", body: `{"data":{}}`, status: 400, field: "collection"},
		scenario{name: "POST dotdot does not write the normalised path", method: "POST", path: "docs/{rand}",
			body: `{"collection":"docs/{rand}/x/..","data":{"a":1}}`, status: 400, code: "invalid_path", field: "collection", stored: "absent"},
	)
	return out
}

func goodPathScenarios() []scenario {
	return []scenario{
		{name: "100 segments", method: "POST", body: post(`{"a":1}`), status: 201, doc: true,
			setup: func(t *testing.T, e *env, v vars) {
				v["path"] = "deep/" + v["rand"] + strings.Repeat("/s", 98)
			}, stored: `{"a":1}`},
		{name: "1500 bytes", method: "POST", body: post(`{"a":1}`), status: 201, doc: true,
			setup: func(t *testing.T, e *env, v vars) {
				p := "long/" + v["rand"] + "/"
				v["path"] = p + strings.Repeat("y", 1500-len(p))
			}, stored: `{"a":1}`},
		{name: "unicode segments", method: "POST", path: "docs/{rand}/ünïcödé 文档/emoji 🎉", body: post(`{"a":1}`), status: 201, doc: true, stored: `{"a":1}`},
		{name: "dots inside segments", method: "POST", path: "docs/{rand}/a.b/..c/d..", body: post(`{"a":1}`), status: 201, doc: true, stored: `{"a":1}`},
		{name: "underscore inside a segment", method: "POST", path: "docs/{rand}/a_b", body: post(`{"a":1}`), status: 201, doc: true, stored: `{"a":1}`},
	}
}

func badBodyScenarios() []scenario {
	return []scenario{
		{name: "bad JSON", method: "POST", body: `{"collection":"{path}",`, status: 400, code: "invalid_json", stored: "absent"},
		{name: "trailing garbage", method: "POST", body: post(`{"a":1}`) + ` x`, status: 400, code: "invalid_json", stored: "absent"},
		{name: "two JSON values", method: "POST", body: post(`{"a":1}`) + post(`{"a":2}`), status: 400, code: "invalid_json", stored: "absent"},
		{name: "body is an array", method: "POST", body: `[{"collection":"{path}","data":{}}]`, status: 400, code: "invalid_argument", stored: "absent"},
		{name: "body is a string", method: "POST", body: `"{path}"`, status: 400, code: "invalid_argument", stored: "absent"},
		{name: "body is a number", method: "POST", body: `42`, status: 400, code: "invalid_argument"},
		{name: "body is null", method: "POST", body: `null`, status: 400},
		{name: "empty body", method: "POST", body: ``, headers: map[string]string{"Content-Type": "application/json"}, status: 400, code: "invalid_argument"},
		{name: "whitespace body", method: "POST", body: " \n\t ", status: 400, code: "invalid_argument"},
		{name: "data is an array", method: "POST", body: post(`[1,2]`), status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data is a string", method: "POST", body: post(`"x"`), status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data is a number", method: "POST", body: post(`5`), status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data is true", method: "POST", body: post(`true`), status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data is null", method: "POST", body: post(`null`), status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data is missing", method: "POST", body: `{"collection":"{path}"}`, status: 400, code: "invalid_argument", field: "data", stored: "absent"},
		{name: "data replaced by null keeps the document", method: "POST", seed: `{"a":1}`, body: post(`null`), status: 400, code: "invalid_argument", field: "data", unchanged: true},
		{name: "collection is a number", method: "POST", body: `{"collection":5,"data":{}}`, status: 400, code: "invalid_argument", field: "collection"},
		{name: "collection is an object", method: "POST", body: `{"collection":{"p":"x"},"data":{}}`, status: 400, code: "invalid_argument", field: "collection"},
		{name: "collection is an array", method: "POST", body: `{"collection":["a","b"],"data":{}}`, status: 400, code: "invalid_argument", field: "collection"},
		{name: "no Content-Type is 415", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": ""},
			status: 415, code: "unsupported_media_type", stored: "absent"},
		{name: "text/plain is 415", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": "text/plain"},
			status: 415, code: "unsupported_media_type", stored: "absent"},
		{name: "form encoding is 415", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			status: 415, code: "unsupported_media_type", stored: "absent"},
		{name: "application/json+x is 415", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": "application/jsonx"},
			status: 415, code: "unsupported_media_type", stored: "absent"},
		{name: "415 on a replace leaves the document", method: "POST", seed: `{"a":1}`, body: post(`{"a":2}`), headers: map[string]string{"Content-Type": "text/plain"},
			status: 415, code: "unsupported_media_type", unchanged: true},
		{name: "charset parameter is accepted", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			status: 201, doc: true, stored: `{"a":1}`},
		{name: "media type is case-insensitive", method: "POST", body: post(`{"a":1}`), headers: map[string]string{"Content-Type": "Application/JSON"},
			status: 201, doc: true, stored: `{"a":1}`},
		{name: "invalid UTF-8 inside data is refused", method: "POST", body: post(`{"s":"a` + "\xff" + `b"}`),
			status: 400, stored: "absent"},
	}
}

// testNumberOutOfRange: 1e999 is valid JSON but no float64. The owner may
// do anything, so the answer is either a 400 about the data or a stored
// document that reads back; never a 403 from a rule that could not decode
// the data, nor a 5xx.
func testNumberOutOfRange(t *testing.T, e *env) {
	for _, data := range []string{`{"n":1e999}`, `{"n":-1e400}`, `{"deep":{"n":[1e999]}}`} {
		path := "numbers/" + e.uniq()
		r := e.mustSend(t, http.MethodPost, "/api/db", bearer(e.p.OwnerToken), fmt.Sprintf(`{"collection":%q,"data":%s}`, path, data))
		switch {
		case r.Status == http.StatusCreated:
			if _, ok := e.get(t, path); !ok {
				t.Errorf("%s: created but does not read back", data)
			}
		case r.Status == http.StatusBadRequest:
			checkError(t, r, http.StatusBadRequest, "invalid_argument", "data")
			if _, ok := e.get(t, path); ok {
				t.Errorf("%s: refused but stored", data)
			}
		default:
			t.Errorf("owner POST %s: status %d, want 400 invalid_argument (field data) or 201: %s", data, r.Status, r.Body)
		}
	}
}

// nested returns a JSON object nested n objects deep: {"a":{"a":...1}}.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n-1) + `{"a":1}` + strings.Repeat("}", n-1)
}

func sizeScenarios() []scenario {
	const maxDoc = 1 << 20
	const maxBody = 1<<20 + 64<<10
	// {"s":"..."} is the string plus 8 bytes.
	exact := `{"s":"` + strings.Repeat("x", maxDoc-8) + `"}`
	over := `{"s":"` + strings.Repeat("x", maxDoc-7) + `"}`
	// A document well under 1 MiB, made of characters that HTML-escaping
	// encoders blow up sixfold (< > & and U+2028).
	escapable := `{"s":"` + strings.Repeat("<>&", 60000) + strings.Repeat("x", 500000) + `"}`
	big := strings.Repeat("x", 600000)
	return []scenario{
		{name: "body over the cap is 413 body_too_large", method: "POST",
			body: post(`{"s":"` + strings.Repeat("x", maxBody) + `"}`), status: 413, code: "body_too_large", stored: "absent"},
		{name: "body over the cap on a replace leaves the document", method: "POST", seed: `{"a":1}`,
			body: post(`{"s":"` + strings.Repeat("x", maxBody) + `"}`), status: 413, code: "body_too_large", unchanged: true},
		{name: "PUT body over the cap is 413", method: "PUT", url: "/api/db?collection={path}", seed: `{"a":1}`,
			body: updateFieldBody("a", "a", `"`+strings.Repeat("x", maxBody)+`"`, ""), status: 413, code: "body_too_large", unchanged: true},
		{name: "document of exactly 1 MiB is accepted", method: "POST", body: post(exact), status: 201, doc: true,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if d, ok := e.get(t, v["path"]); !ok || len(d.Data) != maxDoc {
					t.Errorf("stored %d bytes, want %d", len(d.Data), maxDoc)
				}
			}},
		{name: "document over 1 MiB is 413 document_too_large", method: "POST", body: post(over),
			status: 413, code: "document_too_large", stored: "absent"},
		{name: "document over 1 MiB on a replace leaves the document", method: "POST", seed: `{"a":1}`, body: post(over),
			status: 413, code: "document_too_large", unchanged: true},
		{name: "document under 1 MiB of HTML-escapable characters is accepted", method: "POST", body: post(escapable),
			status: 201, doc: true, data: escapable, stored: escapable},
		{name: "update-field growing a document past 1 MiB is 413", method: "PUT", url: "/api/db?collection={path}",
			seed: `{"a":"` + big + `"}`, body: updateFieldBody("b", "b", `"`+big+`"`, "string"),
			status: 413, code: "document_too_large", unchanged: true},
		{name: "nesting of 64 levels is accepted", method: "POST", body: post(nested(63)), status: 201, doc: true, stored: nested(63)},
		{name: "nesting of 65 levels is 400", method: "POST", body: post(nested(64)), status: 400, code: "invalid_argument", stored: "absent"},
		{name: "nesting of 65 levels in arrays is 400", method: "POST", body: post(`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`),
			status: 400, code: "invalid_argument", stored: "absent"},
		{name: "very deep nesting is 400", method: "POST", body: post(nested(100000)), status: 400, code: "invalid_argument", stored: "absent"},
		{name: "PUT value nested 65 levels is 400", method: "PUT", url: "/api/db?collection={path}", seed: `{"a":1}`,
			body: updateFieldBody("a", "a", nested(64), ""), status: 400, code: "invalid_argument", unchanged: true},
		{name: "brackets inside strings do not count as nesting", method: "POST",
			body: post(`{"s":"` + strings.Repeat("[{", 200) + `\"\\` + `"}`), status: 201, doc: true},
	}
}

func tokenScenarios() []scenario {
	u := "/api/db?collection={path}"
	seed := `{"a":1}`
	var out []scenario
	for _, m := range []struct{ method, url, body string }{
		{"GET", u, ""}, {"POST", "", post(`{"a":2}`)}, {"PUT", u, updateFieldBody("a", "a", "2", "")}, {"DELETE", u, ""},
	} {
		out = append(out,
			scenario{name: m.method + " without a token is 401", as: "none", method: m.method, url: m.url, body: m.body, seed: seed,
				status: 401, code: "missing_token", unchanged: true},
			scenario{name: m.method + " with a bogus token is 401", as: "none", method: m.method, url: m.url, body: m.body, seed: seed,
				headers: map[string]string{"Authorization": "Bearer eb_not-a-real-token"}, status: 401, code: "invalid_token", unchanged: true},
			scenario{name: m.method + " with Basic auth is 401", as: "none", method: m.method, url: m.url, body: m.body, seed: seed,
				headers: map[string]string{"Authorization": "Basic b3duZXI6cHc="}, status: 401, code: "missing_token", unchanged: true},
			scenario{name: m.method + " with a logged-out token is 401", as: "none", method: m.method, url: m.url, body: m.body, seed: seed,
				setup: func(t *testing.T, e *env, v vars) {
					a := e.mustRegister(t, e.p, "")
					e.mustLogout(t, e.p, a.Token)
					v["dead"] = a.Token
				},
				headers: map[string]string{"Authorization": "Bearer {dead}"}, status: 401, code: "invalid_token", unchanged: true},
			scenario{name: m.method + " with another project's X-Project-Id is 403", method: m.method, url: m.url, body: m.body, seed: seed,
				headers: map[string]string{"X-Project-Id": "{pid2}"}, status: 403, code: "project_mismatch", unchanged: true},
			scenario{name: m.method + " with a wrong X-API-Key is 401", method: m.method, url: m.url, body: m.body, seed: seed,
				headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "eb_wrong"}, status: 401, code: "invalid_api_key", unchanged: true},
			scenario{name: m.method + " with another project's X-API-Key is 401", method: m.method, url: m.url, body: m.body, seed: seed,
				headers: map[string]string{"X-API-Key": "{key2}"}, status: 401, code: "invalid_api_key", unchanged: true},
		)
	}
	out = append(out,
		scenario{name: "matching X-Project-Id and X-API-Key are accepted", url: u, seed: seed,
			headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, status: 200, doc: true},
		scenario{name: "lower-case bearer scheme is accepted", as: "none", url: u, seed: seed,
			headers: map[string]string{"Authorization": "bearer {owner}"}, status: 200, doc: true},
		// Same path, other project: the token decides the project, so the
		// other project's owner finds nothing there.
		scenario{name: "another project's owner does not see this project's documents", as: "none", url: u, seed: seed,
			headers: map[string]string{"Authorization": "Bearer {owner2}"}, status: 404, code: "not_found", unchanged: true},
		scenario{name: "another project's owner writes its own project only", as: "none", method: "POST", body: post(`{"b":2}`), seed: seed,
			headers: map[string]string{"Authorization": "Bearer {owner2}"}, status: 201, unchanged: true},
	)
	return out
}

func defaultRulesScenarios() []scenario {
	own := "users/{uid}/notes/{rand}"
	theirs := "users/{otherUid}/notes/{rand}"
	u := "/api/db?collection={path}"
	seed := `{"a":1}`
	return []scenario{
		// A user in their own subtree.
		// users/{uid} is one document per user: one scenario both writes and
		// reads it, so parallel scenarios never race on it.
		{name: "user writes and reads users/{uid}", as: "user", path: "users/{uid}", method: "POST", body: post(`{"profile":true}`), status: 200, doc: true, stored: `{"profile":true}`,
			setup: func(t *testing.T, e *env, v vars) { e.mustPut(t, e.p.OwnerToken, v["path"], `{}`) },
			check: func(t *testing.T, e *env, v vars, _ reply) {
				r := e.mustSend(t, http.MethodGet, docQuery(v["path"]), bearer(e.user.Token), "")
				if r.Status != http.StatusOK {
					t.Fatalf("user reads users/{uid}: status %d %s, want 200", r.Status, r.Body)
				}
				if d := checkDoc(t, r, v["path"], false); !jsonEqual(d.Data, []byte(`{"profile":true}`)) {
					t.Errorf("user reads users/{uid}: data %s, want {\"profile\":true}", d.Data)
				}
			}},
		{name: "user creates under users/{uid}", as: "user", path: own, method: "POST", body: post(`{"t":"x"}`), status: 201, doc: true, stored: `{"t":"x"}`},
		{name: "user reads under users/{uid}", as: "user", path: own, seed: seed, url: u, status: 200, doc: true, data: seed},
		{name: "user misses under users/{uid} with 404", as: "user", path: own, url: u, status: 404, code: "not_found"},
		{name: "user updates a field under users/{uid}", as: "user", path: own, seed: seed, method: "PUT", url: u, body: updateFieldBody("a", "b", "2", ""),
			status: 200, doc: true, stored: `{"b":2}`},
		{name: "user deletes under users/{uid}", as: "user", path: own, seed: seed, method: "DELETE", url: u, status: 200, stored: "absent"},
		{name: "user deletes a field under users/{uid}", as: "user", path: own, seed: `{"a":1,"b":2}`, method: "DELETE", url: u + "&field=b", status: 200, doc: true, stored: seed},
		{name: "user lists users/{uid}", as: "user", path: own, seed: seed, url: "/api/db?collection=users/{uid}/notes&list=true", status: 200, json: `{}`},
		// A user in someone else's subtree.
		{name: "user reads users/{other}/x: 403", as: "user", path: theirs, seed: seed, url: u, status: 403, code: "forbidden", unchanged: true},
		{name: "user reads a missing users/{other}/x: 403 not 404", as: "user", path: theirs, url: u, status: 403, code: "forbidden"},
		{name: "user reads users/{other}: 403", as: "user", path: "users/{otherUid}", url: u, status: 403, code: "forbidden"},
		{name: "user replaces users/{other}/x: 403", as: "user", path: theirs, seed: seed, method: "POST", body: post(`{"pwned":1}`), status: 403, code: "forbidden", unchanged: true},
		{name: "user creates users/{other}/x: 403", as: "user", path: theirs, method: "POST", body: post(`{"pwned":1}`), status: 403, code: "forbidden", unchanged: true},
		{name: "user updates users/{other}/x: 403", as: "user", path: theirs, seed: seed, method: "PUT", url: u, body: updateFieldBody("a", "a", "9", ""), status: 403, code: "forbidden", unchanged: true},
		{name: "user updates a missing users/{other}/x: 403 not 404", as: "user", path: theirs, method: "PUT", url: u, body: updateFieldBody("a", "a", "9", ""), status: 403, code: "forbidden", unchanged: true},
		{name: "user renames onto an existing key of users/{other}/x: 403 not 409", as: "user", path: theirs, seed: `{"a":1,"b":2}`, method: "PUT", url: u, body: updateFieldBody("a", "b", "9", ""), status: 403, code: "forbidden", unchanged: true},
		{name: "user deletes users/{other}/x: 403", as: "user", path: theirs, seed: seed, method: "DELETE", url: u, status: 403, code: "forbidden", unchanged: true},
		{name: "user deletes a missing users/{other}/x: 403 not 404", as: "user", path: theirs, method: "DELETE", url: u, status: 403, code: "forbidden", unchanged: true},
		{name: "user deletes a field of users/{other}/x: 403", as: "user", path: theirs, seed: seed, method: "DELETE", url: u + "&field=a", status: 403, code: "forbidden", unchanged: true},
		{name: "user deletes an unknown field of users/{other}/x: 403 not 404", as: "user", path: theirs, seed: seed, method: "DELETE", url: u + "&field=zz", status: 403, code: "forbidden", unchanged: true},
		{name: "user lists users/{other}: 403", as: "user", path: theirs, seed: seed, url: "/api/db?collection=users/{otherUid}/notes&list=true", status: 403, code: "forbidden"},
		{name: "user lists users: 403", as: "user", url: "/api/db?collection=users&list=true", status: 403, code: "forbidden"},
		{name: "other user reads users/{uid}/x: 403", as: "other", path: own, seed: seed, url: u, status: 403, code: "forbidden"},
		// A user outside users/.
		{name: "user reads public/x: 403", as: "user", path: "public/{rand}", seed: seed, url: u, status: 403, code: "forbidden"},
		{name: "user creates public/x: 403", as: "user", path: "public/{rand}", method: "POST", body: post(seed), status: 403, code: "forbidden", unchanged: true},
		{name: "user replaces public/x: 403", as: "user", path: "public/{rand}", seed: seed, method: "POST", body: post(`{"b":1}`), status: 403, code: "forbidden", unchanged: true},
		{name: "user updates public/x: 403", as: "user", path: "public/{rand}", seed: seed, method: "PUT", url: u, body: updateFieldBody("a", "a", "2", ""), status: 403, code: "forbidden", unchanged: true},
		{name: "user deletes public/x: 403", as: "user", path: "public/{rand}", seed: seed, method: "DELETE", url: u, status: 403, code: "forbidden", unchanged: true},
		{name: "user writes the users collection document: 403", as: "user", path: "users", method: "POST", body: post(seed), status: 403, code: "forbidden", unchanged: true},
		// The owner may do anything.
		{name: "owner reads users/{uid}/x", path: own, seed: seed, url: u, status: 200, doc: true},
		{name: "owner writes users/{other}/x", path: theirs, seed: seed, method: "POST", body: post(`{"b":1}`), status: 200, doc: true, stored: `{"b":1}`},
		{name: "owner updates public/x", path: "public/{rand}", seed: seed, method: "PUT", url: u, body: updateFieldBody("a", "a", "2", ""), status: 200, stored: `{"a":2}`},
		{name: "owner deletes public/x", path: "public/{rand}", seed: seed, method: "DELETE", url: u, status: 200, stored: "absent"},
		{name: "owner lists users", url: "/api/db?collection=users&list=true", status: 200},
	}
}

// testCustomRules sets rules on a project of its own (rules are per project)
// and checks they apply at once, that a bad rules document is refused whole,
// and that only owners may read or change them.
func testCustomRules(t *testing.T, e *env) {
	p := e.c.CreateProject(0)
	u := e.mustRegister(t, p, "")
	owner := p.OwnerToken
	writeAs := func(tok, path, data string) reply {
		return e.mustSend(t, http.MethodPost, "/api/db", bearer(tok), fmt.Sprintf(`{"collection":%q,"data":%s}`, path, data))
	}
	getAs := func(tok, path string) reply { return e.mustSend(t, http.MethodGet, docQuery(path), bearer(tok), "") }
	getRules := func(tok string) reply { return e.mustSend(t, http.MethodGet, "/api/db/rules", bearer(tok), "") }
	putRules := func(tok, body string) reply { return e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(tok), body) }
	wantStatus := func(what string, r reply, status int, code string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
		}
		if status >= 400 {
			checkError(t, r, status, code, "")
		}
	}

	// Defaults first.
	r := getRules(owner)
	wantStatus("owner GET default rules", r, 200, "")
	var rs struct {
		Rules []struct{ Match, Read, Write string }
	}
	mustDecode(t, r.Body, &rs)
	if len(rs.Rules) != 2 || rs.Rules[0].Match != "users/{uid}/**" || rs.Rules[1].Match != "**" {
		t.Errorf("default rules = %s", r.Body)
	}
	wantStatus("user GET rules", getRules(u.Token), 403, "forbidden")
	wantStatus("no token GET rules", e.mustSend(t, http.MethodGet, "/api/db/rules", nil, ""), 401, "missing_token")
	wantStatus("user writes public/x under default rules", writeAs(u.Token, "public/a", `{"title":"hi"}`), 403, "forbidden")
	wantStatus("user writes own doc under default rules", writeAs(u.Token, "users/"+u.ID+"/n", `{"t":1}`), 201, "")

	custom := `{"rules":[` +
		`{"match":"public/{doc}","read":"true","write":"request.data.title != ''"},` +
		`{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	r = putRules(u.Token, custom)
	wantStatus("user PUT rules", r, 403, "forbidden")
	wantStatus("owner PUT rules without a body type", e.mustSend(t, http.MethodPut, "/api/db/rules", map[string]string{"Authorization": "Bearer " + owner, "Content-Type": "text/plain"}, custom), 415, "unsupported_media_type")
	r = putRules(owner, custom)
	wantStatus("owner PUT rules", r, 200, "")
	checkJSONResponse(t, r)
	var put struct {
		Rules    []struct{ Match, Read, Write string }
		Revision uint64
	}
	mustDecode(t, r.Body, &put)
	if len(put.Rules) != 2 || put.Rules[0].Match != "public/{doc}" || put.Revision == 0 {
		t.Errorf("PUT rules answered %s", r.Body)
	}
	checkRevisionHeader(t, r, put.Revision)

	// In force at once.
	wantStatus("user writes public/x with a title", writeAs(u.Token, "public/a", `{"title":"hi"}`), 201, "")
	wantStatus("user writes public/x with an empty title", writeAs(u.Token, "public/a", `{"title":""}`), 403, "forbidden")
	wantStatus("user writes public/x without a title", writeAs(u.Token, "public/a", `{"body":"x"}`), 403, "forbidden")
	r = getAs(u.Token, "public/a")
	wantStatus("user reads public/x", r, 200, "")
	if d := checkDoc(t, r, "public/a", false); !jsonEqual(d.Data, []byte(`{"title":"hi"}`)) {
		t.Errorf("public/a = %s after refused writes, want the first write", d.Data)
	}
	wantStatus("user deletes public/x (no request data)", e.mustSend(t, http.MethodDelete, docQuery("public/a"), bearer(u.Token), ""), 403, "forbidden")
	wantStatus("user writes public/x/y (not matched by public/{doc})", writeAs(u.Token, "public/a/y", `{"title":"hi"}`), 403, "forbidden")
	wantStatus("public/x survives the refused delete", getAs(owner, "public/a"), 200, "")
	wantStatus("public/x/y was not written", getAs(owner, "public/a/y"), 404, "not_found")
	wantStatus("user reads own doc, now owner-only", getAs(u.Token, "users/"+u.ID+"/n"), 403, "forbidden")
	wantStatus("owner still reads everything", getAs(owner, "users/"+u.ID+"/n"), 200, "")

	// A bad rules document is refused and the old rules stay.
	for _, bad := range []struct{ name, body string }{
		{"rules[0].read", `{"rules":[{"match":"public/{doc}","read":"true &&","write":"true"}]}`},
		{"rules[1].write", `{"rules":[{"match":"a/**","read":"true","write":"true"},{"match":"**","read":"true","write":"1 + 1"}]}`},
		{"rules[0].match", `{"rules":[{"match":"a/**/b","read":"true","write":"true"}]}`},
		{"rules[0].read", `{"rules":[{"match":"**","read":"nosuchvar == 1","write":"true"}]}`},
	} {
		r := putRules(owner, bad.body)
		if r.Status != 400 {
			t.Fatalf("bad rules %s: status %d: %s", bad.body, r.Status, r.Body)
		}
		checkError(t, r, 400, "invalid_argument", bad.name)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"rules":"x"}`, "rules"},
		{`{}`, "rules"},
		{`{"rules":null}`, "rules"},
		{`{"rules":[{"match":5}]}`, ""},
		{`[`, ""},
	} {
		r := putRules(owner, bad.body)
		if r.Status != 400 {
			t.Fatalf("bad rules %s: status %d: %s", bad.body, r.Status, r.Body)
		}
		checkError(t, r, 400, "", bad.field)
	}
	r = getRules(owner)
	wantStatus("owner GET rules after refused updates", r, 200, "")
	rs.Rules = nil
	mustDecode(t, r.Body, &rs)
	if len(rs.Rules) != 2 || rs.Rules[0].Match != "public/{doc}" || rs.Rules[0].Write != "request.data.title != ''" {
		t.Errorf("rules after refused updates = %s, want the custom rules", r.Body)
	}
	wantStatus("custom rules still apply after refused updates", writeAs(u.Token, "public/b", `{"title":"yes"}`), 201, "")
	wantStatus("method POST on rules", e.mustSend(t, http.MethodPost, "/api/db/rules", bearer(owner), custom), 405, "method_not_allowed")

	// Back to the defaults: the user regains their subtree and loses public/.
	def := `{"rules":[{"match":"users/{uid}/**","read":"auth.role == 'owner' || auth.uid == uid","write":"auth.role == 'owner' || auth.uid == uid"},{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	wantStatus("owner restores the default rules", putRules(owner, def), 200, "")
	wantStatus("user reads own doc again", getAs(u.Token, "users/"+u.ID+"/n"), 200, "")
	wantStatus("user reads public/x again refused", getAs(u.Token, "public/a"), 403, "forbidden")
	// Rules of this project never leak into the main one.
	wantStatus("main project still has default rules", e.mustSend(t, http.MethodGet, docQuery("public/zzz"), bearer(e.user.Token), ""), 403, "forbidden")
}

func consistencyScenarios() []scenario {
	u := "/api/db?collection={path}"
	seed := `{"a":1}`
	mr := func(v string) map[string]string { return map[string]string{"X-Min-Revision": v} }
	return []scenario{
		{name: "consistency=local", url: u + "&consistency=local", seed: seed, status: 200, doc: true, data: seed},
		{name: "consistency=strong", url: u + "&consistency=strong", seed: seed, status: 200, doc: true, data: seed},
		{name: "consistency=bogus is 400", url: u + "&consistency=bogus", seed: seed, status: 400, code: "invalid_argument", field: "consistency"},
		{name: "consistency=STRONG is 400", url: u + "&consistency=STRONG", seed: seed, status: 400, code: "invalid_argument", field: "consistency"},
		{name: "consistency=local on a list", url: "/api/db?collection=docs&list=true&limit=1&consistency=local", status: 200},
		{name: "X-Min-Revision at the write", url: u, seed: seed, headers: mr("{rev}"), status: 200, doc: true, data: seed},
		{name: "X-Min-Revision below the write", url: u, seed: seed, headers: mr("{stale}"), status: 200, doc: true},
		{name: "X-Min-Revision 0", url: u, seed: seed, headers: mr("0"), status: 200, doc: true},
		{name: "X-Min-Revision with a local read", url: u + "&consistency=local", seed: seed, headers: mr("{rev}"), status: 200, doc: true, data: seed},
		{name: "X-Min-Revision abc is 400", url: u, seed: seed, headers: mr("abc"), status: 400, code: "invalid_argument", field: "X-Min-Revision"},
		{name: "X-Min-Revision -1 is 400", url: u, seed: seed, headers: mr("-1"), status: 400, code: "invalid_argument", field: "X-Min-Revision"},
		{name: "X-Min-Revision 1.5 is 400", url: u, seed: seed, headers: mr("1.5"), status: 400, code: "invalid_argument", field: "X-Min-Revision"},
		{name: "X-Min-Revision overflowing uint64 is 400", url: u, seed: seed, headers: mr("18446744073709551616"), status: 400, code: "invalid_argument", field: "X-Min-Revision"},
	}
}

// testMinRevisionFuture: a revision the cluster has not reached must give up
// with 503 and Retry-After within a bounded wait, not hold the request open.
func testMinRevisionFuture(t *testing.T, e *env) {
	for _, c := range []string{"strong", "local"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			path := "future/" + e.uniq()
			d := e.mustPut(t, e.p.OwnerToken, path, `{"a":1}`)
			h := bearer(e.p.OwnerToken)
			h["X-Min-Revision"] = strconv.FormatUint(d.Revision+1_000_000_000, 10)
			const limit = 12 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			r, err := e.send(ctx, http.MethodGet, docQuery(path)+"&consistency="+c, h, "")
			if errors.Is(err, context.DeadlineExceeded) || (err != nil && ctx.Err() != nil) {
				t.Fatalf("BUG: GET (consistency=%s) with X-Min-Revision far in the future got no answer within %v: "+
					"the wait is bounded only by the client (want 503 unavailable with Retry-After after a bounded wait)", c, limit)
			}
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			checkError(t, r, http.StatusServiceUnavailable, "unavailable", "")
			t.Logf("X-Min-Revision far ahead (%s): 503 after %v", c, time.Since(start).Round(time.Millisecond))
		})
	}
}
