package realtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
	rtclient "github.com/edgebase/edgebase/realtime/client"
)

// Live queries through a real node: the window a subscriber rebuilds from
// the snapshot and the change messages must always end equal to what
// POST /api/db/query answers for the same query at that moment.

// qmsg is a server message as a live query reads it.
type qmsg struct {
	Op         string          `json:"op"`
	ID         string          `json:"id"`
	Code       string          `json:"code"`
	Field      string          `json:"field"`
	Message    string          `json:"message"`
	Revision   uint64          `json:"revision"`
	Type       string          `json:"type"`
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Index      *int            `json:"index"`
	Checkpoint bool            `json:"checkpoint"`
	Documents  []doc           `json:"documents"`
	More       bool            `json:"more"`
	raw        string
}

func (m qmsg) String() string { return m.raw }

func (c *client) nextQ() qmsg {
	c.t.Helper()
	m := c.next()
	var q qmsg
	if err := json.Unmarshal([]byte(m.raw), &q); err != nil {
		c.t.Fatalf("decode %s: %v", m.raw, err)
	}
	q.raw = m.raw
	return q
}

// liveWindow is a subscriber's window, rebuilt from the messages exactly as
// docs/api.md tells a client to.
type liveWindow struct {
	t    testing.TB
	id   string
	docs []doc
	rev  uint64 // the last revision seen
	log  []string
	// The last checkpoint: the window is exactly the query's at cp.
	cp     uint64
	cpDocs []doc
}

func (w *liveWindow) paths() []string {
	out := make([]string, 0, len(w.docs))
	for _, d := range w.docs {
		out = append(out, d.Collection)
	}
	return out
}

func (w *liveWindow) find(path string) int {
	return slices.IndexFunc(w.docs, func(d doc) bool { return d.Collection == path })
}

// apply applies one message of the subscription; it reports false for a
// message it does not know (the caller decides).
func (w *liveWindow) apply(m qmsg) bool {
	w.t.Helper()
	if m.ID != w.id {
		w.t.Fatalf("message for %q, want %q: %s", m.ID, w.id, m)
	}
	w.log = append(w.log, m.raw)
	switch m.Op {
	case "snapshot":
		w.docs = append(w.docs, m.Documents...)
		w.rev = m.Revision
		if !m.More {
			w.cp, w.cpDocs = m.Revision, slices.Clone(w.docs)
		}
		return true
	case "change":
	default:
		return false
	}
	if m.Revision < w.rev {
		w.t.Fatalf("change at revision %d after %d: %s", m.Revision, w.rev, m)
	}
	w.rev = m.Revision
	if m.Index == nil {
		w.t.Fatalf("change without index: %s", m)
	}
	i := *m.Index
	switch m.Type {
	case "removed":
		at := w.find(m.Collection)
		if at != i {
			w.t.Fatalf("removed %s at index %d, the window has it at %d: %v", m.Collection, i, at, w.paths())
		}
		w.docs = slices.Delete(w.docs, at, at+1)
	case "added", "modified":
		at := w.find(m.Collection)
		if m.Type == "added" && at >= 0 {
			w.t.Fatalf("added %s, the window holds it: %v", m.Collection, w.paths())
		}
		if m.Type == "modified" && at < 0 {
			w.t.Fatalf("modified %s, the window does not hold it: %v", m.Collection, w.paths())
		}
		if at >= 0 {
			w.docs = slices.Delete(w.docs, at, at+1)
		}
		if i < 0 || i > len(w.docs) {
			w.t.Fatalf("%s %s at index %d of a window of %d", m.Type, m.Collection, i, len(w.docs))
		}
		w.docs = slices.Insert(w.docs, i, doc{Collection: m.Collection, Data: m.Data})
	default:
		w.t.Fatalf("unknown change type: %s", m)
	}
	if m.Checkpoint {
		w.cp, w.cpDocs = m.Revision, slices.Clone(w.docs)
	}
	return true
}

