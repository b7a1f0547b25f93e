package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
	"github.com/edgebase/edgebase/internal/wan"
)

// TestRobustnessWAN runs a short workload on the WAN harness (internal/wan:
// voters v-us1, v-us2, v-eu1 and an edge node per region behind simulated
// round trips of 80 to 220 ms) while the leader is killed and restarted: a
// client per region puts and strong-gets its own keys through its own edge,
// and reads them at any edge with consistency=local and X-Min-Revision set
// to the highest revision it has seen. Then:
//
//   - the history is linearizable (porcupine, the model of model.go; the
//     local reads with X-Min-Revision count as gets: on keys only their
//     client writes, a read at or past the client's own last write must
//     return it);
//   - no client ever saw a key's revision go backwards;
//   - every acknowledged write's key holds, on every node, the last value
//     acknowledged for it (or a later write of unknown outcome).
func TestRobustnessWAN(t *testing.T) {
	for _, p := range runWANWorkload(t, bins.good) {
		t.Error(p)
	}
}

// TestCheckerCatchesStaleReadsWAN is the negative check: with a build whose
// followers and edges answer strong reads from their local state (-tags
// brokenreads), the same run must report a problem.
func TestCheckerCatchesStaleReadsWAN(t *testing.T) {
	proxyBin := wanProxyBinary(t) // skip before building the broken binary
	problems := runWANWorkloadWith(t, brokenBinary(t), proxyBin)
	if len(problems) == 0 {
		t.Fatal("the checks passed a build whose edges answer strong reads from local state")
	}
	t.Logf("caught (%d problems), the first: %s", len(problems), problems[0])
}

// runWANWorkload runs the workload on a WAN cluster of bin and returns
// what the checks found (nothing when correct).
func runWANWorkload(t *testing.T, bin string) []string {
	return runWANWorkloadWith(t, bin, wanProxyBinary(t))
}

func runWANWorkloadWith(t *testing.T, bin, proxyBin string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var args []string
	if ok, err := wan.HasFlag(ctx, bin, "wan"); err != nil {
		t.Fatal(err)
	} else if ok {
		args = append(args, "--wan")
	}
	dir := t.TempDir()
	c, err := wan.Start(ctx, wan.Options{Bin: bin, ProxyBin: proxyBin, Dir: dir, NodeArgs: args, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start the WAN cluster: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if !c.NodeLinksSimulated() {
		t.Log("the binary has no --connect-to: only the clients' links are simulated")
	}
	w := &wanWorkload{c: c, hc: &http.Client{}, start: time.Now(), lastSeen: map[string]uint64{}}
	defer w.hc.CloseIdleConnections()

	// The load runs for wanLoad; the leader is killed a third of the way in
	// and restarted at two thirds.
	const wanLoad = 24 * time.Second
	lctx, stopLoad := context.WithTimeout(ctx, wanLoad)
	defer stopLoad()
	var wg sync.WaitGroup
	regions := []wan.Region{wan.US, wan.EU, wan.AP}
	for i, r := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.runClient(lctx, i, r, rand.New(rand.NewPCG(uint64(i)+1, 24)))
		}()
	}
	sleepUntil(lctx, w.start.Add(wanLoad/3))
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing the leader %s at %v", old, time.Since(w.start).Round(time.Millisecond))
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	sleepUntil(lctx, w.start.Add(2*wanLoad/3))
	if err := c.Restart(ctx, old); err != nil {
		t.Fatalf("restart %s: %v", old, err)
	}
	t.Logf("restarted %s at %v", old, time.Since(w.start).Round(time.Millisecond))
	wg.Wait()

	recs := w.records()
	counts := map[Outcome]int{}
	for _, r := range recs {
		counts[r.Output.Outcome]++
	}
	t.Logf("%d operations: %v", len(recs), counts)
	if counts[OutOK] < 30 {
		t.Fatalf("only %d operations succeeded: the workload did not run", counts[OutOK])
	}
	problems := w.violations()
	res, info := Check(recs, 30*time.Second)
	if res != porcupine.Ok {
		// The report outlives the test (t.TempDir would not).
		rdir, err := os.MkdirTemp("", "edgebase-robustness-wan-")
		var files []string
		if err == nil {
			files, err = WriteReport(rdir, recs, info)
		}
		problems = append(problems, fmt.Sprintf("the history is not linearizable (%v); report %v %v", res, files, err))
	}
	if err := c.WaitHealthy(ctx, 60*time.Second); err != nil {
		t.Fatalf("after the load: %v", err)
	}
	return append(problems, w.convergence(ctx)...)
}

