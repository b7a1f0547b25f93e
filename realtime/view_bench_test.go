package realtime

import (
	"encoding/json"
	"testing"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// The cost of judging one change for one (rules, caller): what the shard
// pays per change and distinct caller when the rules cannot decide a
// subscription's subtree from the path. A ReadAll view pays nothing.
func BenchmarkViewAllows(b *testing.B) {
	rules, err := auth.CompileRules(auth.RuleSet{Rules: []auth.Rule{
		{Match: "public/secret/**", Read: "auth.role == 'owner'"},
		{Match: "public/**", Read: "true"},
		{Match: "posts/{id}", Read: "auth.role == 'owner' || resource.data.pub == true"},
		{Match: "**", Read: "auth.role == 'owner'"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	p := &auth.Principal{UserID: "u1", Role: "user"}
	data := json.RawMessage(`{"pub":true,"v":"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"}`)
	for _, bc := range []struct {
		name, sub, doc string
		want           auth.ReadScope
	}{
		{"ReadAll", "p/public/x", "p/public/x/d1", auth.ReadAll},
		{"ReadByPath", "p/public", "p/public/d1", auth.ReadByPath},
		{"ReadByData", "p/posts", "p/posts/d1", auth.ReadByData},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := newView(rules, p, &sub{path: bc.sub, prefix: true})
			if v.scope != bc.want {
				b.Fatalf("scope %d, want %d", v.scope, bc.want)
			}
			ev := &raftstore.Event{Path: bc.doc, Type: raftstore.EventSet, Doc: &raftstore.Document{Data: data}}
			b.ReportAllocs()
			for b.Loop() {
				if !(&decisions{}).allows(v, ev) {
					b.Fatal("denied")
				}
			}
		})
	}
}
