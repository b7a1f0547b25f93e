package process

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// adminCall sends method path on p with the project's id and key (key
// overrides the project's when set) and, when tok is set, a bearer token;
// it fails the test unless the answer has status and (when code is set)
// that error code, and decodes the answer into out (when not nil).
func adminCall(t *testing.T, c *cluster, p *proc, pr project, key, tok, method, path string, extra map[string]string, body any, status int, code string, out any) {
	t.Helper()
	h := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	if key != "" {
		h["X-API-Key"] = key
	}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	for k, v := range extra {
		h[k] = v
	}
	r, err := doJSON(c.ctx, httpClient, 20*time.Second, method, p.url()+path, h, body)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, p.id, err)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	if r.status != status || (code != "" && e.Error.Code != code) {
		t.Fatalf("%s %s %v on %s: %s; want %d %s", method, path, body, p.id, r, status, code)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s on %s: decode %s: %v", method, path, p.id, r, err)
		}
	}
}

// TestAdminAcrossProcesses runs three real edgebase processes: a user's
// sessions show the client that opened them, wherever it signed in, and a
// revoked one fails on every node on the next request; an owner's disable
// through one node makes the user's token fail on every node as soon as
// the call returned and its logins answer account_disabled, until enabled;
// a rotated-out API key fails on every node as soon as the delete returned.
func TestAdminAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	t0 := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	pr := c.mustCreateProject(n1)

	const email, password = "admin-victim@example.com", "a long process password"
	var reg struct {
		Token string
		User  struct{ ID string }
	}
	adminCall(t, c, n2, pr, "", "", http.MethodPost, "/api/auth", nil,
		map[string]string{"action": "register", "email": email, "password": password}, http.StatusCreated, "", &reg)
	login := func(p *proc, status int, code string) string {
		t.Helper()
		var out struct{ Token string }
		adminCall(t, c, p, pr, "", "", http.MethodPost, "/api/auth", map[string]string{"User-Agent": "AdminE2E/" + p.id},
			map[string]string{"action": "login", "email": email, "password": password}, status, code, &out)
		return out.Token
	}
	tok3 := login(n3, http.StatusOK, "")
	me := func(p *proc, tok string, status int) {
		t.Helper()
		adminCall(t, c, p, pr, "", tok, http.MethodPost, "/api/auth", nil, map[string]string{"action": "me"}, status, "", nil)
	}

	// list-sessions through n1 shows both sessions, the login's with the
	// user agent it sent to n3.
	var ls struct {
		Sessions []struct {
			ID, Address, UserAgent string
			Current                bool
		}
	}
	adminCall(t, c, n1, pr, "", tok3, http.MethodPost, "/api/auth", nil, map[string]string{"action": "list-sessions"}, http.StatusOK, "", &ls)
	if len(ls.Sessions) != 2 {
		t.Fatalf("list-sessions: %+v", ls)
	}
	var regSession string
	for _, s := range ls.Sessions {
		switch {
		case s.Current && (s.UserAgent != "AdminE2E/n3" || s.Address != "127.0.0.1"):
			t.Fatalf("the login's session: %+v", s)
		case !s.Current:
			regSession = s.ID
		}
	}
	adminCall(t, c, n2, pr, "", tok3, http.MethodPost, "/api/auth", nil,
		map[string]string{"action": "revoke-session", "sessionId": regSession}, http.StatusOK, "", nil)
	for _, p := range c.nodes {
		me(p, reg.Token, http.StatusUnauthorized)
		me(p, tok3, http.StatusOK)
	}

	// Disable through n1: the very next request on each node refuses the
	// token; logins answer account_disabled.
	var dis struct{ User struct{ Disabled bool } }
	td := time.Now()
	adminCall(t, c, n1, pr, "", pr.Token, http.MethodPost, "/api/auth/users/"+reg.User.ID+"/disable", nil, nil, http.StatusOK, "", &dis)
	if !dis.User.Disabled {
		t.Fatalf("disable answered %+v", dis)
	}
	disableTook := time.Since(td)
	for _, p := range []*proc{n3, n2, n1} {
		me(p, tok3, http.StatusUnauthorized)
	}
	t.Logf("disable answered in %v; the token was refused by all three nodes %v after it was sent",
		disableTook.Round(time.Microsecond), time.Since(td).Round(time.Microsecond))
	login(n2, http.StatusForbidden, "account_disabled")
	login(n3, http.StatusForbidden, "account_disabled")
	adminCall(t, c, n3, pr, "", pr.Token, http.MethodPost, "/api/auth/users/"+reg.User.ID+"/enable", nil, nil, http.StatusOK, "", nil)
	tok1 := login(n1, http.StatusOK, "")
	me(n2, tok1, http.StatusOK)
	me(n1, tok3, http.StatusUnauthorized) // sessions from before the disable stay ended

	// Key rotation: create through n2, delete the original through n1;
	// the original fails on n2 and n3 at once, the new key works.
	var k struct{ ID, Key string }
	adminCall(t, c, n2, pr, "", pr.Token, http.MethodPost, "/api/keys", nil, map[string]string{"name": "rotated"}, http.StatusCreated, "", &k)
	adminCall(t, c, n3, pr, k.Key, pr.Token, http.MethodGet, "/api/keys", nil, nil, http.StatusOK, "", nil)
	adminCall(t, c, n1, pr, k.Key, pr.Token, http.MethodDelete, "/api/keys/default", nil, nil, http.StatusOK, "", nil)
	for _, p := range []*proc{n3, n2, n1} {
		adminCall(t, c, p, pr, "", "", http.MethodPost, "/api/auth", nil,
			map[string]string{"action": "login", "email": email, "password": password}, http.StatusUnauthorized, "invalid_api_key", nil)
		adminCall(t, c, p, pr, k.Key, tok1, http.MethodPost, "/api/auth", nil, map[string]string{"action": "me"}, http.StatusOK, "", nil)
	}
	adminCall(t, c, n2, pr, k.Key, pr.Token, http.MethodDelete, "/api/keys/"+k.ID, nil, nil, http.StatusConflict, "last_key", nil)
	t.Logf("done in %v", time.Since(t0).Round(time.Millisecond))
}
