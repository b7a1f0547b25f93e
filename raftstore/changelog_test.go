package raftstore

// Change log tests: what Apply writes to the log (fsm level, entries applied
// directly), ChangesSince paging, compaction by age and the floor, restart
// and replay, snapshot + Restore, SnapshotRead (one revision across pages,
// prefixes, paging, the guard against a concurrent Restore or close), and a
// few real single-node stores and one cluster for the paths raft drives.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// ---- helpers -----------------------------------------------------------------------

// clStore exposes an fsm through the Store read API: ChangesSince, LogFloor
// and SnapshotRead only use s.fsm.
func clStore(f *fsm) *Store { return &Store{fsm: f} }

// clAll is a page size that never cuts.
const clAll = 1 << 30

// clChanges returns every change above since in one call.
func clChanges(t *testing.T, s *Store, since uint64) ([]Event, uint64) {
	t.Helper()
	evs, upTo, err := s.ChangesSince(since, clAll)
	if err != nil {
		t.Fatalf("ChangesSince(%d): %v", since, err)
	}
	return evs, upTo
}

func clFloor(t *testing.T, s *Store) uint64 {
	t.Helper()
	f, err := s.LogFloor()
	if err != nil {
		t.Fatalf("LogFloor: %v", err)
	}
	return f
}

func clCompact(t *testing.T, f *fsm, cutoff int64) int {
	t.Helper()
	n, err := f.compactChangeLog(time.Unix(0, cutoff))
	if err != nil {
		t.Fatalf("compactChangeLog(%d): %v", cutoff, err)
	}
	return n
}

// clRaw is one change log record as stored.
type clRaw struct {
	rev  uint64
	seq  uint32
	time int64
	ev   Event
}

// clRawLog reads the change log space directly, bypassing ChangesSince.
func clRawLog(t *testing.T, f *fsm) []clRaw {
	t.Helper()
	var out []clRaw
	err := f.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{spaceChange}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			k := it.Item().KeyCopy(nil)
			if len(k) != 13 {
				return fmt.Errorf("change key %q has %d bytes, want 13", k, len(k))
			}
			r := clRaw{rev: binary.BigEndian.Uint64(k[1:]), seq: binary.BigEndian.Uint32(k[9:])}
			err := it.Item().Value(func(v []byte) error {
				var derr error
				r.ev, r.time, derr = decodeChange(r.rev, v)
				return derr
			})
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read raw change log: %v", err)
	}
	return out
}

// clDocs returns every document of the tree by path.
func clDocs(t *testing.T, f *fsm) map[string]*Document {
	t.Helper()
	out := map[string]*Document{}
	err := f.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{spaceDoc}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			key := it.Item().KeyCopy(nil)
			err := it.Item().Value(func(v []byte) error {
				d, derr := decodeDoc(string(key[1:]), v)
				out[d.Path] = d
				return derr
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read documents: %v", err)
	}
	return out
}

// clReplay applies events (those with a revision <= upTo) to state.
func clReplay(state map[string]*Document, evs []Event, upTo uint64) map[string]*Document {
	out := make(map[string]*Document, len(state))
	for p, d := range state {
		out[p] = d
	}
	for _, ev := range evs {
		if ev.Revision > upTo {
			break
		}
		if ev.Type == EventDelete {
			delete(out, ev.Path)
		} else {
			out[ev.Path] = ev.Doc
		}
	}
	return out
}

func clSameState(got, want map[string]*Document) (bool, string) {
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			return false, fmt.Sprintf("missing %s (revision %d)", p, w.Revision)
		}
		if !sameDoc(g, w) {
			return false, fmt.Sprintf("%s: got revision %d %s, want revision %d %s", p, g.Revision, abbrev(g.Data), w.Revision, abbrev(w.Data))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			return false, fmt.Sprintf("extra %s (revision %d)", p, g.Revision)
		}
	}
	return true, ""
}

// clUnder reports whether p is base or below it (what a prefix read covers).
func clUnder(p, base string) bool { return p == base || strings.HasPrefix(p, base+"/") }

func clFilter(state map[string]*Document, base string) map[string]*Document {
	out := map[string]*Document{}
	for p, d := range state {
		if clUnder(p, base) {
			out[p] = d
		}
	}
	return out
}

// clBetween returns the events with since < revision <= upTo.
func clBetween(evs []Event, since, upTo uint64) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Revision > since && ev.Revision <= upTo {
			out = append(out, ev)
		}
	}
	return out
}

func setEv(d *Document) Event {
	return Event{Revision: d.Revision, Path: d.Path, Type: EventSet, Doc: d}
}
func delEv(rev uint64, path string) Event {
	return Event{Revision: rev, Path: path, Type: EventDelete}
}

func doc(path, data string, rev, createRev uint64) *Document {
	return &Document{Path: path, Data: []byte(data), Revision: rev, CreateRevision: createRev, CreateTime: testTime(createRev), UpdateTime: testTime(rev)}
}

func clMustEvents(t *testing.T, what string, got, want []Event) {
	t.Helper()
	if ok, diff := sameEvents(got, want); !ok {
		t.Fatalf("%s: %s\n got: %s\nwant: %s", what, diff, clFmt(got), clFmt(want))
	}
}

func clFmt(evs []Event) string {
	var b strings.Builder
	for i, ev := range evs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s:%s", ev.Revision, ev.Type, ev.Path)
		if ev.Doc != nil {
			fmt.Fprintf(&b, "=%s", abbrev(ev.Doc.Data))
		}
	}
	return "[" + b.String() + "]"
}

// clSnapshotRead collects a whole SnapshotRead.
func clSnapshotRead(t *testing.T, s *Store, path string, prefix bool, pageSize int) (uint64, []uint64, [][]*Document) {
	t.Helper()
	var revs []uint64
	var pages [][]*Document
	rev, err := s.SnapshotRead(path, prefix, pageSize, func(rev uint64, docs []*Document) error {
		revs = append(revs, rev)
		pages = append(pages, docs)
		return nil
	})
	if err != nil {
		t.Fatalf("SnapshotRead(%q, %v, %d): %v", path, prefix, pageSize, err)
	}
	return rev, revs, pages
}

// clPagesState checks that pages hold no path twice and returns them by path.
func clPagesState(pages [][]*Document) (map[string]*Document, error) {
	out := map[string]*Document{}
	for _, pg := range pages {
		for _, d := range pg {
			if _, dup := out[d.Path]; dup {
				return nil, fmt.Errorf("%s returned twice", d.Path)
			}
			out[d.Path] = d
		}
	}
	return out, nil
}

// ---- what Apply writes -----------------------------------------------------------------

