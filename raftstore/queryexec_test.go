package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/edgebase/edgebase/query"
)

// ---- helpers -------------------------------------------------------------------

// qOpen is a single-node store (real Raft, real Badger) that leads.
func qOpen(t *testing.T) *Store {
	t.Helper()
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	return s
}

func qCompile(t testing.TB, q query.Query) *query.Compiled {
	t.Helper()
	c, err := query.Compile(&q)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", q, err)
	}
	return c
}

// qPut writes docs (paths relative to pid → JSON data) in a few txns.
func qPut(t *testing.T, s *Store, pid string, docs map[string]string) {
	t.Helper()
	paths := make([]string, 0, len(docs))
	for p := range docs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var ops []Op
	size := 0
	flush := func() {
		if len(ops) > 0 {
			mustTxn(t, s, ops...)
		}
		ops, size = nil, 0
	}
	for _, p := range paths {
		if len(ops) == 500 || size+len(docs[p]) > 2<<20 {
			flush()
		}
		ops = append(ops, put(pid+"/"+p, docs[p]))
		size += len(docs[p]) + len(p)
	}
	flush()
}

// qDeclare declares a project's indexes and waits until every one is ready.
func qDeclare(t *testing.T, s *Store, pid string, ixs ...query.Index) []IndexState {
	t.Helper()
	body, err := json.Marshal(map[string]any{"indexes": ixs})
	if err != nil {
		t.Fatal(err)
	}
	mustTxn(t, s, put(IndexesPath(pid), string(body)))
	var states []IndexState
	mustEventually(t, 30*time.Second, "declared indexes to be ready", func() (bool, string) {
		states, err = s.Indexes(pid)
		if err != nil {
			return false, err.Error()
		}
		if len(states) != len(ixs) {
			return false, fmt.Sprintf("%d indexes, want %d", len(states), len(ixs))
		}
		for _, st := range states {
			if st.State != IndexReady {
				return false, fmt.Sprintf("%s is %s", st.ID, st.State)
			}
		}
		return true, ""
	})
	return states
}

// qWaitAuto waits until the automatic indexes are backfilled.
func qWaitAuto(t *testing.T, s *Store) {
	t.Helper()
	mustEventually(t, 30*time.Second, "automatic indexes to be ready", func() (bool, string) {
		ready := false
		err := s.fsm.view(func(txn *badger.Txn) error { ready = autoReady(txn); return nil })
		return err == nil && ready, fmt.Sprint(err)
	})
}

func qRun(t *testing.T, s *Store, req QueryRequest) *QueryResult {
	t.Helper()
	res, err := s.Query(context.Background(), req)
	if err != nil {
		t.Fatalf("Query(%+v): %v", req.Query.Q, err)
	}
	return res
}

// qPage runs one page of q after cursor.
func qPage(t *testing.T, s *Store, pid string, q query.Query, cursor string, scanLimit int, allow func(*Document) bool) *QueryResult {
	t.Helper()
	q.StartAfter = cursor
	return qRun(t, s, QueryRequest{ProjectID: pid, Query: qCompile(t, q), ScanLimit: scanLimit, Allow: allow})
}

// qAll pages through q and returns every document, the plans used and the
// number of pages.
func qAll(t *testing.T, s *Store, pid string, q query.Query, scanLimit int, allow func(*Document) bool) ([]*Document, []string, int) {
	t.Helper()
	var docs []*Document
	var plans []string
	cursor := ""
	for pages := 1; ; pages++ {
		if pages > 100000 {
			t.Fatalf("paging %+v does not end", q)
		}
		res := qPage(t, s, pid, q, cursor, scanLimit, allow)
		if len(res.Documents) > q.Limit && q.Limit > 0 {
			t.Fatalf("page of %d documents, limit %d", len(res.Documents), q.Limit)
		}
		docs = append(docs, res.Documents...)
		if !slices.Contains(plans, res.Plan) {
			plans = append(plans, res.Plan)
		}
		if res.NextCursor == "" {
			return docs, plans, pages
		}
		cursor = res.NextCursor
	}
}

func qRel(pid string, docs []*Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = strings.TrimPrefix(d.Path, pid+"/")
	}
	return out
}

// qModel is the test's oracle: every document (path relative to the
// project → data), queried by brute force.
type qModel map[string]string

// want is what q must return in project pid: every user document of the
// collection (or group) that Match accepts and allow keeps, sorted by SortKey.
func (m qModel) want(c *query.Compiled, pid string, allow func(rel string) bool) []string {
	type hit struct {
		key []byte
		rel string
	}
	var hits []hit
	for rel, data := range m {
		segs := strings.Split(rel, "/")
		if slices.ContainsFunc(segs, func(s string) bool { return strings.HasPrefix(s, "_") }) || len(segs) < 2 {
			continue
		}
		if c.Q.CollectionGroup {
			if segs[len(segs)-2] != c.Q.Collection {
				continue
			}
		} else if strings.Join(segs[:len(segs)-1], "/") != c.Q.Collection {
			continue
		}
		if !c.Match(json.RawMessage(data)) || (allow != nil && !allow(rel)) {
			continue
		}
		hits = append(hits, hit{c.SortKey(pid+"/"+rel, json.RawMessage(data)), rel})
	}
	slices.SortFunc(hits, func(a, b hit) int { return bytes.Compare(a.key, b.key) })
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.rel
	}
	return out
}

func qSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %d %v\nwant %d %v", what, len(got), abbrevList(got), len(want), abbrevList(want))
	}
}

func abbrevList(l []string) []string {
	if len(l) > 40 {
		return append(slices.Clip(l[:40]), "...")
	}
	return l
}

// hashAllow keeps about keep out of 10 documents, by a hash of the path
// relative to the project, so the same documents are allowed in every project.
func hashAllow(pid string, keep uint32) (func(*Document) bool, func(string) bool) {
	byRel := func(rel string) bool {
		h := fnv.New32a()
		h.Write([]byte(rel))
		return h.Sum32()%10 < keep
	}
	return func(d *Document) bool { return byRel(strings.TrimPrefix(d.Path, pid+"/")) }, byRel
}

func asc(f string) query.Order  { return query.Order{Field: f, Direction: "asc"} }
func desc(f string) query.Order { return query.Order{Field: f, Direction: "desc"} }
func where(f, op, v string) query.Filter {
	return query.Filter{Field: f, Op: op, Value: json.RawMessage(v)}
}
func ixf(f, dir string) query.IndexField { return query.IndexField{Field: f, Direction: dir} }

// ---- order ----------------------------------------------------------------------

// typedDocs holds one field "v" of every JSON type, mixed, with a tie (1 and
// 1.0) whose paths order against their insertion, and a document without v.
var typedDocs = map[string]string{
	"t/n":    `{"v":null}`,
	"t/f":    `{"v":false}`,
	"t/tr":   `{"v":true}`,
	"t/m1":   `{"v":-1}`,
	"t/z0":   `{"v":0}`,
	"t/x1":   `{"v":1}`,
	"t/a1":   `{"v":1.0}`,
	"t/f25":  `{"v":2.5}`,
	"t/ten":  `{"v":10}`,
	"t/k":    `{"v":1e3}`,
	"t/s0":   `{"v":""}`,
	"t/sB":   `{"v":"B"}`,
	"t/sa":   `{"v":"a"}`,
	"t/se":   `{"v":"é"}`,
	"t/a0":   `{"v":[]}`,
	"t/a_1":  `{"v":[1]}`,
	"t/a12":  `{"v":[1,2]}`,
	"t/a2":   `{"v":[2]}`,
	"t/aa":   `{"v":["a"]}`,
	"t/o0":   `{"v":{}}`,
	"t/oa1":  `{"v":{"a":1}}`,
	"t/oa1b": `{"v":{"a":1,"b":0}}`,
	"t/oa2":  `{"v":{"a":2}}`,
	"t/ob":   `{"v":{"b":0}}`,
	"t/none": `{"w":1}`,
}

