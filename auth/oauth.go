package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// OAuth 2.0 / OpenID Connect sign-in.
//
// A sign-in is three requests that may reach three different nodes: start
// (a state record is committed and the browser sent to the provider), the
// provider's callback (the state is consumed, the code exchanged at the
// provider, the ID token verified, the account resolved and a one-time code
// committed, all in one txn) and the app's oauth-exchange (the one-time code
// is consumed in the txn that opens the session). Every record is committed
// state, so which node serves which step does not matter. The state carries
// the PKCE verifier (sealed) and the nonce; the callback checks the ID
// token's signature, issuer, audience (the client id), expiry (by the
// service's clock) and nonce.
//
// Accounts are linked by verified email only: an identity already linked
// signs in to its account; else an account with the email the provider
// vouches for is linked; an unverified email that matches an account is
// refused (account_exists_unverified); else a new account is created.

// The built-in providers.
const (
	ProviderGoogle = "google"
	ProviderApple  = "apple"
	ProviderGitHub = "github"

	googleIssuer = "https://accounts.google.com"
	appleIssuer  = "https://appleid.apple.com"
	githubAPI    = "https://api.github.com"
)

var githubEndpoint = oauth2.Endpoint{
	AuthURL:  "https://github.com/login/oauth/authorize",
	TokenURL: "https://github.com/login/oauth/access_token",
}

// Lifetimes of the OAuth records.
const (
	// OAuthStateTTL bounds the time a user may spend at the provider.
	OAuthStateTTL = 10 * time.Minute
	// OAuthCodeTTL bounds the time between the callback and the app's
	// oauth-exchange (a redirect and one request).
	OAuthCodeTTL = time.Minute
)

// Bounds of a provider's configuration.
const (
	maxRedirectURLs  = 20
	maxScopes        = 20
	maxOAuthField    = 2048
	oauthHTTPTimeout = 10 * time.Second
	// maxProviderBody bounds what is read of a provider's API answer.
	maxProviderBody = 1 << 20
)

// Token prefixes of the OAuth flow's secrets.
const (
	oauthStatePrefix = "ebs_"
	oauthCodePrefix  = "ebo_"
)

var providerNameRe = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// OAuthProviderInput is an owner's configuration of a provider
// (PUT /api/auth/oauth/{provider}). ClientSecret may be left out of a
// change to a provider that has one: the stored secret is kept.
type OAuthProviderInput struct {
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	Issuer       string   `json:"issuer"`
	Scopes       []string `json:"scopes"`
	RedirectURLs []string `json:"redirectUrls"`
}

// OAuthProviderInfo is a provider's configuration as owners read it (never
// the secret). CallbackURL is what to register at the provider.
type OAuthProviderInfo struct {
	Provider     string   `json:"provider"`
	ClientID     string   `json:"clientId"`
	Issuer       string   `json:"issuer"`
	Scopes       []string `json:"scopes"`
	RedirectURLs []string `json:"redirectUrls"`
	SecretSet    bool     `json:"secretSet"`
	CallbackURL  string   `json:"callbackUrl"`
}

// OAuthProviderSummary is what a login page needs of a provider.
type OAuthProviderSummary struct {
	Provider string `json:"provider"`
	Issuer   string `json:"issuer"`
}

// oauthProvider is the stored configuration; Secret is sealed.
type oauthProvider struct {
	Provider     string   `json:"provider"`
	ClientID     string   `json:"clientId"`
	Secret       string   `json:"secret"`
	Issuer       string   `json:"issuer,omitempty"`
	Scopes       []string `json:"scopes"`
	RedirectURLs []string `json:"redirectUrls"`
	UpdatedAt    string   `json:"updatedAt"`
}

// oauthState is a sign-in sent to the provider, stored under the hash of
// its state parameter. LinkUID (with the account generation it was asked
// under) links the identity to that account instead of signing in.
type oauthState struct {
	ProjectID string `json:"projectId"`
	Provider  string `json:"provider"`
	Verifier  string `json:"verifier"` // sealed PKCE verifier
	Nonce     string `json:"nonce"`
	Redirect  string `json:"redirect"`
	LinkUID   string `json:"linkUid,omitempty"`
	LinkGen   int64  `json:"linkGen,omitempty"`
	ExpiresAt int64  `json:"expiresAt"`
}

// oauthCode is the one-time code the callback hands to the app: a grant
// (so Sweep-style checks apply) plus the provider, for the audit log.
type oauthCode struct {
	grant
	Provider string `json:"provider"`
}

// identityEntry is the identity index's record.
type identityEntry struct {
	UserID string `json:"userId"`
}

// oauthIdentity is who the provider says signed in.
type oauthIdentity struct {
	Subject  string
	Email    string
	Verified bool
	Name     string
}

func secretAAD(pid, provider string) []byte {
	return []byte("oauth-secret\x00" + pid + "\x00" + provider)
}
func stateAAD(stateHash string) []byte { return []byte("oauth-state\x00" + stateHash) }

