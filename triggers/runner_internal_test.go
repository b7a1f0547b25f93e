package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/storetest"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// TestReaderLags: a reader whose feed subscription is cut off for lagging
// (a queue of one batch, and a receiver that holds every delivery until
// all the writes are committed, so the reader runs out of room) subscribes
// again and reads the change log: every change is delivered, in order.
func TestReaderLags(t *testing.T) {
	store := storetest.Open(t, raftstore.Config{})
	waitFor := func(f func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := f(); err != nil; err = f() {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var mu sync.Mutex
	got := map[string][]uint64{}
	total := 0
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		select { // held: the reader fills its room and its feed queue overflows
		case <-release:
		case <-r.Context().Done():
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got[p.Path] = append(got[p.Path], p.Revision)
		total++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(open) // before srv.Close (cleanups run last first)
	txn := func(ops ...raftstore.Op) uint64 {
		t.Helper()
		res, err := store.Txn(context.Background(), &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
		if err != nil || !res.OK() {
			t.Fatalf("txn: %v %+v", err, res)
		}
		return res.Revision
	}
	def, _ := json.Marshal(Definition{Name: "lag", Match: "d/{id}", Action: Action{Webhook: &Webhook{URL: srv.URL, Secret: "whsec_test_secret_0123456789"}}})
	txn(raftstore.Op{Kind: raftstore.OpPut, Path: keys.Trigger("p1", "lag"), Data: def},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.TriggerIndex("p1", "lag"), Data: json.RawMessage(`{"project":"p1","name":"lag"}`)})

	logs := &lockedBuffer{}
	r, err := NewRunner(RunnerConfig{Store: store, Feed: store.Feed(), Tuning: Tuning{InFlight: 1, Checkpoint: 20 * time.Millisecond, Timeout: time.Minute},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.subBuffer = 1
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// More entries than the reader has room for (1024 with one in
	// flight), all committed while the receiver holds the first delivery:
	// the reader stalls and its one-batch queue overflows.
	const paths, writes = 4, 400
	want := map[string][]uint64{}
	var wg sync.WaitGroup
	var wmu sync.Mutex
	for p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("d/%d", p)
			for i := range writes {
				rev := txn(raftstore.Op{Kind: raftstore.OpPut, Path: keys.Doc("p1", path), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
				wmu.Lock()
				want[path] = append(want[path], rev)
				wmu.Unlock()
			}
		}()
	}
	wg.Wait()
	open()
	waitFor(func() error {
		mu.Lock()
		defer mu.Unlock()
		if total < paths*writes {
			return fmt.Errorf("%d of %d delivered", total, paths*writes)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for path, revs := range want {
		// Duplicates may come (a lagging reader hands events again only
		// when it rereads from its cursor); order and completeness may not.
		var first []uint64
		seen := map[uint64]bool{}
		for _, rev := range got[path] {
			if !seen[rev] {
				seen[rev] = true
				first = append(first, rev)
			}
		}
		if fmt.Sprint(first) != fmt.Sprint(revs) {
			t.Fatalf("%s: delivered %v, committed %v", path, first, revs)
		}
	}
	if n := strings.Count(logs.String(), "reading the change log again"); n == 0 {
		t.Fatal("the reader never lagged: the test did not test the resubscription")
	}
}

// lockedBuffer is a log sink for several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
