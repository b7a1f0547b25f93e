package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, body string) *Compiled {
	t.Helper()
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("Parse(%s): %v", body, err)
	}
	return c
}

// where1 is a query on "c" with one filter.
func where1(field, op, value string) string {
	return fmt.Sprintf(`{"collection":"c","where":[{"field":%q,"op":%q,"value":%s}]}`, field, op, value)
}

func TestMatchOperators(t *testing.T) {
	docs := map[string]string{
		"num1":    `{"f":1}`,
		"num1.0":  `{"f":1.0}`,
		"num2":    `{"f":2}`,
		"neg":     `{"f":-3}`,
		"str":     `{"f":"a"}`,
		"strB":    `{"f":"b"}`,
		"null":    `{"f":null}`,
		"true":    `{"f":true}`,
		"false":   `{"f":false}`,
		"arr":     `{"f":[1,"a",null]}`,
		"arrNest": `{"f":[[1],{"k":1}]}`,
		"arrE":    `{"f":[]}`,
		"obj":     `{"f":{"k":1}}`,
		"missing": `{"g":1}`,
		"empty":   `{}`,
		"nested":  `{"n":{"f":1,"deep":{"x":"y"}}}`,
		"notObj":  `[1]`,
		"bad":     `{"f":`,
	}
	all := func(except ...string) []string {
		var out []string
		for k := range docs {
			if !slices.Contains(except, k) {
				out = append(out, k)
			}
		}
		return out
	}
	for _, tc := range []struct {
		field, op, value string
		want             []string
	}{
		{"f", "==", `1`, []string{"num1", "num1.0"}},
		{"f", "==", `1.0`, []string{"num1", "num1.0"}},
		{"f", "==", `"a"`, []string{"str"}},
		{"f", "==", `null`, []string{"null"}},
		{"f", "==", `false`, []string{"false"}},
		{"f", "==", `[1,"a",null]`, []string{"arr"}},
		{"f", "==", `[1,"a"]`, nil},
		{"f", "==", `{"k":1.0}`, []string{"obj"}},
		{"f", "==", `[]`, []string{"arrE"}},
		{"f", "!=", `1`, []string{"num2", "neg", "str", "strB", "true", "false", "arr", "arrNest", "arrE", "obj"}},
		{"f", "!=", `null`, []string{"num1", "num1.0", "num2", "neg", "str", "strB", "true", "false", "arr", "arrNest", "arrE", "obj"}},
		{"f", "<", `2`, []string{"num1", "num1.0", "neg"}},
		{"f", "<=", `2`, []string{"num1", "num1.0", "num2", "neg"}},
		{"f", ">", `1`, []string{"num2"}},
		{"f", ">=", `1`, []string{"num1", "num1.0", "num2"}},
		{"f", ">", `-10`, []string{"num1", "num1.0", "num2", "neg"}},
		{"f", ">=", `""`, []string{"str", "strB"}},
		{"f", "<", `"b"`, []string{"str"}},
		{"f", ">", `false`, []string{"true"}},
		{"f", ">=", `false`, []string{"true", "false"}},
		{"f", "<=", `null`, []string{"null"}},
		{"f", "<", `null`, nil},
		{"f", ">", `[]`, []string{"arr", "arrNest"}},
		{"f", ">", `{}`, []string{"obj"}},
		{"f", "in", `[1,"b",null]`, []string{"num1", "num1.0", "strB", "null"}},
		{"f", "in", `[[]]`, []string{"arrE"}},
		{"f", "not-in", `[1,"b"]`, []string{"num2", "neg", "str", "true", "false", "arr", "arrNest", "arrE", "obj"}},
		{"f", "not-in", `[null]`, []string{"num1", "num1.0", "num2", "neg", "str", "strB", "true", "false", "arr", "arrNest", "arrE", "obj"}},
		{"f", "array-contains", `1`, []string{"arr"}},
		{"f", "array-contains", `1.0`, []string{"arr"}},
		{"f", "array-contains", `null`, []string{"arr"}},
		{"f", "array-contains", `[1]`, []string{"arrNest"}},
		{"f", "array-contains", `{"k":1}`, []string{"arrNest"}},
		{"f", "array-contains", `"b"`, nil},
		{"f", "array-contains-any", `["a",5]`, []string{"arr"}},
		{"f", "array-contains-any", `[5,[1]]`, []string{"arrNest"}},
		{"f", "array-contains-any", `[5]`, nil},
		{"f", "exists", `true`, all("missing", "empty", "nested", "notObj", "bad")},
		{"f", "exists", `false`, []string{"missing", "empty", "nested"}},
		{"n.f", "==", `1`, []string{"nested"}},
		{"n.deep.x", "==", `"y"`, []string{"nested"}},
		{"n.deep", "==", `{"x":"y"}`, []string{"nested"}},
		{"n.f", "exists", `false`, all("nested", "notObj", "bad")},
		{"f.k", "==", `1`, []string{"obj"}},
		{"f.0", "==", `1`, nil}, // arrays are not entered
	} {
		c := mustParse(t, where1(tc.field, tc.op, tc.value))
		var got []string
		for name, d := range docs {
			if c.Match(json.RawMessage(d)) {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s %s: matched %v, want %v", tc.field, tc.op, tc.value, got, want)
		}
	}
}

func TestMatchAllFiltersAndOrderFields(t *testing.T) {
	c := mustParse(t, `{"collection":"c","where":[{"field":"a","op":"==","value":1},{"field":"b","op":">","value":0}],"orderBy":[{"field":"b"},{"field":"z","direction":"desc"}]}`)
	for d, want := range map[string]bool{
		`{"a":1,"b":1,"z":0}`:   true,
		`{"a":1,"b":1}`:         false, // no orderBy field z
		`{"a":2,"b":1,"z":0}`:   false,
		`{"a":1,"b":0,"z":0}`:   false,
		`{"a":1,"b":"1","z":0}`: false,
	} {
		if got := c.Match(json.RawMessage(d)); got != want {
			t.Errorf("Match(%s) = %v, want %v", d, got, want)
		}
	}
	// Two equalities on one field that disagree match nothing.
	c = mustParse(t, `{"collection":"c","where":[{"field":"a","op":"==","value":1},{"field":"a","op":"==","value":2}]}`)
	if c.Match(json.RawMessage(`{"a":1}`)) || c.Match(json.RawMessage(`{"a":2}`)) {
		t.Error("contradicting equalities matched")
	}
	if got := c.Equalities(); len(got) != 1 || !bytes.Equal(got["a"], AppendValue(nil, json.RawMessage(`2`), false)) {
		t.Errorf("Equalities = %x, want the last a", got)
	}
}

// errCase is a body and the refusal it must get.
type errCase struct {
	body, field, code string
}

func TestParseRefusals(t *testing.T) {
	long := strings.Repeat("x", MaxFieldLen+1)
	many := func(n int, item string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = strings.ReplaceAll(item, "#", fmt.Sprint(i))
		}
		return strings.Join(parts, ",")
	}
	for _, tc := range []errCase{
		{`[]`, "", CodeInvalidArgument},
		{`{"collection":"c"} {}`, "", CodeInvalidArgument},
		{`{"collection":"c"`, "", CodeInvalidArgument},
		{`{"collection":"c","bogus":1}`, "bogus", CodeInvalidArgument},
		{`{"Collection":"c"}`, "Collection", CodeInvalidArgument},
		{`{"collection":"c","zz":1,"aa":2}`, "zz", CodeInvalidArgument},
		{`{"collection":"c","collection":"d"}`, "collection", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"==","value":1,"value":2}]}`, "where[0].value", CodeInvalidArgument},
		{`{}`, "collection", CodeInvalidArgument},
		{`{"collection":""}`, "collection", CodeInvalidArgument},
		{`{"collection":1}`, "collection", CodeInvalidArgument},
		{`{"collection":"/c"}`, "collection", CodeInvalidArgument},
		{`{"collection":"c/"}`, "collection", CodeInvalidArgument},
		{`{"collection":"a//b"}`, "collection", CodeInvalidArgument},
		{`{"collection":"a/b/c","collectionGroup":true}`, "collection", CodeInvalidArgument},
		{`{"collection":"c","collectionGroup":"yes"}`, "collectionGroup", CodeInvalidArgument},
		{`{"collection":"c","where":{}}`, "where", CodeInvalidArgument},
		{`{"collection":"c","where":[1]}`, "where[0]", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"==","value":1,"x":2}]}`, "where[0].x", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"==","value":1},{"field":"","op":"==","value":1}]}`, "where[1].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":5,"op":"==","value":1}]}`, "where[0].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a.","op":"==","value":1}]}`, "where[0].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":".a","op":"==","value":1}]}`, "where[0].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a\u0000","op":"==","value":1}]}`, "where[0].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"` + long + `","op":"==","value":1}]}`, "where[0].field", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"like","value":1}]}`, "where[0].op", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"","value":1}]}`, "where[0].op", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":["=="],"value":1}]}`, "where[0].op", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"=="}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"in","value":1}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"in","value":[]}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"not-in","value":{"a":1}}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"in","value":[` + many(31, "#") + `]}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"array-contains-any","value":[]}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"array-contains-any","value":"x"}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"exists","value":1}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":"exists","value":null}]}`, "where[0].value", CodeInvalidArgument},
		{`{"collection":"c","where":[` + many(31, `{"field":"f#","op":"==","value":1}`) + `]}`, "where", CodeInvalidArgument},
		{`{"collection":"c","where":[{"field":"a","op":">","value":1},{"field":"b","op":"<","value":1}]}`, "where[1].field", CodeInvalidQuery},
		{`{"collection":"c","where":[{"field":"a","op":">","value":1}],"orderBy":[{"field":"b"}]}`, "orderBy[0].field", CodeInvalidQuery},
		{`{"collection":"c","where":[{"field":"a","op":">","value":1},{"field":"b","op":"==","value":1}],"orderBy":[{"field":"b"},{"field":"c"},{"field":"a"}]}`, "orderBy[1].field", CodeInvalidQuery},
		{`{"collection":"c","where":[{"field":"a","op":">","value":1},{"field":"b","op":"==","value":1}],"orderBy":[{"field":"b"}]}`, "orderBy[0].field", CodeInvalidQuery},
		{`{"collection":"c","orderBy":{"field":"a"}}`, "orderBy", CodeInvalidArgument},
		{`{"collection":"c","orderBy":[{"field":"a","direction":"up"}]}`, "orderBy[0].direction", CodeInvalidArgument},
		{`{"collection":"c","orderBy":[{"field":"a","direction":"ASC"}]}`, "orderBy[0].direction", CodeInvalidArgument},
		{`{"collection":"c","orderBy":[{"field":"a"},{"field":"a","direction":"desc"}]}`, "orderBy[1].field", CodeInvalidQuery},
		{`{"collection":"c","orderBy":[{"field":"a","dir":"desc"}]}`, "orderBy[0].dir", CodeInvalidArgument},
		{`{"collection":"c","orderBy":[{}]}`, "orderBy[0].field", CodeInvalidArgument},
		{`{"collection":"c","orderBy":[` + many(9, `{"field":"f#"}`) + `]}`, "orderBy", CodeInvalidArgument},
		{`{"collection":"c","limit":0}`, "limit", CodeInvalidArgument},
		{`{"collection":"c","limit":-1}`, "limit", CodeInvalidArgument},
		{`{"collection":"c","limit":1001}`, "limit", CodeInvalidArgument},
		{`{"collection":"c","limit":1.5}`, "limit", CodeInvalidArgument},
		{`{"collection":"c","limit":"10"}`, "limit", CodeInvalidArgument},
		{`{"collection":"c","startAfter":5}`, "startAfter", CodeInvalidArgument},
		{`{"collection":"c","select":"a"}`, "select", CodeInvalidArgument},
		{`{"collection":"c","select":["a",1]}`, "select[1]", CodeInvalidArgument},
		{`{"collection":"c","select":["a","b..c"]}`, "select[1]", CodeInvalidArgument},
		{`{"collection":"c","select":[` + many(101, `"f#"`) + `]}`, "select", CodeInvalidArgument},
		{`{"collection":"c","count":1}`, "count", CodeInvalidArgument},
		{`{"collection":"c","count":true,"select":["a"]}`, "select", CodeInvalidQuery},
	} {
		_, err := Parse([]byte(tc.body))
		var qe *Error
		if !errors.As(err, &qe) {
			t.Errorf("Parse(%.120s) = %v, want an *Error", tc.body, err)
			continue
		}
		if qe.Field != tc.field || qe.Code != tc.code {
			t.Errorf("Parse(%.120s) refused on %q %q (%s), want %q %q", tc.body, qe.Field, qe.Code, qe.Message, tc.field, tc.code)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	c := mustParse(t, `{"collection":"users/u1/orders","where":[{"field":"status","op":"==","value":null},{"field":"_meta.x","op":"exists","value":true}],
		"orderBy":[{"field":"at","direction":"desc"},{"field":"n"}],"limit":1000,"select":["a","b.c"],"count":false,"startAfter":null}`)
	if c.Q.Limit != 1000 || c.Q.OrderBy[1].Direction != "asc" || c.Q.OrderBy[0].Direction != "desc" {
		t.Errorf("Q = %+v", c.Q)
	}
	if string(c.Q.Where[0].Value) != "null" {
		t.Errorf("a null operand is %q, want null", c.Q.Where[0].Value)
	}
	c = mustParse(t, ` {"collection":"c"} `)
	if c.Q.Limit != DefaultLimit {
		t.Errorf("default limit %d", c.Q.Limit)
	}
	// Count with a limit: the limit does not apply, and is accepted.
	mustParse(t, `{"collection":"c","count":true,"limit":5,"startAfter":""}`)
	// Range and equality on the same field, and an orderBy field fixed by ==.
	mustParse(t, `{"collection":"c","where":[{"field":"a","op":">","value":1},{"field":"a","op":"==","value":2}],"orderBy":[{"field":"b"}]}`)
	mustParse(t, `{"collection":"c","where":[{"field":"a","op":"==","value":1},{"field":"b","op":"<","value":1}],"orderBy":[{"field":"a"},{"field":"b"}]}`)
	mustParse(t, `{"collection":"notes","collectionGroup":true}`)
}

func TestImpliedOrderBy(t *testing.T) {
	c := mustParse(t, `{"collection":"c","where":[{"field":"n","op":">","value":1},{"field":"n","op":"<=","value":9}]}`)
	if want := []Order{{Field: "n", Direction: "asc"}}; !slices.Equal(c.Q.OrderBy, want) {
		t.Fatalf("OrderBy = %+v, want %+v", c.Q.OrderBy, want)
	}
	// Compiling the compiled query again is the same query (same cursors).
	again, err := Compile(&c.Q)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Q.OrderBy) != 1 || again.digest != c.digest {
		t.Errorf("recompiled: %+v, digest %x vs %x", again.Q.OrderBy, again.digest, c.digest)
	}
	a := c.SortKey("p/c/z", json.RawMessage(`{"n":2}`))
	b := c.SortKey("p/c/a", json.RawMessage(`{"n":3}`))
	if bytes.Compare(a, b) >= 0 {
		t.Error("not ordered by n ascending")
	}
}

