package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/node/nodetest"
)

// The TOTP tests run against one node whose auth service uses a fake clock:
// codes come from the independent oracle internal/rfc6238 at the clock's
// time, and time moves only when a test moves it. The tables below never
// move the clock (their rows run in parallel, each on its own account); the
// flows after them do, one after the other.

// totpEpoch is where the fake clocks start: 15 s into a 30 s step.
var totpEpoch = time.Date(2031, time.March, 14, 15, 9, 15, 0, time.UTC)

// newEnvWith is newEnv on a node started with opts (a fake clock, limits,
// no secret key).
func newEnvWith(t *testing.T, opts nodetest.Options) *env {
	t.Helper()
	c := nodetest.Start(t, opts)
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	e.user = e.mustRegister(t, e.p, "")
	e.other = e.mustRegister(t, e.p, "")
	return e
}

// projectHeaders are the headers of an /api/auth or /api/authenticator call
// in project p, with a bearer token when tok is not empty.
func projectHeaders(p nodetest.Project, tok string) map[string]string {
	h := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return h
}

// authCall posts body to /api/auth of e.p.
func (e *env) authCall(t testing.TB, tok, body string) reply {
	t.Helper()
	return e.mustSend(t, http.MethodPost, "/api/auth", projectHeaders(e.p, tok), body)
}

// authenticator posts body to /api/authenticator/<op> of e.p.
func (e *env) authenticator(t testing.TB, op, tok, body string) reply {
	t.Helper()
	return e.mustSend(t, http.MethodPost, "/api/authenticator/"+op, projectHeaders(e.p, tok), body)
}

// me is the status of the me action with tok and, on 200, the user.
func (e *env) me(t testing.TB, tok string) (int, map[string]any) {
	t.Helper()
	r := e.authCall(t, tok, `{"action":"me"}`)
	if r.Status != http.StatusOK {
		return r.Status, nil
	}
	var out struct{ User map[string]any }
	mustDecode(t, r.Body, &out)
	return r.Status, out.User
}

type enrollment struct {
	Secret     string `json:"secret"`
	OtpauthURL string `json:"otpauthUrl"`
	QRPng      string `json:"qrPng"`
}

func (e *env) mustEnroll(t testing.TB, tok string) enrollment {
	t.Helper()
	r := e.authenticator(t, "enroll", tok, "")
	if r.Status != http.StatusOK {
		t.Fatalf("enroll: status %d: %s", r.Status, r.Body)
	}
	var en enrollment
	mustDecode(t, r.Body, &en)
	if en.Secret == "" {
		t.Fatalf("enroll: no secret: %s", r.Body)
	}
	return en
}

// mustConfirm confirms the pending enrollment of tok and returns the
// recovery codes.
func (e *env) mustConfirm(t testing.TB, tok, code string) []string {
	t.Helper()
	r := e.authenticator(t, "confirm", tok, codeBody(code))
	if r.Status != http.StatusOK {
		t.Fatalf("confirm: status %d: %s", r.Status, r.Body)
	}
	var out struct{ RecoveryCodes []string }
	mustDecode(t, r.Body, &out)
	if len(out.RecoveryCodes) != 10 {
		t.Fatalf("confirm: %d recovery codes: %s", len(out.RecoveryCodes), r.Body)
	}
	return out.RecoveryCodes
}

// mustTicket logs in to an account with TOTP on and returns the ticket.
func (e *env) mustTicket(t testing.TB, email, password string) string {
	t.Helper()
	r := e.login(t, e.p, email, password)
	var out struct {
		RequiresTOTP bool   `json:"requiresTotp"`
		LoginTicket  string `json:"loginTicket"`
	}
	if r.Status == http.StatusOK {
		mustDecode(t, r.Body, &out)
	}
	if r.Status != http.StatusOK || !out.RequiresTOTP || out.LoginTicket == "" {
		t.Fatalf("login of a TOTP account: status %d: %s", r.Status, r.Body)
	}
	return out.LoginTicket
}

// totpAt is the code an authenticator app shows for secret at time at.
func totpAt(t testing.TB, secret string, at time.Time) string {
	t.Helper()
	c, err := rfc6238.Authenticator(secret, at)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return c
}

// wrongCode is a well-formed code that is none of the codes of the five
// steps around at.
func wrongCode(t testing.TB, secret string, at time.Time) string {
	t.Helper()
	taken := map[string]bool{}
	for d := -2; d <= 2; d++ {
		taken[totpAt(t, secret, at.Add(time.Duration(d)*30*time.Second))] = true
	}
	n, _ := strconv.Atoi(totpAt(t, secret, at))
	for {
		n = (n + 1) % 1000000
		if c := fmt.Sprintf("%06d", n); !taken[c] {
			return c
		}
	}
}

// setCodes puts the codes of secret around at into v: {now}, {next},
// {prev}, {next2}, {prev2} (the steps at, ±1 and ±2) and {wrong}.
func setCodes(t testing.TB, v vars, secret string, at time.Time) {
	t.Helper()
	for name, d := range map[string]int{"now": 0, "next": 1, "prev": -1, "next2": 2, "prev2": -2} {
		v[name] = totpAt(t, secret, at.Add(time.Duration(d)*30*time.Second))
	}
	v["wrong"] = wrongCode(t, secret, at)
}

func codeBody(code string) string { return `{"code":` + jsonString(code) + `}` }

func loginVerifyBody(ticket, code string) string {
	return `{"action":"login-verify","loginTicket":` + jsonString(ticket) + `,"code":` + jsonString(code) + `}`
}

func verifyBody(email, code, pid string) string {
	return `{"email":` + jsonString(email) + `,"code":` + jsonString(code) + `,"projectId":` + jsonString(pid) + `}`
}

func disableBody(code string) string {
	return `{"action":"disable-totp","code":` + jsonString(code) + `}`
}

func resetBody(email, verifyToken, newPassword string) string {
	return `{"action":"reset-password","email":` + jsonString(email) + `,"verifyToken":` + jsonString(verifyToken) + `,"newPassword":` + jsonString(newPassword) + `}`
}

// jsonMember returns the string member key of a JSON object body.
func jsonMember(t testing.TB, body []byte, key string) string {
	t.Helper()
	var m map[string]any
	mustDecode(t, body, &m)
	s, _ := m[key].(string)
	if s == "" {
		t.Fatalf("answer has no string %q: %.300s", key, body)
	}
	return s
}

// storedAccount is the account document as the node stores it.
func storedAccount(t testing.TB, e *env, pid, uid string) []byte {
	t.Helper()
	d, err := e.c.Nodes[0].Node.Store.Get(pid + "/_users/" + uid)
	if err != nil || d == nil {
		t.Fatalf("stored account %s/%s: %v %v", pid, uid, d, err)
	}
	return d.Data
}

// checkNoPlainSecrets asserts that the stored account holds neither the
// base32 secret nor any recovery code in a readable form.
func checkNoPlainSecrets(t testing.TB, stored []byte, secret string, recovery []string) {
	t.Helper()
	low := strings.ToLower(string(stored))
	forms := []string{secret, strings.TrimRight(secret, "=")}
	if key, err := rfc6238.DecodeSecret(secret); err == nil {
		forms = append(forms, base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key), fmt.Sprintf("%x", key))
	}
	for _, rc := range recovery {
		forms = append(forms, rc, strings.ReplaceAll(rc, "-", ""))
	}
	for _, f := range forms {
		if f != "" && strings.Contains(low, strings.ToLower(f)) {
			t.Errorf("stored account holds %q in plain text: %.600s", f, stored)
		}
	}
}

// totpKit builds the TOTP scenarios of one node and its clock.
type totpKit struct {
	e   *env
	clk *nodetest.Clock
}

