package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/realtime/client"
)

// The query tests run against three node processes whose scan limit is
// small (200), so that index_required and index builds need only a few
// hundred documents.
const queryScanLimit = 200

type queryAnswer struct {
	Documents  []doc  `json:"documents"`
	NextCursor string `json:"nextCursor"`
	Count      *int   `json:"count"`
}

// query runs POST /api/db/query on p with headers h (strong by default).
func (c *cluster) query(p *proc, h map[string]string, body any) (*response, error) {
	return doJSON(c.ctx, httpClient, 15*time.Second, http.MethodPost, p.url()+"/api/db/query", h, body)
}

// mustQuery runs a query that must answer 200 and decodes it.
func (c *cluster) mustQuery(p *proc, h map[string]string, body any) queryAnswer {
	c.t.Helper()
	r, err := c.query(p, h, body)
	if err != nil {
		c.t.Fatalf("query on %s: %v", p.id, err)
	}
	if r.status != http.StatusOK {
		c.t.Fatalf("query %s on %s: %s", mustJSON(c.t, body), p.id, r)
	}
	var a queryAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		c.t.Fatalf("query on %s: decode %q: %v", p.id, r.body, err)
	}
	return a
}

// mustQueryAll follows nextCursor to the end and returns every document.
func (c *cluster) mustQueryAll(nodes []*proc, h map[string]string, q map[string]any) []doc {
	c.t.Helper()
	var all []doc
	for page := 0; ; page++ {
		if page > 1000 {
			c.t.Fatalf("query %s: more than 1000 pages", mustJSON(c.t, q))
		}
		a := c.mustQuery(nodes[page%len(nodes)], h, q)
		all = append(all, a.Documents...)
		if a.NextCursor == "" {
			return all
		}
		next := map[string]any{}
		for k, v := range q {
			next[k] = v
		}
		next["startAfter"] = a.NextCursor
		q = next
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ids are the last segments of the documents' paths, in order.
func ids(docs []doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Collection[strings.LastIndexByte(d.Collection, '/')+1:]
	}
	return out
}

func where(field, op string, value any) map[string]any {
	return map[string]any{"field": field, "op": op, "value": value}
}

// TestQueriesOnProcesses drives the query API of three node processes the way
// an app does: every operator, ordering across value types, collection
// groups, counts, select, rule filtering, cursors under concurrent writes,
// index_required, and an index built while writes go on.
func TestQueriesOnProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{fmt.Sprintf("EDGEBASE_QUERY_SCAN_LIMIT=%d", queryScanLimit)}})
	n1 := c.nodes[0]
	pr := c.mustCreateProject(n1)
	owner := pr.Headers()

	t.Run("operators", func(t *testing.T) {
		docs := map[string]string{
			"a": `{"n":1,"s":"x","tags":["red","blue"],"o":{"k":1},"b":true}`,
			"b": `{"n":2.5,"s":"y","tags":["green"],"o":{"k":2}}`,
			"c": `{"n":"3","s":null,"tags":[]}`,
			"d": `{"s":"z"}`,
			"e": `{"n":null}`,
			"f": `{"n":[1,2]}`,
			"g": `{"n":{"a":1}}`,
			"h": `{"n":false}`,
			"i": `{"n":true}`,
			"j": `{"n":1.0,"s":"x"}`,
		}
		for _, id := range slices.Sorted(func(yield func(string) bool) {
			for k := range docs {
				if !yield(k) {
					return
				}
			}
		}) {
			c.mustWrite(n1, pr, "items/"+id, json.RawMessage(docs[id]))
		}
		cases := []struct {
			name  string
			where []map[string]any
			want  string
		}{
			{"==", []map[string]any{where("n", "==", 1)}, "a j"},
			{"!= leaves out missing and null", []map[string]any{where("n", "!=", 1)}, "b c f g h i"},
			// A range filter orders by its field (ties by path).
			{"< numbers only", []map[string]any{where("n", "<", 2.5)}, "a j"},
			{"<=", []map[string]any{where("n", "<=", 2.5)}, "a j b"},
			{"> does not cross types", []map[string]any{where("n", ">", 1)}, "b"},
			{">=", []map[string]any{where("n", ">=", 1)}, "a j b"},
			{"in", []map[string]any{where("n", "in", []any{1, "3", nil})}, "a c e j"},
			{"not-in", []map[string]any{where("n", "not-in", []any{1, false})}, "b c f g i"},
			{"array-contains", []map[string]any{where("tags", "array-contains", "red")}, "a"},
			{"array-contains-any", []map[string]any{where("tags", "array-contains-any", []any{"green", "red"})}, "a b"},
			{"dotted field", []map[string]any{where("o.k", "==", 2)}, "b"},
			{"exists true (null is present)", []map[string]any{where("s", "exists", true)}, "a b c d j"},
			{"exists false", []map[string]any{where("s", "exists", false)}, "e f g h i"},
			{"string range", []map[string]any{where("s", ">", "x")}, "b d"},
			{"== array", []map[string]any{where("n", "==", []any{1, 2})}, "f"},
			{"== object", []map[string]any{where("n", "==", map[string]any{"a": 1})}, "g"},
			{"two clauses", []map[string]any{where("s", "==", "x"), where("b", "==", true)}, "a"},
		}
		for i, tc := range cases {
			p := c.nodes[i%len(c.nodes)]
			a := c.mustQuery(p, owner, map[string]any{"collection": "items", "where": tc.where})
			if got := strings.Join(ids(a.Documents), " "); got != tc.want {
				t.Errorf("%s on %s: got [%s], want [%s]", tc.name, p.id, got, tc.want)
			}
		}

		// Ordering across types: null < false < true < numbers < strings <
		// arrays < objects; ties by path, in the last order's direction.
		asc := c.mustQuery(c.nodes[1], owner, map[string]any{"collection": "items", "orderBy": []any{map[string]any{"field": "n"}}})
		if got, want := strings.Join(ids(asc.Documents), " "), "e h i a j b c f g"; got != want {
			t.Errorf("orderBy n asc: got [%s], want [%s]", got, want)
		}
		desc := c.mustQuery(c.nodes[2], owner, map[string]any{"collection": "items", "orderBy": []any{map[string]any{"field": "n", "direction": "desc"}}})
		if got, want := strings.Join(ids(desc.Documents), " "), "g f c b j a i h e"; got != want {
			t.Errorf("orderBy n desc: got [%s], want [%s]", got, want)
		}

		cnt := c.mustQuery(c.nodes[1], owner, map[string]any{"collection": "items", "count": true, "where": []any{where("n", "exists", true)}})
		if cnt.Count == nil || *cnt.Count != 9 || cnt.Documents != nil {
			t.Errorf("count of n exists: %+v, want {count: 9} without documents", cnt)
		}
		sel := c.mustQuery(c.nodes[2], owner, map[string]any{"collection": "items", "where": []any{where("o.k", "==", 1)}, "select": []string{"s", "o.k"}})
		if len(sel.Documents) != 1 || string(sel.Documents[0].Data) != `{"o":{"k":1},"s":"x"}` {
			t.Errorf("select s, o.k of items/a: %+v", sel.Documents)
		}

		// A query the server does not understand is refused with the field.
		r, err := c.query(n1, owner, map[string]any{"collection": "items", "where": []any{where("n", "~=", 1)}})
		if err != nil || r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"where[0].op"`) {
			t.Errorf("unknown operator: %v %v, want 400 with field where[0].op", r, err)
		}
		r, err = c.getDoc(n1, pr, "items", "&list=true&where=n%3D%3D1", 0)
		if err != nil || r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"where"`) {
			t.Errorf("GET /api/db?where=: %v %v, want 400 with field where (never ignored)", r, err)
		}
	})

	t.Run("collection group", func(t *testing.T) {
		for _, p := range []string{"orders/o3", "users/u1/orders/o1", "users/u2/orders/o2", "users/u1/deep/x/orders/o4", "ordersx/o5", "users/u1/orders/o1/sub/s1"} {
			c.mustWrite(n1, pr, p, map[string]any{"p": p})
		}
		a := c.mustQuery(c.nodes[2], owner, map[string]any{"collection": "orders", "collectionGroup": true})
		var got []string
		for _, d := range a.Documents {
			got = append(got, d.Collection)
		}
		want := []string{"orders/o3", "users/u1/deep/x/orders/o4", "users/u1/orders/o1", "users/u2/orders/o2"}
		if !slices.Equal(got, want) {
			t.Errorf("collection group orders: %v, want %v", got, want)
		}
	})

	t.Run("rules filter", func(t *testing.T) {
		rules := map[string]any{"rules": []any{
			map[string]any{"match": "notes/{id}", "read": "auth.role == 'owner' || resource.data.public == true", "write": "auth.role == 'owner'"},
			map[string]any{"match": "**", "read": "auth.role == 'owner'", "write": "auth.role == 'owner'"},
		}}
		r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodPut, n1.url()+"/api/db/rules", owner, rules)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("PUT rules: %v %v", r, err)
		}
		var want []string
		for i := 0; i < 40; i++ {
			c.mustWrite(n1, pr, fmt.Sprintf("notes/n%02d", i), map[string]any{"i": i, "public": i%3 == 0})
			if i%3 == 0 {
				want = append(want, fmt.Sprintf("n%02d", i))
			}
		}
		user := registerUser(t, c, c.nodes[1], pr, "reader@example.com")
		q := map[string]any{"collection": "notes", "orderBy": []any{map[string]any{"field": "i"}}, "limit": 4}
		got := ids(c.mustQueryAll(c.nodes, user, q))
		if !slices.Equal(got, want) {
			t.Errorf("a reader pages through notes: %v, want exactly the public ones in order %v", got, want)
		}
		cnt := c.mustQuery(c.nodes[2], user, map[string]any{"collection": "notes", "count": true})
		if cnt.Count == nil || *cnt.Count != len(want) {
			t.Errorf("a reader's count: %+v, want %d", cnt, len(want))
		}
		if all := c.mustQueryAll(c.nodes, owner, q); len(all) != 40 {
			t.Errorf("the owner pages through notes: %d documents, want 40", len(all))
		}
	})

	t.Run("cursors under concurrent writes", func(t *testing.T) {
		c.mustPutIndexes(n1, owner, []map[string]any{{"collection": "feed", "fields": []any{map[string]any{"field": "k"}}}})
		c.mustIndexesReady(owner, 1)
		var originals []string
		for i := 0; i < 120; i++ {
			c.mustWrite(n1, pr, fmt.Sprintf("feed/f%03d", i), map[string]any{"k": i})
			originals = append(originals, fmt.Sprintf("f%03d", i))
		}
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // new documents between the originals, some deleted again
			defer wg.Done()
			for j := 0; wctx.Err() == nil && j < 400; j++ {
				id := fmt.Sprintf("feed/x%03d", j)
				if _, _, err := c.write(c.nodes[j%3], pr, id, map[string]any{"k": float64(j%120) + 0.5}); err != nil {
					if wctx.Err() == nil {
						t.Errorf("concurrent write: %v", err)
					}
					return
				}
				if j%4 == 0 {
					_, _ = doJSON(c.ctx, httpClient, 15*time.Second, http.MethodDelete, c.nodes[j%3].url()+"/api/db?collection="+id, owner, nil)
				}
			}
		}()
		all := c.mustQueryAll(c.nodes, owner, map[string]any{"collection": "feed", "orderBy": []any{map[string]any{"field": "k"}}, "limit": 7})
		stop()
		wg.Wait()
		var seen []string
		last := -1.0
		for _, d := range all {
			var v struct{ K float64 }
			if err := json.Unmarshal(d.Data, &v); err != nil {
				t.Fatal(err)
			}
			if v.K < last {
				t.Errorf("out of order: k %v after %v", v.K, last)
			}
			last = v.K
			if id := ids([]doc{d})[0]; strings.HasPrefix(id, "f") {
				seen = append(seen, id)
			}
		}
		if !slices.Equal(seen, originals) {
			t.Errorf("paging during writes saw the unchanged documents %d times in all (%v), want each of the %d once in order", len(seen), seen, len(originals))
		}
	})

	t.Run("index required, then built while writing", func(t *testing.T) {
		for i := 0; i < queryScanLimit+100; i++ {
			c.mustWrite(n1, pr, fmt.Sprintf("big/b%04d", i), map[string]any{"k": i})
		}
		q := map[string]any{"collection": "big", "where": []any{where("k", ">=", 50)}, "orderBy": []any{map[string]any{"field": "k", "direction": "desc"}}, "limit": 1000}
		r, err := c.query(c.nodes[1], owner, q)
		if err != nil || r.status != http.StatusBadRequest || errCode(r) != "index_required" ||
			!strings.Contains(string(r.body), `\"collection\":\"big\"`) || !strings.Contains(string(r.body), `\"field\":\"k\"`) {
			t.Fatalf("a range query over %d documents without an index: %v %v, want 400 index_required naming the index", queryScanLimit+100, r, err)
		}
		// The index is declared while a writer goes on adding documents.
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		written := queryScanLimit + 100
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := queryScanLimit + 100; wctx.Err() == nil && i < 3000; i++ {
				if _, _, err := c.write(c.nodes[i%3], pr, fmt.Sprintf("big/b%04d", i), map[string]any{"k": i}); err != nil {
					if wctx.Err() == nil {
						t.Errorf("write during the build: %v", err)
					}
					return
				}
				mu.Lock()
				written = i + 1
				mu.Unlock()
			}
		}()
		c.mustPutIndexes(n1, owner, []map[string]any{
			{"collection": "feed", "fields": []any{map[string]any{"field": "k"}}},
			{"collection": "big", "fields": []any{map[string]any{"field": "k", "direction": "desc"}}},
		})
		c.mustIndexesReady(owner, 2)
		// Let the writer go on past the build, then stop it.
		checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			mu.Lock()
			defer mu.Unlock()
			if written < queryScanLimit+200 {
				return fmt.Errorf("%d written", written)
			}
			return nil
		})
		stop()
		wg.Wait()
		mu.Lock()
		total := written
		mu.Unlock()
		for _, p := range c.nodes {
			got := c.mustQueryAll([]*proc{p}, owner, q)
			if len(got) != total-50 {
				t.Errorf("on %s: %d documents with k >= 50, want %d", p.id, len(got), total-50)
				continue
			}
			for i, d := range got {
				if want := fmt.Sprintf("b%04d", total-1-i); ids([]doc{d})[0] != want {
					t.Errorf("on %s: result %d is %s, want %s", p.id, i, d.Collection, want)
					break
				}
			}
		}
	})
}

