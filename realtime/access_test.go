package realtime_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// promptly bounds how long an ended session or a lost permission may take
// to reach an open stream.
const promptly = 5 * time.Second

// expectSessionEnded reads the error session_ended and the close 4001 of a
// connection whose session ended, within promptly of start.
func expectSessionEnded(t *testing.T, c *client, start time.Time) {
	t.Helper()
	m, err := c.read(promptly)
	if err == nil {
		if m.Op != "error" || m.Code != "session_ended" || m.ID != "" {
			t.Fatalf("got %s, want error session_ended", m)
		}
		_, err = c.read(promptly)
		if err == nil {
			t.Fatalf("the connection stayed open after session_ended")
		}
	} else {
		t.Errorf("no error session_ended before the close (%v, close status %d)", err, websocket.CloseStatus(err))
	}
	if got := websocket.CloseStatus(err); got != 4001 {
		t.Fatalf("the connection ended with close status %d (%v), want 4001", got, err)
	}
	if d := time.Since(start); d > promptly {
		t.Fatalf("the stream ended %v after the session did", d)
	}
}

func TestAccess(t *testing.T) {
	h := startHarness(t, nodetest.Options{})

	t.Run("users read their own subtree only; owners read anywhere", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a1")
		b := h.register(t, p, "b1")
		h.put(t, b.Token, "users/"+b.ID+"/secret", map[string]any{"s": 1})
		h.put(t, a.Token, "users/"+a.ID+"/mine", map[string]any{"m": 1})

		ca, _ := h.connect(t, p, a.Token)
		ca.subscribe("theirs", "users/"+b.ID+"/secret", false)
		ca.expectError("theirs", "forbidden")
		ca.subscribe("theirs-all", "users/"+b.ID, true)
		ca.expectError("theirs-all", "forbidden")
		ca.subscribe("everyone", "users", true)
		ca.expectError("everyone", "forbidden")
		ca.subscribe("elsewhere", "public/x", false)
		ca.expectError("elsewhere", "forbidden")
		ca.subscribe("mine", "users/"+a.ID, true)
		if _, docs, _ := ca.snapshot("mine"); len(docs) != 1 || docs[0].Collection != "users/"+a.ID+"/mine" {
			t.Fatalf("own snapshot: %+v", docs)
		}
		// A refused id can be used again, and B's writes never reach A.
		h.put(t, b.Token, "users/"+b.ID+"/secret", map[string]any{"s": 2})
		r := h.put(t, a.Token, "users/"+a.ID+"/mine", map[string]any{"m": 2})
		if m := ca.expectChange("mine", "users/"+a.ID+"/mine", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}

		co, _ := h.connect(t, p, p.OwnerToken)
		co.subscribe("b", "users/"+b.ID+"/secret", false)
		if _, docs, _ := co.snapshot("b"); len(docs) != 1 {
			t.Fatalf("owner snapshot of users/B/secret: %+v", docs)
		}
		co.subscribe("all", "users", true)
		if _, docs, _ := co.snapshot("all"); len(docs) != 2 {
			t.Fatalf("owner snapshot of users: %+v", docs)
		}
		co.subscribe("any", "public/x", false)
		co.snapshot("any")
	})

	t.Run("logout ends the stream", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a2")
		c, _ := h.connect(t, p, a.Token)
		c.subscribe("s", "users/"+a.ID, true)
		c.snapshot("s")
		// Another session of the same user is not affected.
		other, _ := h.connect(t, p, login(t, h, p, a))
		start := time.Now()
		if st, b := h.do(t, http.MethodPost, "/api/auth", p.bearer(a.Token), map[string]string{"action": "logout"}, nil); st != http.StatusOK {
			t.Fatalf("logout: %d %s", st, b)
		}
		expectSessionEnded(t, c, start)
		other.send(map[string]string{"op": "ping"})
		other.expect("pong")
		// The token is dead for new connections too.
		if _, resp, err := h.dial(t, "", authHeaders(p, a.Token)); err == nil {
			t.Fatalf("a logged-out token connected")
		} else if st, code := errorCode(t, resp); st != 401 || code != "invalid_token" {
			t.Fatalf("logged-out token: HTTP %d %s, want 401 invalid_token", st, code)
		}
	})

	t.Run("password change ends the old streams", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a3")
		c, _ := h.connect(t, p, a.Token)
		c.subscribe("s", "users/"+a.ID, true)
		c.snapshot("s")
		start := time.Now()
		var res struct{ Token string }
		st, b := h.do(t, http.MethodPost, "/api/auth", p.bearer(a.Token),
			map[string]string{"action": "change-password", "currentPassword": a.Password, "newPassword": "another fine password"}, &res)
		if st != http.StatusOK || res.Token == "" {
			t.Fatalf("change-password: %d %s", st, b)
		}
		expectSessionEnded(t, c, start)
		// The replacement token connects.
		c2, ready := h.connect(t, p, res.Token)
		if ready.UserID != a.ID {
			t.Fatalf("ready %s: want user %s", ready, a.ID)
		}
		c2.subscribe("s", "users/"+a.ID, true)
		c2.snapshot("s")
	})

	t.Run("message-authenticated streams end with their session too", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a4")
		c, resp, err := h.dial(t, "", nil)
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.send(map[string]string{"op": "auth", "token": a.Token, "projectId": p.ID, "apiKey": p.APIKey})
		c.expect("ready")
		start := time.Now()
		if st, b := h.do(t, http.MethodPost, "/api/auth", p.bearer(a.Token), map[string]string{"action": "logout"}, nil); st != http.StatusOK {
			t.Fatalf("logout: %d %s", st, b)
		}
		expectSessionEnded(t, c, start)
	})

	t.Run("rules that no longer allow reading end that subscription", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a5")
		c, _ := h.connect(t, p, a.Token)
		c.subscribe("closed", "users/"+a.ID+"/closed", false)
		c.snapshot("closed")
		c.subscribe("open", "users/"+a.ID+"/open", true)
		c.snapshot("open")
		h.setRules(t, p, `{"rules":[
			{"match":"users/{uid}/open/**","read":"auth.uid == uid","write":"auth.uid == uid"},
			{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`)
		m, err := c.read(promptly)
		if err != nil {
			t.Fatalf("no message after the rules change: %v", err)
		}
		if m.Op != "error" || m.ID != "closed" || m.Code != "forbidden" {
			t.Fatalf("got %s, want error forbidden for closed", m)
		}
		// The connection and the other subscription stay.
		c.send(map[string]string{"op": "ping"})
		c.expect("pong")
		h.put(t, p.OwnerToken, "users/"+a.ID+"/closed", map[string]any{})
		r := h.put(t, a.Token, "users/"+a.ID+"/open/x", map[string]any{})
		if m := c.expectChange("open", "users/"+a.ID+"/open/x", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		// The ended subscription's id is free; subscribing again is refused.
		c.subscribe("closed", "users/"+a.ID+"/closed", false)
		c.expectError("closed", "forbidden")
	})

	t.Run("demoting an owner ends its subscriptions to others' data", func(t *testing.T) {
		p := h.newProject(t)
		b := h.register(t, p, "b6")
		victim := h.register(t, p, "c6")
		setRole := func(uid, role string) {
			t.Helper()
			if st, body := h.do(t, http.MethodPost, "/api/auth", p.bearer(p.OwnerToken),
				map[string]string{"action": "set-role", "userId": uid, "role": role}, nil); st != http.StatusOK {
				t.Fatalf("set-role %s: %d %s", role, st, body)
			}
		}
		setRole(b.ID, "owner")
		c, _ := h.connect(t, p, b.Token)
		c.subscribe("theirs", "users/"+victim.ID, true)
		c.snapshot("theirs")
		c.subscribe("own", "users/"+b.ID, true)
		c.snapshot("own")
		setRole(b.ID, "user")
		m, err := c.read(promptly)
		if err != nil {
			t.Fatalf("no message after the demotion: %v", err)
		}
		if m.Op != "error" || m.ID != "theirs" || m.Code != "forbidden" {
			t.Fatalf("got %s, want error forbidden for theirs", m)
		}
		h.put(t, victim.Token, "users/"+victim.ID+"/after", map[string]any{})
		r := h.put(t, b.Token, "users/"+b.ID+"/after", map[string]any{})
		if m := c.expectChange("own", "users/"+b.ID+"/after", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
	})

	t.Run("notifications reach their user only", func(t *testing.T) {
		p := h.newProject(t)
		a := h.register(t, p, "a7")
		b := h.register(t, p, "b7")
		ca, _ := h.connect(t, p, a.Token)
		ca2, _ := h.connect(t, p, a.Token) // every connection of the user
		cb, _ := h.connect(t, p, b.Token)
		for _, x := range []struct {
			c *client
			u user
		}{{ca, a}, {cb, b}} {
			x.c.subscribe("own", "users/"+x.u.ID, true)
			x.c.snapshot("own")
		}
		rev := h.txn(t, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Inbox(p.ID, a.ID, "n1"),
			Data: json.RawMessage(`{"title":"t","body":"b","data":{"k":"v"}}`)})
		for _, c := range []*client{ca, ca2} {
			m := c.expect("notification")
			if m.ID != "n1" || m.Title != "t" || m.Body != "b" || m.Revision != rev {
				t.Fatalf("notification %s: want id n1, title t, body b, revision %d", m, rev)
			}
			jsonEq(t, "notification data", m.Data, `{"k":"v"}`)
		}
		// B's next message is its own change, not A's notification.
		r := h.put(t, b.Token, "users/"+b.ID+"/x", map[string]any{})
		if m := cb.expectChange("own", "users/"+b.ID+"/x", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		// Notifications never show up as changes, even to an owner
		// subscribed to everything.
		co, _ := h.connect(t, p, p.OwnerToken)
		co.subscribe("all", "users", true)
		co.snapshot("all")
		h.txn(t, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Inbox(p.ID, b.ID, "n2"), Data: json.RawMessage(`{"title":"t2"}`)})
		if m := cb.expect("notification"); m.ID != "n2" || m.Title != "t2" {
			t.Fatalf("notification %s: want n2", m)
		}
		r = h.put(t, a.Token, "users/"+a.ID+"/y", map[string]any{})
		if m := co.expectChange("all", "users/"+a.ID+"/y", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		if m := ca.expectChange("own", "users/"+a.ID+"/y", "set"); m.Revision != r {
			t.Fatalf("A got %s, want its change at %d (and no notification of B's)", m, r)
		}
	})
}

