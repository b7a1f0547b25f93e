package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/httpapi"
	"github.com/edgebase/edgebase/node/nodetest"
)

// The routes the admin console needs beyond the SDK's (issue 20): an
// owner's view of a user's sessions, the push reads, the operator's project
// list and leadership transfer.

// ownerSessions lists user uid's sessions as the owner.
func (e *env) ownerSessions(t *testing.T, uid string) []sessionJSON {
	t.Helper()
	r := e.mustSend(t, http.MethodGet, "/api/auth/users/"+uid+"/sessions", e.keyHeaders(e.p.OwnerToken), "")
	if r.Status != http.StatusOK {
		t.Fatalf("owner lists sessions of %s: %d %s", uid, r.Status, r.Body)
	}
	var out struct{ Sessions []sessionJSON }
	mustDecode(t, r.Body, &out)
	return out.Sessions
}

func TestOwnerUserSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.mustRegister(t, e.p, "")
	h := e.keyHeaders("")
	h["User-Agent"] = "HS1Test/1.0"
	lr := e.mustSend(t, http.MethodPost, "/api/auth", h, fmt.Sprintf(`{"action":"login","email":%q,"password":%q}`, a.Email, userPassword))
	if lr.Status != http.StatusOK {
		t.Fatalf("login: %d %s", lr.Status, lr.Body)
	}
	var login struct{ Token string }
	mustDecode(t, lr.Body, &login)

	list := e.ownerSessions(t, a.ID)
	if len(list) != 2 {
		t.Fatalf("owner sees %d sessions of the user, want 2: %+v", len(list), list)
	}
	var second sessionJSON
	for _, s := range list {
		if s.Current {
			t.Errorf("a user's session is marked current for the owner: %+v", s)
		}
		if s.UserAgent == "HS1Test/1.0" {
			second = s
		}
	}
	if second.ID == "" || second.Address != "127.0.0.1" {
		t.Fatalf("the second session is not listed with its client: %+v", list)
	}
	// The same list the user sees of their own.
	own := e.listSessions(t, login.Token)
	if len(own) != 2 || own[0].ID != list[0].ID || own[1].ID != list[1].ID {
		t.Errorf("the user sees %+v, the owner %+v", own, list)
	}
	otherSess := e.listSessions(t, e.other.Token)

	k := e.keyHeaders(e.p.OwnerToken)
	base := "/api/auth/users/" + a.ID + "/sessions"
	for _, c := range []struct {
		name, method, url, tok, code, field, allow string
		status                                     int
	}{
		{"list as a user", "GET", base, e.user.Token, "forbidden", "", "", 403},
		{"list as the user themself", "GET", base, login.Token, "forbidden", "", "", 403},
		{"list without a token", "GET", base, "", "missing_token", "", "", 401},
		{"list of an unknown user", "GET", "/api/auth/users/nosuchuser/sessions", e.p.OwnerToken, "not_found", "id", "", 404},
		{"list of a reserved id", "GET", "/api/auth/users/_users/sessions", e.p.OwnerToken, "not_found", "id", "", 404},
		{"list with an unknown parameter", "GET", base + "?all=1", e.p.OwnerToken, "invalid_argument", "all", "", 400},
		{"list by POST", "POST", base, e.p.OwnerToken, "method_not_allowed", "", "GET", 405},
		{"revoke by GET", "GET", base + "/" + second.ID, e.p.OwnerToken, "method_not_allowed", "", "DELETE", 405},
		{"revoke by POST", "POST", base + "/" + second.ID, e.p.OwnerToken, "method_not_allowed", "", "DELETE", 405},
		{"revoke as a user", "DELETE", base + "/" + second.ID, e.user.Token, "forbidden", "", "", 403},
		{"revoke as the user themself", "DELETE", base + "/" + second.ID, login.Token, "forbidden", "", "", 403},
		{"revoke of an unknown user", "DELETE", "/api/auth/users/nosuchuser/sessions/" + second.ID, e.p.OwnerToken, "not_found", "id", "", 404},
		{"revoke an unknown session", "DELETE", base + "/nope", e.p.OwnerToken, "not_found", "sessionId", "", 404},
		{"revoke a reserved session id", "DELETE", base + "/_x", e.p.OwnerToken, "not_found", "sessionId", "", 404},
		{"revoke another user's session", "DELETE", base + "/" + otherSess[0].ID, e.p.OwnerToken, "not_found", "sessionId", "", 404},
		{"revoke with a query", "DELETE", base + "/" + second.ID + "?now=1", e.p.OwnerToken, "invalid_argument", "now", "", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := e.keyHeaders(c.tok)
			body := ""
			if c.method == "POST" {
				body = `{}`
			}
			r := e.mustSend(t, c.method, c.url, h, body)
			checkError(t, r, c.status, c.code, c.field)
			if c.allow != "" && r.Header.Get("Allow") != c.allow {
				t.Errorf("Allow = %q, want %q", r.Header.Get("Allow"), c.allow)
			}
		})
	}
	for _, tok := range []string{a.Token, login.Token, e.other.Token} {
		if st := e.meStatus(t, tok); st != http.StatusOK {
			t.Fatalf("a session ended after refused revokes: me = %d", st)
		}
	}

	r := e.mustSend(t, http.MethodDelete, base+"/"+second.ID, k, "")
	if r.Status != http.StatusOK || !jsonEqual(r.Body, []byte(`{"ok":true}`)) || r.Header.Get("X-Revision") == "" {
		t.Fatalf("revoke: %d %s (X-Revision %q)", r.Status, r.Body, r.Header.Get("X-Revision"))
	}
	if st := e.meStatus(t, login.Token); st != http.StatusUnauthorized {
		t.Errorf("revoked session: me = %d, want 401", st)
	}
	if st := e.meStatus(t, a.Token); st != http.StatusOK {
		t.Errorf("the user's other session: me = %d, want 200", st)
	}
	if got := e.ownerSessions(t, a.ID); len(got) != 1 || got[0].ID == second.ID {
		t.Errorf("after the revoke the owner sees %+v", got)
	}
	again := e.mustSend(t, http.MethodDelete, base+"/"+second.ID, k, "")
	checkError(t, again, http.StatusNotFound, "not_found", "sessionId")

	// The audit log names the owner as the actor and the session.
	ar := e.mustSend(t, http.MethodGet, "/api/auth/audit?type=sessions-revoked&userId="+a.ID, k, "")
	if ar.Status != http.StatusOK {
		t.Fatalf("audit: %d %s", ar.Status, ar.Body)
	}
	var audit struct {
		Events []struct {
			Type, UserID, ActorID string
			Detail                map[string]string
		}
	}
	mustDecode(t, ar.Body, &audit)
	found := false
	for _, ev := range audit.Events {
		if ev.Type == "sessions-revoked" && ev.UserID == a.ID && ev.ActorID == e.p.OwnerID && ev.Detail["session"] == second.ID {
			found = true
		}
	}
	if !found {
		t.Errorf("no sessions-revoked event with the owner as actor: %s", ar.Body)
	}

}

