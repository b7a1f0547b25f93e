package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/realtime/client"
)

const (
	goodToken = "ebt_good"
	projectID = "p1"
	apiKey    = "ebk_key"
	waitFor   = 10 * time.Second
)

// fake is an in-test realtime server: it authenticates like the real one
// and hands every accepted connection to the test, which scripts it.
type fake struct {
	t     *testing.T
	srv   *httptest.Server
	conns chan *fconn
	dials atomic.Int32
	// refuse answers this many next upgrades with 503.
	refuse atomic.Int32
	// token is the token the fake accepts (changeable to revoke).
	token atomic.Value
	mu    sync.Mutex
	all   []*fconn
}

// msg is any client -> server message.
type msg struct {
	Op         string  `json:"op"`
	ID         string  `json:"id"`
	Collection string  `json:"collection"`
	Prefix     bool    `json:"prefix"`
	Since      *uint64 `json:"since"`
	// MinRevision is the session's revision (Config.Session).
	MinRevision uint64 `json:"minRevision"`
	Token       string `json:"token"`
	ProjectID   string `json:"projectId"`
	APIKey      string `json:"apiKey"`
}

// fconn is one accepted connection, seen from the server.
type fconn struct {
	ws      *websocket.Conn
	hdr     http.Header
	path    string
	auth    *msg // the auth message, for message authentication
	in      chan msg
	readErr error // why in was closed
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{t: t, conns: make(chan *fconn, 16)}
	f.token.Store(goodToken)
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(func() {
		f.srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.all {
			_ = c.ws.CloseNow()
		}
	})
	return f
}

func httpErr(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

func (f *fake) handle(w http.ResponseWriter, r *http.Request) {
	f.dials.Add(1)
	if r.URL.Path != "/api/realtime" {
		httpErr(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	if f.refuse.Load() > 0 {
		f.refuse.Add(-1)
		httpErr(w, http.StatusServiceUnavailable, "unavailable", "try again")
		return
	}
	token := f.token.Load().(string)
	headerAuth := r.Header.Get("Authorization") != ""
	if headerAuth {
		if r.Header.Get("Authorization") != "Bearer "+token {
			httpErr(w, http.StatusUnauthorized, "invalid_token", "token is invalid")
			return
		}
		if r.Header.Get("X-Project-Id") != projectID || r.Header.Get("X-API-Key") != apiKey {
			httpErr(w, http.StatusUnauthorized, "invalid_api_key", "api key is invalid")
			return
		}
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	fc := &fconn{ws: ws, hdr: r.Header.Clone(), path: r.URL.Path, in: make(chan msg, 1024)}
	if !headerAuth {
		_, b, err := ws.Read(ctx)
		var m msg
		if err != nil || json.Unmarshal(b, &m) != nil || m.Op != "auth" {
			_ = ws.Close(websocket.StatusPolicyViolation, "auth expected")
			return
		}
		if m.Token != token || m.ProjectID != projectID || m.APIKey != apiKey {
			b, _ := json.Marshal(map[string]string{"op": "error", "code": "invalid_token", "message": "token is invalid"})
			_ = ws.Write(ctx, websocket.MessageText, b)
			_ = ws.Close(4001, "unauthenticated")
			return
		}
		fc.auth = &m
	}
	b, _ := json.Marshal(map[string]any{"op": "ready", "userId": "u1", "revision": 7})
	if ws.Write(ctx, websocket.MessageText, b) != nil {
		return
	}
	f.mu.Lock()
	f.all = append(f.all, fc)
	f.mu.Unlock()
	go fc.reader()
	f.conns <- fc
}

func (fc *fconn) reader() {
	for {
		_, b, err := fc.ws.Read(context.Background())
		if err != nil {
			fc.readErr = err
			close(fc.in)
			return
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			fc.readErr = err
			close(fc.in)
			return
		}
		fc.in <- m
	}
}

// accept waits for the next authenticated connection.
func (f *fake) accept(t *testing.T) *fconn {
	t.Helper()
	select {
	case fc := <-f.conns:
		return fc
	case <-time.After(waitFor):
		t.Fatal("no connection reached the fake server")
		return nil
	}
}

// next waits for the next client message.
func (fc *fconn) next(t *testing.T) msg {
	t.Helper()
	select {
	case m, ok := <-fc.in:
		if !ok {
			t.Fatalf("connection closed while waiting for a message: %v", fc.readErr)
		}
		return m
	case <-time.After(waitFor):
		t.Fatal("no message from the client")
		return msg{}
	}
}

func (fc *fconn) expect(t *testing.T, op string) msg {
	t.Helper()
	m := fc.next(t)
	if m.Op != op {
		t.Fatalf("client sent op %q, want %q (%+v)", m.Op, op, m)
	}
	return m
}

func (fc *fconn) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := fc.ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("fake write: %v", err)
	}
}

// waitClosed waits until the client's side of the connection is gone and
// returns the fake's read error.
func (fc *fconn) waitClosed(t *testing.T) error {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-fc.in:
			if !ok {
				return fc.readErr
			}
		case <-deadline:
			t.Fatal("the client did not close the connection")
			return nil
		}
	}
}