// oauthHTTPClient is the client of every call to a tenant's provider: it
// dials through the host policy (a provider that resolves to an internal
// address the operator did not allow is refused at connect time, whatever
// it resolved to when configured) and is bounded in time.
func (s *Service) oauthHTTPClient() *http.Client {
	return &http.Client{
		Timeout: oauthHTTPTimeout,
		Transport: &http.Transport{
			DialContext:            s.hostPolicy.DialContext(&net.Dialer{Timeout: 5 * time.Second}),
			TLSHandshakeTimeout:    5 * time.Second,
			ResponseHeaderTimeout:  oauthHTTPTimeout,
			MaxResponseHeaderBytes: 64 << 10,
			ForceAttemptHTTP2:      true,
		},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
}

// oauthContext carries the client to go-oidc and x/oauth2.
func (s *Service) oauthContext(ctx context.Context) context.Context {
	c := s.oauthHTTPClient()
	return context.WithValue(oidc.ClientContext(ctx, c), oauth2.HTTPClient, c)
}

// CallbackURL is the redirect URI of provider that owners register at the
// provider: {public URL}/api/auth/oauth/{provider}/callback.
func (s *Service) CallbackURL(provider string) string {
	return s.publicURL + "/api/auth/oauth/" + provider + "/callback"
}

// ValidProviderName reports whether name may name a provider.
func ValidProviderName(name string) bool { return providerNameRe.MatchString(name) }

func oauthField(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)}
}

// SetOAuthProvider stores the configuration of provider for the caller's
// project; owners only (judged at the commit). The issuer's host is judged
// by the host policy and its discovery document fetched and checked first.
func (s *Service) SetOAuthProvider(ctx context.Context, p *Principal, provider string, in OAuthProviderInput) (*OAuthProviderInfo, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if !ValidProviderName(provider) {
		return nil, 0, oauthField("provider", "provider must be google, apple, github or a name of 1..32 characters a-z, 0-9 and -")
	}
	if s.sealer == nil {
		return nil, 0, ErrNoSecretKey
	}
	rec := oauthProvider{Provider: provider, ClientID: strings.TrimSpace(in.ClientID), UpdatedAt: timestamp(s.now())}
	if rec.ClientID == "" || len(rec.ClientID) > maxOAuthField {
		return nil, 0, oauthField("clientId", "clientId is required (at most %d characters)", maxOAuthField)
	}
	if len(in.ClientSecret) > 8*maxOAuthField {
		return nil, 0, oauthField("clientSecret", "clientSecret is too long")
	}
	issuer := strings.TrimSuffix(strings.TrimSpace(in.Issuer), "/")
	switch provider {
	case ProviderGoogle, ProviderApple:
		want := map[string]string{ProviderGoogle: googleIssuer, ProviderApple: appleIssuer}[provider]
		if issuer != "" && issuer != want {
			return nil, 0, oauthField("issuer", "the issuer of %s is %s", provider, want)
		}
		issuer = want
	case ProviderGitHub:
		if issuer != "" {
			return nil, 0, oauthField("issuer", "github is not an OpenID provider: leave issuer out")
		}
	default:
		if issuer == "" {
			return nil, 0, oauthField("issuer", "issuer is required for a provider other than google, apple and github")
		}
	}
	rec.Issuer = issuer
	scopes, err := providerScopes(provider, in.Scopes)
	if err != nil {
		return nil, 0, err
	}
	rec.Scopes = scopes
	if len(in.RedirectURLs) == 0 || len(in.RedirectURLs) > maxRedirectURLs {
		return nil, 0, oauthField("redirectUrls", "redirectUrls must list 1..%d app URLs the sign-in may return to", maxRedirectURLs)
	}
	for i, u := range in.RedirectURLs {
		if err := validRedirectURL(u); err != nil {
			return nil, 0, &FieldError{Field: fmt.Sprintf("redirectUrls[%d]", i), Err: err}
		}
		if !slices.Contains(rec.RedirectURLs, u) {
			rec.RedirectURLs = append(rec.RedirectURLs, u)
		}
	}
	if issuer != "" {
		if err := s.checkIssuer(ctx, issuer); err != nil {
			return nil, 0, err
		}
	}
	secret := in.ClientSecret
	if secret == "" {
		old, err := s.oauthProviderRecord(p.ProjectID, provider)
		if err != nil && !errors.Is(err, ErrOAuthProviderNotFound) {
			return nil, 0, err
		}
		if old == nil || old.Secret == "" {
			return nil, 0, oauthField("clientSecret", "clientSecret is required")
		}
		rec.Secret = old.Secret
	} else {
		sealed, err := s.sealer.Seal([]byte(secret), secretAAD(p.ProjectID, provider))
		if err != nil {
			return nil, 0, fmt.Errorf("seal client secret: %w", err)
		}
		rec.Secret = sealed
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpPut, Path: keys.OAuthProvider(p.ProjectID, provider), Data: mustJSON(rec)})
	if err != nil {
		return nil, 0, err
	}
	return s.providerInfo(&rec), res.Revision, nil
}