func TestChangeLog_RecordsEveryAppliedChange(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	if got := clFloor(t, s); got != 0 {
		t.Fatalf("fresh store: floor %d, want 0", got)
	}
	if evs, upTo := clChanges(t, s, 0); len(evs) != 0 || upTo != 0 {
		t.Fatalf("fresh store: %s up to %d, want nothing up to 0", clFmt(evs), upTo)
	}

	// 1: several documents in one Txn share its revision, in op order.
	mustOK(t, f, 1, &Txn{Ops: []Op{put("p/a", `{"v":1}`), put("p/b", `{"v":1}`), put("p/a/c", `{"v":3}`)}})
	// 2: field ops: one change per path, carrying the final document.
	mustOK(t, f, 2, &Txn{Ops: []Op{setField("p/a", "f", `2`), renameField("p/a", "v", "w", `"x"`), setField("p/a", "g", `[1]`), deleteField("p/a", "f")}})
	// 3: a delete, no document.
	mustOK(t, f, 3, &Txn{Ops: []Op{del("p/b")}})
	// 4: refused (condition), 5: refused (op), 6: noop, 7: configuration: nothing.
	if res := applyOne(t, f, 4, &Txn{Conds: []Cond{{Path: "p/a", Kind: CondNotExists}}, Ops: []Op{put("p/z", `{}`)}}); res.OK() {
		t.Fatal("entry 4 committed, want a refusal")
	}
	if res := applyOne(t, f, 5, &Txn{Ops: []Op{put("p/z", `{}`), del("p/missing")}}); res.OK() {
		t.Fatal("entry 5 committed, want a refusal")
	}
	f.ApplyBatch([]*raft.Log{noopLog(6), confLog(7)})
	// 8: a document created and deleted in one Txn is one delete.
	mustOK(t, f, 8, &Txn{Ops: []Op{put("p/t", `{"tmp":true}`), del("p/t")}})
	// 9: one change per path, in the order of each path's last write
	// (p/w before p/b, whose field op comes after p/w's put).
	mustOK(t, f, 9, &Txn{Ops: []Op{put("p/b", `{"v":9}`), put("p/w", `{}`), setField("p/b", "n", `1`), del("p/a/c")}})
	// 10: a delete of nothing with IfExists commits but changes nothing.
	mustOK(t, f, 10, &Txn{Ops: []Op{delIfExists("p/nothing")}})
	// 11..13 in one batch, the middle one refused.
	out := f.ApplyBatch([]*raft.Log{
		txnLog(t, 11, &Txn{Time: testTime(11), Ops: []Op{put("p/a", `{"v":11}`)}}),
		txnLog(t, 12, &Txn{Time: testTime(12), Ops: []Op{setField("p/none", "x", `1`)}}),
		txnLog(t, 13, &Txn{Time: testTime(13), Ops: []Op{del("p/w"), put("p/w", `{"again":1}`)}}),
	})
	if !mustResult(t, out[0]).OK() || mustResult(t, out[1]).OK() || !mustResult(t, out[2]).OK() {
		t.Fatalf("batch 11..13 results: %+v %+v %+v", out[0], out[1], out[2])
	}

	want := []Event{
		setEv(doc("p/a", `{"v":1}`, 1, 1)),
		setEv(doc("p/b", `{"v":1}`, 1, 1)),
		setEv(doc("p/a/c", `{"v":3}`, 1, 1)),
		setEv(doc("p/a", `{"g":[1],"w":"x"}`, 2, 1)),
		delEv(3, "p/b"),
		delEv(8, "p/t"),
		setEv(doc("p/w", `{}`, 9, 9)),
		setEv(doc("p/b", `{"n":1,"v":9}`, 9, 9)),
		delEv(9, "p/a/c"),
		setEv(doc("p/a", `{"v":11}`, 11, 1)),
		setEv(doc("p/w", `{"again":1}`, 13, 13)), // deleted and put again: created anew
	}
	got, upTo := clChanges(t, s, 0)
	clMustEvents(t, "ChangesSince(0)", got, want)
	if upTo != 13 {
		t.Fatalf("upTo %d, want the applied index 13", upTo)
	}
	// The final documents in the log are the ones in the tree.
	for _, p := range []string{"p/a", "p/b", "p/w"} {
		var last *Document
		for _, ev := range got {
			if ev.Path == p {
				last = ev.Doc
			}
		}
		if d := mustDoc(t, f, p); !sameDoc(d, last) {
			t.Fatalf("%s: tree has revision %d %s, the log's last change has %+v", p, d.Revision, d.Data, last)
		}
	}

	// As stored: sequence numbers 0..n-1 within each revision, the Txn's time.
	raw := clRawLog(t, f)
	if len(raw) != len(want) {
		t.Fatalf("%d raw change records, want %d", len(raw), len(want))
	}
	var seq uint32
	for i, r := range raw {
		if i > 0 && r.rev != raw[i-1].rev {
			seq = 0
		}
		if r.seq != seq {
			t.Fatalf("record %d (revision %d): sequence %d, want %d", i, r.rev, r.seq, seq)
		}
		seq++
		if r.time != testTime(r.rev) {
			t.Fatalf("record %d (revision %d): time %d, want the Txn's %d", i, r.rev, r.time, testTime(r.rev))
		}
	}
}

// A generated log (every op, refusals, noops, configuration entries, large
// documents, random batch sizes): the log replayed from empty gives the
// tree at every checkpoint, and agrees with the feed.
func TestChangeLog_GeneratedLogReplaysToTreeState(t *testing.T) {
	const n, every = 700, 70
	logs := genLog(t, 7301, n)
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	sub := f.feed.Subscribe(n + 10)

	br := rand.New(rand.NewSource(11))
	results := make([]any, 0, n)
	checkpoints := map[uint64]map[string]*Document{}
	for start := 0; start < n; start += every {
		chunk := logs[start:min(start+every, n)]
		results = append(results, applyInBatches(f, chunk, func() int { return 1 + br.Intn(40) })...)
		checkpoints[chunk[len(chunk)-1].Index] = clDocs(t, f)
	}

	evs, upTo := clChanges(t, s, 0)
	if upTo != n {
		t.Fatalf("upTo %d, want %d", upTo, n)
	}
	committed := map[uint64]bool{}
	for i, r := range results {
		if res, ok := r.(*TxnResult); ok && res.OK() && logs[i].Type == raft.LogCommand && commandType(logs[i].Data[0]) == cmdTxn {
			committed[logs[i].Index] = true
		}
	}
	seen := map[uint64]map[string]bool{}
	var prev uint64
	for i, ev := range evs {
		if ev.Revision < prev {
			t.Fatalf("event %d: revision %d after %d", i, ev.Revision, prev)
		}
		prev = ev.Revision
		if !committed[ev.Revision] {
			t.Fatalf("event %d (%s %s) at revision %d, which is not a committed Txn", i, ev.Type, ev.Path, ev.Revision)
		}
		if seen[ev.Revision] == nil {
			seen[ev.Revision] = map[string]bool{}
		}
		if seen[ev.Revision][ev.Path] {
			t.Fatalf("revision %d has two changes of %s", ev.Revision, ev.Path)
		}
		seen[ev.Revision][ev.Path] = true
		switch ev.Type {
		case EventSet:
			if ev.Doc == nil || ev.Doc.Path != ev.Path || ev.Doc.Revision != ev.Revision || ev.Doc.UpdateTime != testTime(ev.Revision) {
				t.Fatalf("event %d: set of %s at %d carries %+v", i, ev.Path, ev.Revision, ev.Doc)
			}
		case EventDelete:
			if ev.Doc != nil {
				t.Fatalf("event %d: delete of %s carries a document", i, ev.Path)
			}
		default:
			t.Fatalf("event %d: type %q", i, ev.Type)
		}
	}
	if len(seen) < len(committed)/2 {
		t.Fatalf("only %d of %d committed Txns logged anything", len(seen), len(committed))
	}
	for cp, state := range checkpoints {
		if ok, diff := clSameState(clReplay(nil, evs, cp), state); !ok {
			t.Fatalf("log replayed up to %d differs from the tree then: %s", cp, diff)
		}
		// Resuming from a checkpoint reaches the final state.
		tail, _ := clChanges(t, s, cp)
		if ok, diff := clSameState(clReplay(state, tail, n), checkpoints[n]); !ok {
			t.Fatalf("tree at %d + ChangesSince(%d) differs from the final tree: %s", cp, cp, diff)
		}
	}
	batches, closed := drainFeed(sub)
	if closed {
		t.Fatal("feed subscription dropped")
	}
	if ok, diff := sameEvents(evs, flatten(batches)); !ok {
		t.Fatalf("change log and feed disagree: %s", diff)
	}
}