// restQuery is POST /api/db/query's answer for the caller.
func (h *harness) restQuery(t testing.TB, token string, q map[string]any) []doc {
	t.Helper()
	var res struct{ Documents []doc }
	st, b := h.do(t, http.MethodPost, "/api/db/query", map[string]string{"Authorization": "Bearer " + token}, q, &res)
	if st != http.StatusOK {
		t.Fatalf("query: %d %s", st, b)
	}
	return res.Documents
}

func pathsOf(docs []doc) []string {
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.Collection)
	}
	return out
}

// converge reads the subscription's messages until its window equals what
// the REST query answers, and checks the data too.
func (w *liveWindow) converge(c *client, h *harness, token string, q map[string]any) {
	w.t.Helper()
	want := h.restQuery(w.t, token, q)
	deadline := time.Now().Add(msgWait)
	for !sameDocs(w.docs, want) {
		if time.Now().After(deadline) {
			w.t.Fatalf("window %v, want %v; messages:\n%s", w.paths(), pathsOf(want), strings.Join(w.log, "\n"))
		}
		m, err := c.read(time.Until(deadline))
		if err != nil {
			w.t.Fatalf("window %v, want %v: %v; messages:\n%s", w.paths(), pathsOf(want), err, strings.Join(w.log, "\n"))
		}
		var qm qmsg
		if err := json.Unmarshal([]byte(m.raw), &qm); err != nil {
			w.t.Fatal(err)
		}
		qm.raw = m.raw
		if !w.apply(qm) {
			w.t.Fatalf("unexpected %s", qm)
		}
	}
}

func sameDocs(a, b []doc) bool {
	return slices.EqualFunc(a, b, func(x, y doc) bool {
		return x.Collection == y.Collection && canonJSON(x.Data) == canonJSON(y.Data)
	})
}

func canonJSON(b json.RawMessage) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// subscribeQuery sends a live-query subscribe (since when non-nil).
func (c *client) subscribeQuery(id string, q map[string]any, since *uint64) {
	c.t.Helper()
	m := map[string]any{"op": "subscribe", "id": id, "query": q}
	if since != nil {
		m["since"] = *since
	}
	c.send(m)
}

// snapshotWindow reads a live query's snapshot into a window.
func snapshotWindow(t testing.TB, c *client, id string) *liveWindow {
	t.Helper()
	w := &liveWindow{t: t, id: id}
	for {
		m := c.nextQ()
		if m.Op != "snapshot" {
			t.Fatalf("got %s, want the snapshot of %s", m, id)
		}
		w.apply(m)
		if !m.More {
			return w
		}
	}
}

