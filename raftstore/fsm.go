package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// fsm applies committed entries to the tree database. It is a thin adapter:
// decoding, the per-entry overlay and batching live here, the semantics of
// each op live in applyTxn.
//
// Lock order: fsm.mu (RW; writers only swap the database on Restore) before
// anything inside Badger. Apply, reads and snapshot Persist hold it shared.
type fsm struct {
	logger *slog.Logger
	base   string // directory holding tree-N/ databases and CURRENT

	mu  sync.RWMutex
	db  *badger.DB
	gen int // N of the tree-N directory in use

	applied *indexWaiter
	// appliedTerm is the term of the entry at the applied index (0:
	// unknown), kept in the tree with it (keyAppliedTerm).
	appliedTerm atomic.Uint64
	feed        *Feed
	// decider judges txns with a caller (nil: such txns are refused).
	decider Decider
	// guard is held shared by long read transactions (SnapshotRead) on db
	// and exclusively by whoever closes db, so a database is never closed
	// under an open transaction. Restore swaps it along with db.
	guard *sync.RWMutex

	// ixCache holds the parsed index declarations per project (index.go).
	ixCache indexCache
	// buildMu is held by ApplyBatch and by each chunk of the index builder,
	// so a chunk reads current documents and Apply never interleaves.
	buildMu sync.Mutex
	builder *indexBuilder
	// ixChanged says the batch being applied wrote a declaration: the
	// builder is woken once it is committed (guarded by buildMu).
	ixChanged bool
}

// currentFile names the tree generation in use; rewritten atomically on Restore.
const currentFile = "CURRENT"

func openFSM(base string, logger *slog.Logger, feed *Feed) (*fsm, error) {
	if err := os.MkdirAll(base, 0o750); err != nil {
		return nil, fmt.Errorf("create tree dir: %w", err)
	}
	gen := 0
	if b, err := os.ReadFile(filepath.Join(base, currentFile)); err == nil {
		gen, err = strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", currentFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", currentFile, err)
	}
	// Remove generations left behind by a restore that crashed half way.
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("list tree dir: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "tree-") && e.Name() != treeDirName(gen) {
			if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
				return nil, fmt.Errorf("remove stale %s: %w", e.Name(), err)
			}
		}
	}
	db, err := openTreeDB(filepath.Join(base, treeDirName(gen)), logger, false)
	if err != nil {
		return nil, err
	}
	if err := ensureLogFloor(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("change log floor: %w", err)
	}
	f := &fsm{logger: logger, base: base, db: db, gen: gen, applied: newIndexWaiter(), feed: feed, guard: &sync.RWMutex{}}
	idx, term, err := readAppliedEntry(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	f.applied.set(idx)
	f.appliedTerm.Store(term)
	if err := markEmptyTreeIndexed(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	f.builder = startIndexBuilder(f)
	return f, nil
}

func treeDirName(gen int) string { return "tree-" + strconv.Itoa(gen) }

// openTreeDB opens a tree database. syncWrites makes every commit fsync; the
// live tree (the FSM's) runs without it, like etcd's backend behind its WAL:
//
//   - Every entry it applies was fsynced to the Raft log before it was
//     committed, so before any client was told about it.
//   - A kill -9 loses nothing either way: Badger's commits are in the page
//     cache (its WAL is a mapped file) when Apply returns.
//   - A power loss may cut the tree back to an earlier applied index. Badger
//     replays its WAL up to the first incomplete transaction, and the applied
//     index is written in the same transaction as the entries' writes, so the
//     tree is then the state at that earlier index, never a mix. At start,
//     raft sets its last applied index to the newest snapshot's and applies
//     every committed entry after it again; the FSM skips those at or below
//     the tree's applied index, and a tree behind the newest snapshot
//     restores that snapshot first (catchUpToSnapshot). The Raft log keeps
//     every entry after the newest snapshot, so the tree is rebuilt up to
//     the last committed entry. Values of 1 MiB and more live in Badger's
//     value log, outside the WAL: a batch that wrote a document of
//     largeValue or more is synced (syncIfLarge).
//
// Taking the tree's fsync off the path of every write halves the syncs a
// write waits for (docs/benchmarks.md, issue 7). Whoever writes a tree that
// the Raft log does not back (a snapshot install, an offline restore) syncs
// it explicitly or opens it with syncWrites.
func openTreeDB(dir string, logger *slog.Logger, syncWrites bool) (*badger.DB, error) {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(syncWrites).
		WithLogger(badgerSlog{logger.With("component", "badger-tree")}).
		// 64 MiB memtables make one transaction hold ~9 MiB, which bounds the
		// largest entry we accept (maxEntrySize) with room to spare.
		WithMemTableSize(64 << 20).
		WithNumVersionsToKeep(1)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open tree db %s: %w", dir, err)
	}
	return db, nil
}

