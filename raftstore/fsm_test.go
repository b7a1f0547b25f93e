package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// ---- generated logs ----------------------------------------------------------

// logGen makes a pseudo-random but seeded log that exercises every op, cond
// and error of applyTxn over a small set of colliding paths.
type logGen struct {
	r       *rand.Rand
	paths   []string
	touched map[string]uint64 // last index whose txn named the path in an op
}

func newLogGen(seed int64) *logGen {
	g := &logGen{r: rand.New(rand.NewSource(seed)), touched: map[string]uint64{}}
	for i := 0; i < 12; i++ {
		g.paths = append(g.paths, fmt.Sprintf("p1/users/u%d", i))
	}
	g.paths = append(g.paths, "p1/users/u1/posts/a", "p1/users/u1/posts/b", "p1/users/u1-x", "p1/users/u1.y", "p1/other/z", "p2/users/u1")
	return g
}

var jsonValues = []string{
	`1`, `12345678901234567890`, `1.0e2`, `-0.5`, `"str"`, `"ünï \u00e9"`, `true`, `false`, `null`,
	`[1,2,3]`, `{"x":{"y":1}}`, `""`, `0.1000`,
}

var fieldNames = []string{"a", "b", "c", "n", "s"}

func (g *logGen) value() string { return jsonValues[g.r.Intn(len(jsonValues))] }
func (g *logGen) field() string { return fieldNames[g.r.Intn(len(fieldNames))] }
func (g *logGen) path() string  { return g.paths[g.r.Intn(len(g.paths))] }

