package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// keyHeaders are the project headers of e's project.
func (e *env) keyHeaders(tok string) map[string]string {
	h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return h
}

// meStatus is the status of the me action for tok.
func (e *env) meStatus(t *testing.T, tok string) int {
	t.Helper()
	return e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(tok), `{"action":"me"}`).Status
}

// victim registers a fresh account for a scenario that changes it: {vid},
// {vtok}, {vemail}.
func victim(t *testing.T, e *env, v vars) {
	a := e.mustRegister(t, e.p, "")
	v["vid"], v["vtok"], v["vemail"] = a.ID, a.Token, a.Email
}

// stillAlive checks that the victim's session and the env's users survived
// a refused request.
func stillAlive(t *testing.T, e *env, v vars, _ reply) {
	t.Helper()
	for _, tok := range []string{v["vtok"], e.user.Token, e.other.Token} {
		if tok == "" {
			continue
		}
		if st := e.meStatus(t, tok); st != http.StatusOK {
			t.Errorf("a session ended after a refused request: me = %d", st)
		}
	}
}

func TestUsersAPIRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
	e.run(t, []scenario{
		{name: "list as owner", url: "/api/auth/users", headers: k, status: 200, json: `{"nextCursor":""}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var out struct{ Users []struct{ ID string } }
				mustDecode(t, r.Body, &out)
				if len(out.Users) < 3 {
					t.Errorf("listed %d users, want the owner and both users at least", len(out.Users))
				}
			}},
		{name: "list as a user", as: "user", url: "/api/auth/users", headers: k, status: 403, code: "forbidden"},
		{name: "list without a token", as: "none", url: "/api/auth/users", headers: k, status: 401, code: "missing_token"},
		{name: "list without the key", url: "/api/auth/users", status: 401, code: "missing_api_key"},
		{name: "list limit 0", url: "/api/auth/users?limit=0", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "list limit 101", url: "/api/auth/users?limit=101", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "list limit not a number", url: "/api/auth/users?limit=ten", headers: k, status: 400, code: "invalid_argument", field: "limit"},
		{name: "list bad cursor", url: "/api/auth/users?cursor=%21%21", headers: k, status: 400, code: "invalid_argument", field: "cursor"},
		{name: "list forged cursor", url: "/api/auth/users?cursor=dTE6X3VzZXJz", headers: k, status: 400, code: "invalid_argument", field: "cursor"},
		{name: "list unknown parameter", url: "/api/auth/users?where=x", headers: k, status: 400, code: "invalid_argument", field: "where"},
		{name: "list by POST", method: "POST", url: "/api/auth/users", headers: k, body: `{}`, status: 405, code: "method_not_allowed"},
		{name: "search by exact id", url: "/api/auth/users?query={uid}", headers: k, status: 200, json: `{"users":[{"id":"{uid}"}],"nextCursor":""}`},

		{name: "get a user", url: "/api/auth/users/{uid}", headers: k, status: 200, json: `{"user":{"id":"{uid}","role":"user"}}`},
		{name: "get unknown", url: "/api/auth/users/nosuchuser", headers: k, status: 404, code: "not_found", field: "id"},
		{name: "get reserved", url: "/api/auth/users/_x", headers: k, status: 404, code: "not_found", field: "id"},
		{name: "get as a user", as: "user", url: "/api/auth/users/{otherUid}", headers: k, status: 403, code: "forbidden"},
		{name: "put a user", method: "PUT", url: "/api/auth/users/{uid}", headers: k, body: `{}`, status: 405, code: "method_not_allowed"},

		{name: "disable oneself", method: "POST", url: "/api/auth/users/{ownerUid}/disable", headers: k, status: 409, code: "own_account", field: "id", check: stillAlive},
		{name: "delete oneself", method: "DELETE", url: "/api/auth/users/{ownerUid}", headers: k, status: 409, code: "own_account", field: "id", check: stillAlive},
		{name: "disable unknown", method: "POST", url: "/api/auth/users/nosuchuser/disable", headers: k, status: 404, code: "not_found", field: "id"},
		{name: "delete unknown", method: "DELETE", url: "/api/auth/users/nosuchuser", headers: k, status: 404, code: "not_found", field: "id"},
		{name: "unknown op", method: "POST", url: "/api/auth/users/{uid}/frobnicate", headers: k, status: 404, code: "not_found", check: stillAlive},
		{name: "op by GET", url: "/api/auth/users/{uid}/disable", headers: k, status: 405, code: "method_not_allowed", check: stillAlive},
		{name: "disable as a user", as: "user", setup: victim, method: "POST", url: "/api/auth/users/{vid}/disable", headers: k, status: 403, code: "forbidden", check: stillAlive},
		{name: "revoke-sessions as a user", as: "user", setup: victim, method: "POST", url: "/api/auth/users/{vid}/revoke-sessions", headers: k, status: 403, code: "forbidden", check: stillAlive},
		{name: "delete as a user", as: "user", setup: victim, method: "DELETE", url: "/api/auth/users/{vid}", headers: k, status: 403, code: "forbidden", check: stillAlive},
		{name: "disable with a query", setup: victim, method: "POST", url: "/api/auth/users/{vid}/disable?now=1", headers: k, status: 400, code: "invalid_argument", field: "now", check: stillAlive},

		{name: "disable", setup: victim, method: "POST", url: "/api/auth/users/{vid}/disable", headers: k, status: 200, json: `{"user":{"id":"{vid}","disabled":true}}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if r.Header.Get("X-Revision") == "" {
					t.Error("no X-Revision")
				}
				if st := e.meStatus(t, v["vtok"]); st != http.StatusUnauthorized {
					t.Errorf("disabled user's me = %d, want 401", st)
				}
				lr := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(""), fmt.Sprintf(`{"action":"login","email":%q,"password":%q}`, v["vemail"], userPassword))
				checkError(t, lr, http.StatusForbidden, "account_disabled", "-")
			}},
		{name: "revoke-sessions", setup: victim, method: "POST", url: "/api/auth/users/{vid}/revoke-sessions", headers: k, status: 200, json: `{"ok":true}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if st := e.meStatus(t, v["vtok"]); st != http.StatusUnauthorized {
					t.Errorf("revoked user's me = %d, want 401", st)
				}
			}},
		{name: "delete", setup: victim, method: "DELETE", url: "/api/auth/users/{vid}", headers: k, status: 200, json: `{"ok":true,"deleted":true}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				g := e.mustSend(t, http.MethodGet, "/api/auth/users/"+v["vid"], e.keyHeaders(e.p.OwnerToken), "")
				checkError(t, g, http.StatusNotFound, "not_found", "id")
				if st := e.meStatus(t, v["vtok"]); st != http.StatusUnauthorized {
					t.Errorf("deleted user's me = %d, want 401", st)
				}
			}},
	})
}

