// Package browser drives the realtime demo page (GET /_/live) in a real
// headless Chromium against a real in-process node: login (with the TOTP
// step), the WebSocket auth message, the snapshot, live changes, and
// reconnecting: resuming from the last revision, a reset when the change log
// has moved past it, and a node restart.
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/node/nodetest"
)

// chromiumPath finds a Chromium (or Chrome) binary on PATH.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// cutProxy is a reverse proxy in front of a node that the test can cut: while
// cut it drops every open connection (WebSockets included) and answers 503,
// so the page loses its connection while the node keeps accepting writes.
type cutProxy struct {
	srv   *httptest.Server
	conns connTracker

	mu  sync.Mutex
	cut bool
}

// connTracker remembers every connection a server accepted (hijacked ones
// too), so that a test can drop them all at once.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

// listen wraps l so that every connection it accepts is tracked.
func (c *connTracker) listen(l net.Listener) net.Listener { return trackedListener{Listener: l, c: c} }

// closeAll closes every connection accepted so far.
func (c *connTracker) closeAll() {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
}

type trackedListener struct {
	net.Listener
	c *connTracker
}

func (l trackedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.c.mu.Lock()
		l.c.conns = append(l.c.conns, conn)
		l.c.mu.Unlock()
	}
	return conn, err
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{}
	// The Host header stays the proxy's, so the page's Origin is same-origin.
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			w.Header().Set("Connection", "close")
			http.Error(w, "cut by the test", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.Listener = p.conns.listen(p.srv.Listener)
	p.srv.Start()
	t.Cleanup(p.close)
	return p
}

// setCut cuts (dropping every open connection) or restores the proxy.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	if cut {
		p.conns.closeAll()
	}
}

func (p *cutProxy) close() {
	p.setCut(true)
	p.srv.Close()
}

// page is one browser tab plus what its console said.
type page struct {
	t   *testing.T
	ctx context.Context

	// stateExpr, when set, is the JavaScript expression (a string) that
	// state reports instead of the live page's elements.
	stateExpr string

	mu      sync.Mutex
	console []string
}

// openBrowser starts headless Chromium; everything stops at the end of the test.
func openBrowser(t *testing.T, bin string) *page {
	t.Helper()
	return openBrowserFor(t, bin, 3*time.Minute)
}

// openBrowserFor is openBrowser with a bound of life on the whole browser.
func openBrowserFor(t *testing.T, bin string, life time.Duration) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox, // containers and root have no usable sandbox
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	// A bound on the browser's whole life, so a wedged browser cannot hang the run.
	lifeCtx, cancelLife := context.WithTimeout(context.Background(), life)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(lifeCtx, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	p := &page{t: t, ctx: ctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelLife()
		wg.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, line := range p.console {
			t.Logf("browser console: %s", line)
		}
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		t.Fatalf("start %s: %v", bin, err)
	}
	messages := chromedp.Console(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			line := m.String()
			if m.URL != "" {
				line += " (" + m.URL + ")"
			}
			p.console = append(p.console, line)
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
}

// waitFor polls the JavaScript expression until it is truthy and returns its
// value as a string; it fails the test with the page's state after timeout.
func (p *page) waitFor(what, expr string, timeout time.Duration) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[any](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		p.t.Fatalf("waiting for %s (%v): %v\n%s", what, timeout, err, p.state())
	}
	return fmt.Sprint(v)
}