// A batch that overflows one Badger transaction is committed in parts; the
// entries replayed into the fresh transaction must not be logged twice.
func TestChangeLog_BatchSplitAcrossBadgerTxnsLogsEachChangeOnce(t *testing.T) {
	const entries = 14 // 900 KiB documents, logged too: ~25 MiB, several splits
	var logs []*raft.Log
	for i := 1; i <= entries; i++ {
		logs = append(logs, txnLog(t, uint64(i), &Txn{Time: testTime(uint64(i)), Ops: []Op{
			put(fmt.Sprintf("big/d%02d", i), blobObject(900<<10, byte('A'+i%26))),
			put(fmt.Sprintf("small/d%02d", i), `{}`),
		}}))
	}
	f := mustOpenFSM(t, t.TempDir())
	for i, r := range f.ApplyBatch(logs) {
		if !mustResult(t, r).OK() {
			t.Fatalf("entry %d refused", i+1)
		}
	}
	if n := commitVersions(t, f); n < 2 {
		t.Fatalf("documents written in %d Badger transaction(s): the batch did not split", n)
	}
	evs, upTo := clChanges(t, clStore(f), 0)
	if upTo != entries || len(evs) != 2*entries {
		t.Fatalf("%d changes up to %d, want %d up to %d", len(evs), upTo, 2*entries, entries)
	}
	for i, ev := range evs {
		rev := uint64(i/2 + 1)
		want := fmt.Sprintf("big/d%02d", rev)
		if i%2 == 1 {
			want = fmt.Sprintf("small/d%02d", rev)
		}
		if ev.Revision != rev || ev.Path != want || ev.Type != EventSet || !sameDoc(ev.Doc, mustDoc(t, f, want)) {
			t.Fatalf("change %d: %d %s %s, want %d set %s as in the tree", i, ev.Revision, ev.Type, ev.Path, rev, want)
		}
	}
}

// The change log doubles what an entry writes (the document and its change).
// A small command of field ops on a few large documents writes each of them
// in full twice; fsm.fatal then stops every replica on a command it
// accepted, and again on every restart (the entry is replayed).
func TestChangeLog_FieldOpsOnLargeDocumentsFitOneTxn(t *testing.T) {
	const docs = 6 // 6 × 900 KiB: ~5.5 MiB of documents, ~11 MiB with the log
	f := mustOpenFSM(t, t.TempDir())
	for i := 1; i <= docs; i++ {
		mustOK(t, f, uint64(i), &Txn{Ops: []Op{put(fmt.Sprintf("big/d%d", i), blobObject(900<<10, 'q'))}})
	}
	tx := &Txn{Time: testTime(docs + 1)}
	for i := 1; i <= docs; i++ {
		tx.Ops = append(tx.Ops, setField(fmt.Sprintf("big/d%d", i), "n", `1`))
	}
	l := txnLog(t, docs+1, tx)
	var res *TxnResult
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("applying a %d-byte entry (%d field ops) stopped the node: %v", len(l.Data), docs, p)
			}
		}()
		res = mustResult(t, f.ApplyBatch([]*raft.Log{l})[0])
	}()
	evs, _ := clChanges(t, clStore(f), docs)
	if !res.OK() {
		// A deterministic refusal would do, but then nothing is written.
		if len(evs) != 0 {
			t.Fatalf("refused entry logged %s", clFmt(evs))
		}
		return
	}
	if len(evs) != docs {
		t.Fatalf("%d changes at %d, want %d", len(evs), docs+1, docs)
	}
}

// ---- ChangesSince -----------------------------------------------------------------------

// clPagingFixture: 1 has five changes, 2 one, 3 three, 4 is a noop, 5 two,
// 6 refused.
func clPagingFixture(t *testing.T) (*fsm, []Event) {
	t.Helper()
	f := mustOpenFSM(t, t.TempDir())
	mustOK(t, f, 1, &Txn{Ops: []Op{put("q/1a", `{}`), put("q/1b", `{}`), put("q/1c", `{}`), put("q/1d", `{}`), put("q/1e", `{}`)}})
	mustOK(t, f, 2, &Txn{Ops: []Op{put("q/2a", `{}`)}})
	mustOK(t, f, 3, &Txn{Ops: []Op{put("q/3a", `{}`), del("q/1a"), setField("q/2a", "x", `3`)}})
	f.ApplyBatch([]*raft.Log{noopLog(4)})
	mustOK(t, f, 5, &Txn{Ops: []Op{del("q/3a"), put("q/5a", `{}`)}})
	if applyOne(t, f, 6, &Txn{Ops: []Op{del("q/3a")}}).OK() {
		t.Fatal("entry 6 committed")
	}
	all, upTo := clChanges(t, clStore(f), 0)
	if len(all) != 11 || upTo != 6 {
		t.Fatalf("fixture: %d changes up to %d, want 11 up to 6: %s", len(all), upTo, clFmt(all))
	}
	return f, all
}

func TestChangesSince_PagingNeverSplitsARevision(t *testing.T) {
	f, all := clPagingFixture(t)
	s := clStore(f)
	revs := func(evs []Event) []uint64 {
		var out []uint64
		for _, ev := range evs {
			out = append(out, ev.Revision)
		}
		return out
	}
	cases := []struct {
		since    uint64
		max      int
		wantRevs []uint64
		wantUpTo uint64
	}{
		{0, 1, []uint64{1, 1, 1, 1, 1}, 1},             // max cuts inside revision 1: all of it
		{0, 3, []uint64{1, 1, 1, 1, 1}, 1},             // still inside
		{0, 5, []uint64{1, 1, 1, 1, 1}, 1},             // exactly revision 1
		{0, 6, []uint64{1, 1, 1, 1, 1, 2}, 2},          // 1 and 2, then full
		{0, 7, []uint64{1, 1, 1, 1, 1, 2, 3, 3, 3}, 3}, // cut inside 3: all of 3
		{0, 9, []uint64{1, 1, 1, 1, 1, 2, 3, 3, 3}, 3},
		{0, 10, []uint64{1, 1, 1, 1, 1, 2, 3, 3, 3, 5, 5}, 6}, // reaches the end: applied
		{1, 1, []uint64{2}, 2},
		{2, 1, []uint64{3, 3, 3}, 3},
		{3, 1, []uint64{5, 5}, 6}, // last revision with changes: up to applied (4 and 6 log nothing)
		{4, 100, []uint64{5, 5}, 6},
		{5, 100, nil, 6},
		{6, 100, nil, 6}, // since == applied
		{6, 1, nil, 6},
	}
	for _, c := range cases {
		evs, upTo, err := s.ChangesSince(c.since, c.max)
		if err != nil {
			t.Fatalf("ChangesSince(%d, %d): %v", c.since, c.max, err)
		}
		if fmt.Sprint(revs(evs)) != fmt.Sprint(c.wantRevs) || upTo != c.wantUpTo {
			t.Fatalf("ChangesSince(%d, %d) = revisions %v up to %d, want %v up to %d", c.since, c.max, revs(evs), upTo, c.wantRevs, c.wantUpTo)
		}
		// The caller has everything up to upTo: exactly the log in (since, upTo].
		clMustEvents(t, fmt.Sprintf("ChangesSince(%d, %d)", c.since, c.max), evs, clBetween(all, c.since, upTo))
	}

	// Paging through with every page size reassembles the log, each page
	// ending on a revision boundary, upTo strictly rising to applied.
	for pageMax := 1; pageMax <= 12; pageMax++ {
		var got []Event
		since, pages := uint64(0), 0
		for {
			evs, upTo, err := s.ChangesSince(since, pageMax)
			if err != nil {
				t.Fatalf("pageMax %d: ChangesSince(%d): %v", pageMax, since, err)
			}
			pages++
			if pages > 20 {
				t.Fatalf("pageMax %d: no progress at %d", pageMax, since)
			}
			clMustEvents(t, fmt.Sprintf("pageMax %d page from %d", pageMax, since), evs, clBetween(all, since, upTo))
			if len(evs) > 0 && upTo < evs[len(evs)-1].Revision {
				t.Fatalf("pageMax %d: upTo %d below the last change %d", pageMax, upTo, evs[len(evs)-1].Revision)
			}
			got = append(got, evs...)
			if upTo == since {
				break
			}
			if upTo < since {
				t.Fatalf("pageMax %d: upTo went back from %d to %d", pageMax, since, upTo)
			}
			since = upTo
		}
		if since != 6 {
			t.Fatalf("pageMax %d: paging ended at %d, want applied 6", pageMax, since)
		}
		clMustEvents(t, fmt.Sprintf("pageMax %d reassembled", pageMax), got, all)
	}
}

