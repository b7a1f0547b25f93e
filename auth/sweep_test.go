package auth_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
)

// count is how many records a system directory holds.
func (f *fixture) count(dir string) int {
	f.t.Helper()
	n, after := 0, ""
	for {
		docs, next, err := f.store.List(dir, after, 500)
		if err != nil {
			f.t.Fatalf("list %s: %v", dir, err)
		}
		n += len(docs)
		if next == "" {
			return n
		}
		after = next
	}
}

type counts struct{ sessions, tickets, verify, limits int }

func (f *fixture) counts() counts {
	f.t.Helper()
	return counts{f.count(keys.SessionsDir()), f.count(keys.TicketsDir()), f.count(keys.VerifyDir()), f.count(keys.LimitsDir())}
}

// sweep runs Sweep and checks how many records it removed and which remain.
func (f *fixture) sweep(what string, removed int, left counts) {
	f.t.Helper()
	n, err := f.svc.Sweep(bg)
	if err != nil {
		f.t.Fatalf("%s: sweep: %v", what, err)
	}
	if n != removed {
		f.t.Errorf("%s: sweep removed %d, want %d", what, n, removed)
	}
	if got := f.counts(); got != left {
		f.t.Fatalf("%s: left %+v, want %+v", what, got, left)
	}
}

func (f *fixture) wantAlive(what string, tokens ...string) {
	f.t.Helper()
	for i, tok := range tokens {
		if _, err := f.svc.Authenticate(tok); err != nil {
			f.t.Fatalf("%s: session %d: %v", what, i, err)
		}
	}
}

// TestSweep walks records through their lifetimes and checks that each sweep
// removes exactly the dead ones: stale-generation sessions at once, then
// tickets at 5 min, verify tokens at 10 min, 15-minute limit windows, and
// at the session TTL the sessions and the hour-long windows.
func TestSweep(t *testing.T) {
	t.Parallel()
	f := newFixtureTTL(t, &auth.Limits{
		PasswordPerAccountAddr: auth.LimitRule{Max: 10, Window: 15 * time.Minute},
		PasswordPerAccount:     auth.LimitRule{Max: 10, Window: time.Hour},
	}, time.Hour)
	start := f.clk.Now()
	a := f.register("swa") // session a.token
	b := f.register("swb") // session b.token
	b2 := f.login(b.email, b.password)
	f.enableTOTP(a) // +30 s
	tk := f.ticket(a)
	vr, err := f.svc.VerifyForReset(bg, f.pid, a.email, f.code(a.secret, 0), addr)
	if err != nil {
		t.Fatal(err)
	}
	f.failLogin("nobody@example.com", addr) // two windows: 15 min and 1 h
	f.sweep("nothing dead yet", 0, counts{sessions: 3, tickets: 1, verify: 1, limits: 2})

	// A password change makes b's two sessions stale at once.
	res, err := f.svc.ChangePassword(bg, b.p, b.password, newPassword, addr)
	if err != nil {
		t.Fatal(err)
	}
	b3 := res.Token
	f.sweep("after change-password", 2, counts{sessions: 2, tickets: 1, verify: 1, limits: 2})
	f.wantAlive("after the first sweeps", a.token, b3)
	f.wantDead("stale sessions", b.token, b2)

	// Tickets end at 5 min after issue.
	f.clk.Advance(start.Add(30*time.Second + 5*time.Minute - time.Second).Sub(f.clk.Now()))
	f.sweep("ticket at 4m59s", 0, counts{sessions: 2, tickets: 1, verify: 1, limits: 2})
	f.clk.Advance(time.Second)
	f.sweep("ticket at 5m", 1, counts{sessions: 2, tickets: 0, verify: 1, limits: 2})
	_, err = f.svc.LoginVerify(bg, f.pid, tk, f.code(a.secret, 0), addr)
	wantErr(t, "swept ticket", err, auth.ErrInvalidTicket)

	// Verify tokens at 10 min.
	f.clk.Advance(start.Add(30*time.Second + 10*time.Minute - time.Second).Sub(f.clk.Now()))
	f.sweep("verify token at 9m59s", 0, counts{sessions: 2, tickets: 0, verify: 1, limits: 2})
	f.clk.Advance(time.Second)
	f.sweep("verify token at 10m", 1, counts{sessions: 2, tickets: 0, verify: 0, limits: 2})
	_, err = f.svc.ResetPassword(bg, f.pid, a.email, vr.VerifyToken, newPassword, addr)
	wantErr(t, "swept verify token", err, auth.ErrInvalidVerifyToken)
	// That refusal counted nothing (no address rule configured): still 2.

	// The 15-minute window.
	f.clk.Advance(start.Add(30*time.Second + 15*time.Minute - time.Second).Sub(f.clk.Now()))
	f.sweep("window at 14m59s", 0, counts{sessions: 2, tickets: 0, verify: 0, limits: 2})
	f.clk.Advance(time.Second)
	f.sweep("window at 15m", 1, counts{sessions: 2, tickets: 0, verify: 0, limits: 1})
	f.wantAlive("at 15 min", a.token, b3)

	// At one hour the sessions (made at start, start+30s) and the hour window
	// (from start+30s) end.
	f.clk.Advance(start.Add(time.Hour - time.Second).Sub(f.clk.Now()))
	f.sweep("sessions at 59m59s", 0, counts{sessions: 2, tickets: 0, verify: 0, limits: 1})
	f.clk.Advance(time.Second)
	f.sweep("a's session at 1h", 1, counts{sessions: 1, tickets: 0, verify: 0, limits: 1})
	f.wantAlive("b's newest session at 1h", b3)
	f.clk.Advance(30 * time.Second)
	f.sweep("the rest at 1h30s", 2, counts{})
	f.wantDead("after the TTL", a.token, b3)
}