// readAppliedEntry returns the applied index and the term of its entry (0:
// unknown).
func readAppliedEntry(db *badger.DB) (index, term uint64, err error) {
	if index, err = readApplied(db); err != nil {
		return 0, 0, err
	}
	err = db.View(func(txn *badger.Txn) error {
		term, _, err = readUint64(txn, keyAppliedTerm)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read applied term: %w", err)
	}
	return index, term, nil
}

func readApplied(db *badger.DB) (uint64, error) {
	var idx uint64
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyApplied)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("applied index has %d bytes", len(v))
			}
			idx = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("read applied index: %w", err)
	}
	return idx, nil
}

func (f *fsm) close() error {
	f.builder.stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	f.guard.Lock()
	err := f.db.Close()
	f.guard.Unlock()
	f.db = nil
	if err != nil {
		return fmt.Errorf("close tree db: %w", err)
	}
	return nil
}

// Apply implements raft.FSM for the rare unbatched path.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// entryWrites is what one entry wrote, kept so a batch can be replayed into a
// fresh transaction when Badger says the current one is full.
type entryWrites struct {
	index  uint64
	term   uint64
	time   int64        // the Txn's time, for change log compaction
	keys   []string     // full paths in write order
	docs   []*Document  // nil means delete
	events []Event      // the final change of each path, in write order
	ix     *indexWrites // the index keys it deletes and sets
	// stored holds the committed documents the entry read (nil: absent),
	// for its index writes; nil when not recorded.
	stored map[string]*Document
}

// ApplyBatch implements raft.BatchingFSM: one Badger transaction for the
// whole batch (not fsynced: the Raft log was, see openTreeDB), with the last
// applied index and its entry's term in the same transaction so that replays
// after a restart are skipped exactly, and checked (checkTerm).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.buildMu.Lock()
	defer f.buildMu.Unlock()

	results := make([]any, len(logs))
	last, lastTerm := f.applied.get(), f.appliedTerm.Load()
	txn := f.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var pending []*entryWrites
	var events []Event
	newLast, newTerm := last, lastTerm

	for i, l := range logs {
		f.checkTerm(l, newLast, newTerm)
		if l.Index <= last {
			// Already in our persistent state: raft replays its log after a restart.
			results[i] = &TxnResult{Revision: l.Index}
			continue
		}
		var w *entryWrites
		for attempt := 0; ; attempt++ {
			var res any
			res, w = f.applyEntry(txn, l)
			err := flushEntry(txn, w)
			if err == nil {
				results[i] = res
				break
			}
			if !errors.Is(err, badger.ErrTxnTooBig) || attempt > 0 {
				f.fatal("apply entry", l.Index, err)
			}
			// Commit what the earlier entries of this batch wrote, then retry
			// this entry alone in a fresh transaction. The entry is evaluated
			// again from the same committed state, so its result is the same.
			txn.Discard()
			txn = f.db.NewTransaction(true)
			for _, pw := range pending {
				if err := flushEntry(txn, pw); err != nil {
					f.fatal("replay batch", pw.index, err)
				}
			}
			if err := txn.Commit(); err != nil {
				f.fatal("commit partial batch", l.Index, err)
			}
			f.syncIfLarge(pending, l.Index)
			pending = pending[:0]
			txn = f.db.NewTransaction(true)
		}
		pending = append(pending, w)
		events = append(events, w.events...)
		newLast, newTerm = l.Index, l.Term
	}
	if newLast > last {
		if err := txn.Commit(); err != nil {
			f.fatal("commit batch", newLast, err)
		}
		f.syncIfLarge(pending, newLast)
		f.appliedTerm.Store(newTerm)
		f.applied.set(newLast)
		if f.ixChanged {
			f.ixChanged = false
			f.wakeBuilder()
		}
		if len(events) > 0 {
			f.feed.publish(Batch{Revision: newLast, Events: events})
		}
	}
	return results
}