// TestOwnerPushReads: an owner reads another user's devices and topics,
// the project's topics with their subscriber counts, and the push switch;
// a user names no one but themselves.
func TestOwnerPushReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.mustRegister(t, e.p, "")
	b := e.mustRegister(t, e.p, "")
	e.mustCall(t, a.Token, http.MethodPost, "/api/notifications/register", registerBodyFor("tok-a-1", "android"), http.StatusCreated)
	for _, s := range []struct{ tok, topic string }{{a.Token, "sport"}, {a.Token, "news"}, {b.Token, "news"}, {b.Token, "a-b"}} {
		e.mustCall(t, s.tok, http.MethodPost, "/api/notifications/subscribe", fmt.Sprintf(`{"topic":%q}`, s.topic), http.StatusOK)
	}
	own := e.p.OwnerToken

	r := e.mustCall(t, own, http.MethodGet, "/api/notifications/devices?userId="+a.ID, "", http.StatusOK)
	var devs struct{ Devices []pushDevice }
	mustDecode(t, r.Body, &devs)
	if len(devs.Devices) != 1 || devs.Devices[0].Token != "tok-a-1" || devs.Devices[0].UserID != a.ID {
		t.Errorf("owner reads a's devices: %s", r.Body)
	}
	r = e.mustCall(t, own, http.MethodGet, "/api/notifications/topics?userId="+a.ID, "", http.StatusOK)
	if !jsonEqual(r.Body, []byte(`{"topics":["news","sport"]}`)) {
		t.Errorf("owner reads a's topics: %s", r.Body)
	}
	// Absent or empty userId: the caller's own (the owner has none).
	for _, u := range []string{"/api/notifications/devices", "/api/notifications/devices?userId=", "/api/notifications/devices?userId=" + e.p.OwnerID} {
		r = e.mustCall(t, own, http.MethodGet, u, "", http.StatusOK)
		if !jsonEqual(r.Body, []byte(`{"devices":[]}`)) {
			t.Errorf("%s as the owner: %s", u, r.Body)
		}
	}
	// A user may name themselves.
	r = e.mustCall(t, a.Token, http.MethodGet, "/api/notifications/topics?userId="+a.ID, "", http.StatusOK)
	if !jsonEqual(r.Body, []byte(`{"topics":["news","sport"]}`)) {
		t.Errorf("a reads their own topics by id: %s", r.Body)
	}
	// Unknown query parameters keep their treatment on these routes: ignored.
	e.mustCall(t, a.Token, http.MethodGet, "/api/notifications/topics?x=1", "", http.StatusOK)

	for _, c := range []struct {
		name, tok, url, code, field string
		status                      int
	}{
		{"a user reads another's devices", b.Token, "/api/notifications/devices?userId=" + a.ID, "forbidden", "", 403},
		{"a user reads another's topics", b.Token, "/api/notifications/topics?userId=" + a.ID, "forbidden", "", 403},
		{"a user reads an unknown user's devices", b.Token, "/api/notifications/devices?userId=nosuchuser", "forbidden", "", 403},
		{"the owner reads an unknown user's devices", own, "/api/notifications/devices?userId=nosuchuser", "not_found", "userId", 404},
		{"the owner reads an unknown user's topics", own, "/api/notifications/topics?userId=nosuchuser", "not_found", "userId", 404},
		{"the owner names a reserved id", own, "/api/notifications/topics?userId=_users", "not_found", "userId", 404},
		{"the owner names a path", own, "/api/notifications/devices?userId=" + a.ID + "%2Fx", "not_found", "userId", 404},
		{"a user lists the project's topics", a.Token, "/api/notifications/project-topics", "forbidden", "", 403},
		{"a user reads the push switch", a.Token, "/api/notifications/toggle-push", "forbidden", "", 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkError(t, e.call(t, c.tok, http.MethodGet, c.url, ""), c.status, c.code, c.field)
		})
	}

	r = e.mustCall(t, own, http.MethodGet, "/api/notifications/project-topics", "", http.StatusOK)
	if !jsonEqual(r.Body, []byte(`{"topics":[{"topic":"a-b","subscribers":1},{"topic":"news","subscribers":2},{"topic":"sport","subscribers":1}],"complete":true}`)) {
		t.Errorf("project topics: %s", r.Body)
	}
	e.mustCall(t, a.Token, http.MethodPost, "/api/notifications/unsubscribe", `{"topic":"sport"}`, http.StatusOK)
	r = e.mustCall(t, own, http.MethodGet, "/api/notifications/project-topics", "", http.StatusOK)
	if !jsonEqual(r.Body, []byte(`{"topics":[{"topic":"a-b","subscribers":1},{"topic":"news","subscribers":2}],"complete":true}`)) {
		t.Errorf("project topics after an unsubscribe: %s", r.Body)
	}

	sw := func(want string) {
		t.Helper()
		r := e.mustCall(t, own, http.MethodGet, "/api/notifications/toggle-push", "", http.StatusOK)
		if !jsonEqual(r.Body, []byte(fmt.Sprintf(`{"projectId":%q,"pushEnabled":%s}`, e.p.ID, want))) {
			t.Errorf("push switch: %s, want pushEnabled %s", r.Body, want)
		}
	}
	sw("true")
	e.mustCall(t, own, http.MethodPost, "/api/notifications/toggle-push", fmt.Sprintf(`{"projectId":%q,"enabled":false}`, e.p.ID), http.StatusOK)
	sw("false")
	r = e.call(t, own, http.MethodPut, "/api/notifications/toggle-push", `{}`)
	checkError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
	if r.Header.Get("Allow") != "GET, POST" {
		t.Errorf("Allow = %q", r.Header.Get("Allow"))
	}
}

