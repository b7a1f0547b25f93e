package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/edgebase/edgebase/realtime/client"
)

// The session revision travels with every subscribe (minRevision), moves
// forward with what the socket delivers, and survives a reconnect.
func TestSessionRevisionOnTheSocket(t *testing.T) {
	f := newFake(t)
	sess := client.NewSessionRevision(42)
	c, fc := dial(t, f, reconnecting, func(cfg *client.Config) { cfg.Session = sess })
	if c.Session() != sess {
		t.Fatal("Conn.Session is not the Config's")
	}
	res := subscribeAsync(c, "chats/room1", true)
	m := fc.expect(t, "subscribe")
	if m.MinRevision != 42 {
		t.Fatalf("subscribe minRevision = %d, want the session's 42", m.MinRevision)
	}
	fc.send(t, snapshot(m.ID, 50, false, doc("chats/room1/a", 45)))
	r := wait(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := sess.Revision(); got != 50 {
		t.Fatalf("after a snapshot at 50 the session is at %d", got)
	}
	fc.send(t, change(m.ID, 51, "chats/room1/b"))
	expectEvents(t, r.sub, "change 51 chats/room1/b")
	if got := sess.Revision(); got != 51 {
		t.Fatalf("after a change at 51 the session is at %d", got)
	}
	// Another client (say a REST write elsewhere) moves the session on:
	// the resubscribe after a drop asks for it.
	sess.Observe(60)
	sess.Observe(55) // never backwards
	c.Drop()
	fc2 := f.accept(t)
	m2 := fc2.expect(t, "subscribe")
	if m2.Since == nil || *m2.Since != 50 || m2.MinRevision != 60 {
		t.Fatalf("resubscribe since %v minRevision %d, want since 50 (51 may be incomplete) and minRevision 60", m2.Since, m2.MinRevision)
	}
}

func TestNoSessionSendsNoMinRevision(t *testing.T) {
	f := newFake(t)
	c, fc := dial(t, f)
	if c.Session() != nil {
		t.Fatal("a Conn without Config.Session has one")
	}
	_, m := subscribe(t, c, fc, "a", 7)
	if m.MinRevision != 0 {
		t.Fatalf("minRevision %d without a session", m.MinRevision)
	}
}

// restRecorder is a stand-in REST node that records the X-Min-Revision of
// every request and answers with fixed revisions.
type restRecorder struct {
	mu     sync.Mutex
	minRev []string // per request, in order: "METHOD path=header"
}

func (rr *restRecorder) handler(w http.ResponseWriter, r *http.Request) {
	rr.mu.Lock()
	rr.minRev = append(rr.minRev, r.Method+" "+r.URL.Path+"="+r.Header.Get("X-Min-Revision"))
	rr.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/db" && r.Method == http.MethodGet:
		if r.URL.Query().Get("collection") == "missing/x" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no document"}}`))
			return
		}
		if r.URL.Query().Get("consistency") != "local" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"test wants local"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"collection": r.URL.Query().Get("collection"), "data": map[string]any{"v": 1}, "revision": 70})
	case r.URL.Path == "/api/db" && r.Method == http.MethodPost:
		w.Header().Set("X-Revision", "80")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"collection": "a/b", "revision": 80})
	case r.URL.Path == "/api/db" && r.Method == http.MethodDelete:
		w.Header().Set("X-Revision", "81")
		_ = json.NewEncoder(w).Encode(map[string]any{"deleted": true, "revision": 81})
	case r.URL.Path == "/api/db/batch":
		w.Header().Set("X-Revision", "90")
		_ = json.NewEncoder(w).Encode(map[string]any{"revision": 90, "results": []any{}})
	case r.URL.Path == "/api/auth/users/u1":
		w.Header().Set("X-Revision", "95")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "u1"})
	default:
		http.NotFound(w, r)
	}
}

func (rr *restRecorder) take() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	out := rr.minRev
	rr.minRev = nil
	return out
}

func TestSessionRevisionOverREST(t *testing.T) {
	rr := &restRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(rr.handler))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	sess := client.NewSessionRevision(0)
	cfg := client.Config{URL: srv.URL, Token: goodToken, ProjectID: projectID, APIKey: apiKey, Session: sess}

	// A fresh session sends nothing; the document's revision is seen.
	d, err := client.GetDoc(ctx, cfg, "a/b", client.Local())
	if err != nil || d.Revision != 70 || string(d.Data) != `{"v":1}` {
		t.Fatalf("GetDoc = %+v, %v", d, err)
	}
	if sess.Revision() != 70 {
		t.Fatalf("session %d after reading a document at 70", sess.Revision())
	}
	// Writes move it on and carry no X-Min-Revision.
	if rev, err := client.SetDoc(ctx, cfg, "a/b", map[string]any{"v": 2}); err != nil || rev != 80 {
		t.Fatalf("SetDoc = %d, %v", rev, err)
	}
	if rev, err := client.DeleteDoc(ctx, cfg, "a/b"); err != nil || rev != 81 {
		t.Fatalf("DeleteDoc = %d, %v", rev, err)
	}
	if sess.Revision() != 81 {
		t.Fatalf("session %d after a delete at 81", sess.Revision())
	}
	// The next read asks for the session's revision; an explicit higher
	// minimum wins, a lower one does not.
	if _, err := client.GetDoc(ctx, cfg, "a/b", client.Local()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetDoc(ctx, cfg, "a/b", client.Local(), client.MinRevision(85)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetDoc(ctx, cfg, "a/b", client.Local(), client.MinRevision(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Batch(ctx, cfg, []client.Write{{Op: "delete", Collection: "a/c"}}); err != nil {
		t.Fatal(err)
	}
	// Accounts shares the session: its GET carries 90, its answer's
	// X-Revision is observed.
	acc := &client.Accounts{BaseURL: srv.URL, ProjectID: projectID, APIKey: apiKey, Session: sess}
	if _, err := acc.GetUser(ctx, goodToken, "u1"); err != nil {
		t.Fatal(err)
	}
	if sess.Revision() != 95 {
		t.Fatalf("session %d after an answer with X-Revision 95", sess.Revision())
	}
	// A missing document is a 404 *Error; the session does not move.
	_, err = client.GetDoc(ctx, cfg, "missing/x")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != "not_found" {
		t.Fatalf("GetDoc of a missing document: %v", err)
	}
	// Without a session: no header.
	noSess := cfg
	noSess.Session = nil
	if _, err := client.GetDoc(ctx, noSess, "a/b", client.Local()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GET /api/db=", "POST /api/db=", "DELETE /api/db=",
		"GET /api/db=81", "GET /api/db=85", "GET /api/db=81",
		"POST /api/db/batch=", "GET /api/auth/users/u1=90", "GET /api/db=95", "GET /api/db=",
	}
	got := rr.take()
	if len(got) != len(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("request %d: %q, want %q (all: %q)", i, got[i], want[i], got)
		}
	}
}

func TestSessionRevisionObserveConcurrently(t *testing.T) {
	var s client.SessionRevision // the zero value works
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				s.Observe(uint64(i*8 + g))
			}
		}()
	}
	wg.Wait()
	if got := s.Revision(); got != 999*8+7 {
		t.Fatalf("Revision = %d, want the maximum %d", got, 999*8+7)
	}
	var nilSess *client.SessionRevision
	nilSess.Observe(5)
	if nilSess.Revision() != 0 {
		t.Fatal("a nil session has a revision")
	}
}