// TestLiveQueryOnProcesses follows a live query through the Go client on one
// node process while another takes the writes: documents enter (pushing the
// last one out of the window), change within it, leave it (refilled from
// beyond the window); then the subscriber's node is killed and restarted
// while writes go on, and the client resumes without a reset to exactly the
// window a fresh query answers.
func TestLiveQueryOnProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := mustStartCluster(t, ctx, clusterOpts{})
	n1, n2 := c.nodes[0], c.nodes[1]
	pr := c.mustCreateProject(n1)
	owner := pr.Headers()
	for i := 1; i <= 5; i++ {
		c.mustWrite(n1, pr, fmt.Sprintf("tasks/t%d", i), map[string]any{"status": "open", "prio": i})
	}
	c.mustWrite(n1, pr, "tasks/t6", map[string]any{"status": "closed", "prio": 0})
	c.mustReady(n2, 30*time.Second)

	conn, err := client.Dial(ctx, client.Config{URL: n2.url(), Token: pr.Token, ProjectID: pr.ID, APIKey: pr.APIKey,
		Reconnect: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, EventBuffer: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := query.Query{Collection: "tasks", Where: []query.Filter{{Field: "status", Op: "==", Value: json.RawMessage(`"open"`)}},
		OrderBy: []query.Order{{Field: "prio"}}, Limit: 3}
	sub, err := conn.SubscribeQuery(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []client.Event
	go func() {
		for ev := range sub.Events() {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}()
	window := func() string {
		var out []string
		for _, d := range sub.Window() {
			out = append(out, d.Collection[strings.LastIndexByte(d.Collection, '/')+1:])
		}
		return strings.Join(out, " ")
	}
	waitWindow := func(what, want string) {
		t.Helper()
		checkFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			if got := window(); got != want {
				return fmt.Errorf("%s: window [%s], want [%s]", what, got, want)
			}
			return nil
		})
	}
	waitWindow("the snapshot", "t1 t2 t3")
	seen := func(typ, id string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.Kind == client.KindChange && ev.Type == typ && strings.HasSuffix(ev.Collection, "/"+id) {
				return true
			}
		}
		return false
	}

	c.mustWrite(n1, pr, "tasks/t6", map[string]any{"status": "open", "prio": 0})
	waitWindow("t6 enters", "t6 t1 t2")
	if !seen(client.TypeAdded, "t6") || !seen(client.TypeRemoved, "t3") {
		t.Errorf("t6 entering: events %+v, want t6 added and t3 removed", events)
	}
	c.mustWrite(n1, pr, "tasks/t1", map[string]any{"status": "open", "prio": 1, "note": "edited"})
	checkFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if !seen(client.TypeModified, "t1") {
			return fmt.Errorf("no modified event for t1")
		}
		return nil
	})
	c.mustWrite(n1, pr, "tasks/t6", map[string]any{"status": "closed", "prio": 0})
	waitWindow("t6 leaves, t3 refills", "t1 t2 t3")

	// The subscriber's node dies; writes go on elsewhere; it comes back.
	n2.mustKill9()
	c.mustWrite(n1, pr, "tasks/t2", map[string]any{"status": "closed", "prio": 2})
	c.mustWrite(n1, pr, "tasks/t7", map[string]any{"status": "open", "prio": 0.5})
	c.mustWrite(n1, pr, "tasks/t8", map[string]any{"status": "open", "prio": 9})
	n2.mustStart()
	c.mustReady(n2, 60*time.Second)
	want := strings.Join(ids(c.mustQuery(n1, owner, map[string]any{"collection": "tasks",
		"where": []any{where("status", "==", "open")}, "orderBy": []any{map[string]any{"field": "prio"}}, "limit": 3}).Documents), " ")
	if want != "t7 t1 t3" {
		t.Fatalf("a fresh query answers [%s], want [t7 t1 t3]", want)
	}
	waitWindow("after the node's restart", want)
	checkFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.Kind == client.KindResumed {
				return nil
			}
		}
		return fmt.Errorf("no resumed event yet")
	})
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range events {
		if ev.Kind == client.KindReset || ev.Kind == client.KindSnapshot {
			t.Errorf("a %s after the first window: the resume should replay the change log, events %+v", ev.Kind, events)
		}
	}
}

