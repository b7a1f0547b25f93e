package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// Limits of the shared cluster: small, so that tests reach them quickly. The
// per-address rule counts every failure of 127.0.0.1 across all subtests, so
// it is set high enough never to interfere.
const (
	acPasswordMax = 4
	acCodeMax     = 4
	acWindow      = 15 * time.Minute
	acSessionTTL  = time.Hour
)

// TestAuthCluster runs the authentication flows across the three voters of
// one cluster (starting a cluster is the slow part): a TOTP code used on one
// node is refused on the others, revocations count on every node on the very
// next request, rate limits hold when attempts are spread over nodes, expired
// sessions are refused everywhere and swept, and a restarted node still opens
// the sealed TOTP secrets. The subtests share the cluster and its clock and
// run in order; each uses its own accounts.
func TestAuthCluster(t *testing.T) {
	clk := nodetest.NewClock(time.Date(2031, 3, 14, 9, 0, 5, 0, time.UTC))
	start := time.Now()
	c := nodetest.Start(t, nodetest.Options{
		Voters: 3,
		Clock:  clk,
		Limits: &auth.Limits{
			PasswordPerAccountAddr: auth.LimitRule{Max: acPasswordMax, Window: acWindow},
			PasswordPerAccount:     auth.LimitRule{Max: 100, Window: time.Hour},
			CodePerAccountAddr:     auth.LimitRule{Max: acCodeMax, Window: acWindow},
			CodePerAccount:         auth.LimitRule{Max: 30, Window: time.Hour},
			PerAddr:                auth.LimitRule{Max: 100000, Window: acWindow},
		},
		SessionTTL: acSessionTTL,
	})
	a := &authCluster{c: c, clk: clk, p: c.CreateProject(0)}
	t.Logf("3-voter cluster and project ready in %v", time.Since(start).Round(time.Millisecond))

	steps := []struct {
		name string
		f    func(t *testing.T, a *authCluster)
	}{
		{"TOTPReplayAcrossNodes", testTOTPReplayAcrossNodes},
		{"ConcurrentSameCodeOnTwoNodes", testConcurrentSameCode},
		{"LogoutEverywhereAtOnce", testLogoutEverywhere},
		{"LogoutRefusedByLocalReads", testLogoutLocalReads},
		{"ChangePasswordEverywhereAtOnce", testChangePasswordEverywhere},
		{"ResetPasswordEverywhereAtOnce", testResetPasswordEverywhere},
		{"SetRoleEverywhereAtOnce", testSetRoleEverywhere},
		{"PasswordLimitRoundRobin", testPasswordLimitRoundRobin},
		{"CodeLimitRoundRobin", testCodeLimitRoundRobin},
		{"ConcurrentWrongPasswordsExact", testConcurrentWrongPasswords},
		{"ConcurrentWrongCodesExact", testConcurrentWrongCodes},
		{"RightPasswordRacingTheLimit", testRightPasswordRacingTheLimit},
		{"RightCodeRacingTheLimit", testRightCodeRacingTheLimit},
		{"SessionExpiryAndSweep", testSessionExpiryAndSweep},
		{"RestartedFollowerOpensTOTP", testRestartedFollowerTOTP},
	}
	for _, s := range steps {
		t0 := time.Now()
		ok := t.Run(s.name, func(t *testing.T) { s.f(t, a) })
		t.Logf("%s: %v in %v", s.name, map[bool]string{true: "ok", false: "FAILED"}[ok], time.Since(t0).Round(time.Millisecond))
	}
}

// ---- helpers ----

type authCluster struct {
	c   *nodetest.Cluster
	clk *nodetest.Clock
	p   nodetest.Project

	mu    sync.Mutex
	users int
}

// acReply is one answer of the API, decoded loosely.
type acReply struct {
	status     int
	retryAfter string
	revision   uint64 // X-Revision (0 when absent)
	raw        []byte
	node       string
	what       string

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
		Email       string `json:"email"`
		Role        string `json:"role"`
		TotpEnabled bool   `json:"totpEnabled"`
	} `json:"user"`
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error"`
}

func (r acReply) String() string {
	return fmt.Sprintf("%s on %s: %d %s", r.what, r.node, r.status, strings.TrimSpace(string(r.raw)))
}

// send is one request to member i with the project's headers and, when tok
// is set, a bearer token. It does not touch t, so goroutines may use it.
func (a *authCluster) send(i int, method, path, tok string, body any) (acReply, error) {
	r := acReply{node: a.c.Nodes[i].ID, what: method + " " + path}
	if m, ok := body.(map[string]string); ok && m["action"] != "" {
		r.what += " " + m["action"]
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return r, err
		}
		rd = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.c.Nodes[i].URL()+path, rd)
	if err != nil {
		return r, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Project-Id", a.p.ID)
	req.Header.Set("X-API-Key", a.p.APIKey)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	r.raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return r, fmt.Errorf("%s: read body: %w", r.what, err)
	}
	r.status = resp.StatusCode
	r.retryAfter = resp.Header.Get("Retry-After")
	r.revision, _ = strconv.ParseUint(resp.Header.Get("X-Revision"), 10, 64)
	if len(r.raw) > 0 {
		if err := json.Unmarshal(r.raw, &r); err != nil {
			return r, fmt.Errorf("%s: decode %q: %w", r.what, r.raw, err)
		}
	}
	return r, nil
}