func TestLiveQueryWindow(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	own := p.OwnerToken
	for i, n := range []float64{1, 2, 3, 4} {
		h.put(t, own, fmt.Sprintf("items/i%d", i+1), map[string]any{"cat": "a", "n": n})
	}
	h.put(t, own, "items/b1", map[string]any{"cat": "b", "n": 0})
	h.put(t, own, "other/x", map[string]any{"cat": "a", "n": 0})
	q := map[string]any{"collection": "items", "where": []any{map[string]any{"field": "cat", "op": "==", "value": "a"}},
		"orderBy": []any{map[string]any{"field": "n"}}, "limit": 3}

	c, _ := h.connect(t, p, own)
	c.subscribeQuery("q", q, nil)
	w := snapshotWindow(t, c, "q")
	if got := w.paths(); !slices.Equal(got, []string{"items/i1", "items/i2", "items/i3"}) {
		t.Fatalf("snapshot %v", got)
	}

	step := func(name string, write func(), wantMsgs ...string) {
		t.Helper()
		write()
		for _, want := range wantMsgs {
			m := c.nextQ()
			w.apply(m)
			if got := m.Type + " " + m.Collection + fmt.Sprintf(" %d", *m.Index); got != want {
				t.Fatalf("%s: got %s, want %q", name, m, want)
			}
		}
		w.converge(c, h, own, q)
	}
	// Enters at the front: the last one is pushed out.
	step("enter", func() { h.put(t, own, "items/i0", map[string]any{"cat": "a", "n": 0}) },
		"removed items/i3 2", "added items/i0 0")
	// Changes within, keeping its place.
	step("modify", func() { h.put(t, own, "items/i2", map[string]any{"cat": "a", "n": 2.5, "v": 1}) },
		"modified items/i2 2")
	// Moves within.
	step("move", func() { h.put(t, own, "items/i2", map[string]any{"cat": "a", "n": -1}) },
		"modified items/i2 0")
	// Leaves: refilled from beyond the window.
	step("delete", func() { h.del(t, own, "items/i1") },
		"removed items/i1 2", "added items/i3 2")
	// Stops matching: refilled.
	step("unmatch", func() { h.put(t, own, "items/i0", map[string]any{"cat": "b", "n": 0}) },
		"removed items/i0 1", "added items/i4 2")
	// Moves past the end of the full window but stays the next: it moves
	// within.
	step("move to the end", func() { h.put(t, own, "items/i2", map[string]any{"cat": "a", "n": 10}) },
		"modified items/i2 2")
	// Outside the query or beyond a full window: nothing is sent (the next
	// message is the next step's).
	h.put(t, own, "items/b1", map[string]any{"cat": "b", "n": -5})
	h.put(t, own, "other/y", map[string]any{"cat": "a", "n": -5})
	h.put(t, own, "items/i9", map[string]any{"cat": "a", "n": 100})
	step("enter between", func() { h.put(t, own, "items/i5", map[string]any{"cat": "a", "n": 3.5}) },
		"removed items/i2 2", "added items/i5 1")
	// Moves past the end of the full window: what follows takes its place.
	step("move out", func() { h.put(t, own, "items/i3", map[string]any{"cat": "a", "n": 50}) },
		"removed items/i3 0", "added items/i2 2")
	// One transaction, several documents: one group of messages at its
	// revision, the last one a checkpoint.
	rev := h.txn(t, putOp(p.ID+"/items/i7", `{"cat":"a","n":-7}`), putOp(p.ID+"/items/i8", `{"cat":"a","n":-8}`),
		raftstore.Op{Kind: raftstore.OpDelete, Path: p.ID + "/items/i5"})
	var got []string
	for len(got) < 10 {
		m := c.nextQ()
		w.apply(m)
		if m.Revision != rev {
			t.Fatalf("a message of the transaction at revision %d, want %d: %s", m.Revision, rev, m)
		}
		got = append(got, fmt.Sprintf("%s %s %d", m.Type, m.Collection, *m.Index))
		if m.Checkpoint {
			break
		}
	}
	if want := []string{"removed items/i2 2", "removed items/i5 0", "added items/i8 0", "added items/i7 1"}; !slices.Equal(got, want) {
		t.Fatalf("transaction: %q, want %q with a checkpoint on the last only", got, want)
	}
	w.converge(c, h, own, q)
	if got := w.paths(); !slices.Equal(got, []string{"items/i8", "items/i7", "items/i4"}) {
		t.Fatalf("after the transaction: %v", got)
	}
}

func TestLiveQueryRuleFilter(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	h.setRules(t, p, `{"rules":[
	{"match":"items/{id}","read":"auth.role == 'owner' || resource.data.pub == true","write":"auth.role == 'owner'"},
	{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`)
	own := p.OwnerToken
	u := h.register(t, p, "lq1")
	h.put(t, own, "items/a", map[string]any{"n": 1, "pub": true})
	h.put(t, own, "items/b", map[string]any{"n": 2, "pub": false})
	h.put(t, own, "items/c", map[string]any{"n": 3, "pub": true})
	h.put(t, own, "items/d", map[string]any{"n": 4, "pub": true})
	q := map[string]any{"collection": "items", "orderBy": []any{map[string]any{"field": "n"}}, "limit": 2}

	c, _ := h.connect(t, p, u.Token)
	c.subscribeQuery("q", q, nil)
	w := snapshotWindow(t, c, "q")
	if got := w.paths(); !slices.Equal(got, []string{"items/a", "items/c"}) {
		t.Fatalf("snapshot %v, want items/a, items/c (items/b is not readable)", got)
	}
	// Becomes readable: enters.
	h.put(t, own, "items/b", map[string]any{"n": 2, "pub": true})
	w.converge(c, h, u.Token, q)
	if got := w.paths(); !slices.Equal(got, []string{"items/a", "items/b"}) {
		t.Fatalf("after b became public: %v", got)
	}
	// Stops being readable: leaves, and the refill skips what is not readable.
	h.put(t, own, "items/c", map[string]any{"n": 3, "pub": false})
	h.put(t, own, "items/a", map[string]any{"n": 1, "pub": false})
	w.converge(c, h, u.Token, q)
	if got := w.paths(); !slices.Equal(got, []string{"items/b", "items/d"}) {
		t.Fatalf("after a and c became private: %v", got)
	}
}