// typedOrder is typedDocs by v ascending, written out by hand from the
// package doc's order (not computed with the code under test).
var typedOrder = []string{
	"t/n", "t/f", "t/tr", "t/m1", "t/z0", "t/a1", "t/x1", "t/f25", "t/ten", "t/k",
	"t/s0", "t/sB", "t/sa", "t/se",
	"t/a0", "t/a_1", "t/a12", "t/a2", "t/aa",
	"t/o0", "t/oa1", "t/oa1b", "t/oa2", "t/ob",
}

func TestQuery_OrderAcrossTypesByEveryPlan(t *testing.T) {
	s := qOpen(t)
	qPut(t, s, "ps", typedDocs)
	qPut(t, s, "pa", typedDocs)
	qPut(t, s, "pd", typedDocs)
	qDeclare(t, s, "pa", query.Index{Collection: "t", Fields: []query.IndexField{ixf("v", "asc")}})
	qDeclare(t, s, "pd", query.Index{Collection: "t", Fields: []query.IndexField{ixf("v", "desc")}})
	descOrder := slices.Clone(typedOrder)
	slices.Reverse(descOrder)

	for _, pid := range []string{"ps", "pa", "pd"} {
		for _, limit := range []int{1, 3, 1000} {
			for _, o := range []query.Order{asc("v"), desc("v")} {
				q := query.Query{Collection: "t", OrderBy: []query.Order{o}, Limit: limit}
				docs, plans, _ := qAll(t, s, pid, q, 0, nil)
				want := typedOrder
				if o.Direction == "desc" {
					want = descOrder
				}
				qSame(t, fmt.Sprintf("%s %s limit %d (plans %v)", pid, o.Direction, limit, plans), qRel(pid, docs), want)
				wantPlan := "scan"
				if pid != "ps" {
					wantPlan = "index:"
				}
				for _, p := range plans {
					if !strings.HasPrefix(p, wantPlan) {
						t.Fatalf("%s: plan %q, want %s...", pid, p, wantPlan)
					}
				}
			}
		}
	}
}

func TestQuery_DescAndMultiFieldOrders(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 60 {
		docs[fmt.Sprintf("o/d%02d", i)] = fmt.Sprintf(`{"g":%d,"h":"%c","i":%d}`, i%3, 'a'+rune(i%4), i%5)
	}
	qPut(t, s, "ps", docs)
	qPut(t, s, "pi", docs)
	qDeclare(t, s, "pi",
		query.Index{Collection: "o", Fields: []query.IndexField{ixf("g", "asc"), ixf("h", "desc"), ixf("i", "asc")}},
		query.Index{Collection: "o", Fields: []query.IndexField{ixf("g", "desc"), ixf("i", "desc")}},
	)
	m := qModel(docs)
	for _, ob := range [][]query.Order{
		{asc("g"), desc("h"), asc("i")},
		{desc("g"), asc("h"), desc("i")}, // the first index backwards
		{desc("g"), desc("i")},
		{asc("g"), asc("i")},
		{asc("h"), asc("g")}, // no index: a scan in both
	} {
		q := query.Query{Collection: "o", OrderBy: ob, Limit: 7}
		want := m.want(qCompile(t, q), "ps", nil)
		if len(want) != 60 {
			t.Fatalf("model: %d documents", len(want))
		}
		for _, pid := range []string{"ps", "pi"} {
			got, plans, pages := qAll(t, s, pid, q, 0, nil)
			qSame(t, fmt.Sprintf("%s orderBy %v (plans %v)", pid, ob, plans), qRel(pid, got), want)
			if pages != 9 {
				t.Fatalf("%s orderBy %v: %d pages of 7 for 60 documents", pid, ob, pages)
			}
		}
	}
	// The hand check of one order, independent of SortKey: g asc, h desc, i asc, path asc.
	q := query.Query{Collection: "o", OrderBy: []query.Order{asc("g"), desc("h"), asc("i")}, Limit: 1000}
	got := qRun(t, s, QueryRequest{ProjectID: "pi", Query: qCompile(t, q)})
	if !strings.HasPrefix(got.Plan, "index:") {
		t.Fatalf("plan %q, want an index", got.Plan)
	}
	for i := 1; i < len(got.Documents); i++ {
		var a, b struct {
			G, I int
			H    string
		}
		_ = json.Unmarshal(got.Documents[i-1].Data, &a)
		_ = json.Unmarshal(got.Documents[i].Data, &b)
		ok := a.G < b.G || (a.G == b.G && (a.H > b.H || (a.H == b.H && (a.I < b.I || (a.I == b.I && got.Documents[i-1].Path < got.Documents[i].Path)))))
		if !ok {
			t.Fatalf("out of order: %s %s then %s %s", got.Documents[i-1].Path, got.Documents[i-1].Data, got.Documents[i].Path, got.Documents[i].Data)
		}
	}
}

// ---- plans ----------------------------------------------------------------------