func doc(col string, rev uint64) map[string]any {
	return map[string]any{"collection": col, "data": map[string]any{"path": col}, "revision": rev,
		"createTime": "2025-01-01T00:00:00Z", "updateTime": "2025-01-01T00:00:00Z"}
}

func snapshot(id string, rev uint64, more bool, docs ...map[string]any) map[string]any {
	if docs == nil {
		docs = []map[string]any{}
	}
	return map[string]any{"op": "snapshot", "id": id, "revision": rev, "documents": docs, "more": more}
}

func change(id string, rev uint64, col string) map[string]any {
	return map[string]any{"op": "change", "id": id, "revision": rev, "collection": col, "type": "set",
		"data": map[string]any{"path": col, "rev": rev}, "updateTime": "2025-01-01T00:00:01Z"}
}

func del(id string, rev uint64, col string) map[string]any {
	return map[string]any{"op": "change", "id": id, "revision": rev, "collection": col, "type": "delete", "data": nil}
}

func op(o, id string, rev uint64) map[string]any {
	return map[string]any{"op": o, "id": id, "revision": rev}
}

func (f *fake) config(mut ...func(*client.Config)) client.Config {
	cfg := client.Config{
		URL: f.srv.URL, Token: goodToken, ProjectID: projectID, APIKey: apiKey,
		Logger:     slog.New(slog.DiscardHandler),
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

func dial(t *testing.T, f *fake, mut ...func(*client.Config)) (*client.Conn, *fconn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := client.Dial(ctx, f.config(mut...))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, f.accept(t)
}

func reconnecting(cfg *client.Config) { cfg.Reconnect = true }

type subResult struct {
	sub *client.Subscription
	err error
}

func subscribeAsync(c *client.Conn, collection string, prefix bool, opts ...client.SubOption) <-chan subResult {
	ch := make(chan subResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		sub, err := c.Subscribe(ctx, collection, prefix, opts...)
		ch <- subResult{sub, err}
	}()
	return ch
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

// subscribe subscribes and answers with an empty snapshot at rev.
func subscribe(t *testing.T, c *client.Conn, fc *fconn, collection string, rev uint64) (*client.Subscription, msg) {
	t.Helper()
	res := subscribeAsync(c, collection, true)
	m := fc.expect(t, "subscribe")
	fc.send(t, snapshot(m.ID, rev, false))
	r := wait(t, res)
	if r.err != nil {
		t.Fatalf("Subscribe: %v", r.err)
	}
	return r.sub, m
}

func nextEvent(t *testing.T, sub *client.Subscription) client.Event {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			t.Fatalf("Events closed: %v", sub.Err())
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event")
		return client.Event{}
	}
}

// expectEvents reads len(want) events and compares them as
// "kind rev collection" strings.
func expectEvents(t *testing.T, sub *client.Subscription, want ...string) {
	t.Helper()
	for i, w := range want {
		ev := nextEvent(t, sub)
		got := fmt.Sprintf("%s %d", ev.Kind, ev.Revision)
		if ev.Collection != "" {
			got += " " + ev.Collection
		}
		if got != w {
			t.Fatalf("event %d = %q, want %q", i, got, w)
		}
	}
}

func waitEnded(t *testing.T, sub *client.Subscription) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Events not closed")
		}
	}
}

func TestHeaderAuth(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, func(cfg *client.Config) { cfg.Origin = "https://app.example.com" })
	if got := fc.hdr.Get("Authorization"); got != "Bearer "+goodToken {
		t.Errorf("Authorization = %q", got)
	}
	if fc.hdr.Get("X-Project-Id") != projectID || fc.hdr.Get("X-API-Key") != apiKey {
		t.Errorf("project/key headers = %q %q", fc.hdr.Get("X-Project-Id"), fc.hdr.Get("X-API-Key"))
	}
	if got := fc.hdr.Get("Origin"); got != "https://app.example.com" {
		t.Errorf("Origin = %q", got)
	}
	if fc.auth != nil {
		t.Error("an auth message was sent besides the headers")
	}
	if c.UserID() != "u1" || c.ReadyRevision() != 7 {
		t.Errorf("ready: user %q revision %d", c.UserID(), c.ReadyRevision())
	}

	t.Run("refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := client.Dial(ctx, f.config(reconnecting, func(cfg *client.Config) { cfg.Token = "ebt_bad" }))
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "invalid_token" || e.Message != "token is invalid" {
			t.Fatalf("Dial with a bad token: %v (%#v)", err, e)
		}
	})
}