// max < 1 must not crash the caller (SnapshotRead treats pageSize < 1 as 1):
// ChangesSince indexes out[len(out)-1] of an empty slice when max <= 0.
func TestChangesSince_NonPositiveMaxDoesNotPanic(t *testing.T) {
	f, all := clPagingFixture(t)
	s := clStore(f)
	for _, max := range []int{0, -1} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("ChangesSince(0, %d) panicked: %v", max, p)
				}
			}()
			evs, upTo, err := s.ChangesSince(0, max)
			if err != nil {
				t.Fatalf("ChangesSince(0, %d): %v", max, err)
			}
			clMustEvents(t, fmt.Sprintf("ChangesSince(0, %d)", max), evs, clBetween(all, 0, upTo))
			if upTo == 0 {
				t.Fatalf("ChangesSince(0, %d) made no progress", max)
			}
		}()
	}
}

// ---- compaction -------------------------------------------------------------------------

func TestChangeLog_CompactionByAgeRaisesTheFloor(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	for i := uint64(1); i <= 10; i++ {
		switch i {
		case 6:
			f.ApplyBatch([]*raft.Log{noopLog(6)})
		case 4:
			mustOK(t, f, i, &Txn{Ops: []Op{put("c/4a", `{}`), put("c/4b", `{}`), put("c/4c", `{}`)}})
		default:
			mustOK(t, f, i, &Txn{Ops: []Op{put(fmt.Sprintf("c/%da", i), `{}`), put(fmt.Sprintf("c/%db", i), `{}`)}})
		}
	}
	all, _ := clChanges(t, s, 0)
	if len(all) != 19 {
		t.Fatalf("fixture: %d changes, want 19", len(all))
	}
	compacted := func(since uint64, wantFloor uint64) {
		t.Helper()
		evs, upTo, err := s.ChangesSince(since, clAll)
		if !errors.Is(err, ErrCompacted) || upTo != wantFloor || len(evs) != 0 {
			t.Fatalf("ChangesSince(%d) = %d changes up to %d, %v; want ErrCompacted with the floor %d", since, len(evs), upTo, err, wantFloor)
		}
	}
	works := func(since uint64) {
		t.Helper()
		evs, upTo := clChanges(t, s, since)
		if upTo != f.applied.get() {
			t.Fatalf("ChangesSince(%d) up to %d, want applied %d", since, upTo, f.applied.get())
		}
		clMustEvents(t, fmt.Sprintf("ChangesSince(%d) after compaction", since), evs, clBetween(all, since, upTo))
	}
	rawRevs := func() (lo, hi uint64, n int) {
		raw := clRawLog(t, f)
		if len(raw) == 0 {
			return 0, 0, 0
		}
		return raw[0].rev, raw[len(raw)-1].rev, len(raw)
	}

	// Nothing older than the first change: nothing to do.
	if n := clCompact(t, f, testTime(1)); n != 0 || clFloor(t, s) != 0 {
		t.Fatalf("cutoff at the first change removed %d, floor %d", n, clFloor(t, s))
	}
	works(0)

	// Changes before revision 5 go (9 of them); the floor is the last removed.
	if n := clCompact(t, f, testTime(5)); n != 9 {
		t.Fatalf("cutoff at 5 removed %d changes, want 9", n)
	}
	if got := clFloor(t, s); got != 4 {
		t.Fatalf("floor %d, want 4", got)
	}
	if lo, _, n := rawRevs(); lo != 5 || n != 10 {
		t.Fatalf("log holds %d changes from revision %d, want 10 from 5", n, lo)
	}
	compacted(0, 4)
	compacted(3, 4)
	works(4)
	works(5)
	works(8)

	// Idempotent, and an older cutoff never lowers the floor.
	before := dumpDB(t, f)
	if n := clCompact(t, f, testTime(5)); n != 0 {
		t.Fatalf("second compaction with the same cutoff removed %d", n)
	}
	if n := clCompact(t, f, testTime(2)); n != 0 {
		t.Fatalf("older cutoff removed %d", n)
	}
	assertSameDump(t, "after repeated compactions", dumpDB(t, f), before)

	// A cutoff just after 7 takes 5 and 7 (6 logged nothing).
	if n := clCompact(t, f, testTime(7)+1); n != 4 || clFloor(t, s) != 7 {
		t.Fatalf("cutoff after 7 removed %d, floor %d; want 4 and 7", n, clFloor(t, s))
	}
	compacted(6, 7)
	works(7)

	// Everything: the floor is the last logged revision; resuming from it works.
	if n := clCompact(t, f, testTime(1000)); n != 6 || clFloor(t, s) != 10 {
		t.Fatalf("cutoff after everything removed %d, floor %d; want 6 and 10", n, clFloor(t, s))
	}
	if _, _, n := rawRevs(); n != 0 {
		t.Fatalf("%d changes left", n)
	}
	compacted(9, 10)
	works(10)

	// New changes are logged above the floor.
	mustOK(t, f, 11, &Txn{Ops: []Op{put("c/11", `{}`)}})
	f.ApplyBatch([]*raft.Log{noopLog(12)})
	evs, upTo := clChanges(t, s, 10)
	if len(evs) != 1 || evs[0].Revision != 11 || upTo != 12 {
		t.Fatalf("after compaction: %s up to %d, want the change at 11 up to 12", clFmt(evs), upTo)
	}

	// Times need not rise with revisions (another leader's clock): compaction
	// stops at the first young change, so the log stays a suffix.
	mustOK(t, f, 13, &Txn{Time: testTime(5000), Ops: []Op{put("c/13", `{}`)}})
	mustOK(t, f, 14, &Txn{Time: testTime(14), Ops: []Op{put("c/14", `{}`)}})
	if n := clCompact(t, f, testTime(4000)); n != 1 || clFloor(t, s) != 11 {
		t.Fatalf("skewed times: removed %d, floor %d; want 1 (revision 11) and 11", n, clFloor(t, s))
	}
	evs, _ = clChanges(t, s, 11)
	if len(evs) != 2 || evs[0].Revision != 13 || evs[1].Revision != 14 {
		t.Fatalf("skewed times: log above 11 is %s, want 13 and 14", clFmt(evs))
	}
}