func (g *logGen) object() string {
	n := g.r.Intn(4)
	parts := make([]string, 0, n)
	for i := 0; i < n; i++ {
		parts = append(parts, fmt.Sprintf("%q:%s", g.field(), g.value()))
	}
	if g.r.Intn(5) == 0 {
		// Whitespace must survive a put verbatim.
		return "{ " + strings.Join(parts, " , ") + " }"
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func blobObject(size int, fill byte) string {
	return `{"blob":"` + strings.Repeat(string(fill), size) + `"}`
}

func (g *logGen) op(idx uint64) Op {
	p := g.path()
	g.touched[p] = idx
	// Per mille; large documents are rare because JSON work on them
	// dominates the run time under -race.
	switch k := g.r.Intn(1000); {
	case k < 300:
		return put(p, g.object())
	case k < 305:
		// Large but legal documents: they make random batches overflow one
		// Badger transaction, exercising the split path.
		return put(p, blobObject(600<<10+g.r.Intn(100<<10), byte('a'+g.r.Intn(26))))
	case k < 307:
		return put(p, blobObject(MaxDocumentSize, 'x')) // over the limit with the wrapper
	case k < 380:
		// EncodeTxn only frames valid JSON, so "invalid" means not an object
		// (or no data at all).
		bad := []string{`[1,2]`, `"str"`, `12`, ``, `null`, `true`}
		return put(p, bad[g.r.Intn(len(bad))])
	case k < 440:
		return del(p)
	case k < 500:
		return delIfExists(p)
	case k < 660:
		return setField(p, g.field(), g.value())
	case k < 680:
		return Op{Kind: OpSetField, Path: p, Field: g.field()} // no value
	case k < 682:
		return setField(p, "blob", `"`+strings.Repeat("y", MaxDocumentSize)+`"`) // grows too large
	case k < 800:
		return renameField(p, g.field(), g.field(), g.value())
	case k < 920:
		return deleteField(p, g.field())
	case k < 930:
		return Op{Kind: "explode", Path: p}
	default:
		// Several ops on one path in one txn.
		return put(p, g.object())
	}
}

func (g *logGen) cond() Cond {
	p := g.path()
	switch g.r.Intn(4) {
	case 0:
		return Cond{Path: p, Kind: CondExists}
	case 1:
		return Cond{Path: p, Kind: CondNotExists}
	default:
		var rev uint64
		switch g.r.Intn(4) {
		case 0, 1:
			rev = g.touched[p] // right whenever that txn committed
		case 2:
			rev = 0
		default:
			rev = uint64(g.r.Intn(50))
		}
		return Cond{Path: p, Kind: CondRevision, Revision: rev}
	}
}

func (g *logGen) txn(idx uint64) *Txn {
	t := &Txn{Time: testTime(idx)}
	if g.r.Intn(4) == 0 {
		for n := 1 + g.r.Intn(2); n > 0; n-- {
			t.Conds = append(t.Conds, g.cond())
		}
	}
	n := 1 + g.r.Intn(4)
	for i := 0; i < n; i++ {
		op := g.op(idx)
		t.Ops = append(t.Ops, op)
		if g.r.Intn(6) == 0 && op.Kind != "explode" {
			// Follow up on the same path in the same txn.
			g2 := *g
			g2.paths = []string{op.Path}
			t.Ops = append(t.Ops, g2.op(idx))
		}
	}
	return t
}

// genLog returns entries 1..n: mostly txns, with configuration and noop
// entries interleaved.
func genLog(t testing.TB, seed int64, n int) []*raft.Log {
	t.Helper()
	g := newLogGen(seed)
	logs := make([]*raft.Log, 0, n)
	for i := 1; i <= n; i++ {
		idx := uint64(i)
		switch k := g.r.Intn(100); {
		case k < 3:
			logs = append(logs, confLog(idx))
		case k < 5:
			logs = append(logs, noopLog(idx))
		default:
			logs = append(logs, txnLog(t, idx, g.txn(idx)))
		}
	}
	return logs
}

// ---- 1. determinism -----------------------------------------------------------

func TestFSM_DeterministicAcrossBatchings(t *testing.T) {
	const n = 2000
	logs := genLog(t, 20240601, n)

	one := mustOpenFSM(t, t.TempDir())
	many := mustOpenFSM(t, t.TempDir())
	subOne := one.feed.Subscribe(n + 10)
	subMany := many.feed.Subscribe(n + 10)

	resOne := applyInBatches(one, logs, func() int { return 1 })
	br := rand.New(rand.NewSource(7))
	var sizes []int
	resMany := applyInBatches(many, logs, func() int {
		s := 1 + br.Intn(512)
		sizes = append(sizes, s)
		return s
	})
	t.Logf("random batch sizes: %v", sizes)

	if ok, diff := sameResults(resOne, resMany); !ok {
		t.Fatalf("results differ between batchings: %s", diff)
	}

	// The log must really exercise every outcome, or the comparison proves little.
	seen := map[OpError]int{}
	nilResults := 0
	for _, r := range resOne {
		if r == nil {
			nilResults++
			continue
		}
		seen[mustResult(t, r).Err]++
	}
	for _, code := range []OpError{ErrCodeNone, ErrCodeCondFailed, ErrCodeNotFound, ErrCodeFieldNotFound, ErrCodeFieldExists, ErrCodeTooLarge, ErrCodeInvalid} {
		if seen[code] == 0 {
			t.Errorf("generated log never produced %q (seen %v)", code, seen)
		}
	}
	if nilResults == 0 {
		t.Errorf("generated log has no configuration entries")
	}
	t.Logf("outcomes: %v, configuration entries: %d", seen, nilResults)

	dOne, dMany := dumpDB(t, one), dumpDB(t, many)
	assertSameDump(t, "tree db", dMany, dOne)
	if len(dumpKeys(dOne)) < 5 {
		t.Fatalf("only %d documents in the final state; the log is too destructive to compare", len(dumpKeys(dOne)))
	}
	for _, f := range []*fsm{one, many} {
		if got := f.applied.get(); got != n {
			t.Errorf("applied index %d, want %d", got, n)
		}
		if got, err := readApplied(f.db); err != nil || got != n {
			t.Errorf("persisted applied index %d (%v), want %d", got, err, n)
		}
	}

	bOne, closedOne := drainFeed(subOne)
	bMany, closedMany := drainFeed(subMany)
	if closedOne || closedMany {
		t.Fatalf("a feed subscriber was dropped (one=%v many=%v)", closedOne, closedMany)
	}
	if ok, diff := sameEvents(flatten(bOne), flatten(bMany)); !ok {
		t.Fatalf("feed events differ between batchings: %s", diff)
	}
	if len(flatten(bOne)) == 0 {
		t.Fatal("no feed events")
	}
	assertBatchesOrdered(t, bMany)
}

// assertBatchesOrdered checks that batch revisions grow and that each batch's
// events are at or below its revision and in order.
func assertBatchesOrdered(t *testing.T, batches []Batch) {
	t.Helper()
	var last, lastEv uint64
	for _, b := range batches {
		if b.Revision <= last {
			t.Fatalf("batch revision %d after %d", b.Revision, last)
		}
		for _, e := range b.Events {
			if e.Revision > b.Revision || e.Revision < lastEv {
				t.Fatalf("event revision %d in batch %d after event %d", e.Revision, b.Revision, lastEv)
			}
			lastEv = e.Revision
		}
		last = b.Revision
	}
}

// ---- 2. replay after restart ------------------------------------------------------

// replayLog builds entries whose second application would change state.
func replayLog(t *testing.T) (logs []*raft.Log, n int) {
	t.Helper()
	var txns []*Txn
	add := func(tx *Txn) { txns = append(txns, tx) }
	// 1: refused now ("late" is created later); would commit on a replay.
	add(&Txn{Conds: []Cond{{Path: "p/late", Kind: CondExists}}, Ops: []Op{put("p/ghost", `{"from":"replay"}`)}})
	// 2: create doc.
	add(&Txn{Ops: []Op{put("p/doc", `{"a":1}`)}})
	// 3: rename a→b: fails with field_not_found if replayed over the later state.
	add(&Txn{Ops: []Op{renameField("p/doc", "a", "b", `2`)}})
	// 4: conditional on revision 3 (holds now, not on a replay over later state).
	add(&Txn{Conds: []Cond{{Path: "p/doc", Kind: CondRevision, Revision: 3}}, Ops: []Op{put("p/chk", `{"v":4}`)}})
	// 5: only when "once" is absent: a counter that would be bumped again.
	add(&Txn{Conds: []Cond{{Path: "p/once", Kind: CondNotExists}}, Ops: []Op{put("p/once", `{"n":1}`), put("p/counter", `{"n":5}`)}})
	// 6: delete chk; a replay of 4 would fail, leaving chk deleted anyway, but
	// a replay of 7 below would recreate it with a new createRevision.
	add(&Txn{Ops: []Op{del("p/chk")}})
	// 7..9: more history on doc.
	add(&Txn{Ops: []Op{setField("p/doc", "c", `12345678901234567890`)}})
	add(&Txn{Ops: []Op{put("p/doc2", `{}`), deleteField("p/doc", "b")}})
	add(&Txn{Ops: []Op{put("p/late", `{}`)}}) // 9 == N: makes entry 1's cond hold
	n = len(txns)
	// N+1..: after the restart.
	add(&Txn{Ops: []Op{setField("p/doc", "d", `1.0e2`)}})
	add(&Txn{Conds: []Cond{{Path: "p/doc2", Kind: CondRevision, Revision: 8}}, Ops: []Op{del("p/doc2")}})
	add(&Txn{Ops: []Op{put("p/after", `{"x":true}`)}})
	add(&Txn{Conds: []Cond{{Path: "p/once", Kind: CondExists}}, Ops: []Op{put("p/counter", `{"n":13}`)}})
	for i, tx := range txns {
		tx.Time = testTime(uint64(i + 1))
		logs = append(logs, txnLog(t, uint64(i+1), tx))
	}
	// Interleave a configuration entry right after N.
	cfgIdx := uint64(len(logs) + 1)
	logs = append(logs, confLog(cfgIdx), txnLog(t, cfgIdx+1, &Txn{Time: testTime(cfgIdx + 1), Ops: []Op{put("p/last", `{}`)}}))
	return logs, n
}

func TestFSM_ReplayAfterRestartSkipsAppliedEntries(t *testing.T) {
	logs, n := replayLog(t)

	// Reference: every entry applied once.
	ref := mustOpenFSM(t, t.TempDir())
	refSub := ref.feed.Subscribe(100)
	refRes := applyInBatches(ref, logs, func() int { return 1 })
	mustNoDoc(t, ref, "p/ghost")
	refBatches, _ := drainFeed(refSub)
	var wantEvents []Event
	for _, e := range flatten(refBatches) {
		if e.Revision > uint64(n) {
			wantEvents = append(wantEvents, e)
		}
	}
	if len(wantEvents) == 0 {
		t.Fatal("no events after N in the reference")
	}

	for _, batch := range []int{1, 3, len(logs)} {
		t.Run(fmt.Sprintf("replay-batch-%d", batch), func(t *testing.T) {
			dir := t.TempDir()
			f := mustOpenFSM(t, dir)
			applyInBatches(f, logs[:n], func() int { return 2 })
			mustCloseFSM(t, f)

			feed := newFeed()
			sub := feed.Subscribe(100)
			f = mustOpenFSMWithFeed(t, dir, feed)
			if got := f.applied.get(); got != uint64(n) {
				t.Fatalf("reopened fsm applied index %d, want %d", got, n)
			}
			res := applyInBatches(f, logs, func() int { return batch })
			for i, r := range res[:n] {
				got := mustResult(t, r)
				if got.Revision != uint64(i+1) || !got.OK() || got.Docs != nil {
					t.Errorf("replayed entry %d: result %+v, want a bare skip", i+1, got)
				}
			}
			if ok, diff := sameResults(res[n:], refRes[n:]); !ok {
				t.Errorf("results of new entries differ from a single application: %s", diff)
			}
			mustNoDoc(t, f, "p/ghost")
			assertSameDump(t, "replayed state", dumpDB(t, f), dumpDB(t, ref))

			// Only the new entries reach the feed.
			got, _ := drainFeed(sub)
			if ok, diff := sameEvents(flatten(got), wantEvents); !ok {
				t.Errorf("feed after replay: %s", diff)
			}
		})
	}
}

// ---- 3. txn semantics -----------------------------------------------------------

type txnHarness struct {
	t   *testing.T
	f   *fsm
	sub *Subscription
	idx uint64
}

func newTxnHarness(t *testing.T) *txnHarness {
	f := mustOpenFSM(t, t.TempDir())
	return &txnHarness{t: t, f: f, sub: f.feed.Subscribe(1 << 12)}
}

func (h *txnHarness) apply(t *testing.T, tx *Txn) *TxnResult {
	t.Helper()
	h.idx++
	tx.Time = testTime(h.idx)
	return applyOne(t, h.f, h.idx, tx)
}

func (h *txnHarness) setup(t *testing.T, ops ...Op) {
	t.Helper()
	if len(ops) == 0 {
		return
	}
	if res := h.apply(t, &Txn{Ops: ops}); !res.OK() {
		t.Fatalf("setup refused: %s at %d", res.Err, res.Index)
	}
}

// refuse applies tx and checks that it is refused with code at index at and
// that it wrote nothing but the applied index, and published nothing.
func (h *txnHarness) refuse(t *testing.T, tx *Txn, code OpError, at int) {
	t.Helper()
	drainFeed(h.sub)
	before := withoutApplied(dumpDB(t, h.f))
	res := h.apply(t, tx)
	if res.Err != code || res.Index != at || res.Revision != h.idx {
		t.Fatalf("result {err %q index %d revision %d}, want {err %q index %d revision %d}", res.Err, res.Index, res.Revision, code, at, h.idx)
	}
	if res.OK() || res.Docs != nil || res.Created != nil || res.Deleted != nil {
		t.Fatalf("refused result carries per-op output: %+v", res)
	}
	assertSameDump(t, "state after a refused txn", withoutApplied(dumpDB(t, h.f)), before)
	if got := h.f.applied.get(); got != h.idx {
		t.Fatalf("applied index %d after refused txn, want %d", got, h.idx)
	}
	if got, _ := readApplied(h.f.db); got != h.idx {
		t.Fatalf("persisted applied index %d after refused txn, want %d", got, h.idx)
	}
	if b, _ := drainFeed(h.sub); len(flatten(b)) != 0 {
		t.Fatalf("refused txn published events: %+v", flatten(b))
	}
}

func TestFSM_TxnRefusalsWriteNothing(t *testing.T) {
	h := newTxnHarness(t)
	big := blobObject(MaxDocumentSize, 'x') // MaxDocumentSize+11 bytes
	nearFull := blobObject(MaxDocumentSize-200, 'n')
	cases := []struct {
		name  string
		setup []Op
		txn   func(p string) *Txn
		code  OpError
		at    int
	}{
		{"cond exists on absent", nil,
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: CondExists}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 0},
		{"cond not_exists on present", []Op{put("P/doc", `{}`)},
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: CondNotExists}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 0},
		{"second cond: wrong revision", []Op{put("P/doc", `{}`)},
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: CondExists}, {Path: p + "/doc", Kind: CondRevision, Revision: 1}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 1},
		{"cond revision 0 on present", []Op{put("P/doc", `{}`)},
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: CondRevision, Revision: 0}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 0},
		{"cond revision on absent", nil,
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: CondRevision, Revision: 5}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 0},
		{"cond of unknown kind", []Op{put("P/doc", `{}`)},
			func(p string) *Txn {
				return &Txn{Conds: []Cond{{Path: p + "/doc", Kind: "maybe"}}, Ops: []Op{put(p+"/side", `{}`)}}
			}, ErrCodeCondFailed, 0},
		{"delete absent", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), del(p + "/missing")}} },
			ErrCodeNotFound, 1},
		{"set_field on absent", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), setField(p+"/missing", "a", `1`)}} },
			ErrCodeNotFound, 1},
		{"rename_field on absent", nil,
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), renameField(p+"/missing", "a", "b", `1`)}}
			}, ErrCodeNotFound, 1},
		{"delete_field on absent", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), deleteField(p+"/missing", "a")}} },
			ErrCodeNotFound, 1},
		{"set_field after delete in the same txn", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn { return &Txn{Ops: []Op{del(p + "/doc"), setField(p+"/doc", "a", `2`)}} },
			ErrCodeNotFound, 1},
		{"rename missing field", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), setField(p+"/doc", "z", `1`), renameField(p+"/doc", "nope", "b", `1`)}}
			}, ErrCodeFieldNotFound, 2},
		{"delete missing field", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn { return &Txn{Ops: []Op{deleteField(p+"/doc", "a"), deleteField(p+"/doc", "a")}} },
			ErrCodeFieldNotFound, 1},
		{"rename onto existing field", []Op{put("P/doc", `{"a":1,"b":2}`)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), renameField(p+"/doc", "a", "b", `3`)}}
			}, ErrCodeFieldExists, 1},
		{"rename onto a field set earlier in the txn", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{setField(p+"/doc", "b", `0`), renameField(p+"/doc", "a", "b", `3`)}}
			}, ErrCodeFieldExists, 1},
		{"put over the size limit", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), put(p+"/big", big)}} },
			ErrCodeTooLarge, 1},
		{"set_field growing past the limit", []Op{put("P/doc", nearFull)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), setField(p+"/doc", "more", `"`+strings.Repeat("m", 300)+`"`)}}
			}, ErrCodeTooLarge, 1},
		{"rename_field growing past the limit", []Op{put("P/doc", nearFull)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), renameField(p+"/doc", "blob", "b", `"`+strings.Repeat("m", MaxDocumentSize)+`"`)}}
			}, ErrCodeTooLarge, 1},
		{"put of an array", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), put(p+"/x", `[1,2]`)}} },
			ErrCodeInvalid, 1},
		{"put of a string", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), put(p+"/x", `"s"`)}} },
			ErrCodeInvalid, 1},
		{"put of a number", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), put(p+"/x", `12`)}} },
			ErrCodeInvalid, 1},
		{"put of null", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), put(p+"/x", `null`)}} },
			ErrCodeInvalid, 1},
		{"put without data", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), {Kind: OpPut, Path: p + "/x"}}} },
			ErrCodeInvalid, 1},
		{"set_field without data", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), {Kind: OpSetField, Path: p + "/doc", Field: "a"}}}
			}, ErrCodeInvalid, 1},
		{"rename_field without data", []Op{put("P/doc", `{"a":1}`)},
			func(p string) *Txn {
				return &Txn{Ops: []Op{put(p+"/side", `{}`), {Kind: OpRenameField, Path: p + "/doc", Field: "a", NewField: "b"}}}
			}, ErrCodeInvalid, 1},
		{"unknown op kind", nil,
			func(p string) *Txn { return &Txn{Ops: []Op{put(p+"/side", `{}`), {Kind: "explode", Path: p + "/x"}}} },
			ErrCodeInvalid, 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fmt.Sprintf("c%02d", i)
			var setup []Op
			for _, op := range c.setup {
				op.Path = strings.Replace(op.Path, "P", p, 1)
				setup = append(setup, op)
			}
			h.setup(t, setup...)
			h.refuse(t, c.txn(p), c.code, c.at)
		})
	}
}