// TestTransferLeader: POST /admin/cluster/leader on a 3-voter cluster with
// an edge node, served by a follower and by the edge: the named voter (or
// some other voter) leads afterwards and the old leader does not.
func TestTransferLeader(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1, Tuning: nodetest.FastTuning()})
	on := func(i int) *env { return &env{c: c, base: c.Nodes[i].URL()} }
	admin := map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}
	edge := -1
	for i, m := range c.Nodes {
		if m.Edge {
			edge = i
		}
	}
	if edge < 0 {
		t.Fatal("no edge node")
	}
	transfer := func(t *testing.T, via int, body string) string {
		t.Helper()
		r := on(via).mustSend(t, http.MethodPost, "/admin/cluster/leader", admin, body)
		if r.Status != http.StatusOK {
			t.Fatalf("transfer %s via %s: %d %s", body, c.Nodes[via].ID, r.Status, r.Body)
		}
		var out struct{ Leader string }
		mustDecode(t, r.Body, &out)
		return out.Leader
	}
	isLeader := func(i int) bool { return c.Nodes[i].Node.Store.IsLeader() }

	old := c.Leader(10 * time.Second)
	var via, target int
	for i, m := range c.Nodes {
		if i != old && !m.Edge {
			via, target = target, i // the two followers
		}
	}
	got := transfer(t, via, fmt.Sprintf(`{"id":%q}`, c.Nodes[target].ID))
	if got != c.Nodes[target].ID {
		t.Fatalf("answer leader %q, want %q", got, c.Nodes[target].ID)
	}
	if !isLeader(target) {
		t.Errorf("%s is not leader after the transfer to it", c.Nodes[target].ID)
	}
	if isLeader(old) {
		t.Errorf("the old leader %s still leads", c.Nodes[old].ID)
	}

	// Through the edge node, to any other voter.
	before := c.Leader(10 * time.Second)
	got = transfer(t, edge, `{}`)
	if got == "" || got == c.Nodes[before].ID || got == c.Nodes[edge].ID {
		t.Fatalf("transfer to any voter answered %q (leader before %s)", got, c.Nodes[before].ID)
	}
	nodetest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if isLeader(before) {
			return fmt.Errorf("%s still leads", c.Nodes[before].ID)
		}
		return nil
	})

	// Naming the leader changes nothing.
	now := c.Leader(10 * time.Second)
	if got := transfer(t, now, fmt.Sprintf(`{"id":%q}`, c.Nodes[now].ID)); got != c.Nodes[now].ID {
		t.Errorf("transfer to the leader itself answered %q, want %q", got, c.Nodes[now].ID)
	}

	for _, tc := range []struct {
		name, method, body, code, field string
		via, status                     int
		headers                         map[string]string
	}{
		{"an edge node", "POST", fmt.Sprintf(`{"id":%q}`, c.Nodes[edge].ID), "not_voter", "id", via, 409, admin},
		{"an edge node, asked of the edge", "POST", fmt.Sprintf(`{"id":%q}`, c.Nodes[edge].ID), "not_voter", "id", edge, 409, admin},
		{"an unknown node", "POST", `{"id":"nope"}`, "not_found", "id", via, 404, admin},
		{"an unknown node, asked of the leader", "POST", `{"id":"nope"}`, "not_found", "id", now, 404, admin},
		{"an empty id", "POST", `{"id":""}`, "invalid_argument", "id", via, 400, admin},
		{"a number id", "POST", `{"id":2}`, "invalid_argument", "id", via, 400, admin},
		{"bad JSON", "POST", `{"id":`, "invalid_json", "", via, 400, admin},
		{"no body", "POST", "", "invalid_argument", "", via, 400, map[string]string{"Authorization": admin["Authorization"], "Content-Type": "application/json"}},
		{"not JSON", "POST", `{}`, "unsupported_media_type", "", via, 415, map[string]string{"Authorization": admin["Authorization"], "Content-Type": "text/plain"}},
		{"GET", "GET", "", "method_not_allowed", "", via, 405, admin},
		{"no token", "POST", `{}`, "missing_token", "", via, 401, map[string]string{}},
		{"a wrong token", "POST", `{}`, "invalid_token", "", via, 401, map[string]string{"Authorization": "Bearer nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := on(tc.via).mustSend(t, tc.method, "/admin/cluster/leader", tc.headers, tc.body)
			checkError(t, r, tc.status, tc.code, tc.field)
			if tc.status == 405 && r.Header.Get("Allow") != "POST" {
				t.Errorf("Allow = %q", r.Header.Get("Allow"))
			}
		})
	}
	if l := c.Leader(10 * time.Second); l != now {
		t.Errorf("refused transfers moved the leadership from %s to %s", c.Nodes[now].ID, c.Nodes[l].ID)
	}
}

