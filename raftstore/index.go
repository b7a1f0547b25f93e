package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"

	"github.com/edgebase/edgebase/query"
)

// Index maintenance. Two index spaces live in the tree database next to the
// documents and are written in the same Badger transaction as them, so an
// index never disagrees with the documents it names:
//
//   - Declared indexes (query.Index, the project's IndexesPath document):
//     'i' + pid + 0 + id + 0 + [collection scope: parent path + 0] +
//     ix.Entry(path, data) → the stored path.
//   - Automatic single-field indexes, one per top-level scalar field of every
//     user document: 'j' + parent path + 0 + field + 0 +
//     AppendValue(value) + AppendValue(path as a JSON string) → the stored
//     path.
//
// Apply keeps the entries of every declared index and of the automatic
// indexes exact for each document it writes. Documents written before an
// index existed are backfilled by the builder (indexbuild.go), which also
// drops the entries of indexes no longer declared. Build state is local to
// the node (different nodes build at their own pace) but lives in the same
// database, so a snapshot carries it with the entries it describes:
//
//	'm' + "ixbuild/" + pid + "/" + id  the last stored path backfilled
//	'm' + "ixready/" + pid + "/" + id  present once built
//	'm' + "ixauto"                     present once the automatic indexes are
//	'm' + "ixautobuild"                the automatic backfill's last path
const (
	spaceIndex = 'i'
	spaceAuto  = 'j'
)

// ErrCodeInvalidIndexes means a txn put content at an IndexesPath that is
// not a valid {"indexes":[...]} definition (query.ParseIndexes).
const ErrCodeInvalidIndexes OpError = "invalid_indexes"

// ErrCodeIndexEntryTooLarge means a document's entry in a declared index
// (the values of the index's fields) would be longer than maxIndexKeyBytes.
const ErrCodeIndexEntryTooLarge OpError = "index_entry_too_large"

// maxIndexKeyBytes bounds a declared index key (Badger refuses keys of
// 65,000 bytes; a query cursor carries one). Automatic keys stay well below
// Badger's limit by construction: a path of at most maxIndexedPath bytes
// (twice, the parent and the path), a field name of at most
// query.MaxFieldLen and a value of at most maxAutoString bytes.
const maxIndexKeyBytes = 16 << 10

// maxIndexedPath bounds the stored paths that are indexed: far above any
// path a client can write (raftstore.MaxPathBytes plus the project id).
const maxIndexedPath = 16 << 10

// indexesSegment is the system document of a project's declared indexes.
const indexesSegment = "_indexes"

// IndexesPath is the system document holding project pid's declared
// indexes: {"indexes":[query.Index...]}.
func IndexesPath(pid string) string { return pid + "/" + indexesSegment }

// Index build states.
const (
	IndexBuilding = "building"
	IndexReady    = "ready"
)

// IndexState is a declared index as this node holds it.
type IndexState struct {
	query.Index
	ID    string
	State string // IndexBuilding or IndexReady
}

// maxAutoString bounds the strings the automatic index holds (bytes of the
// decoded string); the executor uses it for equality operands too.
const maxAutoString = 1024

var (
	keyIxAuto      = []byte("mixauto")
	keyIxAutoBuild = []byte("mixautobuild")
)

func ixBuildKey(pid, id string) []byte { return []byte("mixbuild/" + pid + "/" + id) }
func ixReadyKey(pid, id string) []byte { return []byte("mixready/" + pid + "/" + id) }

// declaredKeyPrefix is the prefix of every entry of declared index id of
// project pid: 'i' + pid + 0 + id + 0.
func declaredKeyPrefix(pid, id string) []byte {
	k := make([]byte, 0, 3+len(pid)+len(id))
	k = append(k, spaceIndex)
	k = append(k, pid...)
	k = append(k, 0)
	k = append(k, id...)
	return append(k, 0)
}

// autoKeyPrefix is the prefix of the automatic entries of field in the
// collection at parent (a full stored path): 'j' + parent + 0 + field + 0.
func autoKeyPrefix(parent, field string) []byte {
	k := make([]byte, 0, 3+len(parent)+len(field))
	k = append(k, spaceAuto)
	k = append(k, parent...)
	k = append(k, 0)
	k = append(k, field...)
	return append(k, 0)
}

// indexesPID is the project whose IndexesPath path is, if it is one.
func indexesPID(path string) (string, bool) {
	pid, rest, ok := strings.Cut(path, "/")
	if !ok || pid == "" || rest != indexesSegment {
		return "", false
	}
	return pid, true
}

