// Package query is the query language of /api/db/query and of live queries:
// a query's JSON form and its validation, the total order of JSON values,
// filter matching, order-preserving index keys and opaque cursors. It is pure
// (no I/O, no clock) and imports nothing of ours, so that the state machine
// (raftstore: index maintenance and execution), the REST layer (httpapi) and
// realtime (live queries) all judge a document by the same code.
//
// # Value order
//
// Values of different JSON types order by type first:
//
//	null < false < true < numbers < strings < arrays < objects
//
// Numbers compare as float64 (integers beyond 2^53 lose precision, as in
// JavaScript); strings compare by their UTF-8 bytes; arrays element by
// element, a shorter prefix first; objects by their keys in sorted order,
// key then value, a shorter prefix first. A missing field is not a value: a
// document without the field never matches a filter on it (but "exists":
// false), and is left out of a query ordered by it (as in Firestore).
// Results are ordered by the orderBy fields, then by document path: the
// stored path (raftstore.Document.Path) as a string value, ascending, or
// descending when the last orderBy is descending (Firestore's rule), so that
// an index scanned backwards yields the same order.
//
// # Filters (Firestore's semantics)
//
//	==, !=           equality by the value order (1 == 1.0); != and not-in
//	                 match only documents that have the field, and not null
//	<, <=, >, >=     only values of the same type as the operand match
//	in, not-in       operand: a non-empty array of at most 30 values
//	array-contains   the field is an array holding the operand
//	array-contains-any  the field is an array holding one of the operand's
//	                 values (a non-empty array of at most 30)
//	exists           operand true or false: the field is (not) present
package query

import (
	"encoding/json"
)

// Limits of a query.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
	MaxFilters   = 30 // where clauses, and values of in/not-in/array-contains-any
	MaxOrderBy   = 8
	MaxSelect    = 100
	MaxFieldLen  = 1500 // bytes of a dotted field path
)

