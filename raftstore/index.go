package raftstore

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/edgebase/edgebase/query"
)

// Index spaces of the tree database (see the package query for the key
// encodings).
const (
	// spaceIndex: 'i' + pid + 0 + id + 0 + [parent path + 0] + ix.Entry → stored path.
	spaceIndex = 'i'
	// spaceAuto: 'j' + parent path + 0 + field + 0 + value + path → stored path.
	spaceAuto = 'j'
)

// ErrCodeInvalidIndexes means a txn put content at IndexesPath that is not
// a valid {"indexes":[...]} definition (query.ParseIndexes).
const ErrCodeInvalidIndexes OpError = "invalid_indexes"

// IndexesPath is the system document holding project pid's declared
// indexes: {"indexes":[query.Index...]}.
func IndexesPath(pid string) string { return pid + "/_indexes" }

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

// Indexes lists project pid's declared indexes, in declared order, with
// their build state on this node.
func (s *Store) Indexes(pid string) ([]IndexState, error) {
	var out []IndexState
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		out, err = s.fsm.indexDefs(txn, pid)
		return err
	})
	return out, err
}

// indexDefs is project pid's declared indexes with their build state, read
// in txn.
func (f *fsm) indexDefs(txn *badger.Txn, pid string) ([]IndexState, error) {
	return nil, nil
}

// autoReady reports whether the automatic single-field indexes are
// complete (backfilled) in the state txn reads.
func autoReady(txn *badger.Txn) bool { return false }

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
