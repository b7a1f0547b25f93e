package query

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// IndexField is one field of a declared index.
type IndexField struct {
	Field     string `json:"field"`
	Direction string `json:"direction,omitempty"` // "asc" (default) or "desc"
}

// Index is a declared composite index: documents of every collection whose
// name (the last segment of its path) is Collection; with CollectionGroup the
// entries of all of them form one range (for collection-group queries),
// otherwise one range per collection.
type Index struct {
	Collection      string       `json:"collection"`
	CollectionGroup bool         `json:"collectionGroup,omitempty"`
	Fields          []IndexField `json:"fields"`
}

// Limits of index declarations.
const (
	MaxIndexes     = 200 // declared indexes of one project
	MaxIndexFields = 8
	maxCollLen     = 1500 // bytes of an index's collection name
)

// ParseIndexes decodes and validates {"indexes":[...]} strictly: 1..8 fields,
// no field twice, a collection name without "/" that does not start with
// "_", no duplicate index. Refusals are *Error with fields like
// "indexes[2].fields[0].direction". Directions come back normalised to
// "asc" or "desc".
func ParseIndexes(body []byte) ([]Index, error) {
	v, ok := decode(body)
	if !ok {
		return nil, errArg("", "the index list is not one JSON value")
	}
	if _, isObj := v.(map[string]any); !isObj {
		return nil, errArg("", "the index list must be a JSON object")
	}
	m, err := members(body, "", "indexes")
	if err != nil {
		return nil, err
	}
	raw, present := m["indexes"]
	if !present || isNull(raw) {
		return nil, errArg("indexes", "indexes is required (an empty array drops every index)")
	}
	list, err := arrayMember(m, "indexes", "indexes")
	if err != nil {
		return nil, err
	}
	if len(list) > MaxIndexes {
		return nil, errArg("indexes", "at most %d indexes per project", MaxIndexes)
	}
	out := make([]Index, 0, len(list))
	ids := map[string]int{}
	for i, r := range list {
		at := fmt.Sprintf("indexes[%d]", i)
		ix, err := parseIndex(r, at)
		if err != nil {
			return nil, err
		}
		id := ix.ID()
		if j, dup := ids[id]; dup {
			return nil, errArg(at, "the same index as indexes[%d]", j)
		}
		ids[id] = i
		out = append(out, ix)
	}
	return out, nil
}

func parseIndex(raw json.RawMessage, at string) (Index, *Error) {
	var ix Index
	m, err := members(raw, at, "collection", "collectionGroup", "fields")
	if err != nil {
		return ix, err
	}
	if err := stringMember(m, "collection", at+".collection", &ix.Collection); err != nil {
		return ix, err
	}
	switch c := ix.Collection; {
	case c == "":
		return ix, errArg(at+".collection", "collection is required")
	case strings.Contains(c, "/"):
		return ix, errArg(at+".collection", "an index names a collection (the last segment of its paths), without /")
	case strings.HasPrefix(c, "_"):
		return ix, errArg(at+".collection", "collections starting with _ are system ones, never indexed")
	case len(c) > maxCollLen || !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0:
		return ix, errArg(at+".collection", "collection must be UTF-8 without NUL, at most %d bytes", maxCollLen)
	}
	if err := boolMember(m, "collectionGroup", at+".collectionGroup", &ix.CollectionGroup); err != nil {
		return ix, err
	}
	fields, err := arrayMember(m, "fields", at+".fields")
	if err != nil {
		return ix, err
	}
	if len(fields) == 0 || len(fields) > MaxIndexFields {
		return ix, errArg(at+".fields", "an index has 1 to %d fields", MaxIndexFields)
	}
	for j, fr := range fields {
		fat := fmt.Sprintf("%s.fields[%d]", at, j)
		fm, err := members(fr, fat, "field", "direction")
		if err != nil {
			return ix, err
		}
		var f IndexField
		if err := stringMember(fm, "field", fat+".field", &f.Field); err != nil {
			return ix, err
		}
		if _, err := parseField(f.Field, fat+".field"); err != nil {
			return ix, err
		}
		if err := stringMember(fm, "direction", fat+".direction", &f.Direction); err != nil {
			return ix, err
		}
		switch f.Direction {
		case "", "asc":
			f.Direction = "asc"
		case "desc":
		default:
			return ix, errArg(fat+".direction", "direction must be asc or desc, not %q", f.Direction)
		}
		if slices.ContainsFunc(ix.Fields, func(g IndexField) bool { return g.Field == f.Field }) {
			return ix, errArg(fat+".field", "field %q is in the index twice", f.Field)
		}
		ix.Fields = append(ix.Fields, f)
	}
	return ix, nil
}

