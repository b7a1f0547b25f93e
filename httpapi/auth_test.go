package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// TestAuth covers POST /api/auth through HTTP against one real node.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	e.extra = vars{"pid2": p2.ID, "key2": p2.APIKey, "owner2": p2.OwnerToken}

	t.Run("register", func(t *testing.T) { t.Parallel(); e.run(t, authRows(registerScenarios())) })
	t.Run("login", func(t *testing.T) { t.Parallel(); e.run(t, authRows(loginScenarios())) })
	t.Run("login-failures-look-alike", func(t *testing.T) { t.Parallel(); testLoginFailuresLookAlike(t, e) })
	t.Run("actions", func(t *testing.T) { t.Parallel(); e.run(t, authRows(actionScenarios())) })
	t.Run("session", func(t *testing.T) { t.Parallel(); e.run(t, authRows(sessionScenarios())) })
}

// authRows fills in what /api/auth scenarios share: POST /api/auth, no
// bearer token unless asked, and the project headers (which a row may
// override, or remove with "").
func authRows(rows []scenario) []scenario {
	for i := range rows {
		r := &rows[i]
		if r.as == "" {
			r.as = "none"
		}
		if r.method == "" {
			r.method = http.MethodPost
		}
		if r.url == "" {
			r.url = "/api/auth"
		}
		h := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
		for k, v := range r.headers {
			h[k] = v
		}
		r.headers = h
	}
	return rows
}

func registerBody(email, password string) string {
	return fmt.Sprintf(`{"action":"register","email":%s,"password":%s,"name":"Ada"}`, jsonString(email), jsonString(password))
}

func loginBody(email, password string) string {
	return fmt.Sprintf(`{"action":"login","email":%s,"password":%s}`, jsonString(email), jsonString(password))
}

// login tries email/password on project p.
func (e *env) login(t testing.TB, p nodetest.Project, email, password string) reply {
	t.Helper()
	return e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}, loginBody(email, password))
}

// notRegistered checks that a refused register left no account behind.
func notRegistered(email string) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		if lr := e.login(t, e.p, v.expand(email), userPassword); lr.Status != http.StatusUnauthorized {
			t.Errorf("refused register left an account: login is %d: %s", lr.Status, lr.Body)
		}
	}
}

// firstAccountKept checks that a refused duplicate register left the first
// account as it was: its password works, the second one does not.
func firstAccountKept(email string) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		if lr := e.login(t, e.p, v.expand(email), userPassword); lr.Status != http.StatusOK {
			t.Errorf("first account's password: login %d %s", lr.Status, lr.Body)
		}
		if lr := e.login(t, e.p, v.expand(email), "another password 1"); lr.Status != http.StatusUnauthorized {
			t.Errorf("refused register's password: login %d %s", lr.Status, lr.Body)
		}
	}
}

// checkSession asserts a {token, user} answer and that the token works on /api/db.
func checkSession(wantEmail, wantRole string) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		var top map[string]json.RawMessage
		mustDecode(t, r.Body, &top)
		var tok string
		mustDecode(t, top["token"], &tok)
		if tok == "" {
			t.Fatalf("no token: %s", r.Body)
		}
		var user map[string]any
		mustDecode(t, top["user"], &user)
		for _, k := range []string{"id", "email", "name", "role", "totpEnabled", "createdAt"} {
			if _, ok := user[k]; !ok {
				t.Errorf("user lacks %q: %s", k, r.Body)
			}
		}
		if s := strings.ToLower(string(r.Body)); strings.Contains(s, "passwordhash") || strings.Contains(s, "argon") || strings.Contains(s, userPassword) {
			t.Errorf("answer leaks the password or its hash: %s", r.Body)
		}
		id, _ := user["id"].(string)
		if id == "" {
			t.Errorf("user.id = %v", user["id"])
		}
		if got := user["email"]; got != v.expand(wantEmail) {
			t.Errorf("user.email = %v, want %q", got, v.expand(wantEmail))
		}
		if user["role"] != wantRole || user["totpEnabled"] != false {
			t.Errorf("role %v totpEnabled %v, want %s and false", user["role"], user["totpEnabled"], wantRole)
		}
		if s, _ := user["createdAt"].(string); s == "" {
			t.Errorf("createdAt = %v", user["createdAt"])
		} else if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("createdAt %q is not RFC 3339", s)
		}
		// The token opens the caller's own subtree.
		dr := e.mustSend(t, http.MethodGet, docQuery("users/"+id+"/nothing"), bearer(tok), "")
		if dr.Status != http.StatusNotFound {
			t.Errorf("token on /api/db: status %d, want 404 (authenticated, no document): %s", dr.Status, dr.Body)
		}
	}
}