// TestUserDisableEnableFlow: disable, enable, then the user signs in again;
// the sessions from before the disable stay ended.
func TestUserDisableEnableFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := vars{}
	victim(t, e, v)
	own := e.keyHeaders(e.p.OwnerToken)
	r := e.mustSend(t, http.MethodPost, "/api/auth/users/"+v["vid"]+"/disable", own, "")
	if r.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	login := fmt.Sprintf(`{"action":"login","email":%q,"password":%q}`, v["vemail"], userPassword)
	checkError(t, e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(""), login), http.StatusForbidden, "account_disabled", "-")
	r = e.mustSend(t, http.MethodPost, "/api/auth/users/"+v["vid"]+"/enable", own, "")
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"disabled"`) {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	lr := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(""), login)
	if lr.Status != http.StatusOK {
		t.Fatalf("login after enable: %d %s", lr.Status, lr.Body)
	}
	if st := e.meStatus(t, v["vtok"]); st != http.StatusUnauthorized {
		t.Fatalf("a session from before the disable: me = %d, want 401", st)
	}
}

type sessionJSON struct {
	ID         string `json:"id"`
	CreatedAt  string `json:"createdAt"`
	LastUsedAt string `json:"lastUsedAt"`
	Address    string `json:"address"`
	UserAgent  string `json:"userAgent"`
	Current    bool   `json:"current"`
}

func (e *env) listSessions(t *testing.T, tok string) []sessionJSON {
	t.Helper()
	r := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(tok), `{"action":"list-sessions"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("list-sessions: %d %s", r.Status, r.Body)
	}
	var out struct{ Sessions []sessionJSON }
	mustDecode(t, r.Body, &out)
	return out.Sessions
}

func TestSessionsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.mustRegister(t, e.p, "")
	h := e.keyHeaders("")
	h["User-Agent"] = "H4Test/1.0 (sessions)"
	lr := e.mustSend(t, http.MethodPost, "/api/auth", h, fmt.Sprintf(`{"action":"login","email":%q,"password":%q}`, a.Email, userPassword))
	if lr.Status != http.StatusOK {
		t.Fatalf("login: %d %s", lr.Status, lr.Body)
	}
	var login struct{ Token string }
	mustDecode(t, lr.Body, &login)

	list := e.listSessions(t, login.Token)
	if len(list) != 2 {
		t.Fatalf("sessions = %+v, want 2", list)
	}
	var cur, first sessionJSON
	for _, s := range list {
		if s.Current {
			cur = s
		} else {
			first = s
		}
	}
	if cur.UserAgent != "H4Test/1.0 (sessions)" || cur.Address != "127.0.0.1" || cur.ID == "" || first.ID == "" || cur.LastUsedAt != cur.CreatedAt {
		t.Fatalf("current session = %+v (first %+v)", cur, first)
	}

	other := e.listSessions(t, e.other.Token)
	for _, c := range []struct {
		name, body, code, field string
		status                  int
	}{
		{"no sessionId", `{"action":"revoke-session"}`, "invalid_argument", "sessionId", 400},
		{"sessionId not a string", `{"action":"revoke-session","sessionId":7}`, "invalid_argument", "sessionId", 400},
		{"unknown sessionId", `{"action":"revoke-session","sessionId":"nope"}`, "not_found", "sessionId", 404},
		{"another user's session", fmt.Sprintf(`{"action":"revoke-session","sessionId":%q}`, other[0].ID), "not_found", "sessionId", 404},
		{"a path", `{"action":"revoke-session","sessionId":"../../x"}`, "not_found", "sessionId", 404},
	} {
		r := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(login.Token), c.body)
		checkError(t, r, c.status, c.code, c.field)
	}
	if st := e.meStatus(t, e.other.Token); st != http.StatusOK {
		t.Fatalf("the other user's session after the refusals: %d", st)
	}
	r := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(e.user.Token), `{"action":"list-sessions","sessionId":"x"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("list-sessions ignoring an extra member: %d %s", r.Status, r.Body)
	}
	checkError(t, e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(""), `{"action":"list-sessions"}`), http.StatusUnauthorized, "missing_token", "")

	r = e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(login.Token), fmt.Sprintf(`{"action":"revoke-session","sessionId":%q}`, first.ID))
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
		t.Fatalf("revoke-session: %d %s", r.Status, r.Body)
	}
	if st := e.meStatus(t, a.Token); st != http.StatusUnauthorized {
		t.Fatalf("revoked session: me = %d", st)
	}
	if st := e.meStatus(t, login.Token); st != http.StatusOK {
		t.Fatalf("the session that revoked the other: me = %d", st)
	}
	if got := e.listSessions(t, login.Token); len(got) != 1 || !got[0].Current {
		t.Fatalf("after revoke: %+v", got)
	}
}