// providerScopes returns the scopes to ask for: the owner's, or the
// provider's defaults; an OpenID provider always gets "openid".
func providerScopes(provider string, in []string) ([]string, error) {
	if len(in) > maxScopes {
		return nil, oauthField("scopes", "at most %d scopes", maxScopes)
	}
	var out []string
	for i, sc := range in {
		if sc == "" || len(sc) > 200 || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			return nil, oauthField(fmt.Sprintf("scopes[%d]", i), "a scope is 1..200 printable ASCII characters without spaces or quotes")
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		switch provider {
		case ProviderGitHub:
			return []string{"read:user", "user:email"}, nil
		case ProviderApple:
			return []string{oidc.ScopeOpenID, "email", "name"}, nil
		default:
			return []string{oidc.ScopeOpenID, "email", "profile"}, nil
		}
	}
	if provider != ProviderGitHub && !slices.Contains(out, oidc.ScopeOpenID) {
		out = append([]string{oidc.ScopeOpenID}, out...)
	}
	return out, nil
}

// customScheme is an app's own URL scheme (com.example.app:/callback).
var customScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// validRedirectURL accepts the app URLs a sign-in may return to: https, http
// on the loopback (development), or an app's own scheme; never a fragment,
// and never a scheme a browser runs (javascript:, data:).
func validRedirectURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || len(s) > maxOAuthField || u.Scheme == "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%w: %q is not an absolute URL without a fragment", ErrInvalidArgument, s)
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("%w: %q has no host", ErrInvalidArgument, s)
		}
	case "http":
		h := u.Hostname()
		ip, err := netip.ParseAddr(h)
		if h != "localhost" && (err != nil || !ip.IsLoopback()) {
			return fmt.Errorf("%w: %q: http is allowed only for localhost; use https", ErrInvalidArgument, s)
		}
	case "javascript", "data", "vbscript", "file", "blob", "about":
		return fmt.Errorf("%w: %q: the scheme %s is not allowed", ErrInvalidArgument, s, u.Scheme)
	default:
		if !customScheme.MatchString(u.Scheme) {
			return fmt.Errorf("%w: %q has no valid scheme", ErrInvalidArgument, s)
		}
	}
	return nil
}

// checkIssuer judges an issuer URL: https (or http for a host the operator
// allowed on an internal network), a host the policy allows, and a
// discovery document that names the same issuer.
func (s *Service) checkIssuer(ctx context.Context, issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || len(issuer) > maxOAuthField {
		return oauthField("issuer", "issuer must be an https URL such as https://accounts.example.com")
	}
	host := u.Hostname()
	if err := s.hostPolicy.Check(ctx, host); err != nil {
		return oauthField("issuer", "%v", err)
	}
	if u.Scheme == "http" && !s.internalHost(ctx, host) {
		return oauthField("issuer", "issuer must use https (http only for a host the operator allowed with --allow-private-hosts)")
	}
	dctx, cancel := context.WithTimeout(ctx, oauthHTTPTimeout)
	defer cancel()
	if _, err := oidc.NewProvider(s.oauthContext(dctx), issuer); err != nil {
		return oauthField("issuer", "the issuer's discovery document (%s/.well-known/openid-configuration) could not be used: %v", issuer, err)
	}
	return nil
}

// internalHost reports whether every address of host is internal (such a
// host passed the policy only because the operator allowed it).
func (s *Service) internalHost(ctx context.Context, host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return internal(ip)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !internal(a) {
			return false
		}
	}
	return true
}

func (s *Service) providerInfo(rec *oauthProvider) *OAuthProviderInfo {
	return &OAuthProviderInfo{Provider: rec.Provider, ClientID: rec.ClientID, Issuer: rec.Issuer, Scopes: rec.Scopes,
		RedirectURLs: rec.RedirectURLs, SecretSet: rec.Secret != "", CallbackURL: s.CallbackURL(rec.Provider)}
}

func (s *Service) oauthProviderRecord(pid, provider string) (*oauthProvider, error) {
	if !ValidProviderName(provider) {
		return nil, ErrOAuthProviderNotFound
	}
	var rec oauthProvider
	ok, err := s.getJSON(keys.OAuthProvider(pid, provider), &rec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrOAuthProviderNotFound
	}
	return &rec, nil
}

// OAuthProvider returns the configuration of provider (owners only).
func (s *Service) OAuthProvider(p *Principal, provider string) (*OAuthProviderInfo, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	rec, err := s.oauthProviderRecord(p.ProjectID, provider)
	if err != nil {
		return nil, err
	}
	return s.providerInfo(rec), nil
}

// DeleteOAuthProvider removes provider's configuration (owners only, at
// the commit). Identities linked through it stay linked: configuring the
// provider again signs them in to the same accounts.
func (s *Service) DeleteOAuthProvider(ctx context.Context, p *Principal, provider string) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if _, err := s.oauthProviderRecord(p.ProjectID, provider); err != nil {
		return 0, err
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.OAuthProvider(p.ProjectID, provider)})
	if err != nil {
		if res != nil && res.OpFailed {
			return 0, ErrOAuthProviderNotFound // deleted meanwhile
		}
		return 0, err
	}
	return res.Revision, nil
}