func registerScenarios() []scenario {
	email := "{rand}@example.com"
	pw := userPassword
	taken := func(t *testing.T, e *env, v vars) { e.mustRegister(t, e.p, v.expand(email)) }
	bad := func(name, body, field string) scenario {
		return scenario{name: name, body: body, status: 400, code: "invalid_argument", field: field, check: notRegistered(email)}
	}
	rows := []scenario{
		{name: "register is 201 with token and user", body: registerBody(email, pw), status: 201,
			json: `{"user":{"name":"Ada","role":"user","totpEnabled":false}}`, check: checkSession(email, "user")},
		{name: "register stores the email lowercased", body: registerBody("Ada.{rand}@Example.COM", pw), status: 201,
			check: checkSession("ada.{rand}@example.com", "user")},
		{name: "register without a name", body: fmt.Sprintf(`{"action":"register","email":"%s","password":"%s"}`, email, pw), status: 201,
			check: checkSession(email, "user")},
		{name: "register ignores unknown fields", body: fmt.Sprintf(`{"action":"register","email":"%s","password":"%s","role":"owner","x":1}`, email, pw), status: 201,
			check: checkSession(email, "user")},
		{name: "duplicate email is 409", body: registerBody(email, "another password 1"), setup: taken, status: 409, code: "email_taken", field: "email",
			check: firstAccountKept(email)},
		{name: "duplicate email in other case is 409", body: registerBody("{rand}@EXAMPLE.com", "another password 1"), setup: taken, status: 409, code: "email_taken", field: "email",
			check: firstAccountKept(email)},
		{name: "same email in another project is fine", body: registerBody(email, pw), setup: taken, status: 201,
			headers: map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}},
		bad("no email", `{"action":"register","password":"`+pw+`"}`, "email"),
		bad("email is a number", `{"action":"register","email":5,"password":"`+pw+`"}`, "email"),
		bad("email without @", registerBody("not-an-email", pw), "email"),
		bad("email without a dot in the domain", registerBody("a@b", pw), "email"),
		bad("email with a display name", registerBody("Ada <{rand}@example.com>", pw), "email"),
		bad("email with a trailing space", registerBody(email+" ", pw), "email"),
		bad("email with two @", registerBody("a@@example.com", pw), "email"),
		bad("email ending in a dot", registerBody("{rand}@example.", pw), "email"),
		bad("email over 254 bytes", registerBody(strings.Repeat("a", 250)+"@example.com", pw), "email"),
		bad("no password", `{"action":"register","email":"`+email+`"}`, "password"),
		bad("password of 7 characters", registerBody(email, "x7#kQ2p"), "password"),
		bad("password of 7 runes in 14 bytes", registerBody(email, "ééééééé"), "password"),
		bad("password of 129 runes", registerBody(email, strings.Repeat("é", 129)), "password"),
		bad("password of 129 ASCII characters", registerBody(email, strings.Repeat("k", 129)), "password"),
		bad("common password", registerBody(email, "password"), "password"),
		bad("common password in capitals", registerBody(email, "PASSWORD"), "password"),
		bad("common digits", registerBody(email, "12345678"), "password"),
		bad("password is a number", `{"action":"register","email":"`+email+`","password":12345678}`, "password"),
		bad("name over 200 characters", fmt.Sprintf(`{"action":"register","email":"%s","password":"%s","name":"%s"}`, email, pw, strings.Repeat("n", 201)), "name"),
		{name: "password of 128 runes is accepted", body: registerBody(email, strings.Repeat("é", 128)), status: 201},
		{name: "password of 8 characters is accepted", body: registerBody(email, "x7#kQ2p!"), status: 201},
		{name: "missing X-API-Key is 401", body: registerBody(email, pw), headers: map[string]string{"X-API-Key": ""},
			status: 401, code: "missing_api_key", check: notRegistered(email)},
		{name: "missing X-Project-Id is 401", body: registerBody(email, pw), headers: map[string]string{"X-Project-Id": ""},
			status: 401, code: "missing_api_key", check: notRegistered(email)},
		{name: "wrong X-API-Key is 401", body: registerBody(email, pw), headers: map[string]string{"X-API-Key": "eb_wrong-key"},
			status: 401, code: "invalid_api_key", check: notRegistered(email)},
		{name: "another project's key is 401", body: registerBody(email, pw), headers: map[string]string{"X-API-Key": "{key2}"},
			status: 401, code: "invalid_api_key", check: notRegistered(email)},
		{name: "unknown project id is 401", body: registerBody(email, pw), headers: map[string]string{"X-Project-Id": "nosuchproject"},
			status: 401, code: "invalid_api_key", check: notRegistered(email)},
		{name: "register carries X-Revision", body: registerBody(email, pw), status: 201,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if r.Header.Get("X-Revision") == "" {
					t.Errorf("BUG: register is a mutating response without X-Revision (API.md: every mutating response carries X-Revision)")
				}
			}},
	}
	return rows
}

