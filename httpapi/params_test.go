package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A query-string parameter /api/db does not read is refused, never
// ignored: ?where= on a read must not answer every document as if it had
// filtered.
func TestDBUnknownParameters(t *testing.T) {
	e := newEnv(t)
	scs := []scenario{
		{name: "GET where", url: "/api/db?collection={path}&list=true&where=x", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "where",
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !strings.Contains(string(r.Body), "unknown query parameter where; to filter use POST /api/db/query") {
					t.Errorf("message: %s", r.Body)
				}
			}},
		{name: "GET orderBy", url: "/api/db?collection={path}&orderBy=a", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "orderBy"},
		{name: "GET field", url: "/api/db?collection={path}&field=a", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "field"},
		{name: "GET first of two unknown", url: "/api/db?collection={path}&zeta=1&alpha=2", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "alpha"},
		{name: "GET token in the query", url: "/api/db?collection={path}&token={owner}", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "token"},
		{name: "GET nameless", url: "/api/db?collection={path}&=1", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "-"},
		{name: "GET every known one", url: "/api/db?collection={path}&list=true&limit=5&pageToken=&consistency=local", seed: `{"a":1}`, status: 200, json: `{"documents":[]}`},
		{name: "GET a document", url: "/api/db?collection={path}&consistency=strong", seed: `{"a":1}`, status: 200, doc: true},
		{name: "POST any", method: http.MethodPost, url: "/api/db?collection={path}", body: `{"collection":"{path}","data":{"b":2}}`, seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "collection", unchanged: true},
		{name: "PUT list", method: http.MethodPut, url: "/api/db?collection={path}&list=true", body: `{"oldKey":"a","newKey":"a","value":2}`, seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "list", unchanged: true},
		{name: "PUT field", method: http.MethodPut, url: "/api/db?collection={path}", body: `{"oldKey":"a","newKey":"a","value":2}`, seed: `{"a":1}`, status: 200, doc: true, stored: `{"a":2}`},
		{name: "DELETE limit", method: http.MethodDelete, url: "/api/db?collection={path}&limit=1", seed: `{"a":1}`, status: 400, code: "invalid_argument", field: "limit", unchanged: true},
		{name: "DELETE field", method: http.MethodDelete, url: "/api/db?collection={path}&field=a", seed: `{"a":1,"b":2}`, status: 200, doc: true, stored: `{"b":2}`},
		{name: "PATCH is still 405", method: http.MethodPatch, url: "/api/db?collection={path}&where=x", status: 405, code: "method_not_allowed"},
	}
	e.run(t, scs)
	// HEAD answers as GET does, without a body.
	r := e.mustSend(t, http.MethodHead, "/api/db?collection=x&where=y", bearer(e.p.OwnerToken), "")
	if r.Status != http.StatusBadRequest || len(r.Body) != 0 {
		t.Errorf("HEAD with ?where=: %d %q, want 400 without a body", r.Status, r.Body)
	}
	// The CORS preflight is answered before the route, whatever the query.
	r = e.mustSend(t, http.MethodOptions, "/api/db?collection=x&where=y", map[string]string{"Origin": e.base, "Access-Control-Request-Method": "GET"}, "")
	if r.Status != http.StatusNoContent {
		t.Errorf("preflight with ?where=: %d %s, want 204", r.Status, r.Body)
	}
}
