package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Accounts calls a node's accounts API: the /api/auth actions (sign-up,
// sign-in, email codes, anonymous users, OAuth, sessions), the owner's
// routes (users, API keys, the audit log, email settings and templates,
// auth settings, OAuth providers) and /api/keys. Every request carries
// X-Project-Id and X-API-Key; methods that act for a signed-in user take
// that user's session token (an owner's for the owner routes).
//
// A refusal is an *APIError with the server's status, code, message and
// field. An Accounts is safe for concurrent use; it holds no session.
type Accounts struct {
	// BaseURL is a node's base URL, "http://host:port" or https.
	BaseURL   string
	ProjectID string
	APIKey    string
	// HTTPClient makes the requests; http.DefaultClient if nil.
	HTTPClient *http.Client
	// Session, when set, is the client's consistency session (shared with
	// Config.Session): GET requests carry X-Min-Revision and every
	// answer's X-Revision is observed.
	Session *SessionRevision
}

// APIError is a refusal of the accounts API: {"error":{"code","message",
// "field"}} with its HTTP status.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Field names the request field at fault, when the server named one.
	Field string
	// RetryAfter is the server's Retry-After (429 rate_limited, 503), or 0.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("edgebase: HTTP %d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	return s
}

// User is an account as the API shows it.
type User struct {
	ID            string   `json:"id"`
	Email         string   `json:"email"`
	Name          string   `json:"name"`
	Role          string   `json:"role"`
	TOTPEnabled   bool     `json:"totpEnabled"`
	CreatedAt     string   `json:"createdAt"`
	EmailVerified bool     `json:"emailVerified"`
	Anonymous     bool     `json:"anonymous,omitempty"`
	Disabled      bool     `json:"disabled,omitempty"`
	Providers     []string `json:"providers,omitempty"`
}

// Session is a new session: its bearer token and the account.
type Session struct {
	Token string `json:"token"`
	User  User   `json:"user"`
}

// LoginResult is the answer to a sign-in: a session, or, for an account
// with a second factor, a login ticket for LoginVerify.
type LoginResult struct {
	RequiresTOTP bool   `json:"requiresTotp"`
	Token        string `json:"token,omitempty"`
	User         *User  `json:"user,omitempty"`
	LoginTicket  string `json:"loginTicket,omitempty"`
	// ExpiresIn is the ticket's lifetime in seconds.
	ExpiresIn int `json:"expiresIn,omitempty"`
}

// ---- requests ----

// maxAnswer bounds an answer read into memory.
const maxAnswer = 16 << 20