type projectSummary struct {
	ID, Name, CreatedAt string
	Documents           int
	Bytes               int64
	LastWrite           *struct {
		Revision uint64
		Time     string
	}
	Approximate bool
}

// listAllProjects follows GET /admin/projects?limit= to the end.
func (e *env) listAllProjects(t *testing.T, limit int) map[string]projectSummary {
	t.Helper()
	admin := bearer(nodetest.AdminToken)
	out := map[string]projectSummary{}
	cursor := ""
	for page := 0; ; page++ {
		if page > 50 {
			t.Fatal("paging does not end")
		}
		u := fmt.Sprintf("/admin/projects?limit=%d", limit)
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		r := e.mustSend(t, http.MethodGet, u, admin, "")
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", u, r.Status, r.Body)
		}
		var p struct {
			Projects   []projectSummary
			NextCursor string
		}
		mustDecode(t, r.Body, &p)
		if len(p.Projects) > limit {
			t.Fatalf("page of %d projects, limit %d", len(p.Projects), limit)
		}
		for _, pr := range p.Projects {
			if _, dup := out[pr.ID]; dup {
				t.Fatalf("project %s listed twice", pr.ID)
			}
			out[pr.ID] = pr
		}
		if p.NextCursor == "" {
			return out
		}
		cursor = p.NextCursor
	}
}

