package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// ErrKeyNotFound is returned by LogStore.Get and LogStore.GetUint64 when the
// stable key does not exist. raft recognises a missing key only by the error
// text (err.Error() == "not found", as raft-boltdb's ErrKeyNotFound), so the
// message must stay exactly "not found" and the error must never be wrapped.
var ErrKeyNotFound = errors.New("not found")

// errLogStoreClosed is returned by every method after Close.
var errLogStoreClosed = errors.New("raftstore: log store is closed")

var (
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

// Key layout. Every key starts with a one-byte prefix so that the two kinds
// of data never interleave and each can be scanned on its own:
//
//	log entry:  'l' | index (8 bytes, big endian)   -> encodeLog(entry)
//	stable key: 's' | key bytes                     -> raw value
//
// Big-endian indexes make Badger's byte order equal to numeric order, so the
// first and last entries are the first and last keys under prefixLog.
const (
	prefixLog    byte = 'l'
	prefixStable byte = 's'

	logKeyLen = 1 + 8
)

// logEncodingV1 is the first byte of every encoded log entry.
const logEncodingV1 byte = 1

// deleteChunk is how many keys DeleteRange collects from its read iterator
// before deleting them, bounding memory for very large ranges.
const deleteChunk = 4096

// logStore is a raft.LogStore and raft.StableStore backed by Badger v4.
//
// Every write is synced to disk before it returns (Badger SyncWrites), so an
// entry acknowledged to raft survives kill -9 and power loss.
//
// It is safe for concurrent use. Writes (StoreLog(s), DeleteRange, Set*) are
// serialised; reads run concurrently with each other and with writes.
type logStore struct {
	db *badger.DB

	// closeMu guards closed: every operation holds it for reading, Close holds
	// it for writing, so the DB is never closed under a running operation.
	closeMu sync.RWMutex
	closed  bool

	// writeMu serialises log writes so the cached bounds follow the data.
	writeMu sync.Mutex

	// boundsMu guards the cached first/last log index. Lock order: writeMu
	// before boundsMu.
	boundsMu    sync.Mutex
	boundsValid bool // false: reload from disk before use
	hasLogs     bool
	first, last uint64
}

// openLogStore opens (creating if needed) a Badger-backed raft log and
// stable store in dir. Badger's own logging is forwarded to logger (errors
// and warnings only); a nil logger means slog.Default().
func openLogStore(dir string, logger *slog.Logger) (*logStore, error) {
	if logger == nil {
		logger = slog.Default()
	}
	// Badger's defaults are sized for a general-purpose KV store (5 x 64 MiB
	// memtables, 256 MiB block cache). A raft log is a small, append-mostly
	// window of recent entries that raft reads back mostly while they are
	// still in the memtable (followers catching up, replay at start-up), and
	// is truncated after every snapshot, so that memory would be wasted:
	//   - 16 MiB memtables, at most 2 of them (~32 MiB worst case). This also
	//     caps one Badger transaction at ~2.4 MiB (15% of MemTableSize);
	//     bigger batches are split by StoreLogs/DeleteRange.
	//   - 16 MiB block cache (needed because blocks are compressed): enough
	//     for the point lookups and short scans raft does on entries that
	//     were already flushed to SSTables.
	//   - 2 compactors instead of 4: the write rate is bounded by raft.
	//   - 64 MiB value-log files instead of 1 GiB: only entries above 1 MiB
	//     leave the LSM tree for the value log, so it stays small. This also
	//     caps a single entry at 64 MiB, far above any sane raft command.
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(badgerLogger{logger: logger.With("component", "badger")}).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(16 << 20).
		WithNumCompactors(2).
		WithValueLogFileSize(64 << 20).
		WithMetricsEnabled(false).
		// Writers are serialised by LogStore and never read-modify-write
		// across transactions, so Badger's conflict tracking is pure overhead.
		WithDetectConflicts(false)

	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open badger log store at %q: %w", dir, err)
	}
	s := &logStore{db: db}
	if err := s.reloadBounds(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftstore: open badger log store at %q: %w", dir, err)
	}
	return s, nil
}