// largeValue is a conservative bound below Badger's value threshold (1 MiB):
// a document (or its change record) this large may be stored in Badger's
// value log, outside the WAL whose replay keeps an unsynced tree a
// consistent prefix (openTreeDB). A batch that wrote one is synced, as every
// batch was before the tree stopped syncing its commits.
const largeValue = 512 << 10

func (f *fsm) syncIfLarge(entries []*entryWrites, index uint64) {
	for _, w := range entries {
		for _, d := range w.docs {
			if d != nil && len(d.Data) >= largeValue {
				if err := f.db.Sync(); err != nil {
					f.fatal("sync batch with a large document", index, err)
				}
				return
			}
		}
	}
}

// errDiverged reports an entry that cannot belong to the log this tree was
// applied from: this replica has diverged from the cluster.
var errDiverged = errors.New("the entry contradicts the applied state: this replica diverged")

// checkTerm stops the node on an entry that contradicts what the tree
// applied: terms never decrease along a Raft log, so an entry at or below
// the applied index must have a term no newer than the applied entry's, the
// same term at that very index, and an entry after it a term no older.
// Raft replays entries at or below the applied index after a restart, and
// the FSM skips them; without this check a replica handed other entries at
// those indexes (a log that diverged) would skip them silently. lastTerm 0
// (a tree from before the term was kept) checks nothing.
func (f *fsm) checkTerm(l *raft.Log, applied, lastTerm uint64) {
	if lastTerm == 0 {
		return
	}
	var bad bool
	switch {
	case l.Index < applied:
		bad = l.Term > lastTerm
	case l.Index == applied:
		bad = l.Term != lastTerm
	default:
		bad = l.Term < lastTerm
	}
	if bad {
		f.fatal("check entry against the applied state", l.Index,
			fmt.Errorf("%w: entry %d has term %d, the applied entry %d has term %d", errDiverged, l.Index, l.Term, applied, lastTerm))
	}
}

// fatal stops the node: applying must not diverge from the other replicas, so
// an entry we cannot apply is not skipped.
func (f *fsm) fatal(what string, index uint64, err error) {
	f.logger.Error("fsm cannot apply committed entry; stopping", "op", what, "index", index, "err", err)
	panic(fmt.Sprintf("edgebase fsm: %s at index %d: %v", what, index, err))
}

// applyEntry evaluates one log entry against txn without writing to it.
func (f *fsm) applyEntry(txn *badger.Txn, l *raft.Log) (any, *entryWrites) {
	w := &entryWrites{index: l.Index, term: l.Term}
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil, w
	}
	switch commandType(l.Data[0]) {
	case cmdNoop:
		return &TxnResult{Revision: l.Index}, w
	case cmdTxn:
		t, err := decodeTxn(l.Data)
		if err != nil {
			f.fatal("decode command", l.Index, err)
		}
		w.stored = make(map[string]*Document, len(t.Ops))
		ov := &overlay{txn: txn, w: w}
		res := applyTxn(ov, l.Index, t, f.decider)
		if !res.OK() {
			// Nothing of a refused transaction is written.
			w.keys, w.docs, w.events = nil, nil, nil
			return res, w
		}
		w.time = t.Time
		w.events = finalEvents(w)
		for i := range w.events {
			ev := &w.events[i]
			ev.Time = w.time
			if keepsBefore(ev.Path) {
				ev.Before = ov.committed(ev.Path)
			}
		}
		code, err := f.indexEntry(txn, w)
		if err != nil {
			f.fatal("index entry", l.Index, err)
		}
		if code != ErrCodeNone {
			w.keys, w.docs, w.events = nil, nil, nil
			return &TxnResult{Revision: l.Index, Err: code, Index: max(len(t.Ops)-1, 0), OpFailed: true}, w
		}
		return res, w
	default:
		f.fatal("decode command", l.Index, fmt.Errorf("%w: type %d", errUnknownCommand, l.Data[0]))
		return nil, w
	}
}

// finalEvents keeps one change per path, the last, so an entry that writes a
// document twice reports (and logs) it once, as it is committed.
func finalEvents(w *entryWrites) []Event {
	last := make(map[string]int, len(w.events))
	for i, ev := range w.events {
		last[ev.Path] = i
	}
	out := make([]Event, 0, len(last))
	for i, ev := range w.events {
		if last[ev.Path] == i {
			out = append(out, ev)
		}
	}
	return out
}

