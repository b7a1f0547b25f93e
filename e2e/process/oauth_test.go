package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/oidcpeer"
)

// OAuth / OIDC sign-in on a 3-node process cluster against a real OpenID
// provider (zitadel's OP, e2e/oidcpeer). Browsers reach the cluster at its
// public URL, a reverse proxy in front of n1 (so every callback lands on
// n1), while sign-ins start on n2 and the app exchanges its code on n3: each
// step reads what another node committed.

const (
	oauthApp      = "https://app.example.com/done"
	oauthClientID = "edgebase-e2e"
	oauthSecret   = "edgebase-e2e-secret"
)

// oauthBrowser is a browser: cookies, redirects followed, except the last
// one to the app, which it reports.
func oauthBrowser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := url.Parse(oauthApp)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host == app.Host {
			return http.ErrUseLastResponse
		}
		if len(via) > 10 {
			return fmt.Errorf("redirect loop at %s", req.URL)
		}
		return nil
	}}
}

// mustOAuthBrowse opens start (edgebase's start URL or an oauth-link URL),
// logs in at peer as email and returns the app redirect's query.
func mustOAuthBrowse(t *testing.T, ctx context.Context, peer *oidcpeer.Peer, start, email string) url.Values {
	t.Helper()
	client := oauthBrowser(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, start, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("open %s: %v", start, err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open %s: status %d: %.300s", start, resp.StatusCode, page)
	}
	resp, err = peer.Login(ctx, client, resp.Request.URL, page, email)
	if err != nil {
		t.Fatalf("log in at the provider as %s: %v", email, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, oauthApp+"?") {
		t.Fatalf("after the provider's login: status %d, Location %q, want the app: %.300s", resp.StatusCode, loc, body)
	}
	u, _ := url.Parse(loc)
	return u.Query()
}

func TestOAuthAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	bin, err := oidcpeer.Binary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The public URL: a proxy to n1, known before the nodes start.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	var target atomic.Pointer[url.URL]
	proxy := &http.Server{Handler: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target.Load())
	}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })

	callback := func(provider string) []string { return []string{public + "/api/auth/oauth/" + provider + "/callback"} }
	corp := oidcpeer.Start(t, bin, oidcpeer.Options{ClientID: oauthClientID, ClientSecret: oauthSecret, RedirectURIs: callback("corp"),
		UserEmail: "new@example.com", Users: []string{"ada@example.com", "bob@example.com:unverified", "anon@example.com"}})
	wrongAud := oidcpeer.Start(t, bin, oidcpeer.Options{ClientID: oauthClientID, ClientSecret: oauthSecret, RedirectURIs: callback("aud"),
		UserEmail: "aud@example.com", Audience: "another-client"})
	expired := oidcpeer.Start(t, bin, oidcpeer.Options{ClientID: oauthClientID, ClientSecret: oauthSecret, RedirectURIs: callback("exp"),
		UserEmail: "exp@example.com", IDTokenLifetime: -time.Minute})

	c := mustStartCluster(t, ctx, clusterOpts{env: []string{"EDGEBASE_SECRET_KEY_FILE=" + keyFile,
		"EDGEBASE_ALLOW_PRIVATE_HOSTS=127.0.0.1", "EDGEBASE_PUBLIC_URL=" + public}})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	n1URL, _ := url.Parse(n1.url())
	target.Store(n1URL)
	pr := c.mustCreateProject(n1)
	key := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	bearer := func(tok string) map[string]string {
		return map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey, "Authorization": "Bearer " + tok}
	}
	call := func(p *proc, method, path string, headers map[string]string, body any) *response {
		t.Helper()
		r, err := doJSON(ctx, httpClient, 30*time.Second, method, p.url()+path, headers, body)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", method, path, p.id, err)
		}
		return r
	}
	type userBody struct {
		ID            string   `json:"id"`
		Email         string   `json:"email"`
		EmailVerified bool     `json:"emailVerified"`
		Anonymous     bool     `json:"anonymous"`
		Providers     []string `json:"providers"`
	}
	type session struct {
		Token string   `json:"token"`
		User  userBody `json:"user"`
	}
	for name, peer := range map[string]*oidcpeer.Peer{"corp": corp, "aud": wrongAud, "exp": expired} {
		r := call(n3, http.MethodPut, "/api/auth/oauth/"+name, pr.Headers(), map[string]any{"clientId": oauthClientID, "clientSecret": oauthSecret,
			"issuer": peer.Issuer, "redirectUrls": []string{oauthApp}})
		if r.status != http.StatusOK {
			t.Fatalf("configure %s: %s", name, r)
		}
	}
	if r := call(n2, http.MethodGet, "/api/auth/oauth", key, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"provider":"corp"`) {
		t.Fatalf("providers on n2: %s", r)
	}
	start := func(p *proc, provider string) string {
		return p.url() + "/api/auth/oauth/" + provider + "/start?projectId=" + url.QueryEscape(pr.ID) + "&redirect=" + url.QueryEscape(oauthApp)
	}
	exchange := func(p *proc, code string) *response {
		return call(p, http.MethodPost, "/api/auth", key, map[string]string{"action": "oauth-exchange", "code": code})
	}
	mustExchange := func(p *proc, q url.Values) session {
		t.Helper()
		if q.Get("code") == "" {
			t.Fatalf("app redirect %v has no code", q)
		}
		r := exchange(p, q.Get("code"))
		var s session
		if r.status != http.StatusOK || json.Unmarshal(r.body, &s) != nil || s.Token == "" {
			t.Fatalf("oauth-exchange on %s: %s", p.id, r)
		}
		return s
	}

	// A new user: start on n2, callback on n1, exchange on n3, session on n2.
	t0 := time.Now()
	q := mustOAuthBrowse(t, ctx, corp, start(n2, "corp"), "new@example.com")
	t1 := time.Now()
	s := mustExchange(n3, q)
	t.Logf("sign-in of a new user: browser from start to the app %v (start, provider login, callback with discovery, token, keys and userinfo), oauth-exchange %v",
		t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if s.User.Email != "new@example.com" || !s.User.EmailVerified || len(s.User.Providers) != 1 || s.User.Providers[0] != "corp" {
		t.Fatalf("new account = %+v", s.User)
	}
	if r := call(n2, http.MethodPost, "/api/auth", bearer(s.Token), map[string]string{"action": "me"}); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), s.User.ID) {
		t.Fatalf("me on n2 with the new session: %s", r)
	}
	// The code was used: a replay on any node is invalid_code.
	if r := exchange(n2, q.Get("code")); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"invalid_code"`) {
		t.Fatalf("replayed code on n2: %s", r)
	}
	// A forged state is refused as JSON, not redirected.
	if r := call(n1, http.MethodGet, "/api/auth/oauth/corp/callback?state=ebs_forged&code=x", nil, nil); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), `"invalid_state"`) {
		t.Fatalf("forged state: %s", r)
	}

	// A password account whose address the provider verifies is linked.
	reg := call(n1, http.MethodPost, "/api/auth", key, map[string]string{"action": "register", "email": "ada@example.com", "password": "ada password 12345"})
	var ada session
	if reg.status != http.StatusCreated || json.Unmarshal(reg.body, &ada) != nil {
		t.Fatalf("register ada: %s", reg)
	}
	if s := mustExchange(n2, mustOAuthBrowse(t, ctx, corp, start(n3, "corp"), "ada@example.com")); s.User.ID != ada.User.ID {
		t.Fatalf("ada signed in to %s, want her account %s", s.User.ID, ada.User.ID)
	}
	// An unverified address that matches an account is refused.
	if r := call(n1, http.MethodPost, "/api/auth", key, map[string]string{"action": "register", "email": "bob@example.com", "password": "bob password 12345"}); r.status != http.StatusCreated {
		t.Fatalf("register bob: %s", r)
	}
	if q := mustOAuthBrowse(t, ctx, corp, start(n2, "corp"), "bob@example.com"); q.Get("error") != "account_exists_unverified" || q.Get("code") != "" {
		t.Fatalf("unverified address of an account: app got %v", q)
	}
	if r := call(n3, http.MethodPost, "/api/auth", key, map[string]string{"action": "login", "email": "bob@example.com", "password": "bob password 12345"}); r.status != http.StatusOK {
		t.Fatalf("bob's password after the refusal: %s", r)
	}

	// A validly signed ID token for another client, and an expired one.
	if q := mustOAuthBrowse(t, ctx, wrongAud, start(n2, "aud"), "aud@example.com"); q.Get("error") != "invalid_id_token" || q.Get("code") != "" {
		t.Fatalf("ID token for another audience: app got %v", q)
	}
	if q := mustOAuthBrowse(t, ctx, expired, start(n3, "exp"), "exp@example.com"); q.Get("error") != "invalid_id_token" || q.Get("code") != "" {
		t.Fatalf("expired ID token: app got %v", q)
	}

	// An anonymous user links the provider and keeps uid and data.
	r := call(n2, http.MethodPost, "/api/auth", key, map[string]string{"action": "sign-in-anonymously"})
	if r.status == http.StatusNotImplemented {
		t.Logf("sign-in-anonymously is not built: the anonymous upgrade is not tested here")
		return
	}
	var anon session
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &anon) != nil || !anon.User.Anonymous {
		t.Fatalf("sign-in-anonymously: %s", r)
	}
	coll := "users/" + anon.User.ID + "/notes/n1"
	if r := call(n2, http.MethodPost, "/api/db", bearer(anon.Token), map[string]any{"collection": coll, "data": map[string]string{"text": "mine"}}); r.status != http.StatusCreated {
		t.Fatalf("anonymous write: %s", r)
	}
	r = call(n3, http.MethodPost, "/api/auth", bearer(anon.Token), map[string]string{"action": "oauth-link", "provider": "corp", "redirect": oauthApp})
	var link struct {
		URL string `json:"url"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &link) != nil || link.URL == "" {
		t.Fatalf("oauth-link: %s", r)
	}
	up := mustExchange(n1, mustOAuthBrowse(t, ctx, corp, link.URL, "anon@example.com"))
	if up.User.ID != anon.User.ID || up.User.Anonymous || up.User.Email != "anon@example.com" || !up.User.EmailVerified {
		t.Fatalf("upgraded account = %+v, want uid %s, not anonymous, with the provider's address", up.User, anon.User.ID)
	}
	if r := call(n2, http.MethodGet, "/api/db?collection="+url.QueryEscape(coll), bearer(up.Token), nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "mine") {
		t.Fatalf("the upgraded user's data: %s", r)
	}
}