func TestQuery_PlansFiltersAndRanges(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	statuses := []string{`"open"`, `"closed"`, `"held"`, `1`, `null`}
	for i := range 120 {
		docs[fmt.Sprintf("orders/o%03d", i)] = fmt.Sprintf(`{"status":%s,"total":%d,"createdAt":%d,"tags":["t%d"],"nested":{"k":%d}}`,
			statuses[i%len(statuses)], (i*37)%50, 1000-i*3, i%4, i%6)
	}
	docs["orders/o999"] = `{"status":"open","total":"lots","createdAt":"never"}` // other types in range fields
	docs["orders/o998"] = `{"status":"open"}`                                    // no order fields
	docs["orders/o997/sub/x"] = `{"status":"open","createdAt":1,"total":1}`      // a grandchild
	docs["other/o1"] = `{"status":"open","createdAt":1,"total":1}`
	qPut(t, s, "pi", docs)
	qPut(t, s, "ps", docs)
	mustTxn(t, s, put("pi/orders/_hidden", `{"status":"open","createdAt":5,"total":5}`), put("ps/orders/_hidden", `{"status":"open","createdAt":5,"total":5}`))
	states := qDeclare(t, s, "pi",
		query.Index{Collection: "orders", Fields: []query.IndexField{ixf("status", "asc"), ixf("createdAt", "desc")}},
		query.Index{Collection: "orders", Fields: []query.IndexField{ixf("total", "asc")}},
		query.Index{Collection: "orders", Fields: []query.IndexField{ixf("status", "asc"), ixf("total", "desc")}},
	)
	qWaitAuto(t, s)
	m := qModel(docs)
	ids := map[string]string{}
	for _, st := range states {
		ids[st.Fields[len(st.Fields)-1].Field+"/"+st.Fields[0].Field] = "index:" + st.ID
	}

	cases := []struct {
		name        string
		q           query.Query
		planI       string // the plan in pi ("" : as in ps)
		planS       string
		wantAtLeast int
	}{
		{"equality and order", query.Query{Where: []query.Filter{where("status", "==", `"open"`)}, OrderBy: []query.Order{desc("createdAt")}},
			ids["createdAt/status"], "auto:status", 20},
		{"equality and reversed order", query.Query{Where: []query.Filter{where("status", "==", `"open"`)}, OrderBy: []query.Order{asc("createdAt")}},
			ids["createdAt/status"], "auto:status", 20},
		{"equality, order and range", query.Query{Where: []query.Filter{where("status", "==", `"open"`), where("createdAt", "<", `900`), where("createdAt", ">=", `700`)}, OrderBy: []query.Order{desc("createdAt")}},
			ids["createdAt/status"], "auto:status", 10},
		{"equality, range, reversed", query.Query{Where: []query.Filter{where("status", "==", `"open"`), where("createdAt", ">", `700`)}, OrderBy: []query.Order{asc("createdAt")}},
			ids["createdAt/status"], "auto:status", 10},
		{"range without order", query.Query{Where: []query.Filter{where("total", ">", `10`), where("total", "<=", `30`)}},
			ids["total/total"], "scan", 30},
		{"range and order", query.Query{Where: []query.Filter{where("total", ">=", `25`)}, OrderBy: []query.Order{desc("total")}},
			ids["total/total"], "scan", 30},
		{"range on a string bound", query.Query{Where: []query.Filter{where("total", ">", `"a"`)}, OrderBy: []query.Order{asc("total")}},
			ids["total/total"], "scan", 1},
		{"other filters beside the index", query.Query{Where: []query.Filter{where("status", "==", `"open"`), where("tags", "array-contains", `"t1"`), where("nested.k", "!=", `3`)}, OrderBy: []query.Order{desc("createdAt")}},
			ids["createdAt/status"], "auto:status", 3},
		{"equality on a number", query.Query{Where: []query.Filter{where("status", "==", `1.0`)}},
			"auto:status", "auto:status", 20},
		{"equality on null", query.Query{Where: []query.Filter{where("status", "==", `null`)}},
			"auto:status", "auto:status", 20},
		{"two equalities", query.Query{Where: []query.Filter{where("status", "==", `"held"`), where("total", "==", `4`)}},
			ids["total/status"], "auto:", 1},
		{"equality and the index backwards", query.Query{Where: []query.Filter{where("status", "==", `"closed"`)}, OrderBy: []query.Order{asc("total")}},
			ids["total/status"], "auto:status", 20},
		{"equality with order but no index", query.Query{Where: []query.Filter{where("status", "==", `"closed"`)}, OrderBy: []query.Order{asc("tags")}},
			"auto:status", "auto:status", 20},
		{"nested equality", query.Query{Where: []query.Filter{where("nested.k", "==", `2`)}},
			"scan", "scan", 20},
		{"in", query.Query{Where: []query.Filter{where("status", "in", `["open","held"]`)}, OrderBy: []query.Order{asc("createdAt")}},
			"scan", "scan", 40},
		{"not-in", query.Query{Where: []query.Filter{where("status", "not-in", `["open","held"]`)}},
			"scan", "scan", 20},
		{"array-contains-any", query.Query{Where: []query.Filter{where("tags", "array-contains-any", `["t0","t3"]`)}},
			"scan", "scan", 40},
		{"exists false", query.Query{Where: []query.Filter{where("createdAt", "exists", `false`)}},
			"scan", "scan", 1},
		{"no filter", query.Query{}, "scan", "scan", 120},
		{"one field equal to two values", query.Query{Where: []query.Filter{where("status", "==", `"open"`), where("status", "==", `"closed"`)}, OrderBy: []query.Order{desc("createdAt")}},
			ids["createdAt/status"], "auto:status", 0},
		{"range bounds of two types", query.Query{Where: []query.Filter{where("total", ">", `5`), where("total", "<", `"z"`)}},
			ids["total/total"], "scan", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Collection = "orders"
			for _, limit := range []int{1000, 6} {
				q.Limit = limit
				c := qCompile(t, q)
				want := m.want(c, "ps", nil)
				if len(want) < tc.wantAtLeast {
					t.Fatalf("the model finds %d documents, the case wants at least %d (a weak case)", len(want), tc.wantAtLeast)
				}
				for _, pid := range []string{"pi", "ps"} {
					got, plans, _ := qAll(t, s, pid, q, 0, nil)
					qSame(t, fmt.Sprintf("%s limit %d (plans %v)", pid, limit, plans), qRel(pid, got), want)
					wantPlan := tc.planS
					if pid == "pi" && tc.planI != "" {
						wantPlan = tc.planI
					}
					if len(plans) != 1 || !strings.HasPrefix(plans[0], wantPlan) {
						t.Fatalf("%s: plans %v, want %q", pid, plans, wantPlan)
					}
					q.Count = true
					res := qRun(t, s, QueryRequest{ProjectID: pid, Query: qCompile(t, q)})
					q.Count = false
					if res.Count != len(want) || res.Documents != nil || res.NextCursor != "" {
						t.Fatalf("%s count: %d (documents %d, cursor %q), want %d", pid, res.Count, len(res.Documents), res.NextCursor, len(want))
					}
				}
			}
		})
	}
}

func TestQuery_CollectionGroupAcrossDepths(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{
		"orders/a":                  `{"n":1,"s":"x"}`,
		"users/u1/orders/b":         `{"n":2,"s":"x"}`,
		"users/u1/orders/b/items/i": `{"n":3,"s":"x"}`,
		"users/u2/orders/c":         `{"n":0,"s":"y"}`,
		"a/b/c/d/orders/e":          `{"n":5,"s":"x"}`,
		"orders":                    `{"n":9,"s":"x"}`, // a document named orders is not in the group
		"users/u1/orders2/z":        `{"n":1,"s":"x"}`,
		"users/u1/xorders/z":        `{"n":1,"s":"x"}`,
		"users/u1":                  `{"n":1,"s":"x"}`,
	}
	qPut(t, s, "pg", docs)
	qPut(t, s, "pi", docs)
	// System state under the project is never a result, in any plan.
	for _, pid := range []string{"pg", "pi"} {
		mustTxn(t, s, put(pid+"/_sys/orders/h", `{"n":4,"s":"x"}`), put(pid+"/users/_u/orders/h", `{"n":4,"s":"x"}`),
			put(pid+"/users/u1/orders/_h", `{"n":4,"s":"x"}`))
	}
	mustTxn(t, s, put("other/orders/o", `{"n":1,"s":"x"}`))
	qDeclare(t, s, "pi",
		query.Index{Collection: "orders", CollectionGroup: true, Fields: []query.IndexField{ixf("s", "asc"), ixf("n", "desc")}},
		query.Index{Collection: "orders", Fields: []query.IndexField{ixf("s", "asc"), ixf("n", "desc")}}, // collection scope: not for groups
	)
	qWaitAuto(t, s)
	m := qModel(docs)
	for _, q := range []query.Query{
		{Collection: "orders", CollectionGroup: true},
		{Collection: "orders", CollectionGroup: true, OrderBy: []query.Order{desc("n")}, Limit: 2},
		{Collection: "orders", CollectionGroup: true, Where: []query.Filter{where("s", "==", `"x"`)}, OrderBy: []query.Order{desc("n")}, Limit: 1},
		{Collection: "orders", CollectionGroup: true, Where: []query.Filter{where("s", "==", `"x"`)}, OrderBy: []query.Order{asc("n")}, Limit: 2},
		{Collection: "items", CollectionGroup: true},
	} {
		want := m.want(qCompile(t, q), "pg", nil)
		for _, pid := range []string{"pg", "pi"} {
			got, plans, _ := qAll(t, s, pid, q, 0, nil)
			qSame(t, fmt.Sprintf("%s %+v (plans %v)", pid, q, plans), qRel(pid, got), want)
			wantPlan := "scan"
			if pid == "pi" && len(q.Where) > 0 {
				wantPlan = "index:"
			}
			if !strings.HasPrefix(plans[0], wantPlan) {
				t.Fatalf("%s %+v: plans %v, want %s", pid, q, plans, wantPlan)
			}
		}
	}
	got := qRel("pg", qRun(t, s, QueryRequest{ProjectID: "pg", Query: qCompile(t, query.Query{Collection: "orders", CollectionGroup: true})}).Documents)
	qSame(t, "group by hand", got, []string{"a/b/c/d/orders/e", "orders/a", "users/u1/orders/b", "users/u2/orders/c"})
}

