package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// ---- helpers ---------------------------------------------------------------

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// mustOpenLogStore opens a store in dir and closes it when the test ends
// (Close is idempotent, so tests may also close it themselves).
func mustOpenLogStore(t *testing.T, dir string) *logStore {
	t.Helper()
	s, err := openLogStore(dir, testLogger())
	if err != nil {
		t.Fatalf("OpenLogStore(%q): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustClose(t *testing.T, s *logStore) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testRaftLog(idx uint64, data string) *raft.Log {
	return &raft.Log{
		Index: idx,
		Term:  idx / 10,
		Type:  raft.LogCommand,
		Data:  []byte(data),
	}
}

func mustStoreLogs(t *testing.T, s *logStore, logs ...*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d entries): %v", len(logs), err)
	}
}

func mustGetLog(t *testing.T, s *logStore, idx uint64) *raft.Log {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(idx, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", idx, err)
	}
	return &l
}

func mustBounds(t *testing.T, s *logStore, wantFirst, wantLast uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if first != wantFirst || last != wantLast {
		t.Fatalf("bounds = [%d, %d], want [%d, %d]", first, last, wantFirst, wantLast)
	}
}

func mustLogMissing(t *testing.T, s *logStore, idx uint64) {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(idx, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(%d) err = %v, want raft.ErrLogNotFound", idx, err)
	}
}

func assertLogEqual(t *testing.T, got, want *raft.Log) {
	t.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
		t.Fatalf("log mismatch:\n got: %+v\nwant: %+v", got, want)
	}
}

// mustEventually polls cond until it reports true or the deadline passes.
func mustEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last state: %s)", timeout, what, state)
		}
		<-tick.C
	}
}

// ---- raft-boltdb contract --------------------------------------------------

func TestLogStore_Implements(t *testing.T) {
	var s any = &logStore{}
	if _, ok := s.(raft.LogStore); !ok {
		t.Fatal("LogStore does not implement raft.LogStore")
	}
	if _, ok := s.(raft.StableStore); !ok {
		t.Fatal("LogStore does not implement raft.StableStore")
	}
}

func TestLogStore_OpenCreatesDirWithDurableOptions(t *testing.T) {
	dir := t.TempDir() + "/nested/raft"
	s := mustOpenLogStore(t, dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("store dir %q not created: %v", dir, err)
	}
	mustBounds(t, s, 0, 0)
	opts := s.db.Opts()
	if !opts.SyncWrites {
		t.Fatal("Badger SyncWrites is off: acknowledged entries would not survive a crash")
	}
	if opts.MemTableSize > 32<<20 || opts.BlockCacheSize > 32<<20 {
		t.Fatalf("memory options too large: memtable %d, block cache %d", opts.MemTableSize, opts.BlockCacheSize)
	}
}

// TestLogStore_SurvivesKill writes from a child process that then SIGKILLs
// itself without closing the store, and checks everything acknowledged is
// there after reopening (Badger replays its write-ahead log).
func TestLogStore_SurvivesKill(t *testing.T) {
	const envDir = "RAFTSTORE_KILL_TEST_DIR"
	if dir := os.Getenv(envDir); dir != "" {
		s, err := openLogStore(dir, testLogger())
		if err != nil {
			fmt.Fprintln(os.Stderr, "child open:", err)
			os.Exit(2)
		}
		for i := uint64(1); i <= 100; i++ {
			if err := s.StoreLog(testRaftLog(i, fmt.Sprintf("log%d", i))); err != nil {
				fmt.Fprintln(os.Stderr, "child store:", err)
				os.Exit(2)
			}
		}
		if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			fmt.Fprintln(os.Stderr, "child set:", err)
			os.Exit(2)
		}
		if self, err := os.FindProcess(os.Getpid()); err == nil {
			_ = self.Kill() // SIGKILL on Unix: no deferred code, no Close
		}
		select {} // not reached
	}

	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogStore_SurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), envDir+"="+dir)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child did not fail as expected: %v\n%s", err, out)
	}
	if exitErr.Exited() && runtime.GOOS != "windows" { // a signal death is not an exit
		t.Fatalf("child exited instead of being killed: %v\n%s", err, out)
	}

	s := mustOpenLogStore(t, dir)
	mustBounds(t, s, 1, 100)
	for i := uint64(1); i <= 100; i++ {
		assertLogEqual(t, mustGetLog(t, s, i), testRaftLog(i, fmt.Sprintf("log%d", i)))
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("GetUint64 after kill = %d, %v; want 9", v, err)
	}
}

