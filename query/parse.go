package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Parse decodes a query body strictly (unknown members, trailing data and
// wrong types are refused) and compiles it. The collection is checked only for
// shape here (non-empty, no leading or trailing "/", no empty segment; for a
// collection group a single segment); the caller checks it as a path.
//
// Member names match exactly (not case-insensitively, as encoding/json
// would) and at most once; a member given as null is absent, except a
// filter's value, where null is the operand.
func Parse(body []byte) (*Compiled, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, errArg("", "the query is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errArg("", "the query is followed by more data")
	}
	m, err := members(raw, "", "collection", "collectionGroup", "where", "orderBy", "limit", "startAfter", "select", "count")
	if err != nil {
		return nil, err
	}
	var q Query
	if err := stringMember(m, "collection", "collection", &q.Collection); err != nil {
		return nil, err
	}
	if err := boolMember(m, "collectionGroup", "collectionGroup", &q.CollectionGroup); err != nil {
		return nil, err
	}
	where, err := arrayMember(m, "where", "where")
	if err != nil {
		return nil, err
	}
	for i, w := range where {
		at := fmt.Sprintf("where[%d]", i)
		fm, err := members(w, at, "field", "op", "value")
		if err != nil {
			return nil, err
		}
		var f Filter
		if err := stringMember(fm, "field", at+".field", &f.Field); err != nil {
			return nil, err
		}
		if err := stringMember(fm, "op", at+".op", &f.Op); err != nil {
			return nil, err
		}
		f.Value = fm["value"]
		q.Where = append(q.Where, f)
	}
	orderBy, err := arrayMember(m, "orderBy", "orderBy")
	if err != nil {
		return nil, err
	}
	for i, o := range orderBy {
		at := fmt.Sprintf("orderBy[%d]", i)
		om, err := members(o, at, "field", "direction")
		if err != nil {
			return nil, err
		}
		var ob Order
		if err := stringMember(om, "field", at+".field", &ob.Field); err != nil {
			return nil, err
		}
		if err := stringMember(om, "direction", at+".direction", &ob.Direction); err != nil {
			return nil, err
		}
		q.OrderBy = append(q.OrderBy, ob)
	}
	if err := limitMember(m, &q.Limit); err != nil {
		return nil, err
	}
	if err := stringMember(m, "startAfter", "startAfter", &q.StartAfter); err != nil {
		return nil, err
	}
	sel, err := arrayMember(m, "select", "select")
	if err != nil {
		return nil, err
	}
	for i, s := range sel {
		var f string
		if err := decodeString(s, fmt.Sprintf("select[%d]", i), &f); err != nil {
			return nil, err
		}
		q.Select = append(q.Select, f)
	}
	if err := boolMember(m, "count", "count", &q.Count); err != nil {
		return nil, err
	}
	return Compile(&q)
}

// members decodes a JSON object whose member names must be among known
// (exactly, each at most once); at names it in errors ("" for the body
// itself).
func members(raw json.RawMessage, at string, known ...string) (map[string]json.RawMessage, *Error) {
	what := at
	if what == "" {
		what = "the query"
	}
	names, ok := memberNames(raw)
	var m map[string]json.RawMessage
	if !ok || json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, errArg(at, "%s must be a JSON object", what)
	}
	field := func(name string) string {
		if at == "" {
			return name
		}
		return at + "." + name
	}
	seen := make(map[string]bool, len(names))
	for _, k := range names {
		if !slices.Contains(known, k) {
			return nil, errArg(field(k), "unknown member %q", k)
		}
		if seen[k] {
			return nil, errArg(field(k), "member %q is given twice", k)
		}
		seen[k] = true
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }

func decodeString(raw json.RawMessage, field string, dst *string) *Error {
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
		return errArg(field, "%s must be a string", field)
	}
	return nil
}

func stringMember(m map[string]json.RawMessage, name, field string, dst *string) *Error {
	raw := m[name]
	if isNull(raw) {
		return nil
	}
	return decodeString(raw, field, dst)
}

func boolMember(m map[string]json.RawMessage, name, field string, dst *bool) *Error {
	raw := m[name]
	if isNull(raw) {
		return nil
	}
	switch string(raw) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errArg(field, "%s must be true or false", field)
	}
	return nil
}

func arrayMember(m map[string]json.RawMessage, name, field string) ([]json.RawMessage, *Error) {
	raw := m[name]
	if isNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, errArg(field, "%s must be an array", field)
	}
	return list, nil
}

func limitMember(m map[string]json.RawMessage, dst *int) *Error {
	raw := m["limit"]
	if isNull(raw) {
		return nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 1 || n > MaxLimit {
		return errArg("limit", "limit must be an integer from 1 to %d", MaxLimit)
	}
	*dst = int(n)
	return nil
}
