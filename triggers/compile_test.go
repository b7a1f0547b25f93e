package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

func webhookDef(match string) *Definition {
	return &Definition{Match: match, Action: Action{Webhook: &Webhook{URL: "https://hooks.example.com/in"}}}
}

func pushDef(p PushAction) *Definition {
	return &Definition{Match: "posts/{id}", Action: Action{Push: &p}}
}

func writeDef(w WriteAction) *Definition {
	return &Definition{Match: "posts/{id}", Action: Action{Write: &w}}
}

func mustCompile(t *testing.T, d *Definition) *Compiled {
	t.Helper()
	c, err := Compile("p1", "t1", d, 7)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func TestValidateRefuses(t *testing.T) {
	long := strings.Repeat("x", MaxExprLen)
	manyHeaders := map[string]string{}
	for i := range MaxHeaders + 1 {
		manyHeaders[fmt.Sprintf("X-H%d", i)] = "v"
	}
	manyExprs := map[string]any{}
	for i := range MaxTemplateExprs + 1 {
		manyExprs[fmt.Sprintf("k%d", i)] = "{{ path }}"
	}
	manyData, _ := json.Marshal(manyExprs)
	cases := []struct {
		name  string
		tname string // trigger name; "" means "t1"
		def   *Definition
		field string
		msg   string // a part of the message
	}{
		{"empty name", "-", webhookDef("posts/{id}"), "name", "letters, digits"},
		{"name with space", "a b", webhookDef("a"), "name", "letters, digits"},
		{"name too long", strings.Repeat("a", MaxNameLen+1), webhookDef("a"), "name", "letters, digits"},
		{"name mismatch", "", &Definition{Name: "other", Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "name", "does not match"},
		{"match empty", "", webhookDef(""), "match", "pattern is empty"},
		{"match glob not last", "", webhookDef("a/**/b"), "match", "last segment"},
		{"match var twice", "", webhookDef("a/{x}/{x}"), "match", "twice"},
		{"match reserved var", "", webhookDef("a/{_x}"), "match", "reserved"},
		{"on unknown", "", &Definition{Match: "a", On: []string{"created"}, Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "on[0]", "not an event type"},
		{"on duplicate", "", &Definition{Match: "a", On: []string{"create", "create"}, Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "on[1]", "twice"},
		{"condition syntax", "", &Definition{Match: "a", Condition: "after.x ==", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "condition", "Syntax error"},
		{"condition not bool", "", &Definition{Match: "a", Condition: "revision + 1", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "condition", "must be of type bool"},
		{"condition dyn", "", &Definition{Match: "a", Condition: "after.flag", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "condition", "must be of type bool"},
		{"condition undeclared", "", &Definition{Match: "a", Condition: "auth.uid == 'x'", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "condition", "undeclared reference"},
		{"condition too long", "", &Definition{Match: "a", Condition: "'" + long + "' == ''", Action: Action{Webhook: &Webhook{URL: "https://x.example"}}}, "condition", "at most 4096"},
		{"no action", "", &Definition{Match: "a"}, "action", "exactly one"},
		{"two actions", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example"}, Push: &PushAction{To: "project", Title: "x"}}}, "action", "got 2"},

		{"url empty", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{}}}, "action.webhook.url", "required"},
		{"url ftp", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "ftp://x.example/"}}}, "action.webhook.url", "http or https"},
		{"url relative", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "/hook"}}}, "action.webhook.url", "http or https"},
		{"url userinfo", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://u:p@x.example/"}}}, "action.webhook.url", "user name"},
		{"url no host", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https:///path"}}}, "action.webhook.url", "no host"},
		{"url bad", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example:port/"}}}, "action.webhook.url", "not a valid URL"},
		{"url too long", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example/" + strings.Repeat("a", MaxURLLen)}}}, "action.webhook.url", "longer than 2048"},
		{"secret short", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Secret: "short"}}}, "action.webhook.secret", "16 to 256"},
		{"secret long", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Secret: strings.Repeat("s", MaxSecretLen+1)}}}, "action.webhook.secret", "16 to 256"},
		{"secret space", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Secret: "a secret with spaces"}}}, "action.webhook.secret", "spaces"},
		{"too many headers", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: manyHeaders}}}, "action.webhook.headers", "at most 20"},
		{"header bad name", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"Bad Name": "v"}}}}, "action.webhook.headers.Bad Name", "not a valid header name"},
		{"header content-type", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"content-type": "text/plain"}}}}, "action.webhook.headers.content-type", "set by the delivery"},
		{"header idempotency", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"Idempotency-Key": "k"}}}}, "action.webhook.headers.Idempotency-Key", "set by the delivery"},
		{"header edgebase", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"Edgebase-Signature": "x"}}}}, "action.webhook.headers.Edgebase-Signature", "set by the delivery"},
		{"header hop-by-hop", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"Transfer-Encoding": "chunked"}}}}, "action.webhook.headers.Transfer-Encoding", "set by the delivery"},
		{"header host", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"Host": "y"}}}}, "action.webhook.headers.Host", "set by the delivery"},
		{"header value control", "", &Definition{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Headers: map[string]string{"X-A": "a\r\nX-B: b"}}}}, "action.webhook.headers.X-A", "control characters"},

		{"push to missing", "", pushDef(PushAction{Title: "t"}), "action.push.to", "required"},
		{"push to bad", "", pushDef(PushAction{To: "everyone", Title: "t"}), "action.push.to", "user, topic or project"},
		{"push user without userIdFrom", "", pushDef(PushAction{To: "user", Title: "t"}), "action.push.userIdFrom", "required with to: user"},
		{"push userIdFrom not string", "", pushDef(PushAction{To: "user", UserIDFrom: "revision + 1", Title: "t"}), "action.push.userIdFrom", "must be of type string"},
		{"push userIdFrom syntax", "", pushDef(PushAction{To: "user", UserIDFrom: "after.", Title: "t"}), "action.push.userIdFrom", "Syntax error"},
		{"push userIdFrom with topic", "", pushDef(PushAction{To: "topic", Topic: "news", UserIDFrom: "after.owner", Title: "t"}), "action.push.userIdFrom", "only used with to: user"},
		{"push topic missing", "", pushDef(PushAction{To: "topic", Title: "t"}), "action.push.topic", "required with to: topic"},
		{"push topic invalid", "", pushDef(PushAction{To: "topic", Topic: "_news", Title: "t"}), "action.push.topic", "must start with a letter or digit"},
		{"push topic with user", "", pushDef(PushAction{To: "user", UserIDFrom: "after.owner", Topic: "news", Title: "t"}), "action.push.topic", "only used with to: topic"},
		{"push category", "", pushDef(PushAction{To: "project", Title: "t", Category: "spam"}), "action.push.category", "general, marketing or security"},
		{"push title missing", "", pushDef(PushAction{To: "project", Body: "b"}), "action.push.title", "required"},
		{"push title unclosed", "", pushDef(PushAction{To: "project", Title: "New {{ after.title"}), "action.push.title", "not closed"},
		{"push title empty expr", "", pushDef(PushAction{To: "project", Title: "New {{ }}"}), "action.push.title", "no expression"},
		{"push title bad expr", "", pushDef(PushAction{To: "project", Title: "New {{ nope.x }}"}), "action.push.title", "undeclared reference"},
		{"push title too long", "", pushDef(PushAction{To: "project", Title: strings.Repeat("t", 257)}), "action.push.title", "longer than 256"},
		{"push body bad expr", "", pushDef(PushAction{To: "project", Title: "t", Body: "{{ 1 + }}"}), "action.push.body", "Syntax error"},
		{"push data reserved key", "", pushDef(PushAction{To: "project", Title: "t", Data: map[string]string{"from": "x"}}), "action.push.data.from", "reserved by FCM"},
		{"push data bad template", "", pushDef(PushAction{To: "project", Title: "t", Data: map[string]string{"k": "{{ x"}}), "action.push.data.k", "not closed"},

		{"write op missing", "", writeDef(WriteAction{Collection: "a/b"}), "action.write.op", "op is required"},
		{"write op unknown", "", writeDef(WriteAction{Op: "upsert", Collection: "a/b"}), "action.write.op", "one of set, update"},
		{"write collection missing", "", writeDef(WriteAction{Op: "delete"}), "action.write.collection", "required"},
		{"write collection reserved", "", writeDef(WriteAction{Op: "delete", Collection: "_users/x"}), "action.write.collection", "reserved"},
		{"write collection empty segment", "", writeDef(WriteAction{Op: "delete", Collection: "a//b"}), "action.write.collection", "empty segment"},
		{"write collection bad template", "", writeDef(WriteAction{Op: "delete", Collection: "a/{{ params.id"}), "action.write.collection", "not closed"},
		{"write set no data", "", writeDef(WriteAction{Op: "set", Collection: "a/b"}), "action.write.data", "required"},
		{"write set data array", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: json.RawMessage(`[1]`)}), "action.write.data", "JSON object"},
		{"write set data dup key", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: json.RawMessage(`{"a":1,"a":2}`)}), "action.write.data", `key "a" twice`},
		{"write set data big number", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: json.RawMessage(`{"a":1e400}`)}), "action.write.data", "64-bit float"},
		{"write set data bad expr", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: json.RawMessage(`{"a":"{{ nope }}"}`)}), "action.write.data", "undeclared reference"},
		{"write too many exprs", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: manyData}), "action.write.data", "at most 200 template expressions"},
		{"write delete with data", "", writeDef(WriteAction{Op: "delete", Collection: "a/b", Data: json.RawMessage(`{}`)}), "action.write.data", "not used by op delete"},
		{"write set with field", "", writeDef(WriteAction{Op: "set", Collection: "a/b", Data: json.RawMessage(`{}`), Field: "x"}), "action.write.field", "not used by op set"},
		{"write update no oldKey", "", writeDef(WriteAction{Op: "update", Collection: "a/b", NewKey: "n", Value: json.RawMessage(`1`)}), "action.write.oldKey", "oldKey is required"},
		{"write update no newKey", "", writeDef(WriteAction{Op: "update", Collection: "a/b", OldKey: "n", Value: json.RawMessage(`1`)}), "action.write.newKey", "newKey is required"},
		{"write update no value", "", writeDef(WriteAction{Op: "update", Collection: "a/b", OldKey: "n", NewKey: "n"}), "action.write.value", "value is required"},
		{"write update bad type", "", writeDef(WriteAction{Op: "update", Collection: "a/b", OldKey: "n", NewKey: "n", Value: json.RawMessage(`1`), Type: "float"}), "action.write.type", "one of string, number"},
		{"write deleteField no field", "", writeDef(WriteAction{Op: "deleteField", Collection: "a/b"}), "action.write.field", "field is required"},
		{"write increment no by", "", writeDef(WriteAction{Op: "increment", Collection: "a/b", Field: "n"}), "action.write.by", "by is required"},
		{"write increment by string", "", writeDef(WriteAction{Op: "increment", Collection: "a/b", Field: "n", By: json.RawMessage(`"two"`)}), "action.write.by", "must be a number"},
		{"write increment by text template", "", writeDef(WriteAction{Op: "increment", Collection: "a/b", Field: "n", By: json.RawMessage(`"{{ 1 }}x"`)}), "action.write.by", "single {{ expression }}"},
		{"write arrayUnion no values", "", writeDef(WriteAction{Op: "arrayUnion", Collection: "a/b", Field: "tags"}), "action.write.values", "values is required"},
		{"write arrayRemove values object", "", writeDef(WriteAction{Op: "arrayRemove", Collection: "a/b", Field: "tags", Values: json.RawMessage(`{"a":1}`)}), "action.write.values", "JSON array"},
		{"write serverTimestamp no field", "", writeDef(WriteAction{Op: "serverTimestamp", Collection: "a/b"}), "action.write.field", "field is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.tname
			if name == "" {
				name = "t1"
			}
			err := Validate(name, tc.def)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Message, tc.msg) {
				t.Fatalf("Validate = {%q, %q}, want {%q, ...%q...}", fe.Field, fe.Message, tc.field, tc.msg)
			}
			if fe.Error() != fe.Field+": "+fe.Message {
				t.Errorf("Error() = %q", fe.Error())
			}
		})
	}
}