func TestLogStore_FirstIndex(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	idx, err := s.FirstIndex()
	if err != nil || idx != 0 {
		t.Fatalf("empty FirstIndex = %d, %v; want 0, nil", idx, err)
	}
	mustStoreLogs(t, s, testRaftLog(1, "log1"), testRaftLog(2, "log2"), testRaftLog(3, "log3"))
	idx, err = s.FirstIndex()
	if err != nil || idx != 1 {
		t.Fatalf("FirstIndex = %d, %v; want 1, nil", idx, err)
	}
}

func TestLogStore_LastIndex(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	idx, err := s.LastIndex()
	if err != nil || idx != 0 {
		t.Fatalf("empty LastIndex = %d, %v; want 0, nil", idx, err)
	}
	mustStoreLogs(t, s, testRaftLog(1, "log1"), testRaftLog(2, "log2"), testRaftLog(3, "log3"))
	idx, err = s.LastIndex()
	if err != nil || idx != 3 {
		t.Fatalf("LastIndex = %d, %v; want 3, nil", idx, err)
	}
}

func TestLogStore_GetLog(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	mustLogMissing(t, s, 1)

	appended := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg"), AppendedAt: appended},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("log2"), Extensions: []byte{0, 1, 2, 0xff}, AppendedAt: appended.Add(time.Nanosecond)},
		{Index: 3, Term: math.MaxUint64, Type: raft.LogNoop},                                 // no data, zero AppendedAt
		{Index: 4, Term: 7, Type: raft.LogBarrier, Data: bytes.Repeat([]byte{0xab}, 70000)},  // multi-byte lengths
		{Index: 5, Term: 7, Type: raft.LogCommand, AppendedAt: time.Unix(-12345, 999999999)}, // pre-epoch
		{Index: math.MaxUint64, Term: 9, Type: raft.LogCommand, Data: []byte("max index"), Extensions: []byte("ext")},
	}
	mustStoreLogs(t, s, logs...)
	for _, want := range logs {
		assertLogEqual(t, mustGetLog(t, s, want.Index), want)
	}
	if got := mustGetLog(t, s, 3); !got.AppendedAt.IsZero() || got.Data != nil || got.Extensions != nil {
		t.Fatalf("empty fields not preserved: %+v", got)
	}
	mustLogMissing(t, s, 0)
	mustLogMissing(t, s, 6)
	mustLogMissing(t, s, math.MaxUint64-1)

	// raft compares with ==, so the sentinel must not be wrapped.
	var l raft.Log
	err := s.GetLog(100, &l)
	if !errors.Is(err, raft.ErrLogNotFound) || err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(100) err = %v, want exactly raft.ErrLogNotFound", err)
	}
}

func TestLogStore_GetLogReturnsIndependentSlices(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	mustStoreLogs(t, s, &raft.Log{Index: 1, Term: 1, Data: []byte("abc"), Extensions: []byte("xyz")})
	got := mustGetLog(t, s, 1)
	got.Data[0] = 'Z'
	got.Data = append(got.Data, 'q') // must not run into Extensions
	if string(got.Extensions) != "xyz" {
		t.Fatalf("appending to Data clobbered Extensions: %q", got.Extensions)
	}
	if again := mustGetLog(t, s, 1); string(again.Data) != "abc" {
		t.Fatalf("mutating a returned entry changed the store: %q", again.Data)
	}
}

