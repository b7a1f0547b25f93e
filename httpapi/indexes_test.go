package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// GET and PUT /api/db/indexes through a real node: owners only, every bad
// definition refused with its field and nothing stored changed, the list
// replaced as a whole, each index's state.

type indexList struct {
	Indexes []struct {
		ID              string `json:"id"`
		Collection      string `json:"collection"`
		CollectionGroup bool   `json:"collectionGroup"`
		Fields          []struct {
			Field     string `json:"field"`
			Direction string `json:"direction"`
		} `json:"fields"`
		State string `json:"state"`
	} `json:"indexes"`
}

// mustIndexes reads the project's indexes as the owner and returns the
// raw answer and its decoding.
func (e *env) mustIndexes(t testing.TB) ([]byte, indexList) {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, "/api/db/indexes", bearer(e.p.OwnerToken), "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET indexes: %d %s", r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var l indexList
	mustDecode(t, r.Body, &l)
	if l.Indexes == nil {
		t.Fatalf("GET indexes without an indexes array: %s", r.Body)
	}
	return r.Body, l
}

func TestIndexesRefusals(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	// What is declared before every refusal, and must still be after it.
	keep := `{"indexes":[{"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]}]}`
	if r := e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), keep); r.Status != http.StatusOK {
		t.Fatalf("PUT indexes: %d %s", r.Status, r.Body)
	}
	before, _ := e.mustIndexes(t)
	const u = "/api/db/indexes"
	put := func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: http.MethodPut, url: u, body: body, status: status, code: code, field: field}
	}
	one := func(ix string) string { return `{"indexes":[` + ix + `]}` }
	scs := []scenario{
		put("bad JSON", `{"indexes":[`, 400, "invalid_json", "-"),
		put("not an object", `[]`, 400, "invalid_argument", ""),
		put("indexes missing", `{}`, 400, "invalid_argument", "indexes"),
		put("indexes not an array", `{"indexes":{}}`, 400, "invalid_argument", "indexes"),
		put("unknown member", `{"indexes":[],"drop":true}`, 400, "invalid_argument", "drop"),
		put("unknown member of an index", one(`{"collection":"a","fields":[{"field":"x"}],"unique":true}`), 400, "invalid_argument", "indexes[0].unique"),
		put("collection missing", one(`{"fields":[{"field":"x"}]}`), 400, "invalid_argument", "indexes[0].collection"),
		put("reserved collection", one(`{"collection":"_users","fields":[{"field":"x"}]}`), 400, "invalid_argument", "indexes[0].collection"),
		put("collection with a slash", `{"indexes":[{"collection":"a","fields":[{"field":"x"}]},{"collection":"a/b","fields":[{"field":"x"}]}]}`, 400, "invalid_argument", "indexes[1].collection"),
		put("no fields", one(`{"collection":"a","fields":[]}`), 400, "invalid_argument", "indexes[0].fields"),
		put("nine fields", one(`{"collection":"a","fields":[{"field":"f0"}`+nineFields()+`]}`), 400, "invalid_argument", "indexes[0].fields"),
		put("a field twice", one(`{"collection":"a","fields":[{"field":"x"},{"field":"x","direction":"desc"}]}`), 400, "invalid_argument", "indexes[0].fields[1].field"),
		put("empty field", one(`{"collection":"a","fields":[{"field":""}]}`), 400, "invalid_argument", "indexes[0].fields[0].field"),
		put("bad direction", one(`{"collection":"a","fields":[{"field":"x","direction":"down"}]}`), 400, "invalid_argument", "indexes[0].fields[0].direction"),
		put("direction of the wrong type", one(`{"collection":"a","fields":[{"field":"x","direction":1}]}`), 400, "invalid_argument", "indexes[0].fields[0].direction"),
		put("duplicate index", `{"indexes":[{"collection":"a","fields":[{"field":"x"}]},{"collection":"a","fields":[{"field":"x","direction":"asc"}]}]}`, 400, "invalid_argument", "indexes[1]"),
		{name: "user PUT", as: "user", method: http.MethodPut, url: u, body: `{"indexes":[]}`, status: 403, code: "forbidden"},
		{name: "user GET", as: "user", url: u, status: 403, code: "forbidden"},
		{name: "no token", as: "none", method: http.MethodPut, url: u, body: `{"indexes":[]}`, status: 401, code: "missing_token"},
		{name: "DELETE", method: http.MethodDelete, url: u, status: 405, code: "method_not_allowed", check: allowIs("GET, PUT")},
		{name: "POST", method: http.MethodPost, url: u, body: `{"indexes":[]}`, status: 405, code: "method_not_allowed", check: allowIs("GET, PUT")},
		{name: "unknown parameter on PUT", method: http.MethodPut, url: u + "?force=true", body: `{"indexes":[]}`, status: 400, code: "invalid_argument", field: "force"},
		{name: "unknown parameter on GET", url: u + "?collection=orders", status: 400, code: "invalid_argument", field: "collection"},
		{name: "bad consistency", url: u + "?consistency=maybe", status: 400, code: "invalid_argument", field: "consistency"},
		{name: "text body", method: http.MethodPut, url: u, headers: map[string]string{"Content-Type": "text/plain"}, body: `{"indexes":[]}`, status: 415, code: "unsupported_media_type"},
	}
	// After every refusal the declared list is what it was.
	for i := range scs {
		scs[i].check = chain(scs[i].check, func(t *testing.T, e *env, v vars, r reply) {
			if after, _ := e.mustIndexes(t); !bytes.Equal(after, before) {
				t.Errorf("a refused request changed the indexes: %s, was %s", after, before)
			}
		})
	}
	e.run(t, scs)
}

func nineFields() string {
	var b strings.Builder
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, `,{"field":"f%d"}`, i)
	}
	return b.String()
}

func chain(fs ...func(t *testing.T, e *env, v vars, r reply)) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		for _, f := range fs {
			if f != nil {
				f(t, e, v, r)
			}
		}
	}
}
