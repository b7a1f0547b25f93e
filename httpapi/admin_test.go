package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// TestAdmin covers the operator endpoints and the routes outside /api.
func TestAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.extra = vars{"admin": nodetest.AdminToken}
	t.Run("projects", func(t *testing.T) { t.Parallel(); e.run(t, adminRows(projectScenarios())) })
	t.Run("cluster", func(t *testing.T) { t.Parallel(); e.run(t, adminRows(clusterScenarios())) })
	t.Run("routes", func(t *testing.T) { t.Parallel(); e.run(t, adminRows(routeScenarios())) })
	t.Run("backup", func(t *testing.T) { t.Parallel(); testBackup(t, e) })
}

// adminRows makes the admin token the default credential of every row.
func adminRows(rows []scenario) []scenario {
	for i := range rows {
		r := &rows[i]
		if r.as == "" {
			r.as = "none"
		}
		if r.headers == nil {
			r.headers = map[string]string{"Authorization": "Bearer {admin}"}
		}
	}
	return rows
}

func projectBody(name, email, password string) string {
	return fmt.Sprintf(`{"name":%s,"ownerEmail":%s,"ownerPassword":%s}`, jsonString(name), jsonString(email), jsonString(password))
}

func projectScenarios() []scenario {
	const pw = "owner password 456"
	good := projectBody("shop", "Boss.{rand}@Example.com", pw)
	u := "/admin/projects"
	bad := func(name, body, field string) scenario {
		return scenario{name: name, method: "POST", url: u, body: body, status: 400, code: "invalid_argument", field: field}
	}
	return []scenario{
		{name: "create is 201 with projectId, apiKey and ownerId", method: "POST", url: u, body: good, status: 201,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var out struct{ ProjectID, APIKey, OwnerID string }
				mustDecode(t, r.Body, &out)
				if out.ProjectID == "" || out.APIKey == "" || out.OwnerID == "" {
					t.Fatalf("create answered %s", r.Body)
				}
				p := nodetest.Project{ID: out.ProjectID, APIKey: out.APIKey}
				lr := e.login(t, p, v.expand("boss.{rand}@example.com"), pw)
				if lr.Status != http.StatusOK {
					t.Fatalf("owner login: %d %s", lr.Status, lr.Body)
				}
				checkSession("boss.{rand}@example.com", "owner")(t, e, v, lr)
				var s struct{ User struct{ ID string } }
				mustDecode(t, lr.Body, &s)
				if s.User.ID != out.OwnerID {
					t.Errorf("owner id %q, login says %q", out.OwnerID, s.User.ID)
				}
			}},
		{name: "two projects get distinct ids and keys", method: "POST", url: u, body: good, status: 201,
			check: func(t *testing.T, e *env, v vars, r reply) {
				r2 := e.mustSend(t, "POST", u, map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}, v.expand(good))
				var a, b struct{ ProjectID, APIKey string }
				mustDecode(t, r.Body, &a)
				mustDecode(t, r2.Body, &b)
				if r2.Status != http.StatusCreated || a.ProjectID == b.ProjectID || a.APIKey == b.APIKey {
					t.Errorf("second create: %d, ids %s/%s keys equal %v", r2.Status, a.ProjectID, b.ProjectID, a.APIKey == b.APIKey)
				}
			}},
		{name: "create carries X-Revision", method: "POST", url: u, body: good, status: 201,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if r.Header.Get("X-Revision") == "" {
					t.Errorf("BUG: project creation is a mutating response without X-Revision (API.md: every mutating response carries X-Revision)")
				}
			}},
		{name: "no token is 401", method: "POST", url: u, body: good, headers: map[string]string{}, status: 401, code: "missing_token"},
		{name: "wrong token is 401", method: "POST", url: u, body: good, headers: map[string]string{"Authorization": "Bearer not-the-admin-token"}, status: 401, code: "invalid_token"},
		{name: "admin token with a suffix is 401", method: "POST", url: u, body: good, headers: map[string]string{"Authorization": "Bearer {admin}x"}, status: 401, code: "invalid_token"},
		{name: "a project owner's token is 401", as: "owner", method: "POST", url: u, body: good, headers: map[string]string{}, status: 401, code: "invalid_token"},
		{name: "admin token as Basic is 401", method: "POST", url: u, body: good, headers: map[string]string{"Authorization": "Basic {admin}"}, status: 401, code: "missing_token"},
		{name: "PUT is 405", method: "PUT", url: u, body: good, status: 405, code: "method_not_allowed"},
		{name: "GET lists (TestAdminListProjects)", url: u, status: 200, json: `{"nextCursor":""}`},
		{name: "GET without a token is 401", url: u, headers: map[string]string{}, status: 401, code: "missing_token"},
		bad("missing name", `{"ownerEmail":"a@example.com","ownerPassword":"`+pw+`"}`, "name"),
		bad("empty name", projectBody("", "a@example.com", pw), "name"),
		bad("name of spaces", projectBody("   ", "a@example.com", pw), "name"),
		bad("name over 200 characters", projectBody(strings.Repeat("n", 201), "a@example.com", pw), "name"),
		bad("name is a number", `{"name":5,"ownerEmail":"a@example.com","ownerPassword":"`+pw+`"}`, "name"),
		bad("missing ownerEmail", `{"name":"x","ownerPassword":"`+pw+`"}`, "ownerEmail"),
		bad("bad ownerEmail", projectBody("x", "not-an-email", pw), "ownerEmail"),
		bad("ownerEmail with a display name", projectBody("x", "Boss <boss@example.com>", pw), "ownerEmail"),
		bad("missing ownerPassword", `{"name":"x","ownerEmail":"a@example.com"}`, "ownerPassword"),
		bad("short ownerPassword", projectBody("x", "a@example.com", "short"), "ownerPassword"),
		bad("common ownerPassword", projectBody("x", "a@example.com", "qwertyuiop"), "ownerPassword"),
		bad("ownerPassword of 129 characters", projectBody("x", "a@example.com", strings.Repeat("p", 129)), "ownerPassword"),
		{name: "bad JSON is 400", method: "POST", url: u, body: `{"name":`, status: 400, code: "invalid_json"},
		{name: "body is an array", method: "POST", url: u, body: `[]`, status: 400, code: "invalid_argument"},
		{name: "no Content-Type is 415", method: "POST", url: u, body: good, headers: map[string]string{"Authorization": "Bearer {admin}", "Content-Type": ""},
			status: 415, code: "unsupported_media_type"},
	}
}