func TestFSM_TxnSemantics(t *testing.T) {
	h := newTxnHarness(t)

	t.Run("conds that hold", func(t *testing.T) {
		h.setup(t, put("ok/doc", `{}`))
		rev := h.idx
		res := h.apply(t, &Txn{
			Conds: []Cond{
				{Path: "ok/doc", Kind: CondExists},
				{Path: "ok/none", Kind: CondNotExists},
				{Path: "ok/doc", Kind: CondRevision, Revision: rev},
				{Path: "ok/none", Kind: CondRevision, Revision: 0},
			},
			Ops: []Op{put("ok/side", `{"v":1}`)},
		})
		if !res.OK() || res.Revision != h.idx {
			t.Fatalf("result %+v, want OK at %d", res, h.idx)
		}
		mustDoc(t, h.f, "ok/side")
	})

	t.Run("created, createRevision, createTime, revision", func(t *testing.T) {
		res := h.apply(t, &Txn{Ops: []Op{put("cr/doc", `{"a":1}`)}})
		c := h.idx
		if !res.OK() || len(res.Created) != 1 || !res.Created[0] {
			t.Fatalf("first put: %+v, want created", res)
		}
		want := &Document{Path: "cr/doc", Data: json.RawMessage(`{"a":1}`), Revision: c, CreateRevision: c, CreateTime: testTime(c), UpdateTime: testTime(c)}
		if !sameDoc(res.Docs[0], want) || !sameDoc(mustDoc(t, h.f, "cr/doc"), want) {
			t.Fatalf("after create: result %+v stored %+v, want %+v", res.Docs[0], mustDoc(t, h.f, "cr/doc"), want)
		}

		res = h.apply(t, &Txn{Ops: []Op{put("cr/doc", `{"a":2}`)}})
		r := h.idx
		if !res.OK() || res.Created[0] {
			t.Fatalf("replace: %+v, want not created", res)
		}
		want = &Document{Path: "cr/doc", Data: json.RawMessage(`{"a":2}`), Revision: r, CreateRevision: c, CreateTime: testTime(c), UpdateTime: testTime(r)}
		if got := mustDoc(t, h.f, "cr/doc"); !sameDoc(got, want) || !sameDoc(res.Docs[0], want) {
			t.Fatalf("after replace: %+v, want %+v", got, want)
		}

		res = h.apply(t, &Txn{Ops: []Op{setField("cr/doc", "b", `true`)}})
		s := h.idx
		want = &Document{Path: "cr/doc", Data: json.RawMessage(`{"a":2,"b":true}`), Revision: s, CreateRevision: c, CreateTime: testTime(c), UpdateTime: testTime(s)}
		if got := mustDoc(t, h.f, "cr/doc"); !res.OK() || res.Created[0] || !sameDoc(got, want) || !sameDoc(res.Docs[0], want) {
			t.Fatalf("after set_field: %+v (result %+v), want %+v", got, res, want)
		}

		// Delete and put again in one txn: a new document.
		res = h.apply(t, &Txn{Ops: []Op{del("cr/doc"), put("cr/doc", `{"c":3}`)}})
		d := h.idx
		if !res.OK() || res.Deleted[0] != 1 || res.Docs[0] != nil || !res.Created[1] {
			t.Fatalf("delete+put: %+v", res)
		}
		want = &Document{Path: "cr/doc", Data: json.RawMessage(`{"c":3}`), Revision: d, CreateRevision: d, CreateTime: testTime(d), UpdateTime: testTime(d)}
		if got := mustDoc(t, h.f, "cr/doc"); !sameDoc(got, want) {
			t.Fatalf("after delete+put: %+v, want %+v", got, want)
		}
	})

	t.Run("values kept verbatim", func(t *testing.T) {
		// EncodeTxn compacts JSON; another proposer need not, so frame the
		// entry by hand: Apply must store the bytes it was given.
		raw := `{ "big" : 12345678901234567890, "f": 1.0e2, "s":"\u00e9" }`
		h.idx++
		out := h.f.ApplyBatch([]*raft.Log{rawTxnLog(h.idx, `{"t":5,"o":[{"k":"put","p":"num/doc","d":`+raw+`}]}`)})
		if res := mustResult(t, out[0]); !res.OK() {
			t.Fatalf("raw put refused: %s", res.Err)
		}
		if got := mustDoc(t, h.f, "num/doc"); string(got.Data) != raw {
			t.Fatalf("put stored %s, want %s byte for byte", got.Data, raw)
		}
		res := h.apply(t, &Txn{Ops: []Op{
			setField("num/doc", "g", `1.0e2`),
			setField("num/doc", "h", `12345678901234567890`),
			setField("num/doc", "i", `{"deep": 0.1000, "arr": [1e400]}`),
		}})
		if !res.OK() {
			t.Fatalf("set_field refused: %s", res.Err)
		}
		got := string(mustDoc(t, h.f, "num/doc").Data)
		for _, want := range []string{`"big":12345678901234567890`, `"f":1.0e2`, `"g":1.0e2`, `"h":12345678901234567890`, `"i":{"deep":0.1000,"arr":[1e400]}`, `"s":"\u00e9"`} {
			if !strings.Contains(got, want) {
				t.Errorf("document %s lacks %s", got, want)
			}
		}
		// Keys come out sorted, so every node encodes the same bytes.
		if !strings.HasPrefix(got, `{"big":`) || strings.Index(got, `"g"`) > strings.Index(got, `"h"`) {
			t.Errorf("document %s: keys not sorted", got)
		}
	})

	t.Run("ops on one path see each other", func(t *testing.T) {
		drainFeed(h.sub)
		res := h.apply(t, &Txn{Ops: []Op{
			put("multi/doc", `{"a":1}`),
			setField("multi/doc", "b", `2`),
			renameField("multi/doc", "a", "c", `3`),
			deleteField("multi/doc", "b"),
		}})
		idx := h.idx
		if !res.OK() {
			t.Fatalf("refused: %s at %d", res.Err, res.Index)
		}
		wantData := []string{`{"a":1}`, `{"a":1,"b":2}`, `{"b":2,"c":3}`, `{"c":3}`}
		for i, w := range wantData {
			if string(res.Docs[i].Data) != w || res.Docs[i].Revision != idx || res.Docs[i].CreateRevision != idx {
				t.Errorf("op %d doc %+v, want data %s at %d", i, res.Docs[i], w, idx)
			}
		}
		if want := []bool{true, false, false, false}; fmt.Sprint(res.Created) != fmt.Sprint(want) {
			t.Errorf("created %v, want %v", res.Created, want)
		}
		if got := mustDoc(t, h.f, "multi/doc"); string(got.Data) != `{"c":3}` {
			t.Errorf("stored %s, want {\"c\":3}", got.Data)
		}
		b, _ := drainFeed(h.sub)
		evs := flatten(b)
		// One event per path and revision: the state the entry committed
		// (subscribers see each committed state once, never a midway one).
		if len(b) != 1 || b[0].Revision != idx || len(evs) != 1 {
			t.Fatalf("feed: %d batches, %d events; want one batch at %d with 1 event", len(b), len(evs), idx)
		}
		if e := evs[0]; e.Type != EventSet || e.Path != "multi/doc" || e.Revision != idx || string(e.Doc.Data) != wantData[3] {
			t.Errorf("event: %+v, want the final state %s", e, wantData[3])
		}
	})

	t.Run("delete and delete if exists", func(t *testing.T) {
		h.setup(t, put("del/doc", `{}`))
		drainFeed(h.sub)
		res := h.apply(t, &Txn{Ops: []Op{delIfExists("del/none"), del("del/doc"), delIfExists("del/doc")}})
		if !res.OK() || fmt.Sprint(res.Deleted) != "[0 1 0]" || res.Docs[1] != nil {
			t.Fatalf("result %+v, want deleted [0 1 0]", res)
		}
		mustNoDoc(t, h.f, "del/doc")
		b, _ := drainFeed(h.sub)
		evs := flatten(b)
		if len(evs) != 1 || evs[0].Type != EventDelete || evs[0].Path != "del/doc" || evs[0].Doc != nil || evs[0].Revision != h.idx {
			t.Fatalf("events %+v, want one delete of del/doc", evs)
		}
	})

	t.Run("document of exactly the maximum size", func(t *testing.T) {
		data := blobObject(MaxDocumentSize-len(`{"blob":""}`), 'q')
		if len(data) != MaxDocumentSize {
			t.Fatalf("test data is %d bytes", len(data))
		}
		res := h.apply(t, &Txn{Ops: []Op{put("max/doc", data)}})
		if !res.OK() {
			t.Fatalf("put of %d bytes refused: %s", len(data), res.Err)
		}
		if got := mustDoc(t, h.f, "max/doc"); len(got.Data) != MaxDocumentSize {
			t.Fatalf("stored %d bytes", len(got.Data))
		}
	})

	t.Run("empty txn and noop advance the revision only", func(t *testing.T) {
		before := withoutApplied(dumpDB(t, h.f))
		res := h.apply(t, &Txn{})
		if !res.OK() || res.Revision != h.idx {
			t.Fatalf("empty txn: %+v", res)
		}
		h.idx++
		out := h.f.ApplyBatch([]*raft.Log{noopLog(h.idx)})
		if r := mustResult(t, out[0]); !r.OK() || r.Revision != h.idx {
			t.Fatalf("noop: %+v", r)
		}
		h.idx++
		if out := h.f.ApplyBatch([]*raft.Log{confLog(h.idx)}); out[0] != nil {
			t.Fatalf("configuration entry result %v, want nil", out[0])
		}
		if got, _ := readApplied(h.f.db); got != h.idx {
			t.Fatalf("applied %d, want %d", got, h.idx)
		}
		assertSameDump(t, "after noops", withoutApplied(dumpDB(t, h.f)), before)
	})

	t.Run("entries of one batch see each other", func(t *testing.T) {
		i := h.idx
		logs := []*raft.Log{
			txnLog(t, i+1, &Txn{Time: testTime(i + 1), Ops: []Op{put("batch/a", `{"v":1}`)}}),
			txnLog(t, i+2, &Txn{Time: testTime(i + 2), Conds: []Cond{{Path: "batch/a", Kind: CondRevision, Revision: i + 1}}, Ops: []Op{put("batch/b", `{}`)}}),
			txnLog(t, i+3, &Txn{Time: testTime(i + 3), Ops: []Op{put("batch/c", `{}`), del("batch/none")}}), // refused
			txnLog(t, i+4, &Txn{Time: testTime(i + 4), Conds: []Cond{{Path: "batch/c", Kind: CondNotExists}}, Ops: []Op{setField("batch/a", "w", `4`)}}),
		}
		h.idx += 4
		out := h.f.ApplyBatch(logs)
		codes := []OpError{mustResult(t, out[0]).Err, mustResult(t, out[1]).Err, mustResult(t, out[2]).Err, mustResult(t, out[3]).Err}
		if fmt.Sprint(codes) != fmt.Sprint([]OpError{"", "", ErrCodeNotFound, ""}) {
			t.Fatalf("codes %q", codes)
		}
		mustDoc(t, h.f, "batch/b")
		mustNoDoc(t, h.f, "batch/c")
		if got := mustDoc(t, h.f, "batch/a"); string(got.Data) != `{"v":1,"w":4}` || got.Revision != i+4 || got.CreateRevision != i+1 {
			t.Fatalf("batch/a = %+v", got)
		}
	})
}

