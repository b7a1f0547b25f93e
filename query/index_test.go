package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustIndex(t testing.TB, def string) Index {
	t.Helper()
	list, err := ParseIndexes([]byte(`{"indexes":[` + def + `]}`))
	if err != nil {
		t.Fatalf("ParseIndexes(%s): %v", def, err)
	}
	return list[0]
}

func TestParseIndexes(t *testing.T) {
	list, err := ParseIndexes([]byte(`{"indexes":[
		{"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]},
		{"collection":"notes","collectionGroup":true,"fields":[{"field":"meta.at","direction":"asc"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Index{
		{Collection: "orders", Fields: []IndexField{{"status", "asc"}, {"createdAt", "desc"}}},
		{Collection: "notes", CollectionGroup: true, Fields: []IndexField{{"meta.at", "asc"}}},
	}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Errorf("ParseIndexes = %+v, want %+v", list, want)
	}
	if list, err := ParseIndexes([]byte(`{"indexes":[]}`)); err != nil || len(list) != 0 {
		t.Errorf("empty list: %v, %v", list, err)
	}

	fields := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"field":"f%d"}`, i)
		}
		return strings.Join(parts, ",")
	}
	many := make([]string, MaxIndexes+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"collection":"c","fields":[{"field":"f%d"}]}`, i)
	}
	for _, tc := range []errCase{
		{`[]`, "", CodeInvalidArgument},
		{`{"indexes":[]} x`, "", CodeInvalidArgument},
		{`{}`, "indexes", CodeInvalidArgument},
		{`{"indexes":null}`, "indexes", CodeInvalidArgument},
		{`{"indexes":{}}`, "indexes", CodeInvalidArgument},
		{`{"indexes":[],"x":1}`, "x", CodeInvalidArgument},
		{`{"indexes":[],"indexes":[]}`, "indexes", CodeInvalidArgument},
		{`{"indexes":[` + strings.Join(many, ",") + `]}`, "indexes", CodeInvalidArgument},
		{`{"indexes":[1]}`, "indexes[0]", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a"}],"unique":true}]}`, "indexes[0].unique", CodeInvalidArgument},
		{`{"indexes":[{"fields":[{"field":"a"}]}]}`, "indexes[0].collection", CodeInvalidArgument},
		{`{"indexes":[{"collection":"a/b","fields":[{"field":"a"}]}]}`, "indexes[0].collection", CodeInvalidArgument},
		{`{"indexes":[{"collection":"_users","fields":[{"field":"a"}]}]}`, "indexes[0].collection", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c\u0000","fields":[{"field":"a"}]}]}`, "indexes[0].collection", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","collectionGroup":1,"fields":[{"field":"a"}]}]}`, "indexes[0].collectionGroup", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c"}]}`, "indexes[0].fields", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[]}]}`, "indexes[0].fields", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[` + fields(9) + `]}]}`, "indexes[0].fields", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a"},{}]}]}`, "indexes[0].fields[1].field", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a..b"}]}]}`, "indexes[0].fields[0].field", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a","direction":"down"}]}]}`, "indexes[0].fields[0].direction", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a","order":"asc"}]}]}`, "indexes[0].fields[0].order", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a"},{"field":"a","direction":"desc"}]}]}`, "indexes[0].fields[1].field", CodeInvalidArgument},
		{`{"indexes":[{"collection":"c","fields":[{"field":"a"}]},{"collection":"c","fields":[{"field":"a","direction":"asc"}]}]}`, "indexes[1]", CodeInvalidArgument},
	} {
		_, err := ParseIndexes([]byte(tc.body))
		var qe *Error
		if !errors.As(err, &qe) {
			t.Errorf("ParseIndexes(%.100s) = %v, want an *Error", tc.body, err)
			continue
		}
		if qe.Field != tc.field || qe.Code != tc.code {
			t.Errorf("ParseIndexes(%.100s) refused on %q %q (%s), want %q %q", tc.body, qe.Field, qe.Code, qe.Message, tc.field, tc.code)
		}
	}
}

func TestIndexID(t *testing.T) {
	a := Index{Collection: "orders", Fields: []IndexField{{Field: "status"}, {Field: "at", Direction: "desc"}}}
	b := Index{Collection: "orders", Fields: []IndexField{{Field: "status", Direction: "asc"}, {Field: "at", Direction: "desc"}}}
	if a.ID() != b.ID() {
		t.Error("direction \"\" and \"asc\" give different ids")
	}
	// A pinned value: the id is a key prefix on disk, it must never change.
	if got, want := a.ID(), "1b8a0a9da0ac8829"; got != want {
		t.Errorf("ID = %s, want %s", got, want)
	}
	ids := map[string]Index{}
	for _, ix := range []Index{
		a,
		{Collection: "orders", CollectionGroup: true, Fields: a.Fields},
		{Collection: "order", Fields: a.Fields},
		{Collection: "orders", Fields: []IndexField{{Field: "status"}, {Field: "at"}}},
		{Collection: "orders", Fields: []IndexField{{Field: "at", Direction: "desc"}, {Field: "status"}}},
		{Collection: "orders", Fields: []IndexField{{Field: "status"}}},
		{Collection: "orders", Fields: []IndexField{{Field: "statusat"}}},
		{Collection: "ordersstatus", Fields: []IndexField{{Field: "at"}}},
	} {
		id := ix.ID()
		if prev, dup := ids[id]; dup {
			t.Errorf("%+v and %+v share id %s", prev, ix, id)
		}
		ids[id] = ix
	}
}

func TestEntry(t *testing.T) {
	ix := mustIndex(t, `{"collection":"c","fields":[{"field":"s"},{"field":"m.at","direction":"desc"}]}`)
	got, ok := ix.Entry("p/c/d", json.RawMessage(`{"s":"x","m":{"at":5}}`))
	want := AppendValue(nil, json.RawMessage(`"x"`), false)
	want = AppendValue(want, json.RawMessage(`5`), true)
	want = AppendValue(want, json.RawMessage(`"p/c/d"`), true)
	if !ok || !bytes.Equal(got, want) {
		t.Errorf("Entry = %x, %v; want %x", got, ok, want)
	}
	for _, d := range []string{`{"s":"x"}`, `{"m":{"at":1}}`, `{"s":"x","m":1}`, `[1]`, `{`} {
		if _, ok := ix.Entry("p/c/d", json.RawMessage(d)); ok {
			t.Errorf("Entry(%s) has an entry", d)
		}
	}
	// A null value is a value: it has an entry.
	if _, ok := ix.Entry("p/c/d", json.RawMessage(`{"s":null,"m":{"at":null}}`)); !ok {
		t.Error("nulls have no entry")
	}
}

// servesCases are index/query pairs and whether (and how) the index serves
// the query.
var servesCases = []struct {
	name    string
	index   string
	query   string
	ok      bool
	reverse bool
}{
	{"eq", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}]}`, true, false},
	{"eq desc reverses the path", `{"collection":"c","fields":[{"field":"s","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}]}`, true, true},
	{"eq then order", `{"collection":"c","fields":[{"field":"s"},{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at","direction":"desc"}]}`, true, false},
	{"eq then order reversed", `{"collection":"c","fields":[{"field":"s"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at","direction":"desc"}]}`, true, true},
	{"eq desc then order reversed", `{"collection":"c","fields":[{"field":"s","direction":"desc"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at","direction":"desc"}]}`, true, true},
	{"eqs in another order", `{"collection":"c","fields":[{"field":"a"},{"field":"s","direction":"desc"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"},{"field":"a","op":"==","value":1}],"orderBy":[{"field":"at"}]}`, true, false},
	{"order only", `{"collection":"c","fields":[{"field":"at"}]}`,
		`{"collection":"c","orderBy":[{"field":"at"}]}`, true, false},
	{"order only reversed", `{"collection":"c","fields":[{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","orderBy":[{"field":"at"}]}`, true, true},
	{"two orders", `{"collection":"c","fields":[{"field":"n"},{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","orderBy":[{"field":"n"},{"field":"at","direction":"desc"}]}`, true, false},
	{"two orders reversed", `{"collection":"c","fields":[{"field":"n"},{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","orderBy":[{"field":"n","direction":"desc"},{"field":"at"}]}`, true, true},
	{"two orders, directions mixed", `{"collection":"c","fields":[{"field":"n"},{"field":"at"}]}`,
		`{"collection":"c","orderBy":[{"field":"n"},{"field":"at","direction":"desc"}]}`, false, false},
	{"orders swapped", `{"collection":"c","fields":[{"field":"at"},{"field":"n"}]}`,
		`{"collection":"c","orderBy":[{"field":"n"},{"field":"at"}]}`, false, false},
	{"implied order of a range", `{"collection":"c","fields":[{"field":"n"}]}`,
		`{"collection":"c","where":[{"field":"n","op":">","value":1}]}`, true, false},
	{"implied order of a range, index desc", `{"collection":"c","fields":[{"field":"n","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"n","op":">=","value":1},{"field":"n","op":"<","value":3}]}`, true, true},
	{"eq, range, order", `{"collection":"c","fields":[{"field":"s"},{"field":"n"},{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"},{"field":"n","op":"<","value":3}],"orderBy":[{"field":"n"},{"field":"at","direction":"desc"}]}`, true, false},
	{"eq, range desc", `{"collection":"c","fields":[{"field":"s"},{"field":"n"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"},{"field":"n","op":"<","value":3}],"orderBy":[{"field":"n","direction":"desc"}]}`, true, true},
	{"an extra field past the order", `{"collection":"c","fields":[{"field":"s"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}]}`, false, false},
	{"an equality the index lacks", `{"collection":"c","fields":[{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at"}]}`, false, false},
	{"an equality field after the order", `{"collection":"c","fields":[{"field":"at"},{"field":"s"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at"}]}`, false, false},
	{"a field of neither", `{"collection":"c","fields":[{"field":"s"},{"field":"zz"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"},{"field":"zz","op":"in","value":[1]}]}`, false, false},
	{"other filters are checked per document", `{"collection":"c","fields":[{"field":"s"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"},{"field":"a","op":"in","value":[1,2]},{"field":"tags","op":"array-contains","value":"t"}],"orderBy":[{"field":"at"}]}`, true, false},
	{"an orderBy fixed by ==", `{"collection":"c","fields":[{"field":"s"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"s","direction":"desc"},{"field":"at"}]}`, true, false},
	{"only orderBy fixed by ==", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"s","direction":"desc"}]}`, true, false},
	{"a range on a field fixed by ==", `{"collection":"c","fields":[{"field":"n"},{"field":"at"}]}`,
		`{"collection":"c","where":[{"field":"n","op":"==","value":2},{"field":"n","op":">","value":0}],"orderBy":[{"field":"at"}]}`, true, false},
	{"nested fields", `{"collection":"c","fields":[{"field":"m.by"},{"field":"m.at","direction":"desc"}]}`,
		`{"collection":"c","where":[{"field":"m.by","op":"==","value":"u"}],"orderBy":[{"field":"m.at","direction":"desc"}]}`, true, false},
	{"subcollection", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"shops/s1/c","where":[{"field":"s","op":"==","value":"x"}]}`, true, false},
	{"another collection", `{"collection":"d","fields":[{"field":"s"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}]}`, false, false},
	{"another collection, same suffix", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"abc","where":[{"field":"s","op":"==","value":"x"}]}`, false, false},
	{"group index, collection query", `{"collection":"c","collectionGroup":true,"fields":[{"field":"s"}]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":"x"}]}`, false, false},
	{"collection index, group query", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"c","collectionGroup":true,"where":[{"field":"s","op":"==","value":"x"}]}`, false, false},
	{"group index, group query", `{"collection":"c","collectionGroup":true,"fields":[{"field":"s"},{"field":"at","direction":"desc"}]}`,
		`{"collection":"c","collectionGroup":true,"where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"at"}]}`, true, true},
	{"no filter, no order", `{"collection":"c","fields":[{"field":"s"}]}`,
		`{"collection":"c"}`, false, false},
}

// randDoc is random data over the fields the serves cases use, from small
// pools so that equalities and ties are frequent; some fields are missing.
func randDoc(r *rand.Rand) json.RawMessage {
	pool := []any{nil, false, true, 1, 1.5, 2, 3, -1, "x", "y", "", []any{1}, map[string]any{"k": 1}}
	m := map[string]any{}
	for _, f := range []string{"s", "a", "n", "at", "zz", "tags"} {
		if r.IntN(8) == 0 {
			continue
		}
		m[f] = pool[r.IntN(len(pool))]
	}
	if r.IntN(2) == 0 {
		m["s"] = "x"
	}
	if r.IntN(2) == 0 {
		m["tags"] = []any{"t"}
	}
	if r.IntN(3) > 0 {
		m["m"] = map[string]any{"by": []any{"u", "v", 1}[r.IntN(3)], "at": pool[r.IntN(len(pool))]}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func TestServes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range servesCases {
		t.Run(tc.name, func(t *testing.T) {
			ix := mustIndex(t, tc.index)
			c := mustParse(t, tc.query)
			prefix, reverse, ok := ix.Serves(c)
			if ok != tc.ok || (ok && reverse != tc.reverse) {
				t.Fatalf("Serves = %x, %v, %v; want ok %v reverse %v", prefix, reverse, ok, tc.ok, tc.reverse)
			}
			if !ok {
				return
			}
			// The identity the executor relies on: every matching document
			// has an entry that starts with prefix, and the rest of it is
			// its SortKey (complemented when reverse); so the entries
			// scanned in key order (backwards when reverse) are in SortKey
			// order.
			type ent struct{ key, sk []byte }
			var ents []ent
			matched := 0
			for i := range 3000 {
				data := randDoc(r)
				if !c.Match(data) {
					continue
				}
				matched++
				path := fmt.Sprintf("p/%s/d%04d", c.Q.Collection, i)
				key, has := ix.Entry(path, data)
				if !has {
					t.Fatalf("matching %s has no entry", data)
				}
				if !bytes.HasPrefix(key, prefix) {
					t.Fatalf("entry %x of %s lacks prefix %x", key, data, prefix)
				}
				tail := key[len(prefix):]
				sk := c.SortKey(path, data)
				if reverse {
					tail = complementBytes(tail)
				}
				if !bytes.Equal(tail, sk) {
					t.Fatalf("%s: tail %x is not the SortKey %x", data, tail, sk)
				}
				ents = append(ents, ent{key, sk})
			}
			if matched < 10 {
				t.Fatalf("only %d random documents matched: the test proves little", matched)
			}
			slices.SortFunc(ents, func(a, b ent) int { return bytes.Compare(a.key, b.key) })
			if reverse {
				slices.Reverse(ents)
			}
			for i := 1; i < len(ents); i++ {
				if bytes.Compare(ents[i-1].sk, ents[i].sk) >= 0 {
					t.Fatalf("scan order is not SortKey order at %d", i)
				}
			}
			// The suggested index serves it too.
			if s := Suggest(c); !suggestServes(s, c) {
				t.Errorf("Suggest = %+v does not serve the query", s)
			}
		})
	}
}

func suggestServes(ix Index, c *Compiled) bool {
	_, _, ok := ix.Serves(c)
	return ok
}

func complementBytes(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = ^c
	}
	return out
}

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string
	}{
		{`{"collection":"shops/s1/orders","where":[{"field":"status","op":"==","value":"open"},{"field":"a","op":"==","value":1}],"orderBy":[{"field":"createdAt","direction":"desc"}]}`,
			`{"collection":"orders","fields":[{"field":"a","direction":"asc"},{"field":"status","direction":"asc"},{"field":"createdAt","direction":"desc"}]}`},
		{`{"collection":"notes","collectionGroup":true,"where":[{"field":"n","op":">","value":1}]}`,
			`{"collection":"notes","collectionGroup":true,"fields":[{"field":"n","direction":"asc"}]}`},
		{`{"collection":"c","where":[{"field":"s","op":"==","value":1}],"orderBy":[{"field":"s","direction":"desc"}]}`,
			`{"collection":"c","fields":[{"field":"s","direction":"asc"}]}`},
		{`{"collection":"c","where":[{"field":"tags","op":"array-contains","value":1}]}`,
			`{"collection":"c","fields":null}`},
		{`{"collection":"c","where":[` + strings.Repeat(`{"field":"a","op":"==","value":1},`, 3) + `{"field":"b","op":"==","value":1},{"field":"c","op":"==","value":1},{"field":"d","op":"==","value":1},{"field":"e","op":"==","value":1},{"field":"f","op":"==","value":1},{"field":"g","op":"==","value":1}],"orderBy":[{"field":"h"},{"field":"i"}]}`,
			`{"collection":"c","fields":null}`},
		{`{"collection":"c","where":[{"field":"b","op":"==","value":1},{"field":"c","op":"==","value":1},{"field":"d","op":"==","value":1},{"field":"e","op":"==","value":1},{"field":"f","op":"==","value":1},{"field":"g","op":"==","value":1}],"orderBy":[{"field":"h"},{"field":"i"}]}`,
			`{"collection":"c","fields":[{"field":"b","direction":"asc"},{"field":"c","direction":"asc"},{"field":"d","direction":"asc"},{"field":"e","direction":"asc"},{"field":"f","direction":"asc"},{"field":"g","direction":"asc"},{"field":"h","direction":"asc"},{"field":"i","direction":"asc"}]}`},
	} {
		c := mustParse(t, tc.query)
		got, err := json.Marshal(Suggest(c))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("Suggest(%s) = %s, want %s", tc.query, got, tc.want)
		}
	}
}