func TestLogStore_StoreLog(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	want := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("log1"), AppendedAt: time.Now()}
	if err := s.StoreLog(want); err != nil {
		t.Fatalf("StoreLog: %v", err)
	}
	assertLogEqual(t, mustGetLog(t, s, 1), want)
	mustBounds(t, s, 1, 1)

	// Overwriting an index replaces the entry (raft does this after it
	// truncated a conflicting suffix).
	replaced := &raft.Log{Index: 1, Term: 2, Type: raft.LogCommand, Data: []byte("log1-term2")}
	if err := s.StoreLog(replaced); err != nil {
		t.Fatalf("StoreLog overwrite: %v", err)
	}
	assertLogEqual(t, mustGetLog(t, s, 1), replaced)
	mustBounds(t, s, 1, 1)
}

func TestLogStore_StoreLogs(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	if err := s.StoreLogs(nil); err != nil {
		t.Fatalf("StoreLogs(nil): %v", err)
	}
	mustBounds(t, s, 0, 0)
	if err := s.StoreLogs([]*raft.Log{testRaftLog(1, "a"), nil}); err == nil {
		t.Fatal("StoreLogs with a nil entry succeeded")
	}
	mustLogMissing(t, s, 1) // validation happens before anything is written

	var logs []*raft.Log
	for i := uint64(1); i <= 500; i++ {
		logs = append(logs, testRaftLog(i, fmt.Sprintf("log%d", i)))
	}
	mustStoreLogs(t, s, logs...)
	for _, want := range logs {
		assertLogEqual(t, mustGetLog(t, s, want.Index), want)
	}
	mustBounds(t, s, 1, 500)

	// Appending a later batch extends the tail.
	mustStoreLogs(t, s, testRaftLog(501, "log501"), testRaftLog(502, "log502"))
	mustBounds(t, s, 1, 502)
}

func TestLogStore_DeleteRange(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	var logs []*raft.Log
	for i := uint64(1); i <= 20; i++ {
		logs = append(logs, testRaftLog(i, fmt.Sprintf("log%d", i)))
	}
	mustStoreLogs(t, s, logs...)

	// Middle: bounds unchanged, exactly [5,8] gone.
	if err := s.DeleteRange(5, 8); err != nil {
		t.Fatalf("DeleteRange(5,8): %v", err)
	}
	mustBounds(t, s, 1, 20)
	for i := uint64(1); i <= 20; i++ {
		if i >= 5 && i <= 8 {
			mustLogMissing(t, s, i)
		} else {
			assertLogEqual(t, mustGetLog(t, s, i), logs[i-1])
		}
	}

	// Prefix (as raft's log compaction does): first moves past the hole.
	if err := s.DeleteRange(1, 3); err != nil {
		t.Fatalf("DeleteRange(1,3): %v", err)
	}
	mustBounds(t, s, 4, 20)
	if err := s.DeleteRange(1, 4); err != nil { // overlaps already-deleted keys
		t.Fatalf("DeleteRange(1,4): %v", err)
	}
	mustBounds(t, s, 9, 20)

	// Suffix (as raft's conflict truncation does).
	if err := s.DeleteRange(18, math.MaxUint64); err != nil {
		t.Fatalf("DeleteRange(18,max): %v", err)
	}
	mustBounds(t, s, 9, 17)
	mustLogMissing(t, s, 18)

	// Empty and out-of-range ranges are no-ops.
	if err := s.DeleteRange(12, 11); err != nil {
		t.Fatalf("DeleteRange(12,11): %v", err)
	}
	if err := s.DeleteRange(100, 200); err != nil {
		t.Fatalf("DeleteRange(100,200): %v", err)
	}
	mustBounds(t, s, 9, 17)
	for i := uint64(9); i <= 17; i++ {
		assertLogEqual(t, mustGetLog(t, s, i), logs[i-1])
	}

	// Everything: store is empty again, and usable afterwards.
	if err := s.DeleteRange(9, 17); err != nil {
		t.Fatalf("DeleteRange(9,17): %v", err)
	}
	mustBounds(t, s, 0, 0)
	mustStoreLogs(t, s, testRaftLog(30, "log30"))
	mustBounds(t, s, 30, 30)
}

