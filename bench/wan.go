package main

// The WAN measurements (go run ./bench --wan): what an edge node buys on a
// simulated wide-area network. internal/wan starts the cluster of issue 24
// (voters v-us1, v-us2, v-eu1; edge nodes e-us, e-eu, e-ap) behind the
// wanproxy (toxiproxy) with the region round trips of its profile. Each
// client region R talks to nodes through URL(R, node): its own edge e-R is
// 1 ms away, the leader the round trip between R and the leader's region.
// Each latency measurement takes --wan-samples sequential requests per
// region (one at a time per client; the three regions' clients run
// concurrently); the fault measurements (edge restart, failover, partition)
// take one sample per region. One markdown table and one JSON line per
// measurement go to stdout; progress goes to stderr.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/internal/wan"
)

// wanOptions are the --wan flags.
type wanOptions struct {
	enabled bool
	// proxyBin: the wanproxy binary (--wan-bin); empty: built from
	// e2e/wanproxy into the temporary directory.
	proxyBin string
	// args: extra serve flags for every node (--wan-args, e.g. "--wan").
	args []string
	// partition: how long e-ap stays cut off in the catch-up measurement
	// (--wan-duration).
	partition time.Duration
	// soak: the jitter soak's length (--wan-soak); 0: no soak.
	soak time.Duration
	// jitter: the profile's jitter (--wan-jitter), a fraction of each
	// one-way latency.
	jitter float64
	// samples per region of each latency measurement (--wan-samples).
	samples int
	quick   bool
	// measure: the measurements to run (--wan-measure), by number 1..10;
	// empty: all.
	measure map[int]bool

	argsFlag    string
	measureFlag string
	// linksSimulated: set when a cluster starts (the binary has
	// --connect-to).
	linksSimulated bool
}

// wanDefaultSamples and wanQuickSamples are --wan-samples' defaults
// without and with --wan-quick.
const (
	wanDefaultSamples = 50
	wanQuickSamples   = 10
)

// register adds the --wan flags to fs.
func (w *wanOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&w.enabled, "wan", false, "run the WAN measurements instead of the scenarios: the issue-24 cluster (3 voters, 3 edge nodes in us/eu/ap) behind a simulated WAN (toxiproxy), see bench/wan.go")
	fs.StringVar(&w.proxyBin, "wan-bin", "", "--wan: the wanproxy binary (default: built from e2e/wanproxy into the temporary directory)")
	fs.StringVar(&w.argsFlag, "wan-args", "", "--wan: extra serve flags for every node, space-separated (e.g. \"--wan\")")
	fs.DurationVar(&w.partition, "wan-duration", 0, "--wan: how long e-ap stays partitioned from us and eu while writes flow, in the catch-up measurement (default 20s, 5s with --wan-quick)")
	fs.DurationVar(&w.soak, "wan-soak", 0, "--wan: run the jitter soak (jitter 0.20, light writes from every region) for this long; 0: no soak")
	fs.Float64Var(&w.jitter, "wan-jitter", -1, "--wan: jitter of the simulated links, a fraction of each one-way latency (default: the profile's, 0.10)")
	fs.IntVar(&w.samples, "wan-samples", 0, fmt.Sprintf("--wan: sequential samples per region of each latency measurement (default %d, %d with --wan-quick)", wanDefaultSamples, wanQuickSamples))
	fs.BoolVar(&w.quick, "wan-quick", false, "--wan: smoke profile: fewer samples and a shorter partition")
	fs.StringVar(&w.measureFlag, "wan-measure", "", "--wan: the measurements to run, comma-separated numbers 1..10 (default all; 10 needs --wan-soak)")
}

