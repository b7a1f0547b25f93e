package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
)

func mustCompileRules(t *testing.T, rules ...Rule) *CompiledRules {
	t.Helper()
	c, err := CompileRules(RuleSet{Rules: rules})
	if err != nil {
		t.Fatalf("CompileRules: %v", err)
	}
	return c
}

func mustAllow(t *testing.T, c *CompiledRules, op Op, in RuleInput) bool {
	t.Helper()
	ok, err := c.Allow(context.Background(), op, in)
	if err != nil {
		t.Fatalf("Allow(%v, %q): %v", op, in.Path, err)
	}
	return ok
}

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, path string
		ok            bool
		vars          map[string]string
	}{
		{"users", "users", true, map[string]string{}},
		{"users", "users/a", false, nil},
		{"users", "user", false, nil},
		{"users", "", false, nil},
		{"a/b/c", "a/b/c", true, map[string]string{}},
		{"a/b/c", "a/b", false, nil},
		{"a/b/c", "a/x/c", false, nil},
		{"users/{uid}", "users/u1", true, map[string]string{"uid": "u1"}},
		{"users/{uid}", "users", false, nil},
		{"users/{uid}", "users/u1/notes", false, nil},
		{"users/{uid}", "people/u1", false, nil},
		{"{a}/{b}", "x/y", true, map[string]string{"a": "x", "b": "y"}},
		{"users/{uid}/**", "users/u1", true, map[string]string{"uid": "u1"}},
		{"users/{uid}/**", "users/u1/notes/n1", true, map[string]string{"uid": "u1"}},
		{"users/{uid}/**", "users", false, nil},
		{"users/**", "users", true, map[string]string{}},
		{"users/**", "usersx/a", false, nil},
		{"**", "", true, map[string]string{}},
		{"**", "a/b/c", true, map[string]string{}},
		{"files/{rest=**}", "files/a/b/c", true, map[string]string{"rest": "a/b/c"}},
		{"files/{rest=**}", "files/a", true, map[string]string{"rest": "a"}},
		{"files/{rest=**}", "files", true, map[string]string{"rest": ""}},
		{"files/{rest=**}", "file/a", false, nil},
		{"{rest=**}", "x/y", true, map[string]string{"rest": "x/y"}},
		{"u/{id}/{rest=**}", "u/7/a/b", true, map[string]string{"id": "7", "rest": "a/b"}},
	} {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Errorf("parsePattern(%q): %v", tc.pattern, err)
			continue
		}
		vars, ok := p.match(splitPath(tc.path))
		if ok != tc.ok || (ok && !maps.Equal(vars, tc.vars)) {
			t.Errorf("%q matching %q = %v, %v; want %v, %v", tc.pattern, tc.path, vars, ok, tc.vars, tc.ok)
		}
	}
}

func TestPatternInvalid(t *testing.T) {
	t.Parallel()
	for _, pat := range []string{
		"",
		"/users",
		"users/",
		"users//x",
		"**/users",
		"a/**/b",
		"*",
		"users/*",
		"users/a*b",
		"users/{uid",
		"users/uid}",
		"users/{}",
		"users/{1uid}",
		"users/{u-id}",
		"users/{uid}/{uid}",
		"users/{uid}/{uid=**}",
		"files/{rest=*}",
		"files/{rest=**}/x",
		"x/{a}b",
		strings.Repeat("a/", 100) + "a",
		strings.Repeat("x", 1501),
	} {
		if _, err := parsePattern(pat); err == nil {
			t.Errorf("parsePattern(%q) accepted an invalid pattern", pat)
		}
	}
}

func TestFirstMatchDecides(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t,
		Rule{Match: "users/admin", Read: "false", Write: "true"},
		Rule{Match: "users/locked", Read: "", Write: ""}, // matches, denies
		Rule{Match: "users/{uid}", Read: "true", Write: "false"},
		Rule{Match: "**", Read: "true", Write: "true"},
	)
	for _, tc := range []struct {
		path      string
		op        Op
		wantAllow bool
	}{
		{"users/admin", OpRead, false},  // rule 0 denies though rules 2 and 3 allow
		{"users/admin", OpWrite, true},  // rule 0 allows though rule 2 denies
		{"users/locked", OpRead, false}, // empty expression denies, no fall-through
		{"users/locked", OpWrite, false},
		{"users/bob", OpRead, true},
		{"users/bob", OpWrite, false}, // rule 2 denies though rule 3 allows
		{"other/doc", OpWrite, true},
	} {
		if got := mustAllow(t, c, tc.op, RuleInput{Path: tc.path}); got != tc.wantAllow {
			t.Errorf("%v %s = %v, want %v", tc.op, tc.path, got, tc.wantAllow)
		}
	}
}