func (a *authCluster) do(t *testing.T, i int, method, path, tok string, body any) acReply {
	t.Helper()
	r, err := a.send(i, method, path, tok, body)
	if err != nil {
		t.Fatalf("%s on %s: %v", r.what, r.node, err)
	}
	return r
}

func (a *authCluster) auth(t *testing.T, i int, tok string, body map[string]string) acReply {
	t.Helper()
	return a.do(t, i, http.MethodPost, "/api/auth", tok, body)
}

func (a *authCluster) authenticator(t *testing.T, i int, op, tok string, body map[string]string) acReply {
	t.Helper()
	return a.do(t, i, http.MethodPost, "/api/authenticator/"+op, tok, body)
}

// want fails unless r has the status and (when code is set) the error code.
func want(t *testing.T, r acReply, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.Error.Code != code) {
		t.Fatalf("%v; want %d %s", r, status, code)
	}
}

// want429 fails unless r is 429 rate_limited with Retry-After == secs.
func want429(t *testing.T, r acReply, secs int) {
	t.Helper()
	want(t, r, http.StatusTooManyRequests, "rate_limited")
	if r.retryAfter != strconv.Itoa(secs) {
		t.Fatalf("%v: Retry-After %q, want %d (seconds until the window that began at the first failure ends)", r, r.retryAfter, secs)
	}
}

type acUser struct {
	email, password, id, token string
	secret                     string
	recovery                   []string
}

// newUser registers a fresh account through member i.
func (a *authCluster) newUser(t *testing.T, i int, label string) *acUser {
	t.Helper()
	a.mu.Lock()
	a.users++
	n := a.users
	a.mu.Unlock()
	u := &acUser{email: fmt.Sprintf("%s-%d@example.com", strings.ToLower(label), n), password: fmt.Sprintf("first secret phrase %d", n)}
	r := a.auth(t, i, "", map[string]string{"action": "register", "email": u.email, "password": u.password, "name": label})
	want(t, r, http.StatusCreated, "")
	if r.Token == "" || r.User.ID == "" {
		t.Fatalf("%v: no token or user id", r)
	}
	u.id, u.token = r.User.ID, r.Token
	return u
}

// enableTOTP enrolls through member i and confirms through member j with
// the code of the current step.
func (a *authCluster) enableTOTP(t *testing.T, u *acUser, i, j int) {
	t.Helper()
	r := a.authenticator(t, i, "enroll", u.token, nil)
	want(t, r, http.StatusOK, "")
	if r.Secret == "" || !strings.Contains(r.OtpauthURL, "secret="+r.Secret) {
		t.Fatalf("%v: no secret, or otpauthUrl without it", r)
	}
	u.secret = r.Secret
	r = a.authenticator(t, j, "confirm", u.token, map[string]string{"code": a.code(t, u)})
	want(t, r, http.StatusOK, "")
	if !r.TotpEnabled || len(r.RecoveryCodes) != auth.RecoveryCodeCount {
		t.Fatalf("%v: want totpEnabled and %d recovery codes", r, auth.RecoveryCodeCount)
	}
	u.recovery = r.RecoveryCodes
}

// code is the authenticator code of u at the cluster clock's time.
func (a *authCluster) code(t *testing.T, u *acUser) string {
	t.Helper()
	code, err := rfc6238.Authenticator(u.secret, a.clk.Now())
	if err != nil {
		t.Fatalf("rfc6238: %v", err)
	}
	return code
}

// freshCode moves the clock to the next TOTP step and returns u's code there.
func (a *authCluster) freshCode(t *testing.T, u *acUser) string {
	t.Helper()
	a.clk.Advance(30 * time.Second)
	return a.code(t, u)
}

// wrongCode is a well-formed code that matches none of the steps the
// server accepts now (current ±1).
func (a *authCluster) wrongCode(t *testing.T, u *acUser) string {
	t.Helper()
	now := a.clk.Now()
	bad := map[string]bool{}
	for _, d := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		c, err := rfc6238.Authenticator(u.secret, now.Add(d))
		if err != nil {
			t.Fatalf("rfc6238: %v", err)
		}
		bad[c] = true
	}
	for n := 0; ; n++ {
		if c := fmt.Sprintf("%06d", n*7919%1000000); !bad[c] {
			return c
		}
	}
}

// login logs u in through member i with password pw and returns the reply
// (a token, or a ticket when TOTP is on).
func (a *authCluster) login(t *testing.T, i int, u *acUser, pw string) acReply {
	t.Helper()
	return a.auth(t, i, "", map[string]string{"action": "login", "email": u.email, "password": pw})
}

// ticket logs u in through member i and returns the login ticket.
func (a *authCluster) ticket(t *testing.T, i int, u *acUser) string {
	t.Helper()
	r := a.login(t, i, u, u.password)
	want(t, r, http.StatusOK, "")
	if !r.RequiresTotp || !strings.HasPrefix(r.LoginTicket, "ebl_") || r.Token != "" {
		t.Fatalf("%v: want requiresTotp with a ticket and no token", r)
	}
	return r.LoginTicket
}

// session logs a TOTP user in fully: ticket through i, code through j.
func (a *authCluster) session(t *testing.T, u *acUser, i, j int) string {
	t.Helper()
	tk := a.ticket(t, i, u)
	r := a.auth(t, j, "", map[string]string{"action": "login-verify", "loginTicket": tk, "code": a.freshCode(t, u)})
	want(t, r, http.StatusOK, "")
	if r.Token == "" || r.User.ID != u.id {
		t.Fatalf("%v: want a token for %s", r, u.id)
	}
	return r.Token
}

