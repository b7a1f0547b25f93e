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
// JavaScript; beyond float64's range a number is ±infinity; -0 == 0); strings compare by their UTF-8 bytes; arrays element by
// element, a shorter prefix first; objects by their keys in sorted order,
// key then value, a shorter prefix first. A missing field is not a value: a
// document without the field never matches a filter on it (but "exists":
// false), and is left out of a query ordered by it (as in Firestore).
// Results are ordered by the orderBy fields, then by document path: the
// stored path (raftstore.Document.Path) as a string value, ascending, or
// descending when the last orderBy is descending (Firestore's rule), so that
// an index scanned backwards yields the same order. An orderBy field that an
// "==" filter fixes orders nothing and does not count as the last one.
// Without orderBy, a query with a range filter is ordered by the range
// field, ascending (Firestore's implied order; Compile adds it).
//
// Fields are dotted paths into nested objects ("a.b" is member b of member
// a); a member whose name contains a dot cannot be addressed, and arrays are
// not entered.
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
//
// Data that is not a JSON object matches nothing.
package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
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

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Error codes.
const (
	CodeInvalidArgument = "invalid_argument" // a member of the wrong shape or type
	CodeInvalidQuery    = "invalid_query"    // members that do not go together
	CodeInvalidCursor   = "invalid_cursor"   // a startAfter this query did not issue
)

