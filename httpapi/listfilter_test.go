package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// A listing returns only the children the caller may read by the read rule
// of each child's own path and data, not every child of a path it may list.
// Pages hold up to limit readable children; nextPageToken continues after
// the last one returned, and never names a child the page did not return
// unless a page examined 10,000 children without finding one.
func TestListFiltersPerDocument(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	rules := `{"rules":[
		{"match":"pub/hidden/**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"},
		{"match":"pub","read":"true","write":"auth.role == 'owner'"},
		{"match":"pub/{id}","read":"auth.role == 'owner' || resource.data.open == true","write":"auth.role == 'owner'"},
		{"match":"many","read":"true","write":"auth.role == 'owner'"},
		{"match":"many/{id}","read":"resource.data.open == true","write":"auth.role == 'owner'"},
		{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	if r := e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(own), rules); r.Status != http.StatusOK {
		t.Fatalf("set rules: %d %s", r.Status, r.Body)
	}
	// pub/c00..c11: every third closed; pub/hidden open but hidden by its
	// path; pub/c01/below is no direct child.
	var visible, all []string
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("pub/c%02d", i)
		e.mustPut(t, own, name, fmt.Sprintf(`{"open":%t}`, i%3 != 0))
		all = append(all, name)
		if i%3 != 0 {
			visible = append(visible, name)
		}
	}
	e.mustPut(t, own, "pub/hidden", `{"open":true}`)
	all = append(all, "pub/hidden")
	e.mustPut(t, own, "pub/c01/below", `{"open":true}`)

	// list pages through parent as tok and returns the pages' paths.
	list := func(tok, parent string, limit int) [][]string {
		t.Helper()
		var pages [][]string
		token := ""
		for n := 0; n < 20; n++ {
			q := docQuery(parent) + fmt.Sprintf("&list=true&limit=%d", limit)
			if token != "" {
				q += "&pageToken=" + url.QueryEscape(token)
			}
			r := e.mustSend(t, http.MethodGet, q, bearer(tok), "")
			if r.Status != http.StatusOK {
				t.Fatalf("list %s page %d: %d %s", parent, n, r.Status, r.Body)
			}
			checkJSONResponse(t, r)
			var lp listPage
			mustDecode(t, r.Body, &lp)
			if lp.Documents == nil {
				t.Fatalf("page without a documents array: %s", r.Body)
			}
			var page []string
			for _, d := range lp.Documents {
				page = append(page, d.Collection)
			}
			pages = append(pages, page)
			token = lp.NextPageToken
			if token == "" {
				return pages
			}
			if len(page) > 0 {
				// The token continues after the last document returned.
				b, err := base64.RawURLEncoding.DecodeString(token)
				if err != nil || parent+"/"+string(b) != page[len(page)-1] {
					t.Fatalf("page %d ends at %s, its token %q names %q", n, page[len(page)-1], token, b)
				}
			}
		}
		t.Fatalf("list %s: more than 20 pages", parent)
		return nil
	}
	flat := func(pages [][]string) []string { return slices.Concat(pages...) }

	pages := list(e.user.Token, "pub", 3)
	if got := flat(pages); !slices.Equal(got, visible) {
		t.Fatalf("user listed %q, want %q", got, visible)
	}
	if fmt.Sprint(pages) != "[[pub/c01 pub/c02 pub/c04] [pub/c05 pub/c07 pub/c08] [pub/c10 pub/c11]]" {
		t.Errorf("pages %q: want full pages of 3 readable documents, then the rest", pages)
	}
	// The page is full at the last readable child but unread children
	// follow: the token is given, and the next page is empty and last.
	pages = list(e.user.Token, "pub", len(visible))
	if len(pages) != 2 || !slices.Equal(pages[0], visible) || len(pages[1]) != 0 {
		t.Errorf("limit %d: pages %q, want every readable child, then an empty last page", len(visible), pages)
	}
	// The owner lists every child.
	if got := flat(list(own, "pub", 5)); !slices.Equal(got, all) {
		t.Fatalf("owner listed %q, want %q", got, all)
	}

	// 10,050 children of which only the last 20 are readable: the first
	// page examines 10,000, finds none and says where to go on.
	const n, open = 10050, 20
	writes := make([]string, 0, 500)
	for i := 0; i < n; i++ {
		writes = append(writes, fmt.Sprintf(`{"op":"set","collection":"many/c%05d","data":{"open":%t}}`, i, i >= n-open))
		if len(writes) == 500 || i == n-1 {
			if r := e.mustSend(t, http.MethodPost, "/api/db/batch", bearer(own), `{"writes":[`+strings.Join(writes, ",")+`]}`); r.Status != http.StatusOK {
				t.Fatalf("batch: %d %.300s", r.Status, r.Body)
			}
			writes = writes[:0]
		}
	}
	r := e.mustSend(t, http.MethodGet, docQuery("many")+"&list=true&limit=10", bearer(e.user.Token), "")
	var lp listPage
	mustDecode(t, r.Body, &lp)
	if r.Status != http.StatusOK || len(lp.Documents) != 0 || lp.NextPageToken == "" {
		t.Fatalf("first page of many: %d, %d documents, token %q; want none and a token", r.Status, len(lp.Documents), lp.NextPageToken)
	}
	pages = list(e.user.Token, "many", 10)
	if len(pages) != 3 || len(pages[0]) != 0 || len(pages[1]) != 10 || len(pages[2]) != 10 ||
		pages[1][0] != fmt.Sprintf("many/c%05d", n-open) || pages[2][9] != fmt.Sprintf("many/c%05d", n-1) {
		t.Errorf("many: pages of %d, %d, ... documents (%d pages), want 0, 10, 10 ending at the last child", len(pages[0]), len(pages[min(1, len(pages)-1)]), len(pages))
	}
}
