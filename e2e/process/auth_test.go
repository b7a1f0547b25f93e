package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/rfc6238"
)

// authAnswer is the part of an /api/auth or /api/authenticator answer the
// test reads.
type authAnswer struct {
	Token         string   `json:"token"`
	RequiresTotp  bool     `json:"requiresTotp"`
	LoginTicket   string   `json:"loginTicket"`
	VerifyToken   string   `json:"verifyToken"`
	Secret        string   `json:"secret"`
	OtpauthURL    string   `json:"otpauthUrl"`
	TotpEnabled   bool     `json:"totpEnabled"`
	RecoveryCodes []string `json:"recoveryCodes"`
	User          struct {
		ID          string `json:"id"`
		TotpEnabled bool   `json:"totpEnabled"`
	} `json:"user"`
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

// authCall posts body to path on p with the project's key and, when tok is
// set, a bearer token; it fails the test unless the answer has status and
// (when code is set) that error code.
func authCall(t *testing.T, c *cluster, p *proc, pr project, path, tok string, body map[string]string, status int, code string) authAnswer {
	t.Helper()
	h := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	what := path
	if body["action"] != "" {
		what += " " + body["action"]
	}
	var b any // no body at all for a nil map
	if body != nil {
		b = body
	}
	r, err := doJSON(c.ctx, httpClient, 20*time.Second, http.MethodPost, p.url()+path, h, b)
	if err != nil {
		t.Fatalf("%s on %s: %v", what, p.id, err)
	}
	var a authAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%s on %s: decode %s: %v", what, p.id, r, err)
	}
	if r.status != status || (code != "" && a.Error.Code != code) {
		t.Fatalf("%s on %s: %s; want %d %s", what, p.id, r, status, code)
	}
	return a
}

// totpNow waits, when the current 30 s step of the wall clock ends within
// 3 s, for the next one to begin (a deadline on the clock, not a wait for the
// system under test), then returns the codes of the current step and of the
// one before it, and the current step.
func totpNow(t *testing.T, secret string) (now, previous string, step int64) {
	t.Helper()
	const margin = 3 * time.Second
	for {
		at := time.Now()
		step = rfc6238.Step(at)
		end := time.Unix((step+1)*30, 0)
		if time.Until(end) < margin {
			time.Sleep(time.Until(end) + 50*time.Millisecond)
			continue
		}
		var err error
		if now, err = rfc6238.Authenticator(secret, at); err == nil {
			previous, err = rfc6238.Authenticator(secret, at.Add(-30*time.Second))
		}
		if err != nil {
			t.Fatalf("rfc6238: %v", err)
		}
		return now, previous, step
	}
}

