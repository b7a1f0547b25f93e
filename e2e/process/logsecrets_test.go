package process

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
	rtclient "github.com/edgebase/edgebase/realtime/client"
)

// TestLogsHoldNoSecrets runs a full auth and push flow against three real
// processes logging at debug level (every request gets an access line), then
// reads every line they wrote and looks for each secret the flow used:
// passwords (right and wrong ones), session tokens, login tickets, verify
// tokens, TOTP secrets and recovery codes, API keys, the admin token, the
// cluster secret, the secret key, FCM device tokens and the service
// account's private key. It finds none. Secrets also travel where careless
// logging would pick them up: in malformed bodies that the server refuses, in
// query strings, and in a WebSocket's first message.
func TestLogsHoldNoSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fcm, err := fcmfake.New(fcmfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secretKey := hex.EncodeToString(raw)
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{
		"EDGEBASE_LOG_LEVEL=debug",
		"EDGEBASE_FCM_ENDPOINT=" + fcm.Endpoint(),
		"EDGEBASE_SECRET_KEY=" + secretKey,
	}})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	secrets := map[string]string{
		"admin token":    adminToken,
		"cluster secret": clusterSecret,
		"secret key":     secretKey,
		"owner password": ownerPassword,
	}
	leader := c.mustLeader(n1, 10*time.Second)
	pr := c.mustCreateProject(leader)
	secrets["API key"] = pr.APIKey
	secrets["owner session token"] = pr.Token

	// FCM credentials: the private key must never be logged.
	sa := fcm.ServiceAccountJSON("fcm-" + strings.ToLower(pr.ID))
	var acct struct {
		PrivateKeyID string `json:"private_key_id"`
		PrivateKey   string `json:"private_key"`
	}
	if err := json.Unmarshal(sa, &acct); err != nil || acct.PrivateKey == "" {
		t.Fatalf("service account JSON: %v", err)
	}
	secrets["FCM private key id"] = acct.PrivateKeyID
	for i, line := range strings.Split(acct.PrivateKey, "\n") {
		if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
			secrets[fmt.Sprintf("FCM private key line %d", i)] = line
		}
	}
	mustStatus(t, c, n2, http.MethodPut, "/api/notifications/fcm-credentials", pr.Headers(), json.RawMessage(sa), http.StatusOK)

	// A user: register, a refused login with a wrong password, a password
	// change, TOTP enrolment and confirmation, a two-step login.
	const email = "log-user@example.com"
	pw1, pw2, pw3 := "first password "+randHex(t, 6), "second password "+randHex(t, 6), "third password "+randHex(t, 6)
	wrong := "wrong password " + randHex(t, 6)
	secrets["password 1"], secrets["password 2"], secrets["password 3"], secrets["wrong password"] = pw1, pw2, pw3, wrong
	reg := authCall(t, c, n1, pr, "/api/auth", "", map[string]string{"action": "register", "email": email, "password": pw1, "name": "L"}, http.StatusCreated, "")
	secrets["registration token"] = reg.Token
	authCall(t, c, n2, pr, "/api/auth", "", map[string]string{"action": "login", "email": email, "password": wrong}, http.StatusUnauthorized, "")
	var changed struct {
		Token string `json:"token"`
	}
	r := mustStatus(t, c, n3, http.MethodPost, "/api/auth", withBearer(pr, reg.Token), map[string]string{"action": "change-password", "currentPassword": pw1, "newPassword": pw2}, http.StatusOK)
	if err := json.Unmarshal(r.body, &changed); err != nil || changed.Token == "" {
		t.Fatalf("change-password: %s", r)
	}
	secrets["token after password change"] = changed.Token
	enr := authCall(t, c, n1, pr, "/api/authenticator/enroll", changed.Token, nil, http.StatusOK, "")
	secrets["TOTP secret"] = enr.Secret
	_, prev, _ := totpNow(t, enr.Secret)
	conf := authCall(t, c, n2, pr, "/api/authenticator/confirm", changed.Token, map[string]string{"code": prev}, http.StatusOK, "")
	for i, rc := range conf.RecoveryCodes {
		secrets[fmt.Sprintf("recovery code %d", i)] = rc
	}
	login := authCall(t, c, n3, pr, "/api/auth", "", map[string]string{"action": "login", "email": email, "password": pw2}, http.StatusOK, "")
	secrets["login ticket"] = login.LoginTicket
	code, _, _ := totpNow(t, enr.Secret)
	sess := authCall(t, c, n1, pr, "/api/auth", "", map[string]string{"action": "login-verify", "loginTicket": login.LoginTicket, "code": code}, http.StatusOK, "")
	secrets["two-step session token"] = sess.Token
	user := project{ID: pr.ID, APIKey: pr.APIKey, Token: sess.Token}

	// Push: a device, a topic, sends to the user and to the topic, all
	// delivered through the real SDK to the stand-in.
	device := "logdev:APA91b" + randHex(t, 40)
	secrets["FCM device token"] = device
	mustStatus(t, c, n2, http.MethodPost, "/api/notifications/register", user.Headers(), map[string]any{"token": device, "deviceInfo": map[string]string{"platform": "android"}}, http.StatusCreated)
	mustStatus(t, c, n3, http.MethodPost, "/api/notifications/subscribe", user.Headers(), map[string]any{"topic": "news"}, http.StatusOK)
	mustStatus(t, c, n1, http.MethodPost, "/api/notifications/send-to-user/"+reg.User.ID, pr.Headers(), map[string]any{"title": "hello", "body": "to the user"}, http.StatusAccepted)
	mustStatus(t, c, n2, http.MethodPost, "/api/notifications/send-to-topic", pr.Headers(), map[string]any{"topic": "news", "title": "news", "body": "to the topic"}, http.StatusAccepted)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := fcm.Count(device); n < 2 {
			return fmt.Errorf("device got %d of 2 messages", n)
		}
		return nil
	})
	if n := fcm.RejectionCount(); n != 0 {
		t.Fatalf("the FCM stand-in rejected %d requests: %+v", n, fcm.Rejections())
	}

	// Realtime: headers on the upgrade, and the first-message form.
	for _, byMessage := range []bool{false, true} {
		conn, err := rtclient.Dial(ctx, rtclient.Config{URL: n3.url(), Token: sess.Token, ProjectID: pr.ID, APIKey: pr.APIKey, AuthByMessage: byMessage})
		if err != nil {
			t.Fatalf("realtime dial (auth by message %v): %v", byMessage, err)
		}
		if err := conn.Close(); err != nil {
			t.Logf("realtime close: %v", err)
		}
	}

	// A recovery code turned into a verify token, and a reset with it.
	rv := authCall(t, c, n2, pr, "/api/authenticator/verify", "", map[string]string{"email": email, "code": conf.RecoveryCodes[0], "projectId": pr.ID}, http.StatusOK, "")
	secrets["verify token"] = rv.VerifyToken
	mustStatus(t, c, n3, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "reset-password", "email": email, "verifyToken": rv.VerifyToken, "newPassword": pw3}, http.StatusOK)

	// Secrets where careless logging picks them up: a malformed body
	// (the decoder's error must not quote it), a query string, a bogus
	// bearer, and a wrong API key.
	bad := []byte(`{"action":"login","email":"` + email + `","password":"` + pw3 + `"`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n1.url()+"/api/auth", bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Project-Id", pr.ID)
	req.Header.Set("X-API-Key", pr.APIKey)
	if resp, err := httpClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("malformed login body: status %d, want 400", resp.StatusCode)
		}
	}
	// (400: /api/db reads no such parameter; the error names it, never its value.)
	mustStatus(t, c, n2, http.MethodGet, "/api/db?collection=notes/x&token="+sess.Token+"&apiKey="+pr.APIKey, pr.Headers(), nil, http.StatusBadRequest)
	bogus := "ebs_" + randHex(t, 24)
	secrets["bogus bearer"] = bogus
	mustStatus(t, c, n3, http.MethodPost, "/api/auth", withBearer(pr, bogus), map[string]string{"action": "me"}, http.StatusUnauthorized)
	wrongKey := "ebk_" + randHex(t, 24)
	secrets["wrong API key"] = wrongKey
	mustStatus(t, c, n1, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": wrongKey}, map[string]string{"action": "login", "email": email, "password": pw3}, http.StatusUnauthorized)
	// The admin endpoints with a wrong admin token.
	wrongAdmin := "admin-" + randHex(t, 16)
	secrets["wrong admin token"] = wrongAdmin
	mustStatus(t, c, n2, http.MethodGet, "/admin/cluster", map[string]string{"Authorization": "Bearer " + wrongAdmin}, nil, http.StatusUnauthorized)

	// Stop every node with SIGTERM, so shutdown lines are in the logs too.
	for _, p := range c.nodes {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", p.id, err)
		}
	}
	for _, p := range c.nodes {
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit within 30s of SIGTERM", p.id)
		}
	}

	// Every line each process wrote: JSON, and free of every secret.
	for name, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("secret %q is %q: too short to search for meaningfully", name, s)
		}
	}
	total, withRequestID := 0, 0
	routes := map[string]int{}
	for _, p := range c.nodes {
		lines, ids := scanLogForSecrets(t, p, secrets, routes)
		total += lines
		withRequestID += ids
	}
	// The scan saw what the flow did: at debug level every request has an
	// access line with its request id and route, so the routes that carried
	// the secrets were logged (and found clean).
	for _, route := range []string{"/api/auth", "/api/authenticator/{op}", "/api/notifications/register",
		"/api/notifications/fcm-credentials", "/api/realtime", "/api/db", "/admin/cluster"} {
		if routes[route] == 0 {
			t.Errorf("no access line for route %s (routes logged: %v)", route, routes)
		}
	}
	if withRequestID < 30 {
		t.Fatalf("the logs hold %d lines, %d with a request_id: too few for the flow above (is the access log on at debug level?)", total, withRequestID)
	}
	t.Logf("%d log lines (%d with a request_id; routes %v) hold none of %d secrets", total, withRequestID, routes, len(secrets))
}

