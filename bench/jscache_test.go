package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The documents of JSC are about 200 bytes of JSON, whatever --value-size is.
func TestJSCDocSize(t *testing.T) {
	for _, size := range []int{16, 256, 4096} {
		e := newEnv(nil, nil, project{}, &options{valueSize: size})
		b, err := json.Marshal(jscDoc(e, 9999))
		if err != nil {
			t.Fatal(err)
		}
		want := min(size, 140)
		if got := len(jscDoc(e, 1)["v"].(string)); got != want {
			t.Errorf("value size %d: v holds %d letters, want %d", size, got, want)
		}
		if size >= 140 && (len(b) < 180 || len(b) > 220) {
			t.Errorf("value size %d: a document is %d bytes of JSON, want about 200", size, len(b))
		}
	}
}

// The summary takes medians over the measured runs only (the warm-up's run
// comes first in jscState.runs) and per document figures over the fill.
func TestSummarizeJSCache(t *testing.T) {
	e := newEnv(nil, nil, project{}, &options{valueSize: 256, jsDocs: 100})
	e.jsc = &jscState{runs: []jscRun{
		{Fill: jscFill{Docs: 100, Bytes: 1e9}, Opens: []jscOpen{{OpenMs: 1e6}}}, // warm-up: left out
		{Fill: jscFill{Docs: 100, Bytes: 80000, AllocatedBytes: 819200, Files: 200, FlushMs: 10},
			Opens:  []jscOpen{{OpenMs: 10, LiveMs: 12}, {OpenMs: 30, LiveMs: 32}, {OpenMs: 20, LiveMs: 22}},
			Memory: jscMemory{Docs: 100, HeapBytes: 140000, OpenMs: []float64{5}, LiveMs: []float64{6}}, ColdMs: 7,
			Browser: &jscBrowser{Docs: 100, OpenMs: []float64{40, 50}, LiveMs: []float64{41, 51}, DiskBytes: 47400, FlushMs: 99}},
		{Fill: jscFill{Docs: 100, Bytes: 80000, AllocatedBytes: 819200, Files: 200, FlushMs: 30},
			Opens: []jscOpen{{OpenMs: 40, LiveMs: 42}, {OpenMs: 50, LiveMs: 52}}, ColdMs: 9},
	}}
	r := &result{Runs: make([]runResult, 2)}
	summarizeJSCache(e, nil, r)
	j := r.JSCache
	if j == nil {
		t.Fatal("no jsCache")
	}
	if j.FileOpenP50Ms != 30 || j.FileLiveP50Ms != 32 || j.FileBytesPerDoc != 800 || j.FileAllocPerDoc != 8192 || j.FilesPerDoc != 2 || j.FillFlushMs != 20 {
		t.Errorf("file figures %+v", j)
	}
	if j.MemoryOpenP50Ms != 5 || j.MemoryBytesPerDoc != 1400 || j.ColdSnapshotP50Ms != 8 {
		t.Errorf("memory/cold figures %+v", j)
	}
	if j.IDBOpenP50Ms != 45 || j.IDBDiskPerDoc != 474 || j.IDBFillFlushMs != 99 {
		t.Errorf("IndexedDB figures %+v", j)
	}
	if len(j.Runs) != 2 || len(r.Notes) != 3 || !strings.Contains(r.Notes[2], "IndexedDB: open") {
		t.Errorf("runs %d, notes %q", len(j.Runs), r.Notes)
	}
}