// flushEntry writes the final state of each path the entry touched (an entry
// that rewrites a large document several times writes it once), and its
// changes to the change log.
func flushEntry(txn *badger.Txn, w *entryWrites) error {
	for i, ev := range w.events {
		if err := txn.Set(changeKey(w.index, uint32(i)), encodeChange(ev, w.time)); err != nil {
			return err
		}
	}
	last := make(map[string]int, len(w.keys))
	for i, k := range w.keys {
		last[k] = i
	}
	for i, k := range w.keys {
		if last[k] != i {
			continue
		}
		var err error
		if d := w.docs[i]; d != nil {
			err = txn.Set(docKey(k), encodeDoc(d))
		} else {
			err = txn.Delete(docKey(k))
		}
		if err != nil {
			return err
		}
	}
	if err := flushIndex(txn, w.ix); err != nil {
		return err
	}
	var idx, term [8]byte
	binary.BigEndian.PutUint64(idx[:], w.index)
	binary.BigEndian.PutUint64(term[:], w.term)
	if err := txn.Set(keyApplied, idx[:]); err != nil {
		return err
	}
	return txn.Set(keyAppliedTerm, term[:])
}

// overlay gives one entry a private view: reads see the entry's own earlier
// writes, writes are only recorded, so a failing op leaves no trace. reads,
// when set, records the revision (0: absent) of every stored document read
// from txn, for a proposer deciding a txn ahead of its commit (Store.Txn).
type overlay struct {
	txn   *badger.Txn
	w     *entryWrites
	reads map[string]uint64
}

func (o *overlay) get(path string) (*Document, error) {
	for i := len(o.w.keys) - 1; i >= 0; i-- {
		if o.w.keys[i] == path {
			return o.w.docs[i], nil
		}
	}
	d, err := getDoc(o.txn, path)
	if err == nil {
		o.record(path, d)
		if o.w.stored != nil {
			o.w.stored[path] = d
		}
	}
	return d, err
}

func (o *overlay) record(path string, d *Document) {
	if o.reads == nil {
		return
	}
	if _, seen := o.reads[path]; seen {
		return
	}
	var rev uint64
	if d != nil {
		rev = d.Revision
	}
	o.reads[path] = rev
}

// committed is the document at path as committed before the entry: the one
// the entry read, when it did, else read now (the entry's own writes are
// only recorded, not in txn yet).
func (o *overlay) committed(path string) *Document {
	if d, ok := o.w.stored[path]; ok {
		return d
	}
	return o.stored(path)
}

// keepsBefore says whether a change of path carries its Before document:
// user documents only (triggers read it), not the system's own state.
func keepsBefore(path string) bool {
	pid, rel, ok := strings.Cut(path, "/")
	return ok && pid != SystemPrefix && !strings.HasPrefix(rel, "_")
}

// stored is the document at path as committed before the entry.
func (o *overlay) stored(path string) *Document {
	d, err := getDoc(o.txn, path)
	if err != nil {
		panic(fmt.Sprintf("edgebase fsm: read %q: %v", path, err))
	}
	return d
}

func (o *overlay) put(d *Document) {
	o.w.keys = append(o.w.keys, d.Path)
	o.w.docs = append(o.w.docs, d)
	o.w.events = append(o.w.events, Event{Revision: d.Revision, Path: d.Path, Type: EventSet, Doc: d})
}

func (o *overlay) del(path string, rev uint64) {
	o.w.keys = append(o.w.keys, path)
	o.w.docs = append(o.w.docs, nil)
	o.w.events = append(o.w.events, Event{Revision: rev, Path: path, Type: EventDelete})
}