func TestMessageAuth(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, func(cfg *client.Config) { cfg.AuthByMessage = true })
	for _, h := range []string{"Authorization", "X-Project-Id", "X-API-Key"} {
		if v := fc.hdr.Get(h); v != "" {
			t.Errorf("header %s = %q with message auth", h, v)
		}
	}
	if fc.auth == nil || fc.auth.Token != goodToken || fc.auth.ProjectID != projectID || fc.auth.APIKey != apiKey {
		t.Fatalf("auth message = %+v", fc.auth)
	}
	if c.UserID() != "u1" {
		t.Errorf("user %q", c.UserID())
	}

	t.Run("refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := client.Dial(ctx, f.config(reconnecting, func(cfg *client.Config) {
			cfg.AuthByMessage = true
			cfg.Token = "ebt_bad"
		}))
		var e *client.Error
		if !errors.As(err, &e) || e.Code != "invalid_token" || e.Status != 0 {
			t.Fatalf("Dial with a bad token: %v", err)
		}
		if got := websocket.CloseStatus(err); got != 4001 {
			t.Fatalf("close status %d, want 4001 (%v)", got, err)
		}
	})
}

func TestURL(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"ftp://x", "http://", "http://h/?token=x", "http://h/?access_token=x"} {
		if _, err := client.Dial(ctx, client.Config{URL: u}); err == nil {
			t.Errorf("Dial(%q) succeeded", u)
		}
	}
	f := newFake(t)
	// A trailing slash or the full endpoint both land on /api/realtime.
	for _, u := range []string{f.srv.URL + "/", f.srv.URL + "/api/realtime"} {
		c, err := client.Dial(ctx, f.config(func(cfg *client.Config) { cfg.URL = u }))
		if err != nil {
			t.Fatalf("Dial(%q): %v", u, err)
		}
		if fc := f.accept(t); fc.path != "/api/realtime" {
			t.Errorf("path %q", fc.path)
		}
		_ = c.Close()
	}
}

func TestSnapshotPages(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	res := subscribeAsync(c, "chats/room1", true)
	m := fc.expect(t, "subscribe")
	if m.ID == "" || m.Collection != "chats/room1" || !m.Prefix || m.Since != nil {
		t.Fatalf("subscribe = %+v", m)
	}
	fc.send(t, snapshot(m.ID, 42, true, doc("chats/room1/a", 3), doc("chats/room1/b", 9)))
	fc.send(t, snapshot(m.ID, 42, true, doc("chats/room1/c", 12), doc("chats/room1/d", 40)))
	fc.send(t, snapshot(m.ID, 42, false, doc("chats/room1/e", 41)))
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	docs := r.sub.Documents()
	var cols []string
	for _, d := range docs {
		cols = append(cols, d.Collection)
	}
	if got := strings.Join(cols, ","); got != "chats/room1/a,chats/room1/b,chats/room1/c,chats/room1/d,chats/room1/e" {
		t.Fatalf("documents %s", got)
	}
	if docs[2].Revision != 12 || string(docs[2].Data) != `{"path":"chats/room1/c"}` || docs[2].UpdateTime != "2025-01-01T00:00:00Z" {
		t.Fatalf("document = %+v", docs[2])
	}
	if r.sub.Revision() != 42 {
		t.Fatalf("revision %d", r.sub.Revision())
	}
	select {
	case ev := <-r.sub.Events():
		t.Fatalf("the initial snapshot produced an event: %+v", ev)
	default:
	}

	// A single document, no prefix, empty snapshot.
	res = subscribeAsync(c, "users/u1", false)
	m = fc.expect(t, "subscribe")
	if m.Prefix {
		t.Fatal("prefix sent for a single-document subscription")
	}
	fc.send(t, snapshot(m.ID, 42, false))
	if r := wait(t, res); r.err != nil || len(r.sub.Documents()) != 0 {
		t.Fatalf("empty snapshot: %v %v", r.err, r.sub.Documents())
	}
}