func TestNoMatchOrNoRulesDenies(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t, Rule{Match: "public/{id}", Read: "true", Write: "true"})
	for _, path := range []string{"public", "public/a/b", "private/a"} {
		for _, op := range []Op{OpRead, OpWrite} {
			if mustAllow(t, c, op, RuleInput{Path: path}) {
				t.Errorf("%v %s allowed with no matching rule", op, path)
			}
		}
	}
	if !mustAllow(t, c, OpRead, RuleInput{Path: "public/a"}) {
		t.Error("matching rule did not allow")
	}
	empty := mustCompileRules(t)
	if mustAllow(t, empty, OpRead, RuleInput{Path: "a"}) {
		t.Error("empty rule set allowed a read")
	}
}

func TestDefaultRules(t *testing.T) {
	t.Parallel()
	c, err := CompileRules(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	owner := AuthInfo{UID: "own1", Role: "owner", Email: "o@x.io"}
	alice := AuthInfo{UID: "alice", Role: "user", Email: "a@x.io"}
	anon := AuthInfo{}
	for _, tc := range []struct {
		name string
		who  AuthInfo
		path string
		want bool
	}{
		{"owner at root level", owner, "settings", true},
		{"owner deep", owner, "a/b/c/d", true},
		{"owner in a user's tree", owner, "users/alice/notes/1", true},
		{"user own doc", alice, "users/alice", true},
		{"user own subtree", alice, "users/alice/notes/n1", true},
		{"user own deep subtree", alice, "users/alice/a/b/c", true},
		{"user other's doc", alice, "users/bob", false},
		{"user other's subtree", alice, "users/bob/notes/n1", false},
		{"user prefix of own uid", alice, "users/alic/x", false},
		{"user users collection", alice, "users", false},
		{"user root-level doc", alice, "settings", false},
		{"user elsewhere with own uid", alice, "alice/x", false},
		{"anonymous in users", anon, "users/x", false},
		{"anonymous with empty uid", anon, "users/", false},
		{"role must be exactly owner", AuthInfo{UID: "x", Role: "Owner"}, "settings", false},
	} {
		for _, op := range []Op{OpRead, OpWrite} {
			if got := mustAllow(t, c, op, RuleInput{Path: tc.path, Auth: tc.who}); got != tc.want {
				t.Errorf("%s: %v %s as %+v = %v, want %v", tc.name, op, tc.path, tc.who, got, tc.want)
			}
		}
	}
}

func TestRulesSeeData(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t,
		Rule{
			Match: "posts/{id}",
			Read:  "resource.data == null || resource.data.public == true || resource.data.author == auth.uid",
			Write: "request.data.public == true && request.data.author == auth.uid",
		},
		Rule{
			Match: "counters/{id}",
			Read:  "request.data == null && request.path == 'counters/' + id",
			Write: "request.data.n < 10 && request.data.n == 3 && size(request.data.tags) == 2",
		},
		Rule{
			Match: "create-only/{id}",
			Write: "resource.data == null",
		},
	)
	bob := AuthInfo{UID: "bob", Role: "user"}
	js := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name string
		op   Op
		in   RuleInput
		want bool
	}{
		{"read absent", OpRead, RuleInput{Path: "posts/1", Auth: bob}, true},
		{"read public", OpRead, RuleInput{Path: "posts/1", Auth: bob, Resource: js(`{"public":true,"author":"eve"}`)}, true},
		{"read own private", OpRead, RuleInput{Path: "posts/1", Auth: bob, Resource: js(`{"public":false,"author":"bob"}`)}, true},
		{"read other's private", OpRead, RuleInput{Path: "posts/1", Auth: bob, Resource: js(`{"public":false,"author":"eve"}`)}, false},
		{"write public own", OpWrite, RuleInput{Path: "posts/1", Auth: bob, Request: js(`{"public":true,"author":"bob"}`)}, true},
		{"write private", OpWrite, RuleInput{Path: "posts/1", Auth: bob, Request: js(`{"public":false,"author":"bob"}`)}, false},
		{"write public as other", OpWrite, RuleInput{Path: "posts/1", Auth: bob, Request: js(`{"public":true,"author":"eve"}`)}, false},
		{"write public string not bool", OpWrite, RuleInput{Path: "posts/1", Auth: bob, Request: js(`{"public":"true","author":"bob"}`)}, false},
		{"request.path and bound var", OpRead, RuleInput{Path: "counters/c1"}, true},
		{"numbers are doubles, compare with ints", OpWrite, RuleInput{Path: "counters/c1", Request: js(`{"n":3,"tags":["a","b"]}`)}, true},
		{"number too big", OpWrite, RuleInput{Path: "counters/c1", Request: js(`{"n":30,"tags":["a","b"]}`)}, false},
		{"create when absent", OpWrite, RuleInput{Path: "create-only/x", Request: js(`{}`)}, true},
		{"JSON null resource is absent", OpWrite, RuleInput{Path: "create-only/x", Resource: js(`null`)}, true},
		{"replace when present", OpWrite, RuleInput{Path: "create-only/x", Resource: js(`{"a":1}`), Request: js(`{}`)}, false},
	} {
		if got := mustAllow(t, c, tc.op, tc.in); got != tc.want {
			t.Errorf("%s: %v = %v, want %v", tc.name, tc.op, got, tc.want)
		}
	}
}