// OAuthProviders lists the project's providers for a login page.
func (s *Service) OAuthProviders(pid string) ([]OAuthProviderSummary, error) {
	out := []OAuthProviderSummary{}
	after := ""
	for {
		docs, next, err := s.store.List(keys.OAuthProvidersDir(pid), after, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var rec oauthProvider
			if err := decodeJSON(d, &rec); err != nil {
				return nil, err
			}
			out = append(out, OAuthProviderSummary{Provider: rec.Provider, Issuer: rec.Issuer})
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// oauthConfig is the x/oauth2 client of rec, with the provider's endpoints
// (from discovery for an OpenID provider).
func (s *Service) oauthConfig(ctx context.Context, pid string, rec *oauthProvider) (*oauth2.Config, *oidc.Provider, error) {
	if s.publicURL == "" {
		return nil, nil, ErrNoPublicURL
	}
	if s.sealer == nil {
		return nil, nil, ErrNoSecretKey
	}
	secret, err := s.sealer.Open(rec.Secret, secretAAD(pid, rec.Provider))
	if err != nil {
		return nil, nil, fmt.Errorf("open the client secret of %s: %w", rec.Provider, err)
	}
	conf := &oauth2.Config{ClientID: rec.ClientID, ClientSecret: string(secret), RedirectURL: s.CallbackURL(rec.Provider), Scopes: rec.Scopes}
	if rec.Issuer == "" {
		conf.Endpoint = githubEndpoint
		return conf, nil, nil
	}
	prov, err := oidc.NewProvider(s.oauthContext(ctx), rec.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: discovery of %s: %v", errProviderFailed, rec.Issuer, err)
	}
	conf.Endpoint = prov.Endpoint()
	if rec.Provider == ProviderApple {
		// Apple takes the client credentials in the form only.
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	return conf, prov, nil
}

// errProviderFailed is a provider that could not be reached or answered
// what it should not; errTokenRefused an ID token that failed verification.
var (
	errProviderFailed = errors.New("oauth provider failed")
	errTokenRefused   = errors.New("id token refused")
)

// OAuthStart begins a sign-in with provider that returns to redirect (one
// of the provider's redirectUrls): it commits the state and returns the
// provider's authorization URL.
func (s *Service) OAuthStart(ctx context.Context, pid, provider, redirect string) (string, error) {
	if err := s.CheckProject(pid); err != nil {
		return "", err
	}
	return s.oauthStart(ctx, pid, provider, redirect, "", 0)
}

// OAuthLink begins linking provider to the caller's account: the returned
// URL is the provider's authorization URL, and the callback links the
// identity to the caller (an anonymous caller becomes a full account with
// the same uid). A caller with a password must have proved it recently.
func (s *Service) OAuthLink(ctx context.Context, p *Principal, provider, redirect string) (string, error) {
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return "", err
	}
	if acc == nil {
		return "", ErrInvalidToken
	}
	if !acc.Anonymous {
		if _, err := s.recentProof(p); err != nil {
			return "", err
		}
	}
	return s.oauthStart(ctx, p.ProjectID, provider, redirect, acc.ID, acc.SessionGen)
}

func (s *Service) oauthStart(ctx context.Context, pid, provider, redirect, linkUID string, linkGen int64) (string, error) {
	rec, err := s.oauthProviderRecord(pid, provider)
	if err != nil {
		return "", err
	}
	if redirect == "" {
		return "", oauthField("redirect", "redirect is required")
	}
	if !slices.Contains(rec.RedirectURLs, redirect) {
		return "", ErrRedirectNotAllowed
	}
	conf, _, err := s.oauthConfig(ctx, pid, rec)
	if err != nil {
		return "", err
	}
	state, err := NewToken(oauthStatePrefix)
	if err != nil {
		return "", err
	}
	nonce, err := NewToken("")
	if err != nil {
		return "", err
	}
	verifier := oauth2.GenerateVerifier()
	h := HashToken(state)
	sealed, err := s.sealer.Seal([]byte(verifier), stateAAD(h))
	if err != nil {
		return "", fmt.Errorf("seal PKCE verifier: %w", err)
	}
	now := s.now()
	st := oauthState{ProjectID: pid, Provider: provider, Verifier: sealed, Nonce: nonce, Redirect: redirect,
		LinkUID: linkUID, LinkGen: linkGen, ExpiresAt: now.Add(OAuthStateTTL).Unix()}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: now.UnixNano(),
		Conds: []raftstore.Cond{{Path: keys.OAuthProvider(pid, provider), Kind: raftstore.CondExists}},
		Ops:   []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.OAuthState(h), Data: mustJSON(st)}}})
	if err != nil {
		return "", err
	}
	if !res.OK() {
		return "", ErrOAuthProviderNotFound // removed meanwhile
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if rec.Issuer != "" {
		opts = append(opts, oidc.Nonce(nonce))
	}
	if provider == ProviderApple && (slices.Contains(rec.Scopes, "email") || slices.Contains(rec.Scopes, "name")) {
		// Apple answers with a POST when it is asked for the user's email
		// or name; the callback takes both methods.
		opts = append(opts, oauth2.SetAuthURLParam("response_mode", "form_post"))
	}
	return conf.AuthCodeURL(state, opts...), nil
}

