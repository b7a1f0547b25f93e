package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/realtime/client"
)

// The harness of TestOfflineInBrowser: one node process, a proxy in front of
// it that the test can cut or make lose an answer, a Chromium whose profile
// directory survives a restart of the browser, and the app page, which
// imports the SDK from the node and keeps what the SDK told it in window.app.

// startOneNode starts a single voter (it bootstraps alone) and waits until it
// is ready. Its Args can be changed before a restart.
func startOneNode(t *testing.T, ctx context.Context) *sdkNode {
	t.Helper()
	base := t.TempDir()
	bin, err := testbin.Edgebase(ctx, testbin.Options{Dir: base, Logf: t.Logf})
	if err != nil {
		t.Fatalf("edgebase binary: %v", err)
	}
	n := newSDKNode(t, bin, base, "n1")
	t.Cleanup(func() {
		n.KillIfRunning()
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", n.ID, n.LogTail(32<<10))
		}
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, n)
	return n
}

// faultProxy stands between the browser and the node. Cut, it closes every
// open connection (the WebSocket too) and drops every new request without an
// answer, as a lost network does; a request it cannot forward (the node is
// down) is dropped the same way, never answered with a 502. Armed with
// loseNextWrite, it forwards the next document write to the node, lets the
// test act (kill the node) once the node answered, and never passes the
// answer on: the write is applied, the browser does not know.
type faultProxy struct {
	srv   *httptest.Server
	rp    *httputil.ReverseProxy
	conns connTracker

	mu   sync.Mutex
	cut  bool
	lose *lostWrite
}

// lostWrite is one armed loseNextWrite.
type lostWrite struct {
	after   func()          // runs once the node answered
	got     chan lostAnswer // receives what the node answered
	release chan struct{}   // closed by the test: the connection is dropped
}

// lostAnswer is the node's answer to a write the browser never heard.
type lostAnswer struct {
	Method, Target string
	Status         int
	Body           string
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { dropConn(w) }
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener = p.conns.listen(p.srv.Listener)
	p.srv.Start()
	t.Cleanup(func() {
		p.mu.Lock()
		if p.lose != nil {
			close(p.lose.release)
			p.lose = nil
		}
		p.mu.Unlock()
		p.setCut(true)
		p.srv.Close()
	})
	return p
}

func isDocWrite(r *http.Request) bool {
	return r.URL.Path == "/api/db" && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodDelete)
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	cut := p.cut
	var lose *lostWrite
	if !cut && p.lose != nil && isDocWrite(r) {
		lose, p.lose = p.lose, nil
	}
	p.mu.Unlock()
	if cut {
		dropConn(w)
		return
	}
	if lose == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	lose.after()
	lose.got <- lostAnswer{Method: r.Method, Target: r.URL.RequestURI(), Status: rec.Code, Body: rec.Body.String()}
	<-lose.release
	dropConn(w)
}

// dropConn closes the client's connection without an answer.
func dropConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// setCut cuts (closing every open connection) or restores the proxy.
func (p *faultProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	if cut {
		p.conns.closeAll()
	}
}

// loseNextWrite arms the proxy; see faultProxy. The channel receives the
// node's answer; release drops the browser's connection (and disarms the
// proxy if no write came).
func (p *faultProxy) loseNextWrite(after func()) (<-chan lostAnswer, func()) {
	l := &lostWrite{after: after, got: make(chan lostAnswer, 1), release: make(chan struct{})}
	p.mu.Lock()
	p.lose = l
	p.mu.Unlock()
	var once sync.Once
	return l.got, func() {
		once.Do(func() {
			p.mu.Lock()
			if p.lose == l {
				p.lose = nil
			}
			p.mu.Unlock()
			close(l.release)
		})
	}
}

// profileBrowser is one Chromium with a profile directory of the test's, so
// that it can be closed and started again with the same IndexedDB,
// localStorage and origin. Its first tab stays on about:blank (cancelling it
// would close the browser); the app runs in tabs opened with tab.
type profileBrowser struct {
	t       *testing.T
	first   context.Context
	cancels []context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
}

