package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

type keyInfo struct {
	ID, Name, CreatedAt, Prefix, Key string
}

// keyCall sends a request to the keys API of project p as tok.
func (e *env) keyCall(t *testing.T, p nodetest.Project, tok, method, target, body string) reply {
	t.Helper()
	h := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return e.mustSend(t, method, target, h, body)
}

func (e *env) listKeys(t *testing.T, p nodetest.Project) []keyInfo {
	t.Helper()
	r := e.keyCall(t, p, p.OwnerToken, http.MethodGet, "/api/keys", "")
	if r.Status != http.StatusOK {
		t.Fatalf("list keys: %d %s", r.Status, r.Body)
	}
	var out struct{ Keys []keyInfo }
	mustDecode(t, r.Body, &out)
	return out.Keys
}

func TestKeysAPIRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
	keysUnchanged := func(t *testing.T, e *env, v vars, _ reply) {
		t.Helper()
		if ks := e.listKeys(t, e.p); len(ks) != 1 || ks[0].ID != "default" {
			t.Errorf("keys after a refusal: %+v", ks)
		}
	}
	e.run(t, []scenario{
		{name: "list", url: "/api/keys", headers: k, status: 200, json: `{"keys":[{"id":"default","name":"default","prefix":"ebk_"}]}`},
		{name: "list as a user", as: "user", url: "/api/keys", headers: k, status: 403, code: "forbidden"},
		{name: "list without a token", as: "none", url: "/api/keys", headers: k, status: 401, code: "missing_token"},
		{name: "list with a wrong key", url: "/api/keys", headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "ebk_wrong"}, status: 401, code: "invalid_api_key"},
		{name: "list unknown parameter", url: "/api/keys?all=1", headers: k, status: 400, code: "invalid_argument", field: "all"},
		{name: "put", method: "PUT", url: "/api/keys", headers: k, body: `{}`, status: 405, code: "method_not_allowed"},
		{name: "create as a user", as: "user", method: "POST", url: "/api/keys", headers: k, body: `{"name":"x"}`, status: 403, code: "forbidden", check: keysUnchanged},
		{name: "create without a name", method: "POST", url: "/api/keys", headers: k, body: `{}`, status: 400, code: "invalid_argument", field: "name", check: keysUnchanged},
		{name: "create with a blank name", method: "POST", url: "/api/keys", headers: k, body: `{"name":"   "}`, status: 400, code: "invalid_argument", field: "name", check: keysUnchanged},
		{name: "create with a long name", method: "POST", url: "/api/keys", headers: k, body: `{"name":"` + strings.Repeat("n", 101) + `"}`, status: 400, code: "invalid_argument", field: "name", check: keysUnchanged},
		{name: "create with a number name", method: "POST", url: "/api/keys", headers: k, body: `{"name":5}`, status: 400, code: "invalid_argument", field: "name", check: keysUnchanged},
		{name: "create without JSON", method: "POST", url: "/api/keys", headers: map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}", "Content-Type": "text/plain"}, body: `{"name":"x"}`, status: 415, code: "unsupported_media_type", check: keysUnchanged},
		{name: "delete the last key", method: "DELETE", url: "/api/keys/default", headers: k, status: 409, code: "last_key", field: "id", check: keysUnchanged},
		{name: "delete unknown", method: "DELETE", url: "/api/keys/nosuchkey", headers: k, status: 404, code: "not_found", field: "id", check: keysUnchanged},
		{name: "delete as a user", as: "user", method: "DELETE", url: "/api/keys/default", headers: k, status: 403, code: "forbidden", check: keysUnchanged},
		{name: "get one", url: "/api/keys/default", headers: k, status: 405, code: "method_not_allowed"},
	})
}

// TestKeysAPIRotation: create a key, use it, delete the original, the
// original fails and the new one works; the last one cannot go.
func TestKeysAPIRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.c.CreateProject(0) // its own project: the env's key must stay
	r := e.keyCall(t, p, p.OwnerToken, http.MethodPost, "/api/keys", `{"name":"mobile 2026"}`)
	if r.Status != http.StatusCreated || r.Header.Get("X-Revision") == "" {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var k keyInfo
	mustDecode(t, r.Body, &k)
	if !strings.HasPrefix(k.Key, "ebk_") || k.Name != "mobile 2026" || !strings.HasPrefix(k.Key, k.Prefix) || k.ID == "" {
		t.Fatalf("created %+v", k)
	}
	ks := e.listKeys(t, p)
	if len(ks) != 2 || ks[1].ID != k.ID || ks[1].Key != "" || strings.Contains(fmt.Sprint(ks), k.Key) {
		t.Fatalf("list = %+v", ks)
	}
	np := p
	np.APIKey = k.Key
	if st := e.keyCall(t, np, p.OwnerToken, http.MethodGet, "/api/keys", "").Status; st != http.StatusOK {
		t.Fatalf("the new key: %d", st)
	}
	if r := e.keyCall(t, np, p.OwnerToken, http.MethodDelete, "/api/keys/default", ""); r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
		t.Fatalf("delete default: %d %s", r.Status, r.Body)
	}
	checkError(t, e.keyCall(t, p, p.OwnerToken, http.MethodGet, "/api/keys", ""), http.StatusUnauthorized, "invalid_api_key", "")
	checkError(t, e.keyCall(t, np, p.OwnerToken, http.MethodDelete, "/api/keys/"+k.ID, ""), http.StatusConflict, "last_key", "id")
	if ks := e.listKeys(t, np); len(ks) != 1 || ks[0].ID != k.ID {
		t.Fatalf("after rotation: %+v", ks)
	}
}
