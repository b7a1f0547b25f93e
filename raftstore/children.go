package raftstore

import (
	"bytes"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Child is one direct child segment of a path: a document, the parent of
// deeper documents, or both.
type Child struct {
	// Name is the segment (no "/").
	Name string
	// Document: a document exists at parent/Name.
	Document bool
	// Children: some document exists below parent/Name.
	Children bool
}

// Children returns up to limit direct child segments of parent (a full
// path, e.g. "pid" or "pid/users") whose name sorts after `after`, in
// byte order of their names, and the name to continue after ("" when there
// are no more). A segment is listed when a document exists at it or below
// it; segments starting with "_" (reserved system state) never are. Keys
// only are read, and each child's subtree is skipped with a seek, so the
// cost is in children, not in descendants. It reads this node's applied
// state.
func (s *Store) Children(parent, after string, limit int) ([]Child, string, error) {
	var out []Child
	var next string
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		out, next, err = listChildSegments(txn, parent, after, limit, nil)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("children of %q: %w", parent, err)
	}
	return out, next, nil
}

// childScan counts the iterator positionings (seeks and steps) of one
// listing, so tests can bound its cost without timing it.
type childScan struct{ steps int }

func (c *childScan) step() {
	if c != nil {
		c.steps++
	}
}

// listChildSegments implements Children inside txn.
//
// Keys are "t" + parent + "/" + rest; a child name n owns the key n (its
// document) and the keys n/... (its subtree). In key order a child's keys
// are not always together: a sibling whose name extends n with a byte
// below '/' (' ', '!', '-', '.', ...: "a-b" for "a") sorts between "a" and
// "a/...". So names are emitted in byte order this way: walking the keys
// from after on, a name at or before the last one emitted was already
// listed (its subtree is skipped); before emitting a new name n, every
// proper prefix m of n followed in n by a byte below '/' that sorts after
// the last name emitted is a child holding only a subtree (its document
// would have been met before n) when m/ has keys: it is emitted first. A
// listing of k children thus costs O(k) seeks, plus one per such prefix.
func listChildSegments(txn *badger.Txn, parent, after string, limit int, scan *childScan) ([]Child, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("children of %q: limit must be positive, got %d", parent, limit)
	}
	prefix := docKey(parent + "/")
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	// probe answers whether a subtree has any key (a read-only txn may
	// hold several iterators).
	probe := txn.NewIterator(opts)
	defer probe.Close()
	hasSubtree := func(name []byte) bool {
		p := make([]byte, 0, len(prefix)+len(name)+1)
		p = append(append(append(p, prefix...), name...), '/')
		scan.step()
		probe.Seek(p)
		return probe.ValidForPrefix(p)
	}
	seekPast := func(name []byte, last byte) {
		k := make([]byte, 0, len(prefix)+len(name)+1)
		k = append(append(append(k, prefix...), name...), last)
		scan.step()
		it.Seek(k)
	}

	last := after // every name up to it has been listed
	var out []Child
	full := false
	emit := func(c Child) bool {
		if len(out) == limit {
			full = true
			return false
		}
		out = append(out, c)
		last = c.Name
		return true
	}

	scan.step()
	it.Seek(append(append([]byte{}, prefix...), after...))
	for it.ValidForPrefix(prefix) {
		rest := it.Item().Key()[len(prefix):]
		slash := bytes.IndexByte(rest, '/')
		name := rest
		if slash >= 0 {
			name = rest[:slash]
		}
		switch {
		case len(name) == 0:
			// An empty segment (no valid path has one): skip every key
			// starting with "/" ('0' follows '/').
			seekPast(nil, '0')
			continue
		case name[0] == '_':
			// Reserved: skip every name starting with "_" ('`' follows '_').
			seekPast(nil, '`')
			continue
		case string(name) <= last:
			if slash >= 0 {
				seekPast(name, '0') // "n0" is the first key after every "n/..."
			} else {
				scan.step()
				it.Next()
			}
			continue
		}
		name = bytes.Clone(name)
		for i := 1; i < len(name); i++ {
			if name[i] >= '/' {
				continue
			}
			if m := string(name[:i]); m > last && hasSubtree(name[:i]) {
				if !emit(Child{Name: m, Children: true}) {
					break
				}
			}
		}
		if full {
			break
		}
		c := Child{Name: string(name), Document: slash < 0, Children: slash >= 0}
		if !c.Children {
			c.Children = hasSubtree(name)
		}
		if !emit(c) {
			break
		}
		if slash >= 0 {
			seekPast(name, '0')
		} else {
			scan.step()
			it.Next()
		}
	}
	if full {
		return out, last, nil
	}
	return out, "", nil
}