func TestChangesInOrder(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)

	var want []string
	rev := uint64(10)
	for i := range 300 {
		if i%3 != 1 { // every third change shares the revision of the previous one
			rev++
		}
		col := fmt.Sprintf("chats/room1/m%d", i)
		fc.send(t, change(m.ID, rev, col))
		want = append(want, fmt.Sprintf("change %d %s", rev, col))
	}
	fc.send(t, del(m.ID, rev+1, "chats/room1/m0"))
	want = append(want, fmt.Sprintf("change %d chats/room1/m0", rev+1))
	expectEvents(t, sub, want[:len(want)-1]...)
	ev := nextEvent(t, sub)
	if ev.Type != client.TypeDelete || ev.Data != nil || ev.Revision != rev+1 {
		t.Fatalf("delete event = %+v", ev)
	}
	if sub.Revision() != rev+1 {
		t.Fatalf("revision %d, want %d", sub.Revision(), rev+1)
	}

	fc.send(t, change(m.ID, rev+2, "chats/room1/x"))
	ev = nextEvent(t, sub)
	if ev.Kind != client.KindChange || ev.Type != client.TypeSet || ev.UpdateTime != "2025-01-01T00:00:01Z" ||
		string(ev.Data) != fmt.Sprintf(`{"path":"chats/room1/x","rev":%d}`, rev+2) {
		t.Fatalf("set event = %+v", ev)
	}
}

// drops are the ways a connection can drop and be resumed.
var drops = []struct {
	name string
	drop func(c *client.Conn, fc *fconn)
}{
	{"server crash", func(_ *client.Conn, fc *fconn) { _ = fc.ws.CloseNow() }},
	{"client network drop", func(c *client.Conn, _ *fconn) { c.Drop() }},
	{"4008 slow_consumer", func(_ *client.Conn, fc *fconn) {
		b, _ := json.Marshal(map[string]string{"op": "error", "code": "slow_consumer", "message": "too slow"})
		_ = fc.ws.Write(context.Background(), websocket.MessageText, b)
		_ = fc.ws.Close(4008, "slow_consumer")
	}},
	{"4009 lagged", func(_ *client.Conn, fc *fconn) { _ = fc.ws.Close(4009, "lagged") }},
	{"1001 going away", func(_ *client.Conn, fc *fconn) { _ = fc.ws.Close(websocket.StatusGoingAway, "shutdown") }},
}

func TestReconnectResumes(t *testing.T) {
	for _, d := range drops {
		t.Run(d.name, func(t *testing.T) {
			f := newFake(t)
			c, fc := dial(t, f, reconnecting)
			sub, m := subscribe(t, c, fc, "chats/room1", 10)
			fc.send(t, change(m.ID, 11, "chats/room1/a"))
			fc.send(t, change(m.ID, 12, "chats/room1/b"))
			fc.send(t, change(m.ID, 12, "chats/room1/c"))
			expectEvents(t, sub, "change 11 chats/room1/a", "change 12 chats/room1/b", "change 12 chats/room1/c")

			// The drop cuts transaction 12 after two of its three changes.
			d.drop(c, fc)
			fc2 := f.accept(t)
			if fc2.hdr.Get("Authorization") != "Bearer "+goodToken {
				t.Fatal("the reconnect did not authenticate")
			}
			m2 := fc2.expect(t, "subscribe")
			if m2.ID != m.ID || m2.Collection != "chats/room1" || !m2.Prefix {
				t.Fatalf("resubscribe = %+v, first subscribe %+v", m2, m)
			}
			// The last revision came from changes, so its transaction may be
			// incomplete: the client resumes from the revision before it.
			if m2.Since == nil || *m2.Since != 11 {
				t.Fatalf("resubscribe since = %v, want 11", m2.Since)
			}
			// The server replays everything above 11: the two changes of 12
			// the client has, the one it missed, then 13.
			fc2.send(t, change(m.ID, 12, "chats/room1/b"))
			fc2.send(t, change(m.ID, 12, "chats/room1/c"))
			fc2.send(t, change(m.ID, 12, "chats/room1/d"))
			fc2.send(t, change(m.ID, 13, "chats/room1/e"))
			fc2.send(t, op("resumed", m.ID, 13))
			fc2.send(t, change(m.ID, 11, "chats/room1/late")) // stale: dropped
			fc2.send(t, change(m.ID, 13, "chats/room1/e"))    // at the boundary: dropped
			fc2.send(t, change(m.ID, 14, "chats/room1/f"))
			expectEvents(t, sub, "change 12 chats/room1/d", "change 13 chats/room1/e", "resumed 13", "change 14 chats/room1/f")
			if c.Reconnects() != 1 {
				t.Fatalf("reconnects = %d", c.Reconnects())
			}

			// Resumed from a snapshot or resumed boundary: since is exactly
			// the last revision.
			fc2.send(t, op("resumed", m.ID, 20)) // e.g. the replay reached 20
			expectEvents(t, sub, "resumed 20")
			d.drop(c, fc2)
			fc3 := f.accept(t)
			m3 := fc3.expect(t, "subscribe")
			if m3.Since == nil || *m3.Since != 20 {
				t.Fatalf("second resubscribe since = %v, want 20", m3.Since)
			}
			fc3.send(t, op("resumed", m.ID, 20))
			fc3.send(t, change(m.ID, 21, "chats/room1/g"))
			expectEvents(t, sub, "resumed 20", "change 21 chats/room1/g")
			if c.Reconnects() != 2 || sub.Revision() != 21 {
				t.Fatalf("reconnects = %d, revision %d", c.Reconnects(), sub.Revision())
			}
		})
	}
}