func TestRange(t *testing.T) {
	enc := func(v string) []byte { return AppendValue(nil, json.RawMessage(v), false) }
	for _, tc := range []struct {
		where        string
		field        string
		lo, hi       []byte
		loInc, hiInc bool
		ok           bool
	}{
		{`{"field":"a","op":"==","value":1}`, "", nil, nil, false, false, false},
		{`{"field":"a","op":">","value":1}`, "a", enc(`1`), nil, false, false, true},
		{`{"field":"a","op":">=","value":1}`, "a", enc(`1`), nil, true, false, true},
		{`{"field":"a","op":"<","value":"x"}`, "a", nil, enc(`"x"`), false, false, true},
		{`{"field":"a","op":"<=","value":"x"}`, "a", nil, enc(`"x"`), false, true, true},
		{`{"field":"a","op":">=","value":1},{"field":"a","op":">","value":1},{"field":"a","op":"<","value":9},{"field":"a","op":"<=","value":5}`, "a", enc(`1`), enc(`5`), false, true, true},
		{`{"field":"a","op":">","value":1},{"field":"a","op":">=","value":3},{"field":"a","op":"<=","value":9},{"field":"a","op":"<=","value":9}`, "a", enc(`3`), enc(`9`), true, true, true},
	} {
		c := mustParse(t, `{"collection":"c","where":[`+tc.where+`]}`)
		field, lo, hi, loInc, hiInc, ok := c.Range()
		if field != tc.field || !bytes.Equal(lo, tc.lo) || !bytes.Equal(hi, tc.hi) || loInc != tc.loInc || hiInc != tc.hiInc || ok != tc.ok {
			t.Errorf("%s: Range() = %q %x %x %v %v %v", tc.where, field, lo, hi, loInc, hiInc, ok)
		}
	}
}

