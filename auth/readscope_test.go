package auth

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestReadScope(t *testing.T) {
	ctx := context.Background()
	def, err := CompileRules(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	custom := mustCompileRules(t,
		Rule{Match: "public/secret/**", Read: "auth.role == 'owner'"},
		Rule{Match: "public/**", Read: "true"},
		Rule{Match: "posts", Read: "true"},
		Rule{Match: "posts/{id}", Read: "auth.role == 'owner' || resource.data.pub == true"},
		Rule{Match: "files/{rest=**}", Read: "rest.startsWith('a')"},
		Rule{Match: "req/**", Read: "request.path.endsWith('x')"},
		Rule{Match: "teams/{team}/**", Read: "auth.uid == team"},
		Rule{Match: "empty/**"},
		Rule{Match: "loops/**", Read: "[1, 2].exists(resource, resource == 2)"},
	)
	owner := AuthInfo{UID: "o", Role: "owner"}
	u1 := AuthInfo{UID: "u1", Role: "user"}
	for _, tc := range []struct {
		rules   *CompiledRules
		who     AuthInfo
		path    string
		subtree bool
		want    ReadScope
	}{
		{def, owner, "bench/rt", true, ReadAll},
		{def, u1, "bench/rt", true, ReadNone},
		{def, u1, "users/u1", true, ReadAll},
		{def, u1, "users/u1/notes/n", false, ReadAll},
		{def, u1, "users/u2", true, ReadNone},
		{def, u1, "users", true, ReadByPath},
		{def, owner, "users", true, ReadByPath}, // two rules: judged per path (both allow)
		{custom, u1, "public", true, ReadByPath},
		{custom, u1, "public", false, ReadAll},
		{custom, u1, "public/x", true, ReadAll},
		{custom, u1, "public/secret", true, ReadNone},
		{custom, owner, "public/secret", true, ReadAll},
		{custom, u1, "posts", true, ReadByData},
		{custom, u1, "posts", false, ReadAll},
		{custom, u1, "posts/p1", false, ReadByData},
		{custom, u1, "posts/p1", true, ReadByData}, // posts/p1/x: no rule; posts/p1: data
		{custom, u1, "files", true, ReadByPath},
		{custom, u1, "files/b", true, ReadByPath},
		{custom, u1, "req", true, ReadByPath},
		{custom, u1, "teams/u1", true, ReadAll},
		{custom, u1, "teams/u2/x", true, ReadNone},
		{custom, u1, "teams", true, ReadByPath},
		{custom, u1, "empty/x", true, ReadNone},
		{custom, u1, "loops", true, ReadByData}, // a variable named resource: judged per document
		{custom, u1, "nowhere", true, ReadNone},
	} {
		if got := tc.rules.ReadScope(ctx, tc.path, tc.subtree, tc.who); got != tc.want {
			t.Errorf("ReadScope(%q, subtree %v, %s) = %d, want %d", tc.path, tc.subtree, tc.who.UID, got, tc.want)
		}
	}
}

// TestReadScopeAgreesWithAllow: whatever ReadScope decides for a subtree,
// Allow agrees with it for every document there, whatever its data.
func TestReadScopeAgreesWithAllow(t *testing.T) {
	ctx := context.Background()
	rules := mustCompileRules(t,
		Rule{Match: "public/secret/**", Read: "auth.role == 'owner'"},
		Rule{Match: "public/**", Read: "true"},
		Rule{Match: "posts/{id}", Read: "auth.role == 'owner' || resource.data.pub == true"},
		Rule{Match: "users/{uid}/**", Read: "auth.uid == uid || auth.role == 'owner'"},
		Rule{Match: "files/{rest=**}", Read: "rest.startsWith('a')"},
		Rule{Match: "**", Read: "auth.role == 'owner'"},
	)
	paths := []string{"public", "public/a", "public/secret", "public/secret/s", "public/b/c/d",
		"posts", "posts/p1", "posts/p1/x", "users", "users/u1", "users/u1/a/b", "users/u2/a",
		"files", "files/a", "files/b/c", "other", "other/x"}
	datas := []json.RawMessage{nil, json.RawMessage(`{"pub":true}`), json.RawMessage(`{"pub":false}`)}
	for _, who := range []AuthInfo{{UID: "u1", Role: "user"}, {UID: "o", Role: "owner"}} {
		for _, root := range paths {
			for _, subtree := range []bool{false, true} {
				scope := rules.ReadScope(ctx, root, subtree, who)
				for _, p := range paths {
					if p != root && (!subtree || !strings.HasPrefix(p, root+"/")) {
						continue
					}
					var answers []bool
					for _, d := range datas {
						ok, _ := rules.Allow(ctx, OpRead, RuleInput{Path: p, Auth: who, Resource: d})
						answers = append(answers, ok)
					}
					for _, ok := range answers {
						switch {
						case scope == ReadAll && !ok, scope == ReadNone && ok, scope == ReadByPath && ok != answers[0]:
							t.Errorf("%s: ReadScope(%q, %v) = %d but Allow(%q) answers %v", who.UID, root, subtree, scope, p, answers)
						}
					}
				}
			}
		}
	}
}
