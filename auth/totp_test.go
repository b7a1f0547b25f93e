package auth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// The service-level tests drive auth.Service on a real one-node cluster
// whose auth clock is a nodetest.Clock: time moves only when a test says so.

// epoch is where every fixture's clock starts: a whole TOTP step (and a
// whole second), so step arithmetic below is exact.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testPassword = "correct horse battery 42"
	newPassword  = "another fine passphrase 7"
	ownerEmail   = "owner@example.com"
	// addr is the client address of most attempts; addr2 another client.
	addr  = "192.0.2.1"
	addr2 = "192.0.2.2"
)

var bg = context.Background()

type fixture struct {
	t     *testing.T
	clk   *nodetest.Clock
	svc   *auth.Service
	store *raftstore.Store
	pid   string
}

// newFixture starts a one-node cluster with the given limits (nil: the
// defaults) and creates a project named "acme".
func newFixture(t *testing.T, limits *auth.Limits) *fixture {
	return newFixtureTTL(t, limits, 0)
}

func newFixtureTTL(t *testing.T, limits *auth.Limits, ttl time.Duration) *fixture {
	t.Helper()
	clk := nodetest.NewClock(epoch)
	c := nodetest.Start(t, nodetest.Options{Clock: clk, Limits: limits, SessionTTL: ttl})
	n := c.Nodes[0].Node
	f := &fixture{t: t, clk: clk, svc: n.Accounts, store: n.Store}
	f.pid = f.newProject("acme")
	return f
}

func (f *fixture) newProject(name string) string {
	f.t.Helper()
	p, err := f.svc.CreateProject(bg, name, ownerEmail, testPassword)
	if err != nil {
		f.t.Fatalf("create project: %v", err)
	}
	return p.ProjectID
}

// user is a registered account with the session register gave it.
type user struct {
	email, password string
	token           string // the session from Register
	p               *auth.Principal
	secret          string   // base32 TOTP seed once enabled
	recovery        []string // recovery codes once enabled
}

var userSeq atomic.Int64

func (f *fixture) register(prefix string) *user {
	f.t.Helper()
	email := fmt.Sprintf("%s%d@example.com", prefix, userSeq.Add(1))
	res, err := f.svc.Register(bg, f.pid, email, testPassword, prefix, "")
	if err != nil {
		f.t.Fatalf("register %s: %v", email, err)
	}
	u := &user{email: email, password: testPassword, token: res.Token}
	u.p = f.authenticate(res.Token)
	return u
}

func (f *fixture) authenticate(token string) *auth.Principal {
	f.t.Helper()
	p, err := f.svc.Authenticate(token)
	if err != nil {
		f.t.Fatalf("authenticate: %v", err)
	}
	return p
}

// code is the authenticator app's code for secret at the clock's time plus
// steps time steps.
func (f *fixture) code(secret string, steps int) string {
	f.t.Helper()
	c, err := rfc6238.Authenticator(secret, f.clk.Now().Add(time.Duration(steps)*30*time.Second))
	if err != nil {
		f.t.Fatalf("rfc6238: %v", err)
	}
	return c
}

// wrongCode is a well-formed code that matches no step the service accepts
// now (nor the two steps either side of those).
func (f *fixture) wrongCode(secret string) string {
	f.t.Helper()
	near := map[string]bool{}
	for s := -3; s <= 3; s++ {
		near[f.code(secret, s)] = true
	}
	for _, c := range []string{"000000", "111111", "222222", "333333"} {
		if !near[c] {
			return c
		}
	}
	f.t.Fatal("no wrong code found")
	return ""
}

// enroll starts enrollment and checks the answer's shape.
func (f *fixture) enroll(u *user) *auth.Enrollment {
	f.t.Helper()
	e, _, err := f.svc.Enroll(bg, u.p)
	if err != nil {
		f.t.Fatalf("enroll %s: %v", u.email, err)
	}
	return e
}