func startProfileBrowser(t *testing.T, bin, dir string) *profileBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir),
	)
	lifeCtx, cancelLife := context.WithTimeout(context.Background(), 3*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(lifeCtx, opts...)
	first, cancelFirst := chromedp.NewContext(allocCtx)
	b := &profileBrowser{t: t, first: first, cancels: []context.CancelFunc{cancelFirst, cancelAlloc, cancelLife}}
	t.Cleanup(b.close)
	if err := chromedp.Do(first); err != nil {
		t.Fatalf("start %s with the profile %s: %v", bin, dir, err)
	}
	return b
}

// appTab is one tab of a profileBrowser.
type appTab struct {
	*page
	// close closes the tab (its page unloads) and logs its console.
	close func()
}

// tab opens a new tab of the browser; what names it in the log.
func (b *profileBrowser) tab(t *testing.T, what string) *appTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.first)
	p := &page{t: t, ctx: ctx, stateExpr: `window.app ? app.state() : 'no app: ' + (window.sdkError || location.href)`}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open the tab %s: %v", what, err)
	}
	messages := chromedp.Console(ctx)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m.String())
			p.mu.Unlock()
		}
	}()
	var once sync.Once
	closeTab := func() {
		once.Do(func() {
			cancel()
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, line := range p.console {
				t.Logf("console of %s: %s", what, line)
			}
		})
	}
	t.Cleanup(closeTab)
	return &appTab{page: p, close: closeTab}
}

// close closes the browser gracefully (its profile is written out) and
// waits for it to end.
func (b *profileBrowser) close() {
	if b.closed {
		return
	}
	b.closed = true
	ctx, cancel := context.WithTimeout(b.first, 20*time.Second)
	defer cancel()
	if err := chromedp.Cancel(ctx); err != nil {
		b.t.Logf("closing the browser: %v", err)
	}
	for _, c := range b.cancels {
		c()
	}
	b.wg.Wait()
}

// setOffline turns the tab's network off or on with DevTools network
// emulation: every request of the tab fails (navigator.onLine follows, with
// the offline and online events). Network.emulateNetworkConditions is
// deprecated and gone from cdproto; its successor, emulateNetworkConditionsByRule
// with one rule of no URL pattern, matches every request, and
// overrideNetworkState moves navigator.onLine.
func (p *page) setOffline(offline bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	conds := []*network.Conditions{}
	if offline {
		conds = append(conds, &network.Conditions{Offline: true, DownloadThroughput: -1, UploadThroughput: -1})
	}
	if _, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{MatchedNetworkConditions: conds}); err != nil {
		p.t.Fatalf("network emulation offline=%v: %v", offline, err)
	}
	if _, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		p.t.Fatalf("network state offline=%v: %v", offline, err)
	}
	p.waitFor(fmt.Sprintf("navigator.onLine === %v", !offline), fmt.Sprintf("navigator.onLine === %v", !offline), 5*time.Second)
}

// offlineApp is the app page: served from the test's origin, it imports the
// SDK from the node (through the proxy) and keeps in window.app what the SDK
// told it: the subscription's events and local view, the writes' outcomes
// and the events of client.writes. __NODE__, __PROJECT__ and __KEY__ are
// replaced by JavaScript strings.
const offlineApp = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>an offline-first app</title></head>
<body><h1>an offline-first app</h1>
<script type="module">
const app = window.app = {events: [], view: {}, acked: [], conflicts: [], rejected: [], outcomes: {}};
const brief = (d) => d && {collection: d.collection, data: d.data, revision: d.revision, pendingWrites: !!d.pendingWrites};
app.open = async (email, password) => {
  const c = edgebase.createClient({url: __NODE__, projectId: __PROJECT__, apiKey: __KEY__,
    persistence: 'indexeddb', minBackoff: 50, maxBackoff: 400});
  window.client = c;
  c.writes.on('acked', (e) => app.acked.push({id: e.write.id, path: e.write.path, op: e.write.op,
    revision: e.result && e.result.revision}));
  c.writes.on('conflict', (cf) => app.conflicts.push(cf));
  c.writes.on('rejected', (e) => app.rejected.push({id: e.write.id, path: e.write.path,
    status: e.error && e.error.status, code: e.error && e.error.code}));
  if (!c.auth.token()) await c.auth.login(email, password);
  return true;
};
app.subscribe = (path) => {
  app.sub = client.realtime.subscribe(path, {prefix: true, resumeEvents: true}, (e) => {
    app.events.push({type: e.type, fromCache: !!e.fromCache, pendingWrites: !!e.pendingWrites, collection: e.collection,
      changeType: e.changeType, revision: e.revision, data: e.data, documents: e.documents && e.documents.map(brief)});
    if (e.type === 'snapshot') {
      app.view = {};
      for (const d of e.documents) app.view[d.collection] = {data: d.data, pendingWrites: !!d.pendingWrites};
    } else if (e.type === 'change') {
      if (e.changeType === 'delete') delete app.view[e.collection];
      else app.view[e.collection] = {data: e.data, pendingWrites: !!e.pendingWrites};
    }
  });
  return true;
};
// track keeps the outcome of a write's promise under tag.
app.track = (tag, promise) => {
  app.outcomes[tag] = {state: 'pending'};
  promise.then((r) => { app.outcomes[tag] = {state: 'ok', revision: r && r.revision, data: r && r.data, created: r && r.created}; },
    (e) => { app.outcomes[tag] = {state: 'error', status: e && e.status, code: e && e.code, message: String(e && e.message),
      conflict: e && e.conflict ? {path: e.conflict.path, id: e.conflict.id, local: brief(e.conflict.local), server: brief(e.conflict.server)} : null}; });
};
app.count = (state) => Object.values(app.outcomes).filter((o) => o.state === state).length;
app.state = () => JSON.stringify({sdkError: window.sdkError, online: navigator.onLine,
  realtime: window.client && client.realtime.status.state, leader: window.client && client.writes && client.writes.leader,
  acked: app.acked.length, conflicts: app.conflicts.map((c) => c.path), rejected: app.rejected,
  outcomes: {ok: app.count('ok'), pending: app.count('pending'), error: Object.entries(app.outcomes).filter(([, o]) => o.state === 'error').slice(0, 8)},
  lastEvents: app.events.slice(-6).map((e) => ({...e, documents: e.documents && e.documents.length}))});
