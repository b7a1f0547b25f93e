package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"

	"github.com/edgebase/edgebase/query"
)

// ---- helpers -------------------------------------------------------------------

// indexSpace is every key of the two index spaces, with its value.
func indexSpace(txn *badger.Txn) (map[string]string, error) {
	out := map[string]string{}
	for _, space := range []byte{spaceIndex, spaceAuto} {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{space}
		it := txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return nil, err
			}
			out[string(it.Item().Key())] = string(v)
		}
		it.Close()
	}
	return out, nil
}

// recomputedIndexes is what the index spaces must hold for the documents
// and declarations of txn's state, computed from scratch: every user
// document's automatic entries and its entry in every index its project
// declares for its collection.
func recomputedIndexes(txn *badger.Txn) (map[string]string, error) {
	out := map[string]string{}
	decls := map[string]*projectIndexes{}
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte{spaceDoc}
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		path := string(it.Item().Key()[1:])
		pid, parent, coll, ok := userDoc(path)
		if !ok {
			continue
		}
		p := decls[pid]
		if p == nil {
			d, err := getDoc(txn, IndexesPath(pid))
			if err != nil {
				return nil, err
			}
			p = parseProjectIndexes(d)
			decls[pid] = p
		}
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		d, err := decodeDoc(path, v)
		if err != nil {
			return nil, err
		}
		for _, k := range documentIndexKeys(p, pid, parent, coll, path, d.Data) {
			out[string(k)] = path
		}
	}
	return out, nil
}

func diffIndexes(got, want map[string]string) []string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("missing %q -> %s", k, v))
		} else if g != v {
			out = append(out, fmt.Sprintf("key %q -> %s, want %s", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("extra %q -> %s", k, v))
		}
	}
	sort.Strings(out)
	return out
}

// builderIdle reports whether the builder has nothing left to do.
func builderIdle(f *fsm) (bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.buildMu.Lock()
	defer f.buildMu.Unlock()
	var pending bool
	err := f.db.View(func(txn *badger.Txn) error {
		task, ok, err := f.builder.plan(txn)
		pending = ok
		_ = task
		return err
	})
	return !pending, err
}

// waitIndexesSettled waits until the builder of f has no work left, then
// requires the index spaces to be exactly what the documents and the
// declarations make them.
func waitIndexesSettled(t *testing.T, f *fsm, what string) {
	t.Helper()
	mustEventually(t, 60*time.Second, what+": index builder idle", func() (bool, string) {
		idle, err := builderIdle(f)
		if err != nil {
			return false, err.Error()
		}
		return idle, fmt.Sprintf("%d chunks run", f.builder.chunksRun())
	})
	requireExactIndexes(t, f, what)
}

func requireExactIndexes(t *testing.T, f *fsm, what string) {
	t.Helper()
	var got, want map[string]string
	err := f.view(func(txn *badger.Txn) error {
		var err error
		if got, err = indexSpace(txn); err != nil {
			return err
		}
		want, err = recomputedIndexes(txn)
		return err
	})
	if err != nil {
		t.Fatalf("%s: read indexes: %v", what, err)
	}
	if d := diffIndexes(got, want); len(d) > 0 {
		t.Fatalf("%s: the index spaces differ from a recomputation in %d keys (%d present, %d expected); first: %s",
			what, len(d), len(got), len(want), strings.Join(d[:min(len(d), 8)], "\n  "))
	}
	if len(want) == 0 {
		t.Fatalf("%s: no index entries at all: the check would prove nothing", what)
	}
}

