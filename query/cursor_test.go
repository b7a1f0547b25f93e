package query

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// withCursor is body (a query object) with startAfter set.
func withCursor(body, cursor string) string {
	return strings.TrimSuffix(body, "}") + `,"startAfter":"` + cursor + `"}`
}

func TestCursorRoundTrip(t *testing.T) {
	const base = `{"collection":"c","where":[{"field":"s","op":"==","value":1},{"field":"n","op":">","value":2}],"orderBy":[{"field":"n","direction":"desc"},{"field":"m"}]}`
	c := mustParse(t, base)
	if after, err := c.After(); after != nil || err != nil {
		t.Fatalf("After without a cursor = %x, %v", after, err)
	}
	key := c.SortKey("p/c/d1", json.RawMessage(`{"s":1,"n":5,"m":{"a":"\u0000"}}`))
	cur := c.Cursor(key)
	if strings.ContainsAny(cur, "+/=") {
		t.Errorf("cursor %q is not unpadded base64url", cur)
	}
	// The same query, also with another limit, select or count, or with
	// operands written differently, takes the cursor back.
	for _, body := range []string{
		base,
		`{"collection":"c","where":[{"field":"s","op":"==","value":1.0},{"field":"n","op":">","value":2e0}],"orderBy":[{"field":"n","direction":"desc"},{"field":"m","direction":"asc"}],"limit":3,"select":["s"]}`,
		`{"collection":"c","where":[{"field":"s","op":"==","value":1},{"field":"n","op":">","value":2}],"orderBy":[{"field":"n","direction":"desc"},{"field":"m"}],"count":true}`,
	} {
		next := mustParse(t, withCursor(body, cur))
		got, err := next.After()
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("%s: After = %x, %v; want %x", body, got, err, key)
		}
	}
	// Compile of the compiled query (as realtime pages) keeps the shape.
	q := c.Q
	q.StartAfter = cur
	again, err := Compile(&q)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.After(); err != nil || !bytes.Equal(got, key) {
		t.Errorf("recompiled: After = %x, %v", got, err)
	}
}

func TestCursorRefused(t *testing.T) {
	const base = `{"collection":"c","where":[{"field":"s","op":"==","value":1}],"orderBy":[{"field":"n"}]}`
	c := mustParse(t, base)
	key := c.SortKey("p/c/d1", json.RawMessage(`{"s":1,"n":5}`))
	cur := c.Cursor(key)
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return enc(b)
	}
	for _, tc := range []struct{ name, body string }{
		{"another collection", withCursor(`{"collection":"d","where":[{"field":"s","op":"==","value":1}],"orderBy":[{"field":"n"}]}`, cur)},
		{"a group", withCursor(`{"collection":"c","collectionGroup":true,"where":[{"field":"s","op":"==","value":1}],"orderBy":[{"field":"n"}]}`, cur)},
		{"another value", withCursor(`{"collection":"c","where":[{"field":"s","op":"==","value":2}],"orderBy":[{"field":"n"}]}`, cur)},
		{"another op", withCursor(`{"collection":"c","where":[{"field":"s","op":">=","value":1}],"orderBy":[{"field":"s"},{"field":"n"}]}`, cur)},
		{"another filter field", withCursor(`{"collection":"c","where":[{"field":"t","op":"==","value":1}],"orderBy":[{"field":"n"}]}`, cur)},
		{"one more filter", withCursor(`{"collection":"c","where":[{"field":"s","op":"==","value":1},{"field":"x","op":"exists","value":true}],"orderBy":[{"field":"n"}]}`, cur)},
		{"another direction", withCursor(`{"collection":"c","where":[{"field":"s","op":"==","value":1}],"orderBy":[{"field":"n","direction":"desc"}]}`, cur)},
		{"no order", withCursor(`{"collection":"c","where":[{"field":"s","op":"==","value":1}]}`, cur)},
		{"not base64", withCursor(base, "!!!")},
		{"padded", withCursor(base, cur+"==")},
		{"empty key", withCursor(base, enc(raw[:9]))},
		{"too short", withCursor(base, enc(raw[:5]))},
		{"another version", withCursor(base, flip(0))},
		{"digest damaged", withCursor(base, flip(3))},
		{"key truncated", withCursor(base, enc(raw[:len(raw)-1]))},
		{"key extended", withCursor(base, enc(append(bytes.Clone(raw), 0x05)))},
		{"key's value damaged", withCursor(base, flip(9))},
	} {
		c, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: Parse: %v", tc.name, err)
		}
		_, err = c.After()
		var qe *Error
		if !errors.As(err, &qe) || qe.Field != "startAfter" || qe.Code != CodeInvalidCursor {
			t.Errorf("%s: After() = %v, want invalid_cursor on startAfter", tc.name, err)
		}
	}
}