// OAuthCallbackParams are what the provider sent to the callback.
type OAuthCallbackParams struct {
	State, Code string
	// Error and ErrorDescription are the provider's refusal (RFC 6749
	// §4.1.2.1), e.g. access_denied when the user said no.
	Error, ErrorDescription string
	// Addr is the browser's address: an account made here counts against
	// the registration limits like a registration from it.
	Addr string
}

// errorCodeRe bounds the error codes passed on to the app.
var errorCodeRe = regexp.MustCompile(`^[a-z_]{1,64}$`)

// OAuthCallback finishes a sign-in at the provider's callback and returns
// where to send the browser: the app's redirect with a one-time code, or
// with error and error_description when the provider or the verification
// failed. An unknown, used or expired state is ErrInvalidState (no
// redirect can be trusted then).
func (s *Service) OAuthCallback(ctx context.Context, provider string, in OAuthCallbackParams) (string, error) {
	if in.State == "" {
		return "", ErrInvalidState
	}
	h := HashToken(in.State)
	doc, err := s.store.Get(keys.OAuthState(h))
	if err != nil {
		return "", err
	}
	if doc == nil {
		return "", ErrInvalidState
	}
	var st oauthState
	if err := decodeJSON(doc, &st); err != nil {
		return "", err
	}
	if st.Provider != provider || s.now().Unix() >= st.ExpiresAt {
		return "", ErrInvalidState
	}
	// refuse sends the app the error; fail also consumes the state: a state
	// is good for one answer from the provider. A code the provider would
	// not exchange (or whose ID token failed) leaves the state alone: the
	// same redirect may be in flight twice (a double-clicked link), and the
	// callback that exchanged the code first must be able to commit.
	refuse := func(code, desc string) (string, error) {
		if len(desc) > 300 {
			desc = desc[:300]
		}
		return appRedirect(st.Redirect, url.Values{"error": {code}, "error_description": {desc}}), nil
	}
	fail := func(code, desc string) (string, error) {
		if _, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}},
			Ops:   []raftstore.Op{{Kind: raftstore.OpDelete, Path: doc.Path}}}); err != nil {
			return "", err
		}
		return refuse(code, desc)
	}
	if in.Error != "" {
		code := in.Error
		if !errorCodeRe.MatchString(code) {
			code = "provider_error"
		}
		return fail(code, in.ErrorDescription)
	}
	if in.Code == "" {
		return fail("invalid_request", "the provider sent no code")
	}
	rec, err := s.oauthProviderRecord(st.ProjectID, provider)
	if errors.Is(err, ErrOAuthProviderNotFound) {
		return fail("provider_error", "the provider is no longer configured")
	}
	if err != nil {
		return "", err
	}
	verifier, err := s.sealer.Open(st.Verifier, stateAAD(h))
	if err != nil {
		return "", fmt.Errorf("open PKCE verifier: %w", err)
	}
	id, err := s.oauthIdentity(ctx, st.ProjectID, rec, in.Code, string(verifier), st.Nonce)
	switch {
	case errors.Is(err, errTokenRefused):
		s.logger.Warn("oauth: ID token refused", "project", st.ProjectID, "provider", provider, "err", err)
		return refuse("invalid_id_token", "the provider's ID token could not be verified")
	case errors.Is(err, errProviderFailed):
		s.logger.Warn("oauth: provider failed", "project", st.ProjectID, "provider", provider, "err", err)
		return refuse("provider_error", "the sign-in with the provider failed")
	case err != nil:
		return "", err
	}
	code, err := s.oauthResolve(ctx, doc, &st, id, in.Addr)
	if errors.Is(err, ErrRateLimited) {
		return fail("rate_limited", "too many accounts were made from here or in this project; try again later")
	}
	var ae *Error
	if errors.As(err, &ae) && !errors.Is(err, ErrInvalidState) {
		return fail(ae.Code(), ae.Message())
	}
	if err != nil {
		return "", err
	}
	return appRedirect(st.Redirect, url.Values{"code": {code}}), nil
}