func indexesDoc(t testing.TB, ixs ...query.Index) string {
	t.Helper()
	if ixs == nil {
		ixs = []query.Index{}
	}
	b, err := json.Marshal(map[string]any{"indexes": ixs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// declaredID is the id of ix as a declaration names it (parsed, as Apply
// reads it).
func declaredID(t testing.TB, ix query.Index) string {
	t.Helper()
	list, err := query.ParseIndexes([]byte(indexesDoc(t, ix)))
	if err != nil || len(list) != 1 {
		t.Fatalf("ParseIndexes(%+v): %v", ix, err)
	}
	return list[0].ID()
}

func fsmIndexStates(t *testing.T, f *fsm, pid string) []IndexState {
	t.Helper()
	var out []IndexState
	if err := f.view(func(txn *badger.Txn) error {
		var err error
		out, err = f.indexDefs(txn, pid)
		return err
	}); err != nil {
		t.Fatalf("indexDefs(%s): %v", pid, err)
	}
	return out
}

func countPrefix(t *testing.T, f *fsm, prefix []byte) int {
	t.Helper()
	n := 0
	if err := f.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func encValue(v string) []byte { return query.AppendValue(nil, json.RawMessage(v), false) }

func autoKey(parent, field, value, path string) []byte {
	pj, _ := json.Marshal(path)
	return append(append(autoKeyPrefix(parent, field), encValue(value)...), query.AppendValue(nil, pj, false)...)
}

var (
	ixStatusTotal = query.Index{Collection: "orders", Fields: []query.IndexField{{Field: "status"}, {Field: "total", Direction: "desc"}}}
	ixGroupRank   = query.Index{Collection: "orders", CollectionGroup: true, Fields: []query.IndexField{{Field: "meta.rank"}}}
	ixItemsPrice  = query.Index{Collection: "items", Fields: []query.IndexField{{Field: "price"}}}
)

// ---- validation ----------------------------------------------------------------

func TestIndexesDeclarationIsValidatedInApply(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	good := indexesDoc(t, ixStatusTotal)
	for i, c := range []struct {
		name string
		ops  []Op
		at   int
	}{
		{"not an index list", []Op{put("p1/orders/a", `{"x":1}`), put(IndexesPath("p1"), `{"indexes":"x"}`)}, 1},
		{"unknown member", []Op{put(IndexesPath("p1"), `{"indexes":[],"other":1}`)}, 0},
		{"bad field list", []Op{put(IndexesPath("p1"), `{"indexes":[{"collection":"orders","fields":[]}]}`)}, 0},
		{"system collection", []Op{put(IndexesPath("p1"), `{"indexes":[{"collection":"_users","fields":[{"field":"a"}]}]}`)}, 0},
	} {
		res := applyOne(t, f, uint64(i+1), &Txn{Ops: c.ops})
		if res.Err != ErrCodeInvalidIndexes || res.Index != c.at || !res.OpFailed {
			t.Fatalf("%s: result %+v, want %s at op %d", c.name, res, ErrCodeInvalidIndexes, c.at)
		}
	}
	if d := getDocT(t, f, "p1/orders/a"); d != nil {
		t.Fatalf("a refused txn wrote %s", d.Path)
	}
	idx := uint64(10)
	mustOK(t, f, idx, &Txn{Ops: []Op{put(IndexesPath("p1"), good)}})
	// A field op that leaves invalid content is refused too.
	idx++
	if res := applyOne(t, f, idx, &Txn{Ops: []Op{setField(IndexesPath("p1"), "extra", `1`)}}); res.Err != ErrCodeInvalidIndexes {
		t.Fatalf("set field on the declarations: %+v, want %s", res, ErrCodeInvalidIndexes)
	}
	if st := fsmIndexStates(t, f, "p1"); len(st) != 1 || st[0].ID != declaredID(t, ixStatusTotal) {
		t.Fatalf("declared indexes %+v, want the one declared", st)
	}
	// A delete is always allowed: no declaration, no index.
	idx++
	mustOK(t, f, idx, &Txn{Ops: []Op{del(IndexesPath("p1"))}})
	if st := fsmIndexStates(t, f, "p1"); len(st) != 0 {
		t.Fatalf("declared indexes after the delete: %+v", st)
	}
}

// ---- maintenance in Apply ------------------------------------------------------

func TestIndexesMaintainedByApply(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	idx := uint64(0)
	apply := func(ops ...Op) {
		t.Helper()
		idx++
		mustOK(t, f, idx, &Txn{Ops: ops})
	}
	// Documents written before any declaration.
	apply(
		put("p1/orders/o1", `{"status":"new","total":10,"meta":{"rank":3}}`),
		put("p1/users/u1/orders/o2", `{"status":"paid","total":5.5,"meta":{"rank":1}}`),
		put("p1/users/u1/orders/o3", `{"status":"paid"}`), // no total: not in ixStatusTotal
		put("p1/items/i1", `{"price":3,"name":"`+strings.Repeat("x", 2000)+`"}`),
		put("p1/_users/u1", `{"email":"a@x"}`), // system: never indexed
		put("p2/orders/o1", `{"status":"new","total":1}`),
		put("p1/top", `{"status":"new"}`), // directly under the project: never indexed
	)
	// The automatic entries exist at once, exactly for scalar top-level fields.
	if n := countPrefix(t, f, autoKey("p1/orders", "status", `"new"`, "p1/orders/o1")); n != 1 {
		t.Fatalf("automatic entry of p1/orders/o1 status: %d keys", n)
	}
	if n := countPrefix(t, f, autoKeyPrefix("p1/orders", "meta")); n != 0 {
		t.Fatalf("an object field has %d automatic entries", n)
	}
	if n := countPrefix(t, f, autoKeyPrefix("p1/items", "name")); n != 0 {
		t.Fatalf("a 2000-byte string has %d automatic entries", n)
	}
	if n := countPrefix(t, f, []byte{spaceAuto, 'p', '1', '/', '_'}); n != 0 {
		t.Fatalf("system documents have %d automatic entries", n)
	}
	if n := countPrefix(t, f, autoKeyPrefix("p1", "status")); n != 0 {
		t.Fatalf("a document directly under the project has %d automatic entries", n)
	}
	requireExactIndexes(t, f, "before any declaration")

	// Declare three indexes in a batch whose other entries write documents
	// before and after the declaration.
	idx++
	logs := []*raft.Log{
		txnLog(t, idx, &Txn{Time: testTime(idx), Ops: []Op{put("p1/orders/o4", `{"status":"new","total":7,"meta":{"rank":2}}`)}}),
		txnLog(t, idx+1, &Txn{Time: testTime(idx + 1), Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal, ixGroupRank, ixItemsPrice)), put("p1/items/i2", `{"price":1}`)}}),
		txnLog(t, idx+2, &Txn{Time: testTime(idx + 2), Ops: []Op{setField("p1/orders/o1", "status", `"paid"`), del("p1/users/u1/orders/o3")}}),
	}
	for i, r := range f.ApplyBatch(logs) {
		if res := mustResult(t, r); !res.OK() {
			t.Fatalf("entry %d: %+v", i, res)
		}
	}
	idx += 2
	waitIndexesSettled(t, f, "after the declaration")
	for _, st := range fsmIndexStates(t, f, "p1") {
		if st.State != IndexReady {
			t.Fatalf("index %s is %s after the build", st.ID, st.State)
		}
	}
	// Hand-built keys, independent of the recomputation's code.
	pj := func(p string) []byte { b, _ := json.Marshal(p); return b }
	k := declaredKeyPrefix("p1", declaredID(t, ixStatusTotal))
	k = append(append(k, "p1/orders"...), 0)
	k = append(k, encValue(`"paid"`)...)
	k = query.AppendValue(k, json.RawMessage(`10`), true)
	k = query.AppendValue(k, pj("p1/orders/o1"), true)
	if n := countPrefix(t, f, k); n != 1 {
		t.Fatalf("entry of p1/orders/o1 in the status index: %d keys", n)
	}
	if n := countPrefix(t, f, declaredKeyPrefix("p1", declaredID(t, ixGroupRank))); n != 3 {
		t.Fatalf("the group index has %d entries, want 3 (o1, o2, o4)", n)
	}

	// Updates, renames, deletes keep them exact.
	apply(setField("p1/users/u1/orders/o2", "total", `99`), renameField("p1/orders/o4", "status", "state", `"new"`))
	apply(del("p1/orders/o1"), put("p1/orders/o5", `{"status":"new","total":1,"meta":{"rank":0}}`))
	apply(deleteField("p1/items/i1", "price"), put("p1/users/u2/items/i3", `{"price":2}`))
	requireExactIndexes(t, f, "after updates")

	// Removing a declaration: its entries and markers go, the others stay.
	apply(put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal, ixItemsPrice)))
	waitIndexesSettled(t, f, "after removing the group index")
	if n := countPrefix(t, f, declaredKeyPrefix("p1", declaredID(t, ixGroupRank))); n != 0 {
		t.Fatalf("the removed index keeps %d entries", n)
	}
	if n := countPrefix(t, f, ixReadyKey("p1", declaredID(t, ixGroupRank))); n != 0 {
		t.Fatalf("the removed index keeps its ready marker")
	}
	// Declared again after writes it missed: rebuilt from scratch.
	apply(put(IndexesPath("p1"), indexesDoc(t, ixGroupRank)))
	waitIndexesSettled(t, f, "after declaring the group index again")
	// Removed and declared again before the builder could drop it (one
	// batch: the builder never runs inside one): the entries written while
	// it was not declared are not left behind.
	idx++
	logs = []*raft.Log{
		txnLog(t, idx, &Txn{Time: testTime(idx), Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixItemsPrice))}}),
		txnLog(t, idx+1, &Txn{Time: testTime(idx + 1), Ops: []Op{setField("p1/orders/o5", "meta", `{"rank":9}`), del("p1/orders/o4")}}),
		txnLog(t, idx+2, &Txn{Time: testTime(idx + 2), Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixGroupRank, ixItemsPrice))}}),
	}
	for i, r := range f.ApplyBatch(logs) {
		if res := mustResult(t, r); !res.OK() {
			t.Fatalf("entry %d: %+v", i, res)
		}
	}
	idx += 2
	if st := fsmIndexStates(t, f, "p1"); st[0].State != IndexBuilding {
		t.Fatalf("the index declared again is %s before its rebuild", st[0].State)
	}
	waitIndexesSettled(t, f, "after removing and declaring the group index in one batch")

	// Restart: the cache is rebuilt from the tree.
	dir := f.base
	mustCloseFSM(t, f)
	f = mustOpenFSM(t, dir)
	idx++
	mustOK(t, f, idx, &Txn{Ops: []Op{put("p1/orders/o6", `{"status":"new","total":3,"meta":{"rank":4}}`)}})
	requireExactIndexes(t, f, "after a restart")

	// Deleting the declarations drops every declared entry.
	idx++
	mustOK(t, f, idx, &Txn{Ops: []Op{del(IndexesPath("p1"))}})
	waitIndexesSettled(t, f, "after deleting the declarations")
	if n := countPrefix(t, f, []byte{spaceIndex}); n != 0 {
		t.Fatalf("%d declared entries left without declarations", n)
	}
}

