package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// storedDoc is a document as GET /api/db answers it.
type storedDoc struct {
	Collection string         `json:"collection"`
	Data       map[string]any `json:"data"`
	Revision   uint64         `json:"revision"`
}

// dataGet reads the document at path through the API on n1 (want: 200 or 404).
func dataGet(t *testing.T, e *consoleEnv, path string, want int) storedDoc {
	t.Helper()
	var d storedDoc
	var out any = &d
	if want != http.StatusOK {
		out = nil
	}
	e.call(t, http.MethodGet, "/api/db?collection="+url.QueryEscape(path), e.proj.Headers(), nil, want, out)
	return d
}

// dataPut writes the document at path through the API on n1.
func dataPut(t *testing.T, e *consoleEnv, path string, data map[string]any) storedDoc {
	t.Helper()
	r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 20*time.Second, http.MethodPost, e.voters[0].url+"/api/db",
		e.proj.Headers(), map[string]any{"collection": path, "data": data})
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	var d storedDoc
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("write %s: %s", path, r)
	}
	if err := json.Unmarshal(r.Body, &d); err != nil || d.Revision == 0 {
		t.Fatalf("write %s: %s (%v)", path, r, err)
	}
	return d
}

// dataClick waits until the element matching selector is shown and enabled, then clicks it.
func dataClick(t *testing.T, p *page, selector string) {
	t.Helper()
	p.waitFor("the element "+selector, fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!(el && el.getClientRects().length && !el.disabled); })()`, js(selector)), 10*time.Second)
	p.await("click "+selector, fmt.Sprintf(`document.querySelector(%s).click(); true`, js(selector)))
}

// dataOpen opens a closed <details> by its id, with a click on its summary.
func dataOpen(t *testing.T, p *page, id string) {
	t.Helper()
	if !p.eval(fmt.Sprintf(`document.getElementById(%s).open`, js(id))) {
		dataClick(t, p, "#"+id+" > summary")
	}
}

// dataEditorIs is an expression: the editor holds a document whose field is value.
func dataEditorIs(field, value string) string {
	return fmt.Sprintf(`(() => { try { return JSON.parse(document.getElementById('data-editor').value)[%s] === %s; } catch { return false; } })()`, js(field), js(value))
}

// consoleData walks the data page: the tree down to a nested document,
// editing and saving it, live updates in a second tab (from the first tab
// and from the API on a voter), a conflict shown side by side, create,
// delete a field, delete a document, a query, invalid JSON, stored markup
// shown as text, and one action by keyboard alone.
func consoleData(t *testing.T, e *consoleEnv) {
	p := e.tab
	const uid = "u-console"
	notes := "users/" + uid + "/notes"
	n1 := notes + "/n1"
	first := dataPut(t, e, n1, map[string]any{"title": "first", "n": 1})

	// The tree, from the root down to the document.
	e.open(t, p, "data")
	p.waitFor("the users collection in the tree", `!!document.querySelector('li[data-path="users"] a.data-open')`, 10*time.Second)
	if !p.eval(`document.querySelector('li[data-path="users"]').dataset.document === 'false'`) {
		t.Errorf("users is shown as a document\n%s", p.state())
	}
	for _, step := range []struct{ from, to string }{{"users", "users/" + uid}, {"users/" + uid, notes}} {
		dataClick(t, p, fmt.Sprintf(`li[data-path=%s] a.data-open`, js(step.from)))
		p.waitFor("the tree at "+step.from, fmt.Sprintf(`!!document.querySelector('li[data-path=%s]')`, js(step.to)), 10*time.Second)
	}
	dataClick(t, p, fmt.Sprintf(`li[data-path=%s] a.data-open`, js(notes)))
	p.waitFor("the note in the tree", fmt.Sprintf(`!!document.querySelector('li[data-path=%s] .data-view')`, js(n1)), 10*time.Second)
	if got := p.awaitString("the breadcrumbs", `[...document.querySelectorAll('.data-crumbs a')].map(a => a.textContent).join('/')`); got != "root/users/"+uid+"/notes" {
		t.Errorf("breadcrumbs %q", got)
	}

	// By keyboard alone: Tab to the note's View button and press Enter.
	e.tabTo(t, p, fmt.Sprintf(`li[data-path=%s] .data-view`, js(n1)))
	e.key(t, p, "Enter")
	p.waitFor("the note in the editor", fmt.Sprintf(`document.getElementById('data-revision')?.dataset.revision === %s && %s`,
		js(fmt.Sprint(first.Revision)), dataEditorIs("title", "first")), 10*time.Second)
	if h := p.awaitString("the document heading", `document.getElementById('data-doc-h').textContent`); h != n1 {
		t.Errorf("document heading %q, want %q", h, n1)
	}

	// Edit and save: the server has the new data.
	e.typeInto(t, p, "#data-editor", `{"title":"edited in tab 1","n":2}`)
	dataClick(t, p, "#data-save")
	p.waitFor("the save", `/Saved: revision \d+/.test(document.getElementById('data-msg').textContent)`, 10*time.Second)
	saved := dataGet(t, e, n1, http.StatusOK)
	if saved.Data["title"] != "edited in tab 1" || saved.Data["n"] != float64(2) {
		t.Fatalf("the server has %v after the save", saved.Data)
	}
	if got := p.awaitString("the shown revision", `document.getElementById('data-revision').dataset.revision`); got != fmt.Sprint(saved.Revision) {
		t.Errorf("the page shows revision %s, the server has %d", got, saved.Revision)
	}

	// Invalid JSON is refused in the page: no request, the error is shown.
	e.typeInto(t, p, "#data-editor", `{"title": oops}`)
	dataClick(t, p, "#data-save")
	p.waitFor("the JSON error", `!!document.getElementById('data-json-error') && document.getElementById('data-editor').getAttribute('aria-invalid') === 'true'`, 5*time.Second)
	if d := dataGet(t, e, n1, http.StatusOK); d.Revision != saved.Revision {
		t.Errorf("invalid JSON reached the server: revision %d -> %d", saved.Revision, d.Revision)
	}
	dataClick(t, p, "#data-reload")
	p.waitFor("the reloaded document", dataEditorIs("title", "edited in tab 1"), 10*time.Second)

	// A second tab on the same document sees the edits of the first tab and
	// of the API (on a voter) arrive live.
	q := e.newTab(t, p)
	e.open(t, q, "data?"+url.Values{"path": {notes}, "doc": {n1}}.Encode())
	q.waitFor("the second tab's editor", dataEditorIs("title", "edited in tab 1"), 10*time.Second)
	q.waitFor("the second tab's realtime", `document.getElementById('data-rt').dataset.state === 'ready'`, 10*time.Second)
	p.waitFor("the first tab's realtime", `document.getElementById('data-rt').dataset.state === 'ready'`, 10*time.Second)
	e.typeInto(t, p, "#data-editor", `{"title":"second edit","n":3}`)
	dataClick(t, p, "#data-save")
	q.waitFor("the first tab's edit in the second tab", dataEditorIs("title", "second edit"), 10*time.Second)
	viaAPI := dataPut(t, e, n1, map[string]any{"title": "from the API", "n": 4})
	for _, tab := range []*page{p, q} {
		tab.waitFor("the API's write, live", dataEditorIs("title", "from the API")+fmt.Sprintf(
			` && document.getElementById('data-revision').dataset.revision === %s`, js(fmt.Sprint(viaAPI.Revision))), 10*time.Second)
	}

	// A conflict: the editor holds unsaved edits while the server changes.
	e.typeInto(t, p, "#data-editor", `{"title":"mine"}`)
	theirs := dataPut(t, e, n1, map[string]any{"title": "theirs"})
	p.waitFor("the changed-on-the-server notice", fmt.Sprintf(`!document.getElementById('data-changed').hidden &&
		document.getElementById('data-changed').textContent.includes('revision %d')`, theirs.Revision), 10*time.Second)
	if !p.eval(dataEditorIs("title", "mine")) {
		t.Fatalf("the live change clobbered the unsaved edits\n%s", p.state())
	}
	dataClick(t, p, "#data-save")
	p.waitFor("both versions", `!document.getElementById('data-conflict').hidden &&
		JSON.parse(document.getElementById('data-conflict-mine').value).title === 'mine' &&
		JSON.parse(document.getElementById('data-conflict-theirs').value).title === 'theirs'`, 10*time.Second)
	if d := dataGet(t, e, n1, http.StatusOK); d.Data["title"] != "theirs" {
		t.Fatalf("the conflicting save was written: %v", d.Data)
	}
	e.shoot(t, p, "data-conflict")
	dataClick(t, p, "#data-overwrite")
	p.waitFor("the overwrite", `/Saved: revision \d+/.test(document.getElementById('data-msg').textContent) && document.getElementById('data-conflict').hidden`, 10*time.Second)
	if d := dataGet(t, e, n1, http.StatusOK); d.Data["title"] != "mine" || d.Revision <= theirs.Revision {
		t.Fatalf("after overwrite with mine the server has %+v", d)
	}
	q.waitFor("the overwrite in the second tab", dataEditorIs("title", "mine"), 10*time.Second)

	// Another conflict, resolved by taking the server's version (nothing is written).
	e.typeInto(t, q, "#data-editor", `{"title":"lost"}`)
	other := dataPut(t, e, n1, map[string]any{"title": "mine", "by": "api"})
	q.waitFor("the second tab's notice", `!document.getElementById('data-changed').hidden`, 10*time.Second)
	dataClick(t, q, "#data-save")
	dataClick(t, q, "#data-take-theirs")
	q.waitFor("their version in the editor", dataEditorIs("by", "api")+fmt.Sprintf(` && document.getElementById('data-conflict').hidden &&
		document.getElementById('data-revision').dataset.revision === %s`, js(fmt.Sprint(other.Revision))), 10*time.Second)
	if d := dataGet(t, e, n1, http.StatusOK); d.Revision != other.Revision {
		t.Fatalf("taking theirs wrote: revision %d -> %d", other.Revision, d.Revision)
	}

	// Create a document under the current collection (create-only).
	n2 := notes + "/n2"
	dataOpen(t, p, "data-new")
	e.typeInto(t, p, "#data-new-id", "n2")
	e.typeInto(t, p, "#data-new-json", `{"keep":1,"drop":"me"}`)
	dataClick(t, p, "#data-create")
	p.waitFor("the new document", fmt.Sprintf(`document.getElementById('data-doc-h').textContent === %s && %s`, js(n2),
		`!!document.querySelector('#data-children li[data-path=`+js(n2)+`]')`), 10*time.Second)
	if d := dataGet(t, e, n2, http.StatusOK); d.Data["keep"] != float64(1) || d.Data["drop"] != "me" {
		t.Fatalf("created %v", d.Data)
	}
	// Unsaved edits are not dropped silently when another document is opened.
	e.typeInto(t, p, "#data-editor", `{"title":"unsaved"}`)
	p.await("open n1", fmt.Sprintf(`document.querySelector('li[data-path=%s] .data-view').click(); true`, js(n1)))
	p.waitFor("the unsaved-edits question", `!!document.getElementById('data-discard') && document.activeElement.id === 'data-keep'`, 5*time.Second)
	e.key(t, p, "Enter")
	p.waitFor("the kept edits", `!document.getElementById('data-discard') && `+dataEditorIs("title", "unsaved"), 5*time.Second)
	dataClick(t, p, "#data-reload")
	p.waitFor("the reloaded document", dataEditorIs("drop", "me"), 10*time.Second)

	// Creating it again is refused (it exists): the page says so.
	e.typeInto(t, p, "#data-new-id", "n2")
	dataClick(t, p, "#data-create")
	p.waitFor("the exists message", `document.getElementById('data-new-msg').textContent.includes('exists already')`, 10*time.Second)

	// Delete a field.
	dataOpen(t, p, "data-fields-box")
	dataClick(t, p, `[data-field-delete="drop"]`)
	p.waitFor("the field's deletion", `!document.querySelector('[data-field-delete="drop"]') && /Deleted field drop/.test(document.getElementById('data-msg').textContent)`, 10*time.Second)
	if d := dataGet(t, e, n2, http.StatusOK); d.Data["keep"] != float64(1) || d.Data["drop"] != nil {
		t.Fatalf("after deleting drop the server has %v", d.Data)
	}

	// Delete the document, after an inline confirmation (No first).
	dataClick(t, p, "#data-delete")
	dataClick(t, p, "#data-delete-no")
	p.waitFor("the confirmation's dismissal", `document.getElementById('data-confirm').hidden`, 5*time.Second)
	dataGet(t, e, n2, http.StatusOK)
	dataClick(t, p, "#data-delete")
	dataClick(t, p, "#data-delete-yes")
	p.waitFor("the deletion", fmt.Sprintf(`document.getElementById('data-msg').textContent.includes('Deleted ' + %s) &&
		!document.querySelector('#data-children li[data-path=%s]')`, js(n2), js(n2)), 10*time.Second)
	dataGet(t, e, n2, http.StatusNotFound)

	// Stored markup is text: the editor and the query results show it literally.
	xss := `<img src=x onerror="window.__xss=1">`
	dataPut(t, e, notes+"/xss", map[string]any{"x": xss, "kind": "evil"})
	for i, rank := range []int{2, 3, 1} {
		dataPut(t, e, fmt.Sprintf("%s/q%d", notes, i+1), map[string]any{"kind": "q", "rank": rank})
	}
	// The tree follows the server: the new documents appear without a reload.
	p.waitFor("the new documents in the tree, live", fmt.Sprintf(`['xss', 'q1', 'q2', 'q3'].every(n => !!document.querySelector('#data-children li[data-path="' + %s + '/' + n + '"]'))`, js(notes)), 10*time.Second)

	// A query: kind == "q" (typed as text, not JSON), ordered by rank descending.
	dataOpen(t, p, "data-query")
	dataClick(t, p, "#data-q-add")
	e.typeInto(t, p, ".data-q-filter [name=field]", "kind")
	e.typeInto(t, p, ".data-q-filter [name=value]", "q")
	e.typeInto(t, p, "#data-q-order-field", "rank")
	p.await("order descending", `const s = document.getElementById('data-q-order-dir'); s.value = 'desc'; s.dispatchEvent(new Event('change')); true`)
	dataClick(t, p, "#data-q-run")
	want := []string{notes + "/q2", notes + "/q1", notes + "/q3"}
	wantJSON, _ := json.Marshal(want)
	p.waitFor("the query's results in order", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#data-q-results > li')].map(l => l.dataset.path)) === %s`, js(string(wantJSON))), 10*time.Second)
	p.await("show the results", `document.getElementById('data-q-msg').scrollIntoView({block: 'start'}); true`)
	e.shoot(t, p, "data-query")

	// Paging by the query's cursor: two, then the third.
	e.typeInto(t, p, "#data-q-limit", "2")
	dataClick(t, p, "#data-q-run")
	p.waitFor("the first page", `document.querySelectorAll('#data-q-results > li').length === 2 && !document.getElementById('data-q-next').hidden`, 10*time.Second)
	dataClick(t, p, "#data-q-next")
	p.waitFor("the second page appended", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#data-q-results > li')].map(l => l.dataset.path)) === %s`, js(string(wantJSON))), 10*time.Second)

	// A bad query: "in" needs an array; the server's error is shown.
	p.await("op in", `const s = document.querySelector('.data-q-filter [name=op]'); s.value = 'in'; s.dispatchEvent(new Event('change')); true`)
	dataClick(t, p, "#data-q-run")
	p.waitFor("the query's error", `(document.getElementById('data-q-error')?.textContent || '').includes('where[0].value')`, 10*time.Second)
	// A range filter on kind ordered by rank first: invalid_query, shown.
	p.await("op >", `const s = document.querySelector('.data-q-filter [name=op]'); s.value = '>'; s.dispatchEvent(new Event('change')); true`)
	dataClick(t, p, "#data-q-run")
	p.waitFor("the invalid_query error", `(document.getElementById('data-q-error')?.textContent || '').includes('invalid_query') &&
		document.querySelectorAll('#data-q-results > li').length === 0`, 10*time.Second)

	// The markup, by a query on kind == "evil" and in the editor.
	e.typeInto(t, p, ".data-q-filter [name=value]", "evil")
	p.await("op ==", `const s = document.querySelector('.data-q-filter [name=op]'); s.value = '=='; s.dispatchEvent(new Event('change')); true`)
	e.typeInto(t, p, "#data-q-order-field", "")
	dataClick(t, p, "#data-q-run")
	p.waitFor("the markup as text in the results", fmt.Sprintf(`[...document.querySelectorAll('#data-q-results pre')].some(pre => pre.textContent.includes(%s))`, js(`"x": "<img src=x onerror=\"window.__xss=1\">"`)), 10*time.Second)
	dataClick(t, p, fmt.Sprintf(`#data-q-results li[data-path=%s] button`, js(notes+"/xss")))
	p.waitFor("the markup in the editor", dataEditorIs("x", xss), 10*time.Second)
	if !p.eval(`window.__xss === undefined && !document.querySelector('#main img')`) {
		t.Fatalf("stored markup became an element or ran\n%s", p.state())
	}

	// The tree pages by 100: Load more brings the rest.
	var writes []map[string]any
	for i := 0; i < 105; i++ {
		writes = append(writes, map[string]any{"op": "set", "collection": fmt.Sprintf("many/d%03d", i), "data": map[string]any{"i": i}})
	}
	e.call(t, http.MethodPost, "/api/db/batch", e.proj.Headers(), map[string]any{"writes": writes}, http.StatusOK, nil)
	e.open(t, p, "data?path=many")
	p.waitFor("the first page of the tree", `document.querySelectorAll('#data-children > li').length === 100 && !document.getElementById('data-more').hidden`, 10*time.Second)
	dataClick(t, p, "#data-more")
	p.waitFor("the rest of the tree", `document.querySelectorAll('#data-children > li').length === 105 && document.getElementById('data-more').hidden &&
		document.querySelector('#data-children > li:last-child').dataset.path === 'many/d104'`, 10*time.Second)

	// Go to a document's path (typed, then Enter): it opens in the editor,
	// listed with its siblings.
	p.await("mark the page", `window.__openOld = document.querySelector('#main > section'); true`)
	e.typeInto(t, p, "#data-goto", n1)
	e.key(t, p, "Enter")
	p.waitFor("the document from the path bar", fmt.Sprintf(`document.querySelector('#main > section') !== window.__openOld &&
		document.getElementById('data-doc-h')?.textContent === %s && !!document.querySelector('#data-children li[data-path=%s]') && %s`,
		js(n1), js(n1), dataEditorIs("title", "mine")), 10*time.Second)
	// A path without a document is listed: users/<uid> holds notes only.
	e.typeInto(t, p, "#data-goto", "users/"+uid)
	e.key(t, p, "Enter")
	p.waitFor("the collection from the path bar", fmt.Sprintf(`!!document.querySelector('#data-children li[data-path=%s]') &&
		document.querySelector('#data-doc-h').textContent === 'Document'`, js(notes)), 10*time.Second)
	e.open(t, p, "data?"+url.Values{"path": {notes}, "doc": {n1}}.Encode())
	p.waitFor("the note", dataEditorIs("title", "mine"), 10*time.Second)
	e.shoot(t, p, "data")
	e.checkA11y(t, p)
}

