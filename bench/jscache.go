package main

// JSC: what the JavaScript SDK's persistent cache (issue 21) costs. Against
// a real node, a subscription holds --js-docs documents of about 200 bytes;
// the SDK caches it with the file adapter, closes, and fresh Node processes
// then open the same cache (bench/js/cachecost.mjs): the time from
// createClient to the cached snapshot, the time until the subscription is
// live again (resumed from the network), and the cache's bytes per
// document on disk. The memory adapter is measured in one process (the heap
// it retains, and new clients on it), and a process without persistence
// gives the baseline: the server's snapshot over the network.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const jscDir = "bench/jsc/docs"

// jscState is the scenario's setup and what its runs measured.
type jscState struct {
	root   string
	script string
	runs   []jscRun
}

// jscFill is cachecost.mjs's fill answer.
type jscFill struct {
	Docs           int     `json:"docs"`
	SnapshotMs     float64 `json:"snapshotMs"`
	FlushMs        float64 `json:"flushMs"`
	Files          int     `json:"files"`
	Bytes          int64   `json:"bytes"`
	AllocatedBytes int64   `json:"allocatedBytes"`
}

// jscOpen is its open answer.
type jscOpen struct {
	Docs    int     `json:"docs"`
	OpenMs  float64 `json:"openMs"`
	LiveMs  float64 `json:"liveMs"`
	Resumed bool    `json:"resumed"`
}

// jscMemory is its memory answer.
type jscMemory struct {
	Docs       int       `json:"docs"`
	HeapBytes  int64     `json:"heapBytes"`
	SnapshotMs float64   `json:"snapshotMs"`
	OpenMs     []float64 `json:"openMs"`
	LiveMs     []float64 `json:"liveMs"`
}

// jscRun is one run: a fill, opens fresh processes, the memory adapter, and
// one snapshot without persistence.
type jscRun struct {
	Fill   jscFill   `json:"fill"`
	Opens  []jscOpen `json:"opens"`
	Memory jscMemory `json:"memory"`
	ColdMs float64   `json:"coldSnapshotMs"`
	// Browser: the IndexedDB cache in Chromium (nil without a Chromium).
	Browser *jscBrowser `json:"browser,omitempty"`
}

// jscResult is the JSON's "jsCache".
type jscResult struct {
	Docs              int      `json:"docs"`
	DocJSONBytes      int      `json:"docJsonBytes"`
	FileOpenP50Ms     float64  `json:"fileOpenP50Ms"`
	FileLiveP50Ms     float64  `json:"fileLiveP50Ms"`
	FileBytesPerDoc   float64  `json:"fileBytesPerDoc"`
	FileAllocPerDoc   float64  `json:"fileAllocatedBytesPerDoc"`
	FilesPerDoc       float64  `json:"filesPerDoc"`
	FillSnapshotMs    float64  `json:"fillSnapshotP50Ms"`
	FillFlushMs       float64  `json:"fillFlushP50Ms"`
	MemoryOpenP50Ms   float64  `json:"memoryOpenP50Ms"`
	MemoryLiveP50Ms   float64  `json:"memoryLiveP50Ms"`
	MemoryBytesPerDoc float64  `json:"memoryHeapBytesPerDoc"`
	ColdSnapshotP50Ms float64  `json:"coldSnapshotP50Ms"`
	IDBOpenP50Ms      float64  `json:"indexedDbOpenP50Ms,omitempty"`
	IDBLiveP50Ms      float64  `json:"indexedDbLiveP50Ms,omitempty"`
	IDBFillFlushMs    float64  `json:"indexedDbFillFlushP50Ms,omitempty"`
	IDBDiskPerDoc     float64  `json:"indexedDbDirBytesPerDoc,omitempty"`
	IDBUsagePerDoc    float64  `json:"indexedDbEstimateBytesPerDoc,omitempty"`
	Runs              []jscRun `json:"runs"`
	NodeVersion       string   `json:"nodeVersion"`
	Script            string   `json:"script"`
}

// jscDoc is document i of the subscription: about 200 bytes of JSON.
func jscDoc(e *env, i int) map[string]any {
	v := string(e.value[1 : len(e.value)-1])
	return map[string]any{"title": fmt.Sprintf("document %d", i), "n": i, "done": i%2 == 0, "v": v[:min(len(v), 140)]}
}

