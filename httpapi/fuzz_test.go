package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// The fuzzers below check the request-parsing helpers against independent
// restatements of their rules. Seeds live in testdata/fuzz/<FuzzName>/ as
// well as in f.Add, so a plain `go test` replays them.

// pathOK restates the path rules of the database area without looking at
// validatePath: 1..100 non-empty segments, at most 1500 bytes, valid UTF-8,
// no "." or ".." segment, no segment starting with "_", no control character.
func pathOK(p string) bool {
	if len(p) == 0 || len(p) > 1500 || !utf8.ValidString(p) {
		return false
	}
	segs := strings.Split(p, "/")
	if len(segs) > 100 {
		return false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || s[0] == '_' {
			return false
		}
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{
		"a", "a/b", "users/u1/notes/n1", "", "/", "a//b", "/a", "a/", ".", "..", "./a", "a/../b", "a/./b",
		"_sys/x", "a/_b", "a_b/c_", "a\x01b", "a\x7fb", "a\u0085b", "a\u00a0b", "a\xffb", "a\xe6\x96", "ü/文/🎉",
		strings.Repeat("a/", 99) + "a", strings.Repeat("a/", 100) + "a", strings.Repeat("x", 1500), strings.Repeat("x", 1501),
		"..a/b..", "a/.../b", "\u2028", "a\u200bb",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := raftstore.ValidatePath(p)
		want := pathOK(p)
		if err == nil && !want {
			t.Fatalf("validatePath accepted %q, which breaks the path rules", p)
		}
		if err != nil && want {
			t.Fatalf("validatePath refused the valid path %q: %v", p, err)
		}
		if err == nil {
			// Accepted paths satisfy each invariant on its own too.
			segs := strings.Split(p, "/")
			if len(segs) < 1 || len(segs) > raftstore.MaxPathSegments || len(p) > raftstore.MaxPathBytes || !utf8.ValidString(p) {
				t.Fatalf("accepted %q: %d segments, %d bytes", p, len(segs), len(p))
			}
			if strings.ContainsFunc(p, unicode.IsControl) {
				t.Fatalf("accepted %q with a control character", p)
			}
		} else if !utf8.ValidString(err.Error()) {
			t.Fatalf("error message is not UTF-8: %q", err.Error())
		}
	})
}

// depthByTokens is the nesting depth of valid JSON, computed with
// encoding/json's tokenizer.
func depthByTokens(t *testing.T, b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return deepest
			}
			t.Fatalf("tokenizing valid JSON %q: %v", b, err)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				deepest = max(deepest, depth)
			case '}', ']':
				depth--
			}
		}
	}
}

func FuzzCheckDepth(f *testing.F) {
	for _, s := range []struct {
		b   string
		max int
	}{
		{`{}`, 64}, {`{"a":[1,{"b":null}]}`, 2}, {`{"a":[1,{"b":null}]}`, 3}, {`[[[]]]`, 2}, {`"[[[["`, 1},
		{`{"s":"\"[{"}`, 1}, {`{"s":"\\"}`, 1}, {`{"s":"\\\"[["}`, 1}, {`]]]][[[[`, 2}, {`{"a":"é[🎉"}`, 1},
		{strings.Repeat("[", 65) + strings.Repeat("]", 65), 64}, {strings.Repeat("[", 64) + strings.Repeat("]", 64), 64},
		{`"unterminated [[[`, 1}, {``, 1}, {`1`, 1},
	} {
		f.Add([]byte(s.b), s.max)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if limit < 1 || limit > 200 {
			limit = 1 + int(uint(limit)%200)
		}
		err := checkDepth(b, limit)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != "invalid_argument" {
				t.Fatalf("checkDepth error %#v is not a 400 invalid_argument", err)
			}
		}
		if !json.Valid(b) {
			return
		}
		d := depthByTokens(t, b)
		if (d > limit) != (err != nil) {
			t.Fatalf("checkDepth(%q, %d) = %v, but the JSON is %d deep", b, limit, err, d)
		}
	})
}

// decodeTargets are fresh values of every request struct the handlers decode.
func decodeTargets() map[string]any {
	return map[string]any{
		"postBody":          &postBody{},
		"putBody":           &putBody{},
		"authBody":          &authBody{},
		"createProjectBody": &createProjectBody{},
		"auth.RuleSet":      &auth.RuleSet{},
	}
}

// checkDecodeError: nil, or a 400 *apiError that says invalid_json exactly
// when the input is not JSON.
func checkDecodeError(t *testing.T, name string, b []byte, err error) {
	t.Helper()
	if err == nil {
		if !json.Valid(b) {
			t.Fatalf("%s: invalid JSON %q decoded without error", name, b)
		}
		return
	}
	ae, ok := err.(*apiError)
	if !ok {
		t.Fatalf("%s: error %T %v is not an *apiError", name, err, err)
	}
	if ae.Status != http.StatusBadRequest || ae.Message == "" {
		t.Fatalf("%s: %+v is not a 400 with a message", name, ae)
	}
	switch {
	case json.Valid(b) && ae.Code != "invalid_argument":
		t.Fatalf("%s: valid JSON %q refused as %s", name, b, ae.Code)
	case !json.Valid(b) && ae.Code != "invalid_json":
		t.Fatalf("%s: invalid JSON %q refused as %s", name, b, ae.Code)
	}
	if !utf8.ValidString(ae.Message) || !utf8.ValidString(ae.Field) {
		t.Fatalf("%s: error is not UTF-8: %+v", name, ae)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `"x"`, `5`, `{"collection":"a/b","data":{"x":1}}`, `{"collection":5}`, `{"collection":null,"data":null}`,
		`{"oldKey":"a","newKey":"b","value":null,"type":"null"}`, `{"oldKey":1}`, `{"value":}`, `{"action":"login","email":"a@b.c","password":"p"}`,
		`{"action":["x"]}`, `{"rules":[{"match":"**","read":"true","write":"false"}]}`, `{"rules":"x"}`, `{"rules":[{"match":5}]}`,
		`{"rules":[1]}`, `{"name":"x","ownerEmail":"a@b.c","ownerPassword":"p"}`, `{"name":{}}`, `{"a":1} x`, `{"s":"\xff"}`,
		`{"collection":"\ud800"}`, `{"data":{"a":1e999}}`, `{"collection":"a","collection":5}`, ``, ` `, `{`,
	} {
		f.Add([]byte(s))
	}
	s := &Server{limits: Limits{}.withDefaults(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, v := range decodeTargets() {
			checkDecodeError(t, name, b, decodeJSON(b, v))
		}
		// The same bytes through the whole body pipeline (media type, size
		// cap, nesting cap, decode) into one struct.
		for name, v := range decodeTargets() {
			req := httptest.NewRequest(http.MethodPost, "/api/db", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			err := s.decodeBody(httptest.NewRecorder(), req, v)
			if err == nil {
				if !json.Valid(b) {
					t.Fatalf("%s: decodeBody accepted invalid JSON %q", name, b)
				}
				continue
			}
			ae, ok := err.(*apiError)
			if !ok || ae.Status != http.StatusBadRequest {
				t.Fatalf("%s: decodeBody(%q) = %#v, want a 400 *apiError", name, b, err)
			}
			// And the error renders in the one shape.
			w := httptest.NewRecorder()
			s.writeError(w, req, err)
			var out struct {
				Error struct{ Code, Message, Field string }
			}
			if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &out) != nil || out.Error.Code != ae.Code {
				t.Fatalf("%s: rendered %d %q for %+v", name, w.Code, w.Body.String(), ae)
			}
		}
	})
}
