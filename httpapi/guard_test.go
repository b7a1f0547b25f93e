package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/httpapi"
	"github.com/edgebase/edgebase/node/nodetest"
)

// staleAccounts answers Caller for one token with an answer read earlier: a
// node whose local state has not applied a later logout yet.
type staleAccounts struct {
	*auth.Service
	tok string
	p   *auth.Principal
}

func (s staleAccounts) Caller(tok string) (*auth.Principal, error) {
	if tok == s.tok {
		return s.p, nil
	}
	return s.Service.Caller(tok)
}

// A write resolves its token on local state (no strong read), and Apply
// decides it against the session as committed: a token revoked before the
// write commits is refused, however stale the node that resolved it.
func TestDB_WriteCheckedOnStaleStateIsFenced(t *testing.T) {
	e := newEnv(t)
	n := e.c.Nodes[0].Node
	serve := func(tok string) string {
		p, err := n.Accounts.Caller(tok)
		if err != nil {
			t.Fatalf("Caller: %v", err)
		}
		api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store,
			Accounts: staleAccounts{Service: n.Accounts, tok: tok, p: p}})
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

// A write's caller is remembered from earlier requests (auth.Caller)
// instead of read again, and Apply decides the write against the session,
// the account and the rules as committed: whatever changed since (role,
// rules, a password change, the session's end) decides it, both ways, and
// nothing is stored that the committed state forbids.
func TestDB_RememberedCallerIsFenced(t *testing.T) {
	clk := nodetest.NewClock(time.Now())
	const ttl = time.Hour
	e := newEnvWith(t, nodetest.Options{Voters: 1, Clock: clk, SessionTTL: ttl})
	acc := e.mustRegister(t, e.p, "")
	own, elsewhere := "users/"+acc.ID+"/notes/", "users/"+e.other.ID+"/notes/"
	post := func(tok, path string) reply {
		t.Helper()
		return e.mustSend(t, http.MethodPost, "/api/db", bearer(tok), `{"collection":`+mustJSON(t, path)+`,"data":{"x":1}}`)
	}
	authAs := func(tok, body string) reply {
		t.Helper()
		return e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + tok}, body)
	}
	want := func(what string, r reply, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Body)
		}
	}
	absent := func(path string) {
		t.Helper()
		if d, ok := e.get(t, path); ok {
			t.Fatalf("%s was stored (%s) though fresh state forbids it", path, d.Data)
		}
	}

	want("first write (the caller is remembered)", post(acc.Token, own+"a"), http.StatusCreated)

	// Promoted: the remembered role (user) is refused elsewhere by the
	// rules, so the refusal is decided again on fresh state: allowed.
	want("promote", authAs(e.p.OwnerToken, setRoleBody(acc.ID, "owner")), http.StatusOK)
	want("write elsewhere right after the promotion", post(acc.Token, elsewhere+"b"), http.StatusCreated)

	// Demoted: the remembered role (owner) would allow it; the write's
	// guard on the account's revision refuses it at commit, and the fresh
	// decision is 403.
	want("demote", authAs(e.p.OwnerToken, setRoleBody(acc.ID, "user")), http.StatusOK)
	checkError(t, post(acc.Token, elsewhere+"c"), http.StatusForbidden, "forbidden", "")
	absent(elsewhere + "c")

	// Rules changed: the remembered rules allow a user's own notes; the new
	// ones do not.
	ownerOnly := `{"rules":[{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	want("owner-only rules", e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(e.p.OwnerToken), ownerOnly), http.StatusOK)
	checkError(t, post(acc.Token, own+"d"), http.StatusForbidden, "forbidden", "")
	absent(own + "d")
	userNotes := `{"rules":[{"match":"users/{uid}/**","read":"auth.uid == uid || auth.role == 'owner'","write":"auth.uid == uid || auth.role == 'owner'"},` +
		`{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	want("rules back", e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(e.p.OwnerToken), userNotes), http.StatusOK)
	want("own write under the restored rules", post(acc.Token, own+"e"), http.StatusCreated)

	// A password change revokes the account's other sessions: one that was
	// remembered is refused at commit, 401.
	var second struct{ Token string }
	r := e.login(t, e.p, acc.Email, userPassword)
	want("second login", r, http.StatusOK)
	mustDecode(t, r.Body, &second)
	want("write with the second session", post(second.Token, own+"f"), http.StatusCreated)
	want("change password", authAs(acc.Token, changePasswordBody(userPassword, "another fine password")), http.StatusOK)
	checkError(t, post(second.Token, own+"g"), http.StatusUnauthorized, "invalid_token", "")
	absent(own + "g")

	// The session's end is not in any revision: a remembered caller whose
	// session has expired by the service's clock is not used.
	r = e.login(t, e.p, acc.Email, "another fine password")
	want("third login", r, http.StatusOK)
	var third struct{ Token string }
	mustDecode(t, r.Body, &third)
	want("write with the third session", post(third.Token, own+"h"), http.StatusCreated)
	clk.Advance(ttl + time.Minute)
	checkError(t, post(third.Token, own+"i"), http.StatusUnauthorized, "invalid_token", "")
	r = e.login(t, e.p, "owner@example.com", "owner password 123") // the owner's session ended too
	want("owner login", r, http.StatusOK)
	var owner struct{ Token string }
	mustDecode(t, r.Body, &owner)
	e.p.OwnerToken = owner.Token
	absent(own + "i")
}