// An entry that is not a known command must stop the node, not be skipped.
func TestFSM_UndecodableEntryIsFatal(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	for _, data := range [][]byte{{99, 1, '{', '}'}, {byte(cmdTxn), 9, '{', '}'}, {byte(cmdTxn), txnVersion, '{'}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("entry %q applied without stopping", data)
				}
			}()
			f.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: data}})
		}()
	}
	if got := f.applied.get(); got != 0 {
		t.Fatalf("applied index moved to %d over undecodable entries", got)
	}
	mustOK(t, f, 1, &Txn{Ops: []Op{put("still/works", `{}`)}})
}

// ---- 4. batches larger than one Badger transaction ------------------------------

func TestFSM_ApplyBatchLargerThanOneBadgerTxn(t *testing.T) {
	// openTreeDB's 64 MiB memtables allow about 9.6 MiB (values under 1 MiB
	// count in full) and 104857 writes per Badger transaction.
	t.Run("large documents", func(t *testing.T) {
		const entries = 22 // ~20 MiB: at least two splits
		var logs []*raft.Log
		for i := 1; i <= entries; i++ {
			logs = append(logs, txnLog(t, uint64(i), &Txn{Time: testTime(uint64(i)), Ops: []Op{
				put(fmt.Sprintf("big/d%02d", i), blobObject(900<<10, byte('A'+i%26))),
			}}))
		}
		f := mustOpenFSM(t, t.TempDir())
		sub := f.feed.Subscribe(4)
		out := f.ApplyBatch(logs)
		for i, r := range out {
			if res := mustResult(t, r); !res.OK() || res.Revision != uint64(i+1) || !res.Created[0] {
				t.Fatalf("entry %d: %+v", i+1, res)
			}
		}
		if got, _ := readApplied(f.db); got != entries || f.applied.get() != entries {
			t.Fatalf("applied %d/%d, want %d", got, f.applied.get(), entries)
		}
		for i := 1; i <= entries; i++ {
			d := mustDoc(t, f, fmt.Sprintf("big/d%02d", i))
			if len(d.Data) != 900<<10+len(`{"blob":""}`) || d.Data[9] != byte('A'+i%26) || d.Revision != uint64(i) || d.UpdateTime != testTime(uint64(i)) {
				t.Fatalf("big/d%02d: %d bytes, revision %d", i, len(d.Data), d.Revision)
			}
		}
		b, closed := drainFeed(sub)
		if closed || len(b) != 1 || b[0].Revision != entries || len(b[0].Events) != entries {
			t.Fatalf("feed: closed=%v batches=%d; want one batch of %d events", closed, len(b), entries)
		}
		if n := commitVersions(t, f); n < 3 {
			t.Fatalf("documents were written in %d Badger transactions; the batch did not overflow one (test is not exercising the split)", n)
		}
	})

	t.Run("many small writes", func(t *testing.T) {
		// 512 entries (raft's MaxAppendEntries) × 206 puts, plus one applied-index
		// write per entry, is just over the write-count limit.
		const entries, perEntry = 512, 206
		var logs []*raft.Log
		for i := 1; i <= entries; i++ {
			tx := &Txn{Time: testTime(uint64(i))}
			for j := 0; j < perEntry; j++ {
				tx.Ops = append(tx.Ops, put(fmt.Sprintf("small/e%03d/d%03d", i, j), `{}`))
			}
			logs = append(logs, txnLog(t, uint64(i), tx))
		}
		f := mustOpenFSM(t, t.TempDir())
		out := f.ApplyBatch(logs)
		for i, r := range out {
			if res := mustResult(t, r); !res.OK() {
				t.Fatalf("entry %d refused: %s", i+1, res.Err)
			}
		}
		if got, _ := readApplied(f.db); got != entries {
			t.Fatalf("applied %d, want %d", got, entries)
		}
		if n := len(dumpKeys(dumpDB(t, f))); n != entries*perEntry {
			t.Fatalf("%d documents, want %d", n, entries*perEntry)
		}
		if n := commitVersions(t, f); n < 2 {
			t.Fatalf("documents were written in %d Badger transaction(s); the batch did not overflow one", n)
		}
	})
}

