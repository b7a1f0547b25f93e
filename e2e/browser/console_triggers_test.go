package browser

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/hookcheck"
	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
)

// hookDelivery is one request the webhook receiver got.
type hookDelivery struct {
	Path      string
	Header    http.Header
	Body      []byte
	Status    int // what the receiver answered
	Trigger   string
	Revision  uint64
	DocPath   string
	EventType string
}

// hookReceiver is the tests' webhook receiver: a real HTTP server on
// loopback that keeps every request and answers 400 on the paths in refuse.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hookDelivery
	refuse map[string]bool
}

func startHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{refuse: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var p struct {
			Trigger  string `json:"trigger"`
			Revision uint64 `json:"revision"`
			Path     string `json:"path"`
			Type     string `json:"type"`
		}
		_ = json.Unmarshal(body, &p) // a body that is no payload fails the test's checks
		r.mu.Lock()
		status := http.StatusOK
		if r.refuse[req.URL.Path] {
			status = http.StatusBadRequest
		}
		r.got = append(r.got, hookDelivery{Path: req.URL.Path, Header: req.Header.Clone(), Body: body, Status: status,
			Trigger: p.Trigger, Revision: p.Revision, DocPath: p.Path, EventType: p.Type})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// setRefuse makes the receiver answer 400 (true) or 200 on path.
func (r *hookReceiver) setRefuse(path string, refuse bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse[path] = refuse
}

// to is the requests to path so far.
func (r *hookReceiver) to(path string) []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookDelivery
	for _, d := range r.got {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// waitHook polls until pred holds for the requests to path.
func (r *hookReceiver) waitHook(t *testing.T, what, path string, pred func([]hookDelivery) bool) []hookDelivery {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := r.to(path)
		if pred(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the receiver got %d requests on %s", what, len(got), path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startTriggersEnv starts one node allowed to call webhooks on loopback,
// creates a project (owner without TOTP) and opens Chromium on the node's
// console, signed in as the owner.
func startTriggersEnv(t *testing.T) *consoleEnv {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("EDGEBASE_REQUIRE_BROWSER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test of the triggers page (set EDGEBASE_REQUIRE_BROWSER=1 to make this a failure)")
	}
	ctx, cancel := testbin.Context(t)
	t.Cleanup(cancel)
	base := t.TempDir()
	ebin, err := testbin.Edgebase(ctx, testbin.Options{Dir: base, Logf: t.Logf})
	if err != nil {
		t.Fatalf("edgebase binary: %v", err)
	}
	n := newSDKNode(t, ebin, base, "n1")
	n.Args = append(n.Args, "--allow-private-webhooks", "127.0.0.1",
		"--trigger-min-backoff", "50ms", "--trigger-max-backoff", "200ms", "--trigger-retry-for", "3s")
	t.Cleanup(func() {
		n.KillIfRunning()
		if t.Failed() {
			t.Logf("---- output of n1 ----\n%s", n.LogTail(32<<10))
		}
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, n)
	e := &consoleEnv{
		ctx: ctx, voters: []*sdkNode{n}, consoleNode: n, bin: bin, adminToken: sdkAdminToken,
		ownerEmail: "owner@example.com", ownerPass: "triggers owner password 2024!",
	}
	e.proj, err = proctest.CreateProject(ctx, http.DefaultClient, ebin, n.url, sdkAdminToken, "triggers", e.ownerEmail, e.ownerPass)
	if err != nil {
		t.Fatal(err)
	}
	e.tab = openBrowserFor(t, bin, 10*time.Minute)
	e.tab.stateExpr = consoleState
	p := e.tab
	p.do("the desktop viewport", chromedp.EmulateViewport(1280, 800))
	p.load("the console's first page", n.url+"/_/", `!!document.querySelector('#main h1')`, 20*time.Second)
	run(p, "sign in through the SDK", fmt.Sprintf(`const sdk = await import('/_/sdk/edgebase.js');
		const c = sdk.createClient({url: location.origin, projectId: %s, apiKey: %s});
		const r = await c.auth.login(%s, %s);
		if (r.requiresTotp) throw new Error('unexpected TOTP step');
		c.close();
		localStorage.setItem('edgebase.console.project', JSON.stringify({projectId: %[1]s, apiKey: %[2]s}));`,
		js(e.proj.ID), js(e.proj.APIKey), js(e.ownerEmail), js(e.ownerPass)))
	p.do("reload the console", chromedp.Reload())
	e.signedIn = true
	return e
}

// triggerRow is an expression: the list's row of trigger name, or null.
func triggerRow(name string) string {
	return fmt.Sprintf(`document.querySelector('#triggers-list tr[data-trigger=%s]')`, js(name))
}

// setAction puts text in the action editor as typing would (an input event).
func setAction(p *page, text string) {
	run(p, "fill the action", fmt.Sprintf(`const a = document.getElementById('trigger-action'); a.focus(); a.value = %s;
		a.dispatchEvent(new Event('input', {bubbles: true}));`, js(text)))
}

// TestConsoleTriggers walks the triggers page in real Chromium against a
// real node and a real webhook receiver: create a webhook trigger in the
// form (its secret shown once signs the deliveries the receiver checks),
// the status counting deliveries, errors landing on their field, a refused
// delivery in the dead letters and its replay, edit (disable), delete with
// a confirmation; keyboard and labels, screenshots.
//
//	EDGEBASE_REQUIRE_BROWSER=1 EDGEBASE_TEST_BIN_DIR=$PWD/bin/test go test -count=1 -run 'TestConsoleTriggers' ./e2e/browser
func TestConsoleTriggers(t *testing.T) {
	e := startTriggersEnv(t)
	hooks := startHookReceiver(t)
	p := e.tab
	e.open(t, p, "triggers")
	p.waitFor("the nav link", `[...document.querySelectorAll('#nav a')].some(a => a.textContent === 'Triggers' && a.getAttribute('aria-current') === 'page')`, 10*time.Second)
	p.waitFor("the empty list", `!document.getElementById('triggers-empty').hidden && document.getElementById('triggers-list').hidden`, 15*time.Second)
	e.checkA11y(t, p)

	// A client-side error: the action is not JSON; nothing is sent.
	e.typeInto(t, p, "#trigger-name", "orders-hook")
	e.typeInto(t, p, "#trigger-match", "orders/{id}")
	setAction(p, `{"webhook": `)
	usersClick(t, p, "save", "#trigger-save")
	p.waitFor("the JSON error at the action", `document.getElementById('trigger-action').getAttribute('aria-invalid') === 'true' &&
		document.activeElement.id === 'trigger-action' && /not JSON/.test(document.getElementById('trigger-err-action').textContent)`, 10*time.Second)

	// The server's error lands on the field it names: a pattern that does not parse.
	setAction(p, fmt.Sprintf(`{"webhook": {"url": %s}}`, js(hooks.srv.URL+"/orders")))
	e.typeInto(t, p, "#trigger-match", "orders/{id")
	usersClick(t, p, "save", "#trigger-save")
	p.waitFor("the server's error at the match", `document.getElementById('trigger-match').getAttribute('aria-invalid') === 'true' &&
		document.activeElement.id === 'trigger-match' && /invalid_argument \(match\)/.test(document.getElementById('trigger-err-match').textContent) &&
		!document.getElementById('trigger-action').getAttribute('aria-invalid')`, 10*time.Second)
	e.call(t, http.MethodGet, "/api/triggers/orders-hook", e.proj.Headers(), nil, http.StatusNotFound, nil)

	// Created: the secret made by the server is shown once.
	e.typeInto(t, p, "#trigger-match", "orders/{id}")
	usersClick(t, p, "uncheck delete", "#trigger-on-delete")
	usersClick(t, p, "save", "#trigger-save")
	p.waitFor("the saved message", `/^Created orders-hook: revision \d+\.$/.test((document.getElementById('trigger-saved') || {}).textContent || '')`, 10*time.Second)
	secret := run(p, "the secret shown", `return document.getElementById('trigger-secret-value').textContent;`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the secret shown is %q, want whsec_...", secret)
	}
	p.waitFor("the new row", triggerRow("orders-hook")+` && `+triggerRow("orders-hook")+`.dataset.disabled === 'false'`, 10*time.Second)
	var def struct {
		On     []string
		Action struct {
			Webhook struct{ URL, Secret, SecretHint string }
		}
	}
	e.call(t, http.MethodGet, "/api/triggers/orders-hook", e.proj.Headers(), nil, http.StatusOK, &def)
	if strings.Join(def.On, ",") != "create,update" || def.Action.Webhook.URL != hooks.srv.URL+"/orders" ||
		def.Action.Webhook.Secret != "" || def.Action.Webhook.SecretHint != secret[len(secret)-4:] {
		t.Fatalf("the stored trigger: %+v (secret shown %q)", def, secret)
	}

	// A write is delivered, signed with that secret; the status counts it.
	hdr := e.call(t, http.MethodPost, "/api/db/batch", e.proj.Headers(), map[string]any{"writes": []map[string]any{
		{"op": "set", "collection": "orders/o1", "data": map[string]any{"total": 12}},
	}}, http.StatusOK, nil)
	rev, _ := strconv.ParseUint(hdr.Get("X-Revision"), 10, 64)
	got := hooks.waitHook(t, "the delivery of orders/o1", "/orders", func(d []hookDelivery) bool { return len(d) >= 1 })
	d := got[0]
	if err := hookcheck.VerifySignature(d.Header.Get("Edgebase-Signature"), d.Body, secret, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("delivery %s: %v", d.Body, err)
	}
	if hookcheck.VerifySignature(d.Header.Get("Edgebase-Signature"), d.Body, "whsec_wrong", time.Now(), 5*time.Minute) == nil {
		t.Fatal("a wrong secret verifies: the check cannot fail")
	}
	if d.Trigger != "orders-hook" || d.DocPath != "orders/o1" || d.EventType != "create" || d.Revision != rev {
		t.Fatalf("delivery %s, want orders-hook create of orders/o1 at %d", d.Body, rev)
	}
	usersClick(t, p, "refresh", "#triggers-refresh")
	p.waitFor("the status to count the delivery", triggerRow("orders-hook")+`?.dataset.delivered === '1' && Number(`+triggerRow("orders-hook")+`.dataset.cursor) >= `+strconv.FormatUint(rev, 10), 20*time.Second)

	// A second trigger whose receiver refuses (400): a dead letter at once.
	hooks.setRefuse("/refused", true)
	run(p, "new trigger", `document.getElementById('trigger-new').click();`)
	p.waitFor("a fresh form", `document.getElementById('trigger-name').value === '' && !document.getElementById('trigger-name').readOnly`, 5*time.Second)
	e.typeInto(t, p, "#trigger-name", "refused-hook")
	e.typeInto(t, p, "#trigger-match", "orders/{id}")
	setAction(p, fmt.Sprintf(`{"webhook": {"url": %s, "secret": "whsec_refused_secret_0123456789"}}`, js(hooks.srv.URL+"/refused")))
	usersClick(t, p, "save", "#trigger-save")
	p.waitFor("the second trigger saved", `/^Created refused-hook/.test((document.getElementById('trigger-saved') || {}).textContent || '')`, 10*time.Second)
	hdr = e.call(t, http.MethodPost, "/api/db/batch", e.proj.Headers(), map[string]any{"writes": []map[string]any{
		{"op": "set", "collection": "orders/o2", "data": map[string]any{"total": 99}},
	}}, http.StatusOK, nil)
	rev2, _ := strconv.ParseUint(hdr.Get("X-Revision"), 10, 64)
	hooks.waitHook(t, "the refused delivery", "/refused", func(d []hookDelivery) bool { return len(d) >= 1 && d[0].Status == http.StatusBadRequest })
	p.waitFor("the dead letter in the status", triggerRow("refused-hook")+`?.dataset.deadLetters === '1'`, 20*time.Second)
	usersClick(t, p, "dead letters of refused-hook", `#triggers-list tr[data-trigger="refused-hook"] button.triggers-dead`)
	p.waitFor("the dead letter listed", fmt.Sprintf(`document.getElementById('triggers-dead-h').textContent === 'Dead letters of refused-hook' &&
		document.activeElement.id === 'triggers-dead-h' && location.hash === '#/triggers?trigger=refused-hook' &&
		document.querySelectorAll('#triggers-dead-list tbody tr[data-id]').length === 1 &&
		document.querySelector('#triggers-dead-list tbody tr[data-id]').dataset.revision === '%d' &&
		/400/.test(document.querySelector('#triggers-dead-list tbody tr[data-id]').textContent)`, rev2), 10*time.Second)
	run(p, "scroll to the list", `window.scrollTo(0, 0);`)
	e.shoot(t, p, "triggers")
	e.checkA11y(t, p)

	// Replay once the receiver takes it: delivered, the dead letters empty.
	hooks.setRefuse("/refused", false)
	usersClick(t, p, "replay", "#triggers-dead-list button.triggers-replay")
	p.waitFor("the replay's confirmation", `/^Replayed 1 event of refused-hook/.test(document.getElementById('triggers-dead-status').textContent) &&
		document.querySelectorAll('#triggers-dead-list tbody tr[data-id]').length === 0`, 10*time.Second)
	ok := hooks.waitHook(t, "the replayed delivery", "/refused", func(d []hookDelivery) bool {
		return len(d) >= 2 && d[len(d)-1].Status == http.StatusOK
	})
	last := ok[len(ok)-1]
	if err := hookcheck.VerifySignature(last.Header.Get("Edgebase-Signature"), last.Body, "whsec_refused_secret_0123456789", time.Now(), 5*time.Minute); err != nil || last.Revision != rev2 {
		t.Fatalf("the replayed delivery %s: %v (want revision %d)", last.Body, err, rev2)
	}
	usersClick(t, p, "refresh", "#triggers-refresh")
	p.waitFor("the status after the replay", triggerRow("refused-hook")+`?.dataset.deadLetters === '0' && `+triggerRow("refused-hook")+`.dataset.delivered === '1'`, 20*time.Second)

	// Edit: the form holds the trigger (no secret); disabling it shows in the list.
	usersClick(t, p, "edit orders-hook", `#triggers-list tr[data-trigger="orders-hook"] button.triggers-edit`)
	p.waitFor("the trigger in the form", `document.getElementById('triggers-form-h').textContent === 'Edit orders-hook' &&
		document.getElementById('trigger-name').value === 'orders-hook' && document.getElementById('trigger-name').readOnly &&
		!document.getElementById('trigger-on-delete').checked && document.getElementById('trigger-on-update').checked &&
		JSON.parse(document.getElementById('trigger-action').value).webhook.secret === undefined &&
		JSON.parse(document.getElementById('trigger-action').value).webhook.secretHint === undefined`, 10*time.Second)
	usersClick(t, p, "disable", "#trigger-disabled")
	usersClick(t, p, "save", "#trigger-save")
	p.waitFor("saved, disabled", `/^Saved orders-hook/.test((document.getElementById('trigger-saved') || {}).textContent || '') &&
		document.getElementById('trigger-secret').hidden && `+triggerRow("orders-hook")+`?.dataset.disabled === 'true'`, 10*time.Second)
	var after struct {
		Disabled bool
		Action   struct{ Webhook struct{ SecretHint string } }
	}
	e.call(t, http.MethodGet, "/api/triggers/orders-hook", e.proj.Headers(), nil, http.StatusOK, &after)
	if !after.Disabled || after.Action.Webhook.SecretHint != secret[len(secret)-4:] {
		t.Fatalf("after the edit: %+v, want disabled with the same secret (hint %q)", after, secret[len(secret)-4:])
	}

	// Delete, confirmed inline: Escape cancels, the confirmation deletes.
	usersClick(t, p, "delete refused-hook", `#triggers-list tr[data-trigger="refused-hook"] button.triggers-delete`)
	p.waitFor("the confirmation", `document.activeElement.matches('#triggers-list tr[data-trigger="refused-hook"] button.triggers-confirm-delete')`, 5*time.Second)
	e.key(t, p, "Escape")
	p.waitFor("cancelled", `document.activeElement.matches('#triggers-list tr[data-trigger="refused-hook"] button.triggers-delete')`, 5*time.Second)
	e.call(t, http.MethodGet, "/api/triggers/refused-hook", e.proj.Headers(), nil, http.StatusOK, nil)
	usersClick(t, p, "delete refused-hook", `#triggers-list tr[data-trigger="refused-hook"] button.triggers-delete`)
	usersClick(t, p, "confirm", `#triggers-list tr[data-trigger="refused-hook"] button.triggers-confirm-delete`)
	p.waitFor("the row gone", `!`+triggerRow("refused-hook")+` && /^Deleted refused-hook/.test(document.getElementById('triggers-list-status').textContent) &&
		document.getElementById('triggers-dead-h').textContent === 'Dead letters'`, 10*time.Second)
	e.call(t, http.MethodGet, "/api/triggers/refused-hook", e.proj.Headers(), nil, http.StatusNotFound, nil)

	// A non-owner cannot list triggers (the page needs an owner).
	e.call(t, http.MethodGet, "/api/triggers", e.keys(), nil, http.StatusUnauthorized, nil)
}
