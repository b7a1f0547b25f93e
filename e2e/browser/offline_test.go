package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/realtime/client"
)

// TestOfflineInBrowser runs the SDK's offline-first sync (issue 21) in real
// Chromium with persistence 'indexeddb', against a real node process: 50
// offline edits of which 5 conflict with a second client's; writes queued
// across a restart of the browser while the node is killed with one write
// applied but unanswered; a reset when the cache is older than the node's
// change log; and two tabs sharing one queue, with one leader and a
// takeover when it closes.
func TestOfflineInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("EDGEBASE_REQUIRE_BROWSER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test of the SDK's offline sync (Debian: apt-get install chromium; set EDGEBASE_REQUIRE_BROWSER=1 to make this a failure)")
	}
	ctx, cancel := testbin.Context(t)
	defer cancel()
	start := time.Now()
	node := startOneNode(t, ctx)
	proj, err := proctest.CreateProject(ctx, http.DefaultClient, node.Bin, node.url, sdkAdminToken, "offline", "owner@example.com", "browser offline owner 2024!")
	if err != nil {
		t.Fatal(err)
	}
	e := &offlineEnv{t: t, ctx: ctx, bin: bin, profile: t.TempDir(), node: node, proj: proj,
		email: "offline@example.com", password: "browser offline user 2024!"}
	// The page talks to the node through the proxy; the test's second
	// client talks to the node itself.
	e.proxy = newFaultProxy(t, node.url)
	app := strings.NewReplacer("__NODE__", js(e.proxy.srv.URL), "__PROJECT__", js(proj.ID), "__KEY__", js(proj.APIKey)).Replace(offlineApp)
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(app))
	}))
	defer pageSrv.Close()
	e.pageURL = pageSrv.URL + "/"
	call(t, ctx, http.MethodPut, node.url+"/api/origins", proj.Headers(), map[string]any{"origins": []string{pageSrv.URL}}, http.StatusOK, nil)
	var reg struct {
		Token string
		User  struct{ ID string }
	}
	call(t, ctx, http.MethodPost, node.url+"/api/auth", map[string]string{"X-Project-Id": proj.ID, "X-API-Key": proj.APIKey},
		map[string]string{"action": "register", "email": e.email, "password": e.password}, http.StatusCreated, &reg)
	e.token, e.uid = reg.Token, reg.User.ID
	e.browser = startProfileBrowser(t, bin, e.profile)
	t.Logf("node, project and browser ready after %v", time.Since(start).Round(time.Millisecond))

	// Each scenario ends with the queue empty and its tabs closed, so the
	// next one starts from a quiet profile; reset goes last, as it restarts
	// the node with a short change log.
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *offlineEnv)
	}{
		{"offline-50", offline50},
		{"restart-mid-queue", restartMidQueue},
		{"two-tabs", twoTabs},
		{"reset", resetAfterRetention},
	} {
		t.Run(sc.name, func(t *testing.T) {
			began := time.Now()
			sc.run(t, e)
			t.Logf("%s took %v", sc.name, time.Since(began).Round(time.Millisecond))
		})
	}
}

