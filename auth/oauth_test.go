package auth_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/oidcpeer"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// The OAuth tests sign in against a real OpenID provider (zitadel's OP, run
// by internal/oidcpeer) through a second auth.Service over a real one-node
// cluster's store: that service allows the loopback provider, knows a
// public URL and has a clock the tests move. The browser is an http.Client
// with a cookie jar that fills in the provider's login form and stops at
// edgebase's callback, which the test then hands to the service.

const (
	oauthPublic   = "http://edgebase.test"
	oauthProvider = "corp"
	oauthApp      = "https://app.example.com/done"
	peerClientID  = "edgebase-client"
	peerSecret    = "edgebase-client-secret"
)

var (
	peerOnce sync.Once
	peerPath string
	peerErr  error
)

// mustPeerBinary builds (once per test binary) or finds the provider.
func mustPeerBinary(t *testing.T) string {
	t.Helper()
	peerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oidcpeer-bin")
		if err != nil {
			peerErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		peerPath, peerErr = oidcpeer.Binary(ctx, dir)
	})
	if peerErr != nil {
		t.Fatalf("oidcpeer binary: %v", peerErr)
	}
	return peerPath
}

type oauthFixture struct {
	t     *testing.T
	clk   *nodetest.Clock
	svc   *auth.Service
	store *raftstore.Store
	pid   string
	owner *auth.Principal
	peer  *oidcpeer.Peer
}

// newOAuthFixture starts a one-node cluster, a provider with opts (client
// and redirect filled in), a project and its "corp" provider.
func newOAuthFixture(t *testing.T, opts oidcpeer.Options) *oauthFixture {
	t.Helper()
	return newOAuthFixtureLimits(t, opts, nil)
}