// written lists the paths w wrote, once each, in first-write order.
func (w *entryWrites) written() []string {
	seen := make(map[string]bool, len(w.keys))
	out := make([]string, 0, len(w.keys))
	for _, k := range w.keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// applyTxn is the deterministic heart of the store: conditions, then ops, all
// decided from committed state and the entry itself. With a Decider, each op
// is judged by it (the caller's access) before the op's own checks, so that
// a caller without access learns nothing of what exists; then the txn as a
// whole (invariants). A txn with a Caller and no Decider is refused.
func applyTxn(ov *overlay, index uint64, t *Txn, dec Decider) *TxnResult {
	res := &TxnResult{Revision: index}
	fail := func(code OpError, i int) *TxnResult {
		return &TxnResult{Revision: index, Err: code, Index: i}
	}
	failOp := func(code OpError, i int) *TxnResult {
		return &TxnResult{Revision: index, Err: code, Index: i, OpFailed: true}
	}
	// Bounded in Apply itself (deterministically), so that no command can
	// need more writes than one Badger transaction takes.
	if len(t.Ops) > MaxTxnOps || len(t.Conds) > MaxTxnOps {
		return fail(ErrCodeInvalid, 0)
	}
	var ed EntryDecider
	if dec != nil {
		var code OpError
		if ed, code = dec.Begin(ov, t); code != ErrCodeNone {
			return failOp(code, 0)
		}
	} else if t.Caller != "" {
		return failOp(ErrCodeUnauthenticated, 0)
	}
	for i, c := range t.Conds {
		doc, err := ov.get(c.Path)
		if err != nil {
			panic(fmt.Sprintf("edgebase fsm: read %q at %d: %v", c.Path, index, err))
		}
		ok := false
		switch c.Kind {
		case CondExists:
			ok = doc != nil
		case CondNotExists:
			ok = doc == nil
		case CondRevision:
			ok = (doc == nil && c.Revision == 0) || (doc != nil && doc.Revision == c.Revision)
		}
		if !ok {
			return fail(ErrCodeCondFailed, i)
		}
	}
	res.Docs = make([]*Document, len(t.Ops))
	res.Created = make([]bool, len(t.Ops))
	res.Deleted = make([]int, len(t.Ops))
	for i := range t.Ops {
		op := &t.Ops[i]
		cur, err := ov.get(op.Path)
		if err != nil {
			panic(fmt.Sprintf("edgebase fsm: read %q at %d: %v", op.Path, index, err))
		}
		next, code := applyOp(cur, op, index, t)
		if ed != nil {
			var judged *Document
			if code == ErrCodeNone {
				judged = next
			}
			if dc := ed.Op(i, op, cur, judged); dc != ErrCodeNone {
				return failOp(dc, i)
			}
		}
		if op.Match != nil {
			var rev uint64
			if cur != nil {
				rev = cur.Revision
			}
			if rev != *op.Match {
				return failOp(ErrCodeCondFailed, i)
			}
		}
		if code != ErrCodeNone {
			return failOp(code, i)
		}
		if code := indexesOpError(op.Path, next); code != ErrCodeNone {
			return failOp(code, i)
		}
		switch {
		case next != nil:
			ov.put(next)
			res.Docs[i], res.Created[i] = next, cur == nil
		case cur != nil:
			ov.del(op.Path, index)
			res.Deleted[i] = 1
		}
	}
	if ed != nil {
		if code := ed.End(ov.w.written(), ov.stored); code != ErrCodeNone {
			return failOp(code, max(len(t.Ops)-1, 0))
		}
	}
	// Every written document is stored twice in the entry's Badger
	// transaction (tree and change log), which Badger caps at a fraction of
	// its memtable: bound what one transaction may leave written, so a small
	// command of field ops on large documents is refused, identically on
	// every replica, instead of failing Apply everywhere.
	if finalSize(ov.w) > maxTxnWriteBytes {
		return failOp(ErrCodeTooLarge, len(t.Ops)-1)
	}
	return res
}

// maxTxnWriteBytes bounds the documents one transaction leaves written.
const maxTxnWriteBytes = 4 << 20

// finalSize is the size of the final document of every path w wrote.
func finalSize(w *entryWrites) int {
	last := make(map[string]int, len(w.keys))
	for i, k := range w.keys {
		last[k] = i
	}
	n := 0
	for _, i := range last {
		if d := w.docs[i]; d != nil {
			n += len(d.Data) + len(d.Path)
		}
	}
	return n
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// Snapshot implements raft.FSM. It is cheap: Persist streams a Badger backup
// read in ONE transaction. That view may include entries after the snapshot's
// index; that is safe because the applied index travels inside the backup,
// read in the same transaction, and replayed entries at or below it are skipped.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) { return &fsmSnapshot{f: f}, nil }

type fsmSnapshot struct{ f *fsm }

// backupConsistent writes a backup of db read at a single timestamp. Badger's
// DB.Backup streams with several goroutines, each with its own read
// transaction, so parts of the key space would come from different moments
// and disagree with the applied index: one producer means one transaction.
func backupConsistent(db *badger.DB, w io.Writer) error {
	st := db.NewStream()
	st.NumGo = 1
	st.LogPrefix = "edgebase.snapshot"
	_, err := st.Backup(w, 0)
	return err
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	s.f.mu.RLock()
	err := backupConsistent(s.f.db, sink)
	s.f.mu.RUnlock()
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("close snapshot sink: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) Release() {}

// Restore implements raft.FSM: load the stream into a new generation, then
// switch CURRENT and the live database in one step. A crash before the switch
// leaves the old generation in use; after it, the new one.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	f.mu.RLock()
	gen := f.gen + 1
	f.mu.RUnlock()
	dir := filepath.Join(f.base, treeDirName(gen))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear restore dir: %w", err)
	}
	db, err := openTreeDB(dir, f.logger, false)
	if err != nil {
		return err
	}
	if err := db.Load(rc, 256); err != nil {
		_ = db.Close()
		return fmt.Errorf("load snapshot: %w", err)
	}
	idx, term, err := readAppliedEntry(db)
	if err != nil {
		_ = db.Close()
		return err
	}
	if err := ensureLogFloor(db); err != nil {
		_ = db.Close()
		return fmt.Errorf("change log floor: %w", err)
	}
	// The loaded tree is not backed by the Raft log (the entries it holds
	// may be compacted away): it is on disk before CURRENT names it.
	if err := db.Sync(); err != nil {
		_ = db.Close()
		return fmt.Errorf("sync restored tree: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(f.base, currentFile), []byte(strconv.Itoa(gen)+"\n")); err != nil {
		_ = db.Close()
		return err
	}
	f.mu.Lock()
	old, oldGen, oldGuard := f.db, f.gen, f.guard
	f.db, f.gen, f.guard = db, gen, &sync.RWMutex{}
	f.appliedTerm.Store(term)
	f.applied.set(idx)
	f.ixCache.reset() // derived from the replaced database
	f.mu.Unlock()
	f.wakeBuilder()
	f.feed.publish(Batch{Revision: idx, Reset: true})
	oldGuard.Lock() // open snapshot reads of the old database finish first
	defer oldGuard.Unlock()
	if err := old.Close(); err != nil {
		f.logger.Warn("close replaced tree db", "err", err)
	}
	if err := os.RemoveAll(filepath.Join(f.base, treeDirName(oldGen))); err != nil {
		f.logger.Warn("remove replaced tree db", "err", err)
	}
	f.logger.Info("restored snapshot", "applied", idx, "generation", gen)
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := fh.Write(b); err != nil {
		_ = fh.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fh.Sync(); err != nil {
		_ = fh.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// catchUpToSnapshot restores the newest local snapshot when it is ahead of
// the tree. Raft saves a received snapshot before it calls Restore; a node
// stopped between the two (or whose Restore failed) would otherwise start
// with Raft believing everything up to the snapshot applied
// (NoSnapshotRestoreOnStart) while the tree lacks it: a permanent gap.
func (f *fsm) catchUpToSnapshot(snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) == 0 || list[0].Index <= f.applied.get() {
		return nil
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
	}
	f.logger.Warn("tree is behind the newest snapshot; restoring it", "applied", f.applied.get(), "snapshot", meta.Index)
	return f.Restore(rc)
}

// pin returns the live database for a long read that must not hold f.mu
// (a snapshot read, a backup): whoever closes or replaces the database waits
// for release first (see guard).
func (f *fsm) pin() (*badger.DB, func(), error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, nil, ErrClosed
	}
	guard := f.guard
	guard.RLock()
	return f.db, guard.RUnlock, nil
}

// view runs fn in a read transaction on the live database.
func (f *fsm) view(fn func(txn *badger.Txn) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return ErrClosed
	}
	return f.db.View(fn)
}

// badgerSlog forwards Badger's warnings and errors to slog and drops its chatter.
type badgerSlog struct{ l *slog.Logger }

func (b badgerSlog) Errorf(f string, a ...any)   { b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerSlog) Warningf(f string, a ...any) { b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerSlog) Infof(string, ...any)        {}
func (b badgerSlog) Debugf(string, ...any)       {}
