package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// recorded is one request as the stand-in server saw it.
type recorded struct {
	method, path, query string
	header              http.Header
	body                map[string]any // nil: no body
}

// standIn answers every request with the status and body the test set and
// records it. It stands in only for the routes' wire format: the methods
// are also driven against a real node (TestAccountsOnANode); this table
// pins the exact request of every method, including those the real-node
// test reaches only through a browser (OAuth) or an emailed link.
type standIn struct {
	t   *testing.T
	srv *httptest.Server
	got chan recorded

	mu     sync.Mutex // the answer, set by the test, read by the handler
	status int
	answer string
	header http.Header
}

// answerWith sets the next answers.
func (s *standIn) answerWith(status int, answer string, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.answer, s.header = status, answer, header
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{t: t, got: make(chan recorded, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		rec := recorded{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery, header: r.Header.Clone()}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.body); err != nil {
				t.Errorf("body is not a JSON object: %q", b)
			}
		}
		s.got <- rec
		s.mu.Lock()
		status, answer, header := s.status, s.answer, s.header
		s.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestAccountsRequestShapes calls every method of client.Accounts against a
// stand-in server and checks the request (method, path, query, headers,
// JSON body) and that the answer is decoded into the result.
func TestAccountsRequestShapes(t *testing.T) {
	t.Parallel()
	s := newStandIn(t)
	a := &client.Accounts{BaseURL: s.srv.URL + "/", ProjectID: "p1", APIKey: "ebk_k"}
	ctx := context.Background()
	const tok = "ebt_tok"
	user := `{"id":"u1","email":"a@x.io","name":"A","role":"user","totpEnabled":false,"createdAt":"2030-01-01T00:00:00Z","emailVerified":true}`
	wantUser := &client.User{ID: "u1", Email: "a@x.io", Name: "A", Role: "user", CreatedAt: "2030-01-01T00:00:00Z", EmailVerified: true}
	session := `{"token":"ebt_new","user":` + user + `}`
	wantSession := &client.Session{Token: "ebt_new", User: *wantUser}
	login := `{"requiresTotp":true,"loginTicket":"ebl_t","expiresIn":300}`
	wantLogin := &client.LoginResult{RequiresTOTP: true, LoginTicket: "ebl_t", ExpiresIn: 300}
	act := func(name string, kv ...any) map[string]any {
		m := map[string]any{"action": name}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	f := false
	u := "https://app.x.io/auth"

	for _, c := range []struct {
		name   string
		call   func() (any, error)
		method string
		path   string
		query  string
		token  string // the bearer expected ("" none)
		body   map[string]any
		status int
		answer string
		want   any
	}{
		{"Register", func() (any, error) { return a.Register(ctx, "a@x.io", "pw", "A") }, "POST", "/api/auth", "", "",
			act("register", "email", "a@x.io", "password", "pw", "name", "A"), 201, session, wantSession},
		{"Login", func() (any, error) { return a.Login(ctx, "a@x.io", "pw") }, "POST", "/api/auth", "", "",
			act("login", "email", "a@x.io", "password", "pw"), 200, login, wantLogin},
		{"LoginVerify", func() (any, error) { return a.LoginVerify(ctx, "ebl_t", "123456") }, "POST", "/api/auth", "", "",
			act("login-verify", "loginTicket", "ebl_t", "code", "123456"), 200, session, wantSession},
		{"Logout", func() (any, error) { return nil, a.Logout(ctx, tok) }, "POST", "/api/auth", "", tok,
			act("logout"), 200, `{"ok":true}`, nil},
		{"Me", func() (any, error) { return a.Me(ctx, tok) }, "POST", "/api/auth", "", tok,
			act("me"), 200, `{"user":` + user + `}`, wantUser},
		{"ChangePassword", func() (any, error) { return a.ChangePassword(ctx, tok, "old", "new") }, "POST", "/api/auth", "", tok,
			act("change-password", "currentPassword", "old", "newPassword", "new"), 200, `{"ok":true,"token":"ebt_new","user":` + user + `}`, wantSession},
		{"Reauthenticate", func() (any, error) { return nil, a.Reauthenticate(ctx, tok, "pw", "123456") }, "POST", "/api/auth", "", tok,
			act("reauthenticate", "password", "pw", "code", "123456"), 200, `{"ok":true}`, nil},
		{"Reauthenticate without code", func() (any, error) { return nil, a.Reauthenticate(ctx, tok, "pw", "") }, "POST", "/api/auth", "", tok,
			act("reauthenticate", "password", "pw"), 200, `{"ok":true}`, nil},
		{"SetRole", func() (any, error) { return a.SetRole(ctx, tok, "u1", "owner") }, "POST", "/api/auth", "", tok,
			act("set-role", "userId", "u1", "role", "owner"), 200, `{"user":` + user + `}`, wantUser},
		{"EnrollTOTP", func() (any, error) { return a.EnrollTOTP(ctx, tok) }, "POST", "/api/authenticator/enroll", "", tok,
			map[string]any{}, 200, `{"secret":"S","otpauthUrl":"otpauth://x","qrPng":"Q"}`, &client.Enrollment{Secret: "S", OtpauthURL: "otpauth://x", QRPng: "Q"}},
		{"ConfirmTOTP", func() (any, error) { return a.ConfirmTOTP(ctx, tok, "123456") }, "POST", "/api/authenticator/confirm", "", tok,
			map[string]any{"code": "123456"}, 200, `{"totpEnabled":true,"recoveryCodes":["a","b"]}`, []string{"a", "b"}},
		{"DisableTOTP", func() (any, error) { return a.DisableTOTP(ctx, tok, "123456") }, "POST", "/api/auth", "", tok,
			act("disable-totp", "code", "123456"), 200, `{"totpEnabled":false,"user":` + user + `}`, wantUser},
		{"VerifyForReset", func() (any, error) { return a.VerifyForReset(ctx, "a@x.io", "123456") }, "POST", "/api/authenticator/verify", "", "",
			map[string]any{"email": "a@x.io", "code": "123456"}, 200, `{"verifyToken":"ebv_v","expiresIn":600}`, "ebv_v"},
		{"ResetPasswordWithVerifyToken", func() (any, error) { return nil, a.ResetPasswordWithVerifyToken(ctx, "a@x.io", "ebv_v", "new") }, "POST", "/api/auth", "", "",
			act("reset-password", "email", "a@x.io", "verifyToken", "ebv_v", "newPassword", "new"), 200, `{"ok":true}`, nil},
		{"ResetPasswordWithEmailCode", func() (any, error) { return nil, a.ResetPasswordWithEmailCode(ctx, "a@x.io", "123456", "new") }, "POST", "/api/auth", "", "",
			act("reset-password", "email", "a@x.io", "emailCode", "123456", "newPassword", "new"), 200, `{"ok":true}`, nil},
		{"ResetPasswordWithLink", func() (any, error) { return nil, a.ResetPasswordWithLink(ctx, "ebe_l", "new") }, "POST", "/api/auth", "", "",
			act("reset-password", "token", "ebe_l", "newPassword", "new"), 200, `{"ok":true}`, nil},
		{"RequestPasswordReset", func() (any, error) { return nil, a.RequestPasswordReset(ctx, "a@x.io") }, "POST", "/api/auth", "", "",
			act("request-password-reset", "email", "a@x.io"), 200, `{"ok":true}`, nil},
		{"SendVerification", func() (any, error) { return a.SendVerification(ctx, tok) }, "POST", "/api/auth", "", tok,
			act("send-verification"), 200, `{"ok":true,"alreadyVerified":true}`, true},
		{"VerifyEmail", func() (any, error) { return a.VerifyEmail(ctx, "a@x.io", "123456") }, "POST", "/api/auth", "", "",
			act("verify-email", "email", "a@x.io", "code", "123456"), 200, `{"user":` + user + `}`, wantUser},
		{"VerifyEmailLink", func() (any, error) { return a.VerifyEmailLink(ctx, "ebe_l") }, "POST", "/api/auth", "", "",
			act("verify-email", "token", "ebe_l"), 200, `{"user":` + user + `}`, wantUser},
		{"RequestEmailCode", func() (any, error) { return nil, a.RequestEmailCode(ctx, "a@x.io") }, "POST", "/api/auth", "", "",
			act("request-email-code", "email", "a@x.io"), 200, `{"ok":true}`, nil},
		{"LoginEmailCode", func() (any, error) { return a.LoginEmailCode(ctx, "a@x.io", "123456") }, "POST", "/api/auth", "", "",
			act("login-email-code", "email", "a@x.io", "code", "123456"), 200, login, wantLogin},
		{"LoginEmailLink", func() (any, error) { return a.LoginEmailLink(ctx, "ebe_l") }, "POST", "/api/auth", "", "",
			act("login-email-code", "token", "ebe_l"), 200, login, wantLogin},
		{"RequestEmailChange", func() (any, error) { return nil, a.RequestEmailChange(ctx, tok, "b@x.io") }, "POST", "/api/auth", "", tok,
			act("change-email", "newEmail", "b@x.io"), 200, `{"ok":true,"codeSent":true}`, nil},
		{"ConfirmEmailChange", func() (any, error) { return a.ConfirmEmailChange(ctx, tok, "b@x.io", "123456") }, "POST", "/api/auth", "", tok,
			act("change-email", "newEmail", "b@x.io", "code", "123456"), 200, `{"user":` + user + `}`, wantUser},
		{"ConfirmEmailChangeLink", func() (any, error) { return a.ConfirmEmailChangeLink(ctx, tok, "ebe_l") }, "POST", "/api/auth", "", tok,
			act("change-email", "token", "ebe_l"), 200, `{"user":` + user + `}`, wantUser},
		{"DeleteAccount", func() (any, error) { return nil, a.DeleteAccount(ctx, tok) }, "POST", "/api/auth", "", tok,
			act("delete-account"), 200, `{"ok":true,"deleted":true}`, nil},
		{"SignInAnonymously", func() (any, error) { return a.SignInAnonymously(ctx) }, "POST", "/api/auth", "", "",
			act("sign-in-anonymously"), 201, session, wantSession},
		{"LinkEmail", func() (any, error) { return a.LinkEmail(ctx, tok, "a@x.io", "pw") }, "POST", "/api/auth", "", tok,
			act("link-email", "email", "a@x.io", "password", "pw"), 200, session, wantSession},
		{"OAuthExchange", func() (any, error) { return a.OAuthExchange(ctx, "ebo_c") }, "POST", "/api/auth", "", "",
			act("oauth-exchange", "code", "ebo_c"), 200, login, wantLogin},
		{"OAuthLink", func() (any, error) { return a.OAuthLink(ctx, tok, "github", "https://app.x.io/cb") }, "POST", "/api/auth", "", tok,
			act("oauth-link", "provider", "github", "redirect", "https://app.x.io/cb"), 200, `{"url":"https://n/start"}`, "https://n/start"},
		{"OAuthProviders", func() (any, error) { return a.OAuthProviders(ctx) }, "GET", "/api/auth/oauth", "", "",
			nil, 200, `{"providers":[{"provider":"corp","issuer":"https://id.corp"}]}`, []client.OAuthProviderSummary{{Provider: "corp", Issuer: "https://id.corp"}}},
		{"SetOAuthProvider", func() (any, error) {
			return a.SetOAuthProvider(ctx, tok, "corp", client.OAuthProviderConfig{ClientID: "c", ClientSecret: "s", Issuer: "https://id.corp", Scopes: []string{"openid"}, RedirectURLs: []string{"https://app.x.io/cb"}})
		}, "PUT", "/api/auth/oauth/corp", "", tok,
			map[string]any{"clientId": "c", "clientSecret": "s", "issuer": "https://id.corp", "scopes": []any{"openid"}, "redirectUrls": []any{"https://app.x.io/cb"}}, 200,
			`{"provider":"corp","clientId":"c","issuer":"https://id.corp","scopes":["openid"],"redirectUrls":["https://app.x.io/cb"],"secretSet":true}`,
			&client.OAuthProviderInfo{Provider: "corp", ClientID: "c", Issuer: "https://id.corp", Scopes: []string{"openid"}, RedirectURLs: []string{"https://app.x.io/cb"}, SecretSet: true}},
		{"OAuthProvider", func() (any, error) { return a.OAuthProvider(ctx, tok, "git hub") }, "GET", "/api/auth/oauth/git%20hub", "", tok,
			nil, 200, `{"provider":"git hub","clientId":"c","issuer":"","scopes":null,"redirectUrls":[],"secretSet":true}`,
			&client.OAuthProviderInfo{Provider: "git hub", ClientID: "c", RedirectURLs: []string{}, SecretSet: true}},
		{"DeleteOAuthProvider", func() (any, error) { return nil, a.DeleteOAuthProvider(ctx, tok, "corp") }, "DELETE", "/api/auth/oauth/corp", "", tok,
			nil, 200, `{"ok":true}`, nil},
		{"ListSessions", func() (any, error) { return a.ListSessions(ctx, tok) }, "POST", "/api/auth", "", tok,
			act("list-sessions"), 200, `{"sessions":[{"id":"s1","createdAt":"c","lastUsedAt":"l","address":"192.0.2.1","userAgent":"ua","current":true}]}`,
			[]client.SessionInfo{{ID: "s1", CreatedAt: "c", LastUsedAt: "l", Address: "192.0.2.1", UserAgent: "ua", Current: true}}},
		{"RevokeSession", func() (any, error) { return nil, a.RevokeSession(ctx, tok, "s1") }, "POST", "/api/auth", "", tok,
			act("revoke-session", "sessionId", "s1"), 200, `{"ok":true}`, nil},
		{"ListUsers", func() (any, error) {
			return a.ListUsers(ctx, tok, client.UserQuery{Query: "a b", Cursor: "c1", Limit: 7})
		}, "GET", "/api/auth/users", "cursor=c1&limit=7&query=a+b", tok,
			nil, 200, `{"users":[` + user + `],"nextCursor":"c2"}`, &client.UserPage{Users: []client.User{*wantUser}, NextCursor: "c2"}},
		{"ListUsers without query", func() (any, error) { return a.ListUsers(ctx, tok, client.UserQuery{}) }, "GET", "/api/auth/users", "", tok,
			nil, 200, `{"users":[],"nextCursor":""}`, &client.UserPage{Users: []client.User{}}},
		{"GetUser", func() (any, error) { return a.GetUser(ctx, tok, "u/1") }, "GET", "/api/auth/users/u%2F1", "", tok,
			nil, 200, `{"user":` + user + `}`, wantUser},
		{"DisableUser", func() (any, error) { return a.DisableUser(ctx, tok, "u1") }, "POST", "/api/auth/users/u1/disable", "", tok,
			nil, 200, `{"user":` + user + `}`, wantUser},
		{"EnableUser", func() (any, error) { return a.EnableUser(ctx, tok, "u1") }, "POST", "/api/auth/users/u1/enable", "", tok,
			nil, 200, `{"user":` + user + `}`, wantUser},
		{"RevokeUserSessions", func() (any, error) { return nil, a.RevokeUserSessions(ctx, tok, "u1") }, "POST", "/api/auth/users/u1/revoke-sessions", "", tok,
			nil, 200, `{"ok":true}`, nil},
		{"DeleteUser", func() (any, error) { return nil, a.DeleteUser(ctx, tok, "u1") }, "DELETE", "/api/auth/users/u1", "", tok,
			nil, 200, `{"ok":true,"deleted":true}`, nil},
		{"CreateAPIKey", func() (any, error) { return a.CreateAPIKey(ctx, tok, "ci") }, "POST", "/api/keys", "", tok,
			map[string]any{"name": "ci"}, 201, `{"id":"k1","name":"ci","key":"ebk_x","createdAt":"c"}`, &client.NewAPIKey{ID: "k1", Name: "ci", Key: "ebk_x", CreatedAt: "c"}},
		{"ListAPIKeys", func() (any, error) { return a.ListAPIKeys(ctx, tok) }, "GET", "/api/keys", "", tok,
			nil, 200, `{"keys":[{"id":"default","name":"default","createdAt":"c","prefix":"ebk_ab"}]}`, []client.APIKey{{ID: "default", Name: "default", CreatedAt: "c", Prefix: "ebk_ab"}}},
		{"DeleteAPIKey", func() (any, error) { return nil, a.DeleteAPIKey(ctx, tok, "k1") }, "DELETE", "/api/keys/k1", "", tok,
			nil, 200, `{"ok":true}`, nil},
		{"ListAudit", func() (any, error) {
			return a.ListAudit(ctx, tok, client.AuditQuery{Cursor: "01-ab", Limit: 5, UserID: "u1", Type: "login"})
		}, "GET", "/api/auth/audit", "cursor=01-ab&limit=5&type=login&userId=u1", tok,
			nil, 200, `{"events":[{"id":"e1","time":"t","type":"login","userId":"u1","actorId":"u1","address":"a","detail":{"method":"password"}}],"nextCursor":"e1"}`,
			&client.AuditPage{Events: []client.AuditEvent{{ID: "e1", Time: "t", Type: "login", UserID: "u1", ActorID: "u1", Address: "a", Detail: map[string]string{"method": "password"}}}, NextCursor: "e1"}},
		{"SetSMTP", func() (any, error) {
			return a.SetSMTP(ctx, tok, client.SMTPSettings{Host: "smtp.x.io", Port: 587, Username: "u", Password: "p", From: "n@x.io", FromName: "X", Security: "starttls"})
		}, "PUT", "/api/auth/smtp", "", tok,
			map[string]any{"host": "smtp.x.io", "port": 587.0, "username": "u", "password": "p", "from": "n@x.io", "fromName": "X", "security": "starttls"}, 200,
			`{"host":"smtp.x.io","port":587,"username":"u","from":"n@x.io","fromName":"X","security":"starttls","passwordSet":true}`,
			&client.SMTPView{Host: "smtp.x.io", Port: 587, Username: "u", From: "n@x.io", FromName: "X", Security: "starttls", PasswordSet: true}},
		{"SMTP", func() (any, error) { return a.SMTP(ctx, tok) }, "GET", "/api/auth/smtp", "", tok,
			nil, 200, `{"host":"h","port":25,"username":"","from":"f@x.io","fromName":"","security":"none","passwordSet":false}`,
			&client.SMTPView{Host: "h", Port: 25, From: "f@x.io", Security: "none"}},
		{"DeleteSMTP", func() (any, error) { return nil, a.DeleteSMTP(ctx, tok) }, "DELETE", "/api/auth/smtp", "", tok,
			nil, 200, `{"ok":true}`, nil},
		{"EmailTemplates", func() (any, error) { return a.EmailTemplates(ctx, tok) }, "GET", "/api/auth/email-templates", "", tok,
			nil, 200, `{"templates":{"verification":{"subject":"s","text":"t","html":"h","custom":true}}}`,
			map[string]client.EmailTemplate{"verification": {Subject: "s", Text: "t", HTML: "h", Custom: true}}},
		{"SetEmailTemplate", func() (any, error) {
			return a.SetEmailTemplate(ctx, tok, "sign-in-code", client.EmailTemplate{Subject: "s", Text: "t", HTML: "", Custom: true})
		}, "PUT", "/api/auth/email-templates/sign-in-code", "", tok,
			map[string]any{"subject": "s", "text": "t", "html": ""}, 200, `{"subject":"s","text":"t","html":"","custom":true}`,
			&client.EmailTemplate{Subject: "s", Text: "t", Custom: true}},
		{"ResetEmailTemplate", func() (any, error) { return a.ResetEmailTemplate(ctx, tok, "sign-in-code") }, "DELETE", "/api/auth/email-templates/sign-in-code", "", tok,
			nil, 200, `{"subject":"d","text":"d","html":"d","custom":false}`, &client.EmailTemplate{Subject: "d", Text: "d", HTML: "d"}},
		{"AuthSettings", func() (any, error) { return a.AuthSettings(ctx, tok) }, "GET", "/api/auth/settings", "", tok,
			nil, 200, `{"anonymousSignIn":true,"emailActionUrl":""}`, &client.AuthSettings{AnonymousSignIn: true}},
		{"SetAuthSettings", func() (any, error) {
			return a.SetAuthSettings(ctx, tok, client.AuthSettingsPatch{AnonymousSignIn: &f, EmailActionURL: &u})
		}, "PUT", "/api/auth/settings", "", tok,
			map[string]any{"anonymousSignIn": false, "emailActionUrl": u}, 200, `{"anonymousSignIn":false,"emailActionUrl":"` + u + `"}`,
			&client.AuthSettings{EmailActionURL: u}},
		{"SetAuthSettings one", func() (any, error) { return a.SetAuthSettings(ctx, tok, client.AuthSettingsPatch{AnonymousSignIn: &f}) }, "PUT", "/api/auth/settings", "", tok,
			map[string]any{"anonymousSignIn": false}, 200, `{"anonymousSignIn":false,"emailActionUrl":""}`, &client.AuthSettings{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.answerWith(c.status, c.answer, nil)
			got, err := c.call()
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := <-s.got
			if r.method != c.method || r.path != c.path || r.query != c.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.method, r.path, r.query, c.method, c.path, c.query)
			}
			if r.header.Get("X-Project-Id") != "p1" || r.header.Get("X-API-Key") != "ebk_k" {
				t.Errorf("project headers %q %q", r.header.Get("X-Project-Id"), r.header.Get("X-API-Key"))
			}
			wantAuth := ""
			if c.token != "" {
				wantAuth = "Bearer " + c.token
			}
			if got := r.header.Get("Authorization"); got != wantAuth {
				t.Errorf("Authorization %q, want %q", got, wantAuth)
			}
			if (c.body != nil) != (r.header.Get("Content-Type") == "application/json") {
				t.Errorf("Content-Type %q with body %v", r.header.Get("Content-Type"), c.body)
			}
			if !reflect.DeepEqual(r.body, c.body) {
				t.Errorf("body %v, want %v", r.body, c.body)
			}
			if c.want != nil && !reflect.DeepEqual(deref(got), deref(c.want)) {
				t.Errorf("answer %#v, want %#v", deref(got), deref(c.want))
			}
		})
	}
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

// TestAccountsErrors: a refusal becomes an *APIError with the server's
// status, code, message, field and Retry-After; an answer that is not the
// error shape keeps its text; a success that is not JSON is an error.
func TestAccountsErrors(t *testing.T) {
	t.Parallel()
	s := newStandIn(t)
	a := &client.Accounts{BaseURL: s.srv.URL, ProjectID: "p1", APIKey: "k"}
	ctx := context.Background()

	s.answerWith(429, `{"error":{"code":"rate_limited","message":"too many attempts","field":"email"}}`, http.Header{"Retry-After": {"42"}})
	_, err := a.Login(ctx, "a@x.io", "pw")
	<-s.got
	var ae *client.APIError
	if !errors.As(err, &ae) || *ae != (client.APIError{Status: 429, Code: "rate_limited", Message: "too many attempts", Field: "email", RetryAfter: 42 * time.Second}) {
		t.Fatalf("429: %#v", err)
	}
	if !strings.Contains(err.Error(), "rate_limited") || !strings.Contains(err.Error(), "(email)") {
		t.Errorf("message %q", err.Error())
	}

	s.answerWith(502, "<html>bad gateway</html>", nil)
	err = a.Logout(ctx, "t")
	<-s.got
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "http_502" || ae.Message != "<html>bad gateway</html>" {
		t.Fatalf("502: %#v", err)
	}

	s.answerWith(200, "not json", nil)
	_, err = a.Me(ctx, "t")
	<-s.got
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("a 200 that is not JSON: %v", err)
	}

	// A server that is not there is a transport error, not an APIError.
	gone := &client.Accounts{BaseURL: "http://127.0.0.1:1"}
	if _, err := gone.Me(ctx, "t"); err == nil || errors.As(err, &ae) {
		t.Fatalf("no server: %v", err)
	}

	// OAuthStartURL is where a browser goes: no request is made.
	if got, want := a.OAuthStartURL("corp", "https://app.x.io/cb?x=1"), s.srv.URL+"/api/auth/oauth/corp/start?projectId=p1&redirect=https%3A%2F%2Fapp.x.io%2Fcb%3Fx%3D1"; got != want {
		t.Errorf("OAuthStartURL %q, want %q", got, want)
	}
}