// load navigates to url and waits until the JavaScript expression ready is
// truthy. When the page did not start and Chromium logged
// net::ERR_NETWORK_CHANGED (the host's network changed while it loaded, as
// when Docker makes a bridge for another package's tests: a module import
// fails and the page never starts), it loads the page once more.
func (p *page) load(what, url, ready string, timeout time.Duration) {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		p.do(what, chromedp.Navigate(url))
		ctx, cancel := context.WithTimeout(p.ctx, timeout+5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[any](ready,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
		cancel()
		if err == nil {
			return
		}
		if attempt > 1 || !p.consoleHas("ERR_NETWORK_CHANGED") {
			p.t.Fatalf("waiting for %s (%v): %v\n%s", what, timeout, err, p.state())
		}
		p.t.Logf("%s: the page did not start after net::ERR_NETWORK_CHANGED; loading it again", what)
	}
}

// consoleHas says whether a line of the browser's console contains s.
func (p *page) consoleHas(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range p.console {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// eval evaluates a boolean JavaScript expression once.
func (p *page) eval(expr string) bool {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v\n%s", expr, err, p.state())
	}
	return v
}

// state describes what the page shows, for failure messages.
func (p *page) state() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	expr := p.stateExpr
	if expr == "" {
		expr = liveState
	}
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		s = "(page state unavailable: " + err.Error() + ")"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return "page: " + s + "\nconsole:\n  " + strings.Join(p.console, "\n  ")
}

// liveState is the state of the live page (/_/live), for failure messages.
const liveState = `JSON.stringify({
		location: location.href.replace(/key=[^&]*/, 'key=…'),
		status: document.getElementById('status').dataset.state + ' / ' + document.getElementById('status').textContent,
		error: document.getElementById('error').textContent,
		revision: document.getElementById('revision').textContent,
		rows: [...document.querySelectorAll('#docs tr')].map(r => [r.dataset.collection, r.cells[1].textContent, r.cells[2].textContent]),
	}, null, 1)`

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowData is an expression: the data cell text of the row for collection, or null.
func rowData(collection string) string {
	return `(() => { const r = [...document.querySelectorAll('#docs tr[data-collection]')].find(r => r.dataset.collection === ` +
		js(collection) + `); return r ? r.querySelector('td.data').textContent : null; })()`
}

const statusLive = `document.getElementById('status').dataset.state === 'live'`

func syncIs(mode string) string {
	return `document.getElementById('sync').dataset.mode === ` + js(mode)
}

// rowsAre is an expression: the page's rows are exactly these collections, in order.
func rowsAre(collections ...string) string {
	b, _ := json.Marshal(collections)
	return `JSON.stringify([...document.querySelectorAll('#docs tr')].map(r => r.dataset.collection)) === ` + js(string(b))
}

func revisionIs(rev uint64) string {
	return fmt.Sprintf(`document.getElementById('revision').textContent === %q`, fmt.Sprint(rev))
}

// retention is the test cluster's change log retention: long enough for a
// quick reconnect to resume, short enough to wait out for the reset case.
const retention = 5 * time.Second

func TestLivePage(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("EDGEBASE_REQUIRE_BROWSER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test of /_/live (Debian: apt-get install chromium; set EDGEBASE_REQUIRE_BROWSER=1 to make this a failure)")
	}

	// The auth clock stands still unless the test moves it (TOTP steps).
	clock := nodetest.NewClock(time.Now())
	c := nodetest.Start(t, nodetest.Options{ChangeLogRetention: retention, Clock: clock})
	proj := c.CreateProject(0)
	keys := map[string]string{"X-Project-Id": proj.ID, "X-API-Key": proj.APIKey}

	// A plain user: the default rules let it read and write users/<uid>/**.
	const email, password = "viewer@example.com", "live page viewer 2024!"
	var reg struct {
		Token string
		User  struct{ ID string }
	}
	if st := c.Do(0, http.MethodPost, "/api/auth", keys,
		map[string]string{"action": "register", "email": email, "password": password, "name": "Viewer"}, &reg); st != http.StatusCreated || reg.Token == "" || reg.User.ID == "" {
		t.Fatalf("register: status %d, %+v", st, reg)
	}
	bearer := map[string]string{"Authorization": "Bearer " + reg.Token}
	notes := "users/" + reg.User.ID + "/notes"
	n := func(name string) string { return notes + "/" + name }
	write := func(what string, method, collection string, body any, want int) uint64 {
		t.Helper()
		var out struct{ Revision uint64 }
		target := "/api/db"
		if method != http.MethodPost {
			target += "?collection=" + url.QueryEscape(collection)
		}
		if st := c.Do(0, method, target, bearer, body, &out); st != want || out.Revision == 0 {
			t.Fatalf("%s: status %d (want %d), revision %d", what, st, want, out.Revision)
		}
		return out.Revision
	}
	create := func(name string, data map[string]any) uint64 {
		t.Helper()
		return write("create "+name, http.MethodPost, n(name), map[string]any{"collection": n(name), "data": data}, http.StatusCreated)
	}
	remove := func(name string) uint64 {
		t.Helper()
		return write("delete "+name, http.MethodDelete, n(name), nil, http.StatusOK)
	}

	// A document that exists before the page connects comes with the snapshot.
	create("n0", map[string]any{"title": "earlier"})

	// The browser talks to the node through a proxy the test can cut.
	proxy := newCutProxy(t, c.Nodes[0].URL())
	p := openBrowser(t, bin)
	frag := url.Values{"project": {proj.ID}, "key": {proj.APIKey}, "path": {notes}, "prefix": {"1"}}
	p.do("open the page", chromedp.Navigate(proxy.srv.URL+"/_/live#"+frag.Encode()))

	// The fragment fills the form.
	for id, want := range map[string]string{"project": proj.ID, "apikey": proj.APIKey, "path": notes} {
		got, err := chromedp.Run(p.ctx, chromedp.Value(chromedp.ID(id)))
		if err != nil || got != want {
			t.Fatalf("#%s = %q (%v), want %q from the fragment", id, got, err, want)
		}
	}
	if !p.eval(`document.getElementById('prefix').checked`) {
		t.Fatalf("#prefix not checked from the fragment")
	}

	// A wrong password shows the server's error and does not connect.
	p.do("log in with a wrong password",
		chromedp.SetValue(chromedp.ID("email"), email),
		chromedp.SetValue(chromedp.ID("password"), "not the password"),
		chromedp.Click(chromedp.ID("connect")),
	)
	msg := p.waitFor("the invalid credentials error",
		`(() => { const e = document.getElementById('error'); return !e.hidden && e.textContent.includes('invalid_credentials') && e.textContent; })()`, 15*time.Second)
	t.Logf("wrong password shows: %s", msg)
	p.waitFor("status error", `document.getElementById('status').dataset.state === 'error'`, 5*time.Second)

	// The right password: login, auth message, subscribe, snapshot.
	start := time.Now()
	p.do("log in",
		chromedp.SetValue(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("connect")),
	)
	p.waitFor("status live", statusLive, 20*time.Second)
	t.Logf("connected and live after %v", time.Since(start).Round(time.Millisecond))
	p.waitFor("the snapshot", syncIs("snapshot")+` && `+rowsAre(n("n0")), 5*time.Second)
	p.waitFor("the snapshot row of n0", `(`+rowData(n("n0"))+` || '').includes('"title":"earlier"')`, 5*time.Second)
	if !p.eval(`document.getElementById('error').hidden`) {
		t.Fatalf("an error is still shown after connecting:\n%s", p.state())
	}
	loc, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, url.QueryEscape(password)) || strings.Contains(loc, "ebt_") {
		t.Fatalf("the page URL carries the password or the token: %s", loc)
	}

	// Create: the row appears with the written value and the revision follows.
	start = time.Now()
	rev := create("n1", map[string]any{"title": "hello", "n": 1})
	p.waitFor("the created row", `(`+rowData(n("n1"))+` || '').includes('"title":"hello"')`, 10*time.Second)
	t.Logf("created row shown %v after the POST", time.Since(start).Round(time.Millisecond))
	p.waitFor("revision of the create", revisionIs(rev), 5*time.Second)

	// Update a field. Data is text, never markup: the <b> arrives as characters.
	rev = write("update n1", http.MethodPut, n("n1"),
		map[string]any{"oldKey": "title", "newKey": "title", "value": "<b>updated</b>", "type": "string"}, http.StatusOK)
	p.waitFor("the updated row", `(`+rowData(n("n1"))+` || '').includes('"title":"<b>updated</b>"')`, 10*time.Second)
	p.waitFor("revision of the update", revisionIs(rev), 5*time.Second)
	if !p.eval(`document.querySelectorAll('#docs b').length === 0`) {
		t.Fatalf("document data was parsed as HTML: <b> elements in #docs\n%s", p.state())
	}

	// Delete: the row goes away, the other one stays.
	rev = remove("n1")
	p.waitFor("the row removed", rowData(n("n1"))+` === null`, 10*time.Second)
	p.waitFor("revision of the delete", revisionIs(rev), 5*time.Second)
	if !p.eval(rowsAre(n("n0"))) {
		t.Fatalf("want exactly the row of n0 left after the delete\n%s", p.state())
	}

	// Resume: the connection drops, changes happen meanwhile, and the page
	// reconnects with since = its last revision and gets them replayed.
	proxy.setCut(true)
	p.waitFor("the page leaves live after the cut", `!(`+statusLive+`)`, 10*time.Second)
	create("n2", map[string]any{"title": "while away"})
	rev = remove("n0")
	start = time.Now()
	proxy.setCut(false)
	p.waitFor("resumed", statusLive+` && `+syncIs("resumed"), 20*time.Second)
	t.Logf("resumed %v after the proxy came back", time.Since(start).Round(time.Millisecond))
	p.waitFor("the replayed changes", rowsAre(n("n2"))+` && `+revisionIs(rev), 5*time.Second)

	// Reset: this time the change log moves past the page's revision before
	// it comes back, so it gets a reset and a fresh snapshot, which must drop
	// a row deleted meanwhile (no delete event is replayed).
	proxy.setCut(true)
	p.waitFor("the page leaves live after the second cut", `!(`+statusLive+`)`, 10*time.Second)
	create("n3", map[string]any{"title": "after the log moved"})
	rev = remove("n2")
	nodetest.CheckFor(t, 4*retention, 50*time.Millisecond, func() error {
		floor, err := c.Nodes[0].Node.Store.LogFloor()
		if err != nil || floor < rev {
			return fmt.Errorf("change log floor %d (%v), waiting for %d", floor, err, rev)
		}
		return nil
	})
	start = time.Now()
	proxy.setCut(false)
	p.waitFor("reset and snapshot", statusLive+` && `+syncIs("reset"), 40*time.Second)
	t.Logf("reset and re-synced %v after the proxy came back", time.Since(start).Round(time.Millisecond))
	p.waitFor("the fresh snapshot", rowsAre(n("n3")), 5*time.Second)

	// The node restarts: the page reconnects and keeps following changes.
	c.Kill(0)
	p.waitFor("the page leaves live when the node stops", `!(`+statusLive+`)`, 10*time.Second)
	start = time.Now()
	c.StartMember(0)
	c.WaitReady(0, 20*time.Second)
	p.waitFor("live again", statusLive, 40*time.Second)
	t.Logf("live again %v after the node restarted", time.Since(start).Round(time.Millisecond))
	rev = create("n4", map[string]any{"title": "after restart"})
	p.waitFor("the row after the restart", `(`+rowData(n("n4"))+` || '').includes('"title":"after restart"')`, 10*time.Second)
	p.waitFor("revision after the restart", revisionIs(rev), 5*time.Second)

	// Disconnect stops following.
	p.do("disconnect", chromedp.Click(chromedp.ID("disconnect")))
	p.waitFor("status disconnected", `document.getElementById('status').dataset.state === 'idle'`, 5*time.Second)

	// A path the rules do not let this user read: the subscription's error
	// is shown and the page stops instead of retrying.
	p.do("subscribe to a forbidden path",
		chromedp.SetValue(chromedp.ID("path"), "elsewhere/doc"),
		chromedp.SetValue(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("prefix")),
		chromedp.Click(chromedp.ID("connect")),
	)
	msg = p.waitFor("the forbidden error", `(() => { const e = document.getElementById('error'); return !e.hidden && e.textContent.includes('forbidden') && e.textContent; })()`, 15*time.Second)
	t.Logf("forbidden path shows: %s", msg)
	p.waitFor("status error after forbidden", `document.getElementById('status').dataset.state === 'error' && document.querySelectorAll('#docs tr').length === 0`, 5*time.Second)

	// An account with a second factor: the password step asks for the code
	// of the authenticator app, a wrong code can be corrected, the right one
	// connects.
	const totpEmail, totpPassword = "second-factor@example.com", "live page second factor 2024!"
	var reg2 struct {
		Token string
		User  struct{ ID string }
	}
	if st := c.Do(0, http.MethodPost, "/api/auth", keys,
		map[string]string{"action": "register", "email": totpEmail, "password": totpPassword}, &reg2); st != http.StatusCreated || reg2.Token == "" {
		t.Fatalf("register the TOTP user: status %d, %+v", st, reg2)
	}
	bearer2 := map[string]string{"Authorization": "Bearer " + reg2.Token, "X-Project-Id": proj.ID, "X-API-Key": proj.APIKey}
	var enrolled struct{ Secret string }
	if st := c.Do(0, http.MethodPost, "/api/authenticator/enroll", bearer2, nil, &enrolled); st != http.StatusOK || enrolled.Secret == "" {
		t.Fatalf("enroll: status %d, %+v", st, enrolled)
	}
	totpCode := func() string {
		t.Helper()
		code, err := rfc6238.Authenticator(enrolled.Secret, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	if st := c.Do(0, http.MethodPost, "/api/authenticator/confirm", bearer2, map[string]string{"code": totpCode()}, nil); st != http.StatusOK {
		t.Fatalf("confirm the authenticator: status %d", st)
	}
	clock.Advance(30 * time.Second) // the code confirm used may not be taken again
	profile := "users/" + reg2.User.ID + "/profile"
	if st := c.Do(0, http.MethodPost, "/api/db", bearer2, map[string]any{"collection": profile, "data": map[string]any{"bio": "two factors"}}, nil); st != http.StatusCreated {
		t.Fatalf("create %s: status %d", profile, st)
	}
	p.do("log in to the account with a second factor",
		chromedp.SetValue(chromedp.ID("email"), totpEmail),
		chromedp.SetValue(chromedp.ID("password"), totpPassword),
		chromedp.SetValue(chromedp.ID("path"), profile),
		chromedp.Click(chromedp.ID("connect")),
	)
	totpShown := `document.getElementById('status').dataset.state === 'totp' && !document.getElementById('totp').closest('label').hidden`
	p.waitFor("the code field", totpShown, 15*time.Second)
	good := totpCode()
	wrong := fmt.Sprintf("%06d", (atoi(t, good)+500000)%1000000)
	p.do("enter a wrong code",
		chromedp.SetValue(chromedp.ID("totp"), wrong),
		chromedp.Click(chromedp.ID("connect")),
	)
	msg = p.waitFor("the invalid code error", `(() => { const e = document.getElementById('error'); return !e.hidden && e.textContent.includes('invalid_code') && e.textContent; })()`, 15*time.Second)
	t.Logf("wrong code shows: %s", msg)
	p.waitFor("the code field after a wrong code", totpShown, 5*time.Second)
	p.do("enter the right code",
		chromedp.SetValue(chromedp.ID("totp"), good),
		chromedp.Click(chromedp.ID("connect")),
	)
	p.waitFor("live after the second factor", statusLive+` && `+syncIs("snapshot")+` && `+rowsAre(profile), 20*time.Second)
	p.waitFor("the profile row", `(`+rowData(profile)+` || '').includes('"bio":"two factors"')`, 5*time.Second)
	if !p.eval(`document.getElementById('totp').closest('label').hidden && document.getElementById('password').value === ''`) {
		t.Fatalf("the code field or the password is still shown after logging in\n%s", p.state())
	}
	loc, err = chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, url.QueryEscape(totpPassword)) || strings.Contains(loc, good) || strings.Contains(loc, "ebt_") || strings.Contains(loc, "ebl_") {
		t.Fatalf("the page URL carries the password, the code, the ticket or the token: %s", loc)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