// resumeQuery resubscribes with since and applies the replay up to resumed;
// a snapshot or a reset fails the test.
func resumeQuery(t *testing.T, c *client, w *liveWindow, q map[string]any) uint64 {
	t.Helper()
	// From the last checkpoint, with the window as it was then.
	since := w.cp
	w.docs = slices.Clone(w.cpDocs)
	c.subscribeQuery(w.id, q, &since)
	for {
		m := c.nextQ()
		switch m.Op {
		case "resumed":
			if m.Revision < since {
				t.Fatalf("resumed at %d below since %d", m.Revision, since)
			}
			w.rev = m.Revision
			w.cp, w.cpDocs = m.Revision, slices.Clone(w.docs)
			return m.Revision
		case "change":
			w.apply(m)
		default:
			t.Fatalf("resume from %d: got %s, want changes then resumed; so far:\n%s", since, m, strings.Join(w.log, "\n"))
		}
	}
}

func TestLiveQueryResume(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	own := p.OwnerToken
	for i := 1; i <= 6; i++ {
		h.put(t, own, fmt.Sprintf("feed/r%d", i), map[string]any{"n": i})
	}
	q := map[string]any{"collection": "feed", "orderBy": []any{map[string]any{"field": "n", "direction": "desc"}}, "limit": 3}

	c, _ := h.connect(t, p, own)
	c.subscribeQuery("q", q, nil)
	w := snapshotWindow(t, c, "q")
	if got := w.paths(); !slices.Equal(got, []string{"feed/r6", "feed/r5", "feed/r4"}) {
		t.Fatalf("snapshot %v", got)
	}
	h.put(t, own, "feed/r4", map[string]any{"n": 4, "v": 2})
	w.converge(c, h, own, q)
	_ = c.ws.CloseNow()

	t.Run("exact", func(t *testing.T) {
		// Missed while away: a document of the window moves out, one is
		// created in front, one of the window is deleted, one from beyond
		// moves in, one beyond changes and stays beyond.
		h.put(t, own, "feed/r6", map[string]any{"n": 0})
		h.put(t, own, "feed/r7", map[string]any{"n": 10})
		h.del(t, own, "feed/r5")
		h.put(t, own, "feed/r1", map[string]any{"n": 5.5})
		h.put(t, own, "feed/r2", map[string]any{"n": -2})
		h.put(t, own, "feed/r8", map[string]any{"n": 7})
		h.del(t, own, "feed/r8")

		c2, _ := h.connect(t, p, own)
		resumeQuery(t, c2, w, q)
		w.converge(c2, h, own, q) // no message needed: already equal
		if got := w.paths(); !slices.Equal(got, []string{"feed/r7", "feed/r1", "feed/r4"}) {
			t.Fatalf("after the resume: %v", got)
		}
		// And live from there.
		h.put(t, own, "feed/r3", map[string]any{"n": 8})
		w.converge(c2, h, own, q)
		_ = c2.ws.CloseNow()

		// Nothing missed: resumed at once, no change.
		c3, _ := h.connect(t, p, own)
		before := slices.Clone(w.paths())
		resumeQuery(t, c3, w, q)
		if got := w.paths(); !slices.Equal(got, before) {
			t.Fatalf("an idle resume changed the window: %v, was %v", got, before)
		}
		_ = c3.ws.CloseNow()
	})

	t.Run("reset after a rules change", func(t *testing.T) {
		since := w.rev
		h.setRules(t, p, `{"rules":[{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`)
		h.put(t, own, "feed/r9", map[string]any{"n": 9})
		c4, _ := h.connect(t, p, own)
		c4.subscribeQuery("q", q, &since)
		m := c4.nextQ()
		if m.Op != "reset" || m.ID != "q" {
			t.Fatalf("got %s, want reset", m)
		}
		w2 := snapshotWindow(t, c4, "q")
		w2.converge(c4, h, own, q)
	})
}