// ---- rules, budgets, limits -------------------------------------------------------

func TestQuery_AllowSkipsAndPagesFill(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 100 {
		docs[fmt.Sprintf("c/d%03d", i)] = fmt.Sprintf(`{"k":%d,"s":"on"}`, i%10)
	}
	qPut(t, s, "pi", docs)
	qPut(t, s, "ps", docs)
	qDeclare(t, s, "pi", query.Index{Collection: "c", Fields: []query.IndexField{ixf("s", "asc"), ixf("k", "asc")}})
	qWaitAuto(t, s)
	m := qModel(docs)
	for _, q := range []query.Query{
		{Collection: "c", OrderBy: []query.Order{asc("k")}, Limit: 5},
		{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, OrderBy: []query.Order{asc("k")}, Limit: 5},
		{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, Limit: 5},
	} {
		_, allowRel := hashAllow("", 4)
		want := m.want(qCompile(t, q), "ps", allowRel)
		if len(want) < 20 || len(want) > 60 {
			t.Fatalf("the rule keeps %d of 100: a weak case", len(want))
		}
		for _, pid := range []string{"ps", "pi"} {
			allowDoc, _ := hashAllow(pid, 4)
			cursor := ""
			var got []string
			for {
				res := qPage(t, s, pid, q, cursor, 0, allowDoc)
				for _, d := range res.Documents {
					if !allowDoc(d) {
						t.Fatalf("%s: %s returned though the rule refuses it", pid, d.Path)
					}
				}
				got = append(got, qRel(pid, res.Documents)...)
				if res.NextCursor == "" {
					break
				}
				// Without a budget running out, every page but the last is full.
				if len(res.Documents) != q.Limit {
					t.Fatalf("%s (%s): a page of %d with a cursor, limit %d", pid, res.Plan, len(res.Documents), q.Limit)
				}
				cursor = res.NextCursor
			}
			qSame(t, pid+" pages", got, want)
			q.Count = true
			if n := qRun(t, s, QueryRequest{ProjectID: pid, Query: qCompile(t, q), Allow: allowDoc}).Count; n != len(want) {
				t.Fatalf("%s count %d, want %d", pid, n, len(want))
			}
			q.Count = false
		}
	}
}

func TestQuery_IndexBudgetReturnsShortPagesWithCursor(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 40 {
		docs[fmt.Sprintf("c/d%03d", i)] = fmt.Sprintf(`{"k":%d,"s":"on"}`, i)
	}
	qPut(t, s, "pi", docs)
	qDeclare(t, s, "pi", query.Index{Collection: "c", Fields: []query.IndexField{ixf("s", "asc"), ixf("k", "desc")}})
	qWaitAuto(t, s)
	only := map[string]bool{"pi/c/d005": true, "pi/c/d006": true, "pi/c/d031": true}
	allow := func(d *Document) bool { return only[d.Path] }
	for _, q := range []query.Query{
		{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, OrderBy: []query.Order{desc("k")}, Limit: 2}, // index
		{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, Limit: 2},                                    // auto, path order
	} {
		cursor := ""
		var got []string
		var sizes []int
		for calls := 0; ; calls++ {
			if calls > 100 {
				t.Fatal("paging does not end")
			}
			res := qPage(t, s, "pi", q, cursor, 4, allow)
			got = append(got, qRel("pi", res.Documents)...)
			sizes = append(sizes, len(res.Documents))
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
		want := []string{"c/d031", "c/d006", "c/d005"}
		if len(q.OrderBy) == 0 {
			want = []string{"c/d005", "c/d006", "c/d031"}
		}
		qSame(t, fmt.Sprintf("%+v", q.OrderBy), got, want)
		// 40 entries at 4 a call: 10 calls, most of them empty pages.
		if len(sizes) != 10 || !slices.Contains(sizes, 0) {
			t.Fatalf("%+v: page sizes %v, want 10 calls with empty ones", q.OrderBy, sizes)
		}
	}
	// The scan plan has no per-call budget: over the limit it is refused.
	_, err := s.Query(context.Background(), QueryRequest{ProjectID: "pi", Query: qCompile(t, query.Query{Collection: "c", OrderBy: []query.Order{asc("k")}}), ScanLimit: 4})
	var ire *IndexRequiredError
	if !errors.As(err, &ire) {
		t.Fatalf("scan over the limit: %v, want IndexRequiredError", err)
	}
}

func TestQuery_IndexRequiredOverTheScanLimit(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 10 {
		docs[fmt.Sprintf("c/d%02d", i)] = fmt.Sprintf(`{"k":%d,"s":"on"}`, i)
		docs[fmt.Sprintf("g/%d/c/x", i)] = fmt.Sprintf(`{"k":%d,"s":"on"}`, i)
	}
	docs["c/d00/sub/deep"] = `{"k":1}` // not a child: not examined
	qPut(t, s, "p", docs)
	qWaitAuto(t, s)
	for _, tc := range []struct {
		q query.Query
		n int // the documents it examines
	}{
		{query.Query{Collection: "c", OrderBy: []query.Order{desc("k")}}, 10},
		{query.Query{Collection: "c", Where: []query.Filter{where("k", ">", `3`)}}, 10},
		{query.Query{Collection: "c", Where: []query.Filter{where("k", ">", `3`)}, Count: true}, 10},
		{query.Query{Collection: "c", CollectionGroup: true, OrderBy: []query.Order{asc("k")}}, 20},
	} {
		q := tc.q
		c := qCompile(t, q)
		for _, limit := range []int{tc.n, 100} {
			if _, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: c, ScanLimit: limit}); err != nil {
				t.Fatalf("%+v under the scan limit %d: %v", q, limit, err)
			}
		}
		// One more document than the limit is refused, naming the index to declare.
		_, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: c, ScanLimit: tc.n - 1})
		var ire *IndexRequiredError
		if !errors.As(err, &ire) {
			t.Fatalf("%+v over the scan limit: %v, want IndexRequiredError", q, err)
		}
		wantIx := query.Suggest(c)
		wantJSON, _ := json.Marshal(wantIx)
		if gotJSON, _ := json.Marshal(ire.Index); !bytes.Equal(gotJSON, wantJSON) || ire.Building || ire.ScanLimit != tc.n-1 {
			t.Fatalf("error %+v, want index %s, not building, limit %d", ire, wantJSON, tc.n-1)
		}
		if !strings.Contains(err.Error(), string(wantJSON)) {
			t.Fatalf("message %q does not name the index %s", err, wantJSON)
		}
	}
	// Without an equality or an order no index serves the query: the
	// refusal says so instead of naming an empty index.
	_, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: qCompile(t, query.Query{Collection: "c", Where: []query.Filter{where("k", "in", `[1,2]`)}}), ScanLimit: 9})
	if ire := (*IndexRequiredError)(nil); !errors.As(err, &ire) || len(ire.Index.Fields) != 0 || !strings.Contains(err.Error(), "no index can serve it") {
		t.Fatalf("unindexable query over the scan limit: %v", err)
	}
	// The automatic index serves an equality however large the collection
	// (the client pages within the budget).
	q := query.Query{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, Limit: 3}
	docsGot, plans, _ := qAll(t, s, "p", q, 2, nil)
	if len(docsGot) != 10 || plans[0] != "auto:s" {
		t.Fatalf("auto plan under a budget of 2: %d documents, plans %v", len(docsGot), plans)
	}
	// Ordered by the field the equality fixes, the order is the path's: streamed too.
	q.OrderBy = []query.Order{desc("s")}
	docsGot, plans, _ = qAll(t, s, "p", q, 2, nil)
	if len(docsGot) != 10 || plans[0] != "auto:s" || !slices.IsSortedFunc(docsGot, func(a, b *Document) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatalf("auto plan ordered by the pinned field: %d documents, plans %v", len(docsGot), plans)
	}
	// With an order, the automatic index's matches are sorted: more than the
	// limit of them is refused too.
	q.OrderBy = []query.Order{asc("k")}
	_, err = s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: qCompile(t, q), ScanLimit: 9})
	var ire *IndexRequiredError
	if !errors.As(err, &ire) {
		t.Fatalf("sorted auto plan over the scan limit: %v, want IndexRequiredError", err)
	}
}

