package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
)

const wrongPassword = "not the password 99"

// wantLimited checks err is a rate limit with exactly retry left.
func wantLimited(t *testing.T, what string, err error, retry time.Duration) {
	t.Helper()
	var rl *auth.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, auth.ErrRateLimited) {
		t.Fatalf("%s: error %v, want a rate limit", what, err)
	}
	if rl.RetryAfter != retry {
		t.Fatalf("%s: Retry-After %v, want %v", what, rl.RetryAfter, retry)
	}
}

// failLogin makes a wrong-password login and expects it to be counted (not
// refused by a limit).
func (f *fixture) failLogin(email, from string) {
	f.t.Helper()
	_, err := f.svc.Login(bg, f.pid, email, wrongPassword, from)
	if !errors.Is(err, auth.ErrInvalidCredentials) {
		f.t.Fatalf("wrong password for %s from %s: %v, want ErrInvalidCredentials", email, from, err)
	}
}

func (f *fixture) tryLogin(email, password, from string) error {
	_, err := f.svc.Login(bg, f.pid, email, password, from)
	return err
}

// TestPasswordLimitPerAccountAndAddr: the window starts at the first
// failure, Retry-After is what is left of it, the limit holds for right
// passwords too, only for that account from that address, and ends with the
// window.
func TestPasswordLimitPerAccountAndAddr(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PasswordPerAccountAddr: auth.LimitRule{Max: 3, Window: 15 * time.Minute}})
	u, v := f.register("pa"), f.register("pb")

	f.failLogin(u.email, addr)
	f.clk.Advance(time.Minute)
	f.failLogin(u.email, addr)
	f.clk.Advance(time.Minute)
	f.failLogin(u.email, addr)
	wantLimited(t, "4th attempt, right password", f.tryLogin(u.email, u.password, addr), 13*time.Minute)
	wantLimited(t, "4th attempt, wrong password", f.tryLogin(u.email, wrongPassword, addr), 13*time.Minute)
	// Email spelling does not escape the limit.
	wantLimited(t, "upper-case email", f.tryLogin(" "+strings.ToUpper(u.email)+" ", u.password, addr), 13*time.Minute)

	// Other address, other account: unaffected.
	f.failLogin(u.email, addr2)
	if err := f.tryLogin(u.email, u.password, addr2); err != nil {
		t.Fatalf("same account from another address: %v", err)
	}
	if err := f.tryLogin(v.email, v.password, addr); err != nil {
		t.Fatalf("another account from the same address: %v", err)
	}
	// change-password counts against the same bucket.
	_, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr)
	wantLimited(t, "change-password while limited", err, 13*time.Minute)

	f.clk.Advance(12*time.Minute + 59*time.Second)
	wantLimited(t, "one second before the window ends", f.tryLogin(u.email, u.password, addr), time.Second)
	f.clk.Advance(time.Second)
	// The window has ended: a new one starts at the next failure.
	f.failLogin(u.email, addr)
	f.failLogin(u.email, addr)
	if err := f.tryLogin(u.email, u.password, addr); err != nil {
		t.Fatalf("right password after the window ended: %v", err)
	}
}

func TestPasswordLimitPerAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PasswordPerAccount: auth.LimitRule{Max: 3, Window: time.Hour}})
	u, v := f.register("acc"), f.register("accb")
	for i := 1; i <= 3; i++ {
		f.failLogin(u.email, fmt.Sprintf("192.0.2.%d", 10+i))
		f.clk.Advance(10 * time.Minute)
	}
	wantLimited(t, "a fourth address", f.tryLogin(u.email, u.password, "198.51.100.7"), 30*time.Minute)
	wantLimited(t, "an in-process caller (no address)", f.tryLogin(u.email, u.password, ""), 30*time.Minute)
	if err := f.tryLogin(v.email, v.password, "198.51.100.7"); err != nil {
		t.Fatalf("another account: %v", err)
	}
	// Unknown emails are limited exactly like known ones.
	ghost := "ghost@example.com"
	for i := 0; i < 3; i++ {
		f.failLogin(ghost, fmt.Sprintf("203.0.113.%d", i))
	}
	wantLimited(t, "unknown email", f.tryLogin(ghost, wrongPassword, "203.0.113.99"), time.Hour)
	f.clk.Advance(30 * time.Minute)
	if err := f.tryLogin(u.email, u.password, "198.51.100.7"); err != nil {
		t.Fatalf("after the hour: %v", err)
	}
}