// All changes of one revision carry the same time, but should they not
// (rewritten here by hand), compaction still takes the revision whole.
func TestChangeLog_CompactionNeverSplitsARevision(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	mustOK(t, f, 1, &Txn{Ops: []Op{put("s/a", `{}`), put("s/b", `{}`), put("s/c", `{}`)}})
	mustOK(t, f, 2, &Txn{Time: testTime(100), Ops: []Op{put("s/d", `{}`)}})
	// Make the later changes of revision 1 young.
	err := f.db.Update(func(txn *badger.Txn) error {
		for _, r := range clRawLog(t, f) {
			if r.rev == 1 && r.seq > 0 {
				if err := txn.Set(changeKey(r.rev, r.seq), encodeChange(r.ev, testTime(100))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := clCompact(t, f, testTime(50)); n != 3 || clFloor(t, s) != 1 {
		t.Fatalf("removed %d, floor %d; want revision 1 whole (3) and floor 1", n, clFloor(t, s))
	}
	evs, _ := clChanges(t, s, 1)
	if len(evs) != 1 || evs[0].Path != "s/d" {
		t.Fatalf("log above 1: %s", clFmt(evs))
	}
	if raw := clRawLog(t, f); len(raw) != 1 || raw[0].rev != 2 {
		t.Fatalf("raw log after compaction: %d records", len(raw))
	}
}

// Readers running while compaction raises the floor and removes changes
// never see a hole above the floor they read: the floor moves first.
func TestChangeLog_CompactionConcurrentWithReaders(t *testing.T) {
	const entries, perEntry = 200, 10
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	var logs []*raft.Log
	for i := uint64(1); i <= entries; i++ {
		tx := &Txn{Time: testTime(i)}
		for j := 0; j < perEntry; j++ {
			tx.Ops = append(tx.Ops, put(fmt.Sprintf("k/%03d/%02d", i, j), `{}`))
		}
		logs = append(logs, txnLog(t, i, tx))
	}
	applyInBatches(f, logs, func() int { return 50 })
	all, _ := clChanges(t, s, 0)
	if len(all) != entries*perEntry {
		t.Fatalf("fixture: %d changes", len(all))
	}

	var stop atomic.Bool
	var firstErr atomic.Pointer[string]
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		firstErr.CompareAndSwap(nil, &msg)
		stop.Store(true)
	}
	var reads, refused atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			var lastFloor uint64
			for !stop.Load() {
				since := uint64(rnd.Intn(entries + 1))
				pageMax := 1 + rnd.Intn(3*perEntry)
				evs, upTo, err := s.ChangesSince(since, pageMax)
				reads.Add(1)
				if errors.Is(err, ErrCompacted) {
					refused.Add(1)
					if upTo <= since || upTo < lastFloor {
						fail("ChangesSince(%d) compacted with floor %d (earlier floor %d)", since, upTo, lastFloor)
						return
					}
					lastFloor = upTo
					continue
				}
				if err != nil {
					fail("ChangesSince(%d, %d): %v", since, pageMax, err)
					return
				}
				if since < lastFloor {
					fail("ChangesSince(%d) answered after the floor reached %d", since, lastFloor)
					return
				}
				if ok, diff := sameEvents(evs, clBetween(all, since, upTo)); !ok || (since < entries && len(evs) == 0) {
					fail("ChangesSince(%d, %d) up to %d: %d changes, a hole above the floor: %s", since, pageMax, upTo, len(evs), diff)
					return
				}
			}
		}(int64(r))
	}
	var floor uint64
	for k := uint64(3); k <= entries+3 && !stop.Load(); k += 3 {
		n, err := f.compactChangeLog(time.Unix(0, testTime(k)))
		if err != nil {
			fail("compact at %d: %v", k, err)
			break
		}
		want := min(k-1, entries)
		if got := clFloor(t, s); got != want || n != int(want-floor)*perEntry {
			fail("compact at %d: removed %d, floor %d; want %d and %d", k, n, got, int(want-floor)*perEntry, want)
			break
		}
		floor = want
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		t.Fatal(*p)
	}
	t.Logf("%d concurrent reads, %d answered ErrCompacted", reads.Load(), refused.Load())
	if reads.Load() < 100 {
		t.Fatalf("only %d reads ran during compaction", reads.Load())
	}
}

// ---- restart and replay -------------------------------------------------------------------

func TestChangeLog_SurvivesRestartAndReplayIsNotLoggedTwice(t *testing.T) {
	var logs []*raft.Log
	for i := uint64(1); i <= 30; i++ {
		switch {
		case i%7 == 0:
			logs = append(logs, noopLog(i))
		case i%5 == 0:
			logs = append(logs, txnLog(t, i, &Txn{Time: testTime(i), Ops: []Op{delIfExists(fmt.Sprintf("r/%d", i-1)), put(fmt.Sprintf("r/%d/x", i), `{}`)}}))
		default:
			logs = append(logs, txnLog(t, i, &Txn{Time: testTime(i), Ops: []Op{put(fmt.Sprintf("r/%d", i), fmt.Sprintf(`{"i":%d}`, i)), setField("r/1", "last", fmt.Sprint(i))}}))
		}
	}
	ref := mustOpenFSM(t, t.TempDir())
	ref.ApplyBatch(logs)
	refAll, _ := clChanges(t, clStore(ref), 0)

	dir := t.TempDir()
	f := mustOpenFSM(t, dir)
	applyInBatches(f, logs[:20], func() int { return 3 })
	clCompact(t, f, testTime(6)) // floor 5
	before := dumpDB(t, f)
	mustCloseFSM(t, f)

	f = mustOpenFSM(t, dir)
	s := clStore(f)
	assertSameDump(t, "reopened", dumpDB(t, f), before)
	if got := clFloor(t, s); got != 5 {
		t.Fatalf("floor after reopen %d, want 5", got)
	}
	// Raft replays its log after a restart: entries at or below applied.
	f.ApplyBatch(logs[:20])
	for _, l := range logs[5:20] {
		f.ApplyBatch([]*raft.Log{l})
	}
	assertSameDump(t, "after replaying applied entries", dumpDB(t, f), before)
	// A batch straddling the applied index logs only the new entries.
	f.ApplyBatch(logs[15:25])
	f.ApplyBatch(logs[20:30])
	got, upTo := clChanges(t, s, 5)
	if upTo != 30 {
		t.Fatalf("upTo %d, want 30", upTo)
	}
	clMustEvents(t, "log after restart and replay", got, clBetween(refAll, 5, 30))
	mustCloseFSM(t, f)
	f = mustOpenFSM(t, dir)
	got, _ = clChanges(t, clStore(f), 5)
	clMustEvents(t, "log after a second reopen", got, clBetween(refAll, 5, 30))
}

// A real single-node store: raft replays its whole log into the tree after a
// restart; the log must come back identical, each change once.
func TestChangeLog_StoreRestartKeepsTheLogOnce(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, "127.0.0.1:0", nil)
	addr := s.cfg.RaftAdvertise
	mustLeader(t, s)
	for i := 0; i < 8; i++ {
		mustTxn(t, s, put(fmt.Sprintf("p1/r/d%d", i), fmt.Sprintf(`{"i":%d}`, i)), put("p1/r/last", fmt.Sprintf(`{"i":%d}`, i)))
	}
	mustTxn(t, s, del("p1/r/d0"), setField("p1/r/d1", "x", `true`))
	before, upTo := clChanges(t, s, 0)
	if len(before) != 18 || upTo != s.AppliedIndex() {
		t.Fatalf("%d changes up to %d (applied %d), want 18", len(before), upTo, s.AppliedIndex())
	}
	applied := s.AppliedIndex()
	mustCloseStore(t, s)

	s = reopenStore(t, dir, addr, nil)
	mustLeader(t, s)
	if err := s.WaitApplied(ctxT(t, 10*time.Second), applied); err != nil {
		t.Fatal(err)
	}
	after, _ := clChanges(t, s, 0)
	clMustEvents(t, "log after restart", after, before)
	r := mustTxn(t, s, put("p1/r/new", `{}`))
	after, _ = clChanges(t, s, 0)
	if len(after) != len(before)+1 || after[len(after)-1].Revision != r.Revision || after[len(after)-1].Path != "p1/r/new" {
		t.Fatalf("after a new write: %s", clFmt(after[len(before):]))
	}
	if floor := clFloor(t, s); floor != 0 {
		t.Fatalf("floor %d, want 0", floor)
	}
}

// The store's compaction loop trims the log by ChangeLogRetention.
func TestChangeLog_StoreCompactsByRetention(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.ChangeLogRetention = 2 * time.Second })
	mustLeader(t, s)
	var last uint64
	for i := 0; i < 5; i++ {
		last = mustTxn(t, s, put(fmt.Sprintf("p1/old/%d", i), `{}`)).Revision
	}
	start := time.Now()
	mustEventually(t, 15*time.Second, "the old changes to be compacted", func() (bool, string) {
		f, err := s.LogFloor()
		return err == nil && f >= last, fmt.Sprintf("floor %d, err %v", f, err)
	})
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("changes compacted after %v, retention is 2s", waited)
	}
	floor := clFloor(t, s)
	if _, upTo, err := s.ChangesSince(0, 10); !errors.Is(err, ErrCompacted) || upTo != floor {
		t.Fatalf("ChangesSince(0) = up to %d, %v; want ErrCompacted with %d", upTo, err, floor)
	}
	r := mustTxn(t, s, put("p1/new", `{}`))
	evs, _, err := s.ChangesSince(floor, 10)
	if err != nil || len(evs) != 1 || evs[0].Revision != r.Revision {
		t.Fatalf("ChangesSince(floor %d) = %s, %v; want the new change at %d", floor, clFmt(evs), err, r.Revision)
	}
}