func (a *authCluster) verifyBody(u *acUser, code string) map[string]string {
	return map[string]string{"email": u.email, "code": code, "projectId": a.p.ID}
}

// me is the "me" action with tok through member i.
func (a *authCluster) me(t *testing.T, i int, tok string) acReply {
	t.Helper()
	return a.auth(t, i, tok, map[string]string{"action": "me"})
}

// wantAlive fails unless tok is accepted by every member.
func (a *authCluster) wantAlive(t *testing.T, tok, uid string) {
	t.Helper()
	for i := range a.c.Nodes {
		r := a.me(t, i, tok)
		want(t, r, http.StatusOK, "")
		if r.User.ID != uid {
			t.Fatalf("%v: want user %s", r, uid)
		}
	}
}

// wantDead fails unless tok is refused by member i through the auth API
// and through a strong database read.
func (a *authCluster) wantDead(t *testing.T, i int, tok string) {
	t.Helper()
	want(t, a.me(t, i, tok), http.StatusUnauthorized, "invalid_token")
	want(t, a.do(t, i, http.MethodGet, "/api/db?collection=users/x", tok, nil), http.StatusUnauthorized, "invalid_token")
}

func others(i int) []int { return []int{(i + 1) % 3, (i + 2) % 3} }

// together sends the requests at the same moment and returns their replies.
func together(fs ...func() (acReply, error)) ([]acReply, []error) {
	out := make([]acReply, len(fs))
	errs := make([]error, len(fs))
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	for k, f := range fs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			out[k], errs[k] = f()
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return out, errs
}

func sessionRecordPath(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "_sys/sessions/" + hex.EncodeToString(sum[:])
}

// wantSealed checks the stored account of u on every node (after a strong
// sync): TOTP on, the seed sealed ("v1.<key id>.<ciphertext>"), the base32
// secret nowhere in the JSON.
func (a *authCluster) wantSealed(t *testing.T, u *acUser) {
	t.Helper()
	for _, m := range a.c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := m.Node.Store.WaitRead(ctx, raftstore.Strong, 0)
		cancel()
		if err != nil {
			t.Fatalf("strong sync on %s: %v", m.ID, err)
		}
		d, err := m.Node.Store.Get(a.p.ID + "/_users/" + u.id)
		if err != nil || d == nil {
			t.Fatalf("account %s on %s: %v %v", u.id, m.ID, d, err)
		}
		var acc struct {
			TOTP *struct {
				Secret string `json:"secret"`
			} `json:"totp"`
		}
		if err := json.Unmarshal(d.Data, &acc); err != nil {
			t.Fatalf("decode account on %s: %v", m.ID, err)
		}
		if acc.TOTP == nil || !strings.HasPrefix(acc.TOTP.Secret, "v1.") {
			t.Fatalf("account on %s: %s, want a sealed totp.secret", m.ID, d.Data)
		}
		if strings.Contains(string(d.Data), u.secret) {
			t.Fatalf("account on %s holds the base32 secret in plaintext: %s", m.ID, d.Data)
		}
	}
}

// ---- 1. TOTP codes are single use across nodes ----

func testTOTPReplayAcrossNodes(t *testing.T, a *authCluster) {
	const A, B, C = 0, 1, 2
	u := a.newUser(t, C, "replay")
	a.enableTOTP(t, u, A, A)
	want(t, a.me(t, B, u.token), http.StatusOK, "")
	if r := a.me(t, C, u.token); !r.User.TotpEnabled {
		t.Fatalf("%v: want totpEnabled on another node right after confirm", r)
	}

	a.wantSealed(t, u)

	tk := a.ticket(t, B, u)
	x := a.freshCode(t, u)
	r := a.auth(t, C, "", map[string]string{"action": "login-verify", "loginTicket": tk, "code": x})
	want(t, r, http.StatusOK, "")
	session := r.Token

	// The very next requests, elsewhere, with the same code.
	want(t, a.authenticator(t, A, "verify", "", a.verifyBody(u, x)), http.StatusBadRequest, "invalid_code")
	want(t, a.authenticator(t, B, "verify", "", a.verifyBody(u, x)), http.StatusBadRequest, "invalid_code")
	tk2 := a.ticket(t, A, u)
	r = a.auth(t, B, "", map[string]string{"action": "login-verify", "loginTicket": tk2, "code": x})
	want(t, r, http.StatusBadRequest, "invalid_code")
	if r.Error.Field != "code" {
		t.Fatalf("%v: want field code", r)
	}
	a.wantAlive(t, session, u.id)

	// A fresh code works on B (the refusals were replays, not a broken
	// verify), and is then refused on A.
	y := a.freshCode(t, u)
	r = a.authenticator(t, B, "verify", "", a.verifyBody(u, y))
	want(t, r, http.StatusOK, "")
	if !strings.HasPrefix(r.VerifyToken, "ebv_") {
		t.Fatalf("%v: no verify token", r)
	}
	want(t, a.authenticator(t, A, "verify", "", a.verifyBody(u, y)), http.StatusBadRequest, "invalid_code")
}