// scanLogForSecrets reads p's output line by line (skipping the harness's
// own "==== start" lines, which quote the command line) and fails the test on
// any line that is not a JSON object or that holds a secret. It counts access
// lines per route into routes and returns the lines read and how many carry a
// request_id.
func scanLogForSecrets(t *testing.T, p *proc, secrets map[string]string, routes map[string]int) (lines, withRequestID int) {
	t.Helper()
	f, err := os.Open(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("==== start")) || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines++
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Errorf("%s: a log line is not JSON: %.300s", p.id, line)
			continue
		}
		if _, ok := rec["request_id"]; ok {
			withRequestID++
		}
		if r, ok := rec["route"].(string); ok {
			routes[r]++
		}
		for name, s := range secrets {
			if bytes.Contains(line, []byte(s)) {
				t.Errorf("%s logged the %s: %.500s", p.id, name, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read log of %s: %v", p.id, err)
	}
	return lines, withRequestID
}

// mustStatus sends one request through p and fails unless it answers status.
func mustStatus(t *testing.T, c *cluster, p *proc, method, path string, headers map[string]string, body any, status int) *response {
	t.Helper()
	r, err := doJSON(c.ctx, httpClient, 20*time.Second, method, p.url()+path, headers, body)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, p.id, err)
	}
	if r.status != status {
		t.Fatalf("%s %s on %s: %s, want %d", method, path, p.id, r, status)
	}
	return r
}

func withBearer(pr project, token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token, "X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
