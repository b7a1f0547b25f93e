package raftstore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Decider decides, inside Apply, whether a txn's writes may commit: the
// domain's access control (who the caller is, its role, the access rules)
// and invariants (a project keeps an owner), judged against committed state
// at the entry's own position in the log. A write is therefore judged under
// exactly the roles, sessions and rules that precede it in the log, on every
// node alike, and an unconditional write never loses a race to another.
//
// It must be deterministic: it may read only the View and the Txn (its
// Time stands in for the clock), never a clock, randomness or the network.
// It is defined here, where Apply consumes it; the domain layer implements it.
type Decider interface {
	// Begin starts the judgement of one txn. A txn with a Caller that does
	// not resolve is refused with ErrCodeUnauthenticated (or another code).
	Begin(v View, t *Txn) (EntryDecider, OpError)
}

// EntryDecider judges the ops of one txn, in order, then the txn as a whole.
type EntryDecider interface {
	// Op judges op i before it is applied: cur is the document as the
	// txn's earlier ops left it (nil: absent); next is the document the op
	// would leave (nil: deleted, or the op itself failed, which its own
	// error then reports once the op is allowed).
	Op(i int, op *Op, cur, next *Document) OpError
	// End judges the txn after its last op (invariants). written lists the
	// paths the txn wrote, once each, in first-write order; v shows the state
	// after the txn, and before the state ahead of it.
	End(written []string, before func(path string) *Document) OpError
}

// View is the state a Decider reads: committed state, plus the writes of
// the txn's own earlier ops.
type View interface {
	Get(path string) (*Document, error)
	// Scan calls fn for every document whose path starts with prefix, in no
	// particular order, until fn returns false.
	Scan(prefix string, fn func(*Document) bool) error
}

// Get implements View for the overlay.
func (o *overlay) Get(path string) (*Document, error) { return o.get(path) }

// Scan implements View for the overlay: stored documents the entry has not
// touched, then the entry's own documents.
func (o *overlay) Scan(prefix string, fn func(*Document) bool) error {
	latest := make(map[string]*Document)
	for i, k := range o.w.keys {
		if strings.HasPrefix(k, prefix) {
			latest[k] = o.w.docs[i]
		}
	}
	opts := badger.DefaultIteratorOptions
	opts.Prefix = docKey(prefix)
	it := o.txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		path := string(it.Item().Key()[1:])
		if _, mine := latest[path]; mine {
			continue
		}
		var doc *Document
		if err := it.Item().Value(func(v []byte) error {
			var derr error
			doc, derr = decodeDoc(path, v)
			return derr
		}); err != nil {
			return err
		}
		o.record(doc.Path, doc)
		if !fn(doc) {
			return nil
		}
	}
	for _, d := range latest {
		if d != nil && !fn(d) {
			return nil
		}
	}
	return nil
}

// applyOp computes the document op leaves at cur's path (nil after a
// delete), or why the op fails.
func applyOp(cur *Document, op *Op, index uint64, t *Txn) (*Document, OpError) {
	switch op.Kind {
	case OpPut:
		if !isJSONObject(op.Data) {
			return nil, ErrCodeInvalid
		}
		if len(op.Data) > MaxDocumentSize {
			return nil, ErrCodeTooLarge
		}
		return newVersion(cur, op.Path, op.Data, index, t), ErrCodeNone
	case OpDelete:
		if cur == nil && !op.IfExists {
			return nil, ErrCodeNotFound
		}
		return nil, ErrCodeNone
	case OpSetField, OpRenameField, OpDeleteField:
		if cur == nil {
			return nil, ErrCodeNotFound
		}
		data, code := applyFieldOp(cur.Data, *op)
		if code != ErrCodeNone {
			return nil, code
		}
		if len(data) > MaxDocumentSize {
			return nil, ErrCodeTooLarge
		}
		return newVersion(cur, op.Path, data, index, t), ErrCodeNone
	case OpIncrement, OpServerTimestamp, OpArrayUnion, OpArrayRemove:
		base := json.RawMessage(`{}`)
		if cur != nil {
			base = cur.Data
		}
		data, code := editFields(base, func(m map[string]json.RawMessage) OpError {
			v, code := computedField(m[op.Field], op, t)
			if code == ErrCodeNone {
				m[op.Field] = v
			}
			return code
		})
		if code != ErrCodeNone {
			return nil, code
		}
		if len(data) > MaxDocumentSize {
			return nil, ErrCodeTooLarge
		}
		return newVersion(cur, op.Path, data, index, t), ErrCodeNone
	default:
		return nil, ErrCodeInvalid
	}
}