func TestPathVariables(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t,
		// Names that clash with declared variables or CEL keywords stay in path.
		Rule{Match: "a/{request}/{in}", Read: "path.request == 'r' && path['in'] == 'i' && request.path == 'a/r/i'"},
		Rule{Match: "b/{x}/{rest=**}", Read: "x == path.x && rest == 'p/q'"},
		Rule{Match: "c/{rest=**}", Read: "rest == '' && path.rest == ''"},
		Rule{Match: "d/{size}/{type_}", Read: "size == '3' && size(size) == 1 && type_ == 't'"},
	)
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"a/r/i", true},
		{"a/r/x", false},
		{"b/1/p/q", true},
		{"b/1/p", false},
		{"c", true},
		{"c/x", false},
		{"d/3/t", true},
		{"d/4/t", false},
	} {
		if got := mustAllow(t, c, OpRead, RuleInput{Path: tc.path}); got != tc.want {
			t.Errorf("read %s = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	ok := Rule{Match: "ok/{id}", Read: "true", Write: "true"}
	tooMany := make([]Rule, MaxRules+1)
	for i := range tooMany {
		tooMany[i] = ok
	}
	for _, tc := range []struct {
		name       string
		rules      []Rule
		wantIndex  int
		wantField  string
		wantInText string
	}{
		{"syntax", []Rule{{Match: "a", Read: "auth.uid =="}}, 0, "read", "rules[0].read: "},
		{"non-bool", []Rule{ok, {Match: "a", Read: "true", Write: "auth.uid"}}, 1, "write", "bool"},
		{"non-bool int", []Rule{{Match: "a", Read: "1 + 2"}}, 0, "read", "bool"},
		{"dyn is not bool", []Rule{{Match: "a", Read: "request.data.public"}}, 0, "read", "bool"},
		{"undeclared", []Rule{{Match: "a", Read: "nobody == 'x'"}}, 0, "read", "nobody"},
		{"var of another rule", []Rule{ok, ok, {Match: "x/{uid}", Read: "true"}, {Match: "y", Read: "true", Write: "uid == ''"}}, 3, "write", "uid"},
		{"type error", []Rule{{Match: "a", Read: "auth.uid == 1 && 'a' + 1 == 'b'"}}, 0, "read", "rules[0].read"},
		{"bad pattern", []Rule{ok, ok, {Match: "a/**/b", Read: "true"}}, 2, "match", "**"},
		{"empty pattern", []Rule{{Match: "", Read: "true"}}, 0, "match", "empty"},
		{"duplicate var", []Rule{{Match: "{a}/{a}", Read: "true"}}, 0, "match", "twice"},
		{"expression too long", []Rule{{Match: "a", Read: "true" + strings.Repeat(" ", MaxRuleExprLen)}}, 0, "read", "4096"},
		{"too many rules", tooMany, -1, "rules", "200"},
	} {
		_, err := CompileRules(RuleSet{Rules: tc.rules})
		var re *RuleError
		if !errors.As(err, &re) {
			t.Errorf("%s: CompileRules error = %v, want *RuleError", tc.name, err)
			continue
		}
		if re.Index != tc.wantIndex || re.Part != tc.wantField {
			t.Errorf("%s: RuleError at %d.%s, want %d.%s (%v)", tc.name, re.Index, re.Part, tc.wantIndex, tc.wantField, err)
		}
		if !strings.Contains(err.Error(), tc.wantInText) {
			t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.wantInText)
		}
		if !errors.Is(err, ErrInvalidRules) {
			t.Errorf("%s: error does not wrap ErrInvalidRules", tc.name)
		}
	}
	// Exactly at the limits is fine.
	atLimit := make([]Rule, MaxRules)
	for i := range atLimit {
		atLimit[i] = ok
	}
	atLimit[0].Read = "true" + strings.Repeat(" ", MaxRuleExprLen-4)
	if _, err := CompileRules(RuleSet{Rules: atLimit}); err != nil {
		t.Errorf("rules at the limits rejected: %v", err)
	}
}

func TestEvalErrorDenies(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t,
		Rule{Match: "a/{id}", Read: "request.data.public == true", Write: "resource.data.missing == 1"},
		Rule{Match: "big", Write: "request.data.items.all(x, request.data.items.all(y, x + y >= 0.0))"},
		Rule{Match: "{any=**}", Read: "true", Write: "true"},
	)
	for _, tc := range []struct {
		name string
		op   Op
		in   RuleInput
	}{
		{"select on null request.data", OpRead, RuleInput{Path: "a/1"}},
		{"missing key", OpWrite, RuleInput{Path: "a/1", Resource: json.RawMessage(`{"other":1}`)}},
		{"bad resource JSON", OpRead, RuleInput{Path: "x", Resource: json.RawMessage(`{"a":`)}},
		{"bad request JSON", OpWrite, RuleInput{Path: "x", Request: json.RawMessage(`nope`)}},
		{"cost limit", OpWrite, RuleInput{Path: "big", Request: bigList(2000)}},
	} {
		ok, err := c.Allow(context.Background(), tc.op, tc.in)
		if ok || !errors.Is(err, ErrRuleEval) {
			t.Errorf("%s: Allow = %v, %v; want false, ErrRuleEval", tc.name, ok, err)
		}
	}
	// The same big rule within the cost limit is allowed: the limit, not the rule, denied above.
	if !mustAllow(t, c, OpWrite, RuleInput{Path: "big", Request: bigList(10)}) {
		t.Error("small input to the big rule denied")
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := c.Allow(cancelled, OpRead, RuleInput{Path: "x"}); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("Allow(cancelled ctx) = %v, %v; want false, context.Canceled", ok, err)
	}
	for _, op := range []Op{0, 3} {
		if ok, err := c.Allow(context.Background(), op, RuleInput{Path: "x"}); ok || err == nil {
			t.Errorf("Allow(op %v) = %v, %v; want false, error", op, ok, err)
		}
	}
}