func TestReconnectAfterSnapshotResumesFromIt(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	other, mo := subscribe(t, c, fc, "users/u1", 10)
	_ = fc.ws.CloseNow()
	fc2 := f.accept(t)
	got := map[string]msg{}
	for range 2 {
		m := fc2.expect(t, "subscribe")
		got[m.ID] = m
	}
	for _, id := range []string{m.ID, mo.ID} {
		if s := got[id].Since; s == nil || *s != 10 {
			t.Fatalf("resubscribe %s since = %v, want 10", id, s)
		}
	}
	fc2.send(t, op("resumed", m.ID, 10))
	fc2.send(t, op("resumed", mo.ID, 10))
	fc2.send(t, change(m.ID, 11, "chats/room1/a"))
	fc2.send(t, change(mo.ID, 12, "users/u1"))
	expectEvents(t, sub, "resumed 10", "change 11 chats/room1/a")
	expectEvents(t, other, "resumed 10", "change 12 users/u1")
}

func TestReconnectBeforeSnapshotCompletes(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	res := subscribeAsync(c, "chats/room1", true)
	m := fc.expect(t, "subscribe")
	fc.send(t, snapshot(m.ID, 10, true, doc("chats/room1/a", 1)))
	_ = fc.ws.CloseNow()
	fc2 := f.accept(t)
	m2 := fc2.expect(t, "subscribe")
	if m2.ID != m.ID || m2.Since != nil {
		t.Fatalf("resubscribe = %+v: want a fresh snapshot", m2)
	}
	fc2.send(t, snapshot(m.ID, 11, true, doc("chats/room1/a", 1)))
	fc2.send(t, snapshot(m.ID, 11, false, doc("chats/room1/b", 11)))
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := len(r.sub.Documents()); n != 2 || r.sub.Revision() != 11 {
		t.Fatalf("documents %d revision %d: pages of the dropped snapshot kept", n, r.sub.Revision())
	}
}

func TestReconnectRetriesWithBackoff(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	f.refuse.Store(3) // three 503s before the node is back
	_ = fc.ws.CloseNow()
	fc2 := f.accept(t)
	fc2.expect(t, "subscribe")
	fc2.send(t, op("resumed", m.ID, 10))
	expectEvents(t, sub, "resumed 10")
	if n := f.dials.Load(); n != 5 {
		t.Fatalf("dials = %d, want 1 + 3 refused + 1", n)
	}
	if c.Reconnects() != 1 {
		t.Fatalf("reconnects = %d", c.Reconnects())
	}
}

func TestReconnectRefusedIsFinal(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, _ := subscribe(t, c, fc, "chats/room1", 10)
	f.token.Store("ebt_other") // the session was revoked meanwhile
	_ = fc.ws.CloseNow()
	waitEnded(t, sub)
	<-c.Done()
	var e *client.Error
	if !errors.As(c.Err(), &e) || e.Status != http.StatusUnauthorized {
		t.Fatalf("Conn.Err = %v", c.Err())
	}
	if !errors.As(sub.Err(), &e) {
		t.Fatalf("Subscription.Err = %v", sub.Err())
	}
	if n := f.dials.Load(); n != 2 {
		t.Fatalf("dials = %d: a refused reconnect was retried", n)
	}
}

