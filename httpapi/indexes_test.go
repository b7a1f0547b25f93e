package httpapi_test

import (
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

// definitions is the list without ids and states, as JSON.
func (l indexList) definitions(t testing.TB) string {
	t.Helper()
	type field struct {
		Field     string `json:"field"`
		Direction string `json:"direction,omitempty"`
	}
	type def struct {
		Collection      string  `json:"collection"`
		CollectionGroup bool    `json:"collectionGroup,omitempty"`
		Fields          []field `json:"fields"`
	}
	out := []def{}
	for _, ix := range l.Indexes {
		d := def{Collection: ix.Collection, CollectionGroup: ix.CollectionGroup}
		for _, f := range ix.Fields {
			if f.Direction == "asc" {
				f.Direction = ""
			}
			d.Fields = append(d.Fields, field(f))
		}
		out = append(out, d)
	}
	return mustJSON(t, out)
}

func TestIndexesRefusals(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	// What is declared before every refusal, and must still be after it.
	keep := `{"indexes":[{"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]}]}`
	if r := e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), keep); r.Status != http.StatusOK {
		t.Fatalf("PUT indexes: %d %s", r.Status, r.Body)
	}
	// Compared without the states: the index may finish building on this
	// node between two reads.
	_, beforeList := e.mustIndexes(t)
	before := beforeList.definitions(t)
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
			if _, l := e.mustIndexes(t); l.definitions(t) != before {
				t.Errorf("a refused request changed the indexes: %s, was %s", l.definitions(t), before)
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

func TestIndexes(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	// None declared yet.
	if raw, l := e.mustIndexes(t); len(l.Indexes) != 0 {
		t.Fatalf("a new project has indexes: %s", raw)
	}
	for i := 0; i < 30; i++ {
		e.mustPut(t, own, fmt.Sprintf("orders/o%02d", i), fmt.Sprintf(`{"status":"open","createdAt":%d,"total":%d}`, i, i%7))
		e.mustPut(t, own, fmt.Sprintf("users/u1/notes/n%02d", i), fmt.Sprintf(`{"at":%d}`, i))
	}
	decl := `{"indexes":[
		{"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]},
		{"collection":"notes","collectionGroup":true,"fields":[{"field":"at"}]}]}`
	r := e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), decl)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT indexes: %d %s", r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	if r.Header.Get("X-Revision") == "" {
		t.Errorf("PUT indexes without X-Revision")
	}
	var put indexList
	mustDecode(t, r.Body, &put)
	wantDefs := `[{"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]},{"collection":"notes","collectionGroup":true,"fields":[{"field":"at"}]}]`
	if got := put.definitions(t); got != wantDefs {
		t.Errorf("PUT answered %s, want the definitions %s", got, wantDefs)
	}
	ids := map[string]bool{}
	for _, ix := range put.Indexes {
		if ix.ID == "" || ids[ix.ID] {
			t.Errorf("index ids must be non-empty and distinct: %s", r.Body)
		}
		ids[ix.ID] = true
		if ix.State != "building" && ix.State != "ready" {
			t.Errorf("state %q", ix.State)
		}
	}
	// GET lists the same, in declared order, with the same ids; both
	// become ready.
	_, got := e.mustIndexes(t)
	if got.definitions(t) != wantDefs || len(got.Indexes) != 2 || got.Indexes[0].ID != put.Indexes[0].ID || got.Indexes[1].ID != put.Indexes[1].ID {
		t.Errorf("GET: %+v, want what PUT answered: %+v", got, put)
	}
	for _, ix := range put.Indexes {
		e.waitIndexReady(t, ix.ID)
	}
	// The same definition has the same id when declared again; a list
	// that drops one keeps the other's state.
	r = e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), `{"indexes":[{"collection":"notes","collectionGroup":true,"fields":[{"field":"at","direction":"asc"}]}]}`)
	var again indexList
	mustDecode(t, r.Body, &again)
	if r.Status != http.StatusOK || len(again.Indexes) != 1 || again.Indexes[0].ID != put.Indexes[1].ID || again.Indexes[0].State != "ready" {
		t.Errorf("redeclared the ready group index: %d %s, want it with id %s, ready", r.Status, r.Body, put.Indexes[1].ID)
	}
	// The group index serves a group query.
	p := e.mustQuery(t, own, `{"collection":"notes","collectionGroup":true,"orderBy":[{"field":"at","direction":"desc"}],"limit":3}`)
	if got := paths(p.Documents); len(got) != 3 || got[0] != "users/u1/notes/n29" || p.NextCursor == "" {
		t.Errorf("group query: %q, cursor %q", got, p.NextCursor)
	}
	// An empty list removes every index.
	r = e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), `{"indexes":[]}`)
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"indexes":[]}`)) {
		t.Errorf("PUT []: %d %s", r.Status, r.Body)
	}
	if raw, l := e.mustIndexes(t); len(l.Indexes) != 0 {
		t.Errorf("after PUT []: %s", raw)
	}
	// The owner of another project sees only its own.
	p2 := e.c.CreateProject(0)
	r = e.mustSend(t, http.MethodGet, "/api/db/indexes", bearer(p2.OwnerToken), "")
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"indexes":[]}`)) {
		t.Errorf("another project's indexes: %d %s", r.Status, r.Body)
	}
	// consistency=local is accepted.
	r = e.mustSend(t, http.MethodGet, "/api/db/indexes?consistency=local", bearer(own), "")
	if r.Status != http.StatusOK {
		t.Errorf("GET indexes?consistency=local: %d %s", r.Status, r.Body)
	}
}
