package raftstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// gateDecider is a Decider for the FSM's own tests: a caller "ok" may write
// paths whose document does not hold {"locked":true} (as the txn's earlier
// ops left it), anything else is unauthenticated; and no txn may leave
// "inv/" without a document (an invariant checked over Scan, which must see
// the txn's own writes).
type gateDecider struct{ calls []string }

func (d *gateDecider) Begin(v View, t *Txn) (EntryDecider, OpError) {
	if t.Caller != "" && t.Caller != "ok" {
		return nil, ErrCodeUnauthenticated
	}
	return &gateEntry{d: d, v: v, t: t}, ErrCodeNone
}

type gateEntry struct {
	d *gateDecider
	v View
	t *Txn
}

func (e *gateEntry) Op(i int, op *Op, cur, next *Document) OpError {
	e.d.calls = append(e.d.calls, fmt.Sprintf("%d:%s:%v:%v", i, op.Path, cur != nil, next != nil))
	if e.t.Caller == "" {
		return ErrCodeNone
	}
	if cur != nil && strings.Contains(string(cur.Data), `"locked":true`) {
		return ErrCodeForbidden
	}
	return ErrCodeNone
}

func (e *gateEntry) End(written []string, before func(string) *Document) OpError {
	touched := false
	for _, p := range written {
		if strings.HasPrefix(p, "inv/") && before(p) != nil {
			touched = true
		}
	}
	if !touched {
		return ErrCodeNone
	}
	n := 0
	if err := e.v.Scan("inv/", func(*Document) bool { n++; return true }); err != nil {
		return ErrCodeInvalid
	}
	if n == 0 {
		return ErrCodeLastOwner
	}
	return ErrCodeNone
}

func openDecidedFSM(t *testing.T) (*fsm, *gateDecider) {
	f := mustOpenFSM(t, t.TempDir())
	d := &gateDecider{}
	f.decider = d
	return f, d
}

// The Decider judges each op against the state the txn's earlier ops left,
// before the op's own checks; a refusal writes nothing of the txn.
func TestDecider_JudgesOpsInOrderAndRefusalWritesNothing(t *testing.T) {
	f, d := openDecidedFSM(t)
	mustOK(t, f, 1, &Txn{Ops: []Op{put("a/x", `{"v":1}`)}})
	d.calls = nil

	// Locking a/x in the txn's first op makes the second op on it refused:
	// the Decider saw the first op's result as the current document.
	res := applyOne(t, f, 2, &Txn{Caller: "ok", Ops: []Op{
		put("a/y", `{"v":1}`),
		put("a/x", `{"locked":true}`),
		put("a/x", `{"v":2}`),
	}})
	if res.Err != ErrCodeForbidden || res.Index != 2 || !res.OpFailed {
		t.Fatalf("result %+v, want forbidden at op 2", res)
	}
	mustNoDoc(t, f, "a/y")
	if got := string(mustDoc(t, f, "a/x").Data); got != `{"v":1}` {
		t.Fatalf("a/x = %s after a refused txn", got)
	}
	if want := []string{"0:a/y:false:true", "1:a/x:true:true", "2:a/x:true:true"}; fmt.Sprint(d.calls) != fmt.Sprint(want) {
		t.Fatalf("decider saw %v, want %v", d.calls, want)
	}

	// Unknown caller: refused before any op.
	d.calls = nil
	if res := applyOne(t, f, 3, &Txn{Caller: "nobody", Ops: []Op{put("a/z", `{}`)}}); res.Err != ErrCodeUnauthenticated || len(d.calls) != 0 {
		t.Fatalf("unknown caller: %+v, calls %v", res, d.calls)
	}

	// A refused op is judged before its own failure: an op on a locked,
	// missing field is forbidden, not field_not_found (no probing).
	mustOK(t, f, 4, &Txn{Ops: []Op{put("a/l", `{"locked":true}`)}})
	if res := applyOne(t, f, 5, &Txn{Caller: "ok", Ops: []Op{{Kind: OpDeleteField, Path: "a/l", Field: "nope"}}}); res.Err != ErrCodeForbidden {
		t.Fatalf("delete of a missing field of a locked doc: %+v, want forbidden", res)
	}
	// Allowed, then the op's own error and the Match.
	if res := applyOne(t, f, 6, &Txn{Caller: "ok", Ops: []Op{{Kind: OpDeleteField, Path: "a/x", Field: "nope"}}}); res.Err != ErrCodeFieldNotFound {
		t.Fatalf("delete of a missing field: %+v", res)
	}
	one := uint64(1)
	if res := applyOne(t, f, 7, &Txn{Caller: "ok", Ops: []Op{{Kind: OpPut, Path: "a/x", Data: json.RawMessage(`{"v":3}`), Match: &one}}}); !res.OK() {
		t.Fatalf("put matching revision 1: %+v", res)
	}
	if res := applyOne(t, f, 8, &Txn{Caller: "ok", Ops: []Op{{Kind: OpPut, Path: "a/x", Data: json.RawMessage(`{"v":4}`), Match: &one}}}); res.Err != ErrCodeCondFailed || !res.OpFailed {
		t.Fatalf("put matching a stale revision: %+v, want cond_failed at the op", res)
	}
}