func TestSubscribeWhileReconnecting(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	_ = fc.ws.CloseNow()
	res := subscribeAsync(c, "users/u1", false) // on the old, the new or no session
	fc2 := f.accept(t)
	ids := map[string]bool{}
	for range 2 {
		m := fc2.expect(t, "subscribe")
		if ids[m.ID] {
			t.Fatalf("subscribe %s sent twice on one connection", m.ID)
		}
		ids[m.ID] = true
		if m.Collection == "users/u1" {
			fc2.send(t, snapshot(m.ID, 10, false, doc("users/u1", 5)))
		} else {
			fc2.send(t, op("resumed", m.ID, 10))
		}
	}
	r := wait(t, res)
	if r.err != nil || len(r.sub.Documents()) != 1 {
		t.Fatalf("Subscribe while reconnecting: %v", r.err)
	}
	expectEvents(t, sub, "resumed 10")
	fc2.send(t, change(m.ID, 11, "chats/room1/a"))
	expectEvents(t, sub, "change 11 chats/room1/a")
}

func TestFinalCloseDoesNotReconnect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  websocket.StatusCode
		error string
	}{
		{"4001 session ended", 4001, "session_expired"},
		{"4003 origin", 4003, "origin_not_allowed"},
		{"1008 policy", websocket.StatusPolicyViolation, "invalid_argument"},
		{"1000 normal", websocket.StatusNormalClosure, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c, fc := dial(t, f, reconnecting)
			sub, _ := subscribe(t, c, fc, "chats/room1", 10)
			if tc.error != "" {
				fc.send(t, map[string]string{"op": "error", "code": tc.error, "message": "bye"})
			}
			_ = fc.ws.Close(tc.code, "bye")
			waitEnded(t, sub)
			select {
			case <-c.Done():
			case <-time.After(waitFor):
				t.Fatal("the Conn did not end")
			}
			if got := websocket.CloseStatus(c.Err()); got != tc.code {
				t.Fatalf("close status %d, want %d (%v)", got, tc.code, c.Err())
			}
			var e *client.Error
			if tc.error != "" && (!errors.As(sub.Err(), &e) || e.Code != tc.error) {
				t.Fatalf("Subscription.Err = %v, want the server's %s", sub.Err(), tc.error)
			}
			// Done means the supervisor is gone: nothing can dial any more.
			if n := f.dials.Load(); n != 1 || c.Reconnects() != 0 {
				t.Fatalf("dials = %d reconnects = %d after a final close", n, c.Reconnects())
			}
			if _, ok := <-c.Notifications(); ok {
				t.Fatal("Notifications still open")
			}
			if _, err := c.Subscribe(context.Background(), "x", false); err == nil {
				t.Fatal("Subscribe on an ended Conn succeeded")
			}
		})
	}
}

func TestNoReconnectWithoutConfig(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	sub, _ := subscribe(t, c, fc, "chats/room1", 10)
	_ = fc.ws.Close(4008, "slow_consumer")
	waitEnded(t, sub)
	<-c.Done()
	if websocket.CloseStatus(sub.Err()) != 4008 || f.dials.Load() != 1 {
		t.Fatalf("Err = %v dials %d", sub.Err(), f.dials.Load())
	}
}

func TestResetDeliversResetAndSnapshot(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	fc.send(t, change(m.ID, 11, "chats/room1/a"))
	expectEvents(t, sub, "change 11 chats/room1/a")
	c.Drop()
	fc2 := f.accept(t)
	m2 := fc2.expect(t, "subscribe")
	if m2.Since == nil || *m2.Since != 10 {
		t.Fatalf("since = %v", m2.Since)
	}
	fc2.send(t, op("reset", m.ID, 50))
	fc2.send(t, snapshot(m.ID, 60, true, doc("chats/room1/a", 55), doc("chats/room1/b", 58)))
	fc2.send(t, snapshot(m.ID, 60, false, doc("chats/room1/c", 60)))
	fc2.send(t, change(m.ID, 60, "chats/room1/c")) // not above the snapshot: dropped
	fc2.send(t, change(m.ID, 61, "chats/room1/d"))
	expectEvents(t, sub, "reset 50")
	ev := nextEvent(t, sub)
	if ev.Kind != client.KindSnapshot || ev.Revision != 60 || len(ev.Documents) != 3 || ev.Documents[2].Collection != "chats/room1/c" {
		t.Fatalf("snapshot event = %+v", ev)
	}
	expectEvents(t, sub, "change 61 chats/room1/d")
	if len(sub.Documents()) != 3 || sub.Revision() != 61 {
		t.Fatalf("documents %d revision %d", len(sub.Documents()), sub.Revision())
	}
}