func errArg(field, format string, args ...any) *Error {
	return &Error{Field: field, Code: CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

func errQuery(field, format string, args ...any) *Error {
	return &Error{Field: field, Code: CodeInvalidQuery, Message: fmt.Sprintf(format, args...)}
}

// Operators.
const (
	OpEq               = "=="
	OpNe               = "!="
	OpLt               = "<"
	OpLe               = "<="
	OpGt               = ">"
	OpGe               = ">="
	OpIn               = "in"
	OpNotIn            = "not-in"
	OpArrayContains    = "array-contains"
	OpArrayContainsAny = "array-contains-any"
	OpExists           = "exists"
)

func isRange(op string) bool { return op == OpLt || op == OpLe || op == OpGt || op == OpGe }

// Compile validates q and prepares it for matching and ordering. Every
// refusal is an *Error.
//
// Beyond each member's shape it refuses (invalid_query) range filters on
// two fields, an orderBy field given twice, an orderBy whose first field not
// fixed by an "==" filter is not the range field, and count with select. A
// query with a range filter on field f (not fixed by "==") and no orderBy
// is ordered by f ascending, as in Firestore: Compile adds that orderBy to
// Q. An orderBy field that an "==" filter fixes orders nothing (every match
// has the same value there): it is left out of SortKey, of the path's
// direction and of the fields an index needs.
func Compile(q *Query) (*Compiled, error) {
	c := &Compiled{Q: *q}
	c.Q.Where = slices.Clone(q.Where)
	c.Q.OrderBy = slices.Clone(q.OrderBy)
	c.Q.Select = slices.Clone(q.Select)
	if err := checkCollection(q.Collection, q.CollectionGroup); err != nil {
		return nil, err
	}
	if err := c.compileWhere(); err != nil {
		return nil, err
	}
	if err := c.compileOrderBy(); err != nil {
		return nil, err
	}
	switch {
	case c.Q.Limit == 0:
		c.Q.Limit = DefaultLimit
	case c.Q.Limit < 1 || c.Q.Limit > MaxLimit:
		return nil, errArg("limit", "limit must be from 1 to %d", MaxLimit)
	}
	if len(c.Q.Select) > MaxSelect {
		return nil, errArg("select", "at most %d fields may be selected", MaxSelect)
	}
	for i, f := range c.Q.Select {
		p, err := parseField(f, fmt.Sprintf("select[%d]", i))
		if err != nil {
			return nil, err
		}
		c.sel = append(c.sel, p)
	}
	if c.Q.Count && len(c.Q.Select) > 0 {
		return nil, errQuery("select", "a count returns no documents to select fields of")
	}
	c.digest = c.shapeDigest()
	c.matchNeed, c.sortNeed, c.selNeed = &need{}, &need{}, &need{}
	for _, f := range c.filters {
		c.matchNeed.add(f.path)
	}
	for _, o := range c.orders {
		c.matchNeed.add(o.path)
	}
	for _, o := range c.sortBy {
		c.sortNeed.add(o.path)
	}
	for _, p := range c.sel {
		c.selNeed.add(p)
	}
	return c, nil
}

// checkCollection checks a collection's shape (the caller checks it as a
// path).
func checkCollection(coll string, group bool) *Error {
	switch {
	case coll == "":
		return errArg("collection", "collection is required")
	case group && strings.Contains(coll, "/"):
		return errArg("collection", "a collection group is one collection name, without /")
	case strings.HasPrefix(coll, "/") || strings.HasSuffix(coll, "/"):
		return errArg("collection", "collection must not start or end with /")
	case strings.Contains(coll, "//"):
		return errArg("collection", "collection has an empty segment")
	}
	return nil
}

// parseField splits a dotted field path, refusing an empty one, an empty
// segment, a NUL byte, invalid UTF-8 and more than MaxFieldLen bytes.
func parseField(f, field string) ([]string, *Error) {
	switch {
	case f == "":
		return nil, errArg(field, "a field path is required")
	case len(f) > MaxFieldLen:
		return nil, errArg(field, "a field path is at most %d bytes", MaxFieldLen)
	case !utf8.ValidString(f) || strings.IndexByte(f, 0) >= 0:
		return nil, errArg(field, "a field path must be UTF-8 without NUL")
	}
	p := strings.Split(f, ".")
	if slices.Contains(p, "") {
		return nil, errArg(field, "field path %q has an empty segment", f)
	}
	return p, nil
}

func (c *Compiled) compileWhere() error {
	if len(c.Q.Where) > MaxFilters {
		return errArg("where", "at most %d filters", MaxFilters)
	}
	c.eq = map[string]any{}
	for i := range c.Q.Where {
		f := &c.Q.Where[i]
		at := fmt.Sprintf("where[%d]", i)
		path, err := parseField(f.Field, at+".field")
		if err != nil {
			return err
		}
		cf := filter{path: path, op: f.Op}
		raw := bytes.TrimSpace(f.Value)
		switch f.Op {
		case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpIn, OpNotIn, OpArrayContains, OpArrayContainsAny, OpExists:
		default:
			return errArg(at+".op", "unknown operator %q (want ==, !=, <, <=, >, >=, in, not-in, array-contains, array-contains-any or exists)", f.Op)
		}
		if len(raw) == 0 {
			return errArg(at+".value", "value is required")
		}
		v, ok := decode(raw)
		if !ok {
			return errArg(at+".value", "value is not one JSON value")
		}
		cf.val = v
		switch f.Op {
		case OpIn, OpNotIn, OpArrayContainsAny:
			list, ok := v.([]any)
			if !ok || len(list) == 0 || len(list) > MaxFilters {
				return errArg(at+".value", "%s takes an array of 1 to %d values", f.Op, MaxFilters)
			}
			cf.vals = list
		case OpExists:
			b, ok := v.(bool)
			if !ok {
				return errArg(at+".value", "exists takes true or false")
			}
			cf.exists = b
		case OpEq:
			c.eq[f.Field] = v
		}
		if isRange(f.Op) {
			if c.rangeField == "" {
				c.rangeField, c.rangePath = f.Field, path
			} else if c.rangeField != f.Field {
				return errQuery(at+".field", "range filters (<, <=, >, >=) may be on one field only, here %q and %q", c.rangeField, f.Field)
			}
			c.addBound(f.Op, v)
		}
		c.filters = append(c.filters, cf)
	}
	return nil
}

// addBound narrows the range with one range filter's operand.
func (c *Compiled) addBound(op string, v any) {
	switch op {
	case OpGt, OpGe:
		inc := op == OpGe
		if !c.hasLo {
			c.lo, c.loInc, c.hasLo = v, inc, true
			return
		}
		switch cmp := compareValues(v, c.lo); {
		case cmp > 0:
			c.lo, c.loInc = v, inc
		case cmp == 0:
			c.loInc = c.loInc && inc
		}
	default:
		inc := op == OpLe
		if !c.hasHi {
			c.hi, c.hiInc, c.hasHi = v, inc, true
			return
		}
		switch cmp := compareValues(v, c.hi); {
		case cmp < 0:
			c.hi, c.hiInc = v, inc
		case cmp == 0:
			c.hiInc = c.hiInc && inc
		}
	}
}

func (c *Compiled) compileOrderBy() error {
	if len(c.Q.OrderBy) > MaxOrderBy {
		return errArg("orderBy", "at most %d orderBy fields", MaxOrderBy)
	}
	seen := map[string]bool{}
	for i := range c.Q.OrderBy {
		o := &c.Q.OrderBy[i]
		at := fmt.Sprintf("orderBy[%d]", i)
		path, err := parseField(o.Field, at+".field")
		if err != nil {
			return err
		}
		switch o.Direction {
		case "", "asc":
			o.Direction = "asc"
		case "desc":
		default:
			return errArg(at+".direction", "direction must be asc or desc, not %q", o.Direction)
		}
		if seen[o.Field] {
			return errQuery(at+".field", "field %q is ordered by twice", o.Field)
		}
		seen[o.Field] = true
		c.orders = append(c.orders, order{field: o.Field, path: path, desc: o.Direction == "desc", pinned: c.pinned(o.Field)})
	}
	if c.rangeField != "" && !c.pinned(c.rangeField) {
		first := -1
		for i, o := range c.orders {
			if !o.pinned {
				first = i
				break
			}
		}
		switch {
		case len(c.orders) == 0:
			// Firestore's implied order: by the range field, ascending.
			c.Q.OrderBy = append(c.Q.OrderBy, Order{Field: c.rangeField, Direction: "asc"})
			c.orders = append(c.orders, order{field: c.rangeField, path: c.rangePath})
		case first < 0:
			return errQuery("orderBy[0].field", "with a range filter on %q, orderBy must have %q first (after the fields == fixes)", c.rangeField, c.rangeField)
		case c.orders[first].field != c.rangeField:
			return errQuery(fmt.Sprintf("orderBy[%d].field", first), "with a range filter on %q, orderBy must have %q first (after the fields == fixes), not %q", c.rangeField, c.rangeField, c.orders[first].field)
		}
	}
	for _, o := range c.orders {
		if !o.pinned {
			c.sortBy = append(c.sortBy, o)
		}
	}
	if n := len(c.sortBy); n > 0 {
		c.pathDesc = c.sortBy[n-1].desc
	}
	return nil
}

// pinned reports whether an "==" filter fixes field.
func (c *Compiled) pinned(field string) bool {
	_, ok := c.eq[field]
	return ok
}

// Compiled is a validated query, safe for concurrent use.
type Compiled struct {
	// Q is the query as given, with Limit defaulted (also for a count,
	// which ignores it), directions normalised to "asc" or "desc" and the
	// orderBy a range filter implies added.
	Q Query

	filters    []filter
	orders     []order         // Q.OrderBy
	sortBy     []order         // orders not pinned by ==: what SortKey holds
	pathDesc   bool            // the path's direction in SortKey
	eq         map[string]any  // == operands by field, the last wins
	rangeField string          // "" without range filters
	rangePath  []string        //
	lo, hi     any             // range bounds, when hasLo/hasHi
	hasLo      bool            //
	hasHi      bool            //
	loInc      bool            //
	hiInc      bool            //
	sel        [][]string      // select paths
	digest     [digestLen]byte // the shape's, for cursors

	// The members Match, SortKey and Project read.
	matchNeed, sortNeed, selNeed *need
}

type filter struct {
	path   []string
	op     string
	val    any   // the operand
	vals   []any // in, not-in, array-contains-any
	exists bool  // exists
}

type order struct {
	field  string
	path   []string
	desc   bool
	pinned bool
}

// object decodes document data, building the members n needs (nil: all);
// ok is false when it is not a JSON object.
func object(data json.RawMessage, n *need) (map[string]any, bool) {
	v, ok := parseJSON(data, n)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok && m != nil
}

// Match reports whether a document's data (a JSON object) passes every
// where clause and has every orderBy field. Data that is not a JSON object
// matches nothing.
func (c *Compiled) Match(data json.RawMessage) bool {
	doc, ok := object(data, c.matchNeed)
	if !ok {
		return false
	}
	return c.match(doc)
}

func (c *Compiled) match(doc map[string]any) bool {
	for i := range c.filters {
		if !c.filters[i].match(doc) {
			return false
		}
	}
	for _, o := range c.orders {
		if _, ok := lookup(doc, o.path); !ok {
			return false
		}
	}
	return true
}

func (f *filter) match(doc map[string]any) bool {
	v, ok := lookup(doc, f.path)
	if f.op == OpExists {
		return ok == f.exists
	}
	if !ok {
		return false
	}
	switch f.op {
	case OpEq:
		return equal(v, f.val)
	case OpNe:
		return v != nil && !equal(v, f.val)
	case OpLt, OpLe, OpGt, OpGe:
		if class(v) != class(f.val) {
			return false
		}
		cmp := compareValues(v, f.val)
		switch f.op {
		case OpLt:
			return cmp < 0
		case OpLe:
			return cmp <= 0
		case OpGt:
			return cmp > 0
		}
		return cmp >= 0
	case OpIn:
		return containsValue(f.vals, v)
	case OpNotIn:
		return v != nil && !containsValue(f.vals, v)
	case OpArrayContains:
		arr, ok := v.([]any)
		return ok && containsValue(arr, f.val)
	case OpArrayContainsAny:
		arr, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range arr {
			if containsValue(f.vals, e) {
				return true
			}
		}
	}
	return false
}

func containsValue(list []any, v any) bool {
	for _, e := range list {
		if equal(e, v) {
			return true
		}
	}
	return false
}

// SortKey is the document's position in the query's order: the orderBy
// values (each AppendValue'd with its direction) then the stored path
// (AppendValue of it as a JSON string, with the last orderBy's direction),
// as bytes that compare with bytes.Compare. Call it only for documents that
// Match. An index entry followed by its path encoded the same way is, once
// the equality prefix is cut off, the same bytes.
//
// orderBy fields that an "==" filter fixes are left out (their value is the
// same in every match), and "the last orderBy" is the last one left:
// without one, the path is ascending.
func (c *Compiled) SortKey(path string, data json.RawMessage) []byte {
	doc, _ := object(data, c.sortNeed)
	return c.sortKey(path, doc)
}

// MatchKey is Match and, for a document that matches, its SortKey, from
// one decoding of data: (nil, false) when it does not match.
func (c *Compiled) MatchKey(path string, data json.RawMessage) ([]byte, bool) {
	// matchNeed holds every orderBy field, so every field SortKey reads.
	doc, ok := object(data, c.matchNeed)
	if !ok || !c.match(doc) {
		return nil, false
	}
	return c.sortKey(path, doc), true
}

func (c *Compiled) sortKey(path string, doc map[string]any) []byte {
	var key []byte
	for _, o := range c.sortBy {
		v, ok := lookup(doc, o.path)
		if !ok {
			key = append(key, tagMissing)
			continue
		}
		key = appendEncoded(key, v, o.desc)
	}
	return appendPath(key, path, c.pathDesc)
}

// appendPath encodes a stored path as a JSON string value (its bytes as
// they are: a stored path is valid UTF-8).
func appendPath(dst []byte, path string, desc bool) []byte {
	start := len(dst)
	dst = appendString(dst, path)
	if desc {
		complementFrom(dst, start)
	}
	return dst
}

// Project applies select: the document data with only the selected fields
// (dotted paths keep their nesting, missing ones are left out, keys come
// sorted), or data itself without select (an empty select is none).
func (c *Compiled) Project(data json.RawMessage) json.RawMessage {
	if len(c.sel) == 0 {
		return data
	}
	doc, _ := object(data, c.selNeed)
	out := map[string]any{}
	for _, p := range c.sel {
		v, ok := lookup(doc, p)
		if !ok {
			continue
		}
		m := out
		for _, seg := range p[:len(p)-1] {
			next, ok := m[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[seg] = next
			}
			m = next
		}
		m[p[len(p)-1]] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return json.RawMessage("{}") // not reached: decoded JSON encodes
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Equalities are the where clauses with op "==", by field (the last wins
// when a field is filtered twice), with each operand's encoded index value
// (AppendValue, ascending). A planner uses them to pick an index.
func (c *Compiled) Equalities() map[string][]byte {
	out := make(map[string][]byte, len(c.eq))
	for f, v := range c.eq {
		out[f] = appendEncoded(nil, v, false)
	}
	return out
}

// Range is the one field with range filters (<, <=, >, >=), if any, and
// the bounds they set as encoded ascending values: lo/hi nil when open,
// loInc/hiInc whether the bound itself matches. Compile refuses range
// filters on more than one field, and (as Firestore does) a range field that
// is not the first orderBy (of those not fixed by "==") when orderBy is
// given. The field may also have an "==" filter (Equalities); then no
// orderBy is implied nor required for it. Of several bounds on one
// side the tightest is kept (operands of different types are all applied by
// Match, which then matches nothing).
func (c *Compiled) Range() (field string, lo, hi []byte, loInc, hiInc bool, ok bool) {
	if c.rangeField == "" {
		return "", nil, nil, false, false, false
	}
	if c.hasLo {
		lo, loInc = appendEncoded(nil, c.lo, false), c.loInc
	}
	if c.hasHi {
		hi, hiInc = appendEncoded(nil, c.hi, false), c.hiInc
	}
	return c.rangeField, lo, hi, loInc, hiInc, true
}