// fresh registers an account: {tok}, {email}, {id}.
func (k *totpKit) fresh(t *testing.T, e *env, v vars) {
	a := e.mustRegister(t, e.p, "")
	v["tok"], v["email"], v["id"], v["EMAIL"] = a.Token, a.Email, a.ID, strings.ToUpper(a.Email)
}

// enrolled is fresh plus a pending enrollment: {secret} and its codes.
func (k *totpKit) enrolled(t *testing.T, e *env, v vars) {
	k.fresh(t, e, v)
	v["secret"] = e.mustEnroll(t, v["tok"]).Secret
	setCodes(t, v, v["secret"], k.clk.Now())
}

// enabled is enrolled plus confirmed with {now}: {rc0}..{rc9}, {rc1caps}
// (capitals, no dashes), {rc2spaced} (spaces for dashes). The step of {now}
// is used, so {now} and {prev} are replays from here on; {next} is fresh.
func (k *totpKit) enabled(t *testing.T, e *env, v vars) {
	k.enrolled(t, e, v)
	rcs := e.mustConfirm(t, v["tok"], v["now"])
	for i, rc := range rcs {
		v[fmt.Sprintf("rc%d", i)] = rc
	}
	v["rc1caps"] = strings.ToUpper(strings.ReplaceAll(rcs[1], "-", ""))
	v["rc2spaced"] = strings.ReplaceAll(rcs[2], "-", " ")
}

// withTicket is enabled plus a login ticket: {ticket}.
func (k *totpKit) withTicket(t *testing.T, e *env, v vars) {
	k.enabled(t, e, v)
	v["ticket"] = e.mustTicket(t, v["email"], userPassword)
}

// withVerifyToken is enabled plus a verify token proven with recovery code
// rc9 (so {next} stays fresh): {vtok}.
func (k *totpKit) withVerifyToken(t *testing.T, e *env, v vars) {
	k.enabled(t, e, v)
	v["vtok"] = k.mustVerifyToken(t, v["email"], v["rc9"])
}

func (k *totpKit) mustVerifyToken(t testing.TB, email, code string) string {
	t.Helper()
	r := k.e.authenticator(t, "verify", "", verifyBody(email, code, k.e.p.ID))
	if r.Status != http.StatusOK {
		t.Fatalf("verify: status %d: %s", r.Status, r.Body)
	}
	return jsonMember(t, r.Body, "verifyToken")
}

// then runs several setups in order.
func then(fs ...func(t *testing.T, e *env, v vars)) func(t *testing.T, e *env, v vars) {
	return func(t *testing.T, e *env, v vars) {
		for _, f := range fs {
			f(t, e, v)
		}
	}
}

// checks runs several checks in order.
func checks(fs ...func(t *testing.T, e *env, v vars, r reply)) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		for _, f := range fs {
			f(t, e, v, r)
		}
	}
}

// totpState asserts what me says about the account of {tok} and what login
// answers for it.
func totpState(enabled bool) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if st, u := e.me(t, v["tok"]); st != http.StatusOK || u["totpEnabled"] != enabled {
			t.Errorf("me afterwards: status %d totpEnabled %v, want 200 and %v", st, u["totpEnabled"], enabled)
		}
		lr := e.login(t, e.p, v["email"], userPassword)
		var out map[string]any
		mustDecode(t, lr.Body, &out)
		if lr.Status != http.StatusOK || out["requiresTotp"] != enabled {
			t.Errorf("login afterwards: status %d requiresTotp %v, want 200 and %v: %s", lr.Status, out["requiresTotp"], enabled, lr.Body)
		}
	}
}

// sessionFromBody asserts a {token, user} answer whose token works and whose
// user is {id} with TOTP as given; it returns the token.
func sessionFromBody(t testing.TB, e *env, v vars, r reply, totp bool) string {
	t.Helper()
	var out struct {
		Token string
		User  map[string]any
	}
	mustDecode(t, r.Body, &out)
	if !strings.HasPrefix(out.Token, "ebt_") {
		t.Errorf("token %q: want an ebt_ session token: %s", out.Token, r.Body)
	}
	if out.User["id"] != v["id"] || out.User["email"] != v["email"] || out.User["totpEnabled"] != totp {
		t.Errorf("user = %v, want id %s email %s totpEnabled %v", out.User, v["id"], v["email"], totp)
	}
	if st, u := e.me(t, out.Token); st != http.StatusOK || u["id"] != v["id"] {
		t.Errorf("me with the new token: status %d user %v", st, u)
	}
	return out.Token
}

func newSession(totp bool) func(t *testing.T, e *env, v vars, r reply) {
	return func(t *testing.T, e *env, v vars, r reply) { t.Helper(); sessionFromBody(t, e, v, r, totp) }
}

// ticketStillGood checks that {ticket} still completes with {next}.
func ticketStillGood(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	lr := e.authCall(t, "", loginVerifyBody(v["ticket"], v["next"]))
	if lr.Status != http.StatusOK {
		t.Errorf("the ticket no longer works after a refused code: status %d: %s", lr.Status, lr.Body)
	}
}

var recoveryShape = regexp.MustCompile(`^[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}$`)

// checkEnrollment asserts the enroll answer: a base32 secret, an otpauth URL
// carrying it with the standard parameters, a square PNG QR code, and a
// stored account that holds the secret only sealed.
func checkEnrollment(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	var top map[string]json.RawMessage
	mustDecode(t, r.Body, &top)
	if len(top) != 3 {
		t.Errorf("enroll answer has %d members, want secret, otpauthUrl, qrPng: %.300s", len(top), r.Body)
	}
	var en enrollment
	mustDecode(t, r.Body, &en)
	key, err := rfc6238.DecodeSecret(en.Secret)
	if err != nil || len(key) < 16 {
		t.Errorf("secret %q is not base32 of at least 128 bits: %v", en.Secret, err)
	}
	if strings.ToUpper(en.Secret) != en.Secret {
		t.Errorf("secret %q is not upper-case base32", en.Secret)
	}
	u, err := url.Parse(en.OtpauthURL)
	if err != nil {
		t.Fatalf("otpauthUrl %q: %v", en.OtpauthURL, err)
	}
	q := u.Query()
	if u.Scheme != "otpauth" || u.Host != "totp" {
		t.Errorf("otpauthUrl %q: scheme %q host %q, want otpauth://totp", en.OtpauthURL, u.Scheme, u.Host)
	}
	if !strings.HasSuffix(u.Path, ":"+v["email"]) {
		t.Errorf("otpauthUrl label %q does not end in :%s", u.Path, v["email"])
	}
	for k, want := range map[string]string{"secret": en.Secret, "algorithm": "SHA1", "digits": "6", "period": "30"} {
		if got := q.Get(k); got != want {
			t.Errorf("otpauthUrl %s = %q, want %q (%s)", k, got, want, en.OtpauthURL)
		}
	}
	raw, err := base64.StdEncoding.DecodeString(en.QRPng)
	if err != nil {
		t.Fatalf("qrPng is not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("qrPng is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != b.Dy() || b.Dx() < 200 {
		t.Errorf("QR image is %dx%d, want square and at least 200 px", b.Dx(), b.Dy())
	}
	dark, light := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
				dark++
			} else {
				light++
			}
		}
	}
	if dark == 0 || light == 0 {
		t.Errorf("QR image is blank: %d dark and %d light samples", dark, light)
	}
	stored := storedAccount(t, e, e.p.ID, v["id"])
	checkNoPlainSecrets(t, stored, en.Secret, nil)
	v["enrolledSecret"] = en.Secret
}