// Two requests with the same code on two nodes at the same moment: exactly
// one wins. A fresh account per round keeps the failures of the losers below
// the code limit.
func testConcurrentSameCode(t *testing.T, a *authCluster) {
	const rounds = 6
	for round := 0; round < rounds; round++ {
		n1, n2 := round%3, (round+1)%3
		u := a.newUser(t, (round+2)%3, fmt.Sprintf("race%d", round))
		a.enableTOTP(t, u, n1, n2)
		kinds := [][2]string{{"login-verify", "login-verify"}, {"verify", "verify"}, {"login-verify", "verify"}}[round%3]
		var tickets [2]string
		for k, node := range []int{n1, n2} {
			if kinds[k] == "login-verify" {
				tickets[k] = a.ticket(t, (node+k)%3, u)
			}
		}
		code := a.freshCode(t, u) // both requests send this code of a fresh step
		var reqs []func() (acReply, error)
		for k, node := range []int{n1, n2} {
			if kinds[k] == "login-verify" {
				body := map[string]string{"action": "login-verify", "loginTicket": tickets[k], "code": code}
				reqs = append(reqs, func() (acReply, error) { return a.send(node, http.MethodPost, "/api/auth", "", body) })
			} else {
				body := a.verifyBody(u, code)
				reqs = append(reqs, func() (acReply, error) { return a.send(node, http.MethodPost, "/api/authenticator/verify", "", body) })
			}
		}
		replies, errs := together(reqs...)
		wins := 0
		for k, r := range replies {
			if errs[k] != nil {
				t.Fatalf("round %d: %v", round, errs[k])
			}
			switch {
			case r.status == http.StatusOK:
				wins++
			case r.status == http.StatusBadRequest && r.Error.Code == "invalid_code":
			default:
				t.Fatalf("round %d (%s on %s and %s): %v; want 200 or 400 invalid_code", round, kinds[k], a.c.Nodes[n1].ID, a.c.Nodes[n2].ID, r)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d of 2 concurrent uses of one code succeeded (%s on %s, %s on %s): %v | %v",
				round, wins, kinds[0], a.c.Nodes[n1].ID, kinds[1], a.c.Nodes[n2].ID, replies[0], replies[1])
		}
	}
}

// ---- 2. revocations count on every node on the very next request ----

func testLogoutEverywhere(t *testing.T, a *authCluster) {
	u := a.newUser(t, 0, "logout")
	for i := range a.c.Nodes {
		r := a.login(t, (i+1)%3, u, u.password)
		want(t, r, http.StatusOK, "")
		a.wantAlive(t, r.Token, u.id)
		want(t, a.auth(t, i, r.Token, map[string]string{"action": "logout"}), http.StatusOK, "")
		for _, j := range others(i) {
			a.wantDead(t, j, r.Token)
		}
		a.wantDead(t, i, r.Token)
	}
	// Other sessions of the account are untouched.
	a.wantAlive(t, u.token, u.id)
}

// The database API also serves consistency=local reads. A token revoked
// through the leader must be refused by them too on the very next request:
// the brief says "token dead on every node at once", and a thief holding a
// stolen token chooses the consistency of his reads.
// testLogoutLocalReads: ?consistency=local reads serve this node's applied
// state, the session table included (docs/api.md), so they are not "at once"
// by themselves. With X-Min-Revision set to the logout's X-Revision, a local
// read on every follower refuses the token on the very next request; without
// it the refusal arrives with replication (checked with a deadline).
func testLogoutLocalReads(t *testing.T, a *authCluster) {
	const rounds = 10
	u := a.newUser(t, 0, "logoutlocal")
	leader := a.c.Leader(10 * time.Second)
	q := "/api/db?consistency=local&collection=users/" + u.id
	localRead := func(i int, tok string, minRev uint64) int {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + tok}
		if minRev > 0 {
			h["X-Min-Revision"] = strconv.FormatUint(minRev, 10)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		status, body, err := nodetest.DoJSON(ctx, a.c.Nodes[i].URL(), http.MethodGet, q, h, nil)
		if err != nil {
			t.Fatalf("local read on %s: %v", a.c.Nodes[i].ID, err)
		}
		if status != http.StatusNotFound && status != http.StatusUnauthorized {
			t.Fatalf("local read on %s: %d %s", a.c.Nodes[i].ID, status, body)
		}
		return status
	}
	for k := 0; k < rounds; k++ {
		r := a.login(t, leader, u, u.password)
		want(t, r, http.StatusOK, "")
		tok := r.Token
		for i := range a.c.Nodes {
			if st := localRead(i, tok, r.revision); st != http.StatusNotFound { // authenticated, no document
				t.Fatalf("round %d: local read on %s with the login's revision: %d, want 404", k, a.c.Nodes[i].ID, st)
			}
		}
		out := a.auth(t, leader, tok, map[string]string{"action": "logout"})
		want(t, out, http.StatusOK, "")
		if out.revision == 0 {
			t.Fatalf("logout answered no X-Revision")
		}
		for _, j := range a.c.Followers(leader) {
			if st := localRead(j, tok, out.revision); st != http.StatusUnauthorized {
				t.Fatalf("round %d: local read on %s with X-Min-Revision of the logout accepted the revoked token (%d)", k, a.c.Nodes[j].ID, st)
			}
		}
	}
	// Without X-Min-Revision: refused once the follower applied the logout.
	r := a.login(t, leader, u, u.password)
	want(t, r, http.StatusOK, "")
	want(t, a.auth(t, leader, r.Token, map[string]string{"action": "logout"}), http.StatusOK, "")
	for _, j := range a.c.Followers(leader) {
		nodetest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			if st := localRead(j, r.Token, 0); st != http.StatusUnauthorized {
				return fmt.Errorf("local read on %s still accepts the revoked token (%d)", a.c.Nodes[j].ID, st)
			}
			return nil
		})
	}
}

