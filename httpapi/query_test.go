package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
)

// POST /api/db/query through a real node: every refusal names its field
// and status, answers have the documents' shape, select, count, cursors,
// collection groups, consistency on an edge node, rule filtering and
// index_required followed by the index it names.

// queryPage is the answer of a query without count.
type queryPage struct {
	Documents  []doc  `json:"documents"`
	NextCursor string `json:"nextCursor"`
}

// mustQuery runs body as tok and returns the page, failing on anything
// but 200.
func (e *env) mustQuery(t testing.TB, tok, body string) queryPage {
	t.Helper()
	r := e.mustSend(t, http.MethodPost, "/api/db/query", bearer(tok), body)
	if r.Status != http.StatusOK {
		t.Fatalf("query %s: status %d: %.500s", body, r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var top map[string]json.RawMessage
	mustDecode(t, r.Body, &top)
	for k := range top {
		if k != "documents" && k != "nextCursor" {
			t.Errorf("query answer has member %q: %.300s", k, r.Body)
		}
	}
	var p queryPage
	mustDecode(t, r.Body, &p)
	if p.Documents == nil {
		t.Fatalf("query answer without a documents array: %.300s", r.Body)
	}
	if _, ok := top["nextCursor"]; ok && p.NextCursor == "" {
		t.Errorf("nextCursor present but empty: %.300s", r.Body)
	}
	return p
}

// queryAll follows nextCursor from body (a query without startAfter) until
// it is absent and returns every page's paths.
func (e *env) queryAll(t testing.TB, tok, body string) [][]string {
	t.Helper()
	var pages [][]string
	cursor := ""
	for n := 0; n < 100; n++ {
		b := body
		if cursor != "" {
			b = strings.TrimSuffix(strings.TrimSpace(body), "}") + `,"startAfter":` + mustJSON(t, cursor) + "}"
		}
		p := e.mustQuery(t, tok, b)
		pages = append(pages, paths(p.Documents))
		if p.NextCursor == "" {
			return pages
		}
		cursor = p.NextCursor
	}
	t.Fatalf("query %s: more than 100 pages", body)
	return nil
}

func paths(ds []doc) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Collection)
	}
	return out
}