func newOAuthFixtureLimits(t *testing.T, opts oidcpeer.Options, limits *auth.Limits) *oauthFixture {
	t.Helper()
	bin := mustPeerBinary(t)
	clk := nodetest.NewClock(time.Now().UTC().Truncate(time.Second))
	c := nodetest.Start(t, nodetest.Options{Clock: clk})
	n := c.Nodes[0].Node
	key, err := auth.ParseSecretKey(nodetest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := auth.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := auth.NewHostPolicy([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := auth.NewService(auth.Config{Store: n.Store, Clock: clk, Sealer: sealer, HostPolicy: policy, PublicURL: oauthPublic, Limits: limits,
		Hasher: auth.NewHasher(auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, 0)})
	if err != nil {
		t.Fatal(err)
	}
	opts.ClientID, opts.ClientSecret = peerClientID, peerSecret
	opts.RedirectURIs = []string{oauthPublic + "/api/auth/oauth/" + oauthProvider + "/callback"}
	f := &oauthFixture{t: t, clk: clk, svc: svc, store: n.Store, peer: oidcpeer.Start(t, bin, opts)}
	p, err := svc.CreateProject(bg, "oauth", ownerEmail, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	f.pid = p.ProjectID
	f.owner = f.mustLogin(ownerEmail, testPassword)
	info, _, err := svc.SetOAuthProvider(bg, f.owner, oauthProvider, auth.OAuthProviderInput{ClientID: peerClientID, ClientSecret: peerSecret,
		Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}})
	if err != nil {
		t.Fatalf("configure provider: %v", err)
	}
	if !info.SecretSet || info.Issuer != f.peer.Issuer || !slices.Contains(info.Scopes, "openid") {
		t.Fatalf("provider info = %+v", info)
	}
	return f
}

func (f *oauthFixture) mustLogin(email, password string) *auth.Principal {
	f.t.Helper()
	res, err := f.svc.Login(bg, f.pid, email, password, addr)
	if err != nil {
		f.t.Fatalf("login %s: %v", email, err)
	}
	p, err := f.svc.Authenticate(res.Token)
	if err != nil {
		f.t.Fatalf("authenticate %s: %v", email, err)
	}
	return p
}

// mustBrowse follows the provider's authorization URL as a browser, logs
// in as email on the provider's form, and returns the provider's redirect
// to edgebase's callback (state and code).
func (f *oauthFixture) mustBrowse(authURL, email string) auth.OAuthCallbackParams {
	f.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	public, _ := url.Parse(oauthPublic)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host == public.Host {
			return http.ErrUseLastResponse // edgebase's callback: the test takes it from here
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatalf("open the authorization URL: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("authorization URL: status %d: %.300s", resp.StatusCode, page)
	}
	resp, err = f.peer.Login(ctx, client, resp.Request.URL, page, email)
	if err != nil {
		f.t.Fatalf("log in at the provider: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("provider login: status %d, want a redirect to the callback: %.300s", resp.StatusCode, body)
	}
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Host != public.Host || cb.Path != "/api/auth/oauth/"+oauthProvider+"/callback" {
		f.t.Fatalf("provider redirected to %q, want edgebase's callback", resp.Header.Get("Location"))
	}
	q := cb.Query()
	return auth.OAuthCallbackParams{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error")}
}

// mustCallback runs the callback and returns the app redirect's query.
func (f *oauthFixture) mustCallback(in auth.OAuthCallbackParams) url.Values {
	f.t.Helper()
	to, err := f.svc.OAuthCallback(bg, oauthProvider, in)
	if err != nil {
		f.t.Fatalf("callback: %v", err)
	}
	u, err := url.Parse(to)
	if err != nil || !strings.HasPrefix(to, oauthApp+"?") {
		f.t.Fatalf("callback redirected to %q, want %s?...", to, oauthApp)
	}
	return u.Query()
}

// mustSignIn runs a whole sign-in as email and returns the app's one-time code.
func (f *oauthFixture) mustSignIn(email string) string {
	f.t.Helper()
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		f.t.Fatalf("start: %v", err)
	}
	q := f.mustCallback(f.mustBrowse(start, email))
	if q.Get("code") == "" {
		f.t.Fatalf("callback answered the app %v, want a code", q)
	}
	return q.Get("code")
}

func (f *oauthFixture) mustExchange(code string) (*auth.LoginResult, *auth.Principal) {
	f.t.Helper()
	res, err := f.svc.OAuthExchange(bg, f.pid, code, addr)
	if err != nil {
		f.t.Fatalf("exchange: %v", err)
	}
	if res.RequiresTOTP || res.Token == "" || res.User == nil {
		f.t.Fatalf("exchange = %+v, want a session", res)
	}
	p, err := f.svc.Authenticate(res.Token)
	if err != nil {
		f.t.Fatalf("the exchanged session does not authenticate: %v", err)
	}
	return res, p
}

func TestOAuthSignInCreatesAccount(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "Grace@Example.com"})
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	su, _ := url.Parse(start)
	sq := su.Query()
	if sq.Get("code_challenge_method") != "S256" || sq.Get("code_challenge") == "" || sq.Get("nonce") == "" || sq.Get("state") == "" ||
		sq.Get("client_id") != peerClientID || sq.Get("redirect_uri") != oauthPublic+"/api/auth/oauth/corp/callback" {
		t.Fatalf("authorization URL lacks PKCE S256, nonce, state or the client: %s", start)
	}
	// The state is stored only as its hash, with the PKCE verifier sealed.
	if doc, err := f.store.Get(keys.OAuthState(auth.HashToken(sq.Get("state")))); err != nil || doc == nil {
		t.Fatalf("no state record under the state's hash: %v", err)
	} else if strings.Contains(string(doc.Data), sq.Get("state")) {
		t.Fatal("the state record holds the state in clear")
	}
	cb := f.mustBrowse(start, "Grace@Example.com")
	q := f.mustCallback(cb)
	code := q.Get("code")
	if code == "" {
		t.Fatalf("app redirect %v has no code", q)
	}
	res, p := f.mustExchange(code)
	u := res.User
	if u.Email != "grace@example.com" || !u.EmailVerified || !slices.Equal(u.Providers, []string{oauthProvider}) || u.Role != auth.RoleUser || u.Name == "" {
		t.Fatalf("new account = %+v", u)
	}
	if p.UserID != u.ID {
		t.Fatalf("session speaks for %s, want %s", p.UserID, u.ID)
	}
	// The code is single use, and so is the state.
	if _, err := f.svc.OAuthExchange(bg, f.pid, code, addr); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("replayed exchange: %v, want ErrInvalidCode", err)
	}
	if _, err := f.svc.OAuthCallback(bg, oauthProvider, cb); !errors.Is(err, auth.ErrInvalidState) {
		t.Fatalf("replayed callback: %v, want ErrInvalidState", err)
	}
	// No password was set: password login fails like a wrong password.
	if _, err := f.svc.Login(bg, f.pid, "grace@example.com", "", addr); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("password login of an OAuth account: %v, want invalid credentials", err)
	}
	// The identity is linked: the next sign-in reaches the same account.
	res2, _ := f.mustExchange(f.mustSignIn("Grace@Example.com"))
	if res2.User.ID != u.ID {
		t.Fatalf("second sign-in reached %s, want %s", res2.User.ID, u.ID)
	}
	// A code is for its project only.
	other, err := f.svc.CreateProject(bg, "other", ownerEmail, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.OAuthExchange(bg, other.ProjectID, f.mustSignIn("Grace@Example.com"), addr); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("exchange in another project: %v, want ErrInvalidCode", err)
	}
}

func TestOAuthLinksVerifiedEmailToPasswordAccount(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "ada@example.com"})
	reg, err := f.svc.Register(bg, f.pid, "ada@example.com", testPassword, "Ada", addr)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := f.mustExchange(f.mustSignIn("ada@example.com"))
	if res.User.ID != reg.User.ID {
		t.Fatalf("signed in to %s, want the password account %s", res.User.ID, reg.User.ID)
	}
	if !res.User.EmailVerified || !slices.Contains(res.User.Providers, oauthProvider) {
		t.Fatalf("linked account = %+v", res.User)
	}
	// The address was never proved by whoever registered it: the provider's
	// verified owner takes the account over, and the unproved password and
	// its sessions end (pre-registration takeover defence).
	if _, err := f.svc.Authenticate(reg.Token); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the registering session survived the takeover: %v", err)
	}
	if _, err := f.svc.Login(bg, f.pid, "ada@example.com", testPassword, addr); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("the unproved password still logs in: %v", err)
	}
}