func TestSortKeyOrder(t *testing.T) {
	docs := []struct{ path, data string }{
		{"p/c/a", `{"t":1,"u":"x"}`},
		{"p/c/b", `{"t":1,"u":"y"}`},
		{"p/c/c", `{"t":"1","u":"x"}`},
		{"p/c/d", `{"t":null,"u":"x"}`},
		{"p/c/e", `{"t":[1],"u":"x"}`},
		{"p/c/f", `{"t":1,"u":"x"}`},
		{"p/c/g", `{"t":2.5,"u":"z"}`},
	}
	for _, tc := range []struct {
		orderBy string
		want    string // paths' last letters in order
	}{
		{``, "abcdefg"},
		{`{"field":"t"}`, "dabfgce"},
		{`{"field":"t","direction":"desc"}`, "ecgfbad"}, // path descending too
		{`{"field":"t"},{"field":"u","direction":"desc"}`, "dbfagce"},
		{`{"field":"u"},{"field":"t"}`, "dafcebg"},
	} {
		c := mustParse(t, `{"collection":"c","orderBy":[`+tc.orderBy+`]}`)
		type kd struct {
			key  []byte
			name string
		}
		var ks []kd
		for _, d := range docs {
			if !c.Match(json.RawMessage(d.data)) {
				t.Fatalf("%s does not match", d.data)
			}
			ks = append(ks, kd{c.SortKey(d.path, json.RawMessage(d.data)), d.path[len(d.path)-1:]})
		}
		slices.SortFunc(ks, func(a, b kd) int { return bytes.Compare(a.key, b.key) })
		var got string
		for _, k := range ks {
			got += k.name
		}
		if got != tc.want {
			t.Errorf("orderBy [%s]: order %s, want %s", tc.orderBy, got, tc.want)
		}
	}
}