func TestQueryRefusals(t *testing.T) {
	e := newEnv(t)
	coll := "orders" + e.uniq()
	own := e.p.OwnerToken
	for i := 0; i < 3; i++ {
		e.mustPut(t, own, fmt.Sprintf("%s/o%d", coll, i), fmt.Sprintf(`{"status":"open","n":%d}`, i))
	}
	// A real cursor, of a query other than the one it is sent with below.
	first := e.mustQuery(t, own, fmt.Sprintf(`{"collection":%q,"orderBy":[{"field":"n"}],"limit":1}`, coll))
	if first.NextCursor == "" {
		t.Fatalf("a page of 1 of 3 documents has no nextCursor")
	}
	e.extra = vars{"coll": coll, "cursor": first.NextCursor}
	const q = "/api/db/query"
	post := func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: http.MethodPost, url: q, body: body, status: status, code: code, field: field}
	}
	e.run(t, []scenario{
		post("bad JSON", `{"collection":`, 400, "invalid_json", "-"),
		post("not an object", `["orders"]`, 400, "invalid_argument", ""),
		post("unknown member", `{"collection":"{coll}","filter":[]}`, 400, "invalid_argument", "filter"),
		post("collection missing", `{"where":[]}`, 400, "", "collection"),
		post("collection of the wrong type", `{"collection":5}`, 400, "invalid_argument", "collection"),
		post("reserved collection", `{"collection":"_users"}`, 400, "invalid_path", "collection"),
		post("reserved segment", `{"collection":"a/_rules/b"}`, 400, "invalid_path", "collection"),
		post("dot segment", `{"collection":"a/../b"}`, 400, "invalid_path", "collection"),
		post("empty segment", `{"collection":"a//b"}`, 400, "", "collection"),
		post("group of a path", `{"collection":"a/b","collectionGroup":true}`, 400, "", "collection"),
		post("unknown operator", `{"collection":"{coll}","where":[{"field":"n","op":"=~","value":1}]}`, 400, "invalid_argument", "where[0].op"),
		post("unknown operator second", `{"collection":"{coll}","where":[{"field":"n","op":"==","value":1},{"field":"n","op":"like","value":1}]}`, 400, "invalid_argument", "where[1].op"),
		post("in without an array", `{"collection":"{coll}","where":[{"field":"n","op":"in","value":1}]}`, 400, "invalid_argument", "where[0].value"),
		post("in with an empty array", `{"collection":"{coll}","where":[{"field":"n","op":"in","value":[]}]}`, 400, "invalid_argument", "where[0].value"),
		post("exists without a boolean", `{"collection":"{coll}","where":[{"field":"n","op":"exists","value":"yes"}]}`, 400, "invalid_argument", "where[0].value"),
		post("array-contains-any with 31 values", `{"collection":"{coll}","where":[{"field":"n","op":"array-contains-any","value":[`+strings.Repeat("1,", 30)+`1]}]}`, 400, "invalid_argument", "where[0].value"),
		post("empty field", `{"collection":"{coll}","where":[{"field":"","op":"==","value":1}]}`, 400, "invalid_argument", "where[0].field"),
		post("where of the wrong type", `{"collection":"{coll}","where":{"field":"n"}}`, 400, "invalid_argument", "where"),
		post("bad direction", `{"collection":"{coll}","orderBy":[{"field":"n","direction":"up"}]}`, 400, "invalid_argument", "orderBy[0].direction"),
		post("limit 0", `{"collection":"{coll}","limit":0}`, 400, "invalid_argument", "limit"),
		post("limit 1001", `{"collection":"{coll}","limit":1001}`, 400, "invalid_argument", "limit"),
		post("limit of the wrong type", `{"collection":"{coll}","limit":"20"}`, 400, "invalid_argument", "limit"),
		post("two range fields", `{"collection":"{coll}","where":[{"field":"n","op":">","value":1},{"field":"m","op":"<","value":1}]}`, 400, "invalid_query", "where[1].field"),
		post("range field not ordered first", `{"collection":"{coll}","where":[{"field":"n","op":">","value":1}],"orderBy":[{"field":"status"}]}`, 400, "invalid_query", "orderBy[0].field"),
		post("count with select", `{"collection":"{coll}","count":true,"select":["n"]}`, 400, "invalid_query", "select"),
		post("value missing", `{"collection":"{coll}","where":[{"field":"n","op":"=="}]}`, 400, "invalid_argument", "where[0].value"),
		post("unknown member of a filter", `{"collection":"{coll}","where":[{"field":"n","op":"==","value":1,"not":true}]}`, 400, "invalid_argument", "where[0].not"),
		post("trailing data", `{"collection":"{coll}"} {}`, 400, "invalid_json", "-"),
		post("bad cursor", `{"collection":"{coll}","orderBy":[{"field":"n"}],"startAfter":"not-a-cursor"}`, 400, "invalid_cursor", "startAfter"),
		post("cursor of another query", `{"collection":"{coll}","where":[{"field":"status","op":"==","value":"open"}],"orderBy":[{"field":"n"}],"startAfter":"{cursor}"}`, 400, "invalid_cursor", "startAfter"),
		post("cursor of another collection", `{"collection":"{coll}x","orderBy":[{"field":"n"}],"startAfter":"{cursor}"}`, 400, "invalid_cursor", "startAfter"),
		post("key twice", `{"collection":"{coll}","collection":"x"}`, 400, "invalid_argument", ""),
		{name: "unknown query parameter", method: http.MethodPost, url: q + "?where=x", body: `{"collection":"{coll}"}`, status: 400, code: "invalid_argument", field: "where"},
		{name: "bad consistency", method: http.MethodPost, url: q + "?consistency=eventual", body: `{"collection":"{coll}"}`, status: 400, code: "invalid_argument", field: "consistency"},
		{name: "bad X-Min-Revision", method: http.MethodPost, url: q, headers: map[string]string{"X-Min-Revision": "soon"}, body: `{"collection":"{coll}"}`, status: 400, code: "invalid_argument", field: "X-Min-Revision"},
		{name: "GET", url: q, status: 405, code: "method_not_allowed", check: allowIs("POST")},
		{name: "PUT", method: http.MethodPut, url: q, body: `{"collection":"{coll}"}`, status: 405, code: "method_not_allowed", check: allowIs("POST")},
		{name: "DELETE", method: http.MethodDelete, url: q, status: 405, code: "method_not_allowed", check: allowIs("POST")},
		{name: "no body", method: http.MethodPost, url: q, status: 415, code: "unsupported_media_type"},
		{name: "text body", method: http.MethodPost, url: q, headers: map[string]string{"Content-Type": "text/plain"}, body: `{"collection":"{coll}"}`, status: 415, code: "unsupported_media_type"},
		{name: "no token", as: "none", method: http.MethodPost, url: q, body: `{"collection":"{coll}"}`, status: 401, code: "missing_token"},
		{name: "bad token", as: "none", method: http.MethodPost, url: q, headers: map[string]string{"Authorization": "Bearer ebs_nope"}, body: `{"collection":"{coll}"}`, status: 401, code: "invalid_token"},
		{name: "other project id", method: http.MethodPost, url: q, headers: map[string]string{"X-Project-Id": "p-other"}, body: `{"collection":"{coll}"}`, status: 403, code: "project_mismatch"},
		{name: "wrong API key", method: http.MethodPost, url: q, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "ebk_wrong"}, body: `{"collection":"{coll}"}`, status: 401, code: "invalid_api_key"},
		{name: "right API key", method: http.MethodPost, url: q, headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}, body: `{"collection":"{coll}","count":true}`, status: 200, json: `{"count":3}`},
	})
}

