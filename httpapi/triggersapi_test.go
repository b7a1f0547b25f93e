package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/httpapi"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/triggers"
)

// newTriggerEnv is newEnv on a node that lets webhooks reach 127.0.0.1 (but
// no other private address).
func newTriggerEnv(t *testing.T) *env {
	t.Helper()
	c := nodetest.Start(t, nodetest.Options{Voters: 1, AllowPrivateWebhooks: []string{"127.0.0.1"}})
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	e.user = e.mustRegister(t, e.p, "")
	e.other = e.mustRegister(t, e.p, "")
	return e
}

// trigCall sends a request to the triggers API of project p as tok.
func (e *env) trigCall(t testing.TB, p nodetest.Project, tok, method, target, body string) reply {
	t.Helper()
	h := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return e.mustSend(t, method, target, h, body)
}

// mustPutTrigger declares trigger name in project p; it answers the trigger.
func (e *env) mustPutTrigger(t testing.TB, p nodetest.Project, name, body string, wantStatus int) triggerView {
	t.Helper()
	r := e.trigCall(t, p, p.OwnerToken, http.MethodPut, "/api/triggers/"+name, body)
	if r.Status != wantStatus {
		t.Fatalf("PUT trigger %s: status %d, want %d: %.500s", name, r.Status, wantStatus, r.Body)
	}
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		t.Errorf("PUT trigger %s: X-Revision %q", name, r.Header.Get("X-Revision"))
	}
	var v triggerView
	mustDecode(t, r.Body, &v)
	return v
}

type triggerView struct {
	triggers.Definition
	Status triggers.Status `json:"status"`
}

// storedTrigger reads the stored definition of trigger name straight from
// the node's tree.
func (e *env) storedTrigger(t testing.TB, pid, name string) *triggers.Definition {
	t.Helper()
	doc, err := e.c.Nodes[0].Node.Store.Get(keys.Trigger(pid, name))
	if err != nil || doc == nil {
		t.Fatalf("stored trigger %s: %v (doc %v)", name, err, doc)
	}
	var d triggers.Definition
	mustDecode(t, doc.Data, &d)
	return &d
}

const hookURL = "http://127.0.0.1:9/hook" // allowed by newTriggerEnv; nothing listens