// Close closes the underlying Badger database. It waits for in-flight
// operations; later calls return an error. Closing twice is a no-op.
func (s *logStore) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("raftstore: close badger log store: %w", err)
	}
	return nil
}

// acquire takes the read side of closeMu, failing if the store is closed.
// The caller must call s.closeMu.RUnlock when it succeeds.
func (s *logStore) acquire() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return errLogStoreClosed
	}
	return nil
}

// FirstIndex returns the first index written, or 0 if there are no entries.
func (s *logStore) FirstIndex() (uint64, error) {
	first, _, err := s.bounds()
	return first, err
}

// LastIndex returns the last index written, or 0 if there are no entries.
func (s *logStore) LastIndex() (uint64, error) {
	_, last, err := s.bounds()
	return last, err
}

// bounds returns the cached first and last index, reloading them from disk
// if a failed write left the cache invalid.
func (s *logStore) bounds() (first, last uint64, err error) {
	if err := s.acquire(); err != nil {
		return 0, 0, err
	}
	defer s.closeMu.RUnlock()

	s.boundsMu.Lock()
	if s.boundsValid {
		first, last = s.first, s.last
		s.boundsMu.Unlock()
		return first, last, nil
	}
	s.boundsMu.Unlock()

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.reloadBounds(); err != nil {
		return 0, 0, err
	}
	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	return s.first, s.last, nil
}

// reloadBounds recomputes the cached bounds from disk. The caller holds
// writeMu (or has exclusive access, as in OpenLogStore).
func (s *logStore) reloadBounds() error {
	first, okFirst, err := s.seekLog(0, false)
	if err != nil {
		return fmt.Errorf("read first log index: %w", err)
	}
	last, okLast, err := s.seekLog(math.MaxUint64, true)
	if err != nil {
		return fmt.Errorf("read last log index: %w", err)
	}
	if okFirst != okLast {
		return fmt.Errorf("read log bounds: inconsistent scan (first found=%v, last found=%v)", okFirst, okLast)
	}
	s.setBounds(okFirst, first, last)
	return nil
}

func (s *logStore) setBounds(hasLogs bool, first, last uint64) {
	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	s.boundsValid = true
	s.hasLogs = hasLogs
	if !hasLogs {
		first, last = 0, 0
	}
	s.first, s.last = first, last
}

func (s *logStore) invalidateBounds() {
	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	s.boundsValid = false
}

// seekLog returns the index of the first log entry >= from (or, if reverse,
// the last entry <= from), using a key-only iterator. Seeking straight to
// the boundary skips any tombstones left in front of it by DeleteRange.
func (s *logStore) seekLog(from uint64, reverse bool) (index uint64, found bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{
			PrefetchValues: false,
			Reverse:        reverse,
			Prefix:         []byte{prefixLog},
		})
		defer it.Close()
		it.Seek(logKey(from))
		if !it.Valid() {
			return nil
		}
		idx, err := parseLogKey(it.Item().Key())
		if err != nil {
			return err
		}
		index, found = idx, true
		return nil
	})
	return index, found, err
}

// GetLog reads the entry at index into log. A missing entry yields
// raft.ErrLogNotFound (unwrapped: raft compares it with ==).
func (s *logStore) GetLog(index uint64, log *raft.Log) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(index))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftstore: get log %d: %w", index, err)
	}
	if err := decodeLog(val, log); err != nil {
		return fmt.Errorf("raftstore: get log %d: %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("raftstore: get log %d: stored entry has index %d", index, log.Index)
	}
	return nil
}

// StoreLog stores a single log entry.
func (s *logStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores the entries in one synced Badger transaction. If the
// batch exceeds Badger's transaction limit it is committed as several
// consecutive synced transactions, in slice order; a crash in between
// therefore leaves a prefix of the batch, which raft handles like a
// follower that received fewer entries. The call only returns nil once
// every entry is durable.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, l := range logs {
		if l == nil {
			return fmt.Errorf("raftstore: store logs: entry %d is nil", i)
		}
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	err := s.update(len(logs), func(txn *badger.Txn, i int) error {
		return txn.Set(logKey(logs[i].Index), encodeLog(logs[i]))
	})
	if err != nil {
		s.invalidateBounds()
		return fmt.Errorf("raftstore: store %d logs [%d..%d]: %w",
			len(logs), logs[0].Index, logs[len(logs)-1].Index, err)
	}

	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	if !s.boundsValid {
		return nil // reloaded lazily by the next FirstIndex/LastIndex
	}
	for _, l := range logs {
		if !s.hasLogs {
			s.hasLogs, s.first, s.last = true, l.Index, l.Index
			continue
		}
		s.first = min(s.first, l.Index)
		s.last = max(s.last, l.Index)
	}
	return nil
}