// errCode is the code of an error answer, or "".
func errCode(r *response) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// mustPutIndexes replaces the project's declared indexes.
func (c *cluster) mustPutIndexes(p *proc, h map[string]string, indexes []map[string]any) {
	c.t.Helper()
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodPut, p.url()+"/api/db/indexes", h, map[string]any{"indexes": indexes})
	if err != nil || r.status != http.StatusOK {
		c.t.Fatalf("PUT /api/db/indexes on %s: %v %v", p.id, r, err)
	}
}

// mustIndexesReady waits until every node reports n declared indexes, all
// ready.
func (c *cluster) mustIndexesReady(h map[string]string, n int) {
	c.t.Helper()
	for _, p := range c.nodes {
		checkFor(c.t, 60*time.Second, 20*time.Millisecond, func() error {
			r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodGet, p.url()+"/api/db/indexes", h, nil)
			if err != nil {
				return err
			}
			var a struct {
				Indexes []struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"indexes"`
			}
			if r.status != http.StatusOK || json.Unmarshal(r.body, &a) != nil {
				return fmt.Errorf("GET /api/db/indexes on %s: %s", p.id, r)
			}
			if len(a.Indexes) != n {
				return fmt.Errorf("%s holds %d indexes, want %d", p.id, len(a.Indexes), n)
			}
			for _, ix := range a.Indexes {
				if ix.State != "ready" {
					return fmt.Errorf("%s: index %s is %s", p.id, ix.ID, ix.State)
				}
			}
			return nil
		})
	}
}

// registerUser signs a new user up through p and returns its headers.
func registerUser(t *testing.T, c *cluster, p *proc, pr project, email string) map[string]string {
	t.Helper()
	h := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodPost, p.url()+"/api/auth", h,
		map[string]any{"action": "register", "email": email, "password": "correct horse battery", "name": "Reader"})
	if err != nil || r.status != http.StatusCreated {
		t.Fatalf("register %s: %v %v", email, r, err)
	}
	var a struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil || a.Token == "" {
		t.Fatalf("register %s: %s", email, r)
	}
	h["Authorization"] = "Bearer " + a.Token
	return h
}