func TestTriggersAPIRefusals(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	k := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
	wh := func(extra string) string {
		return `{"match":"orders/{id}","action":{"webhook":{"url":"` + hookURL + `"` + extra + `}}}`
	}
	e.mustPutTrigger(t, e.p, "existing", wh(""), http.StatusCreated)
	noTrigger := func(name string) func(t *testing.T, e *env, v vars, _ reply) {
		return func(t *testing.T, e *env, v vars, _ reply) {
			t.Helper()
			if doc, err := e.c.Nodes[0].Node.Store.Get(keys.Trigger(e.p.ID, v.expand(name))); err != nil || doc != nil {
				t.Errorf("a refused PUT stored trigger %s: %v %v", v.expand(name), doc, err)
			}
		}
	}
	put := func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: "PUT", url: "/api/triggers/t-{rand}", headers: k, body: body, status: status, code: code, field: field, check: noTrigger("t-{rand}")}
	}
	e.run(t, []scenario{
		{name: "list", url: "/api/triggers", headers: k, status: 200},
		{name: "list as a user", as: "user", url: "/api/triggers", headers: k, status: 403, code: "forbidden"},
		{name: "list without a token", as: "none", url: "/api/triggers", headers: k, status: 401, code: "missing_token"},
		{name: "list without the key", url: "/api/triggers", status: 401, code: "missing_api_key"},
		{name: "list with a wrong key", url: "/api/triggers", headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "ebk_wrong"}, status: 401, code: "invalid_api_key"},
		{name: "list unknown parameter", url: "/api/triggers?all=1", headers: k, status: 400, code: "invalid_argument", field: "all"},
		{name: "list post", method: "POST", url: "/api/triggers", headers: k, body: wh(""), status: 405, code: "method_not_allowed"},
		{name: "patch one", method: "PATCH", url: "/api/triggers/existing", headers: k, body: wh(""), status: 405, code: "method_not_allowed"},
		{name: "post dead", method: "POST", url: "/api/triggers/existing/dead", headers: k, status: 405, code: "method_not_allowed"},
		{name: "get replay", url: "/api/triggers/existing/replay", headers: k, status: 405, code: "method_not_allowed"},

		{name: "get", url: "/api/triggers/existing", headers: k, status: 200, json: `{"name":"existing","match":"orders/{id}","on":["create","update","delete"]}`},
		{name: "get as a user", as: "user", url: "/api/triggers/existing", headers: k, status: 403, code: "forbidden"},
		{name: "get unknown", url: "/api/triggers/nosuch", headers: k, status: 404, code: "not_found"},
		{name: "get bad name", url: "/api/triggers/-x", headers: k, status: 400, code: "invalid_argument", field: "name"},
		{name: "get long name", url: "/api/triggers/" + strings.Repeat("n", 65), headers: k, status: 400, code: "invalid_argument", field: "name"},
		{name: "get unknown parameter", url: "/api/triggers/existing?consistency=local", headers: k, status: 400, code: "invalid_argument", field: "consistency"},
		{name: "delete unknown", method: "DELETE", url: "/api/triggers/nosuch", headers: k, status: 404, code: "not_found"},
		{name: "delete as a user", as: "user", method: "DELETE", url: "/api/triggers/existing", headers: k, status: 403, code: "forbidden"},
		{name: "delete bad name", method: "DELETE", url: "/api/triggers/a.b", headers: k, status: 400, code: "invalid_argument", field: "name"},

		{name: "put as a user", as: "user", method: "PUT", url: "/api/triggers/t-{rand}", headers: k, body: wh(""), status: 403, code: "forbidden", check: noTrigger("t-{rand}")},
		{name: "put as a user (no body read)", as: "user", method: "PUT", url: "/api/triggers/t-{rand}", headers: k, body: `not json`, status: 403, code: "forbidden"},
		put("put bad JSON", `{"match":`, 400, "invalid_json", ""),
		put("put an array", `[]`, 400, "invalid_argument", ""),
		put("put unknown member", `{"match":"a/{id}","retries":3,"action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "retries"),
		put("put unknown nested member", wh(`,"retries":3`), 400, "invalid_argument", "action.webhook.retries"),
		put("put unknown action", `{"match":"a/{id}","action":{"email":{}}}`, 400, "invalid_argument", "action.email"),
		put("put name member", `{"name":"x","match":"a/{id}","action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "name"),
		put("put createdAt", `{"createdAt":"2026-01-01T00:00:00Z","match":"a/{id}","action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "createdAt"),
		put("put secretHint", wh(`,"secretHint":"abcd"`), 400, "invalid_argument", "action.webhook.secretHint"),
		put("put match of the wrong type", `{"match":5,"action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "match"),
		put("put without match", `{"action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "match"),
		put("put bad match", `{"match":"a/**/b","action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "match"),
		put("put bad on", `{"match":"a/{id}","on":["explode"],"action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "on[0]"),
		put("put bad condition", `{"match":"a/{id}","condition":"after.x ==","action":{"webhook":{"url":"`+hookURL+`"}}}`, 400, "invalid_argument", "condition"),
		put("put no action", `{"match":"a/{id}","action":{}}`, 400, "invalid_argument", "action"),
		put("put two actions", `{"match":"a/{id}","action":{"webhook":{"url":"`+hookURL+`"},"push":{"to":"project","title":"t"}}}`, 400, "invalid_argument", "action"),
		put("put ftp URL", `{"match":"a/{id}","action":{"webhook":{"url":"ftp://example.com/x"}}}`, 400, "invalid_argument", "action.webhook.url"),
		put("put URL with user info", `{"match":"a/{id}","action":{"webhook":{"url":"https://u:p@example.com/x"}}}`, 400, "invalid_argument", "action.webhook.url"),
		put("put private URL", `{"match":"a/{id}","action":{"webhook":{"url":"http://10.1.2.3/x"}}}`, 400, "url_not_allowed", "action.webhook.url"),
		put("put loopback v6 URL", `{"match":"a/{id}","action":{"webhook":{"url":"http://[::1]:8080/x"}}}`, 400, "url_not_allowed", "action.webhook.url"),
		put("put short secret", wh(`,"secret":"short"`), 400, "invalid_argument", "action.webhook.secret"),
		put("put sealed-looking secret", wh(`,"secret":"sealed:abcdefghijklmnopqrstuvwxyz"`), 400, "invalid_argument", "action.webhook.secret"),
		put("put forbidden header", wh(`,"headers":{"Content-Type":"text/plain"}`), 400, "invalid_argument", ""),
		put("put push without title", `{"match":"a/{id}","action":{"push":{"to":"project","body":"b"}}}`, 400, "invalid_argument", "action.push.title"),
		put("put push to nobody", `{"match":"a/{id}","action":{"push":{"to":"everyone","title":"t"}}}`, 400, "invalid_argument", "action.push.to"),
		put("put write bad op", `{"match":"a/{id}","action":{"write":{"op":"explode","collection":"b/x"}}}`, 400, "invalid_argument", "action.write.op"),
		put("put write without collection", `{"match":"a/{id}","action":{"write":{"op":"delete"}}}`, 400, "invalid_argument", "action.write.collection"),
		{name: "put without JSON", method: "PUT", url: "/api/triggers/t-{rand}", headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}", "Content-Type": "text/plain"}, body: wh(""), status: 415, code: "unsupported_media_type"},
		{name: "put bad name", method: "PUT", url: "/api/triggers/_x", headers: k, body: wh(""), status: 400, code: "invalid_argument", field: "name"},

		{name: "dead unknown", url: "/api/triggers/nosuch/dead", headers: k, status: 404, code: "not_found"},
		{name: "dead as a user", as: "user", url: "/api/triggers/existing/dead", headers: k, status: 403, code: "forbidden"},
		{name: "dead limit 0", url: "/api/triggers/existing/dead?limit=0", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "dead limit 1001", url: "/api/triggers/existing/dead?limit=1001", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "dead limit x", url: "/api/triggers/existing/dead?limit=x", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "dead bad pageToken", url: "/api/triggers/existing/dead?pageToken=zz", headers: k, status: 400, code: "invalid_argument", field: "pageToken"},
		{name: "dead unknown parameter", url: "/api/triggers/existing/dead?cursor=1", headers: k, status: 400, code: "invalid_argument", field: "cursor"},
		{name: "dead empty", url: "/api/triggers/existing/dead", headers: k, status: 200, json: `{"deadLetters":[]}`},

		{name: "replay unknown trigger", method: "POST", url: "/api/triggers/nosuch/replay", headers: k, status: 404, code: "not_found"},
		{name: "replay as a user", as: "user", method: "POST", url: "/api/triggers/existing/replay", headers: k, status: 403, code: "forbidden"},
		{name: "replay bad JSON", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"ids":`, status: 400, code: "invalid_json"},
		{name: "replay unknown member", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"all":true}`, status: 400, code: "invalid_argument", field: "all"},
		{name: "replay ids not an array", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"ids":"x"}`, status: 400, code: "invalid_argument", field: "ids"},
		{name: "replay unknown id", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"ids":["00000000000000000001-0123456789abcdef"]}`, status: 404, code: "not_found", field: "ids[0]"},
		{name: "replay malformed id", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"ids":["../../x"]}`, status: 404, code: "not_found", field: "ids[0]"},
		{name: "replay nothing", method: "POST", url: "/api/triggers/existing/replay", headers: k, status: 200, json: `{"replayed":0,"revision":0}`},
		{name: "replay nothing with an empty list", method: "POST", url: "/api/triggers/existing/replay", headers: k, body: `{"ids":[]}`, status: 200, json: `{"replayed":0,"revision":0}`},
	})
}

// TestTriggersAPIPrivateURL: 127.0.0.1 is allowed by the operator's flag,
// another loopback address and a private one are not.
func TestTriggersAPIPrivateURL(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	v := e.mustPutTrigger(t, e.p, "local", `{"match":"a/{id}","action":{"webhook":{"url":"http://127.0.0.1:8080/x"}}}`, http.StatusCreated)
	if v.Action.Webhook == nil || v.Action.Webhook.URL != "http://127.0.0.1:8080/x" {
		t.Fatalf("answer %+v", v)
	}
	for _, u := range []string{"http://127.0.0.2/x", "http://192.168.1.10/x", "http://localhost.invalid./x"} {
		r := e.trigCall(t, e.p, e.p.OwnerToken, http.MethodPut, "/api/triggers/private", `{"match":"a/{id}","action":{"webhook":{"url":"`+u+`"}}}`)
		checkError(t, r, http.StatusBadRequest, "url_not_allowed", "action.webhook.url")
		if !strings.Contains(string(r.Body), "--allow-private-webhooks") {
			t.Errorf("%s: the refusal does not name the flag: %s", u, r.Body)
		}
	}
}

// TestTriggersAPISecret: a secret made by the server is answered once, kept
// by a replacement without one, replaced by one sent, and stored sealed.
func TestTriggersAPISecret(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	p := e.p
	body := func(url, extra string) string {
		return `{"match":"orders/{id}","on":["create"],"action":{"webhook":{"url":"` + url + `"` + extra + `}}}`
	}
	made := e.mustPutTrigger(t, p, "hook", body(hookURL, ""), http.StatusCreated)
	wh := made.Action.Webhook
	if wh == nil || !strings.HasPrefix(wh.Secret, "whsec_") || len(wh.Secret) != len("whsec_")+43 || wh.SecretHint != wh.Secret[len(wh.Secret)-4:] {
		t.Fatalf("made secret: %+v", wh)
	}
	if made.Name != "hook" || made.CreatedAt == "" || made.UpdatedAt != made.CreatedAt || made.Status.Pending != 0 || made.Status.DeadLetters != 0 {
		t.Errorf("created trigger %+v", made)
	}
	stored := e.storedTrigger(t, p.ID, "hook")
	sealed := stored.Action.Webhook.Secret
	if !strings.HasPrefix(sealed, "sealed:") || strings.Contains(sealed, wh.Secret[6:]) {
		t.Errorf("stored secret %q is not sealed", sealed)
	}

	r := e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/hook", "")
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), wh.Secret) || strings.Contains(string(r.Body), "sealed:") {
		t.Fatalf("GET shows the secret: %d %s", r.Status, r.Body)
	}
	var got triggerView
	mustDecode(t, r.Body, &got)
	if got.Action.Webhook.SecretHint != wh.SecretHint || got.Action.Webhook.Secret != "" {
		t.Errorf("GET webhook %+v, want hint %q", got.Action.Webhook, wh.SecretHint)
	}

	// Replaced without a secret: kept, not shown; createdAt kept.
	kept := e.mustPutTrigger(t, p, "hook", body("http://127.0.0.1:10/other", ""), http.StatusOK)
	if kept.Action.Webhook.Secret != "" || kept.Action.Webhook.SecretHint != wh.SecretHint || kept.CreatedAt != made.CreatedAt || kept.UpdatedAt == made.UpdatedAt {
		t.Errorf("replaced: %+v (made %+v)", kept, made)
	}
	if s := e.storedTrigger(t, p.ID, "hook").Action.Webhook.Secret; s != sealed {
		t.Errorf("a replacement without a secret changed the stored one: %q, was %q", s, sealed)
	}

	// Sent: answered, and the new one is stored.
	const mine = "my-own-secret-0123456789"
	sent := e.mustPutTrigger(t, p, "hook", body(hookURL, `,"secret":"`+mine+`"`), http.StatusOK)
	if sent.Action.Webhook.Secret != mine || sent.Action.Webhook.SecretHint != "6789" {
		t.Errorf("sent secret answered as %+v", sent.Action.Webhook)
	}
	if s := e.storedTrigger(t, p.ID, "hook").Action.Webhook.Secret; s == sealed || !strings.HasPrefix(s, "sealed:") {
		t.Errorf("stored secret after sending one: %q", s)
	}

	// A push trigger has no secret; the list is sorted by name.
	e.mustPutTrigger(t, p, "a-push", `{"match":"orders/{id}","action":{"push":{"to":"project","title":"New order {{ params.id }}"}}}`, http.StatusCreated)
	r = e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers", "")
	var list struct{ Triggers []triggerView }
	mustDecode(t, r.Body, &list)
	if r.Status != http.StatusOK || len(list.Triggers) != 2 || list.Triggers[0].Name != "a-push" || list.Triggers[1].Name != "hook" {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), mine) {
		t.Errorf("the list shows the secret: %s", r.Body)
	}
}