// TestSweepStaleGeneration: a password change makes every session, ticket
// and verify token of the account sweepable at once, and nobody else's.
func TestSweepStaleGeneration(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, vt := f.resetReady("stale")
	other, _ := f.resetReady("other")
	f.ticket(u)
	tkU, tkO := f.ticket(u), f.ticket(other)
	f.sweep("nothing stale", 0, counts{sessions: 2, tickets: 3, verify: 2, limits: 0})

	res, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr)
	if err != nil {
		t.Fatal(err)
	}
	// u: register session, two tickets, verify token.
	f.sweep("after change-password", 4, counts{sessions: 2, tickets: 1, verify: 1, limits: 0})
	f.wantAlive("live sessions", res.Token, other.token)
	_, err = f.svc.ResetPassword(bg, f.pid, u.email, vt, "a third passphrase 11", addr)
	wantErr(t, "swept verify token", err, auth.ErrInvalidVerifyToken)
	_, err = f.svc.LoginVerify(bg, f.pid, tkU, f.code(u.secret, 0), addr)
	wantErr(t, "swept ticket", err, auth.ErrInvalidTicket)
	f.clk.Advance(30 * time.Second) // a code not used by resetReady
	if _, err := f.svc.LoginVerify(bg, f.pid, tkO, f.code(other.secret, 0), addr); err != nil {
		t.Fatalf("the other account's ticket: %v", err)
	}
}

// TestSweepManyRecords removes more expired sessions than one sweep batch
// holds, and keeps the live ones among them.
func TestSweepManyRecords(t *testing.T) {
	t.Parallel()
	f := newFixtureTTL(t, &auth.Limits{}, 10*time.Minute)
	// Four accounts, so that none reaches MaxSessionsPerAccount.
	const accounts, each = 4, 75
	var u *user
	for a := range accounts {
		u = f.register(fmt.Sprintf("many%d", a))
		for i := 0; i < each; i++ {
			f.login(u.email, u.password)
		}
	}
	f.clk.Advance(5 * time.Minute)
	fresh := make([]string, 0, 20)
	for i := 0; i < 20; i++ {
		fresh = append(fresh, f.login(u.email, u.password))
	}
	f.clk.Advance(5 * time.Minute)
	f.sweep("expired batch", accounts*(each+1), counts{sessions: 20})
	f.wantAlive("fresh sessions", fresh...)
	f.sweep("nothing left to sweep", 0, counts{sessions: 20})
}

// TestSweepIgnoresUnrelatedState: project data and accounts are never swept.
func TestSweepIgnoresUnrelatedState(t *testing.T) {
	t.Parallel()
	f := newFixtureTTL(t, nil, time.Minute)
	u := f.register("keep")
	f.clk.Advance(24 * time.Hour)
	if n, err := f.svc.Sweep(bg); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want the one expired session", n, err)
	}
	if me, err := f.svc.Me(f.pid, u.p.UserID); err != nil || !strings.HasPrefix(me.Email, "keep") {
		t.Fatalf("account after sweep: %+v %v", me, err)
	}
	if lr, err := f.svc.Login(bg, f.pid, u.email, u.password, addr); err != nil || lr.Token == "" {
		t.Fatalf("login after sweep: %+v %v", lr, err)
	}
	if err := f.svc.CheckAPIKey(f.pid, "ebk_wrong"); err == nil {
		t.Fatal("api key check broken")
	}
}