func TestLimitPerAddr(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PerAddr: auth.LimitRule{Max: 3, Window: 15 * time.Minute}})
	a, b, c := f.register("ad"), f.register("bd"), f.register("cd")
	f.enableTOTP(b)
	// Three kinds of failure from one address, on different accounts.
	f.failLogin(a.email, addr)
	f.clk.Advance(5 * time.Minute)
	_, err := f.svc.VerifyForReset(bg, f.pid, b.email, f.wrongCode(b.secret), addr)
	wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	_, err = f.svc.ResetPassword(bg, f.pid, c.email, "ebv_bogus", newPassword, addr)
	wantErr(t, "bogus verify token", err, auth.ErrInvalidVerifyToken)

	wantLimited(t, "login of a fourth account", f.tryLogin("d@example.com", wrongPassword, addr), 10*time.Minute)
	wantLimited(t, "right password of a third account", f.tryLogin(c.email, c.password, addr), 10*time.Minute)
	_, err = f.svc.VerifyForReset(bg, f.pid, b.email, f.code(b.secret, 0), addr)
	wantLimited(t, "right code from the address", err, 10*time.Minute)
	_, err = f.svc.ResetPassword(bg, f.pid, c.email, "ebv_other", newPassword, addr)
	wantLimited(t, "verify token from the address", err, 10*time.Minute)
	_, err = f.svc.LoginVerify(bg, f.pid, f.ticketFrom(b, addr2), f.code(b.secret, 0), addr)
	wantLimited(t, "login-verify from the address", err, 10*time.Minute)
	// Another project does not help: the rule is the address's.
	p2 := f.newProject("p2")
	_, err = f.svc.Login(bg, p2, ownerEmail, testPassword, addr)
	wantLimited(t, "another project", err, 10*time.Minute)

	if err := f.tryLogin(a.email, a.password, addr2); err != nil {
		t.Fatalf("another address: %v", err)
	}
	f.clk.Advance(10 * time.Minute)
	if err := f.tryLogin(c.email, c.password, addr); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// ticketFrom logs u in from an address and returns the ticket.
func (f *fixture) ticketFrom(u *user, from string) string {
	f.t.Helper()
	res, err := f.svc.Login(bg, f.pid, u.email, u.password, from)
	if err != nil || !res.RequiresTOTP {
		f.t.Fatalf("login %s from %s: %+v %v", u.email, from, res, err)
	}
	return res.LoginTicket
}