// TestTriggersAPITooMany: the 101st trigger of a project is refused; a
// replacement is not a new one, and a deletion makes room.
func TestTriggersAPITooMany(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	body := `{"match":"a/{id}","action":{"write":{"op":"increment","collection":"counts/all","field":"n","by":1}}}`
	for i := range triggers.MaxTriggers {
		e.mustPutTrigger(t, e.p, fmt.Sprintf("t%03d", i), body, http.StatusCreated)
	}
	r := e.trigCall(t, e.p, e.p.OwnerToken, http.MethodPut, "/api/triggers/one-more", body)
	checkError(t, r, http.StatusConflict, "too_many_triggers", "")
	e.mustPutTrigger(t, e.p, "t000", body, http.StatusOK)
	r = e.trigCall(t, e.p, e.p.OwnerToken, http.MethodDelete, "/api/triggers/t001", "")
	if r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	e.mustPutTrigger(t, e.p, "one-more", body, http.StatusCreated)
}

// deadRecord writes a dead letter of trigger name straight into the tree,
// as the runner would, and returns its id.
func (e *env) deadRecord(t *testing.T, pid, name, path string, rev uint64) string {
	t.Helper()
	d := triggers.Dead{Parked: triggers.Parked{
		Payload: triggers.Payload{ID: fmt.Sprintf("%s:%d:%s", name, rev, path), Trigger: name, Project: pid, Revision: rev, Path: path,
			Type: triggers.TypeCreate, Before: json.RawMessage("null"), After: json.RawMessage(`{"n":1}`), Time: time.Now().UTC().Format(time.RFC3339Nano)},
		Attempts: 7, FirstAttemptAt: time.Now().Add(-time.Hour).UnixNano(), LastError: "503 Service Unavailable"},
		DeadAt: time.Now().UTC().Format(time.RFC3339)}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	id := keys.TriggerDeadKey(path, rev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.c.Nodes[0].Node.Store.Txn(ctx, &raftstore.Txn{Time: time.Now().UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerDeadDir(pid, name)) + id, Data: data}}})
	if err != nil || !res.OK() {
		t.Fatalf("write a dead letter: %v %+v", err, res)
	}
	return id
}

