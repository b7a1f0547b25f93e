package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// ---- helpers -------------------------------------------------------------------

// backupDump reads a backup into a dump (key order), failing on any damage.
func backupDump(t *testing.T, b []byte) ([]kv, BackupInfo) {
	t.Helper()
	var out []kv
	info, err := ReadBackup(bytes.NewReader(b), func(k, v []byte) error {
		out = append(out, kv{key: k, val: v})
		return nil
	})
	if err != nil {
		t.Fatalf("read backup: %v", err)
	}
	if info.Bytes != int64(len(b)) {
		t.Fatalf("backup info says %d bytes, the stream has %d", info.Bytes, len(b))
	}
	if info.Records != uint64(len(out)) {
		t.Fatalf("backup info says %d records, fn saw %d", info.Records, len(out))
	}
	return out, info
}

// mustBackup takes a backup of s.
func mustBackup(t *testing.T, s *Store) ([]byte, uint64) {
	t.Helper()
	var buf bytes.Buffer
	rev, err := s.Backup(ctxT(t, 20*time.Second), &buf)
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	return buf.Bytes(), rev
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

func mustRestoreDir(t *testing.T, dir, id, raftAddr string, backup []byte) RestoreInfo {
	t.Helper()
	info, err := Restore(ctxT(t, 30*time.Second), RestoreConfig{Dir: dir, NodeID: id, RaftAdvertise: raftAddr, From: bytes.NewReader(backup), Logger: testLogger()})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return info
}

// openRestored opens a restored dir as serve would: no join, Bootstrap set
// (ignored, as the dir has state).
func openRestored(t *testing.T, dir, id, raftAddr, httpURL string) *Store {
	t.Helper()
	var ln net.Listener
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if ln, err = net.Listen("tcp", raftAddr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen %s: %v", raftAddr, err)
	}
	s, err := Open(Config{NodeID: id, Dir: dir, RaftListener: ln, RaftAdvertise: raftAddr, HTTPAdvertise: httpURL,
		Bootstrap: true, Secret: testSecret, Voter: true, Logger: testLogger(), Tuning: fastTuning()})
	if err != nil {
		_ = ln.Close()
		t.Fatalf("open restored %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// docsOf is every document of a dump by path, minus the given path prefixes.
func docsOf(t *testing.T, d []kv, drop ...string) map[string]*Document {
	t.Helper()
	out := map[string]*Document{}
next:
	for _, e := range d {
		if len(e.key) == 0 || e.key[0] != spaceDoc {
			continue
		}
		p := string(e.key[1:])
		for _, pre := range drop {
			if strings.HasPrefix(p, pre) {
				continue next
			}
		}
		doc, err := decodeDoc(p, e.val)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = doc
	}
	return out
}

func storeDump(t *testing.T, s *Store) []kv { return dumpDB(t, s.fsm) }

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read dir %s: %v", dir, err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// seedStore writes a mix of documents, updates, deletes, a node record and a
// removal tombstone; it returns the revision of the last write.
func seedStore(t *testing.T, s *Store) uint64 {
	t.Helper()
	if err := s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("EnsureNodeRecord: %v", err)
	}
	for i := 0; i < 50; i++ {
		mustTxn(t, s, put(fmt.Sprintf("p1/c/d%02d", i), fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", i*100))))
	}
	mustTxn(t, s, put("_sys/sessions/abc", `{"user":"u1"}`), put("_sys/projects/p1", `{"name":"one"}`))
	mustTxn(t, s, put("_sys/nodes/old2", `{"id":"old2","httpAddr":"http://old2:8080"}`), put(RemovedPath("gone"), `{"id":"gone"}`))
	mustTxn(t, s, del("p1/c/d07"), renameField("p1/c/d08", "i", "j", `8`))
	res := mustTxn(t, s, setField("p1/c/d09", "k", `true`), put("p1/c/d09/sub", `{"deep":1}`))
	return res.Revision
}

// ---- round trip -------------------------------------------------------------------

func TestRestore_RoundTripKeepsDocumentsAndRevisionsGoOn(t *testing.T) {
	src := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, src)
	last := seedStore(t, src)
	backup, rev := mustBackup(t, src)
	if rev < last {
		t.Fatalf("backup revision %d < last acknowledged write %d", rev, last)
	}
	want := storeDump(t, src)
	dump, info := backupDump(t, backup)
	if info.Revision != rev || info.NodeID != "n1" || info.Format != backupFormat || time.Since(info.CreatedAt) > time.Minute {
		t.Fatalf("backup header %+v, revision %d", info, rev)
	}
	assertSameDump(t, "backup of an idle store", dump, want)

	dir := filepath.Join(t.TempDir(), "restored")
	addr := freeAddr(t)
	ri := mustRestoreDir(t, dir, "r1", addr, backup)
	if ri.Backup.Revision != rev || ri.Backup.Records != info.Records {
		t.Fatalf("restore info %+v, want revision %d and %d records", ri, rev, info.Records)
	}
	if !slices.Equal(ri.OldMembers, []string{"n1", "old2"}) || !slices.Equal(ri.OldRemovals, []string{"gone"}) {
		t.Fatalf("dropped members %v and removals %v", ri.OldMembers, ri.OldRemovals)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{walDirName, "snapshots", "tree"}) {
		t.Fatalf("restored dir holds %v", got)
	}
	if idx := latestSnapshot(t, dir); idx.Index != rev || idx.Term != restoreTerm ||
		len(idx.Configuration.Servers) != 1 || idx.Configuration.Servers[0].ID != "r1" || string(idx.Configuration.Servers[0].Address) != addr {
		t.Fatalf("restored snapshot %+v, want index %d and r1 at %s alone", idx, rev, addr)
	}

	s := openRestored(t, dir, "r1", addr, "http://127.0.0.1:1")
	if !s.HasState() {
		t.Fatal("restored store has no state: it would bootstrap or join")
	}
	// rev, or rev+1 once the node has led (its first entry is a no-op).
	if got := s.AppliedIndex(); got != rev && got != rev+1 {
		t.Fatalf("restored applied index %d, want %d", got, rev)
	}
	// Before anything new is written: the same tree, minus the old membership.
	drop := []string{"_sys/nodes/", "_sys/removed/"}
	wantDocs := docsOf(t, want, drop...)
	gotDump := storeDump(t, s)
	gotDocs := docsOf(t, gotDump)
	if len(gotDocs) != len(wantDocs) {
		t.Fatalf("restored %d documents, want %d", len(gotDocs), len(wantDocs))
	}
	for p, w := range wantDocs {
		if g := gotDocs[p]; !sameDoc(g, w) {
			t.Fatalf("%s restored as %+v, want %+v", p, g, w)
		}
	}
	// The change log came along: a realtime client can resume from it.
	evs, upTo, err := s.ChangesSince(last-1, 100)
	if err != nil || upTo < last || len(evs) == 0 || evs[len(evs)-1].Revision != last {
		t.Fatalf("ChangesSince(%d) on the restored store = %d events up to %d, %v", last-1, len(evs), upTo, err)
	}

	mustEventually(t, 10*time.Second, "restored node to lead", func() (bool, string) {
		return s.IsLeader() && s.LeaderID() == "r1", s.raft.State().String()
	})
	if err := s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("EnsureNodeRecord on the restored store: %v", err)
	}
	res := mustTxn(t, s, put("p1/c/after", `{"new":true}`), setField("p1/c/d01", "more", `1`))
	if res.Revision <= rev {
		t.Fatalf("first write after restore has revision %d, not above the backup's %d", res.Revision, rev)
	}
	if d := mustGet(t, s, "p1/c/d01"); d.Revision != res.Revision || d.CreateRevision != wantDocs["p1/c/d01"].CreateRevision {
		t.Fatalf("updated d01 = %+v", d)
	}
	st, err := s.Status(ctxT(t, 5*time.Second))
	if err != nil || len(st.Nodes) != 1 || st.Nodes[0].ID != "r1" || st.Nodes[0].RaftAddr != addr || st.Leader != "r1" {
		t.Fatalf("restored cluster status %+v, %v", st, err)
	}
	for _, p := range []string{NodeRecordPath("n1"), NodeRecordPath("old2"), RemovedPath("gone")} {
		mustNoDocStore(t, s, p)
	}

	// A restart keeps all of it, and revisions go on from there.
	mustCloseStore(t, s)
	s = openRestored(t, dir, "r1", addr, "http://127.0.0.1:1")
	mustEventually(t, 10*time.Second, "restored node to lead again", func() (bool, string) { return s.IsLeader(), "" })
	if d := mustGet(t, s, "p1/c/after"); d.Revision != res.Revision {
		t.Fatalf("after restart: %+v", d)
	}
	if d := mustGet(t, s, "p1/c/d20"); !sameDoc(d, wantDocs["p1/c/d20"]) {
		t.Fatalf("after restart: d20 = %+v", d)
	}
	if res2 := mustTxn(t, s, put("p1/c/again", `{}`)); res2.Revision <= res.Revision {
		t.Fatalf("revision after restart %d <= %d", res2.Revision, res.Revision)
	}
}

// latestSnapshot is the newest snapshot's metadata in dir/snapshots.
func latestSnapshot(t *testing.T, dir string) *raft.SnapshotMeta {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "snapshots"), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("snapshots: %d, %v", len(list), err)
	}
	return list[0]
}

// A node that joins the restored one catches up from the restored snapshot
// (the leader's log starts above it) and then follows new writes.
func TestRestore_JoinerCatchesUpFromTheSnapshot(t *testing.T) {
	src := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, src)
	seedStore(t, src)
	backup, rev := mustBackup(t, src)
	want := docsOf(t, storeDump(t, src), "_sys/nodes/", "_sys/removed/")
	mustCloseStore(t, src)

	base := t.TempDir()
	type member struct {
		s   *Store
		h   atomic.Pointer[http.Handler]
		srv *httptest.Server
	}
	newMember := func() *member {
		m := &member{}
		m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := m.h.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
		}))
		t.Cleanup(m.srv.Close)
		return m
	}
	r1, r2 := newMember(), newMember()
	addr1 := freeAddr(t)
	mustRestoreDir(t, filepath.Join(base, "r1"), "r1", addr1, backup)
	r1.s = openRestored(t, filepath.Join(base, "r1"), "r1", addr1, r1.srv.URL)
	h1 := r1.s.InternalHandler()
	r1.h.Store(&h1)
	mustEventually(t, 10*time.Second, "r1 to lead", func() (bool, string) { return r1.s.IsLeader(), "" })
	if err := r1.s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r2.s, err = Open(Config{NodeID: "r2", Dir: filepath.Join(base, "r2"), RaftListener: ln, RaftAdvertise: ln.Addr().String(),
		HTTPAdvertise: r2.srv.URL, Secret: testSecret, Voter: true, Logger: testLogger(), Tuning: fastTuning()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.s.Close() })
	h2 := r2.s.InternalHandler()
	r2.h.Store(&h2)
	if err := r2.s.JoinCluster(ctxT(t, 20*time.Second), []string{r1.srv.URL}); err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := r2.s.EnsureNodeRecord(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("r2 record: %v", err)
	}
	res := mustTxn(t, r2.s, put("p1/c/through-r2", `{"x":1}`)) // forwarded to r1
	if res.Revision <= rev {
		t.Fatalf("revision %d after the join, not above %d", res.Revision, rev)
	}
	if err := r2.s.WaitRead(ctxT(t, 10*time.Second), Strong, 0); err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		if g := mustGet(t, r2.s, p); !sameDoc(g, w) {
			t.Fatalf("r2 has %s = %+v, want %+v", p, g, w)
		}
	}
	mustGet(t, r2.s, "p1/c/through-r2")
	// It got there by installing a snapshot (fsm.Restore switches the tree
	// to a new generation), as the leader's log starts above the backup.
	if gen := readCurrent(t, filepath.Join(base, "r2", "tree")); gen != "1" {
		t.Fatalf("r2's tree generation is %q: it did not catch up from a snapshot", gen)
	}
	mustNoDocStore(t, r2.s, NodeRecordPath("n1"))
	assertSameDump(t, "r2 against r1", withoutApplied(storeDump(t, r2.s)), withoutApplied(storeDump(t, r1.s)))
}