// ---- backfill while writing -------------------------------------------------------

// A tree from before the automatic indexes (simulated by removing them) is
// backfilled in chunks while entries keep being applied, and ends exact.
func TestIndexesAutoBackfillWhileApplying(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	const docs = 6000
	idx := uint64(0)
	for i := 0; i < docs; i += 500 {
		var ops []Op
		for j := i; j < i+500; j++ {
			ops = append(ops, put(fmt.Sprintf("p1/c%d/d%05d", j%3, j), fmt.Sprintf(`{"n":%d,"s":"v%d","b":%v}`, j, j%7, j%2 == 0)))
		}
		idx++
		mustOK(t, f, idx, &Txn{Ops: ops})
	}
	// Forget the automatic indexes, as a tree written by an older binary.
	f.mu.RLock()
	f.buildMu.Lock()
	err := f.db.Update(func(txn *badger.Txn) error {
		if _, _, err := deleteRange(txn, []byte{spaceAuto}, nil); err != nil {
			return err
		}
		return txn.Delete(keyIxAuto)
	})
	if err == nil {
		err = f.db.DropPrefix([]byte{spaceAuto})
	}
	f.buildMu.Unlock()
	f.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, f, []byte{spaceAuto}); n != 0 {
		t.Fatalf("%d automatic entries left", n)
	}
	chunksBefore := f.builder.chunksRun()
	f.wakeBuilder()

	rng := rand.New(rand.NewSource(1))
	applied, during := 0, 0
	for {
		ready := false
		_ = f.view(func(txn *badger.Txn) error { ready = autoReady(txn); return nil })
		if ready {
			break
		}
		var ops []Op
		for j := 0; j < 20; j++ {
			n := rng.Intn(docs + 200)
			p := fmt.Sprintf("p1/c%d/d%05d", n%3, n)
			switch rng.Intn(3) {
			case 0:
				ops = append(ops, delIfExists(p))
			default:
				ops = append(ops, put(p, fmt.Sprintf(`{"n":%d,"s":"w%d"}`, rng.Intn(100), rng.Intn(5))))
			}
		}
		idx++
		mustOK(t, f, idx, &Txn{Ops: ops})
		applied++
		if chunks := f.builder.chunksRun() - chunksBefore; chunks > 0 {
			during++
		}
		if applied > 100000 {
			t.Fatal("the backfill never finished")
		}
	}
	chunks := f.builder.chunksRun() - chunksBefore
	t.Logf("backfill: %d chunks; %d entries applied while it ran", chunks, during)
	if chunks < docs/buildChunk {
		t.Fatalf("the backfill took %d chunks for %d documents", chunks, docs)
	}
	if during < 2 {
		t.Fatalf("only %d entries were applied while the backfill ran: Apply waited for it", during)
	}
	waitIndexesSettled(t, f, "after the backfill")
}