// TestAdminListProjects: every project, paged, with its user documents'
// count, bytes and last write; accounts and other reserved state are not
// counted; bad paging parameters are 400 naming them.
func TestAdminListProjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	empty := e.c.CreateProject(0)
	third := e.c.CreateProject(0)
	d1 := e.mustPut(t, e.p.OwnerToken, "notes/a", `{"t":"hello"}`)
	d2 := e.mustPut(t, e.p.OwnerToken, "notes/a/sub/b", `{"n":1}`)
	d3 := e.mustPut(t, third.OwnerToken, "x", `{}`)

	all := e.listAllProjects(t, 1)
	if len(all) != 3 {
		t.Fatalf("listed %d projects, want 3: %+v", len(all), all)
	}
	p := all[e.p.ID]
	if p.Name != "test" || p.CreatedAt == "" || p.Documents != 2 || p.Bytes != int64(len(d1.Data)+len(d2.Data)) || p.Approximate {
		t.Errorf("project with two documents: %+v (data %s %s)", p, d1.Data, d2.Data)
	}
	if p.LastWrite == nil || p.LastWrite.Revision != d2.Revision || p.LastWrite.Time != d2.UpdateTime {
		t.Errorf("last write %+v, want revision %d at %s", p.LastWrite, d2.Revision, d2.UpdateTime)
	}
	if p := all[empty.ID]; p.Documents != 0 || p.Bytes != 0 || p.LastWrite != nil {
		t.Errorf("project without documents: %+v", p)
	}
	if p := all[third.ID]; p.Documents != 1 || p.LastWrite == nil || p.LastWrite.Revision != d3.Revision {
		t.Errorf("third project: %+v", p)
	}
	// One page holds them all; the figures follow a new write.
	d4 := e.mustPut(t, e.p.OwnerToken, "notes/c", `{"k":"v"}`)
	all = e.listAllProjects(t, 50)
	if p := all[e.p.ID]; len(all) != 3 || p.Documents != 3 || p.LastWrite == nil || p.LastWrite.Revision != d4.Revision {
		t.Errorf("after a third write: %+v", all[e.p.ID])
	}
	// A deleted document leaves the count.
	if r := e.mustSend(t, http.MethodDelete, docQuery("notes/c"), bearer(e.p.OwnerToken), ""); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if p := e.listAllProjects(t, 50)[e.p.ID]; p.Documents != 2 {
		t.Errorf("after a delete: %+v", p)
	}

	admin := bearer(nodetest.AdminToken)
	for _, c := range []struct {
		name, method, url, code, field string
		status                         int
		headers                        map[string]string
	}{
		{"limit 0", "GET", "/admin/projects?limit=0", "invalid_argument", "limit", 400, admin},
		{"limit 101", "GET", "/admin/projects?limit=101", "invalid_argument", "limit", 400, admin},
		{"limit not a number", "GET", "/admin/projects?limit=ten", "invalid_argument", "limit", 400, admin},
		{"limit empty", "GET", "/admin/projects?limit=", "invalid_argument", "limit", 400, admin},
		{"cursor reserved", "GET", "/admin/projects?cursor=_sys", "invalid_argument", "cursor", 400, admin},
		{"cursor a path", "GET", "/admin/projects?cursor=a%2Fb", "invalid_argument", "cursor", 400, admin},
		{"cursor empty", "GET", "/admin/projects?cursor=", "invalid_argument", "cursor", 400, admin},
		{"unknown parameter", "GET", "/admin/projects?sort=name", "invalid_argument", "sort", 400, admin},
		{"no token", "GET", "/admin/projects", "missing_token", "", 401, map[string]string{}},
		{"a project owner's token", "GET", "/admin/projects", "invalid_token", "", 401, bearer(e.p.OwnerToken)},
		{"PUT", "PUT", "/admin/projects", "method_not_allowed", "", 405, admin},
		{"DELETE", "DELETE", "/admin/projects", "method_not_allowed", "", 405, admin},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := ""
			if c.method == "PUT" {
				body = `{}`
			}
			r := e.mustSend(t, c.method, c.url, c.headers, body)
			checkError(t, r, c.status, c.code, c.field)
			if c.status == 405 && r.Header.Get("Allow") != "GET, POST" {
				t.Errorf("Allow = %q, want \"GET, POST\"", r.Header.Get("Allow"))
			}
		})
	}
}