func TestLogStore_DeleteRangeWithGaps(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	// raft allows non-contiguous StoreLogs (e.g. after restoring a snapshot).
	mustStoreLogs(t, s, testRaftLog(1, "a"), testRaftLog(2, "b"), testRaftLog(3, "c"))
	mustStoreLogs(t, s, testRaftLog(10, "d"), testRaftLog(11, "e"), testRaftLog(20, "f"))
	mustBounds(t, s, 1, 20)

	if err := s.DeleteRange(1, 5); err != nil {
		t.Fatalf("DeleteRange(1,5): %v", err)
	}
	mustBounds(t, s, 10, 20)
	if err := s.DeleteRange(15, 25); err != nil {
		t.Fatalf("DeleteRange(15,25): %v", err)
	}
	mustBounds(t, s, 10, 11)
	if err := s.DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatalf("DeleteRange(0,max): %v", err)
	}
	mustBounds(t, s, 0, 0)

	// Storing below the previous first index after a gap moves first down.
	mustStoreLogs(t, s, testRaftLog(7, "g"))
	mustStoreLogs(t, s, testRaftLog(5, "h"))
	mustBounds(t, s, 5, 7)
}

func TestStableStore_SetGet(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	k, v := []byte("hello"), []byte("world")

	if _, err := s.Get(k); err == nil || err.Error() != "not found" {
		t.Fatalf("Get missing err = %v, want Error()==\"not found\"", err)
	}
	if err := s.Set(k, v); err != nil {
		t.Fatalf("Set: %v", err)
	}
	got, err := s.Get(k)
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("Get = %q, %v; want %q, nil", got, err, v)
	}
	if err := s.Set(k, []byte("again")); err != nil {
		t.Fatalf("Set overwrite: %v", err)
	}
	if got, err := s.Get(k); err != nil || string(got) != "again" {
		t.Fatalf("Get after overwrite = %q, %v", got, err)
	}

	// Stable keys never show up as log entries and vice versa.
	mustBounds(t, s, 0, 0)
	mustStoreLogs(t, s, testRaftLog(1, "x"))
	if _, err := s.Get([]byte{}); err != ErrKeyNotFound {
		t.Fatalf("Get(empty key) err = %v, want ErrKeyNotFound", err)
	}
}

func TestStableStore_GetMissingIsRaftNotFound(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	_, err := s.Get([]byte("CurrentTerm"))
	if err != ErrKeyNotFound {
		t.Fatalf("Get missing err = %v, want ErrKeyNotFound (unwrapped)", err)
	}
	// raft checks the text, not the identity.
	if err.Error() != "not found" {
		t.Fatalf("Get missing err text = %q, want %q", err.Error(), "not found")
	}
}

func TestStableStore_SetUint64GetUint64(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	k := []byte("CurrentTerm")

	got, err := s.GetUint64(k)
	if got != 0 || err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 missing = %d, %v; want 0, \"not found\"", got, err)
	}
	for _, v := range []uint64{0, 1, 42, 1 << 40, math.MaxUint64} {
		if err := s.SetUint64(k, v); err != nil {
			t.Fatalf("SetUint64(%d): %v", v, err)
		}
		got, err := s.GetUint64(k)
		if err != nil || got != v {
			t.Fatalf("GetUint64 = %d, %v; want %d, nil", got, err, v)
		}
	}

	// A value that is not 8 bytes is reported, not misread.
	if err := s.Set([]byte("short"), []byte{1, 2}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if v, err := s.GetUint64([]byte("short")); err == nil {
		t.Fatalf("GetUint64 of a 2-byte value = %d, nil; want error", v)
	}
}

// ---- persistence, big batches, lifecycle ---------------------------------

func TestLogStore_PersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpenLogStore(t, dir)

	appended := time.Unix(1_700_000_000, 123456789)
	var logs []*raft.Log
	for i := uint64(1); i <= 50; i++ {
		logs = append(logs, &raft.Log{
			Index: i, Term: 3, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("cmd-%d", i)), Extensions: []byte{byte(i)},
			AppendedAt: appended.Add(time.Duration(i)),
		})
	}
	mustStoreLogs(t, s, logs...)
	if err := s.DeleteRange(1, 10); err != nil { // tombstones must persist too
		t.Fatalf("DeleteRange: %v", err)
	}
	if err := s.DeleteRange(45, 50); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-7")); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatalf("SetUint64: %v", err)
	}
	mustClose(t, s)

	if _, err := s.LastIndex(); err == nil {
		t.Fatal("LastIndex on a closed store succeeded")
	}

	s2 := mustOpenLogStore(t, dir)
	mustBounds(t, s2, 11, 44)
	for i := uint64(1); i <= 50; i++ {
		if i <= 10 || i >= 45 {
			mustLogMissing(t, s2, i)
			continue
		}
		assertLogEqual(t, mustGetLog(t, s2, i), logs[i-1])
	}
	if v, err := s2.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-7" {
		t.Fatalf("Get after reopen = %q, %v", v, err)
	}
	if v, err := s2.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Fatalf("GetUint64 after reopen = %d, %v", v, err)
	}
}