// appRedirect adds params to the app's redirect URL (keeping its own query).
func appRedirect(redirect string, params url.Values) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return redirect // stored only after validRedirectURL
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// oauthIdentity exchanges the code at the provider and returns who signed
// in: from the verified ID token (and the userinfo endpoint when the token
// leaves the email out) of an OpenID provider, or from GitHub's API.
func (s *Service) oauthIdentity(ctx context.Context, pid string, rec *oauthProvider, code, verifier, nonce string) (*oauthIdentity, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*oauthHTTPTimeout)
	defer cancel()
	conf, prov, err := s.oauthConfig(ctx, pid, rec)
	if err != nil {
		return nil, err
	}
	octx := s.oauthContext(ctx)
	tok, err := conf.Exchange(octx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("%w: code exchange: %v", errProviderFailed, err)
	}
	if prov == nil {
		return s.githubIdentity(octx, conf, tok)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("%w: the token response has no id_token", errTokenRefused)
	}
	idt, err := prov.Verifier(&oidc.Config{ClientID: rec.ClientID, Now: s.clock.Now}).Verify(octx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errTokenRefused, err)
	}
	if idt.Nonce != nonce {
		return nil, fmt.Errorf("%w: nonce mismatch", errTokenRefused)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"` // Apple sends "true"
		Name          string `json:"name"`
	}
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", errTokenRefused, err)
	}
	id := &oauthIdentity{Subject: idt.Subject, Email: claims.Email, Name: claims.Name}
	switch v := claims.EmailVerified.(type) {
	case bool:
		id.Verified = v
	case string:
		id.Verified = v == "true"
	}
	if id.Email == "" && prov.UserInfoEndpoint() != "" {
		ui, err := prov.UserInfo(octx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return nil, fmt.Errorf("%w: userinfo: %v", errProviderFailed, err)
		}
		if ui.Subject != idt.Subject {
			return nil, fmt.Errorf("%w: userinfo names another subject", errTokenRefused)
		}
		var extra struct {
			Name string `json:"name"`
		}
		_ = ui.Claims(&extra)
		id.Email, id.Verified = ui.Email, ui.EmailVerified
		if id.Name == "" {
			id.Name = extra.Name
		}
	}
	if id.Subject == "" {
		return nil, fmt.Errorf("%w: no subject", errTokenRefused)
	}
	return id, nil
}

// githubIdentity reads the GitHub user and their primary verified email.
func (s *Service) githubIdentity(ctx context.Context, conf *oauth2.Config, tok *oauth2.Token) (*oauthIdentity, error) {
	client := conf.Client(ctx, tok)
	var user struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
		Name  string `json:"name"`
	}
	if err := githubGet(ctx, client, "/user", &user); err != nil {
		return nil, err
	}
	if user.ID == 0 {
		return nil, fmt.Errorf("%w: github user has no id", errProviderFailed)
	}
	id := &oauthIdentity{Subject: strconv.FormatInt(user.ID, 10), Name: user.Name}
	if id.Name == "" {
		id.Name = user.Login
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := githubGet(ctx, client, "/user/emails", &emails); err != nil {
		return nil, err
	}
	for _, e := range emails {
		if e.Primary {
			id.Email, id.Verified = e.Email, e.Verified
		}
	}
	return id, nil
}

func githubGet(ctx context.Context, client *http.Client, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, githubAPI+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: github %s: %v", errProviderFailed, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBody))
	if err != nil {
		return fmt.Errorf("%w: github %s: %v", errProviderFailed, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: github %s: %s", errProviderFailed, path, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: github %s: %v", errProviderFailed, path, err)
	}
	return nil
}