// ---- refusals ---------------------------------------------------------------------

func TestRestore_RefusesDamagedBackupsAndLeavesTheDirAlone(t *testing.T) {
	src := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, src)
	seedStore(t, src)
	good, _ := mustBackup(t, src)
	_, info := backupDump(t, good)
	hdrEnd := len(backupMagic) + 1
	_, n := binary.Uvarint(good[hdrEnd:])
	hdrLen, _ := binary.Uvarint(good[hdrEnd:])
	firstRecord := hdrEnd + n + int(hdrLen)

	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x40
		return b
	}
	withVersion := func(v byte) []byte {
		b := bytes.Clone(good)
		b[len(backupMagic)] = v
		return b
	}
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"empty", nil, "empty"},
		{"short", []byte("edge"), "too short"},
		{"garbage", bytes.Repeat([]byte("garbage!"), 1000), "marker"},
		{"a plain badger backup", append([]byte{0x10, 0, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{1}, 64)...), "marker"},
		{"unknown version", withVersion(9), "format version 9"},
		{"cut in the header", good[:hdrEnd+3], "truncated"},
		{"cut before the first record", good[:firstRecord], "truncated"},
		{"cut in a record", good[:firstRecord+len(good[firstRecord:])/2], "truncated"},
		{"cut before the end record", good[:len(good)-sha256Len-2], "truncated"},
		{"cut in the checksum", good[:len(good)-1], "truncated"},
		{"a flipped bit in a value", flip(len(good) - sha256Len - 40), "checksum"},
		{"a flipped bit in the checksum", flip(len(good) - 1), "checksum"},
		{"trailing bytes", append(bytes.Clone(good), 0), "after the end record"},
		{"two backups back to back", append(bytes.Clone(good), good...), "after the end record"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := VerifyBackup(bytes.NewReader(tc.data)); !errors.Is(err, ErrInvalidBackup) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("VerifyBackup: %v; want ErrInvalidBackup mentioning %q", err, tc.msg)
			}
			// A directory that does not exist yet is not left behind.
			absent := filepath.Join(t.TempDir(), "absent")
			_, err := Restore(ctxT(t, 20*time.Second), RestoreConfig{Dir: absent, NodeID: "r1", RaftAdvertise: "127.0.0.1:7000", From: bytes.NewReader(tc.data)})
			if !errors.Is(err, ErrInvalidBackup) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Restore: %v; want ErrInvalidBackup mentioning %q", err, tc.msg)
			}
			if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("failed restore left %s behind (%v)", absent, err)
			}
			// An empty one stays empty.
			empty := t.TempDir()
			if _, err := Restore(ctxT(t, 20*time.Second), RestoreConfig{Dir: empty, NodeID: "r1", RaftAdvertise: "127.0.0.1:7000", From: bytes.NewReader(tc.data)}); !errors.Is(err, ErrInvalidBackup) {
				t.Fatalf("Restore into an empty dir: %v", err)
			}
			if got := dirEntries(t, empty); len(got) != 0 {
				t.Fatalf("failed restore left %v in %s", got, empty)
			}
		})
	}
	// The intact one restores, with every record of it.
	ri := mustRestoreDir(t, filepath.Join(t.TempDir(), "ok"), "r1", "127.0.0.1:7000", good)
	if ri.Backup.Records != info.Records {
		t.Fatalf("restored %d records, want %d", ri.Backup.Records, info.Records)
	}
}