// enableTOTP enrolls and confirms u's authenticator with the current code,
// then moves the clock one step on so that the next current code is fresh.
func (f *fixture) enableTOTP(u *user) {
	f.t.Helper()
	e := f.enroll(u)
	conf, err := f.svc.Confirm(bg, u.p, f.code(e.Secret, 0))
	if err != nil {
		f.t.Fatalf("confirm %s: %v", u.email, err)
	}
	u.secret, u.recovery = e.Secret, conf.RecoveryCodes
	f.clk.Advance(30 * time.Second)
}

// ticket logs u in with the password and returns the login ticket.
func (f *fixture) ticket(u *user) string {
	f.t.Helper()
	res, err := f.svc.Login(bg, f.pid, u.email, u.password, addr)
	if err != nil {
		f.t.Fatalf("login %s: %v", u.email, err)
	}
	if !res.RequiresTOTP || res.Token != "" || res.User != nil || !strings.HasPrefix(res.LoginTicket, "ebl_") || res.ExpiresIn != 300 {
		f.t.Fatalf("login of a TOTP account = %+v, want only a ticket ebl_... lasting 300 s", res)
	}
	return res.LoginTicket
}

// accountJSON is the stored account document of u.
func (f *fixture) accountJSON(u *user) []byte {
	f.t.Helper()
	doc, err := f.store.Get(keys.User(f.pid, u.p.UserID))
	if err != nil || doc == nil {
		f.t.Fatalf("read account of %s: %v %v", u.email, doc, err)
	}
	return doc.Data
}

type storedTOTP struct {
	TOTP *struct {
		Secret   string   `json:"secret"`
		Pending  string   `json:"pending"`
		LastStep int64    `json:"lastStep"`
		Recovery []string `json:"recovery"`
	} `json:"totp"`
	TOTPEnabled bool `json:"totpEnabled"`
}

