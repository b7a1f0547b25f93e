package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
)

// login logs in with a password and expects a session (no TOTP).
func (f *fixture) login(email, password string) string {
	f.t.Helper()
	res, err := f.svc.Login(bg, f.pid, email, password, addr)
	if err != nil {
		f.t.Fatalf("login %s: %v", email, err)
	}
	if res.RequiresTOTP || !strings.HasPrefix(res.Token, "ebt_") {
		f.t.Fatalf("login %s = %+v, want a session", email, res)
	}
	return res.Token
}

// wantField checks err is a *auth.FieldError on field wrapping want.
func wantField(t *testing.T, what string, err error, field string, want error) {
	t.Helper()
	var fe *auth.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want a FieldError on %s wrapping %v", what, err, field, want)
	}
}

func (f *fixture) wantDead(what string, tokens ...string) {
	f.t.Helper()
	for i, tok := range tokens {
		if p, err := f.svc.Authenticate(tok); !errors.Is(err, auth.ErrInvalidToken) {
			f.t.Fatalf("%s: session %d still authenticates: %+v %v", what, i, p, err)
		}
	}
}

func TestChangePasswordEndsEverySession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("chg")
	other := f.register("bystander")
	s2 := f.login(u.email, u.password)
	s3 := f.login(u.email, u.password)

	res, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr)
	if err != nil {
		t.Fatalf("change password: %v", err)
	}
	if !strings.HasPrefix(res.Token, "ebt_") || res.User.ID != u.p.UserID || res.Revision == 0 {
		t.Fatalf("change-password result %+v", res)
	}
	f.wantDead("after change-password", u.token, s2, s3)
	if p, err := f.svc.Authenticate(res.Token); err != nil || p.UserID != u.p.UserID {
		t.Fatalf("new session: %+v %v", p, err)
	}
	if _, err := f.svc.Authenticate(other.token); err != nil {
		t.Fatalf("another account's session ended: %v", err)
	}
	_, err = f.svc.Login(bg, f.pid, u.email, u.password, addr)
	wantErr(t, "old password", err, auth.ErrInvalidCredentials)
	s4 := f.login(u.email, newPassword)

	// A second change ends the sessions of the first one, the one it
	// returned included.
	res2, err := f.svc.ChangePassword(bg, u.p, newPassword, "yet another passphrase 9", addr)
	if err != nil {
		t.Fatal(err)
	}
	f.wantDead("after the second change", res.Token, s4)
	if _, err := f.svc.Authenticate(res2.Token); err != nil {
		t.Fatalf("newest session: %v", err)
	}
}

func TestChangePasswordRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("chgbad")

	_, err := f.svc.ChangePassword(bg, u.p, "not my password 1", newPassword, addr)
	wantField(t, "wrong current password", err, "currentPassword", auth.ErrInvalidCredentials)
	_, err = f.svc.ChangePassword(bg, u.p, "", newPassword, addr)
	wantField(t, "missing current password", err, "currentPassword", auth.ErrInvalidArgument)
	for _, weak := range []string{"", "short", "12345678", "password", strings.Repeat("x", 129)} {
		_, err = f.svc.ChangePassword(bg, u.p, u.password, weak, addr)
		var fe *auth.FieldError
		if !errors.As(err, &fe) || fe.Field != "newPassword" {
			t.Fatalf("weak new password %q: %v, want a FieldError on newPassword", weak, err)
		}
	}
	// Nothing changed: the session lives and the password is the old one.
	if _, err := f.svc.Authenticate(u.token); err != nil {
		t.Fatalf("a refused change ended the session: %v", err)
	}
	f.login(u.email, u.password)
}

// resetReady makes a TOTP account and a verify token for it.
func (f *fixture) resetReady(prefix string) (*user, string) {
	f.t.Helper()
	u := f.register(prefix)
	f.enableTOTP(u)
	vr, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), addr)
	if err != nil {
		f.t.Fatalf("verify for reset: %v", err)
	}
	if !strings.HasPrefix(vr.VerifyToken, "ebv_") || vr.ExpiresIn != 600 {
		f.t.Fatalf("verify result %+v, want ebv_... lasting 600 s", vr)
	}
	return u, vr.VerifyToken
}

func TestResetPassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, vt := f.resetReady("reset")
	other := f.register("other")
	s2res, err := f.svc.LoginVerify(bg, f.pid, f.ticket(u), u.recovery[0], addr)
	if err != nil {
		t.Fatal(err)
	}

	// A token of another account than email: refused, and (as the code
	// stands) the token stays usable for its own account.
	_, err = f.svc.ResetPassword(bg, f.pid, other.email, vt, newPassword, addr)
	wantErr(t, "verify token used for another email", err, auth.ErrInvalidVerifyToken)
	f.login(other.email, other.password)
	// A weak password is refused before the token is looked at.
	_, err = f.svc.ResetPassword(bg, f.pid, u.email, vt, "short", addr)
	wantField(t, "weak new password", err, "newPassword", auth.ErrPasswordTooShort)
	// A token of another project is refused.
	_, err = f.svc.ResetPassword(bg, f.newProject("elsewhere"), u.email, vt, newPassword, addr)
	wantErr(t, "verify token in another project", err, auth.ErrInvalidVerifyToken)

	// The email is matched as normalised.
	rev, err := f.svc.ResetPassword(bg, f.pid, "  "+strings.ToUpper(u.email)+" ", vt, newPassword, addr)
	if err != nil || rev == 0 {
		t.Fatalf("reset after the refusals: rev %d, %v", rev, err)
	}
	f.wantDead("after reset", u.token, s2res.Token)
	if _, err := f.svc.Authenticate(other.token); err != nil {
		t.Fatalf("reset ended another account's session: %v", err)
	}
	_, err = f.svc.Login(bg, f.pid, u.email, testPassword, addr)
	wantErr(t, "old password after reset", err, auth.ErrInvalidCredentials)
	u.password = newPassword
	f.ticket(u) // the new password works (and TOTP is still on)

	// Single use.
	_, err = f.svc.ResetPassword(bg, f.pid, u.email, vt, "a third passphrase 11", addr)
	wantErr(t, "verify token used twice", err, auth.ErrInvalidVerifyToken)
	for _, bogus := range []string{"", "ebv_nope", vt + "x"} {
		_, err = f.svc.ResetPassword(bg, f.pid, u.email, bogus, "a third passphrase 11", addr)
		wantErr(t, "bogus verify token "+bogus, err, auth.ErrInvalidVerifyToken)
	}
}

func TestResetPasswordTokenExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, early := f.resetReady("rexp")
	f.clk.Advance(30 * time.Second)
	vr, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), addr)
	if err != nil {
		t.Fatal(err)
	}
	late := vr.VerifyToken
	// A reset ends every other verify token of the account, so only one of
	// the two can succeed: early is checked at exactly 10 min (dead), late
	// at 9m59s (alive).
	f.clk.Advance(10*time.Minute - 30*time.Second) // early at 10m, late at 9m30s
	_, err = f.svc.ResetPassword(bg, f.pid, u.email, early, newPassword, addr)
	wantErr(t, "verify token at 10 min", err, auth.ErrInvalidVerifyToken)
	f.clk.Advance(29 * time.Second) // late at 9m59s
	if _, err := f.svc.ResetPassword(bg, f.pid, u.email, late, newPassword, addr); err != nil {
		t.Fatalf("verify token at 9m59s: %v", err)
	}
}

// TestVerifyTokenVoidAfterPasswordChange: a verify token made before a
// password change (or a reset through another token) is dead.
func TestVerifyTokenVoidAfterPasswordChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, vt := f.resetReady("vgen")
	if _, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.ResetPassword(bg, f.pid, u.email, vt, "a third passphrase 11", addr)
	wantErr(t, "verify token from before a password change", err, auth.ErrInvalidVerifyToken)
	_, err = f.svc.Login(bg, f.pid, u.email, "a third passphrase 11", addr)
	wantErr(t, "password of the refused reset", err, auth.ErrInvalidCredentials)
	u.password = newPassword
	f.ticket(u)
}

func TestVerifyForResetRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("vref")
	plain := f.register("plain")
	f.enableTOTP(u)
	_, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.wrongCode(u.secret), addr)
	wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	_, err = f.svc.VerifyForReset(bg, f.pid, "nobody@example.com", f.code(u.secret, 0), addr)
	wantErr(t, "unknown email", err, auth.ErrInvalidCode)
	_, err = f.svc.VerifyForReset(bg, f.pid, plain.email, f.code(u.secret, 0), addr)
	wantErr(t, "account without TOTP", err, auth.ErrInvalidCode)
	_, err = f.svc.VerifyForReset(bg, f.newProject("p2"), u.email, f.code(u.secret, 0), addr)
	wantErr(t, "email of another project", err, auth.ErrInvalidCode)
	// None of those spent the code; the email is matched as normalised.
	if _, err := f.svc.VerifyForReset(bg, f.pid, strings.ToUpper(u.email), f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("verify with the right code: %v", err)
	}
}

// TestConcurrentResetsWithOneToken: a verify token raced through several
// resets at once sets exactly one password.
func TestConcurrentResetsWithOneToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, vt := f.resetReady("rrace")
	const n = 5
	type result struct {
		pw  string
		err error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		pw := fmt.Sprintf("raced passphrase number %d", i)
		go func() {
			<-start
			_, err := f.svc.ResetPassword(bg, f.pid, u.email, vt, pw, addr)
			results <- result{pw, err}
		}()
	}
	close(start)
	var won []string
	for i := 0; i < n; i++ {
		r := <-results
		switch {
		case r.err == nil:
			won = append(won, r.pw)
		case !errors.Is(r.err, auth.ErrInvalidVerifyToken):
			t.Errorf("concurrent reset: %v, want success or ErrInvalidVerifyToken", r.err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("one verify token reset the password %d times", len(won))
	}
	u.password = won[0]
	f.ticket(u) // the winner's password is the one in force
}