func TestQuery(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	coll := "shop/" + e.uniq() + "/orders"
	type order struct {
		id     string
		status string
		total  float64
		at     int
	}
	orders := []order{
		{"a", "open", 12, 5}, {"b", "open", 7, 9}, {"c", "done", 30, 1}, {"d", "open", 55, 3},
		{"e", "open", 12, 7}, {"f", "void", 1, 2}, {"g", "open", 20, 8}, {"h", "done", 9, 4},
	}
	for _, o := range orders {
		e.mustPut(t, own, coll+"/"+o.id, fmt.Sprintf(`{"status":%q,"total":%v,"createdAt":%d,"meta":{"tags":["x"],"by":"u%s"}}`, o.status, o.total, o.at, o.id))
	}
	e.mustPut(t, own, coll+"/a/items/1", `{"status":"open","createdAt":100}`) // a grandchild: never in a collection query
	e.mustPut(t, own, coll+"x/z", `{"status":"open","createdAt":100}`)        // a sibling collection

	// Open orders, newest first: the documents in the shape GET answers.
	body := fmt.Sprintf(`{"collection":%q,"where":[{"field":"status","op":"==","value":"open"}],"orderBy":[{"field":"createdAt","direction":"desc"}],"limit":20}`, coll)
	r := e.mustSend(t, http.MethodPost, "/api/db/query", bearer(own), body)
	if r.Status != http.StatusOK {
		t.Fatalf("query: %d %s", r.Status, r.Body)
	}
	var raw struct {
		Documents []json.RawMessage `json:"documents"`
	}
	mustDecode(t, r.Body, &raw)
	want := []string{"b", "g", "e", "a", "d"}
	if len(raw.Documents) != len(want) {
		t.Fatalf("open orders: %d documents, want %d: %s", len(raw.Documents), len(want), r.Body)
	}
	for i, d := range raw.Documents {
		got := checkDoc(t, reply{Status: 200, Header: r.Header, Body: d}, coll+"/"+want[i], false)
		stored, _ := e.get(t, coll+"/"+want[i])
		if !jsonEqual(got.Data, stored.Data) || got.Revision != stored.Revision || got.CreateTime != stored.CreateTime || got.UpdateTime != stored.UpdateTime {
			t.Errorf("document %d = %s, want it as GET answers it: %+v", i, d, stored)
		}
	}
	if strings.Contains(string(r.Body), "nextCursor") {
		t.Errorf("a complete answer has a nextCursor: %s", r.Body)
	}

	check := func(name, body string, want ...string) {
		t.Helper()
		var full []string
		for _, w := range want {
			full = append(full, coll+"/"+w)
		}
		if got := paths(e.mustQuery(t, own, body).Documents); !slices.Equal(got, full) {
			t.Errorf("%s: got %q, want %q", name, got, full)
		}
	}
	q := func(rest string) string { return fmt.Sprintf(`{"collection":%q,%s}`, coll, rest) }
	check("by path without orderBy", fmt.Sprintf(`{"collection":%q}`, coll), "a", "b", "c", "d", "e", "f", "g", "h")
	check("range implies its order", q(`"where":[{"field":"total","op":">=","value":12}]`), "a", "e", "g", "c", "d")
	check("two orders, path tiebreaker", q(`"orderBy":[{"field":"total"},{"field":"status","direction":"desc"}],"where":[{"field":"total","op":"<","value":13}]`), "f", "b", "h", "e", "a")
	check("desc tiebreaker is desc", q(`"orderBy":[{"field":"total","direction":"desc"}],"where":[{"field":"total","op":">=","value":12},{"field":"total","op":"<=","value":12}]`), "e", "a")
	check("an order on a field == fixes orders nothing", q(`"orderBy":[{"field":"total","direction":"desc"}],"where":[{"field":"total","op":"==","value":12}]`), "a", "e")
	check("in", q(`"where":[{"field":"status","op":"in","value":["done","void"]}]`), "c", "f", "h")
	check("not-in", q(`"where":[{"field":"status","op":"not-in","value":["open","done"]}]`), "f")
	check("dotted field", q(`"where":[{"field":"meta.by","op":"==","value":"ud"}]`), "d")
	check("array-contains", q(`"where":[{"field":"meta.tags","op":"array-contains","value":"x"}],"limit":2`), "a", "b")
	check("exists false", q(`"where":[{"field":"meta.nope","op":"exists","value":false}],"orderBy":[{"field":"createdAt"}],"limit":3`), "c", "f", "d")

	// select keeps the selected fields only, nesting included.
	p := e.mustQuery(t, own, q(`"where":[{"field":"status","op":"==","value":"void"}],"select":["total","meta.by"]`))
	if len(p.Documents) != 1 || !jsonEqual(p.Documents[0].Data, []byte(`{"total":1,"meta":{"by":"uf"}}`)) {
		t.Errorf("select: %+v, want the data {total, meta.by} of f", p.Documents)
	}

	// count answers {"count": N} only, and ignores limit.
	r = e.mustSend(t, http.MethodPost, "/api/db/query", bearer(own), q(`"where":[{"field":"status","op":"==","value":"open"}],"count":true,"limit":2`))
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"count":5}`)) {
		t.Errorf("count: %d %s, want {\"count\":5}", r.Status, r.Body)
	}

	// Cursor paging: pages of 3 through every order by total, descending.
	pages := e.queryAll(t, own, q(`"orderBy":[{"field":"total","direction":"desc"}],"limit":3`))
	var flat []string
	for _, pg := range pages {
		flat = append(flat, strings.Join(pg, " "))
	}
	wantPages := []string{
		strings.Join([]string{coll + "/d", coll + "/c", coll + "/g"}, " "),
		strings.Join([]string{coll + "/e", coll + "/a", coll + "/h"}, " "),
		strings.Join([]string{coll + "/b", coll + "/f"}, " "),
	}
	if !slices.Equal(flat, wantPages) {
		t.Errorf("pages:\n%q\nwant\n%q", flat, wantPages)
	}

	// A cursor continues after the document it ends at by value, whatever
	// was written meanwhile: a new order between pages is found on the
	// page it sorts into, and one that sorts before the cursor is not.
	first := e.mustQuery(t, own, q(`"orderBy":[{"field":"total","direction":"desc"}],"limit":3`))
	e.mustPut(t, own, coll+"/i", `{"status":"open","total":15,"createdAt":10}`)
	e.mustPut(t, own, coll+"/j", `{"status":"open","total":99,"createdAt":11}`)
	e.mustSend(t, http.MethodDelete, docQuery(coll+"/e"), bearer(own), "")
	next := e.mustQuery(t, own, q(`"orderBy":[{"field":"total","direction":"desc"}],"limit":3,"startAfter":`+mustJSON(t, first.NextCursor)))
	if got, want := paths(next.Documents), []string{coll + "/i", coll + "/a", coll + "/h"}; !slices.Equal(got, want) {
		t.Errorf("page after concurrent writes: %q, want %q", got, want)
	}
}

func TestQueryCollectionGroup(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	name := "notes" + e.uniq()
	// Notes of the two users (under users/{uid}/, which the default rules
	// let each user read) and elsewhere, at several depths.
	docs := map[string]string{
		"users/" + e.user.ID + "/" + name + "/n1":             `{"at":3}`,
		"users/" + e.user.ID + "/" + name + "/n2":             `{"at":1}`,
		"users/" + e.other.ID + "/" + name + "/n3":            `{"at":2}`,
		"users/" + e.user.ID + "/projects/p1/" + name + "/n4": `{"at":4}`,
		name + "/n5":                `{"at":5}`,
		"teams/t1/" + name + "/n6":  `{"at":0}`,
		"teams/t1/" + name + "x/n7": `{"at":6}`, // another name
		"users/" + e.user.ID + "/" + name + "/n1/" + name + "/deeper": `{"at":7}`,
	}
	for p, d := range docs {
		e.mustPut(t, own, p, d)
	}
	body := fmt.Sprintf(`{"collection":%q,"collectionGroup":true,"orderBy":[{"field":"at"}]}`, name)
	got := paths(e.mustQuery(t, own, body).Documents)
	want := []string{
		"teams/t1/" + name + "/n6", "users/" + e.user.ID + "/" + name + "/n2", "users/" + e.other.ID + "/" + name + "/n3",
		"users/" + e.user.ID + "/" + name + "/n1", "users/" + e.user.ID + "/projects/p1/" + name + "/n4", name + "/n5",
		"users/" + e.user.ID + "/" + name + "/n1/" + name + "/deeper",
	}
	if !slices.Equal(got, want) {
		t.Errorf("owner's group query:\n%q\nwant\n%q", got, want)
	}
	// A user sees the group's documents the rules let it read: its own.
	got = paths(e.mustQuery(t, e.user.Token, body).Documents)
	want = []string{
		"users/" + e.user.ID + "/" + name + "/n2", "users/" + e.user.ID + "/" + name + "/n1",
		"users/" + e.user.ID + "/projects/p1/" + name + "/n4", "users/" + e.user.ID + "/" + name + "/n1/" + name + "/deeper",
	}
	if !slices.Equal(got, want) {
		t.Errorf("user's group query:\n%q\nwant\n%q", got, want)
	}
	r := e.mustSend(t, http.MethodPost, "/api/db/query", bearer(e.other.Token), fmt.Sprintf(`{"collection":%q,"collectionGroup":true,"count":true}`, name))
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"count":1}`)) {
		t.Errorf("other's group count: %d %s, want {\"count\":1}", r.Status, r.Body)
	}
}