func bigList(n int) json.RawMessage {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return json.RawMessage(`{"items":[` + strings.Join(items, ",") + `]}`)
}

func TestRuleSetJSON(t *testing.T) {
	t.Parallel()
	var rs RuleSet
	doc := `{"rules":[{"match":"users/{uid}/**","read":"auth.uid == uid","write":""}]}`
	if err := json.Unmarshal([]byte(doc), &rs); err != nil {
		t.Fatal(err)
	}
	want := RuleSet{Rules: []Rule{{Match: "users/{uid}/**", Read: "auth.uid == uid"}}}
	if len(rs.Rules) != 1 || rs.Rules[0] != want.Rules[0] {
		t.Fatalf("decoded %+v, want %+v", rs, want)
	}
	c, err := CompileRules(rs)
	if err != nil {
		t.Fatal(err)
	}
	src := c.Source()
	if len(src.Rules) != 1 || src.Rules[0] != want.Rules[0] {
		t.Errorf("Source() = %+v, want %+v", src, want)
	}
	src.Rules[0].Read = "true" // must not alter the compiled rules' copy
	rs.Rules[0].Read = "true"
	if c.Source().Rules[0].Read != "auth.uid == uid" {
		t.Error("Source() shares memory with its caller or with the input")
	}
	out, err := json.Marshal(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	const wantDefault = `{"rules":[{"match":"users/{uid}/**","read":"auth.role == 'owner' || auth.uid == uid","write":"auth.role == 'owner' || auth.uid == uid"},{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	if string(out) != wantDefault {
		t.Errorf("DefaultRules JSON =\n%s\nwant\n%s", out, wantDefault)
	}
}

func TestAllowConcurrent(t *testing.T) {
	t.Parallel()
	c, err := CompileRules(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				uid := fmt.Sprintf("u%d", i)
				path := fmt.Sprintf("users/%s/n/%d", uid, j)
				if ok, err := c.Allow(context.Background(), OpWrite, RuleInput{Path: path, Auth: AuthInfo{UID: uid, Role: "user"}}); !ok || err != nil {
					t.Errorf("Allow(%s) = %v, %v", path, ok, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestReadRequestTime: a read is judged with request.time = the time it is
// answered (a rule may open a document from a date on); a write without an
// entry time has none, so an expression using it denies.
func TestReadRequestTime(t *testing.T) {
	t.Parallel()
	c := mustCompileRules(t,
		Rule{Match: "past/{id}", Read: "request.time > timestamp('2020-01-01T00:00:00Z')", Write: "request.time > timestamp('2020-01-01T00:00:00Z')"},
		Rule{Match: "future/{id}", Read: "request.time > timestamp('2999-01-01T00:00:00Z')"},
	)
	if !mustAllow(t, c, OpRead, RuleInput{Path: "past/a"}) {
		t.Fatal("a read after the rule's date was denied: request.time is not set for reads")
	}
	if mustAllow(t, c, OpRead, RuleInput{Path: "future/a"}) {
		t.Fatal("a read before the rule's date was allowed")
	}
	if ok, _ := c.Allow(context.Background(), OpWrite, RuleInput{Path: "past/a"}); ok {
		t.Fatal("a write without an entry time was allowed by a rule on request.time")
	}
}