// End sees the txn's writes through Scan: removing the last document under
// inv/ is refused, removing one of two is not, and one batch that adds and
// removes keeps it.
func TestDecider_EndSeesTheTxnsWrites(t *testing.T) {
	f, _ := openDecidedFSM(t)
	mustOK(t, f, 1, &Txn{Ops: []Op{put("inv/a", `{}`), put("inv/b", `{}`)}})
	mustOK(t, f, 2, &Txn{Ops: []Op{del("inv/a")}})
	if res := applyOne(t, f, 3, &Txn{Ops: []Op{del("inv/b")}}); res.Err != ErrCodeLastOwner {
		t.Fatalf("deleting the last inv/ document: %+v, want last_owner", res)
	}
	mustDoc(t, f, "inv/b")
	mustOK(t, f, 4, &Txn{Ops: []Op{put("inv/c", `{}`), del("inv/b")}})
	mustDoc(t, f, "inv/c")
}

// Entries with a caller apply identically on every replica: two FSMs fed the
// same log of decided txns, in different batchings, hold the same tree and
// give the same results.
func TestDecider_DecidedEntriesApplyAlike(t *testing.T) {
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		k := fmt.Sprintf("a/k%d", i%7)
		tx := &Txn{Time: testTime(i), Caller: "ok", Ops: []Op{{Kind: OpIncrement, Path: k, Field: "n", Data: json.RawMessage("1")}}}
		switch i % 5 {
		case 0:
			tx.Ops = append(tx.Ops, put(k, `{"locked":true}`))
		case 1:
			tx.Caller = ""
			tx.Ops = []Op{put(k, `{"n":0}`)}
		case 2:
			tx.Ops = append(tx.Ops, Op{Kind: OpArrayUnion, Path: k, Field: "s", Data: json.RawMessage(fmt.Sprintf(`[%d]`, i%3))})
		case 3:
			tx.Ops = append(tx.Ops, Op{Kind: OpServerTimestamp, Path: k, Field: "at"})
		}
		logs = append(logs, txnLog(t, i, tx))
	}
	a, _ := openDecidedFSM(t)
	b, _ := openDecidedFSM(t)
	ra := applyInBatches(a, logs, func() int { return 1 })
	rb := applyInBatches(b, logs, func() int { return 37 })
	if ok, diff := sameResults(ra, rb); !ok {
		t.Fatalf("results differ: %s", diff)
	}
	assertSameDump(t, "tree", dumpDB(t, a), dumpDB(t, b))
	refused := 0
	for _, r := range ra {
		if !r.(*TxnResult).OK() {
			refused++
		}
	}
	if refused == 0 || refused == len(ra) {
		t.Fatalf("%d of %d txns refused: the log should exercise both", refused, len(ra))
	}
}

// Without a Decider, a txn with a caller is refused (never applied unjudged).
func TestDecider_CallerWithoutDeciderIsRefused(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	if res := applyOne(t, f, 1, &Txn{Caller: "ok", Ops: []Op{put("a/x", `{}`)}}); res.Err != ErrCodeUnauthenticated {
		t.Fatalf("caller without decider: %+v", res)
	}
	mustNoDoc(t, f, "a/x")
}