// Rules filter the results: a document the caller may not read (by a rule
// that reads its data) is skipped, never returned; pages hold up to limit
// readable documents and cursors continue after the last one returned.
func TestQueryRulesFilter(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	rules := `{"rules":[
		{"match":"notes/{id}","read":"auth.role == 'owner' || resource.data.owner == auth.uid","write":"auth.role == 'owner'"},
		{"match":"open/{id}","read":"true","write":"auth.role == 'owner'"},
		{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	if r := e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(own), rules); r.Status != http.StatusOK {
		t.Fatalf("set rules: %d %s", r.Status, r.Body)
	}
	var mine []string
	for i := 0; i < 12; i++ {
		who := e.other.ID
		if i%3 == 1 {
			who = e.user.ID
			mine = append(mine, fmt.Sprintf("notes/n%02d", i))
		}
		e.mustPut(t, own, fmt.Sprintf("notes/n%02d", i), fmt.Sprintf(`{"owner":%q,"i":%d}`, who, i))
		e.mustPut(t, own, fmt.Sprintf("open/n%02d", i), fmt.Sprintf(`{"i":%d}`, i))
		e.mustPut(t, own, fmt.Sprintf("closed/n%02d", i), fmt.Sprintf(`{"i":%d}`, i))
	}
	all := func(tok, body string) []string { return slices.Concat(e.queryAll(t, tok, body)...) }

	// Listing notes is not allowed to the user (no rule lets it read
	// "notes" itself), but a query is judged per document.
	if got := all(e.user.Token, `{"collection":"notes","orderBy":[{"field":"i"}],"limit":2}`); !slices.Equal(got, mine) {
		t.Errorf("user's notes: %q, want %q", got, mine)
	}
	pages := e.queryAll(t, e.user.Token, `{"collection":"notes","orderBy":[{"field":"i"}],"limit":2}`)
	if len(pages) < 2 || len(pages[0]) != 2 {
		t.Errorf("pages %q: want a first page filled with 2 readable documents", pages)
	}
	// A filter on what the rule reads gives the same answer.
	body := fmt.Sprintf(`{"collection":"notes","where":[{"field":"owner","op":"==","value":%q}]}`, e.user.ID)
	if got := all(e.user.Token, body); !slices.Equal(got, mine) {
		t.Errorf("user's notes by owner: %q, want %q", got, mine)
	}
	body = fmt.Sprintf(`{"collection":"notes","where":[{"field":"owner","op":"==","value":%q}]}`, e.other.ID)
	if got := all(e.user.Token, body); len(got) != 0 {
		t.Errorf("user queried other's notes and got %q", got)
	}
	r := e.mustSend(t, http.MethodPost, "/api/db/query", bearer(e.user.Token), `{"collection":"notes","count":true}`)
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(fmt.Sprintf(`{"count":%d}`, len(mine)))) {
		t.Errorf("user's count of notes: %d %s, want %d", r.Status, r.Body, len(mine))
	}
	// Every document readable by its path; none readable at all.
	if got := all(e.user.Token, `{"collection":"open","limit":5}`); len(got) != 12 {
		t.Errorf("user's open documents: %d, want 12", len(got))
	}
	if got := all(e.user.Token, `{"collection":"closed","limit":5}`); len(got) != 0 {
		t.Errorf("user read closed documents: %q", got)
	}
	if got := all(own, `{"collection":"closed","limit":5}`); len(got) != 12 {
		t.Errorf("owner's closed documents: %d, want 12", len(got))
	}
	// A bad cursor is refused even where nothing is readable.
	r = e.mustSend(t, http.MethodPost, "/api/db/query", bearer(e.user.Token), `{"collection":"closed","startAfter":"bogus"}`)
	checkError(t, r, http.StatusBadRequest, "invalid_cursor", "startAfter")
}

// consistency=local with X-Min-Revision on an edge node answers once the
// node has applied that revision, so a query there sees the write.
func TestQueryConsistencyOnEdge(t *testing.T) {
	e := newEnvWith(t, nodetest.Options{Voters: 1, Edges: 1})
	edge := &env{c: e.c, base: e.c.Nodes[1].URL(), p: e.p, user: e.user, other: e.other}
	own := e.p.OwnerToken
	coll := "c" + e.uniq()
	for i := 0; i < 20; i++ {
		w := e.mustPut(t, own, fmt.Sprintf("%s/d%02d", coll, i), fmt.Sprintf(`{"i":%d}`, i))
		h := map[string]string{"Authorization": "Bearer " + own, "X-Min-Revision": strconv.FormatUint(w.Revision, 10)}
		r := edge.mustSend(t, http.MethodPost, "/api/db/query?consistency=local", h, fmt.Sprintf(`{"collection":%q,"where":[{"field":"i","op":"==","value":%d}]}`, coll, i))
		if r.Status != http.StatusOK {
			t.Fatalf("local query on the edge: %d %s", r.Status, r.Body)
		}
		var p queryPage
		mustDecode(t, r.Body, &p)
		if len(p.Documents) != 1 || p.Documents[0].Revision != w.Revision {
			t.Fatalf("local query with X-Min-Revision %d on the edge: %s, want the document just written", w.Revision, r.Body)
		}
	}
	// Strong (the default) on the edge sees every write too.
	r := edge.mustSend(t, http.MethodPost, "/api/db/query", bearer(own), fmt.Sprintf(`{"collection":%q,"count":true}`, coll))
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"count":20}`)) {
		t.Errorf("strong count on the edge: %d %s", r.Status, r.Body)
	}
	// An X-Min-Revision the cluster never reaches is 503 after the read
	// timeout, with Retry-After.
	h := map[string]string{"Authorization": "Bearer " + own, "X-Min-Revision": "999999999"}
	r = edge.mustSend(t, http.MethodPost, "/api/db/query?consistency=local", h, fmt.Sprintf(`{"collection":%q}`, coll))
	checkError(t, r, http.StatusServiceUnavailable, "unavailable", "")
}

