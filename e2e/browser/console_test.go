package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/repo"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/internal/testbin"
)

// The console test: real Chromium against a real process cluster (three
// voters and an edge node), walking every page of the console at /_/.
//
// Run one page's subtest (after the shared setup) with e.g.
//
//	go test -count=1 -run 'TestConsole/(signin|data)' ./e2e/browser
//
// When the signin subtest is left out, the tab is signed in through the SDK
// instead, so every other subtest can run on its own.

// consoleEnv is the cluster, the project and the browser that the console's
// subtests share. The subtests run in order (see TestConsole), each leaving
// the cluster as the next one expects.
type consoleEnv struct {
	ctx        context.Context
	voters     []*sdkNode // n1, n2, n3 (n1 bootstrapped)
	edge       *sdkNode   // e1, joined with --edge
	fcm        *fcmfake.Server
	proj       proctest.Project // created on n1; proj.Token is an owner session
	ownerEmail string
	ownerPass  string
	totpSecret string // the owner's authenticator secret (TOTP on)
	lastCode   string // the last TOTP code used (a code is taken once)
	adminToken string
	// tab is the browser tab signed in (as the owner of proj and as the
	// operator) on the console of consoleNode.
	tab         *page
	consoleNode *sdkNode

	bin      string // the chromium binary
	signedIn bool   // the signin subtest left e.tab signed in
}

// consoleState is what a console page shows, for failure messages.
const consoleState = `JSON.stringify({
	location: location.href,
	heading: (document.querySelector('#main h1') || {}).textContent || null,
	nav: [...document.querySelectorAll('#nav a')].map(a => a.textContent + (a.getAttribute('aria-current') ? ' (current)' : '')),
	who: (document.getElementById('who') || {}).textContent || null,
	focused: document.activeElement ? document.activeElement.tagName.toLowerCase() + (document.activeElement.id ? '#' + document.activeElement.id : '') : null,
	errors: [...document.querySelectorAll('.error, [role=alert]')].map(e => e.textContent.trim()).filter(Boolean),
	toasts: [...document.querySelectorAll('#toasts > *')].map(e => e.textContent),
	main: ((document.getElementById('main') || {}).innerText || '').slice(0, 1500),
}, null, 1)`

// TestConsole runs the console's subtests in order on one cluster and one
// browser; it stops at the first failing subtest (the later ones build on
// the state the earlier ones leave).
func TestConsole(t *testing.T) {
	e := startConsoleEnv(t)
	steps := []struct {
		name string
		run  func(*testing.T, *consoleEnv)
	}{
		{"signin", consoleSignin},
		{"projects", consoleProjects},
		{"data", consoleData},
		{"rules", consoleRules},
		{"users", consoleUsers},
		{"push", consolePush},
		{"cluster", consoleCluster},
	}
	for _, s := range steps {
		if s.name != "signin" && !e.signedIn {
			e.signInDirect(t)
		}
		ok := t.Run(s.name, func(st *testing.T) {
			// The tab's own failures (p.do, p.waitFor...) belong to the subtest.
			e.tab.t = st
			defer func() { e.tab.t = t }()
			s.run(st, e)
		})
		if !ok {
			t.Fatalf("the %s subtest failed: the later subtests need its state", s.name)
		}
	}
}