// TestAuthTOTPAcrossProcesses runs three real edgebase processes sharing one
// secret key: TOTP is enrolled and confirmed through n1, a login through n2
// gets a ticket that a fresh code turns into a session through n3, the same
// code is then refused through n1 and n2, and a logout through n3 makes the
// token fail on n1 and n2 on the very next request.
func TestAuthTOTPAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{"EDGEBASE_SECRET_KEY_FILE=" + keyFile}})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	pr := c.mustCreateProject(n1)

	const email, password = "totp-user@example.com", "a long process password"
	reg := authCall(t, c, n1, pr, "/api/auth", "", map[string]string{"action": "register", "email": email, "password": password, "name": "T"}, http.StatusCreated, "")

	// Enroll and confirm through n1.
	enr := authCall(t, c, n1, pr, "/api/authenticator/enroll", reg.Token, nil, http.StatusOK, "")
	if enr.Secret == "" || !strings.Contains(enr.OtpauthURL, "secret="+enr.Secret) {
		t.Fatalf("enroll: secret %q, otpauthUrl %q", enr.Secret, enr.OtpauthURL)
	}
	secret := enr.Secret
	// Confirm with the code of the previous step (a phone 30 s behind; one
	// step of drift is accepted), so that the current step's code, the one
	// an authenticator shows now, is still unused for the login below
	// without waiting up to 30 s for the next step.
	x, prev, step := totpNow(t, secret)
	conf := authCall(t, c, n1, pr, "/api/authenticator/confirm", reg.Token, map[string]string{"code": prev}, http.StatusOK, "")
	if !conf.TotpEnabled || len(conf.RecoveryCodes) != 10 {
		t.Fatalf("confirm: totpEnabled %v, %d recovery codes", conf.TotpEnabled, len(conf.RecoveryCodes))
	}
	if me := authCall(t, c, n2, pr, "/api/auth", reg.Token, map[string]string{"action": "me"}, http.StatusOK, ""); !me.User.TotpEnabled {
		t.Fatalf("me on %s right after confirm on %s: totpEnabled false", n2.id, n1.id)
	}

	// Login through n2: a ticket, no token.
	login := authCall(t, c, n2, pr, "/api/auth", "", map[string]string{"action": "login", "email": email, "password": password}, http.StatusOK, "")
	if !login.RequiresTotp || !strings.HasPrefix(login.LoginTicket, "ebl_") || login.Token != "" {
		t.Fatalf("login on %s: %+v, want requiresTotp with a ticket", n2.id, login)
	}

	// The current code through n3.
	if now := rfc6238.Step(time.Now()); now != step {
		t.Logf("TOTP step moved from %d to %d during the setup; the code of step %d is still within the accepted drift", step, now, step)
	}
	sess := authCall(t, c, n3, pr, "/api/auth", "", map[string]string{"action": "login-verify", "loginTicket": login.LoginTicket, "code": x}, http.StatusOK, "")
	if sess.Token == "" || sess.User.ID != reg.User.ID {
		t.Fatalf("login-verify on %s: token %q user %q, want a token for %s", n3.id, sess.Token, sess.User.ID, reg.User.ID)
	}

	// The same code, at once, through n1 and n2: refused.
	verify := func(code string) map[string]string {
		return map[string]string{"email": email, "code": code, "projectId": pr.ID}
	}
	authCall(t, c, n1, pr, "/api/authenticator/verify", "", verify(x), http.StatusBadRequest, "invalid_code")
	ticket2 := authCall(t, c, n1, pr, "/api/auth", "", map[string]string{"action": "login", "email": email, "password": password}, http.StatusOK, "").LoginTicket
	authCall(t, c, n2, pr, "/api/auth", "", map[string]string{"action": "login-verify", "loginTicket": ticket2, "code": x}, http.StatusBadRequest, "invalid_code")
	// n1's verify does accept a good code of this account (a recovery code,
	// once: refused next through n2).
	rv := authCall(t, c, n1, pr, "/api/authenticator/verify", "", verify(conf.RecoveryCodes[0]), http.StatusOK, "")
	if !strings.HasPrefix(rv.VerifyToken, "ebv_") {
		t.Fatalf("verify with a recovery code on %s: no verify token", n1.id)
	}
	authCall(t, c, n2, pr, "/api/authenticator/verify", "", verify(conf.RecoveryCodes[0]), http.StatusBadRequest, "invalid_code")

	// Logout through n3: the token fails on n1 and n2 on the very next request.
	for _, p := range []*proc{n1, n2} {
		authCall(t, c, p, pr, "/api/auth", sess.Token, map[string]string{"action": "me"}, http.StatusOK, "")
	}
	authCall(t, c, n3, pr, "/api/auth", sess.Token, map[string]string{"action": "logout"}, http.StatusOK, "")
	for _, p := range []*proc{n1, n2} {
		authCall(t, c, p, pr, "/api/auth", sess.Token, map[string]string{"action": "me"}, http.StatusUnauthorized, "invalid_token")
		r, err := c.getDoc(p, project{ID: pr.ID, APIKey: pr.APIKey, Token: sess.Token}, "users/"+reg.User.ID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusUnauthorized || !bytes.Contains(r.body, []byte(`"invalid_token"`)) {
			t.Fatalf("strong read with the logged-out token on %s: %s, want 401 invalid_token", p.id, r)
		}
	}
	// The session from registration is another one: still alive.
	authCall(t, c, n1, pr, "/api/auth", reg.Token, map[string]string{"action": "me"}, http.StatusOK, "")

	// The seed is sealed: no data directory holds it in plaintext (while
	// the account's email, stored in the clear, is found, so the scan does
	// see the stored records).
	for _, p := range c.nodes {
		if f := fileContaining(t, p.dataDir, []byte(email)); f == "" {
			t.Fatalf("the scan of %s does not find the account's email: it cannot vouch for the secret either", p.dataDir)
		}
		if f := fileContaining(t, p.dataDir, []byte(secret)); f != "" {
			t.Errorf("the base32 TOTP secret appears in plaintext in %s", f)
		}
	}
}

// fileContaining returns the first file under dir whose bytes contain s
// ("" if none). Files that vanish while it walks (a running node compacts)
// are skipped.
func fileContaining(t *testing.T, dir string, s []byte) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || found != "" {
			return nil
		}
		ok, err := contains(path, s)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if ok {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", dir, err)
	}
	return found
}

// contains reads path in chunks looking for s. Badger preallocates its value
// log (2 GiB) and memtable files as sparse files written from the start, so
// the read stops after a run of 16 MiB of zero bytes instead of reading
// gigabytes of holes.
func contains(path string, s []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	const chunk = 1 << 20
	buf := make([]byte, len(s)-1+chunk)
	keep, zeroRun := 0, 0
	for {
		n, err := io.ReadFull(f, buf[keep:])
		data := buf[:keep+n]
		if bytes.Contains(data, s) {
			return true, nil
		}
		if n > 0 && isZero(buf[keep:keep+n]) {
			if zeroRun += n; zeroRun >= 16<<20 {
				return false, nil
			}
		} else {
			zeroRun = 0
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		keep = copy(buf, data[len(data)-(len(s)-1):])
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
