package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// ---- helpers -------------------------------------------------------------------

const testSecret = "cluster-secret"

func fastTuning() Tuning {
	return Tuning{
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// openTestStore opens a single-node store in dir with its Raft transport on
// addr ("127.0.0.1:0" for a fresh port); it is closed when the test ends.
func openTestStore(t *testing.T, dir, addr string, tune func(*Config)) *Store {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	cfg := Config{
		NodeID:        "n1",
		Dir:           dir,
		RaftListener:  ln,
		RaftAdvertise: ln.Addr().String(),
		HTTPAdvertise: "http://127.0.0.1:1",
		Bootstrap:     true,
		Secret:        testSecret,
		Voter:         true,
		Logger:        testLogger(),
		Tuning:        fastTuning(),
	}
	if tune != nil {
		tune(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustLeader(t *testing.T, s *Store) {
	t.Helper()
	mustEventually(t, 10*time.Second, "single node to become leader", func() (bool, string) {
		return s.IsLeader() && s.LeaderID() == "n1", s.raft.State().String()
	})
}

func mustCloseStore(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustTxn(t *testing.T, s *Store, ops ...Op) *TxnResult {
	t.Helper()
	res, err := s.Txn(ctxT(t, 10*time.Second), &Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	if !res.OK() {
		t.Fatalf("Txn refused: %s at %d", res.Err, res.Index)
	}
	return res
}

func mustGet(t *testing.T, s *Store, path string) *Document {
	t.Helper()
	d, err := s.Get(path)
	if err != nil {
		t.Fatalf("Get(%q): %v", path, err)
	}
	if d == nil {
		t.Fatalf("Get(%q): no document", path)
	}
	return d
}

// ---- single node ------------------------------------------------------------------

func TestStore_SingleNodeWritesReadsAndBackup(t *testing.T) {
	leaderCtx := make(chan context.Context, 1)
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		c.OnLeader = func(ctx context.Context) { leaderCtx <- ctx }
	})
	mustLeader(t, s)
	sub := s.Feed().Subscribe(64)

	r1 := mustTxn(t, s, put("p1/users/alice", `{"name":"alice","n":12345678901234567890}`), put("p1/users/bob", `{"name":"bob"}`))
	if r1.Revision == 0 || !r1.Created[0] || !r1.Created[1] || r1.Docs[0].Revision != r1.Revision {
		t.Fatalf("first txn: %+v", r1)
	}
	r2 := mustTxn(t, s, put("p1/users/alice/posts/1", `{}`), setField("p1/users/bob", "age", `1.0e2`))
	if r2.Revision <= r1.Revision {
		t.Fatalf("revisions %d then %d", r1.Revision, r2.Revision)
	}
	// A failed condition comes back as a result, not an error.
	res, err := s.Txn(ctxT(t, 10*time.Second), &Txn{
		Conds: []Cond{{Path: "p1/users/alice", Kind: CondRevision, Revision: r1.Revision + 100}},
		Ops:   []Op{del("p1/users/alice")},
	})
	if err != nil || res.Err != ErrCodeCondFailed || res.Revision <= r2.Revision {
		t.Fatalf("conditional txn: %+v, %v", res, err)
	}

	if err := s.WaitRead(ctxT(t, 5*time.Second), Strong, 0); err != nil {
		t.Fatalf("WaitRead(Strong): %v", err)
	}
	if err := s.WaitRead(ctxT(t, 5*time.Second), Local, res.Revision); err != nil {
		t.Fatalf("WaitRead(Local, %d): %v", res.Revision, err)
	}
	if idx, err := s.ReadIndex(ctxT(t, 5*time.Second)); err != nil || idx < res.Revision {
		t.Fatalf("ReadIndex = %d, %v; want >= %d", idx, err, res.Revision)
	}
	if err := s.WaitRead(ctxT(t, 50*time.Millisecond), Local, res.Revision+1000); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitRead for a future revision: %v, want ErrTimeout", err)
	}

	alice := mustGet(t, s, "p1/users/alice")
	if string(alice.Data) != `{"name":"alice","n":12345678901234567890}` || alice.Revision != r1.Revision {
		t.Fatalf("alice = %+v", alice)
	}
	if bob := mustGet(t, s, "p1/users/bob"); string(bob.Data) != `{"age":1.0e2,"name":"bob"}` || bob.CreateRevision != r1.Revision || bob.Revision != r2.Revision {
		t.Fatalf("bob = %+v (data %s)", bob, bob.Data)
	}
	if d, err := s.Get("p1/users/carol"); err != nil || d != nil {
		t.Fatalf("Get(absent) = %+v, %v", d, err)
	}
	docs, next, err := s.List("p1/users", "", 10)
	if err != nil || next != "" || !slices.Equal(names("p1/users", docs), []string{"alice", "bob"}) {
		t.Fatalf("List = %q, %q, %v", names("p1/users", docs), next, err)
	}
	docs, next, err = s.List("p1/users", "", 1)
	if err != nil || next != "alice" || len(docs) != 1 {
		t.Fatalf("List limit 1 = %d docs, next %q, %v", len(docs), next, err)
	}

	// The feed saw both committed txns, in order, and nothing of the refused one.
	b := readN(t, sub, 2, 5*time.Second)
	evs := flatten(b)
	var paths []string
	for _, e := range evs {
		paths = append(paths, e.Path)
	}
	if !slices.Equal(paths, []string{"p1/users/alice", "p1/users/bob", "p1/users/alice/posts/1", "p1/users/bob"}) ||
		evs[0].Revision != r1.Revision || evs[3].Revision != r2.Revision {
		t.Fatalf("feed events %q", paths)
	}

	// The backup holds the documents and the applied index it reports.
	var buf bytes.Buffer
	idx, err := s.Backup(ctxT(t, 10*time.Second), &buf)
	if err != nil || idx < res.Revision {
		t.Fatalf("Backup = %d, %v", idx, err)
	}
	dump, _ := backupDump(t, buf.Bytes())
	var got *Document
	for _, e := range dump {
		if bytes.Equal(e.key, docKey("p1/users/alice")) {
			if got, err = decodeDoc("p1/users/alice", e.val); err != nil {
				t.Fatal(err)
			}
		}
	}
	if applied := dumpApplied(t, dump); !sameDoc(got, alice) || applied != idx {
		t.Fatalf("backup has alice %+v applied %d; want %+v applied %d", got, applied, alice, idx)
	}
	if n := len(dumpKeys(dump)); n != 3 {
		t.Fatalf("backup has %d documents, want 3", n)
	}

	if _, err := s.Propose(ctxT(t, time.Second), make([]byte, maxEntrySize+1)); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("oversize proposal: %v, want ErrEntryTooLarge", err)
	}

	// Leader duties start after the barrier and stop with the node.
	var lctx context.Context
	select {
	case lctx = <-leaderCtx:
	case <-time.After(10 * time.Second):
		t.Fatal("OnLeader not called")
	}
	if err := s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("EnsureNodeRecord: %v", err)
	}
	st, err := s.Status(ctxT(t, 5*time.Second))
	if err != nil || st.Leader != "n1" || len(st.Nodes) != 1 || st.Nodes[0].State != "leader" ||
		st.Nodes[0].HTTPAddr != "http://127.0.0.1:1" || st.Nodes[0].AppliedIndex < res.Revision {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	mustCloseStore(t, s)
	select {
	case <-lctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("OnLeader context not cancelled by Close")
	}
	if _, err := s.Txn(ctxT(t, 2*time.Second), &Txn{Ops: []Op{put("p1/x", `{}`)}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Txn after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get("p1/users/alice"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

func TestStore_InternalHandlerNeedsSecret(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	srv := httptest.NewServer(s.InternalHandler())
	defer srv.Close()
	for _, secret := range []string{"", "wrong"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+InternalPrefix+"status", nil)
		if secret != "" {
			req.Header.Set(SecretHeader, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("secret %q: status %d, want 403", secret, resp.StatusCode)
		}
	}
	// With the secret, a proposal through the endpoint commits.
	cmd, _ := EncodeTxn(&Txn{Time: 1, Ops: []Op{put("p1/via-http", `{}`)}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+InternalPrefix+"propose", bytes.NewReader(cmd))
	req.Header.Set(SecretHeader, testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res TxnResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || !res.OK() || res.Revision == 0 {
		t.Fatalf("propose: status %d, %+v, %v", resp.StatusCode, res, err)
	}
	mustGet(t, s, "p1/via-http")
}

// ---- restarts ------------------------------------------------------------------------

func TestStore_RestartKeepsStateAndRevisions(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, "127.0.0.1:0", nil)
	addr := s.cfg.RaftAdvertise
	mustLeader(t, s)
	want := map[string]*Document{}
	for i := 0; i < 20; i++ {
		res := mustTxn(t, s, put(fmt.Sprintf("p1/c/d%02d", i), fmt.Sprintf(`{"i":%d}`, i)))
		want[res.Docs[0].Path] = res.Docs[0]
	}
	res := mustTxn(t, s, del("p1/c/d05"), renameField("p1/c/d06", "i", "j", `6`))
	delete(want, "p1/c/d05")
	want["p1/c/d06"] = res.Docs[1]
	applied := s.AppliedIndex()
	if applied < res.Revision {
		t.Fatalf("applied %d < last revision %d", applied, res.Revision)
	}
	mustCloseStore(t, s)

	s = reopenStore(t, dir, addr, nil)
	if !s.HasState() {
		t.Fatal("HasState() = false after restart")
	}
	// The tree is persistent: documents and the applied index are there before
	// Raft has replayed anything.
	if got := s.AppliedIndex(); got != applied {
		t.Fatalf("AppliedIndex after reopen = %d, want %d", got, applied)
	}
	sub := s.Feed().Subscribe(64)
	assertStoreDocs(t, s, want)
	mustLeader(t, s)

	res2 := mustTxn(t, s, setField("p1/c/d06", "k", `true`), put("p1/c/new", `{}`))
	if res2.Revision <= applied {
		t.Fatalf("revision after restart %d, want > %d", res2.Revision, applied)
	}
	if d := mustGet(t, s, "p1/c/d06"); string(d.Data) != `{"j":6,"k":true}` || d.CreateRevision != want["p1/c/d06"].CreateRevision {
		t.Fatalf("d06 after restart = %+v (%s)", d, d.Data)
	}
	// Replayed entries produced no events: only the new write is on the feed.
	for _, b := range readN(t, sub, 1, 5*time.Second) {
		for _, e := range b.Events {
			if e.Revision <= applied {
				t.Fatalf("replayed entry %d published again: %+v", e.Revision, e)
			}
		}
	}
	mustNoDocStore(t, s, "p1/c/d05")
}

// reopenStore opens dir again, on the same Raft address when it is free.
func reopenStore(t *testing.T, dir, addr string, tune func(*Config)) *Store {
	t.Helper()
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
	} else {
		t.Logf("raft address %s busy (%v); using a new port", addr, err)
		addr = "127.0.0.1:0"
	}
	return openTestStore(t, dir, addr, tune)
}

func assertStoreDocs(t *testing.T, s *Store, want map[string]*Document) {
	t.Helper()
	for p, w := range want {
		if got := mustGet(t, s, p); !sameDoc(got, w) {
			t.Fatalf("%s = %+v (%s), want %+v (%s)", p, got, got.Data, w, w.Data)
		}
	}
}

func mustNoDocStore(t *testing.T, s *Store, path string) {
	t.Helper()
	if d, err := s.Get(path); err != nil || d != nil {
		t.Fatalf("Get(%q) = %+v, %v; want no document", path, d, err)
	}
}

func TestStore_SnapshotThenRestartLosesNothing(t *testing.T) {
	dir := t.TempDir()
	tune := func(c *Config) { c.Tuning.TrailingLogs = 1 } // compact the log on snapshot
	s := openTestStore(t, dir, "127.0.0.1:0", tune)
	addr := s.cfg.RaftAdvertise
	mustLeader(t, s)
	want := map[string]*Document{}
	for i := 0; i < 30; i++ {
		res := mustTxn(t, s, put(fmt.Sprintf("p1/s/d%02d", i), fmt.Sprintf(`{"i":%d}`, i)))
		want[res.Docs[0].Path] = res.Docs[0]
	}
	if err := s.Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if first, err := s.logs.FirstIndex(); err != nil || first <= 1 {
		t.Fatalf("log not compacted by the snapshot: first index %d, %v", first, err)
	}
	for i := 20; i < 40; i++ {
		p := fmt.Sprintf("p1/s/d%02d", i)
		if i%5 == 0 && i < 30 {
			mustTxn(t, s, del(p))
			delete(want, p)
			continue
		}
		res := mustTxn(t, s, put(p, fmt.Sprintf(`{"i":%d,"after":true}`, i)))
		want[p] = res.Docs[0]
	}
	applied := s.AppliedIndex()
	mustCloseStore(t, s)

	s = reopenStore(t, dir, addr, tune)
	assertStoreDocs(t, s, want)
	mustLeader(t, s)
	if err := s.WaitRead(ctxT(t, 10*time.Second), Strong, 0); err != nil {
		t.Fatalf("WaitRead after restart: %v", err)
	}
	assertStoreDocs(t, s, want)
	docs, _, err := s.List("p1/s", "", 100)
	if err != nil || len(docs) != len(want) {
		t.Fatalf("List after restart: %d docs (%v), want %d", len(docs), err, len(want))
	}
	// A conditional write against a pre-restart revision still holds.
	d := want["p1/s/d07"]
	res, err := s.Txn(ctxT(t, 10*time.Second), &Txn{
		Conds: []Cond{{Path: d.Path, Kind: CondRevision, Revision: d.Revision}},
		Ops:   []Op{setField(d.Path, "x", `1`)},
	})
	if err != nil || !res.OK() || res.Revision <= applied {
		t.Fatalf("conditional write after restart: %+v, %v", res, err)
	}
}

// ---- strong reads ---------------------------------------------------------------------

// Every write acknowledged before a strong read began is visible to it.
func TestStore_StrongReadsSeeAcknowledgedWrites(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", nil)
	mustLeader(t, s)
	var acked atomic.Uint64
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := s.Txn(ctx, &Txn{Time: 1, Ops: []Op{put(fmt.Sprintf("p1/w%d/d%d", w, i), `{}`)}})
				cancel()
				if err != nil || !res.OK() {
					errs <- fmt.Errorf("write: %+v %v", res, err)
					return
				}
				for {
					cur := acked.Load()
					if res.Revision <= cur || acked.CompareAndSwap(cur, res.Revision) {
						break
					}
				}
			}
		}(w)
	}
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 50; i++ {
				before := acked.Load()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := s.WaitRead(ctx, Strong, 0)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("WaitRead: %w", err)
					return
				}
				if got := s.AppliedIndex(); got < before {
					errs <- fmt.Errorf("strong read at applied %d missed acknowledged revision %d", got, before)
					return
				}
			}
		}()
	}
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(60 * time.Second):
		t.Error("strong readers did not finish")
	}
	close(stop)
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if acked.Load() == 0 {
		t.Error("no write was acknowledged while reading")
	}
}