// startConsoleEnv starts the cluster (three voters and an edge node, push
// to an fcmfake server), creates the project whose owner has TOTP on, and
// opens Chromium on the console of the edge node.
func startConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("EDGEBASE_REQUIRE_BROWSER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test of the console (Debian: apt-get install chromium; set EDGEBASE_REQUIRE_BROWSER=1 to make this a failure)")
	}
	ctx, cancel := testbin.Context(t)
	t.Cleanup(cancel)
	fcm, err := fcmfake.New(fcmfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close)
	voters, edges := startProcCluster(t, ctx, procClusterOptions{Edges: 1, Args: []string{"--fcm-endpoint", fcm.Endpoint()}})
	e := &consoleEnv{
		ctx: ctx, voters: voters, edge: edges[0], fcm: fcm,
		ownerEmail: "owner@example.com", ownerPass: "console owner password 2024!",
		adminToken: sdkAdminToken, consoleNode: edges[0], bin: bin,
	}
	e.proj, err = proctest.CreateProject(ctx, http.DefaultClient, voters[0].Bin, voters[0].url, sdkAdminToken, "console", e.ownerEmail, e.ownerPass)
	if err != nil {
		t.Fatal(err)
	}
	// The owner turns on TOTP: signing in to the console takes the second step.
	var enrolled struct{ Secret string }
	e.call(t, http.MethodPost, "/api/authenticator/enroll", e.proj.Headers(), nil, http.StatusOK, &enrolled)
	e.totpSecret = enrolled.Secret
	e.call(t, http.MethodPost, "/api/authenticator/confirm", e.proj.Headers(), map[string]string{"code": e.code(t)}, http.StatusOK, nil)

	e.tab = openBrowserFor(t, bin, 20*time.Minute)
	e.tab.stateExpr = consoleState
	e.tab.do("the desktop viewport", chromedp.EmulateViewport(1280, 800))
	e.tab.load("the console's first page", e.consoleNode.url+"/_/", `!!document.querySelector('#main h1')`, 20*time.Second)
	return e
}

// run evaluates body, the statements of an async function (with its own
// return), in p and returns the result as a string (” for undefined).
func run(p *page, what, body string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => { const v = await (async () => { `+body+`
	})(); return v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v); })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
	return v
}

// url is the console node's base URL (http://127.0.0.1:port).
func (e *consoleEnv) url() string { return e.consoleNode.url }

// call is one JSON request to n1 that must answer want (see call).
func (e *consoleEnv) call(t *testing.T, method, path string, headers map[string]string, body any, want int, out any) http.Header {
	t.Helper()
	return call(t, e.ctx, method, e.voters[0].url+path, headers, body, want, out)
}

// keys are the project's id and API key headers (no session).
func (e *consoleEnv) keys() map[string]string {
	return map[string]string{"X-Project-Id": e.proj.ID, "X-API-Key": e.proj.APIKey}
}