func TestLogStore_LargeBatchSplitsTransactions(t *testing.T) {
	const n = 20000
	s := mustOpenLogStore(t, t.TempDir())

	payload := func(i uint64) []byte {
		b := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 512) // 1 KiB
		binary.BigEndian.PutUint64(b, i)
		return b
	}
	logs := make([]*raft.Log, n)
	for i := range logs {
		idx := uint64(i + 1)
		logs[i] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: payload(idx)}
	}

	// Precondition: with the store's Badger options this batch really does
	// not fit one transaction, so StoreLogs must have split it.
	func() {
		txn := s.db.NewTransaction(true)
		defer txn.Discard()
		for i, l := range logs {
			err := txn.Set(logKey(l.Index), encodeLog(l))
			if errors.Is(err, badger.ErrTxnTooBig) {
				t.Logf("one Badger txn holds %d of %d entries", i, n)
				return
			}
			if err != nil {
				t.Fatalf("txn.Set: %v", err)
			}
		}
		t.Fatalf("all %d entries fit one txn; the test no longer exercises splitting", n)
	}()

	mustStoreLogs(t, s, logs...)
	mustBounds(t, s, 1, n)
	for _, want := range logs {
		got := mustGetLog(t, s, want.Index)
		if got.Index != want.Index || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d: got index %d, %d data bytes; want %d bytes", want.Index, got.Index, len(got.Data), len(want.Data))
		}
	}

	// Deleting almost all of it also needs several transactions and chunks.
	if err := s.DeleteRange(1, n-10); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	mustBounds(t, s, n-9, n)
	mustLogMissing(t, s, 1)
	mustLogMissing(t, s, n/2)
	mustLogMissing(t, s, n-10)
	assertLogEqual(t, mustGetLog(t, s, n-9), logs[n-10])
}

func TestLogStore_UseAfterClose(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	mustStoreLogs(t, s, testRaftLog(1, "a"))
	mustClose(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err == nil || err == raft.ErrLogNotFound {
		t.Fatalf("GetLog after Close err = %v, want a closed-store error", err)
	}
	if err := s.StoreLog(testRaftLog(2, "b")); err == nil {
		t.Fatal("StoreLog after Close succeeded")
	}
	if err := s.DeleteRange(1, 1); err == nil {
		t.Fatal("DeleteRange after Close succeeded")
	}
	if _, err := s.FirstIndex(); err == nil {
		t.Fatal("FirstIndex after Close succeeded")
	}
	if err := s.Set([]byte("k"), []byte("v")); err == nil {
		t.Fatal("Set after Close succeeded")
	}
	if _, err := s.Get([]byte("k")); err == nil || err == ErrKeyNotFound {
		t.Fatalf("Get after Close err = %v, want a closed-store error", err)
	}
}

func TestLogStore_ConcurrentReadersAndWriter(t *testing.T) {
	s := mustOpenLogStore(t, t.TempDir())
	const batches, perBatch = 50, 20

	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				last, err := s.LastIndex()
				if err != nil {
					errs <- err
					return
				}
				if last < prev {
					errs <- fmt.Errorf("LastIndex went backwards: %d after %d", last, prev)
					return
				}
				prev = last
				if last == 0 {
					continue
				}
				var l raft.Log
				if err := s.GetLog(last, &l); err != nil {
					errs <- fmt.Errorf("GetLog(LastIndex=%d): %w", last, err)
					return
				}
				if l.Index != last {
					errs <- fmt.Errorf("GetLog(%d) returned index %d", last, l.Index)
					return
				}
			}
		}()
	}
	for b := 0; b < batches; b++ {
		var logs []*raft.Log
		for i := 0; i < perBatch; i++ {
			idx := uint64(b*perBatch + i + 1)
			logs = append(logs, testRaftLog(idx, fmt.Sprint(idx)))
		}
		mustStoreLogs(t, s, logs...)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mustBounds(t, s, 1, batches*perBatch)
}