// prepareJSCache writes the documents once.
func prepareJSCache(ctx context.Context, e *env) error {
	if e.jsc != nil {
		return nil
	}
	root, err := needNode(ctx, "JSC")
	if err != nil {
		return err
	}
	if err := writeJSDocs(ctx, e, jscDir, func(j int) map[string]any { return jscDoc(e, j) }); err != nil {
		return fmt.Errorf("write the documents: %w", err)
	}
	e.jsc = &jscState{root: root, script: filepath.Join(root, "bench", "js", "cachecost.mjs")}
	return nil
}

// node runs cachecost.mjs in mode and decodes its answer into v.
func (s *jscState) node(ctx context.Context, e *env, mode, dir string, opens int, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append(nodeArgs(ctx), s.script)...)
	cmd.Env = nodeEnv(e, "EB_PREFIX="+jscDir, "EB_MODE="+mode, "EB_DIR="+dir, "EB_OPENS="+strconv.Itoa(opens))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("cachecost.mjs %s: %v: %s", mode, err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var last string
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	if err := json.Unmarshal([]byte(last), v); err != nil {
		return fmt.Errorf("cachecost.mjs %s: %v in %q", mode, err, last)
	}
	return nil
}

// runJSCache is one run: ops opens of a freshly filled file cache, as many
// of the memory cache, and one snapshot without persistence.
func runJSCache(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	js := e.jsc
	kinds := map[string]int{}
	var rr runResult
	h := &histogram{}
	start := time.Now()
	fail := func(kind string, err error) {
		kinds[kind]++
		rr.Errors++
		if e.log != nil {
			e.log("bench: JSC %s: %v", kind, err)
		}
	}
	dir, err := os.MkdirTemp("", "edgebase-jsc-")
	if err != nil {
		fail("tempdir", err)
		return rr, h, kinds, map[string]int{}
	}
	defer os.RemoveAll(dir)
	var run jscRun
	if err := js.node(ctx, e, "fill", dir, 0, &run.Fill); err != nil {
		fail("fill", err)
		return rr, h, kinds, map[string]int{}
	}
	if run.Fill.Docs != e.o.jsDocs {
		fail("fill", fmt.Errorf("the snapshot held %d documents, want %d", run.Fill.Docs, e.o.jsDocs))
	}
	for i := 0; i < ops && ctx.Err() == nil; i++ {
		var o jscOpen
		if err := js.node(ctx, e, "open", dir, 0, &o); err != nil {
			fail("open", err)
			continue
		}
		if o.Docs != run.Fill.Docs || !o.Resumed {
			fail("open", fmt.Errorf("the cached snapshot held %d documents (filled %d), resumed %v", o.Docs, run.Fill.Docs, o.Resumed))
			continue
		}
		run.Opens = append(run.Opens, o)
		h.add(time.Duration(o.OpenMs * float64(time.Millisecond)))
		rr.Ops++
	}
	if err := js.node(ctx, e, "memory", "", ops, &run.Memory); err != nil {
		fail("memory", err)
	}
	var cold struct {
		Docs       int     `json:"docs"`
		SnapshotMs float64 `json:"snapshotMs"`
	}
	if err := js.node(ctx, e, "cold", "", 0, &cold); err != nil {
		fail("cold", err)
	}
	run.ColdMs = cold.SnapshotMs
	if bin := chromium(); bin != "" {
		b, err := runJSCacheBrowser(ctx, e, bin, ops)
		if err != nil {
			fail("chromium", err)
		} else {
			run.Browser = &b
		}
	}
	js.runs = append(js.runs, run)
	rr.WallSeconds = time.Since(start).Seconds()
	if rr.WallSeconds > 0 {
		rr.OpsPerSec = float64(rr.Ops) / rr.WallSeconds
	}
	return rr, h, kinds, map[string]int{}
}