func TestQuery_AutoPlanTakesTheNarrowestEquality(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 50 {
		docs[fmt.Sprintf("c/d%02d", i)] = fmt.Sprintf(`{"wide":"w","narrow":%d,"k":%d}`, i%10, 50-i)
	}
	qPut(t, s, "p", docs)
	qWaitAuto(t, s)
	for _, w := range [][]query.Filter{
		{where("wide", "==", `"w"`), where("narrow", "==", `3`)},
		{where("narrow", "==", `3`), where("wide", "==", `"w"`)},
	} {
		// Sorted by k, the automatic plan collects its matches: through
		// "narrow" 5 of them, through "wide" 50, over the limit of 10.
		q := query.Query{Collection: "c", Where: w, OrderBy: []query.Order{asc("k")}}
		res, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: qCompile(t, q), ScanLimit: 10})
		if err != nil || res.Plan != "auto:narrow" || len(res.Documents) != 5 {
			t.Fatalf("%v: %+v, %v; want 5 documents through auto:narrow", w, res, err)
		}
	}
}

// TestQuery_EqualityOutsideTheAutomaticIndexScans: strings over 1024 bytes,
// arrays and objects have no automatic entries, so an equality on one is
// answered by a scan, not by an empty automatic range.
func TestQuery_EqualityOutsideTheAutomaticIndexScans(t *testing.T) {
	s := qOpen(t)
	long := strings.Repeat("é", 600) // 1200 bytes
	qPut(t, s, "p", map[string]string{
		"c/long":  fmt.Sprintf(`{"v":%q}`, long),
		"c/edge":  fmt.Sprintf(`{"v":%q}`, strings.Repeat("x", 1024)),
		"c/arr":   `{"v":[1,{"a":2}]}`,
		"c/obj":   `{"v":{"a":[1]}}`,
		"c/other": `{"v":"x"}`,
	})
	qWaitAuto(t, s)
	for _, tc := range []struct{ operand, plan, want string }{
		{fmt.Sprintf("%q", long), "scan", "c/long"},
		{fmt.Sprintf("%q", strings.Repeat("x", 1024)), "auto:v", "c/edge"},
		{`[1,{"a":2}]`, "scan", "c/arr"},
		{`{"a":[1]}`, "scan", "c/obj"},
	} {
		res := qRun(t, s, QueryRequest{ProjectID: "p", Query: qCompile(t, query.Query{Collection: "c", Where: []query.Filter{where("v", "==", tc.operand)}})})
		if got := qRel("p", res.Documents); res.Plan != tc.plan || !slices.Equal(got, []string{tc.want}) {
			t.Fatalf("== %.20s...: plan %q, documents %v; want %q, [%s]", tc.operand, res.Plan, got, tc.plan, tc.want)
		}
	}
}

func TestQuery_BuildingIndexIsNamedInTheRefusal(t *testing.T) {
	// With its builder stopped, an fsm keeps a declared index building.
	f := mustOpenFSM(t, t.TempDir())
	f.builder.stop()
	s := &Store{fsm: f, logger: testLogger()}
	ops := []Op{}
	for i := range 20 {
		ops = append(ops, put(fmt.Sprintf("p/c/d%02d", i), fmt.Sprintf(`{"k":%d}`, i)))
	}
	mustOK(t, f, 1, &Txn{Ops: ops})
	ix := query.Index{Collection: "c", Fields: []query.IndexField{ixf("k", "desc")}}
	body, _ := json.Marshal(map[string]any{"indexes": []query.Index{ix}})
	mustOK(t, f, 2, &Txn{Ops: []Op{put(IndexesPath("p"), string(body))}})
	states, err := s.Indexes("p")
	if err != nil || len(states) != 1 || states[0].State != IndexBuilding {
		t.Fatalf("the index is %+v (%v) without a builder, want one building", states, err)
	}
	c := qCompile(t, query.Query{Collection: "c", OrderBy: []query.Order{desc("k")}})
	_, err = s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: c, ScanLimit: 5})
	var ire *IndexRequiredError
	if !errors.As(err, &ire) || !ire.Building {
		t.Fatalf("query served only by a building index: %v, want IndexRequiredError with Building", err)
	}
	// Under the limit it scans meanwhile.
	res, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: c, ScanLimit: 50})
	if err != nil || res.Plan != "scan" || len(res.Documents) != 20 || res.Revision != 2 {
		t.Fatalf("scan while building: %+v, %v", res, err)
	}
}