// checkConfirmation asserts the confirm answer and what is stored after it.
func (k *totpKit) checkConfirmation(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	var out struct {
		TOTPEnabled   bool     `json:"totpEnabled"`
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	mustDecode(t, r.Body, &out)
	if !out.TOTPEnabled || len(out.RecoveryCodes) != 10 {
		t.Fatalf("confirm answer: %s", r.Body)
	}
	seen := map[string]bool{}
	for _, rc := range out.RecoveryCodes {
		if !recoveryShape.MatchString(rc) || seen[rc] {
			t.Errorf("recovery code %q is malformed or repeated", rc)
		}
		seen[rc] = true
	}
	stored := storedAccount(t, e, e.p.ID, v["id"])
	checkNoPlainSecrets(t, stored, v["secret"], out.RecoveryCodes)
	var acc struct {
		TOTPEnabled bool `json:"totpEnabled"`
		TOTP        struct {
			Secret   string   `json:"secret"`
			LastStep int64    `json:"lastStep"`
			Recovery []string `json:"recovery"`
		} `json:"totp"`
	}
	mustDecode(t, stored, &acc)
	if !strings.HasPrefix(acc.TOTP.Secret, "v1.") || len(acc.TOTP.Recovery) != 10 || !acc.TOTPEnabled {
		t.Errorf("stored totp state: %.600s", stored)
	}
	if want := rfc6238.Step(k.clk.Now()); acc.TOTP.LastStep != want {
		t.Errorf("stored lastStep = %d, want %d (the step of the confirming code)", acc.TOTP.LastStep, want)
	}
}

// TestTOTP covers the authenticator routes and the TOTP-dependent /api/auth
// actions (login-verify, disable-totp, reset-password) on one node with a
// fake clock: parallel tables first, then stateful flows that move the clock.
func TestTOTP(t *testing.T) {
	t.Parallel()
	clk := nodetest.NewClock(totpEpoch)
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk, RecentLogin: 24 * time.Hour})
	p2 := e.c.CreateProject(0)
	e.extra = vars{"pid2": p2.ID, "key2": p2.APIKey, "owner2": p2.OwnerToken}
	k := &totpKit{e: e, clk: clk}

	t.Run("tables", func(t *testing.T) {
		t.Run("enroll", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.enrollScenarios())) })
		t.Run("confirm", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.confirmScenarios())) })
		t.Run("verify", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.verifyScenarios())) })
		t.Run("login-verify", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.loginVerifyScenarios())) })
		t.Run("disable-totp", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.disableScenarios())) })
		t.Run("reset-password", func(t *testing.T) { t.Parallel(); e.run(t, authRows(k.resetScenarios())) })
	})
	// The flows move the clock, so they run after the tables, one by one.
	t.Run("flows", func(t *testing.T) {
		t.Run("enroll confirm login login-verify", k.flowFull)
		t.Run("ticket expires after 5 minutes", k.flowTicketExpiry)
		t.Run("ticket void after 5 wrong codes", k.flowTicketVoid)
		t.Run("one step of drift either way", k.flowDrift)
		t.Run("recovery codes once each everywhere", k.flowRecovery)
		t.Run("verify token expires after 10 minutes", k.flowVerifyExpiry)
		t.Run("verify then reset-password", k.flowReset)
	})
}

const enrollURL = "/api/authenticator/enroll"
const confirmURL = "/api/authenticator/confirm"
const verifyURL = "/api/authenticator/verify"