// ---- coalescer ---------------------------------------------------------------------

// gatedFn is a coalescer fn that numbers its calls in start order and blocks
// each until released.
type gatedFn struct {
	started atomic.Uint64
	release chan struct{}
}

func (g *gatedFn) fn(ctx context.Context) (uint64, error) {
	n := g.started.Add(1)
	select {
	case <-g.release:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// With one round in flight at most, callers arriving during a round share
// the next one.
func TestCoalescer_SharesOneCallAmongWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedFn{release: make(chan struct{})}
		c := newCoalescer(g.fn)
		c.max = 1
		ctx := context.Background()

		first := make(chan uint64, 1)
		go func() { r, _ := c.do(ctx); first <- r }()
		synctest.Wait() // call 1 is running
		if g.started.Load() != 1 {
			t.Fatalf("%d calls started, want 1", g.started.Load())
		}

		const waiters = 10
		results := make(chan uint64, waiters)
		for i := 0; i < waiters; i++ {
			go func() { r, _ := c.do(ctx); results <- r }()
		}
		synctest.Wait() // all ten wait for the next call, which has not started
		if g.started.Load() != 1 || len(results) != 0 {
			t.Fatalf("started %d calls, %d results while call 1 runs", g.started.Load(), len(results))
		}

		g.release <- struct{}{} // finish call 1; call 2 starts for the ten
		synctest.Wait()
		if r := <-first; r != 1 {
			t.Fatalf("first caller got %d, want 1", r)
		}
		if len(results) != 0 {
			t.Fatal("a caller that arrived during call 1 got its result")
		}
		if g.started.Load() != 2 {
			t.Fatalf("%d calls started, want 2", g.started.Load())
		}
		g.release <- struct{}{}
		synctest.Wait()
		if len(results) != waiters {
			t.Fatalf("%d of %d waiters answered", len(results), waiters)
		}
		for i := 0; i < waiters; i++ {
			if r := <-results; r != 2 {
				t.Fatalf("waiter got %d, want 2 (the one shared call after it arrived)", r)
			}
		}
		if g.started.Load() != 2 {
			t.Fatalf("%d calls for 11 callers, want 2", g.started.Load())
		}

		// Idle again: the next caller starts a fresh call.
		go func() { r, _ := c.do(ctx); first <- r }()
		synctest.Wait()
		g.release <- struct{}{}
		synctest.Wait()
		if r := <-first; r != 3 {
			t.Fatalf("caller after idle got %d, want 3", r)
		}
	})
}

