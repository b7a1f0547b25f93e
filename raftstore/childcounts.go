package raftstore

import (
	"bytes"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// ChildCount is one direct child segment of a directory and the number of
// documents at or below it.
type ChildCount struct {
	Name  string
	Count int
}

// CountByChild counts the documents below parent (a full path) grouped by
// their first segment under parent, in key order, reading keys only. It
// reads at most budget keys (budget < 1: no bound): when the budget runs
// out, complete is false and the last group's count may be short. Groups
// come in key order ("a-b" before "a"), not sorted by name. It reads
// this node's applied state.
func (s *Store) CountByChild(parent string, budget int) (groups []ChildCount, complete bool, err error) {
	err = s.fsm.view(func(txn *badger.Txn) error {
		groups, complete = countByChild(txn, parent, budget)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("count below %q: %w", parent, err)
	}
	return groups, complete, nil
}

func countByChild(txn *badger.Txn, parent string, budget int) ([]ChildCount, bool) {
	prefix := docKey(parent + "/")
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	out := []ChildCount{}
	seen := map[string]int{}
	read := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if budget > 0 && read == budget {
			return out, false
		}
		read++
		rest := it.Item().Key()[len(prefix):]
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			rest = rest[:i]
		}
		if n := len(out); n > 0 && out[n-1].Name == string(rest) {
			out[n-1].Count++
			continue
		}
		// A document at "a" itself sorts before "a-b/..." and "a.b/...",
		// which sort before "a/...": a group may come back once.
		if j, ok := seen[string(rest)]; ok {
			out[j].Count++
			continue
		}
		seen[string(rest)] = len(out)
		out = append(out, ChildCount{Name: string(rest), Count: 1})
	}
	return out, true
}