func TestQuery_PageBytesCapped(t *testing.T) {
	s := qOpen(t)
	big := strings.Repeat("x", 900<<10)
	for i := range 12 {
		mustTxn(t, s, put(fmt.Sprintf("p/c/d%02d", i), fmt.Sprintf(`{"k":%d,"s":"on","b":%q}`, i, big)))
	}
	qWaitAuto(t, s)
	for _, q := range []query.Query{
		{Collection: "c", OrderBy: []query.Order{asc("k")}, Limit: 50},
		{Collection: "c", Where: []query.Filter{where("s", "==", `"on"`)}, Limit: 50},
	} {
		res := qPage(t, s, "p", q, "", 0, nil)
		size := 0
		for _, d := range res.Documents[:len(res.Documents)-1] {
			size += len(d.Data)
		}
		if len(res.Documents) == 12 || res.NextCursor == "" || size >= maxListBytes {
			t.Fatalf("%s: a page of %d documents (cursor %q), want it cut after 8 MiB", res.Plan, len(res.Documents), res.NextCursor)
		}
		all, _, _ := qAll(t, s, "p", q, 0, nil)
		if len(all) != 12 {
			t.Fatalf("%s: %d documents over all pages, want 12", res.Plan, len(all))
		}
	}
}

func TestQuery_RevisionCursorErrorsAndCancel(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 600 {
		docs[fmt.Sprintf("c/d%03d", i)] = fmt.Sprintf(`{"k":%d}`, i%7)
	}
	qPut(t, s, "p", docs)
	q := query.Query{Collection: "c", OrderBy: []query.Order{asc("k")}, Limit: 10}
	res := qPage(t, s, "p", q, "", 0, nil)
	if res.Revision != s.AppliedIndex() || res.Revision == 0 {
		t.Fatalf("revision %d, applied %d", res.Revision, s.AppliedIndex())
	}
	// A cursor of another query is refused as the query package says.
	other := query.Query{Collection: "c", OrderBy: []query.Order{desc("k")}, Limit: 10}
	other.StartAfter = res.NextCursor
	oc, err := query.Compile(&other)
	if err == nil {
		_, err = s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: oc})
	}
	var qe *query.Error
	if !errors.As(err, &qe) || qe.Field != "startAfter" {
		t.Fatalf("foreign cursor: %v, want a query.Error on startAfter", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Query(ctx, QueryRequest{ProjectID: "p", Query: qCompile(t, q)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled query: %v, want context.Canceled", err)
	}
}

// TestQuery_CursorCarriesAcrossPlans: a cursor is a position in the
// query's order, whichever plan issued it: paging goes on when an index
// becomes ready between two pages.
func TestQuery_CursorCarriesAcrossPlans(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	for i := range 30 {
		docs[fmt.Sprintf("c/d%02d", i)] = fmt.Sprintf(`{"k":%d,"v":%d}`, i%7, i%4)
	}
	qPut(t, s, "p", docs)
	for _, tc := range []struct {
		q  query.Query
		ix query.Index
	}{
		{query.Query{Collection: "c", OrderBy: []query.Order{desc("k")}, Limit: 4},
			query.Index{Collection: "c", Fields: []query.IndexField{ixf("k", "desc")}}},
		{query.Query{Collection: "c", Where: []query.Filter{where("v", ">=", `1`)}, OrderBy: []query.Order{asc("v"), desc("k")}, Limit: 4},
			query.Index{Collection: "c", Fields: []query.IndexField{ixf("v", "desc"), ixf("k", "asc")}}}, // served backwards
	} {
		want := qModel(docs).want(qCompile(t, tc.q), "p", nil)
		mustTxn(t, s, delIfExists(IndexesPath("p")))
		first := qPage(t, s, "p", tc.q, "", 0, nil)
		if first.Plan != "scan" || first.NextCursor == "" {
			t.Fatalf("first page: plan %q, cursor %q", first.Plan, first.NextCursor)
		}
		qDeclare(t, s, "p", tc.ix)
		got := qRel("p", first.Documents)
		for cursor := first.NextCursor; cursor != ""; {
			res := qPage(t, s, "p", tc.q, cursor, 0, nil)
			if !strings.HasPrefix(res.Plan, "index:") {
				t.Fatalf("later page: plan %q", res.Plan)
			}
			got = append(got, qRel("p", res.Documents)...)
			cursor = res.NextCursor
		}
		qSame(t, fmt.Sprintf("%+v across plans", tc.q.OrderBy), got, want)
	}
}

// ---- cursors under concurrent writes --------------------------------------------

func TestQuery_CursorsStableUnderConcurrentWrites(t *testing.T) {
	s := qOpen(t)
	rng := rand.New(rand.NewPCG(7, 11))
	docs := map[string]string{}
	for i := range 200 {
		docs[fmt.Sprintf("c/d%03d", i)] = fmt.Sprintf(`{"k":%d,"r":%d,"s":%q}`, rng.IntN(30), rng.IntN(30), []string{"open", "done"}[rng.IntN(2)])
	}
	qPut(t, s, "p", docs)
	qDeclare(t, s, "p", query.Index{Collection: "c", Fields: []query.IndexField{ixf("s", "asc"), ixf("k", "desc")}})
	qWaitAuto(t, s)
	open := where("s", "==", `"open"`)
	for _, tc := range []struct {
		q    query.Query
		plan string
	}{
		{query.Query{Collection: "c", OrderBy: []query.Order{asc("k")}}, "scan"},
		{query.Query{Collection: "c", Where: []query.Filter{open}}, "auto:s"},
		{query.Query{Collection: "c", Where: []query.Filter{open}, OrderBy: []query.Order{asc("r")}}, "auto:s"},
		{query.Query{Collection: "c", Where: []query.Filter{open}, OrderBy: []query.Order{desc("k")}}, "index:"},
		{query.Query{Collection: "c", Where: []query.Filter{open}, OrderBy: []query.Order{asc("k")}}, "index:"}, // the index backwards
	} {
		q := tc.q
		q.Limit = 7
		c0 := qCompile(t, q)
		// The state at the start, as the model sees it.
		start := qModel{}
		for p, d := range docs {
			start[p] = d
		}
		touched := map[string]bool{}
		cursor := ""
		var got []*Document
		var lastKey []byte
		for pages := 0; ; pages++ {
			if pages > 200 {
				t.Fatal("paging does not end")
			}
			res := qPage(t, s, "p", q, cursor, 0, nil)
			if !strings.HasPrefix(res.Plan, tc.plan) {
				t.Fatalf("plan %q, want %q", res.Plan, tc.plan)
			}
			for _, d := range res.Documents {
				k := c0.SortKey(d.Path, d.Data)
				if lastKey != nil && bytes.Compare(k, lastKey) <= 0 {
					t.Fatalf("%s: %s comes at or before the previous result in query order", res.Plan, d.Path)
				}
				lastKey = k
			}
			got = append(got, res.Documents...)
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
			// Writes between pages: modify, delete, create.
			var ops []Op
			for range 3 {
				p := fmt.Sprintf("c/d%03d", rng.IntN(260))
				touched[p] = true
				switch rng.IntN(3) {
				case 0:
					ops = append(ops, delIfExists("p/"+p))
					delete(docs, p)
				default:
					d := fmt.Sprintf(`{"k":%d,"r":%d,"s":%q}`, rng.IntN(30), rng.IntN(30), []string{"open", "done"}[rng.IntN(2)])
					ops = append(ops, put("p/"+p, d))
					docs[p] = d
				}
			}
			mustTxn(t, s, ops...)
		}
		seen := map[string]int{}
		for _, d := range got {
			seen[strings.TrimPrefix(d.Path, "p/")]++
		}
		for _, rel := range start.want(c0, "p", nil) {
			if touched[rel] {
				continue
			}
			if seen[rel] != 1 {
				t.Fatalf("%+v: %s existed unchanged throughout and was returned %d times", q, rel, seen[rel])
			}
		}
		for rel, n := range seen {
			if n > 1 && !touched[rel] {
				t.Fatalf("%s returned %d times", rel, n)
			}
		}
	}
}

// TestQuery_OneViewWhileWriting: writers keep exactly 50 documents open,
// moving one in and one out per txn; a query that read documents from two
// moments would see 49 or 51.
func TestQuery_OneViewWhileWriting(t *testing.T) {
	s := qOpen(t)
	docs := map[string]string{}
	state := make([]bool, 100)
	for i := range 100 {
		state[i] = i%2 == 0
		docs[fmt.Sprintf("c/d%03d", i)] = fmt.Sprintf(`{"s":%q,"k":%d}`, map[bool]string{true: "open", false: "done"}[state[i]], i)
	}
	qPut(t, s, "p", docs)
	qDeclare(t, s, "p", query.Index{Collection: "c", Fields: []query.IndexField{ixf("s", "asc"), ixf("k", "asc")}})
	qWaitAuto(t, s)
	done := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for n := 0; n < 150; n++ {
			in, out := rng.IntN(100), rng.IntN(100)
			for state[in] || !state[out] {
				in, out = rng.IntN(100), rng.IntN(100)
			}
			state[in], state[out] = true, false
			k1, k2 := rng.IntN(1000), rng.IntN(1000)
			res, err := s.Txn(context.Background(), &Txn{Time: time.Now().UnixNano(), Ops: []Op{
				put(fmt.Sprintf("p/c/d%03d", in), fmt.Sprintf(`{"s":"open","k":%d}`, k1)),
				put(fmt.Sprintf("p/c/d%03d", out), fmt.Sprintf(`{"s":"done","k":%d}`, k2)),
			}})
			if err == nil && !res.OK() {
				err = fmt.Errorf("txn refused: %s", res.Err)
			}
			if err != nil {
				werr <- err
				return
			}
		}
	}()
	open := where("s", "==", `"open"`)
	queries := []query.Query{
		{Collection: "c", Where: []query.Filter{open}, Limit: 1000},                                       // auto, path order
		{Collection: "c", Where: []query.Filter{open}, OrderBy: []query.Order{desc("k")}, Limit: 1000},    // index backwards
		{Collection: "c", Where: []query.Filter{where("s", "in", `["open"]`)}, Limit: 1000},               // scan
		{Collection: "c", Where: []query.Filter{open}, Count: true},                                       // auto count
		{Collection: "c", Where: []query.Filter{open}, OrderBy: []query.Order{asc("k")}, Count: true},     // index count
		{Collection: "c", Where: []query.Filter{where("s", "not-in", `["done"]`)}, Count: true, Limit: 1}, // scan count
	}
	plans := []string{"auto:s", "index:", "scan", "auto:s", "index:", "scan"}
	runs := 0
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		for i, q := range queries {
			res := qRun(t, s, QueryRequest{ProjectID: "p", Query: qCompile(t, q)})
			if !strings.HasPrefix(res.Plan, plans[i]) {
				t.Fatalf("query #%d: plan %q, want %s", i, res.Plan, plans[i])
			}
			n := res.Count
			if !q.Count {
				n = len(res.Documents)
			}
			if n != 50 || res.NextCursor != "" {
				t.Fatalf("%s at revision %d: %d open documents (cursor %q), want 50", res.Plan, res.Revision, n, res.NextCursor)
			}
			runs++
		}
	}
	select {
	case err := <-werr:
		t.Fatal(err)
	default:
	}
	t.Logf("%d queries during 150 txns", runs)
}