// code returns the owner's next TOTP code: one that differs from the last
// one used (a code is taken once), waiting for the next period if needed.
func (e *consoleEnv) code(t *testing.T) string {
	t.Helper()
	if e.lastCode == "" {
		c, err := rfc6238.Authenticator(e.totpSecret, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		e.lastCode = c
		return c
	}
	e.lastCode = nextCode(t, e.totpSecret, e.lastCode)
	return e.lastCode
}

// signInDirect signs e.tab in as the owner (through the SDK in the page,
// with the TOTP step) and as the operator, without the sign-in page, then
// opens the console again. Used when the signin subtest does not run.
func (e *consoleEnv) signInDirect(t *testing.T) {
	t.Helper()
	p := e.tab
	run(p, "sign in through the SDK", fmt.Sprintf(`const sdk = await import('/_/sdk/edgebase.js');
		const c = sdk.createClient({url: location.origin, projectId: %s, apiKey: %s});
		const r = await c.auth.login(%s, %s);
		if (r.requiresTotp) await c.auth.loginVerify(r.loginTicket, %s);
		c.close();
		localStorage.setItem('edgebase.console.project', JSON.stringify({projectId: %[1]s, apiKey: %[2]s}));
		localStorage.setItem('edgebase.console.operator', JSON.stringify({adminToken: %[6]s}));`, js(e.proj.ID), js(e.proj.APIKey), js(e.ownerEmail), js(e.ownerPass), js(e.code(t)), js(e.adminToken)))
	p.do("reload the console", chromedp.Reload())
	e.open(t, p, "data")
	e.signedIn = true
}

// open navigates p to route (e.g. "data?path=notes") of the console on
// e.consoleNode and waits until the page's heading (#h-<page id>) is shown.
func (e *consoleEnv) open(t *testing.T, p *page, route string) {
	t.Helper()
	id, _, _ := strings.Cut(route, "?")
	target := e.url() + "/_/#/" + route
	onConsole := p.eval(fmt.Sprintf(`location.origin + location.pathname === %s`, js(e.url()+"/_/")))
	switch {
	case !onConsole:
		p.do("open "+route, chromedp.Navigate(target))
	case p.eval(fmt.Sprintf(`location.hash === %s`, js("#/"+route))):
		p.do("reload "+route, chromedp.Reload())
	default:
		run(p, "go to "+route, fmt.Sprintf(`window.__openOld = document.querySelector('#main > section'); location.hash = %s;`, js("#/"+route)))
	}
	p.waitFor("the heading of "+route, fmt.Sprintf(`(() => {
		const s = document.querySelector('#main > section');
		const h = document.getElementById(%s);
		return !!(s && s !== window.__openOld && h && s.contains(h) && h.getClientRects().length);
	})()`, js("h-"+id)), 20*time.Second)
}

// shoot saves a screenshot of p's current page at 1280×800 and at 390×844
// as docs/console/<name>-desktop.png and docs/console/<name>-phone.png.
func (e *consoleEnv) shoot(t *testing.T, p *page, name string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	settle := `await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));`
	for _, size := range []struct {
		suffix string
		action chromedp.Action[chromedp.Void]
	}{
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))},
		{"desktop", chromedp.EmulateViewport(1280, 800)},
	} {
		p.do(name+" at "+size.suffix+" size", size.action)
		run(p, "let the layout settle", settle)
		if size.suffix == "phone" {
			// Nothing may overflow sideways on a phone but inside a scroller.
			if wide := run(p, "the page's width", `return String(document.documentElement.scrollWidth);`); wide != "390" {
				t.Errorf("%s: the page is %s px wide at 390 px (something overflows sideways)\n%s", name, wide, e.wideElements(p))
			}
		}
		img, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot of %s (%s): %v", name, size.suffix, err)
		}
		out := filepath.Join(dir, name+"-"+size.suffix+".png")
		if err := os.WriteFile(out, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("saved %s", out)
	}
}

// wideElements names the elements wider than the viewport, for a message.
func (e *consoleEnv) wideElements(p *page) string {
	return run(p, "the wide elements", `return [...document.querySelectorAll('body *')]
		.filter(el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
		.filter(el => !el.closest('.table-wrap, pre, textarea, .scroll-x, #nav'))
		.slice(0, 10).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className ? '.' + String(el.className).trim().split(/\s+/).join('.') : '') + ' right=' + Math.round(el.getBoundingClientRect().right)).join('\n');`)
}

// a11yLib defines window.__a11yLib in the page: the helpers of checkA11y.
const a11yLib = `window.__a11yLib = (() => {
	const visible = (el) => {
		if (!el.getClientRects().length) return false;
		const cs = getComputedStyle(el);
		return cs.visibility !== 'hidden' && cs.display !== 'none';
	};
	const sel = (el) => {
		const parts = [];
		for (let n = el; n && n.nodeType === 1 && parts.length < 4; n = n.parentElement) {
			let s = n.tagName.toLowerCase();
			if (n.id) { parts.unshift(s + '#' + n.id); break; }
			if (n.classList.length) s += '.' + [...n.classList].join('.');
			const sibs = n.parentElement ? [...n.parentElement.children].filter(c => c.tagName === n.tagName) : [];
			if (sibs.length > 1) s += ':nth-of-type(' + (sibs.indexOf(n) + 1) + ')';
			parts.unshift(s);
		}
		return parts.join(' > ');
	};
	const text = (el) => (el.textContent || '').replace(/\s+/g, ' ').trim();
	const named = (el) => {
		const al = el.getAttribute('aria-label');
		if (al && al.trim()) return true;
		const lb = el.getAttribute('aria-labelledby');
		return !!(lb && lb.split(/\s+/).some(id => { const r = document.getElementById(id); return r && text(r); }));
	};
	// The controls Tab must reach: native ones (a tabindex=-1 takes one out
	// of the keyboard's reach: a failure, but inside a composite widget that
	// moves the focus with the arrow keys) and any element with tabindex >= 0.
	const composite = '[role=tablist], [role=listbox], [role=grid], [role=menu], [role=menubar], [role=radiogroup], [role=toolbar], [role=tree], [role=treegrid]';
	const focusable = () => [...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
		.filter(el => (el.tabIndex >= 0 || (el.matches('a[href], button, input, select, textarea, summary') && !el.closest(composite))) && !el.matches(':disabled') && !(el.tagName === 'INPUT' && el.type === 'hidden') &&
			!el.closest('[inert]') && visible(el) && (el.tagName !== 'SUMMARY' || el.parentElement.tagName === 'DETAILS'));
	const outline = (el) => {
		const cs = getComputedStyle(el);
		return (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0) || (cs.boxShadow && cs.boxShadow !== 'none');
	};
	return { visible, sel, text, named, focusable, outline };
})();`