// summarizeJSCache adds the medians over the measured runs to the result.
func summarizeJSCache(e *env, s *scenario, r *result) {
	js := e.jsc
	if js == nil {
		return
	}
	runs := js.runs[max(len(js.runs)-len(r.Runs), 0):]
	doc, _ := json.Marshal(jscDoc(e, 1234))
	res := &jscResult{Docs: e.o.jsDocs, DocJSONBytes: len(doc), Runs: runs, Script: "bench/js/cachecost.mjs"}
	var open, live, memOpen, memLive, fillSnap, flush, perDoc, alloc, files, heap, cold []float64
	var idbOpen, idbLive, idbFlush, idbDisk, idbUsage []float64
	for _, run := range runs {
		for _, o := range run.Opens {
			open, live = append(open, o.OpenMs), append(live, o.LiveMs)
		}
		memOpen, memLive = append(memOpen, run.Memory.OpenMs...), append(memLive, run.Memory.LiveMs...)
		fillSnap, flush = append(fillSnap, run.Fill.SnapshotMs), append(flush, run.Fill.FlushMs)
		if d := float64(run.Fill.Docs); d > 0 {
			perDoc = append(perDoc, float64(run.Fill.Bytes)/d)
			alloc = append(alloc, float64(run.Fill.AllocatedBytes)/d)
			files = append(files, float64(run.Fill.Files)/d)
		}
		if d := float64(run.Memory.Docs); d > 0 {
			heap = append(heap, float64(run.Memory.HeapBytes)/d)
		}
		cold = append(cold, run.ColdMs)
		if b := run.Browser; b != nil && b.Docs > 0 {
			idbOpen, idbLive = append(idbOpen, b.OpenMs...), append(idbLive, b.LiveMs...)
			idbFlush = append(idbFlush, b.FlushMs)
			idbDisk = append(idbDisk, float64(b.DiskBytes)/float64(b.Docs))
			idbUsage = append(idbUsage, float64(b.UsageBytes)/float64(b.Docs))
		}
	}
	res.FileOpenP50Ms, res.FileLiveP50Ms = round(median(open), 0), round(median(live), 0)
	res.MemoryOpenP50Ms, res.MemoryLiveP50Ms = round(median(memOpen), 0), round(median(memLive), 0)
	res.FillSnapshotMs, res.FillFlushMs = round(median(fillSnap), 0), round(median(flush), 0)
	res.FileBytesPerDoc, res.FileAllocPerDoc, res.FilesPerDoc = round(median(perDoc), 0), round(median(alloc), 0), round(median(files), 2)
	res.MemoryBytesPerDoc, res.ColdSnapshotP50Ms = round(median(heap), 0), round(median(cold), 0)
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		res.NodeVersion = strings.TrimSpace(string(out))
	}
	res.IDBOpenP50Ms, res.IDBLiveP50Ms, res.IDBFillFlushMs = round(median(idbOpen), 0), round(median(idbLive), 0), round(median(idbFlush), 0)
	res.IDBDiskPerDoc, res.IDBUsagePerDoc = round(median(idbDisk), 0), round(median(idbUsage), 0)
	r.JSCache = res
	r.Notes = append(r.Notes,
		fmt.Sprintf("%d documents of %d bytes (JSON data); file adapter: open (createClient to the cached snapshot) p50 %.0f ms, live again (resumed) p50 %.0f ms, %.0f bytes a document on disk (%.0f allocated, %.2f files a document); filling: server snapshot %.0f ms, then %.0f ms until stored",
			res.Docs, res.DocJSONBytes, res.FileOpenP50Ms, res.FileLiveP50Ms, res.FileBytesPerDoc, res.FileAllocPerDoc, res.FilesPerDoc, res.FillSnapshotMs, res.FillFlushMs),
		fmt.Sprintf("memory adapter: %.0f bytes of heap a document, a new client on it: cached snapshot p50 %.0f ms, resumed p50 %.0f ms; without persistence the server's snapshot takes p50 %.0f ms",
			res.MemoryBytesPerDoc, res.MemoryOpenP50Ms, res.MemoryLiveP50Ms, res.ColdSnapshotP50Ms))
	if len(idbOpen) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("Chromium, IndexedDB: open (a new page load, createClient to the cached snapshot) p50 %.0f ms, resumed p50 %.0f ms; filling stored in %.0f ms; %.0f bytes a document in the profile's IndexedDB directory, %.0f by navigator.storage.estimate()",
			res.IDBOpenP50Ms, res.IDBLiveP50Ms, res.IDBFillFlushMs, res.IDBDiskPerDoc, res.IDBUsagePerDoc))
	} else {
		r.Notes = append(r.Notes, "Chromium, IndexedDB: not measured (no chromium on PATH, or it failed: see the errors)")
	}
}