func TestValidateAcceptsAndFillsDefaults(t *testing.T) {
	valid := []*Definition{
		webhookDef("posts/{id}"),
		{Match: "users/{uid}/**", On: []string{"update", "delete"}, Condition: "before != null && after == null",
			Action: Action{Webhook: &Webhook{URL: "http://127.0.0.1:8080/h?x=1", Secret: "0123456789abcdef", Headers: map[string]string{"X-Api-Key": "k", "Authorization": "Bearer t"}}}},
		{Match: "a", Action: Action{Webhook: &Webhook{URL: "https://x.example", Secret: "sealed:" + strings.Repeat("A", 400)}}},
		pushDef(PushAction{To: "user", UserIDFrom: "after.owner", Title: "New post {{ after.title }}", Body: "{{ after.body }}", Data: map[string]string{"id": "{{ params.id }}"}, Category: "marketing"}),
		pushDef(PushAction{To: "topic", Topic: "posts-{{ params.id }}", Title: "t"}),
		pushDef(PushAction{To: "project", Title: "t"}),
		writeDef(WriteAction{Op: "set", Collection: "audit/{{ params.id }}-{{ revision }}", Data: json.RawMessage(`{"title":"{{ after.title }}","n":1,"nested":{"l":["{{ revision }}",true,null]}}`)}),
		writeDef(WriteAction{Op: "update", Collection: "a/b", OldKey: "x", NewKey: "y", Value: json.RawMessage(`null`), Type: "null"}),
		writeDef(WriteAction{Op: "delete", Collection: "a/{{ params.id }}"}),
		writeDef(WriteAction{Op: "deleteField", Collection: "a/b", Field: "x"}),
		writeDef(WriteAction{Op: "increment", Collection: "a/b", Field: "x", By: json.RawMessage(`-1.5`)}),
		writeDef(WriteAction{Op: "increment", Collection: "a/b", Field: "x", By: json.RawMessage(`"{{ after.n }}"`)}),
		writeDef(WriteAction{Op: "serverTimestamp", Collection: "a/b", Field: "x"}),
		writeDef(WriteAction{Op: "arrayUnion", Collection: "a/b", Field: "x", Values: json.RawMessage(`["{{ params.id }}", 1]`)}),
	}
	for i, d := range valid {
		if err := Validate("t1", d); err != nil {
			t.Errorf("valid[%d]: %v", i, err)
			continue
		}
		if d.Name != "t1" {
			t.Errorf("valid[%d]: Name = %q, want t1", i, d.Name)
		}
		if len(d.On) == 0 {
			t.Errorf("valid[%d]: On not filled", i)
		}
	}
	if d := valid[0]; !slices.Equal(d.On, []string{TypeCreate, TypeUpdate, TypeDelete}) {
		t.Errorf("default On = %v", d.On)
	}
	if d := valid[1]; !slices.Equal(d.On, []string{TypeUpdate, TypeDelete}) {
		t.Errorf("On was changed: %v", d.On)
	}
	for _, n := range []string{"a", "A1", "on-create_2", strings.Repeat("x", MaxNameLen)} {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "_a", "-a", "a.b", "a/b", "é", strings.Repeat("x", MaxNameLen+1)} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}

