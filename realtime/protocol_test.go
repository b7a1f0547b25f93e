package realtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// These tests drive GET /api/realtime of a real in-process node through real
// HTTP and WebSocket connections (github.com/coder/websocket as the client).
// Every wait is a read with a deadline or a polled condition with a
// deadline; nothing sleeps to synchronise.

// msgWait bounds the wait for one expected message.
const msgWait = 10 * time.Second

// ---------------------------------------------------------------- harness

type harness struct {
	c *nodetest.Cluster
}

func startHarness(t *testing.T, opts nodetest.Options) *harness {
	t.Helper()
	return &harness{c: nodetest.Start(t, opts)}
}

func (h *harness) base() string { return h.c.Nodes[0].URL() }

func (h *harness) wsURL(query string) string {
	return "ws://" + h.c.Nodes[0].HTTPAddr + "/api/realtime" + query
}

// project is a project with its owner.
type project struct {
	ID, APIKey, OwnerID, OwnerToken string
}

// user is a registered account with a session.
type user struct {
	ID, Email, Password, Token string
}

// do sends one JSON request and decodes the answer into out (when non-nil).
// Unlike nodetest.Cluster.Do it fails the calling (sub)test, not the one
// that started the cluster.
func (h *harness) do(t testing.TB, method, path string, headers map[string]string, body, out any) (int, []byte) {
	t.Helper()
	st, b, err := nodetest.DoJSON(context.Background(), h.base(), method, path, headers, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return st, b
}

var projectSeq struct {
	sync.Mutex
	n int
}

// newProject creates a project with an owner session; subtests use their
// own projects so that rules and origins they change affect nobody else.
func (h *harness) newProject(t testing.TB) project {
	t.Helper()
	projectSeq.Lock()
	projectSeq.n++
	n := projectSeq.n
	projectSeq.Unlock()
	const pw = "owner password 123"
	email := fmt.Sprintf("owner%d@example.com", n)
	var created struct{ ProjectID, APIKey, OwnerID string }
	st, b := h.do(t, http.MethodPost, "/admin/projects", map[string]string{"Authorization": "Bearer " + nodetest.AdminToken},
		map[string]string{"name": fmt.Sprintf("rt%d", n), "ownerEmail": email, "ownerPassword": pw}, &created)
	if st != http.StatusCreated {
		t.Fatalf("create project: %d %s", st, b)
	}
	var login struct{ Token string }
	st, b = h.do(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": created.ProjectID, "X-API-Key": created.APIKey},
		map[string]string{"action": "login", "email": email, "password": pw}, &login)
	if st != http.StatusOK || login.Token == "" {
		t.Fatalf("owner login: %d %s", st, b)
	}
	return project{ID: created.ProjectID, APIKey: created.APIKey, OwnerID: created.OwnerID, OwnerToken: login.Token}
}

func (p project) keyHeaders() map[string]string {
	return map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
}

func (p project) bearer(token string) map[string]string {
	h := p.keyHeaders()
	h["Authorization"] = "Bearer " + token
	return h
}

// register creates a user account (role user) and returns its session.
func (h *harness) register(t testing.TB, p project, name string) user {
	t.Helper()
	u := user{Email: name + "@example.com", Password: "a fine password " + name}
	var res struct {
		Token string
		User  struct{ ID string }
	}
	st, b := h.do(t, http.MethodPost, "/api/auth", p.keyHeaders(),
		map[string]string{"action": "register", "email": u.Email, "password": u.Password, "name": name}, &res)
	if st != http.StatusCreated || res.Token == "" || res.User.ID == "" {
		t.Fatalf("register %s: %d %s", name, st, b)
	}
	u.ID, u.Token = res.User.ID, res.Token
	return u
}

// put writes one document through REST and returns its revision.
func (h *harness) put(t testing.TB, token, coll string, data any) uint64 {
	t.Helper()
	var d struct{ Revision uint64 }
	st, b := h.do(t, http.MethodPost, "/api/db", map[string]string{"Authorization": "Bearer " + token},
		map[string]any{"collection": coll, "data": data}, &d)
	if (st != http.StatusOK && st != http.StatusCreated) || d.Revision == 0 {
		t.Fatalf("write %s: %d %s", coll, st, b)
	}
	return d.Revision
}

// del deletes one document through REST and returns the revision.
func (h *harness) del(t testing.TB, token, coll string) uint64 {
	t.Helper()
	var d struct {
		Deleted  bool
		Revision uint64
	}
	st, b := h.do(t, http.MethodDelete, "/api/db?collection="+url.QueryEscape(coll), map[string]string{"Authorization": "Bearer " + token}, nil, &d)
	if st != http.StatusOK || !d.Deleted || d.Revision == 0 {
		t.Fatalf("delete %s: %d %s", coll, st, b)
	}
	return d.Revision
}

// setRules replaces a project's access rules (owner).
func (h *harness) setRules(t testing.TB, p project, rules string) {
	t.Helper()
	st, b := h.do(t, http.MethodPut, "/api/db/rules", p.bearer(p.OwnerToken), json.RawMessage(rules), nil)
	if st != http.StatusOK {
		t.Fatalf("set rules: %d %s", st, b)
	}
}

// txn commits a transaction directly in the node's store (several documents
// in one revision, or system paths such as notifications).
func (h *harness) txn(t testing.TB, ops ...raftstore.Op) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.c.Nodes[0].Node.Store.Txn(ctx, &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	if !res.OK() {
		t.Fatalf("txn refused: %+v", res)
	}
	return res.Revision
}

func putOp(full, data string) raftstore.Op {
	return raftstore.Op{Kind: raftstore.OpPut, Path: full, Data: json.RawMessage(data)}
}

// ----------------------------------------------------------------- client

// msg is any server message.
type msg struct {
	Op         string          `json:"op"`
	ID         string          `json:"id"`
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	UserID     string          `json:"userId"`
	Revision   uint64          `json:"revision"`
	Collection string          `json:"collection"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	UpdateTime string          `json:"updateTime"`
	Documents  []doc           `json:"documents"`
	More       bool            `json:"more"`
	Title      string          `json:"title"`
	Body       string          `json:"body"`
	raw        string
}

func (m msg) String() string { return m.raw }

type doc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

type client struct {
	t  testing.TB
	ws *websocket.Conn
}

// dial opens a WebSocket to the node with the given headers.
func (h *harness) dial(t testing.TB, query string, hdr http.Header) (*client, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), msgWait)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, h.wsURL(query), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	// Snapshot pages of 256 documents exceed the library's 32 KiB default.
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws}, resp, nil
}

func authHeaders(p project, token string) http.Header {
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token)
	hdr.Set("X-Project-Id", p.ID)
	hdr.Set("X-API-Key", p.APIKey)
	return hdr
}

// connect opens a header-authenticated connection and reads its ready.
func (h *harness) connect(t testing.TB, p project, token string) (*client, msg) {
	t.Helper()
	c, resp, err := h.dial(t, "", authHeaders(p, token))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, respText(resp))
	}
	ready := c.expect("ready")
	return c, ready
}

func respText(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	var b bytes.Buffer
	if resp.Body != nil {
		_, _ = b.ReadFrom(resp.Body)
	}
	return fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(b.String()))
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), msgWait)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

// read returns the next message or the error that ended the connection
// (a timeout also ends it: the library closes a connection whose read
// context expires).
func (c *client) read(timeout time.Duration) (msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return msg{}, err
	}
	if typ != websocket.MessageText {
		return msg{}, fmt.Errorf("a binary message from the server: %x", b)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		return msg{}, fmt.Errorf("server message %q is not JSON: %v", b, err)
	}
	m.raw = string(b)
	return m, nil
}

// next is the next message; anything else fails the test.
func (c *client) next() msg {
	c.t.Helper()
	m, err := c.read(msgWait)
	if err != nil {
		c.t.Fatalf("reading the next message: %v (close status %d)", err, websocket.CloseStatus(err))
	}
	return m
}

func (c *client) expect(op string) msg {
	c.t.Helper()
	m := c.next()
	if m.Op != op {
		c.t.Fatalf("got %s, want op %q", m, op)
	}
	return m
}

// expectError reads an error message with that id and code.
func (c *client) expectError(id, code string) msg {
	c.t.Helper()
	m := c.next()
	if m.Op != "error" || m.ID != id || m.Code != code {
		c.t.Fatalf("got %s, want error id %q code %q", m, id, code)
	}
	if m.Message == "" {
		c.t.Errorf("error %s has no message", m)
	}
	return m
}

// expectClose reads until the connection ends and checks its close status;
// any message read first fails the test.
func (c *client) expectClose(status websocket.StatusCode) {
	c.t.Helper()
	m, err := c.read(msgWait)
	if err == nil {
		c.t.Fatalf("got %s, want the connection closed with %d", m, status)
	}
	if got := websocket.CloseStatus(err); got != status {
		c.t.Fatalf("connection ended with close status %d (%v), want %d", got, err, status)
	}
}

func (c *client) subscribe(id, coll string, prefix bool) {
	c.t.Helper()
	c.send(map[string]any{"op": "subscribe", "id": id, "collection": coll, "prefix": prefix})
}

func (c *client) subscribeSince(id, coll string, prefix bool, since uint64) {
	c.t.Helper()
	c.send(map[string]any{"op": "subscribe", "id": id, "collection": coll, "prefix": prefix, "since": since})
}

// snapshot reads the snapshot pages of id and returns their revision and
// documents, checking the paging invariants.
func (c *client) snapshot(id string) (uint64, []doc, int) {
	c.t.Helper()
	var rev uint64
	var docs []doc
	for pages := 1; ; pages++ {
		m := c.expect("snapshot")
		if m.ID != id {
			c.t.Fatalf("snapshot for %q, want %q: %s", m.ID, id, m)
		}
		if m.Documents == nil {
			c.t.Fatalf("snapshot page without a documents array: %s", m)
		}
		if pages > 1 && m.Revision != rev {
			c.t.Fatalf("snapshot page %d at revision %d, the first at %d", pages, m.Revision, rev)
		}
		rev = m.Revision
		docs = append(docs, m.Documents...)
		if !m.More {
			return rev, docs, pages
		}
		if len(m.Documents) == 0 {
			c.t.Fatalf("an empty snapshot page with more:true: %s", m)
		}
	}
}

// expectChange reads a change and checks its subscription, path and type.
func (c *client) expectChange(id, coll, typ string) msg {
	c.t.Helper()
	m := c.next()
	if m.Op != "change" || m.ID != id || m.Collection != coll || m.Type != typ {
		c.t.Fatalf("got %s, want change id %q %s of %s", m, id, typ, coll)
	}
	return m
}

func jsonEq(t testing.TB, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s: got %s, want %s", what, got, want)
	}
}

func docPaths(docs []doc) []string {
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.Collection)
	}
	slices.Sort(out)
	return out
}

// errorCode decodes the API's error shape from a refused handshake.
func errorCode(t testing.TB, resp *http.Response) (int, string) {
	t.Helper()
	if resp == nil {
		t.Fatalf("no HTTP response")
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	var b bytes.Buffer
	if resp.Body != nil {
		_, _ = b.ReadFrom(resp.Body)
	}
	if err := json.Unmarshal(b.Bytes(), &e); err != nil {
		t.Fatalf("HTTP %d body %q is not the JSON error shape: %v", resp.StatusCode, b.String(), err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("HTTP %d with Content-Type %q, want application/json", resp.StatusCode, ct)
	}
	return resp.StatusCode, e.Error.Code
}

// ------------------------------------------------------------------ tests

func TestAuthAndOrigins(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	alice := h.register(t, p, "alice")

	// A connection that never authenticates: the server must close it
	// with 4001 after AuthTimeout (10 s, not configurable through
	// node.Config / nodetest.Options). It runs alongside the other subtests
	// and is checked at the end, so it costs no extra time.
	type silentResult struct {
		err     error
		m       msg
		elapsed time.Duration
	}
	silentDone := make(chan silentResult, 1)
	silent, resp, err := h.dial(t, "", nil)
	if err != nil {
		t.Fatalf("dial without credentials: %v (%s)", err, respText(resp))
	}
	silentStart := time.Now()
	go func() {
		m, err := silent.read(30 * time.Second)
		silentDone <- silentResult{err: err, m: m, elapsed: time.Since(silentStart)}
	}()

	t.Run("header auth answers ready", func(t *testing.T) {
		c, ready := h.connect(t, p, alice.Token)
		if ready.UserID != alice.ID || ready.Revision == 0 {
			t.Fatalf("ready %s: want userId %s and a revision", ready, alice.ID)
		}
		c.send(map[string]string{"op": "ping"})
		c.expect("pong")
	})

	t.Run("message auth answers ready", func(t *testing.T) {
		c, resp, err := h.dial(t, "", nil)
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.send(map[string]string{"op": "auth", "token": alice.Token, "projectId": p.ID, "apiKey": p.APIKey})
		ready := c.expect("ready")
		if ready.UserID != alice.ID || ready.Revision == 0 {
			t.Fatalf("ready %s: want userId %s and a revision", ready, alice.ID)
		}
		// An auth message once authenticated is refused but harmless.
		c.send(map[string]string{"op": "auth", "token": alice.Token, "projectId": p.ID, "apiKey": p.APIKey})
		c.expectError("", "invalid_argument")
		c.send(map[string]string{"op": "ping"})
		c.expect("pong")
	})

	t.Run("credentials in the URL are refused before the upgrade", func(t *testing.T) {
		for _, q := range []string{"?token=" + alice.Token, "?access_token=" + alice.Token, "?apiKey=" + p.APIKey,
			"?api_key=" + p.APIKey, "?key=" + p.APIKey, "?TOKEN=" + alice.Token, "?Access-Token=" + alice.Token, "?ApiKey=" + p.APIKey,
			"?x=1&Key=" + p.APIKey} {
			_, resp, err := h.dial(t, q, authHeaders(p, alice.Token))
			if err == nil {
				t.Fatalf("%s: upgraded", q)
			}
			if st, code := errorCode(t, resp); st != http.StatusBadRequest || code != "invalid_argument" {
				t.Fatalf("%s: HTTP %d %s, want 400 invalid_argument", q, st, code)
			}
		}
	})

	t.Run("header auth refusals are HTTP errors", func(t *testing.T) {
		cases := []struct {
			name   string
			hdr    http.Header
			status int
			code   string
		}{
			{"wrong api key", func() http.Header {
				h := authHeaders(p, alice.Token)
				h.Set("X-API-Key", "ebk_wrong")
				return h
			}(), 401, "invalid_api_key"},
			{"missing api key", func() http.Header {
				h := authHeaders(p, alice.Token)
				h.Del("X-API-Key")
				return h
			}(), 401, "missing_api_key"},
			{"bad token", authHeaders(p, "ebt_not_a_session"), 401, "invalid_token"},
			{"other project", func() http.Header {
				q := h.newProject(t)
				return authHeaders(q, alice.Token)
			}(), 403, "project_mismatch"},
			{"project but no token", func() http.Header {
				h := authHeaders(p, alice.Token)
				h.Del("Authorization")
				return h
			}(), 401, "missing_token"},
		}
		for _, tc := range cases {
			_, resp, err := h.dial(t, "", tc.hdr)
			if err == nil {
				t.Fatalf("%s: upgraded", tc.name)
			}
			if st, code := errorCode(t, resp); st != tc.status || code != tc.code {
				t.Fatalf("%s: HTTP %d %s, want %d %s", tc.name, st, code, tc.status, tc.code)
			}
		}
	})

	t.Run("message auth refusals are error then close 4001", func(t *testing.T) {
		other := h.newProject(t)
		cases := []struct {
			name string
			auth any
			code string
		}{
			{"bad token", map[string]string{"op": "auth", "token": "ebt_not_a_session", "projectId": p.ID, "apiKey": p.APIKey}, "invalid_token"},
			{"wrong api key", map[string]string{"op": "auth", "token": alice.Token, "projectId": p.ID, "apiKey": "ebk_wrong"}, "invalid_api_key"},
			{"no token", map[string]string{"op": "auth", "projectId": p.ID, "apiKey": p.APIKey}, "missing_token"},
			{"first message not auth", map[string]string{"op": "ping"}, "unauthenticated"},
			{"other project", map[string]string{"op": "auth", "token": alice.Token, "projectId": other.ID, "apiKey": other.APIKey}, "project_mismatch"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, resp, err := h.dial(t, "", nil)
				if err != nil {
					t.Fatalf("dial: %v (%s)", err, respText(resp))
				}
				c.send(tc.auth)
				c.expectError("", tc.code)
				c.expectClose(4001)
			})
		}
	})

	t.Run("origins", func(t *testing.T) {
		q := h.newProject(t)
		bob := h.register(t, q, "bob")
		withOrigin := func(hdr http.Header, origin string) http.Header {
			if hdr == nil {
				hdr = http.Header{}
			}
			hdr.Set("Origin", origin)
			return hdr
		}
		const evil = "https://evil.example.com"

		// Header auth from a foreign origin: 403 before the upgrade.
		_, resp, err := h.dial(t, "", withOrigin(authHeaders(q, bob.Token), evil))
		if err == nil {
			t.Fatalf("foreign origin upgraded")
		}
		if st, code := errorCode(t, resp); st != http.StatusForbidden || code != "origin_not_allowed" {
			t.Fatalf("foreign origin: HTTP %d %s, want 403 origin_not_allowed", st, code)
		}

		// Message auth from a foreign origin: error + 4003.
		c, resp, err := h.dial(t, "", withOrigin(nil, evil))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.send(map[string]string{"op": "auth", "token": bob.Token, "projectId": q.ID, "apiKey": q.APIKey})
		c.expectError("", "origin_not_allowed")
		c.expectClose(4003)

		// The node's own origin is allowed, both ways.
		self := h.base()
		c, resp, err = h.dial(t, "", withOrigin(authHeaders(q, bob.Token), self))
		if err != nil {
			t.Fatalf("same origin refused: %v (%s)", err, respText(resp))
		}
		c.expect("ready")
		c, resp, err = h.dial(t, "", withOrigin(nil, self))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.send(map[string]string{"op": "auth", "token": bob.Token, "projectId": q.ID, "apiKey": q.APIKey})
		c.expect("ready")

		// Users may neither read nor change the list.
		var e struct{ Error struct{ Code, Field string } }
		if st, b := h.do(t, http.MethodGet, "/api/realtime/origins", q.bearer(bob.Token), nil, &e); st != http.StatusForbidden || e.Error.Code != "forbidden" {
			t.Fatalf("GET origins as a user: %d %s, want 403 forbidden", st, b)
		}
		if st, b := h.do(t, http.MethodPut, "/api/realtime/origins", q.bearer(bob.Token), map[string]any{"origins": []string{evil}}, &e); st != http.StatusForbidden || e.Error.Code != "forbidden" {
			t.Fatalf("PUT origins as a user: %d %s, want 403 forbidden", st, b)
		}
		// A bad entry is 400 naming it, and changes nothing.
		for i, bad := range [][]string{{"not an origin"}, {"https://ok.example.com", "https://x.example.com/path"}, {"ftp://x.example.com"}} {
			e.Error.Code, e.Error.Field = "", ""
			st, b := h.do(t, http.MethodPut, "/api/realtime/origins", q.bearer(q.OwnerToken), map[string]any{"origins": bad}, &e)
			if want := fmt.Sprintf("origins[%d]", len(bad)-1); st != http.StatusBadRequest || e.Error.Code != "invalid_argument" || e.Error.Field != want {
				t.Fatalf("bad origins #%d %q: %d %s, want 400 invalid_argument field %s", i, bad, st, b, want)
			}
		}
		var list struct{ Origins []string }
		if st, b := h.do(t, http.MethodGet, "/api/realtime/origins", q.bearer(q.OwnerToken), nil, &list); st != http.StatusOK || list.Origins == nil || len(list.Origins) != 0 {
			t.Fatalf("GET origins after refused PUTs: %d %s, want 200 and an empty list", st, b)
		}

		// An owner adds the origin (canonicalised): it is allowed, both ways.
		if st, b := h.do(t, http.MethodPut, "/api/realtime/origins", q.bearer(q.OwnerToken),
			map[string]any{"origins": []string{"HTTPS://Evil.Example.com:443/"}}, &list); st != http.StatusOK || !slices.Equal(list.Origins, []string{evil}) {
			t.Fatalf("PUT origins: %d %s, want [%s]", st, b, evil)
		}
		list.Origins = nil
		if st, b := h.do(t, http.MethodGet, "/api/realtime/origins", q.bearer(q.OwnerToken), nil, &list); st != http.StatusOK || !slices.Equal(list.Origins, []string{evil}) {
			t.Fatalf("GET origins: %d %s, want [%s]", st, b, evil)
		}
		c, resp, err = h.dial(t, "", withOrigin(authHeaders(q, bob.Token), evil))
		if err != nil {
			t.Fatalf("listed origin refused: %v (%s)", err, respText(resp))
		}
		c.expect("ready")
		c, resp, err = h.dial(t, "", withOrigin(nil, evil))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.send(map[string]string{"op": "auth", "token": bob.Token, "projectId": q.ID, "apiKey": q.APIKey})
		c.expect("ready")
		// The list is the project's: another project still refuses it.
		_, resp, err = h.dial(t, "", withOrigin(authHeaders(p, alice.Token), evil))
		if err == nil {
			t.Fatalf("origin of another project's list upgraded")
		}
		if st, code := errorCode(t, resp); st != http.StatusForbidden || code != "origin_not_allowed" {
			t.Fatalf("origin of another project's list: HTTP %d %s, want 403 origin_not_allowed", st, code)
		}
	})

	t.Run("no auth message in time closes 4001", func(t *testing.T) {
		var r silentResult
		select {
		case r = <-silentDone:
		case <-time.After(40 * time.Second):
			t.Fatalf("the unauthenticated connection is still open after 40 s")
		}
		if r.err == nil {
			if r.m.Op != "error" || r.m.Code != "unauthenticated" {
				t.Fatalf("unauthenticated connection got %s, want error unauthenticated", r.m)
			}
			m, err := silent.read(msgWait)
			if err == nil {
				t.Fatalf("unauthenticated connection got %s after its error, want close 4001", m)
			}
			r.err = err
		} else {
			t.Errorf("no error message before the close (%v)", r.err)
		}
		if got := websocket.CloseStatus(r.err); got != 4001 {
			t.Fatalf("unauthenticated connection ended with %d (%v), want 4001", got, r.err)
		}
		if r.elapsed < 9*time.Second {
			t.Fatalf("unauthenticated connection closed after %v, want the 10 s auth timeout", r.elapsed)
		}
		t.Logf("closed after %v", r.elapsed.Round(time.Millisecond))
	})
}

func TestSubscriptions(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	tok := p.OwnerToken

	t.Run("one document: snapshot then set and delete", func(t *testing.T) {
		r0 := h.put(t, tok, "docs/one", map[string]any{"v": 1})
		c, _ := h.connect(t, p, tok)
		c.subscribe("s1", "docs/one", false)
		rev, docs, _ := c.snapshot("s1")
		if len(docs) != 1 || docs[0].Collection != "docs/one" || docs[0].Revision != r0 || rev < r0 {
			t.Fatalf("snapshot at %d: %+v, want docs/one at revision %d", rev, docs, r0)
		}
		jsonEq(t, "snapshot data", docs[0].Data, `{"v":1}`)
		for _, ts := range []string{docs[0].CreateTime, docs[0].UpdateTime} {
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Fatalf("snapshot time %q: %v", ts, err)
			}
		}
		// A document below it and a sibling are not this subscription's.
		h.put(t, tok, "docs/one/child", map[string]any{"x": 1})
		h.put(t, tok, "docs/onetwo", map[string]any{"x": 1})
		r1 := h.put(t, tok, "docs/one", map[string]any{"v": 2})
		m := c.expectChange("s1", "docs/one", "set")
		if m.Revision != r1 || m.Revision <= rev {
			t.Fatalf("change %s: want revision %d above the snapshot's %d", m, r1, rev)
		}
		jsonEq(t, "change data", m.Data, `{"v":2}`)
		if _, err := time.Parse(time.RFC3339Nano, m.UpdateTime); err != nil {
			t.Fatalf("change updateTime %q: %v", m.UpdateTime, err)
		}
		r2 := h.del(t, tok, "docs/one")
		m = c.expectChange("s1", "docs/one", "delete")
		if m.Revision != r2 || string(m.Data) != "null" {
			t.Fatalf("delete change %s: want revision %d and data null", m, r2)
		}
	})

	t.Run("absent document: empty snapshot then creation", func(t *testing.T) {
		c, ready := h.connect(t, p, tok)
		c.subscribe("s1", "docs/absent", false)
		rev, docs, _ := c.snapshot("s1")
		if len(docs) != 0 || rev < ready.Revision {
			t.Fatalf("snapshot at %d: %+v, want no documents at or above %d", rev, docs, ready.Revision)
		}
		r := h.put(t, tok, "docs/absent", map[string]any{"now": "here"})
		m := c.expectChange("s1", "docs/absent", "set")
		if m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
	})

	t.Run("prefix: every depth and the prefix document, not siblings", func(t *testing.T) {
		for _, path := range []string{"chats/room1", "chats/room1/m1", "chats/room1/m2/replies/r1", "chats/room1/m2/replies/r1/x/y",
			"chats/room10", "chats/room10/m1", "chats/room2/m1", "chats"} {
			h.put(t, tok, path, map[string]any{"path": path})
		}
		c, _ := h.connect(t, p, tok)
		c.subscribe("room1", "chats/room1", true)
		rev, docs, _ := c.snapshot("room1")
		want := []string{"chats/room1", "chats/room1/m1", "chats/room1/m2/replies/r1", "chats/room1/m2/replies/r1/x/y"}
		if got := docPaths(docs); !slices.Equal(got, want) {
			t.Fatalf("prefix snapshot: %q, want %q", got, want)
		}
		for _, d := range docs {
			jsonEq(t, "document "+d.Collection, d.Data, fmt.Sprintf(`{"path":%q}`, d.Collection))
			if d.Revision > rev {
				t.Fatalf("document %s at %d above the snapshot revision %d", d.Collection, d.Revision, rev)
			}
		}
		// Siblings and the parent first, then a document under the prefix:
		// only the last may arrive (changes come in revision order).
		h.put(t, tok, "chats/room10/m2", map[string]any{})
		h.put(t, tok, "chats/room10", map[string]any{"v": 2})
		h.put(t, tok, "chats", map[string]any{"v": 2})
		h.put(t, tok, "chats/room2/m2", map[string]any{})
		r1 := h.put(t, tok, "chats/room1/m3/deep/er", map[string]any{"v": 3})
		if m := c.expectChange("room1", "chats/room1/m3/deep/er", "set"); m.Revision != r1 {
			t.Fatalf("change %s: want revision %d", m, r1)
		}
		r2 := h.put(t, tok, "chats/room1", map[string]any{"v": 4})
		if m := c.expectChange("room1", "chats/room1", "set"); m.Revision != r2 {
			t.Fatalf("change %s: want revision %d", m, r2)
		}
		r3 := h.del(t, tok, "chats/room1/m1")
		if m := c.expectChange("room1", "chats/room1/m1", "delete"); m.Revision != r3 {
			t.Fatalf("change %s: want revision %d", m, r3)
		}
	})

	t.Run("one transaction writing several documents", func(t *testing.T) {
		c, _ := h.connect(t, p, tok)
		c.subscribe("t", "multi", true)
		c.snapshot("t")
		rev := h.txn(t, putOp(p.ID+"/multi/a", `{"n":1}`), putOp(p.ID+"/other/b", `{"n":2}`),
			putOp(p.ID+"/multi/c/d", `{"n":3}`), putOp(p.ID+"/multi", `{"n":4}`))
		var got []string
		for range 3 {
			m := c.expect("change")
			if m.ID != "t" || m.Revision != rev || m.Type != "set" {
				t.Fatalf("change %s: want id t, revision %d, set", m, rev)
			}
			got = append(got, m.Collection)
		}
		slices.Sort(got)
		if want := []string{"multi", "multi/a", "multi/c/d"}; !slices.Equal(got, want) {
			t.Fatalf("changes of one transaction: %q, want %q", got, want)
		}
	})

	t.Run("snapshot paging", func(t *testing.T) {
		const n = 600
		var ops []raftstore.Op
		for i := range n {
			ops = append(ops, putOp(fmt.Sprintf("%s/paged/d%04d", p.ID, i), fmt.Sprintf(`{"i":%d}`, i)))
		}
		wrote := h.txn(t, ops...)
		h.put(t, tok, "pagedsibling", map[string]any{})
		c, _ := h.connect(t, p, tok)
		c.subscribe("pg", "paged", true)
		rev, docs, pages := c.snapshot("pg")
		if len(docs) != n {
			t.Fatalf("snapshot of %d documents in %d pages, want %d", len(docs), pages, n)
		}
		if pages < 3 {
			t.Fatalf("%d documents arrived in %d pages, want at least 3 (256 per page)", n, pages)
		}
		if rev < wrote {
			t.Fatalf("snapshot revision %d below the write's %d", rev, wrote)
		}
		seen := map[string]bool{}
		for _, d := range docs {
			if seen[d.Collection] {
				t.Fatalf("document %s twice in the snapshot", d.Collection)
			}
			seen[d.Collection] = true
		}
		r := h.put(t, tok, "paged/d0000", map[string]any{"i": -1})
		if m := c.expectChange("pg", "paged/d0000", "set"); m.Revision != r || m.Revision <= rev {
			t.Fatalf("change %s: want revision %d above the snapshot's %d", m, r, rev)
		}
	})

	t.Run("subscribing while writes happen: no gap, no duplicate", func(t *testing.T) {
		// One writer updates race/d0..d4 in turn with a counter (document k
		// holds k, k+5, k+10, ...). Meanwhile one connection keeps adding
		// subscriptions, alternately with a snapshot and with since = what
		// the first subscription has seen. Each must then see every later
		// value of every document exactly once, in revision order.
		const writes, docsN, subsN = 600, 5, 48
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			for i := range writes {
				path := fmt.Sprintf("race/d%d", i%docsN)
				st, b, err := nodetest.DoJSON(ctx, h.base(), http.MethodPost, "/api/db", map[string]string{"Authorization": "Bearer " + tok},
					map[string]any{"collection": path, "data": map[string]int{"i": i}})
				if err != nil || (st != 200 && st != 201) {
					errc <- fmt.Errorf("write %d: %d %s %v", i, st, b, err)
					return
				}
				if i == 0 {
					close(started)
				}
			}
			errc <- nil
		}()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("writer: %v", err)
		}
		final := map[string]int{}
		for i := writes - docsN; i < writes; i++ {
			final[fmt.Sprintf("race/d%d", i%docsN)] = i
		}
		type subState struct {
			since   bool
			base    uint64 // the snapshot's or since revision
			last    uint64 // the last change's revision
			live    bool   // snapshot complete / replay started
			vals    map[string]int
			changes int
		}
		subs := map[string]*subState{}
		c, _ := h.connect(t, p, tok)
		add := func() {
			id := fmt.Sprintf("r%d", len(subs))
			st := &subState{vals: map[string]int{}}
			if len(subs)%2 == 1 {
				// Resume from exactly what r0 has: its values are the state
				// at its last revision.
				r0 := subs["r0"]
				st.since, st.base, st.last, st.live = true, r0.last, r0.last, true
				for k, v := range r0.vals {
					st.vals[k] = v
				}
				c.subscribeSince(id, "race", true, r0.last)
			} else {
				c.subscribe(id, "race", true)
			}
			subs[id] = st
		}
		add()
		writerDone := false
		// Every subscription holding the last values means every write is
		// done (the writer is sequential).
		done := func() bool {
			for _, st := range subs {
				if !st.live || len(st.vals) != len(final) {
					return false
				}
				for k, v := range final {
					if st.vals[k] != v {
						return false
					}
				}
			}
			return true
		}
		for {
			if !writerDone {
				select {
				case err := <-errc:
					if err != nil {
						t.Fatal(err)
					}
					writerDone = true
				default:
				}
			}
			if done() {
				break
			}
			m, err := c.read(msgWait)
			if err != nil {
				for id, st := range subs {
					t.Logf("%s: since %v base %d last %d live %v changes %d values %v", id, st.since, st.base, st.last, st.live, st.changes, st.vals)
				}
				t.Fatalf("waiting for the subscriptions to reach %v (writer done %v): %v", final, writerDone, err)
			}
			st := subs[m.ID]
			if st == nil {
				t.Fatalf("message for an unknown subscription: %s", m)
			}
			switch m.Op {
			case "snapshot":
				if st.since || st.live {
					t.Fatalf("%s: a snapshot after the subscription went live", m)
				}
				if st.base != 0 && m.Revision != st.base {
					t.Fatalf("%s: snapshot pages at different revisions", m)
				}
				st.base, st.last = m.Revision, m.Revision
				for _, d := range m.Documents {
					var v struct{ I int }
					if err := json.Unmarshal(d.Data, &v); err != nil {
						t.Fatal(err)
					}
					st.vals[d.Collection] = v.I
				}
				st.live = !m.More
			case "resumed":
				if !st.since || m.Revision < st.last {
					t.Fatalf("%s: resumed below the replayed changes (%d)", m, st.last)
				}
			case "change":
				if !st.live {
					t.Fatalf("%s: a change before the snapshot ended", m)
				}
				if m.Revision <= st.last {
					t.Fatalf("%s: at or below the previous revision %d (base %d, since %v): a duplicate or a reordering",
						m, st.last, st.base, st.since)
				}
				var v struct{ I int }
				if err := json.Unmarshal(m.Data, &v); err != nil {
					t.Fatal(err)
				}
				var k int
				if _, err := fmt.Sscanf(m.Collection, "race/d%d", &k); err != nil {
					t.Fatalf("%s: unexpected path", m)
				}
				want := k
				if prev, ok := st.vals[m.Collection]; ok {
					want = prev + docsN
				}
				if v.I != want {
					t.Fatalf("%s: value %d, want %d (base %d, since %v): a gap or a duplicate", m, v.I, want, st.base, st.since)
				}
				st.vals[m.Collection], st.last = v.I, m.Revision
				st.changes++
			default:
				t.Fatalf("unexpected %s", m)
			}
			// Spread the joins over the writes: one per 12 changes r0 sees.
			if r0 := subs["r0"]; m.ID == "r0" && m.Op == "change" && r0.changes%12 == 0 && len(subs) < subsN {
				add()
			}
		}
		if !writerDone {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d subscriptions joined during %d writes", len(subs), writes)
		if len(subs) < 4 {
			t.Errorf("only %d subscriptions joined while the writes ran", len(subs))
		}
	})

	t.Run("resume with since replays exactly the missed changes", func(t *testing.T) {
		since := h.put(t, tok, "resume/a", map[string]any{"v": 0})
		type w struct {
			path string
			rev  uint64
			typ  string
		}
		var want []w
		want = append(want, w{"resume/a", h.put(t, tok, "resume/a", map[string]any{"v": 1}), "set"})
		h.put(t, tok, "resumed/x", map[string]any{}) // a sibling, not replayed
		h.put(t, tok, "other/x", map[string]any{})
		want = append(want, w{"resume/b/c", h.put(t, tok, "resume/b/c", map[string]any{"v": 2}), "set"})
		want = append(want, w{"resume/a", h.del(t, tok, "resume/a"), "delete"})
		want = append(want, w{"resume", h.put(t, tok, "resume", map[string]any{"v": 3}), "set"})
		h.put(t, tok, "other/y", map[string]any{})

		c, _ := h.connect(t, p, tok)
		c.subscribeSince("rs", "resume", true, since)
		for _, x := range want {
			m := c.expectChange("rs", x.path, x.typ)
			if m.Revision != x.rev {
				t.Fatalf("replayed %s: want revision %d", m, x.rev)
			}
		}
		m := c.expect("resumed")
		if m.ID != "rs" || m.Revision < want[len(want)-1].rev {
			t.Fatalf("resumed %s: want id rs and revision >= %d", m, want[len(want)-1].rev)
		}
		resumedAt := m.Revision
		// Live changes follow, above the resumed revision.
		h.put(t, tok, "other/z", map[string]any{})
		r := h.put(t, tok, "resume/live", map[string]any{})
		if m := c.expectChange("rs", "resume/live", "set"); m.Revision != r || m.Revision <= resumedAt {
			t.Fatalf("live change %s: want revision %d above resumed %d", m, r, resumedAt)
		}

		// A single-document resume replays only that document.
		c.subscribeSince("one", "resume/b/c", false, since)
		if m := c.expectChange("one", "resume/b/c", "set"); m.Revision != want[1].rev {
			t.Fatalf("replayed %s: want revision %d", m, want[1].rev)
		}
		if m := c.expect("resumed"); m.ID != "one" {
			t.Fatalf("got %s, want resumed for one", m)
		}
		// Resuming from the present replays nothing.
		c.subscribeSince("now", "resume", true, r)
		if m := c.expect("resumed"); m.ID != "now" || m.Revision < r {
			t.Fatalf("got %s, want resumed for now at >= %d", m, r)
		}
	})

	t.Run("bad subscribe messages", func(t *testing.T) {
		c, _ := h.connect(t, p, tok)
		c.send(map[string]any{"op": "subscribe", "collection": "docs/x"})
		c.expectError("", "invalid_argument")
		long := strings.Repeat("i", 65)
		c.subscribe(long, "docs/x", false)
		c.expectError(long, "invalid_argument")
		for i, bad := range []string{"", "_x", "docs/_x", "a/../b", "a/./b", "a//b", "/a", "a/"} {
			id := fmt.Sprintf("bad%d", i)
			c.subscribe(id, bad, false)
			c.expectError(id, "invalid_path")
		}
		c.subscribe("dup", "docs/x", false)
		c.snapshot("dup")
		c.subscribe("dup", "docs/y", false)
		c.expectError("dup", "duplicate_id")
		// The first subscription with that id still works.
		h.put(t, tok, "docs/y", map[string]any{})
		r := h.put(t, tok, "docs/x", map[string]any{})
		if m := c.expectChange("dup", "docs/x", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		// 64 characters is the longest id.
		id64 := strings.Repeat("j", 64)
		c.subscribe(id64, "docs/x", false)
		c.snapshot(id64)
		c.send(map[string]string{"op": "ping"})
		c.expect("pong")
	})

	t.Run("subscription limit", func(t *testing.T) {
		c, _ := h.connect(t, p, tok)
		for i := range 100 {
			c.subscribe(fmt.Sprintf("l%d", i), fmt.Sprintf("lim/d%d", i), false)
		}
		for range 100 {
			c.expect("snapshot")
		}
		c.subscribe("l100", "lim/d100", false)
		c.expectError("l100", "subscription_limit")
		// Freeing one makes room again.
		c.send(map[string]string{"op": "unsubscribe", "id": "l0"})
		if m := c.expect("unsubscribed"); m.ID != "l0" {
			t.Fatalf("got %s, want unsubscribed l0", m)
		}
		c.subscribe("l100", "lim/d100", false)
		c.snapshot("l100")
	})

	t.Run("unsubscribe", func(t *testing.T) {
		c, _ := h.connect(t, p, tok)
		c.subscribe("a", "uns/a", false)
		c.snapshot("a")
		c.subscribe("b", "uns/b", false)
		c.snapshot("b")
		c.send(map[string]string{"op": "unsubscribe", "id": "a"})
		if m := c.expect("unsubscribed"); m.ID != "a" {
			t.Fatalf("got %s, want unsubscribed a", m)
		}
		h.put(t, tok, "uns/a", map[string]any{})
		r := h.put(t, tok, "uns/b", map[string]any{})
		if m := c.expectChange("b", "uns/b", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		c.send(map[string]string{"op": "unsubscribe", "id": "a"})
		c.expectError("a", "not_found")
		c.send(map[string]string{"op": "unsubscribe", "id": "never"})
		c.expectError("never", "not_found")
		// The id is free again.
		c.subscribe("a", "uns/a", false)
		if _, docs, _ := c.snapshot("a"); len(docs) != 1 {
			t.Fatalf("resubscribed snapshot: %+v, want uns/a", docs)
		}
	})

	t.Run("unsubscribe and subscribe again at once", func(t *testing.T) {
		// subscribe, unsubscribe, subscribe with the same id, sent back to
		// back: the first subscription's start-up (still running when the
		// unsubscribe arrives) must not touch the second one.
		const n = 40
		h.put(t, tok, "resub/d", map[string]any{"v": 0})
		c, _ := h.connect(t, p, tok)
		for i := range n {
			id := fmt.Sprintf("q%d", i)
			sub := map[string]any{"op": "subscribe", "id": id, "collection": "resub/d"}
			c.send(sub)
			c.send(map[string]string{"op": "unsubscribe", "id": id})
			c.send(sub)
		}
		unsubscribed := map[string]bool{}
		live := map[string]bool{}
		for len(live) < n {
			m := c.next()
			switch {
			case m.Op == "unsubscribed" && !unsubscribed[m.ID] && !live[m.ID]:
				unsubscribed[m.ID] = true
			case m.Op == "snapshot" && !unsubscribed[m.ID] && !live[m.ID]:
				// The first subscription's snapshot, before its unsubscribe.
			case m.Op == "snapshot" && unsubscribed[m.ID] && !live[m.ID] && !m.More && len(m.Documents) == 1:
				live[m.ID] = true
			default:
				t.Fatalf("got %s (unsubscribed %v, live %v)", m, unsubscribed[m.ID], live[m.ID])
			}
		}
		r := h.put(t, tok, "resub/d", map[string]any{"v": 1})
		got := map[string]bool{}
		for range n {
			m := c.expect("change")
			if m.Revision != r || got[m.ID] || !live[m.ID] {
				t.Fatalf("change %s: want one change at %d for each of the %d subscriptions", m, r, n)
			}
			got[m.ID] = true
		}
		c.send(map[string]string{"op": "ping"})
		c.expect("pong")
	})

	t.Run("ping", func(t *testing.T) {
		c, _ := h.connect(t, p, tok)
		for range 3 {
			c.send(map[string]string{"op": "ping"})
			c.expect("pong")
		}
	})

	t.Run("protocol violations close the connection", func(t *testing.T) {
		cases := []struct {
			name   string
			typ    websocket.MessageType
			data   []byte
			code   string // the error message before the close; "" for none
			status websocket.StatusCode
		}{
			{"unknown op", websocket.MessageText, []byte(`{"op":"frobnicate"}`), "unknown_op", websocket.StatusPolicyViolation},
			{"missing op", websocket.MessageText, []byte(`{"id":"x"}`), "unknown_op", websocket.StatusPolicyViolation},
			{"invalid JSON", websocket.MessageText, []byte(`{"op":"subscribe",`), "invalid_json", websocket.StatusPolicyViolation},
			{"not an object", websocket.MessageText, []byte(`[1,2]`), "invalid_json", websocket.StatusPolicyViolation},
			{"binary frame", websocket.MessageBinary, []byte(`{"op":"ping"}`), "", websocket.StatusPolicyViolation},
			{"message over 64 KiB", websocket.MessageText, []byte(`{"op":"ping","pad":"` + strings.Repeat("x", 64<<10) + `"}`), "", websocket.StatusMessageTooBig},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, _ := h.connect(t, p, tok)
				ctx, cancel := context.WithTimeout(context.Background(), msgWait)
				defer cancel()
				if err := c.ws.Write(ctx, tc.typ, tc.data); err != nil {
					t.Fatalf("write: %v", err)
				}
				if tc.code != "" {
					c.expectError("", tc.code)
				}
				c.expectClose(tc.status)
			})
		}
	})
}

// TestResumeOlderThanTheLog runs a node whose change log keeps changes for
// 50 ms, so that a resume point falls out of it quickly.
func TestResumeOlderThanTheLog(t *testing.T) {
	h := startHarness(t, nodetest.Options{ChangeLogRetention: 50 * time.Millisecond})
	p := h.newProject(t)
	tok := p.OwnerToken
	since := h.put(t, tok, "old/a", map[string]any{"v": 1})
	last := h.put(t, tok, "old/b", map[string]any{"v": 2})
	h.put(t, tok, "elsewhere", map[string]any{})

	c, _ := h.connect(t, p, tok)
	// Poll (a condition wait with a deadline): resume until the compaction
	// has passed since; until then the server answers a replay + resumed.
	deadline := time.Now().Add(20 * time.Second)
	var reset msg
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			t.Fatalf("since %d still resumable after 20 s with a 50 ms retention", since)
		}
		id := fmt.Sprintf("p%d", attempt)
		c.subscribeSince(id, "old", true, since)
		m := c.next()
		if m.Op == "reset" {
			reset = m
			if m.ID != id {
				t.Fatalf("reset %s: want id %s", m, id)
			}
			break
		}
		for m.Op == "change" && m.ID == id {
			if m.Revision <= since {
				t.Fatalf("replayed %s at or below since %d", m, since)
			}
			m = c.next()
		}
		if m.Op != "resumed" || m.ID != id {
			t.Fatalf("got %s, want changes then resumed for %s", m, id)
		}
		c.send(map[string]string{"op": "unsubscribe", "id": id})
		if m := c.expect("unsubscribed"); m.ID != id {
			t.Fatalf("got %s, want unsubscribed %s", m, id)
		}
	}
	if reset.Revision <= since {
		t.Fatalf("reset %s: the floor must be above since %d", reset, since)
	}
	floor, err := h.c.Nodes[0].Node.Store.LogFloor()
	if err != nil {
		t.Fatal(err)
	}
	if reset.Revision > floor {
		t.Fatalf("reset %s names a floor above the store's %d", reset, floor)
	}
	rev, docs, _ := c.snapshot(reset.ID)
	if got := docPaths(docs); !slices.Equal(got, []string{"old/a", "old/b"}) || rev < last {
		t.Fatalf("snapshot after reset at %d: %q, want old/a and old/b at >= %d", rev, got, last)
	}
	r := h.put(t, tok, "old/c", map[string]any{})
	if m := c.expectChange(reset.ID, "old/c", "set"); m.Revision != r || m.Revision <= rev {
		t.Fatalf("change %s: want revision %d above the snapshot's %d", m, r, rev)
	}
}