// indexesOpError judges, in Apply, an op that leaves next (nil: deleted) at
// path: content at an IndexesPath must be a valid index declaration.
func indexesOpError(path string, next *Document) OpError {
	if next == nil {
		return ErrCodeNone
	}
	if _, ok := indexesPID(path); !ok {
		return ErrCodeNone
	}
	if _, err := query.ParseIndexes(next.Data); err != nil {
		return ErrCodeInvalidIndexes
	}
	return ErrCodeNone
}

// userDoc takes a stored path apart when it is a user document in a
// collection: its project, its parent (the collection's full path) and the
// collection's name. System documents (a segment starting with "_",
// including the project id's) and documents directly under a project are
// never indexed.
func userDoc(path string) (pid, parent, coll string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "", "", "", false
	}
	parent = path[:i]
	j := strings.IndexByte(parent, '/')
	if j <= 0 {
		return "", "", "", false
	}
	pid = parent[:j]
	if len(path) > maxIndexedPath || strings.HasPrefix(path, "_") || strings.Contains(path, "/_") || strings.IndexByte(path, 0) >= 0 {
		return "", "", "", false
	}
	return pid, parent, parent[strings.LastIndexByte(parent, '/')+1:], true
}

// indexDef is one declared index with its id.
type indexDef struct {
	query.Index
	id string
}

// projectIndexes is a project's declarations as of its IndexesPath document
// at revision rev (0: no document, no index).
type projectIndexes struct {
	rev  uint64
	defs []indexDef
}

func parseProjectIndexes(doc *Document) *projectIndexes {
	if doc == nil {
		return &projectIndexes{}
	}
	p := &projectIndexes{rev: doc.Revision}
	list, err := query.ParseIndexes(doc.Data)
	if err != nil {
		// Apply refuses such content, so this tree holds a document
		// written before validation existed: it declares nothing, on every
		// node alike.
		return p
	}
	for _, ix := range list {
		p.defs = append(p.defs, indexDef{Index: ix, id: ix.ID()})
	}
	return p
}

func (p *projectIndexes) has(id string) bool {
	for _, d := range p.defs {
		if d.id == id {
			return true
		}
	}
	return false
}

// indexCache holds the parsed declarations per project. Apply (under
// buildMu) keeps it equal to the state it writes; readers of another view
// check the revision.
type indexCache struct {
	mu sync.Mutex
	m  map[string]*projectIndexes
}

func (c *indexCache) get(pid string) *projectIndexes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[pid]
}

func (c *indexCache) set(pid string, p *projectIndexes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*projectIndexes)
	}
	c.m[pid] = p
}

func (c *indexCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

// applyIndexes is project pid's declarations in the state Apply writes
// (txn holds the batch's earlier writes), loaded once and then kept by
// Apply itself. Call it only under buildMu.
func (f *fsm) applyIndexes(txn *badger.Txn, pid string) (*projectIndexes, error) {
	if p := f.ixCache.get(pid); p != nil {
		return p, nil
	}
	doc, err := getDoc(txn, IndexesPath(pid))
	if err != nil {
		return nil, err
	}
	p := parseProjectIndexes(doc)
	f.ixCache.set(pid, p)
	return p, nil
}

// viewIndexes is project pid's declarations in the state txn reads.
func (f *fsm) viewIndexes(txn *badger.Txn, pid string) (*projectIndexes, error) {
	doc, err := getDoc(txn, IndexesPath(pid))
	if err != nil {
		return nil, err
	}
	var rev uint64
	if doc != nil {
		rev = doc.Revision
	}
	if p := f.ixCache.get(pid); p != nil && p.rev == rev {
		return p, nil
	}
	return parseProjectIndexes(doc), nil
}

// Indexes lists project pid's declared indexes, in declared order, with
// their build state on this node.
func (s *Store) Indexes(pid string) ([]IndexState, error) {
	var out []IndexState
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		out, err = s.fsm.indexDefs(txn, pid)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("indexes of %q: %w", pid, err)
	}
	return out, nil
}

// indexDefs is project pid's declared indexes with their build state, read
// in txn.
func (f *fsm) indexDefs(txn *badger.Txn, pid string) ([]IndexState, error) {
	p, err := f.viewIndexes(txn, pid)
	if err != nil {
		return nil, err
	}
	out := make([]IndexState, 0, len(p.defs))
	for _, d := range p.defs {
		ready, err := hasKey(txn, ixReadyKey(pid, d.id))
		if err != nil {
			return nil, err
		}
		st := IndexBuilding
		if ready {
			st = IndexReady
		}
		out = append(out, IndexState{Index: d.Index, ID: d.id, State: st})
	}
	return out, nil
}