func TestCompileDoesNotShareDefinition(t *testing.T) {
	d := webhookDef("a")
	d.Action.Webhook.Headers = map[string]string{"X-A": "1"}
	c := mustCompile(t, d)
	d.Action.Webhook.Headers["X-A"] = "2"
	d.On[0] = "changed"
	if c.Def.Action.Webhook.Headers["X-A"] != "1" || c.Def.On[0] != TypeCreate {
		t.Errorf("Compiled shares the caller's definition: %+v", c.Def)
	}
	if c.Project != "p1" || c.Name != "t1" || c.DefRevision != 7 {
		t.Errorf("Compiled = %s/%s@%d", c.Project, c.Name, c.DefRevision)
	}
}

func TestFires(t *testing.T) {
	ctx := context.Background()
	when := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ch := func(typ, path string, before, after string) *Change {
		c := &Change{Project: "p1", Path: path, Revision: 42, Type: typ, Time: when}
		if before != "" {
			c.Before = json.RawMessage(before)
		}
		if after != "" {
			c.After = json.RawMessage(after)
		}
		return c
	}
	cases := []struct {
		name      string
		match     string
		on        []string
		condition string
		ch        *Change
		fire      bool
		params    map[string]string
		wantErr   bool
	}{
		{"pattern binds", "posts/{pid}/comments/{cid}", nil, "", ch(TypeCreate, "posts/a/comments/c", "", `{}`), true, map[string]string{"pid": "a", "cid": "c"}, false},
		{"pattern misses", "posts/{pid}", nil, "", ch(TypeCreate, "posts/a/comments/c", "", `{}`), false, nil, false},
		{"rest binds", "files/{rest=**}", nil, "", ch(TypeCreate, "files/x/y", "", `{}`), true, map[string]string{"rest": "x/y"}, false},
		{"other project", "**", nil, "", &Change{Project: "p2", Path: "a", Type: TypeCreate}, false, nil, false},
		{"on excludes", "posts/{id}", []string{TypeUpdate}, "", ch(TypeCreate, "posts/a", "", `{}`), false, nil, false},
		{"on includes", "posts/{id}", []string{TypeUpdate, TypeDelete}, "", ch(TypeDelete, "posts/a", `{}`, ""), true, map[string]string{"id": "a"}, false},
		{"condition after", "posts/{id}", nil, "after.n > 10", ch(TypeCreate, "posts/a", "", `{"n":11}`), true, map[string]string{"id": "a"}, false},
		{"condition after false", "posts/{id}", nil, "after.n > 10", ch(TypeCreate, "posts/a", "", `{"n":3}`), false, nil, false},
		{"condition before/after change", "posts/{id}", nil, "before != null && after != null && before.status != after.status", ch(TypeUpdate, "posts/a", `{"status":"draft"}`, `{"status":"live"}`), true, map[string]string{"id": "a"}, false},
		{"condition delete after null", "posts/{id}", nil, "after == null && before.title == 'x'", ch(TypeDelete, "posts/a", `{"title":"x"}`, ""), true, map[string]string{"id": "a"}, false},
		{"condition type", "posts/{id}", nil, "type == 'update'", ch(TypeCreate, "posts/a", "", `{}`), false, nil, false},
		{"condition revision", "posts/{id}", nil, "revision == 42 && revision > 41", ch(TypeCreate, "posts/a", "", `{}`), true, map[string]string{"id": "a"}, false},
		{"condition params", "posts/{id}", nil, "params.id == 'a' && path == 'posts/a'", ch(TypeCreate, "posts/a", "", `{}`), true, map[string]string{"id": "a"}, false},
		{"condition time", "posts/{id}", nil, "time == timestamp('2026-11-27T12:00:00Z')", ch(TypeCreate, "posts/a", "", `{}`), true, map[string]string{"id": "a"}, false},
		{"condition error", "posts/{id}", nil, "after.missing == 1", ch(TypeCreate, "posts/a", "", `{}`), false, nil, true},
		{"condition null data error", "posts/{id}", nil, "after.n == 1", ch(TypeDelete, "posts/a", `{}`, ""), false, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := webhookDef(tc.match)
			d.On, d.Condition = tc.on, tc.condition
			c := mustCompile(t, d)
			params, fire, err := c.Fires(ctx, tc.ch)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if fire != tc.fire {
				t.Fatalf("fire = %v, want %v", fire, tc.fire)
			}
			if fire && !maps.Equal(params, tc.params) {
				t.Errorf("params = %v, want %v", params, tc.params)
			}
		})
	}
}