func (f *fixture) storedTOTP(u *user) storedTOTP {
	f.t.Helper()
	var st storedTOTP
	if err := json.Unmarshal(f.accountJSON(u), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

var recoveryRE = regexp.MustCompile(`^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$`)

func TestEnrollConfirm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("ada")

	// Confirm without enrollment.
	_, err := f.svc.Confirm(bg, u.p, "123456")
	wantErr(t, "confirm before enroll", err, auth.ErrTOTPNotPending)

	e := f.enroll(u)
	key, err := rfc6238.DecodeSecret(e.Secret)
	if err != nil || len(key) < 16 {
		t.Fatalf("secret %q: %d bytes, %v; want base32 of at least 128 bits", e.Secret, len(key), err)
	}
	if !regexp.MustCompile(`^[A-Z2-7]+=*$`).MatchString(e.Secret) {
		t.Fatalf("secret %q is not base32", e.Secret)
	}
	ou, err := url.Parse(e.OtpauthURL)
	if err != nil || ou.Scheme != "otpauth" || ou.Host != "totp" {
		t.Fatalf("otpauth URL %q: %v", e.OtpauthURL, err)
	}
	if got := ou.Query().Get("secret"); got != e.Secret {
		t.Fatalf("otpauth URL secret %q, enrollment secret %q", got, e.Secret)
	}
	if label, _ := url.PathUnescape(strings.TrimPrefix(ou.Path, "/")); label != "acme:"+u.email {
		t.Fatalf("otpauth label %q, want acme:%s", label, u.email)
	}
	if q := ou.Query(); q.Get("issuer") != "acme" || (q.Get("digits") != "" && q.Get("digits") != "6") ||
		(q.Get("period") != "" && q.Get("period") != "30") || (q.Get("algorithm") != "" && q.Get("algorithm") != "SHA1") {
		t.Fatalf("otpauth parameters %v, want issuer acme, 6 digits, 30 s, SHA1", q)
	}
	png, err := base64.StdEncoding.DecodeString(e.QRPng)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("qrPng is not a base64 PNG: %v", err)
	}

	// Pending: not enabled yet, login still gives a session.
	if me, _ := f.svc.Me(f.pid, u.p.UserID); me.TOTPEnabled {
		t.Fatal("totpEnabled before confirm")
	}
	if st := f.storedTOTP(u); st.TOTP == nil || !strings.HasPrefix(st.TOTP.Pending, "v1.") || st.TOTP.Secret != "" {
		t.Fatalf("stored state after enroll: %s", f.accountJSON(u))
	}
	if res, err := f.svc.Login(bg, f.pid, u.email, u.password, addr); err != nil || res.RequiresTOTP || res.Token == "" {
		t.Fatalf("login while only pending: %+v %v", res, err)
	}

	_, err = f.svc.Confirm(bg, u.p, f.wrongCode(e.Secret))
	wantErr(t, "confirm with a wrong code", err, auth.ErrInvalidCode)
	for _, bad := range []string{"", "12345", "1234567", "abcdef", "12 34 5"} {
		_, err = f.svc.Confirm(bg, u.p, bad)
		wantErr(t, fmt.Sprintf("confirm with %q", bad), err, auth.ErrInvalidCode)
	}

	conf, err := f.svc.Confirm(bg, u.p, f.code(e.Secret, 0))
	if err != nil {
		t.Fatalf("confirm with the rfc6238 code: %v", err)
	}
	if !conf.TOTPEnabled || len(conf.RecoveryCodes) != 10 {
		t.Fatalf("confirmation %+v, want enabled with 10 recovery codes", conf)
	}
	seen := map[string]bool{}
	for _, c := range conf.RecoveryCodes {
		if !recoveryRE.MatchString(c) {
			t.Fatalf("recovery code %q is not 16 base32 characters as xxxx-xxxx-xxxx-xxxx", c)
		}
		if seen[c] {
			t.Fatalf("recovery code %q issued twice", c)
		}
		seen[c] = true
	}
	if me, err := f.svc.Me(f.pid, u.p.UserID); err != nil || !me.TOTPEnabled {
		t.Fatalf("me after confirm: %+v %v", me, err)
	}

	// At rest: sealed secret, hashed recovery codes, the current step.
	raw := f.accountJSON(u)
	st := f.storedTOTP(u)
	if !st.TOTPEnabled || st.TOTP == nil || !strings.HasPrefix(st.TOTP.Secret, "v1.") || st.TOTP.Pending != "" ||
		len(st.TOTP.Recovery) != 10 || st.TOTP.LastStep != rfc6238.Step(f.clk.Now()) {
		t.Fatalf("stored state after confirm: %s", raw)
	}
	lower := strings.ToLower(string(raw))
	if strings.Contains(lower, strings.ToLower(strings.TrimRight(e.Secret, "="))) {
		t.Fatalf("the base32 secret appears in the account JSON: %s", raw)
	}
	for _, c := range conf.RecoveryCodes {
		if strings.Contains(lower, strings.ReplaceAll(c, "-", "")) || strings.Contains(lower, c) {
			t.Fatalf("recovery code %s stored in clear: %s", c, raw)
		}
	}

	// Enabled: enroll and confirm refuse, login asks for the second factor.
	_, _, err = f.svc.Enroll(bg, u.p)
	wantErr(t, "enroll when enabled", err, auth.ErrTOTPEnabled)
	f.clk.Advance(30 * time.Second)
	_, err = f.svc.Confirm(bg, u.p, f.code(e.Secret, 0))
	wantErr(t, "confirm when enabled", err, auth.ErrTOTPEnabled)
	f.ticket(u)
}

func TestSecondEnrollReplacesPending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("bob")
	first := f.enroll(u)
	second := f.enroll(u)
	if first.Secret == second.Secret {
		t.Fatal("second enroll returned the same secret")
	}
	if f.code(first.Secret, 0) != f.code(second.Secret, 0) {
		_, err := f.svc.Confirm(bg, u.p, f.code(first.Secret, 0))
		wantErr(t, "confirm with the replaced secret's code", err, auth.ErrInvalidCode)
	}
	if _, err := f.svc.Confirm(bg, u.p, f.code(second.Secret, 0)); err != nil {
		t.Fatalf("confirm with the new secret: %v", err)
	}
}

