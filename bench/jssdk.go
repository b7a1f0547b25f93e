package main

// JS: one JavaScript SDK subscriber (clients/js/edgebase.js) in a Node
// process, fed change events at rising rates, and the heap an app needs to
// hold a subscription's snapshot of --js-docs documents.
//
// Each run is a ramp: for every rate of jsRates the bench commits that many
// changes per second for jsStep (as batches of jsBatch writes through the
// leader, each document carrying the send time), waits up to jsDrain for
// the subscriber to have them all, and asks it (bench/js/subscriber.mjs)
// what it saw. A step is kept up with when every change arrived, in
// order, with no disconnect, no reset, and a p99 lag (send to handler)
// under jsMaxLag. The run's ops/s is the SDK's measured event rate at the
// highest step it kept up with: how many change events per second one SDK
// subscriber processes before it falls behind.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var jsRates = []int{1000, 2000, 5000, 10000, 20000, 30000, 40000}

const (
	jsStep   = 2 * time.Second
	jsBatch  = 200
	jsDrain  = 5 * time.Second
	jsMaxLag = time.Second
	jsMemDir = "bench/js/mem"
)

// jsState is the JS scenario's Node process and its results.
type jsState struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *strings.Builder
	mem    jsMem
	runs   [][]jsStepResult
}

type jsMem struct {
	Docs  int   `json:"memDocs"`
	Bytes int64 `json:"memBytes"`
}

// jsStepResult is one rate step of a ramp.
type jsStepResult struct {
	Offered     int     `json:"offeredPerSec"`
	Committed   float64 `json:"committedPerSec"`
	Written     int     `json:"written"`
	Events      int     `json:"events"`
	EventsPerS  float64 `json:"eventsPerSec"`
	LagP50Ms    float64 `json:"lagP50Ms"`
	LagP99Ms    float64 `json:"lagP99Ms"`
	LagMaxMs    float64 `json:"lagMaxMs"`
	Resets      int     `json:"resets"`
	Disconnects int     `json:"disconnects"`
	OutOfOrder  int     `json:"outOfOrder"`
	KeptUp      bool    `json:"keptUp"`
}

// jsResult is the JSON's "js": the memory figure and each run's ramp.
type jsResult struct {
	MemDocs          int              `json:"memDocs"`
	MemBytes         int64            `json:"memBytes"`
	BytesPerDoc      float64          `json:"bytesPerDoc"`
	MaxKeptUpPerSec  []int            `json:"maxKeptUpPerSec"`
	SDKEventsPerSec  []float64        `json:"sdkEventsPerSec"`
	Ramps            [][]jsStepResult `json:"ramps"`
	NodeVersion      string           `json:"nodeVersion"`
	SubscriberScript string           `json:"subscriberScript"`
}

// prepareJS writes the documents of the memory measurement and starts the
// subscriber, which measures its heap and then waits for commands.
func prepareJS(ctx context.Context, e *env) error {
	if e.js != nil {
		return nil
	}
	root, err := needNode(ctx, "JS")
	if err != nil {
		return err
	}
	err = writeJSDocs(ctx, e, jsMemDir, func(j int) map[string]any {
		return map[string]any{"title": fmt.Sprintf("document %d", j), "n": j, "v": json.RawMessage(e.value)}
	})
	if err != nil {
		return fmt.Errorf("write the memory documents: %w", err)
	}
	script := filepath.Join(root, "bench", "js", "subscriber.mjs")
	cmd := exec.Command("node", append(nodeArgs(ctx), script)...)
	cmd.Env = nodeEnv(e, "EB_MEM_PREFIX="+jsMemDir)
	js := &jsState{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = js.stderr
	if js.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	js.lines = bufio.NewScanner(out)
	js.lines.Buffer(make([]byte, 1<<20), 1<<20)
	var ready struct {
		Ready bool
		jsMem
	}
	if err := js.read(&ready); err != nil || !ready.Ready {
		js.stop()
		return fmt.Errorf("subscriber did not start (%v): %s", err, js.stderr)
	}
	if ready.Docs != e.o.jsDocs {
		js.stop()
		return fmt.Errorf("the memory subscription's snapshot held %d documents, want %d", ready.Docs, e.o.jsDocs)
	}
	js.mem = ready.jsMem
	e.js = js
	return nil
}

// nodeMajor is the major version of node on PATH (0 if unknown).
func nodeMajor(ctx context.Context) int {
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return 0
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	return major
}

func (js *jsState) send(cmd map[string]any) error {
	b, _ := json.Marshal(cmd)
	_, err := js.stdin.Write(append(b, '\n'))
	return err
}

// read decodes the subscriber's next line into v (an {"error"} line fails).
func (js *jsState) read(v any) error {
	if !js.lines.Scan() {
		if err := js.lines.Err(); err != nil {
			return err
		}
		return fmt.Errorf("subscriber exited: %s", js.stderr)
	}
	var fail struct{ Error string }
	if json.Unmarshal(js.lines.Bytes(), &fail) == nil && fail.Error != "" {
		return errors.New("subscriber: " + fail.Error)
	}
	return json.Unmarshal(js.lines.Bytes(), v)
}

func (js *jsState) stop() {
	_ = js.send(map[string]any{"cmd": "exit"})
	_ = js.stdin.Close()
	done := make(chan struct{})
	go func() { _ = js.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = js.cmd.Process.Kill()
		<-done
	}
}

// runJS is one ramp.
func runJS(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	js := e.js
	kinds := map[string]int{}
	var rr runResult
	h := &histogram{}
	run := len(js.runs)
	start := time.Now()
	var steps []jsStepResult
	best := -1
	for i, rate := range jsRates[:min(ops, len(jsRates))] {
		prefix := fmt.Sprintf("bench/js/r%d/s%d", run, i)
		var sub struct{ Subscribed string }
		err := js.send(map[string]any{"cmd": "subscribe", "prefix": prefix})
		if err == nil {
			err = js.read(&sub)
		}
		if err != nil || sub.Subscribed != prefix {
			kinds["subscribe"]++
			rr.Errors++
			break
		}
		st, err := jsStepRun(ctx, e, prefix, rate, h)
		if err != nil {
			kinds[errKind(err)]++
			rr.Errors++
		}
		steps = append(steps, st)
		rr.Writes += st.Written
		rr.Ops += st.Events
		if st.KeptUp {
			best = i
		} else {
			break // fallen behind: higher rates only fall further
		}
	}
	js.runs = append(js.runs, steps)
	rr.WallSeconds = time.Since(start).Seconds()
	if best >= 0 {
		rr.OpsPerSec = steps[best].EventsPerS
	}
	if rr.WallSeconds > 0 {
		rr.WritesPerSec = float64(rr.Writes) / rr.WallSeconds
	}
	return rr, h, kinds, map[string]int{}
}

func errKind(err error) string {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.kind
	}
	return err.Error()
}

