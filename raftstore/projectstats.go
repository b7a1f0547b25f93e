package raftstore

import (
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// ProjectStats sums up the user documents of one project: those below
// "<pid>/" whose first segment is not reserved (does not start with "_").
type ProjectStats struct {
	// Documents and Bytes (the documents' JSON) counted.
	Documents int
	Bytes     int64
	// LastRevision and LastWriteTime (Unix nanoseconds) are those of the
	// most recently written document still stored (0: none). A deletion
	// leaves nothing behind, so it is not seen.
	LastRevision  uint64
	LastWriteTime int64
	// Approximate is true when the scan stopped at its budget: the counts
	// are lower bounds.
	Approximate bool
	// AppliedIndex is the index of the state the stats were read from.
	AppliedIndex uint64
}

// maxStatsBytes bounds the document bytes one ProjectStats call goes
// through (the iterator holds each value in memory as it passes it).
const maxStatsBytes = 64 << 20

// ProjectStats scans the user documents of project pid in one read
// transaction of this node's applied state, reading at most budget
// documents (budget < 1: no bound) and about maxStatsBytes of them;
// reserved subtrees are skipped with one seek each. It decodes each
// document's fixed header, not its data.
func (s *Store) ProjectStats(pid string, budget int) (ProjectStats, error) {
	var st ProjectStats
	err := s.fsm.view(func(txn *badger.Txn) error {
		st = projectStats(txn, pid, budget, maxStatsBytes)
		var err error
		st.AppliedIndex, _, err = readUint64(txn, keyApplied)
		return err
	})
	if err != nil {
		return ProjectStats{}, fmt.Errorf("stats of project %q: %w", pid, err)
	}
	return st, nil
}

func projectStats(txn *badger.Txn, pid string, budget int, maxBytes int64) ProjectStats {
	var st ProjectStats
	prefix := docKey(pid + "/")
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.ValidForPrefix(prefix); {
		key := it.Item().Key()
		rest := key[len(prefix):]
		if len(rest) > 0 && rest[0] == '_' {
			// Reserved: skip the document and its whole subtree.
			seg := rest
			for i, c := range rest {
				if c == '/' {
					seg = rest[:i]
					break
				}
			}
			next := append(append(append([]byte{}, prefix...), seg...), '0')
			it.Seek(next)
			continue
		}
		if (budget > 0 && st.Documents == budget) || st.Bytes >= maxBytes {
			st.Approximate = true
			return st
		}
		item := it.Item()
		st.Documents++
		_ = item.Value(func(v []byte) error {
			if len(v) < docHeaderLen {
				return nil
			}
			st.Bytes += int64(len(v) - docHeaderLen)
			if rev := binary.BigEndian.Uint64(v[1:]); rev > st.LastRevision {
				st.LastRevision = rev
				st.LastWriteTime = int64(binary.BigEndian.Uint64(v[25:]))
			}
			return nil
		})
		it.Next()
	}
	return st
}
