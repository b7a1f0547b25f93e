package client

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeChangeMatchesJSON: the fast path decodes exactly what
// encoding/json decodes from the server's change messages, and declines
// (so that encoding/json decides) everything it does not fully understand.
func TestDecodeChangeMatchesJSON(t *testing.T) {
	fast := []string{
		`{"op":"change","id":"s1","revision":42,"collection":"rooms/a/m1","type":"set","data":{"r":1,"s":2,"t":3,"v":"abc"},"updateTime":"2026-11-21T13:00:00.123456789Z"}`,
		`{"op":"change","id":"s1","revision":43,"collection":"rooms/a/m1","type":"delete","data":null}`,
		`{"op":"change","id":"x","revision":1,"collection":"c/d","type":"set","data":{"a":"}]\"{[","b":[1,2,{"c":null}],"d":true,"e":-1.5e3},"updateTime":"t"}`,
		`{"op":"change","id":"x","revision":18446744073709551615,"collection":"c/d","type":"set","data":[],"updateTime":"t"}`,
		`{"op":"change","id":"x","revision":7,"collection":"c/d","type":"set","data":"just a string","updateTime":"t"}`,
		`{"op":"change","id":"x","revision":7,"collection":"c/d","type":"set","data":12,"updateTime":"t"}`,
		`{"op":"change","id":"x","revision":7,"collection":"c/d","type":"set","data":{ "a" : [ 1 , 2 ] },"updateTime":"t"}`,
	}
	for _, m := range fast {
		var want, got frame
		if err := json.Unmarshal([]byte(m), &want); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		want.Data = nullToNil(want.Data)
		b := []byte(m)
		if !decodeChange(b, &got) {
			t.Fatalf("fast path declined %s", m)
		}
		got.Data = nullToNil(got.Data)
		for i := range b {
			b[i] = 'X' // nothing may alias the read buffer
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nfast %+v\njson %+v", m, got, want)
		}
	}
	declined := []string{
		`{"op":"snapshot","id":"s1","revision":1,"documents":[]}`,
		`{"op":"change","id":"s\"1","revision":42,"collection":"c","type":"set","data":{},"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c\u00e9","type":"set","data":{},"updateTime":"t"}`,
		`{"op":"change","id":"s1","collection":"c","revision":42,"type":"set","data":{},"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":{},"updateTime":"t","extra":1}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":{"a":1,"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":{"a":[1}],"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":-1,"collection":"c","type":"set","data":{},"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":99999999999999999999,"collection":"c","type":"set","data":{},"updateTime":"t"}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":{},"updateTime":"t"} `,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":"unterminated}`,
		`{"op":"change","id":"s1","revision":42,"collection":"c","type":"set","data":`,
		`{"op": "change","id":"s1","revision":42,"collection":"c","type":"set","data":{},"updateTime":"t"}`,
	}
	for _, m := range declined {
		var f frame
		if decodeChange([]byte(m), &f) {
			t.Errorf("fast path accepted %s as %+v", m, f)
		}
	}
}