func TestFiresCostLimit(t *testing.T) {
	d := webhookDef("a")
	d.Condition = "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))"
	c := mustCompile(t, d)
	_, fire, err := c.Fires(context.Background(), &Change{Project: "p1", Path: "a", Type: TypeCreate})
	if err == nil || fire || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("fire=%v err=%v, want a cost limit error", fire, err)
	}
}

func TestRenderWrite(t *testing.T) {
	ctx := context.Background()
	ch := &Change{Project: "p1", Path: "posts/a", Revision: 9, Type: TypeCreate,
		After: json.RawMessage(`{"title":"Hi","n":3,"m":{"k":[1,2]},"owner":"u1"}`)}
	params := map[string]string{"id": "a"}
	cases := []struct {
		name string
		w    WriteAction
		want raftstore.Op
	}{
		{"set", WriteAction{Op: "set", Collection: "audit/{{ params.id }}-{{ revision }}",
			Data: json.RawMessage(`{"title":"Re: {{ after.title }}","n":"{{ after.n * 2.0 }}","m":"{{ after.m }}","lit":[1,"{{ after.owner }}",null,false],"x":1.50}`)},
			raftstore.Op{Kind: raftstore.OpPut, Path: "p1/audit/a-9", Data: json.RawMessage(`{"lit":[1,"u1",null,false],"m":{"k":[1,2]},"n":6,"title":"Re: Hi","x":1.50}`)}},
		{"update same key", WriteAction{Op: "update", Collection: "counts/{{ params.id }}", OldKey: "last", NewKey: "last", Value: json.RawMessage(`"{{ after.title }}"`), Type: "string"},
			raftstore.Op{Kind: raftstore.OpSetField, Path: "p1/counts/a", Field: "last", Data: json.RawMessage(`"Hi"`)}},
		{"update rename", WriteAction{Op: "update", Collection: "counts/a", OldKey: "old", NewKey: "new", Value: json.RawMessage(`{"v":"{{ revision }}"}`)},
			raftstore.Op{Kind: raftstore.OpRenameField, Path: "p1/counts/a", Field: "old", NewField: "new", Data: json.RawMessage(`{"v":9}`)}},
		{"delete", WriteAction{Op: "delete", Collection: "mirror/{{ params.id }}"},
			raftstore.Op{Kind: raftstore.OpDelete, Path: "p1/mirror/a", IfExists: true}},
		{"deleteField", WriteAction{Op: "deleteField", Collection: "a/b", Field: "f"},
			raftstore.Op{Kind: raftstore.OpDeleteField, Path: "p1/a/b", Field: "f"}},
		{"increment literal", WriteAction{Op: "increment", Collection: "stats/posts", Field: "count", By: json.RawMessage(`1`)},
			raftstore.Op{Kind: raftstore.OpIncrement, Path: "p1/stats/posts", Field: "count", Data: json.RawMessage(`1`)}},
		{"increment template", WriteAction{Op: "increment", Collection: "stats/posts", Field: "count", By: json.RawMessage(`"{{ -after.n }}"`)},
			raftstore.Op{Kind: raftstore.OpIncrement, Path: "p1/stats/posts", Field: "count", Data: json.RawMessage(`-3`)}},
		{"serverTimestamp", WriteAction{Op: "serverTimestamp", Collection: "a/b", Field: "at"},
			raftstore.Op{Kind: raftstore.OpServerTimestamp, Path: "p1/a/b", Field: "at"}},
		{"arrayUnion", WriteAction{Op: "arrayUnion", Collection: "users/{{ after.owner }}", Field: "posts", Values: json.RawMessage(`["{{ params.id }}"]`)},
			raftstore.Op{Kind: raftstore.OpArrayUnion, Path: "p1/users/u1", Field: "posts", Data: json.RawMessage(`["a"]`)}},
		{"arrayRemove", WriteAction{Op: "arrayRemove", Collection: "users/u1", Field: "posts", Values: json.RawMessage(`["{{ params.id }}", 2]`)},
			raftstore.Op{Kind: raftstore.OpArrayRemove, Path: "p1/users/u1", Field: "posts", Data: json.RawMessage(`["a",2]`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, writeDef(tc.w))
			op, err := c.RenderWrite(ctx, ch, params)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(op)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("op = %s\nwant %s", got, want)
			}
		})
	}
}