// commitVersions counts the distinct Badger commit versions of the documents:
// one per transaction that wrote some.
func commitVersions(t *testing.T, f *fsm) int {
	t.Helper()
	versions := map[uint64]bool{}
	err := f.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{spaceDoc}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			versions[it.Item().Version()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(versions)
}

// One small entry may rewrite one large document many times. Only its final
// state needs writing; recording every intermediate version overflows a Badger
// transaction on its own and fsm.fatal stops every replica on a valid command.
func TestFSM_EntryRewritingLargeDocumentFitsOneTxn(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	tx := &Txn{Time: testTime(1), Ops: []Op{put("amp/doc", blobObject(900<<10, 'z'))}}
	for i := 0; i < 12; i++ {
		tx.Ops = append(tx.Ops, setField("amp/doc", fmt.Sprintf("f%d", i), `1`))
	}
	var res *TxnResult
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("applying a %d-byte entry stopped the node: %v", len(txnLog(t, 1, tx).Data), p)
			}
		}()
		res = mustResult(t, f.ApplyBatch([]*raft.Log{txnLog(t, 1, tx)})[0])
	}()
	if !res.OK() {
		// A deterministic refusal would be acceptable, but then nothing is written.
		mustNoDoc(t, f, "amp/doc")
		return
	}
	d := mustDoc(t, f, "amp/doc")
	if !bytes.Contains(d.Data, []byte(`"f11":1`)) || d.Revision != 1 {
		t.Fatalf("amp/doc missing the last field (revision %d)", d.Revision)
	}
}

