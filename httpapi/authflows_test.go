package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
)

// TestAuthRateLimits shows the brute-force limits through HTTP on one node
// with small limits and a fake clock: 3 wrong passwords or codes per account
// and address, 8 failures of any kind per address, 15-minute windows. Every
// flow starts after the windows of the flows before it have ended.
func TestAuthRateLimits(t *testing.T) {
	t.Parallel()
	clk := nodetest.NewClock(totpEpoch)
	const window = 15 * time.Minute
	limits := &auth.Limits{
		PasswordPerAccountAddr: auth.LimitRule{Max: 3, Window: window},
		CodePerAccountAddr:     auth.LimitRule{Max: 3, Window: window},
		PerAddr:                auth.LimitRule{Max: 8, Window: window},
	}
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk, Limits: limits, RecentLogin: 24 * time.Hour})
	k := &totpKit{e: e, clk: clk}
	// begin moves past every window of the flows before and registers a
	// fresh account ({tok}, {email}, {id}).
	begin := func(t *testing.T) vars {
		clk.Advance(window + time.Minute)
		return k.flowVars(t)
	}
	// beginTOTP is begin with TOTP on and a fresh {now}.
	beginTOTP := func(t *testing.T) vars {
		clk.Advance(window + time.Minute)
		return k.enabledFlowVars(t)
	}

	// passwordSteps: three wrong passwords are answered, the fourth attempt
	// and even the right password are refused until the window (which began
	// at the first failure) ends; then the right password is judged again.
	passwordSteps := func(email string, final int) []step {
		wrong := func(i int, status int, code, retry string) step {
			return step{name: fmt.Sprintf("wrong password %d is %d", i, status), body: loginBody(email, fmt.Sprintf("wrong guess %d", i)),
				status: status, code: code, retryAfter: retry}
		}
		right := loginBody(email, userPassword)
		finalCode := ""
		if final == http.StatusUnauthorized {
			finalCode = "invalid_credentials"
		}
		// The window starts at the first failure: one minute before the
		// others, so 14 minutes are left when the limit trips.
		second := wrong(2, 401, "invalid_credentials", "")
		second.advance = time.Minute
		return []step{
			wrong(1, 401, "invalid_credentials", ""),
			second,
			wrong(3, 401, "invalid_credentials", ""),
			wrong(4, 429, "rate_limited", "840"),
			{name: "the right password is 429 too", body: right, status: 429, code: "rate_limited", retryAfter: "840"},
			{name: "10 minutes later still 429", advance: 10 * time.Minute, body: right, status: 429, code: "rate_limited", retryAfter: "240"},
			{name: "a second before the window ends still 429", advance: 4*time.Minute - time.Second, body: right, status: 429, code: "rate_limited", retryAfter: "1"},
			{name: "when the window ends the right password is judged again", advance: time.Second, body: right, status: final, code: finalCode},
			wrong(5, 401, "invalid_credentials", ""),
		}
	}

	var known, unknown []reply
	t.Run("wrong passwords of a known email", func(t *testing.T) {
		v := begin(t)
		known = e.runSteps(t, clk, v, passwordSteps(v["email"], http.StatusOK))
	})
	t.Run("wrong passwords of an unknown email", func(t *testing.T) {
		v := begin(t)
		unknown = e.runSteps(t, clk, v, passwordSteps("nobody-"+v["email"], http.StatusUnauthorized))
	})
	t.Run("unknown and known emails are limited alike", func(t *testing.T) {
		if len(known) == 0 || len(unknown) != len(known) {
			t.Fatalf("the two flows did not both complete")
		}
		// Every answer before the window ends is the same, byte for byte.
		for i := 0; i < 7; i++ {
			if known[i].Status != unknown[i].Status || !bytes.Equal(known[i].Body, unknown[i].Body) ||
				known[i].Header.Get("Retry-After") != unknown[i].Header.Get("Retry-After") {
				t.Errorf("step %d: known email %d %s (Retry-After %q), unknown email %d %s (Retry-After %q)", i+1,
					known[i].Status, known[i].Body, known[i].Header.Get("Retry-After"),
					unknown[i].Status, unknown[i].Body, unknown[i].Header.Get("Retry-After"))
			}
		}
	})

	t.Run("a successful login clears the address counter", func(t *testing.T) {
		v := begin(t)
		w := func(i, status int) step {
			code := "invalid_credentials"
			if status == 429 {
				code = "rate_limited"
			}
			return step{name: fmt.Sprintf("wrong password %d is %d", i, status), body: loginBody("{email}", fmt.Sprintf("wrong guess %d", i)), status: status, code: code}
		}
		e.runSteps(t, clk, v, []step{
			w(1, 401), w(2, 401),
			{name: "the right password", body: loginBody("{email}", userPassword), status: 200},
			// Without the reset, the fourth and fifth failures would be 429.
			w(3, 401), w(4, 401), w(5, 401),
			w(6, 429),
		})
	})

	t.Run("change-password shares the password limit", func(t *testing.T) {
		v := begin(t)
		cp := func(current string) string { return changePasswordBody(current, newPassword) }
		wrong := step{name: "wrong current password is 401", tok: "{tok}", body: cp("not my password 1"), status: 401, code: "invalid_credentials", field: "currentPassword"}
		e.runSteps(t, clk, v, []step{
			wrong, wrong, wrong,
			{name: "the right current password is 429", tok: "{tok}", body: cp(userPassword), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "login with the right password is 429", body: loginBody("{email}", userPassword), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "the session still works", tok: "{tok}", body: `{"action":"me"}`, status: 200},
			{name: "after the window change-password works", advance: window, tok: "{tok}", body: cp(userPassword), status: 200, json: `{"ok":true}`},
		})
	})

	t.Run("wrong codes on login-verify", func(t *testing.T) {
		v := beginTOTP(t)
		wrong := step{name: "wrong code is 400", body: loginVerifyBody("{ticket}", "{wrong}"), status: 400, code: "invalid_code", field: "code"}
		e.runSteps(t, clk, v, []step{
			{name: "login", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
			wrong, wrong, wrong,
			{name: "the right code is 429", body: loginVerifyBody("{ticket}", "{now}"), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "a recovery code is 429", body: loginVerifyBody("{ticket}", "{rc0}"), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "authenticator verify shares the limit", op: "verify", body: verifyBody("{email}", "{now}", "{pid}"), status: 429, code: "rate_limited"},
			{name: "disable-totp shares the limit", tok: "{tok}", body: disableBody("{now}"), status: 429, code: "rate_limited"},
			{name: "the password is not limited by wrong codes", advance: 14 * time.Minute, body: loginBody("{email}", userPassword), status: 200,
				save: saveAs("loginTicket", "ticket")},
			{name: "still 429 a minute before the window ends", body: loginVerifyBody("{ticket}", "{now}"), status: 429, code: "rate_limited", retryAfter: "60"},
			{name: "after the window the right code works", advance: time.Minute, body: loginVerifyBody("{ticket}", "{now}"), status: 200},
		})
	})

	codeSteps := func(email string, final int) []step {
		vb := func(code string) string { return verifyBody(email, code, "{pid}") }
		wrong := step{name: "wrong code is 400", op: "verify", body: vb("{wrong}"), status: 400, code: "invalid_code", field: "code"}
		finalCode := ""
		if final == 400 {
			finalCode = "invalid_code"
		}
		return []step{
			wrong, wrong, wrong,
			{name: "the right code is 429", op: "verify", body: vb("{now}"), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "a recovery code is 429", op: "verify", body: vb("{rc0}"), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "after the window the right code is judged again", advance: window, op: "verify", body: vb("{now}"), status: final, code: finalCode},
		}
	}
	var knownCodes, unknownCodes []reply
	t.Run("wrong codes on authenticator verify", func(t *testing.T) {
		v := beginTOTP(t)
		knownCodes = e.runSteps(t, clk, v, codeSteps("{email}", 200))
	})
	t.Run("wrong codes on authenticator verify of an unknown email", func(t *testing.T) {
		v := beginTOTP(t)
		unknownCodes = e.runSteps(t, clk, v, codeSteps("nobody-{email}", 400))
	})
	t.Run("unknown and known emails are limited alike on verify", func(t *testing.T) {
		if len(knownCodes) == 0 || len(unknownCodes) != len(knownCodes) {
			t.Fatalf("the two flows did not both complete")
		}
		for i := 0; i < 5; i++ {
			if knownCodes[i].Status != unknownCodes[i].Status || !bytes.Equal(knownCodes[i].Body, unknownCodes[i].Body) {
				t.Errorf("step %d: known email %d %s, unknown email %d %s", i+1, knownCodes[i].Status, knownCodes[i].Body, unknownCodes[i].Status, unknownCodes[i].Body)
			}
		}
	})

	t.Run("wrong codes on disable-totp", func(t *testing.T) {
		v := beginTOTP(t)
		wrong := step{name: "wrong code is 400", tok: "{tok}", body: disableBody("{wrong}"), status: 400, code: "invalid_code", field: "code"}
		e.runSteps(t, clk, v, []step{
			wrong, wrong, wrong,
			{name: "the right code is 429", tok: "{tok}", body: disableBody("{now}"), status: 429, code: "rate_limited", retryAfter: "900"},
			{name: "TOTP is still on", tok: "{tok}", body: `{"action":"me"}`, status: 200, json: `{"user":{"totpEnabled":true}}`},
			{name: "after the window the right code works", advance: window, tok: "{tok}", body: disableBody("{now}"), status: 200, json: `{"totpEnabled":false}`},
		})
	})

	t.Run("failures of any kind per address", func(t *testing.T) {
		v := begin(t)
		var steps []step
		for i := 1; i <= 4; i++ {
			steps = append(steps,
				step{name: fmt.Sprintf("unknown email %d is 401", i), body: loginBody(fmt.Sprintf("nobody%d-{email}", i), userPassword), status: 401, code: "invalid_credentials"},
				step{name: fmt.Sprintf("bogus verify token %d is 401", i), body: resetBody("{email}", fmt.Sprintf("ebv_bogus%d", i), newPassword), status: 401,
					code: "invalid_verify_token", field: "verifyToken"})
		}
		steps = append(steps,
			step{name: "a bogus verify token is 429", body: resetBody("{email}", "ebv_bogus9", newPassword), status: 429, code: "rate_limited", retryAfter: "900"},
			step{name: "the right password of a fresh account is 429", body: loginBody("{email}", userPassword), status: 429, code: "rate_limited", retryAfter: "900"},
			step{name: "a code for another account is 429", op: "verify", body: verifyBody("{userEmail}", "123456", "{pid}"), status: 429, code: "rate_limited"},
			step{name: "a registration is not a failure and still works", body: registerBody("new-{email}", userPassword), status: 201},
			step{name: "after the window the right password works", advance: window, body: loginBody("{email}", userPassword), status: 200},
		)
		v["userEmail"] = e.user.Email
		e.runSteps(t, clk, v, steps)
	})
}