func TestRenderWriteRefuses(t *testing.T) {
	ctx := context.Background()
	ch := &Change{Project: "p1", Path: "posts/a", Revision: 9, Type: TypeCreate,
		After: json.RawMessage(`{"title":"Hi","n":3,"s":"x","deep":"_hidden"}`)}
	params := map[string]string{"id": "a"}
	cases := []struct {
		name string
		w    WriteAction
		msg  string
	}{
		{"reserved collection", WriteAction{Op: "delete", Collection: "{{ after.deep }}/x"}, "reserved"},
		{"empty collection", WriteAction{Op: "delete", Collection: "{{ after.missing_is_error }}"}, "collection"},
		{"empty segment", WriteAction{Op: "delete", Collection: "a/{{ '' }}"}, "empty segment"},
		{"dot segment", WriteAction{Op: "delete", Collection: "a/{{ '..' }}/b"}, `may not be ".."`},
		{"update type mismatch", WriteAction{Op: "update", Collection: "a/b", OldKey: "k", NewKey: "k", Value: json.RawMessage(`"{{ after.s }}"`), Type: "number"}, "not of type number"},
		{"update timestamp", WriteAction{Op: "update", Collection: "a/b", OldKey: "k", NewKey: "k", Value: json.RawMessage(`"{{ after.s }}"`), Type: "timestamp"}, "RFC 3339"},
		{"increment by string", WriteAction{Op: "increment", Collection: "a/b", Field: "n", By: json.RawMessage(`"{{ after.s }}"`)}, "not a number"},
		{"value nan", WriteAction{Op: "update", Collection: "a/b", OldKey: "k", NewKey: "k", Value: json.RawMessage(`"{{ 0.0 / 0.0 }}"`)}, "not a JSON number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, writeDef(tc.w))
			op, err := c.RenderWrite(ctx, ch, params)
			if !errors.Is(err, ErrRender) {
				t.Fatalf("RenderWrite = %+v, %v; want ErrRender", op, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
	c := mustCompile(t, webhookDef("a"))
	if _, err := c.RenderWrite(ctx, ch, params); !errors.Is(err, ErrRender) {
		t.Errorf("RenderWrite of a webhook trigger = %v", err)
	}
	if _, err := c.RenderPush(ctx, ch, params); !errors.Is(err, ErrRender) {
		t.Errorf("RenderPush of a webhook trigger = %v", err)
	}
}

func TestRenderPush(t *testing.T) {
	ctx := context.Background()
	ch := &Change{Project: "p1", Path: "posts/a", Revision: 9, Type: TypeCreate,
		After: json.RawMessage(`{"title":"Hi","owner":"u1","n":3,"long":"` + strings.Repeat("x", 300) + `","slash":"a/b"}`)}
	params := map[string]string{"id": "a"}
	c := mustCompile(t, pushDef(PushAction{To: "user", UserIDFrom: "after.owner", Title: "New: {{ after.title }}", Body: "{{ after.n }} likes",
		Data: map[string]string{"post": "{{ params.id }}", "rev": "{{ revision }}"}}))
	m, err := c.RenderPush(ctx, ch, params)
	if err != nil {
		t.Fatal(err)
	}
	want := PushMessage{To: "user", UserID: "u1", Title: "New: Hi", Body: "3 likes", Category: "general", Data: map[string]string{"post": "a", "rev": "9"}}
	if m.To != want.To || m.UserID != want.UserID || m.Title != want.Title || m.Body != want.Body || m.Category != want.Category || !maps.Equal(m.Data, want.Data) {
		t.Errorf("RenderPush = %+v, want %+v", m, want)
	}

	c = mustCompile(t, pushDef(PushAction{To: "topic", Topic: "post-{{ params.id }}", Title: "t", Category: "security"}))
	if m, err = c.RenderPush(ctx, ch, params); err != nil || m.Topic != "post-a" || m.Category != "security" || m.UserID != "" {
		t.Errorf("topic RenderPush = %+v, %v", m, err)
	}
	c = mustCompile(t, pushDef(PushAction{To: "project", Title: "t"}))
	if m, err = c.RenderPush(ctx, ch, params); err != nil || m.To != "project" || m.Topic != "" || m.UserID != "" {
		t.Errorf("project RenderPush = %+v, %v", m, err)
	}

	refused := []struct {
		name string
		p    PushAction
		msg  string
	}{
		{"user id not string", PushAction{To: "user", UserIDFrom: "after.n", Title: "t"}, "not a string"},
		{"user id with slash", PushAction{To: "user", UserIDFrom: "after.slash", Title: "t"}, "not valid"},
		{"user id empty", PushAction{To: "user", UserIDFrom: "''", Title: "t"}, "empty"},
		{"user id eval error", PushAction{To: "user", UserIDFrom: "after.nobody", Title: "t"}, "userIdFrom"},
		{"topic rendered bad", PushAction{To: "topic", Topic: "{{ after.slash }}", Title: "t"}, "topic may hold only"},
		{"title rendered too long", PushAction{To: "project", Title: "{{ after.long }}"}, "longer than 256"},
		{"title rendered blank", PushAction{To: "project", Title: "{{ after.title == 'Hi' ? '' : 'x' }}"}, "title is required"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, pushDef(tc.p))
			m, err := c.RenderPush(ctx, ch, params)
			if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("RenderPush = %+v, %v; want ErrRender mentioning %q", m, err, tc.msg)
			}
		})
	}
}

func TestChangeFromEvent(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 5, time.UTC)
	doc := func(data string) *raftstore.Document { return &raftstore.Document{Data: json.RawMessage(data)} }
	cases := []struct {
		name string
		ev   raftstore.Event
		ok   bool
		want Change
	}{
		{"create", raftstore.Event{Revision: 5, Path: "p1/posts/a", Type: raftstore.EventSet, Doc: doc(`{"n":1}`), Time: now.UnixNano()}, true,
			Change{Project: "p1", Path: "posts/a", Revision: 5, Type: TypeCreate, After: json.RawMessage(`{"n":1}`), Time: now, Depth: 2}},
		{"update", raftstore.Event{Revision: 6, Path: "p1/posts/a", Type: raftstore.EventSet, Doc: doc(`{"n":2}`), Before: doc(`{"n":1}`), Time: now.UnixNano()}, true,
			Change{Project: "p1", Path: "posts/a", Revision: 6, Type: TypeUpdate, Before: json.RawMessage(`{"n":1}`), After: json.RawMessage(`{"n":2}`), Time: now, Depth: 2}},
		{"delete", raftstore.Event{Revision: 7, Path: "p1/posts/a", Type: raftstore.EventDelete, Before: doc(`{"n":2}`)}, true,
			Change{Project: "p1", Path: "posts/a", Revision: 7, Type: TypeDelete, Before: json.RawMessage(`{"n":2}`), Depth: 2}},
		{"system", raftstore.Event{Revision: 8, Path: "_sys/projects/p1", Type: raftstore.EventSet, Doc: doc(`{}`)}, false, Change{}},
		{"reserved", raftstore.Event{Revision: 8, Path: "p1/_users/u1", Type: raftstore.EventSet, Doc: doc(`{}`)}, false, Change{}},
		{"reserved deeper", raftstore.Event{Revision: 8, Path: "p1/_notify/u1/n1", Type: raftstore.EventSet, Doc: doc(`{}`)}, false, Change{}},
		{"trigger state", raftstore.Event{Revision: 8, Path: "p1/_triggerstate/t", Type: raftstore.EventSet, Doc: doc(`{}`)}, false, Change{}},
		{"project root", raftstore.Event{Revision: 8, Path: "p1", Type: raftstore.EventSet, Doc: doc(`{}`)}, false, Change{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ChangeFromEvent(tc.ev, 2)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tc.want)
			if string(g) != string(w) || !got.Time.Equal(tc.want.Time) {
				t.Errorf("Change = %s\nwant %s", g, w)
			}
		})
	}
}