// ---- 6. snapshot and restore ----------------------------------------------------------

func TestFSM_SnapshotRestoreIntoFreshFSM(t *testing.T) {
	logs := genLog(t, 99, 400)
	src := mustOpenFSM(t, t.TempDir())
	applyInBatches(src, logs[:300], func() int { return 37 })
	snap := mustSnapshot(t, src)

	base := t.TempDir()
	dst := mustOpenFSM(t, base)
	sub := dst.feed.Subscribe(4)
	mustRestore(t, dst, snap)

	assertSameDump(t, "restored state", dumpDB(t, dst), dumpDB(t, src))
	if got := dst.applied.get(); got != 300 {
		t.Fatalf("restored applied index %d, want 300", got)
	}
	b, closed := drainFeed(sub)
	if closed || len(b) != 1 || !b[0].Reset || b[0].Revision != 300 || len(b[0].Events) != 0 {
		t.Fatalf("feed after restore: closed=%v batches=%+v; want one Reset batch at 300", closed, b)
	}
	if got := readCurrent(t, base); got != "1" {
		t.Fatalf("CURRENT = %q, want 1", got)
	}
	if got := treeDirs(t, base); fmt.Sprint(got) != "[tree-1]" {
		t.Fatalf("tree dirs %v, want [tree-1]", got)
	}

	// Reopening from disk finds the restored generation.
	mustCloseFSM(t, dst)
	dst = mustOpenFSM(t, base)
	if got := dst.applied.get(); got != 300 {
		t.Fatalf("reopened applied index %d, want 300", got)
	}
	assertSameDump(t, "reopened restored state", dumpDB(t, dst), dumpDB(t, src))

	// Both continue identically; entries at or below the snapshot are skipped.
	resSrc := applyInBatches(src, logs[300:], func() int { return 13 })
	resDst := applyInBatches(dst, logs[250:], func() int { return 13 })
	if ok, diff := sameResults(resDst[50:], resSrc); !ok {
		t.Fatalf("results after restore differ: %s", diff)
	}
	assertSameDump(t, "state after more entries", dumpDB(t, dst), dumpDB(t, src))
}