func TestLogStore_EncodingRejectsCorruptInput(t *testing.T) {
	want := &raft.Log{
		Index: 300, Term: 5, Type: raft.LogCommand, Data: []byte("payload"),
		Extensions: []byte("ext"), AppendedAt: time.Unix(1_700_000_000, 5),
	}
	enc := encodeLog(want)
	if enc[0] != logEncodingV1 {
		t.Fatalf("version byte = %d, want %d", enc[0], logEncodingV1)
	}
	var got raft.Log
	if err := decodeLog(enc, &got); err != nil {
		t.Fatalf("decodeLog: %v", err)
	}
	assertLogEqual(t, &got, want)

	for n := 0; n < len(enc); n++ {
		if err := decodeLog(enc[:n], &got); err == nil {
			t.Fatalf("decodeLog of %d/%d bytes succeeded", n, len(enc))
		}
	}
	if err := decodeLog(append(append([]byte{}, enc...), 0), &got); err == nil {
		t.Fatal("decodeLog with a trailing byte succeeded")
	}
	bad := append([]byte{}, enc...)
	bad[0] = 99
	if err := decodeLog(bad, &got); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("decodeLog with version 99 err = %v, want unknown version", err)
	}
	noTime := encodeLog(&raft.Log{Index: 1})
	noTime[len(noTime)-1] = 0x80 // unknown flag bit
	if err := decodeLog(noTime, &got); err == nil {
		t.Fatal("decodeLog with unknown flags succeeded")
	}
}

