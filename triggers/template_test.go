package triggers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTemplates(t *testing.T) {
	ctx := context.Background()
	ch := &Change{Project: "p1", Path: "posts/a", Revision: 9, Type: TypeUpdate,
		Before: json.RawMessage(`{"n":1}`),
		After:  json.RawMessage(`{"title":"Hi","n":2,"r":2.5,"tags":["x","y"],"m":{"b":1,"a":"s"},"z":null,"ok":true}`),
		Time:   time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)}
	params := map[string]string{"id": "a"}
	cases := []struct{ src, want string }{
		{"plain text", "plain text"},
		{"", ""},
		{"{{ after.title }}", "Hi"},
		{"Post {{after.title}}!", "Post Hi!"},
		{"{{ after.n }} {{ after.r }} {{ revision }} {{ after.n - before.n }}", "2 2.5 9 1"},
		{"[{{ after.z }}]", "[]"},
		{"{{ after.ok }}", "true"},
		{"{{ after.tags }}", `["x","y"]`},
		{"{{ after.m }}", `{"a":"s","b":1}`},
		{"{{ {'k': [1, 'two}}']} }}", `{"k":[1,"two}}"]}`},
		{"{{ params.id + '/' + path + ':' + type }}", "a/posts/a:update"},
		{"{{ time }}", "2026-01-02T03:04:05.0000006Z"},
		{"a }} b", "a }} b"},
		{"{{ 'x' }}{{ \"y\" }}", "xy"},
	}
	for _, tc := range cases {
		env, err := newEnv()
		if err != nil {
			t.Fatal(err)
		}
		budget := MaxTemplateExprs
		tp, err := compileTemplate(env, tc.src, &budget)
		if err != nil {
			t.Errorf("compileTemplate(%q): %v", tc.src, err)
			continue
		}
		got, err := tp.render(ctx, activation(ch, params))
		if err != nil {
			t.Errorf("render(%q): %v", tc.src, err)
			continue
		}
		if got != tc.want {
			t.Errorf("render(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
	// A template whose expression fails to evaluate is an error, not text.
	env, _ := newEnv()
	budget := MaxTemplateExprs
	tp, err := compileTemplate(env, "{{ after.missing }}", &budget)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tp.render(ctx, activation(ch, params)); err == nil {
		t.Errorf("render of a missing key = %q, want an error", got)
	}
	for _, bad := range []string{"{{", "x {{ 1 ", "{{ 'unclosed }}", "{{}}"} {
		if _, err := compileTemplate(env, bad, &budget); err == nil {
			t.Errorf("compileTemplate(%q) accepted", bad)
		}
	}
}

func TestSplitTemplate(t *testing.T) {
	cases := []struct {
		src   string
		parts []string
		exprs []bool
	}{
		{"a {{ x }} b", []string{"a ", "x", " b"}, []bool{false, true, false}},
		{"{{x}}{{y}}", []string{"x", "y"}, []bool{true, true}},
		{"{{ {'a': {'b': 1}} }}", []string{"{'a': {'b': 1}}"}, []bool{true}},
		{`{{ "}}" + '}}' }} end`, []string{`"}}" + '}}'`, " end"}, []bool{true, false}},
		{`{{ 'it\'s }}' }}`, []string{`'it\'s }}'`}, []bool{true}},
		{"no braces } here }}", []string{"no braces } here }}"}, []bool{false}},
	}
	for _, tc := range cases {
		parts, exprs, err := splitTemplate(tc.src)
		if err != nil {
			t.Errorf("splitTemplate(%q): %v", tc.src, err)
			continue
		}
		if !slices.Equal(parts, tc.parts) || !slices.Equal(exprs, tc.exprs) {
			t.Errorf("splitTemplate(%q) = %q %v, want %q %v", tc.src, parts, exprs, tc.parts, tc.exprs)
		}
	}
}

func TestTemplateValue(t *testing.T) {
	ctx := context.Background()
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	ch := &Change{Path: "a/b", Revision: 3, After: json.RawMessage(`{"m":{"x":[1,"s"]},"n":2}`)}
	cases := []struct {
		src  string
		want string // the JSON of the value
	}{
		{"{{ after.m }}", `{"x":[1,"s"]}`},
		{"{{ after.n }}", `2`},
		{"{{ revision }}", `3`},
		{"{{ 3u }}", `3`},
		{"{{ null }}", `null`},
		{"{{ b'hi' }}", `"aGk="`},
		{"{{ duration('90s') }}", `"1m30s"`},
		{"{{ {1: 'one', true: 'yes'} }}", `{"1":"one","true":"yes"}`},
		{"n={{ after.n }}", `"n=2"`},
		{"{{ after.n }}{{ after.n }}", `"22"`},
	}
	for _, tc := range cases {
		budget := MaxTemplateExprs
		tp, err := compileTemplate(env, tc.src, &budget)
		if err != nil {
			t.Errorf("compileTemplate(%q): %v", tc.src, err)
			continue
		}
		v, err := tp.value(ctx, activation(ch, nil))
		if err != nil {
			t.Errorf("value(%q): %v", tc.src, err)
			continue
		}
		got, _ := json.Marshal(v)
		if string(got) != tc.want {
			t.Errorf("value(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
	budget := MaxTemplateExprs
	tp, err := compileTemplate(env, "{{ {1.5: 'x'} }}", &budget)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tp.value(ctx, activation(ch, nil)); err == nil {
		t.Errorf("a double map key rendered: %v", v)
	}
	if _, err := compileTemplate(env, strings.Repeat("x", MaxTemplateLen+1), &budget); err == nil {
		t.Error("an oversized template compiled")
	}
}