func testChangePasswordEverywhere(t *testing.T, a *authCluster) {
	u := a.newUser(t, 1, "chpw")
	for i := range a.c.Nodes {
		var olds []string
		for k := 0; k < 3; k++ {
			r := a.login(t, k, u, u.password)
			want(t, r, http.StatusOK, "")
			olds = append(olds, r.Token)
		}
		for _, tok := range olds {
			a.wantAlive(t, tok, u.id)
		}
		next := fmt.Sprintf("changed secret phrase %d", i)
		r := a.auth(t, i, olds[i], map[string]string{"action": "change-password", "currentPassword": u.password, "newPassword": next})
		want(t, r, http.StatusOK, "")
		if r.Token == "" || r.User.ID != u.id {
			t.Fatalf("%v: want a new token", r)
		}
		fresh := r.Token
		for _, j := range others(i) {
			// Old tokens first, then the new one: both on the very next requests.
			for _, tok := range olds {
				want(t, a.me(t, j, tok), http.StatusUnauthorized, "invalid_token")
			}
			rm := a.me(t, j, fresh)
			want(t, rm, http.StatusOK, "")
			if rm.User.ID != u.id {
				t.Fatalf("%v: want user %s", rm, u.id)
			}
		}
		for _, tok := range olds {
			a.wantDead(t, i, tok)
		}
		old := u.password
		u.password = next
		j := (i + 1) % 3
		want(t, a.login(t, j, u, old), http.StatusUnauthorized, "invalid_credentials")
		want(t, a.login(t, (i+2)%3, u, u.password), http.StatusOK, "") // also clears the failure above
	}
}

func testResetPasswordEverywhere(t *testing.T, a *authCluster) {
	const A, B, C = 0, 1, 2
	u := a.newUser(t, C, "reset")
	a.enableTOTP(t, u, B, C)
	sessions := []string{u.token, a.session(t, u, A, B), a.session(t, u, B, C), a.session(t, u, C, A)}
	for _, tok := range sessions {
		a.wantAlive(t, tok, u.id)
	}
	r := a.authenticator(t, C, "verify", "", a.verifyBody(u, a.freshCode(t, u)))
	want(t, r, http.StatusOK, "")
	next := "reset secret phrase"
	r = a.auth(t, A, "", map[string]string{"action": "reset-password", "email": u.email, "verifyToken": r.VerifyToken, "newPassword": next})
	want(t, r, http.StatusOK, "")
	for _, j := range []int{B, C, A} {
		for _, tok := range sessions {
			a.wantDead(t, j, tok)
		}
	}
	want(t, a.login(t, B, u, u.password), http.StatusUnauthorized, "invalid_credentials")
	u.password = next
	tok := a.session(t, u, C, B)
	a.wantAlive(t, tok, u.id)
}

func testSetRoleEverywhere(t *testing.T, a *authCluster) {
	r := a.auth(t, 0, "", map[string]string{"action": "login", "email": "owner@example.com", "password": "owner password 123"})
	want(t, r, http.StatusOK, "")
	owner := r.Token
	u := a.newUser(t, 1, "role")
	rules := func(i int) acReply { return a.do(t, i, http.MethodGet, "/api/db/rules", u.token, nil) }
	ownerOnly := func(i int) acReply { return a.do(t, i, http.MethodGet, "/api/db?collection=private/x", u.token, nil) }
	for i := range a.c.Nodes {
		o := others(i)
		want(t, rules(o[0]), http.StatusForbidden, "forbidden")
		r := a.auth(t, i, owner, map[string]string{"action": "set-role", "userId": u.id, "role": "owner"})
		want(t, r, http.StatusOK, "")
		if r.User.Role != "owner" {
			t.Fatalf("%v: want role owner", r)
		}
		want(t, rules(o[0]), http.StatusOK, "")
		want(t, rules(o[1]), http.StatusOK, "")
		want(t, ownerOnly(o[1]), http.StatusNotFound, "")
		if rm := a.me(t, o[1], u.token); rm.User.Role != "owner" {
			t.Fatalf("%v: want role owner", rm)
		}

		r = a.auth(t, o[0], owner, map[string]string{"action": "set-role", "userId": u.id, "role": "user"})
		want(t, r, http.StatusOK, "")
		want(t, rules(o[1]), http.StatusForbidden, "forbidden")
		want(t, rules(i), http.StatusForbidden, "forbidden")
		want(t, ownerOnly(o[0]), http.StatusForbidden, "forbidden")
	}
}

// ---- 3. rate limits hold across nodes ----

func testPasswordLimitRoundRobin(t *testing.T, a *authCluster) {
	u := a.newUser(t, 0, "pwlimit")
	for k := 0; k < acPasswordMax; k++ {
		want(t, a.login(t, k%3, u, "wrong secret phrase"), http.StatusUnauthorized, "invalid_credentials")
	}
	secs := int(acWindow / time.Second)
	// The (Max+1)th lands on node Max%3; every node now refuses, the right
	// password included, until the window that began at the first failure ends.
	want429(t, a.login(t, acPasswordMax%3, u, "wrong secret phrase"), secs)
	for i := range a.c.Nodes {
		want429(t, a.login(t, i, u, u.password), secs)
		want429(t, a.auth(t, i, u.token, map[string]string{"action": "change-password", "currentPassword": u.password, "newPassword": "another secret phrase"}), secs)
	}
	a.clk.Advance(acWindow - 5*time.Minute)
	want429(t, a.login(t, 1, u, u.password), 5*60)
	a.clk.Advance(5*time.Minute - time.Second)
	want429(t, a.login(t, 2, u, u.password), 1)
	a.clk.Advance(time.Second)
	for i := range a.c.Nodes {
		r := a.login(t, i, u, u.password)
		want(t, r, http.StatusOK, "")
		a.wantAlive(t, r.Token, u.id)
	}
	// A new window counts from zero again.
	for k := 0; k < acPasswordMax; k++ {
		want(t, a.login(t, (k+1)%3, u, "wrong secret phrase"), http.StatusUnauthorized, "invalid_credentials")
	}
	want429(t, a.login(t, 0, u, u.password), secs)
}

