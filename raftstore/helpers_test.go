package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// Helpers shared by fsm_test.go, tree_test.go, feed_test.go and store_test.go.
// logstore_test.go has its own; names here avoid clashing with them.

// testTime is the deterministic proposer clock used in generated entries.
func testTime(idx uint64) int64 { return 1_700_000_000_000_000_000 + int64(idx)*1_000 }

// mustOpenFSM opens an fsm over dir with its own feed; it is closed when the
// test ends (close is idempotent, so tests may close it themselves).
func mustOpenFSM(t *testing.T, dir string) *fsm {
	t.Helper()
	return mustOpenFSMWithFeed(t, dir, newFeed())
}

func mustOpenFSMWithFeed(t *testing.T, dir string, feed *Feed) *fsm {
	t.Helper()
	f, err := openFSM(dir, testLogger(), feed)
	if err != nil {
		t.Fatalf("openFSM(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := f.close(); err != nil {
			t.Errorf("fsm close: %v", err)
		}
	})
	return f
}

func mustCloseFSM(t *testing.T, f *fsm) {
	t.Helper()
	if err := f.close(); err != nil {
		t.Fatalf("fsm close: %v", err)
	}
}

// txnLog frames txn as the raft entry at idx.
func txnLog(t testing.TB, idx uint64, txn *Txn) *raft.Log {
	t.Helper()
	b, err := EncodeTxn(txn)
	if err != nil {
		t.Fatalf("EncodeTxn: %v", err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: b}
}

// confLog is a configuration entry, which raft hands to a BatchingFSM too.
func confLog(idx uint64) *raft.Log {
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.1:7000", Suffrage: raft.Voter}}}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(cfg)}
}

func noopLog(idx uint64) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: []byte{byte(cmdNoop), 1}}
}

// applyOne applies one txn as its own batch at idx and returns its result.
func applyOne(t *testing.T, f *fsm, idx uint64, txn *Txn) *TxnResult {
	t.Helper()
	if txn.Time == 0 {
		txn.Time = testTime(idx)
	}
	out := f.ApplyBatch([]*raft.Log{txnLog(t, idx, txn)})
	return mustResult(t, out[0])
}

// mustOK applies txn at idx and fails the test unless it committed.
func mustOK(t *testing.T, f *fsm, idx uint64, txn *Txn) *TxnResult {
	t.Helper()
	res := applyOne(t, f, idx, txn)
	if !res.OK() {
		t.Fatalf("txn at %d refused: %s at %d", idx, res.Err, res.Index)
	}
	return res
}

func mustResult(t *testing.T, v any) *TxnResult {
	t.Helper()
	res, ok := v.(*TxnResult)
	if !ok || res == nil {
		t.Fatalf("apply result is %T (%v), want *TxnResult", v, v)
	}
	return res
}

// applyInBatches applies logs in consecutive batches whose sizes come from
// next (called until the logs are used up) and returns every result in order.
func applyInBatches(f *fsm, logs []*raft.Log, next func() int) []any {
	var out []any
	for len(logs) > 0 {
		n := min(max(next(), 1), len(logs))
		out = append(out, f.ApplyBatch(logs[:n])...)
		logs = logs[n:]
	}
	return out
}

func put(path, data string) Op { return Op{Kind: OpPut, Path: path, Data: json.RawMessage(data)} }
func del(path string) Op       { return Op{Kind: OpDelete, Path: path} }
func delIfExists(path string) Op {
	return Op{Kind: OpDelete, Path: path, IfExists: true}
}
func setField(path, field, data string) Op {
	return Op{Kind: OpSetField, Path: path, Field: field, Data: json.RawMessage(data)}
}
func renameField(path, from, to, data string) Op {
	return Op{Kind: OpRenameField, Path: path, Field: from, NewField: to, Data: json.RawMessage(data)}
}
func deleteField(path, field string) Op { return Op{Kind: OpDeleteField, Path: path, Field: field} }

// kv is one live key of a Badger database.
type kv struct{ key, val []byte }

// dumpDB returns every live key and value of the fsm's tree database in key
// order, including the applied-index metadata.
func dumpDB(t *testing.T, f *fsm) []kv {
	t.Helper()
	var out []kv
	err := f.view(func(txn *badger.Txn) error {
		out = dumpTxn(txn)
		return nil
	})
	if err != nil {
		t.Fatalf("dump tree db: %v", err)
	}
	return out
}

func dumpBadger(t *testing.T, db *badger.DB) []kv {
	t.Helper()
	var out []kv
	if err := db.View(func(txn *badger.Txn) error { out = dumpTxn(txn); return nil }); err != nil {
		t.Fatalf("dump badger: %v", err)
	}
	return out
}

func dumpTxn(txn *badger.Txn) []kv {
	var out []kv
	it := txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		v, err := item.ValueCopy(nil)
		if err != nil {
			panic(err)
		}
		out = append(out, kv{key: item.KeyCopy(nil), val: v})
	}
	return out
}