// ID is a short stable identifier of the index's definition (same definition,
// same id, on every node and binary): a key prefix in the index space. It
// is 16 hex digits of the SHA-256 of the definition (directions "" and
// "asc" are one).
func (ix Index) ID() string {
	var b []byte
	b = appendString(b, "edgebase index 1")
	b = appendString(b, ix.Collection)
	if ix.CollectionGroup {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, f := range ix.Fields {
		b = appendString(b, f.Field)
		if f.Direction == "desc" {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (f IndexField) desc() bool { return f.Direction == "desc" }

// Entry is the index key tail for one document: the encoded values of the
// index fields (each with its direction), then the path (AppendValue of the
// stored path as a JSON string, with the last field's direction), and whether
// the document has all of the fields (a document missing one has no entry,
// as in Firestore). Data that is not a JSON object has no entry.
func (ix Index) Entry(path string, data json.RawMessage) ([]byte, bool) {
	if len(ix.Fields) == 0 {
		return nil, false
	}
	paths := make([][]string, len(ix.Fields))
	for i, f := range ix.Fields {
		paths[i] = strings.Split(f.Field, ".")
	}
	doc, ok := object(data, needOf(paths...))
	if !ok {
		return nil, false
	}
	var key []byte
	for i, f := range ix.Fields {
		v, ok := lookup(doc, paths[i])
		if !ok {
			return nil, false
		}
		key = appendEncoded(key, v, f.desc())
	}
	return appendPath(key, path, ix.Fields[len(ix.Fields)-1].desc()), true
}

// Serves reports whether the index can produce the query's results in order
// by scanning one contiguous range: its fields are the query's equality
// fields (in any order) followed by its orderBy fields in order with matching
// directions (or all of them reversed: reverse is then true), the range
// field, if any, being the first of those, and the same collection and scope.
// prefix is the encoded equality values in the index's field order; the other
// filters are applied to each document found.
//
// "Its orderBy fields" are those not fixed by an equality (see SortKey),
// and the index has no other field. The key tail after prefix is then the
// document's SortKey, or its byte-wise complement when reverse; with no
// orderBy field past the equalities, the path's direction decides reverse
// (the index's last field's direction against ascending).
func (ix Index) Serves(c *Compiled) (prefix []byte, reverse bool, ok bool) {
	if ix.CollectionGroup != c.Q.CollectionGroup || ix.Collection != lastSegment(c.Q.Collection) {
		return nil, false, false
	}
	ne := len(c.eq)
	if len(ix.Fields) == 0 || len(ix.Fields) != ne+len(c.sortBy) {
		return nil, false, false
	}
	for _, f := range ix.Fields[:ne] {
		v, isEq := c.eq[f.Field]
		if !isEq {
			return nil, false, false
		}
		prefix = appendEncoded(prefix, v, f.desc())
	}
	rest := ix.Fields[ne:]
	if len(rest) == 0 {
		reverse = ix.Fields[len(ix.Fields)-1].desc() != c.pathDesc
		return prefix, reverse, true
	}
	reverse = rest[0].desc() != c.sortBy[0].desc
	for i, f := range rest {
		o := c.sortBy[i]
		if f.Field != o.field || (f.desc() != o.desc) != reverse {
			return nil, false, false
		}
	}
	if c.rangeField != "" && !c.pinned(c.rangeField) && rest[0].Field != c.rangeField {
		return nil, false, false // not reached: Compile puts the range field first
	}
	return prefix, reverse, true
}

func lastSegment(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// Suggest is the index that would serve c: its equality fields (sorted),
// then its orderBy fields (with the range field first, and the one a range
// filter implies). Its Collection is the last segment of the query's. When
// the query has neither an equality nor an order, or more of them than an
// index may have fields (MaxIndexFields), no index serves it and Fields is
// empty.
func Suggest(c *Compiled) Index {
	ix := Index{Collection: lastSegment(c.Q.Collection), CollectionGroup: c.Q.CollectionGroup}
	if len(c.eq)+len(c.sortBy) > MaxIndexFields {
		return ix
	}
	eqs := make([]string, 0, len(c.eq))
	for f := range c.eq {
		eqs = append(eqs, f)
	}
	slices.Sort(eqs)
	for _, f := range eqs {
		ix.Fields = append(ix.Fields, IndexField{Field: f, Direction: "asc"})
	}
	for _, o := range c.sortBy {
		d := "asc"
		if o.desc {
			d = "desc"
		}
		ix.Fields = append(ix.Fields, IndexField{Field: o.field, Direction: d})
	}
	return ix
}