// run evaluates body (statements ending in a return, awaiting allowed) in
// the tab and decodes the JSON of what it returned into out (unless nil).
func (p *appTab) run(what, body string, out any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 40*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => JSON.stringify(await (async () => { `+body+` })()) ?? 'null')()`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
	if out != nil {
		if err := json.Unmarshal([]byte(s), out); err != nil {
			p.t.Fatalf("%s: %q is not the JSON expected: %v", what, s, err)
		}
	}
}

// checkQueueLength checks, right after writes were made and client.flush()
// resolved, that writes.pending() lists want writes. When it does not, the
// test fails but goes on (once the queue catches up) to exercise the rest.
func checkQueueLength(t *testing.T, p *appTab, want int) []pendingWrite {
	t.Helper()
	if q := p.pending(); len(q) != want {
		t.Errorf("writes.pending() right after %d writes and client.flush() lists %d, want all of them "+
			"(pending() and flush() do not wait for writes still being queued)", want, len(q))
	}
	var q []pendingWrite
	nodetest.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		if q = p.pending(); len(q) != want {
			return fmt.Errorf("writes.pending() lists %d writes, want %d", len(q), want)
		}
		return nil
	})
	return q
}

// localDoc is a document as the page shows it.
type localDoc struct {
	Collection    string         `json:"collection"`
	Data          map[string]any `json:"data"`
	Revision      *uint64        `json:"revision"`
	PendingWrites bool           `json:"pendingWrites"`
	FromCache     bool           `json:"fromCache"`
}

// pendingWrite is a PendingWrite of client.writes.pending().
type pendingWrite struct {
	ID      string         `json:"id"`
	Op      string         `json:"op"`
	Path    string         `json:"path"`
	IfMatch *uint64        `json:"ifMatch"`
	State   string         `json:"state"`
	Server  *serverDoc     `json:"server"`
	Data    map[string]any `json:"data"`
}

func (p *appTab) pending() []pendingWrite {
	p.t.Helper()
	var ws []pendingWrite
	p.run("writes.pending()", `return await client.writes.pending()`, &ws)
	return ws
}

// cached reads every path with db.get(path, {source: 'cache'}).
func (p *appTab) cached(paths []string) map[string]*localDoc {
	p.t.Helper()
	b, _ := json.Marshal(paths)
	var docs []*localDoc
	p.run("read the cache", fmt.Sprintf(`return await Promise.all(%s.map((p) => client.db.get(p, {source: 'cache'})))`, b), &docs)
	out := map[string]*localDoc{}
	for i, path := range paths {
		out[path] = docs[i]
	}
	return out
}

// view is the local view of the tab's subscription: path → {data, pendingWrites}.
func (p *appTab) view() map[string]localDoc {
	p.t.Helper()
	var v map[string]localDoc
	p.run("the subscription's view", `return app.view`, &v)
	return v
}

// checkMatchesServer fails unless the cache of the tab holds, for every
// path, the server's document (data and revision, no pending writes; null
// for an absent one).
func checkMatchesServer(t *testing.T, e *offlineEnv, p *appTab, paths []string) {
	t.Helper()
	cached := p.cached(paths)
	for _, path := range paths {
		want, got := e.get(t, path), cached[path]
		switch {
		case want == nil && got == nil:
		case want == nil:
			t.Errorf("%s: the cache holds %v at revision %v (pendingWrites %v), the server nothing", path, got.Data, deref(got.Revision), got.PendingWrites)
		case got == nil:
			t.Errorf("%s: the cache holds nothing, the server %v at %d", path, want.Data, want.Revision)
		case !sameJSON(got.Data, want.Data) || got.Revision == nil || *got.Revision != want.Revision || got.PendingWrites:
			t.Errorf("%s: the cache holds %v at revision %v (pendingWrites %v), the server %v at %d", path, got.Data, deref(got.Revision), got.PendingWrites, want.Data, want.Revision)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func deref(r *uint64) any {
	if r == nil {
		return nil
	}
	return *r
}

// waitViewMatchesServer waits until the subscription's view of the tab is
// the server's state of paths (absent ones left out), with no pending writes.
func waitViewMatchesServer(t *testing.T, e *offlineEnv, p *appTab, paths []string) {
	t.Helper()
	want := map[string]map[string]any{}
	for _, path := range paths {
		if d := e.get(t, path); d != nil {
			want[path] = d.Data
		}
	}
	nodetest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		v := p.view()
		for _, path := range paths {
			got, ok := v[path]
			w, exists := want[path]
			if ok != exists || (ok && (!sameJSON(got.Data, w) || got.PendingWrites)) {
				return fmt.Errorf("%s: the view shows %+v (present %v), the server %v (present %v)", path, got, ok, w, exists)
			}
		}
		return nil
	})
}

// ---------------------------------------------------------------- offline-50

// offline50: the app reads 50 documents and subscribes to them, goes
// offline, edits all 50 while a second client changes 5 of them; back
// online exactly 45 are acknowledged and 5 conflict; 2 are discarded, 3
// retried with merged data; the cache ends equal to the server.
func offline50(t *testing.T, e *offlineEnv) {
	base := "users/" + e.uid + "/o50"
	path := func(i int) string { return fmt.Sprintf("%s/d%02d", base, i) }
	var paths []string
	docs := map[string]map[string]any{}
	for i := 0; i < 50; i++ {
		paths = append(paths, path(i))
		docs[path(i)] = map[string]any{"n": i, "v": 0}
	}
	rev0 := e.setAll(t, docs)
	// The second client changes these while the app is offline: two set
	// by the app, three updated (even: update, odd: set).
	conflicted := []int{0, 11, 20, 33, 44}
	isConflicted := map[string]bool{}
	for _, i := range conflicted {
		isConflicted[path(i)] = true
	}

	p := e.open(t, "offline-50")
	defer p.close()
	p.run("subscribe", fmt.Sprintf(`return app.subscribe(%s)`, js(base)), nil)
	p.waitFor("the server's snapshot of the 50 documents", `app.events.some((e) => e.type === 'snapshot' && !e.fromCache && e.documents.length === 50)`, 20*time.Second)
	var listed int
	p.run("list the 50 documents", fmt.Sprintf(`return (await client.db.list(%s, {limit: 100})).documents.length`, js(base)), &listed)
	if listed != 50 {
		t.Fatalf("db.list answered %d documents, want 50", listed)
	}
	p.run("flush the cache", `await client.flush(); return true`, nil)

	// Offline. DevTools network emulation fails every request of the tab,
	// but an open WebSocket survives it (Chromium 156: the realtime
	// connection stayed ready through 3 s of emulated offline while fetch
	// failed at once), so the proxy cuts the connection as well, and keeps
	// refusing the reconnects.
	p.setOffline(true)
	e.proxy.setCut(true)
	defer e.proxy.setCut(false) // for the next scenario, should this one fail
	p.waitFor("the realtime connection lost", `client.realtime.status.state !== 'ready'`, 10*time.Second)
	nEvents := 0
	p.run("count the events so far", `return app.events.length`, &nEvents)

	p.run("50 offline edits", fmt.Sprintf(`
		for (let i = 0; i < 50; i++) {
			const p = %s + '/d' + String(i).padStart(2, '0');
			app.track('e' + i, i %% 2 ? client.db.set(p, {n: i, v: 1}) : client.db.update(p, {oldKey: 'v', value: 1}));
		}
		await client.flush();
		return true`, js(base)), nil)
	checkQueueLength(t, p, 50)
	// At once: the subscription shows all 50 edits, marked pendingWrites,
	// by one local change each.
	p.waitFor("the 50 edits in the local view", fmt.Sprintf(`(() => {
		const local = app.events.slice(%d).filter((e) => e.type === 'change' && e.pendingWrites && e.data && e.data.v === 1);
		return new Set(local.map((e) => e.collection)).size === 50 &&
			Object.values(app.view).filter((d) => d.pendingWrites && d.data.v === 1).length === 50;
	})()`, nEvents), 5*time.Second)

	// db.get answers from the cache with the local view, at once: the
	// browser says it is offline (navigator.onLine), so no request is tried.
	var got []*localDoc
	b, _ := json.Marshal(paths)
	var saysOffline bool
	// The reads carry X-Min-Revision: 1 as a mark, so that the queue's own
	// replay attempts (a backoff timer may fire meanwhile) are not counted.
	p.run("count the client's requests", `window.__fetch = client.fetch; window.__calls = 0;
		client.fetch = (u, init) => {
			if (init && init.headers && init.headers['X-Min-Revision'] === '1') window.__calls++;
			return window.__fetch(u, init);
		};
		return navigator.onLine === false`, &saysOffline)
	if !saysOffline {
		t.Fatal("navigator.onLine is not false while the network is emulated offline")
	}
	p.run("db.get the 50 offline", fmt.Sprintf(`return await Promise.all(%s.map((p) => client.db.get(p, {minRevision: 1})))`, b), &got)
	var calls int
	p.run("the requests of the offline reads", `client.fetch = window.__fetch; return window.__calls`, &calls)
	if calls != 0 {
		t.Fatalf("the 50 offline db.get made %d requests; with navigator.onLine false the cache answers without one", calls)
	}
	for i, d := range got {
		want := map[string]any{"n": i, "v": 1}
		if d == nil || !d.FromCache || !d.PendingWrites || !sameJSON(d.Data, want) || d.Revision == nil || *d.Revision != rev0 {
			t.Fatalf("offline db.get(%s) = %+v, want fromCache and pendingWrites, data %v, revision %d", paths[i], d, want, rev0)
		}
	}
	queued := p.pending()
	if len(queued) != 50 {
		t.Fatalf("writes.pending() holds %d writes offline, want 50: %+v", len(queued), queued)
	}
	for i, w := range queued {
		op := "update"
		if i%2 == 1 {
			op = "set"
		}
		if w.Path != path(i) || w.Op != op || w.IfMatch == nil || *w.IfMatch != rev0 || (w.State != "queued" && w.State != "sending" && w.State != "uncertain") {
			t.Fatalf("pending write %d: %+v, want %s of %s based on revision %d, queued (oldest first)", i, w, op, path(i), rev0)
		}
	}

	// Meanwhile the second client changes 5 of the documents.
	serverRev := map[string]uint64{}
	for _, i := range conflicted {
		serverRev[path(i)] = e.set(t, path(i), map[string]any{"n": i, "v": "server"})
	}

	// Back online: exactly 45 acknowledged, 5 conflicts.
	e.proxy.setCut(false)
	p.setOffline(false)
	p.waitFor("45 acked and 5 conflicts", `app.acked.length >= 45 && app.conflicts.length >= 5`, 30*time.Second)
	p.run("settled", `await client.writes.settled(); return true`, nil)
	var counts struct{ Acked, Conflicts, Rejected, OK, Pending int }
	p.run("the outcomes", `return {acked: app.acked.length, conflicts: app.conflicts.length, rejected: app.rejected.length, ok: app.count('ok'), pending: app.count('pending')}`, &counts)
	if counts.Acked != 45 || counts.Conflicts != 5 || counts.Rejected != 0 || counts.OK != 45 || counts.Pending != 0 {
		t.Fatalf("after replay: %+v, want 45 acked (45 promises resolved), 5 conflicts, nothing rejected or pending", counts)
	}
	var ackedPaths []string
	p.run("the acked paths", `return app.acked.map((a) => a.path)`, &ackedPaths)
	seen := map[string]bool{}
	for _, ap := range ackedPaths {
		if seen[ap] || isConflicted[ap] {
			t.Fatalf("acked %s twice or despite its conflict: %v", ap, ackedPaths)
		}
		seen[ap] = true
	}

	// Each conflict carries the server's version and the local one; each
	// conflicted promise rejected with 412 precondition_failed and it.
	type side struct {
		Data          map[string]any `json:"data"`
		Revision      *uint64        `json:"revision"`
		PendingWrites bool           `json:"pendingWrites"`
	}
	var cfs []struct {
		ID, Path, Op, State string
		IfMatch             *uint64
		Local, Server       *side
		Retry, Discard      string
	}
	p.run("the conflict events", `return app.conflicts.map((c) => ({id: c.id, path: c.path, op: c.write.op, state: c.write.state, ifMatch: c.write.ifMatch,
		local: c.local, server: c.server, retry: typeof c.retry, discard: typeof c.discard}))`, &cfs)
	cfSeen := map[string]bool{}
	for _, c := range cfs {
		if !isConflicted[c.Path] || cfSeen[c.Path] {
			t.Fatalf("conflict on %s, which nobody else changed or which came twice: %+v", c.Path, cfs)
		}
		cfSeen[c.Path] = true
		var n int
		if _, err := fmt.Sscanf(c.Path[len(base)+2:], "%d", &n); err != nil {
			t.Fatalf("conflict on %s: %v", c.Path, err)
		}
		if c.Server == nil || !sameJSON(c.Server.Data, map[string]any{"n": n, "v": "server"}) || c.Server.Revision == nil || *c.Server.Revision != serverRev[c.Path] {
			t.Fatalf("conflict on %s: server version %+v, want the second client's {n:%d, v:server} at revision %d", c.Path, c.Server, n, serverRev[c.Path])
		}
		if c.Local == nil || !sameJSON(c.Local.Data, map[string]any{"n": n, "v": 1}) {
			t.Fatalf("conflict on %s: local version %+v, want the app's edit {n:%d, v:1}", c.Path, c.Local, n)
		}
		if c.State != "conflict" || c.IfMatch == nil || *c.IfMatch != rev0 || c.Retry != "function" || c.Discard != "function" {
			t.Fatalf("conflict on %s: %+v, want state conflict, ifMatch %d, retry and discard", c.Path, c, rev0)
		}
	}
	var rejections map[string]struct {
		State, Code string
		Status      int
		Conflict    *struct{ Path string }
	}
	p.run("the rejected promises", `return Object.fromEntries(Object.entries(app.outcomes).filter(([, o]) => o.state === 'error'))`, &rejections)
	for _, i := range conflicted {
		r, ok := rejections[fmt.Sprintf("e%d", i)]
		if !ok || r.Status != 412 || r.Code != "precondition_failed" || r.Conflict == nil || r.Conflict.Path != path(i) {
			t.Fatalf("the promise of the edit of %s: %+v, want a rejection 412 precondition_failed carrying the conflict", path(i), r)
		}
	}
	queued = p.pending()
	if len(queued) != 5 {
		t.Fatalf("writes.pending() after the replay: %+v, want the 5 conflicts", queued)
	}
	for _, w := range queued {
		if w.State != "conflict" || !isConflicted[w.Path] || w.Server == nil || w.Server.Revision != serverRev[w.Path] {
			t.Fatalf("pending write after the replay: %+v, want a conflict with the server's version", w)
		}
	}

	// The subscription shows the local view: the 45 as the server holds
	// them, the 5 in conflict with the app's edit still over the second
	// client's change, pending.
	nodetest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		v := p.view()
		for i, pth := range paths {
			d, ok := v[pth]
			if want := map[string]any{"n": i, "v": 1}; !ok || !sameJSON(d.Data, want) || d.PendingWrites != isConflicted[pth] {
				return fmt.Errorf("the view shows %s = %+v, want %v with pendingWrites %v", pth, d, want, isConflicted[pth])
			}
		}
		return nil
	})

	// The server holds the 45 edits and the second client's 5.
	for i, pth := range paths {
		want := map[string]any{"n": i, "v": 1}
		if isConflicted[pth] {
			want["v"] = "server"
		}
		if d := e.get(t, pth); d == nil || !sameJSON(d.Data, want) {
			t.Fatalf("the server holds %s = %+v, want %v", pth, d, want)
		}
	}

	// Resolve: discard two (the event's conflict objects), retry three with
	// the server's and the app's data merged (writes.conflicts()).
	var retried map[string]uint64
	p.run("resolve the conflicts", fmt.Sprintf(`
		const discard = new Set([%s, %s]);
		for (const c of app.conflicts) if (discard.has(c.path)) await c.discard();
		const out = {};
		for (const c of await client.writes.conflicts()) {
			const r = await c.retry({...c.server.data, v: c.server.data.v + '+' + c.local.data.v});
			out[c.path] = r.revision;
		}
		return out`, js(path(conflicted[0])), js(path(conflicted[1]))), &retried)
	if len(retried) != 3 {
		t.Fatalf("retried %v, want the 3 conflicts not discarded", retried)
	}
	for _, i := range conflicted[2:] {
		if retried[path(i)] <= serverRev[path(i)] {
			t.Fatalf("retry of %s answered revision %d, want one after the server's %d", path(i), retried[path(i)], serverRev[path(i)])
		}
	}
	p.run("settled", `await client.writes.settled(); return true`, nil)
	if q := p.pending(); len(q) != 0 {
		t.Fatalf("writes.pending() after resolving: %+v, want empty", q)
	}
	var left int
	p.run("conflicts left", `return (await client.writes.conflicts()).length`, &left)
	if left != 0 {
		t.Fatalf("%d conflicts left after resolving", left)
	}
	for n, i := range conflicted {
		want := map[string]any{"n": i, "v": "server"}
		if n >= 2 {
			want["v"] = "server+1"
		}
		if d := e.get(t, path(i)); d == nil || !sameJSON(d.Data, want) {
			t.Fatalf("after resolving, the server holds %s = %+v, want %v", path(i), d, want)
		}
	}

	// The cache and the subscription end equal to the server, for all 50.
	checkMatchesServer(t, e, p, paths)
	waitViewMatchesServer(t, e, p, paths)
}

// ---------------------------------------------------------------- restart-mid-queue

// restartMidQueue: eight edits are queued offline (chains on one path, a
// blind write, a delete, a deleteField); back online the first one reaches
// the node, which applies it and is killed (SIGKILL) before the answer
// leaves; the browser is closed with that write in flight, the node
// restarted, the browser reopened on the same profile: every edit lands
// exactly once (a Go subscriber counts the server's changes per document).
func restartMidQueue(t *testing.T, e *offlineEnv) {
	base := "users/" + e.uid + "/rq"
	k := func(name string) string { return base + "/" + name }
	e.setAll(t, map[string]map[string]any{k("k0"): {"v": 0}, k("k1"): {"v": 0}, k("k2"): {"v": 0}, k("k3"): {"v": 0}, k("k4"): {"v": 0}})
	watch := e.watch(t, base)

	p := e.open(t, "before the restart")
	var listed int
	p.run("list", fmt.Sprintf(`return (await client.db.list(%s)).documents.length`, js(base)), &listed)
	if listed != 5 {
		t.Fatalf("listed %d documents, want 5", listed)
	}
	p.run("flush", `await client.flush(); return true`, nil)
	p.setOffline(true)
	p.run("8 offline edits", fmt.Sprintf(`
		const k = (n) => %s + '/' + n;
		app.track('e0', client.db.update(k('k0'), {oldKey: 'v', value: 'e0'}));
		app.track('e1', client.db.set(k('k1'), {v: 'e1'}));
		app.track('e2', client.db.update(k('k0'), {oldKey: 'v', value: 'e2'}));
		app.track('e3', client.db.set(k('fresh'), {v: 'e3'}));
		app.track('e4', client.db.delete(k('k2')));
		app.track('e5', client.db.deleteField(k('k3'), 'v'));
		app.track('e6', client.db.set(k('k4'), {v: 'e6'}));
		app.track('e7', client.db.update(k('fresh'), {oldKey: 'v', value: 'e7'}));
		await client.flush();
		return true`, js(base)), nil)
	// The writes were made and flush() resolved: the queue lists them all,
	// oldest first.
	wantOrder := []string{"update k0", "set k1", "update k0", "set fresh", "delete k2", "deleteField k3", "set k4", "update fresh"}
	queued := checkQueueLength(t, p, len(wantOrder))
	for i, w := range queued {
		if got := w.Op + " " + w.Path[len(base)+1:]; got != wantOrder[i] {
			t.Fatalf("queued write %d is %s, want %s (oldest first): %+v", i, got, wantOrder[i], queued)
		}
	}

	// The first write to reach the node is applied, then the node dies
	// before its answer leaves, and the browser goes away with it in flight.
	defer e.ensureNodeUp(t) // for the next scenario, should this one fail
	lost, release := e.proxy.loseNextWrite(func() {
		if err := e.node.Kill9(); err != nil {
			t.Error(err)
		}
	})
	defer release()
	p.setOffline(false)
	var ans lostAnswer
	select {
	case ans = <-lost:
	case <-time.After(30 * time.Second):
		t.Fatalf("no write reached the node after going online\n%s", p.state())
	}
	if ans.Method != http.MethodPut || !strings.Contains(ans.Target, "k0") || ans.Status != http.StatusOK {
		t.Fatalf("the first write sent: %+v, want the update of k0, applied (200)", ans)
	}
	t.Logf("the node applied %s %s and was killed before answering", ans.Method, ans.Target)
	queued = p.pending()
	if len(queued) != 8 || queued[0].State != "sending" {
		t.Fatalf("with the first write in flight the queue is %+v, want all 8, the first sending", queued)
	}
	p.close()
	e.restartBrowser()
	release()

	if err := e.node.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, e.ctx, e.node)
	p = e.open(t, "after the restart")
	defer p.close()
	p.run("settled", `await client.writes.settled(); return true`, nil)
	if q := p.pending(); len(q) != 0 {
		t.Fatalf("after the restart the queue holds %+v, want it empty", q)
	}
	var counts struct{ Acked, Conflicts, Rejected int }
	p.run("the outcomes", `return {acked: app.acked.length, conflicts: app.conflicts.length, rejected: app.rejected.length}`, &counts)
	if counts.Acked != 8 || counts.Conflicts != 0 || counts.Rejected != 0 {
		t.Fatalf("after the restart: %+v, want all 8 writes acked (the lost one by reading it), no conflict, nothing rejected", counts)
	}

	// Exactly once each: k0 twice (e0 then e2), fresh twice, the others once.
	watch.waitCounts(t, e, k("barrier"), map[string]int{k("k0"): 2, k("k1"): 1, k("k2"): 1, k("k3"): 1, k("k4"): 1, k("fresh"): 2})
	for pth, want := range map[string][]string{k("k0"): {`{"v":"e0"}`, `{"v":"e2"}`}, k("fresh"): {`{"v":"e3"}`, `{"v":"e7"}`}} {
		if got := watch.datas(pth); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the changes of %s: %v, want %v (in the order the app made them)", pth, got, want)
		}
	}
	want := map[string]map[string]any{k("k0"): {"v": "e2"}, k("k1"): {"v": "e1"}, k("k2"): nil, k("k3"): {}, k("k4"): {"v": "e6"}, k("fresh"): {"v": "e7"}}
	var paths []string
	for pth, data := range want {
		paths = append(paths, pth)
		d := e.get(t, pth)
		if (data == nil) != (d == nil) || (d != nil && !sameJSON(d.Data, data)) {
			t.Fatalf("the server holds %s = %+v, want %v", pth, d, data)
		}
	}
	checkMatchesServer(t, e, p, paths)
}

// ---------------------------------------------------------------- two-tabs

// twoTabs: two tabs of the origin share the queue. Both offline, each edits
// paths of its own and three shared ones; online, one tab is the leader,
// each write lands once, both end with the same view and an empty queue.
// A conflict of the leader's write is seen in both tabs and resolved from
// the other. Then the leader tab closes with writes queued and the other
// takes over.
func twoTabs(t *testing.T, e *offlineEnv) {
	base := "users/" + e.uid + "/tabs"
	k := func(name string) string { return base + "/" + name }
	shared := []string{k("s0"), k("s1"), k("s2")}
	rev0 := e.setAll(t, map[string]map[string]any{shared[0]: {"v": 0}, shared[1]: {"v": 0}, shared[2]: {"v": 0}})
	watch := e.watch(t, base)

	a := e.open(t, "tab A")
	defer a.close()
	b := e.open(t, "tab B")
	defer b.close()
	for _, p := range []*appTab{a, b} {
		// Tab B shares A's cache: its snapshot may come from it, then resumed.
		p.run("subscribe", fmt.Sprintf(`return app.subscribe(%s)`, js(base)), nil)
		p.waitFor("the snapshot, live", `app.events.some((e) => e.type === 'snapshot' && e.documents.length === 3) &&
			app.events.some((e) => (e.type === 'snapshot' && !e.fromCache) || e.type === 'resumed')`, 20*time.Second)
		p.run("flush", `await client.flush(); return true`, nil)
	}
	leaderOf := func() (leader, follower *appTab) {
		t.Helper()
		var la, lb bool
		nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			la, lb = a.eval(`client.writes.leader === true`), b.eval(`client.writes.leader === true`)
			if !la && !lb {
				return fmt.Errorf("no tab is the leader")
			}
			return nil
		})
		switch {
		case la && lb:
			t.Fatalf("both tabs are writes.leader")
		case la:
			return a, b
		}
		return b, a
	}
	leader, follower := leaderOf()

	for _, p := range []*appTab{a, b} {
		p.setOffline(true)
	}
	e.proxy.setCut(true)
	defer e.proxy.setCut(false) // for the next scenario, should this one fail
	for _, p := range []*appTab{a, b} {
		p.waitFor("the realtime connection lost", `client.realtime.status.state !== 'ready'`, 10*time.Second)
	}
	edits := func(p *appTab, who string) {
		t.Helper()
		p.run("offline edits in tab "+who, fmt.Sprintf(`
			const who = %s, k = (n) => %s + '/' + n;
			for (let i = 0; i < 3; i++) {
				app.track(who + i, client.db.set(k(who.toLowerCase() + i), {by: who, i}));
				app.track(who + 's' + i, client.db.update(k('s' + i), {oldKey: who.toLowerCase(), value: who}));
			}
			await client.flush();
			return true`, js(who), js(base)), nil)
	}
	edits(a, "A")
	checkQueueLength(t, a, 6)
	edits(b, "B")
	// Both tabs see the one queue and the same local view.
	var ids [2][]string
	nodetest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		for i, p := range []*appTab{a, b} {
			ids[i] = nil
			for _, w := range p.pending() {
				ids[i] = append(ids[i], w.ID)
				if strings.HasPrefix(w.Path, base+"/s") && (w.IfMatch == nil || *w.IfMatch != rev0) {
					t.Fatalf("queued %+v, want it based on the snapshot's revision %d", w, rev0)
				}
			}
		}
		if len(ids[0]) != 12 || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
			return fmt.Errorf("tab A's queue %v, tab B's %v: want the same 12 writes", ids[0], ids[1])
		}
		return nil
	})
	wantShared := map[string]any{"v": 0, "a": "A", "b": "B"}
	nodetest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		va, vb := a.view(), b.view()
		if !sameJSON(va, vb) {
			return fmt.Errorf("the local views differ:\nA %v\nB %v", va, vb)
		}
		for _, s := range shared {
			if d := va[s]; !sameJSON(d.Data, wantShared) || !d.PendingWrites {
				return fmt.Errorf("%s shows %+v, want %v pending", s, d, wantShared)
			}
		}
		if len(va) != 9 {
			return fmt.Errorf("the local view holds %d documents, want 9: %v", len(va), va)
		}
		return nil
	})

	// Online: one leader replays; every write lands once.
	e.proxy.setCut(false)
	for _, p := range []*appTab{a, b} {
		p.setOffline(false)
	}
	for _, p := range []*appTab{a, b} {
		p.run("settled", `await client.writes.settled(); return true`, nil)
	}
	want := map[string]int{}
	var paths []string
	for _, n := range []string{"a0", "a1", "a2", "b0", "b1", "b2"} {
		want[k(n)] = 1
		paths = append(paths, k(n))
	}
	for _, s := range shared {
		want[s] = 2
		paths = append(paths, s)
	}
	watch.waitCounts(t, e, k("barrier"), want)
	for _, s := range shared {
		if d := e.get(t, s); d == nil || !sameJSON(d.Data, wantShared) {
			t.Fatalf("the server holds %s = %+v, want %v: both tabs' updates", s, d, wantShared)
		}
	}
	for _, p := range []*appTab{a, b} {
		var c struct{ Acked, Conflicts, Rejected, OK, Pending int }
		p.run("the outcomes", `return {acked: app.acked.length, conflicts: app.conflicts.length, rejected: app.rejected.length, ok: app.count('ok'), pending: app.count('pending')}`, &c)
		if c.Acked != 12 || c.Conflicts != 0 || c.Rejected != 0 || c.OK != 6 || c.Pending != 0 {
			t.Fatalf("a tab's outcomes: %+v, want 12 acked events, no conflict or rejection, its own 6 promises resolved", c)
		}
		if q := p.pending(); len(q) != 0 {
			t.Fatalf("a tab's queue after replay: %+v, want empty", q)
		}
		checkMatchesServer(t, e, p, paths)
		waitViewMatchesServer(t, e, p, paths)
	}
	if l, _ := leaderOf(); l != leader {
		t.Fatalf("the leader changed while both tabs were open")
	}

	// A conflict of a write made in the leader tab reaches both tabs; the
	// other tab resolves it (retry with merged data) and hears the answer.
	for _, p := range []*appTab{a, b} {
		p.setOffline(true)
	}
	e.proxy.setCut(true)
	leader.run("an offline update in the leader", fmt.Sprintf(`app.track('c', client.db.update(%s, {oldKey: 'a', value: 'A2'})); await client.flush(); return true`, js(shared[1])), nil)
	serverData := map[string]any{"v": 0, "a": "A", "b": "B", "by": "server"}
	sRev := e.set(t, shared[1], serverData)
	e.proxy.setCut(false)
	for _, p := range []*appTab{a, b} {
		p.setOffline(false)
	}
	type conflictSeen struct {
		Path   string
		Local  *localDoc
		Server *localDoc
	}
	localData := map[string]any{"v": 0, "a": "A2", "b": "B", "by": "server"}
	for _, p := range []*appTab{a, b} {
		p.waitFor("the conflict event", `app.conflicts.length === 1`, 20*time.Second)
		var c conflictSeen
		p.run("the conflict", `const c = app.conflicts[0]; return {path: c.path, local: c.local, server: c.server}`, &c)
		if c.Path != shared[1] || c.Server == nil || c.Server.Revision == nil || *c.Server.Revision != sRev || !sameJSON(c.Server.Data, serverData) ||
			c.Local == nil || !sameJSON(c.Local.Data, localData) {
			t.Fatalf("a tab's conflict event: %+v, want on %s the server's %v at %d and the local %v", c, shared[1], serverData, sRev, localData)
		}
	}
	var retried struct{ Revision uint64 }
	follower.run("retry from the other tab", `const [c] = await client.writes.conflicts();
		return await c.retry({...c.server.data, a: c.local.data.a})`, &retried)
	if retried.Revision <= sRev {
		t.Fatalf("the retry from the other tab answered revision %d, want one after %d", retried.Revision, sRev)
	}
	var outcome map[string]struct {
		State  string
		Status int
	}
	leader.run("the conflicted promise", `return {c: app.outcomes.c}`, &outcome)
	if outcome["c"].State != "error" || outcome["c"].Status != 412 {
		t.Fatalf("the conflicted write's promise: %+v, want rejected with 412", outcome["c"])
	}
	watch.waitCounts(t, e, k("barrier"), map[string]int{shared[1]: 2})
	if d := e.get(t, shared[1]); d == nil || d.Revision != retried.Revision || !sameJSON(d.Data, localData) {
		t.Fatalf("after the retry the server holds %+v, want %v at %d", d, localData, retried.Revision)
	}
	for _, p := range []*appTab{a, b} {
		p.run("settled", `await client.writes.settled(); return true`, nil)
		if q := p.pending(); len(q) != 0 {
			t.Fatalf("a tab's queue after the retry: %+v, want empty", q)
		}
		checkMatchesServer(t, e, p, shared)
		waitViewMatchesServer(t, e, p, shared)
	}

	// The leader closes with writes queued in both tabs; the other takes over.
	for _, p := range []*appTab{a, b} {
		p.setOffline(true)
	}
	follower.run("offline edits in the follower", fmt.Sprintf(`
		app.track('f0', client.db.set(%s, {by: 'F'}));
		app.track('f1', client.db.set(%s, {by: 'F'}));
		await client.flush();
		return true`, js(k("f0")), js(k("f1"))), nil)
	leader.run("an offline edit in the leader", fmt.Sprintf(`app.track('l0', client.db.set(%s, {by: 'L'})); await client.flush(); return true`, js(k("l0"))), nil)
	nodetest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if n := len(follower.pending()); n != 3 {
			return fmt.Errorf("the follower's queue holds %d writes, want 3", n)
		}
		return nil
	})
	leader.close()
	follower.waitFor("the follower takes the lead", `client.writes.leader === true`, 15*time.Second)
	follower.setOffline(false)
	follower.run("settled", `await client.writes.settled(); return true`, nil)
	if q := follower.pending(); len(q) != 0 {
		t.Fatalf("the new leader's queue: %+v, want empty", q)
	}
	outcome = nil
	follower.run("its promises", `return {f0: app.outcomes.f0, f1: app.outcomes.f1}`, &outcome)
	if outcome["f0"].State != "ok" || outcome["f1"].State != "ok" {
		t.Fatalf("the follower's writes: %+v, want both resolved", outcome)
	}
	watch.waitCounts(t, e, k("barrier"), map[string]int{k("f0"): 1, k("f1"): 1, k("l0"): 1})
	for name, by := range map[string]string{"f0": "F", "f1": "F", "l0": "L"} {
		if d := e.get(t, k(name)); d == nil || !sameJSON(d.Data, map[string]any{"by": by}) {
			t.Fatalf("the server holds %s = %+v, want by %s", k(name), d, by)
		}
	}
}

// ---------------------------------------------------------------- reset

// resetAfterRetention: the app's cached subscription is older than what the
// node's change log keeps (the node is restarted with a retention of one
// second): the reopened page serves the cache, then gets a reset and a fresh
// snapshot equal to the server's state, and the cache follows it.
func resetAfterRetention(t *testing.T, e *offlineEnv) {
	base := "users/" + e.uid + "/rs"
	k := func(name string) string { return base + "/" + name }
	e.setAll(t, map[string]map[string]any{k("keep"): {"v": 1}, k("gone"): {"v": 1}, k("edit"): {"v": 1}})

	p := e.open(t, "before the reset")
	p.run("subscribe", fmt.Sprintf(`return app.subscribe(%s)`, js(base)), nil)
	p.waitFor("the server's snapshot", `app.events.some((e) => e.type === 'snapshot' && !e.fromCache && e.documents.length === 3)`, 20*time.Second)
	var cachedRev uint64
	p.run("the subscription's revision", `await client.flush(); return app.sub.revision`, &cachedRev)
	p.close()

	e.remove(t, k("gone"))
	e.set(t, k("edit"), map[string]any{"v": 2})
	e.set(t, k("fresh"), map[string]any{"v": 1})
	if err := e.node.Kill9(); err != nil {
		t.Fatal(err)
	}
	e.node.Args = append(e.node.Args, "--changelog-retention", "1s")
	if err := e.node.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, e.ctx, e.node)
	// Wait until the node's change log no longer reaches back to the
	// cache's revision: a subscription since it answers a reset.
	conn, err := client.Dial(e.ctx, client.Config{URL: e.node.url, Token: e.token, ProjectID: e.proj.ID, APIKey: e.proj.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.CloseNow() }()
	nodetest.CheckFor(t, 20*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		sub, err := conn.Subscribe(ctx, base, true, client.Since(cachedRev))
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe(ctx) }()
		select {
		case ev := <-sub.Events():
			if ev.Kind != client.KindReset {
				return fmt.Errorf("a subscription since %d still resumes (first event %s at %d)", cachedRev, ev.Kind, ev.Revision)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	p = e.open(t, "after the reset")
	p.run("subscribe", fmt.Sprintf(`return app.subscribe(%s)`, js(base)), nil)
	p.waitFor("the fresh snapshot", `app.events.some((e) => e.type === 'snapshot' && !e.fromCache)`, 20*time.Second)
	var evs []struct {
		Type      string     `json:"type"`
		FromCache bool       `json:"fromCache"`
		Documents []localDoc `json:"documents"`
	}
	p.run("the events", `return app.events`, &evs)
	if len(evs) != 3 || evs[0].Type != "snapshot" || !evs[0].FromCache || evs[1].Type != "reset" || evs[2].Type != "snapshot" || evs[2].FromCache {
		t.Fatalf("events %+v, want exactly the cached snapshot, a reset and a fresh snapshot (no silent gap)", evs)
	}
	if got := docsData(evs[0].Documents); !sameJSON(got, map[string]any{k("keep"): map[string]any{"v": 1}, k("gone"): map[string]any{"v": 1}, k("edit"): map[string]any{"v": 1}}) {
		t.Fatalf("the cached snapshot holds %v, want the state the page saw before", got)
	}
	server := e.list(t, base)
	if got := docsData(evs[2].Documents); !sameJSON(got, server) || len(server) != 3 {
		t.Fatalf("the fresh snapshot holds %v, the server %v", got, server)
	}
	checkMatchesServer(t, e, p, []string{k("keep"), k("gone"), k("edit"), k("fresh")})
	p.close()

	// The cache now holds the fresh state: a page opened next serves it.
	p = e.open(t, "after the reset, again")
	defer p.close()
	p.run("subscribe", fmt.Sprintf(`return app.subscribe(%s)`, js(base)), nil)
	p.waitFor("the cached snapshot", `app.events.length > 0`, 10*time.Second)
	p.run("the events", `return app.events.slice(0, 1)`, &evs)
	if !evs[0].FromCache || !sameJSON(docsData(evs[0].Documents), server) {
		t.Fatalf("the next page's first event %+v, want the cached snapshot equal to the server's %v", evs[0], server)
	}
}

func docsData(docs []localDoc) map[string]any {
	out := map[string]any{}
	for _, d := range docs {
		out[d.Collection] = d.Data
	}
	return out
}

// list reads the documents directly below path from the node: path → data.
func (e *offlineEnv) list(t *testing.T, path string) map[string]any {
	t.Helper()
	var page struct{ Documents []serverDoc }
	call(t, e.ctx, http.MethodGet, e.node.url+"/api/db?list=true&limit=100&collection="+path, e.bearer(), nil, http.StatusOK, &page)
	out := map[string]any{}
	for _, d := range page.Documents {
		out[d.Collection] = d.Data
	}
	return out
}
