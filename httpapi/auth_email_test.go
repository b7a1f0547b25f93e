package httpapi_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/node/nodetest"
)

// The email-code actions, anonymous sign-in, linking, deletion and the auth
// settings through HTTP. Codes are read from the emails the node queued (the
// committed outbox, opened with the cluster key as the sender opens it):
// these nodes have no SMTP server, so the emails stay queued.

var emailCodeRE = regexp.MustCompile(`\b[0-9]{6}\b`)

// mailCode waits until member i holds an email of kind to address to that
// was not in seen, and returns the code in it and its text.
func (e *env) mailCode(t *testing.T, i int, to string, kind auth.EmailKind, seen int) (code, text string) {
	t.Helper()
	n := e.c.Nodes[i].Node
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var texts []string
		after := ""
		for {
			docs, next, err := n.Store.List(keys.MailOutboxDir(), after, 500)
			if err != nil {
				return err
			}
			for _, d := range docs {
				rec, err := mail.DecodeRecord(d)
				if err != nil {
					return err
				}
				if rec.ProjectID != e.p.ID || rec.To != auth.NormalizeEmail(to) || rec.Kind != string(kind) {
					continue
				}
				c, err := n.Accounts.OpenMail(rec)
				if err != nil {
					return err
				}
				texts = append(texts, c.Text)
			}
			if next == "" {
				break
			}
			after = next
		}
		if len(texts) <= seen {
			return fmt.Errorf("%d %s emails to %s, waiting for #%d", len(texts), kind, to, seen+1)
		}
		text = texts[len(texts)-1]
		code = emailCodeRE.FindString(text)
		if code == "" {
			return fmt.Errorf("no code in %q", text)
		}
		return nil
	})
	return code, text
}

// wrongCodeFor is a well-formed code other than code.
func wrongCodeFor(code string) string {
	if code == "111111" {
		return "222222"
	}
	return "111111"
}

func TestEmailActionsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user
	call := func(tok, body string) reply { return e.authCall(t, tok, body) }
	for _, c := range []struct {
		name, tok, body string
		status          int
		code, field     string
	}{
		{"verify-email without fields", "", `{"action":"verify-email"}`, 400, "invalid_argument", "email"},
		{"verify-email without code", "", `{"action":"verify-email","email":"a@example.com"}`, 400, "invalid_argument", "code"},
		{"verify-email bad email", "", `{"action":"verify-email","email":"nope","code":"123456"}`, 400, "invalid_argument", "email"},
		{"verify-email code not a string", "", `{"action":"verify-email","email":"a@example.com","code":123456}`, 400, "invalid_argument", "code"},
		{"verify-email no code sent", "", `{"action":"verify-email","email":"` + u.Email + `","code":"123456"}`, 400, "invalid_code", "code"},
		{"verify-email unknown token", "", `{"action":"verify-email","token":"ebe_nothing"}`, 400, "invalid_code", "token"},
		{"verify-email code and token", "", `{"action":"verify-email","email":"a@example.com","code":"123456","token":"ebe_x"}`, 400, "invalid_argument", "code"},
		{"request-password-reset without email", "", `{"action":"request-password-reset"}`, 400, "invalid_argument", "email"},
		{"request-password-reset bad email", "", `{"action":"request-password-reset","email":"a b@example.com"}`, 400, "invalid_argument", "email"},
		{"request-password-reset email not a string", "", `{"action":"request-password-reset","email":["a@example.com"]}`, 400, "invalid_argument", "email"},
		{"request-email-code without email", "", `{"action":"request-email-code"}`, 400, "invalid_argument", "email"},
		{"login-email-code without code", "", `{"action":"login-email-code","email":"a@example.com"}`, 400, "invalid_argument", "code"},
		{"login-email-code unknown email", "", `{"action":"login-email-code","email":"nobody@example.com","code":"123456"}`, 400, "invalid_code", "code"},
		{"reset-password emailCode and verifyToken", "", `{"action":"reset-password","email":"` + u.Email + `","emailCode":"123456","verifyToken":"ebv_x","newPassword":"a fine new passphrase"}`, 400, "invalid_argument", "emailCode"},
		{"reset-password emailCode without newPassword", "", `{"action":"reset-password","email":"` + u.Email + `","emailCode":"123456"}`, 400, "invalid_argument", "newPassword"},
		{"reset-password emailCode without email", "", `{"action":"reset-password","emailCode":"123456","newPassword":"a fine new passphrase"}`, 400, "invalid_argument", "email"},
		{"reset-password weak password", "", `{"action":"reset-password","email":"` + u.Email + `","emailCode":"123456","newPassword":"short"}`, 400, "invalid_argument", "newPassword"},
		{"reset-password wrong emailCode", "", `{"action":"reset-password","email":"` + u.Email + `","emailCode":"123456","newPassword":"a fine new passphrase"}`, 400, "invalid_code", "emailCode"},
		{"send-verification without a token", "", `{"action":"send-verification"}`, 401, "missing_token", ""},
		{"send-verification bad token", "ebt_nope", `{"action":"send-verification"}`, 401, "invalid_token", ""},
		{"change-email without newEmail", u.Token, `{"action":"change-email"}`, 400, "invalid_argument", "newEmail"},
		{"change-email bad newEmail", u.Token, `{"action":"change-email","newEmail":"nope"}`, 400, "invalid_argument", "newEmail"},
		{"change-email taken", u.Token, `{"action":"change-email","newEmail":"` + e.other.Email + `"}`, 409, "email_taken", "newEmail"},
		{"change-email own address", u.Token, `{"action":"change-email","newEmail":"` + u.Email + `"}`, 400, "invalid_argument", "newEmail"},
		{"change-email code never sent", u.Token, `{"action":"change-email","newEmail":"new@example.com","code":"123456"}`, 400, "invalid_code", "code"},
		{"change-email code without newEmail", u.Token, `{"action":"change-email","code":"123456"}`, 400, "invalid_argument", "newEmail"},
		{"delete-account without a token", "", `{"action":"delete-account"}`, 401, "missing_token", ""},
		{"link-email not anonymous", u.Token, `{"action":"link-email","email":"x@example.com","password":"a fine passphrase"}`, 409, "already_linked", ""},
		{"link-email without password", u.Token, `{"action":"link-email","email":"x@example.com"}`, 400, "invalid_argument", "password"},
		{"link-email without a token", "", `{"action":"link-email","email":"x@example.com","password":"a fine passphrase"}`, 401, "missing_token", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkError(t, call(c.tok, c.body), c.status, c.code, c.field)
		})
	}
	// Nothing was changed by the refusals: both accounts log in as before,
	// nobody is verified, nothing was queued.
	for _, a := range []account{e.user, e.other} {
		r := e.login(t, e.p, a.Email, userPassword)
		if r.Status != http.StatusOK {
			t.Fatalf("login %s after the refusals: %d %s", a.Email, r.Status, r.Body)
		}
		if st, me := e.me(t, a.Token); st != http.StatusOK || me["emailVerified"] != false {
			t.Fatalf("me %s: %d %v", a.Email, st, me)
		}
	}
	if n, err := e.c.Nodes[0].Node.Store.CountPrefix(keys.Under(keys.MailOutboxDir())); err != nil || n != 0 {
		t.Fatalf("refusals queued %d emails (%v)", n, err)
	}
}

func TestAuthSettingsRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const path = "/api/auth/settings"
	owner := projectHeaders(e.p, e.p.OwnerToken)
	get := func() map[string]any {
		r := e.mustSend(t, http.MethodGet, path, owner, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET settings: %d %s", r.Status, r.Body)
		}
		var out map[string]any
		mustDecode(t, r.Body, &out)
		return out
	}
	if got := get(); got["anonymousSignIn"] != true || got["emailActionUrl"] != "" {
		t.Fatalf("defaults: %v", got)
	}
	for _, c := range []struct {
		name, method string
		headers      map[string]string
		body         string
		status       int
		code, field  string
	}{
		{"a user reads", http.MethodGet, projectHeaders(e.p, e.user.Token), "", 403, "forbidden", ""},
		{"a user writes", http.MethodPut, projectHeaders(e.p, e.user.Token), `{"anonymousSignIn":false}`, 403, "forbidden", ""},
		{"no token", http.MethodGet, projectHeaders(e.p, ""), "", 401, "missing_token", ""},
		{"no API key", http.MethodGet, map[string]string{"Authorization": "Bearer " + e.p.OwnerToken}, "", 401, "missing_api_key", ""},
		{"http URL", http.MethodPut, owner, `{"emailActionUrl":"http://app.example.com/a"}`, 400, "invalid_argument", "emailActionUrl"},
		{"URL with a query", http.MethodPut, owner, `{"emailActionUrl":"https://app.example.com/a?x=1"}`, 400, "invalid_argument", "emailActionUrl"},
		{"not a URL", http.MethodPut, owner, `{"emailActionUrl":"app"}`, 400, "invalid_argument", "emailActionUrl"},
		{"wrong type", http.MethodPut, owner, `{"anonymousSignIn":"no"}`, 400, "invalid_argument", "anonymousSignIn"},
		{"not JSON", http.MethodPut, owner, `{"anonymousSignIn":`, 400, "invalid_json", ""},
		{"DELETE", http.MethodDelete, owner, "", 405, "method_not_allowed", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkError(t, e.mustSend(t, c.method, path, c.headers, c.body), c.status, c.code, c.field)
		})
	}
	if got := get(); got["anonymousSignIn"] != true || got["emailActionUrl"] != "" {
		t.Fatalf("refused changes changed the settings: %v", got)
	}
	r := e.mustSend(t, http.MethodPut, path, owner, `{"emailActionUrl":"https://app.example.com/act"}`)
	if r.Status != http.StatusOK || r.Header.Get("X-Revision") == "" {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	r = e.mustSend(t, http.MethodPut, path, owner, `{"anonymousSignIn":false}`)
	var st map[string]any
	mustDecode(t, r.Body, &st)
	if st["anonymousSignIn"] != false || st["emailActionUrl"] != "https://app.example.com/act" {
		t.Fatalf("PUT a subset: %v", st)
	}
	checkError(t, e.authCall(t, "", `{"action":"sign-in-anonymously"}`), 403, "anonymous_disabled", "")
}

// The requests that send a code answer byte for byte alike (but the
// revision) whether or not the address has an account.
func TestEmailRequestsAnswerAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, action := range []string{"request-password-reset", "request-email-code"} {
		var answers []reply
		for _, email := range []string{e.user.Email, "nobody-" + e.uniq() + "@example.com"} {
			r := e.authCall(t, "", fmt.Sprintf(`{"action":%q,"email":%q}`, action, email))
			if r.Status != http.StatusOK || r.Header.Get("X-Revision") == "" {
				t.Fatalf("%s %s: %d %s", action, email, r.Status, r.Body)
			}
			answers = append(answers, r)
		}
		a, b := answers[0], answers[1]
		if string(a.Body) != string(b.Body) || string(a.Body) != `{"ok":true}`+"\n" && string(a.Body) != `{"ok":true}` {
			t.Errorf("%s: bodies differ or are not {\"ok\":true}: %q / %q", action, a.Body, b.Body)
		}
		ha, hb := headerNames(a.Header), headerNames(b.Header)
		if !slices.Equal(ha, hb) {
			t.Errorf("%s: headers differ: %v / %v", action, ha, hb)
		}
	}
}