// TestConfirmSkew: codes of the steps next to the current one are accepted,
// two steps away refused; checked at the start, middle and end of a step.
func TestConfirmSkew(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, within := range []time.Duration{0, 15 * time.Second, 29 * time.Second} {
		for _, off := range []int{-2, -1, 0, 1, 2} {
			u := f.register("skew")
			e := f.enroll(u)
			// A different code for the neighbouring steps, so a refusal is the
			// step's doing (re-enroll on a chance collision).
			for tries := 0; off != 0 && f.collides(e.Secret, off); tries++ {
				if tries > 5 {
					t.Fatal("codes keep colliding")
				}
				e = f.enroll(u)
			}
			at := f.clk.Now().Add(time.Duration(off) * 30 * time.Second)
			code, err := rfc6238.Authenticator(e.Secret, at)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.svc.Confirm(bg, u.p, code)
			if ok := off >= -1 && off <= 1; ok && err != nil {
				t.Errorf("%v into the step, code of step %+d refused: %v", within, off, err)
			} else if !ok && !errors.Is(err, auth.ErrInvalidCode) {
				t.Errorf("%v into the step, code of step %+d: %v, want ErrInvalidCode", within, off, err)
			}
			if err == nil {
				if st := f.storedTOTP(u); st.TOTP.LastStep != rfc6238.Step(at) {
					t.Errorf("lastStep %d, want the step of the code %d", st.TOTP.LastStep, rfc6238.Step(at))
				}
			}
		}
		// Move inside the same step (at 0, +15 s, +29 s of it).
		next := map[time.Duration]time.Duration{0: 15 * time.Second, 15 * time.Second: 14 * time.Second}
		f.clk.Advance(next[within])
	}
}

// collides reports whether the code of step off equals one of the codes the
// service accepts now.
func (f *fixture) collides(secret string, off int) bool {
	c := f.code(secret, off)
	for s := -1; s <= 1; s++ {
		if s != off && f.code(secret, s) == c {
			return true
		}
	}
	return false
}

// TestCodeReplayRefused: a code is accepted once; the code of an earlier
// step after a later one is refused; everywhere a code is taken.
func TestCodeReplayRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("replay")
	e := f.enroll(u)
	confirmCode := f.code(e.Secret, 0)
	if _, err := f.svc.Confirm(bg, u.p, confirmCode); err != nil {
		t.Fatal(err)
	}
	u.secret = e.Secret

	// The code that confirmed cannot log in (same step).
	tk := f.ticket(u)
	_, err := f.svc.LoginVerify(bg, f.pid, tk, confirmCode, addr)
	wantErr(t, "login-verify with the confirm code", err, auth.ErrInvalidCode)

	// The next step's code (within the skew) works once.
	next := f.code(u.secret, 1)
	if next == confirmCode {
		t.Skip("chance collision of two steps' codes")
	}
	res, err := f.svc.LoginVerify(bg, f.pid, tk, next, addr)
	if err != nil || !strings.HasPrefix(res.Token, "ebt_") || res.User.ID != u.p.UserID {
		t.Fatalf("login-verify with the next step's code: %+v %v", res, err)
	}
	if p, err := f.svc.Authenticate(res.Token); err != nil || p.UserID != u.p.UserID {
		t.Fatalf("session from login-verify: %+v %v", p, err)
	}
	_, err = f.svc.LoginVerify(bg, f.pid, tk, next, addr)
	wantErr(t, "used ticket", err, auth.ErrInvalidTicket)

	tk = f.ticket(u)
	_, err = f.svc.LoginVerify(bg, f.pid, tk, next, addr)
	wantErr(t, "replayed code on a new ticket", err, auth.ErrInvalidCode)
	// The current step is earlier than the one just used: refused too.
	_, err = f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantErr(t, "code of an earlier step after a later one", err, auth.ErrInvalidCode)
	_, err = f.svc.VerifyForReset(bg, f.pid, u.email, next, addr)
	wantErr(t, "verify with a used code", err, auth.ErrInvalidCode)
	_, _, err = f.svc.DisableTOTP(bg, u.p, next, addr)
	wantErr(t, "disable-totp with a used code", err, auth.ErrInvalidCode)

	// One step later: the used code is the current one, still refused; the
	// following step's code works, through verify this time.
	f.clk.Advance(30 * time.Second)
	_, err = f.svc.LoginVerify(bg, f.pid, tk, next, addr)
	wantErr(t, "used code once it is current", err, auth.ErrInvalidCode)
	later := f.code(u.secret, 1)
	vr, err := f.svc.VerifyForReset(bg, f.pid, u.email, later, addr)
	if err != nil || !strings.HasPrefix(vr.VerifyToken, "ebv_") || vr.ExpiresIn != 600 {
		t.Fatalf("verify with a fresh code: %+v %v", vr, err)
	}
	if st := f.storedTOTP(u); st.TOTP.LastStep != rfc6238.Step(f.clk.Now())+1 {
		t.Fatalf("lastStep %d, want %d", st.TOTP.LastStep, rfc6238.Step(f.clk.Now())+1)
	}
	_, err = f.svc.LoginVerify(bg, f.pid, tk, later, addr)
	wantErr(t, "login-verify with the code verify used", err, auth.ErrInvalidCode)
	// The ticket has 4 failures now; a fresh step's code still works.
	f.clk.Advance(60 * time.Second)
	if _, err := f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("login-verify with a fresh code after 4 failures: %v", err)
	}
}

func TestRecoveryCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("rec")
	f.enableTOTP(u)
	rc := u.recovery

	// Dashes, spaces and case are ignored.
	variant := strings.ToUpper(strings.ReplaceAll(rc[0], "-", " "))
	res, err := f.svc.LoginVerify(bg, f.pid, f.ticket(u), variant, addr)
	if err != nil || res.Token == "" {
		t.Fatalf("login-verify with recovery code %q: %+v %v", variant, res, err)
	}
	if n := len(f.storedTOTP(u).TOTP.Recovery); n != 9 {
		t.Fatalf("%d stored recovery codes after one use, want 9", n)
	}
	// Used once, in any spelling, anywhere.
	tk := f.ticket(u)
	for _, again := range []string{rc[0], strings.ReplaceAll(rc[0], "-", ""), strings.ToUpper(rc[0])} {
		_, err = f.svc.LoginVerify(bg, f.pid, tk, again, addr)
		wantErr(t, "reused recovery code "+again, err, auth.ErrInvalidCode)
	}
	_, err = f.svc.VerifyForReset(bg, f.pid, u.email, rc[0], addr)
	wantErr(t, "reused recovery code in verify", err, auth.ErrInvalidCode)

	// Other spellings of the other codes work, once, wherever a code goes.
	vr, err := f.svc.VerifyForReset(bg, f.pid, u.email, " "+strings.ReplaceAll(rc[1], "-", "")+" ", addr)
	if err != nil || vr.VerifyToken == "" {
		t.Fatalf("verify with recovery code: %+v %v", vr, err)
	}
	_, err = f.svc.VerifyForReset(bg, f.pid, u.email, rc[1], addr)
	wantErr(t, "recovery code used by verify, again", err, auth.ErrInvalidCode)
	// A near miss (one character changed) is not a recovery code.
	miss := []byte(rc[2])
	miss[0] = map[bool]byte{true: 'b', false: 'a'}[miss[0] == 'a']
	_, _, err = f.svc.DisableTOTP(bg, u.p, string(miss), addr)
	wantErr(t, "near-miss recovery code", err, auth.ErrInvalidCode)
	if n := len(f.storedTOTP(u).TOTP.Recovery); n != 8 {
		t.Fatalf("%d stored recovery codes after two uses, want 8", n)
	}
	usr, _, err := f.svc.DisableTOTP(bg, u.p, strings.ToUpper(rc[2]), addr)
	if err != nil || usr.TOTPEnabled {
		t.Fatalf("disable-totp with recovery code: %+v %v", usr, err)
	}
	if st := f.storedTOTP(u); st.TOTPEnabled || st.TOTP != nil {
		t.Fatalf("stored state after disable: %s", f.accountJSON(u))
	}
	_, _, err = f.svc.DisableTOTP(bg, u.p, rc[3], addr)
	wantErr(t, "disable when not enabled", err, auth.ErrTOTPNotEnabled)
	// Off again: login gives a session at once.
	if lr, err := f.svc.Login(bg, f.pid, u.email, u.password, addr); err != nil || lr.RequiresTOTP || lr.Token == "" {
		t.Fatalf("login after disable: %+v %v", lr, err)
	}
}

func TestDisableTOTPWithCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("dis")
	f.enableTOTP(u)
	_, _, err := f.svc.DisableTOTP(bg, u.p, f.wrongCode(u.secret), addr)
	wantErr(t, "disable with a wrong code", err, auth.ErrInvalidCode)
	if me, _ := f.svc.Me(f.pid, u.p.UserID); !me.TOTPEnabled {
		t.Fatal("a wrong code disabled TOTP")
	}
	usr, _, err := f.svc.DisableTOTP(bg, u.p, f.code(u.secret, 0), addr)
	if err != nil || usr.TOTPEnabled {
		t.Fatalf("disable with the current code: %+v %v", usr, err)
	}
	// Enabling again makes a new secret and new recovery codes; the old
	// recovery codes are dead.
	old := u.recovery
	f.enableTOTP(u)
	_, err = f.svc.LoginVerify(bg, f.pid, f.ticket(u), old[5], addr)
	wantErr(t, "recovery code of the previous enrollment", err, auth.ErrInvalidCode)
}

// TestLoginVerifyTicketVoidAfterFiveFailures: the fifth wrong code voids the
// ticket (the right code is then refused), four do not.
func TestLoginVerifyTicketVoidAfterFiveFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{}) // no rate limits: 14 wrong codes below
	u := f.register("five")
	f.enableTOTP(u)

	tk := f.ticket(u)
	for i := 1; i <= 4; i++ {
		_, err := f.svc.LoginVerify(bg, f.pid, tk, f.wrongCode(u.secret), addr)
		wantErr(t, fmt.Sprintf("wrong code %d", i), err, auth.ErrInvalidCode)
	}
	if _, err := f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("right code after 4 wrong ones: %v", err)
	}

	f.clk.Advance(30 * time.Second)
	tk = f.ticket(u)
	for i := 1; i <= 5; i++ {
		_, err := f.svc.LoginVerify(bg, f.pid, tk, f.wrongCode(u.secret), addr)
		wantErr(t, fmt.Sprintf("wrong code %d", i), err, auth.ErrInvalidCode)
	}
	_, err := f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantErr(t, "right code on a ticket void after 5 wrong ones", err, auth.ErrInvalidTicket)
	// Malformed codes count as wrong too.
	tk = f.ticket(u)
	for i, bad := range []string{"", "12345", "abcdefgh", "1234567", "!!!!!!"} {
		_, err := f.svc.LoginVerify(bg, f.pid, tk, bad, addr)
		wantErr(t, fmt.Sprintf("malformed code %d %q", i, bad), err, auth.ErrInvalidCode)
	}
	_, err = f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantErr(t, "ticket void after 5 malformed codes", err, auth.ErrInvalidTicket)
	// The code was not spent by the refused attempt.
	if _, err := f.svc.LoginVerify(bg, f.pid, f.ticket(u), f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("fresh ticket, same code: %v", err)
	}
}

// TestLoginVerifyTicketExpiry: a ticket lasts exactly five minutes.
func TestLoginVerifyTicketExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("exp")
	f.enableTOTP(u)
	a, b := f.ticket(u), f.ticket(u)
	f.clk.Advance(5*time.Minute - time.Second)
	if _, err := f.svc.LoginVerify(bg, f.pid, a, f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("ticket at 4m59s: %v", err)
	}
	f.clk.Advance(time.Second)
	_, err := f.svc.LoginVerify(bg, f.pid, b, f.code(u.secret, 0), addr)
	wantErr(t, "ticket at 5m", err, auth.ErrInvalidTicket)
	// Sub-second: a ticket issued half a second into a second still ends at
	// most five minutes later.
	f.clk.Advance(500 * time.Millisecond)
	c := f.ticket(u)
	f.clk.Advance(5 * time.Minute)
	_, err = f.svc.LoginVerify(bg, f.pid, c, f.code(u.secret, 0), addr)
	wantErr(t, "ticket 5m after issue (issued mid-second)", err, auth.ErrInvalidTicket)
}

func TestLoginVerifyTicketRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("tick")
	f.enableTOTP(u)

	for _, bogus := range []string{"", "ebl_nope", "ebt_" + strings.Repeat("A", 43)} {
		_, err := f.svc.LoginVerify(bg, f.pid, bogus, f.code(u.secret, 0), addr)
		wantErr(t, fmt.Sprintf("ticket %q", bogus), err, auth.ErrInvalidTicket)
	}
	// A ticket of this project is not valid in another.
	other := f.newProject("other")
	_, err := f.svc.LoginVerify(bg, other, f.ticket(u), f.code(u.secret, 0), addr)
	wantErr(t, "ticket used in another project", err, auth.ErrInvalidTicket)

	// A ticket from before a password change is void.
	tk := f.ticket(u)
	if _, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr); err != nil {
		t.Fatal(err)
	}
	u.password = newPassword
	_, err = f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantErr(t, "ticket from before a password change", err, auth.ErrInvalidTicket)
	// A ticket issued after it works.
	if _, err := f.svc.LoginVerify(bg, f.pid, f.ticket(u), f.code(u.secret, 0), addr); err != nil {
		t.Fatalf("ticket after the password change: %v", err)
	}

	// A ticket of an account whose TOTP was disabled meanwhile is void.
	f.clk.Advance(30 * time.Second)
	tk = f.ticket(u)
	if _, _, err := f.svc.DisableTOTP(bg, u.p, f.code(u.secret, 0), addr); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.LoginVerify(bg, f.pid, tk, u.recovery[0], addr)
	wantErr(t, "ticket after TOTP was disabled", err, auth.ErrInvalidTicket)
}

func TestTOTPWithoutSecretKey(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{NoSecretKey: true})
	svc := c.Nodes[0].Node.Accounts
	p, err := svc.CreateProject(bg, "nokey", ownerEmail, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Register(bg, p.ProjectID, "x@example.com", testPassword, "x", "")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := svc.Authenticate(res.Token)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.Enroll(bg, pr)
	wantErr(t, "enroll without a key", err, auth.ErrNoSecretKey)
	_, err = svc.Confirm(bg, pr, "123456")
	wantErr(t, "confirm without a key", err, auth.ErrNoSecretKey)
	// Everything else works; an account without TOTP cannot verify.
	if lr, err := svc.Login(bg, p.ProjectID, "x@example.com", testPassword, addr); err != nil || lr.Token == "" {
		t.Fatalf("login without a key: %+v %v", lr, err)
	}
	_, err = svc.VerifyForReset(bg, p.ProjectID, "x@example.com", "123456", addr)
	wantErr(t, "verify without TOTP", err, auth.ErrInvalidCode)
}

// TestConcurrentUseOfOneCode: one code raced through several tickets and
// verify calls at once is accepted exactly once (the last step is committed
// state, checked by compare-and-set).
func TestConcurrentUseOfOneCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{})
	u := f.register("race")
	f.enableTOTP(u)
	const n = 6
	tickets := make([]string, n)
	for i := range tickets {
		tickets[i] = f.ticket(u)
	}
	c := f.code(u.secret, 0)
	errs := make(chan error, 2*n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		go func(tk string) {
			<-start
			_, err := f.svc.LoginVerify(bg, f.pid, tk, c, addr)
			errs <- err
		}(tickets[i])
		go func() {
			<-start
			_, err := f.svc.VerifyForReset(bg, f.pid, u.email, c, addr)
			errs <- err
		}()
	}
	close(start)
	ok := 0
	for i := 0; i < 2*n; i++ {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, auth.ErrInvalidCode):
			t.Errorf("concurrent use: %v, want success or ErrInvalidCode", err)
		}
	}
	if ok != 1 {
		t.Fatalf("one code was accepted %d times by %d concurrent attempts", ok, 2*n)
	}
}
