package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

// auditEvent is an event as GET /api/auth/audit answers it.
type auditEvent struct {
	ID      string            `json:"id"`
	Time    string            `json:"time"`
	Type    string            `json:"type"`
	UserID  string            `json:"userId"`
	ActorID string            `json:"actorId"`
	Address string            `json:"address"`
	Detail  map[string]string `json:"detail"`
}

type auditPage struct {
	Events     []auditEvent `json:"events"`
	NextCursor string       `json:"nextCursor"`
}

// auditGet asks for one page as tok with the query q.
func (e *env) auditGet(t *testing.T, tok string, q url.Values) reply {
	t.Helper()
	h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return e.mustSend(t, http.MethodGet, "/api/auth/audit?"+q.Encode(), h, "")
}

// auditAll walks every page as the owner.
func (e *env) auditAll(t *testing.T, q url.Values) []auditEvent {
	t.Helper()
	var all []auditEvent
	for range 1000 {
		r := e.auditGet(t, e.p.OwnerToken, q)
		if r.Status != http.StatusOK {
			t.Fatalf("audit %v: status %d: %s", q, r.Status, r.Body)
		}
		checkJSONResponse(t, r)
		var members map[string]json.RawMessage
		mustDecode(t, r.Body, &members)
		if len(members) != 2 || members["events"] == nil || members["nextCursor"] == nil {
			t.Fatalf("page is not {events, nextCursor}: %s", r.Body)
		}
		var p auditPage
		mustDecode(t, r.Body, &p)
		all = append(all, p.Events...)
		if p.NextCursor == "" {
			return all
		}
		q = cloneValues(q)
		q.Set("cursor", p.NextCursor)
	}
	t.Fatal("audit paging does not end")
	return nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// TestAuditAPI reads the audit log through HTTP: the registrations and the
// owner's login are there, newest first, with every member; pages and
// filters; only the project's owners may read it, and bad arguments are
// refused naming the field without changing the log.
func TestAuditAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := e.auditAll(t, url.Values{})
	var got []string
	for _, ev := range all {
		got = append(got, ev.Type+":"+ev.UserID)
	}
	want := []string{"register:" + e.other.ID, "register:" + e.user.ID, "login:" + e.p.OwnerID}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for _, ev := range all {
		if ev.ID == "" || ev.Time == "" || ev.ActorID != ev.UserID || ev.Detail == nil {
			t.Errorf("event %+v lacks a member", ev)
		}
	}
	// One page at a time: the same events.
	if one := e.auditAll(t, url.Values{"limit": {"1"}}); !slices.EqualFunc(one, all, func(a, b auditEvent) bool { return a.ID == b.ID }) {
		t.Fatalf("pages of 1: %+v, want %+v", one, all)
	}
	if f := e.auditAll(t, url.Values{"userId": {e.user.ID}}); len(f) != 1 || f[0].Type != "register" {
		t.Fatalf("events of the user: %+v", f)
	}
	if f := e.auditAll(t, url.Values{"type": {"login"}, "limit": {"100"}}); len(f) != 1 || f[0].UserID != e.p.OwnerID {
		t.Fatalf("logins: %+v", f)
	}
	// A logout through the API is on the next read (strong), from any caller's view.
	lr := e.login(t, e.p, e.user.Email, userPassword)
	if lr.Status != http.StatusOK {
		t.Fatalf("login: %d %s", lr.Status, lr.Body)
	}
	var sess struct{ Token string }
	mustDecode(t, lr.Body, &sess)
	e.mustLogout(t, e.p, sess.Token)
	if f := e.auditAll(t, url.Values{"userId": {e.user.ID}, "limit": {"2"}}); len(f) != 3 || f[0].Type != "logout" || f[1].Type != "login" || f[1].Address == "" {
		t.Fatalf("after login and logout, the user's events: %+v", f)
	}
	before := e.auditAll(t, url.Values{})

	other := e.c.CreateProject(0)
	for _, c := range []struct {
		name   string
		method string
		query  string
		hdr    map[string]string
		status int
		code   string
		field  string
	}{
		{name: "limit not a number", query: "limit=ten", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit 0", query: "limit=0", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit empty", query: "limit=", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit 101", query: "limit=101", status: 400, code: "invalid_argument", field: "limit"},
		{name: "limit negative", query: "limit=-1", status: 400, code: "invalid_argument", field: "limit"},
		{name: "cursor garbage", query: "cursor=abc", status: 400, code: "invalid_argument", field: "cursor"},
		{name: "cursor with a path", query: "cursor=" + url.QueryEscape("00000000000000000001-ab/x"), status: 400, code: "invalid_argument", field: "cursor"},
		{name: "unknown type", query: "type=login-failed", status: 400, code: "invalid_argument", field: "type"},
		{name: "a user", hdr: map[string]string{"Authorization": "Bearer " + e.user.Token}, status: 403, code: "forbidden"},
		{name: "no token", hdr: map[string]string{"Authorization": ""}, status: 401, code: "missing_token"},
		{name: "bad token", hdr: map[string]string{"Authorization": "Bearer ebt_nope"}, status: 401, code: "invalid_token"},
		{name: "no key", hdr: map[string]string{"X-API-Key": ""}, status: 401, code: "missing_api_key"},
		{name: "wrong key", hdr: map[string]string{"X-API-Key": other.APIKey}, status: 401, code: "invalid_api_key"},
		{name: "another project's owner", hdr: map[string]string{"Authorization": "Bearer " + other.OwnerToken}, status: 403, code: "project_mismatch"},
		{name: "POST", method: http.MethodPost, status: 405, code: "method_not_allowed"},
	} {
		h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + e.p.OwnerToken}
		for k, v := range c.hdr {
			h[k] = v
		}
		method := c.method
		if method == "" {
			method = http.MethodGet
		}
		r := e.mustSend(t, method, "/api/auth/audit?"+c.query, h, "")
		field := c.field
		if field == "" {
			field = "-"
		}
		t.Run(c.name, func(t *testing.T) { checkError(t, r, c.status, c.code, field) })
	}
	if after := e.auditAll(t, url.Values{}); !slices.EqualFunc(after, before, func(a, b auditEvent) bool { return a.ID == b.ID }) {
		t.Fatalf("refusals changed the log: %d events, %d before", len(after), len(before))
	}
}