func testCodeLimitRoundRobin(t *testing.T, a *authCluster) {
	u := a.newUser(t, 2, "codelimit")
	a.enableTOTP(t, u, 2, 0)
	tk := a.ticket(t, 1, u)
	a.clk.Advance(30 * time.Second)
	for k := 0; k < acCodeMax; k++ {
		r := a.authenticator(t, k%3, "verify", "", a.verifyBody(u, a.wrongCode(t, u)))
		want(t, r, http.StatusBadRequest, "invalid_code")
	}
	secs := int(acWindow / time.Second)
	want429(t, a.authenticator(t, acCodeMax%3, "verify", "", a.verifyBody(u, a.wrongCode(t, u))), secs)
	for i := range a.c.Nodes {
		// The right code is refused too: the limit is checked first.
		want429(t, a.authenticator(t, i, "verify", "", a.verifyBody(u, a.code(t, u))), secs)
		want429(t, a.auth(t, i, "", map[string]string{"action": "login-verify", "loginTicket": tk, "code": a.code(t, u)}), secs)
	}
	a.clk.Advance(acWindow - 30*time.Second)
	want429(t, a.authenticator(t, 0, "verify", "", a.verifyBody(u, a.code(t, u))), 30)
	a.clk.Advance(30 * time.Second)
	r := a.authenticator(t, 1, "verify", "", a.verifyBody(u, a.code(t, u)))
	want(t, r, http.StatusOK, "")
	a.session(t, u, 2, 0)
}

// hammer sends wrong attempts from workers goroutines, worker w to node
// (w+k)%3 on its k-th attempt, each until its first 429 (at most perWorker
// attempts), and returns how many failures got through (the 401/400s).
func hammer(t *testing.T, a *authCluster, workers, perWorker int, attemptOn func(node int) (acReply, error), failStatus int, failCode string) int {
	t.Helper()
	var mu sync.Mutex
	through, limited := 0, 0
	var bad []string
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for k := 0; k < perWorker; k++ {
				r, err := attemptOn((w + k) % 3)
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case r.status == failStatus && r.Error.Code == failCode:
					through++
				case r.status == http.StatusTooManyRequests && r.Error.Code == "rate_limited" && r.retryAfter != "":
					limited++
				default:
					bad = append(bad, r.String())
				}
				stop := err != nil || r.status != failStatus
				mu.Unlock()
				if stop {
					return
				}
			}
		}()
	}
	close(gate)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("unexpected answers to wrong attempts: %v", bad)
	}
	if limited == 0 {
		t.Fatalf("%d workers sent %d wrong attempts each and none was refused with 429 (%d got through)", workers, perWorker, through)
	}
	return through
}

// Concurrent wrong attempts spread over the nodes: auth/limits.go answers a
// failure "wrong" only if its revision-conditioned increment commits while
// the bucket has room (the others answer 429), so exactly Max failures get
// through however many run at once. (Had it checked, then recorded, K
// concurrent attempts could let Max+K-1 through.)
func testConcurrentWrongPasswords(t *testing.T, a *authCluster) {
	const workers = 8
	for round := 0; round < 3; round++ {
		u := a.newUser(t, round, fmt.Sprintf("pwhammer%d", round))
		through := hammer(t, a, workers, 3*acPasswordMax, func(node int) (acReply, error) {
			return a.send(node, http.MethodPost, "/api/auth", "", map[string]string{"action": "login", "email": u.email, "password": "wrong secret phrase"})
		}, http.StatusUnauthorized, "invalid_credentials")
		t.Logf("round %d: %d workers sending wrong passwords over 3 nodes: %d answered 401 before 429 (Max %d)", round, workers, through, acPasswordMax)
		if through != acPasswordMax {
			t.Fatalf("%d wrong passwords were answered 401 in one window, want exactly Max=%d", through, acPasswordMax)
		}
		for i := range a.c.Nodes {
			want(t, a.login(t, i, u, u.password), http.StatusTooManyRequests, "rate_limited")
		}
	}
}

func testConcurrentWrongCodes(t *testing.T, a *authCluster) {
	const workers = 8
	for round := 0; round < 2; round++ {
		u := a.newUser(t, round, fmt.Sprintf("codehammer%d", round))
		a.enableTOTP(t, u, round, round+1)
		a.clk.Advance(30 * time.Second)
		wrong := a.wrongCode(t, u)
		through := hammer(t, a, workers, 3*acCodeMax, func(node int) (acReply, error) {
			return a.send(node, http.MethodPost, "/api/authenticator/verify", "", a.verifyBody(u, wrong))
		}, http.StatusBadRequest, "invalid_code")
		t.Logf("round %d: %d workers sending wrong codes over 3 nodes: %d answered 400 before 429 (Max %d)", round, workers, through, acCodeMax)
		if through != acCodeMax {
			t.Fatalf("%d wrong codes were answered 400 in one window, want exactly Max=%d", through, acCodeMax)
		}
		for i := range a.c.Nodes {
			want(t, a.authenticator(t, i, "verify", "", a.verifyBody(u, a.code(t, u))), http.StatusTooManyRequests, "rate_limited")
		}
	}
}