// request is one call: method, path (with its query), the bearer token
// ("" none), a JSON body (nil none) and where to decode the answer.
func (a *Accounts) request(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("edgebase: encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.BaseURL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if a.ProjectID != "" {
		req.Header.Set("X-Project-Id", a.ProjectID)
	}
	if a.APIKey != "" {
		req.Header.Set("X-API-Key", a.APIKey)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == http.MethodGet {
		a.Session.setMinRevision(req.Header, 0)
	}
	hc := a.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiError(resp, b)
	}
	a.Session.observeHeader(resp.Header)
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("edgebase: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// apiError reads the error shape; an answer without it (a proxy's page)
// keeps its text as the message.
func apiError(resp *http.Response, b []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	e.Code, e.Message, e.Field = errorBody(resp.StatusCode, b)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// fields is the body of an /api/auth action: the action and its fields.
type fields map[string]any

// action calls POST /api/auth with {"action": name, ...f}.
func (a *Accounts) action(ctx context.Context, token, name string, f fields, out any) error {
	body := fields{"action": name}
	for k, v := range f {
		body[k] = v
	}
	return a.request(ctx, http.MethodPost, "/api/auth", token, body, out)
}

// ok is the answer {"ok":true}, with the members some actions add.
type ok struct {
	OK              bool `json:"ok"`
	AlreadyVerified bool `json:"alreadyVerified"`
	CodeSent        bool `json:"codeSent"`
	Deleted         bool `json:"deleted"`
}

type userAnswer struct {
	User User `json:"user"`
}

// ---- sign-up and sign-in ----

// Register creates an account with email and password and signs it in.
func (a *Accounts) Register(ctx context.Context, email, password, name string) (*Session, error) {
	var s Session
	if err := a.action(ctx, "", "register", fields{"email": email, "password": password, "name": name}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Login signs in with email and password.
func (a *Accounts) Login(ctx context.Context, email, password string) (*LoginResult, error) {
	var r LoginResult
	if err := a.action(ctx, "", "login", fields{"email": email, "password": password}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// LoginVerify completes a sign-in that answered RequiresTOTP with the
// authenticator app's code (or a recovery code).
func (a *Accounts) LoginVerify(ctx context.Context, loginTicket, code string) (*Session, error) {
	var s Session
	if err := a.action(ctx, "", "login-verify", fields{"loginTicket": loginTicket, "code": code}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Logout ends the session of token.
func (a *Accounts) Logout(ctx context.Context, token string) error {
	return a.action(ctx, token, "logout", nil, nil)
}

// Me returns the account of token.
func (a *Accounts) Me(ctx context.Context, token string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, token, "me", nil, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// ChangePassword replaces the password; every session of the account ends
// and the answer is the new one.
func (a *Accounts) ChangePassword(ctx context.Context, token, current, next string) (*Session, error) {
	var s Session
	if err := a.action(ctx, token, "change-password", fields{"currentPassword": current, "newPassword": next}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Reauthenticate proves the password again (and the second factor's code
// when the account has one: code "" otherwise), for actions that need a
// recent sign-in.
func (a *Accounts) Reauthenticate(ctx context.Context, token, password, code string) error {
	f := fields{"password": password}
	if code != "" {
		f["code"] = code
	}
	return a.action(ctx, token, "reauthenticate", f, nil)
}

// SetRole makes another account of the project an "owner" or a "user"
// (owners only).
func (a *Accounts) SetRole(ctx context.Context, token, userID, role string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, token, "set-role", fields{"userId": userID, "role": role}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// ---- the second factor (TOTP) ----

// Enrollment is a pending authenticator secret, shown once.
type Enrollment struct {
	Secret     string `json:"secret"`
	OtpauthURL string `json:"otpauthUrl"`
	// QRPng is the otpauth URL as a PNG QR code, base64.
	QRPng string `json:"qrPng"`
}

// EnrollTOTP starts (or restarts) enrolling an authenticator app.
func (a *Accounts) EnrollTOTP(ctx context.Context, token string) (*Enrollment, error) {
	var e Enrollment
	if err := a.request(ctx, http.MethodPost, "/api/authenticator/enroll", token, struct{}{}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ConfirmTOTP turns the second factor on with a code of the pending secret
// and returns the recovery codes (shown once).
func (a *Accounts) ConfirmTOTP(ctx context.Context, token, code string) (recoveryCodes []string, err error) {
	var c struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	if err := a.request(ctx, http.MethodPost, "/api/authenticator/confirm", token, fields{"code": code}, &c); err != nil {
		return nil, err
	}
	return c.RecoveryCodes, nil
}

// DisableTOTP turns the second factor off with a current code.
func (a *Accounts) DisableTOTP(ctx context.Context, token, code string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, token, "disable-totp", fields{"code": code}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// VerifyForReset proves the second factor of the account of email and
// returns the verify token of ResetPasswordWithVerifyToken.
func (a *Accounts) VerifyForReset(ctx context.Context, email, code string) (verifyToken string, err error) {
	var v struct {
		VerifyToken string `json:"verifyToken"`
	}
	if err := a.request(ctx, http.MethodPost, "/api/authenticator/verify", "", fields{"email": email, "code": code}, &v); err != nil {
		return "", err
	}
	return v.VerifyToken, nil
}

// ---- passwords and email codes ----

// ResetPasswordWithVerifyToken sets a new password with VerifyForReset's
// token (the TOTP path); every session of the account ends.
func (a *Accounts) ResetPasswordWithVerifyToken(ctx context.Context, email, verifyToken, newPassword string) error {
	return a.action(ctx, "", "reset-password", fields{"email": email, "verifyToken": verifyToken, "newPassword": newPassword}, nil)
}

// ResetPasswordWithEmailCode sets a new password with the code emailed by
// RequestPasswordReset; every session of the account ends.
func (a *Accounts) ResetPasswordWithEmailCode(ctx context.Context, email, code, newPassword string) error {
	return a.action(ctx, "", "reset-password", fields{"email": email, "emailCode": code, "newPassword": newPassword}, nil)
}

// ResetPasswordWithLink sets a new password with the token of the emailed
// link (mode=reset-password).
func (a *Accounts) ResetPasswordWithLink(ctx context.Context, linkToken, newPassword string) error {
	return a.action(ctx, "", "reset-password", fields{"token": linkToken, "newPassword": newPassword}, nil)
}

// RequestPasswordReset emails a reset code to email when it has an account
// (the answer is the same either way).
func (a *Accounts) RequestPasswordReset(ctx context.Context, email string) error {
	return a.action(ctx, "", "request-password-reset", fields{"email": email}, nil)
}

// SendVerification emails the caller a code proving their address;
// alreadyVerified is true (and nothing is sent) when it is proven already.
func (a *Accounts) SendVerification(ctx context.Context, token string) (alreadyVerified bool, err error) {
	var r ok
	if err := a.action(ctx, token, "send-verification", nil, &r); err != nil {
		return false, err
	}
	return r.AlreadyVerified, nil
}

// VerifyEmail proves the address email with the emailed code.
func (a *Accounts) VerifyEmail(ctx context.Context, email, code string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, "", "verify-email", fields{"email": email, "code": code}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// VerifyEmailLink proves an address with the token of the emailed link
// (mode=verify-email).
func (a *Accounts) VerifyEmailLink(ctx context.Context, linkToken string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, "", "verify-email", fields{"token": linkToken}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// RequestEmailCode emails a sign-in code to email when it has an account
// (the answer is the same either way).
func (a *Accounts) RequestEmailCode(ctx context.Context, email string) error {
	return a.action(ctx, "", "request-email-code", fields{"email": email}, nil)
}

// LoginEmailCode signs in with the emailed code; it proves the address.
func (a *Accounts) LoginEmailCode(ctx context.Context, email, code string) (*LoginResult, error) {
	var r LoginResult
	if err := a.action(ctx, "", "login-email-code", fields{"email": email, "code": code}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// LoginEmailLink signs in with the token of the emailed link (mode=sign-in).
func (a *Accounts) LoginEmailLink(ctx context.Context, linkToken string) (*LoginResult, error) {
	var r LoginResult
	if err := a.action(ctx, "", "login-email-code", fields{"token": linkToken}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RequestEmailChange starts moving the caller's account to newEmail: a code
// is sent to the new address (needs a recent sign-in).
func (a *Accounts) RequestEmailChange(ctx context.Context, token, newEmail string) error {
	return a.action(ctx, token, "change-email", fields{"newEmail": newEmail}, nil)
}

// ConfirmEmailChange completes the change with the code sent to newEmail.
func (a *Accounts) ConfirmEmailChange(ctx context.Context, token, newEmail, code string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, token, "change-email", fields{"newEmail": newEmail, "code": code}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// ConfirmEmailChangeLink completes the change with the token of the emailed
// link (mode=change-email).
func (a *Accounts) ConfirmEmailChangeLink(ctx context.Context, token, linkToken string) (*User, error) {
	var u userAnswer
	if err := a.action(ctx, token, "change-email", fields{"token": linkToken}, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// DeleteAccount deletes the caller's account and everything it owns (needs
// a recent sign-in).
func (a *Accounts) DeleteAccount(ctx context.Context, token string) error {
	return a.action(ctx, token, "delete-account", nil, nil)
}

// ---- anonymous users ----

// SignInAnonymously creates an anonymous account and signs it in.
func (a *Accounts) SignInAnonymously(ctx context.Context) (*Session, error) {
	var s Session
	if err := a.action(ctx, "", "sign-in-anonymously", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// LinkEmail gives the anonymous account of token an email and password; it
// keeps its id and data. The answer is its new session.
func (a *Accounts) LinkEmail(ctx context.Context, token, email, password string) (*Session, error) {
	var s Session
	if err := a.action(ctx, token, "link-email", fields{"email": email, "password": password}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ---- OAuth / OIDC ----

// OAuthStartURL is where a browser starts signing in with provider; it
// comes back to redirect (one of the provider's redirectUrls) with
// ?code=<one-time code> for OAuthExchange, or ?error=...
func (a *Accounts) OAuthStartURL(provider, redirect string) string {
	q := url.Values{"projectId": {a.ProjectID}, "redirect": {redirect}}
	return strings.TrimRight(a.BaseURL, "/") + "/api/auth/oauth/" + url.PathEscape(provider) + "/start?" + q.Encode()
}

// OAuthExchange turns the one-time code of the redirect into a sign-in.
func (a *Accounts) OAuthExchange(ctx context.Context, code string) (*LoginResult, error) {
	var r LoginResult
	if err := a.action(ctx, "", "oauth-exchange", fields{"code": code}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// OAuthLink returns the URL to send the browser to (the provider's
// authorization URL) so that provider's identity is linked to the caller's
// account (an anonymous one keeps its id and data); the redirect then
// comes back to redirect as after OAuthStartURL.
func (a *Accounts) OAuthLink(ctx context.Context, token, provider, redirect string) (string, error) {
	var r struct {
		URL string `json:"url"`
	}
	if err := a.action(ctx, token, "oauth-link", fields{"provider": provider, "redirect": redirect}, &r); err != nil {
		return "", err
	}
	return r.URL, nil
}

// OAuthProviderSummary is a provider a sign-in page offers.
type OAuthProviderSummary struct {
	Provider string `json:"provider"`
	Issuer   string `json:"issuer"`
}

// OAuthProviders lists the project's providers (no session needed).
func (a *Accounts) OAuthProviders(ctx context.Context) ([]OAuthProviderSummary, error) {
	var r struct {
		Providers []OAuthProviderSummary `json:"providers"`
	}
	if err := a.request(ctx, http.MethodGet, "/api/auth/oauth", "", nil, &r); err != nil {
		return nil, err
	}
	return r.Providers, nil
}

// OAuthProviderConfig configures a provider (owners): google, apple,
// github, or any name with Issuer set (OIDC discovery).
type OAuthProviderConfig struct {
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	Issuer       string   `json:"issuer,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	RedirectURLs []string `json:"redirectUrls"`
}

// OAuthProviderInfo is a configured provider (never its secret).
type OAuthProviderInfo struct {
	Provider     string   `json:"provider"`
	ClientID     string   `json:"clientId"`
	Issuer       string   `json:"issuer"`
	Scopes       []string `json:"scopes"`
	RedirectURLs []string `json:"redirectUrls"`
	SecretSet    bool     `json:"secretSet"`
}

func oauthPath(provider string) string { return "/api/auth/oauth/" + url.PathEscape(provider) }

// SetOAuthProvider configures provider (owners).
func (a *Accounts) SetOAuthProvider(ctx context.Context, token, provider string, cfg OAuthProviderConfig) (*OAuthProviderInfo, error) {
	var r OAuthProviderInfo
	if err := a.request(ctx, http.MethodPut, oauthPath(provider), token, cfg, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// OAuthProvider returns provider's configuration (owners).
func (a *Accounts) OAuthProvider(ctx context.Context, token, provider string) (*OAuthProviderInfo, error) {
	var r OAuthProviderInfo
	if err := a.request(ctx, http.MethodGet, oauthPath(provider), token, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeleteOAuthProvider removes provider (owners).
func (a *Accounts) DeleteOAuthProvider(ctx context.Context, token, provider string) error {
	return a.request(ctx, http.MethodDelete, oauthPath(provider), token, nil, nil)
}

// ---- sessions ----

// SessionInfo is one of the caller's sessions.
type SessionInfo struct {
	ID         string `json:"id"`
	CreatedAt  string `json:"createdAt"`
	LastUsedAt string `json:"lastUsedAt"`
	Address    string `json:"address"`
	UserAgent  string `json:"userAgent"`
	// Current marks the session of the token that asked.
	Current bool `json:"current"`
}

// ListSessions lists the caller's sessions.
func (a *Accounts) ListSessions(ctx context.Context, token string) ([]SessionInfo, error) {
	var r struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	if err := a.action(ctx, token, "list-sessions", nil, &r); err != nil {
		return nil, err
	}
	return r.Sessions, nil
}

// RevokeSession ends one of the caller's sessions.
func (a *Accounts) RevokeSession(ctx context.Context, token, sessionID string) error {
	return a.action(ctx, token, "revoke-session", fields{"sessionId": sessionID}, nil)
}

// ---- users (owners) ----

// UserQuery selects a page of users: Query matches an email prefix, an
// exact id or a name substring; Limit 1..100 (0: the server's 50).
type UserQuery struct {
	Query  string
	Cursor string
	Limit  int
}

// UserPage is a page of users; NextCursor continues it ("" at the end).
type UserPage struct {
	Users      []User `json:"users"`
	NextCursor string `json:"nextCursor"`
}

// ListUsers returns a page of the project's users.
func (a *Accounts) ListUsers(ctx context.Context, token string, q UserQuery) (*UserPage, error) {
	v := url.Values{}
	setQuery(v, "query", q.Query)
	setQuery(v, "cursor", q.Cursor)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p UserPage
	if err := a.request(ctx, http.MethodGet, withQuery("/api/auth/users", v), token, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func userPath(id string) string { return "/api/auth/users/" + url.PathEscape(id) }

// GetUser returns one user.
func (a *Accounts) GetUser(ctx context.Context, token, id string) (*User, error) {
	var u userAnswer
	if err := a.request(ctx, http.MethodGet, userPath(id), token, nil, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// DisableUser stops an account from signing in and ends its sessions.
func (a *Accounts) DisableUser(ctx context.Context, token, id string) (*User, error) {
	var u userAnswer
	if err := a.request(ctx, http.MethodPost, userPath(id)+"/disable", token, nil, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// EnableUser lets a disabled account sign in again.
func (a *Accounts) EnableUser(ctx context.Context, token, id string) (*User, error) {
	var u userAnswer
	if err := a.request(ctx, http.MethodPost, userPath(id)+"/enable", token, nil, &u); err != nil {
		return nil, err
	}
	return &u.User, nil
}

// RevokeUserSessions ends every session of an account.
func (a *Accounts) RevokeUserSessions(ctx context.Context, token, id string) error {
	return a.request(ctx, http.MethodPost, userPath(id)+"/revoke-sessions", token, nil, nil)
}

// DeleteUser deletes an account and everything it owns.
func (a *Accounts) DeleteUser(ctx context.Context, token, id string) error {
	return a.request(ctx, http.MethodDelete, userPath(id), token, nil, nil)
}

// ---- API keys (owners) ----

// APIKey is a project API key as listed (never the key).
type APIKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
	Prefix    string `json:"prefix"`
}

// NewAPIKey is a created key: Key is shown this once.
type NewAPIKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Key       string `json:"key"`
	CreatedAt string `json:"createdAt"`
}

// CreateAPIKey creates a project API key named name.
func (a *Accounts) CreateAPIKey(ctx context.Context, token, name string) (*NewAPIKey, error) {
	var k NewAPIKey
	if err := a.request(ctx, http.MethodPost, "/api/keys", token, fields{"name": name}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListAPIKeys lists the project's keys (the original one as id "default").
func (a *Accounts) ListAPIKeys(ctx context.Context, token string) ([]APIKey, error) {
	var r struct {
		Keys []APIKey `json:"keys"`
	}
	if err := a.request(ctx, http.MethodGet, "/api/keys", token, nil, &r); err != nil {
		return nil, err
	}
	return r.Keys, nil
}

// DeleteAPIKey deletes a key; it fails on every node at once.
func (a *Accounts) DeleteAPIKey(ctx context.Context, token, id string) error {
	return a.request(ctx, http.MethodDelete, "/api/keys/"+url.PathEscape(id), token, nil, nil)
}

// ---- the audit log (owners) ----

// AuditQuery selects a page of the audit log: events strictly older than
// Cursor (a NextCursor; "" the newest), of UserID and of Type when set;
// Limit 1..100 (0: the server's 50).
type AuditQuery struct {
	Cursor string
	Limit  int
	UserID string
	Type   string
}

// AuditEvent is one security event.
type AuditEvent struct {
	ID      string            `json:"id"`
	Time    string            `json:"time"`
	Type    string            `json:"type"`
	UserID  string            `json:"userId"`
	ActorID string            `json:"actorId"`
	Address string            `json:"address"`
	Detail  map[string]string `json:"detail"`
}

// AuditPage is a page of the audit log, newest first. A page may hold
// fewer events than asked (even none) with a NextCursor when a filter
// matches rarely; NextCursor "" means there is nothing older.
type AuditPage struct {
	Events     []AuditEvent `json:"events"`
	NextCursor string       `json:"nextCursor"`
}

// ListAudit returns a page of the project's security audit log.
func (a *Accounts) ListAudit(ctx context.Context, token string, q AuditQuery) (*AuditPage, error) {
	v := url.Values{}
	setQuery(v, "cursor", q.Cursor)
	setQuery(v, "userId", q.UserID)
	setQuery(v, "type", q.Type)
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p AuditPage
	if err := a.request(ctx, http.MethodGet, withQuery("/api/auth/audit", v), token, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ---- email settings (owners) ----

// SMTPSettings is the project's own SMTP server. Security is "starttls"
// (default), "tls" or "none".
type SMTPSettings struct {
	Host     string `json:"host"`
	Port     int    `json:"port,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	From     string `json:"from"`
	FromName string `json:"fromName,omitempty"`
	Security string `json:"security,omitempty"`
}

// SMTPView is the stored server, never its password.
type SMTPView struct {
	Host        string `json:"host"`
	Port        int    `json:"port"`
	Username    string `json:"username"`
	From        string `json:"from"`
	FromName    string `json:"fromName"`
	Security    string `json:"security"`
	PasswordSet bool   `json:"passwordSet"`
}

// SetSMTP sets the project's SMTP server.
func (a *Accounts) SetSMTP(ctx context.Context, token string, s SMTPSettings) (*SMTPView, error) {
	var v SMTPView
	if err := a.request(ctx, http.MethodPut, "/api/auth/smtp", token, s, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SMTP returns the project's SMTP server (404 not_found: it uses the
// cluster's default).
func (a *Accounts) SMTP(ctx context.Context, token string) (*SMTPView, error) {
	var v SMTPView
	if err := a.request(ctx, http.MethodGet, "/api/auth/smtp", token, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteSMTP goes back to the cluster's default SMTP server.
func (a *Accounts) DeleteSMTP(ctx context.Context, token string) error {
	return a.request(ctx, http.MethodDelete, "/api/auth/smtp", token, nil, nil)
}

// EmailTemplate is one kind of email ("verification", "password-reset",
// "sign-in-code", "change-email"): Go templates with {{.Code}}, {{.Link}},
// {{.Email}}, {{.NewEmail}}, {{.Project}}, {{.ExpiresMinutes}}. Custom is
// false for the default.
type EmailTemplate struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	Custom  bool   `json:"custom,omitempty"`
}

// EmailTemplates returns every kind's template, by kind.
func (a *Accounts) EmailTemplates(ctx context.Context, token string) (map[string]EmailTemplate, error) {
	var r struct {
		Templates map[string]EmailTemplate `json:"templates"`
	}
	if err := a.request(ctx, http.MethodGet, "/api/auth/email-templates", token, nil, &r); err != nil {
		return nil, err
	}
	return r.Templates, nil
}

func templatePath(kind string) string { return "/api/auth/email-templates/" + url.PathEscape(kind) }

// SetEmailTemplate replaces kind's template (Custom is not sent).
func (a *Accounts) SetEmailTemplate(ctx context.Context, token, kind string, t EmailTemplate) (*EmailTemplate, error) {
	var r EmailTemplate
	body := fields{"subject": t.Subject, "text": t.Text, "html": t.HTML}
	if err := a.request(ctx, http.MethodPut, templatePath(kind), token, body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ResetEmailTemplate restores kind's default template and returns it.
func (a *Accounts) ResetEmailTemplate(ctx context.Context, token, kind string) (*EmailTemplate, error) {
	var r EmailTemplate
	if err := a.request(ctx, http.MethodDelete, templatePath(kind), token, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ---- auth settings (owners) ----

// AuthSettings are the project's sign-in settings.
type AuthSettings struct {
	AnonymousSignIn bool `json:"anonymousSignIn"`
	// EmailActionURL is where emailed links point ("" none: codes only).
	EmailActionURL string `json:"emailActionUrl"`
}

// AuthSettingsPatch changes the settings it sets (nil: unchanged).
type AuthSettingsPatch struct {
	AnonymousSignIn *bool   `json:"anonymousSignIn,omitempty"`
	EmailActionURL  *string `json:"emailActionUrl,omitempty"`
}

// AuthSettings returns the project's sign-in settings.
func (a *Accounts) AuthSettings(ctx context.Context, token string) (*AuthSettings, error) {
	var s AuthSettings
	if err := a.request(ctx, http.MethodGet, "/api/auth/settings", token, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SetAuthSettings changes some settings and returns all of them.
func (a *Accounts) SetAuthSettings(ctx context.Context, token string, p AuthSettingsPatch) (*AuthSettings, error) {
	var s AuthSettings
	if err := a.request(ctx, http.MethodPut, "/api/auth/settings", token, p, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ---- helpers ----

func setQuery(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}
