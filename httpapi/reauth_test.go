package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// A stolen session token alone cannot take over an account: changing the
// second factor needs a recent proof of the password (register, login,
// login-verify or reauthenticate, within --recent-login-window), and each
// change is told to the account as a security notification.
func TestReauth_SecondFactorChangesNeedRecentProof(t *testing.T) {
	clk := nodetest.NewClock(totpEpoch)
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk})
	acc := e.mustRegister(t, e.p, "")
	h := projectHeaders(e.p, acc.Token)
	send := func(target, body string) reply {
		t.Helper()
		return e.mustSend(t, http.MethodPost, target, h, body)
	}
	want := func(what string, r reply, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d, want %d: %s", what, r.Status, status, r.Body)
		}
	}

	// The interface's flow holds: register, then enroll right away.
	want("enroll right after register", send("/api/authenticator/enroll", ""), http.StatusOK)

	// Later, the token alone is not enough.
	clk.Advance(6 * time.Minute)
	checkError(t, send("/api/authenticator/enroll", ""), http.StatusUnauthorized, "reauthentication_required", "")
	checkError(t, send("/api/auth", `{"action":"reauthenticate","password":"wrong password 123"}`), http.StatusUnauthorized, "invalid_credentials", "password")
	checkError(t, send("/api/auth", `{"action":"reauthenticate"}`), http.StatusBadRequest, "invalid_argument", "password")
	want("reauthenticate", send("/api/auth", `{"action":"reauthenticate","password":"`+userPassword+`"}`), http.StatusOK)
	r := send("/api/authenticator/enroll", "")
	want("enroll after reauthenticate", r, http.StatusOK)
	var enr struct{ Secret string }
	mustDecode(t, r.Body, &enr)

	// The proof ages out between enroll and confirm.
	clk.Advance(6 * time.Minute)
	checkError(t, send("/api/authenticator/confirm", `{"code":"`+totpAt(t, enr.Secret, clk.Now())+`"}`), http.StatusUnauthorized, "reauthentication_required", "")
	want("reauthenticate again", send("/api/auth", `{"action":"reauthenticate","password":"`+userPassword+`"}`), http.StatusOK)
	want("confirm", send("/api/authenticator/confirm", `{"code":"`+totpAt(t, enr.Secret, clk.Now())+`"}`), http.StatusOK)

	// With the authenticator on, reauthenticating needs a code too.
	clk.Advance(6 * time.Minute)
	disable := func() reply {
		return send("/api/auth", `{"action":"disable-totp","code":"`+totpAt(t, enr.Secret, clk.Now())+`"}`)
	}
	checkError(t, disable(), http.StatusUnauthorized, "reauthentication_required", "")
	checkError(t, send("/api/auth", `{"action":"reauthenticate","password":"`+userPassword+`"}`), http.StatusBadRequest, "invalid_argument", "code")
	checkError(t, send("/api/auth", `{"action":"reauthenticate","password":"`+userPassword+`","code":"`+wrongCode(t, enr.Secret, clk.Now())+`"}`), http.StatusBadRequest, "invalid_code", "code")
	want("reauthenticate with a code", send("/api/auth", `{"action":"reauthenticate","password":"`+userPassword+`","code":"`+totpAt(t, enr.Secret, clk.Now())+`"}`), http.StatusOK)
	// The code just used cannot be replayed; the next step's can.
	clk.Advance(30 * time.Second)
	want("disable-totp after reauthenticate", disable(), http.StatusOK)

	// A login counts as proof: after a login with the password, a fresh
	// session may enroll at once.
	clk.Advance(6 * time.Minute)
	r = e.login(t, e.p, acc.Email, userPassword)
	want("login", r, http.StatusOK)
	var fresh struct{ Token string }
	mustDecode(t, r.Body, &fresh)
	if r := e.mustSend(t, http.MethodPost, "/api/authenticator/enroll", projectHeaders(e.p, fresh.Token), ""); r.Status != http.StatusOK {
		t.Fatalf("enroll right after login: %d %s", r.Status, r.Body)
	}

	// Every change was told to the account as a security notification,
	// queued in the same request that made the change.
	r = e.mustSend(t, http.MethodGet, "/api/notifications/history?limit=100", projectHeaders(e.p, e.p.OwnerToken), "")
	var page struct {
		Notifications []struct {
			Category string
			Title    string
			Target   struct{ UserID string }
		}
	}
	mustDecode(t, r.Body, &page)
	titles := map[string]int{}
	for _, it := range page.Notifications {
		if it.Category == "security" && it.Target.UserID == acc.ID {
			titles[it.Title]++
		}
	}
	if titles["Authenticator setup started"] != 3 || titles["Two-step verification is on"] != 1 || titles["Two-step verification is off"] != 1 {
		t.Fatalf("security notifications of the account: %v, want 3 setups, 1 on, 1 off (history: %s)", titles, r.Body)
	}
}
