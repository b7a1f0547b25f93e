package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ordered lists JSON values in the value order, each strictly before the
// next (values within one inner list are equal).
var ordered = [][]string{
	{`null`},
	{`false`},
	{`true`},
	{`-1e308`},
	{`-2`},
	{`-1.5`},
	{`-1`, `-1.0`},
	{`-5e-324`},
	{`0`, `-0`, `0.0`, `-0.0`, `0e10`},
	{`5e-324`},
	{`1`, `1.0`, `1e0`, `10e-1`},
	{`1.5`},
	{`2`},
	{`9007199254740992`, `9007199254740993`}, // beyond 2^53: equal as float64
	{`1e308`},
	{`1e400`}, // beyond float64: +Inf
	{`""`},
	{`"\u0000"`},
	{`"\u0000\u0000"`},
	{`"\u0000a"`},
	{`"\u0001"`},
	{`"A"`},
	{`"a"`, `"\u0061"`},
	{`"a\u0000"`},
	{`"a\u0000\u0000"`},
	{`"a\u0001"`},
	{`"ab"`},
	{`"b"`},
	{`"é"`},
	{`"😀"`},
	{`[]`},
	{`[null]`},
	{`[null,null]`},
	{`[false]`},
	{`[1]`, `[1.0]`},
	{`[1,null]`},
	{`[1,[]]`},
	{`[2]`},
	{`[""]`},
	{`[[]]`},
	{`[[],[]]`},
	{`[[1]]`},
	{`[{}]`},
	{`{}`},
	{`{"":null}`},
	{`{"":1}`},
	{`{"\u0000":null}`},
	{`{"a":null}`},
	{`{"a":null,"b":null}`, `{"b":null,"a":null}`},
	{`{"a":1}`},
	{`{"a":1,"b":0}`},
	{`{"a":[]}`},
	{`{"a":{}}`},
	{`{"aa":null}`},
	{`{"b":null}`},
	{`not json`, `{`, ``, `1 2`}, // invalid: after everything, equal among themselves
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// checkPair checks that Compare and both encodings agree on a and b, and
// that the encodings are prefix-free and parse back to their own length.
func checkPair(t testing.TB, a, b json.RawMessage) {
	t.Helper()
	want := sign(Compare(a, b))
	if back := sign(Compare(b, a)); back != -want {
		t.Fatalf("Compare(%s, %s) = %d but Compare(%s, %s) = %d", a, b, want, b, a, back)
	}
	for _, desc := range []bool{false, true} {
		ea, eb := AppendValue(nil, a, desc), AppendValue(nil, b, desc)
		got := sign(bytes.Compare(ea, eb))
		w := want
		if desc {
			w = -want
		}
		if got != w {
			t.Fatalf("desc=%v: bytes.Compare(enc(%s), enc(%s)) = %d, want %d\n%x\n%x", desc, a, b, got, w, ea, eb)
		}
		if want != 0 && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("desc=%v: enc(%s) and enc(%s) are prefix-related: %x %x", desc, a, b, ea, eb)
		}
		if want == 0 && !bytes.Equal(ea, eb) {
			t.Fatalf("desc=%v: equal %s and %s encode differently: %x %x", desc, a, b, ea, eb)
		}
		for _, e := range [][]byte{ea, eb} {
			if n, ok := encodedLen(append(bytes.Clone(e), 0x42, 0x00), desc); !ok || n != len(e) {
				t.Fatalf("desc=%v: encodedLen(%x + more) = %d, %v, want %d", desc, e, n, ok, len(e))
			}
		}
	}
}

func TestValueOrderTable(t *testing.T) {
	for i, group := range ordered {
		for _, a := range group {
			for _, b := range group {
				if c := Compare(json.RawMessage(a), json.RawMessage(b)); c != 0 {
					t.Errorf("Compare(%s, %s) = %d, want 0", a, b, c)
				}
			}
			for _, later := range ordered[i+1:] {
				for _, b := range later {
					if c := Compare(json.RawMessage(a), json.RawMessage(b)); c >= 0 {
						t.Errorf("Compare(%s, %s) = %d, want < 0", a, b, c)
					}
				}
			}
		}
	}
	var all []string
	for _, g := range ordered {
		all = append(all, g...)
	}
	for _, a := range all {
		for _, b := range all {
			checkPair(t, json.RawMessage(a), json.RawMessage(b))
		}
	}
}