const sha256Len = 32

// errReader fails the test if anything reads it.
type errReader struct{ t *testing.T }

func (r errReader) Read([]byte) (int, error) {
	r.t.Error("the backup was read although the restore was refused")
	return 0, io.EOF
}

func TestRestore_RefusesNonEmptyDirAndBadConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(ctxT(t, 5*time.Second), RestoreConfig{Dir: dir, NodeID: "r1", RaftAdvertise: "127.0.0.1:7000", From: errReader{t}})
	if !errors.Is(err, ErrDirNotEmpty) || !strings.Contains(err.Error(), "keep.txt") {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"keep.txt"}) {
		t.Fatalf("refused restore changed the dir: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(b) != "precious" {
		t.Fatalf("refused restore changed a file: %q", b)
	}

	// A previous node's data dir is the case that matters most.
	src := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, src)
	good, _ := mustBackup(t, src)
	used := src.cfg.Dir
	mustCloseStore(t, src)
	before := dirEntries(t, used)
	if _, err := Restore(ctxT(t, 5*time.Second), RestoreConfig{Dir: used, NodeID: "r1", RaftAdvertise: "127.0.0.1:7000", From: bytes.NewReader(good)}); !errors.Is(err, ErrDirNotEmpty) {
		t.Fatalf("restore over a node's data dir: %v", err)
	}
	if got := dirEntries(t, used); !slices.Equal(got, before) {
		t.Fatalf("refused restore changed %v into %v", before, got)
	}

	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctxT(t, 5*time.Second), RestoreConfig{Dir: file, NodeID: "r1", RaftAdvertise: "127.0.0.1:7000", From: errReader{t}}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("restore into a file: %v", err)
	}

	// An empty lost+found (a fresh filesystem) does not count.
	fresh := t.TempDir()
	if err := os.Mkdir(filepath.Join(fresh, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	mustRestoreDir(t, fresh, "r1", "127.0.0.1:7000", good)

	for _, cfg := range []RestoreConfig{
		{NodeID: "r1", RaftAdvertise: "a:1", From: errReader{t}},
		{Dir: t.TempDir(), RaftAdvertise: "a:1", From: errReader{t}},
		{Dir: t.TempDir(), NodeID: "r1", From: errReader{t}},
		{Dir: t.TempDir(), NodeID: "r1", RaftAdvertise: "a:1"},
	} {
		if _, err := Restore(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "needs") {
			t.Fatalf("Restore(%+v) = %v; want a missing-field error", cfg, err)
		}
	}

	// A cancelled restore leaves nothing behind either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	absent := filepath.Join(t.TempDir(), "x")
	if _, err := Restore(ctx, RestoreConfig{Dir: absent, NodeID: "r1", RaftAdvertise: "a:1", From: bytes.NewReader(good)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled restore: %v", err)
	}
	if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cancelled restore left %s (%v)", absent, err)
	}
}

// ---- backups under load -------------------------------------------------------------

// Backups taken while Apply commits batches are each one consistent view:
// the header's revision is the applied index inside, and the documents are
// exactly those of the entries up to it (entry i writes c/k<i>).
func TestBackup_ConsistentWhileApplying(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	const entries = 3000
	logs := make([]*raft.Log, entries)
	for i := range logs {
		idx := uint64(i + 1)
		logs[i] = txnLog(t, idx, &Txn{Time: testTime(idx), Ops: []Op{put(fmt.Sprintf("c/k%04d", idx), fmt.Sprintf(`{"v":%d,"pad":%q}`, idx, strings.Repeat("p", 200)))}})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		applyInBatches(f, logs, func() int { return 7 })
	}()
	var backups int
	midway := 0
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		var buf bytes.Buffer
		f.mu.RLock()
		db := f.db
		f.mu.RUnlock()
		if _, err := writeBackup(context.Background(), db, "n1", time.Now(), &buf); err != nil {
			t.Fatalf("writeBackup: %v", err)
		}
		backups++
		d, info := backupDump(t, buf.Bytes())
		if got := dumpApplied(t, d); got != info.Revision {
			t.Fatalf("backup %d: header revision %d, applied index inside %d", backups, info.Revision, got)
		}
		if info.Revision < entries {
			midway++
		}
		keys := dumpKeys(d)
		if uint64(len(keys)) != info.Revision {
			t.Fatalf("backup %d: revision %d but %d documents", backups, info.Revision, len(keys))
		}
		for j, k := range keys {
			if want := fmt.Sprintf("c/k%04d", j+1); k != want {
				t.Fatalf("backup %d: document %d is %s, want %s", backups, j, k, want)
			}
		}
	}
	t.Logf("%d backups, %d taken while applying", backups, midway)
}