func loginScenarios() []scenario {
	email := "{rand}@example.com"
	reg := func(t *testing.T, e *env, v vars) { e.mustRegister(t, e.p, v.expand(email)) }
	return []scenario{
		{name: "login is 200 with requiresTotp false and a working token", setup: reg, body: loginBody(email, userPassword), status: 200,
			json: `{"requiresTotp":false}`, check: checkSession(email, "user")},
		{name: "login with the email in other case", setup: reg, body: loginBody("{rand}@Example.Com", userPassword), status: 200,
			check: checkSession(email, "user")},
		{name: "login of the owner", body: loginBody("owner@example.com", "owner password 123"), status: 200,
			check: checkSession("owner@example.com", "owner")},
		{name: "wrong password is 401", setup: reg, body: loginBody(email, userPassword+"!"), status: 401, code: "invalid_credentials"},
		{name: "password differing in case is 401", setup: reg, body: loginBody(email, strings.ToUpper(userPassword)), status: 401, code: "invalid_credentials"},
		{name: "unknown email is 401", body: loginBody(email, userPassword), status: 401, code: "invalid_credentials"},
		{name: "account of another project is 401", setup: reg, body: loginBody(email, userPassword),
			headers: map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 401, code: "invalid_credentials"},
		{name: "login without a password is 400", setup: reg, body: `{"action":"login","email":"` + email + `"}`, status: 400, code: "invalid_argument", field: "password"},
		{name: "login without an email is 400", body: `{"action":"login","password":"x"}`, status: 400, code: "invalid_argument", field: "email"},
		{name: "login without X-API-Key is 401", setup: reg, body: loginBody(email, userPassword), headers: map[string]string{"X-API-Key": ""},
			status: 401, code: "missing_api_key"},
		{name: "login with a wrong X-API-Key is 401", setup: reg, body: loginBody(email, userPassword), headers: map[string]string{"X-API-Key": "eb_nope"},
			status: 401, code: "invalid_api_key"},
	}
}

// testLoginFailuresLookAlike: unknown email and wrong password give the same
// answer, byte for byte apart from the request id.
func testLoginFailuresLookAlike(t *testing.T, e *env) {
	a := e.mustRegister(t, e.p, "")
	wrong := e.login(t, e.p, a.Email, userPassword+"x")
	unknown := e.login(t, e.p, "nobody-"+a.Email, userPassword+"x")
	checkError(t, wrong, http.StatusUnauthorized, "invalid_credentials", "-")
	checkError(t, unknown, http.StatusUnauthorized, "invalid_credentials", "-")
	if string(wrong.Body) != string(unknown.Body) {
		t.Errorf("bodies differ:\nwrong password: %s\nunknown email:  %s", wrong.Body, unknown.Body)
	}
	for _, h := range []string{"Content-Type", "Retry-After", "Www-Authenticate", "Content-Length"} {
		if wrong.Header.Get(h) != unknown.Header.Get(h) {
			t.Errorf("header %s differs: %q vs %q", h, wrong.Header.Get(h), unknown.Header.Get(h))
		}
	}
}