// TestCodeLimitPerAccountAndAddr: wrong codes of login-verify, verify and
// disable-totp count together, per account and address.
func TestCodeLimitPerAccountAndAddr(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{CodePerAccountAddr: auth.LimitRule{Max: 3, Window: 15 * time.Minute}})
	u, v := f.register("ca"), f.register("cb")
	f.enableTOTP(u)
	f.enableTOTP(v)
	tk := f.ticket(u)
	_, err := f.svc.LoginVerify(bg, f.pid, tk, f.wrongCode(u.secret), addr)
	wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	f.clk.Advance(time.Minute)
	_, err = f.svc.VerifyForReset(bg, f.pid, u.email, f.wrongCode(u.secret), addr)
	wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	_, _, err = f.svc.DisableTOTP(bg, u.p, f.wrongCode(u.secret), addr)
	wantErr(t, "wrong code", err, auth.ErrInvalidCode)

	_, err = f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantLimited(t, "right code on login-verify", err, 14*time.Minute)
	_, err = f.svc.VerifyForReset(bg, f.pid, u.email, u.recovery[0], addr)
	wantLimited(t, "recovery code on verify", err, 14*time.Minute)
	_, _, err = f.svc.DisableTOTP(bg, u.p, f.code(u.secret, 0), addr)
	wantLimited(t, "right code on disable-totp", err, 14*time.Minute)
	// Passwords are another bucket: login still gives a ticket.
	tk2 := f.ticket(u)

	// Another address and another account are not limited.
	if _, err := f.svc.LoginVerify(bg, f.pid, tk2, f.code(u.secret, 0), addr2); err != nil {
		t.Fatalf("right code from another address: %v", err)
	}
	if _, err := f.svc.LoginVerify(bg, f.pid, f.ticket(v), f.code(v.secret, 0), addr); err != nil {
		t.Fatalf("another account from the same address: %v", err)
	}
	f.clk.Advance(14 * time.Minute)
	if _, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestCodeLimitPerAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{CodePerAccount: auth.LimitRule{Max: 3, Window: time.Hour}})
	u := f.register("cacc")
	f.enableTOTP(u)
	for i := 1; i <= 3; i++ {
		_, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.wrongCode(u.secret), fmt.Sprintf("192.0.2.%d", 20+i))
		wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	}
	f.clk.Advance(20 * time.Minute)
	_, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), "198.51.100.1")
	wantLimited(t, "right code from a fourth address", err, 40*time.Minute)
	// Unknown emails count like known ones (no account enumeration).
	for i := 0; i < 3; i++ {
		_, err := f.svc.VerifyForReset(bg, f.pid, "ghost@example.com", "123456", fmt.Sprintf("203.0.113.%d", i))
		wantErr(t, "unknown email", err, auth.ErrInvalidCode)
	}
	_, err = f.svc.VerifyForReset(bg, f.pid, "ghost@example.com", "123456", "203.0.113.50")
	wantLimited(t, "unknown email past the limit", err, time.Hour)
	f.clk.Advance(40 * time.Minute)
	if _, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), "198.51.100.1"); err != nil {
		t.Fatalf("after the hour: %v", err)
	}
}

// TestSuccessfulLoginClearsAccountAddrCounter: a successful login forgets
// that address's wrong passwords for the account, and only those.
func TestSuccessfulLoginClearsAccountAddrCounter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PasswordPerAccountAddr: auth.LimitRule{Max: 3, Window: 15 * time.Minute}})
	u := f.register("clr")
	f.failLogin(u.email, addr)
	f.failLogin(u.email, addr)
	f.failLogin(u.email, addr2)
	f.failLogin(u.email, addr2)
	if err := f.tryLogin(u.email, u.password, addr); err != nil {
		t.Fatal(err)
	}
	f.failLogin(u.email, addr)
	f.failLogin(u.email, addr)
	if err := f.tryLogin(u.email, u.password, addr); err != nil {
		t.Fatalf("2 + success + 2 failures: %v (the success did not clear the counter)", err)
	}
	// addr2's counter was not cleared by addr's success.
	f.failLogin(u.email, addr2)
	wantLimited(t, "third failure from the other address", f.tryLogin(u.email, u.password, addr2), 15*time.Minute)

	// The per-account and per-address rules are not cleared by a success.
	g := newFixture(t, &auth.Limits{
		PasswordPerAccount: auth.LimitRule{Max: 3, Window: time.Hour},
		PerAddr:            auth.LimitRule{Max: 5, Window: 15 * time.Minute},
	})
	w := g.register("clr2")
	g.failLogin(w.email, addr)
	g.failLogin(w.email, addr)
	if err := g.tryLogin(w.email, w.password, addr); err != nil {
		t.Fatal(err)
	}
	g.failLogin(w.email, addr)
	wantLimited(t, "per-account after a success", g.tryLogin(w.email, w.password, addr2), time.Hour)
	g.failLogin("x@example.com", addr)
	g.failLogin("y@example.com", addr)
	wantLimited(t, "per-address after a success", g.tryLogin("z@example.com", wrongPassword, addr), 15*time.Minute)
}

