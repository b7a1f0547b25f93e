package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/smtptest"
)

// accountAnswer is the part of an /api/auth answer the email tests read.
type accountAnswer struct {
	OK              bool   `json:"ok"`
	AlreadyVerified bool   `json:"alreadyVerified"`
	CodeSent        bool   `json:"codeSent"`
	Deleted         bool   `json:"deleted"`
	Token           string `json:"token"`
	RequiresTotp    bool   `json:"requiresTotp"`
	LoginTicket     string `json:"loginTicket"`
	Secret          string `json:"secret"`
	TotpEnabled     bool   `json:"totpEnabled"`
	User            struct {
		ID            string `json:"id"`
		Email         string `json:"email"`
		EmailVerified bool   `json:"emailVerified"`
		Anonymous     bool   `json:"anonymous"`
	} `json:"user"`
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

// act posts an /api/auth action (or another auth path) to p and fails the
// test unless the answer has status (and, when set, the error code).
func act(t *testing.T, c *cluster, p *proc, pr project, path, tok string, body map[string]string, status int, code string) accountAnswer {
	t.Helper()
	h := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	var b any
	if body != nil {
		b = body
	}
	r, err := doJSON(c.ctx, httpClient, 30*time.Second, http.MethodPost, p.url()+path, h, b)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", path, body["action"], p.id, err)
	}
	var a accountAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%s %s on %s: decode %s: %v", path, body["action"], p.id, r, err)
	}
	if r.status != status || (code != "" && a.Error.Code != code) {
		t.Fatalf("%s %s on %s: %s; want %d %s", path, body["action"], p.id, r, status, code)
	}
	return a
}

// mailbox reads the codes the cluster's leader delivered to the test's SMTP
// server.
type mailbox struct {
	t   *testing.T
	srv *smtptest.Server
}

// next waits for a message to `to` whose subject contains subject, beyond
// the first `seen` such messages, and returns its code and the count so far.
// The outbox is at-least-once: a duplicate of an earlier message may come
// too, so the newest one is taken.
func (m mailbox) next(to, subject string, seen int) (code string, count int) {
	m.t.Helper()
	checkFor(m.t, 60*time.Second, 50*time.Millisecond, func() error {
		var got []*smtptest.Message
		for _, msg := range m.srv.To(to) {
			if strings.Contains(msg.Subject, subject) {
				got = append(got, msg)
			}
		}
		if len(got) <= seen {
			return fmt.Errorf("%d messages %q to %s, waiting for more than %d", len(got), subject, to, seen)
		}
		code, count = smtptest.Code(got[len(got)-1]), len(got)
		if code == "" {
			return fmt.Errorf("no code in %q", got[len(got)-1].Text)
		}
		return nil
	})
	return code, count
}