// autoReady reports whether the automatic single-field indexes are
// complete (backfilled) in the state txn reads.
func autoReady(txn *badger.Txn) bool {
	ok, err := hasKey(txn, keyIxAuto)
	return err == nil && ok
}

func hasKey(txn *badger.Txn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %q: %w", key, err)
	}
	return true, nil
}

// declaredEntry is the key of d's entry for a document, if it has one.
func declaredEntry(pid, parent string, d *indexDef, path string, data json.RawMessage) ([]byte, bool) {
	tail, ok := d.Entry(path, data)
	if !ok {
		return nil, false
	}
	k := declaredKeyPrefix(pid, d.id)
	if !d.CollectionGroup {
		k = append(k, parent...)
		k = append(k, 0)
	}
	return append(k, tail...), true
}

// autoEntries are the automatic index keys of a document: one per
// top-level field whose value is null, a boolean, a number or a string of at
// most maxAutoString bytes.
func autoEntries(parent, path string, data json.RawMessage) [][]byte {
	fields, ok := topMembers(data)
	if !ok {
		fields = nil
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil
		}
	}
	if len(fields) == 0 {
		return nil
	}
	pathJSON, err := json.Marshal(path)
	if err != nil {
		return nil
	}
	pathEnc := query.AppendValue(nil, pathJSON, false)
	out := make([][]byte, 0, len(fields))
	for name, v := range fields {
		if !autoField(name) || !autoValue(v) {
			continue
		}
		k := make([]byte, 0, 3+len(parent)+len(name)+len(v)+8+len(pathEnc))
		k = append(k, spaceAuto)
		k = append(k, parent...)
		k = append(k, 0)
		k = append(k, name...)
		k = append(k, 0)
		k = query.AppendValue(k, v, false)
		out = append(out, append(k, pathEnc...))
	}
	return out
}

// autoField reports whether a top-level field name can be looked up through
// the automatic index (a dotted name is a nested path to a query).
func autoField(name string) bool {
	return name != "" && len(name) <= query.MaxFieldLen && !strings.ContainsAny(name, ".\x00")
}

func autoValue(v json.RawMessage) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '{', '[':
		return false
	case '"':
		if len(bytes.TrimRight(v, " \t\r\n")) <= maxAutoString+2 {
			return true // escapes only make the JSON longer than the string
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return false
		}
		return len(s) <= maxAutoString
	}
	return true
}

