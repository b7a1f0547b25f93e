package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

type rulesTestResult struct {
	Allowed    bool   `json:"allowed"`
	Rule       int    `json:"rule"`
	Match      string `json:"match"`
	Expression string `json:"expression"`
	Auth       *struct {
		UID   string `json:"uid"`
		Role  string `json:"role"`
		Email string `json:"email"`
	} `json:"auth"`
	Error string `json:"error"`
}

const testedRules = `{"rules":[` +
	`{"match":"public/{id}","read":"true","write":"auth.uid != ''"},` +
	`{"match":"users/{uid}/**","read":"auth.role == 'owner' || auth.uid == uid","write":"auth.uid == uid && (request.data == null || request.data.n < 10)"},` +
	`{"match":"posts/{id}","read":"resource.data.published == true || auth.role == 'owner'","write":"auth.role == 'owner' || (resource.data == null && request.data.author == auth.uid)"},` +
	`{"match":"broken/{id}","read":"resource.data.x.y == 1","write":""}]}`

// TestDBRulesTest covers POST /api/db/rules/test through HTTP against a real
// node, and checks its answers against what real reads and writes get.
func TestDBRulesTest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.p.OwnerToken
	// Seeded under the default rules (the owner may write anything).
	e.mustPut(t, owner, "posts/pub", `{"published":true}`)
	e.mustPut(t, owner, "posts/draft", `{"published":false}`)
	e.mustPut(t, owner, "broken/b", `{"x":{"y":1}}`)
	e.mustPut(t, owner, "broken/c", `{"x":2}`)
	if r := e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(owner), testedRules); r.Status != 200 {
		t.Fatalf("PUT rules: %d %s", r.Status, r.Body)
	}

	test := func(t *testing.T, body string) rulesTestResult {
		t.Helper()
		r := e.mustSend(t, http.MethodPost, "/api/db/rules/test", bearer(owner), body)
		if r.Status != 200 {
			t.Fatalf("rules test %s: %d %s", body, r.Status, r.Body)
		}
		checkJSONResponse(t, r)
		var out rulesTestResult
		mustDecode(t, r.Body, &out)
		return out
	}

	t.Run("explains", func(t *testing.T) {
		for _, tc := range []struct {
			name, body string
			allowed    bool
			rule       int
			errorHas   string
		}{
			{"unauthenticated read of public", `{"op":"read","path":"public/a"}`, true, 0, ""},
			{"unauthenticated write of public", `{"op":"write","path":"public/a","data":{}}`, false, 0, ""},
			{"user writes public", `{"op":"write","path":"public/a","userId":"{uid}","data":{}}`, true, 0, ""},
			{"user reads own", `{"op":"read","path":"users/{uid}/n","userId":"{uid}"}`, true, 1, ""},
			{"user reads another's", `{"op":"read","path":"users/{otherUid}/n","userId":"{uid}"}`, false, 1, ""},
			{"owner reads a user's", `{"op":"read","path":"users/{uid}/n","userId":"{ownerUid}"}`, true, 1, ""},
			{"request.data allows", `{"op":"write","path":"users/{uid}/n","userId":"{uid}","data":{"n":3}}`, true, 1, ""},
			{"request.data denies", `{"op":"write","path":"users/{uid}/n","userId":"{uid}","data":{"n":30}}`, false, 1, ""},
			{"a delete", `{"op":"write","path":"users/{uid}/n","userId":"{uid}"}`, true, 1, ""},
			{"a delete by null data", `{"op":"write","path":"users/{uid}/n","userId":"{uid}","data":null}`, true, 1, ""},
			{"resource.data allows", `{"op":"read","path":"posts/pub","userId":"{uid}"}`, true, 2, ""},
			{"resource.data denies", `{"op":"read","path":"posts/draft","userId":"{uid}"}`, false, 2, ""},
			{"evaluation error", `{"op":"read","path":"broken/c","userId":"{uid}"}`, false, 3, "rules[3].read"},
			{"empty expression", `{"op":"write","path":"broken/b","userId":"{ownerUid}","data":{}}`, false, 3, ""},
			{"no rule matches", `{"op":"read","path":"elsewhere/x","userId":"{ownerUid}"}`, false, -1, ""},
			{"rules given: the first match decides", `{"op":"read","path":"elsewhere/x","rules":[{"match":"elsewhere/{id}","read":"false","write":""},{"match":"elsewhere/**","read":"true","write":""}]}`, false, 0, ""},
			{"rules given, second rule", `{"op":"read","path":"elsewhere/x/y","rules":[{"match":"elsewhere/{id}","read":"false","write":""},{"match":"elsewhere/**","read":"auth.uid == ''","write":""}]}`, true, 1, ""},
			{"no rules given denies", `{"op":"read","path":"public/a","rules":[]}`, false, -1, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := e.vars().expand(tc.body)
				got := test(t, body)
				if got.Allowed != tc.allowed || got.Rule != tc.rule {
					t.Fatalf("allowed %v rule %d, want %v %d: %+v", got.Allowed, got.Rule, tc.allowed, tc.rule, got)
				}
				if tc.errorHas == "" && got.Error != "" || !strings.Contains(got.Error, tc.errorHas) {
					t.Errorf("error %q, want one containing %q", got.Error, tc.errorHas)
				}
				var in struct {
					Op     string
					UserID string
					Rules  []struct{ Match, Read, Write string }
				}
				mustDecode(t, []byte(body), &in)
				rules := in.Rules
				if rules == nil {
					var rs struct {
						Rules []struct{ Match, Read, Write string }
					}
					mustDecode(t, []byte(testedRules), &rs)
					rules = rs.Rules
				}
				wantMatch, wantExpr := "", ""
				if tc.rule >= 0 {
					wantMatch, wantExpr = rules[tc.rule].Match, rules[tc.rule].Read
					if in.Op == "write" {
						wantExpr = rules[tc.rule].Write
					}
				}
				if got.Match != wantMatch || got.Expression != wantExpr {
					t.Errorf("match %q expression %q, want %q %q", got.Match, got.Expression, wantMatch, wantExpr)
				}
				switch in.UserID {
				case "":
					if got.Auth != nil {
						t.Errorf("auth = %+v, want null", got.Auth)
					}
				case e.user.ID:
					if got.Auth == nil || got.Auth.UID != e.user.ID || got.Auth.Role != "user" || got.Auth.Email != e.user.Email {
						t.Errorf("auth = %+v, want the user %s", got.Auth, e.user.Email)
					}
				case e.p.OwnerID:
					if got.Auth == nil || got.Auth.UID != e.p.OwnerID || got.Auth.Role != "owner" || got.Auth.Email != "owner@example.com" {
						t.Errorf("auth = %+v, want the owner", got.Auth)
					}
				}
			})
		}
	})

	// The answer agrees with what the user's real read or write gets, on
	// the same state (each write case runs right after its test).
	t.Run("agrees-with-real-access", func(t *testing.T) {
		type access struct {
			as     account
			op     string // read, write, delete
			path   string
			data   string
			wantOK bool
		}
		ownerAcc := account{ID: e.p.OwnerID, Token: owner}
		cases := []access{
			{e.user, "read", "public/a", "", true},
			{e.user, "write", "public/a", `{"t":1}`, true},
			{e.user, "read", "users/" + e.user.ID + "/n", "", true},
			{e.other, "read", "users/" + e.user.ID + "/n", "", false},
			{e.user, "write", "users/" + e.user.ID + "/n", `{"n":3}`, true},
			{e.user, "write", "users/" + e.user.ID + "/n", `{"n":30}`, false},
			{e.other, "write", "users/" + e.user.ID + "/n", `{"n":1}`, false},
			{e.user, "delete", "users/" + e.user.ID + "/n", "", true},
			{e.user, "read", "posts/pub", "", true},
			{e.user, "read", "posts/draft", "", false},
			{ownerAcc, "read", "posts/draft", "", true},
			{e.user, "write", "posts/new1", `{"author":"` + e.user.ID + `"}`, true},
			{e.other, "write", "posts/new1", `{"author":"` + e.other.ID + `"}`, false}, // exists now
			{e.other, "write", "posts/new2", `{"author":"` + e.user.ID + `"}`, false},
			{e.user, "read", "broken/b", "", true},
			{e.user, "read", "broken/c", "", false},
			{ownerAcc, "write", "broken/b", `{}`, false},
			{ownerAcc, "read", "elsewhere/x", "", false},
			{ownerAcc, "delete", "posts/draft", "", true},
		}
		for i, c := range cases {
			op := c.op
			body := map[string]any{"op": op, "path": c.path, "userId": c.as.ID}
			if op == "delete" {
				body["op"] = "write"
			}
			if c.data != "" {
				body["data"] = json.RawMessage(c.data)
			}
			got := test(t, mustJSON(t, body))
			var r reply
			switch op {
			case "read":
				r = e.mustSend(t, http.MethodGet, docQuery(c.path), bearer(c.as.Token), "")
			case "write":
				r = e.mustSend(t, http.MethodPost, "/api/db", bearer(c.as.Token), fmt.Sprintf(`{"collection":%q,"data":%s}`, c.path, c.data))
			case "delete":
				r = e.mustSend(t, http.MethodDelete, docQuery(c.path), bearer(c.as.Token), "")
			}
			real := r.Status != http.StatusForbidden
			if r.Status >= 400 && r.Status != http.StatusForbidden && r.Status != http.StatusNotFound {
				t.Fatalf("case %d: real %s of %s: %d %s", i, op, c.path, r.Status, r.Body)
			}
			if got.Allowed != real || real != c.wantOK {
				t.Errorf("case %d: %s of %s by %s: tested %v, real %v (%d), want %v", i, op, c.path, c.as.ID, got.Allowed, real, r.Status, c.wantOK)
			}
		}
	})

	e.run(t, []scenario{
		{name: "a user may not test", as: "user", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a"}`, status: 403, code: "forbidden"},
		{name: "no token", as: "none", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a"}`, status: 401, code: "missing_token"},
		{name: "unknown user", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","userId":"nobody"}`, status: 404, code: "not_found", field: "userId"},
		{name: "reserved user id", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","userId":"a/b"}`, status: 404, code: "not_found", field: "userId"},
		{name: "bad op", method: "POST", url: "/api/db/rules/test", body: `{"op":"delete","path":"public/a"}`, status: 400, code: "invalid_argument", field: "op"},
		{name: "no op", method: "POST", url: "/api/db/rules/test", body: `{"path":"public/a"}`, status: 400, code: "invalid_argument", field: "op"},
		{name: "op not a string", method: "POST", url: "/api/db/rules/test", body: `{"op":1,"path":"public/a"}`, status: 400, code: "invalid_argument", field: "op"},
		{name: "no path", method: "POST", url: "/api/db/rules/test", body: `{"op":"read"}`, status: 400, code: "invalid_path", field: "path"},
		{name: "empty path", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":""}`, status: 400, code: "invalid_path", field: "path"},
		{name: "reserved path", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"_users/x"}`, status: 400, code: "invalid_path", field: "path"},
		{name: "data on a read", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","data":{}}`, status: 400, code: "invalid_argument", field: "data"},
		{name: "data not an object", method: "POST", url: "/api/db/rules/test", body: `{"op":"write","path":"public/a","data":[1]}`, status: 400, code: "invalid_argument", field: "data"},
		{name: "unknown member", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","user":"x"}`, status: 400, code: "invalid_argument", field: "user"},
		{name: "unknown member of a rule", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","rules":[{"match":"**","read":"true","write":"","delete":""}]}`, status: 400, code: "invalid_argument", field: "delete"},
		{name: "rule read does not compile", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","rules":[{"match":"**","read":"true","write":""},{"match":"**","read":"1 +","write":""}]}`, status: 400, code: "invalid_argument", field: "rules[1].read"},
		{name: "rule write is not bool", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","rules":[{"match":"**","read":"true","write":"'yes'"}]}`, status: 400, code: "invalid_argument", field: "rules[0].write"},
		{name: "rule match is bad", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","rules":[{"match":"a/**/b","read":"true","write":""}]}`, status: 400, code: "invalid_argument", field: "rules[0].match"},
		{name: "second rule match is bad", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"public/a","rules":[{"match":"**","read":"true","write":""},{"match":"else{x}","read":"true","write":""}]}`, status: 400, code: "invalid_argument", field: "rules[1].match"},
		{name: "not JSON", method: "POST", url: "/api/db/rules/test", body: `{"op":`, status: 400, code: "invalid_json"},
		{name: "not an object", method: "POST", url: "/api/db/rules/test", body: `[1]`, status: 400, code: "invalid_argument"},
		{name: "no content type", method: "POST", url: "/api/db/rules/test", headers: map[string]string{"Content-Type": "text/plain"}, body: `{"op":"read","path":"a"}`, status: 415, code: "unsupported_media_type"},
		{name: "unknown parameter", method: "POST", url: "/api/db/rules/test?collection=a", body: `{"op":"read","path":"a"}`, status: 400, code: "invalid_argument", field: "collection"},
		{name: "GET is refused", url: "/api/db/rules/test", status: 405, code: "method_not_allowed"},
		{name: "too many rules", method: "POST", url: "/api/db/rules/test", body: `{"op":"read","path":"a","rules":[` + strings.Repeat(`{"match":"**","read":"true","write":""},`, 200) + `{"match":"**","read":"true","write":""}]}`, status: 400, code: "invalid_argument", field: "rules"},
		{name: "data larger than a document", method: "POST", url: "/api/db/rules/test", body: `{"op":"write","path":"a","data":{"s":"` + strings.Repeat("x", 1<<20) + `"}}`, status: 413, code: "document_too_large"},
	})
}