func TestOAuthRefusesUnverifiedEmail(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "bob@example.com", EmailUnverified: true, Users: []string{"new@example.com:unverified"}})
	reg, err := f.svc.Register(bg, f.pid, "bob@example.com", testPassword, "Bob", addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
		if err != nil {
			t.Fatal(err)
		}
		q := f.mustCallback(f.mustBrowse(start, "bob@example.com"))
		if q.Get("error") != "account_exists_unverified" || q.Get("code") != "" || q.Get("error_description") == "" {
			t.Fatalf("app redirect = %v, want error=account_exists_unverified", q)
		}
	}
	// The account is as it was: its session and password work, no provider.
	p, err := f.svc.Authenticate(reg.Token)
	if err != nil {
		t.Fatalf("the account's session ended: %v", err)
	}
	me, err := f.svc.Me(f.pid, p.UserID)
	if err != nil || len(me.Providers) != 0 {
		t.Fatalf("account after refusals = %+v, %v", me, err)
	}
	f.mustLogin("bob@example.com", testPassword)
	// An unverified address no account has makes a new, unverified account.
	res, _ := f.mustExchange(f.mustSignIn("new@example.com"))
	if res.User.Email != "new@example.com" || res.User.EmailVerified {
		t.Fatalf("account from an unverified address = %+v", res.User)
	}
}

func TestOAuthExpiredIDToken(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "eve@example.com", IDTokenLifetime: time.Minute})
	// Within the token's minute the sign-in works ...
	f.mustExchange(f.mustSignIn("eve@example.com"))
	// ... past it (by the service's clock) the same provider's token is refused.
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	cb := f.mustBrowse(start, "eve@example.com")
	f.clk.Advance(2 * time.Minute)
	q := f.mustCallback(cb)
	if q.Get("error") != "invalid_id_token" || q.Get("code") != "" {
		t.Fatalf("app redirect with an expired ID token = %v, want error=invalid_id_token", q)
	}
}

func TestOAuthWrongAudience(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "mallory@example.com", Audience: "another-client"})
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	q := f.mustCallback(f.mustBrowse(start, "mallory@example.com"))
	if q.Get("error") != "invalid_id_token" || q.Get("code") != "" {
		t.Fatalf("app redirect with a token for another audience = %v, want error=invalid_id_token", q)
	}
	if doc, err := f.store.Get(keys.Email(f.pid, "mallory@example.com")); err != nil || doc != nil {
		t.Fatalf("an account was made from a refused token: %v %v", doc, err)
	}
}

