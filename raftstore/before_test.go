package raftstore

import (
	"encoding/binary"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// beforeData is the data of ev.Before, "<nil>" when absent.
func beforeData(ev Event) string {
	if ev.Before == nil {
		return "<nil>"
	}
	return string(ev.Before.Data)
}

// TestEvent_BeforeAndTime: every change of a user document carries the
// document as committed before its entry, and the entry's time, alike on
// the live feed and from the change log; system paths carry no Before.
func TestEvent_BeforeAndTime(t *testing.T) {
	feed := newFeed()
	sub := feed.Subscribe(64)
	f := mustOpenFSMWithFeed(t, t.TempDir(), feed)
	s := clStore(f)

	at := func(idx uint64, ops ...Op) {
		t.Helper()
		out := f.ApplyBatch([]*raft.Log{txnLog(t, idx, &Txn{Time: testTime(idx), Ops: ops})})
		if !mustResult(t, out[0]).OK() {
			t.Fatalf("entry %d refused", idx)
		}
	}
	at(1, put("p/a", `{"v":1}`))                                  // create
	at(2, put("p/a", `{"v":2}`), setField("p/a", "w", `3`))       // update, written twice: Before is the committed one
	at(3, del("p/a"))                                             // delete
	at(4, put("_sys/x", `{"s":1}`), put("p/_users/u", `{"r":1}`)) // system and reserved: no Before kept
	at(5, put("_sys/x", `{"s":2}`), put("p/_users/u", `{"r":2}`)) //
	at(6, put("p/t", `{}`), del("p/t"))                           // created and deleted in one entry: a delete of nothing
	// A batch of two entries: the second sees the first as committed.
	out := f.ApplyBatch([]*raft.Log{
		txnLog(t, 7, &Txn{Time: testTime(7), Ops: []Op{put("p/b", `{"n":7}`)}}),
		txnLog(t, 8, &Txn{Time: testTime(8), Ops: []Op{put("p/b", `{"n":8}`)}}),
	})
	for _, r := range out {
		if !mustResult(t, r).OK() {
			t.Fatal("batch 7..8 refused")
		}
	}

	want := []struct {
		rev    uint64
		path   string
		before string
	}{
		{1, "p/a", "<nil>"},
		{2, "p/a", `{"v":1}`},
		{3, "p/a", `{"v":2,"w":3}`},
		{4, "_sys/x", "<nil>"},
		{4, "p/_users/u", "<nil>"},
		{5, "_sys/x", "<nil>"},
		{5, "p/_users/u", "<nil>"},
		{6, "p/t", "<nil>"},
		{7, "p/b", "<nil>"},
		{8, "p/b", `{"n":7}`},
	}
	var live []Event
	for len(live) < len(want) {
		b := <-sub.C()
		live = append(live, b.Events...)
	}
	logged, _ := clChanges(t, s, 0)
	for name, evs := range map[string][]Event{"feed": live, "change log": logged} {
		if len(evs) != len(want) {
			t.Fatalf("%s: %s, want %d changes", name, clFmt(evs), len(want))
		}
		for i, w := range want {
			ev := evs[i]
			if ev.Revision != w.rev || ev.Path != w.path || beforeData(ev) != w.before {
				t.Errorf("%s[%d]: %d %s before %s, want %d %s before %s", name, i, ev.Revision, ev.Path, beforeData(ev), w.rev, w.path, w.before)
			}
			if ev.Time != testTime(w.rev) {
				t.Errorf("%s[%d]: time %d, want the entry's %d", name, i, ev.Time, testTime(w.rev))
			}
		}
	}
}

// TestChangeLog_DecodesVersion1: changes logged by binaries before Before
// existed still decode, with a nil Before.
func TestChangeLog_DecodesVersion1(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	d := doc("p/a", `{"v":1}`, 5, 5)
	enc := encodeDoc(d)
	v1 := make([]byte, 14, 14+len(d.Path)+len(enc))
	v1[0] = changeVersion1
	binary.BigEndian.PutUint64(v1[1:], uint64(testTime(5)))
	binary.BigEndian.PutUint32(v1[10:], uint32(len(d.Path)))
	v1 = append(append(v1, d.Path...), enc...)
	del1 := make([]byte, 14, 14+3)
	del1[0], del1[9] = changeVersion1, 1
	binary.BigEndian.PutUint32(del1[10:], 3)
	del1 = append(del1, "p/b"...)
	err := f.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(changeKey(5, 0), v1); err != nil {
			return err
		}
		if err := txn.Set(changeKey(5, 1), del1); err != nil {
			return err
		}
		return putUint64(txn, keyApplied, 5)
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := clChanges(t, clStore(f), 0)
	if len(evs) != 2 || evs[0].Path != "p/a" || string(evs[0].Doc.Data) != `{"v":1}` || evs[0].Before != nil ||
		evs[0].Time != testTime(5) || evs[1].Type != EventDelete || evs[1].Path != "p/b" || evs[1].Before != nil {
		t.Fatalf("version 1 changes decoded as %s", clFmt(evs))
	}
	// A version 2 value cut inside its Before is refused, not misread.
	v2 := encodeChange(Event{Path: "p/a", Type: EventSet, Doc: d, Before: d}, 1)
	if _, _, err := decodeChange(6, v2[:14+3+2]); err == nil {
		t.Fatal("a change cut in its Before length decoded")
	}
	if _, _, err := decodeChange(6, v2[:14+3+4+3]); err == nil {
		t.Fatal("a change cut in its Before decoded")
	}
}