// ---- snapshot and restore -------------------------------------------------------------------

func TestChangeLog_SnapshotRestoreCarriesFloorAndLog(t *testing.T) {
	a := mustOpenFSM(t, t.TempDir())
	as := clStore(a)
	for i := uint64(1); i <= 30; i++ {
		mustOK(t, a, i, &Txn{Ops: []Op{put(fmt.Sprintf("x/%02d", i), `{}`), put("x/last", fmt.Sprintf(`{"i":%d}`, i))}})
	}
	clCompact(t, a, testTime(11)) // floor 10
	snap := mustSnapshot(t, a)
	aLog, _ := clChanges(t, as, 10)

	// The restoring node had a log of its own, with a different floor.
	base := t.TempDir()
	b := mustOpenFSM(t, base)
	bs := clStore(b)
	for i := uint64(1); i <= 40; i++ {
		mustOK(t, b, i, &Txn{Ops: []Op{put(fmt.Sprintf("y/%02d", i), `{}`)}})
	}
	clCompact(t, b, testTime(3))
	mustRestore(t, b, snap)

	if got := clFloor(t, bs); got != 10 {
		t.Fatalf("restored: floor %d, want the snapshot's 10", got)
	}
	got, upTo := clChanges(t, bs, 10)
	if upTo != 30 || b.applied.get() != 30 {
		t.Fatalf("restored: upTo %d, applied %d; want 30", upTo, b.applied.get())
	}
	clMustEvents(t, "restored: log above the floor", got, aLog)
	if _, upTo, err := bs.ChangesSince(9, 10); !errors.Is(err, ErrCompacted) || upTo != 10 {
		t.Fatalf("restored: ChangesSince(9) = up to %d, %v; want ErrCompacted with 10", upTo, err)
	}
	// What the log holds agrees with the restored tree.
	tree := clDocs(t, b)
	for p, d := range clReplay(nil, aLog, 30) {
		if !sameDoc(tree[p], d) {
			t.Fatalf("restored: %s differs between the tree and the log", p)
		}
	}
	if raw := clRawLog(t, b); len(raw) != 40 || raw[0].rev != 11 {
		t.Fatalf("restored raw log: %d records from %d, want 40 from 11", len(raw), raw[0].rev)
	}
	if got := getDocT(t, b, "y/01"); got != nil {
		t.Fatal("restored node kept its old tree")
	}

	// Both go on with the same entries and stay identical.
	for i := uint64(31); i <= 35; i++ {
		tx := &Txn{Time: testTime(i), Ops: []Op{put("x/last", fmt.Sprintf(`{"i":%d}`, i)), del(fmt.Sprintf("x/%02d", i-20))}}
		mustOK(t, a, i, tx)
		mustOK(t, b, i, tx)
	}
	aLog, _ = clChanges(t, as, 10)
	bLog, _ := clChanges(t, bs, 10)
	clMustEvents(t, "after further entries", bLog, aLog)
	bTail, _ := clChanges(t, bs, 30)
	clMustEvents(t, "restored node, above the snapshot", bTail, clBetween(aLog, 30, 35))

	// And across a reopen of the restored generation.
	mustCloseFSM(t, b)
	b = mustOpenFSM(t, base)
	bLog, _ = clChanges(t, clStore(b), 10)
	clMustEvents(t, "restored node reopened", bLog, aLog)
}

