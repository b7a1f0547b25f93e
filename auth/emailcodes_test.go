package auth_test

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/raftstore"
)

// The email-code tests read the codes from the emails the service queued:
// the committed outbox records (mail.Record), opened with the cluster key
// as the leader's sender opens them. The fixture's cluster has no SMTP
// server, so the records stay in the outbox.

var mailCodeRE = regexp.MustCompile(`\b[0-9]{6}\b`)

// queuedMail is one queued email, opened.
type queuedMail struct {
	rec     *mail.Record
	content mail.Content
}

// outbox returns the emails queuedMail for project pid to address to, oldest
// first.
func (f *fixture) outbox(pid, to string) []queuedMail {
	f.t.Helper()
	var out []queuedMail
	after := ""
	for {
		docs, next, err := f.store.List(keys.MailOutboxDir(), after, 500)
		if err != nil {
			f.t.Fatalf("list outbox: %v", err)
		}
		for _, d := range docs {
			rec, err := mail.DecodeRecord(d)
			if err != nil {
				f.t.Fatal(err)
			}
			if rec.ProjectID != pid || rec.To != auth.NormalizeEmail(to) {
				continue
			}
			c, err := f.svc.OpenMail(rec)
			if err != nil {
				f.t.Fatalf("open queuedMail email: %v", err)
			}
			out = append(out, queuedMail{rec: rec, content: c})
		}
		if next == "" {
			return out
		}
		after = next
	}
}

// lastMail returns the newest email of kind queuedMail to address to and the
// code in it.
func (f *fixture) lastMail(to string, kind auth.EmailKind) (queuedMail, string) {
	f.t.Helper()
	all := f.outbox(f.pid, to)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].rec.Kind == string(kind) {
			code := mailCodeRE.FindString(all[i].content.Text)
			if code == "" {
				f.t.Fatalf("no code in the %s email: %q", kind, all[i].content.Text)
			}
			return all[i], code
		}
	}
	f.t.Fatalf("no %s email queuedMail to %s (%d emails)", kind, to, len(all))
	return queuedMail{}, ""
}

// otherCode is a well-formed code that is not code.
func otherCode(code string) string {
	if code == "000000" {
		return "000001"
	}
	return "000000"
}

// ownerPrincipal logs the project's owner in.
func (f *fixture) ownerPrincipal() *auth.Principal {
	f.t.Helper()
	return f.authenticate(f.login(ownerEmail, testPassword))
}

func wantErr2(t *testing.T, what string, err error, want error, field string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	if field != "" {
		var fe *auth.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Fatalf("%s: error %v does not name field %q", what, err, field)
		}
	}
}

func TestEmailVerification(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("verify")
	if me, _ := f.svc.Me(f.pid, u.p.UserID); me.EmailVerified {
		t.Fatal("a new account is verified")
	}
	already, rev, err := f.svc.SendVerification(bg, u.p, addr)
	if err != nil || already || rev == 0 {
		t.Fatalf("send-verification: %v %v %d", already, rev, err)
	}
	m, code := f.lastMail(u.email, auth.EmailVerification)
	if strings.Contains(m.content.Text, "mode=") {
		t.Errorf("a link without an action URL: %q", m.content.Text)
	}
	// A wrong code, a code for another address, a malformed one: refused.
	_, _, err = f.svc.VerifyEmail(bg, f.pid, u.email, otherCode(code), "", addr)
	wantErr2(t, "wrong code", err, auth.ErrInvalidCode, "code")
	other := f.register("verify-other")
	_, _, err = f.svc.VerifyEmail(bg, f.pid, other.email, code, "", addr)
	wantErr2(t, "another address", err, auth.ErrInvalidCode, "code")
	_, _, err = f.svc.VerifyEmail(bg, f.pid, "not an email", code, "", addr)
	wantErr2(t, "bad email", err, auth.ErrInvalidEmail, "")

	// The right one (typed with a space, as people do) verifies.
	usr, _, err := f.svc.VerifyEmail(bg, f.pid, strings.ToUpper(u.email), code[:3]+" "+code[3:], "", addr)
	if err != nil || !usr.EmailVerified || usr.ID != u.p.UserID {
		t.Fatalf("verify: %+v %v", usr, err)
	}
	if me, _ := f.svc.Me(f.pid, u.p.UserID); !me.EmailVerified {
		t.Fatal("not verified after verify-email")
	}
	// Single use.
	_, _, err = f.svc.VerifyEmail(bg, f.pid, u.email, code, "", addr)
	wantErr2(t, "replay", err, auth.ErrInvalidCode, "code")
	// Verified: nothing more is sent.
	n := len(f.outbox(f.pid, u.email))
	if already, _, err := f.svc.SendVerification(bg, u.p, addr); err != nil || !already {
		t.Fatalf("second send-verification: %v %v", already, err)
	}
	if got := len(f.outbox(f.pid, u.email)); got != n {
		t.Fatalf("an email was queuedMail for a verified address (%d → %d)", n, got)
	}
}

func TestEmailCodeVoidAfterFiveFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("void")
	if _, err := f.svc.RequestPasswordReset(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, code := f.lastMail(u.email, auth.EmailPasswordReset)
	for i := 0; i < auth.MaxEmailCodeFailures; i++ {
		_, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, otherCode(code), "", newPassword, addr)
		wantErr2(t, fmt.Sprintf("wrong code %d", i+1), err, auth.ErrInvalidCode, "emailCode")
	}
	// The right code now finds the record void.
	_, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, code, "", newPassword, addr)
	wantErr2(t, "right code after 5 wrong", err, auth.ErrInvalidCode, "emailCode")
	if f.count(keys.EmailCodesDir()) != 0 {
		t.Error("a void code is still stored")
	}
	f.login(u.email, testPassword) // the password did not change
}

func TestEmailCodeExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("expire")
	if _, err := f.svc.RequestEmailCode(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, code := f.lastMail(u.email, auth.EmailSignInCode)
	f.clk.Advance(auth.EmailCodeTTL)
	_, err := f.svc.LoginEmailCode(bg, f.pid, u.email, code, "", addr)
	wantErr2(t, "expired code", err, auth.ErrInvalidCode, "code")

	// A fresh code replaces the old one, which no longer works even in time.
	if _, err := f.svc.RequestEmailCode(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, first := f.lastMail(u.email, auth.EmailSignInCode)
	f.clk.Advance(time.Second)
	if _, err := f.svc.RequestEmailCode(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, second := f.lastMail(u.email, auth.EmailSignInCode)
	if first != second {
		_, err = f.svc.LoginEmailCode(bg, f.pid, u.email, first, "", addr)
		wantErr2(t, "replaced code", err, auth.ErrInvalidCode, "code")
	}
	res, err := f.svc.LoginEmailCode(bg, f.pid, u.email, second, "", addr)
	if err != nil || res.Token == "" || res.User == nil || !res.User.EmailVerified {
		t.Fatalf("login with the newest code: %+v %v", res, err)
	}
}

// The requests that send a code answer the same whether or not the address
// has an account, and do the same work: the answer equality is asserted,
// the timing ratio is measured and logged (not asserted: CI machines vary).
func TestRequestAnswersAlikeWhetherOrNotAccountExists(t *testing.T) {
	t.Parallel()
	lim := auth.DefaultLimits()
	lim.EmailSendPerAccount = auth.LimitRule{Max: 1000, Window: time.Hour}
	lim.EmailSendPerAddr = auth.LimitRule{Max: 1000, Window: time.Hour}
	f := newFixture(t, &lim)
	u := f.register("exists")
	missing := "nobody-here@example.com"
	const rounds = 20
	var tExist, tMissing time.Duration
	for i := 0; i < rounds; i++ {
		for _, email := range []string{u.email, missing} {
			for _, req := range []func() (uint64, error){
				func() (uint64, error) { return f.svc.RequestPasswordReset(bg, f.pid, email, addr) },
				func() (uint64, error) { return f.svc.RequestEmailCode(bg, f.pid, email, addr) },
			} {
				start := time.Now()
				rev, err := req()
				d := time.Since(start)
				if err != nil || rev == 0 {
					t.Fatalf("request for %s: rev %d, %v", email, rev, err)
				}
				if email == missing {
					tMissing += d
				} else {
					tExist += d
				}
			}
		}
	}
	t.Logf("request-password-reset + request-email-code, %d rounds: with an account %v per request, without %v; ratio %.2f",
		rounds, tExist/(2*rounds), tMissing/(2*rounds), float64(tExist)/float64(tMissing))
	if got := len(f.outbox(f.pid, missing)); got != 0 {
		t.Fatalf("%d emails queuedMail to an address without an account", got)
	}
	if got := len(f.outbox(f.pid, u.email)); got != 2*rounds {
		t.Fatalf("%d emails queuedMail to the account, want %d", got, 2*rounds)
	}
	// No account was created for the missing address.
	_, err := f.svc.LoginEmailCode(bg, f.pid, missing, "123456", "", addr)
	wantErr2(t, "login-email-code of an unknown address", err, auth.ErrInvalidCode, "code")
}

func TestRequestCountsAgainstTheSendLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // 5 per address of a project per 15 minutes
	u := f.register("sendlimit")
	for _, email := range []string{u.email, "absent@example.com"} {
		for i := 0; i < auth.DefaultLimits().EmailSendPerAccount.Max; i++ {
			if _, err := f.svc.RequestPasswordReset(bg, f.pid, email, addr); err != nil {
				t.Fatalf("request %d for %s: %v", i, email, err)
			}
		}
		_, err := f.svc.RequestPasswordReset(bg, f.pid, email, addr)
		wantLimited(t, "request past the limit for "+email, err, 15*time.Minute)
		var rl *auth.RateLimitError
		if errors.As(err, &rl); !rl.Sends || !strings.Contains(rl.Message(), "emails") {
			t.Fatalf("the send limit's refusal: %+v %q", rl, rl.Message())
		}
	}
}

func TestResetPasswordWithEmailCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("reset")
	s2 := f.login(u.email, u.password)
	if _, err := f.svc.RequestPasswordReset(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, code := f.lastMail(u.email, auth.EmailPasswordReset)
	// A weak password is refused before the code is looked at (the code
	// stays usable).
	_, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, code, "", "short", addr)
	wantErr2(t, "weak password", err, auth.ErrPasswordTooShort, "newPassword")
	rev, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, code, "", newPassword, addr)
	if err != nil || rev == 0 {
		t.Fatalf("reset: %d %v", rev, err)
	}
	f.wantDead("after the reset", u.token, s2)
	_, err = f.svc.Login(bg, f.pid, u.email, u.password, addr)
	wantErr(t, "old password", err, auth.ErrInvalidCredentials)
	tok := f.login(u.email, newPassword)
	if me, _ := f.svc.Me(f.pid, f.authenticate(tok).UserID); !me.EmailVerified {
		t.Error("the reset code did not verify the address")
	}
	_, err = f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, code, "", "yet another passphrase 3", addr)
	wantErr2(t, "replay", err, auth.ErrInvalidCode, "emailCode")
}

func TestLoginEmailCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("pwless")
	if _, err := f.svc.RequestEmailCode(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	_, code := f.lastMail(u.email, auth.EmailSignInCode)
	_, err := f.svc.LoginEmailCode(bg, f.pid, u.email, otherCode(code), "", addr)
	wantErr2(t, "wrong code", err, auth.ErrInvalidCode, "code")
	res, err := f.svc.LoginEmailCode(bg, f.pid, u.email, code, "", addr)
	if err != nil || res.RequiresTOTP || !strings.HasPrefix(res.Token, "ebt_") || res.User.ID != u.p.UserID || !res.User.EmailVerified {
		t.Fatalf("login-email-code: %+v %v", res, err)
	}
	if p := f.authenticate(res.Token); p.UserID != u.p.UserID {
		t.Fatalf("session of %s", p.UserID)
	}

	// With an authenticator the code gives a ticket, and login-verify the
	// session.
	v := f.register("pwless-totp")
	f.enableTOTP(v)
	if _, err := f.svc.RequestEmailCode(bg, f.pid, v.email, addr); err != nil {
		t.Fatal(err)
	}
	_, code = f.lastMail(v.email, auth.EmailSignInCode)
	res, err = f.svc.LoginEmailCode(bg, f.pid, v.email, code, "", addr)
	if err != nil || !res.RequiresTOTP || res.Token != "" || res.LoginTicket == "" {
		t.Fatalf("login-email-code with TOTP: %+v %v", res, err)
	}
	ar, err := f.svc.LoginVerify(bg, f.pid, res.LoginTicket, f.code(v.secret, 0), addr)
	if err != nil || ar.User.ID != v.p.UserID {
		t.Fatalf("login-verify after the email code: %+v %v", ar, err)
	}
}

func TestChangeEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("change")
	taken := f.register("taken")
	newAddr := "changed-" + u.email

	_, err := f.svc.RequestEmailChange(bg, u.p, taken.email, addr)
	wantErr2(t, "taken address", err, auth.ErrEmailTaken, "newEmail")
	_, err = f.svc.RequestEmailChange(bg, u.p, u.email, addr)
	wantErr2(t, "same address", err, auth.ErrInvalidArgument, "newEmail")
	_, err = f.svc.RequestEmailChange(bg, u.p, "nope", addr)
	wantErr2(t, "bad address", err, auth.ErrInvalidEmail, "newEmail")
	// Past the recent-login window: reauthenticate first.
	f.clk.Advance(auth.DefaultRecentLogin + time.Second)
	_, err = f.svc.RequestEmailChange(bg, u.p, newAddr, addr)
	wantErr(t, "stale login", err, auth.ErrReauthRequired)
	if _, err := f.svc.Reauthenticate(bg, u.p, u.password, "", addr); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.RequestEmailChange(bg, u.p, newAddr, addr); err != nil {
		t.Fatal(err)
	}
	if n := len(f.outbox(f.pid, u.email)); n != 0 {
		t.Fatalf("%d emails to the old address", n)
	}
	_, code := f.lastMail(newAddr, auth.EmailChange)
	_, _, err = f.svc.ConfirmEmailChange(bg, u.p, newAddr, otherCode(code), "", addr)
	wantErr2(t, "wrong code", err, auth.ErrInvalidCode, "code")
	// Another account cannot use the code.
	_, _, err = f.svc.ConfirmEmailChange(bg, taken.p, newAddr, code, "", addr)
	wantErr2(t, "another account", err, auth.ErrInvalidCode, "code")

	usr, _, err := f.svc.ConfirmEmailChange(bg, u.p, newAddr, code, "", addr)
	if err != nil || usr.Email != auth.NormalizeEmail(newAddr) || !usr.EmailVerified {
		t.Fatalf("confirm: %+v %v", usr, err)
	}
	f.login(newAddr, u.password)
	_, err = f.svc.Login(bg, f.pid, u.email, u.password, addr)
	wantErr(t, "old address", err, auth.ErrInvalidCredentials)
	// The old address is free.
	if _, err := f.svc.Register(bg, f.pid, u.email, testPassword, "", ""); err != nil {
		t.Fatalf("register the freed address: %v", err)
	}

	// Taken between the code and the confirmation: refused at the commit.
	w := f.register("race")
	wAddr := "wanted-" + w.email
	if _, err := f.svc.RequestEmailChange(bg, w.p, wAddr, addr); err != nil {
		t.Fatal(err)
	}
	_, code = f.lastMail(wAddr, auth.EmailChange)
	if _, err := f.svc.Register(bg, f.pid, wAddr, testPassword, "", ""); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.svc.ConfirmEmailChange(bg, w.p, wAddr, code, "", addr)
	wantErr2(t, "taken at the commit", err, auth.ErrEmailTaken, "newEmail")
	f.login(w.email, w.password) // unchanged
}

func TestEmailLinkTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const base = "https://app.example.com/auth/action"
	if _, _, err := f.svc.SetAuthSettings(bg, f.ownerPrincipal(), auth.AuthSettingsPatch{EmailActionURL: ref(base)}); err != nil {
		t.Fatal(err)
	}
	u := f.register("link")
	if _, _, err := f.svc.SendVerification(bg, u.p, addr); err != nil {
		t.Fatal(err)
	}
	m, _ := f.lastMail(u.email, auth.EmailVerification)
	tok := linkToken(t, m.content.Text, base, "verify-email", f.pid)
	_, _, err := f.svc.VerifyEmail(bg, f.pid, "", "", tok+"x", addr)
	wantErr2(t, "bad token", err, auth.ErrInvalidCode, "token")
	usr, _, err := f.svc.VerifyEmail(bg, f.pid, "", "", tok, addr)
	if err != nil || !usr.EmailVerified {
		t.Fatalf("verify by link: %+v %v", usr, err)
	}
	_, _, err = f.svc.VerifyEmail(bg, f.pid, "", "", tok, addr)
	wantErr2(t, "link replay", err, auth.ErrInvalidCode, "token")

	// A reset link works in place of the code, and the code goes with it.
	if _, err := f.svc.RequestPasswordReset(bg, f.pid, u.email, addr); err != nil {
		t.Fatal(err)
	}
	m, code := f.lastMail(u.email, auth.EmailPasswordReset)
	tok = linkToken(t, m.content.Text, base, "reset-password", f.pid)
	if _, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, "", "", tok, newPassword, addr); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.ResetPasswordWithEmailCode(bg, f.pid, u.email, code, "", "third passphrase here 1", addr)
	wantErr2(t, "code after its link was used", err, auth.ErrInvalidCode, "emailCode")
	f.login(u.email, newPassword)
	if n := f.count(keys.EmailLinksDir()); n != 0 {
		t.Errorf("%d link records left", n)
	}
}

// linkToken finds the action link in text and returns its token.
func linkToken(t *testing.T, text, base, mode, pid string) string {
	t.Helper()
	i := strings.Index(text, base+"?")
	if i < 0 {
		t.Fatalf("no link to %s in %q", base, text)
	}
	raw := strings.Fields(text[i:])[0]
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("mode") != mode || q.Get("project") != pid || !strings.HasPrefix(q.Get("token"), "ebe_") {
		t.Fatalf("link %s: want mode %s, project %s, an ebe_ token", raw, mode, pid)
	}
	return q.Get("token")
}

func ref[T any](v T) *T { return &v }

func TestAuthSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerPrincipal()
	u := f.register("settings")
	st, err := f.svc.GetAuthSettings(own)
	if err != nil || !st.AnonymousSignIn || st.EmailActionURL != "" {
		t.Fatalf("defaults: %+v %v", st, err)
	}
	_, err = f.svc.GetAuthSettings(u.p)
	wantErr(t, "a user reads", err, auth.ErrForbidden)
	_, _, err = f.svc.SetAuthSettings(bg, u.p, auth.AuthSettingsPatch{AnonymousSignIn: ref(false)})
	wantErr(t, "a user writes", err, auth.ErrForbidden)
	for _, bad := range []string{"http://app.example.com/a", "ftp://x.example", "https://app.example.com/a?x=1",
		"https://app.example.com/a#f", "https://u:p@app.example.com/", "/relative", "https://" + strings.Repeat("a", 1100) + ".com"} {
		_, _, err := f.svc.SetAuthSettings(bg, own, auth.AuthSettingsPatch{EmailActionURL: ref(bad)})
		wantErr2(t, "action URL "+bad, err, auth.ErrInvalidArgument, "emailActionUrl")
	}
	if st, _ := f.svc.GetAuthSettings(own); *st != (auth.AuthSettings{AnonymousSignIn: true}) {
		t.Fatalf("refused changes changed the settings: %+v", st)
	}
	st, _, err = f.svc.SetAuthSettings(bg, own, auth.AuthSettingsPatch{EmailActionURL: ref("http://localhost:3000/act")})
	if err != nil || st.EmailActionURL != "http://localhost:3000/act" || !st.AnonymousSignIn {
		t.Fatalf("set URL: %+v %v", st, err)
	}
	// A subset leaves the rest.
	st, _, err = f.svc.SetAuthSettings(bg, own, auth.AuthSettingsPatch{AnonymousSignIn: ref(false)})
	if err != nil || st.EmailActionURL != "http://localhost:3000/act" || st.AnonymousSignIn {
		t.Fatalf("set anonymous off: %+v %v", st, err)
	}
	_, err = f.svc.SignInAnonymously(bg, f.pid, addr)
	wantErr(t, "anonymous off", err, auth.ErrAnonymousDisabled)
}

func TestAnonymousSignInAndLinkEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	res, err := f.svc.SignInAnonymously(bg, f.pid, addr)
	if err != nil || !res.User.Anonymous || res.User.Email != "" || res.User.Role != auth.RoleUser {
		t.Fatalf("anonymous sign-in: %+v %v", res, err)
	}
	p := f.authenticate(res.Token)
	f.putDoc(p, "users/"+p.UserID+"/notes/n1", `{"text":"kept"}`)

	// An anonymous account has no address to verify or change.
	_, _, err = f.svc.SendVerification(bg, p, addr)
	wantErr(t, "send-verification", err, auth.ErrNoEmail)
	_, err = f.svc.RequestEmailChange(bg, p, "x@example.com", addr)
	wantErr(t, "change-email", err, auth.ErrNoEmail)

	taken := f.register("taken")
	_, err = f.svc.LinkEmail(bg, p, taken.email, testPassword, addr)
	wantErr(t, "taken email", err, auth.ErrEmailTaken)
	_, err = f.svc.LinkEmail(bg, p, "linked@example.com", "short", addr)
	wantErr(t, "weak password", err, auth.ErrPasswordTooShort)

	linked, err := f.svc.LinkEmail(bg, p, "Linked@Example.com", testPassword, addr)
	if err != nil || linked.User.ID != p.UserID || linked.User.Anonymous || linked.User.Email != "linked@example.com" {
		t.Fatalf("link: %+v %v", linked, err)
	}
	f.wantDead("the anonymous session", res.Token)
	f.login("linked@example.com", testPassword)
	if d, _ := f.store.Get(keys.Doc(f.pid, "users/"+p.UserID+"/notes/n1")); d == nil {
		t.Fatal("the user's document is gone after linking")
	}
	_, err = f.svc.LinkEmail(bg, f.authenticate(linked.Token), "again@example.com", testPassword, addr)
	wantErr(t, "link twice", err, auth.ErrAlreadyLinked)
	_, err = f.svc.LinkEmail(bg, taken.p, "again@example.com", testPassword, addr)
	wantErr(t, "link a password account", err, auth.ErrAlreadyLinked)
}

// putDoc writes a user document for p through the store (a system write:
// the test sets the state up).
func (f *fixture) putDoc(p *auth.Principal, rel, data string) {
	f.t.Helper()
	f.putPath(keys.Doc(p.ProjectID, rel), data)
}

func (f *fixture) putPath(path, data string) {
	f.t.Helper()
	res, err := f.store.Txn(bg, &raftstore.Txn{Time: f.clk.Now().UnixNano(), Ops: []raftstore.Op{{Kind: raftstore.OpPut, Path: path, Data: []byte(data)}}})
	if err != nil || !res.OK() {
		f.t.Fatalf("put %s: %v %+v", path, err, res)
	}
}

func TestDeleteAccountRemovesEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("gone")
	bystander := f.register("stays")
	s2 := f.login(u.email, u.password)
	uid, pid := u.p.UserID, f.pid

	// The user's state everywhere: documents at several depths (more than
	// one purge chunk), push state, codes and links.
	for i := 0; i < 300; i++ {
		f.putDoc(u.p, fmt.Sprintf("users/%s/items/i%03d", uid, i), `{"n":1}`)
	}
	f.putDoc(u.p, "users/"+uid, `{"profile":true}`)
	f.putDoc(u.p, "users/"+uid+"/deep/a/b/c", `{"x":1}`)
	f.putDoc(bystander.p, "users/"+bystander.p.UserID+"/items/i1", `{"n":1}`)
	f.putPath(keys.Device(pid, uid, "th1"), `{"token":"t"}`)
	f.putPath(keys.DeviceToken(pid, "th1"), fmt.Sprintf(`{"userId":%q}`, uid))
	f.putPath(keys.TopicMember(pid, "news", uid), `{}`)
	f.putPath(keys.UserTopic(pid, uid, "news"), `{}`)
	f.putPath(keys.TopicMember(pid, "news", bystander.p.UserID), `{}`)
	f.putPath(keys.Schedule(pid, "s1"), fmt.Sprintf(`{"createdBy":%q,"dueKey":"k1"}`, uid))
	f.putPath(keys.MySchedule(pid, uid, "s1"), `{"id":"s1"}`)
	f.putPath(keys.PushDue("k1"), `{}`)
	f.putPath(keys.Prefs(pid, uid), `{}`)
	f.putPath(keys.Inbox(pid, uid, "n1"), `{}`)
	f.putPath(keys.PushLock(pid, uid), `{}`)
	if _, err := f.svc.RequestPasswordReset(bg, pid, u.email, addr); err != nil {
		t.Fatal(err)
	}

	// Past the recent-login window, delete-account asks for the password.
	f.clk.Advance(auth.DefaultRecentLogin + time.Second)
	_, err := f.svc.DeleteSelf(bg, u.p)
	wantErr(t, "stale login", err, auth.ErrReauthRequired)
	if _, err := f.svc.Reauthenticate(bg, u.p, u.password, "", addr); err != nil {
		t.Fatal(err)
	}
	rev, err := f.svc.DeleteSelf(bg, u.p)
	if err != nil || rev == 0 {
		t.Fatalf("delete: %d %v", rev, err)
	}
	f.wantDead("after delete", u.token, s2)
	_, err = f.svc.Login(bg, pid, u.email, u.password, addr)
	wantErr(t, "login", err, auth.ErrInvalidCredentials)

	for _, prefix := range []string{
		keys.User(pid, uid), keys.Under(keys.AccountSessionsDir(pid, uid)), keys.UserData(pid, uid),
		keys.Under(keys.DevicesDir(pid, uid)), keys.DeviceToken(pid, "th1"), keys.TopicMember(pid, "news", uid),
		keys.Under(keys.UserTopicsDir(pid, uid)), keys.Schedule(pid, "s1"), keys.Under(keys.MySchedulesDir(pid, uid)),
		keys.PushDue("k1"), keys.Prefs(pid, uid), keys.Under(keys.InboxDir(pid, uid)), keys.PushLock(pid, uid),
		keys.Under(keys.EmailCodesDir()), keys.Under(keys.AccountPurgesDir()), keys.Email(pid, u.email),
	} {
		if n, err := f.store.CountPrefix(prefix); err != nil || n != 0 {
			t.Errorf("%s: %d documents left (%v)", prefix, n, err)
		}
	}
	// Nobody else's state went with it.
	if d, _ := f.store.Get(keys.Doc(pid, "users/"+bystander.p.UserID+"/items/i1")); d == nil {
		t.Error("another user's document was deleted")
	}
	if d, _ := f.store.Get(keys.TopicMember(pid, "news", bystander.p.UserID)); d == nil {
		t.Error("another user's topic was deleted")
	}
	f.wantAlive("bystander", bystander.token)
	// The email is free again; deleting again finds nothing.
	if _, err := f.svc.Register(bg, pid, u.email, testPassword, "", ""); err != nil {
		t.Fatalf("register the freed email: %v", err)
	}
	_, err = f.svc.DeleteAccount(bg, pid, uid)
	wantErr(t, "delete twice", err, auth.ErrUserNotFound)
}

func TestDeleteAccountLastOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerPrincipal()
	_, err := f.svc.DeleteSelf(bg, own)
	wantErr(t, "the last owner", err, auth.ErrLastOwner)
	if _, err := f.svc.Me(f.pid, own.UserID); err != nil {
		t.Fatalf("the owner is gone: %v", err)
	}
	// With a second owner, the first may go.
	u := f.register("second")
	if _, _, err := f.svc.SetRole(bg, own, u.p.UserID, auth.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.DeleteSelf(bg, own); err != nil {
		t.Fatalf("delete an owner with another owner: %v", err)
	}
}

// A purge that stopped half-way (here: its record written by hand, as the
// first step leaves it) is finished by the sweep.
func TestSweepFinishesPurges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.putPath(keys.Doc(f.pid, "users/ghost/a"), `{}`)
	f.putPath(keys.Prefs(f.pid, "ghost"), `{}`)
	f.putPath(keys.AccountPurge(f.pid, "ghost"), fmt.Sprintf(`{"projectId":%q,"userId":"ghost"}`, f.pid))
	if _, err := f.svc.Sweep(bg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keys.Doc(f.pid, "users/ghost/a"), keys.Prefs(f.pid, "ghost"), keys.AccountPurge(f.pid, "ghost")} {
		if d, _ := f.store.Get(p); d != nil {
			t.Errorf("%s left after the sweep", p)
		}
	}
}

// The sweep removes codes past their time (with their links) and keeps live
// ones.
func TestSweepRemovesExpiredEmailCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, _, err := f.svc.SetAuthSettings(bg, f.ownerPrincipal(), auth.AuthSettingsPatch{EmailActionURL: ref("https://app.example.com/a")}); err != nil {
		t.Fatal(err)
	}
	old, fresh := f.register("old"), f.register("fresh")
	if _, err := f.svc.RequestPasswordReset(bg, f.pid, old.email, addr); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(auth.EmailCodeTTL - time.Second)
	if _, err := f.svc.RequestPasswordReset(bg, f.pid, fresh.email, addr); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second) // old's code has just expired
	if _, err := f.svc.Sweep(bg); err != nil {
		t.Fatal(err)
	}
	if n, l := f.count(keys.EmailCodesDir()), f.count(keys.EmailLinksDir()); n != 1 || l != 1 {
		t.Fatalf("after the sweep: %d codes, %d links; want fresh's one of each", n, l)
	}
	_, code := f.lastMail(fresh.email, auth.EmailPasswordReset)
	if _, err := f.svc.ResetPasswordWithEmailCode(bg, f.pid, fresh.email, code, "", newPassword, addr); err != nil {
		t.Fatalf("the live code after the sweep: %v", err)
	}
}

// An anonymous account has no password to prove again: its session is
// enough to delete it, however old; its documents go with it.
func TestDeleteAnonymousAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	res, err := f.svc.SignInAnonymously(bg, f.pid, addr)
	if err != nil {
		t.Fatal(err)
	}
	p := f.authenticate(res.Token)
	f.putDoc(p, "users/"+p.UserID+"/a", `{}`)
	f.clk.Advance(auth.DefaultRecentLogin + time.Hour)
	if _, err := f.svc.DeleteSelf(bg, p); err != nil {
		t.Fatalf("delete an anonymous account: %v", err)
	}
	f.wantDead("the anonymous session", res.Token)
	if d, _ := f.store.Get(keys.Doc(f.pid, "users/"+p.UserID+"/a")); d != nil {
		t.Fatal("the anonymous user's document is left")
	}
}