// login opens a second session of u.
func login(t *testing.T, h *harness, p project, u user) string {
	t.Helper()
	var res struct{ Token string }
	st, b := h.do(t, http.MethodPost, "/api/auth", p.keyHeaders(),
		map[string]string{"action": "login", "email": u.Email, "password": u.Password}, &res)
	if st != http.StatusOK || res.Token == "" {
		t.Fatalf("login %s: %d %s", u.Email, st, b)
	}
	return res.Token
}

// TestSessionExpiry: a stream ends when its session expires, without any
// write to watch (the node judges it again at the expiry time).
func TestSessionExpiry(t *testing.T) {
	const ttl = 2 * time.Second
	h := startHarness(t, nodetest.Options{SessionTTL: ttl})
	p := h.newProject(t)
	a := h.register(t, p, "exp")
	issued := time.Now()
	c, _ := h.connect(t, p, a.Token)
	c.subscribe("s", "users/"+a.ID, true)
	c.snapshot("s")
	m, err := c.read(ttl + 10*time.Second)
	if err == nil {
		if m.Op != "error" || m.Code != "session_ended" {
			t.Fatalf("got %s, want error session_ended", m)
		}
		_, err = c.read(promptly)
	} else {
		t.Errorf("no error session_ended before the close (%v)", err)
	}
	if got := websocket.CloseStatus(err); got != 4001 {
		t.Fatalf("the connection ended with close status %d (%v), want 4001", got, err)
	}
	if d := time.Since(issued); d < ttl-100*time.Millisecond {
		t.Fatalf("the stream ended %v after the session was issued, before its %v lifetime", d, ttl)
	}
	t.Logf("ended %v after the session was issued (TTL %v)", time.Since(issued).Round(time.Millisecond), ttl)
}