// a11yStatic lists the failures that need no keyboard: unnamed controls,
// buttons and links, duplicate ids.
const a11yStatic = `return (() => {
	const { visible, sel, text, named } = window.__a11yLib;
	const out = [];
	for (const el of document.querySelectorAll('input, select, textarea')) {
		if (el.type === 'hidden' || !visible(el)) continue;
		if (['submit', 'button', 'reset'].includes(el.type)) {
			if (!(el.value || '').trim() && !named(el)) out.push('an input button without a name: ' + sel(el));
			continue;
		}
		if (named(el) || [...(el.labels || [])].some(l => text(l))) continue;
		out.push('a control without a label: ' + sel(el));
	}
	for (const el of document.querySelectorAll('button, a[href], summary, [role=button], [role=link], [role=tab]')) {
		if (!visible(el)) continue;
		if (named(el) || text(el) || (el.getAttribute('title') || '').trim() || [...el.querySelectorAll('img[alt]')].some(i => i.alt.trim())) continue;
		out.push('a ' + el.tagName.toLowerCase() + ' without a name: ' + sel(el));
	}
	const seen = new Map();
	for (const el of document.querySelectorAll('[id]')) {
		if (seen.has(el.id)) out.push('the id ' + JSON.stringify(el.id) + ' is used twice: ' + sel(seen.get(el.id)) + ' and ' + sel(el));
		else seen.set(el.id, el);
	}
	return out;
})();`

// checkA11y fails unless every input, select and textarea of p's current
// page has a label, every button and link a name, ids are unique, and every
// control can be reached with Tab alone and shows a visible focus. It
// reports every failure at once.
func (e *consoleEnv) checkA11y(t *testing.T, p *page) {
	t.Helper()
	run(p, "the accessibility helpers", a11yLib)
	var failures []string
	if err := json.Unmarshal([]byte(run(p, "the labels, names and ids", a11yStatic)), &failures); err != nil {
		t.Fatal(err)
	}

	// Tab through the page: every control must take the focus at some point
	// (the walk wraps around the page) and show it.
	n := atoi(t, run(p, "the focusable controls", `window.__a11yWalk = { els: window.__a11yLib.focusable(), seen: new Set(), radios: new Set() };
		return String(window.__a11yWalk.els.length);`))
	step := `(() => {
		const L = window.__a11yLib, W = window.__a11yWalk, a = document.activeElement;
		if (!a || a === document.body || a === document.documentElement) return JSON.stringify({});
		const i = W.els.indexOf(a);
		if (i >= 0) W.seen.add(i);
		if (a.type === 'radio' && a.name) W.radios.add(a.name);
		const left = W.els.filter((el, j) => !W.seen.has(j) && !(el.type === 'radio' && W.radios.has(el.name))).length;
		return JSON.stringify({ sel: L.sel(a), outline: L.outline(a), left });
	})()`
	noOutline := map[string]bool{}
	left := n
	for i := 0; i < 2*n+10 && left > 0; i++ {
		var s struct {
			Sel     string `json:"sel"`
			Outline bool   `json:"outline"`
			Left    *int   `json:"left"`
		}
		out, err := chromedp.Run(p.ctx, func(ctx context.Context, tg *chromedp.Target) (string, error) {
			if _, err := chromedp.KeyEvent(kb.Tab)(ctx, tg); err != nil {
				return "", err
			}
			return chromedp.Evaluate[string](step)(ctx, tg)
		})
		if err != nil {
			t.Fatalf("press Tab: %v\n%s", err, p.state())
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("tab step: %q: %v", out, err)
		}
		if s.Left != nil {
			left = *s.Left
		}
		if s.Sel != "" && !s.Outline && !noOutline[s.Sel] {
			noOutline[s.Sel] = true
			failures = append(failures, "no visible focus (outline or box-shadow) on "+s.Sel)
		}
	}
	if left > 0 {
		var missed []string
		if err := json.Unmarshal([]byte(run(p, "the controls Tab never reached", `const W = window.__a11yWalk;
			return W.els.filter((el, j) => !W.seen.has(j) && !(el.type === 'radio' && W.radios.has(el.name))).map(window.__a11yLib.sel);`)), &missed); err != nil {
			t.Fatal(err)
		}
		for _, m := range missed {
			failures = append(failures, "Tab never reaches "+m)
		}
	}
	if len(failures) > 0 {
		loc := run(p, "the location", `return location.hash;`)
		t.Errorf("accessibility of %s: %d failures:\n  %s", loc, len(failures), strings.Join(failures, "\n  "))
	}
}