// TestZeroRulesDisableLimits: a rule with Max or Window zero is off.
func TestZeroRulesDisableLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{
		PasswordPerAccountAddr: auth.LimitRule{Max: 0, Window: time.Hour},
		PasswordPerAccount:     auth.LimitRule{Max: 1, Window: 0},
		CodePerAccountAddr:     auth.LimitRule{},
		PerAddr:                auth.LimitRule{Max: -1, Window: time.Hour},
	})
	u := f.register("zero")
	f.enableTOTP(u)
	for i := 0; i < 30; i++ {
		f.failLogin(u.email, addr)
		_, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.wrongCode(u.secret), addr)
		wantErr(t, "wrong code", err, auth.ErrInvalidCode)
	}
	f.ticket(u)
	if _, err := f.svc.VerifyForReset(bg, f.pid, u.email, f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("right code after 30 failures with the limits off: %v", err)
	}
	docs, _, err := f.store.List(keys.LimitsDir(), "", 100)
	if err != nil || len(docs) != 0 {
		t.Fatalf("disabled limits stored %d counters (%v)", len(docs), err)
	}
}

// TestDefaultLimits: nil Limits means DefaultLimits: ten wrong passwords
// per account and address in 15 minutes.
func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	d := auth.DefaultLimits()
	want := auth.Limits{
		PasswordPerAccountAddr: auth.LimitRule{Max: 10, Window: 15 * time.Minute},
		PasswordPerAccount:     auth.LimitRule{Max: 100, Window: time.Hour},
		CodePerAccountAddr:     auth.LimitRule{Max: 10, Window: 15 * time.Minute},
		CodePerAccount:         auth.LimitRule{Max: 30, Window: time.Hour},
		PerAddr:                auth.LimitRule{Max: 300, Window: 15 * time.Minute},
		RegisterPerAddr:        auth.LimitRule{Max: 100, Window: time.Hour},
		RegisterPerProject:     auth.LimitRule{Max: 10000, Window: time.Hour},
		EmailSendPerAccount:    auth.LimitRule{Max: 5, Window: 15 * time.Minute},
		EmailSendPerAddr:       auth.LimitRule{Max: 50, Window: 15 * time.Minute},
	}
	if d != want {
		t.Fatalf("DefaultLimits() = %+v, want %+v", d, want)
	}
	f := newFixture(t, nil)
	u := f.register("def")
	for i := 0; i < 10; i++ {
		f.failLogin(u.email, addr)
	}
	wantLimited(t, "11th attempt", f.tryLogin(u.email, u.password, addr), 15*time.Minute)
	if err := f.tryLogin(u.email, u.password, addr2); err != nil {
		t.Fatalf("other address: %v", err)
	}
}

// TestInProcessCallerSkipsAddressRules: an empty address is not a client
// address, so the address rules do not apply to it.
func TestInProcessCallerSkipsAddressRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{
		PasswordPerAccountAddr: auth.LimitRule{Max: 2, Window: 15 * time.Minute},
		PerAddr:                auth.LimitRule{Max: 2, Window: 15 * time.Minute},
	})
	u := f.register("inproc")
	for i := 0; i < 5; i++ {
		f.failLogin(u.email, "")
	}
	if err := f.tryLogin(u.email, u.password, ""); err != nil {
		t.Fatalf("in-process login: %v", err)
	}
	if err := f.tryLogin(u.email, u.password, addr); err != nil {
		t.Fatalf("client login: %v", err)
	}
}

// TestConcurrentWrongCodesOnOneTicketCountOnce: wrong codes sent at once on
// one login ticket count one failure each against the code limits, however
// the ticket's compare-and-set rounds interleave.
func TestConcurrentWrongCodesOnOneTicketCountOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{CodePerAccountAddr: auth.LimitRule{Max: 6, Window: 15 * time.Minute}})
	u := f.register("cc")
	f.enableTOTP(u)
	tk := f.ticket(u)
	wrong := f.wrongCode(u.secret)
	const n = 5
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			<-start
			_, err := f.svc.LoginVerify(bg, f.pid, tk, wrong, addr)
			errs <- err
		}()
	}
	close(start)
	for i := 0; i < n; i++ {
		if err := <-errs; !errors.Is(err, auth.ErrInvalidCode) {
			t.Errorf("concurrent wrong code: %v, want ErrInvalidCode", err)
		}
	}
	// Five failures are below the limit of six: the right code still goes.
	if _, err := f.svc.LoginVerify(bg, f.pid, f.ticket(u), f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("right code after %d wrong ones (limit 6): %v — a wrong code was counted more than once", n, err)
	}
}