// ---- a real cluster ------------------------------------------------------------

// A declared index is built on every node of a 3-node cluster over 20,000
// documents while writes go on, and every node ends with exactly the entries
// its documents make; a follower that catches up through a snapshot holds the
// same index space as the leader.
func TestIndexesBuildOnClusterWhileWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 documents on 3 nodes")
	}
	tune := rvTuning()
	c := newRVCluster(t, 3, tune)
	l := c.leader()
	ls := c.nodes[l].s
	const docs = 20000
	docPath := func(n int) string {
		if n%4 == 0 {
			return fmt.Sprintf("p1/users/u%03d/orders/o%05d", n%100, n)
		}
		return fmt.Sprintf("p1/orders/o%05d", n)
	}
	docData := func(rng *rand.Rand, n int) string {
		return fmt.Sprintf(`{"status":"s%d","total":%d,"meta":{"rank":%d},"tags":["a","b"]}`, rng.Intn(4), rng.Intn(1000), rng.Intn(50))
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < docs; i += 500 {
		var ops []Op
		for j := i; j < i+500; j++ {
			ops = append(ops, put(docPath(j), docData(rng, j)))
		}
		mustTxn(t, ls, ops...)
	}
	mustTxn(t, ls, put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal, ixGroupRank)))

	var stop atomic.Bool
	var during, total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for !stop.Load() {
				building := false
				if st, err := ls.Indexes("p1"); err == nil {
					for _, s := range st {
						building = building || s.State == IndexBuilding
					}
				}
				var ops []Op
				for j := 0; j < 10; j++ {
					n := rng.Intn(docs + 500)
					if rng.Intn(4) == 0 {
						ops = append(ops, delIfExists(docPath(n)))
					} else {
						ops = append(ops, put(docPath(n), docData(rng, n)))
					}
				}
				res, err := ls.Txn(ctxT(t, 10*time.Second), &Txn{Time: time.Now().UnixNano(), Ops: ops})
				if errors.Is(err, ErrUnknownOutcome) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrTimeout) {
					// A loaded 2-core machine may see an election: the
					// check below is about the state, whichever writes
					// committed.
					continue
				}
				if err != nil || !res.OK() {
					errc <- fmt.Errorf("write during the build: %v %+v", err, res)
					return
				}
				total.Add(1)
				if st, err := ls.Indexes("p1"); err == nil && building {
					still := false
					for _, s := range st {
						still = still || s.State == IndexBuilding
					}
					if still {
						during.Add(1)
					}
				}
			}
		}(int64(10 + w))
	}
	mustEventually(t, 120*time.Second, "every node to build both indexes", func() (bool, string) {
		for _, nd := range c.nodes {
			st, err := nd.s.Indexes("p1")
			if err != nil {
				return false, err.Error()
			}
			if len(st) != 2 {
				return false, fmt.Sprintf("%s: %d indexes", nd.id, len(st))
			}
			for _, s := range st {
				if s.State != IndexReady {
					return false, fmt.Sprintf("%s: %s %s", nd.id, s.ID, s.State)
				}
			}
		}
		return true, ""
	})
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	t.Logf("%d write txns, %d committed while the leader's build was running", total.Load(), during.Load())
	if during.Load() < 3 {
		t.Fatalf("only %d writes committed during the build: writes did not flow between chunks", during.Load())
	}
	want := ls.AppliedIndex()
	for _, nd := range c.nodes {
		mustEventually(t, 20*time.Second, nd.id+" to apply every write", func() (bool, string) {
			return nd.s.AppliedIndex() >= want, ""
		})
		waitIndexesSettled(t, nd.s.fsm, nd.id)
	}
}