func clusterScenarios() []scenario {
	return []scenario{
		{name: "status is 200 with leader and nodes", url: "/admin/cluster", status: 200,
			json: `{"leader":"n1","nodes":[{"id":"n1","voter":true,"state":"leader"}]}`},
		{name: "status without a token is 401", url: "/admin/cluster", headers: map[string]string{}, status: 401, code: "missing_token"},
		{name: "status with a user token is 401", as: "user", url: "/admin/cluster", headers: map[string]string{}, status: 401, code: "invalid_token"},
		{name: "POST status is 405", method: "POST", url: "/admin/cluster", status: 405, code: "method_not_allowed"},
		{name: "removing an unknown node is 404", method: "DELETE", url: "/admin/cluster/nodes/nope", status: 404, code: "not_found"},
		{name: "removing the only voter is 409 and changes nothing", method: "DELETE", url: "/admin/cluster/nodes/n1", status: 409, code: "last_voter",
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !strings.Contains(string(r.Body), "cannot remove the only voter; the cluster would have no quorum") {
					t.Errorf("answer %s", r.Body)
				}
				st := e.mustSend(t, "GET", "/admin/cluster", map[string]string{"Authorization": "Bearer " + nodetest.AdminToken}, "")
				if st.Status != http.StatusOK || !strings.Contains(string(st.Body), `"id":"n1"`) || !strings.Contains(string(st.Body), `"state":"leader"`) {
					t.Errorf("cluster after the refused removal: %d %s", st.Status, st.Body)
				}
			}},
		{name: "removing without a token is 401", method: "DELETE", url: "/admin/cluster/nodes/n1", headers: map[string]string{}, status: 401, code: "missing_token"},
		{name: "GET a node is 405", url: "/admin/cluster/nodes/n1", status: 405, code: "method_not_allowed"},
		{name: "backup without a token is 401", url: "/admin/backup", headers: map[string]string{}, status: 401, code: "missing_token"},
		{name: "POST backup is 405", method: "POST", url: "/admin/backup", status: 405, code: "method_not_allowed"},
	}
}

func routeScenarios() []scenario {
	none := map[string]string{}
	rows := []scenario{
		{name: "healthz is 200", url: "/healthz", headers: none, status: 200, json: `{"status":"ok"}`},
		{name: "readyz is 200", url: "/readyz", headers: none, status: 200, json: `{"status":"ready","leader":"n1"}`},
	}
	for _, p := range []string{"/nope", "/api", "/api/", "/api/db/", "/api/dbx", "/api/unknown", "/admin", "/admin/projects/x", "/api/db/rules/x", "/favicon.ico"} {
		rows = append(rows, scenario{name: "unknown route " + p + " is 404", url: p, headers: none, status: 404, code: "not_found"})
	}
	rows = append(rows, scenario{name: "unknown route with POST is 404", method: "POST", url: "/api/nothing", body: `{}`, headers: none, status: 404, code: "not_found"})
	return rows
}

func testBackup(t *testing.T, e *env) {
	e.mustPut(t, e.p.OwnerToken, "backup/"+e.uniq(), `{"a":1}`)
	r := e.mustSend(t, http.MethodGet, "/admin/backup", bearer(nodetest.AdminToken), "")
	if r.Status != http.StatusOK || len(r.Body) == 0 {
		t.Fatalf("backup: status %d, %d bytes", r.Status, len(r.Body))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("backup Content-Type = %q", ct)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("backup without X-Request-Id")
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("backup Cache-Control = %q, want no-store (it holds secrets)", cc)
	}
	info, err := raftstore.VerifyBackup(bytes.NewReader(r.Body))
	if err != nil || info.Revision == 0 {
		t.Fatalf("backup does not verify: %+v, %v", info, err)
	}
	// The revision also comes as a trailer, once the stream is complete.
	req, err := http.NewRequest(http.MethodGet, e.base+"/admin/backup", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	info, err = raftstore.VerifyBackup(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if tr := resp.Trailer.Get("X-Revision"); tr != strconv.FormatUint(info.Revision, 10) {
		t.Fatalf("X-Revision trailer %q, backup revision %d", tr, info.Revision)
	}
}