// consoleRules walks the rules page: a rule set whose third read expression
// does not compile (the error shown at that input, nothing saved), the fix
// saved by keyboard, the test panel (allowed and denied, the deciding rule
// highlighted; a bad path), the JSON view's line of a parse error, and the
// indexes table.
func consoleRules(t *testing.T, e *consoleEnv) {
	p := e.tab
	type rule struct {
		Match string `json:"match"`
		Read  string `json:"read"`
		Write string `json:"write"`
	}
	var before struct{ Rules []rule }
	e.call(t, http.MethodGet, "/api/db/rules", e.proj.Headers(), nil, http.StatusOK, &before)

	e.open(t, p, "rules")
	p.waitFor("the saved rules in the form", fmt.Sprintf(`document.querySelectorAll('#rules-list .rules-rule').length === %d`, len(before.Rules)), 10*time.Second)

	// Three rules through the JSON view; the third read does not compile.
	bad := []rule{
		{"users/{uid}/**", "auth.uid == uid || auth.role == 'owner'", "auth.uid == uid || auth.role == 'owner'"},
		{"public/{doc}", "true", "auth.role == 'owner'"},
		{"**", "auth.role = 'owner'", "auth.role == 'owner'"},
	}
	body, _ := json.Marshal(map[string]any{"rules": bad})
	dataOpen(t, p, "rules-json-box")
	// A parse error first: its line is marked.
	p.await("broken JSON", `const j = document.getElementById('rules-json'); j.value = '{"rules": [\n  {"match": "a"},\n  {"match" "b"}\n]}'; j.dispatchEvent(new Event('input')); true`)
	dataClick(t, p, "#rules-json-apply")
	p.waitFor("the JSON error's line", `document.getElementById('rules-json-error')?.dataset.line === '3' && document.querySelector('#rules-gutter .rules-line-bad')?.dataset.line === '3'`, 5*time.Second)
	p.await("the rules as JSON", fmt.Sprintf(`const j = document.getElementById('rules-json'); j.value = %s; j.dispatchEvent(new Event('input')); true`, js(string(body))))
	dataClick(t, p, "#rules-json-save")
	field := `[data-field="rules[2].read"]`
	p.waitFor("the error at rules[2].read", fmt.Sprintf(`(() => {
		const el = document.querySelector('#rules-list ' + %s);
		if (!el || el.getAttribute('aria-invalid') !== 'true' || document.activeElement !== el) return false;
		const msg = document.getElementById((el.getAttribute('aria-describedby') || '').split(' ').pop());
		return !!msg && msg.textContent.includes('rules[2].read') && el.closest('.rules-rule').dataset.rule === '2';
	})()`, js(field)), 10*time.Second)
	if !p.eval(`!document.getElementById('rules-dirty').hidden`) {
		t.Errorf("the refused rules are not marked unsaved")
	}
	var after struct{ Rules []rule }
	e.call(t, http.MethodGet, "/api/db/rules", e.proj.Headers(), nil, http.StatusOK, &after)
	if fmt.Sprint(after.Rules) != fmt.Sprint(before.Rules) {
		t.Fatalf("the refused rules changed the rules in force: %v", after.Rules)
	}
	e.shoot(t, p, "rules-error")

	// Fix it in the form and save by keyboard alone.
	e.typeInto(t, p, field, "auth.role == 'owner'")
	if p.eval(`document.querySelector(` + js(field) + `).hasAttribute('aria-invalid')`) {
		t.Errorf("the field stays invalid after an edit")
	}
	e.tabTo(t, p, "#rules-save")
	e.key(t, p, "Enter")
	p.waitFor("the saved rules", `!!document.getElementById('rules-saved')`, 10*time.Second)
	if !p.eval(`document.getElementById('rules-dirty').hidden`) {
		t.Errorf("the saved rules are still marked unsaved")
	}
	good := append([]rule(nil), bad...)
	good[2].Read = "auth.role == 'owner'"
	e.call(t, http.MethodGet, "/api/db/rules", e.proj.Headers(), nil, http.StatusOK, &after)
	if fmt.Sprint(after.Rules) != fmt.Sprint(good) {
		t.Fatalf("the server has the rules %v, want %v", after.Rules, good)
	}

	// The test panel: an unauthenticated read of public/p1 is allowed by rule 2 (index 1).
	e.typeInto(t, p, "#rules-test-path", "public/p1")
	dataClick(t, p, "#rules-test-editor")
	p.waitFor("the allowed verdict", `document.getElementById('rules-verdict-badge')?.dataset.allowed === 'true' &&
		document.getElementById('rules-verdict-rule').dataset.rule === '1' &&
		document.querySelector('#rules-list .rules-rule.rules-decider')?.dataset.rule === '1'`, 10*time.Second)
	if got := p.awaitString("the verdict's caller", `document.getElementById('rules-verdict-auth').textContent`); got != "unauthenticated" {
		t.Errorf("caller shown %q", got)
	}

	// An unauthenticated write there is denied by the same rule (saved rules).
	p.await("op write", `const s = document.getElementById('rules-test-op'); s.value = 'write'; s.dispatchEvent(new Event('change')); true`)
	e.typeInto(t, p, "#rules-test-data", `{"a":1}`)
	dataClick(t, p, "#rules-test-saved")
	p.waitFor("the denied verdict", `document.getElementById('rules-verdict-badge')?.dataset.allowed === 'false' &&
		document.getElementById('rules-verdict-rule').dataset.rule === '1' &&
		document.getElementById('rules-verdict').textContent.includes('under the saved rules')`, 10*time.Second)

	// The owner (picked by email) may write it.
	e.typeInto(t, p, "#rules-test-email", e.ownerEmail)
	dataClick(t, p, "#rules-find")
	dataClick(t, p, fmt.Sprintf(`#rules-found button[data-user=%s]`, js(e.proj.OwnerID)))
	if got := p.awaitString("the picked user", `document.getElementById('rules-test-user').value`); got != e.proj.OwnerID {
		t.Fatalf("picked user %q, want %q", got, e.proj.OwnerID)
	}
	dataClick(t, p, "#rules-test-editor")
	p.waitFor("the owner's verdict", fmt.Sprintf(`document.getElementById('rules-verdict-badge')?.dataset.allowed === 'true' &&
		document.getElementById('rules-verdict-auth').textContent.startsWith(%s)`, js(e.proj.OwnerID)), 10*time.Second)
	e.shoot(t, p, "rules")

	// A bad path is the server's 400 on path, shown at the path input.
	e.typeInto(t, p, "#rules-test-path", "a//b")
	dataClick(t, p, "#rules-test-editor")
	p.waitFor("the path error", `document.getElementById('rules-test-path').getAttribute('aria-invalid') === 'true' &&
		document.getElementById('rules-verdict').textContent.includes('invalid_path')`, 10*time.Second)
	if p.eval(`!!document.querySelector('#rules-list .rules-rule.rules-decider')`) {
		t.Errorf("a rule stays marked as deciding after a refused test")
	}
	// An unknown user id is the server's 404 on userId, shown at that input.
	e.typeInto(t, p, "#rules-test-path", "public/p1")
	e.typeInto(t, p, "#rules-test-user", "no-such-user")
	dataClick(t, p, "#rules-test-editor")
	p.waitFor("the user id error", `document.getElementById('rules-test-user').getAttribute('aria-invalid') === 'true' &&
		document.activeElement.id === 'rules-test-user' && document.getElementById('rules-verdict').textContent.includes('not_found (userId)') &&
		!document.getElementById('rules-test-path').hasAttribute('aria-invalid')`, 10*time.Second)

	// The indexes: one declared through the API is listed with its state.
	e.call(t, http.MethodPut, "/api/db/indexes", e.proj.Headers(), map[string]any{"indexes": []any{
		map[string]any{"collection": "notes", "fields": []any{map[string]any{"field": "kind"}, map[string]any{"field": "rank", "direction": "desc"}}},
	}}, http.StatusOK, nil)
	dataClick(t, p, "#rules-index-refresh")
	p.waitFor("the index in the table", `[...document.querySelectorAll('#rules-index-table tbody tr')].some(tr =>
		tr.cells.length === 4 && tr.cells[0].textContent === 'notes' && tr.cells[2].textContent === 'kind asc, rank desc' &&
		['building', 'ready'].includes(tr.cells[3].querySelector('.badge')?.dataset.state))`, 10*time.Second)
	// A building index is polled until it is ready on this node.
	p.waitFor("the index ready", `[...document.querySelectorAll('#rules-index-table tbody tr')].some(tr =>
		tr.cells[0].textContent === 'notes' && tr.cells[3].querySelector('.badge')?.dataset.state === 'ready')`, 20*time.Second)

	e.checkA11y(t, p)
}
