package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// refDecode is encoding/json's decoding, which parseJSON must equal.
func refDecode(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

// checkDecode compares parseJSON with encoding/json on raw, and the sparse
// decodings (for a few paths) with lookups in the full one.
func checkDecode(t testing.TB, raw []byte) {
	t.Helper()
	got, ok := parseJSON(raw, nil)
	want, wantOK := refDecode(raw)
	if ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
		t.Fatalf("parseJSON(%q) = %#v, %v; encoding/json: %#v, %v", raw, got, ok, want, wantOK)
	}
	if !ok {
		return
	}
	paths := [][]string{{"a"}, {"a", "b"}, {"b"}, {""}, {"a", "b", "c"}, {"x", "y"}}
	for i := range paths {
		sparse, sok := parseJSON(raw, needOf(paths[i:]...))
		if !sok {
			t.Fatalf("sparse parse of %q failed", raw)
		}
		for _, p := range paths[i:] {
			gv, gok := lookup(sparse, p)
			wv, wok := lookup(want, p)
			if gok != wok || !reflect.DeepEqual(gv, wv) {
				t.Fatalf("%q: sparse lookup %v = %#v, %v; want %#v, %v", raw, p, gv, gok, wv, wok)
			}
		}
	}
}

func TestParserMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `1E-2`, `-1.0e0`, `123456789012345678901234567890`,
		`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u0000\uD83D\uDE00"`, `"\ud800"`, `"\udc00x"`, `"\uD800\u0041"`,
		"\"\xff\xfe\"", "\"a\xc3\"", "\"é😀\"", `[]`, `[1,[2,[3]],{"a":[]}]`, `{}`, ` {"a" : 1 , "a":2} `,
		`{"a":{"b":{"c":1},"b":{"d":2}}}`, `{"a":1,"b":[{"a":1}]}`, `{"":{"":1}}`, `{"a":"x","x":{"y":null}}`,
		// refused
		``, ` `, `nul`, `truee`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `[1,]`, `{"a":1,}`, `{"a"}`,
		`{"a":}`, `{a:1}`, `[`, `]`, `{`, `"abc`, `"\x"`, `"\u12"`, `"\u12zz"`, "\"a\x01\"", `1 2`, `{} x`,
		`[1 2]`, `{"a":1 "b":2}`, `'a'`, `NaN`, `Infinity`, `-Infinity`, `[-]`, `{"a":tru}`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	} {
		checkDecode(t, []byte(s))
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":{"b":[1,"x",null]},"b":true}`, `"\u00e9\ud800"`, `[1e5,-0.5]`, `{"a":1,"a":{"b":2}}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecode(t, raw)
	})
}