func newVersion(cur *Document, path string, data json.RawMessage, index uint64, t *Txn) *Document {
	d := &Document{Path: path, Data: data, Revision: index, CreateRevision: index, CreateTime: t.Time, UpdateTime: t.Time}
	if cur != nil {
		d.CreateRevision, d.CreateTime = cur.CreateRevision, cur.CreateTime
	}
	return d
}

// computedField is the new value of a field under an increment, a server
// timestamp or an array op, from its current value (nil: absent).
func computedField(cur json.RawMessage, op *Op, t *Txn) (json.RawMessage, OpError) {
	if op.Field == "" {
		return nil, ErrCodeInvalid
	}
	switch op.Kind {
	case OpServerTimestamp:
		return json.RawMessage(strconv.Quote(time.Unix(0, t.Time).UTC().Format(time.RFC3339Nano))), ErrCodeNone
	case OpIncrement:
		if len(cur) == 0 {
			cur = json.RawMessage("0")
		}
		return addNumbers(cur, op.Data)
	default:
		return arrayOp(cur, op)
	}
}

// addNumbers adds two JSON numbers: exactly as integers when both are
// integers that fit in 53 bits and so does the sum, else as float64. The
// result is deterministic on every node (IEEE 754 addition, shortest
// formatting).
func addNumbers(a, b json.RawMessage) (json.RawMessage, OpError) {
	if !isNumber(b) {
		return nil, ErrCodeInvalid
	}
	if !isNumber(a) {
		return nil, ErrCodeFieldType
	}
	const exact = 1 << 53
	if x, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		if y, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			if s := x + y; x > -exact && x < exact && y > -exact && y < exact && s > -exact && s < exact {
				return json.RawMessage(strconv.FormatInt(s, 10)), ErrCodeNone
			}
		}
	}
	x, err1 := strconv.ParseFloat(string(a), 64)
	y, err2 := strconv.ParseFloat(string(b), 64)
	s := x + y
	if err1 != nil || err2 != nil || math.IsInf(s, 0) || math.IsNaN(s) {
		return nil, ErrCodeFieldType
	}
	out, err := json.Marshal(s)
	if err != nil {
		return nil, ErrCodeFieldType
	}
	return out, ErrCodeNone
}

func isNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal(v, &n) == nil
}

// arrayOp applies an array union or remove to the array cur (nil: absent).
// Elements are compared by their compact JSON encoding with object keys
// sorted, so {"a":1,"b":2} equals {"b":2,"a":1}.
func arrayOp(cur json.RawMessage, op *Op) (json.RawMessage, OpError) {
	var add []json.RawMessage
	if err := json.Unmarshal(op.Data, &add); err != nil {
		return nil, ErrCodeInvalid
	}
	var have []json.RawMessage
	if len(cur) > 0 {
		if t := bytes.TrimSpace(cur); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &have) != nil {
			return nil, ErrCodeFieldType
		}
	}
	keyOf := func(v json.RawMessage) string {
		var x any
		if json.Unmarshal(v, &x) != nil {
			return string(v)
		}
		b, err := json.Marshal(x) // maps marshal with sorted keys
		if err != nil {
			return string(v)
		}
		return string(b)
	}
	out := make([]json.RawMessage, 0, len(have)+len(add))
	switch op.Kind {
	case OpArrayUnion:
		seen := make(map[string]bool, len(have)+len(add))
		for _, v := range have {
			seen[keyOf(v)] = true
			out = append(out, v)
		}
		for _, v := range add {
			if k := keyOf(v); !seen[k] {
				seen[k] = true
				out = append(out, v)
			}
		}
	case OpArrayRemove:
		drop := make(map[string]bool, len(add))
		for _, v := range add {
			drop[keyOf(v)] = true
		}
		for _, v := range have {
			if !drop[keyOf(v)] {
				out = append(out, v)
			}
		}
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, v := range out {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := json.Compact(&buf, v); err != nil {
			return nil, ErrCodeInvalid
		}
	}
	buf.WriteByte(']')
	return buf.Bytes(), ErrCodeNone
}
