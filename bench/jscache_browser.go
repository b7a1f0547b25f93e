package main

// JSC in Chromium: the same measurement with persistence "indexeddb". A
// headless Chromium with a profile directory of the bench's opens a page of
// the leader's own origin (no CORS in the way), imports the SDK the node
// serves (/_/sdk/edgebase.js), fills the IndexedDB cache from the
// subscription, then each open is a new page load (a fresh JavaScript
// realm on the same IndexedDB), timed from createClient to the cached
// snapshot. The size is the profile's IndexedDB directory (LevelDB files)
// once the browser closed, and navigator.storage.estimate()'s usage.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
)

// jscBrowser is one run's IndexedDB figures.
type jscBrowser struct {
	Docs        int       `json:"docs"`
	SnapshotMs  float64   `json:"snapshotMs"`
	FlushMs     float64   `json:"flushMs"`
	OpenMs      []float64 `json:"openMs"`
	LiveMs      []float64 `json:"liveMs"`
	UsageBytes  int64     `json:"estimateUsageBytes"`
	DiskBytes   int64     `json:"indexedDbDirBytes"`
	BrowserPath string    `json:"browser"`
}

// chromium finds a Chromium (or Chrome) binary on PATH, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// jscPageScript is the page's measurement: mode "fill" or "open", as in
// cachecost.mjs. It resolves to a JSON string.
const jscPageScript = `(async (o) => {
  const { createClient } = await import('/_/sdk/edgebase.js');
  const session = JSON.stringify({ token: o.token, user: null });
  const storage = { getItem: () => session, setItem() {}, removeItem() {} };
  const t0 = performance.now();
  const c = createClient({ url: location.origin, projectId: o.project, apiKey: o.apiKey, storage, persistence: 'indexeddb' });
  const r = await new Promise((resolve, reject) => {
    let first = null;
    const timer = setTimeout(() => reject(new Error('no snapshot in time')), 120000);
    const done = (t, resumed) => { clearTimeout(timer); sub.unsubscribe(); resolve({ ...first, liveMs: t - t0, resumed }); };
    const sub = c.realtime.subscribe(o.prefix, { prefix: true }, (e) => {
      const t = performance.now();
      if (e.type === 'error') { clearTimeout(timer); reject(e.error); }
      else if (e.type === 'snapshot' && !first) {
        first = { firstMs: t - t0, docs: e.documents.length, fromCache: e.fromCache === true };
        if (!first.fromCache) done(t, false);
      } else if (e.type === 'resumed' || e.type === 'snapshot') done(t, e.type === 'resumed');
    });
  });
  const t1 = performance.now();
  await c.flush();
  const flushMs = performance.now() - t1;
  c.close();
  const est = navigator.storage && navigator.storage.estimate ? await navigator.storage.estimate() : {};
  if (o.mode === 'fill' && r.fromCache) throw new Error('fill: the cache was not empty');
  if (o.mode === 'open' && !r.fromCache) throw new Error('open: no snapshot from the cache');
  return JSON.stringify({ ...r, flushMs, usage: est.usage || 0 });
})`

// runJSCacheBrowser fills an IndexedDB cache in a fresh Chromium profile and
// opens it opens times.
func runJSCacheBrowser(ctx context.Context, e *env, bin string, opens int) (jscBrowser, error) {
	res := jscBrowser{BrowserPath: bin}
	profile, err := os.MkdirTemp("", "edgebase-jsc-chromium-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.UserDataDir(profile), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	closed := false
	closeBrowser := func() {
		if !closed {
			closed = true
			cancelTab()
			cancelAlloc()
		}
	}
	defer closeBrowser()
	page := e.c.leader.url + "/readyz"
	args := func(mode string) string {
		b, _ := json.Marshal(map[string]string{"mode": mode, "token": e.pr.Token, "project": e.pr.ID, "apiKey": e.pr.APIKey, "prefix": jscDir})
		return string(b)
	}
	type answer struct {
		FirstMs   float64 `json:"firstMs"`
		LiveMs    float64 `json:"liveMs"`
		Docs      int     `json:"docs"`
		FromCache bool    `json:"fromCache"`
		Resumed   bool    `json:"resumed"`
		FlushMs   float64 `json:"flushMs"`
		Usage     int64   `json:"usage"`
	}
	measure := func(mode string) (answer, error) {
		var a answer
		if err := chromedp.Do(tab, chromedp.Navigate(page)); err != nil {
			return a, fmt.Errorf("open %s: %w", page, err)
		}
		s, err := chromedp.Run(tab, chromedp.Evaluate[string](jscPageScript+"("+args(mode)+")", chromedp.EvalAwaitPromise))
		if err != nil {
			return a, fmt.Errorf("chromium %s: %w", mode, err)
		}
		return a, json.Unmarshal([]byte(s), &a)
	}
	f, err := measure("fill")
	if err != nil {
		return res, err
	}
	res.Docs, res.SnapshotMs, res.FlushMs, res.UsageBytes = f.Docs, f.FirstMs, f.FlushMs, f.Usage
	for i := 0; i < opens && ctx.Err() == nil; i++ {
		o, err := measure("open")
		if err != nil {
			return res, err
		}
		if o.Docs != f.Docs || !o.Resumed {
			return res, fmt.Errorf("chromium open %d: the cached snapshot held %d documents (filled %d), resumed %v", i, o.Docs, f.Docs, o.Resumed)
		}
		res.OpenMs, res.LiveMs = append(res.OpenMs, o.FirstMs), append(res.LiveMs, o.LiveMs)
		res.UsageBytes = o.Usage
	}
	closeBrowser()
	_ = filepath.WalkDir(filepath.Join(profile, "Default", "IndexedDB"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				res.DiskBytes += info.Size()
			}
		}
		return nil
	})
	return res, nil
}