func TestCoalescer_CallerContextAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedFn{release: make(chan struct{})}
		c := newCoalescer(g.fn)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := c.do(ctx); errc <- err }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if err := <-errc; !errors.Is(err, ErrTimeout) {
			t.Fatalf("cancelled caller: %v, want ErrTimeout", err)
		}
		// The abandoned call still completes and the coalescer keeps working.
		g.release <- struct{}{}
		synctest.Wait()
		go func() { _, err := c.do(context.Background()); errc <- err }()
		synctest.Wait()
		g.release <- struct{}{}
		synctest.Wait()
		if err := <-errc; err != nil {
			t.Fatalf("next caller: %v", err)
		}

		// An error is shared like a result.
		boom := errors.New("boom")
		ce := newCoalescer(func(context.Context) (uint64, error) { return 0, boom })
		if _, err := ce.do(context.Background()); !errors.Is(err, boom) {
			t.Fatalf("error result: %v", err)
		}
		// A stuck fn is bounded by the coalescer's own timeout.
		stuck := newCoalescer(func(ctx context.Context) (uint64, error) { <-ctx.Done(); return 0, ctx.Err() })
		if _, err := stuck.do(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stuck fn: %v, want its deadline", err)
		}
	})
}

// Under real concurrency no caller gets the result of a call that had
// already started when it arrived.
func TestCoalescer_NeverReturnsAStaleCall(t *testing.T) {
	var started atomic.Uint64
	c := newCoalescer(func(context.Context) (uint64, error) {
		n := started.Add(1)
		runtime.Gosched()
		return n, nil
	})
	var wg sync.WaitGroup
	var calls atomic.Int64
	errs := make(chan error, 64)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				before := started.Load()
				r, err := c.do(context.Background())
				calls.Add(1)
				if err != nil || r <= before {
					errs <- fmt.Errorf("got call %d (err %v) though %d calls had started before arriving", r, err, before)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d callers shared %d calls", calls.Load(), started.Load())
}