// staleOwner answers Authenticate for one token with a principal read
// earlier: a node whose state has not applied the owner's demotion yet.
type staleOwner struct {
	*auth.Service
	tok string
	p   *auth.Principal
}

func (s staleOwner) Authenticate(tok string) (*auth.Principal, error) {
	if tok == s.tok {
		return s.p, nil
	}
	return s.Service.Authenticate(tok)
}

// An owner's revoke of a user's session does not trust the HTTP layer's
// principal: the caller is judged again on the state the write is built
// from (and the write commits only while that state holds), so a caller
// demoted after a node judged it an owner revokes nothing.
func TestOwnerRevokeSessionStaleOwner(t *testing.T) {
	e := newEnv(t)
	n := e.c.Nodes[0].Node
	victim := e.mustRegister(t, e.p, "")
	role := func(uid, r string) {
		t.Helper()
		res := e.mustSend(t, http.MethodPost, "/api/auth", e.keyHeaders(e.p.OwnerToken), setRoleBody(uid, r))
		if res.Status != http.StatusOK {
			t.Fatalf("set-role %s %s: %d %s", uid, r, res.Status, res.Body)
		}
	}
	role(e.other.ID, "owner")
	p, err := n.Accounts.Authenticate(e.other.Token)
	if err != nil || p.Role != auth.RoleOwner {
		t.Fatalf("promoted principal %+v, %v", p, err)
	}
	role(e.other.ID, "user")
	sid := e.ownerSessions(t, victim.ID)[0].ID

	api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store, Accounts: staleOwner{Service: n.Accounts, tok: e.other.Token, p: p}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	stale := &env{c: e.c, base: srv.URL, p: e.p}
	r := stale.mustSend(t, http.MethodDelete, "/api/auth/users/"+victim.ID+"/sessions/"+sid, e.keyHeaders(e.other.Token), "")
	checkError(t, r, http.StatusForbidden, "forbidden", "")
	if st := e.meStatus(t, victim.Token); st != http.StatusOK {
		t.Fatalf("the session a demoted owner tried to revoke ended: me = %d", st)
	}
	// The same server lets a real owner through.
	r = stale.mustSend(t, http.MethodDelete, "/api/auth/users/"+victim.ID+"/sessions/"+sid, e.keyHeaders(e.p.OwnerToken), "")
	if r.Status != http.StatusOK {
		t.Fatalf("owner revoke through the same server: %d %s", r.Status, r.Body)
	}
	if st := e.meStatus(t, victim.Token); st != http.StatusUnauthorized {
		t.Fatalf("revoked session: me = %d", st)
	}
}