// startDefaultCostNode starts one node with the production argon2id
// parameters (nodetest uses cheap ones) and no brute-force limits, and
// creates a project on it.
func startDefaultCostNode(t *testing.T) (*env, time.Duration) {
	t.Helper()
	n, err := node.Start(node.Config{
		NodeID: "n1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		AdminToken: nodetest.AdminToken, ClusterSecret: nodetest.Secret, SecretKey: nodetest.SecretKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard, Tuning: nodetest.FastTuning(),
		Limits: &auth.Limits{}, SweepInterval: time.Hour,
	})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(n.Kill)
	e := &env{base: n.HTTPURL()}
	nodetest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		r, err := e.send(t.Context(), http.MethodGet, "/readyz", nil, "")
		if err == nil && r.Status != http.StatusOK {
			err = fmt.Errorf("/readyz: %d", r.Status)
		}
		return err
	})
	start := time.Now()
	r := e.mustSend(t, http.MethodPost, "/admin/projects", bearer(nodetest.AdminToken),
		`{"name":"timing","ownerEmail":"owner@example.com","ownerPassword":"owner password 123"}`)
	hashCost := time.Since(start)
	if r.Status != http.StatusCreated {
		t.Fatalf("create project: %d %s", r.Status, r.Body)
	}
	var created struct{ ProjectID, APIKey string }
	mustDecode(t, r.Body, &created)
	e.p = nodetest.Project{ID: created.ProjectID, APIKey: created.APIKey}
	return e, hashCost
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestAuthUnknownEmailLooksLikeWrongPassword: with production hashing, an
// unknown email and a wrong password get the same status and the same bytes,
// and take about the same time (the unknown email pays for a dummy hash), so
// neither the answer nor its timing tells whether an account exists. It runs
// alone (not parallel) to keep the timing quiet.
func TestAuthUnknownEmailLooksLikeWrongPassword(t *testing.T) {
	e, _ := startDefaultCostNode(t)
	a := e.mustRegister(t, e.p, "")
	const rounds = 15
	timed := func(email, password string) (reply, time.Duration) {
		start := time.Now()
		r := e.login(t, e.p, email, password)
		return r, time.Since(start)
	}
	var wrongT, unknownT, floorT []time.Duration
	var first reply
	for i := -2; i < rounds; i++ { // two rounds of warm-up
		// Alternate the order so that drift favours neither.
		var rw, ru reply
		var dw, du time.Duration
		if i%2 == 0 {
			rw, dw = timed(a.Email, fmt.Sprintf("wrong guess %d", i))
			ru, du = timed(fmt.Sprintf("nobody%d-%s", i, a.Email), fmt.Sprintf("wrong guess %d", i))
		} else {
			ru, du = timed(fmt.Sprintf("nobody%d-%s", i, a.Email), fmt.Sprintf("wrong guess %d", i))
			rw, dw = timed(a.Email, fmt.Sprintf("wrong guess %d", i))
		}
		// A request refused before any hashing, for scale.
		_, df := timed(a.Email, "")
		if first.Status == 0 {
			first = rw
			checkError(t, rw, http.StatusUnauthorized, "invalid_credentials", "-")
		}
		for _, r := range []reply{rw, ru} {
			if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) {
				t.Fatalf("round %d: answers differ:\nwrong password: %d %s\nunknown email:  %d %s", i, rw.Status, rw.Body, ru.Status, ru.Body)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Retry-After", "Www-Authenticate", "X-Revision"} {
				if r.Header.Get(h) != first.Header.Get(h) {
					t.Fatalf("round %d: header %s differs: %q vs %q", i, h, r.Header.Get(h), first.Header.Get(h))
				}
			}
		}
		if i >= 0 {
			wrongT, unknownT, floorT = append(wrongT, dw), append(unknownT, du), append(floorT, df)
		}
	}
	mw, mu, mf := median(wrongT), median(unknownT), median(floorT)
	t.Logf("median of %d: wrong password %v, unknown email %v, no hashing %v", rounds, mw, mu, mf)
	// The check is only meaningful if hashing dominates a login: otherwise a
	// missing dummy hash would not show.
	if mw < 3*mf {
		t.Errorf("a wrong password (%v) costs less than 3x a request without hashing (%v): the timing comparison cannot tell", mw, mf)
	}
	ratio := float64(max(mw, mu)) / float64(min(mw, mu))
	if ratio > 3 {
		t.Errorf("unknown email and wrong password take different times: medians %v vs %v (ratio %.1f, want <= 3)", mu, mw, ratio)
	}
}