func TestOAuthCodeAndStateExpire(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "kim@example.com"})
	code := f.mustSignIn("kim@example.com")
	f.clk.Advance(auth.OAuthCodeTTL + time.Second)
	if _, err := f.svc.OAuthExchange(bg, f.pid, code, addr); !errors.Is(err, auth.ErrInvalidCode) {
		t.Fatalf("exchange after a minute: %v, want ErrInvalidCode", err)
	}
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	cb := f.mustBrowse(start, "kim@example.com")
	f.clk.Advance(auth.OAuthStateTTL + time.Second)
	if _, err := f.svc.OAuthCallback(bg, oauthProvider, cb); !errors.Is(err, auth.ErrInvalidState) {
		t.Fatalf("callback after ten minutes: %v, want ErrInvalidState", err)
	}
	// The leader's sweep removes both expired records.
	if _, err := f.svc.Sweep(bg); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	for _, dir := range []string{keys.OAuthStatesDir(), keys.OAuthCodesDir()} {
		if docs, _, err := f.store.List(dir, "", 10); err != nil || len(docs) != 0 {
			t.Fatalf("%s after the sweep: %d records, %v", dir, len(docs), err)
		}
	}
}

func TestOAuthLinkToSignedInAccount(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "work@corp.example"})
	reg, err := f.svc.Register(bg, f.pid, "home@example.com", testPassword, "Lin", addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.Authenticate(reg.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.OAuthLink(bg, p, oauthProvider, "https://evil.example/"); !errors.Is(err, auth.ErrRedirectNotAllowed) {
		t.Fatalf("link to a redirect not allowed: %v", err)
	}
	link, err := f.svc.OAuthLink(bg, p, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := f.mustExchange(f.mustCallback(f.mustBrowse(link, "work@corp.example")).Get("code"))
	if res.User.ID != reg.User.ID || res.User.Email != "home@example.com" || !slices.Contains(res.User.Providers, oauthProvider) {
		t.Fatalf("after linking: %+v, want account %s with the provider", res.User, reg.User.ID)
	}
	// Signing in with the provider now reaches that account.
	if res2, _ := f.mustExchange(f.mustSignIn("work@corp.example")); res2.User.ID != reg.User.ID {
		t.Fatalf("sign-in after linking reached %s, want %s", res2.User.ID, reg.User.ID)
	}
	// Another account cannot take the identity.
	reg2, err := f.svc.Register(bg, f.pid, "other@example.com", testPassword, "O", addr)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := f.svc.Authenticate(reg2.Token)
	link2, err := f.svc.OAuthLink(bg, p2, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	if q := f.mustCallback(f.mustBrowse(link2, "work@corp.example")); q.Get("error") != "identity_linked" {
		t.Fatalf("linking an identity of another account: %v, want error=identity_linked", q)
	}
	// Linking needs a recent proof of the password.
	f.clk.Advance(auth.DefaultRecentLogin + time.Second)
	if _, err := f.svc.OAuthLink(bg, p2, oauthProvider, oauthApp); !errors.Is(err, auth.ErrReauthRequired) {
		t.Fatalf("link without a recent login: %v, want ErrReauthRequired", err)
	}
}

func TestOAuthProviderSettings(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "x@example.com"})
	// The secret is sealed at rest.
	doc, err := f.store.Get(keys.OAuthProvider(f.pid, oauthProvider))
	if err != nil || doc == nil {
		t.Fatalf("provider record: %v", err)
	}
	if strings.Contains(string(doc.Data), peerSecret) {
		t.Fatal("the client secret is stored in clear")
	}
	// A change without a secret keeps the stored one (sign-in still works).
	if _, _, err := f.svc.SetOAuthProvider(bg, f.owner, oauthProvider, auth.OAuthProviderInput{ClientID: peerClientID, Issuer: f.peer.Issuer,
		RedirectURLs: []string{oauthApp, "com.example.app:/oauth"}}); err != nil {
		t.Fatal(err)
	}
	f.mustExchange(f.mustSignIn("x@example.com"))

	// An issuer on the loopback is refused unless the operator allowed it.
	strict, err := auth.NewService(auth.Config{Store: f.store, Clock: f.clk, Sealer: mustSealer(t), PublicURL: oauthPublic})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = strict.SetOAuthProvider(bg, f.owner, "other", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}})
	checkFieldErr(t, err, "issuer")
	// An issuer whose discovery fails is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()
	_, _, err = f.svc.SetOAuthProvider(bg, f.owner, "other", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: dead, RedirectURLs: []string{oauthApp}})
	checkFieldErr(t, err, "issuer")
	// Bad input names its field; nothing is stored.
	for _, c := range []struct {
		name, provider, field string
		in                    auth.OAuthProviderInput
	}{
		{"bad name", "Not_OK", "provider", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}}},
		{"no client id", "other", "clientId", auth.OAuthProviderInput{ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}}},
		{"no secret", "other", "clientSecret", auth.OAuthProviderInput{ClientID: "c", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}}},
		{"no issuer", "other", "issuer", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", RedirectURLs: []string{oauthApp}}},
		{"google elsewhere", "google", "issuer", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}}},
		{"github issuer", "github", "issuer", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp}}},
		{"no redirects", "other", "redirectUrls", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer}},
		{"javascript redirect", "other", "redirectUrls[1]", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{oauthApp, "javascript:alert(1)"}}},
		{"http redirect", "other", "redirectUrls[0]", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, RedirectURLs: []string{"http://app.example.com/"}}},
		{"scope with space", "other", "scopes[0]", auth.OAuthProviderInput{ClientID: "c", ClientSecret: "s", Issuer: f.peer.Issuer, Scopes: []string{"a b"}, RedirectURLs: []string{oauthApp}}},
	} {
		_, _, err := f.svc.SetOAuthProvider(bg, f.owner, c.provider, c.in)
		if !checkFieldErr(t, err, c.field) {
			t.Errorf("case %q", c.name)
		}
	}
	list, err := f.svc.OAuthProviders(f.pid)
	if err != nil || len(list) != 1 || list[0].Provider != oauthProvider {
		t.Fatalf("providers after refusals = %+v, %v", list, err)
	}
	// Only owners configure providers.
	reg, err := f.svc.Register(bg, f.pid, "user@example.com", testPassword, "", addr)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := f.svc.Authenticate(reg.Token)
	if _, _, err := f.svc.SetOAuthProvider(bg, up, "other", auth.OAuthProviderInput{}); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("a user configuring a provider: %v, want ErrForbidden", err)
	}
	if _, err := f.svc.OAuthProvider(up, oauthProvider); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("a user reading a provider: %v, want ErrForbidden", err)
	}
	// Deleted, it cannot start a sign-in.
	if _, err := f.svc.DeleteOAuthProvider(bg, f.owner, oauthProvider); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp); !errors.Is(err, auth.ErrOAuthProviderNotFound) {
		t.Fatalf("start with a deleted provider: %v", err)
	}
}