// ---- differential: index vs no index vs the model ----------------------------------

func TestQuery_DifferentialIndexScanAndModel(t *testing.T) {
	s := qOpen(t)
	rng := rand.New(rand.NewPCG(18, 2026))
	// Values drawn from a small pool so that equalities and ties are common,
	// with every type mixed into the ordered fields.
	pool := []string{`null`, `false`, `true`, `-2`, `0`, `1`, `1.5`, `3`, `""`, `"a"`, `"b"`, `"ab"`, `[]`, `[1]`, `["a"]`, `{}`, `{"x":1}`}
	small := []string{`0`, `1`, `2`, `"x"`, `"y"`}
	gen := func() string {
		var parts []string
		if rng.IntN(10) > 0 {
			parts = append(parts, `"a":`+small[rng.IntN(len(small))])
		}
		if rng.IntN(10) > 0 {
			parts = append(parts, `"b":`+pool[rng.IntN(len(pool))])
		}
		if rng.IntN(10) > 1 {
			parts = append(parts, fmt.Sprintf(`"c":%d`, rng.IntN(25)))
		}
		if rng.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf(`"tags":["t%d","t%d"]`, rng.IntN(4), rng.IntN(4)))
		}
		if rng.IntN(2) == 0 {
			parts = append(parts, `"n":{"m":`+small[rng.IntN(len(small))]+`}`)
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	}
	docs := map[string]string{}
	for i := range 400 {
		docs[fmt.Sprintf("items/i%03d", i)] = gen()
	}
	for i := range 150 {
		docs[fmt.Sprintf("g/k%d/items/j%03d", i%9, i)] = gen()
	}
	for i := range 30 {
		docs[fmt.Sprintf("items/i%03d/items/deep%d", i, i)] = gen()
	}
	qPut(t, s, "pn", docs)
	qPut(t, s, "px", docs)
	var ixs []query.Index
	for _, scope := range []bool{false, true} {
		for _, fields := range [][]query.IndexField{
			{ixf("a", "asc"), ixf("c", "asc")},
			{ixf("a", "asc"), ixf("c", "desc")},
			{ixf("c", "asc")},
			{ixf("c", "desc")},
			{ixf("b", "asc")},
			{ixf("a", "asc"), ixf("b", "desc"), ixf("c", "asc")},
			{ixf("b", "asc"), ixf("a", "asc"), ixf("c", "desc")},
			{ixf("a", "asc"), ixf("n.m", "asc")},
		} {
			ixs = append(ixs, query.Index{Collection: "items", CollectionGroup: scope, Fields: fields})
		}
	}
	qDeclare(t, s, "px", ixs...)
	qWaitAuto(t, s)
	m := qModel(docs)

	randVal := func(p []string) string { return p[rng.IntN(len(p))] }
	randQuery := func() query.Query {
		q := query.Query{Collection: "items", CollectionGroup: rng.IntN(4) == 0}
		if rng.IntN(3) > 0 {
			q.Where = append(q.Where, where("a", "==", randVal(small)))
		}
		if rng.IntN(4) == 0 {
			q.Where = append(q.Where, where("b", "==", randVal(pool)))
		}
		dir := []string{"asc", "desc"}[rng.IntN(2)]
		switch rng.IntN(5) {
		case 0: // order by c, maybe with a range on it
			q.OrderBy = []query.Order{{Field: "c", Direction: dir}}
			if rng.IntN(2) == 0 {
				q.Where = append(q.Where, where("c", []string{"<", "<=", ">", ">="}[rng.IntN(4)], fmt.Sprint(rng.IntN(25))))
			}
		case 1: // a range on b (mixed types), ordered by it
			q.Where = append(q.Where, where("b", []string{"<", "<=", ">", ">="}[rng.IntN(4)], randVal(pool)))
			q.OrderBy = []query.Order{{Field: "b", Direction: dir}}
		case 2:
			q.OrderBy = []query.Order{{Field: "b", Direction: dir}, {Field: "c", Direction: []string{"asc", "desc"}[rng.IntN(2)]}}
		case 3:
			q.OrderBy = []query.Order{{Field: "n.m", Direction: dir}}
		}
		if rng.IntN(4) == 0 {
			q.Where = append(q.Where, where("tags", "array-contains", fmt.Sprintf(`"t%d"`, rng.IntN(4))))
		}
		if rng.IntN(6) == 0 {
			q.Where = append(q.Where, where("c", "!=", fmt.Sprint(rng.IntN(25))))
		}
		q.Limit = 1 + rng.IntN(40)
		return q
	}
	plans := map[string]int{}
	for i := range 250 {
		q := randQuery()
		c, err := query.Compile(&q)
		if err != nil {
			// A combination the language refuses (Firestore's rules): not
			// this test's business.
			continue
		}
		var allowDoc func(*Document) bool
		var allowRel func(string) bool
		keep := uint32(10)
		if i%3 == 0 {
			keep = 6
		}
		want := m.want(c, "pn", nil)
		if keep < 10 {
			_, allowRel = hashAllow("", keep)
			want = m.want(c, "pn", allowRel)
		}
		for _, pid := range []string{"pn", "px"} {
			if keep < 10 {
				allowDoc, _ = hashAllow(pid, keep)
			}
			got, ps, _ := qAll(t, s, pid, q, 100000, allowDoc)
			qSame(t, fmt.Sprintf("query #%d %s %+v (plans %v)", i, pid, q, ps), qRel(pid, got), want)
			plans[ps[0]]++
			if pid == "px" && ps[0] != "scan" {
				// The same query within a tiny per-call budget: short pages, same results.
				budget := 1 + rng.IntN(5)
				if !strings.HasPrefix(ps[0], "auto:") || (len(q.OrderBy) == 0 && !hasRange(c)) {
					got, _, _ = qAll(t, s, pid, q, budget, allowDoc)
					qSame(t, fmt.Sprintf("query #%d %s budget %d %+v", i, pid, budget, q), qRel(pid, got), want)
				}
			}
			cq := q
			cq.Count = true
			res := qRun(t, s, QueryRequest{ProjectID: pid, Query: qCompile(t, cq), ScanLimit: 100000, Allow: allowDoc})
			if res.Count != len(want) {
				t.Fatalf("query #%d %s count %d, want %d (%+v)", i, pid, res.Count, len(want), q)
			}
			// A count after the first page's cursor counts the rest.
			if first := qPage(t, s, pid, q, "", 100000, allowDoc); first.NextCursor != "" {
				cq.StartAfter = first.NextCursor
				res = qRun(t, s, QueryRequest{ProjectID: pid, Query: qCompile(t, cq), ScanLimit: 100000, Allow: allowDoc})
				if res.Count != len(want)-len(first.Documents) {
					t.Fatalf("query #%d %s count after the first page %d, want %d (%+v)", i, pid, res.Count, len(want)-len(first.Documents), q)
				}
			}
		}
	}
	t.Logf("plans used: %v", plans)
	indexed := 0
	for p, n := range plans {
		if strings.HasPrefix(p, "index:") {
			indexed += n
		}
	}
	if indexed < 40 || plans["scan"] < 40 {
		t.Fatalf("plans used %v: too few index or scan runs for a differential test", plans)
	}
}

