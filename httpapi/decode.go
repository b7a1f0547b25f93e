package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgebase/edgebase/raftstore"
)

// Limits bound what one request may carry.
type Limits struct {
	// MaxBodyBytes caps a request body (default 1 MiB + 64 KiB, so that a
	// document of the full 1 MiB still fits with its envelope).
	MaxBodyBytes int64
	// MaxDepth caps JSON nesting (default 64).
	MaxDepth int
	// BodyReadTimeout bounds reading one request body (default 30 s).
	BodyReadTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 1<<20 + 64<<10
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 64
	}
	if l.BodyReadTimeout <= 0 {
		l.BodyReadTimeout = 30 * time.Second
	}
	return l
}

// readBody enforces Content-Type, the size cap and the nesting cap, and
// returns the raw JSON body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "the request body must be sent as Content-Type: application/json")
	}
	// A client that announces a body and then trickles or withholds it must
	// not hold a goroutine forever: bound the read (per request, so that
	// long-lived routes such as WebSockets keep their own deadlines).
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.limits.BodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body exceeds %d bytes", s.limits.MaxBodyBytes))
		}
		return nil, newError(http.StatusBadRequest, "invalid_argument", "the request body could not be read")
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, newError(http.StatusBadRequest, "invalid_argument", "a JSON request body is required")
	}
	if !utf8.Valid(body) {
		// The JSON decoder would silently turn bad bytes into U+FFFD.
		return nil, newError(http.StatusBadRequest, "invalid_json", "the request body is not valid UTF-8")
	}
	if err := checkDepth(body, s.limits.MaxDepth); err != nil {
		return nil, err
	}
	// A key given twice (two "collection"s) must not be decided by "last
	// wins": refuse it, like a repeated key in stored data.
	if key, dup := repeatedKey(body); dup {
		return nil, newError(http.StatusBadRequest, "invalid_argument", fmt.Sprintf("the request body has the key %q twice in one object", key))
	}
	return body, nil
}

// decodeBody reads the body and decodes it into v, naming the field of a type error.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				return newError(http.StatusBadRequest, "invalid_argument", "the request body must be a JSON object")
			}
			return badField(field, "invalid_argument", fmt.Sprintf("field %q must be of type %s", field, jsonTypeName(te.Type.Kind().String())))
		}
		return newError(http.StatusBadRequest, "invalid_json", "the request body is not valid JSON")
	}
	return nil
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "map", "struct":
		return "object"
	case "slice", "array":
		return "array"
	case "int", "int64", "uint64", "float64", "int32", "uint32", "uint":
		return "number"
	}
	return kind
}

// checkDepth rejects JSON nested deeper than max without decoding it.
func checkDepth(b []byte, max int) error {
	if raftstore.JSONDepth(b) > max {
		return newError(http.StatusBadRequest, "invalid_argument", fmt.Sprintf("JSON nesting exceeds %d levels", max))
	}
	return nil
}

// repeatedKey reports the first key an object of b repeats. Malformed JSON
// is left to the decoder to report.
func repeatedKey(b []byte) (string, bool) {
	var dup *dupKeyError
	if errors.As(walkJSON(b, false), &dup) {
		return dup.key, true
	}
	return "", false
}

type dupKeyError struct{ key string }

func (e *dupKeyError) Error() string { return fmt.Sprintf("has the key %q twice in one object", e.key) }

// checkValue walks a JSON value once and refuses what storage must not keep:
// duplicate keys in an object (the rules would judge the last value while
// other readers may take the first) and numbers beyond float64 (no client
// could read them back, and the rules could not evaluate them).
func checkValue(b []byte) error { return walkJSON(b, true) }

// walkJSON refuses repeated keys and, with numbers, numbers beyond float64.
func walkJSON(b []byte, numbers bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		expect bool // in an object: a key or '}' comes next
	}
	var stack []*frame
	// valueEnded: in the enclosing object, a key or '}' comes next.
	valueEnded := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expect = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New("is not valid JSON")
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueEnded()
				continue
			}
			key, ok := tok.(string)
			if !ok {
				return errors.New("is not valid JSON")
			}
			if _, dup := stack[n-1].keys[key]; dup {
				return &dupKeyError{key: key}
			}
			stack[n-1].keys[key] = struct{}{}
			stack[n-1].expect = false
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, keys: map[string]struct{}{}, expect: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default: // ']' ('}' always arrives where a key was expected)
				if len(stack) == 0 {
					return errors.New("is not valid JSON")
				}
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); numbers && err != nil {
				return fmt.Errorf("has the number %s, which does not fit a 64-bit float", t)
			}
		}
		valueEnded()
	}
}