func TestFSM_RestoreReplacesExistingState(t *testing.T) {
	src := mustOpenFSM(t, t.TempDir())
	for i := uint64(1); i <= 20; i++ {
		mustOK(t, src, i, &Txn{Ops: []Op{put(fmt.Sprintf("src/d%02d", i), fmt.Sprintf(`{"i":%d}`, i))}})
	}
	mustOK(t, src, 21, &Txn{Ops: []Op{del("src/d03"), del("src/d07")}}) // tombstones in the backup
	snap := mustSnapshot(t, src)

	base := t.TempDir()
	dst := mustOpenFSM(t, base)
	for i := uint64(1); i <= 40; i++ {
		mustOK(t, dst, i, &Txn{Ops: []Op{put(fmt.Sprintf("stale/d%02d", i), `{}`), put("src/d03", `{"stale":true}`)}})
	}
	mustRestore(t, dst, snap)
	assertSameDump(t, "restored over existing state", dumpDB(t, dst), dumpDB(t, src))
	mustNoDoc(t, dst, "src/d03")
	if got := dst.applied.get(); got != 21 {
		t.Fatalf("applied %d after restoring an older snapshot, want 21", got)
	}

	// A second restore moves to the next generation and drops the previous one.
	mustOK(t, src, 22, &Txn{Ops: []Op{put("src/new", `{}`)}})
	mustRestore(t, dst, mustSnapshot(t, src))
	if got := readCurrent(t, base); got != "2" {
		t.Fatalf("CURRENT = %q, want 2", got)
	}
	if got := treeDirs(t, base); fmt.Sprint(got) != "[tree-2]" {
		t.Fatalf("tree dirs %v, want [tree-2]", got)
	}
	assertSameDump(t, "second restore", dumpDB(t, dst), dumpDB(t, src))
	// New writes after a restore are visible (Badger versions continue above the loaded ones).
	mustOK(t, dst, 23, &Txn{Ops: []Op{setField("src/d01", "x", `1`)}})
	if got := mustDoc(t, dst, "src/d01"); string(got.Data) != `{"i":1,"x":1}` || got.Revision != 23 {
		t.Fatalf("write after restore: %+v", got)
	}
}