// A query no index serves that would examine more than --query-scan-limit
// documents is refused with index_required naming the index; once that
// index is declared and built, the same query is answered from it.
func TestQueryIndexRequired(t *testing.T) {
	const limit = 5
	e := newEnvWith(t, nodetest.Options{Voters: 1, QueryScanLimit: limit})
	own := e.p.OwnerToken
	coll := "orders" + e.uniq()
	var writes []string
	for i := 0; i < 40; i++ {
		status := []string{"open", "done"}[i%2]
		writes = append(writes, fmt.Sprintf(`{"op":"set","collection":"%s/o%02d","data":{"status":%q,"createdAt":%d}}`, coll, i, status, (i*7)%40))
	}
	if r := e.mustSend(t, http.MethodPost, "/api/db/batch", bearer(own), `{"writes":[`+strings.Join(writes, ",")+`]}`); r.Status != http.StatusOK {
		t.Fatalf("batch: %d %.300s", r.Status, r.Body)
	}
	// Small enough to scan: a collection of 3.
	small := "small" + e.uniq()
	for i := 0; i < 3; i++ {
		e.mustPut(t, own, fmt.Sprintf("%s/s%d", small, i), fmt.Sprintf(`{"n":%d}`, i))
	}
	if got := paths(e.mustQuery(t, own, fmt.Sprintf(`{"collection":%q,"orderBy":[{"field":"n","direction":"desc"}]}`, small)).Documents); len(got) != 3 || got[0] != small+"/s2" {
		t.Errorf("small collection: %q", got)
	}

	body := fmt.Sprintf(`{"collection":%q,"where":[{"field":"status","op":"==","value":"open"}],"orderBy":[{"field":"createdAt","direction":"desc"}],"limit":4}`, coll)
	r := e.mustSend(t, http.MethodPost, "/api/db/query", bearer(own), body)
	checkError(t, r, http.StatusBadRequest, "index_required", "-")
	var eb struct{ Error struct{ Message string } }
	mustDecode(t, r.Body, &eb)
	wantIx := fmt.Sprintf(`{"collection":%q,"fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]}`, coll)
	msg := eb.Error.Message
	if !strings.Contains(msg, "create the index "+wantIx+" with PUT /api/db/indexes") || !strings.Contains(msg, strconv.Itoa(limit)) {
		t.Fatalf("index_required message %q does not name the index %s and the limit %d", msg, wantIx, limit)
	}
	// Also for a count.
	r = e.mustSend(t, http.MethodPost, "/api/db/query", bearer(own), fmt.Sprintf(`{"collection":%q,"where":[{"field":"createdAt","op":">","value":3}],"count":true}`, coll))
	checkError(t, r, http.StatusBadRequest, "index_required", "-")

	// Declare the named index, as the message says, and wait until ready.
	r = e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), `{"indexes":[`+wantIx+`]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT indexes: %d %s", r.Status, r.Body)
	}
	var put indexList
	mustDecode(t, r.Body, &put)
	if len(put.Indexes) != 1 || (put.Indexes[0].State != "building" && put.Indexes[0].State != "ready") {
		t.Fatalf("PUT indexes answered %s", r.Body)
	}
	id := put.Indexes[0].ID
	e.waitIndexReady(t, id)

	// The same query is now answered, in order, from the index: more
	// documents match than the scan limit allows examining.
	var want []string
	for at := 39; at >= 0; at-- {
		for i := 0; i < 40; i += 2 {
			if (i*7)%40 == at {
				want = append(want, fmt.Sprintf("%s/o%02d", coll, i))
			}
		}
	}
	pages := e.queryAll(t, own, body)
	if got := slices.Concat(pages...); !slices.Equal(got, want) {
		t.Errorf("indexed query:\n%q\nwant\n%q", got, want)
	}
	if len(pages[0]) != 4 {
		t.Errorf("first page of the indexed query: %d documents, want 4", len(pages[0]))
	}
	plan := e.storePlan(t, body, limit)
	if plan != "index:"+id {
		t.Errorf("plan of the indexed query = %q, want index:%s", plan, id)
	}

	// Rules skipping most documents of an indexed query: each request
	// examines at most the scan limit, so pages come back short or empty
	// with a cursor after the last document examined, and following the
	// cursors yields exactly the readable ones, in order.
	feed := "feed" + e.uniq()
	rules := fmt.Sprintf(`{"rules":[
		{"match":"%s/{id}","read":"auth.role == 'owner' || resource.data.vis == true","write":"auth.role == 'owner'"},
		{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`, feed)
	if r := e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(own), rules); r.Status != http.StatusOK {
		t.Fatalf("set rules: %d %s", r.Status, r.Body)
	}
	writes = writes[:0]
	visible := map[int]bool{3: true, 17: true, 25: true}
	for i := 0; i < 30; i++ {
		writes = append(writes, fmt.Sprintf(`{"op":"set","collection":"%s/f%02d","data":{"status":"open","createdAt":%d,"vis":%t}}`, feed, i, i, visible[i]))
	}
	if r := e.mustSend(t, http.MethodPost, "/api/db/batch", bearer(own), `{"writes":[`+strings.Join(writes, ",")+`]}`); r.Status != http.StatusOK {
		t.Fatalf("batch: %d %.300s", r.Status, r.Body)
	}
	feedIx := fmt.Sprintf(`{"collection":%q,"fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]}`, feed)
	r = e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), `{"indexes":[`+wantIx+`,`+feedIx+`]}`)
	var both indexList
	mustDecode(t, r.Body, &both)
	if r.Status != http.StatusOK || len(both.Indexes) != 2 || both.Indexes[0].ID != id || both.Indexes[0].State != "ready" {
		t.Fatalf("PUT two indexes: %d %s, want the first one still ready", r.Status, r.Body)
	}
	e.waitIndexReady(t, both.Indexes[1].ID)
	feedQuery := fmt.Sprintf(`{"collection":%q,"where":[{"field":"status","op":"==","value":"open"}],"orderBy":[{"field":"createdAt","direction":"desc"}],"limit":2}`, feed)
	pages = e.queryAll(t, e.user.Token, feedQuery)
	want = []string{feed + "/f25", feed + "/f17", feed + "/f03"}
	if got := slices.Concat(pages...); !slices.Equal(got, want) {
		t.Errorf("user's feed: %q, want %q", got, want)
	}
	empty := 0
	for _, pg := range pages[:len(pages)-1] {
		if len(pg) == 0 {
			empty++
		}
	}
	if len(pages) < 6 || empty == 0 {
		t.Errorf("user's feed in %d pages (%q): want short and empty pages with cursors, %d documents examined per request at most", len(pages), pages, limit)
	}
	// The owner reads every document: full pages.
	pages = e.queryAll(t, own, feedQuery)
	if got := slices.Concat(pages...); len(got) != 30 || got[0] != feed+"/f29" || got[29] != feed+"/f00" || len(pages[0]) != 2 {
		t.Errorf("owner's feed: %d documents in %d pages", len(got), len(pages))
	}
}

// storePlan runs body through the node's store directly and returns the
// plan it chose (the API does not show it).
func (e *env) storePlan(t *testing.T, body string, scanLimit int) string {
	t.Helper()
	n := e.c.Nodes[0].Node
	cq, err := query.Parse([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	res, err := n.Store.Query(t.Context(), raftstore.QueryRequest{ProjectID: e.p.ID, Query: cq, ScanLimit: scanLimit})
	if err != nil {
		t.Fatalf("store query: %v", err)
	}
	return res.Plan
}

// waitIndexReady polls GET /api/db/indexes until the index id is ready.
func (e *env) waitIndexReady(t *testing.T, id string) {
	t.Helper()
	nodetest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		r, err := e.send(t.Context(), http.MethodGet, "/api/db/indexes", bearer(e.p.OwnerToken), "")
		if err != nil {
			return err
		}
		var l indexList
		if err := json.Unmarshal(r.Body, &l); err != nil || r.Status != http.StatusOK {
			return fmt.Errorf("GET indexes: %d %s", r.Status, r.Body)
		}
		for _, ix := range l.Indexes {
			if ix.ID == id {
				if ix.State == "ready" {
					return nil
				}
				return fmt.Errorf("index %s is %s", id, ix.State)
			}
		}
		return fmt.Errorf("index %s is not declared: %s", id, r.Body)
	})
}