func TestLogStore_BadgerLoggerForwardsOnlyWarnings(t *testing.T) {
	var buf bytes.Buffer
	l := badgerLogger{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Infof("info %d\n", 1)
	l.Debugf("debug %d\n", 2)
	if buf.Len() != 0 {
		t.Fatalf("info/debug were forwarded: %q", buf.String())
	}
	l.Warningf("warn %d\n", 3)
	l.Errorf("boom %s\n", "x")
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, `msg="warn 3"`) ||
		!strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="boom x"`) {
		t.Fatalf("unexpected forwarded output: %q", out)
	}
}

// ---- a real raft on top of the store -------------------------------------

// countingFSM records every command it applies (each an 8-byte big-endian
// sequence number) and returns the running count from Apply.
type countingFSM struct {
	mu      sync.Mutex
	applied []uint64
}

func (f *countingFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Type != raft.LogCommand || len(l.Data) != 8 {
		return fmt.Errorf("unexpected log %+v", l)
	}
	f.applied = append(f.applied, binary.BigEndian.Uint64(l.Data))
	return len(f.applied)
}

func (f *countingFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countingSnapshot(append([]uint64(nil), f.applied...)), nil
}

func (f *countingFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var applied []uint64
	if err := json.NewDecoder(rc).Decode(&applied); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = applied
	return nil
}

func (f *countingFSM) snapshot() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.applied...)
}

type countingSnapshot []uint64

func (s countingSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]uint64(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countingSnapshot) Release() {}

func testRaftConfig() *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = "node1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	// No snapshots: the restart must replay every command from the log.
	conf.SnapshotThreshold = math.MaxUint64 / 2
	conf.SnapshotInterval = time.Hour
	conf.LogOutput = io.Discard
	return conf
}

func mustNewRaft(t *testing.T, store *logStore, fsm raft.FSM, addr raft.ServerAddress) (*raft.Raft, raft.ServerAddress) {
	t.Helper()
	addr, trans := raft.NewInmemTransport(addr)
	r, err := raft.NewRaft(testRaftConfig(), fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	return r, addr
}

func mustBecomeLeader(t *testing.T, r *raft.Raft) {
	t.Helper()
	mustEventually(t, 10*time.Second, "single node to become leader", func() (bool, string) {
		return r.State() == raft.Leader, r.State().String()
	})
}

func mustApply(t *testing.T, r *raft.Raft, seq uint64) any {
	t.Helper()
	f := r.Apply(binary.BigEndian.AppendUint64(nil, seq), 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("Apply(%d): %v", seq, err)
	}
	return f.Response()
}

func TestLogStore_RaftSingleNodeReplaysAfterRestart(t *testing.T) {
	const n = 100
	dir := t.TempDir()

	// First life: bootstrap, apply n commands.
	store := mustOpenLogStore(t, dir)
	fsm := &countingFSM{}
	r, addr := mustNewRaft(t, store, fsm, "")
	boot := raft.Configuration{Servers: []raft.Server{{ID: "node1", Address: addr}}}
	if err := r.BootstrapCluster(boot).Error(); err != nil {
		t.Fatalf("BootstrapCluster: %v", err)
	}
	mustBecomeLeader(t, r)
	for i := uint64(1); i <= n; i++ {
		if resp := mustApply(t, r, i); resp != int(i) {
			t.Fatalf("Apply(%d) response = %v, want %d", i, resp, i)
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	last, err := store.LastIndex()
	if err != nil || last < n+1 { // bootstrap configuration + n commands (+ leader no-ops)
		t.Fatalf("LastIndex after %d applies = %d, %v", n, last, err)
	}
	if term, err := store.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
		t.Fatalf("raft did not persist CurrentTerm in the stable store: %d, %v", term, err)
	}
	mustClose(t, store)

	// Second life: same directory, fresh FSM, no bootstrap.
	store2 := mustOpenLogStore(t, dir)
	mustBounds(t, store2, 1, last)
	existing, err := raft.HasExistingState(store2, store2, raft.NewInmemSnapshotStore())
	if err != nil || !existing {
		t.Fatalf("HasExistingState = %v, %v; want true", existing, err)
	}
	fsm2 := &countingFSM{}
	r2, _ := mustNewRaft(t, store2, fsm2, addr)
	mustBecomeLeader(t, r2)
	mustEventually(t, 10*time.Second, "FSM to replay all commands", func() (bool, string) {
		got := fsm2.snapshot()
		return len(got) >= n, fmt.Sprintf("%d applied", len(got))
	})
	got := fsm2.snapshot()
	if len(got) != n {
		t.Fatalf("replayed %d commands, want %d", len(got), n)
	}
	for i, v := range got {
		if v != uint64(i+1) {
			t.Fatalf("replayed command %d = %d, want %d (order or content lost)", i, v, i+1)
		}
	}

	// And the cluster keeps working on the reopened store.
	if resp := mustApply(t, r2, n+1); resp != n+1 {
		t.Fatalf("Apply after restart response = %v, want %d", resp, n+1)
	}
	if err := r2.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if last2, err := store2.LastIndex(); err != nil || last2 <= last {
		t.Fatalf("LastIndex after restart apply = %d, %v; want > %d", last2, err, last)
	}
}

func TestLogStore_RaftSnapshotCompactsLog(t *testing.T) {
	// A user snapshot makes raft call DeleteRange on the head of the log,
	// keeping TrailingLogs entries; the store's bounds must follow.
	store := mustOpenLogStore(t, t.TempDir())
	fsm := &countingFSM{}
	conf := testRaftConfig()
	conf.TrailingLogs = 10
	addr, trans := raft.NewInmemTransport("")
	r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}).Error(); err != nil {
		t.Fatalf("BootstrapCluster: %v", err)
	}
	mustBecomeLeader(t, r)
	for i := uint64(1); i <= 50; i++ {
		mustApply(t, r, i)
	}
	if err := r.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	first, err := store.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if first <= 1 || last-first+1 != conf.TrailingLogs {
		t.Fatalf("after snapshot bounds = [%d, %d], want %d trailing logs", first, last, conf.TrailingLogs)
	}
	mustLogMissing(t, store, first-1)
	if l := mustGetLog(t, store, last); l.Index != last {
		t.Fatalf("GetLog(%d) index = %d", last, l.Index)
	}
}