// TestTriggersAPIDeadLettersAndReplay: dead letters are listed in pages,
// replay moves them back to the queue (attempts reset), and deleting the
// trigger removes every record of it.
func TestTriggersAPIDeadLettersAndReplay(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	p := e.p
	// Disabled: the runner leaves the queue alone, so what replay put there stays.
	e.mustPutTrigger(t, p, "hook", `{"match":"orders/{id}","disabled":true,"action":{"webhook":{"url":"`+hookURL+`"}}}`, http.StatusCreated)
	ids := []string{
		e.deadRecord(t, p.ID, "hook", "orders/a", 5),
		e.deadRecord(t, p.ID, "hook", "orders/b", 6),
		e.deadRecord(t, p.ID, "hook", "orders/a", 7),
	}
	r := e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/hook/dead?limit=2", "")
	var page struct {
		DeadLetters []struct {
			ID       string
			Path     string
			Revision uint64
			Attempts int
		}
		NextPageToken string
	}
	mustDecode(t, r.Body, &page)
	if r.Status != http.StatusOK || len(page.DeadLetters) != 2 || page.DeadLetters[0].ID != ids[0] || page.DeadLetters[1].ID != ids[1] ||
		page.DeadLetters[0].Path != "orders/a" || page.DeadLetters[0].Revision != 5 || page.DeadLetters[0].Attempts != 7 || page.NextPageToken != ids[1] {
		t.Fatalf("first page: %d %s", r.Status, r.Body)
	}
	r = e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/hook/dead?limit=2&pageToken="+page.NextPageToken, "")
	page.NextPageToken = ""
	mustDecode(t, r.Body, &page)
	if r.Status != http.StatusOK || len(page.DeadLetters) != 1 || page.DeadLetters[0].ID != ids[2] || page.NextPageToken != "" {
		t.Fatalf("second page: %d %s", r.Status, r.Body)
	}
	v := e.mustGetTrigger(t, p, "hook")
	if v.Status.DeadLetters != 3 || v.Status.Pending != 0 {
		t.Errorf("status before replay: %+v", v.Status)
	}

	// One id, then one known and one unknown: the second call moves nothing.
	r = e.trigCall(t, p, p.OwnerToken, http.MethodPost, "/api/triggers/hook/replay", `{"ids":["`+ids[1]+`"]}`)
	var rep struct {
		Replayed int
		Revision uint64
	}
	mustDecode(t, r.Body, &rep)
	if r.Status != http.StatusOK || rep.Replayed != 1 || rep.Revision == 0 || r.Header.Get("X-Revision") != strconv.FormatUint(rep.Revision, 10) {
		t.Fatalf("replay one: %d %s", r.Status, r.Body)
	}
	r = e.trigCall(t, p, p.OwnerToken, http.MethodPost, "/api/triggers/hook/replay", `{"ids":["`+ids[0]+`","`+ids[1]+`"]}`)
	checkError(t, r, http.StatusNotFound, "not_found", "ids[1]")
	r = e.trigCall(t, p, p.OwnerToken, http.MethodPost, "/api/triggers/hook/replay", `{"ids":["`+ids[0]+`","`+ids[0]+`"]}`)
	checkError(t, r, http.StatusBadRequest, "invalid_argument", "ids[1]")
	queued := e.queued(t, p.ID, "hook")
	if len(queued) != 1 || queued[0].Path != "orders/b" || queued[0].Revision != 6 || queued[0].Attempts != 0 || queued[0].FirstAttemptAt != 0 || queued[0].ID != "hook:6:orders/b" {
		t.Fatalf("queue after replaying one: %+v", queued)
	}

	// No body: all the rest.
	r = e.trigCall(t, p, p.OwnerToken, http.MethodPost, "/api/triggers/hook/replay", "")
	mustDecode(t, r.Body, &rep)
	if r.Status != http.StatusOK || rep.Replayed != 2 {
		t.Fatalf("replay all: %d %s", r.Status, r.Body)
	}
	if q := e.queued(t, p.ID, "hook"); len(q) != 3 {
		t.Errorf("queue after replaying all: %+v", q)
	}
	v = e.mustGetTrigger(t, p, "hook")
	if v.Status.DeadLetters != 0 || v.Status.Pending != 3 {
		t.Errorf("status after replay: %+v", v.Status)
	}

	// Delete: everything goes, and the name is free again.
	e.deadRecord(t, p.ID, "hook", "orders/c", 9)
	r = e.trigCall(t, p, p.OwnerToken, http.MethodDelete, "/api/triggers/hook", "")
	var del struct {
		Deleted  bool
		Revision uint64
	}
	mustDecode(t, r.Body, &del)
	if r.Status != http.StatusOK || !del.Deleted || del.Revision == 0 || r.Header.Get("X-Revision") != strconv.FormatUint(del.Revision, 10) {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	st := e.c.Nodes[0].Node.Store
	if err := st.WaitApplied(context.Background(), del.Revision); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{keys.Trigger(p.ID, "hook"), keys.TriggerIndex(p.ID, "hook"), keys.TriggerState(p.ID, "hook"),
		keys.Under(keys.TriggerQueueDir(p.ID, "hook")), keys.Under(keys.TriggerDeadDir(p.ID, "hook"))} {
		if n, err := st.CountPrefix(prefix); err != nil || n != 0 {
			t.Errorf("after delete, %d records under %s (%v)", n, prefix, err)
		}
	}
	r = e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/hook", "")
	checkError(t, r, http.StatusNotFound, "not_found", "")
	r = e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/hook/dead", "")
	checkError(t, r, http.StatusNotFound, "not_found", "")
}

func (e *env) mustGetTrigger(t testing.TB, p nodetest.Project, name string) triggerView {
	t.Helper()
	r := e.trigCall(t, p, p.OwnerToken, http.MethodGet, "/api/triggers/"+name, "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET trigger %s: %d %s", name, r.Status, r.Body)
	}
	var v triggerView
	mustDecode(t, r.Body, &v)
	return v
}

