package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

type childItem struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Document bool   `json:"document"`
	Children bool   `json:"children"`
}

type childrenPage struct {
	Children      []childItem `json:"children"`
	NextPageToken string      `json:"nextPageToken"`
}

func childrenURL(coll string, limit int, token string) string {
	q := url.Values{}
	if coll != "" {
		q.Set("collection", coll)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if token != "" {
		q.Set("pageToken", token)
	}
	if len(q) == 0 {
		return "/api/db/children"
	}
	return "/api/db/children?" + q.Encode()
}

func (e *env) mustChildren(t *testing.T, coll string, limit int, token string) childrenPage {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, childrenURL(coll, limit, token), bearer(e.p.OwnerToken), "")
	if r.Status != http.StatusOK {
		t.Fatalf("children of %q: status %d: %s", coll, r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var out childrenPage
	mustDecode(t, r.Body, &out)
	if out.Children == nil {
		t.Fatalf("children of %q: no children array: %s", coll, r.Body)
	}
	return out
}

// allChildren follows the pages of coll, checking each page's size.
func (e *env) allChildren(t *testing.T, coll string, limit int) ([]childItem, int) {
	t.Helper()
	var all []childItem
	token := ""
	pages := 0
	for {
		pages++
		if pages > 1000 {
			t.Fatalf("children of %q: paging does not end", coll)
		}
		p := e.mustChildren(t, coll, limit, token)
		all = append(all, p.Children...)
		if p.NextPageToken == "" {
			return all, pages
		}
		if len(p.Children) != limit {
			t.Fatalf("children of %q: a page of %d (limit %d) has a nextPageToken", coll, len(p.Children), limit)
		}
		token = p.NextPageToken
	}
}

// TestDBChildren covers GET /api/db/children through HTTP against a real
// node: nested trees, paging, the root, who may browse, bad input.
func TestDBChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.p.OwnerToken
	for _, p := range []string{
		"alpha/a1",           // alpha: only an intermediate node
		"beta", "beta/b1/c1", // beta: a document with a subtree; b1 only intermediate
		"gamma/g/h/i", // deep
		"delta",       // a leaf document at the root
	} {
		e.mustPut(t, owner, p, `{"v":1}`)
	}
	for i := range 10 {
		e.mustPut(t, owner, fmt.Sprintf("pg/p%02d", i), `{"i":1}`)
	}
	// A child with many descendants, and siblings that sort around it.
	e.mustPut(t, owner, "tree/k-1", `{}`)
	for i := range 30 {
		e.mustPut(t, owner, fmt.Sprintf("tree/k/d%02d/x", i), `{}`)
	}
	e.mustPut(t, owner, "tree/k0", `{}`)

	t.Run("root", func(t *testing.T) {
		got, _ := e.allChildren(t, "", 100)
		want := []childItem{
			{"alpha", "alpha", false, true},
			{"beta", "beta", true, true},
			{"delta", "delta", true, false},
			{"gamma", "gamma", false, true},
			{"pg", "pg", false, true},
			{"tree", "tree", false, true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("root = %+v, want %+v (no reserved _ segment may appear)", got, want)
		}
		// collection= (empty) is the root too.
		r := e.mustSend(t, http.MethodGet, "/api/db/children?collection=", bearer(owner), "")
		var p childrenPage
		mustDecode(t, r.Body, &p)
		if r.Status != 200 || !reflect.DeepEqual(p.Children, want) {
			t.Errorf("collection= : %d %s", r.Status, r.Body)
		}
	})
	t.Run("nested", func(t *testing.T) {
		got, _ := e.allChildren(t, "beta", 10)
		if want := []childItem{{"b1", "beta/b1", false, true}}; !reflect.DeepEqual(got, want) {
			t.Errorf("beta = %+v, want %+v", got, want)
		}
		got, _ = e.allChildren(t, "beta/b1", 10)
		if want := []childItem{{"c1", "beta/b1/c1", true, false}}; !reflect.DeepEqual(got, want) {
			t.Errorf("beta/b1 = %+v, want %+v", got, want)
		}
		got, _ = e.allChildren(t, "tree", 1)
		want := []childItem{{"k", "tree/k", false, true}, {"k-1", "tree/k-1", true, false}, {"k0", "tree/k0", true, false}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tree = %+v, want %+v", got, want)
		}
		if got, _ := e.allChildren(t, "tree/k", 7); len(got) != 30 || got[0].Path != "tree/k/d00" || !got[0].Children || got[0].Document {
			t.Errorf("tree/k: %d children, first %+v", len(got), got[0])
		}
		if got, _ := e.allChildren(t, "delta", 10); len(got) != 0 {
			t.Errorf("a leaf has children %+v", got)
		}
		if got, _ := e.allChildren(t, "nowhere/at/all", 10); len(got) != 0 {
			t.Errorf("a missing path has children %+v", got)
		}
	})
	t.Run("paging", func(t *testing.T) {
		for _, tc := range []struct{ limit, pages int }{{1, 10}, {3, 4}, {5, 2}, {10, 1}, {11, 1}, {1000, 1}} {
			got, pages := e.allChildren(t, "pg", tc.limit)
			if len(got) != 10 || pages != tc.pages {
				t.Errorf("limit %d: %d children in %d pages, want 10 in %d", tc.limit, len(got), pages, tc.pages)
				continue
			}
			for i, c := range got {
				if want := (childItem{fmt.Sprintf("p%02d", i), fmt.Sprintf("pg/p%02d", i), true, false}); c != want {
					t.Errorf("limit %d: child %d = %+v, want %+v", tc.limit, i, c, want)
				}
			}
		}
		// The default page is 100.
		if p := e.mustChildren(t, "pg", 0, ""); len(p.Children) != 10 || p.NextPageToken != "" {
			t.Errorf("default limit: %+v", p)
		}
		// A token continues after the last name of its page, on any call.
		p := e.mustChildren(t, "pg", 4, "")
		q := e.mustChildren(t, "pg", 2, p.NextPageToken)
		if len(q.Children) != 2 || q.Children[0].Name != "p04" {
			t.Errorf("after the first page of 4: %+v", q)
		}
	})
	t.Run("consistency", func(t *testing.T) {
		d := e.mustPut(t, owner, "fresh/x", `{}`)
		for _, h := range []map[string]string{
			{"X-Min-Revision": strconv.FormatUint(d.Revision, 10)},
			{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey},
		} {
			h["Authorization"] = "Bearer " + owner
			r := e.mustSend(t, http.MethodGet, "/api/db/children?collection=fresh&consistency=local", h, "")
			var p childrenPage
			mustDecode(t, r.Body, &p)
			if r.Status != 200 || len(p.Children) != 1 || p.Children[0].Name != "x" {
				t.Errorf("%v: %d %s", h, r.Status, r.Body)
			}
		}
	})
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	e.run(t, []scenario{
		{name: "a user may not browse", as: "user", url: "/api/db/children", status: 403, code: "forbidden"},
		{name: "a user may not browse their own tree", as: "user", url: "/api/db/children?collection=users/{uid}", status: 403, code: "forbidden"},
		{name: "no token", as: "none", url: "/api/db/children", status: 401, code: "missing_token"},
		{name: "another project's key", url: "/api/db/children", headers: map[string]string{"X-Project-Id": "nope"}, status: 403, code: "project_mismatch"},
		{name: "reserved collection", url: "/api/db/children?collection=_users", status: 400, code: "invalid_path", field: "collection"},
		{name: "empty segment", url: "/api/db/children?collection=a//b", status: 400, code: "invalid_path", field: "collection"},
		{name: "dot segment", url: "/api/db/children?collection=a/../b", status: 400, code: "invalid_path", field: "collection"},
		{name: "limit 0", url: "/api/db/children?limit=0", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit 1001", url: "/api/db/children?limit=1001", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit not a number", url: "/api/db/children?limit=ten", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit empty", url: "/api/db/children?limit=", status: 400, code: "invalid_argument", field: "limit"},
		{name: "token not base64", url: "/api/db/children?pageToken=%21%21", status: 400, code: "invalid_argument", field: "pageToken"},
		{name: "token with a slash", url: "/api/db/children?pageToken=" + b64("a/b"), status: 400, code: "invalid_argument", field: "pageToken"},
		{name: "token reserved", url: "/api/db/children?pageToken=" + b64("_users"), status: 400, code: "invalid_argument", field: "pageToken"},
		{name: "token empty", url: "/api/db/children?pageToken=", status: 400, code: "invalid_argument", field: "pageToken"},
		{name: "unknown parameter", url: "/api/db/children?list=true", status: 400, code: "invalid_argument", field: "list"},
		{name: "bad consistency", url: "/api/db/children?consistency=eventual", status: 400, code: "invalid_argument", field: "consistency"},
		{name: "bad min revision", url: "/api/db/children", headers: map[string]string{"X-Min-Revision": "soon"}, status: 400, code: "invalid_argument", field: "X-Min-Revision"},
		{name: "POST is refused", method: "POST", url: "/api/db/children", body: `{}`, status: 405, code: "method_not_allowed"},
	})
}

// The console runs on an edge node: there, both routes read strongly by
// default, so they see a write committed through a voter a moment before.
func TestDBChildrenAndRulesTestOnEdge(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nodetest.Options{Voters: 1, Edges: 1})
	edge := &env{c: e.c, base: e.c.Nodes[1].URL(), p: e.p, user: e.user, other: e.other}
	own := e.p.OwnerToken
	for i := range 5 {
		name := fmt.Sprintf("e%d", i)
		e.mustPut(t, own, "edge/"+name, `{"published":true}`)
		got, _ := edge.allChildren(t, "edge", 2)
		if len(got) != i+1 || got[i].Name != name {
			t.Fatalf("children on the edge right after writing %s: %+v", name, got)
		}
		r := edge.mustSend(t, http.MethodPost, "/api/db/rules/test", bearer(own),
			fmt.Sprintf(`{"op":"read","path":"edge/%s","userId":%q,"rules":[{"match":"edge/{id}","read":"resource.data.published == true","write":""}]}`, name, e.user.ID))
		var res struct{ Allowed bool }
		mustDecode(t, r.Body, &res)
		if r.Status != http.StatusOK || !res.Allowed {
			t.Fatalf("rules test on the edge right after writing %s: %d %s", name, r.Status, r.Body)
		}
	}
}
