package httpapi

import (
	"encoding/json"
	"testing"
)

func TestCheckValue(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{`{"a":{},"b":{}}`, true},
		{`{"a":{},"b":{},"c":[{},{"d":{}}]}`, true},
		{`{"a":[1,{"x":1,"y":{"z":[]}}],"b":2}`, true},
		{`[{"a":1},{"a":1}]`, true},
		{`{"a":{"a":{"a":1}}}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":{},"a":{}}`, false},
		{`{"a":{"b":1,"c":{},"b":2}}`, false},
		{`[{"k":1,"k":1}]`, false},
		{`{"n":1e999}`, false},
		{`{"n":[1,2,-1e400]}`, false},
		{`{"n":12345678901234567890}`, true},
	}
	for _, tc := range cases {
		if err := checkValue([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("checkValue(%s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

// FuzzCheckValue: never panics, and whatever it accepts as valid JSON can be
// decoded (numbers in range), which is what the access rules will do with it.
func FuzzCheckValue(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{},"b":{}}`, `[[],{}]`, `{"a":1,"a":2}`, `{"n":1e999}`, `}`, `]`, `{"a":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkValue(b) != nil || !json.Valid(b) {
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("checkValue accepted %q but it does not decode: %v", b, err)
		}
	})
}