// Computed ops: increments add exactly (integers) or as floats, create the
// field and the document; arrays union and remove by value; a server
// timestamp is the txn's time.
func TestApplyOp_ComputedFields(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	inc := func(path, by string) Op {
		return Op{Kind: OpIncrement, Path: path, Field: "n", Data: json.RawMessage(by)}
	}
	mustOK(t, f, 1, &Txn{Ops: []Op{inc("c/a", "5"), inc("c/a", "-2"), inc("c/b", "0.5"), inc("c/b", "1")}})
	if got := string(mustDoc(t, f, "c/a").Data); got != `{"n":3}` {
		t.Errorf("c/a = %s", got)
	}
	if got := string(mustDoc(t, f, "c/b").Data); got != `{"n":1.5}` {
		t.Errorf("c/b = %s", got)
	}
	mustOK(t, f, 2, &Txn{Ops: []Op{put("c/big", `{"n":9007199254740991}`), inc("c/big", "1")}})
	if got := string(mustDoc(t, f, "c/big").Data); got != `{"n":9007199254740992}` {
		t.Errorf("c/big = %s", got)
	}
	mustOK(t, f, 3, &Txn{Ops: []Op{put("c/s", `{"n":"x","arr":[1,{"b":2,"a":1}]}`)}})
	idx := uint64(3)
	for _, tc := range []struct {
		op   Op
		want OpError
	}{
		{inc("c/s", "1"), ErrCodeFieldType},
		{inc("c/a", `"1"`), ErrCodeInvalid},
		{Op{Kind: OpArrayUnion, Path: "c/s", Field: "n", Data: json.RawMessage(`[1]`)}, ErrCodeFieldType},
		{Op{Kind: OpArrayUnion, Path: "c/s", Field: "arr", Data: json.RawMessage(`{}`)}, ErrCodeInvalid},
		{Op{Kind: OpIncrement, Path: "c/a", Data: json.RawMessage("1")}, ErrCodeInvalid},
	} {
		idx++
		if res := applyOne(t, f, idx, &Txn{Ops: []Op{tc.op}}); res.Err != tc.want {
			t.Errorf("%+v: %s, want %s", tc.op, res.Err, tc.want)
		}
	}
	when := time.Date(2026, 11, 25, 12, 0, 0, 5, time.UTC)
	mustOK(t, f, idx+1, &Txn{Time: when.UnixNano(), Ops: []Op{
		{Kind: OpArrayUnion, Path: "c/s", Field: "arr", Data: json.RawMessage(`[{"a":1,"b":2},3,3]`)},
		{Kind: OpArrayRemove, Path: "c/s", Field: "arr", Data: json.RawMessage(`[1]`)},
		{Kind: OpArrayRemove, Path: "c/new", Field: "arr", Data: json.RawMessage(`[1]`)},
		{Kind: OpServerTimestamp, Path: "c/s", Field: "at"},
	}})
	if got, want := string(mustDoc(t, f, "c/s").Data), `{"arr":[{"b":2,"a":1},3],"at":"2026-11-25T12:00:00.000000005Z","n":"x"}`; got != want {
		t.Errorf("c/s = %s, want %s", got, want)
	}
	if got := string(mustDoc(t, f, "c/new").Data); got != `{"arr":[]}` {
		t.Errorf("c/new = %s", got)
	}
}

// Guarded builds again after an unnamed condition fails (the state moved),
// and returns a named one as a definite answer: concurrent read-modify-write
// loops on one counter lose no increment, and a named refusal is reported by
// name.
func TestGuarded_RetriesMovedStateAndNamesDefiniteAnswers(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	ctx := ctxT(t, 30*time.Second)
	const workers, each = 8, 10
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range each {
				res, _, err := Guarded(ctx, s, func() (*Txn, error) {
					d, err := s.Get("g/counter")
					if err != nil {
						return nil, err
					}
					n, rev := 0, uint64(0)
					if d != nil {
						rev = d.Revision
						if err := json.Unmarshal(d.Data, &struct{ N *int }{&n}); err != nil {
							return nil, err
						}
					}
					return &Txn{Time: 1, Conds: []Cond{{Path: "g/counter", Kind: CondRevision, Revision: rev}},
						Ops: []Op{put("g/counter", fmt.Sprintf(`{"n":%d}`, n+1))}}, nil
				})
				if err == nil && !res.OK() {
					err = fmt.Errorf("refused: %+v", res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := string(mustGet(t, s, "g/counter").Data); got != fmt.Sprintf(`{"n":%d}`, workers*each) {
		t.Fatalf("counter = %s after %d guarded increments", got, workers*each)
	}
	cur := mustGet(t, s, "g/counter")
	res, txn, err := Guarded(ctx, s, func() (*Txn, error) {
		return &Txn{Time: 1, Conds: []Cond{{Path: "g/counter", Kind: CondRevision, Revision: cur.Revision}, {Path: "g/counter", Kind: CondNotExists, Name: "fresh"}},
			Ops: []Op{put("g/other", `{}`)}}, nil
	})
	if err != nil || res.Failed(txn) != "fresh" {
		t.Fatalf("named refusal: %+v, %v; want Failed = fresh", res, err)
	}
}