func TestLiveQueryCollectionGroup(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	own := p.OwnerToken
	h.put(t, own, "users/u1/notes/n1", map[string]any{"at": 1})
	h.put(t, own, "users/u2/notes/n2", map[string]any{"at": 2})
	h.put(t, own, "notes/n3", map[string]any{"at": 3})
	h.put(t, own, "users/u1/tasks/t1", map[string]any{"at": 0})
	q := map[string]any{"collection": "notes", "collectionGroup": true, "orderBy": []any{map[string]any{"field": "at"}}, "limit": 10}

	c, _ := h.connect(t, p, own)
	c.subscribeQuery("g", q, nil)
	w := snapshotWindow(t, c, "g")
	w.converge(c, h, own, q)
	if got := w.paths(); !slices.Equal(got, []string{"users/u1/notes/n1", "users/u2/notes/n2", "notes/n3"}) {
		t.Fatalf("snapshot %v", got)
	}
	h.put(t, own, "users/u1/tasks/t2", map[string]any{"at": -1})
	h.put(t, own, "a/b/c/notes/n4", map[string]any{"at": 0})
	m := c.nextQ()
	if m.Op != "change" || m.Type != "added" || m.Collection != "a/b/c/notes/n4" || *m.Index != 0 {
		t.Fatalf("got %s, want n4 added at 0", m)
	}
	w.apply(m)
	w.converge(c, h, own, q)
}

func TestLiveQueryRefusals(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	c, _ := h.connect(t, p, p.OwnerToken)
	cases := []struct {
		name  string
		msg   map[string]any
		code  string
		field string
	}{
		{"both", map[string]any{"collection": "items", "query": map[string]any{"collection": "items"}}, "invalid_argument", "collection"},
		{"prefix", map[string]any{"prefix": true, "query": map[string]any{"collection": "items"}}, "invalid_argument", "prefix"},
		{"count", map[string]any{"query": map[string]any{"collection": "items", "count": true}}, "invalid_query", "query.count"},
		{"bad op", map[string]any{"query": map[string]any{"collection": "items", "where": []any{map[string]any{"field": "a", "op": "~", "value": 1}}}}, "", "query.where[0].op"},
		{"system collection", map[string]any{"query": map[string]any{"collection": "_rules"}}, "", "query.collection"},
	}
	for i, tc := range cases {
		id := fmt.Sprintf("e%d", i)
		m := map[string]any{"op": "subscribe", "id": id}
		for k, v := range tc.msg {
			m[k] = v
		}
		c.send(m)
		got := c.nextQ()
		if got.Op != "error" || got.ID != id || got.Field != tc.field || (tc.code != "" && got.Code != tc.code) || got.Message == "" {
			t.Errorf("%s: got %s, want error %q on %q", tc.name, got, tc.code, tc.field)
		}
	}
	// Neither: the path subscription's refusal.
	c.send(map[string]any{"op": "subscribe", "id": "n"})
	c.expectError("n", "invalid_path")
}