func actionScenarios() []scenario {
	rows := []scenario{
		{name: "unknown action is 400", body: `{"action":"fly"}`, status: 400, code: "unknown_action", field: "action"},
		{name: "missing action is 400", body: `{"email":"a@example.com"}`, status: 400, field: "action"},
		{name: "empty action is 400", body: `{"action":""}`, status: 400, field: "action"},
		{name: "action is a number", body: `{"action":5}`, status: 400, code: "invalid_argument", field: "action"},
		{name: "action in other case is unknown", body: `{"action":"LOGIN","email":"a@example.com","password":"x"}`, status: 400, code: "unknown_action", field: "action"},
		{name: "GET is 405", method: "GET", status: 405, code: "method_not_allowed"},
		{name: "PUT is 405", method: "PUT", body: `{"action":"login"}`, status: 405, code: "method_not_allowed"},
		{name: "DELETE is 405", method: "DELETE", status: 405, code: "method_not_allowed"},
		{name: "bad JSON is 400", body: `{"action":"login",`, status: 400, code: "invalid_json"},
		{name: "body is an array", body: `["login"]`, status: 400, code: "invalid_argument"},
		{name: "empty body is 400", body: ``, headers: map[string]string{"Content-Type": "application/json"}, status: 400},
		{name: "no Content-Type is 415", body: `{"action":"login"}`, headers: map[string]string{"Content-Type": ""}, status: 415, code: "unsupported_media_type"},
		{name: "text/plain is 415", body: `{"action":"login"}`, headers: map[string]string{"Content-Type": "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "nesting over 64 levels is 400", body: `{"action":"login","x":` + nested(64) + `}`, status: 400, code: "invalid_argument"},
	}
	return rows
}

func sessionScenarios() []scenario {
	fresh := func(t *testing.T, e *env, v vars) {
		a := e.mustRegister(t, e.p, "")
		v["tok"], v["email"], v["id"] = a.Token, a.Email, a.ID
	}
	auth := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	tokenStatus := func(tok string, want int) func(t *testing.T, e *env, v vars, r reply) {
		return func(t *testing.T, e *env, v vars, r reply) {
			t.Helper()
			dr := e.mustSend(t, http.MethodGet, docQuery("users/"+v["id"]+"/x"), bearer(v.expand(tok)), "")
			if dr.Status != want {
				t.Errorf("token on /api/db afterwards: status %d, want %d: %s", dr.Status, want, dr.Body)
			}
			if want == http.StatusUnauthorized {
				checkError(t, dr, want, "invalid_token", "")
				mr := e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + v.expand(tok)}, `{"action":"me"}`)
				checkError(t, mr, want, "invalid_token", "")
			}
		}
	}
	return []scenario{
		{name: "me is 200 with the user", setup: fresh, headers: auth("{tok}"), body: `{"action":"me"}`, status: 200,
			json: `{"user":{"id":"{id}","email":"{email}","role":"user","totpEnabled":false}}`},
		{name: "me of the owner", as: "owner", body: `{"action":"me"}`, status: 200, json: `{"user":{"id":"{ownerUid}","role":"owner"}}`},
		{name: "me without a token is 401", body: `{"action":"me"}`, status: 401, code: "missing_token"},
		{name: "me with a bogus token is 401", headers: auth("eb_bogus"), body: `{"action":"me"}`, status: 401, code: "invalid_token"},
		{name: "me without X-API-Key is 401", setup: fresh, headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": ""}, body: `{"action":"me"}`,
			status: 401, code: "missing_api_key"},
		{name: "me with another project's headers is 403", setup: fresh, headers: map[string]string{"Authorization": "Bearer {tok}", "X-Project-Id": "{pid2}", "X-API-Key": "{key2}"},
			body: `{"action":"me"}`, status: 403, code: "project_mismatch"},
		{name: "logout is 200 and ends the session", setup: fresh, headers: auth("{tok}"), body: `{"action":"logout"}`, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
					t.Errorf("logout answered %s, want {\"ok\":true}", r.Body)
				}
				tokenStatus("{tok}", http.StatusUnauthorized)(t, e, v, r)
			}},
		{name: "logout ends only that session", headers: auth("{tok}"), body: `{"action":"logout"}`, status: 200,
			setup: func(t *testing.T, e *env, v vars) {
				fresh(t, e, v)
				lr := e.login(t, e.p, v["email"], userPassword)
				var out struct{ Token string }
				mustDecode(t, lr.Body, &out)
				v["tok2"] = out.Token
			},
			check: tokenStatus("{tok2}", http.StatusNotFound)},
		{name: "logout twice is 401 the second time", headers: auth("{tok}"), body: `{"action":"logout"}`, status: 401, code: "invalid_token",
			setup: func(t *testing.T, e *env, v vars) { fresh(t, e, v); e.mustLogout(t, e.p, v["tok"]) }},
		{name: "logout without a token is 401", body: `{"action":"logout"}`, status: 401, code: "missing_token"},
		{name: "logout with a bogus token is 401", headers: auth("eb_bogus"), body: `{"action":"logout"}`, status: 401, code: "invalid_token"},
		{name: "logout with another project's headers is 403 and keeps the session", setup: fresh,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-Project-Id": "{pid2}", "X-API-Key": "{key2}"},
			body:    `{"action":"logout"}`, status: 403, code: "project_mismatch", check: tokenStatus("{tok}", http.StatusNotFound)},
		{name: "logout with a wrong X-API-Key is 401 and keeps the session", setup: fresh,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": "eb_wrong"},
			body:    `{"action":"logout"}`, status: 401, code: "invalid_api_key", check: tokenStatus("{tok}", http.StatusNotFound)},
		{name: "logout carries X-Revision", setup: fresh, headers: auth("{tok}"), body: `{"action":"logout"}`, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if r.Header.Get("X-Revision") == "" {
					t.Errorf("BUG: logout is a mutating response without X-Revision (API.md: every mutating response carries X-Revision)")
				}
			}},
	}
}
