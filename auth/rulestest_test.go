package auth

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Explain answers what Allow answers, and names the deciding rule, its
// pattern, its expression and the evaluation error.
func TestExplain(t *testing.T) {
	t.Parallel()
	rules := []Rule{
		{Match: "public/**", Read: "true", Write: ""},
		{Match: "users/{uid}/**", Read: "auth.uid == uid", Write: "auth.uid == uid && request.data.n < 10"},
		{Match: "posts/{id}", Read: "resource.data.published == true || auth.role == 'owner'", Write: "request.time > timestamp('2000-01-01T00:00:00Z')"},
		{Match: "broken/{id}", Read: "resource.data.missing.deeper == 1", Write: "false"},
	}
	c := mustCompileRules(t, rules...)
	user := AuthInfo{UID: "u1", Role: "user", Email: "u1@x.io"}
	owner := AuthInfo{UID: "o", Role: "owner"}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		op      Op
		in      RuleInput
		allowed bool
		rule    int
		errSub  string
	}{
		{"read by a glob", OpRead, RuleInput{Path: "public/a/b"}, true, 0, ""},
		{"empty write expression denies", OpWrite, RuleInput{Path: "public/a", Auth: owner, Request: json.RawMessage(`{}`)}, false, 0, ""},
		{"own document", OpRead, RuleInput{Path: "users/u1/n", Auth: user}, true, 1, ""},
		{"someone else's", OpRead, RuleInput{Path: "users/u2", Auth: user}, false, 1, ""},
		{"request.data allows", OpWrite, RuleInput{Path: "users/u1", Auth: user, Request: json.RawMessage(`{"n":3}`)}, true, 1, ""},
		{"request.data denies", OpWrite, RuleInput{Path: "users/u1", Auth: user, Request: json.RawMessage(`{"n":30}`)}, false, 1, ""},
		{"a delete has no request.data", OpWrite, RuleInput{Path: "users/u1", Auth: user}, false, 1, "rules[1].write"},
		{"resource.data allows", OpRead, RuleInput{Path: "posts/p", Auth: user, Resource: json.RawMessage(`{"published":true}`)}, true, 2, ""},
		{"resource.data denies", OpRead, RuleInput{Path: "posts/p", Auth: user, Resource: json.RawMessage(`{"published":false}`)}, false, 2, ""},
		{"request.time set", OpWrite, RuleInput{Path: "posts/p", Auth: user, Request: json.RawMessage(`{}`), Time: now}, true, 2, ""},
		{"request.time unset", OpWrite, RuleInput{Path: "posts/p", Auth: user, Request: json.RawMessage(`{}`)}, false, 2, "rules[2].write"},
		{"evaluation error", OpRead, RuleInput{Path: "broken/x", Resource: json.RawMessage(`{}`)}, false, 3, "rules[3].read: no such key"},
		{"no rule matches", OpRead, RuleInput{Path: "other/x", Auth: owner}, false, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := c.Explain(context.Background(), tc.op, tc.in)
			allowed, err := c.Allow(context.Background(), tc.op, tc.in)
			if ex.Allowed != allowed || (ex.Err == nil) != (err == nil) {
				t.Fatalf("Explain = %v, %v; Allow = %v, %v", ex.Allowed, ex.Err, allowed, err)
			}
			if ex.Allowed != tc.allowed || ex.Rule != tc.rule {
				t.Fatalf("allowed %v rule %d, want %v %d (err %v)", ex.Allowed, ex.Rule, tc.allowed, tc.rule, ex.Err)
			}
			wantMatch, wantExpr := "", ""
			if tc.rule >= 0 {
				wantMatch, wantExpr = rules[tc.rule].Match, rules[tc.rule].Read
				if tc.op == OpWrite {
					wantExpr = rules[tc.rule].Write
				}
			}
			if ex.Match != wantMatch || ex.Expression != wantExpr {
				t.Errorf("match %q expression %q, want %q %q", ex.Match, ex.Expression, wantMatch, wantExpr)
			}
			switch {
			case tc.errSub == "" && ex.Err != nil:
				t.Errorf("unexpected error %v", ex.Err)
			case tc.errSub != "":
				if !errors.Is(ex.Err, ErrRuleEval) {
					t.Fatalf("error %v does not wrap ErrRuleEval", ex.Err)
				}
				if txt := ex.ErrorText(); !strings.HasPrefix(txt, tc.errSub) {
					t.Errorf("ErrorText = %q, want it to start with %q", txt, tc.errSub)
				}
			}
		})
	}
}

func TestExplainUnknownOpAndCancelled(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t, Rule{Match: "**", Read: "true", Write: "true"})
	if ex := c.Explain(context.Background(), Op(9), RuleInput{Path: "a"}); ex.Allowed || ex.Err == nil || ex.Rule != -1 {
		t.Errorf("unknown op: %+v", ex)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ex := c.Explain(ctx, OpRead, RuleInput{Path: "a"}); ex.Allowed || ex.Err == nil {
		t.Errorf("cancelled: %+v", ex)
	}
}

func TestUserAuthInfo(t *testing.T) {
	t.Parallel()
	u := &User{ID: "u1", Email: "a@b.c", Role: RoleOwner, Name: "Ada"}
	if got, want := u.AuthInfo(), (AuthInfo{UID: "u1", Role: RoleOwner, Email: "a@b.c"}); got != want {
		t.Errorf("AuthInfo = %+v, want %+v", got, want)
	}
}
