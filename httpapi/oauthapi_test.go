package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The OAuth routes with bad input, on a real node. GitHub needs no discovery
// (its endpoints are fixed), so a project can configure it offline and start
// sign-ins whose redirects the tests read; the flows against a real OpenID
// provider are in auth/oauth_test.go and e2e/process/oauth_test.go.

const oauthAppURL = "https://app.example.com/signed-in"

// noFollow is a client that shows redirects instead of following them.
var noFollow = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}}

func (e *env) browserGet(t *testing.T, method, target, contentType, body string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func TestOAuthRoutesRefusals(t *testing.T) {
	e := newEnv(t)
	key := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}
	owner := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + e.p.OwnerToken}
	user := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + e.user.Token}
	good := `{"clientId":"gh-client","clientSecret":"gh-secret-value","redirectUrls":["` + oauthAppURL + `"]}`

	listed := func() []string {
		t.Helper()
		r := e.mustSend(t, http.MethodGet, "/api/auth/oauth", key, "")
		if r.Status != http.StatusOK {
			t.Fatalf("list providers: %d %s", r.Status, r.Body)
		}
		var out struct {
			Providers []struct{ Provider, Issuer string }
		}
		mustDecode(t, r.Body, &out)
		var names []string
		for _, p := range out.Providers {
			names = append(names, p.Provider)
		}
		return names
	}

	for _, c := range []struct {
		name, method, path string
		headers            map[string]string
		body               string
		status             int
		code, field        string
	}{
		{"bad provider name", "PUT", "/api/auth/oauth/Bad_Name", owner, good, 400, "invalid_argument", "provider"},
		{"name too long", "PUT", "/api/auth/oauth/" + strings.Repeat("a", 33), owner, good, 400, "invalid_argument", "provider"},
		{"no client id", "PUT", "/api/auth/oauth/github", owner, `{"clientSecret":"s","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "clientId"},
		{"no redirect urls", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","clientSecret":"s"}`, 400, "invalid_argument", "redirectUrls"},
		{"empty redirect urls", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","clientSecret":"s","redirectUrls":[]}`, 400, "invalid_argument", "redirectUrls"},
		{"javascript redirect", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","clientSecret":"s","redirectUrls":["javascript:alert(1)"]}`, 400, "invalid_argument", "redirectUrls[0]"},
		{"plain http redirect", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","clientSecret":"s","redirectUrls":["http://app.example.com/x"]}`, 400, "invalid_argument", "redirectUrls[0]"},
		{"no secret", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "clientSecret"},
		{"github with issuer", "PUT", "/api/auth/oauth/github", owner, `{"clientId":"c","clientSecret":"s","issuer":"https://github.com","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "issuer"},
		{"custom without issuer", "PUT", "/api/auth/oauth/corp", owner, good, 400, "invalid_argument", "issuer"},
		{"private issuer", "PUT", "/api/auth/oauth/corp", owner, `{"clientId":"c","clientSecret":"s","issuer":"http://127.0.0.1:9","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "issuer"},
		{"private issuer https", "PUT", "/api/auth/oauth/corp", owner, `{"clientId":"c","clientSecret":"s","issuer":"https://10.1.2.3","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "issuer"},
		{"issuer not a url", "PUT", "/api/auth/oauth/corp", owner, `{"clientId":"c","clientSecret":"s","issuer":"ftp://x","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "issuer"},
		{"google elsewhere", "PUT", "/api/auth/oauth/google", owner, `{"clientId":"c","clientSecret":"s","issuer":"https://evil.example","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "issuer"},
		{"wrong type", "PUT", "/api/auth/oauth/github", owner, `{"clientId":5,"clientSecret":"s","redirectUrls":["` + oauthAppURL + `"]}`, 400, "invalid_argument", "clientId"},
		{"not an owner", "PUT", "/api/auth/oauth/github", user, good, 403, "forbidden", ""},
		{"no bearer", "PUT", "/api/auth/oauth/github", key, good, 401, "missing_token", ""},
		{"no key", "PUT", "/api/auth/oauth/github", map[string]string{"Authorization": "Bearer " + e.p.OwnerToken}, good, 401, "missing_api_key", ""},
		{"unknown provider", "GET", "/api/auth/oauth/github", owner, "", 404, "not_found", "provider"},
		{"user reads", "GET", "/api/auth/oauth/github", user, "", 403, "forbidden", ""},
		{"delete unknown", "DELETE", "/api/auth/oauth/github", owner, "", 404, "not_found", "provider"},
		{"post provider", "POST", "/api/auth/oauth/github", owner, good, 405, "method_not_allowed", ""},
		{"put list", "PUT", "/api/auth/oauth", owner, good, 405, "method_not_allowed", ""},
		{"list without key", "GET", "/api/auth/oauth", nil, "", 401, "missing_api_key", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.mustSend(t, c.method, c.path, c.headers, c.body)
			checkError(t, r, c.status, c.code, c.field)
		})
	}
	if names := listed(); len(names) != 0 {
		t.Fatalf("refused configurations were stored: %v", names)
	}

	// A good configuration: the secret is never shown.
	r := e.mustSend(t, http.MethodPut, "/api/auth/oauth/github", owner, good)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "gh-secret-value") || r.Header.Get("X-Revision") == "" {
		t.Fatalf("configure github: %d %s", r.Status, r.Body)
	}
	var info struct {
		Provider, ClientID, Issuer, CallbackURL string
		Scopes, RedirectURLs                    []string
		SecretSet                               bool
	}
	mustDecode(t, r.Body, &info)
	if info.Provider != "github" || info.ClientID != "gh-client" || !info.SecretSet || len(info.Scopes) == 0 ||
		len(info.RedirectURLs) != 1 || info.CallbackURL != e.base+"/api/auth/oauth/github/callback" {
		t.Fatalf("configured = %+v", info)
	}
	// A change without the secret keeps it.
	r = e.mustSend(t, http.MethodPut, "/api/auth/oauth/github", owner, `{"clientId":"gh-client-2","redirectUrls":["`+oauthAppURL+`","com.example.app:/cb"]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"secretSet":true`) {
		t.Fatalf("change without secret: %d %s", r.Status, r.Body)
	}
	if r = e.mustSend(t, http.MethodGet, "/api/auth/oauth/github", owner, ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "gh-client-2") ||
		strings.Contains(string(r.Body), "gh-secret-value") {
		t.Fatalf("read provider: %d %s", r.Status, r.Body)
	}
	if names := listed(); len(names) != 1 || names[0] != "github" {
		t.Fatalf("providers = %v", names)
	}

	// start: bad input is JSON; a good start is a redirect with state and PKCE.
	startPath := func(pid, provider, redirect string) string {
		return "/api/auth/oauth/" + provider + "/start?projectId=" + url.QueryEscape(pid) + "&redirect=" + url.QueryEscape(redirect)
	}
	for _, c := range []struct {
		name, target string
		status       int
		code, field  string
	}{
		{"no project", "/api/auth/oauth/github/start?redirect=" + url.QueryEscape(oauthAppURL), 400, "invalid_argument", "projectId"},
		{"no redirect", "/api/auth/oauth/github/start?projectId=" + e.p.ID, 400, "invalid_argument", "redirect"},
		{"unknown project", startPath("nope", "github", oauthAppURL), 404, "not_found", ""},
		{"unknown provider", startPath(e.p.ID, "google", oauthAppURL), 404, "not_found", "provider"},
		{"bad provider", startPath(e.p.ID, "Bad_Name", oauthAppURL), 404, "not_found", "provider"},
		{"redirect not allowed", startPath(e.p.ID, "github", "https://evil.example/steal"), 400, "invalid_argument", "redirect"},
		{"redirect prefix only", startPath(e.p.ID, "github", oauthAppURL+"/more"), 400, "invalid_argument", "redirect"},
	} {
		t.Run("start "+c.name, func(t *testing.T) {
			checkError(t, e.browserGet(t, http.MethodGet, c.target, "", ""), c.status, c.code, c.field)
		})
	}
	if r := e.browserGet(t, http.MethodPost, startPath(e.p.ID, "github", oauthAppURL), "", ""); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST start: %d", r.Status)
	}
	r = e.browserGet(t, http.MethodGet, startPath(e.p.ID, "github", oauthAppURL), "", "")
	if r.Status != http.StatusFound || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("start: %d %v %s", r.Status, r.Header, r.Body)
	}
	to, err := url.Parse(r.Header.Get("Location"))
	if err != nil || to.Host != "github.com" || to.Path != "/login/oauth/authorize" {
		t.Fatalf("start redirected to %q", r.Header.Get("Location"))
	}
	q := to.Query()
	state := q.Get("state")
	if state == "" || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 || q.Get("client_id") != "gh-client-2" ||
		q.Get("redirect_uri") != e.base+"/api/auth/oauth/github/callback" {
		t.Fatalf("authorization URL %s lacks state, PKCE or the client", to)
	}

	// callback: a bad state is JSON; a state of another provider is bad too.
	for _, c := range []struct{ name, target string }{
		{"no state", "/api/auth/oauth/github/callback?code=abc"},
		{"unknown state", "/api/auth/oauth/github/callback?code=abc&state=ebs_forged"},
		{"other provider", "/api/auth/oauth/google/callback?code=abc&state=" + url.QueryEscape(state)},
	} {
		t.Run("callback "+c.name, func(t *testing.T) {
			checkError(t, e.browserGet(t, http.MethodGet, c.target, "", ""), 400, "invalid_state", "state")
		})
	}
	if r := e.browserGet(t, http.MethodPost, "/api/auth/oauth/github/callback", "application/json", `{"state":"x"}`); r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("JSON posted to the callback: %d %s", r.Status, r.Body)
	}
	// The provider's refusal reaches the app (form_post as Apple sends it),
	// and uses up the state.
	form := url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {"the user said no"}}.Encode()
	r = e.browserGet(t, http.MethodPost, "/api/auth/oauth/github/callback", "application/x-www-form-urlencoded", form)
	back, err := url.Parse(r.Header.Get("Location"))
	if r.Status != http.StatusFound || err != nil || !strings.HasPrefix(back.String(), oauthAppURL+"?") ||
		back.Query().Get("error") != "access_denied" || back.Query().Get("code") != "" {
		t.Fatalf("refused at the provider: %d, Location %q", r.Status, r.Header.Get("Location"))
	}
	checkError(t, e.browserGet(t, http.MethodGet, "/api/auth/oauth/github/callback?code=abc&state="+url.QueryEscape(state), "", ""), 400, "invalid_state", "state")

	// oauth-exchange and oauth-link refusals.
	for _, c := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
		field   string
	}{
		{"exchange without code", key, `{"action":"oauth-exchange"}`, 400, "invalid_argument", "code"},
		{"exchange forged code", key, `{"action":"oauth-exchange","code":"ebo_forged"}`, 400, "invalid_code", "code"},
		{"exchange code wrong type", key, `{"action":"oauth-exchange","code":7}`, 400, "invalid_argument", "code"},
		{"link without bearer", key, `{"action":"oauth-link","provider":"github","redirect":"` + oauthAppURL + `"}`, 401, "missing_token", ""},
		{"link without provider", user, `{"action":"oauth-link","redirect":"` + oauthAppURL + `"}`, 400, "invalid_argument", "provider"},
		{"link without redirect", user, `{"action":"oauth-link","provider":"github"}`, 400, "invalid_argument", "redirect"},
		{"link unknown provider", user, `{"action":"oauth-link","provider":"apple","redirect":"` + oauthAppURL + `"}`, 404, "not_found", "provider"},
		{"link bad redirect", user, `{"action":"oauth-link","provider":"github","redirect":"https://evil.example/"}`, 400, "invalid_argument", "redirect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkError(t, e.mustSend(t, http.MethodPost, "/api/auth", c.headers, c.body), c.status, c.code, c.field)
		})
	}
	r = e.mustSend(t, http.MethodPost, "/api/auth", user, `{"action":"oauth-link","provider":"github","redirect":"`+oauthAppURL+`"}`)
	var link struct{ URL string }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &link) != nil || !strings.HasPrefix(link.URL, "https://github.com/login/oauth/authorize?") {
		t.Fatalf("oauth-link: %d %s", r.Status, r.Body)
	}

	// Deleted, the provider is gone for reading and starting.
	if r := e.mustSend(t, http.MethodDelete, "/api/auth/oauth/github", owner, ""); r.Status != http.StatusOK || string(r.Body) != "{\"ok\":true}\n" {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	checkError(t, e.mustSend(t, http.MethodGet, "/api/auth/oauth/github", owner, ""), 404, "not_found", "provider")
	checkError(t, e.browserGet(t, http.MethodGet, startPath(e.p.ID, "github", oauthAppURL), "", ""), 404, "not_found", "provider")
	if names := listed(); len(names) != 0 {
		t.Fatalf("providers after delete = %v", names)
	}
}