// jsStepRun commits rate changes a second under prefix for jsStep, waits
// for the subscriber to have them, and reads its counters.
func jsStepRun(ctx context.Context, e *env, prefix string, rate int, h *histogram) (jsStepResult, error) {
	st := jsStepResult{Offered: rate}
	batches := int(float64(rate) * jsStep.Seconds() / jsBatch)
	interval := time.Duration(float64(time.Second) * jsBatch / float64(rate))
	var written atomic.Int64
	var firstErr error
	var mu sync.Mutex // firstErr and h
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	begin := time.Now()
	for b := 0; b < batches && ctx.Err() == nil; b++ {
		if d := time.Until(begin.Add(time.Duration(b) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(b int) {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			sent := float64(t0.UnixNano()) / 1e6
			writes := make([]map[string]any, jsBatch)
			for j := range writes {
				writes[j] = map[string]any{"op": "set", "collection": fmt.Sprintf("%s/b%d-%d", prefix, b, j),
					"data": map[string]any{"t": sent, "v": json.RawMessage(e.value)}}
			}
			_, err := e.batch(ctx, writes)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			h.add(time.Since(t0)) // a batch's commit latency
			written.Add(jsBatch)
		}(b)
	}
	wg.Wait()
	committed := time.Since(begin)
	st.Written = int(written.Load())
	st.Committed = float64(st.Written) / committed.Seconds()
	var c struct {
		Events      int
		FirstMs     float64
		LastMs      float64
		Resets      int
		Disconnects int
		OutOfOrder  int
		LagP50Ms    float64
		LagP99Ms    float64
		LagMaxMs    float64
	}
	deadline := time.Now().Add(jsDrain)
	total := jsStepTotals{}
	for {
		if err := e.js.send(map[string]any{"cmd": "stats"}); err != nil {
			return st, err
		}
		if err := e.js.read(&c); err != nil {
			return st, err
		}
		total.add(c.Events, c.FirstMs, c.LastMs, c.Resets, c.Disconnects, c.OutOfOrder, c.LagP50Ms, c.LagP99Ms, c.LagMaxMs)
		if total.events >= st.Written || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st.Events, st.Resets, st.Disconnects, st.OutOfOrder = total.events, total.resets, total.disconnects, total.outOfOrder
	st.LagP50Ms, st.LagP99Ms, st.LagMaxMs = round(total.p50, 1), round(total.p99, 1), round(total.max, 1)
	if span := total.lastMs - total.firstMs; span > 0 {
		st.EventsPerS = round(float64(total.events)/(span/1000), 0)
	}
	st.Committed = round(st.Committed, 0)
	st.KeptUp = firstErr == nil && st.Written > 0 && st.Events == st.Written && st.Resets == 0 && st.Disconnects == 0 &&
		st.OutOfOrder == 0 && st.LagP99Ms < float64(jsMaxLag.Milliseconds())
	return st, firstErr
}

// jsStepTotals adds up the subscriber's counters over the polls of one
// step: counts add, the events span from the first poll's first event to
// the last poll's last (wall clock of the subscriber, in ms), and of the
// lag percentiles it keeps the worst poll's (an upper bound).
type jsStepTotals struct {
	events, resets, disconnects, outOfOrder int
	firstMs, lastMs, p50, p99, max          float64
}

func (t *jsStepTotals) add(events int, firstMs, lastMs float64, resets, disconnects, outOfOrder int, p50, p99, mx float64) {
	if events > 0 {
		if t.events == 0 {
			t.firstMs = firstMs
		}
		t.lastMs = lastMs
		t.p50, t.p99, t.max = max(t.p50, p50), max(t.p99, p99), max(t.max, mx)
	}
	t.events += events
	t.resets += resets
	t.disconnects += disconnects
	t.outOfOrder += outOfOrder
}

// batch commits writes with POST /api/db/batch as the owner, through the
// leader, and returns the revision.
func (e *env) batch(ctx context.Context, writes []map[string]any) (uint64, error) {
	body, err := json.Marshal(map[string]any{"writes": writes})
	if err != nil {
		return 0, err
	}
	return e.postAs(ctx, e.c.leader, "/api/db/batch", "POST batch", body)
}

// summarizeJS adds the memory figure and the ramps to the result.
func summarizeJS(e *env, s *scenario, r *result) {
	js := e.js
	if js == nil {
		return
	}
	runs := js.runs[max(len(js.runs)-len(r.Runs), 0):]
	res := &jsResult{MemDocs: js.mem.Docs, MemBytes: js.mem.Bytes, Ramps: runs, SubscriberScript: "bench/js/subscriber.mjs"}
	if js.mem.Docs > 0 {
		res.BytesPerDoc = round(float64(js.mem.Bytes)/float64(js.mem.Docs), 0)
	}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		res.NodeVersion = strings.TrimSpace(string(out))
	}
	for _, steps := range runs {
		best, rate := 0, 0.0
		for _, st := range steps {
			if st.KeptUp {
				best, rate = st.Offered, st.EventsPerS
			}
		}
		res.MaxKeptUpPerSec = append(res.MaxKeptUpPerSec, best)
		res.SDKEventsPerSec = append(res.SDKEventsPerSec, rate)
	}
	r.JS = res
	r.Notes = append(r.Notes, fmt.Sprintf("SDK heap for a subscription holding %d documents: %.1f MiB (%.0f bytes a document); highest rate kept up with per run: %v changes/s (SDK measured %v events/s)",
		res.MemDocs, float64(res.MemBytes)/(1<<20), res.BytesPerDoc, res.MaxKeptUpPerSec, res.SDKEventsPerSec))
	for i, steps := range runs {
		var parts []string
		for _, st := range steps {
			parts = append(parts, fmt.Sprintf("%d/s: committed %.0f/s, %d/%d events, lag p99 %.0f ms, %d disconnects, %d resets",
				st.Offered, st.Committed, st.Events, st.Written, st.LagP99Ms, st.Disconnects, st.Resets))
		}
		r.Notes = append(r.Notes, fmt.Sprintf("run %d ramp: %s", i+1, strings.Join(parts, "; ")))
	}
}

// needNode checks that node is on PATH for scenario and answers the
// repository's root, where the bench's scripts are.
func needNode(ctx context.Context, scenario string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("the %s scenario needs node (Node.js >= 20) on PATH", scenario)
	}
	return repoRoot(ctx)
}

// writeJSDocs writes --js-docs documents dir/d000000, dir/d000001, ... with
// data(i), in batches of 500.
func writeJSDocs(ctx context.Context, e *env, dir string, data func(i int) map[string]any) error {
	for i := 0; i < e.o.jsDocs; i += 500 {
		writes := make([]map[string]any, 0, 500)
		for j := i; j < min(i+500, e.o.jsDocs); j++ {
			writes = append(writes, map[string]any{"op": "set", "collection": fmt.Sprintf("%s/d%06d", dir, j), "data": data(j)})
		}
		if _, err := e.batch(ctx, writes); err != nil {
			return err
		}
	}
	return nil
}

// nodeArgs are the flags of every bench script: gc for heap measurements,
// WebSocket before Node 22.
func nodeArgs(ctx context.Context) []string {
	args := []string{"--expose-gc"}
	if nodeMajor(ctx) < 22 {
		args = append(args, "--experimental-websocket")
	}
	return args
}

// nodeEnv is the environment of a bench script: the leader and the
// project's credentials, plus extra.
func nodeEnv(e *env, extra ...string) []string {
	env := append(os.Environ(), "EB_URL="+e.c.leader.url, "EB_PROJECT="+e.pr.ID, "EB_API_KEY="+e.pr.APIKey, "EB_TOKEN="+e.pr.Token)
	return append(env, extra...)
}
