package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/httpapi"
	"github.com/edgebase/edgebase/raftstore"
)

// staleAccounts answers AuthenticateGuard for one token with an answer read
// earlier: a node whose local state has not applied a later logout yet.
type staleAccounts struct {
	*auth.Service
	tok   string
	p     *auth.Principal
	guard []raftstore.Cond
}

func (s staleAccounts) AuthenticateGuard(tok string) (*auth.Principal, []raftstore.Cond, error) {
	if tok == s.tok {
		return s.p, s.guard, nil
	}
	return s.Service.AuthenticateGuard(tok)
}

// A write checks its token on local state (no strong read) but carries the
// revisions that check read: a token revoked before the write commits is
// refused, however stale the node that checked it.
func TestDB_WriteCheckedOnStaleStateIsFenced(t *testing.T) {
	e := newEnv(t)
	n := e.c.Nodes[0].Node
	serve := func(tok string) string {
		p, guard, err := n.Accounts.AuthenticateGuard(tok)
		if err != nil {
			t.Fatalf("AuthenticateGuard: %v", err)
		}
		api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store,
			Accounts: staleAccounts{Service: n.Accounts, tok: tok, p: p, guard: guard}})
		if err != nil {
			t.Fatalf("httpapi.New: %v", err)
		}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		return srv.URL
	}

	// The stale answer is used: a valid token writes through it.
	e.base = serve(e.user.Token)
	mine := "users/" + e.user.ID + "/notes/a"
	r := e.mustSend(t, http.MethodPost, "/api/db", bearer(e.user.Token), `{"collection":"`+mine+`","data":{"x":1}}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("write with a valid token: status %d: %s", r.Status, r.Body)
	}

	// Revoked after the (stale) check: every write is refused, nothing stored.
	e.base = e.c.Nodes[0].URL()
	acc := e.mustRegister(t, e.p, "")
	a, b := "users/"+acc.ID+"/notes/a", "users/"+acc.ID+"/notes/b"
	if r := e.mustSend(t, http.MethodPost, "/api/db", bearer(acc.Token), `{"collection":"`+a+`","data":{"x":1}}`); r.Status != http.StatusCreated {
		t.Fatalf("write before logout: status %d: %s", r.Status, r.Body)
	}
	stale := serve(acc.Token)
	e.mustLogout(t, e.p, acc.Token)
	e.base = stale
	for _, tc := range []struct{ method, target, body string }{
		{http.MethodPost, "/api/db", `{"collection":"` + b + `","data":{"x":1}}`},
		{http.MethodPost, "/api/db", `{"collection":"` + a + `","data":{"x":2}}`},
		{http.MethodPut, docQuery(a), `{"oldKey":"x","newKey":"x","value":3}`},
		{http.MethodDelete, docQuery(a), ``},
	} {
		r := e.mustSend(t, tc.method, tc.target, bearer(acc.Token), tc.body)
		checkError(t, r, http.StatusUnauthorized, "invalid_token", "")
	}
	e.base = e.c.Nodes[0].URL()
	if _, ok := e.get(t, b); ok {
		t.Fatal(b + " was written with a revoked token")
	}
	if d, ok := e.get(t, a); !ok || string(d.Data) != `{"x":1}` {
		t.Fatalf("%s = %+v (present %v), want {\"x\":1}", a, d, ok)
	}
}