func TestSubscribeSince(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)

	res := subscribeAsync(c, "chats/room1", true, client.Since(5))
	m := fc.expect(t, "subscribe")
	if m.Since == nil || *m.Since != 5 {
		t.Fatalf("since = %v", m.Since)
	}
	// A replay longer than the event buffer must not hold up Subscribe.
	for i := range 20 {
		fc.send(t, change(m.ID, uint64(6+i), "chats/room1/a"))
	}
	fc.send(t, op("resumed", m.ID, 30))
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i := range 20 {
		expectEvents(t, r.sub, fmt.Sprintf("change %d chats/room1/a", 6+i))
	}
	fc.send(t, change(m.ID, 31, "chats/room1/b"))
	expectEvents(t, r.sub, "change 31 chats/room1/b") // no event for the resumed that completed Subscribe
	if r.sub.Revision() != 31 || len(r.sub.Documents()) != 0 {
		t.Fatalf("revision %d documents %d", r.sub.Revision(), len(r.sub.Documents()))
	}

	t.Run("reset", func(t *testing.T) {
		res := subscribeAsync(c, "users/u1", false, client.Since(1))
		m := fc.expect(t, "subscribe")
		fc.send(t, op("reset", m.ID, 20))
		fc.send(t, snapshot(m.ID, 31, false, doc("users/u1", 25)))
		r := wait(t, res)
		if r.err != nil {
			t.Fatal(r.err)
		}
		expectEvents(t, r.sub, "reset 20", "snapshot 31")
		if len(r.sub.Documents()) != 1 || r.sub.Revision() != 31 {
			t.Fatalf("documents %d revision %d", len(r.sub.Documents()), r.sub.Revision())
		}
	})
}

func TestSubscriptionErrors(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)

	res := subscribeAsync(c, "secret/x", false)
	m := fc.expect(t, "subscribe")
	fc.send(t, map[string]string{"op": "error", "id": m.ID, "code": "forbidden", "message": "rules deny read"})
	r := wait(t, res)
	var e *client.Error
	if !errors.As(r.err, &e) || e.Code != "forbidden" || e.Message != "rules deny read" {
		t.Fatalf("Subscribe = %v, want forbidden", r.err)
	}

	// Later, the rules stop allowing a live subscription.
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	fc.send(t, change(m.ID, 11, "chats/room1/a"))
	fc.send(t, map[string]string{"op": "error", "id": m.ID, "code": "forbidden", "message": "no longer"})
	expectEvents(t, sub, "change 11 chats/room1/a")
	waitEnded(t, sub)
	if !errors.As(sub.Err(), &e) || e.Code != "forbidden" {
		t.Fatalf("Err = %v", sub.Err())
	}
	// The connection and its other subscriptions carry on.
	other, mo := subscribe(t, c, fc, "users/u1", 11)
	fc.send(t, change(mo.ID, 12, "users/u1"))
	expectEvents(t, other, "change 12 users/u1")
}

func TestSubscribeContext(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Subscribe(ctx, "chats/room1", true)
		errc <- err
	}()
	m := fc.expect(t, "subscribe")
	cancel()
	if err := wait(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe = %v", err)
	}
	// The abandoned subscription is unsubscribed on the server.
	if u := fc.expect(t, "unsubscribe"); u.ID != m.ID {
		t.Fatalf("unsubscribe %s, want %s", u.ID, m.ID)
	}
	fc.send(t, snapshot(m.ID, 10, false)) // late answer: ignored
	sub, _ := subscribe(t, c, fc, "users/u1", 10)
	if sub.ID() == m.ID {
		t.Fatal("id reused")
	}
}

func TestUnsubscribe(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	sub, m := subscribe(t, c, fc, "chats/room1", 10)
	fc.send(t, change(m.ID, 11, "chats/room1/a"))
	// Wait until the change is buffered: a round trip through Ping.
	pingDone := make(chan error, 1)
	go func() { pingDone <- c.Ping(context.Background()) }()
	fc.expect(t, "ping")
	fc.send(t, map[string]string{"op": "pong"})
	if err := wait(t, pingDone); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		done <- sub.Unsubscribe(ctx)
	}()
	u := fc.expect(t, "unsubscribe")
	if u.ID != m.ID {
		t.Fatalf("unsubscribe id %q, want %q", u.ID, m.ID)
	}
	fc.send(t, change(m.ID, 12, "chats/room1/b")) // in flight before the server saw it
	fc.send(t, map[string]string{"op": "unsubscribed", "id": m.ID})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	// Buffered events stay readable, then Events is closed.
	expectEvents(t, sub, "change 11 chats/room1/a")
	waitEnded(t, sub)
	if !errors.Is(sub.Err(), client.ErrUnsubscribed) {
		t.Fatalf("Err = %v", sub.Err())
	}
	if err := sub.Unsubscribe(context.Background()); err != nil {
		t.Fatalf("second Unsubscribe: %v", err)
	}
}

