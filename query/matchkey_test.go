package query

import (
	"bytes"
	"encoding/json"
	"testing"
)

// MatchKey is Match and, for a match, SortKey: checked on documents that
// differ in the filtered, the ordered and the nested fields.
func TestMatchKeyIsMatchAndSortKey(t *testing.T) {
	queries := []string{
		`{"collection":"c","where":[{"field":"s","op":"==","value":"a"}],"orderBy":[{"field":"t","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"n.x","op":">","value":1}],"orderBy":[{"field":"n.x"},{"field":"t"}]}`,
		`{"collection":"c","where":[{"field":"n","op":"exists","value":true}],"orderBy":[{"field":"n.x","direction":"desc"}]}`,
		`{"collection":"c","orderBy":[{"field":"t"}]}`,
		`{"collection":"c"}`,
	}
	docs := []string{
		`{"s":"a","t":3,"n":{"x":2}}`,
		`{"s":"a","t":"z","n":{"x":5,"y":[1]}}`,
		`{"s":"b","t":1,"n":{"x":0}}`,
		`{"s":"a","n":{"x":2}}`,
		`{"s":"a","t":null,"n":{}}`,
		`{"t":[1,2],"n":{"x":{"k":1}}}`,
		`[1]`,
		`{"s":`,
	}
	for _, qs := range queries {
		c := mustParse(t, qs)
		for i, d := range docs {
			path := "p/c/d" + string(rune('a'+i))
			key, ok := c.MatchKey(path, json.RawMessage(d))
			if want := c.Match(json.RawMessage(d)); ok != want {
				t.Errorf("%s on %s: MatchKey matched %v, Match %v", qs, d, ok, want)
				continue
			}
			if !ok {
				if key != nil {
					t.Errorf("%s on %s: no match but key %x", qs, d, key)
				}
				continue
			}
			if want := c.SortKey(path, json.RawMessage(d)); !bytes.Equal(key, want) {
				t.Errorf("%s on %s: MatchKey key %x, SortKey %x", qs, d, key, want)
			}
		}
	}
}