// queued reads trigger name's parked events from the tree.
func (e *env) queued(t testing.TB, pid, name string) []triggers.Parked {
	t.Helper()
	docs, _, err := e.c.Nodes[0].Node.Store.List(keys.TriggerQueueDir(pid, name), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]triggers.Parked, 0, len(docs))
	for _, d := range docs {
		var pk triggers.Parked
		mustDecode(t, d.Data, &pk)
		if keys.Base(d.Path) != keys.TriggerQueueKey(pk.Path, pk.Revision) {
			t.Errorf("parked event %s is not at its key", d.Path)
		}
		out = append(out, pk)
	}
	return out
}

// TestTriggersAPI_OwnerCheckedAtCommit: a trigger write is judged where it
// commits. An owner whose token a node resolved before the owner was
// demoted (a node that has not applied the demotion yet) is refused 403 at
// the commit of a put, a delete and a replay, and nothing is written.
func TestTriggersAPI_OwnerCheckedAtCommit(t *testing.T) {
	t.Parallel()
	e := newTriggerEnv(t)
	n := e.c.Nodes[0].Node
	acc := e.user
	authAs := func(tok, body string) reply {
		t.Helper()
		return e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + tok}, body)
	}
	if r := authAs(e.p.OwnerToken, setRoleBody(acc.ID, "owner")); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	p, err := n.Accounts.Authenticate(acc.Token)
	if err != nil || p.Role != "owner" {
		t.Fatalf("Authenticate after the promotion: %+v, %v", p, err)
	}
	api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store, Triggers: n.Triggers,
		Accounts: staleOwner{Service: n.Accounts, tok: acc.Token, p: p}})
	if err != nil {
		t.Fatal(err)
	}
	stale := httptest.NewServer(api)
	t.Cleanup(stale.Close)
	node := e.base
	body := `{"match":"orders/{id}","action":{"webhook":{"url":"` + hookURL + `"}}}`

	e.base = stale.URL
	if r := e.trigCall(t, e.p, acc.Token, http.MethodPut, "/api/triggers/kept", body); r.Status != http.StatusCreated {
		t.Fatalf("put as an owner: %d %s", r.Status, r.Body)
	}
	deadKey := keys.TriggerDeadKey("orders/o1", 7)
	deadPath := keys.Under(keys.TriggerDeadDir(e.p.ID, "kept")) + deadKey
	dead, _ := json.Marshal(triggers.Dead{Parked: triggers.Parked{Payload: triggers.Payload{Trigger: "kept", Project: e.p.ID, Revision: 7, Path: "orders/o1", Type: triggers.TypeCreate}}, DeadAt: "2026-11-27T12:00:00Z"})
	if res, err := n.Store.Txn(context.Background(), &raftstore.Txn{Time: time.Now().UnixNano(), Ops: []raftstore.Op{{Kind: raftstore.OpPut, Path: deadPath, Data: dead}}}); err != nil || !res.OK() {
		t.Fatalf("write a dead letter: %+v, %v", res, err)
	}
	e.base = node
	if r := authAs(e.p.OwnerToken, setRoleBody(acc.ID, "user")); r.Status != http.StatusOK {
		t.Fatalf("demote: %d %s", r.Status, r.Body)
	}
	e.base = stale.URL
	checkError(t, e.trigCall(t, e.p, acc.Token, http.MethodPut, "/api/triggers/late", body), http.StatusForbidden, "forbidden", "")
	checkError(t, e.trigCall(t, e.p, acc.Token, http.MethodPut, "/api/triggers/kept", strings.Replace(body, "orders", "carts", 1)), http.StatusForbidden, "forbidden", "")
	checkError(t, e.trigCall(t, e.p, acc.Token, http.MethodDelete, "/api/triggers/kept", ""), http.StatusForbidden, "forbidden", "")
	checkError(t, e.trigCall(t, e.p, acc.Token, http.MethodPost, "/api/triggers/kept/replay", `{}`), http.StatusForbidden, "forbidden", "")

	if doc, err := n.Store.Get(keys.Trigger(e.p.ID, "late")); err != nil || doc != nil {
		t.Errorf("the refused put was stored: %v, %v", doc, err)
	}
	if doc, err := n.Store.Get(keys.TriggerIndex(e.p.ID, "late")); err != nil || doc != nil {
		t.Errorf("the refused put's index entry was stored: %v, %v", doc, err)
	}
	if d := e.storedTrigger(t, e.p.ID, "kept"); d.Match != "orders/{id}" {
		t.Errorf("the refused replace changed the trigger: match %q", d.Match)
	}
	if doc, err := n.Store.Get(deadPath); err != nil || doc == nil {
		t.Errorf("the refused replay moved the dead letter: %v, %v", doc, err)
	}
}