// finish validates the flags and fills the defaults.
func (w *wanOptions) finish() error {
	w.args = strings.Fields(w.argsFlag)
	if !w.enabled {
		if w.argsFlag != "" || w.proxyBin != "" || w.soak != 0 || w.partition != 0 || w.samples != 0 || w.quick || w.measureFlag != "" || w.jitter != -1 {
			return errors.New("the --wan-* flags need --wan")
		}
		return nil
	}
	if w.samples == 0 {
		w.samples = wanDefaultSamples
		if w.quick {
			w.samples = wanQuickSamples
		}
	}
	if w.partition == 0 {
		w.partition = 20 * time.Second
		if w.quick {
			w.partition = 5 * time.Second
		}
	}
	switch {
	case w.samples < 1 || w.samples > 100000:
		return errors.New("--wan-samples must be from 1 to 100000")
	case w.partition < time.Second:
		return errors.New("--wan-duration must be at least 1s")
	case w.soak < 0:
		return errors.New("--wan-soak must not be negative")
	case w.jitter != -1 && (w.jitter < 0 || w.jitter >= 1):
		return errors.New("--wan-jitter must be in [0, 1)")
	}
	m, err := parseMeasures(w.measureFlag)
	if err != nil {
		return err
	}
	w.measure = m
	return nil
}

// parseMeasures reads --wan-measure: "" is every measurement.
func parseMeasures(s string) (map[int]bool, error) {
	m := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 10 {
			return nil, fmt.Errorf("--wan-measure: %q is not a measurement number from 1 to 10", f)
		}
		m[n] = true
	}
	return m, nil
}

// wants reports whether measurement n runs.
func (w *wanOptions) wants(n int) bool {
	if n == 10 && w.soak <= 0 {
		return false
	}
	return len(w.measure) == 0 || w.measure[n]
}

// profile is the simulated network of the run.
func (w *wanOptions) profile() wan.Profile {
	p := wan.DefaultProfile()
	if w.jitter >= 0 {
		p.Jitter = w.jitter
	}
	return p
}

// runWAN runs the WAN measurements and prints their table and JSON lines.
func runWAN(ctx context.Context, o *options, root string, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	started := time.Now()
	tmp, err := os.MkdirTemp("", "edgebase-bench-wan-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	if o.keep {
		logf("keeping %s", tmp)
	} else {
		defer func() { _ = os.RemoveAll(tmp) }()
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(tmp, "edgebase")
		t := time.Now()
		if err := buildBinary(ctx, root, bin); err != nil {
			logf("%v", err)
			return 1
		}
		logf("built %s in %v", bin, time.Since(t).Round(time.Millisecond))
	}
	proxy := o.wan.proxyBin
	if proxy == "" {
		proxy = filepath.Join(tmp, "wanproxy")
		t := time.Now()
		if err := buildWANProxy(ctx, root, proxy); err != nil {
			logf("%v", err)
			return 1
		}
		logf("built %s in %v", proxy, time.Since(t).Round(time.Millisecond))
	}
	rep := &wanReport{
		Command: "go run ./bench" + quoteArgs(os.Args[1:]),
		Started: started.UTC().Format(time.RFC3339),
		Profile: o.wan.profile(),
		Args:    o.wan.args,
		Samples: o.wan.samples,
	}
	rows, err := measureWAN(ctx, o, bin, proxy, tmp, rep, logf)
	rep.Rows = rows
	rep.LinksSimulated = o.wan.linksSimulated
	rep.Seconds = round(time.Since(started).Seconds(), 1)
	if err != nil {
		rep.Failed = err.Error()
	}
	writeWANReport(stdout, rep)
	if err != nil {
		logf("--wan: %v", err)
		return 1
	}
	for _, r := range rows {
		if r.Failed != "" {
			return 1
		}
	}
	return 0
}

// buildWANProxy builds e2e/wanproxy (a module of its own: toxiproxy's
// dependencies stay out of edgebase's go.mod) to out.
func buildWANProxy(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "e2e", "wanproxy"), "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build e2e/wanproxy: %w\n%s", err, b)
	}
	return nil
}

// newWANHTTPClient keeps a few idle connections per node URL, so that
// sequential requests reuse theirs and measure the round trips of the
// request, not of a TCP handshake.
func newWANHTTPClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 16
	tr.Proxy = nil
	return &http.Client{Transport: tr, Timeout: timeout}
}
