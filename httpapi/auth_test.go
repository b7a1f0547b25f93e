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
	t.Run("change-password", func(t *testing.T) { t.Parallel(); e.run(t, authRows(changePasswordScenarios())) })
	t.Run("set-role", func(t *testing.T) { t.Parallel(); e.run(t, authRows(setRoleScenarios(p2))) })
	t.Run("api-key", func(t *testing.T) { t.Parallel(); e.run(t, authRows(apiKeyScenarios())) })
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

func changePasswordBody(current, next string) string {
	return `{"action":"change-password","currentPassword":` + jsonString(current) + `,"newPassword":` + jsonString(next) + `}`
}

func setRoleBody(uid, role string) string {
	return `{"action":"set-role","userId":` + jsonString(uid) + `,"role":` + jsonString(role) + `}`
}

// twoSessions registers an account ({tok}, {email}, {id}) and opens a
// second session for it with a login ({tok2}).
func twoSessions(t *testing.T, e *env, v vars) {
	a := e.mustRegister(t, e.p, "")
	v["tok"], v["email"], v["id"] = a.Token, a.Email, a.ID
	lr := e.login(t, e.p, a.Email, userPassword)
	if lr.Status != http.StatusOK {
		t.Fatalf("login: %d %s", lr.Status, lr.Body)
	}
	v["tok2"] = jsonMember(t, lr.Body, "token")
}

// passwordUnchanged checks that a refused change-password left everything
// as it was: both sessions work, the old password works, the new one not.
func passwordUnchanged(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	for _, tok := range []string{"tok", "tok2"} {
		if st, _ := e.me(t, v[tok]); st != http.StatusOK {
			t.Errorf("a refused change-password ended session %s: me %d", tok, st)
		}
	}
	if lr := e.login(t, e.p, v["email"], userPassword); lr.Status != http.StatusOK {
		t.Errorf("a refused change-password changed the password: login %d %s", lr.Status, lr.Body)
	}
	if lr := e.login(t, e.p, v["email"], newPassword); lr.Status != http.StatusUnauthorized {
		t.Errorf("a refused change-password set the new password: login %d %s", lr.Status, lr.Body)
	}
}

