package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/node/nodetest"
)

// Registrations count against a window per client address and per
// project: past either, 429 with Retry-After, and nothing is stored.
func TestGrowth_RegistrationLimits(t *testing.T) {
	clk := nodetest.NewClock(totpEpoch)
	limits := auth.DefaultLimits()
	limits.RegisterPerAddr = auth.LimitRule{Max: 5, Window: time.Hour}
	limits.RegisterPerProject = auth.LimitRule{Max: 3, Window: time.Hour}
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk, Limits: &limits})
	// newEnvWith registered two users in e.p: one more fills the project.
	e.mustRegister(t, e.p, "")
	register := func(p nodetest.Project, email string) reply {
		return e.mustSend(t, http.MethodPost, "/api/auth", projectHeaders(p, ""),
			fmt.Sprintf(`{"action":"register","email":%q,"password":%q}`, email, userPassword))
	}
	r := register(e.p, "fourth@example.com")
	checkError(t, r, http.StatusTooManyRequests, "rate_limited", "")
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	if r := e.login(t, e.p, "fourth@example.com", userPassword); r.Status != http.StatusUnauthorized {
		t.Fatalf("the refused account exists: login %d %s", r.Status, r.Body)
	}
	// Another project is not full; this address has one registration left.
	p2 := e.c.CreateProject(0)
	if r := register(p2, "a@example.com"); r.Status != http.StatusCreated {
		t.Fatalf("register in another project: %d %s", r.Status, r.Body)
	}
	if r := register(p2, "b@example.com"); r.Status != http.StatusCreated {
		t.Fatalf("register in another project: %d %s", r.Status, r.Body)
	}
	// The address's five are used (three in e.p, two in p2).
	checkError(t, register(p2, "c@example.com"), http.StatusTooManyRequests, "rate_limited", "")
	// The windows end.
	clk.Advance(time.Hour + time.Second)
	if r := register(e.p, "fourth@example.com"); r.Status != http.StatusCreated {
		t.Fatalf("register after the window: %d %s", r.Status, r.Body)
	}
}

// An account keeps at most auth.MaxSessionsPerAccount live sessions: a new
// one revokes the oldest.
func TestGrowth_SessionsPerAccountAreCapped(t *testing.T) {
	e := newEnv(t)
	acc := e.mustRegister(t, e.p, "")
	tokens := []string{acc.Token}
	for range auth.MaxSessionsPerAccount {
		r := e.login(t, e.p, acc.Email, userPassword)
		if r.Status != http.StatusOK {
			t.Fatalf("login: %d %s", r.Status, r.Body)
		}
		var out struct{ Token string }
		mustDecode(t, r.Body, &out)
		tokens = append(tokens, out.Token)
	}
	me := func(tok string) int {
		return e.mustSend(t, http.MethodPost, "/api/auth", projectHeaders(e.p, tok), `{"action":"me"}`).Status
	}
	if st := me(tokens[0]); st != http.StatusUnauthorized {
		t.Fatalf("the oldest session after %d more: %d, want 401 (revoked)", auth.MaxSessionsPerAccount, st)
	}
	for _, i := range []int{1, len(tokens) / 2, len(tokens) - 1} {
		if st := me(tokens[i]); st != http.StatusOK {
			t.Fatalf("session %d of %d: %d, want 200", i, len(tokens), st)
		}
	}
	// Logging out frees a place: the next login revokes nothing.
	e.mustLogout(t, e.p, tokens[len(tokens)-1])
	if r := e.login(t, e.p, acc.Email, userPassword); r.Status != http.StatusOK {
		t.Fatalf("login: %d", r.Status)
	}
	if st := me(tokens[1]); st != http.StatusOK {
		t.Fatalf("the oldest live session after a logout and a login: %d, want 200", st)
	}
}