func TestSortKeyLeavesOutPinnedFields(t *testing.T) {
	c := mustParse(t, `{"collection":"c","where":[{"field":"s","op":"==","value":"x"}],"orderBy":[{"field":"n"},{"field":"s","direction":"desc"}]}`)
	data := json.RawMessage(`{"s":"x","n":3}`)
	want := AppendValue(nil, json.RawMessage(`3`), false)
	want = AppendValue(want, json.RawMessage(`"p/c/d"`), false)
	if got := c.SortKey("p/c/d", data); !bytes.Equal(got, want) {
		t.Errorf("SortKey = %x, want %x (s fixed by ==, path ascending after n)", got, want)
	}
}

func TestProject(t *testing.T) {
	data := json.RawMessage(`{"a":1,"b":{"c":"<&>","d":[1,2]},"e":null,"n":1.50}`)
	for _, tc := range []struct {
		sel, want string
	}{
		{``, string(data)},
		{`"a"`, `{"a":1}`},
		{`"n","a"`, `{"a":1,"n":1.50}`},
		{`"b.c"`, `{"b":{"c":"<&>"}}`},
		{`"b.c","b.d"`, `{"b":{"c":"<&>","d":[1,2]}}`},
		{`"b.c","b"`, `{"b":{"c":"<&>","d":[1,2]}}`},
		{`"b","b.c"`, `{"b":{"c":"<&>","d":[1,2]}}`},
		{`"e","zz","b.zz","a.b"`, `{"e":null}`},
	} {
		c := mustParse(t, `{"collection":"c","select":[`+tc.sel+`]}`)
		if got := c.Project(data); string(got) != tc.want {
			t.Errorf("select [%s]: %s, want %s", tc.sel, got, tc.want)
		}
	}
}