func TestNewPayload(t *testing.T) {
	c := mustCompile(t, webhookDef("**"))
	ch := &Change{Project: "p1", Path: "posts/a b/c", Revision: 12, Type: TypeUpdate,
		Before: json.RawMessage(`{"n":1}`), After: json.RawMessage(`{"n":2}`),
		Time: time.Date(2026, 11, 27, 12, 0, 0, 123, time.FixedZone("x", 3600))}
	p := NewPayload(c, ch, map[string]string{})
	if p.ID != "t1:12:posts%2Fa%20b%2Fc" {
		t.Errorf("ID = %q", p.ID)
	}
	if p.Params != nil {
		t.Errorf("empty params kept: %v", p.Params)
	}
	if p.Time != "2026-11-27T11:00:00.000000123Z" {
		t.Errorf("Time = %q", p.Time)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"t1:12:posts%2Fa%20b%2Fc","trigger":"t1","project":"p1","revision":12,"path":"posts/a b/c","type":"update","before":{"n":1},"after":{"n":2},"time":"2026-11-27T11:00:00.000000123Z"}`
	if string(b) != want {
		t.Errorf("payload = %s\nwant %s", b, want)
	}
	del := NewPayload(c, &Change{Project: "p1", Path: "x", Revision: 1, Type: TypeDelete, Before: json.RawMessage(`{}`)}, map[string]string{"id": "x"})
	b, _ = json.Marshal(del)
	if !strings.Contains(string(b), `"after":null`) || !strings.Contains(string(b), `"params":{"id":"x"}`) {
		t.Errorf("delete payload = %s", b)
	}
}
