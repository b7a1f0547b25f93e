package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The index builder backfills the entries of documents written before an
// index existed (a newly declared index; the automatic indexes of a tree
// from before them) and drops the entries of indexes no longer declared. It
// works in chunks, each in one Badger transaction under fsm.buildMu, which
// ApplyBatch holds too: a chunk sees the documents as Apply left them and
// Apply never writes in the middle of one, while writes go on between
// chunks. Apply keeps every declared index exact for the documents it
// writes, so once the backfill has visited every document the index is
// complete and marked ready.

// buildChunk is how many documents one chunk examines, and dropChunk how
// many index keys one chunk deletes.
const (
	buildChunk = 256
	dropChunk  = 1024
)

// buildRetry is how long the builder waits after a failed chunk, and
// buildFailedRetry how long it leaves alone an index that cannot be built
// (a document written before the declaration has too large an entry: the
// index stays "building" until that document changes).
const (
	buildRetry       = time.Second
	buildFailedRetry = time.Minute
)

var errEntryTooLarge = errors.New("index entry too large")

type indexBuilder struct {
	f      *fsm
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	chunks atomic.Int64 // chunks committed, for tests

	// Clearing an index before its backfill is not persisted (clearing
	// again is harmless): where it got to, per generation of the tree.
	clearGen int
	clearAt  map[string][]byte
	// failed holds the indexes that cannot be built, until when they are
	// left alone.
	fmu    sync.Mutex
	failed map[buildTask]time.Time
}

