package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"
)

// MaxDocumentSize bounds the encoded JSON of one document. It is enforced in
// Apply so that field updates cannot grow a document past it either.
const MaxDocumentSize = 1 << 20

// maxListBytes bounds the document bytes of one listing page: a page ends
// early (with a continuation) rather than buffering up to limit x 1 MiB.
const maxListBytes = 8 << 20

// MaxTxnOps bounds the ops (and the conds) of one transaction.
const MaxTxnOps = 1024

// Key layout of the tree database. Every key starts with a one-byte space tag
// so that documents, metadata and future spaces never collide.
const (
	spaceDoc  = 't' // 't' + full path ("projectID/a/b") → encoded document
	spaceMeta = 'm' // 'm' + name → metadata (last applied index, ...)
)

var keyApplied = []byte{spaceMeta, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}

// keyAppliedTerm holds the Raft term of the entry at the applied index,
// written with it (absent in trees applied before it existed: unknown).
var keyAppliedTerm = []byte{spaceMeta, 'l', 'a', 's', 't', 't', 'e', 'r', 'm'}

func docKey(path string) []byte {
	k := make([]byte, 0, len(path)+1)
	k = append(k, spaceDoc)
	return append(k, path...)
}

// docHeaderLen is the fixed binary header of a stored document:
// version(1) revision(8) createRevision(8) createTime(8) updateTime(8).
const docHeaderLen = 1 + 8*4

const docVersion byte = 1

func encodeDoc(d *Document) []byte {
	b := make([]byte, docHeaderLen, docHeaderLen+len(d.Data))
	b[0] = docVersion
	binary.BigEndian.PutUint64(b[1:], d.Revision)
	binary.BigEndian.PutUint64(b[9:], d.CreateRevision)
	binary.BigEndian.PutUint64(b[17:], uint64(d.CreateTime))
	binary.BigEndian.PutUint64(b[25:], uint64(d.UpdateTime))
	return append(b, d.Data...)
}

func decodeDoc(path string, b []byte) (*Document, error) {
	if len(b) < docHeaderLen || b[0] != docVersion {
		return nil, fmt.Errorf("decode document %q: bad header", path)
	}
	data := make([]byte, len(b)-docHeaderLen)
	copy(data, b[docHeaderLen:])
	return &Document{
		Path:           path,
		Revision:       binary.BigEndian.Uint64(b[1:]),
		CreateRevision: binary.BigEndian.Uint64(b[9:]),
		CreateTime:     int64(binary.BigEndian.Uint64(b[17:])),
		UpdateTime:     int64(binary.BigEndian.Uint64(b[25:])),
		Data:           data,
	}, nil
}

// getDoc reads one document inside txn; (nil, nil) when absent.
func getDoc(txn *badger.Txn, path string) (*Document, error) {
	item, err := txn.Get(docKey(path))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", path, err)
	}
	var doc *Document
	err = item.Value(func(v []byte) error {
		var derr error
		doc, derr = decodeDoc(path, v)
		return derr
	})
	return doc, err
}

// listChildren returns up to limit direct children of parent whose name sorts
// after `after`, and the name to continue from ("" when done). Grandchildren are
// skipped with one Seek per child subtree, so the cost is in children, not
// descendants.
func listChildren(txn *badger.Txn, parent, after string, limit int) ([]*Document, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("list %q: limit must be positive, got %d", parent, limit)
	}
	prefix := docKey(parent + "/")
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()

	// Start at "after" itself: siblings such as "a-b" and "a.b" sort between
	// "a" and "a/...", so jumping straight past a's subtree would skip them.
	start := append(append([]byte{}, prefix...), after...)
	var out []*Document
	size := 0
	for it.Seek(start); it.ValidForPrefix(prefix); {
		key := it.Item().Key()
		rest := key[len(prefix):]
		if after != "" && string(rest) == after {
			it.Next()
			continue
		}
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			// A descendant deeper than one level: jump past this child's
			// subtree ("x0" is the first key after every "x/..." key, and
			// every sibling sorting before "x/" has been visited already).
			next := append(append([]byte{}, key[:len(prefix)+i]...), '0')
			it.Seek(next)
			continue
		}
		if len(out) == limit || (len(out) > 0 && size >= maxListBytes) {
			return out, string(out[len(out)-1].Path[len(parent)+1:]), nil
		}
		var doc *Document
		err := it.Item().Value(func(v []byte) error {
			var derr error
			doc, derr = decodeDoc(string(key[1:]), v)
			return derr
		})
		if err != nil {
			return nil, "", err
		}
		out = append(out, doc)
		size += len(doc.Data)
		it.Next()
	}
	return out, "", nil
}

// applyFieldOp returns a document's data after a set, rename or delete field
// op, or why the op is refused. Apply uses it, and so does the REST layer to
// show the access rules the document exactly as it will be stored.
func applyFieldOp(data json.RawMessage, op Op) (json.RawMessage, OpError) {
	if op.Kind != OpDeleteField && !json.Valid(op.Data) {
		return nil, ErrCodeInvalid
	}
	return editFields(data, func(m map[string]json.RawMessage) OpError {
		_, has := m[op.Field]
		switch op.Kind {
		case OpSetField:
			m[op.Field] = op.Data
		case OpRenameField:
			if !has {
				return ErrCodeFieldNotFound
			}
			if _, taken := m[op.NewField]; taken {
				return ErrCodeFieldExists
			}
			delete(m, op.Field)
			m[op.NewField] = op.Data
		case OpDeleteField:
			if !has {
				return ErrCodeFieldNotFound
			}
			delete(m, op.Field)
		default:
			return ErrCodeInvalid
		}
		return ErrCodeNone
	})
}

// editFields applies fn to the top-level fields of a JSON object and
// re-encodes it. Values are kept verbatim (no float rounding); keys come out
// sorted, which keeps the encoding deterministic across nodes.
func editFields(data json.RawMessage, fn func(map[string]json.RawMessage) OpError) (json.RawMessage, OpError) {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, ErrCodeInvalid
	}
	if code := fn(fields); code != ErrCodeNone {
		return nil, code
	}
	out, err := marshalSorted(fields)
	if err != nil {
		return nil, ErrCodeInvalid
	}
	return out, ErrCodeNone
}

// marshalSorted encodes an object with sorted keys and raw values untouched.
func marshalSorted(fields map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(fields[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