// wanProxyBinary is make test-bins' wanproxy; without it the test skips.
func wanProxyBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(testbin.DirEnv)
	if dir == "" {
		t.Skipf("the WAN robustness tests need the wanproxy binary of `make test-bins` in $%s (unset)", testbin.DirEnv)
	}
	p := filepath.Join(dir, "wanproxy")
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		t.Skipf("the WAN robustness tests need %s (`make test-bins TEST_BIN_DIR=%s` builds it): %v", p, dir, err)
	}
	return p
}

func sleepUntil(ctx context.Context, at time.Time) {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wanWorkload records what the region clients saw.
type wanWorkload struct {
	c     *wan.Cluster
	hc    *http.Client
	start time.Time

	mu   sync.Mutex
	recs []Record
	// lastSeen: per client and key ("client/key"), the highest revision
	// the client saw the key at; backwards: reads that went below it.
	lastSeen  map[string]uint64
	backwards []string
}

const wanKeys = 3

func wanKey(r wan.Region, i int) string { return "wan/" + string(r) + "/k" + strconv.Itoa(i) }

func (w *wanWorkload) now() int64 { return time.Since(w.start).Nanoseconds() }

func (w *wanWorkload) records() []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Record(nil), w.recs...)
}

func (w *wanWorkload) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.backwards...)
}

// runClient is region r's client until ctx ends: puts on its own keys
// through its own edge, strong gets there, and local gets with
// X-Min-Revision at a random edge.
func (w *wanWorkload) runClient(ctx context.Context, id int, r wan.Region, rng *rand.Rand) {
	edges := []string{"e-us", "e-eu", "e-ap"}
	own := "e-" + string(r)
	var maxRev uint64 // the highest revision this client has seen
	for seq := 1; ctx.Err() == nil; seq++ {
		key := wanKey(r, rng.IntN(wanKeys))
		node := own
		in := Input{Kind: OpGet, Key: key}
		minRev := uint64(0)
		local := false
		switch p := rng.IntN(100); {
		case p < 45:
			in = Input{Kind: OpPut, Key: key, Value: fmt.Sprintf("%s-%d", r, seq)}
		case p < 70:
			// strong get at its own edge
		default:
			node = edges[rng.IntN(len(edges))]
			minRev, local = maxRev, true
		}
		rec := w.do(id, r, node, in, local, minRev)
		w.mu.Lock()
		w.recs = append(w.recs, rec)
		if rec.Output.Outcome == OutOK {
			maxRev = max(maxRev, rec.Output.Rev)
			k := fmt.Sprintf("%d/%s", id, key)
			if rec.Output.Rev < w.lastSeen[k] {
				w.backwards = append(w.backwards, fmt.Sprintf("client %s: %s of %s at %s answered revision %d after the client had seen %d (local %v, X-Min-Revision %d)",
					r, in.Kind, key, node, rec.Output.Rev, w.lastSeen[k], local, minRev))
			}
			w.lastSeen[k] = max(w.lastSeen[k], rec.Output.Rev)
		}
		w.mu.Unlock()
	}
}