// Filter is one where clause.
type Filter struct {
	Field string          `json:"field"`
	Op    string          `json:"op"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Order is one orderBy clause; Direction is "asc" (default) or "desc".
type Order struct {
	Field     string `json:"field"`
	Direction string `json:"direction,omitempty"`
}

// Query is the body of POST /api/db/query and the "query" of a live
// subscription.
type Query struct {
	Collection      string   `json:"collection"`
	CollectionGroup bool     `json:"collectionGroup,omitempty"`
	Where           []Filter `json:"where,omitempty"`
	OrderBy         []Order  `json:"orderBy,omitempty"`
	Limit           int      `json:"limit,omitempty"`
	StartAfter      string   `json:"startAfter,omitempty"`
	Select          []string `json:"select,omitempty"`
	Count           bool     `json:"count,omitempty"`
}

// Error is why a query, an index definition or a cursor is refused: Field
// names the part of the request at fault in the API's error shape
// ("where[1].value", "orderBy[0].direction", "startAfter", ...) and Code is
// the API's error code ("invalid_argument", "invalid_query", "invalid_cursor").
type Error struct {
	Field   string
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Parse decodes a query body strictly (unknown members, trailing data and
// wrong types are refused) and compiles it. The collection is checked only for
// shape here (non-empty, no leading or trailing "/", no empty segment; for a
// collection group a single segment); the caller checks it as a path.
func Parse(body []byte) (*Compiled, error) { panic("todo") }

// Compile validates q and prepares it for matching and ordering. Every
// refusal is an *Error.
func Compile(q *Query) (*Compiled, error) { panic("todo") }

// Compiled is a validated query, safe for concurrent use.
type Compiled struct {
	Q Query // as given, with Limit defaulted and directions normalised
	// unexported: parsed fields, decoded operands, the sort order
}

// Match reports whether a document's data (a JSON object) passes every
// where clause and has every orderBy field.
func (c *Compiled) Match(data json.RawMessage) bool { panic("todo") }

// SortKey is the document's position in the query's order: the orderBy
// values (each AppendValue'd with its direction) then the stored path
// (AppendValue of it as a JSON string, with the last orderBy's direction),
// as bytes that compare with bytes.Compare. Call it only for documents that
// Match. An index entry followed by its path encoded the same way is, once
// the equality prefix is cut off, the same bytes.
func (c *Compiled) SortKey(path string, data json.RawMessage) []byte { panic("todo") }

// Cursor is the opaque startAfter cursor that continues after the document
// whose SortKey is key. It carries a digest of the query's shape (collection,
// group, where, orderBy), so a cursor from another query is refused.
func (c *Compiled) Cursor(key []byte) string { panic("todo") }

// After is the SortKey the query's StartAfter cursor names (nil without one):
// results start strictly after it. A cursor that is not one this query
// issued is an *Error on field "startAfter", code "invalid_cursor".
func (c *Compiled) After() ([]byte, error) { panic("todo") }

// Project applies select: the document data with only the selected fields
// (dotted paths keep their nesting), or data itself without select.
func (c *Compiled) Project(data json.RawMessage) json.RawMessage { panic("todo") }

// Equalities are the where clauses with op "==", by field (the last wins
// when a field is filtered twice), with each operand's encoded index value
// (AppendValue, ascending). A planner uses them to pick an index.
func (c *Compiled) Equalities() map[string][]byte { panic("todo") }

// Range is the one field with range filters (<, <=, >, >=), if any, and
// the bounds they set as encoded ascending values: lo/hi nil when open,
// loInc/hiInc whether the bound itself matches. Compile refuses range
// filters on more than one field, and (as Firestore does) a range field that
// is not the first orderBy when orderBy is given.
func (c *Compiled) Range() (field string, lo, hi []byte, loInc, hiInc bool, ok bool) {
	panic("todo")
}

// Value order and index keys -------------------------------------------------

// Compare orders two JSON values by the value order (see the package doc).
// Invalid JSON sorts after everything.
func Compare(a, b json.RawMessage) int { panic("todo") }

// AppendValue appends the order-preserving encoding of one JSON value to dst:
// for any a, b, bytes.Compare(AppendValue(nil,a,false), AppendValue(nil,b,false))
// == Compare(a, b), and the encoding never has one value's bytes be a prefix
// of a different value's (so a key can go on after it). desc inverts the
// encoding (every byte complemented) so that it orders descending.
func AppendValue(dst []byte, v json.RawMessage, desc bool) []byte { panic("todo") }

// Lookup returns the value at a dotted field path of a JSON object, and
// whether it is present.
func Lookup(data json.RawMessage, field string) (json.RawMessage, bool) { panic("todo") }

// Indexes ----------------------------------------------------------------------

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

// MaxIndexes bounds the declared indexes of one project.
const MaxIndexes = 200

// ParseIndexes decodes and validates {"indexes":[...]} strictly: 1..8 fields,
// no field twice, a collection name without "/" that does not start with
// "_", no duplicate index. Refusals are *Error with fields like
// "indexes[2].fields[0].direction".
func ParseIndexes(body []byte) ([]Index, error) { panic("todo") }

// ID is a short stable identifier of the index's definition (same definition,
// same id, on every node and binary): a key prefix in the index space.
func (ix Index) ID() string { panic("todo") }

// Entry is the index key tail for one document: the encoded values of the
// index fields (each with its direction), then the path (AppendValue of the
// stored path as a JSON string, with the last field's direction), and whether
// the document has all of the fields (a document missing one has no entry,
// as in Firestore).
func (ix Index) Entry(path string, data json.RawMessage) ([]byte, bool) { panic("todo") }


// Serves reports whether the index can produce the query's results in order
// by scanning one contiguous range: its fields are the query's equality
// fields (in any order) followed by its orderBy fields in order with matching
// directions (or all of them reversed: reverse is then true), the range
// field, if any, being the first of those, and the same collection and scope.
// prefix is the encoded equality values in the index's field order; the other
// filters are applied to each document found.
func (ix Index) Serves(c *Compiled) (prefix []byte, reverse bool, ok bool) { panic("todo") }

// Suggest is the index that would serve c: its equality fields, then its
// orderBy fields (or the range field). An index_required error names it.
func Suggest(c *Compiled) Index { panic("todo") }
