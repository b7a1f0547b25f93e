package realtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/node/nodetest"
)

// collector reads a connection in the background. With a limit it reads
// no more than that many messages until the limit is raised: a client that
// reads slower than the server writes.
type collector struct {
	c *client

	limit atomic.Int64 // messages it may have read; < 0: no limit
	wake  chan struct{}

	mu     sync.Mutex
	msgs   []msg
	err    error
	notify chan struct{}
	done   chan struct{}
}

func collect(c *client) *collector {
	k := &collector{c: c, wake: make(chan struct{}, 1), notify: make(chan struct{}, 1), done: make(chan struct{})}
	k.limit.Store(-1)
	go k.run()
	return k
}

func (k *collector) run() {
	defer close(k.done)
	for {
		for {
			k.mu.Lock()
			n := int64(len(k.msgs))
			k.mu.Unlock()
			if l := k.limit.Load(); l < 0 || n < l {
				break
			}
			<-k.wake
		}
		m, err := k.c.read(5 * time.Minute)
		// Keep what the checks need, not the 16 KiB documents: the test
		// measures the node's heap in this same process.
		m.Data, m.Documents = nil, nil
		m.raw = strings.Clone(m.raw[:min(len(m.raw), 200)])
		k.mu.Lock()
		if err != nil {
			k.err = err
		} else {
			k.msgs = append(k.msgs, m)
		}
		k.mu.Unlock()
		select {
		case k.notify <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// setLimit lets the collector read up to n messages in all (n < 0: all).
func (k *collector) setLimit(n int64) {
	k.limit.Store(n)
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// state returns a copy of what was read so far and the error that ended it.
func (k *collector) state() ([]msg, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.msgs), k.err
}

// waitFor waits until cond holds for what was read (a condition wait with a
// deadline, woken by every message).
func (k *collector) waitFor(t *testing.T, timeout time.Duration, what string, cond func([]msg, error) bool) []msg {
	t.Helper()
	deadline := time.After(timeout)
	for {
		msgs, err := k.state()
		if cond(msgs, err) {
			return msgs
		}
		select {
		case <-k.notify:
		case <-deadline:
			t.Fatalf("%s: not within %v (%d messages, err %v)", what, timeout, len(msgs), err)
		}
	}
}

type change struct {
	rev  uint64
	path string
}

func changesOf(t *testing.T, msgs []msg, id string) []change {
	t.Helper()
	var out []change
	for _, m := range msgs {
		if m.Op != "change" || m.ID != id {
			t.Fatalf("unexpected message %.200s", m.raw)
		}
		out = append(out, change{m.Revision, m.Collection})
	}
	return out
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestSlowConsumer: a client that stops reading is cut off with 4008 while
// a reading client on the same node receives every change, REST writes keep
// their latency and the heap does not keep the slow client's backlog; the
// slow client then resumes with since and gets every change it missed, in
// order, with no gap.
func TestSlowConsumer(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	tok := p.OwnerToken
	rt := h.c.Nodes[0].Node.Realtime

	fastC, _ := h.connect(t, p, tok)
	slowC, _ := h.connect(t, p, tok)
	fastC.subscribe("f", "bp", true)
	slowC.subscribe("s", "bp", true)
	snapRev, _, _ := fastC.snapshot("f")
	if r, _, _ := slowC.snapshot("s"); r > snapRev {
		snapRev = r
	}
	if n := rt.Connections(); n != 2 {
		t.Fatalf("%d connections on the node, want 2", n)
	}
	fast, slow := collect(fastC), collect(slowC)

	// Writers: 4 goroutines writing 16 KiB documents through REST.
	payload := strings.Repeat("x", 16<<10)
	const writers = 4
	type sample struct {
		start, end time.Time
	}
	var (
		mu        sync.Mutex
		samples   []sample
		maxRev    uint64
		written   int
		writeErrs []error
	)
	var seq atomic.Int64
	write := func(ctx context.Context) {
		i := seq.Add(1)
		path := fmt.Sprintf("bp/d%06d", i)
		start := time.Now()
		st, b, err := nodetest.DoJSON(ctx, h.base(), http.MethodPost, "/api/db", map[string]string{"Authorization": "Bearer " + tok},
			map[string]any{"collection": path, "data": map[string]any{"i": i, "pad": payload}})
		end := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil || st != http.StatusCreated {
			writeErrs = append(writeErrs, fmt.Errorf("write %s: %d %.200s %v", path, st, b, err))
			return
		}
		var d struct{ Revision uint64 }
		if err := json.Unmarshal(b, &d); err != nil || d.Revision == 0 {
			writeErrs = append(writeErrs, fmt.Errorf("write %s: no revision in %.200s", path, b))
			return
		}
		maxRev = max(maxRev, d.Revision)
		written++
		samples = append(samples, sample{start, end})
	}
	// run writes with `writers` goroutines until stop returns true.
	run := func(stop func() bool) {
		var wg sync.WaitGroup
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop() {
					write(context.Background())
					mu.Lock()
					failed := len(writeErrs) > 0
					mu.Unlock()
					if failed {
						return
					}
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(writeErrs) > 0 {
			t.Fatalf("%d writes failed, the first: %v", len(writeErrs), writeErrs[0])
		}
	}

	// Before: both clients read.
	var n atomic.Int64
	run(func() bool { return n.Add(1) > 200 })
	mu.Lock()
	before := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		before = append(before, s.end.Sub(s.start))
	}
	mu.Unlock()
	beforeWrites := written
	// Both have every change so far.
	for name, k := range map[string]*collector{"fast": fast, "slow": slow} {
		k.waitFor(t, 30*time.Second, name+" catches up before the episode", func(m []msg, err error) bool {
			return len(m) >= beforeWrites || err != nil
		})
	}

	// During: the slow client reads one message for every two writes, so
	// its TCP buffers and then its queue fill; writes go on until the node
	// has cut it off, then 200 more that it misses entirely. (A client that
	// stops reading altogether cannot receive a close frame through its
	// full TCP buffers; one that reads slowly must get 4008.)
	heapBefore := heapInuse()
	episodeStart := time.Now()
	slowBase := int64(beforeWrites)
	slow.setLimit(slowBase)
	var cutAt atomic.Pointer[time.Time]
	// The node decides to cut the slow client before the connection ends:
	// it counts the drop, then sends what is in flight and the close frame,
	// and waits (5 s) for the client's close. A client reading one message
	// per two writes of a slow machine may need longer than that to reach
	// the close frame through megabytes of TCP buffers, so from the decision
	// on it reads at full speed (what a client does is its business; the
	// server's part is to decide, stop queueing and send 4008).
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			if n, err := slowConsumerDrops(watchCtx, h.base()); err == nil && n > 0 {
				now := time.Now()
				if cutAt.CompareAndSwap(nil, &now) {
					slow.setLimit(-1)
				}
				return
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var after atomic.Int64
	const maxEpisodeWrites = 20000
	var episode atomic.Int64
	run(func() bool {
		if cutAt.Load() == nil {
			_, slowErr := slow.state()
			if rt.Connections() < 2 || slowErr != nil {
				now := time.Now()
				if cutAt.CompareAndSwap(nil, &now) {
					slow.setLimit(-1)
				}
			} else if w := episode.Add(1); w > maxEpisodeWrites {
				return true
			} else {
				slow.setLimit(slowBase + w/2)
			}
			return false
		}
		return after.Add(1) > 200
	})
	if cutAt.Load() == nil {
		t.Fatalf("the slow client was not cut off after %d writes of 16 KiB", maxEpisodeWrites)
	}
	cut := *cutAt.Load()
	mu.Lock()
	var during []time.Duration
	for _, s := range samples[beforeWrites:] {
		if !s.start.Before(episodeStart) && s.end.Before(cut) {
			during = append(during, s.end.Sub(s.start))
		}
	}
	total, lastRev := written, maxRev
	mu.Unlock()

	// The reading client got every change, in order, and is still open.
	fastMsgs := fast.waitFor(t, 60*time.Second, "the reading client receives every change", func(m []msg, err error) bool {
		return len(m) >= total || err != nil
	})
	if _, err := fast.state(); err != nil {
		t.Fatalf("the reading client was cut off too: %v (close status %d)", err, websocket.CloseStatus(err))
	}
	all := changesOf(t, fastMsgs, "f")
	if len(all) != total {
		t.Fatalf("the reading client got %d changes, want %d", len(all), total)
	}
	for i := 1; i < len(all); i++ {
		if all[i].rev <= all[i-1].rev {
			t.Fatalf("reading client: change %d at %d after %d", i, all[i].rev, all[i-1].rev)
		}
	}
	if all[len(all)-1].rev != lastRev || all[0].rev <= snapRev {
		t.Fatalf("reading client: changes %d..%d, want %d..%d", all[0].rev, all[len(all)-1].rev, snapRev+1, lastRev)
	}
	heapAfter := heapInuse()

	// The slow client reads what reached it, then its close.
	slow.setLimit(-1)
	<-slow.done
	slowMsgs, slowErr := slow.state()
	got := changesOf(t, slowMsgs, "s")
	if len(got) >= total {
		t.Fatalf("the slow client received all %d changes: it was never behind", total)
	}
	if !slices.Equal(got, all[:len(got)]) {
		t.Fatalf("the slow client's %d changes are not a prefix of the stream", len(got))
	}

	// Numbers for the report, whatever the outcome below.
	t.Logf("writes: %d before, %d during the episode (cut after %v, %d writes in all), %d changes reached the slow client",
		len(before), len(during), cut.Sub(episodeStart).Round(time.Millisecond), total-beforeWrites, len(got)-beforeWrites)
	t.Logf("REST write latency before: p50 %v p95 %v; during: p50 %v p95 %v",
		percentile(before, 0.5), percentile(before, 0.95), percentile(during, 0.5), percentile(during, 0.95))
	t.Logf("HeapInuse before the episode %.1f MiB, after it %.1f MiB", float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20))

	if got := websocket.CloseStatus(slowErr); got != 4008 {
		t.Errorf("the slow client ended with close status %d (%v), want 4008 slow_consumer", got, slowErr)
	}
	if len(during) < 20 {
		t.Errorf("only %d writes completed during the episode; too few to compare", len(during))
	} else if b, d := percentile(before, 0.5), percentile(during, 0.5); d > 3*b {
		t.Errorf("REST write p50 latency rose from %v to %v (more than 3x) while a client was stuck", b, d)
	}
	// The test process holds the whole node, and Badger's memtable flushes
	// hold hundreds of MiB for a while (table builders; a heap profile at
	// such a moment shows nothing of realtime's). So wait, with a deadline,
	// for the heap to settle back within 64 MiB of where it was: a backlog
	// kept after the cut (the slow client's queue held up to 1024 messages
	// of 16 KiB) or one that grew with the writes would keep it above.
	settled := heapAfter
	bound := heapBefore + 64<<20
	deadline := time.Now().Add(30 * time.Second)
	for settled > bound && time.Now().Before(deadline) {
		<-time.After(200 * time.Millisecond) // pacing of a condition poll
		settled = heapInuse()
	}
	t.Logf("HeapInuse settled at %.1f MiB", float64(settled)/(1<<20))
	if settled > bound {
		t.Errorf("HeapInuse grew from %.1f MiB to %.1f MiB across the episode and stayed there for 30 s", float64(heapBefore)/(1<<20), float64(settled)/(1<<20))
	}

	// Resume with since = the last revision it received.
	since := snapRev
	if len(got) > 0 {
		since = got[len(got)-1].rev
	}
	c2, _ := h.connect(t, p, tok)
	c2.subscribeSince("s", "bp", true, since)
	var replay []change
	for {
		m := c2.next()
		if m.Op == "resumed" {
			if m.ID != "s" || m.Revision < lastRev {
				t.Fatalf("resumed %s: want id s and revision >= %d", m, lastRev)
			}
			break
		}
		if m.Op != "change" || m.ID != "s" {
			t.Fatalf("got %.200s during the replay", m.raw)
		}
		replay = append(replay, change{m.Revision, m.Collection})
	}
	if want := all[len(got):]; !slices.Equal(replay, want) {
		t.Fatalf("replay after %d: %d changes, want the %d missed ones in order", since, len(replay), len(want))
	}
	t.Logf("resumed from %d: %d missed changes replayed", since, len(replay))
}

// slowConsumerDrops reads edgebase_realtime_drops_total{reason="slow_consumer"}
// from the node's /metrics.
func slowConsumerDrops(ctx context.Context, base string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `edgebase_realtime_drops_total{reason="slow_consumer"} `); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, nil
}