// do runs one operation from region r on node (through the region's
// proxy) and records its times and outcome.
func (w *wanWorkload) do(id int, r wan.Region, node string, in Input, local bool, minRev uint64) Record {
	rec := Record{Client: id, Node: node, Input: in}
	h := map[string]string{"Authorization": "Bearer " + w.c.OwnerToken()}
	base := w.c.URL(r, node)
	var resp *proctest.Response
	var err error
	rec.Call = w.now()
	switch in.Kind {
	case OpPut:
		resp, err = proctest.DoJSON(context.Background(), w.hc, 5*time.Second, http.MethodPost, base+"/api/db", h,
			map[string]any{"collection": in.Key, "data": map[string]string{"v": in.Value}})
	case OpGet:
		q := base + "/api/db?collection=" + url.QueryEscape(in.Key)
		if local {
			q += "&consistency=local"
		}
		if minRev > 0 {
			h["X-Min-Revision"] = strconv.FormatUint(minRev, 10)
		}
		resp, err = proctest.DoJSON(context.Background(), w.hc, 5*time.Second, http.MethodGet, q, h, nil)
	}
	rec.Return = w.now()
	rec.Output.Outcome = outcome(resp, err)
	if err != nil {
		rec.Err = err.Error()
	} else if rec.Output.Outcome != OutOK && rec.Output.Outcome != OutNotFound {
		rec.Err = resp.String()
	}
	if rec.Output.Outcome == OutOK {
		if perr := parseOK(in.Kind, resp, &rec.Output); perr != nil {
			rec.Output = Output{Outcome: OutUnknown}
			rec.Err = perr.Error()
		}
	}
	return rec
}

// convergence reads every key on every node (directly, consistency=local
// with X-Min-Revision of the newest acknowledged revision) and checks it
// holds the last acknowledged put's value or that of a put whose outcome
// is unknown (which, as in the model, may take effect at any time after
// its call).
func (w *wanWorkload) convergence(ctx context.Context) []string {
	recs := w.records()
	type want struct {
		acked string
		rev   uint64
		later map[string]bool // values of the key's puts of unknown outcome
	}
	wants := map[string]*want{}
	var maxRev uint64
	for _, r := range recs {
		if r.Input.Kind != OpPut || r.Output.Outcome != OutOK {
			continue
		}
		maxRev = max(maxRev, r.Output.Rev)
		if x := wants[r.Input.Key]; x == nil || r.Output.Rev > x.rev {
			wants[r.Input.Key] = &want{acked: r.Input.Value, rev: r.Output.Rev, later: map[string]bool{}}
		}
	}
	for _, r := range recs {
		if x := wants[r.Input.Key]; x != nil && r.Input.Kind == OpPut && r.Output.Outcome == OutUnknown {
			x.later[r.Input.Value] = true
		}
	}
	var bad []string
	for _, n := range w.c.Nodes() {
		for key, x := range wants {
			q := w.c.DirectURL(n.ID) + "/api/db?consistency=local&collection=" + url.QueryEscape(key)
			h := map[string]string{"Authorization": "Bearer " + w.c.OwnerToken(), "X-Min-Revision": strconv.FormatUint(maxRev, 10)}
			resp, err := proctest.DoJSON(ctx, w.hc, 10*time.Second, http.MethodGet, q, h, nil)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s on %s: %v", key, n.ID, err))
				continue
			}
			var d struct {
				Data struct {
					V string `json:"v"`
				} `json:"data"`
				Revision uint64 `json:"revision"`
			}
			if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &d) != nil {
				bad = append(bad, fmt.Sprintf("%s on %s: %s (acknowledged %q at %d)", key, n.ID, resp, x.acked, x.rev))
				continue
			}
			if d.Data.V != x.acked && !x.later[d.Data.V] {
				bad = append(bad, fmt.Sprintf("%s on %s holds %q at revision %d; the last acknowledged put wrote %q at %d", key, n.ID, d.Data.V, d.Revision, x.acked, x.rev))
			}
		}
	}
	return bad
}
