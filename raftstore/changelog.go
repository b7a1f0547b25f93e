package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The change log: every committed change, in revision order, written by
// Apply in the same Badger transaction as the tree, so it is exactly as
// durable and as replicated as the tree itself. Realtime subscribers resume
// from it with `since`. Each node compacts its own copy by age: the log is
// derived from the applied entries, so compaction needs no consensus.
//
// Key: spaceChange + revision (8 bytes) + sequence within the entry (4).
// Value (version 2): version(1) time(8, Unix nanos of the Txn) type(1)
// pathLen(4) path beforeLen(4) before and, for sets, the encoded document;
// before is the encoded Event.Before (beforeLen 0: none). Version 1, written
// by earlier binaries, has no beforeLen and before: its changes decode with
// a nil Before.

const spaceChange = 'c'

// keyLogFloor holds F: every change with a revision > F is in the log.
var keyLogFloor = []byte{spaceMeta, 'l', 'o', 'g', 'f', 'l', 'o', 'o', 'r'}

// ErrCompacted means a resume point is older than what the change log holds.
var ErrCompacted = errors.New("raftstore: the change log no longer holds that revision")

const (
	changeVersion1 byte = 1
	changeVersion  byte = 2
)

func changeKey(rev uint64, seq uint32) []byte {
	k := make([]byte, 13)
	k[0] = spaceChange
	binary.BigEndian.PutUint64(k[1:], rev)
	binary.BigEndian.PutUint32(k[9:], seq)
	return k
}

func encodeChange(ev Event, t int64) []byte {
	var doc, before []byte
	if ev.Doc != nil {
		doc = encodeDoc(ev.Doc)
	}
	if ev.Before != nil {
		before = encodeDoc(ev.Before)
	}
	b := make([]byte, 14, 18+len(ev.Path)+len(before)+len(doc))
	b[0] = changeVersion
	binary.BigEndian.PutUint64(b[1:], uint64(t))
	if ev.Type == EventDelete {
		b[9] = 1
	}
	binary.BigEndian.PutUint32(b[10:], uint32(len(ev.Path)))
	b = append(b, ev.Path...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(before)))
	b = append(b, before...)
	return append(b, doc...)
}

func decodeChange(rev uint64, b []byte) (Event, int64, error) {
	if len(b) < 14 || (b[0] != changeVersion && b[0] != changeVersion1) {
		return Event{}, 0, fmt.Errorf("decode change at %d: bad header", rev)
	}
	t := int64(binary.BigEndian.Uint64(b[1:]))
	n := int(binary.BigEndian.Uint32(b[10:]))
	if len(b) < 14+n {
		return Event{}, 0, fmt.Errorf("decode change at %d: short path", rev)
	}
	ev := Event{Revision: rev, Path: string(b[14 : 14+n]), Type: EventSet, Time: t}
	rest := b[14+n:]
	if b[0] == changeVersion {
		if len(rest) < 4 {
			return Event{}, 0, fmt.Errorf("decode change at %d: short before", rev)
		}
		m := int(binary.BigEndian.Uint32(rest))
		if len(rest) < 4+m {
			return Event{}, 0, fmt.Errorf("decode change at %d: short before", rev)
		}
		if m > 0 {
			before, err := decodeDoc(ev.Path, rest[4:4+m])
			if err != nil {
				return Event{}, 0, err
			}
			ev.Before = before
		}
		rest = rest[4+m:]
	}
	if b[9] == 1 {
		ev.Type = EventDelete
		return ev, t, nil
	}
	doc, err := decodeDoc(ev.Path, rest)
	if err != nil {
		return Event{}, 0, err
	}
	ev.Doc = doc
	return ev, t, nil
}

func readUint64(txn *badger.Txn, key []byte) (uint64, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("bad %q value", key)
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, true, err
}

func putUint64(txn *badger.Txn, key []byte, v uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return txn.Set(key, b[:])
}

// ensureLogFloor gives a database without a change log floor (a fresh one,
// one from before the change log, or a restored snapshot of such) the floor
// of its applied index: changes before it were never logged.
func ensureLogFloor(db *badger.DB) error {
	return db.Update(func(txn *badger.Txn) error {
		if _, ok, err := readUint64(txn, keyLogFloor); err != nil || ok {
			return err
		}
		applied, _, err := readUint64(txn, keyApplied)
		if err != nil {
			return err
		}
		return putUint64(txn, keyLogFloor, applied)
	})
}