// withoutApplied drops the applied index and its term from a dump.
func withoutApplied(d []kv) []kv {
	var out []kv
	for _, e := range d {
		if !bytes.Equal(e.key, keyApplied) && !bytes.Equal(e.key, keyAppliedTerm) {
			out = append(out, e)
		}
	}
	return out
}

// assertSameDump fails with the first difference between two dumps.
func assertSameDump(t *testing.T, what string, got, want []kv) {
	t.Helper()
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if !bytes.Equal(got[i].key, want[i].key) {
			t.Fatalf("%s: key #%d differs: got %q, want %q", what, i, got[i].key, want[i].key)
		}
		if !bytes.Equal(got[i].val, want[i].val) {
			t.Fatalf("%s: value of %q differs:\n got: %s\nwant: %s", what, got[i].key, abbrev(got[i].val), abbrev(want[i].val))
		}
	}
	if len(got) != len(want) {
		var extra []string
		for _, e := range got[n:] {
			extra = append(extra, "+"+string(e.key))
		}
		for _, e := range want[n:] {
			extra = append(extra, "-"+string(e.key))
		}
		t.Fatalf("%s: got %d keys, want %d (first extra: %v)", what, len(got), len(want), extra[:min(len(extra), 5)])
	}
}

func abbrev(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q... (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// dumpKeys lists the document paths of a dump (without the space tag).
func dumpKeys(d []kv) []string {
	var out []string
	for _, e := range d {
		if len(e.key) > 0 && e.key[0] == spaceDoc {
			out = append(out, string(e.key[1:]))
		}
	}
	return out
}

func getDocT(t *testing.T, f *fsm, path string) *Document {
	t.Helper()
	var doc *Document
	err := f.view(func(txn *badger.Txn) error {
		var err error
		doc, err = getDoc(txn, path)
		return err
	})
	if err != nil {
		t.Fatalf("get %q: %v", path, err)
	}
	return doc
}

func mustDoc(t *testing.T, f *fsm, path string) *Document {
	t.Helper()
	d := getDocT(t, f, path)
	if d == nil {
		t.Fatalf("document %q missing", path)
	}
	return d
}

func mustNoDoc(t *testing.T, f *fsm, path string) {
	t.Helper()
	if d := getDocT(t, f, path); d != nil {
		t.Fatalf("document %q exists (data %s, revision %d), want none", path, abbrev(d.Data), d.Revision)
	}
}

// drainFeed returns everything queued on sub without blocking, and whether the
// subscription's channel was found closed.
func drainFeed(sub *Subscription) (batches []Batch, closed bool) {
	for {
		select {
		case b, ok := <-sub.C():
			if !ok {
				return batches, true
			}
			batches = append(batches, b)
		default:
			return batches, false
		}
	}
}

// flatten returns the events of batches in order.
func flatten(batches []Batch) []Event {
	var out []Event
	for _, b := range batches {
		out = append(out, b.Events...)
	}
	return out
}

// memSink is a raft.SnapshotSink over memory.
type memSink struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	closed    bool
	cancelled bool
}

func (s *memSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cancelled {
		return 0, errors.New("write to finished sink")
	}
	return s.buf.Write(p)
}

func (s *memSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sink closed twice")
	}
	s.closed = true
	return nil
}

func (s *memSink) ID() string { return "mem" }

func (s *memSink) Cancel() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled = true
	return nil
}

var _ raft.SnapshotSink = (*memSink)(nil)

// mustSnapshot persists f's snapshot into memory and returns the bytes.
func mustSnapshot(t *testing.T, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist left sink closed=%v cancelled=%v, want closed and not cancelled", sink.closed, sink.cancelled)
	}
	return sink.buf.Bytes()
}

func mustRestore(t *testing.T, f *fsm, snap []byte) {
	t.Helper()
	if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

// readCurrent returns the trimmed contents of the CURRENT file under base.
func readCurrent(t *testing.T, base string) string {
	t.Helper()
	b, err := os.ReadFile(base + "/" + currentFile)
	if err != nil {
		t.Fatalf("read CURRENT: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// treeDirs lists the tree-N directories under base.
func treeDirs(t *testing.T, base string) []string {
	t.Helper()
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatalf("read %s: %v", base, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "tree-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// sameDoc compares two documents field by field (Data byte for byte).
func sameDoc(a, b *Document) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Path == b.Path && bytes.Equal(a.Data, b.Data) && a.Revision == b.Revision &&
		a.CreateRevision == b.CreateRevision && a.CreateTime == b.CreateTime && a.UpdateTime == b.UpdateTime
}

func sameEvents(a, b []Event) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d events vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Revision != b[i].Revision || a[i].Path != b[i].Path || a[i].Type != b[i].Type || !sameDoc(a[i].Doc, b[i].Doc) {
			return false, fmt.Sprintf("event #%d: %+v vs %+v", i, a[i], b[i])
		}
	}
	return true, ""
}

func sameResults(a, b []any) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d results vs %d", len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			ja, _ := json.Marshal(a[i])
			jb, _ := json.Marshal(b[i])
			return false, fmt.Sprintf("result #%d: %s vs %s", i, abbrev(ja), abbrev(jb))
		}
	}
	return true, ""
}