// A right password sent together with wrong ones when the bucket has room
// for one more failure. A success clears the account-and-address counter, so
// in any serial order either the right one comes first (then the wrong ones,
// no more than Max, count from zero and all answer 401) or a wrong one fills
// the bucket first (then the right one is withheld with 429, as
// docs/design.md promises: "a success re-checks the limit before it is
// revealed, so a right guess that raced past a filling limit is withheld
// too"). A 200 next to a 429 in one batch therefore means the right guess was
// revealed after the bucket had filled.
func testRightPasswordRacingTheLimit(t *testing.T, a *authCluster) {
	const maxRounds, wrongs = 30, acPasswordMax
	var violations []string
	rounds := 0
	for round := 0; round < maxRounds && len(violations) < 3; round++ {
		rounds++
		u := a.newUser(t, round%3, fmt.Sprintf("pwrace%d", round))
		for k := 0; k < acPasswordMax-1; k++ {
			want(t, a.login(t, k%3, u, "wrong secret phrase"), http.StatusUnauthorized, "invalid_credentials")
		}
		pw := func(node int, p string) func() (acReply, error) {
			body := map[string]string{"action": "login", "email": u.email, "password": p}
			return func() (acReply, error) { return a.send(node, http.MethodPost, "/api/auth", "", body) }
		}
		reqs := []func() (acReply, error){pw(round%3, u.password)}
		for k := 1; k <= wrongs; k++ {
			reqs = append(reqs, pw((round+k)%3, "wrong secret phrase"))
		}
		replies, errs := together(reqs...)
		var got []string
		ok, limited := false, false
		for k, r := range replies {
			if errs[k] != nil {
				t.Fatalf("round %d: %v", round, errs[k])
			}
			got = append(got, fmt.Sprintf("%d@%s", r.status, r.node))
			switch {
			case k == 0 && r.status == http.StatusOK:
				ok = true
			case k > 0 && r.status == http.StatusUnauthorized && r.Error.Code == "invalid_credentials":
			case r.status == http.StatusTooManyRequests && r.Error.Code == "rate_limited":
				limited = true
			default:
				t.Fatalf("round %d: %v", round, r)
			}
		}
		t.Logf("round %d: right + %d wrong -> %s", round, wrongs, strings.Join(got, ", "))
		if ok && limited {
			violations = append(violations, fmt.Sprintf("round %d: %s", round, strings.Join(got, ", ")))
		}
	}
	if len(violations) > 0 {
		t.Errorf("in %d of %d rounds the right password was revealed (200) in a batch where a wrong one had already found the limit full (429), "+
			"i.e. the success was answered after the bucket filled (its re-check reads local state and is no condition of its commit): %v",
			len(violations), rounds, violations)
	}
}

// The same race for TOTP codes through authenticator verify (which needs
// only an email: a verify token resets the password). Code counters are not
// cleared by a success, so the order is read from the revisions: the success
// commit (X-Revision) must not come after the commit that filled the
// account-and-address bucket.
func testRightCodeRacingTheLimit(t *testing.T, a *authCluster) {
	const maxRounds, wrongs = 30, 8
	var violations []string
	rounds := 0
	for round := 0; round < maxRounds && len(violations) < 3; round++ {
		rounds++
		u := a.newUser(t, round%3, fmt.Sprintf("coderace%d", round))
		a.enableTOTP(t, u, round%3, (round+1)%3)
		a.clk.Advance(30 * time.Second)
		for k := 0; k < acCodeMax-1; k++ {
			want(t, a.authenticator(t, k%3, "verify", "", a.verifyBody(u, a.wrongCode(t, u))), http.StatusBadRequest, "invalid_code")
		}
		guess := func(node int, code string) func() (acReply, error) {
			body := a.verifyBody(u, code)
			return func() (acReply, error) { return a.send(node, http.MethodPost, "/api/authenticator/verify", "", body) }
		}
		wrong := a.wrongCode(t, u)
		reqs := []func() (acReply, error){guess((round+2)%3, a.code(t, u))}
		for k := 0; k < wrongs; k++ {
			reqs = append(reqs, guess((round+k)%3, wrong))
		}
		replies, errs := together(reqs...)
		var got []string
		var success uint64
		for k, r := range replies {
			if errs[k] != nil {
				t.Fatalf("round %d: %v", round, errs[k])
			}
			got = append(got, fmt.Sprintf("%d@%s", r.status, r.node))
			switch {
			case k == 0 && r.status == http.StatusOK:
				success = r.revision
			case k > 0 && r.status == http.StatusBadRequest && r.Error.Code == "invalid_code":
			case r.status == http.StatusTooManyRequests && r.Error.Code == "rate_limited":
			default:
				t.Fatalf("round %d: %v", round, r)
			}
		}
		fill, n := a.codeBucket(t, u)
		t.Logf("round %d: right + %d wrong -> %s; success at revision %d, bucket n=%d last written at %d", round, wrongs, strings.Join(got, ", "), success, n, fill)
		if n != acCodeMax {
			t.Fatalf("round %d: the account-and-address code bucket holds %d failures, want %d", round, n, acCodeMax)
		}
		if success > fill {
			violations = append(violations, fmt.Sprintf("round %d: success committed at %d after the bucket filled at %d", round, success, fill))
		}
	}
	if len(violations) > 0 {
		t.Errorf("in %d of %d rounds a right code was answered 200 although it committed after a concurrent wrong code had filled the limit: %v",
			len(violations), rounds, violations)
	}
}