// blockingWriter lets the first n bytes through, then blocks until released.
type blockingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	n       int
	blocked chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	over := w.buf.Len()+len(p) > w.n
	w.mu.Unlock()
	if over {
		w.once.Do(func() { close(w.blocked) })
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// A backup stalled mid-stream (a slow client) holds no lock that writes or
// reads need, and what it streams is the state of when it started.
func TestBackup_DoesNotBlockWritesOrReads(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	for i := 0; i < 40; i++ { // several chunks' worth
		mustTxn(t, s, put(fmt.Sprintf("p1/big/%02d", i), fmt.Sprintf(`{"pad":%q}`, strings.Repeat("b", 200<<10))))
	}
	start := s.AppliedIndex()
	w := &blockingWriter{n: 64 << 10, blocked: make(chan struct{}), release: make(chan struct{})}
	type result struct {
		rev uint64
		err error
	}
	res := make(chan result, 1)
	go func() {
		rev, err := s.Backup(context.Background(), w)
		res <- result{rev, err}
	}()
	select {
	case <-w.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("backup never wrote")
	}
	// While the backup is stuck: writes commit, reads answer, the change
	// log compacts, and a Raft snapshot is taken.
	var last *TxnResult
	for i := 0; i < 20; i++ {
		last = mustTxn(t, s, put(fmt.Sprintf("p1/during/%02d", i), `{"x":1}`), del(fmt.Sprintf("p1/big/%02d", i)))
	}
	mustGet(t, s, "p1/during/19")
	if err := s.WaitRead(ctxT(t, 5*time.Second), Strong, last.Revision); err != nil {
		t.Fatal(err)
	}
	if err := s.Snapshot(); err != nil {
		t.Fatalf("snapshot during a backup: %v", err)
	}
	close(w.release)
	r := <-res
	if r.err != nil {
		t.Fatalf("Backup: %v", r.err)
	}
	d, info := backupDump(t, w.buf.Bytes())
	if r.rev != info.Revision || info.Revision < start || info.Revision >= last.Revision {
		t.Fatalf("backup revision %d (header %d); started at %d, later writes up to %d", r.rev, info.Revision, start, last.Revision)
	}
	docs := docsOf(t, d)
	for i := 0; i < 40; i++ {
		if _, ok := docs[fmt.Sprintf("p1/big/%02d", i)]; !ok {
			t.Fatalf("backup lacks p1/big/%02d, deleted after it started", i)
		}
	}
	for p := range docs {
		if strings.HasPrefix(p, "p1/during/") {
			t.Fatalf("backup holds %s, written after it started", p)
		}
	}
}

// A backup stops when its context ends, and on a closed store.
func TestBackup_StopsOnCancelAndClose(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	for i := 0; i < 12; i++ {
		mustTxn(t, s, put(fmt.Sprintf("p1/big/%02d", i), fmt.Sprintf(`{"pad":%q}`, strings.Repeat("b", 200<<10))))
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancellingWriter{cancel: cancel}
	if _, err := s.Backup(ctx, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled backup: %v", err)
	}
	mustCloseStore(t, s)
	if _, err := s.Backup(context.Background(), io.Discard); err == nil {
		t.Fatal("backup of a closed store succeeded")
	}
}

// cancellingWriter cancels its backup on the first write.
type cancellingWriter struct{ cancel context.CancelFunc }

func (w *cancellingWriter) Write(p []byte) (int, error) { w.cancel(); return len(p), nil }

// ---- offline backups ----------------------------------------------------------------

// BackupDir reads a stopped node's data dir: the same state the node held,
// at its applied revision, which restores like any backup. It refuses a
// running node's dir, a dir without data, and a tree behind its snapshot.
func TestBackupDir_StoppedNode(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, "127.0.0.1:0", nil)
	mustLeader(t, s)
	seedStore(t, s)
	if _, err := BackupDir(context.Background(), dir, "n1", time.Now(), io.Discard); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("offline backup of a running node: %v", err)
	}
	want := storeDump(t, s)
	applied := s.AppliedIndex()
	mustCloseStore(t, s)

	var buf bytes.Buffer
	info, err := BackupDir(context.Background(), dir, "n1", time.Now(), &buf)
	if err != nil {
		t.Fatalf("BackupDir: %v", err)
	}
	dump, rinfo := backupDump(t, buf.Bytes())
	if info.Revision != applied || rinfo.Revision != applied || rinfo.NodeID != "n1" || info.Bytes != int64(buf.Len()) {
		t.Fatalf("offline backup %+v (read back %+v); applied was %d", info, rinfo, applied)
	}
	assertSameDump(t, "offline backup", dump, want)

	restored := filepath.Join(t.TempDir(), "r")
	addr := freeAddr(t)
	mustRestoreDir(t, restored, "r1", addr, buf.Bytes())
	r := openRestored(t, restored, "r1", addr, "http://127.0.0.1:1")
	mustEventually(t, 10*time.Second, "restored node to lead", func() (bool, string) { return r.IsLeader(), "" })
	if d := mustGet(t, r, "p1/c/d09/sub"); d.Revision > applied {
		t.Fatalf("restored %+v", d)
	}

	// A tree behind the newest snapshot (a node stopped while installing
	// one) is refused rather than backed up stale.
	snapDir := filepath.Join(dir, "snapshots", "9-999999-1")
	if err := os.MkdirAll(snapDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snapDir, "meta.json"), []byte(`{"Index":999999,"Term":9}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := BackupDir(context.Background(), dir, "n1", time.Now(), io.Discard); err == nil || !strings.Contains(err.Error(), "behind its newest snapshot") {
		t.Fatalf("offline backup of a tree behind its snapshot: %v", err)
	}
	if _, err := BackupDir(context.Background(), t.TempDir(), "", time.Now(), io.Discard); err == nil || !strings.Contains(err.Error(), "no edgebase data") {
		t.Fatalf("offline backup of an empty dir: %v", err)
	}
}
