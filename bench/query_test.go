package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestGenOrder(t *testing.T) {
	counts := map[string]int{}
	inKeyOrder := 0
	for i := range 4000 {
		o := genOrder(i)
		if o != genOrder(i) {
			t.Fatalf("order %d differs between calls", i)
		}
		counts[o.Status]++
		if o.CreatedAt < qBaseTime || o.Total < 0 || !strings.HasPrefix(o.Owner, "u") {
			t.Fatalf("order %d: %+v", i, o)
		}
		if i > 0 && o.CreatedAt > genOrder(i-1).CreatedAt {
			inKeyOrder++
		}
	}
	if len(counts) != len(qStatuses) {
		t.Fatalf("statuses %v, want all of %v", counts, qStatuses)
	}
	for s, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("status %s on %d of 4000 orders, want about a quarter", s, n)
		}
	}
	// createdAt must not follow the document names, or either system
	// could answer "newest first" from key order.
	if inKeyOrder < 1500 || inKeyOrder > 2500 {
		t.Errorf("createdAt grows with the name %d times in 4000, want about half", inKeyOrder)
	}
	if qDocID(42) != "o0000042" {
		t.Errorf("qDocID(42) = %s", qDocID(42))
	}
}

func TestSeedBatches(t *testing.T) {
	var eb struct {
		Writes []struct {
			Op         string `json:"op"`
			Collection string `json:"collection"`
			Data       order  `json:"data"`
		} `json:"writes"`
	}
	if err := json.Unmarshal(edgebaseSeedBatch("orders", 10, 13), &eb); err != nil {
		t.Fatal(err)
	}
	if len(eb.Writes) != 3 || eb.Writes[0].Op != "set" || eb.Writes[0].Collection != "orders/o0000010" || eb.Writes[2].Data != genOrder(12) {
		t.Errorf("edgebase batch %+v", eb)
	}
	var pb struct {
		Requests []struct {
			Method string `json:"method"`
			URL    string `json:"url"`
			Body   order  `json:"body"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(pbSeedBatch("orders", 10, 13), &pb); err != nil {
		t.Fatal(err)
	}
	if len(pb.Requests) != 3 || pb.Requests[0].Method != "POST" || pb.Requests[0].URL != "/api/collections/orders/records" || pb.Requests[2].Body != genOrder(12) {
		t.Errorf("PocketBase batch %+v", pb)
	}
}

func TestQueryRequests(t *testing.T) {
	var q struct {
		Collection string `json:"collection"`
		Where      []struct {
			Field, Op string
			Value     any
		} `json:"where"`
		OrderBy []struct{ Field, Direction string } `json:"orderBy"`
		Limit   int                                 `json:"limit"`
	}
	if err := json.Unmarshal(qQueryBody("orders", "paid"), &q); err != nil {
		t.Fatal(err)
	}
	if q.Collection != "orders" || len(q.Where) != 1 || q.Where[0].Field != "status" || q.Where[0].Op != "==" || q.Where[0].Value != "paid" ||
		len(q.OrderBy) != 1 || q.OrderBy[0].Field != "createdAt" || q.OrderBy[0].Direction != "desc" || q.Limit != 20 {
		t.Errorf("query %+v", q)
	}
	r := pbQueryRoute("orders_unindexed", "open")
	path, raw, _ := strings.Cut(r, "?")
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/api/collections/orders_unindexed/records" || v.Get("filter") != "(status='open')" || v.Get("sort") != "-createdAt" ||
		v.Get("perPage") != "20" || v.Get("skipTotal") != "1" {
		t.Errorf("PocketBase route %s", r)
	}
	seen := map[string]bool{}
	for i := range 4 {
		seen[qStatus(3, i)] = true
	}
	if len(seen) != 4 {
		t.Errorf("a client's 4 consecutive queries ask for %v, want every status", seen)
	}
}

func TestCheckAnswers(t *testing.T) {
	page := func(n int, status string, step int64) []order {
		var out []order
		for i := range n {
			out = append(out, order{Status: status, CreatedAt: qBaseTime + 1000 - int64(i)*step})
		}
		return out
	}
	ebBody := func(os []order) []byte {
		var docs []map[string]any
		for i, o := range os {
			docs = append(docs, map[string]any{"collection": "orders/" + qDocID(i), "data": o, "revision": 7})
		}
		b, _ := json.Marshal(map[string]any{"documents": docs, "nextCursor": "abc"})
		return b
	}
	pbBody := func(os []order) []byte {
		var items []map[string]any
		for i, o := range os {
			items = append(items, map[string]any{"id": qDocID(i), "collectionName": "orders", "status": o.Status, "createdAt": o.CreatedAt, "total": 1.5, "owner": "u1"})
		}
		b, _ := json.Marshal(map[string]any{"items": items, "page": 1, "perPage": 20, "totalItems": -1, "totalPages": -1})
		return b
	}
	good := page(20, "open", 3)
	ties := page(20, "open", 0)
	if err := checkEdgebaseQuery(ebBody(good), "open", 20); err != nil {
		t.Errorf("edgebase, a good page: %v", err)
	}
	if err := checkPBList(pbBody(good), "open", 20); err != nil {
		t.Errorf("PocketBase, a good page: %v", err)
	}
	if err := checkPBList(pbBody(ties), "open", 20); err != nil {
		t.Errorf("PocketBase, equal createdAt: %v", err)
	}
	rising := page(20, "open", -1)
	mixed := page(20, "open", 3)
	mixed[5].Status = "paid"
	for name, c := range map[string]struct {
		body []byte
		pb   bool
		kind string
	}{
		"edgebase short page":   {ebBody(good[:19]), false, "query: 19 documents, want 20"},
		"edgebase wrong status": {ebBody(mixed), false, "query: a document of another status"},
		"edgebase oldest first": {ebBody(rising), false, "query: not newest first"},
		"edgebase not JSON":     {[]byte("<html>"), false, "query: unreadable answer"},
		"pb short page":         {pbBody(nil), true, "pocketbase list: answer without items"},
		"pb empty page":         {[]byte(`{"items":[],"page":1}`), true, "pocketbase list: 0 documents, want 20"},
		"pb wrong status":       {pbBody(mixed), true, "pocketbase list: a document of another status"},
		"pb oldest first":       {pbBody(rising), true, "pocketbase list: not newest first"},
		"pb error answer":       {[]byte(`{"status":400,"message":"Something went wrong"}`), true, "pocketbase list: answer without items"},
	} {
		var err error
		if c.pb {
			err = checkPBList(c.body, "open", 20)
		} else {
			err = checkEdgebaseQuery(c.body, "open", 20)
		}
		var oe *opError
		if !errors.As(err, &oe) || oe.kind != c.kind {
			t.Errorf("%s: %v, want %q", name, err, c.kind)
		}
	}
	err := pbStatusError("GET", 403, []byte(`{"status":403,"message":"Only superusers can perform this action.","data":{}}`))
	if oe := (*opError)(nil); !errors.As(err, &oe) || oe.kind != "pocketbase GET 403 Only superusers can perform this action." || oe.status != 403 {
		t.Errorf("PocketBase error: %v", err)
	}
}

func TestCheckPBBatch(t *testing.T) {
	if err := checkPBBatch([]byte(`[{"status":200,"body":{"id":"a"}},{"status":200,"body":{"id":"b"}}]`), 2); err != nil {
		t.Errorf("good batch: %v", err)
	}
	for _, bad := range []string{
		`[{"status":200,"body":{}}]`,
		`[{"status":200,"body":{}},{"status":400,"body":{"message":"bad"}}]`,
		`{"status":400,"message":"Batch requests are not allowed."}`,
	} {
		if err := checkPBBatch([]byte(bad), 2); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestIndexReady(t *testing.T) {
	for body, ready := range map[string]bool{
		`{"indexes":[{"id":"x","collection":"orders","fields":[{"field":"status"}],"state":"ready"}]}`:    true,
		`{"indexes":[{"id":"x","collection":"orders","fields":[{"field":"status"}],"state":"building"}]}`: false,
		`{"indexes":[{"id":"x","collection":"other","state":"ready"}]}`:                                   false,
		`{"indexes":[]}`: false,
		`not json`:       false,
	} {
		if err := indexReady([]byte(body), "orders"); (err == nil) != ready {
			t.Errorf("%s: %v, want ready %v", body, err, ready)
		}
	}
}

func TestRunFor(t *testing.T) {
	var calls atomic.Int64
	rr, h, kinds, _ := runFor(context.Background(), 4, 200*time.Millisecond, func(ctx context.Context, c, i int) error {
		n := calls.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err() // cut by the end of the run: not counted
		case <-time.After(time.Millisecond):
		}
		if n%10 == 0 {
			return &opError{kind: "boom"}
		}
		return nil
	})
	if rr.WallSeconds < 0.2 || rr.WallSeconds > 2 {
		t.Errorf("wall %v s, want about 0.2", rr.WallSeconds)
	}
	if rr.Ops == 0 || rr.Ops != h.count() || rr.Errors != kinds["boom"] || rr.Errors == 0 {
		t.Errorf("ops %d (histogram %d), errors %d %v", rr.Ops, h.count(), rr.Errors, kinds)
	}
	if total := int(calls.Load()); rr.Ops+rr.Errors > total || rr.Ops+rr.Errors < total-4 {
		t.Errorf("%d ops + %d errors of %d calls: only the 4 cut at the end may be missing", rr.Ops, rr.Errors, total)
	}
}

func TestParseFlagsPeer(t *testing.T) {
	o, err := parseFlags([]string{"--nodes", "1", "--scenarios", "Q1,Q2,Q3", "--peer", "pocketbase"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.compare || o.peer != peerPocketBase || len(o.compared) != 2 || o.compared[0].Name != "Q1" || o.compared[1].Name != "Q2" {
		t.Fatalf("compared %+v (peer %q)", o.compared, o.peer)
	}
	if len(o.solo) != 1 || o.solo[0].Name != "Q3" {
		t.Errorf("solo %v, want Q3 on edgebase alone", o.solo)
	}
	if o.q1Docs != 100000 || o.q2Docs != 5000 || o.queryDuration != 10*time.Second {
		t.Errorf("defaults: %d, %d, %v", o.q1Docs, o.q2Docs, o.queryDuration)
	}
	q1, _ := findScenario("Q1")
	if o.opsFor(q1) != 0 || o.warmupFor(q1) != 1 {
		t.Errorf("Q1 is timed: ops %d, warm-up %d; want 0 and one run", o.opsFor(q1), o.warmupFor(q1))
	}
	o, err = parseFlags([]string{"--peer", "pocketbase", "--warmup", "0"}, io.Discard)
	if err != nil || len(o.compared) != 8 || o.compared[0].Name != "Q1" || o.compared[1].Name != "Q2" || len(o.solo) != 0 || o.warmupFor(q1) != 0 {
		t.Errorf("--peer pocketbase alone: %v, %+v; want Q1, Q2 and the 6 end-user workloads (issue 23), no warm-up with --warmup 0", err, o.compared)
	}
	o, err = parseFlags([]string{"--peer", "etcd", "--scenarios", "W2"}, io.Discard)
	if err != nil || !o.compare || o.peer != peerEtcd || len(o.compared) != 1 {
		t.Errorf("--peer etcd: %v %+v", err, o)
	}
	for _, bad := range [][]string{
		{"--peer", "mongo"},
		{"--peer", "pocketbase", "--scenarios", "W2"},
		{"--peer", "etcd", "--scenarios", "Q1"},
		{"--peer", "pocketbase", "--compare"},
		{"--scenarios", "Q1", "--q1-docs", "5"},
		{"--scenarios", "Q1", "--query-duration", "0s"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestQ3Plan(t *testing.T) {
	moves, modifies := 0, 0
	open := map[string]bool{}
	for k := range 40 {
		path, o, events := q3Plan(2, k)
		switch events {
		case 2:
			moves++
			if k%10 != 9 {
				t.Errorf("write %d moves", k)
			}
			// in, out, in, out: the same new order each pair
			if wasOpen := open[path]; wasOpen == (o.Status == "open") {
				t.Errorf("write %d: %s %s again", k, path, o.Status)
			}
			open[path] = o.Status == "open"
			if o.CreatedAt <= q3Order(q3Docs-1).CreatedAt {
				t.Errorf("write %d: the moved order is not the newest", k)
			}
		case 1:
			modifies++
			i, err := strconv.Atoi(strings.TrimPrefix(path, q3Coll+"/o"))
			if err != nil || i < q3Docs-2*q3Stable || q3Order(i).Status != "open" || o.CreatedAt != q3Order(i).CreatedAt {
				t.Errorf("write %d modifies %s (%+v): not one of the %d newest open orders, or moves it", k, path, o, q3Stable)
			}
		default:
			t.Errorf("write %d: %d events", k, events)
		}
	}
	if moves != 4 || modifies != 36 {
		t.Errorf("%d moves and %d modifications in 40 writes", moves, modifies)
	}
	for path, isOpen := range open {
		if isOpen {
			t.Errorf("%s left in the window after an even number of moves", path)
		}
	}
	p1, _, _ := q3Plan(1, 9)
	p2, _, _ := q3Plan(2, 9)
	if p1 == p2 {
		t.Errorf("runs 1 and 2 move the same order %s", p1)
	}
}

func TestQ3Latencies(t *testing.T) {
	ms := time.Millisecond
	writes := []q3Write{
		{rev: 10, events: 1, sent: 100 * ms, ack: 105 * ms},
		{rev: 11, events: 2, sent: 200 * ms, ack: 210 * ms},
		{rev: 12, events: 1, sent: 300 * ms, ack: 302 * ms},
		{rev: 13, events: 2, sent: -1}, // the run's undo: expected, not measured
	}
	done := make(chan struct{})
	close(done)
	qs := &q3State{subs: []*q3Sub{
		// every event, one of rev 11 labelled 12 (the node read ahead)
		{ended: make(chan struct{}), events: []q3Event{{10, 120 * ms}, {11, 205 * ms}, {12, 330 * ms}, {12, 331 * ms}, {13, 400 * ms}, {13, 400 * ms}}},
		// an event before the run (stray), one event lost (the later ones shift by one: the undo misses one); ended
		{ended: done, events: []q3Event{{9, 1}, {10, 150 * ms}, {11, 240 * ms}, {12, 350 * ms}, {13, 500 * ms}, {13, 501 * ms}}},
	}}
	lat, fromSend, missed, stray, lost := q3Latencies(qs, writes)
	// sub 0: 15, 0 (before the ack), 120 (rev 11's second), 29;
	// sub 1: 45, 30, 140 (rev 12's taken as rev 11's second), 198 (rev 13's as rev 12's)
	want := []time.Duration{0, 15 * ms, 29 * ms, 30 * ms, 45 * ms, 120 * ms, 140 * ms, 198 * ms}
	lat.sort()
	if !slices.Equal(lat.samples, want) {
		t.Errorf("latencies %v, want %v", lat.samples, want)
	}
	if fromSend.count() != 8 || fromSend.percentile(1) != 5*ms {
		t.Errorf("from sending %v", fromSend.samples)
	}
	if missed != 1 || stray != 1 || lost != 1 {
		t.Errorf("missed %d, stray %d, lost %d; want 1, 1, 1", missed, stray, lost)
	}
}