func startIndexBuilder(f *fsm) *indexBuilder {
	b := &indexBuilder{f: f, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *indexBuilder) chunksRun() int64 { return b.chunks.Load() }

// stop ends the builder and waits for it.
func (b *indexBuilder) stop() {
	if b == nil {
		return
	}
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// wakeBuilder tells the builder that the declarations or the tree changed:
// every index is tried again. The indexes that failed are forgiven here,
// before it returns, so that once the entry that woke the builder is
// applied, its work is pending (not only once the builder goroutine has
// taken the wake).
func (f *fsm) wakeBuilder() {
	if f.builder == nil {
		return
	}
	f.builder.fmu.Lock()
	clear(f.builder.failed)
	f.builder.fmu.Unlock()
	select {
	case f.builder.wake <- struct{}{}:
	default:
	}
}

func (b *indexBuilder) run() {
	defer close(b.done)
	for {
		more, err := b.step()
		if errors.Is(err, ErrClosed) {
			return
		}
		if err != nil {
			b.f.logger.Warn("index build chunk failed; retrying", "err", err)
			select {
			case <-b.quit:
				return
			case <-time.After(buildRetry):
			}
			continue
		}
		if more {
			select {
			case <-b.quit:
				return
			default:
				continue
			}
		}
		var retry <-chan time.Time
		if b.anyFailed() {
			retry = time.After(buildFailedRetry)
		}
		select {
		case <-b.quit:
			return
		case <-b.wake:
			// The declarations changed: every index is tried again
			// (wakeBuilder forgave the failed ones).
		case <-retry:
		}
	}
}

func (b *indexBuilder) anyFailed() bool {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	return len(b.failed) > 0
}

// buildTask is one piece of index work.
type buildTask struct {
	kind    byte // 'a': automatic backfill, 'b': build a declared index, 'd': drop one
	pid, id string
}

// step runs one chunk of the first pending task; more is false when there
// was none.
func (b *indexBuilder) step() (more bool, err error) {
	f := b.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return false, ErrClosed
	}
	if b.clearGen != f.gen || b.clearAt == nil {
		b.clearGen, b.clearAt = f.gen, map[string][]byte{}
		b.fmu.Lock()
		b.failed = map[buildTask]time.Time{}
		b.fmu.Unlock()
	}
	// Planning reads without blocking Apply; the chunk checks its task
	// again under the lock.
	var task buildTask
	var ok bool
	if err := f.db.View(func(txn *badger.Txn) error {
		var err error
		task, ok, err = b.plan(txn)
		return err
	}); err != nil || !ok {
		return false, err
	}
	f.buildMu.Lock()
	defer f.buildMu.Unlock()
	txn := f.db.NewTransaction(true)
	defer txn.Discard()
	switch task.kind {
	case 'a':
		err = b.autoChunk(txn)
	case 'b':
		err = b.buildChunk(txn, task.pid, task.id)
	default:
		err = b.dropChunk(txn, task.pid, task.id)
	}
	if errors.Is(err, errEntryTooLarge) {
		b.f.logger.Warn("index cannot be built until the document changes", "project", task.pid, "index", task.id, "err", err)
		b.fmu.Lock()
		b.failed[task] = time.Now().Add(buildFailedRetry)
		b.fmu.Unlock()
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("index %c %s/%s: %w", task.kind, task.pid, task.id, err)
	}
	if err := txn.Commit(); err != nil {
		return false, fmt.Errorf("commit index chunk: %w", err)
	}
	b.chunks.Add(1)
	return true, nil
}

// plan finds the first pending task: the automatic backfill, then each
// project's declared indexes that are not ready, then indexes with entries
// or markers that are no longer declared. It reads declarations through
// viewIndexes: only Apply and chunks under buildMu fill the cache.
func (b *indexBuilder) plan(txn *badger.Txn) (buildTask, bool, error) {
	f := b.f
	done, err := hasKey(txn, keyIxAuto)
	if err != nil {
		return buildTask{}, false, err
	}
	if !done {
		return buildTask{kind: 'a'}, true, nil
	}
	// Projects with declarations: one seek per project of the tree.
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = []byte{spaceDoc}
	it := txn.NewIterator(opts)
	for it.Seek([]byte{spaceDoc}); it.Valid(); {
		path := string(it.Item().Key()[1:])
		pid, _, hasSlash := strings.Cut(path, "/")
		next := docKey(pid + "0") // past "pid/..."
		if !hasSlash {
			next = append(docKey(pid), 0)
		}
		if pid != "" && !strings.HasPrefix(pid, "_") {
			p, err := f.viewIndexes(txn, pid)
			if err != nil {
				it.Close()
				return buildTask{}, false, err
			}
			for _, d := range p.defs {
				ready, err := hasKey(txn, ixReadyKey(pid, d.id))
				if err != nil {
					it.Close()
					return buildTask{}, false, err
				}
				task := buildTask{kind: 'b', pid: pid, id: d.id}
				if !ready && !b.leftAlone(task) {
					it.Close()
					return task, true, nil
				}
			}
		}
		it.Seek(next)
	}
	it.Close()
	// Entries of indexes no longer declared: one seek per (project, index).
	opts.Prefix = []byte{spaceIndex}
	it = txn.NewIterator(opts)
	defer it.Close()
	for it.Seek([]byte{spaceIndex}); it.Valid(); {
		pid, id, ok := splitDeclaredKey(it.Item().Key())
		if !ok {
			return buildTask{}, false, fmt.Errorf("bad index key %q", it.Item().Key())
		}
		p, err := f.viewIndexes(txn, pid)
		if err != nil {
			return buildTask{}, false, err
		}
		if !p.has(id) {
			return buildTask{kind: 'd', pid: pid, id: id}, true, nil
		}
		it.Seek(keySuccessor(declaredKeyPrefix(pid, id)))
	}
	// Markers of indexes no longer declared (Apply deletes them when it
	// removes a declaration; a marker without one is dropped here too).
	for _, prefix := range []string{"mixbuild/", "mixready/"} {
		opts.Prefix = []byte(prefix)
		mit := txn.NewIterator(opts)
		for mit.Rewind(); mit.Valid(); mit.Next() {
			pid, id, _ := strings.Cut(string(mit.Item().Key()[len(prefix):]), "/")
			p, err := f.viewIndexes(txn, pid)
			if err != nil {
				mit.Close()
				return buildTask{}, false, err
			}
			if !p.has(id) {
				mit.Close()
				return buildTask{kind: 'd', pid: pid, id: id}, true, nil
			}
		}
		mit.Close()
	}
	return buildTask{}, false, nil
}

// leftAlone reports whether task failed for good a moment ago.
func (b *indexBuilder) leftAlone(task buildTask) bool {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	until, ok := b.failed[task]
	if !ok {
		return false
	}
	if time.Now().After(until) {
		delete(b.failed, task)
		return false
	}
	return true
}

// splitDeclaredKey takes the project and the index id off a declared
// index key.
func splitDeclaredKey(k []byte) (pid, id string, ok bool) {
	rest := k[1:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return "", "", false
	}
	j := bytes.IndexByte(rest[i+1:], 0)
	if j < 0 {
		return "", "", false
	}
	return string(rest[:i]), string(rest[i+1 : i+1+j]), true
}

// nextDocs calls fn for up to buildChunk documents with path after `after`
// under prefix, in path order, skipping system subtrees; last is the last
// path examined and end whether the prefix is exhausted.
func nextDocs(txn *badger.Txn, prefix, after string, fn func(d *Document) error) (last string, end bool, err error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = docKey(prefix)
	opts.PrefetchSize = buildChunk
	it := txn.NewIterator(opts)
	defer it.Close()
	start := docKey(prefix)
	if after != "" {
		start = append(docKey(after), 0)
	}
	n := 0
	for it.Seek(start); it.Valid(); {
		key := it.Item().Key()
		path := string(key[1:])
		if cut := systemSubtreeEnd(path); cut > 0 {
			// A system subtree (accounts, sessions, ...) holds no user
			// document: jump past it.
			it.Seek(docKey(path[:cut] + "0"))
			continue
		}
		if n == buildChunk {
			return last, false, nil
		}
		var d *Document
		if err := it.Item().Value(func(v []byte) error {
			var derr error
			d, derr = decodeDoc(path, v)
			return derr
		}); err != nil {
			return "", false, err
		}
		if err := fn(d); err != nil {
			return "", false, err
		}
		last = path
		n++
		it.Next()
	}
	return last, true, nil
}

// systemSubtreeEnd is the length of the path prefix up to the end of the
// first segment starting with "_" (the project id's included), or 0: every
// path below that prefix is system state.
func systemSubtreeEnd(path string) int {
	for off := 0; off < len(path); {
		end := strings.IndexByte(path[off:], '/')
		if end < 0 {
			end = len(path)
		} else {
			end += off
		}
		if path[off] == '_' {
			if end == len(path) {
				return 0 // the system document itself; nothing below yet
			}
			return end
		}
		off = end + 1
	}
	return 0
}

// autoChunk backfills the automatic entries of the next documents.
func (b *indexBuilder) autoChunk(txn *badger.Txn) error {
	if done, err := hasKey(txn, keyIxAuto); err != nil || done {
		return err
	}
	after, _, err := getString(txn, keyIxAutoBuild)
	if err != nil {
		return err
	}
	last, end, err := nextDocs(txn, "", after, func(d *Document) error {
		_, parent, _, ok := userDoc(d.Path)
		if !ok {
			return nil
		}
		for _, k := range autoEntries(parent, d.Path, d.Data) {
			if err := txn.Set(k, []byte(d.Path)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if end {
		if err := txn.Delete(keyIxAutoBuild); err != nil {
			return err
		}
		b.f.logger.Info("automatic indexes built")
		return txn.Set(keyIxAuto, nil)
	}
	return txn.Set(keyIxAutoBuild, []byte(last))
}

// buildChunk clears, then backfills, declared index id of project pid. The
// clearing removes entries left from an earlier declaration of the same
// index, which Apply did not maintain while it was not declared.
func (b *indexBuilder) buildChunk(txn *badger.Txn, pid, id string) error {
	p, err := b.f.applyIndexes(txn, pid)
	if err != nil {
		return err
	}
	var def *indexDef
	for i := range p.defs {
		if p.defs[i].id == id {
			def = &p.defs[i]
		}
	}
	if def == nil {
		return nil // no longer declared: plan will drop it
	}
	if ready, err := hasKey(txn, ixReadyKey(pid, id)); err != nil || ready {
		return err
	}
	after, started, err := getString(txn, ixBuildKey(pid, id))
	if err != nil {
		return err
	}
	if !started {
		ck := pid + "\x00" + id
		from := b.clearAt[ck]
		n, last, err := deleteRange(txn, declaredKeyPrefix(pid, id), from)
		if err != nil {
			return err
		}
		if n < dropChunk {
			delete(b.clearAt, ck)
			return txn.Set(ixBuildKey(pid, id), nil)
		}
		b.clearAt[ck] = last
		return nil
	}
	last, end, err := nextDocs(txn, pid+"/", after, func(d *Document) error {
		_, parent, coll, ok := userDoc(d.Path)
		if !ok || coll != def.Collection {
			return nil
		}
		if k, ok := declaredEntry(pid, parent, def, d.Path, d.Data); ok {
			if len(k) > maxIndexKeyBytes {
				return fmt.Errorf("%w: %s has an entry of %d bytes (at most %d)", errEntryTooLarge, d.Path, len(k), maxIndexKeyBytes)
			}
			return txn.Set(k, []byte(d.Path))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if end {
		if err := txn.Delete(ixBuildKey(pid, id)); err != nil {
			return err
		}
		b.f.logger.Info("index built", "project", pid, "index", id, "collection", def.Collection)
		return txn.Set(ixReadyKey(pid, id), nil)
	}
	return txn.Set(ixBuildKey(pid, id), []byte(last))
}

// dropChunk deletes entries of an index no longer declared, then its
// markers.
func (b *indexBuilder) dropChunk(txn *badger.Txn, pid, id string) error {
	p, err := b.f.applyIndexes(txn, pid)
	if err != nil {
		return err
	}
	if p.has(id) {
		return nil // declared again meanwhile
	}
	n, _, err := deleteRange(txn, declaredKeyPrefix(pid, id), nil)
	if err != nil {
		return err
	}
	if n < dropChunk {
		if err := txn.Delete(ixBuildKey(pid, id)); err != nil {
			return err
		}
		if err := txn.Delete(ixReadyKey(pid, id)); err != nil {
			return err
		}
		b.f.logger.Info("index dropped", "project", pid, "index", id)
	}
	return nil
}

// deleteRange deletes up to dropChunk keys under prefix, from `from` on
// (nil: the start), and returns how many and the last one.
func deleteRange(txn *badger.Txn, prefix, from []byte) (int, []byte, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	start := prefix
	if from != nil {
		start = from
	}
	var keys [][]byte
	for it.Seek(start); it.Valid() && len(keys) < dropChunk; it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return 0, nil, err
		}
	}
	var last []byte
	if len(keys) > 0 {
		last = keys[len(keys)-1]
	}
	return len(keys), last, nil
}

// getString reads a string value; ok is false when the key is absent.
func getString(txn *badger.Txn, key []byte) (string, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("get %q: %w", key, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return "", false, fmt.Errorf("read %q: %w", key, err)
	}
	return string(v), true, nil
}

// markEmptyTreeIndexed marks the automatic indexes built in a tree without
// documents (a new node), so that only a tree from before them is
// backfilled.
func markEmptyTreeIndexed(db *badger.DB) error {
	err := db.Update(func(txn *badger.Txn) error {
		done, err := hasKey(txn, keyIxAuto)
		if err != nil || done {
			return err
		}
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{spaceDoc}
		it := txn.NewIterator(opts)
		it.Rewind()
		empty := !it.Valid()
		it.Close()
		if !empty {
			return nil
		}
		return txn.Set(keyIxAuto, nil)
	})
	if err != nil {
		return fmt.Errorf("mark automatic indexes: %w", err)
	}
	return nil
}