func mustSealer(t *testing.T) *auth.Sealer {
	t.Helper()
	key, err := auth.ParseSecretKey(nodetest.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auth.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkFieldErr reports whether err is a 400 invalid_argument naming field.
func checkFieldErr(t *testing.T, err error, field string) bool {
	t.Helper()
	var fe *auth.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, auth.ErrInvalidArgument) {
		t.Errorf("err = %v, want invalid_argument on %q", err, field)
		return false
	}
	return true
}

func TestOAuthNewAccountsCountAsRegistrations(t *testing.T) {
	limits := auth.DefaultLimits()
	limits.RegisterPerAddr = auth.LimitRule{Max: 1, Window: time.Hour}
	f := newOAuthFixtureLimits(t, oidcpeer.Options{UserEmail: "one@example.com", Users: []string{"two@example.com"}}, &limits)
	const browser = "198.51.100.7"
	signIn := func(email string) url.Values {
		t.Helper()
		start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
		if err != nil {
			t.Fatal(err)
		}
		cb := f.mustBrowse(start, email)
		cb.Addr = browser
		return f.mustCallback(cb)
	}
	first := signIn("one@example.com")
	if first.Get("code") == "" {
		t.Fatalf("first new account: %v", first)
	}
	// A second new account from the same address is past the window ...
	if q := signIn("two@example.com"); q.Get("error") != "rate_limited" || q.Get("code") != "" {
		t.Fatalf("second new account from one address: %v, want error=rate_limited", q)
	}
	if doc, err := f.store.Get(keys.Email(f.pid, "two@example.com")); err != nil || doc != nil {
		t.Fatalf("an account was made past the limit: %v %v", doc, err)
	}
	// ... while signing in to the account it made is not a registration.
	if q := signIn("one@example.com"); q.Get("code") == "" {
		t.Fatalf("sign-in to an existing account from the limited address: %v", q)
	}
}

func TestOAuthSecondFactorAndDisabledAccounts(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "totp@example.com", Users: []string{"off@example.com"}})
	// An account with an authenticator gets a login ticket, not a session.
	res, p := f.mustExchange(f.mustSignIn("totp@example.com"))
	e, _, err := f.svc.Enroll(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	code, err := rfc6238.Authenticator(e.Secret, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Confirm(bg, p, code); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(30 * time.Second) // the next time step: the code above is used
	out, err := f.svc.OAuthExchange(bg, f.pid, f.mustSignIn("totp@example.com"), addr)
	if err != nil || !out.RequiresTOTP || out.LoginTicket == "" || out.Token != "" || out.User != nil {
		t.Fatalf("exchange for an account with an authenticator = %+v, %v; want a login ticket only", out, err)
	}
	code, _ = rfc6238.Authenticator(e.Secret, f.clk.Now())
	ar, err := f.svc.LoginVerify(bg, f.pid, out.LoginTicket, code, addr)
	if err != nil || ar.User.ID != res.User.ID {
		t.Fatalf("login-verify of the OAuth ticket = %+v, %v", ar, err)
	}

	// A disabled account: a code issued before is void, and a new sign-in
	// tells the app why.
	off, _ := f.mustExchange(f.mustSignIn("off@example.com"))
	pending := f.mustSignIn("off@example.com")
	if _, _, err := f.svc.DisableUser(bg, f.owner, off.User.ID, addr); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.OAuthExchange(bg, f.pid, pending, addr); !errors.Is(err, auth.ErrAccountDisabled) {
		t.Fatalf("exchange for a disabled account: %v, want ErrAccountDisabled", err)
	}
	start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
	if err != nil {
		t.Fatal(err)
	}
	if q := f.mustCallback(f.mustBrowse(start, "off@example.com")); q.Get("error") != "account_disabled" || q.Get("code") != "" {
		t.Fatalf("sign-in to a disabled account: app got %v", q)
	}
	if _, _, err := f.svc.EnableUser(bg, f.owner, off.User.ID, addr); err != nil {
		t.Fatal(err)
	}
	if again, _ := f.mustExchange(f.mustSignIn("off@example.com")); again.User.ID != off.User.ID {
		t.Fatalf("after enabling: signed in to %s, want %s", again.User.ID, off.User.ID)
	}
}

// TestOAuthCallbackRace sends the provider's redirect to the callback twice
// at once (a double-clicked link, or an attacker replaying it): exactly one
// callback hands the app a code.
func TestOAuthCallbackRace(t *testing.T) {
	f := newOAuthFixture(t, oidcpeer.Options{UserEmail: "race@example.com"})
	for round := range 3 {
		start, err := f.svc.OAuthStart(bg, f.pid, oauthProvider, oauthApp)
		if err != nil {
			t.Fatal(err)
		}
		cb := f.mustBrowse(start, "race@example.com")
		type answer struct {
			to  string
			err error
		}
		answers := make(chan answer, 2)
		for range 2 {
			go func() {
				to, err := f.svc.OAuthCallback(bg, oauthProvider, cb)
				answers <- answer{to, err}
			}()
		}
		codes := 0
		for range 2 {
			a := <-answers
			switch {
			case a.err != nil && !errors.Is(a.err, auth.ErrInvalidState):
				t.Fatalf("round %d: callback: %v", round, a.err)
			case a.err == nil && strings.Contains(a.to, "code="):
				codes++
			}
		}
		if codes != 1 {
			t.Fatalf("round %d: %d callbacks handed out a code, want exactly 1", round, codes)
		}
	}
	if docs, _, err := f.store.List(keys.OAuthCodesDir(), "", 10); err != nil || len(docs) != 3 {
		t.Fatalf("one-time codes stored: %d, %v; want 3", len(docs), err)
	}
}