// oauthResolve finds or makes the account of the identity and commits, in
// one txn conditioned on the state being unused, the state's consumption,
// any link or new account, and the one-time code it returns.
func (s *Service) oauthResolve(ctx context.Context, stateDoc *raftstore.Document, st *oauthState, id *oauthIdentity, addr string) (string, error) {
	pid := st.ProjectID
	code, err := NewToken(oauthCodePrefix)
	if err != nil {
		return "", err
	}
	newUID, err := NewID()
	if err != nil {
		return "", err
	}
	email := ""
	if id.Email != "" && ValidateEmail(NormalizeEmail(id.Email)) == nil {
		email = NormalizeEmail(id.Email)
	}
	// An account made or taken over here gets a password nobody knows:
	// password login is impossible until a reset sets one. Hashed once, and
	// only when needed.
	var noPassword string
	unusable := func() (string, error) {
		if noPassword != "" {
			return noPassword, nil
		}
		secret, err := NewToken("")
		if err != nil {
			return "", err
		}
		noPassword, err = s.hasher.Hash(ctx, secret)
		return noPassword, err
	}
	idPath := keys.Identity(pid, st.Provider, id.Subject)
	res, txn, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		now := s.now()
		txn := &raftstore.Txn{Time: now.UnixNano(),
			Conds: []raftstore.Cond{{Path: stateDoc.Path, Kind: raftstore.CondRevision, Revision: stateDoc.Revision, Name: "state"}},
			Ops:   []raftstore.Op{{Kind: raftstore.OpDelete, Path: stateDoc.Path}}}
		// The identity's account, if it is linked to one that still exists.
		linked := ""
		idDoc, err := s.store.Get(idPath)
		if err != nil {
			return nil, err
		}
		txn.Conds = append(txn.Conds, raftstore.Cond{Path: idPath, Kind: raftstore.CondRevision, Revision: docRev(idDoc)})
		if idDoc != nil {
			var e identityEntry
			if err := decodeJSON(idDoc, &e); err != nil {
				return nil, err
			}
			acc, err := s.account(pid, e.UserID)
			if err != nil {
				return nil, err
			}
			if acc != nil {
				linked = e.UserID
			} else {
				// The account was deleted: the identity is free again.
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: idPath})
			}
		}
		var acc *account
		var rev uint64
		changed, created := false, false
		link := func(a *account) {
			if !slices.Contains(a.Providers, st.Provider) {
				a.Providers = append(a.Providers, st.Provider)
			}
			txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: idPath, Data: mustJSON(identityEntry{UserID: a.ID})},
				s.auditOp(pid, AuditEvent{Type: AuditOAuthLinked, UserID: a.ID, Time: now, Detail: map[string]string{"provider": st.Provider}}))
			changed = true
		}
		switch {
		case st.LinkUID != "":
			if acc, rev, err = s.accountRev(pid, st.LinkUID); err != nil {
				return nil, err
			}
			if acc == nil || acc.SessionGen != st.LinkGen {
				return nil, ErrInvalidToken // the session that asked to link ended
			}
			if linked != "" && linked != acc.ID {
				return nil, ErrIdentityLinked
			}
			if linked == "" {
				link(acc)
			}
			if acc.Anonymous {
				acc.Anonymous, changed = false, true
				txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditAnonymousLinked, UserID: acc.ID, Time: now, Detail: map[string]string{"provider": st.Provider}}))
			}
			if acc.Email == "" && email != "" && id.Verified {
				// The upgraded account takes the provider's address when no
				// account has it (checked at the commit: a taken one makes
				// this judged again, and the account stays without one).
				taken, err := s.store.Get(keys.Email(pid, email))
				if err != nil {
					return nil, err
				}
				if taken == nil {
					acc.Email, acc.EmailVerified, changed = email, true, true
					txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.Email(pid, email), Kind: raftstore.CondNotExists})
					txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Email(pid, email), Data: mustJSON(emailIndex{UserID: acc.ID})})
				}
			}
		case linked != "":
			if acc, rev, err = s.accountRev(pid, linked); err != nil {
				return nil, err
			}
		case email != "":
			var idx emailIndex
			ok, err := s.getJSON(keys.Email(pid, email), &idx)
			if err != nil {
				return nil, err
			}
			if ok {
				if acc, rev, err = s.accountRev(pid, idx.UserID); err != nil {
					return nil, err
				}
			}
			txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.Email(pid, email), Kind: raftstore.CondRevision, Revision: s.docRevision(keys.Email(pid, email))})
			if acc != nil {
				if !id.Verified {
					return nil, ErrAccountExistsUnverified
				}
				if !acc.EmailVerified {
					// Whoever registered the address without proving it
					// (perhaps to wait for its owner) loses the account's
					// password and sessions to the owner the provider
					// vouches for.
					h, err := unusable()
					if err != nil {
						return nil, err
					}
					acc.EmailVerified, acc.PasswordHash = true, h
					acc.SessionGen++
				}
				link(acc)
				break
			}
			fallthrough
		default:
			// A new account grows the state like a registration and counts
			// against the same windows (the address's and the project's).
			at := attempt{kind: kindRegister, action: actionRegister, pid: pid, email: email, addr: addr}
			if err := s.checkLimits(at); err != nil {
				return nil, err
			}
			if err := s.addFailure(txn, at); err != nil {
				return nil, err
			}
			h, err := unusable()
			if err != nil {
				return nil, err
			}
			name := strings.TrimSpace(id.Name)
			if len(name) > 200 {
				name = name[:200]
			}
			acc = &account{User: User{ID: newUID, Email: email, Name: name, Role: RoleUser, CreatedAt: timestamp(now),
				EmailVerified: email != "" && id.Verified}, PasswordHash: h}
			txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.User(pid, newUID), Kind: raftstore.CondNotExists},
				raftstore.Cond{Path: keys.Project(pid), Kind: raftstore.CondExists})
			if email != "" {
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Email(pid, email), Data: mustJSON(emailIndex{UserID: newUID})})
			}
			txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditRegister, UserID: newUID, Time: now, Detail: map[string]string{"provider": st.Provider}}))
			link(acc)
			created = true
		}
		if acc == nil {
			return nil, ErrInvalidToken
		}
		if err := acc.checkEnabled(); err != nil {
			return nil, err
		}
		if !created {
			txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.User(pid, acc.ID), Kind: raftstore.CondRevision, Revision: rev},
				enabledCond(pid, acc.ID))
		}
		if changed {
			txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.User(pid, acc.ID), Data: mustJSON(acc)})
		}
		c := oauthCode{grant: grant{ProjectID: pid, UserID: acc.ID, Gen: acc.SessionGen, ExpiresAt: now.Add(OAuthCodeTTL).Unix()}, Provider: st.Provider}
		txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.OAuthCode(HashToken(code)), Data: mustJSON(c)})
		return txn, nil
	})
	if err != nil {
		return "", err
	}
	switch {
	case res.OK():
		return code, nil
	case res.Failed(txn) == "state":
		return "", ErrInvalidState
	case disabledAtCommit(res, txn):
		return "", ErrAccountDisabled
	default:
		return "", fmt.Errorf("oauth sign-in refused: %s", res.Err)
	}
}