func TestEncodingBytes(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want []byte
	}{
		{`null`, []byte{0x05}},
		{`false`, []byte{0x06}},
		{`true`, []byte{0x07}},
		{`0`, []byte{0x08, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{`-0`, []byte{0x08, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{`1`, []byte{0x08, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0}},
		{`-1`, []byte{0x08, 0x40, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{`""`, []byte{0x09, 0x00, 0x01}},
		{`"a\u0000b"`, []byte{0x09, 'a', 0x00, 0xff, 'b', 0x00, 0x01}},
		{`[]`, []byte{0x0a, 0x00}},
		{`[null,"x"]`, []byte{0x0a, 0x05, 0x09, 'x', 0x00, 0x01, 0x00}},
		{`{"b":true,"a":null}`, []byte{0x0b, 0x09, 'a', 0x00, 0x01, 0x05, 0x09, 'b', 0x00, 0x01, 0x07, 0x00}},
		{`{`, []byte{0x0c}},
	} {
		if got := AppendValue(nil, json.RawMessage(tc.v), false); !bytes.Equal(got, tc.want) {
			t.Errorf("AppendValue(%s) = %x, want %x", tc.v, got, tc.want)
		}
		desc := AppendValue([]byte("pre"), json.RawMessage(tc.v), true)
		if !bytes.HasPrefix(desc, []byte("pre")) {
			t.Fatalf("AppendValue changed dst's bytes: %q", desc)
		}
		for i, c := range desc[3:] {
			if c != ^tc.want[i] {
				t.Errorf("AppendValue(%s, desc) = %x, want the complement of %x", tc.v, desc[3:], tc.want)
				break
			}
		}
	}
}

// randValue is a random JSON value, nested at most depth levels, drawn
// from a small alphabet so that equal and prefix-related values are common.
func randValue(r *rand.Rand, depth int) string {
	n := 6
	if depth <= 0 {
		n = 4
	}
	switch r.IntN(n) {
	case 0:
		return []string{`null`, `true`, `false`}[r.IntN(3)]
	case 1:
		nums := []string{`0`, `-0`, `1`, `1.0`, `-1`, `2.5`, `-2.5`, `1e300`, `-1e300`, `1e400`, `5e-324`, `123456789012345678901234567890`}
		if r.IntN(2) == 0 {
			return nums[r.IntN(len(nums))]
		}
		return strconv.FormatFloat(r.NormFloat64()*float64(r.IntN(1000)), 'g', -1, 64)
	case 2, 3:
		var sb strings.Builder
		for range r.IntN(4) {
			sb.WriteString([]string{"a", "b", `\u0000`, `\u0001`, "\u00ff", "é", `\"`}[r.IntN(7)])
		}
		return `"` + sb.String() + `"`
	case 4:
		k := r.IntN(4)
		parts := make([]string, k)
		for i := range parts {
			parts[i] = randValue(r, depth-1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		k := r.IntN(4)
		parts := make([]string, k)
		for i := range parts {
			parts[i] = `"` + []string{"", "a", "b", "ab", `\u0000`}[r.IntN(5)] + `":` + randValue(r, depth-1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

func TestValueOrderProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]json.RawMessage, 400)
	for i := range vals {
		vals[i] = json.RawMessage(randValue(r, 3))
		if !json.Valid(vals[i]) {
			t.Fatalf("generator made invalid JSON %s", vals[i])
		}
	}
	for _, a := range vals {
		for _, b := range vals[:100] {
			checkPair(t, a, b)
		}
	}
	// Transitivity through sorting: sorting by Compare and by the encoding
	// give the same sequence.
	byCompare := slices.Clone(vals)
	slices.SortStableFunc(byCompare, func(a, b json.RawMessage) int { return Compare(a, b) })
	for i := 1; i < len(byCompare); i++ {
		if Compare(byCompare[i-1], byCompare[i]) > 0 {
			t.Fatalf("not sorted: %s before %s", byCompare[i-1], byCompare[i])
		}
		ea, eb := AppendValue(nil, byCompare[i-1], false), AppendValue(nil, byCompare[i], false)
		if bytes.Compare(ea, eb) > 0 {
			t.Fatalf("encoding disagrees on sorted %s, %s", byCompare[i-1], byCompare[i])
		}
	}
}

func FuzzOrder(f *testing.F) {
	for _, g := range ordered {
		for _, a := range g {
			f.Add(a, `[1,{"a":null}]`)
		}
	}
	f.Add(`{"a":{"b":[1,"\u0000"]}}`, `{"a":{"b":[1.0,"\u0000\u0001"]}}`)
	f.Add(`-0`, `0`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if !json.Valid([]byte(a)) || !json.Valid([]byte(b)) {
			return
		}
		checkPair(t, json.RawMessage(a), json.RawMessage(b))
	})
}

func TestNumberEdges(t *testing.T) {
	if number(json.Number("-0")) != 0 || math.Signbit(number(json.Number("-0"))) {
		t.Error("-0 is not normalised to 0")
	}
	if !math.IsInf(number(json.Number("-1e999")), -1) {
		t.Error("-1e999 is not -Inf")
	}
}

func TestLookup(t *testing.T) {
	data := json.RawMessage(`{"a":{"b":{"c":1}},"x":null,"arr":[{"k":1}],"d.e":2,"s":"str"}`)
	for _, tc := range []struct {
		field string
		want  string
		ok    bool
	}{
		{"a.b.c", `1`, true},
		{"a.b", `{"c":1}`, true},
		{"x", `null`, true},
		{"a.z", ``, false},
		{"a.b.c.d", ``, false},
		{"arr.0", ``, false},
		{"arr.k", ``, false},
		{"d.e", ``, false}, // a member name with a dot cannot be addressed
		{"s.length", ``, false},
		{"missing", ``, false},
	} {
		got, ok := Lookup(data, tc.field)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("Lookup(%q) = %s, %v; want %s, %v", tc.field, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := Lookup(json.RawMessage(`[1]`), "a"); ok {
		t.Error("Lookup into an array found something")
	}
	if _, ok := Lookup(json.RawMessage(`null`), "a"); ok {
		t.Error("Lookup into null found something")
	}
}

func ExampleAppendValue() {
	for _, v := range []string{`null`, `true`, `1`, `"a"`, `[1]`, `{"a":1}`} {
		fmt.Printf("%-8s %x\n", v, AppendValue(nil, json.RawMessage(v), false))
	}
	// Output:
	// null     05
	// true     07
	// 1        08bff0000000000000
	// "a"      09610001
	// [1]      0a08bff000000000000000
	// {"a":1}  0b0961000108bff000000000000000
}