func TestCompileDirect(t *testing.T) {
	for _, tc := range []struct {
		q           Query
		field, code string
	}{
		{Query{Collection: "c", Where: []Filter{{Field: "a", Op: "=="}}}, "where[0].value", CodeInvalidArgument},
		{Query{Collection: "c", Where: []Filter{{Field: "a", Op: "==", Value: json.RawMessage(`{`)}}}, "where[0].value", CodeInvalidArgument},
		{Query{Collection: "c", Where: []Filter{{Field: "a", Op: "==", Value: json.RawMessage(`1 2`)}}}, "where[0].value", CodeInvalidArgument},
		{Query{Collection: "c", Limit: -5}, "limit", CodeInvalidArgument},
		{Query{Collection: "c", Limit: MaxLimit + 1}, "limit", CodeInvalidArgument},
		{Query{Collection: "c", OrderBy: []Order{{Field: "a", Direction: "Desc"}}}, "orderBy[0].direction", CodeInvalidArgument},
		{Query{Collection: "c", CollectionGroup: true, Count: true, Select: []string{"a"}}, "select", CodeInvalidQuery},
	} {
		_, err := Compile(&tc.q)
		var qe *Error
		if !errors.As(err, &qe) || qe.Field != tc.field || qe.Code != tc.code {
			t.Errorf("Compile(%+v) = %v, want %s on %s", tc.q, err, tc.code, tc.field)
		}
	}
	q := Query{Collection: "c", Where: []Filter{{Field: "a", Op: "in", Value: json.RawMessage(` [1, 2] `)}}, OrderBy: []Order{{Field: "b"}}}
	c, err := Compile(&q)
	if err != nil {
		t.Fatal(err)
	}
	if c.Q.OrderBy[0].Direction != "asc" || q.OrderBy[0].Direction != "" {
		t.Errorf("directions: compiled %q, caller's %q (must stay untouched)", c.Q.OrderBy[0].Direction, q.OrderBy[0].Direction)
	}
	if !c.Match(json.RawMessage(`{"a":2.0,"b":null}`)) || c.Match(json.RawMessage(`{"a":3,"b":null}`)) {
		t.Error("in [1, 2] with spaces does not match as it should")
	}
	if e := (&Error{Field: "limit", Message: "bad"}); e.Error() != "limit: bad" {
		t.Errorf("Error() = %q", e.Error())
	}
	if e := (&Error{Message: "bad"}); e.Error() != "bad" {
		t.Errorf("Error() without a field = %q", e.Error())
	}
}