// TestGoClientSubscribeQuery runs the Go client's live query against the
// node: its Window and the application's copy built from Events both end
// equal to the REST answer, across a dropped connection that resumes.
func TestGoClientSubscribeQuery(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	own := p.OwnerToken
	for i := 1; i <= 5; i++ {
		h.put(t, own, fmt.Sprintf("tasks/t%d", i), map[string]any{"open": true, "due": i})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := rtclient.Dial(ctx, rtclient.Config{URL: h.base(), Token: own, ProjectID: p.ID, APIKey: p.APIKey,
		Reconnect: true, MinBackoff: 2 * time.Second, MaxBackoff: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := query.Query{Collection: "tasks", Where: []query.Filter{{Field: "open", Op: "==", Value: json.RawMessage(`true`)}},
		OrderBy: []query.Order{{Field: "due"}}, Limit: 3, Select: []string{"due"}}
	rq := map[string]any{"collection": "tasks", "where": []any{map[string]any{"field": "open", "op": "==", "value": true}},
		"orderBy": []any{map[string]any{"field": "due"}}, "limit": 3, "select": []any{"due"}}
	sub, err := conn.SubscribeQuery(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	app := sub.Window() // the application's copy, kept from Events
	kinds := map[string]int{}
	check := func(what string) {
		t.Helper()
		want := h.restQuery(t, own, rq)
		deadline := time.Now().Add(msgWait)
		for {
			if got := toDocs(sub.Window()); sameDocs(got, want) && sameDocs(toDocs(app), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: window %v, application %v, want %v", what, pathsOf(toDocs(sub.Window())), pathsOf(toDocs(app)), pathsOf(want))
			}
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					t.Fatalf("%s: events ended: %v", what, sub.Err())
				}
				kinds[ev.Kind]++
				app = applyEvent(t, app, ev)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	check("snapshot")
	h.put(t, own, "tasks/t0", map[string]any{"open": true, "due": 0})
	h.put(t, own, "tasks/t2", map[string]any{"open": false, "due": 2})
	check("live")

	conn.Drop()
	h.put(t, own, "tasks/t1", map[string]any{"open": true, "due": 9})
	h.put(t, own, "tasks/t6", map[string]any{"open": true, "due": 0.5})
	h.del(t, own, "tasks/t3")
	check("resumed")
	if conn.Reconnects() == 0 {
		t.Fatal("the connection was not dropped")
	}
	h.put(t, own, "tasks/t4", map[string]any{"open": true, "due": -1})
	check("live after the resume")
	if kinds[rtclient.KindReset] != 0 || kinds[rtclient.KindSnapshot] != 0 {
		t.Fatalf("events %v: the resume was not exact", kinds)
	}

	// A rules change while away: reset and a snapshot, and the window is
	// right again.
	conn.Drop()
	h.setRules(t, p, `{"rules":[{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`)
	h.put(t, own, "tasks/t8", map[string]any{"open": true, "due": -8})
	check("after a reset")
	if kinds[rtclient.KindReset] != 1 || kinds[rtclient.KindSnapshot] != 1 {
		t.Fatalf("events %v, want one reset and one snapshot", kinds)
	}

	// A bad query is the server's error, with its field.
	_, err = conn.SubscribeQuery(ctx, query.Query{Collection: "tasks", Count: true})
	var e *rtclient.Error
	if !errors.As(err, &e) || e.Code != "invalid_query" || e.Field != "query.count" {
		t.Fatalf("count: %v", err)
	}
}

func toDocs(ds []rtclient.Document) []doc {
	out := make([]doc, 0, len(ds))
	for _, d := range ds {
		out = append(out, doc{Collection: d.Collection, Data: d.Data})
	}
	return out
}

// applyEvent applies a live query's event to an application's copy.
func applyEvent(t *testing.T, win []rtclient.Document, ev rtclient.Event) []rtclient.Document {
	t.Helper()
	switch ev.Kind {
	case rtclient.KindSnapshot:
		return slices.Clone(ev.Documents)
	case rtclient.KindReset, rtclient.KindResumed:
		return win
	}
	at := slices.IndexFunc(win, func(d rtclient.Document) bool { return d.Collection == ev.Collection })
	if at >= 0 {
		win = slices.Delete(win, at, at+1)
	}
	switch ev.Type {
	case rtclient.TypeRemoved:
		if at != ev.Index {
			t.Fatalf("removed %s at %d, the copy has it at %d", ev.Collection, ev.Index, at)
		}
	case rtclient.TypeAdded, rtclient.TypeModified:
		if ev.Index > len(win) {
			t.Fatalf("%s %s at %d of %d", ev.Type, ev.Collection, ev.Index, len(win))
		}
		win = slices.Insert(win, ev.Index, rtclient.Document{Collection: ev.Collection, Data: ev.Data})
	default:
		t.Fatalf("event %+v", ev)
	}
	return win
}