func headerNames(h http.Header) []string {
	var out []string
	for k := range h {
		if k != "Date" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// The code flows through HTTP with a test clock: wrong codes void a code at
// the fifth, a used code is refused, an expired one too, and a verification
// reaches me.
func TestEmailCodeFlowsHTTP(t *testing.T) {
	t.Parallel()
	clk := nodetest.NewClock(time.Now())
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk})
	u := e.user

	// Verify: send-verification, a wrong code, the right one, a replay.
	r := e.authCall(t, u.Token, `{"action":"send-verification"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("send-verification: %d %s", r.Status, r.Body)
	}
	code, _ := e.mailCode(t, 0, u.Email, auth.EmailVerification, 0)
	verify := func(c string) reply {
		return e.authCall(t, "", fmt.Sprintf(`{"action":"verify-email","email":%q,"code":%q}`, u.Email, c))
	}
	checkError(t, verify(wrongCodeFor(code)), 400, "invalid_code", "code")
	r = verify(code)
	var out struct{ User auth.User }
	mustDecode(t, r.Body, &out)
	if r.Status != http.StatusOK || !out.User.EmailVerified || out.User.ID != u.ID {
		t.Fatalf("verify-email: %d %s", r.Status, r.Body)
	}
	checkError(t, verify(code), 400, "invalid_code", "code")
	r = e.authCall(t, u.Token, `{"action":"send-verification"}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"alreadyVerified":true`) {
		t.Fatalf("send-verification when verified: %d %s", r.Status, r.Body)
	}

	// Reset: five wrong codes void the code; the right one then fails.
	reset := func(c string) reply {
		return e.authCall(t, "", fmt.Sprintf(`{"action":"reset-password","email":%q,"emailCode":%q,"newPassword":"a brand new passphrase"}`, u.Email, c))
	}
	e.authCall(t, "", fmt.Sprintf(`{"action":"request-password-reset","email":%q}`, u.Email))
	code, _ = e.mailCode(t, 0, u.Email, auth.EmailPasswordReset, 0)
	for i := 0; i < auth.MaxEmailCodeFailures; i++ {
		checkError(t, reset(wrongCodeFor(code)), 400, "invalid_code", "emailCode")
	}
	checkError(t, reset(code), 400, "invalid_code", "emailCode")
	if r := e.login(t, e.p, u.Email, userPassword); r.Status != http.StatusOK {
		t.Fatalf("the password changed after a void code: %d %s", r.Status, r.Body)
	}

	// Expired: a new code, the clock past its ten minutes.
	e.authCall(t, "", fmt.Sprintf(`{"action":"request-password-reset","email":%q}`, u.Email))
	code, _ = e.mailCode(t, 0, u.Email, auth.EmailPasswordReset, 1)
	clk.Advance(auth.EmailCodeTTL + time.Second)
	checkError(t, reset(code), 400, "invalid_code", "emailCode")

	// A fresh one works once; every session ends.
	e.authCall(t, "", fmt.Sprintf(`{"action":"request-password-reset","email":%q}`, u.Email))
	code, _ = e.mailCode(t, 0, u.Email, auth.EmailPasswordReset, 2)
	if r := reset(code); r.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	checkError(t, reset(code), 400, "invalid_code", "emailCode")
	if st, _ := e.me(t, u.Token); st != http.StatusUnauthorized {
		t.Fatalf("the old session after the reset: %d", st)
	}
	if r := e.login(t, e.p, u.Email, "a brand new passphrase"); r.Status != http.StatusOK {
		t.Fatalf("login with the new password: %d %s", r.Status, r.Body)
	}

	// Passwordless: a code, a session.
	e.authCall(t, "", fmt.Sprintf(`{"action":"request-email-code","email":%q}`, e.other.Email))
	code, _ = e.mailCode(t, 0, e.other.Email, auth.EmailSignInCode, 0)
	r = e.authCall(t, "", fmt.Sprintf(`{"action":"login-email-code","email":%q,"code":%q}`, e.other.Email, code))
	var lr struct {
		RequiresTotp bool
		Token        string
		User         auth.User
	}
	mustDecode(t, r.Body, &lr)
	if r.Status != http.StatusOK || lr.RequiresTotp || lr.Token == "" || !lr.User.EmailVerified {
		t.Fatalf("login-email-code: %d %s", r.Status, r.Body)
	}
}

// Anonymous sign-in, a document, link-email (same uid, the document kept),
// then delete-account removes it all and frees the email.
func TestAnonymousLinkAndDeleteHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.authCall(t, "", `{"action":"sign-in-anonymously"}`)
	var anon struct {
		Token string
		User  auth.User
	}
	mustDecode(t, r.Body, &anon)
	if r.Status != http.StatusCreated || !anon.User.Anonymous || anon.User.Email != "" || anon.Token == "" {
		t.Fatalf("sign-in-anonymously: %d %s", r.Status, r.Body)
	}
	path := "users/" + anon.User.ID + "/notes/n1"
	e.mustPut(t, anon.Token, path, `{"text":"mine"}`)
	checkError(t, e.authCall(t, anon.Token, `{"action":"send-verification"}`), 409, "no_email", "")
	checkError(t, e.authCall(t, anon.Token, `{"action":"link-email","email":"`+e.other.Email+`","password":"a fine passphrase"}`), 409, "email_taken", "email")

	email := e.uniq() + "@example.com"
	r = e.authCall(t, anon.Token, fmt.Sprintf(`{"action":"link-email","email":%q,"password":"a fine passphrase"}`, email))
	var linked struct {
		Token string
		User  auth.User
	}
	mustDecode(t, r.Body, &linked)
	if r.Status != http.StatusOK || linked.User.ID != anon.User.ID || linked.User.Anonymous || linked.User.Email != email {
		t.Fatalf("link-email: %d %s", r.Status, r.Body)
	}
	checkError(t, e.authCall(t, linked.Token, fmt.Sprintf(`{"action":"link-email","email":"z%s","password":"a fine passphrase"}`, email)), 409, "already_linked", "")
	if _, ok := e.get(t, path); !ok {
		t.Fatal("the document is gone after linking")
	}

	r = e.authCall(t, linked.Token, `{"action":"delete-account"}`)
	if r.Status != http.StatusOK || string(r.Body) != `{"deleted":true,"ok":true}`+"\n" && string(r.Body) != `{"deleted":true,"ok":true}` {
		t.Fatalf("delete-account: %d %q", r.Status, r.Body)
	}
	if st, _ := e.me(t, linked.Token); st != http.StatusUnauthorized {
		t.Fatalf("the deleted account's session: %d", st)
	}
	if _, ok := e.get(t, path); ok {
		t.Fatal("the deleted user's document is still there")
	}
	if r := e.login(t, e.p, email, "a fine passphrase"); r.Status != http.StatusUnauthorized {
		t.Fatalf("login of the deleted account: %d %s", r.Status, r.Body)
	}
	a := e.mustRegister(t, e.p, email)
	if a.ID == anon.User.ID {
		t.Fatal("the new account got the old id")
	}
	// The project's only owner cannot delete itself.
	checkError(t, e.authCall(t, e.p.OwnerToken, `{"action":"delete-account"}`), 409, "last_owner", "")
}

// On a 3-node cluster: a code asked through one node is redeemed through
// another, and a deletion through a third ends the session on every node at
// once (each read strong).
func TestEmailCodesOnACluster(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	e := &env{c: c, base: c.Nodes[0].URL(), p: c.CreateProject(0)}
	u := e.mustRegister(t, e.p, "")
	at := func(i int) *env {
		return &env{c: c, base: c.Nodes[i].URL(), p: e.p, user: u}
	}
	if r := at(1).authCall(t, "", fmt.Sprintf(`{"action":"request-email-code","email":%q}`, u.Email)); r.Status != http.StatusOK {
		t.Fatalf("request on node 1: %d %s", r.Status, r.Body)
	}
	code, _ := e.mailCode(t, 2, u.Email, auth.EmailSignInCode, 0)
	r := at(2).authCall(t, "", fmt.Sprintf(`{"action":"login-email-code","email":%q,"code":%q}`, u.Email, code))
	var lr struct{ Token string }
	mustDecode(t, r.Body, &lr)
	if r.Status != http.StatusOK || lr.Token == "" {
		t.Fatalf("login-email-code on node 2: %d %s", r.Status, r.Body)
	}
	// The code is used up everywhere.
	checkError(t, at(0).authCall(t, "", fmt.Sprintf(`{"action":"login-email-code","email":%q,"code":%q}`, u.Email, code)), 400, "invalid_code", "code")

	r = at(0).authCall(t, lr.Token, `{"action":"delete-account"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("delete-account on node 0: %d %s", r.Status, r.Body)
	}
	for i := range c.Nodes {
		if st, _ := at(i).me(t, lr.Token); st != http.StatusUnauthorized {
			t.Errorf("node %d: the deleted account's session answers %d", i, st)
		}
		if st, _ := at(i).me(t, u.Token); st != http.StatusUnauthorized {
			t.Errorf("node %d: the deleted account's first session answers %d", i, st)
		}
	}
}
