package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/realtime/client"
)

// wantAPIError checks err is an *client.APIError with status, code and
// field ("" any field).
func wantAPIError(t *testing.T, what string, err error, status int, code, field string) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v, want an *APIError %d %s", what, err, status, code)
	}
	if ae.Status != status || ae.Code != code || (field != "" && ae.Field != field) || ae.Message == "" {
		t.Fatalf("%s: %+v, want %d %s field %q", what, ae, status, code, field)
	}
	return ae
}

func must[T any](t *testing.T, what string) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// mailbox hands out the codes the node emails through a real SMTP server.
type mailbox struct {
	t   *testing.T
	srv *smtptest.Server
}

// next waits for the email to `to` after the `seen` it held before and
// returns its code.
func (m mailbox) next(to string, seen int) string {
	m.t.Helper()
	deadline := time.Now().Add(smtptest.WaitTimeout)
	for {
		if got := m.srv.To(to); len(got) > seen {
			c := smtptest.Code(got[len(got)-1])
			if c == "" {
				m.t.Fatalf("email to %s carries no code: %q", to, got[len(got)-1].Text)
			}
			return c
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("no email #%d to %s within %v", seen+1, to, smtptest.WaitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m mailbox) count(to string) int { return len(m.srv.To(to)) }

// TestAccountsOnANode drives every accounts method of the Go client against
// a real node (Badger, Raft, the real router) whose emails go to a real
// SMTP server: a user's life from sign-up to deletion, the second factor,
// the email codes, anonymous users, sessions, and the owner's routes. Each
// refusal arrives as an *APIError with the server's status, code and field.
func TestAccountsOnANode(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	mb := mailbox{t: t, srv: srv}
	clk := nodetest.NewClock(time.Now().Truncate(30 * time.Second))
	c := nodetest.Start(t, nodetest.Options{Clock: clk, AllowPrivateHosts: []string{"127.0.0.1"},
		SMTPDefault: auth.SMTPSettings{Host: srv.Host(), Port: srv.Port(), From: "noreply@client.example", Security: "none"}})
	p := c.CreateProject(0)
	a := &client.Accounts{BaseURL: c.Nodes[0].URL(), ProjectID: p.ID, APIKey: p.APIKey, HTTPClient: &http.Client{Timeout: time.Minute}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ada, pw, pw2, pwR, pw3 = "ada@client.example", "first passphrase 11", "second passphrase 22", "reset passphrase 44", "third passphrase 33"
	totp := func(secret string) string {
		t.Helper()
		code, err := rfc6238.Authenticator(secret, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return code
	}

	// Sign-up, sign-in, refusals.
	s1 := must[*client.Session](t, "register")(a.Register(ctx, ada, pw, "Ada"))
	if s1.User.Email != ada || s1.User.Name != "Ada" || s1.User.EmailVerified || !strings.HasPrefix(s1.Token, "ebt_") {
		t.Fatalf("register: %+v", s1)
	}
	adaID := s1.User.ID
	_, err := a.Register(ctx, ada, pw, "Ada")
	wantAPIError(t, "second register", err, 409, "email_taken", "email")
	_, err = a.Register(ctx, "not an email", pw, "")
	wantAPIError(t, "register with a bad email", err, 400, "invalid_argument", "email")
	_, err = a.Login(ctx, ada, "wrong passphrase 00")
	wantAPIError(t, "wrong password", err, 401, "invalid_credentials", "")
	if me := must[*client.User](t, "me")(a.Me(ctx, s1.Token)); me.ID != adaID {
		t.Fatalf("me: %+v", me)
	}
	noKey := *a
	noKey.APIKey = "ebk_wrong"
	_, err = noKey.Login(ctx, ada, pw)
	wantAPIError(t, "wrong API key", err, 401, "invalid_api_key", "")

	// The email address, proven by a code.
	n := mb.count(ada)
	if already := must[bool](t, "send-verification")(a.SendVerification(ctx, s1.Token)); already {
		t.Fatal("send-verification: already verified")
	}
	code := mb.next(ada, n)
	_, err = a.VerifyEmail(ctx, ada, wrongCode(code))
	wantAPIError(t, "verify with a wrong code", err, 400, "invalid_code", "code")
	if u := must[*client.User](t, "verify-email")(a.VerifyEmail(ctx, ada, code)); !u.EmailVerified || u.ID != adaID {
		t.Fatalf("verify-email: %+v", u)
	}
	if already := must[bool](t, "send-verification again")(a.SendVerification(ctx, s1.Token)); !already {
		t.Fatal("send-verification after verifying: not alreadyVerified")
	}

	// A new password ends the old session.
	s2 := must[*client.Session](t, "change-password")(a.ChangePassword(ctx, s1.Token, pw, pw2))
	_, err = a.Me(ctx, s1.Token)
	wantAPIError(t, "the old session after change-password", err, 401, "invalid_token", "")

	// The second factor: enroll, confirm, sign in with it, turn it off.
	enr := must[*client.Enrollment](t, "enroll")(a.EnrollTOTP(ctx, s2.Token))
	if enr.Secret == "" || !strings.HasPrefix(enr.OtpauthURL, "otpauth://") || enr.QRPng == "" {
		t.Fatalf("enrollment %+v", enr)
	}
	rec := must[[]string](t, "confirm")(a.ConfirmTOTP(ctx, s2.Token, totp(enr.Secret)))
	if len(rec) != 10 {
		t.Fatalf("%d recovery codes", len(rec))
	}
	clk.Advance(30 * time.Second)
	lr := must[*client.LoginResult](t, "login with TOTP")(a.Login(ctx, ada, pw2))
	if !lr.RequiresTOTP || lr.Token != "" || lr.LoginTicket == "" || lr.ExpiresIn != 300 {
		t.Fatalf("login of a TOTP account: %+v", lr)
	}
	_, err = a.LoginVerify(ctx, lr.LoginTicket, "")
	wantAPIError(t, "login-verify without a code", err, 400, "invalid_argument", "code")
	s3 := must[*client.Session](t, "login-verify")(a.LoginVerify(ctx, lr.LoginTicket, totp(enr.Secret)))
	if !s3.User.TOTPEnabled {
		t.Fatalf("login-verify: %+v", s3.User)
	}
	clk.Advance(30 * time.Second)
	// The authenticator's reset path: a verify token, then the new password.
	vt := must[string](t, "verify for reset")(a.VerifyForReset(ctx, ada, totp(enr.Secret)))
	_, err = a.VerifyForReset(ctx, ada, "000000")
	wantAPIError(t, "verify for reset with a wrong code", err, 400, "invalid_code", "")
	mustDo(t, "reset-password with the verify token", a.ResetPasswordWithVerifyToken(ctx, ada, vt, pwR))
	wantAPIError(t, "the verify token again", a.ResetPasswordWithVerifyToken(ctx, ada, vt, pw2), 401, "invalid_verify_token", "verifyToken")
	clk.Advance(30 * time.Second)
	lr = must[*client.LoginResult](t, "login after the reset")(a.Login(ctx, ada, pwR))
	s3 = must[*client.Session](t, "login-verify after the reset")(a.LoginVerify(ctx, lr.LoginTicket, totp(enr.Secret)))
	clk.Advance(30 * time.Second)
	if u := must[*client.User](t, "disable-totp")(a.DisableTOTP(ctx, s3.Token, totp(enr.Secret))); u.TOTPEnabled {
		t.Fatalf("disable-totp: %+v", u)
	}
	mustDo(t, "reauthenticate", a.Reauthenticate(ctx, s3.Token, pwR, ""))
	wantAPIError(t, "reauthenticate with a wrong password", a.Reauthenticate(ctx, s3.Token, pw, ""), 401, "invalid_credentials", "password")

	// Password reset by email code: every session ends.
	n = mb.count(ada)
	mustDo(t, "request-password-reset", a.RequestPasswordReset(ctx, ada))
	mustDo(t, "request-password-reset of nobody", a.RequestPasswordReset(ctx, "nobody@client.example"))
	code = mb.next(ada, n)
	mustDo(t, "reset-password", a.ResetPasswordWithEmailCode(ctx, ada, code, pw3))
	_, err = a.Me(ctx, s3.Token)
	wantAPIError(t, "a session after the reset", err, 401, "invalid_token", "")
	wantAPIError(t, "the code again", a.ResetPasswordWithEmailCode(ctx, ada, code, pw), 400, "invalid_code", "emailCode")
	lr = must[*client.LoginResult](t, "login with the new password")(a.Login(ctx, ada, pw3))
	if lr.RequiresTOTP || lr.User == nil || lr.User.ID != adaID {
		t.Fatalf("login: %+v", lr)
	}

	// Passwordless sign-in by email code.
	n = mb.count(ada)
	mustDo(t, "request-email-code", a.RequestEmailCode(ctx, ada))
	code = mb.next(ada, n)
	lr = must[*client.LoginResult](t, "login-email-code")(a.LoginEmailCode(ctx, ada, code))
	if lr.Token == "" || lr.User.ID != adaID {
		t.Fatalf("login-email-code: %+v", lr)
	}
	s4 := lr.Token

	// A new address, proven by a code sent to it.
	const ada2 = "ada.two@client.example"
	mustDo(t, "change-email", a.RequestEmailChange(ctx, s4, ada2))
	code = mb.next(ada2, 0)
	if u := must[*client.User](t, "confirm change-email")(a.ConfirmEmailChange(ctx, s4, ada2, code)); u.Email != ada2 || !u.EmailVerified {
		t.Fatalf("change-email: %+v", u)
	}

	// Sessions: list, revoke one, not another's.
	sessions := must[[]client.SessionInfo](t, "list-sessions")(a.ListSessions(ctx, s4))
	var cur, other string
	for _, s := range sessions {
		if s.Current {
			cur = s.ID
		} else {
			other = s.ID
		}
	}
	if len(sessions) != 2 || cur == "" || other == "" {
		t.Fatalf("sessions %+v, want the current one and the password login's", sessions)
	}
	mustDo(t, "revoke-session", a.RevokeSession(ctx, s4, other))
	wantAPIError(t, "revoke it again", a.RevokeSession(ctx, s4, other), 404, "not_found", "sessionId")
	if n := len(must[[]client.SessionInfo](t, "list-sessions")(a.ListSessions(ctx, s4))); n != 1 {
		t.Fatalf("%d sessions after revoking one", n)
	}

	// Anonymous users and linking an email.
	anon := must[*client.Session](t, "sign-in-anonymously")(a.SignInAnonymously(ctx))
	if !anon.User.Anonymous || anon.User.Email != "" {
		t.Fatalf("anonymous: %+v", anon.User)
	}
	const bob = "bob@client.example"
	linked := must[*client.Session](t, "link-email")(a.LinkEmail(ctx, anon.Token, bob, pw))
	if linked.User.ID != anon.User.ID || linked.User.Anonymous || linked.User.Email != bob {
		t.Fatalf("link-email: %+v", linked.User)
	}
	_, err = a.LinkEmail(ctx, linked.Token, "bob2@client.example", pw)
	wantAPIError(t, "link-email of a linked account", err, 409, "already_linked", "")
	mustDo(t, "logout", a.Logout(ctx, linked.Token))
	_, err = a.Me(ctx, linked.Token)
	wantAPIError(t, "a session after logout", err, 401, "invalid_token", "")

	// The owner's routes.
	own := p.OwnerToken
	_, err = a.ListAudit(ctx, s4, client.AuditQuery{})
	wantAPIError(t, "a user reads the audit log", err, 403, "forbidden", "")
	if u := must[*client.User](t, "set-role")(a.SetRole(ctx, own, linked.User.ID, "owner")); u.Role != "owner" {
		t.Fatalf("set-role: %+v", u)
	}
	must[*client.User](t, "set-role back")(a.SetRole(ctx, own, linked.User.ID, "user"))

	set := must[*client.AuthSettings](t, "auth settings")(a.AuthSettings(ctx, own))
	if !set.AnonymousSignIn || set.EmailActionURL != "" {
		t.Fatalf("default settings %+v", set)
	}
	off := false
	if set := must[*client.AuthSettings](t, "set auth settings")(a.SetAuthSettings(ctx, own, client.AuthSettingsPatch{AnonymousSignIn: &off})); set.AnonymousSignIn {
		t.Fatalf("settings after turning anonymous off: %+v", set)
	}
	_, err = a.SignInAnonymously(ctx)
	wantAPIError(t, "anonymous when off", err, 403, "anonymous_disabled", "")
	bad := "ftp://x"
	_, err = a.SetAuthSettings(ctx, own, client.AuthSettingsPatch{EmailActionURL: &bad})
	wantAPIError(t, "a bad emailActionUrl", err, 400, "invalid_argument", "emailActionUrl")

	var ids []string
	q := client.UserQuery{Limit: 1}
	for range 10 {
		page := must[*client.UserPage](t, "list users")(a.ListUsers(ctx, own, q))
		for _, u := range page.Users {
			ids = append(ids, u.ID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	slices.Sort(ids)
	want := []string{p.OwnerID, adaID, linked.User.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("users %v, want %v", ids, want)
	}
	if page := must[*client.UserPage](t, "search users")(a.ListUsers(ctx, own, client.UserQuery{Query: "bob@"})); len(page.Users) != 1 || page.Users[0].ID != linked.User.ID {
		t.Fatalf("search bob@: %+v", page.Users)
	}
	_, err = a.ListUsers(ctx, own, client.UserQuery{Limit: 101})
	wantAPIError(t, "list users limit 101", err, 400, "invalid_argument", "limit")
	if u := must[*client.User](t, "get user")(a.GetUser(ctx, own, adaID)); u.Email != ada2 {
		t.Fatalf("get user: %+v", u)
	}
	if u := must[*client.User](t, "disable")(a.DisableUser(ctx, own, adaID)); !u.Disabled {
		t.Fatalf("disable: %+v", u)
	}
	_, err = a.Login(ctx, ada2, pw3)
	wantAPIError(t, "login of a disabled account", err, 403, "account_disabled", "")
	if u := must[*client.User](t, "enable")(a.EnableUser(ctx, own, adaID)); u.Disabled {
		t.Fatalf("enable: %+v", u)
	}
	s5 := must[*client.LoginResult](t, "login after enable")(a.Login(ctx, ada2, pw3)).Token
	mustDo(t, "revoke user sessions", a.RevokeUserSessions(ctx, own, adaID))
	_, err = a.Me(ctx, s5)
	wantAPIError(t, "a session after revoke-sessions", err, 401, "invalid_token", "")

	key := must[*client.NewAPIKey](t, "create key")(a.CreateAPIKey(ctx, own, "ci"))
	if key.Key == "" || key.Name != "ci" {
		t.Fatalf("new key %+v", key)
	}
	withKey := *a
	withKey.APIKey = key.Key
	must[*client.LoginResult](t, "login with the new key")(withKey.Login(ctx, bob, pw))
	keys := must[[]client.APIKey](t, "list keys")(a.ListAPIKeys(ctx, own))
	if len(keys) != 2 || !slices.ContainsFunc(keys, func(k client.APIKey) bool { return k.ID == "default" }) ||
		!slices.ContainsFunc(keys, func(k client.APIKey) bool { return k.ID == key.ID && k.Name == "ci" }) {
		t.Fatalf("keys %+v", keys)
	}
	mustDo(t, "delete key", a.DeleteAPIKey(ctx, own, key.ID))
	_, err = withKey.Login(ctx, bob, pw)
	wantAPIError(t, "the deleted key", err, 401, "invalid_api_key", "")
	wantAPIError(t, "delete an unknown key", a.DeleteAPIKey(ctx, own, "nope"), 404, "not_found", "id")

	_, err = a.SMTP(ctx, own)
	wantAPIError(t, "no SMTP server of the project's own", err, 404, "not_found", "")
	view := must[*client.SMTPView](t, "set smtp")(a.SetSMTP(ctx, own, client.SMTPSettings{Host: srv.Host(), Port: srv.Port(), From: "team@client.example", Security: "none"}))
	if view.Host != srv.Host() || view.Port != srv.Port() || view.PasswordSet {
		t.Fatalf("smtp %+v", view)
	}
	if got := must[*client.SMTPView](t, "get smtp")(a.SMTP(ctx, own)); *got != *view {
		t.Fatalf("smtp read back %+v, want %+v", got, view)
	}
	_, err = a.SetSMTP(ctx, own, client.SMTPSettings{Host: srv.Host(), Port: srv.Port(), From: "team@client.example", Security: "carrier pigeon"})
	wantAPIError(t, "a bad security", err, 400, "invalid_argument", "security")
	mustDo(t, "delete smtp", a.DeleteSMTP(ctx, own))

	tpls := must[map[string]client.EmailTemplate](t, "templates")(a.EmailTemplates(ctx, own))
	for _, k := range []string{"verification", "password-reset", "sign-in-code", "change-email"} {
		if tpls[k].Subject == "" || tpls[k].Custom {
			t.Fatalf("template %s: %+v", k, tpls[k])
		}
	}
	tpl := must[*client.EmailTemplate](t, "set template")(a.SetEmailTemplate(ctx, own, "sign-in-code", client.EmailTemplate{Subject: "Sign in", Text: "Your code: {{.Code}}"}))
	if !tpl.Custom || tpl.Text != "Your code: {{.Code}}" {
		t.Fatalf("set template: %+v", tpl)
	}
	_, err = a.SetEmailTemplate(ctx, own, "sign-in-code", client.EmailTemplate{Subject: "{{", Text: "x"})
	wantAPIError(t, "a template that does not parse", err, 400, "invalid_argument", "subject")
	_, err = a.SetEmailTemplate(ctx, own, "postcard", client.EmailTemplate{Subject: "x", Text: "x"})
	wantAPIError(t, "an unknown kind", err, 404, "not_found", "kind")
	mustDo(t, "request-email-code (custom template)", a.RequestEmailCode(ctx, bob))
	code = mb.next(bob, 0)
	if got := srv.To(bob); got[len(got)-1].Subject != "Sign in" || strings.TrimSpace(got[len(got)-1].Text) != "Your code: "+code {
		t.Fatalf("custom template not used: %q %q", got[len(got)-1].Subject, got[len(got)-1].Text)
	}
	if tpl := must[*client.EmailTemplate](t, "reset template")(a.ResetEmailTemplate(ctx, own, "sign-in-code")); tpl.Custom {
		t.Fatalf("reset template: %+v", tpl)
	}

	// The audit log saw it all, newest first.
	var types []string
	aq := client.AuditQuery{UserID: adaID, Limit: 3}
	for range 100 {
		page := must[*client.AuditPage](t, "audit")(a.ListAudit(ctx, own, aq))
		for _, e := range page.Events {
			types = append(types, e.Type)
		}
		if page.NextCursor == "" {
			break
		}
		aq.Cursor = page.NextCursor
	}
	// (The test clock stands still between its steps, and events of one
	// instant have no order among them: compare as sets.)
	slices.Sort(types)
	wantTypes := []string{"account-disabled", "account-enabled", "email-changed", "email-verified", "login", "login", "login", "login", "login",
		"password-changed", "password-reset", "password-reset", "register", "sessions-revoked", "sessions-revoked", "totp-disabled", "totp-enabled"}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("ada's audit events %v, want %v", types, wantTypes)
	}
	_, err = a.ListAudit(ctx, own, client.AuditQuery{Type: "nap"})
	wantAPIError(t, "audit with an unknown type", err, 400, "invalid_argument", "type")

	// OAuth without a provider configured: nothing to offer, and each
	// call refused as the server says.
	if provs := must[[]client.OAuthProviderSummary](t, "oauth providers")(a.OAuthProviders(ctx)); len(provs) != 0 {
		t.Fatalf("providers %+v", provs)
	}
	_, err = a.OAuthProvider(ctx, own, "github")
	wantAPIError(t, "an unset provider", err, 404, "not_found", "provider")
	_, err = a.OAuthExchange(ctx, "ebo_not_a_code")
	wantAPIError(t, "an unknown one-time code", err, 400, "invalid_code", "")
	bobTok := must[*client.LoginResult](t, "bob's login")(a.Login(ctx, bob, pw)).Token
	wantAPIError(t, "delete a provider as a user", a.DeleteOAuthProvider(ctx, bobTok, "github"), 403, "forbidden", "")

	// Leaving: the owner deletes bob; ada deletes herself after a fresh sign-in.
	mustDo(t, "delete user", a.DeleteUser(ctx, own, linked.User.ID))
	_, err = a.GetUser(ctx, own, linked.User.ID)
	wantAPIError(t, "a deleted user", err, 404, "not_found", "")
	s6 := must[*client.LoginResult](t, "login before delete")(a.Login(ctx, ada2, pw3)).Token
	mustDo(t, "delete-account", a.DeleteAccount(ctx, s6))
	_, err = a.Login(ctx, ada2, pw3)
	wantAPIError(t, "login of a deleted account", err, 401, "invalid_credentials", "")
	_, err = a.Me(ctx, s6)
	wantAPIError(t, "the deleted account's session", err, 401, "invalid_token", "")
}

// wrongCode is a well-formed code other than code.
func wrongCode(code string) string {
	if code == "111111" {
		return "222222"
	}
	return "111111"
}