func TestFSM_OpenRemovesStaleGenerations(t *testing.T) {
	base := t.TempDir()
	f := mustOpenFSM(t, base)
	mustOK(t, f, 1, &Txn{Ops: []Op{put("x/a", `{}`)}})
	mustCloseFSM(t, f)
	// A restore that crashed before switching CURRENT left tree-1 behind.
	for _, d := range []string{"tree-1", "tree-9"} {
		if err := mkdirWithFile(filepath.Join(base, d)); err != nil {
			t.Fatal(err)
		}
	}
	f = mustOpenFSM(t, base)
	if got := treeDirs(t, base); fmt.Sprint(got) != "[tree-0]" {
		t.Fatalf("tree dirs %v, want [tree-0]", got)
	}
	mustDoc(t, f, "x/a")
}

// Persist runs concurrently with ApplyBatch in raft; every snapshot must hold
// exactly the entries up to the applied index it carries.
func TestFSM_SnapshotDuringApplyIsConsistent(t *testing.T) {
	const entries = 4000 // long enough that some snapshot races a commit
	f := mustOpenFSM(t, t.TempDir())
	var logs []*raft.Log
	for i := 1; i <= entries; i++ {
		logs = append(logs, txnLog(t, uint64(i), &Txn{Time: testTime(uint64(i)), Ops: []Op{put(fmt.Sprintf("c/k%04d", i), fmt.Sprintf(`{"i":%d}`, i))}}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		applyInBatches(f, logs, func() int { return 5 })
	}()
	var snaps [][]byte
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		snaps = append(snaps, mustSnapshot(t, f))
	}
	midway := 0
	for i, snap := range snaps {
		d := loadBackupDump(t, snap)
		idx := dumpApplied(t, d)
		if idx < entries {
			midway++
		}
		keys := dumpKeys(d)
		if uint64(len(keys)) != idx {
			t.Fatalf("snapshot %d: applied %d but %d documents", i, idx, len(keys))
		}
		for j, k := range keys {
			if want := fmt.Sprintf("c/k%04d", j+1); k != want {
				t.Fatalf("snapshot %d: document %d is %s, want %s", i, j, k, want)
			}
		}
	}
	t.Logf("%d snapshots, %d taken while applying", len(snaps), midway)
	if idx := f.applied.get(); idx != entries {
		t.Fatalf("applied %d, want %d", idx, entries)
	}
}

// loadBackupDump loads a Badger backup stream into an in-memory database and
// returns its live keys and values.
func loadBackupDump(t *testing.T, b []byte) []kv {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil).WithMemTableSize(16 << 20).WithBlockCacheSize(8 << 20))
	if err != nil {
		t.Fatalf("open in-memory badger: %v", err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Load(bytes.NewReader(b), 16); err != nil {
		t.Fatalf("load backup: %v", err)
	}
	return dumpBadger(t, db)
}

// dumpApplied returns the applied index recorded in a dump (0 when none is,
// as in a database nothing was applied to yet).
func dumpApplied(t *testing.T, d []kv) uint64 {
	t.Helper()
	for _, e := range d {
		if bytes.Equal(e.key, keyApplied) {
			if len(e.val) != 8 {
				t.Fatalf("applied index of %d bytes", len(e.val))
			}
			return binary.BigEndian.Uint64(e.val)
		}
	}
	return 0
}

// rawTxnLog frames a hand-written CmdTxn body.
func rawTxnLog(idx uint64, body string) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: append([]byte{byte(cmdTxn), txnVersion}, body...)}
}

func mkdirWithFile(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "junk"), []byte("x"), 0o640)
}

// appliedBytes is the stored form of an applied index (for direct checks).
func appliedBytes(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func TestFSM_AppliedIndexStoredWithTheBatch(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	f.ApplyBatch([]*raft.Log{
		txnLog(t, 1, &Txn{Time: 1, Ops: []Op{put("a/b", `{}`)}}),
		confLog(2),
		txnLog(t, 3, &Txn{Time: 3, Ops: []Op{del("a/none")}}), // refused: still applied
	})
	var got []byte
	if err := f.view(func(txn *badger.Txn) error {
		item, err := txn.Get(keyApplied)
		if err != nil {
			return err
		}
		got, err = item.ValueCopy(nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, appliedBytes(3)) {
		t.Fatalf("applied key %x, want %x", got, appliedBytes(3))
	}
}