// newTab opens a second tab in p's browser (it shares localStorage, so it is
// signed in as p is). It is closed at the end of the test.
func (e *consoleEnv) newTab(t *testing.T, p *page) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	q := &page{t: t, ctx: ctx, stateExpr: p.stateExpr}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		cancel()
		t.Fatalf("open a new tab: %v", err)
	}
	messages := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			q.mu.Lock()
			q.console = append(q.console, m.String())
			q.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, line := range q.console {
			t.Logf("browser console (second tab): %s", line)
		}
	})
	return q
}

// tabTo presses Tab in p until the element matching selector has focus,
// failing when it is never reached (every control must be reachable with
// the keyboard alone).
func (e *consoleEnv) tabTo(t *testing.T, p *page, selector string) {
	t.Helper()
	p.waitFor("the element "+selector, fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!(el && el.getClientRects().length); })()`, js(selector)), 10*time.Second)
	focused := fmt.Sprintf(`(() => { const a = document.activeElement; return !!(a && a.matches(%s)); })()`, js(selector))
	if p.eval(focused) {
		return
	}
	for i := 0; i < 300; i++ {
		ok, err := chromedp.Run(p.ctx, func(ctx context.Context, tg *chromedp.Target) (bool, error) {
			if _, err := chromedp.KeyEvent(kb.Tab)(ctx, tg); err != nil {
				return false, err
			}
			return chromedp.Evaluate[bool](focused)(ctx, tg)
		})
		if err != nil {
			t.Fatalf("press Tab: %v\n%s", err, p.state())
		}
		if ok {
			return
		}
	}
	t.Fatalf("Tab never reaches %s\n%s", selector, p.state())
}

// keyNames are the names key accepts besides plain characters.
var keyNames = map[string]string{
	"Enter": kb.Enter, "Escape": kb.Escape, "Tab": kb.Tab, "Space": " ", "Backspace": kb.Backspace,
	"Delete": kb.Delete, "ArrowUp": kb.ArrowUp, "ArrowDown": kb.ArrowDown, "ArrowLeft": kb.ArrowLeft,
	"ArrowRight": kb.ArrowRight, "Home": kb.Home, "End": kb.End, "PageUp": kb.PageUp, "PageDown": kb.PageDown,
}

// key sends one key (e.g. "Enter", " ", "Escape") to the focused element of p.
func (e *consoleEnv) key(t *testing.T, p *page, key string) {
	t.Helper()
	k, ok := keyNames[key]
	if !ok {
		k = key
	}
	p.do("press "+key, chromedp.KeyEvent(k))
}

// typeInto focuses the element matching selector and types text with real
// key events (replacing what it held).
func (e *consoleEnv) typeInto(t *testing.T, p *page, selector, text string) {
	t.Helper()
	p.waitFor("the field "+selector, fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!(el && el.getClientRects().length && !el.disabled); })()`, js(selector)), 10*time.Second)
	run(p, "focus "+selector, fmt.Sprintf(`const el = document.querySelector(%s); el.focus(); if (typeof el.select === 'function') el.select();`, js(selector)))
	if !p.eval(fmt.Sprintf(`document.activeElement === document.querySelector(%s)`, js(selector))) {
		t.Fatalf("%s does not take the focus\n%s", selector, p.state())
	}
	if text == "" {
		p.do("clear "+selector, chromedp.KeyEvent(kb.Backspace))
		return
	}
	p.do("type into "+selector, chromedp.KeyEvent(text))
	// Key events of characters outside the keyboard may not type: check.
	if got := run(p, "the value of "+selector, fmt.Sprintf(`return document.querySelector(%s).value;`, js(selector))); got != strings.ReplaceAll(text, "\r", "\n") {
		t.Fatalf("typed %q into %s, it holds %q", text, selector, got)
	}
}