// A follower that catches up by installing the leader's snapshot gets the
// index space with it: equal to the leader's once both are settled.
func TestIndexesTravelInSnapshots(t *testing.T) {
	tune := rvTuning()
	tune.TrailingLogs = 2
	c := newRVCluster(t, 3, tune)
	l := c.leader()
	f := (l + 1) % 3
	ls := c.nodes[l].s
	mustTxn(t, ls, put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal)))
	c.close(f)
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 20; i++ {
		var ops []Op
		for j := 0; j < 100; j++ {
			ops = append(ops, put(fmt.Sprintf("p1/orders/o%04d", i*100+j), fmt.Sprintf(`{"status":"s%d","total":%d}`, rng.Intn(3), rng.Intn(100))))
		}
		mustTxn(t, ls, ops...)
	}
	mustTxn(t, ls, put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal, ixGroupRank)))
	// Both running nodes snapshot and compact their logs: whichever leads
	// when the follower comes back (leadership may move on a loaded
	// machine) can only send it a snapshot.
	for i, nd := range c.nodes {
		if i == f {
			continue
		}
		if err := nd.s.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			t.Fatalf("%s snapshot: %v", nd.id, err)
		}
	}
	mustTxn(t, ls, put("p1/orders/after", `{"status":"s1","total":1,"meta":{"rank":1}}`))
	c.open(f)
	fs := c.nodes[f].s
	want := ls.AppliedIndex()
	mustEventually(t, 20*time.Second, "the follower to catch up", func() (bool, string) {
		return fs.AppliedIndex() >= want, fmt.Sprintf("applied %d of %d", fs.AppliedIndex(), want)
	})
	if gen := readCurrent(t, c.nodes[f].dir+"/tree"); gen == "0" {
		t.Fatalf("the follower caught up without installing a snapshot")
	}
	waitIndexesSettled(t, ls.fsm, "leader")
	waitIndexesSettled(t, fs.fsm, "follower")
	var lead, foll map[string]string
	_ = ls.fsm.view(func(txn *badger.Txn) error { var err error; lead, err = indexSpace(txn); return err })
	_ = fs.fsm.view(func(txn *badger.Txn) error { var err error; foll, err = indexSpace(txn); return err })
	if d := diffIndexes(foll, lead); len(d) > 0 {
		t.Fatalf("the follower's index space differs from the leader's in %d keys: %v", len(d), d[:min(len(d), 5)])
	}
	for _, s := range []*Store{ls, fs} {
		st, err := s.Indexes("p1")
		if err != nil || len(st) != 2 || st[0].State != IndexReady || st[1].State != IndexReady {
			t.Fatalf("%s: indexes %+v, %v", s.NodeID(), st, err)
		}
	}
}