// TestAuditAPIOnACluster: an event committed through one node is on the
// next page read through any other (the read is strong), and every node
// answers the same page.
func TestAuditAPIOnACluster(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	p := c.CreateProject(0)
	key := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	owner := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey, "Authorization": "Bearer " + p.OwnerToken}
	var pages [3]string
	for i := range 3 {
		var reg struct{ User struct{ ID string } }
		email := fmt.Sprintf("n%d@example.com", i)
		if st := c.Do(i, http.MethodPost, "/api/auth", key, map[string]string{"action": "register", "email": email, "password": userPassword}, &reg); st != http.StatusCreated {
			t.Fatalf("register through n%d: %d", i+1, st)
		}
		// At once, through the next node: the registration is the newest event.
		var page auditPage
		j := (i + 1) % 3
		if st := c.Do(j, http.MethodGet, "/api/auth/audit?limit=1", owner, nil, &page); st != http.StatusOK {
			t.Fatalf("audit through n%d: %d", j+1, st)
		}
		if len(page.Events) != 1 || page.Events[0].Type != "register" || page.Events[0].UserID != reg.User.ID {
			t.Fatalf("newest event through n%d after a register through n%d: %+v, want register of %s", j+1, i+1, page.Events, reg.User.ID)
		}
	}
	for i := range 3 {
		var page auditPage
		if st := c.Do(i, http.MethodGet, "/api/auth/audit", owner, nil, &page); st != http.StatusOK {
			t.Fatalf("audit through n%d: %d", i+1, st)
		}
		b, _ := json.Marshal(page)
		pages[i] = string(b)
		if len(page.Events) != 4 { // the owner's login and three registrations
			t.Fatalf("n%d: %d events, want 4", i+1, len(page.Events))
		}
	}
	if pages[0] != pages[1] || pages[1] != pages[2] {
		t.Fatalf("the nodes answer different pages:\n%s\n%s\n%s", pages[0], pages[1], pages[2])
	}
}