// codeBucket reads the account-and-address code counter of u (the layout of
// auth/limits.go: _sys/limits/<sha256 of the NUL-terminated parts>) after a
// strong sync, and returns the revision that last wrote it and its count.
func (a *authCluster) codeBucket(t *testing.T, u *acUser) (uint64, int) {
	t.Helper()
	h := sha256.New()
	for _, p := range []string{"code+addr", a.p.ID, u.email, "127.0.0.1"} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	path := raftstore.SystemPrefix + "/limits/" + hex.EncodeToString(h.Sum(nil))
	st := a.c.Nodes[0].Node.Store
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.WaitRead(ctx, raftstore.Strong, 0); err != nil {
		t.Fatalf("strong sync: %v", err)
	}
	d, err := st.Get(path)
	if err != nil || d == nil {
		t.Fatalf("code bucket %s of %s: %v %v (has the layout of auth/limits.go changed?)", path, u.email, d, err)
	}
	var b struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(d.Data, &b); err != nil {
		t.Fatalf("decode code bucket %s: %v", d.Data, err)
	}
	return d.Revision, b.N
}

// ---- 4. expiry on read, then the sweep ----

func testSessionExpiryAndSweep(t *testing.T, a *authCluster) {
	u := a.newUser(t, 0, "expiry")
	toks := []string{u.token}
	for i := 1; i < 3; i++ {
		r := a.login(t, i, u, u.password)
		want(t, r, http.StatusOK, "")
		toks = append(toks, r.Token)
	}
	for _, tok := range toks {
		a.wantAlive(t, tok, u.id)
	}
	leader := a.c.Leader(10 * time.Second)
	sweep := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		n, err := a.c.Nodes[leader].Node.Accounts.Sweep(ctx)
		if err != nil {
			t.Fatalf("sweep on %s: %v", a.c.Nodes[leader].ID, err)
		}
		return n
	}
	// records returns, per member, how many of toks still have a session
	// record once that member has caught up with the leader.
	records := func() ([]int, error) {
		var out []int
		for i, m := range a.c.Nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := m.Node.Store.WaitRead(ctx, raftstore.Strong, 0)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("strong sync on %s: %w", a.c.Nodes[i].ID, err)
			}
			n := 0
			for _, tok := range toks {
				d, err := m.Node.Store.Get(sessionRecordPath(tok))
				if err != nil {
					return nil, err
				}
				if d != nil {
					n++
				}
			}
			out = append(out, n)
		}
		return out, nil
	}
	// Live sessions survive a sweep.
	sweep()
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got, err := records()
		if err != nil {
			return err
		}
		for i, n := range got {
			if n != len(toks) {
				t.Fatalf("%s has %d of %d live session records after a sweep", a.c.Nodes[i].ID, n, len(toks))
			}
		}
		return nil
	})

	a.clk.Advance(acSessionTTL - time.Second)
	for _, tok := range toks {
		a.wantAlive(t, tok, u.id)
	}
	a.clk.Advance(time.Second)
	for i := range a.c.Nodes {
		for _, tok := range toks {
			a.wantDead(t, i, tok)
		}
	}
	if n := sweep(); n < len(toks) {
		t.Fatalf("sweep removed %d records, want at least the %d expired sessions", n, len(toks))
	}
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got, err := records()
		if err != nil {
			return err
		}
		for i, n := range got {
			if n != 0 {
				return fmt.Errorf("%s still has %d of %d expired session records", a.c.Nodes[i].ID, n, len(toks))
			}
		}
		return nil
	})
	// A session opened after the sweep is unaffected.
	r := a.login(t, 2, u, u.password)
	want(t, r, http.StatusOK, "")
	a.wantAlive(t, r.Token, u.id)
}

// ---- 5. a restarted node opens the sealed secrets ----

func testRestartedFollowerTOTP(t *testing.T, a *authCluster) {
	leader := a.c.Leader(10 * time.Second)
	f := a.c.Followers(leader)
	down, up := f[0], f[1]
	before := a.newUser(t, down, "restart-before")
	a.enableTOTP(t, before, down, leader)

	a.c.Kill(down)
	// While it is down: a second account enables TOTP through the others.
	during := a.newUser(t, up, "restart-during")
	a.enableTOTP(t, during, leader, up)
	a.session(t, before, up, leader)

	t0 := time.Now()
	a.c.StartMember(down)
	a.c.WaitReady(down, 30*time.Second)
	t.Logf("%s restarted and ready in %v", a.c.Nodes[down].ID, time.Since(t0).Round(time.Millisecond))

	for _, u := range []*acUser{before, during} {
		tok := a.session(t, u, down, down)
		a.wantAlive(t, tok, u.id)
		r := a.authenticator(t, down, "verify", "", a.verifyBody(u, a.freshCode(t, u)))
		want(t, r, http.StatusOK, "")
	}
	// And a new enrollment through the restarted node works elsewhere.
	after := a.newUser(t, down, "restart-after")
	a.enableTOTP(t, after, down, down)
	a.session(t, after, leader, up)
}