// DeleteRange deletes the entries with index in [lo, hi], inclusive. Only
// keys that exist are deleted: they are read with a key-only iterator and
// removed in synced transactions of bounded size.
func (s *logStore) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	if err := s.deleteRange(lo, hi); err != nil {
		s.invalidateBounds()
		return fmt.Errorf("raftstore: delete logs [%d..%d]: %w", lo, hi, err)
	}
	if err := s.adjustBoundsAfterDelete(lo, hi); err != nil {
		s.invalidateBounds()
		return fmt.Errorf("raftstore: delete logs [%d..%d]: %w", lo, hi, err)
	}
	return nil
}

func (s *logStore) deleteRange(lo, hi uint64) error {
	keys := make([][]byte, 0, deleteChunk)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := s.update(len(keys), func(txn *badger.Txn, i int) error {
			return txn.Delete(keys[i])
		})
		keys = keys[:0]
		return err
	}

	start := logKey(lo)
	for {
		// Each round is a fresh read transaction so that deletes committed in
		// the previous round are not held back by an open snapshot.
		more := false
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{
				PrefetchValues: false,
				Prefix:         []byte{prefixLog},
			})
			defer it.Close()
			for it.Seek(start); it.Valid(); it.Next() {
				idx, err := parseLogKey(it.Item().Key())
				if err != nil {
					return err
				}
				if idx > hi {
					return nil
				}
				if len(keys) == deleteChunk {
					start = logKey(idx)
					more = true
					return nil
				}
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("scan keys: %w", err)
		}
		if err := flush(); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// adjustBoundsAfterDelete updates the cached bounds after [lo, hi] (lo <= hi)
// was deleted. The caller holds writeMu.
func (s *logStore) adjustBoundsAfterDelete(lo, hi uint64) error {
	s.boundsMu.Lock()
	valid, has, first, last := s.boundsValid, s.hasLogs, s.first, s.last
	s.boundsMu.Unlock()

	switch {
	case !valid:
		return s.reloadBounds()
	case !has || hi < first || lo > last:
		return nil // nothing of ours was in range
	case lo <= first && hi >= last:
		s.setBounds(false, 0, 0)
		return nil
	case lo <= first: // head removed; hi < last so hi+1 cannot overflow
		next, ok, err := s.seekLog(hi+1, false)
		if err != nil {
			return fmt.Errorf("read first log index: %w", err)
		}
		if !ok {
			return fmt.Errorf("read first log index: no entry after %d although last is %d", hi, last)
		}
		s.setBounds(true, next, last)
		return nil
	case hi >= last: // tail removed; lo > first so lo-1 cannot underflow
		prev, ok, err := s.seekLog(lo-1, true)
		if err != nil {
			return fmt.Errorf("read last log index: %w", err)
		}
		if !ok {
			return fmt.Errorf("read last log index: no entry before %d although first is %d", lo, first)
		}
		s.setBounds(true, first, prev)
		return nil
	default:
		return nil // a hole in the middle leaves the bounds unchanged
	}
}

// Set stores a stable key.
func (s *logStore) Set(key, val []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(stableKey(key), val)
	})
	if err != nil {
		return fmt.Errorf("raftstore: set stable key %q: %w", key, err)
	}
	return nil
}

// Get returns the value of a stable key, or ErrKeyNotFound (unwrapped) if it
// does not exist.
func (s *logStore) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()

	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(stableKey(key))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: get stable key %q: %w", key, err)
	}
	return val, nil
}