func TestNotificationsAndPing(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	fc.send(t, map[string]any{"op": "notification", "id": "n1", "title": "Hi", "body": "there", "data": map[string]int{"k": 1}, "revision": 9})
	n := wait(t, c.Notifications())
	if n.ID != "n1" || n.Title != "Hi" || n.Body != "there" || string(n.Data) != `{"k":1}` || n.Revision != 9 {
		t.Fatalf("notification = %+v", n)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Ping(context.Background()) }()
	fc.expect(t, "ping")
	fc.send(t, map[string]string{"op": "pong"})
	if err := wait(t, errc); err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, _ := subscribe(t, c, fc, "chats/room1", 10)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := websocket.CloseStatus(fc.waitClosed(t)); got != websocket.StatusNormalClosure {
		t.Fatalf("the server saw close status %d, want 1000", got)
	}
	waitEnded(t, sub)
	if !errors.Is(sub.Err(), client.ErrClosed) || !errors.Is(c.Err(), client.ErrClosed) {
		t.Fatalf("Err = %v / %v", sub.Err(), c.Err())
	}
	if c.Reconnects() != 0 || f.dials.Load() != 1 {
		t.Fatal("Close reconnected")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseNow(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, reconnecting)
	sub, _ := subscribe(t, c, fc, "chats/room1", 10)
	if err := c.CloseNow(); err != nil {
		t.Fatal(err)
	}
	// No close frame: the server sees the TCP connection go.
	if got := websocket.CloseStatus(fc.waitClosed(t)); got != -1 {
		t.Fatalf("the server saw close status %d, want none", got)
	}
	waitEnded(t, sub)
	if !errors.Is(sub.Err(), client.ErrClosed) || f.dials.Load() != 1 {
		t.Fatalf("Err = %v dials %d", sub.Err(), f.dials.Load())
	}
}

// TestCloseWhileBlocked: Close must not hang on a read loop waiting for an
// application that stopped reading.
func TestCloseWhileBlocked(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f, func(cfg *client.Config) { cfg.EventBuffer = 1 })
	_, m := subscribe(t, c, fc, "chats/room1", 10)
	for i := range 3 {
		fc.send(t, change(m.ID, uint64(11+i), "chats/room1/a"))
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestBoundedBuffer: an application that does not read makes the server's
// writes block; the client does not buffer without bound.
func TestBoundedBuffer(t *testing.T) {
	const (
		buffer    = 16
		frames    = 2000
		frameSize = 64 << 10 // 2000 frames = 128 MiB if the client buffered them all
	)
	f := newFake(t)
	c, fc := dial(t, f, func(cfg *client.Config) { cfg.EventBuffer = buffer })
	sub, m := subscribe(t, c, fc, "chats/room1", 10)

	payload := strings.Repeat("x", frameSize)
	written := 0
	for i := range frames {
		b, _ := json.Marshal(map[string]any{"op": "change", "id": m.ID, "revision": 11 + i,
			"collection": "chats/room1/a", "type": "set", "data": map[string]string{"p": payload}})
		// A write that cannot finish within the deadline means the client
		// stopped reading: the server's slow-consumer protection would
		// take over here.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := fc.ws.Write(ctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			break
		}
		written++
	}
	t.Logf("the fake server wrote %d frames of %d KiB before blocking (event buffer %d)", written, frameSize>>10, buffer)
	if written < buffer {
		t.Fatalf("only %d frames written: the event buffer was not used", written)
	}
	// What the client may hold: its buffer, one event in hand, and the
	// socket buffers of both kernels (a few MiB on loopback).
	if written >= frames/2 {
		t.Fatalf("%d of %d frames written: the client buffers without bound", written, frames)
	}
	// The application wakes up: every frame the server wrote arrives, in
	// order, then the connection the server gave up on ends.
	got := 0
	for ev := range sub.Events() {
		if ev.Revision != uint64(11+got) {
			t.Fatalf("event %d has revision %d", got, ev.Revision)
		}
		got++
	}
	if got > written {
		t.Fatalf("%d events from %d frames", got, written)
	}
	<-c.Done()
}