// TestAccountsEmailAcrossProcesses runs three edgebase processes whose
// operator SMTP server is a real SMTP server in the test: every code is read
// from the email the leader delivered, asked through one node and used
// through another. Verification, reset by email code, passwordless sign-in
// with the second factor through login-verify, a change of address,
// deletion (the data gone, the email free again) and an anonymous user who
// links an email and keeps uid and documents.
func TestAccountsEmailAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	srv := smtptest.Start(t)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{
		"EDGEBASE_SECRET_KEY_FILE=" + keyFile,
		"EDGEBASE_SMTP_HOST=" + srv.Host(),
		"EDGEBASE_SMTP_PORT=" + strconv.Itoa(srv.Port()),
		"EDGEBASE_SMTP_SECURITY=none",
		"EDGEBASE_SMTP_FROM=noreply@example.com",
		"EDGEBASE_ALLOW_PRIVATE_HOSTS=" + srv.Host(),
	}})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	pr := c.mustCreateProject(n1)
	box := mailbox{t: t, srv: srv}
	const auth = "/api/auth"

	const email, password = "ada@example.com", "a long process password"
	reg := act(t, c, n1, pr, auth, "", map[string]string{"action": "register", "email": email, "password": password}, http.StatusCreated, "")
	uid := reg.User.ID

	// Verification: asked through n2, the code used through n3.
	act(t, c, n2, pr, auth, reg.Token, map[string]string{"action": "send-verification"}, http.StatusOK, "")
	code, _ := box.next(email, "Verify", 0)
	v := act(t, c, n3, pr, auth, "", map[string]string{"action": "verify-email", "email": email, "code": code}, http.StatusOK, "")
	if !v.User.EmailVerified || v.User.ID != uid {
		t.Fatalf("verify-email: %+v", v.User)
	}
	act(t, c, n1, pr, auth, "", map[string]string{"action": "verify-email", "email": email, "code": code}, http.StatusBadRequest, "invalid_code")
	if a := act(t, c, n1, pr, auth, reg.Token, map[string]string{"action": "send-verification"}, http.StatusOK, ""); !a.AlreadyVerified {
		t.Fatal("send-verification after verifying: not alreadyVerified")
	}

	// Reset by email code: asked through n1, used through n2; every session
	// ends on every node; the new password works through n3.
	act(t, c, n1, pr, auth, "", map[string]string{"action": "request-password-reset", "email": email}, http.StatusOK, "")
	code, _ = box.next(email, "Reset", 0)
	const password2 = "a second process password"
	act(t, c, n2, pr, auth, "", map[string]string{"action": "reset-password", "email": email, "emailCode": code, "newPassword": password2}, http.StatusOK, "")
	for _, p := range c.nodes {
		act(t, c, p, pr, auth, reg.Token, map[string]string{"action": "me"}, http.StatusUnauthorized, "invalid_token")
	}
	sess := act(t, c, n3, pr, auth, "", map[string]string{"action": "login", "email": email, "password": password2}, http.StatusOK, "").Token

	// Passwordless with an authenticator: the email code gives a ticket and
	// the TOTP code (RFC 6238, computed here) the session.
	enr := act(t, c, n1, pr, "/api/authenticator/enroll", sess, nil, http.StatusOK, "")
	cur, prev, _ := totpNow(t, enr.Secret)
	if a := act(t, c, n1, pr, "/api/authenticator/confirm", sess, map[string]string{"code": prev}, http.StatusOK, ""); !a.TotpEnabled {
		t.Fatal("confirm: TOTP not enabled")
	}
	act(t, c, n2, pr, auth, "", map[string]string{"action": "request-email-code", "email": email}, http.StatusOK, "")
	code, _ = box.next(email, "sign-in code", 0)
	lc := act(t, c, n3, pr, auth, "", map[string]string{"action": "login-email-code", "email": email, "code": code}, http.StatusOK, "")
	if !lc.RequiresTotp || lc.LoginTicket == "" || lc.Token != "" {
		t.Fatalf("login-email-code with TOTP: %+v", lc)
	}
	lv := act(t, c, n1, pr, auth, "", map[string]string{"action": "login-verify", "loginTicket": lc.LoginTicket, "code": cur}, http.StatusOK, "")
	if lv.Token == "" || lv.User.ID != uid {
		t.Fatalf("login-verify after the email code: %+v", lv)
	}
	// An address without an account: the same answer, no email.
	before := len(srv.Messages())
	act(t, c, n2, pr, auth, "", map[string]string{"action": "request-email-code", "email": "nobody@example.com"}, http.StatusOK, "")

	// Change of address (the session just logged in: a recent login), the
	// code sent to the new address, used through another node.
	const newEmail = "ada.new@example.com"
	if a := act(t, c, n2, pr, auth, lv.Token, map[string]string{"action": "change-email", "newEmail": newEmail}, http.StatusOK, ""); !a.CodeSent {
		t.Fatal("change-email: codeSent false")
	}
	code, _ = box.next(newEmail, "new email", 0)
	ch := act(t, c, n3, pr, auth, lv.Token, map[string]string{"action": "change-email", "newEmail": newEmail, "code": code}, http.StatusOK, "")
	if ch.User.Email != newEmail || !ch.User.EmailVerified {
		t.Fatalf("change-email: %+v", ch.User)
	}
	act(t, c, n1, pr, auth, "", map[string]string{"action": "login", "email": email, "password": password2}, http.StatusUnauthorized, "invalid_credentials")
	if l := act(t, c, n1, pr, auth, "", map[string]string{"action": "login", "email": newEmail, "password": password2}, http.StatusOK, ""); !l.RequiresTotp {
		t.Fatalf("login with the new address: %+v", l)
	}
	for _, m := range srv.Messages()[before:] {
		if m.HasRecipient("nobody@example.com") {
			t.Fatal("an email went to an address without an account")
		}
	}

	// Deletion (a recent login: the session of login-verify), with data.
	owned := project{ID: pr.ID, APIKey: pr.APIKey, Token: lv.Token}
	if _, _, err := c.write(n1, owned, "users/"+uid+"/notes/n1", map[string]any{"text": "mine"}); err != nil {
		t.Fatal(err)
	}
	if d := act(t, c, n2, pr, auth, lv.Token, map[string]string{"action": "delete-account"}, http.StatusOK, ""); !d.Deleted {
		t.Fatal("delete-account: deleted false")
	}
	for _, p := range c.nodes {
		act(t, c, p, pr, auth, lv.Token, map[string]string{"action": "me"}, http.StatusUnauthorized, "invalid_token")
		r, err := c.getDoc(p, pr, "users/"+uid+"/notes/n1", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusNotFound {
			t.Fatalf("the deleted user's document on %s: %s", p.id, r)
		}
	}
	again := act(t, c, n3, pr, auth, "", map[string]string{"action": "register", "email": newEmail, "password": password}, http.StatusCreated, "")
	if again.User.ID == uid {
		t.Fatal("the new account has the deleted one's id")
	}

	// Anonymous: sign in, write, link an email through another node: the
	// same uid, the document readable with the new session.
	anon := act(t, c, n1, pr, auth, "", map[string]string{"action": "sign-in-anonymously"}, http.StatusCreated, "")
	if !anon.User.Anonymous || anon.User.Email != "" {
		t.Fatalf("sign-in-anonymously: %+v", anon.User)
	}
	ap := project{ID: pr.ID, APIKey: pr.APIKey, Token: anon.Token}
	if _, _, err := c.write(n1, ap, "users/"+anon.User.ID+"/notes/a", map[string]any{"draft": true}); err != nil {
		t.Fatal(err)
	}
	linked := act(t, c, n2, pr, auth, anon.Token, map[string]string{"action": "link-email", "email": "anon@example.com", "password": password}, http.StatusOK, "")
	if linked.User.ID != anon.User.ID || linked.User.Anonymous || linked.User.Email != "anon@example.com" {
		t.Fatalf("link-email: %+v", linked.User)
	}
	r, err := c.getDoc(n3, project{ID: pr.ID, APIKey: pr.APIKey, Token: linked.Token}, "users/"+anon.User.ID+"/notes/a", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("the anonymous user's document after linking, on %s: %s", n3.id, r)
	}
	act(t, c, n3, pr, auth, "", map[string]string{"action": "login", "email": "anon@example.com", "password": password}, http.StatusOK, "")
}