// A database from before the change log has no floor key: on open (and on
// restoring a snapshot of one) the floor is its applied index.
func TestChangeLog_DatabaseWithoutFloorGetsAppliedIndex(t *testing.T) {
	build := func(t *testing.T, dir string, dropChanges bool) *fsm {
		f := mustOpenFSM(t, dir)
		for i := uint64(1); i <= 12; i++ {
			mustOK(t, f, i, &Txn{Ops: []Op{put(fmt.Sprintf("o/%02d", i), `{}`)}})
		}
		f.ApplyBatch([]*raft.Log{noopLog(13)})
		err := f.db.Update(func(txn *badger.Txn) error {
			if err := txn.Delete(keyLogFloor); err != nil {
				return err
			}
			if !dropChanges {
				return nil
			}
			for _, r := range clRawLog(t, f) {
				if err := txn.Delete(changeKey(r.rev, r.seq)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	expectFloor13 := func(t *testing.T, f *fsm) {
		t.Helper()
		s := clStore(f)
		if got := clFloor(t, s); got != 13 {
			t.Fatalf("floor %d, want the applied index 13", got)
		}
		if _, upTo, err := s.ChangesSince(12, 10); !errors.Is(err, ErrCompacted) || upTo != 13 {
			t.Fatalf("ChangesSince(12) = up to %d, %v; want ErrCompacted with 13", upTo, err)
		}
		if evs, upTo := clChanges(t, s, 13); len(evs) != 0 || upTo != 13 {
			t.Fatalf("ChangesSince(13) = %s up to %d", clFmt(evs), upTo)
		}
		mustOK(t, f, 14, &Txn{Ops: []Op{put("o/14", `{}`)}})
		if evs, upTo := clChanges(t, s, 13); len(evs) != 1 || evs[0].Path != "o/14" || upTo != 14 {
			t.Fatalf("after a new entry: %s up to %d", clFmt(evs), upTo)
		}
	}
	for _, drop := range []bool{true, false} {
		t.Run(fmt.Sprintf("open/dropChanges=%v", drop), func(t *testing.T) {
			dir := t.TempDir()
			f := build(t, dir, drop)
			mustCloseFSM(t, f)
			expectFloor13(t, mustOpenFSM(t, dir))
		})
		t.Run(fmt.Sprintf("restore/dropChanges=%v", drop), func(t *testing.T) {
			snap := mustSnapshot(t, build(t, t.TempDir(), drop))
			f := mustOpenFSM(t, t.TempDir())
			mustOK(t, f, 1, &Txn{Ops: []Op{put("other", `{}`)}})
			mustRestore(t, f, snap)
			expectFloor13(t, f)
		})
	}
}

// A follower that was down while the leader compacted its change log and
// raft log is brought back by InstallSnapshot: its log starts at the
// leader's floor and matches the leader's above it.
func TestChangeLog_FollowerRestoredFromSnapshotMatchesLeader(t *testing.T) {
	tune := rvTuning()
	tune.TrailingLogs = 2
	c := newRVCluster(t, 3, tune)
	l := c.leader()
	fi := (l + 1) % 3
	ls := c.nodes[l].s
	c.close(fi)
	var lastTxn uint64
	for i := 0; i < 15; i++ {
		lastTxn = mustTxn(t, ls, put(fmt.Sprintf("p/a%02d", i), `{}`), put("p/last", fmt.Sprintf(`{"i":%d}`, i))).Revision
	}
	if _, err := ls.fsm.compactChangeLog(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	floor := clFloor(t, ls)
	if floor < lastTxn || floor > ls.AppliedIndex() {
		t.Fatalf("leader floor %d after compacting everything, want at least %d", floor, lastTxn)
	}
	for i := 0; i < 5; i++ {
		mustTxn(t, ls, put(fmt.Sprintf("p/b%02d", i), `{}`))
	}
	if err := ls.Snapshot(); err != nil {
		t.Fatalf("leader snapshot: %v", err)
	}
	mustTxn(t, ls, put("p/c", `{}`))

	c.open(fi)
	fs := c.nodes[fi].s
	want := ls.AppliedIndex()
	mustEventually(t, 20*time.Second, "follower to catch up", func() (bool, string) {
		return fs.AppliedIndex() >= want, fmt.Sprintf("applied %d, leader %d", fs.AppliedIndex(), want)
	})
	fs.fsm.mu.RLock()
	gen := fs.fsm.gen
	fs.fsm.mu.RUnlock()
	if gen == 0 {
		t.Fatal("follower caught up without a snapshot restore: the test proves nothing")
	}
	if got := clFloor(t, fs); got != floor {
		t.Fatalf("follower floor %d, want the leader's %d", got, floor)
	}
	lLog, _ := clChanges(t, ls, floor)
	fLog, _ := clChanges(t, fs, floor)
	clMustEvents(t, "follower log above the floor", clBetween(fLog, floor, want), clBetween(lLog, floor, want))
	if _, upTo, err := fs.ChangesSince(floor-1, 10); !errors.Is(err, ErrCompacted) || upTo != floor {
		t.Fatalf("follower ChangesSince(%d) = up to %d, %v; want ErrCompacted with %d", floor-1, upTo, err, floor)
	}
}

// ---- SnapshotRead ----------------------------------------------------------------------------

func TestSnapshotRead_PrefixDepthSiblingsAndPaging(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	under := []string{"n/a", "n/a/x", "n/a/x/deep", "n/a/x/deep/er", "n/a/y", "n/a/z-", "n/a/~"}
	others := []string{"n/ab", "n/a-b", "n/a.c", "n/ab/x", "n/b", "n", "m/a", "n/a\x00"}
	var ops []Op
	for _, p := range append(append([]string{}, under...), others...) {
		ops = append(ops, put(p, fmt.Sprintf(`{"i":%d}`, len(ops))))
	}
	mustOK(t, f, 1, &Txn{Ops: ops})
	mustOK(t, f, 2, &Txn{Ops: []Op{setField("n/a/y", "v", `2`)}})
	state := clDocs(t, f)
	want := clFilter(state, "n/a")
	if len(want) != len(under) {
		t.Fatalf("fixture: %d documents under n/a", len(want))
	}

	for _, ps := range []int{2, 3, 6, 7, 8, 100} {
		rev, revs, pages := clSnapshotRead(t, s, "n/a", true, ps)
		eff := ps
		if rev != 2 {
			t.Fatalf("pageSize %d: revision %d, want 2", ps, rev)
		}
		for i, pg := range pages {
			if revs[i] != rev {
				t.Fatalf("pageSize %d: page %d at revision %d, read at %d", ps, i, revs[i], rev)
			}
			if len(pg) == 0 || len(pg) > eff {
				t.Fatalf("pageSize %d: page %d has %d documents (%v)", ps, i, len(pg), pagePaths(pg))
			}
		}
		if wantPages := (len(want) + eff - 1) / eff; len(pages) != wantPages {
			t.Fatalf("pageSize %d: %d pages, want %d", ps, len(pages), wantPages)
		}
		got, err := clPagesState(pages)
		if err != nil {
			t.Fatalf("pageSize %d: %v", ps, err)
		}
		if ok, diff := clSameState(got, want); !ok {
			t.Fatalf("pageSize %d: %s", ps, diff)
		}
		if pages[0][0].Path != "n/a" {
			t.Fatalf("pageSize %d: first document %s, want the path itself", ps, pages[0][0].Path)
		}
	}

	// Without prefix: the document alone.
	_, _, pages := clSnapshotRead(t, s, "n/a", false, 1)
	if len(pages) != 1 || len(pages[0]) != 1 || !sameDoc(pages[0][0], state["n/a"]) {
		t.Fatalf("single document read: %v", pages)
	}
	// Nothing there: one empty page, with and without prefix.
	for _, c := range []struct {
		path   string
		prefix bool
	}{{"n/none", false}, {"n/none", true}, {"n/a/x/deep/er/more", true}, {"n/a/", true}} {
		rev, revs, pages := clSnapshotRead(t, s, c.path, c.prefix, 3)
		if rev != 2 || len(pages) != 1 || len(pages[0]) != 0 || revs[0] != 2 {
			t.Fatalf("%q prefix=%v: revision %d, %d pages %v; want one empty page at 2", c.path, c.prefix, rev, len(pages), pages)
		}
	}
	// The path itself absent, descendants present.
	mustOK(t, f, 3, &Txn{Ops: []Op{del("n/a/x")}})
	rev, _, pages := clSnapshotRead(t, s, "n/a/x", true, 10)
	got, _ := clPagesState(pages)
	if ok, diff := clSameState(got, clFilter(clDocs(t, f), "n/a/x")); !ok || rev != 3 || len(got) != 2 {
		t.Fatalf("descendants of an absent document: %d documents at %d: %s", len(got), rev, diff)
	}

	// fn's error ends the read.
	boom := errors.New("boom")
	calls := 0
	if _, err := s.SnapshotRead("n/a", true, 2, func(uint64, []*Document) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("fn error: %v after %d calls, want boom after 1", err, calls)
	}
	// Closed.
	mustCloseFSM(t, f)
	if _, err := s.SnapshotRead("n/a", true, 2, func(uint64, []*Document) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
}

// With a page size of 1 (or less, read as 1) and the path's own document
// present, every page still holds one document. SnapshotRead checks the
// page size only after appending a descendant, so the path's document and
// the first descendant share the first page.
func TestSnapshotRead_PageSizeOneWithTheDocumentItself(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	mustOK(t, f, 1, &Txn{Ops: []Op{put("o/a", `{}`), put("o/a/x", `{}`), put("o/a/y", `{}`)}})
	for _, ps := range []int{1, 0, -1} {
		_, _, pages := clSnapshotRead(t, s, "o/a", true, ps)
		for i, pg := range pages {
			if len(pg) != 1 {
				t.Fatalf("pageSize %d: page %d holds %d documents %v; want 1 per page (3 pages), got %d pages", ps, i, len(pg), pagePaths(pg), len(pages))
			}
		}
		if len(pages) != 3 {
			t.Fatalf("pageSize %d: %d pages, want 3", ps, len(pages))
		}
	}
}

func pagePaths(docs []*Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.Path)
	}
	return out
}

// Writes continue (another goroutine, between the pages) while one
// SnapshotRead runs: every page reports the same revision and the documents
// are the tree at that revision, rebuilt from the change log.
func TestSnapshotRead_OneRevisionWhileWritesContinue(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	const base = "w/r"
	var setup []Op
	setup = append(setup, put(base, `{"root":true}`), put("w/rr", `{}`), put("w/r-x", `{}`))
	for i := 0; i < 40; i++ {
		setup = append(setup, put(fmt.Sprintf("%s/d%02d", base, i), fmt.Sprintf(`{"i":%d}`, i)))
		if i%3 == 0 {
			setup = append(setup, put(fmt.Sprintf("%s/d%02d/sub/s", base, i), `{}`))
		}
		setup = append(setup, put(fmt.Sprintf("w/rr/d%02d", i), `{}`))
	}
	mustOK(t, f, 1, &Txn{Ops: setup})

	// The writer's entries, built here (txnLog may fail the test).
	rnd := rand.New(rand.NewSource(5))
	var logs []*raft.Log
	for i := uint64(2); i < 600; i++ {
		tx := &Txn{Time: testTime(i)}
		for j := 0; j < 3; j++ {
			p := fmt.Sprintf("%s/d%02d", base, rnd.Intn(50))
			switch rnd.Intn(5) {
			case 0:
				tx.Ops = append(tx.Ops, delIfExists(p))
			case 1:
				tx.Ops = append(tx.Ops, put(p+"/sub/s", fmt.Sprintf(`{"at":%d}`, i)))
			case 2:
				tx.Ops = append(tx.Ops, put(fmt.Sprintf("w/rr/d%02d", rnd.Intn(50)), fmt.Sprintf(`{"at":%d}`, i)))
			default:
				tx.Ops = append(tx.Ops, put(p, fmt.Sprintf(`{"at":%d}`, i)))
			}
		}
		if i%10 == 0 {
			tx.Ops = append(tx.Ops, setField(base, "at", fmt.Sprint(i)))
		}
		logs = append(logs, txnLog(t, i, tx))
	}

	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for _, l := range logs {
			select {
			case <-stop:
				return
			default:
			}
			f.ApplyBatch([]*raft.Log{l})
		}
	}()

	type read struct {
		rev   uint64
		revs  []uint64
		pages [][]*Document
	}
	var reads []read
	for _, ps := range []int{3, 7, 1} {
		var r read
		rev, err := s.SnapshotRead(base, true, ps, func(rev uint64, docs []*Document) error {
			r.revs = append(r.revs, rev)
			r.pages = append(r.pages, docs)
			// Let the writer commit at least one more entry before the next page.
			seen := f.applied.get()
			deadline := time.Now().Add(10 * time.Second)
			for f.applied.get() == seen && time.Now().Before(deadline) {
				select {
				case <-writerDone:
					return nil
				default:
				}
				time.Sleep(50 * time.Microsecond)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("SnapshotRead (page %d): %v", ps, err)
		}
		r.rev = rev
		reads = append(reads, r)
	}
	close(stop)
	<-writerDone

	all, _ := clChanges(t, s, 0)
	final := f.applied.get()
	for _, r := range reads {
		if r.rev >= final {
			t.Fatalf("read at %d, but the writer never got past it (applied %d): no concurrency", r.rev, final)
		}
		for i, rv := range r.revs {
			if rv != r.rev {
				t.Fatalf("page %d reports revision %d, the read is at %d (revisions %v)", i, rv, r.rev, r.revs)
			}
		}
		got, err := clPagesState(r.pages)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if d.Revision > r.rev {
				t.Fatalf("read at %d returned %s at revision %d", r.rev, d.Path, d.Revision)
			}
		}
		want := clFilter(clReplay(nil, all, r.rev), base)
		if ok, diff := clSameState(got, want); !ok {
			t.Fatalf("read at %d (%d pages) is not the tree at %d: %s", r.rev, len(r.pages), r.rev, diff)
		}
		t.Logf("read at %d: %d documents in %d pages; writer reached %d", r.rev, len(got), len(r.pages), final)
	}
}

// A Restore that starts while a SnapshotRead of the old tree is open switches
// the live tree but closes the old one only after the read ends; the read
// keeps paging through its own (old) state.
func TestSnapshotRead_RestoreWaitsForOpenRead(t *testing.T) {
	other := mustOpenFSM(t, t.TempDir())
	for i := uint64(1); i <= 5; i++ {
		mustOK(t, other, i, &Txn{Ops: []Op{put(fmt.Sprintf("g/other/%d", i), `{}`)}})
	}
	snap := mustSnapshot(t, other)

	base := t.TempDir()
	f := mustOpenFSM(t, base)
	s := clStore(f)
	for i := uint64(1); i <= 30; i++ {
		mustOK(t, f, i, &Txn{Ops: []Op{put(fmt.Sprintf("g/d%02d", i), fmt.Sprintf(`{"i":%d}`, i))}})
	}
	want := clFilter(clDocs(t, f), "g")

	inside, release := make(chan struct{}), make(chan struct{})
	var revs []uint64
	var pages [][]*Document
	readDone := make(chan error, 1)
	go func() {
		_, err := s.SnapshotRead("g", true, 2, func(rev uint64, docs []*Document) error {
			revs = append(revs, rev)
			pages = append(pages, docs)
			if len(pages) == 1 {
				close(inside)
				<-release
			}
			return nil
		})
		readDone <- err
	}()
	clWait(t, inside, "the first page")

	restoreDone := make(chan error, 1)
	go func() { restoreDone <- f.Restore(io.NopCloser(bytes.NewReader(snap))) }()
	mustEventually(t, 20*time.Second, "Restore to switch the live tree", func() (bool, string) {
		return f.applied.get() == 5, fmt.Sprintf("applied %d", f.applied.get())
	})
	if d := getDocT(t, f, "g/other/1"); d == nil {
		t.Fatal("live reads do not see the restored tree")
	}
	select {
	case err := <-restoreDone:
		t.Fatalf("Restore returned (%v) while a read of the old tree was open", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := clWaitErr(t, readDone, "the snapshot read"); err != nil {
		t.Fatalf("SnapshotRead across a Restore: %v", err)
	}
	if err := clWaitErr(t, restoreDone, "Restore"); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got, err := clPagesState(pages)
	if err != nil {
		t.Fatal(err)
	}
	if ok, diff := clSameState(got, want); !ok || len(pages) != 15 {
		t.Fatalf("read across Restore: %d pages: %s", len(pages), diff)
	}
	for _, r := range revs {
		if r != 30 {
			t.Fatalf("page revisions %v, want all 30", revs)
		}
	}
	if dirs := treeDirs(t, base); len(dirs) != 1 || dirs[0] != "tree-1" {
		t.Fatalf("tree dirs after Restore: %v", dirs)
	}
}

// close waits for an open SnapshotRead the same way.
func TestSnapshotRead_CloseWaitsForOpenRead(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	for i := uint64(1); i <= 10; i++ {
		mustOK(t, f, i, &Txn{Ops: []Op{put(fmt.Sprintf("h/d%02d", i), `{}`)}})
	}
	want := clFilter(clDocs(t, f), "h")
	inside, release := make(chan struct{}), make(chan struct{})
	var pages [][]*Document
	readDone := make(chan error, 1)
	go func() {
		_, err := s.SnapshotRead("h", true, 1, func(_ uint64, docs []*Document) error {
			pages = append(pages, docs)
			if len(pages) == 1 {
				close(inside)
				<-release
			}
			return nil
		})
		readDone <- err
	}()
	clWait(t, inside, "the first page")
	closeDone := make(chan error, 1)
	go func() { closeDone <- f.close() }()
	select {
	case err := <-closeDone:
		t.Fatalf("close returned (%v) while a read was open", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := clWaitErr(t, readDone, "the snapshot read"); err != nil {
		t.Fatalf("SnapshotRead across close: %v", err)
	}
	if err := clWaitErr(t, closeDone, "close"); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, _ := clPagesState(pages)
	if ok, diff := clSameState(got, want); !ok {
		t.Fatalf("read across close: %s", diff)
	}
}

// Many reads while the tree is restored again and again: each read is
// entirely one of the two states, at its revision, and nothing panics.
func TestSnapshotRead_ConcurrentRestoresStress(t *testing.T) {
	mk := func(n uint64, prefix string) ([]byte, map[string]*Document) {
		src := mustOpenFSM(t, t.TempDir())
		for i := uint64(1); i <= n; i++ {
			mustOK(t, src, i, &Txn{Ops: []Op{put(fmt.Sprintf("v/%s%02d", prefix, i), `{}`)}})
		}
		return mustSnapshot(t, src), clFilter(clDocs(t, src), "v")
	}
	snapA, stateA := mk(20, "a")
	snapB, stateB := mk(33, "b")
	f := mustOpenFSM(t, t.TempDir())
	s := clStore(f)
	mustRestore(t, f, snapA)

	var stop atomic.Bool
	var firstErr atomic.Pointer[string]
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		firstErr.CompareAndSwap(nil, &msg)
		stop.Store(true)
	}
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(ps int) {
			defer wg.Done()
			for !stop.Load() {
				var pages [][]*Document
				var revs []uint64
				rev, err := s.SnapshotRead("v", true, ps, func(rev uint64, docs []*Document) error {
					revs = append(revs, rev)
					pages = append(pages, docs)
					time.Sleep(100 * time.Microsecond)
					return nil
				})
				if err != nil {
					fail("SnapshotRead: %v", err)
					return
				}
				reads.Add(1)
				got, err := clPagesState(pages)
				if err != nil {
					fail("%v", err)
					return
				}
				want := stateA
				if rev == 33 {
					want = stateB
				} else if rev != 20 {
					fail("read at revision %d", rev)
					return
				}
				if ok, diff := clSameState(got, want); !ok {
					fail("read at %d: %s", rev, diff)
					return
				}
				for _, rv := range revs {
					if rv != rev {
						fail("pages at %v, read at %d", revs, rev)
						return
					}
				}
			}
		}(1 + r)
	}
	for i := 0; i < 8 && !stop.Load(); i++ {
		snap := snapB
		if i%2 == 1 {
			snap = snapA
		}
		if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			fail("Restore %d: %v", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		t.Fatal(*p)
	}
	t.Logf("%d reads across 8 restores", reads.Load())
}

func clWait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func clWaitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}
