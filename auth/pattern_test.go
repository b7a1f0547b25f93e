package auth

import (
	"maps"
	"slices"
	"testing"
)

func TestExportedPatternMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		ok            bool
		vars          map[string]string
	}{
		{"posts/{id}", "posts/a", true, map[string]string{"id": "a"}},
		{"posts/{id}", "posts/a/comments/c", false, nil},
		{"posts/{id}", "posts", false, nil},
		{"posts/{id}/comments/{cid}", "posts/a/comments/c", true, map[string]string{"id": "a", "cid": "c"}},
		{"users/{uid}/**", "users/u1/notes/n", true, map[string]string{"uid": "u1"}},
		{"users/{uid}/**", "users/u1", true, map[string]string{"uid": "u1"}},
		{"files/{rest=**}", "files/a/b/c", true, map[string]string{"rest": "a/b/c"}},
		{"**", "anything/at/all", true, map[string]string{}},
		{"posts/x", "posts/y", false, nil},
	}
	for _, tc := range cases {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tc.pattern, err)
		}
		vars, ok := p.Match(tc.path)
		if ok != tc.ok {
			t.Errorf("%q.Match(%q) = %v, want %v", tc.pattern, tc.path, ok, tc.ok)
			continue
		}
		if ok && !maps.Equal(vars, tc.vars) {
			t.Errorf("%q.Match(%q) vars = %v, want %v", tc.pattern, tc.path, vars, tc.vars)
		}
	}
}

func TestExportedParsePatternRefuses(t *testing.T) {
	for _, s := range []string{"", "a//b", "**/a", "a/{x}/{x}", "a/{x=*}", "a/{rest=**}/b", "a/b*", "a/{1x}"} {
		if _, err := ParsePattern(s); err == nil {
			t.Errorf("ParsePattern(%q) accepted an invalid pattern", s)
		}
	}
}

func TestExportedPatternVars(t *testing.T) {
	p, err := ParsePattern("a/{x}/b/{y}/{rest=**}")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Vars(); !slices.Equal(got, []string{"x", "y", "rest"}) {
		t.Errorf("Vars() = %v", got)
	}
	// Vars is a copy: changing it does not change the pattern.
	p.Vars()[0] = "z"
	if got := p.Vars(); got[0] != "x" {
		t.Errorf("Vars() shares its slice: %v", got)
	}
}