try {
  window.edgebase = await import(__NODE__ + '/_/sdk/edgebase.js');
  window.sdkReady = true;
} catch (e) {
  window.sdkError = String(e && e.stack || e);
}
</script></body></html>`

// offlineEnv is what every scenario shares: the node, the proxy the page
// talks through, the project, a user (the page signs in as it; the test
// writes as it too, from Go, as a second client), the page's origin and the
// browser, replaced when a scenario restarts it.
type offlineEnv struct {
	t        *testing.T
	ctx      context.Context
	bin      string // chromium
	profile  string // its user-data-dir
	node     *sdkNode
	proxy    *faultProxy
	proj     proctest.Project
	pageURL  string
	email    string
	password string
	token    string
	uid      string
	browser  *profileBrowser
}

// ensureNodeUp starts the node again if a scenario left it down.
func (e *offlineEnv) ensureNodeUp(t *testing.T) {
	t.Helper()
	if e.node.Running() {
		return
	}
	if err := e.node.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, e.ctx, e.node)
}

// open opens the app in a new tab, signs in (unless the profile still holds
// the session) and returns the tab.
func (e *offlineEnv) open(t *testing.T, what string) *appTab {
	t.Helper()
	p := e.browser.tab(t, what)
	p.do("open the app page", chromedp.Navigate(e.pageURL))
	p.waitForSDK()
	p.await("start the client", fmt.Sprintf(`await app.open(%s, %s)`, js(e.email), js(e.password)))
	return p
}

// restartBrowser closes the browser and starts it again on the same profile.
func (e *offlineEnv) restartBrowser() {
	e.t.Helper()
	e.browser.close()
	e.browser = startProfileBrowser(e.t, e.bin, e.profile)
}

// serverDoc is a document as the node answers it.
type serverDoc struct {
	Collection string         `json:"collection"`
	Data       map[string]any `json:"data"`
	Revision   uint64         `json:"revision"`
}

func (e *offlineEnv) bearer() map[string]string {
	return map[string]string{"Authorization": "Bearer " + e.token, "X-Project-Id": e.proj.ID, "X-API-Key": e.proj.APIKey}
}

// get reads a document from the node (strong), nil when there is none.
func (e *offlineEnv) get(t *testing.T, path string) *serverDoc {
	t.Helper()
	r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 20*time.Second, http.MethodGet, e.node.url+"/api/db?collection="+url.QueryEscape(path), e.bearer(), nil)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if r.Status == http.StatusNotFound {
		return nil
	}
	var d serverDoc
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &d) != nil {
		t.Fatalf("read %s: %s", path, r)
	}
	return &d
}

// set writes a document on the node as the second client; it returns the revision.
func (e *offlineEnv) set(t *testing.T, path string, data map[string]any) uint64 {
	t.Helper()
	var out struct{ Revision uint64 }
	r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 20*time.Second, http.MethodPost, e.node.url+"/api/db", e.bearer(), map[string]any{"collection": path, "data": data})
	if err != nil || (r.Status != http.StatusOK && r.Status != http.StatusCreated) || json.Unmarshal(r.Body, &out) != nil || out.Revision == 0 {
		t.Fatalf("set %s: %v %v", path, r, err)
	}
	return out.Revision
}

// remove deletes a document on the node; it returns the revision.
func (e *offlineEnv) remove(t *testing.T, path string) uint64 {
	t.Helper()
	var out struct{ Revision uint64 }
	call(t, e.ctx, http.MethodDelete, e.node.url+"/api/db?collection="+url.QueryEscape(path), e.bearer(), nil, http.StatusOK, &out)
	return out.Revision
}

// setAll writes every document in one batch; it returns the batch's revision.
func (e *offlineEnv) setAll(t *testing.T, docs map[string]map[string]any) uint64 {
	t.Helper()
	paths := make([]string, 0, len(docs))
	for p := range docs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var writes []map[string]any
	for _, p := range paths {
		writes = append(writes, map[string]any{"op": "set", "collection": p, "data": docs[p]})
	}
	var out struct{ Revision uint64 }
	call(t, e.ctx, http.MethodPost, e.node.url+"/api/db/batch", e.bearer(), map[string]any{"writes": writes}, http.StatusOK, &out)
	return out.Revision
}

// changeWatch is a Go realtime subscriber of a path and everything below it:
// it counts the server's changes per document, to tell each write applied
// once from one applied twice.
type changeWatch struct {
	mu      sync.Mutex
	changes map[string][]client.Event
	counted map[string]int // changes per path an earlier waitCounts took
	other   []client.Event // anything but a change (a reset would be a gap)
}

func (e *offlineEnv) watch(t *testing.T, prefix string) *changeWatch {
	t.Helper()
	conn, err := client.Dial(e.ctx, client.Config{URL: e.node.url, Token: e.token, ProjectID: e.proj.ID, APIKey: e.proj.APIKey,
		Reconnect: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("realtime dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	sub, err := conn.Subscribe(e.ctx, prefix, true)
	if err != nil {
		t.Fatalf("subscribe %s: %v", prefix, err)
	}
	w := &changeWatch{changes: map[string][]client.Event{}, counted: map[string]int{}}
	go func() {
		for ev := range sub.Events() {
			w.mu.Lock()
			if ev.Kind == client.KindChange {
				w.changes[ev.Collection] = append(w.changes[ev.Collection], ev)
			} else {
				w.other = append(w.other, ev)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// waitCounts waits until the watch has seen exactly want changes per path
// since the last waitCounts (after a barrier: a write of its own at
// barrier, seen last, so nothing sent before it is still on its way), and
// fails on more, on a path not in want, or on a reset.
func (w *changeWatch) waitCounts(t *testing.T, e *offlineEnv, barrier string, want map[string]int) {
	t.Helper()
	e.set(t, barrier, map[string]any{"at": time.Now().UnixNano()})
	nodetest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.changes[barrier]) <= w.counted[barrier] {
			return fmt.Errorf("the barrier's change has not arrived; changes so far: %v", w.summaryLocked())
		}
		return nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.other {
		if ev.Kind == client.KindReset {
			t.Fatalf("the Go subscriber got a reset: it cannot count: %+v", w.other)
		}
	}
	got := map[string]int{}
	for p, evs := range w.changes {
		if n := len(evs) - w.counted[p]; p != barrier && n > 0 {
			got[p] = n
		}
		w.counted[p] = len(evs)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes the server made per document:\n got %v\nwant %v\n(each queued write must be applied exactly once)", got, want)
	}
}

func (w *changeWatch) summaryLocked() string {
	var parts []string
	for p, evs := range w.changes {
		parts = append(parts, fmt.Sprintf("%s×%d", p[strings.LastIndex(p, "/")+1:], len(evs)))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// datas is the data of each change of path the watch saw, in order.
func (w *changeWatch) datas(path string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ev := range w.changes[path] {
		out = append(out, string(ev.Data))
	}
	return out
}

// sameJSON compares two JSON-able values by their JSON.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}