func (k *totpKit) enrollScenarios() []scenario {
	bt := bearer("{tok}")
	return []scenario{
		{name: "enroll is 200 with secret, otpauth URL and QR code", setup: k.fresh, url: enrollURL, headers: bt, status: 200,
			check: checkEnrollment},
		{name: "enroll with an empty JSON object", setup: k.fresh, url: enrollURL, headers: bt, body: `{}`, status: 200,
			check: checkEnrollment},
		{name: "enroll leaves TOTP off until confirmed", setup: k.fresh, url: enrollURL, headers: bt, status: 200,
			check: totpState(false)},
		{name: "second enroll replaces the pending secret", setup: k.enrolled, url: enrollURL, headers: bt, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				checkEnrollment(t, e, v, r)
				if v["enrolledSecret"] == v["secret"] {
					t.Fatalf("second enroll answered the same secret")
				}
				old := e.authenticator(t, "confirm", v["tok"], codeBody(totpAt(t, v["secret"], k.clk.Now())))
				checkError(t, old, http.StatusBadRequest, "invalid_code", "code")
				cr := e.authenticator(t, "confirm", v["tok"], codeBody(totpAt(t, v["enrolledSecret"], k.clk.Now())))
				if cr.Status != http.StatusOK {
					t.Errorf("confirm with the new secret: status %d: %s", cr.Status, cr.Body)
				}
			}},
		{name: "enroll when enabled is 409", setup: k.enabled, url: enrollURL, headers: bt, status: 409, code: "totp_already_enabled",
			check: func(t *testing.T, e *env, v vars, r reply) {
				// The confirmed secret is untouched: its next code still verifies.
				vr := e.authenticator(t, "verify", "", verifyBody(v["email"], v["next"], e.p.ID))
				if vr.Status != http.StatusOK {
					t.Errorf("verify with the enabled secret afterwards: status %d: %s", vr.Status, vr.Body)
				}
			}},
		{name: "enroll without a bearer is 401", url: enrollURL, status: 401, code: "missing_token"},
		{name: "enroll with a bogus bearer is 401", url: enrollURL, headers: bearer("ebt_bogus"), status: 401, code: "invalid_token"},
		{name: "enroll with a revoked token is 401", url: enrollURL, headers: bt, status: 401, code: "invalid_token",
			setup: func(t *testing.T, e *env, v vars) { k.fresh(t, e, v); e.mustLogout(t, e.p, v["tok"]) }},
		{name: "enroll under another project's headers is 403", setup: k.fresh, url: enrollURL,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 403, code: "project_mismatch"},
		{name: "enroll without X-API-Key is 401", setup: k.fresh, url: enrollURL,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": ""}, status: 401, code: "missing_api_key"},
		{name: "enroll with a wrong X-API-Key is 401", setup: k.fresh, url: enrollURL,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": "ebk_wrong"}, status: 401, code: "invalid_api_key"},
		{name: "GET enroll is 405", method: http.MethodGet, url: enrollURL, headers: bt, setup: k.fresh, status: 405, code: "method_not_allowed"},
		{name: "GET verify is 405", method: http.MethodGet, url: verifyURL, status: 405, code: "method_not_allowed"},
		{name: "unknown authenticator route is 404", url: "/api/authenticator/disable", headers: bt, setup: k.fresh, body: `{}`, status: 404, code: "not_found"},
	}
}

func (k *totpKit) confirmScenarios() []scenario {
	bt := bearer("{tok}")
	c := func(code string) string { return codeBody(code) }
	stillPending := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if st, u := e.me(t, v["tok"]); st != 200 || u["totpEnabled"] != false {
			t.Errorf("after a refused confirm: me %d totpEnabled %v, want false", st, u["totpEnabled"])
		}
		cr := e.authenticator(t, "confirm", v["tok"], codeBody(v["now"]))
		if cr.Status != http.StatusOK {
			t.Errorf("the enrollment did not stay pending: confirm with {now}: status %d: %s", cr.Status, cr.Body)
		}
	}
	return []scenario{
		{name: "confirm is 200 with ten recovery codes", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{now}"), status: 200,
			json: `{"totpEnabled":true}`, check: checks(k.checkConfirmation, totpState(true))},
		{name: "confirm accepts the code of the previous step", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{prev}"), status: 200,
			json: `{"totpEnabled":true}`},
		{name: "confirm accepts the code of the next step", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{next}"), status: 200,
			json: `{"totpEnabled":true}`},
		{name: "confirm refuses a code two steps back", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{prev2}"), status: 400,
			code: "invalid_code", field: "code", check: stillPending},
		{name: "confirm refuses a code two steps ahead", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{next2}"), status: 400,
			code: "invalid_code", field: "code", check: stillPending},
		{name: "confirm with a wrong code is 400 and keeps the enrollment", setup: k.enrolled, url: confirmURL, headers: bt, body: c("{wrong}"),
			status: 400, code: "invalid_code", field: "code", check: stillPending},
		{name: "confirm with five digits is 400", setup: k.enrolled, url: confirmURL, headers: bt, body: c("12345"), status: 400, code: "invalid_code", field: "code"},
		{name: "confirm with letters is 400", setup: k.enrolled, url: confirmURL, headers: bt, body: c("abcdef"), status: 400, code: "invalid_code", field: "code"},
		{name: "confirm with the code of another account's secret is 400", url: confirmURL, headers: bt, status: 400, code: "invalid_code", field: "code",
			setup: func(t *testing.T, e *env, v vars) {
				k.enrolled(t, e, v)
				other := e.mustEnroll(t, e.mustRegister(t, e.p, "").Token).Secret
				v["otherCode"] = totpAt(t, other, k.clk.Now())
			}, body: c("{otherCode}"), check: stillPending},
		{name: "confirm without a code is 400", setup: k.enrolled, url: confirmURL, headers: bt, body: `{}`, status: 400, code: "invalid_argument", field: "code"},
		{name: "confirm with an empty code is 400", setup: k.enrolled, url: confirmURL, headers: bt, body: c(""), status: 400, code: "invalid_argument", field: "code"},
		{name: "confirm without enroll is 409", setup: k.fresh, url: confirmURL, headers: bt, body: c("123456"), status: 409, code: "totp_not_enrolled",
			check: totpState(false)},
		{name: "confirm when already enabled is 409", setup: k.enabled, url: confirmURL, headers: bt, body: c("{next}"), status: 409, code: "totp_already_enabled"},
		{name: "confirm without a bearer is 401", url: confirmURL, body: c("123456"), status: 401, code: "missing_token"},
		{name: "confirm with a bogus bearer is 401", url: confirmURL, headers: bearer("ebt_bogus"), body: c("123456"), status: 401, code: "invalid_token"},
		{name: "confirm without X-API-Key is 401", setup: k.enrolled, url: confirmURL,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": ""}, body: c("{now}"), status: 401, code: "missing_api_key"},
		{name: "confirm with a wrong X-API-Key is 401", setup: k.enrolled, url: confirmURL,
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": "ebk_wrong"}, body: c("{now}"), status: 401, code: "invalid_api_key",
			check: stillPending},
		{name: "confirm with bad JSON is 400", setup: k.enrolled, url: confirmURL, headers: bt, body: `{"code":`, status: 400, code: "invalid_json"},
	}
}

func (k *totpKit) verifyScenarios() []scenario {
	vb := func(email, code string) string { return verifyBody(email, code, "{pid}") }
	good := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if tok := jsonMember(t, r.Body, "verifyToken"); !strings.HasPrefix(tok, "ebv_") {
			t.Errorf("verifyToken %q: want an ebv_ token", tok)
		}
	}
	usedFirst := func(code string) func(t *testing.T, e *env, v vars) {
		return func(t *testing.T, e *env, v vars) {
			k.enabled(t, e, v)
			k.mustVerifyToken(t, v["email"], v[code])
		}
	}
	return []scenario{
		{name: "verify is 200 with a verify token", setup: k.enabled, url: verifyURL, body: vb("{email}", "{next}"), status: 200,
			json: `{"expiresIn":600}`, check: good},
		{name: "verify with the email in capitals", setup: k.enabled, url: verifyURL, body: vb("{EMAIL}", "{next}"), status: 200, check: good},
		{name: "verify with a recovery code", setup: k.enabled, url: verifyURL, body: vb("{email}", "{rc0}"), status: 200, check: good},
		{name: "verify with a recovery code in capitals without dashes", setup: k.enabled, url: verifyURL, body: vb("{email}", "{rc1caps}"), status: 200, check: good},
		{name: "verify with a recovery code with spaces", setup: k.enabled, url: verifyURL, body: vb("{email}", "{rc2spaced}"), status: 200, check: good},
		{name: "verify refuses a used recovery code", setup: usedFirst("rc0"), url: verifyURL, body: vb("{email}", "{rc0}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify refuses a replayed code", setup: usedFirst("next"), url: verifyURL, body: vb("{email}", "{next}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify refuses the code confirm used", setup: k.enabled, url: verifyURL, body: vb("{email}", "{now}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify refuses the step before the one confirm used", setup: k.enabled, url: verifyURL, body: vb("{email}", "{prev}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify refuses a code two steps ahead", setup: k.enabled, url: verifyURL, body: vb("{email}", "{next2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify with a wrong code is 400", setup: k.enabled, url: verifyURL, body: vb("{email}", "{wrong}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify with a malformed code is 400", setup: k.enabled, url: verifyURL, body: vb("{email}", "12ab56"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify with a made-up recovery code is 400", setup: k.enabled, url: verifyURL, body: vb("{email}", "aaaa-bbbb-cccc-dddd"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify of an unknown email is 400 invalid_code", setup: k.enabled, url: verifyURL, body: vb("nobody-{email}", "{next}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify of an account without TOTP is 400 invalid_code", setup: k.fresh, url: verifyURL, body: vb("{email}", "123456"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify of an account with only a pending enrollment is 400", setup: k.enrolled, url: verifyURL, body: vb("{email}", "{now}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify with another projectId in the body is 403", setup: k.enabled, url: verifyURL, body: verifyBody("{email}", "{next}", "{pid2}"),
			status: 403, code: "project_mismatch",
			check: func(t *testing.T, e *env, v vars, r reply) {
				// The refused request did not spend the code.
				k.mustVerifyToken(t, v["email"], v["next"])
			}},
		{name: "verify in another project is 400", setup: k.enabled, url: verifyURL, body: verifyBody("{email}", "{next}", "{pid2}"),
			headers: map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 400, code: "invalid_code", field: "code"},
		{name: "verify without an email is 400", setup: k.enabled, url: verifyURL, body: `{"code":"{next}","projectId":"{pid}"}`, status: 400, code: "invalid_argument", field: "email"},
		{name: "verify without a code is 400", setup: k.enabled, url: verifyURL, body: `{"email":"{email}","projectId":"{pid}"}`, status: 400, code: "invalid_argument", field: "code"},
		{name: "verify without X-API-Key is 401", setup: k.enabled, url: verifyURL, body: vb("{email}", "{next}"), headers: map[string]string{"X-API-Key": ""},
			status: 401, code: "missing_api_key"},
		{name: "verify with a wrong X-API-Key is 401", setup: k.enabled, url: verifyURL, body: vb("{email}", "{next}"), headers: map[string]string{"X-API-Key": "ebk_wrong"},
			status: 401, code: "invalid_api_key"},
		{name: "verify of an unknown email answers like a wrong code", setup: k.enabled, url: verifyURL, body: vb("{email}", "{wrong}"), status: 400, code: "invalid_code",
			check: func(t *testing.T, e *env, v vars, r reply) {
				u := e.authenticator(t, "verify", "", verifyBody("nobody-"+v["email"], v["wrong"], e.p.ID))
				if u.Status != r.Status || !bytes.Equal(u.Body, r.Body) {
					t.Errorf("unknown email: %d %s; wrong code: %d %s", u.Status, u.Body, r.Status, r.Body)
				}
			}},
	}
}

func (k *totpKit) loginVerifyScenarios() []scenario {
	lv := loginVerifyBody
	usedTicket := func(t *testing.T, e *env, v vars) {
		k.withTicket(t, e, v)
		if r := e.authCall(t, "", lv(v["ticket"], v["rc9"])); r.Status != http.StatusOK {
			t.Fatalf("first login-verify: %d %s", r.Status, r.Body)
		}
	}
	replay := func(code string) func(t *testing.T, e *env, v vars) {
		return func(t *testing.T, e *env, v vars) {
			k.withTicket(t, e, v)
			if r := e.authCall(t, "", lv(v["ticket"], v[code])); r.Status != http.StatusOK {
				t.Fatalf("first login-verify: %d %s", r.Status, r.Body)
			}
			v["ticket"] = e.mustTicket(t, v["email"], userPassword)
		}
	}
	return []scenario{
		{name: "login of a TOTP account asks for a code", setup: k.enabled, body: loginBody("{email}", userPassword), status: 200,
			json: `{"requiresTotp":true,"expiresIn":300}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var m map[string]any
				mustDecode(t, r.Body, &m)
				if tk, _ := m["loginTicket"].(string); !strings.HasPrefix(tk, "ebl_") {
					t.Errorf("loginTicket %v: want an ebl_ ticket", m["loginTicket"])
				}
				if m["token"] != nil || m["user"] != nil {
					t.Errorf("a login waiting for its second factor must not carry a session or user: %s", r.Body)
				}
			}},
		{name: "login-verify is 200 with a session", setup: k.withTicket, body: lv("{ticket}", "{next}"), status: 200, check: newSession(true)},
		{name: "login-verify with a recovery code", setup: k.withTicket, body: lv("{ticket}", "{rc0}"), status: 200, check: newSession(true)},
		{name: "login-verify with a recovery code in capitals without dashes", setup: k.withTicket, body: lv("{ticket}", "{rc1caps}"), status: 200, check: newSession(true)},
		{name: "login-verify with a recovery code with spaces", setup: k.withTicket, body: lv("{ticket}", "{rc2spaced}"), status: 200, check: newSession(true)},
		{name: "login-verify refuses a replayed code", setup: replay("next"), body: lv("{ticket}", "{next}"), status: 400, code: "invalid_code", field: "code",
			check: ticketStillGoodAfterRecovery},
		{name: "login-verify refuses a used recovery code", setup: replay("rc0"), body: lv("{ticket}", "{rc0}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify refuses the code confirm used", setup: k.withTicket, body: lv("{ticket}", "{now}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify refuses a code two steps ahead", setup: k.withTicket, body: lv("{ticket}", "{next2}"), status: 400, code: "invalid_code", field: "code",
			check: ticketStillGood},
		{name: "login-verify with a wrong code is 400 and keeps the ticket", setup: k.withTicket, body: lv("{ticket}", "{wrong}"), status: 400,
			code: "invalid_code", field: "code", check: ticketStillGood},
		{name: "login-verify with seven digits is 400", setup: k.withTicket, body: lv("{ticket}", "1234567"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify with the code of another account is 400", setup: then(k.withTicket, func(t *testing.T, e *env, v vars) {
			w := vars{}
			k.enabled(t, e, w)
			v["otherNext"] = w["next"]
		}), body: lv("{ticket}", "{otherNext}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify with a used ticket is 401", setup: usedTicket, body: lv("{ticket}", "{rc0}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "login-verify with an unknown ticket is 401", body: lv("ebl_bogus", "123456"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "login-verify with a session token as ticket is 401", setup: k.withTicket, body: lv("{tok}", "{next}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "login-verify with the ticket in another project is 401", setup: k.withTicket, body: lv("{ticket}", "{next}"),
			headers: map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 401, code: "invalid_ticket", field: "loginTicket",
			check: ticketStillGood},
		{name: "login-verify after a password change is 401", body: lv("{ticket}", "{next}"), status: 401, code: "invalid_ticket", field: "loginTicket",
			setup: then(k.withTicket, func(t *testing.T, e *env, v vars) {
				r := e.authCall(t, v["tok"], `{"action":"change-password","currentPassword":"`+userPassword+`","newPassword":"another fine password"}`)
				if r.Status != http.StatusOK {
					t.Fatalf("change-password: %d %s", r.Status, r.Body)
				}
			})},
		{name: "login-verify without loginTicket is 400", setup: k.withTicket, body: `{"action":"login-verify","code":"{next}"}`, status: 400, code: "invalid_argument", field: "loginTicket"},
		{name: "login-verify without code is 400", setup: k.withTicket, body: `{"action":"login-verify","loginTicket":"{ticket}"}`, status: 400, code: "invalid_argument", field: "code",
			check: ticketStillGood},
		{name: "login-verify without X-API-Key is 401", setup: k.withTicket, body: lv("{ticket}", "{next}"), headers: map[string]string{"X-API-Key": ""},
			status: 401, code: "missing_api_key", check: ticketStillGood},
		{name: "login-verify with a wrong X-API-Key is 401", setup: k.withTicket, body: lv("{ticket}", "{next}"), headers: map[string]string{"X-API-Key": "ebk_wrong"},
			status: 401, code: "invalid_api_key", check: ticketStillGood},
	}
}

// ticketStillGoodAfterRecovery checks that {ticket} still completes, with a
// recovery code ({next} was spent by the setup).
func ticketStillGoodAfterRecovery(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	lr := e.authCall(t, "", loginVerifyBody(v["ticket"], v["rc5"]))
	if lr.Status != http.StatusOK {
		t.Errorf("the ticket no longer works after a refused code: status %d: %s", lr.Status, lr.Body)
	}
}

func (k *totpKit) disableScenarios() []scenario {
	bt := bearer("{tok}")
	off := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		totpState(false)(t, e, v, r)
		stored := storedAccount(t, e, e.p.ID, v["id"])
		if strings.Contains(string(stored), `"totp"`) || strings.Contains(string(stored), "v1.") {
			t.Errorf("the sealed secret is still stored after disable-totp: %.600s", stored)
		}
		if er := e.authenticator(t, "enroll", v["tok"], ""); er.Status != http.StatusOK {
			t.Errorf("enroll after disable-totp: status %d: %s", er.Status, er.Body)
		}
	}
	return []scenario{
		{name: "disable-totp is 200 and turns TOTP off", setup: k.enabled, headers: bt, body: disableBody("{next}"), status: 200,
			json: `{"totpEnabled":false,"user":{"id":"{id}","totpEnabled":false}}`, check: off},
		{name: "disable-totp with a recovery code", setup: k.enabled, headers: bt, body: disableBody("{rc0}"), status: 200,
			json: `{"totpEnabled":false}`, check: off},
		{name: "disable-totp with a wrong code is 400 and keeps TOTP", setup: k.enabled, headers: bt, body: disableBody("{wrong}"), status: 400,
			code: "invalid_code", field: "code", check: totpState(true)},
		{name: "disable-totp refuses the code confirm used", setup: k.enabled, headers: bt, body: disableBody("{now}"), status: 400,
			code: "invalid_code", field: "code", check: totpState(true)},
		{name: "disable-totp refuses a used recovery code", headers: bt, body: disableBody("{rc0}"), status: 400, code: "invalid_code", field: "code",
			setup: func(t *testing.T, e *env, v vars) { k.enabled(t, e, v); k.mustVerifyToken(t, v["email"], v["rc0"]) }, check: totpState(true)},
		{name: "disable-totp with a malformed code is 400", setup: k.enabled, headers: bt, body: disableBody("12-34"), status: 400, code: "invalid_code", field: "code"},
		{name: "disable-totp when not enabled is 409", setup: k.fresh, headers: bt, body: disableBody("123456"), status: 409, code: "totp_not_enabled"},
		{name: "disable-totp with only a pending enrollment is 409", setup: k.enrolled, headers: bt, body: disableBody("{now}"), status: 409, code: "totp_not_enabled"},
		{name: "disable-totp without a code is 400", setup: k.enabled, headers: bt, body: `{"action":"disable-totp"}`, status: 400, code: "invalid_argument", field: "code"},
		{name: "disable-totp without a bearer is 401", body: disableBody("123456"), status: 401, code: "missing_token"},
		{name: "disable-totp with a bogus bearer is 401", headers: bearer("ebt_bogus"), body: disableBody("123456"), status: 401, code: "invalid_token"},
		{name: "disable-totp under another project's headers is 403", setup: k.enabled, body: disableBody("{next}"),
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 403, code: "project_mismatch",
			check: totpState(true)},
		{name: "disable-totp without X-API-Key is 401", setup: k.enabled, body: disableBody("{next}"),
			headers: map[string]string{"Authorization": "Bearer {tok}", "X-API-Key": ""}, status: 401, code: "missing_api_key", check: totpState(true)},
	}
}

const newPassword = "a brand new passphrase"

func (k *totpKit) resetScenarios() []scenario {
	rb := resetBody
	unchanged := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if st, _ := e.me(t, v["tok"]); st != http.StatusOK {
			t.Errorf("a refused reset ended the session: me %d", st)
		}
		if lr := e.login(t, e.p, v["email"], userPassword); lr.Status != http.StatusOK {
			t.Errorf("a refused reset changed the password: login %d %s", lr.Status, lr.Body)
		}
	}
	tokenKept := func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		unchanged(t, e, v, r)
		if rr := e.authCall(t, "", rb(v["email"], v["vtok"], newPassword)); rr.Status != http.StatusOK {
			t.Errorf("the verify token was spent by a refused reset: %d %s", rr.Status, rr.Body)
		}
	}
	return []scenario{
		{name: "reset-password is 200 and ends every session", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", newPassword), status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !jsonEqual(r.Body, []byte(`{"ok":true}`)) {
					t.Errorf("reset-password answered %s, want {\"ok\":true}", r.Body)
				}
				if st, _ := e.me(t, v["tok"]); st != http.StatusUnauthorized {
					t.Errorf("the session from before the reset: me %d, want 401", st)
				}
				checkError(t, e.login(t, e.p, v["email"], userPassword), http.StatusUnauthorized, "invalid_credentials", "")
				if lr := e.login(t, e.p, v["email"], newPassword); lr.Status != http.StatusOK {
					t.Errorf("login with the new password: %d %s", lr.Status, lr.Body)
				}
			}},
		{name: "reset-password with the email in capitals", setup: k.withVerifyToken, body: rb("{EMAIL}", "{vtok}", newPassword), status: 200},
		{name: "reset-password with a reused verify token is 401", body: rb("{email}", "{vtok}", "yet another passphrase"), status: 401,
			code: "invalid_verify_token", field: "verifyToken",
			setup: func(t *testing.T, e *env, v vars) {
				k.withVerifyToken(t, e, v)
				if r := e.authCall(t, "", rb(v["email"], v["vtok"], newPassword)); r.Status != http.StatusOK {
					t.Fatalf("first reset: %d %s", r.Status, r.Body)
				}
			},
			check: func(t *testing.T, e *env, v vars, r reply) {
				if lr := e.login(t, e.p, v["email"], newPassword); lr.Status != http.StatusOK {
					t.Errorf("the refused second reset changed the password: login %d", lr.Status)
				}
			}},
		{name: "reset-password with a bogus verify token is 401", setup: k.fresh, body: rb("{email}", "ebv_bogus", newPassword), status: 401,
			code: "invalid_verify_token", field: "verifyToken", check: unchanged},
		{name: "reset-password with a session token as verify token is 401", setup: k.fresh, body: rb("{email}", "{tok}", newPassword), status: 401,
			code: "invalid_verify_token", field: "verifyToken", check: unchanged},
		{name: "reset-password with another account's verify token is 401", body: rb("{email}", "{otherVtok}", newPassword), status: 401,
			code: "invalid_verify_token", field: "verifyToken",
			setup: func(t *testing.T, e *env, v vars) {
				k.fresh(t, e, v)
				w := vars{}
				k.withVerifyToken(t, e, w)
				v["otherVtok"] = w["vtok"]
			}, check: unchanged},
		{name: "reset-password with an unknown email is 401", setup: k.withVerifyToken, body: rb("nobody-{email}", "{vtok}", newPassword), status: 401,
			code: "invalid_verify_token", field: "verifyToken", check: unchanged},
		{name: "reset-password in another project is 401", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", newPassword),
			headers: map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, status: 401, code: "invalid_verify_token", field: "verifyToken",
			check: unchanged},
		{name: "reset-password with a common new password is 400 and keeps the token", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", "password"),
			status: 400, code: "invalid_argument", field: "newPassword", check: tokenKept},
		{name: "reset-password with 12345678 is 400", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", "12345678"),
			status: 400, code: "invalid_argument", field: "newPassword", check: tokenKept},
		{name: "reset-password with a 7-character new password is 400", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", "x7#kQ2p"),
			status: 400, code: "invalid_argument", field: "newPassword", check: tokenKept},
		{name: "reset-password with a 129-character new password is 400", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", strings.Repeat("k", 129)),
			status: 400, code: "invalid_argument", field: "newPassword", check: tokenKept},
		{name: "reset-password without email is 400", setup: k.withVerifyToken, body: `{"action":"reset-password","verifyToken":"{vtok}","newPassword":"` + newPassword + `"}`,
			status: 400, code: "invalid_argument", field: "email", check: tokenKept},
		{name: "reset-password without verifyToken is 400", setup: k.fresh, body: `{"action":"reset-password","email":"{email}","newPassword":"` + newPassword + `"}`,
			status: 400, code: "invalid_argument", field: "verifyToken", check: unchanged},
		{name: "reset-password without newPassword is 400", setup: k.withVerifyToken, body: `{"action":"reset-password","email":"{email}","verifyToken":"{vtok}"}`,
			status: 400, code: "invalid_argument", field: "newPassword", check: tokenKept},
		{name: "reset-password without X-API-Key is 401", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", newPassword),
			headers: map[string]string{"X-API-Key": ""}, status: 401, code: "missing_api_key", check: tokenKept},
		{name: "reset-password with a wrong X-API-Key is 401", setup: k.withVerifyToken, body: rb("{email}", "{vtok}", newPassword),
			headers: map[string]string{"X-API-Key": "ebk_wrong"}, status: 401, code: "invalid_api_key", check: tokenKept},
	}
}

// ---------------------------------------------------------------------------
// Flows: sequential steps that move the clock
// ---------------------------------------------------------------------------

// step is one request of a flow. Before it the clock moves by advance and,
// when {secret} is set, {now}/{next}/{prev}/{next2}/{prev2}/{wrong} are
// recomputed for the clock's new time.
type step struct {
	name    string
	advance time.Duration
	op      string // "" for /api/auth, else the /api/authenticator/ route
	tok     string // bearer token (template); "" sends none
	headers map[string]string
	body    string // template
	status  int
	code    string // error code
	field   string // error field ("-": none)
	json    string // JSON whose members must be in the answer
	// retryAfter is the exact Retry-After a 429 must carry ("" = any).
	retryAfter string
	// save runs after the checks, to keep what later steps need.
	save func(t *testing.T, v vars, r reply)
}

// runSteps runs a flow in order on e.p; each step is a subtest and the flow
// stops at the first failed step. It returns the replies.
func (e *env) runSteps(t *testing.T, clk *nodetest.Clock, v vars, steps []step) []reply {
	t.Helper()
	out := make([]reply, 0, len(steps))
	for i, st := range steps {
		var r reply
		ok := t.Run(fmt.Sprintf("%02d %s", i+1, st.name), func(t *testing.T) {
			if st.advance > 0 {
				clk.Advance(st.advance)
			}
			if v["secret"] != "" {
				setCodes(t, v, v["secret"], clk.Now())
			}
			h := projectHeaders(e.p, v.expand(st.tok))
			for k, val := range st.headers {
				h[k] = v.expand(val)
			}
			target := "/api/auth"
			if st.op != "" {
				target = "/api/authenticator/" + st.op
			}
			r = e.mustSend(t, http.MethodPost, target, h, v.expand(st.body))
			if r.Status != st.status {
				t.Fatalf("status %d, want %d: %.500s", r.Status, st.status, r.Body)
			}
			if st.status >= 400 {
				checkError(t, r, st.status, st.code, st.field)
			} else {
				checkJSONResponse(t, r)
			}
			if st.retryAfter != "" && r.Header.Get("Retry-After") != st.retryAfter {
				t.Errorf("Retry-After = %q, want %q", r.Header.Get("Retry-After"), st.retryAfter)
			}
			if st.json != "" {
				var want, got any
				if err := json.Unmarshal([]byte(v.expand(st.json)), &want); err != nil {
					t.Fatalf("bad expected JSON %q: %v", st.json, err)
				}
				mustDecode(t, r.Body, &got)
				if !jsonSubset(want, got) {
					t.Errorf("answer %.500s does not contain %s", r.Body, v.expand(st.json))
				}
			}
			if st.save != nil {
				st.save(t, v, r)
			}
		})
		if !ok {
			t.FailNow()
		}
		out = append(out, r)
	}
	return out
}

// saveAs keeps the string member key of the answer as {name}.
func saveAs(key, name string) func(t *testing.T, v vars, r reply) {
	return func(t *testing.T, v vars, r reply) { v[name] = jsonMember(t, r.Body, key) }
}

// flowVars registers a fresh account for a flow: {tok}, {email}, {id}.
func (k *totpKit) flowVars(t *testing.T) vars {
	v := k.e.vars()
	k.fresh(t, k.e, v)
	return v
}

// enabledFlowVars is flowVars with TOTP on ({secret}, {rc0}..{rc9}) and the
// clock moved on by a step, so that {now} is fresh.
func (k *totpKit) enabledFlowVars(t *testing.T) vars {
	v := k.e.vars()
	k.enabled(t, k.e, v)
	k.clk.Advance(30 * time.Second)
	return v
}

func (k *totpKit) flowFull(t *testing.T) {
	e := k.e
	v := k.flowVars(t)
	lastStep := func(t *testing.T, v vars, r reply) {
		var acc struct{ TOTP struct{ LastStep int64 } }
		mustDecode(t, storedAccount(t, e, e.p.ID, v["id"]), &acc)
		if want := rfc6238.Step(k.clk.Now()); acc.TOTP.LastStep != want {
			t.Errorf("stored lastStep = %d, want %d (the step just accepted)", acc.TOTP.LastStep, want)
		}
	}
	e.runSteps(t, k.clk, v, []step{
		{name: "enroll", op: "enroll", tok: "{tok}", status: 200, save: func(t *testing.T, v vars, r reply) {
			checkEnrollment(t, e, v, r)
			v["secret"] = v["enrolledSecret"]
		}},
		{name: "me says TOTP is off while pending", tok: "{tok}", body: `{"action":"me"}`, status: 200, json: `{"user":{"totpEnabled":false}}`},
		{name: "confirm with the current code", op: "confirm", tok: "{tok}", body: codeBody("{now}"), status: 200, json: `{"totpEnabled":true}`,
			save: func(t *testing.T, v vars, r reply) {
				var out struct{ RecoveryCodes []string }
				mustDecode(t, r.Body, &out)
				checkNoPlainSecrets(t, storedAccount(t, e, e.p.ID, v["id"]), v["secret"], out.RecoveryCodes)
				lastStep(t, v, r)
			}},
		{name: "me says TOTP is on", tok: "{tok}", body: `{"action":"me"}`, status: 200, json: `{"user":{"totpEnabled":true}}`},
		{name: "login asks for a code", body: loginBody("{email}", userPassword), status: 200, json: `{"requiresTotp":true,"expiresIn":300}`,
			save: saveAs("loginTicket", "ticket")},
		{name: "login-verify a step later", advance: 30 * time.Second, body: loginVerifyBody("{ticket}", "{now}"), status: 200,
			save: func(t *testing.T, v vars, r reply) {
				v["tok2"] = sessionFromBody(t, e, v, r, true)
				v["used"] = v["now"]
				v["confirmCode"] = v["prev"]
				lastStep(t, v, r)
			}},
		{name: "the new session works", tok: "{tok2}", body: `{"action":"me"}`, status: 200, json: `{"user":{"id":"{id}","totpEnabled":true}}`},
		{name: "login again", body: loginBody("{email}", userPassword), status: 200, json: `{"requiresTotp":true}`, save: saveAs("loginTicket", "ticket")},
		{name: "the accepted code replayed is refused", body: loginVerifyBody("{ticket}", "{used}"), status: 400, code: "invalid_code", field: "code"},
		{name: "the confirming code (an earlier step) is refused", body: loginVerifyBody("{ticket}", "{confirmCode}"), status: 400, code: "invalid_code", field: "code"},
		{name: "the accepted code is refused by verify too", op: "verify", body: verifyBody("{email}", "{used}", "{pid}"), status: 400, code: "invalid_code", field: "code"},
		{name: "the accepted code is refused by disable-totp too", tok: "{tok2}", body: disableBody("{used}"), status: 400, code: "invalid_code", field: "code"},
		{name: "the next step's code completes the same ticket", advance: 30 * time.Second, body: loginVerifyBody("{ticket}", "{now}"), status: 200,
			save: func(t *testing.T, v vars, r reply) { sessionFromBody(t, e, v, r, true); lastStep(t, v, r) }},
		{name: "the first session still works", tok: "{tok}", body: `{"action":"me"}`, status: 200},
	})
}

func (k *totpKit) flowTicketExpiry(t *testing.T) {
	v := k.enabledFlowVars(t)
	k.e.runSteps(t, k.clk, v, []step{
		{name: "login: ticket A", body: loginBody("{email}", userPassword), status: 200, json: `{"expiresIn":300}`, save: saveAs("loginTicket", "ticketA")},
		{name: "login: ticket B", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticketB")},
		{name: "ticket A works 4m59s later", advance: 299 * time.Second, body: loginVerifyBody("{ticketA}", "{now}"), status: 200},
		{name: "ticket B is void 5m later", advance: time.Second, body: loginVerifyBody("{ticketB}", "{next}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "ticket B stays void", advance: time.Hour, body: loginVerifyBody("{ticketB}", "{now}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "a new login gives a working ticket", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticketC")},
		{name: "ticket C works", body: loginVerifyBody("{ticketC}", "{now}"), status: 200},
	})
}

func (k *totpKit) flowTicketVoid(t *testing.T) {
	v := k.enabledFlowVars(t)
	wrong := func(n int) step {
		return step{name: fmt.Sprintf("wrong code %d is 400", n), body: loginVerifyBody("{ticket}", "{wrong}"), status: 400, code: "invalid_code", field: "code"}
	}
	k.e.runSteps(t, k.clk, v, []step{
		{name: "login", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		wrong(1), wrong(2), wrong(3), wrong(4), wrong(5),
		{name: "the right code on the voided ticket is 401", body: loginVerifyBody("{ticket}", "{now}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "a recovery code on the voided ticket is 401", body: loginVerifyBody("{ticket}", "{rc0}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "a new login", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket2")},
		{name: "the right code was not spent by the voided ticket", body: loginVerifyBody("{ticket2}", "{now}"), status: 200},
		{name: "nor the recovery code", op: "verify", body: verifyBody("{email}", "{rc0}", "{pid}"), status: 200},
	})
}

func (k *totpKit) flowDrift(t *testing.T) {
	v := k.enabledFlowVars(t)
	const four = 4 * 30 * time.Second // past every step used so far
	vb := func(code string) string { return verifyBody("{email}", code, "{pid}") }
	k.e.runSteps(t, k.clk, v, []step{
		{name: "verify: two steps back is refused", advance: four, op: "verify", body: vb("{prev2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify: two steps ahead is refused", op: "verify", body: vb("{next2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify: one step back is accepted", op: "verify", body: vb("{prev}"), status: 200},
		{name: "verify: the current step is accepted", op: "verify", body: vb("{now}"), status: 200},
		{name: "verify: one step ahead is accepted", op: "verify", body: vb("{next}"), status: 200},
		{name: "verify: the current step, after a later one, is refused", op: "verify", body: vb("{now}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify: one step ahead again is refused", op: "verify", body: vb("{next}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login", advance: four, body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "login-verify: two steps back is refused", body: loginVerifyBody("{ticket}", "{prev2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify: two steps ahead is refused", body: loginVerifyBody("{ticket}", "{next2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "login-verify: one step back is accepted", body: loginVerifyBody("{ticket}", "{prev}"), status: 200},
		{name: "login again", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "login-verify: one step ahead is accepted", body: loginVerifyBody("{ticket}", "{next}"), status: 200},
		{name: "disable-totp: the current step (before the accepted one) is refused", tok: "{tok}", body: disableBody("{now}"), status: 400, code: "invalid_code", field: "code"},
		{name: "disable-totp: two steps back is refused", advance: four, tok: "{tok}", body: disableBody("{prev2}"), status: 400, code: "invalid_code", field: "code"},
		{name: "disable-totp: one step back is accepted", tok: "{tok}", body: disableBody("{prev}"), status: 200, json: `{"totpEnabled":false}`},
	})
}

func (k *totpKit) flowRecovery(t *testing.T) {
	v := k.enabledFlowVars(t)
	v["rc1caps"] = strings.ToUpper(strings.ReplaceAll(v["rc1"], "-", ""))
	v["rc2spaced"] = " " + strings.ReplaceAll(v["rc2"], "-", " ") + " "
	k.e.runSteps(t, k.clk, v, []step{
		{name: "login", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "login-verify with recovery code 0", body: loginVerifyBody("{ticket}", "{rc0}"), status: 200, json: `{"user":{"totpEnabled":true}}`},
		{name: "login again", body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "recovery code 0 a second time is refused", body: loginVerifyBody("{ticket}", "{rc0}"), status: 400, code: "invalid_code", field: "code"},
		{name: "recovery code 0 is refused by verify too", op: "verify", body: verifyBody("{email}", "{rc0}", "{pid}"), status: 400, code: "invalid_code", field: "code"},
		{name: "recovery code 0 is refused by disable-totp too", tok: "{tok}", body: disableBody("{rc0}"), status: 400, code: "invalid_code", field: "code"},
		{name: "verify with recovery code 1 in capitals without dashes", op: "verify", body: verifyBody("{email}", "{rc1caps}", "{pid}"), status: 200},
		{name: "recovery code 1 as issued is now refused", op: "verify", body: verifyBody("{email}", "{rc1}", "{pid}"), status: 400, code: "invalid_code", field: "code"},
		{name: "recovery code 1 is refused by login-verify", body: loginVerifyBody("{ticket}", "{rc1}"), status: 400, code: "invalid_code", field: "code"},
		{name: "recovery codes still leave TOTP codes working", body: loginVerifyBody("{ticket}", "{now}"), status: 200},
		{name: "disable-totp with recovery code 2 with spaces", tok: "{tok}", body: disableBody("{rc2spaced}"), status: 200, json: `{"totpEnabled":false,"user":{"totpEnabled":false}}`},
		{name: "login no longer asks for a code", body: loginBody("{email}", userPassword), status: 200, json: `{"requiresTotp":false}`},
		{name: "the unused recovery code 3 is gone with TOTP", op: "verify", body: verifyBody("{email}", "{rc3}", "{pid}"), status: 400, code: "invalid_code", field: "code"},
	})
}

func (k *totpKit) flowVerifyExpiry(t *testing.T) {
	v := k.enabledFlowVars(t)
	k.e.runSteps(t, k.clk, v, []step{
		{name: "verify: token 1", op: "verify", body: verifyBody("{email}", "{now}", "{pid}"), status: 200, json: `{"expiresIn":600}`, save: saveAs("verifyToken", "vtok1")},
		{name: "token 1 is void 10 minutes later", advance: 10 * time.Minute, body: resetBody("{email}", "{vtok1}", newPassword), status: 401,
			code: "invalid_verify_token", field: "verifyToken"},
		{name: "the old password still works", body: loginBody("{email}", userPassword), status: 200},
		{name: "verify: token 2", op: "verify", body: verifyBody("{email}", "{now}", "{pid}"), status: 200, save: saveAs("verifyToken", "vtok2")},
		{name: "token 2 works 9m59s later", advance: 599 * time.Second, body: resetBody("{email}", "{vtok2}", newPassword), status: 200, json: `{"ok":true}`},
		{name: "token 2 is spent", body: resetBody("{email}", "{vtok2}", "a third passphrase"), status: 401, code: "invalid_verify_token", field: "verifyToken"},
	})
}

func (k *totpKit) flowReset(t *testing.T) {
	e := k.e
	v := k.enabledFlowVars(t)
	// A second session, from a full two-step login.
	v["tok2"] = func() string {
		tk := e.mustTicket(t, v["email"], userPassword)
		r := e.authCall(t, "", loginVerifyBody(tk, totpAt(t, v["secret"], k.clk.Now())))
		if r.Status != http.StatusOK {
			t.Fatalf("login-verify: %d %s", r.Status, r.Body)
		}
		return jsonMember(t, r.Body, "token")
	}()
	e.runSteps(t, k.clk, v, []step{
		{name: "a ticket issued before the reset", advance: 30 * time.Second, body: loginBody("{email}", userPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "verify", op: "verify", body: verifyBody("{email}", "{now}", "{pid}"), status: 200, save: saveAs("verifyToken", "vtok")},
		{name: "reset-password", advance: time.Minute, body: resetBody("{email}", "{vtok}", newPassword), status: 200, json: `{"ok":true}`},
		{name: "the first session is over", tok: "{tok}", body: `{"action":"me"}`, status: 401, code: "invalid_token"},
		{name: "the second session is over", tok: "{tok2}", body: `{"action":"me"}`, status: 401, code: "invalid_token"},
		{name: "the ticket from before is void", body: loginVerifyBody("{ticket}", "{now}"), status: 401, code: "invalid_ticket", field: "loginTicket"},
		{name: "the old password fails", body: loginBody("{email}", userPassword), status: 401, code: "invalid_credentials"},
		{name: "the new password works", body: loginBody("{email}", newPassword), status: 200, save: saveAs("loginTicket", "ticket")},
		{name: "and completes with a code", body: loginVerifyBody("{ticket}", "{now}"), status: 200, save: saveAs("token", "tok3")},
		{name: "the new session works", tok: "{tok3}", body: `{"action":"me"}`, status: 200, json: `{"user":{"id":"{id}"}}`},
	})
}

// TestAuthenticatorWithoutSecretKey: a node started without a secret key
// keeps accounts working but answers the authenticator with 501.
func TestAuthenticatorWithoutSecretKey(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, nodetest.Options{Voters: 1, NoSecretKey: true})
	e.run(t, authRows([]scenario{
		{name: "enroll is 501", as: "user", url: enrollURL, status: 501, code: "secret_key_required"},
		{name: "enroll of the owner is 501", as: "owner", url: enrollURL, status: 501, code: "secret_key_required"},
		{name: "enroll without a bearer is still 401", url: enrollURL, status: 401, code: "missing_token"},
		{name: "verify is 400 invalid_code", url: verifyURL, body: verifyBody("owner@example.com", "123456", "{pid}"), status: 400, code: "invalid_code"},
		{name: "disable-totp is 409", as: "other", body: disableBody("123456"), status: 409, code: "totp_not_enabled"},
		{name: "register works", body: registerBody("{rand}@example.com", userPassword), status: 201},
		{name: "login works without a second step", body: loginBody("owner@example.com", "owner password 123"), status: 200,
			json: `{"requiresTotp":false}`},
		{name: "me works", as: "user", body: `{"action":"me"}`, status: 200, json: `{"user":{"totpEnabled":false}}`},
	}))
}