// ChangesSince returns the changes with a revision above since, in order, at
// most about max of them and never splitting one revision's changes, and the
// revision the answer reaches: the caller has every change up to it. When the
// log no longer holds since+1 it returns ErrCompacted and the floor.
func (s *Store) ChangesSince(since uint64, max int) ([]Event, uint64, error) {
	if max < 1 {
		max = 1
	}
	var out []Event
	var upTo uint64
	err := s.fsm.view(func(txn *badger.Txn) error {
		floor, _, err := readUint64(txn, keyLogFloor)
		if err != nil {
			return err
		}
		applied, _, err := readUint64(txn, keyApplied)
		if err != nil {
			return err
		}
		if since < floor {
			upTo = floor
			return ErrCompacted
		}
		upTo = applied
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{spaceChange}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(changeKey(since+1, 0)); it.ValidForPrefix(opts.Prefix); it.Next() {
			k := it.Item().Key()
			rev := binary.BigEndian.Uint64(k[1:])
			if rev > applied {
				break
			}
			if len(out) >= max && rev != out[len(out)-1].Revision {
				upTo = out[len(out)-1].Revision
				break
			}
			var ev Event
			err := it.Item().Value(func(v []byte) error {
				var derr error
				ev, _, derr = decodeChange(rev, v)
				return derr
			})
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	return out, upTo, err
}

// LogFloor is the revision above which the change log is complete.
func (s *Store) LogFloor() (uint64, error) {
	var floor uint64
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		floor, _, err = readUint64(txn, keyLogFloor)
		return err
	})
	return floor, err
}

// SnapshotRead reads the document at path (and, with prefix, every document
// under it) in one read transaction. fn gets the revision that state is at
// and pages of at most pageSize documents (one empty page when there are
// none); it must not block for long, as the transaction stays open.
func (s *Store) SnapshotRead(path string, prefix bool, pageSize int, fn func(rev uint64, docs []*Document) error) (uint64, error) {
	if pageSize < 1 {
		pageSize = 1
	}
	db, release, err := s.fsm.pin()
	if err != nil {
		return 0, err
	}
	defer release()
	txn := db.NewTransaction(false)
	defer txn.Discard()
	rev, _, err := readUint64(txn, keyApplied)
	if err != nil {
		return 0, err
	}
	var page []*Document
	size := 0
	flush := func(force bool) error {
		if len(page) == 0 && !force {
			return nil
		}
		err := fn(rev, page)
		page, size = nil, 0
		return err
	}
	doc, err := getDoc(txn, path)
	if err != nil {
		return 0, err
	}
	sent := false
	if doc != nil {
		page = append(page, doc)
		size += len(doc.Data)
		if prefix && len(page) >= pageSize {
			if err := flush(false); err != nil {
				return 0, err
			}
			sent = true
		}
	}
	if prefix {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = docKey(path + "/")
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			key := it.Item().Key()
			var d *Document
			err := it.Item().Value(func(v []byte) error {
				var derr error
				d, derr = decodeDoc(string(key[1:]), v)
				return derr
			})
			if err != nil {
				return 0, err
			}
			page = append(page, d)
			size += len(d.Data)
			if len(page) >= pageSize || size >= maxListBytes {
				if err := flush(false); err != nil {
					return 0, err
				}
				sent = true
			}
		}
	}
	if err := flush(!sent); err != nil {
		return 0, err
	}
	return rev, nil
}

// compactChangeLog removes the changes committed before cutoff (by their
// transaction's time) and raises the floor past them. The floor is raised
// before the entries go, so a reader never finds a hole above the floor.
func (f *fsm) compactChangeLog(cutoff time.Time) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return 0, ErrClosed
	}
	var keys [][]byte
	var last uint64
	err := f.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{spaceChange}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			k := it.Item().KeyCopy(nil)
			rev := binary.BigEndian.Uint64(k[1:])
			var t int64
			err := it.Item().Value(func(v []byte) error {
				if len(v) < 9 {
					return fmt.Errorf("change at %d: bad header", rev)
				}
				t = int64(binary.BigEndian.Uint64(v[1:]))
				return nil
			})
			if err != nil {
				return err
			}
			// Stop at the first change young enough; never split a revision.
			if t >= cutoff.UnixNano() && rev != last {
				break
			}
			keys = append(keys, k)
			last = rev
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	if err := f.db.Update(func(txn *badger.Txn) error {
		cur, _, err := readUint64(txn, keyLogFloor)
		if err != nil || cur >= last {
			return err
		}
		return putUint64(txn, keyLogFloor, last)
	}); err != nil {
		return 0, fmt.Errorf("raise change log floor: %w", err)
	}
	wb := f.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return 0, fmt.Errorf("compact change log: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("compact change log: %w", err)
	}
	return len(keys), nil
}