// SetUint64 stores val under key as 8 big-endian bytes.
func (s *logStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the uint64 stored under key. A missing key yields 0 and
// ErrKeyNotFound, as raft-boltdb does.
func (s *logStore) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("raftstore: get uint64 stable key %q: value is %d bytes, want 8", key, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// update applies n operations through apply in a read-write transaction,
// starting a new transaction whenever Badger reports ErrTxnTooBig. Every
// transaction is committed (and, with SyncWrites, synced) before the next
// one starts.
func (s *logStore) update(n int, apply func(txn *badger.Txn, i int) error) error {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for i := 0; i < n; i++ {
		err := apply(txn, i)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("commit partial batch: %w", err)
			}
			txn = s.db.NewTransaction(true)
			err = apply(txn, i)
		}
		if err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func logKey(index uint64) []byte {
	k := make([]byte, logKeyLen)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func parseLogKey(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != prefixLog {
		return 0, fmt.Errorf("malformed log key %x", k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func stableKey(key []byte) []byte {
	k := make([]byte, 0, 1+len(key))
	return append(append(k, prefixStable), key...)
}

// Log entry encoding, version 1. All integers are unsigned LEB128 varints
// (encoding/binary Uvarint) unless noted:
//
//	version     1 byte, = logEncodingV1
//	index       uvarint
//	term        uvarint
//	type        1 byte (raft.LogType)
//	len(data)   uvarint, then data
//	len(ext)    uvarint, then extensions
//	flags       1 byte; bit 0: AppendedAt is set (non-zero); others must be 0
//	appendedAt  only if flag bit 0: seconds since the Unix epoch (signed
//	            zig-zag varint), then nanoseconds within the second (uvarint,
//	            < 1e9)
//
// Empty Data/Extensions decode as nil; AppendedAt decodes in time.Local
// without a monotonic reading (compare it with time.Time.Equal).
const flagAppendedAt byte = 1 << 0

func encodeLog(l *raft.Log) []byte {
	n := 1 + 3*binary.MaxVarintLen64 + 1 + 2*binary.MaxVarintLen64 + len(l.Data) + len(l.Extensions) + 1 + 2*binary.MaxVarintLen64
	b := make([]byte, 0, n)
	b = append(b, logEncodingV1)
	b = binary.AppendUvarint(b, l.Index)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	if l.AppendedAt.IsZero() {
		return append(b, 0)
	}
	b = append(b, flagAppendedAt)
	b = binary.AppendVarint(b, l.AppendedAt.Unix())
	return binary.AppendUvarint(b, uint64(l.AppendedAt.Nanosecond()))
}

// decodeLog decodes b into l. Data and Extensions alias b, which must not be
// modified afterwards.
func decodeLog(b []byte, l *raft.Log) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != logEncodingV1 {
		return fmt.Errorf("decode log entry: unknown encoding version %d", v)
	}
	out := raft.Log{
		Index: d.uvarint(),
		Term:  d.uvarint(),
		Type:  raft.LogType(d.byte()),
	}
	out.Data = d.bytes()
	out.Extensions = d.bytes()
	flags := d.byte()
	if d.err == nil && flags&^flagAppendedAt != 0 {
		return fmt.Errorf("decode log entry: unknown flags %#x", flags)
	}
	if flags&flagAppendedAt != 0 {
		sec := d.varint()
		nsec := d.uvarint()
		if d.err == nil && nsec >= 1e9 {
			return fmt.Errorf("decode log entry: appendedAt nanoseconds %d out of range", nsec)
		}
		out.AppendedAt = time.Unix(sec, int64(nsec))
	}
	if d.err != nil {
		return fmt.Errorf("decode log entry: %w", d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("decode log entry: %d trailing bytes", len(d.b))
	}
	*l = out
	return nil
}

var errTruncated = errors.New("truncated")

// decoder reads from b; after the first failure every read returns a zero
// value and err stays set.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = errTruncated
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad uvarint (%d)", n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad varint (%d)", n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errTruncated
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// badgerLogger forwards Badger's errors and warnings to slog and drops its
// (chatty) info and debug messages.
type badgerLogger struct {
	logger *slog.Logger
}

func (l badgerLogger) Errorf(format string, args ...any) {
	l.logger.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l badgerLogger) Warningf(format string, args ...any) {
	l.logger.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (badgerLogger) Infof(string, ...any) {}

func (badgerLogger) Debugf(string, ...any) {}