// consoleSignin walks the sign-in page: a wrong password, a user who is not
// an owner, the owner with the TOTP step (by keyboard), the operator's token,
// signing out, a session that ends on the server, and the CSP.
func consoleSignin(t *testing.T, e *consoleEnv) {
	p := e.tab
	e.open(t, p, "signin")
	e.shoot(t, p, "signin")
	e.checkA11y(t, p)

	// The project id and key come prefilled from the route's params.
	e.open(t, p, "signin?"+url.Values{"project": {e.proj.ID}, "key": {e.proj.APIKey}}.Encode())
	for sel, want := range map[string]string{"#signin-project": e.proj.ID, "#signin-key": e.proj.APIKey} {
		if got := run(p, "the prefilled "+sel, fmt.Sprintf(`return document.querySelector(%s).value;`, js(sel))); got != want {
			t.Fatalf("%s = %q, want %q from the route", sel, got, want)
		}
	}

	// A wrong password: the server's error, nobody signed in.
	e.typeInto(t, p, "#signin-email", e.ownerEmail)
	e.typeInto(t, p, "#signin-password", "not the password")
	p.do("submit the owner's form", chromedp.Click(chromedp.CSS("#signin-owner-submit")))
	msg := p.waitFor("the invalid credentials error", `(() => { const e = document.querySelector('#signin-owner [role=alert]'); return e && e.textContent.includes('invalid_credentials') && e.textContent; })()`, 15*time.Second)
	t.Logf("a wrong password shows: %s", msg)
	if p.eval(`!!localStorage.getItem('edgebase.console.project')`) {
		t.Fatalf("a failed sign-in stored the project\n%s", p.state())
	}

	// A user who is not an owner is refused and signed out again.
	const userEmail, userPass = "plain-user@example.com", "console plain user 2024!"
	e.call(t, http.MethodPost, "/api/auth", e.keys(), map[string]string{"action": "register", "email": userEmail, "password": userPass}, http.StatusCreated, nil)
	e.typeInto(t, p, "#signin-email", userEmail)
	e.typeInto(t, p, "#signin-password", userPass)
	p.do("submit as a plain user", chromedp.Click(chromedp.CSS("#signin-owner-submit")))
	msg = p.waitFor("the not-an-owner message", `(() => { const e = document.querySelector('#signin-owner [role=alert]'); return e && /not an owner/i.test(e.textContent) && e.textContent; })()`, 15*time.Second)
	t.Logf("a plain user sees: %s", msg)
	p.waitFor("the plain user's session dropped", fmt.Sprintf(`!localStorage.getItem(%s) && !localStorage.getItem('edgebase.console.project')`, js("edgebase.session."+e.proj.ID)), 10*time.Second)

	// The owner, by keyboard alone: password, then the TOTP step.
	e.typeInto(t, p, "#signin-email", e.ownerEmail)
	e.typeInto(t, p, "#signin-password", e.ownerPass)
	e.tabTo(t, p, "#signin-owner-submit")
	e.key(t, p, "Enter")
	p.waitFor("the code step, focused", `document.activeElement && document.activeElement.id === 'signin-code'`, 15*time.Second)
	if !p.eval(`(() => { const c = document.getElementById('signin-code'); return c.inputMode === 'numeric' && c.autocomplete === 'one-time-code'; })()`) {
		t.Errorf("the code field is not inputmode=numeric autocomplete=one-time-code\n%s", p.state())
	}
	e.shoot(t, p, "signin-totp")
	good := e.code(t)
	wrong := fmt.Sprintf("%06d", (atoi(t, good)+500000)%1000000)
	e.typeInto(t, p, "#signin-code", wrong)
	e.key(t, p, "Enter")
	msg = p.waitFor("the invalid code error", `(() => { const e = document.querySelector('#signin-owner [role=alert]'); return e && e.textContent.includes('invalid_code') && e.textContent; })()`, 15*time.Second)
	t.Logf("a wrong code shows: %s", msg)
	e.typeInto(t, p, "#signin-code", good)
	e.key(t, p, "Enter")
	p.waitFor("the data page after the owner signed in", `location.hash.startsWith('#/data') && !!document.getElementById('h-data')`, 15*time.Second)
	p.waitFor("the heading focused", `document.activeElement === document.getElementById('h-data')`, 5*time.Second)
	navIs := func(want ...string) string {
		b, _ := json.Marshal(want)
		return `JSON.stringify([...document.querySelectorAll('#nav a')].map(a => a.textContent)) === ` + js(string(b))
	}
	p.waitFor("the owner's pages in the nav", navIs("Data", "Rules", "Users", "Push", "Triggers"), 5*time.Second)
	if !p.eval(`document.querySelector('#nav a[aria-current=page]').textContent === 'Data'`) {
		t.Errorf("the nav does not mark Data as the current page\n%s", p.state())
	}
	p.waitFor("who is signed in", fmt.Sprintf(`document.getElementById('who').textContent.includes(%s)`, js(e.ownerEmail)), 5*time.Second)
	// The session the console holds is the owner's, on the server.
	token := run(p, "the console's session", fmt.Sprintf(`return JSON.parse(localStorage.getItem(%s)).token;`, js("edgebase.session."+e.proj.ID)))
	var me struct{ User struct{ ID, Role string } }
	e.call(t, http.MethodPost, "/api/auth", map[string]string{"Authorization": "Bearer " + token, "X-Project-Id": e.proj.ID, "X-API-Key": e.proj.APIKey},
		map[string]string{"action": "me"}, http.StatusOK, &me)
	if me.User.ID != e.proj.OwnerID || me.User.Role != "owner" {
		t.Fatalf("the console's session is %+v, want the owner %s", me.User, e.proj.OwnerID)
	}

	// The operator: a wrong token is refused and not stored; the right one
	// is checked, stored, and leads to the projects page.
	e.open(t, p, "signin")
	e.typeInto(t, p, "#signin-token", "eba_not-the-admin-token-0123456789")
	p.do("submit a wrong admin token", chromedp.Click(chromedp.CSS("#signin-operator-submit")))
	msg = p.waitFor("the refused token", `(() => { const e = document.querySelector('#signin-operator [role=alert]'); return e && e.textContent.includes('401') && e.textContent; })()`, 15*time.Second)
	t.Logf("a wrong admin token shows: %s", msg)
	if p.eval(`!!localStorage.getItem('edgebase.console.operator')`) {
		t.Fatalf("a refused admin token was stored")
	}
	if p.eval(`document.getElementById('signin-token').type !== 'password'`) {
		t.Errorf("the admin token field is not type=password")
	}
	e.typeInto(t, p, "#signin-token", e.adminToken)
	e.key(t, p, "Enter")
	p.waitFor("the projects page after the operator signed in", `location.hash.startsWith('#/projects') && !!document.getElementById('h-projects')`, 15*time.Second)
	p.waitFor("every page in the nav", navIs("Projects", "Data", "Rules", "Users", "Push", "Triggers", "Cluster"), 5*time.Second)

	// The sign-in page lists both, each with its sign-out.
	e.open(t, p, "signin")
	p.waitFor("both signed in", fmt.Sprintf(`(() => { const t = document.getElementById('main').textContent; return t.includes(%s) && t.includes(%s) && !!document.getElementById('signin-owner-signout') && !!document.getElementById('signin-operator-signout'); })()`, js(e.ownerEmail), js(e.proj.ID)), 5*time.Second)
	e.shoot(t, p, "signin-signed-in")
	e.checkA11y(t, p)

	// A second tab shares the sign-in; signing the operator out in one
	// signs it out in the other.
	q := e.newTab(t, p)
	e.open(t, q, "cluster")
	e.tabTo(t, p, "#signin-operator-signout")
	e.key(t, p, "Enter")
	p.waitFor("the operator signed out", `!localStorage.getItem('edgebase.console.operator') && !!document.getElementById('signin-token')`, 10*time.Second)
	p.waitFor("the operator's pages gone from the nav", navIs("Data", "Rules", "Users", "Push", "Triggers"), 5*time.Second)
	q.waitFor("the other tab leaves the cluster page", `!document.getElementById('h-cluster') && !!document.querySelector('#main h1')`, 10*time.Second)

	// The session ends on the server (signed out elsewhere): the console
	// notices and returns to the sign-in page with a message.
	e.call(t, http.MethodPost, "/api/auth", map[string]string{"Authorization": "Bearer " + token, "X-Project-Id": e.proj.ID, "X-API-Key": e.proj.APIKey},
		map[string]string{"action": "logout"}, http.StatusOK, nil)
	p.do("reload the console", chromedp.Reload())
	msg = p.waitFor("the ended session", `location.hash.startsWith('#/signin') && (() => { const e = document.querySelector('#main [role=alert], #main .notice'); return e && /session/i.test(e.textContent) && e.textContent; })()`, 15*time.Second)
	t.Logf("an ended session shows: %s", msg)
	if p.eval(`!!document.getElementById('signin-owner-signout')`) {
		t.Fatalf("the sign-in page still shows the owner signed in after the session ended\n%s", p.state())
	}

	// The CSP: a script the page did not load from the node does not run.
	ran := run(p, "an injected inline script", `window.__inline = 0;
		const s = document.createElement('script'); s.textContent = 'window.__inline = 1'; document.head.append(s);
		await new Promise(r => setTimeout(r, 100)); return String(window.__inline);`)
	if ran != "0" {
		t.Fatalf("an inline script ran on the console: the CSP does not hold")
	}
	styled := run(p, "an inline style attribute", `const d = document.createElement('div'); d.setAttribute('style', 'width: 123px'); document.body.append(d);
		const w = getComputedStyle(d).width; d.remove(); return w;`)
	if styled == "123px" {
		t.Fatalf("an inline style attribute applied on the console: the CSP does not hold")
	}

	// Sign in again as both, for the next subtests: the owner through the
	// form (a fresh code), the operator too.
	e.typeInto(t, p, "#signin-project", e.proj.ID)
	e.typeInto(t, p, "#signin-key", e.proj.APIKey)
	e.typeInto(t, p, "#signin-email", e.ownerEmail)
	e.typeInto(t, p, "#signin-password", e.ownerPass)
	e.key(t, p, "Enter")
	p.waitFor("the code step", `document.activeElement && document.activeElement.id === 'signin-code'`, 15*time.Second)
	e.typeInto(t, p, "#signin-code", e.code(t))
	e.key(t, p, "Enter")
	p.waitFor("the data page", `location.hash.startsWith('#/data') && !!document.getElementById('h-data')`, 15*time.Second)
	e.open(t, p, "signin")
	e.typeInto(t, p, "#signin-token", e.adminToken)
	e.key(t, p, "Enter")
	p.waitFor("the projects page", `location.hash.startsWith('#/projects') && !!document.getElementById('h-projects')`, 15*time.Second)
	e.signedIn = true
}
