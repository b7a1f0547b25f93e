package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
)

// newMailEnv is newEnv on a node started with opts (the operator's
// allowances, no secret key).
func newMailEnv(t *testing.T, opts nodetest.Options) *env {
	t.Helper()
	c := nodetest.Start(t, opts)
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	e.user = e.mustRegister(t, e.p, "")
	e.other = e.mustRegister(t, e.p, "")
	return e
}

func (e *env) projectHeaders(tok string) map[string]string {
	h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return h
}

// smtpState is what GET /api/auth/smtp answers, status and body, to prove
// a refusal left the stored settings as they were.
func (e *env) smtpState(t *testing.T) string {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, "/api/auth/smtp", e.projectHeaders(e.p.OwnerToken), "")
	return fmt.Sprintf("%d %s", r.Status, r.Body)
}

// A public address literal: the host policy judges it without DNS.
const publicSMTP = "93.184.215.14"

func TestSMTPSettingsRefusals(t *testing.T) {
	e := newEnv(t)
	ph := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
	good := `{"host":"` + publicSMTP + `","port":587,"username":"u","password":"p","from":"noreply@example.com","security":"starttls"}`
	with := func(field, value string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(good), &m); err != nil {
			panic(err)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			panic(err)
		}
		if v == nil {
			delete(m, field)
		} else {
			m[field] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	// A stored setting every refusal must leave as it is.
	r := e.mustSend(t, http.MethodPut, "/api/auth/smtp", e.projectHeaders(e.p.OwnerToken),
		`{"host":"`+publicSMTP+`","username":"keep","password":"kept","from":"keep@example.com","security":"tls"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	before := e.smtpState(t)
	put := func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: http.MethodPut, url: "/api/auth/smtp", headers: ph, body: body, status: status, code: code, field: field}
	}
	e.run(t, []scenario{
		put("loopback host refused", with("host", `"127.0.0.1"`), 400, "invalid_argument", "host"),
		put("localhost refused", with("host", `"localhost"`), 400, "invalid_argument", "host"),
		put("private host refused", with("host", `"10.1.2.3"`), 400, "invalid_argument", "host"),
		put("link-local metadata host refused", with("host", `"169.254.169.254"`), 400, "invalid_argument", "host"),
		put("host with port", with("host", `"`+publicSMTP+`:25"`), 400, "invalid_argument", "host"),
		put("empty host", with("host", `""`), 400, "invalid_argument", "host"),
		put("unknown security", with("security", `"ssl"`), 400, "invalid_argument", "security"),
		put("plain to a public host", with("security", `"none"`), 400, "invalid_argument", "security"),
		put("port zero", with("port", `0`), 400, "invalid_argument", "port"),
		put("port too large", with("port", `70000`), 400, "invalid_argument", "port"),
		put("port a string", with("port", `"587"`), 400, "invalid_argument", "port"),
		put("from not an address", with("from", `"nobody"`), 400, "invalid_argument", "from"),
		put("from with a display name", with("from", `"App <a@example.com>"`), 400, "invalid_argument", "from"),
		put("from missing", with("from", `null`), 400, "invalid_argument", "from"),
		put("fromName with a line break", with("fromName", `"App\r\nBcc: x@example.com"`), 400, "invalid_argument", "fromName"),
		put("password without username", with("username", `""`), 400, "invalid_argument", "username"),
		put("new username without password", with("password", `""`), 400, "invalid_argument", "password"),
		put("password too long", with("password", `"`+strings.Repeat("x", 1025)+`"`), 400, "invalid_argument", "password"),
		put("not JSON", `{"host":`, 400, "invalid_json", ""),
		{name: "user may not set", as: "user", method: http.MethodPut, url: "/api/auth/smtp", headers: ph, body: good, status: 403, code: "forbidden"},
		{name: "user may not read", as: "user", url: "/api/auth/smtp", headers: ph, status: 403, code: "forbidden"},
		{name: "user may not delete", as: "user", method: http.MethodDelete, url: "/api/auth/smtp", headers: ph, status: 403, code: "forbidden"},
		{name: "no token", as: "none", method: http.MethodPut, url: "/api/auth/smtp", headers: ph, body: good, status: 401, code: "missing_token"},
		{name: "no api key", method: http.MethodPut, url: "/api/auth/smtp", headers: map[string]string{"X-Project-Id": "{pid}"}, body: good, status: 401, code: "missing_api_key"},
		{name: "wrong method", method: http.MethodPost, url: "/api/auth/smtp", headers: ph, body: good, status: 405, code: "method_not_allowed"},
	})
	if after := e.smtpState(t); after != before {
		t.Fatalf("refusals changed the settings:\nbefore %s\nafter  %s", before, after)
	}
}

func TestSMTPSettingsLifecycle(t *testing.T) {
	e := newEnv(t)
	h := e.projectHeaders(e.p.OwnerToken)
	r := e.mustSend(t, http.MethodGet, "/api/auth/smtp", h, "")
	checkError(t, r, 404, "not_found", "-")

	r = e.mustSend(t, http.MethodPut, "/api/auth/smtp", h,
		`{"host":"`+publicSMTP+`","username":"apikey","password":"hunter2-secret","from":"NoReply@Example.com","fromName":"Example","security":"starttls"}`)
	if r.Status != 200 {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("X-Revision") == "" {
		t.Error("PUT /api/auth/smtp without X-Revision")
	}
	want := `{"host":"` + publicSMTP + `","port":587,"username":"apikey","from":"NoReply@Example.com","fromName":"Example","security":"starttls","passwordSet":true}`
	if !jsonEqual(r.Body, []byte(want)) {
		t.Fatalf("put answered %s, want %s", r.Body, want)
	}
	if g := e.mustSend(t, http.MethodGet, "/api/auth/smtp", h, ""); g.Status != 200 || !jsonEqual(g.Body, []byte(want)) {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	// At rest the password is sealed.
	doc, err := e.c.Nodes[0].Node.Store.Get(keys.SMTP(e.p.ID))
	if err != nil || doc == nil {
		t.Fatalf("stored settings: %v %v", doc, err)
	}
	if strings.Contains(string(doc.Data), "hunter2") {
		t.Fatalf("password stored in the clear: %s", doc.Data)
	}
	// Same username, no password: the stored one is kept.
	r = e.mustSend(t, http.MethodPut, "/api/auth/smtp", h,
		`{"host":"`+publicSMTP+`","port":2525,"username":"apikey","from":"noreply@example.com","security":"starttls"}`)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"passwordSet":true`) || !strings.Contains(string(r.Body), `"port":2525`) {
		t.Fatalf("put keeping the password: %d %s", r.Status, r.Body)
	}
	// The server the sender would use opens the same password.
	srv, err := e.c.Nodes[0].Node.Accounts.MailServer(t.Context(), e.p.ID)
	if err != nil || srv.Password != "hunter2-secret" || srv.Port != 2525 || srv.Operator {
		t.Fatalf("mail server: %+v %v", srv, err)
	}
	r = e.mustSend(t, http.MethodDelete, "/api/auth/smtp", h, "")
	if r.Status != 200 || !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	checkError(t, e.mustSend(t, http.MethodGet, "/api/auth/smtp", h, ""), 404, "not_found", "-")
	if _, err := e.c.Nodes[0].Node.Accounts.MailServer(t.Context(), e.p.ID); err == nil {
		t.Fatal("deleted settings still give a server (no operator default here)")
	}
}

// The operator may allow a loopback relay; without a secret key a
// password cannot be stored, but a relay without AUTH can.
func TestSMTPSettingsOperatorAllowancesAndNoKey(t *testing.T) {
	s := smtptest.Start(t)
	e := newMailEnv(t, nodetest.Options{AllowPrivateHosts: []string{"127.0.0.1"}, NoSecretKey: true})
	h := e.projectHeaders(e.p.OwnerToken)
	r := e.mustSend(t, http.MethodPut, "/api/auth/smtp", h,
		`{"host":"127.0.0.1","port":`+strconv.Itoa(s.Port())+`,"username":"u","password":"p","from":"noreply@example.com","security":"none"}`)
	checkError(t, r, 501, "secret_key_required", "password")
	checkError(t, e.mustSend(t, http.MethodGet, "/api/auth/smtp", h, ""), 404, "not_found", "-")
	r = e.mustSend(t, http.MethodPut, "/api/auth/smtp", h,
		`{"host":"127.0.0.1","port":`+strconv.Itoa(s.Port())+`,"from":"noreply@example.com","security":"none"}`)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"passwordSet":false`) {
		t.Fatalf("relay without auth: %d %s", r.Status, r.Body)
	}
	// Still refused: another loopback address the operator did not list.
	r = e.mustSend(t, http.MethodPut, "/api/auth/smtp", h, `{"host":"127.0.0.2","from":"noreply@example.com","security":"none"}`)
	checkError(t, r, 400, "invalid_argument", "host")
}

func TestEmailTemplates(t *testing.T) {
	e := newEnv(t)
	h := e.projectHeaders(e.p.OwnerToken)
	type tpl struct {
		Subject, Text, HTML string
		Custom              bool
	}
	list := func() map[string]tpl {
		t.Helper()
		r := e.mustSend(t, http.MethodGet, "/api/auth/email-templates", h, "")
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var out struct{ Templates map[string]tpl }
		mustDecode(t, r.Body, &out)
		return out.Templates
	}
	got := list()
	for _, k := range []string{"verification", "password-reset", "sign-in-code", "change-email"} {
		d, ok := got[k]
		if !ok || d.Custom || !strings.Contains(d.Text, "{{.Code}}") || !strings.Contains(d.HTML, "{{.Code}}") || d.Subject == "" {
			t.Errorf("default %s: %+v", k, d)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d kinds, want 4", len(got))
	}
	custom := `{"subject":"Code for {{.Project}}","text":"Use {{.Code}} within {{.ExpiresMinutes}} minutes.{{if .Link}} {{.Link}}{{end}}","html":"<p>{{.Code}}</p>"}`
	r := e.mustSend(t, http.MethodPut, "/api/auth/email-templates/sign-in-code", h, custom)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"custom":true`) || r.Header.Get("X-Revision") == "" {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	if g := list()["sign-in-code"]; !g.Custom || g.Subject != "Code for {{.Project}}" {
		t.Fatalf("after put: %+v", g)
	}
	before := list()
	ph := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
	put := func(name, kind, body string, status int, code, field string) scenario {
		return scenario{name: name, method: http.MethodPut, url: "/api/auth/email-templates/" + kind, headers: ph, body: body,
			status: status, code: code, field: field}
	}
	e.run(t, []scenario{
		put("subject does not parse", "sign-in-code", `{"subject":"{{.Code","text":"x"}`, 400, "invalid_argument", "subject"),
		put("text names an unknown field", "sign-in-code", `{"subject":"s","text":"{{.Password}}"}`, 400, "invalid_argument", "text"),
		put("html does not parse", "sign-in-code", `{"subject":"s","text":"x","html":"<p>{{if .Code}}</p>"}`, 400, "invalid_argument", "html"),
		put("html calls an undefined template", "sign-in-code", `{"subject":"s","text":"x","html":"{{template \"x\"}}"}`, 400, "invalid_argument", "html"),
		put("text fails to execute", "sign-in-code", `{"subject":"s","text":"{{index .Code 99}}"}`, 400, "invalid_argument", "text"),
		put("empty subject", "sign-in-code", `{"subject":" ","text":"x"}`, 400, "invalid_argument", "subject"),
		put("empty text", "sign-in-code", `{"subject":"s","text":""}`, 400, "invalid_argument", "text"),
		put("subject too long", "sign-in-code", `{"subject":"`+strings.Repeat("s", 501)+`","text":"x"}`, 400, "invalid_argument", "subject"),
		put("text a number", "sign-in-code", `{"subject":"s","text":5}`, 400, "invalid_argument", "text"),
		put("not JSON", "sign-in-code", `{`, 400, "invalid_json", ""),
		put("unknown kind", "welcome", `{"subject":"s","text":"x"}`, 404, "not_found", "kind"),
		{name: "unknown kind reset", method: http.MethodDelete, url: "/api/auth/email-templates/welcome", headers: ph, status: 404, code: "not_found", field: "kind"},
		{name: "user may not set", as: "user", method: http.MethodPut, url: "/api/auth/email-templates/sign-in-code", headers: ph,
			body: `{"subject":"s","text":"x"}`, status: 403, code: "forbidden"},
		{name: "user may not reset", as: "user", method: http.MethodDelete, url: "/api/auth/email-templates/sign-in-code", headers: ph, status: 403, code: "forbidden"},
		{name: "user may not list", as: "user", url: "/api/auth/email-templates", headers: ph, status: 403, code: "forbidden"},
		{name: "list no token", as: "none", url: "/api/auth/email-templates", headers: ph, status: 401, code: "missing_token"},
		{name: "list wrong method", method: http.MethodPost, url: "/api/auth/email-templates", headers: ph, status: 405, code: "method_not_allowed"},
		{name: "kind wrong method", method: http.MethodGet, url: "/api/auth/email-templates/sign-in-code", headers: ph, status: 405, code: "method_not_allowed"},
	})
	after := list()
	for k, b := range before {
		if after[k] != b {
			t.Errorf("refusals changed %s: %+v → %+v", k, b, after[k])
		}
	}
	r = e.mustSend(t, http.MethodDelete, "/api/auth/email-templates/sign-in-code", h, "")
	if r.Status != 200 || !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	if g := list()["sign-in-code"]; g.Custom || g != got["sign-in-code"] {
		t.Fatalf("after reset: %+v, want the default %+v", g, got["sign-in-code"])
	}
}