// BenchmarkApplyAutomaticIndexes measures Apply with and without the
// automatic entries of 10-field documents: the same documents at user paths
// (indexed) and under a system segment (never indexed).
func BenchmarkApplyAutomaticIndexes(b *testing.B) {
	for _, c := range []struct{ name, coll string }{{"indexed", "p1/c"}, {"unindexed", "p1/_c"}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := openFSM(b.TempDir(), testLogger(), newFeed())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = f.close() }()
			const perTxn = 100
			data := func(i int) string {
				return fmt.Sprintf(`{"a":%d,"b":"s%d","c":true,"d":null,"e":%d.5,"f":"status-%d","g":%d,"h":"x","i":false,"j":%d}`, i, i%10, i, i%4, i*7, i%3)
			}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				ops := make([]Op, perTxn)
				for j := range ops {
					ops[j] = put(fmt.Sprintf("%s/d%07d", c.coll, (n*perTxn+j)%50000), data(n*perTxn+j))
				}
				out := f.ApplyBatch([]*raft.Log{txnLog(b, uint64(n+1), &Txn{Time: testTime(uint64(n + 1)), Ops: ops})})
				if res := out[0].(*TxnResult); !res.OK() {
					b.Fatalf("refused: %s", res.Err)
				}
			}
			b.ReportMetric(float64(b.N*perTxn)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// An entry whose index writes would not fit in one Badger transaction is
// refused, identically on every node, instead of stopping Apply.
func TestIndexesEntryTooLargeForItsIndexesIsRefused(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	var ixs []query.Index
	for i := 0; i < 200; i++ {
		ixs = append(ixs, query.Index{Collection: "orders", Fields: []query.IndexField{{Field: fmt.Sprintf("f%03d", i)}}})
	}
	mustOK(t, f, 1, &Txn{Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixs...))}})
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 200; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"f%03d":"%s"`, i, strings.Repeat("v", 40))
	}
	b.WriteString("}")
	var ops []Op
	for i := 0; i < MaxTxnOps; i++ {
		ops = append(ops, put(fmt.Sprintf("p1/orders/o%04d", i), b.String()))
	}
	res := applyOne(t, f, 2, &Txn{Ops: ops})
	if res.Err != ErrCodeTooLarge {
		t.Fatalf("a txn of %d documents with 200 declared indexes each: %+v, want %s", len(ops), res.Err, ErrCodeTooLarge)
	}
	if d := getDocT(t, f, "p1/orders/o0000"); d != nil {
		t.Fatal("the refused txn wrote a document")
	}
	// A smaller one of the same documents commits, with its entries.
	mustOK(t, f, 3, &Txn{Ops: ops[:50]})
	waitIndexesSettled(t, f, "after the smaller txn")
}

// The same log applied entry by entry and in batches larger than one Badger
// transaction (Apply commits part of the batch and replays the rest) leaves
// the same documents and exact index spaces; declarations change in the
// middle of batches.
func TestIndexesDeterministicAcrossBatchings(t *testing.T) {
	one := mustOpenFSM(t, t.TempDir())
	many := mustOpenFSM(t, t.TempDir())
	rng := rand.New(rand.NewSource(7))
	perEntry := 200
	// Enough index keys that one batch of all entries overflows a Badger
	// transaction (each document: 2 keys of its own, 10 automatic, 1-2 declared).
	entries := int(many.db.MaxBatchCount())/(perEntry*13) + 20
	decls := []string{
		indexesDoc(t, ixStatusTotal),
		indexesDoc(t, ixStatusTotal, ixGroupRank),
		indexesDoc(t, ixGroupRank),
	}
	var logs []*raft.Log
	for i := 1; i <= entries; i++ {
		idx := uint64(i)
		var ops []Op
		if i%17 == 0 {
			ops = append(ops, put(IndexesPath("p1"), decls[rng.Intn(len(decls))]))
		}
		for j := 0; j < perEntry; j++ {
			n := rng.Intn(3000)
			p := fmt.Sprintf("p%d/orders/o%04d", 1+n%2, n)
			if n%5 == 0 {
				p = fmt.Sprintf("p1/users/u%d/orders/o%04d", n%7, n)
			}
			if rng.Intn(6) == 0 {
				ops = append(ops, delIfExists(p))
				continue
			}
			ops = append(ops, put(p, fmt.Sprintf(`{"status":"s%d","total":%d,"meta":{"rank":%d},"a":%d,"b":"x%d","c":true,"d":null,"e":%d,"f":"y","g":%d,"h":false}`,
				rng.Intn(3), rng.Intn(100), rng.Intn(9), n, n%10, rng.Intn(5), n%3)))
		}
		logs = append(logs, txnLog(t, idx, &Txn{Time: testTime(idx), Ops: ops}))
	}
	for i, l := range logs {
		if res := mustResult(t, one.ApplyBatch([]*raft.Log{l})[0]); !res.OK() {
			t.Fatalf("entry %d alone: %+v", i+1, res)
		}
	}
	for i, r := range many.ApplyBatch(logs) {
		if res := mustResult(t, r); !res.OK() {
			t.Fatalf("entry %d in the batch: %+v", i+1, res)
		}
	}
	if n := commitVersions(t, many); n < 2 {
		t.Fatalf("the batch was committed in %d transaction(s): it did not overflow one", n)
	}
	waitIndexesSettled(t, one, "entry by entry")
	waitIndexesSettled(t, many, "one batch")
	docs := func(f *fsm) []string { return dumpKeys(dumpDB(t, f)) }
	if a, b := docs(one), docs(many); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("the two fsms hold different documents (%d and %d)", len(a), len(b))
	}
}

// topMembers finds the members encoding/json would, or declines.
func TestTopMembersAgreesWithEncodingJSON(t *testing.T) {
	cases := []string{
		`{}`, ` { } `, `{"a":1}`, "{\n\t\"a\" : 1 ,\r\n \"b\":\"x\" }",
		`{"a":1,"a":2}`, `{"a\"b":"c\\\"","\u00e9":"\ud83d\ude00"}`, `{"k":"]}[{\"","n":[{"a":"}"},[]],"o":{"p":{"q":null}}}`,
		`{"t":true,"f":false,"z":null,"e":-1.5e+10,"s":""}`, `{"x":"é","y":"\u0000"}`,
		// Declined or refused: encoding/json decides.
		`[]`, `{"a":1,}`, `{"a":tru}`, `{"a":1}x`, `{"a":"\x01"}`, "{\"a\":\"\xff\"}", `{"a" 1}`, `{"a":[1,}`, `{"a":{"b":1}`, ``, `{`, `{"a":01}`,
	}
	rng := rand.New(rand.NewSource(5))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rng.Intn(8); {
		case k == 0:
			return nil
		case k == 1:
			return rng.Intn(2) == 0
		case k == 2:
			return rng.NormFloat64() * 1e6
		case k < 5:
			alphabet := []rune(`ab"\/{}[]:, é😀` + "\n\t\x00")
			b := make([]rune, rng.Intn(8))
			for i := range b {
				b[i] = alphabet[rng.Intn(len(alphabet))]
			}
			return string(b)
		case k == 5 && depth < 3:
			a := make([]any, rng.Intn(4))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		default:
			if depth >= 3 {
				return "leaf"
			}
			m := map[string]any{}
			for i := rng.Intn(5); i > 0; i-- {
				m[fmt.Sprint(gen(3))] = gen(depth + 1)
			}
			return m
		}
	}
	for i := 0; i < 3000; i++ {
		m := map[string]any{}
		for j := rng.Intn(12); j > 0; j-- {
			m[fmt.Sprint(gen(3))] = gen(0)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			b, _ = json.MarshalIndent(m, " ", "\t")
		}
		cases = append(cases, string(b))
	}
	fast := 0
	for _, c := range cases {
		var want map[string]json.RawMessage
		werr := json.Unmarshal([]byte(c), &want)
		got, ok := topMembers([]byte(c))
		if !ok {
			continue
		}
		fast++
		if werr != nil {
			t.Fatalf("topMembers accepted %q, which encoding/json refuses: %v", c, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, encoding/json %d", c, len(got), len(want))
		}
		for k, v := range want {
			if g, has := got[k]; !has || string(g) != string(v) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", c, k, g, v)
			}
		}
	}
	if fast < 3000 {
		t.Fatalf("only %d of %d well-formed objects took the scan", fast, len(cases))
	}
}