// documentIndexKeys are every index key of one user document (nil data:
// none).
func documentIndexKeys(p *projectIndexes, pid, parent, coll, path string, data json.RawMessage) [][]byte {
	if data == nil {
		return nil
	}
	keys := autoEntries(parent, path, data)
	for i := range p.defs {
		d := &p.defs[i]
		if d.Collection != coll {
			continue
		}
		if k, ok := declaredEntry(pid, parent, d, path, data); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// indexWrites are the index keys an entry deletes and sets, computed in
// applyEntry and written by flushEntry.
type indexWrites struct {
	del  [][]byte
	set  [][]byte
	vals [][]byte // the stored path of each set
	size int64    // Badger's estimate of what they add to a transaction
}

func (x *indexWrites) addDel(k []byte) {
	x.del = append(x.del, k)
	x.size += int64(len(k)) + 12
}

func (x *indexWrites) addSet(k []byte, path string) {
	x.set = append(x.set, k)
	x.vals = append(x.vals, []byte(path))
	x.size += int64(len(k)+len(path)) + 12
}

// indexEntry computes the index writes of an entry that committed: for
// every path it leaves written, the keys of the stored document that are
// not the final document's are deleted and the final document's are set.
// A write of an IndexesPath document takes effect for the entry's own
// documents, and deletes the build markers of the indexes it removes (their
// entries are the builder's to drop). It refuses, identically on every node,
// an entry whose index writes would not fit in one Badger transaction.
func (f *fsm) indexEntry(txn *badger.Txn, w *entryWrites) (OpError, error) {
	final := make(map[string]*Document, len(w.keys))
	for i, k := range w.keys {
		final[k] = w.docs[i]
	}
	paths := w.written()
	x := &indexWrites{}
	declared := make(map[string]*projectIndexes)
	for _, path := range paths {
		pid, ok := indexesPID(path)
		if !ok {
			continue
		}
		old, err := getDoc(txn, path)
		if err != nil {
			return ErrCodeNone, err
		}
		before, after := parseProjectIndexes(old), parseProjectIndexes(final[path])
		for _, d := range before.defs {
			if !after.has(d.id) {
				x.addDel(ixBuildKey(pid, d.id))
				x.addDel(ixReadyKey(pid, d.id))
			}
		}
		declared[pid] = after
	}
	for _, path := range paths {
		pid, parent, coll, ok := userDoc(path)
		if !ok {
			continue
		}
		p := declared[pid]
		if p == nil {
			var err error
			if p, err = f.applyIndexes(txn, pid); err != nil {
				return ErrCodeNone, err
			}
		}
		before, read := w.stored[path]
		if !read {
			var err error
			if before, err = getDoc(txn, path); err != nil {
				return ErrCodeNone, err
			}
		}
		var oldData, newData json.RawMessage
		if before != nil {
			oldData = before.Data
		}
		if d := final[path]; d != nil {
			newData = d.Data
		}
		oldKeys := documentIndexKeys(p, pid, parent, coll, path, oldData)
		newKeys := documentIndexKeys(p, pid, parent, coll, path, newData)
		keep := make(map[string]bool, len(newKeys))
		for _, k := range newKeys {
			keep[string(k)] = true
		}
		had := make(map[string]bool, len(oldKeys))
		for _, k := range oldKeys {
			had[string(k)] = true
			if !keep[string(k)] {
				x.addDel(k)
			}
		}
		for _, k := range newKeys {
			if len(k) > maxIndexKeyBytes {
				return ErrCodeIndexEntryTooLarge, nil
			}
			if !had[string(k)] {
				x.addSet(k, path)
			}
		}
	}
	if x.size > 0 && (x.size+2*entryDocSize(w) > f.maxTxnBytes() || int64(len(x.del)+len(x.set)+3*len(paths)) > f.maxTxnCount()) {
		return ErrCodeTooLarge, nil
	}
	for pid, p := range declared {
		f.ixCache.set(pid, p)
	}
	if len(declared) > 0 {
		f.ixChanged = true // ApplyBatch wakes the builder after the commit
	}
	w.ix = x
	return ErrCodeNone, nil
}

// entryDocSize is Badger's estimate of one copy of the documents the entry
// leaves written (the tree and the change log each hold one).
func entryDocSize(w *entryWrites) int64 {
	return int64(finalSize(w)) + int64(len(w.keys))*(docHeaderLen+12+1)
}

// maxTxnBytes and maxTxnCount are what one entry's writes may take of a
// Badger transaction, with room for the applied index.
func (f *fsm) maxTxnBytes() int64 { return f.db.MaxBatchSize() * 95 / 100 }
func (f *fsm) maxTxnCount() int64 { return f.db.MaxBatchCount() * 95 / 100 }

// flushIndex writes an entry's index writes into txn.
func flushIndex(txn *badger.Txn, x *indexWrites) error {
	if x == nil {
		return nil
	}
	for _, k := range x.del {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	for i, k := range x.set {
		if err := txn.Set(k, x.vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// topMembers is the top-level members of a JSON object as encoding/json
// decodes it into a map (the last of a repeated name wins), found by one
// scan without decoding the values; ok is false when data is not a
// well-formed object this scan understands (the caller then decodes it).
func topMembers(data []byte) (m map[string]json.RawMessage, ok bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	m = make(map[string]json.RawMessage, 16)
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return m, skipWS(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		end, escaped := scanString(data, i)
		if end < 0 {
			return nil, false
		}
		var name string
		if escaped {
			if err := json.Unmarshal(data[i:end], &name); err != nil {
				return nil, false
			}
		} else {
			name = string(data[i+1 : end-1])
		}
		i = skipWS(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipWS(data, i+1)
		vend := scanValue(data, i)
		if vend < 0 {
			return nil, false
		}
		m[name] = json.RawMessage(data[i:vend])
		i = skipWS(data, vend)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return m, skipWS(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanString is the end (after the closing quote) of the string starting at
// b[i] == '"', and whether it holds an escape; -1 when unterminated or not
// valid UTF-8 (left to encoding/json, which replaces bad bytes).
func scanString(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			escaped = true
			j++
			if j >= len(b) {
				return -1, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex4(b[j+1:j+5]) {
					return -1, false
				}
				j += 4
			default:
				return -1, false
			}
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return -1, false
			}
			return j + 1, escaped
		case c < 0x20:
			return -1, false
		}
	}
	return -1, false
}

// scanValue is the end of the JSON value starting at b[i], or -1. Scalars
// other than strings are checked by json.Valid; nested values by their
// brackets and strings (the stored document is valid JSON: Apply checks
// every document it stores).
func scanValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := scanString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					if !json.Valid(b[i : j+1]) {
						return -1
					}
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		if j == i || !json.Valid(b[i:j]) {
			return -1
		}
		return j
	}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