func hasRange(c *query.Compiled) bool {
	_, _, _, _, _, ok := c.Range()
	return ok
}

// ---- unit: key ranges ----------------------------------------------------------------

func TestKeySuccessorAndSystemPaths(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ab", "ac"}, {"a\xff", "b"}, {"a\xfe\xff\xff", "a\xff"},
	} {
		if got := keySuccessor([]byte(tc.in)); string(got) != tc.want {
			t.Fatalf("keySuccessor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for p, want := range map[string]bool{
		"p/a/b": false, "p/_a": true, "p/a/_b/c": true, "p/a/b_": false, "p": false, "p/a/b/_c": true,
	} {
		if got := isSystemPath(p); got != want {
			t.Fatalf("isSystemPath(%q) = %v", p, got)
		}
	}
	for rest, want := range map[string]bool{
		"orders/a": true, "u/1/orders/b": true, "orders": false, "u/orders": false, "xorders/a": false, "u/orders2/a": false,
	} {
		if got := inGroup(rest, "orders"); got != want {
			t.Fatalf("inGroup(%q) = %v", rest, got)
		}
	}
}

// BenchmarkQuery measures one page of 20 on 20,000 documents through each
// plan (go test -run XXX -bench Query ./raftstore).
func BenchmarkQuery(b *testing.B) {
	s := openBenchStore(b)
	var ops []Op
	for i := range 20000 {
		ops = append(ops, put(fmt.Sprintf("p/orders/o%05d", i), fmt.Sprintf(`{"status":%q,"createdAt":%d,"total":%d}`, []string{"open", "closed", "held", "new"}[i%4], i, i%100)))
		if len(ops) == 500 {
			benchTxn(b, s, ops)
			ops = nil
		}
	}
	body, _ := json.Marshal(map[string]any{"indexes": []query.Index{{Collection: "orders", Fields: []query.IndexField{ixf("status", "asc"), ixf("createdAt", "desc")}}}})
	benchTxn(b, s, []Op{put(IndexesPath("p"), string(body))})
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := s.Indexes("p")
		ready := false
		_ = s.fsm.view(func(txn *badger.Txn) error { ready = autoReady(txn); return nil })
		if err == nil && len(st) == 1 && st[0].State == IndexReady && ready {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("index not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	open := where("status", "==", `"open"`)
	for _, bc := range []struct {
		name string
		q    query.Query
	}{
		{"index", query.Query{Collection: "orders", Where: []query.Filter{open}, OrderBy: []query.Order{desc("createdAt")}, Limit: 20}},
		{"auto-stream", query.Query{Collection: "orders", Where: []query.Filter{open}, Limit: 20}},
		{"auto-sorted", query.Query{Collection: "orders", Where: []query.Filter{open}, OrderBy: []query.Order{asc("total")}, Limit: 20}},
		{"scan", query.Query{Collection: "orders", Where: []query.Filter{where("total", ">", `90`)}, Limit: 20}},
	} {
		c, err := query.Compile(&bc.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := s.Query(context.Background(), QueryRequest{ProjectID: "p", Query: c, ScanLimit: 100000})
				if err != nil || len(res.Documents) != 20 {
					b.Fatalf("%v %v", res, err)
				}
			}
		})
	}
}

func openBenchStore(b *testing.B) *Store {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(Config{NodeID: "n1", Dir: b.TempDir(), RaftListener: ln, RaftAdvertise: ln.Addr().String(),
		HTTPAdvertise: "http://127.0.0.1:1", Bootstrap: true, Secret: testSecret, Voter: true, Logger: testLogger(), Tuning: fastTuning()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !s.IsLeader() {
		if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

func benchTxn(b *testing.B, s *Store, ops []Op) {
	b.Helper()
	res, err := s.Txn(context.Background(), &Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil || !res.OK() {
		b.Fatalf("txn: %v %v", res, err)
	}
}