// A build interrupted by a restart goes on from its cursor.
func TestIndexesBuildResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	f := mustOpenFSM(t, dir)
	const docs = 3000
	idx := uint64(0)
	for i := 0; i < docs; i += 500 {
		var ops []Op
		for j := i; j < i+500; j++ {
			ops = append(ops, put(fmt.Sprintf("p1/orders/o%05d", j), fmt.Sprintf(`{"status":"s%d","total":%d}`, j%3, j)))
		}
		idx++
		mustOK(t, f, idx, &Txn{Ops: ops})
	}
	// Run the build by hand: the clearing chunk, then three of backfill.
	f.builder.stop()
	idx++
	mustOK(t, f, idx, &Txn{Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixStatusTotal))}})
	for i := 0; i < 4; i++ {
		if more, err := f.builder.step(); err != nil || !more {
			t.Fatalf("chunk %d: more=%v err=%v", i, more, err)
		}
	}
	id := declaredID(t, ixStatusTotal)
	var cursor string
	var started bool
	if err := f.view(func(txn *badger.Txn) error {
		var err error
		cursor, started, err = getString(txn, ixBuildKey("p1", id))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Three chunks examined 768 documents: p1/_indexes (sorted first, no
	// entry) and the first 767 orders.
	if want := fmt.Sprintf("p1/orders/o%05d", 3*buildChunk-2); !started || cursor != want {
		t.Fatalf("build cursor %q (present %v) after three chunks, want %q", cursor, started, want)
	}
	if n := countPrefix(t, f, declaredKeyPrefix("p1", id)); n != 3*buildChunk-1 {
		t.Fatalf("%d entries after three chunks, want %d", n, 3*buildChunk-1)
	}
	if st := fsmIndexStates(t, f, "p1"); st[0].State != IndexBuilding {
		t.Fatalf("state %s mid-build", st[0].State)
	}
	mustCloseFSM(t, f)

	f = mustOpenFSM(t, dir)
	waitIndexesSettled(t, f, "after the restart")
	if st := fsmIndexStates(t, f, "p1"); st[0].State != IndexReady {
		t.Fatalf("state %s after the build", st[0].State)
	}
	left := (docs - 3*buildChunk + buildChunk - 1) / buildChunk
	if n := f.builder.chunksRun(); n > int64(left)+1 {
		t.Fatalf("the restarted build ran %d chunks; %d were left: it started over", n, left)
	}
}

// A declared index entry longer than maxIndexKeyBytes is refused in Apply;
// one that a document written before the declaration would need keeps that
// index building (the others build) until the document changes.
func TestIndexesEntryTooLarge(t *testing.T) {
	f := mustOpenFSM(t, t.TempDir())
	ixTitle := query.Index{Collection: "orders", Fields: []query.IndexField{{Field: "title"}}}
	long := strings.Repeat("t", maxIndexKeyBytes)
	mustOK(t, f, 1, &Txn{Ops: []Op{
		put("p1/orders/big", `{"title":"`+long+`","status":"s","total":1}`),
		put("p1/orders/small", `{"title":"a","status":"s","total":2}`),
	}})
	mustOK(t, f, 2, &Txn{Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixTitle, ixStatusTotal))}})
	mustEventually(t, 30*time.Second, "the other index to build", func() (bool, string) {
		st := fsmIndexStates(t, f, "p1")
		return st[1].State == IndexReady, st[1].State
	})
	idle, err := builderIdle(f)
	if err != nil || !idle {
		t.Fatalf("builder idle %v (%v) with only the unbuildable index left", idle, err)
	}
	if st := fsmIndexStates(t, f, "p1"); st[0].State != IndexBuilding {
		t.Fatalf("the index a document cannot enter is %s", st[0].State)
	}
	// Apply refuses to store such an entry, and nothing of the txn.
	res := applyOne(t, f, 3, &Txn{Ops: []Op{put("p1/orders/new", `{"title":"b"}`), put("p1/users/u1/orders/x", `{"title":"`+long+`"}`)}})
	if res.Err != ErrCodeIndexEntryTooLarge {
		t.Fatalf("a put with a %d-byte indexed field: %+v, want %s", len(long), res, ErrCodeIndexEntryTooLarge)
	}
	if getDocT(t, f, "p1/orders/new") != nil {
		t.Fatal("the refused txn wrote a document")
	}
	// The same value in a field no declared index holds is stored (the
	// automatic index leaves strings over 1,024 bytes out).
	mustOK(t, f, 4, &Txn{Ops: []Op{put("p1/items/i1", `{"title":"`+long+`"}`)}})
	// Once the document is fixed, the index builds (the declaration is
	// written again to wake the builder at once).
	mustOK(t, f, 5, &Txn{Ops: []Op{setField("p1/orders/big", "title", `"short"`)}})
	mustOK(t, f, 6, &Txn{Ops: []Op{put(IndexesPath("p1"), indexesDoc(t, ixTitle, ixStatusTotal))}})
	waitIndexesSettled(t, f, "after the document was fixed")
	if st := fsmIndexStates(t, f, "p1"); st[0].State != IndexReady {
		t.Fatalf("the index is %s after the document was fixed", st[0].State)
	}
}