func docRev(d *raftstore.Document) uint64 {
	if d == nil {
		return 0
	}
	return d.Revision
}

// docRevision is the revision of the document at path (0: absent); a read
// error counts as absent, and the condition built on it fails at the commit
// if that was wrong.
func (s *Service) docRevision(path string) uint64 {
	d, err := s.store.Get(path)
	if err != nil {
		return 0
	}
	return docRev(d)
}

// OAuthExchange trades the one-time code of a callback for a session (or a
// login ticket when the account has a second factor), like a login. The
// code is deleted in the txn that opens the session: a second exchange is
// ErrInvalidCode.
func (s *Service) OAuthExchange(ctx context.Context, pid, code, addr string) (*LoginResult, error) {
	if code == "" {
		return nil, &FieldError{Field: "code", Err: fmt.Errorf("%w: code is required", ErrInvalidArgument)}
	}
	path := keys.OAuthCode(HashToken(code))
	out := &LoginResult{}
	res, txn, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		*out = LoginResult{}
		doc, err := s.store.Get(path)
		if err != nil {
			return nil, err
		}
		if doc == nil {
			return nil, ErrInvalidCode
		}
		var c oauthCode
		if err := decodeJSON(doc, &c); err != nil {
			return nil, err
		}
		now := s.now()
		if c.ProjectID != pid || now.Unix() >= c.ExpiresAt {
			return nil, ErrInvalidCode
		}
		acc, rev, err := s.accountRev(pid, c.UserID)
		if err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrInvalidCode
		}
		// Disabling bumps the generation too: say why the code is void.
		if err := acc.checkEnabled(); err != nil {
			return nil, err
		}
		if acc.SessionGen != c.Gen {
			return nil, ErrInvalidCode
		}
		txn := &raftstore.Txn{Time: now.UnixNano(),
			Conds: []raftstore.Cond{
				{Path: path, Kind: raftstore.CondRevision, Revision: doc.Revision, Name: "code"},
				{Path: keys.User(pid, acc.ID), Kind: raftstore.CondRevision, Revision: rev},
				enabledCond(pid, acc.ID),
			},
			Ops: []raftstore.Op{{Kind: raftstore.OpDelete, Path: path},
				s.auditOp(pid, AuditEvent{Type: AuditLogin, UserID: acc.ID, Address: addr, Time: now, Detail: map[string]string{"provider": c.Provider}})},
		}
		if acc.totpEnabled() {
			tok, err := NewToken(ticketPrefix)
			if err != nil {
				return nil, err
			}
			t := ticket{grant: grant{ProjectID: pid, UserID: acc.ID, Gen: acc.SessionGen, ExpiresAt: now.Add(TicketTTL).Unix()}}
			txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Ticket(HashToken(tok)), Data: mustJSON(t)})
			out.RequiresTOTP, out.LoginTicket, out.ExpiresIn = true, tok, int(TicketTTL/time.Second)
			return txn, nil
		}
		token, sessOps, err := s.newSessionFor(pid, acc.ID, acc.SessionGen, clientOf(ctx, addr))
		if err != nil {
			return nil, err
		}
		txn.Ops = append(txn.Ops, sessOps...)
		u := acc.User
		out.Token, out.User = token, &u
		return txn, nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case res.OK():
		out.Revision = res.Revision
		return out, nil
	case res.Failed(txn) == "code":
		return nil, ErrInvalidCode
	case disabledAtCommit(res, txn):
		return nil, ErrAccountDisabled
	default:
		return nil, fmt.Errorf("oauth exchange refused: %s", res.Err)
	}
}

// SweepOAuth removes expired OAuth states and one-time codes (Sweep, which
// the leader runs, calls it). Each delete is conditioned on the revision
// judged, like Sweep's.
func (s *Service) SweepOAuth(ctx context.Context) (int, error) {
	removed := 0
	now := s.now().Unix()
	for _, dir := range []string{keys.OAuthStatesDir(), keys.OAuthCodesDir()} {
		after := ""
		for {
			docs, next, err := s.store.List(dir, after, sweepBatch)
			if err != nil {
				return removed, fmt.Errorf("sweep %s: %w", dir, err)
			}
			txn := &raftstore.Txn{Time: s.now().UnixNano()}
			for _, d := range docs {
				var rec struct {
					ExpiresAt int64 `json:"expiresAt"`
				}
				if json.Unmarshal(d.Data, &rec) == nil && now < rec.ExpiresAt {
					continue
				}
				txn.Conds = append(txn.Conds, raftstore.Cond{Path: d.Path, Kind: raftstore.CondRevision, Revision: d.Revision})
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: d.Path, IfExists: true})
			}
			if len(txn.Ops) > 0 {
				res, err := s.store.Txn(ctx, txn)
				if err != nil {
					return removed, fmt.Errorf("sweep %s: %w", dir, err)
				}
				if res.OK() {
					removed += len(txn.Ops)
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	return removed, nil
}