func changePasswordScenarios() []scenario {
	bt := map[string]string{"Authorization": "Bearer {tok}"}
	cp := changePasswordBody
	weak := func(name, pw string) scenario {
		return scenario{name: name, setup: twoSessions, headers: bt, body: cp(userPassword, pw), status: 400, code: "invalid_argument", field: "newPassword",
			check: passwordUnchanged}
	}
	return []scenario{
		{name: "change-password is 200, ends every session and returns a working one", setup: twoSessions, headers: bt,
			body: cp(userPassword, newPassword), status: 200, json: `{"ok":true,"user":{"id":"{id}","email":"{email}","role":"user"}}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				tok := jsonMember(t, r.Body, "token")
				if !strings.HasPrefix(tok, "ebt_") || tok == v["tok"] || tok == v["tok2"] {
					t.Errorf("returned token %q is not a new session token", tok)
				}
				if st, u := e.me(t, tok); st != http.StatusOK || u["id"] != v["id"] {
					t.Errorf("the returned token: me %d %v", st, u)
				}
				for _, old := range []string{"tok", "tok2"} {
					checkError(t, e.authCall(t, v[old], `{"action":"me"}`), http.StatusUnauthorized, "invalid_token", "")
					dr := e.mustSend(t, http.MethodGet, docQuery("users/"+v["id"]+"/x"), bearer(v[old]), "")
					checkError(t, dr, http.StatusUnauthorized, "invalid_token", "")
				}
				checkError(t, e.login(t, e.p, v["email"], userPassword), http.StatusUnauthorized, "invalid_credentials", "")
				if lr := e.login(t, e.p, v["email"], newPassword); lr.Status != http.StatusOK {
					t.Errorf("login with the new password: %d %s", lr.Status, lr.Body)
				}
				if r.Header.Get("X-Revision") == "" {
					t.Errorf("change-password is a mutating response without X-Revision")
				}
			}},
		{name: "the caller's old token cannot change the password again", headers: bt, body: cp(newPassword, "a third passphrase"),
			status: 401, code: "invalid_token",
			setup: func(t *testing.T, e *env, v vars) {
				twoSessions(t, e, v)
				if r := e.authCall(t, v["tok"], cp(userPassword, newPassword)); r.Status != http.StatusOK {
					t.Fatalf("first change-password: %d %s", r.Status, r.Body)
				}
			}},
		{name: "wrong current password is 401", setup: twoSessions, headers: bt, body: cp("not my password 1", newPassword),
			status: 401, code: "invalid_credentials", field: "currentPassword", check: passwordUnchanged},
		{name: "current password in capitals is 401", setup: twoSessions, headers: bt, body: cp(strings.ToUpper(userPassword), newPassword),
			status: 401, code: "invalid_credentials", field: "currentPassword", check: passwordUnchanged},
		weak("common new password is 400", "password"),
		weak("new password 12345678 is 400", "12345678"),
		weak("new password of 7 characters is 400", "x7#kQ2p"),
		weak("new password of 129 characters is 400", strings.Repeat("k", 129)),
		{name: "missing currentPassword is 400", setup: twoSessions, headers: bt, body: `{"action":"change-password","newPassword":"` + newPassword + `"}`,
			status: 400, code: "invalid_argument", field: "currentPassword", check: passwordUnchanged},
		{name: "missing newPassword is 400", setup: twoSessions, headers: bt, body: `{"action":"change-password","currentPassword":"` + userPassword + `"}`,
			status: 400, code: "invalid_argument", field: "newPassword", check: passwordUnchanged},
		{name: "missing both is 400 about currentPassword", setup: twoSessions, headers: bt, body: `{"action":"change-password"}`,
			status: 400, code: "invalid_argument", field: "currentPassword", check: passwordUnchanged},
		{name: "change-password without a bearer is 401", body: cp(userPassword, newPassword), status: 401, code: "missing_token"},
		{name: "change-password with a bogus bearer is 401", headers: map[string]string{"Authorization": "Bearer ebt_bogus"}, body: cp(userPassword, newPassword),
			status: 401, code: "invalid_token"},
		{name: "change-password under another project's headers is 403", setup: twoSessions, body: cp(userPassword, newPassword),
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-Project-Id": "{pid2}", "X-API-Key": "{key2}"},
			status:  403, code: "project_mismatch", check: passwordUnchanged},
		{name: "change-password without X-API-Key is 401", setup: twoSessions, body: cp(userPassword, newPassword),
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": ""}, status: 401, code: "missing_api_key", check: passwordUnchanged},
	}
}

// rulesStatus checks what GET /api/db/rules answers to the token {tokVar}:
// 200 for an owner, 403 forbidden for a user.
func rulesStatus(tokVar string, want int) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		rr := e.mustSend(t, http.MethodGet, "/api/db/rules", bearer(v[tokVar]), "")
		if rr.Status != want {
			t.Errorf("GET /api/db/rules as %s: status %d, want %d: %.300s", tokVar, rr.Status, want, rr.Body)
		}
		if want == http.StatusForbidden {
			checkError(t, rr, want, "forbidden", "")
		}
	}
}

// roleIs checks the role me reports for {tokVar}.
func roleIs(tokVar, role string) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if st, u := e.me(t, v[tokVar]); st != http.StatusOK || u["role"] != role {
			t.Errorf("me as %s: status %d role %v, want %s", tokVar, st, u["role"], role)
		}
	}
}

func setRoleScenarios(p2 nodetest.Project) []scenario {
	sr := setRoleBody
	fresh := func(t *testing.T, e *env, v vars) {
		a := e.mustRegister(t, e.p, "")
		v["tok"], v["id"] = a.Token, a.ID
	}
	promoted := func(t *testing.T, e *env, v vars) {
		fresh(t, e, v)
		if r := e.authCall(t, e.p.OwnerToken, sr(v["id"], "owner")); r.Status != http.StatusOK {
			t.Fatalf("promote: %d %s", r.Status, r.Body)
		}
	}
	demoted := func(t *testing.T, e *env, v vars) {
		promoted(t, e, v)
		if r := e.authCall(t, e.p.OwnerToken, sr(v["id"], "user")); r.Status != http.StatusOK {
			t.Fatalf("demote: %d %s", r.Status, r.Body)
		}
	}
	bt := map[string]string{"Authorization": "Bearer {tok}"}
	otherStaysUser := roleIs("other", "user")
	return []scenario{
		{name: "set-role promotes a user to owner at once", as: "owner", setup: fresh, body: sr("{id}", "owner"), status: 200,
			json: `{"user":{"id":"{id}","role":"owner"}}`,
			check: checks(rulesStatus("tok", http.StatusOK), roleIs("tok", "owner"), func(t *testing.T, e *env, v vars, r reply) {
				if r.Header.Get("X-Revision") == "" {
					t.Errorf("set-role is a mutating response without X-Revision")
				}
			})},
		{name: "set-role demotes an owner at once", as: "owner", setup: promoted, body: sr("{id}", "user"), status: 200,
			json: `{"user":{"id":"{id}","role":"user"}}`, check: checks(rulesStatus("tok", http.StatusForbidden), roleIs("tok", "user"))},
		{name: "a promoted user can set roles", headers: bt, body: sr("{id2}", "owner"), status: 200, json: `{"user":{"id":"{id2}","role":"owner"}}`,
			setup: func(t *testing.T, e *env, v vars) {
				promoted(t, e, v)
				v["id2"] = e.mustRegister(t, e.p, "").ID
			}},
		{name: "a demoted owner calling set-role is 403", setup: demoted, headers: bt, body: sr("{otherUid}", "owner"), status: 403, code: "forbidden",
			check: otherStaysUser},
		{name: "user calling set-role is 403", as: "user", body: sr("{otherUid}", "owner"), status: 403, code: "forbidden", check: otherStaysUser},
		{name: "user promoting themselves is 403", as: "user", body: sr("{uid}", "owner"), status: 403, code: "forbidden", check: roleIs("user", "user")},
		{name: "user demoting the owner is 403", as: "user", body: sr("{ownerUid}", "user"), status: 403, code: "forbidden", check: rulesStatus("owner", http.StatusOK)},
		{name: "owner changing own role is 409", as: "owner", body: sr("{ownerUid}", "user"), status: 409, code: "own_role",
			check: rulesStatus("owner", http.StatusOK)},
		{name: "owner setting own role to owner is 409", as: "owner", body: sr("{ownerUid}", "owner"), status: 409, code: "own_role"},
		{name: "unknown userId is 404", as: "owner", body: sr("aaaaaaaaaaaaaaaaaaaa", "owner"), status: 404, code: "not_found", field: "userId"},
		{name: "userId of another project's account is 404", as: "owner", body: sr("{p2uid}", "owner"), status: 404, code: "not_found", field: "userId",
			setup: func(t *testing.T, e *env, v vars) {
				a := e.mustRegister(t, p2, "")
				v["p2uid"], v["p2tok"] = a.ID, a.Token
			},
			check: func(t *testing.T, e *env, v vars, r reply) {
				mr := e.mustSend(t, http.MethodPost, "/api/auth", projectHeaders(p2, v["p2tok"]), `{"action":"me"}`)
				if !strings.Contains(string(mr.Body), `"role":"user"`) {
					t.Errorf("the other project's account changed: %d %s", mr.Status, mr.Body)
				}
			}},
		{name: "bad role is 400", as: "owner", setup: fresh, body: sr("{id}", "admin"), status: 400, code: "invalid_argument", field: "role",
			check: roleIs("tok", "user")},
		{name: "role in capitals is 400", as: "owner", setup: fresh, body: sr("{id}", "OWNER"), status: 400, code: "invalid_argument", field: "role",
			check: roleIs("tok", "user")},
		{name: "missing role is 400", as: "owner", setup: fresh, body: `{"action":"set-role","userId":"{id}"}`, status: 400, code: "invalid_argument", field: "role"},
		{name: "missing userId is 400", as: "owner", body: `{"action":"set-role","role":"owner"}`, status: 400, code: "invalid_argument", field: "userId"},
		{name: "set-role without a bearer is 401", setup: fresh, body: sr("{id}", "owner"), status: 401, code: "missing_token", check: roleIs("tok", "user")},
		{name: "set-role with another project's owner token is 403", setup: fresh, headers: map[string]string{"Authorization": "Bearer {owner2}"},
			body: sr("{id}", "owner"), status: 403, code: "project_mismatch", check: roleIs("tok", "user")},
		{name: "set-role with a wrong X-API-Key is 401", as: "owner", setup: fresh, headers: map[string]string{"X-API-Key": "ebk_wrong"},
			body: sr("{id}", "owner"), status: 401, code: "invalid_api_key", check: roleIs("tok", "user")},
	}
}

// apiKeyScenarios: every /api/auth action and /api/authenticator route
// refuses a request without both project headers (401 missing_api_key) or
// with a key that is not the project's (401 invalid_api_key), before it
// looks at anything else; a bearer session survives the refused call.
func apiKeyScenarios() []scenario {
	type endpoint struct {
		name, url, body string
		bearer          bool
	}
	eps := []endpoint{
		{"register", "", registerBody("{rand}@example.com", userPassword), false},
		{"login", "", loginBody("{email}", userPassword), false},
		{"login-verify", "", loginVerifyBody("ebl_bogus", "123456"), false},
		{"logout", "", `{"action":"logout"}`, true},
		{"me", "", `{"action":"me"}`, true},
		{"change-password", "", changePasswordBody(userPassword, newPassword), true},
		{"reset-password", "", resetBody("{email}", "ebv_bogus", newPassword), false},
		{"set-role", "", setRoleBody("{id}", "owner"), true},
		{"disable-totp", "", disableBody("123456"), true},
		{"authenticator enroll", enrollURL, "", true},
		{"authenticator confirm", confirmURL, codeBody("123456"), true},
		{"authenticator verify", verifyURL, verifyBody("{email}", "123456", "{pid}"), false},
	}
	fresh := func(t *testing.T, e *env, v vars) {
		a := e.mustRegister(t, e.p, "")
		v["tok"], v["email"], v["id"] = a.Token, a.Email, a.ID
	}
	kept := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if st, u := e.me(t, v["tok"]); st != http.StatusOK || u["role"] != "user" {
			t.Errorf("the session after a refused call: me %d role %v", st, u["role"])
		}
		if lr := e.login(t, e.p, v["email"], userPassword); lr.Status != http.StatusOK {
			t.Errorf("the password after a refused call: login %d", lr.Status)
		}
	}
	var rows []scenario
	for _, ep := range eps {
		for _, bad := range []struct {
			name, code string
			headers    map[string]string
		}{
			{"without X-API-Key", "missing_api_key", map[string]string{"X-API-Key": ""}},
			{"without X-Project-Id", "missing_api_key", map[string]string{"X-Project-Id": ""}},
			{"without both project headers", "missing_api_key", map[string]string{"X-Project-Id": "", "X-API-Key": ""}},
			{"with a wrong X-API-Key", "invalid_api_key", map[string]string{"X-API-Key": "ebk_wrong"}},
			{"with another project's API key", "invalid_api_key", map[string]string{"X-API-Key": "{key2}"}},
		} {
			h := map[string]string{}
			for k, v := range bad.headers {
				h[k] = v
			}
			as := "none"
			if ep.bearer {
				if ep.name == "set-role" {
					as = "owner"
				} else {
					h["Authorization"] = "Bearer {tok}"
				}
			}
			rows = append(rows, scenario{name: ep.name + " " + bad.name + " is 401", as: as, url: ep.url, headers: h, body: ep.body, setup: fresh,
				status: 401, code: bad.code, check: kept})
		}
	}
	return rows
}
