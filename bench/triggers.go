package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Trigger scenario (TRG, issue 22). Each run (the warm-up too) starts a
// webhook receiver on loopback (a real net/http server in the bench's
// process), declares a webhook trigger on a collection of its own with
// PUT /api/triggers/{name} (the owner's token, a secret the bench chose),
// waits until a probe document's event arrives (the leader's runner has
// picked the trigger up), then runs three phases of distinct documents
// written through the leader (see runTriggers): as fast as --clients
// clients go (the row), paced at the target's rate, and a backlog. The
// receiver checks every delivery as a real one would (Edgebase-Signature:
// HMAC-SHA256 over "<t>.<body>", the timestamp within 5 minutes; the headers
// against the payload) and records its arrival. A phase ends when every
// write's event has arrived (or --run-timeout); the run deletes the trigger.
//
// The row's ops are first deliveries of the live phase's writes; ops/s is
// webhooks per second from the first to the last; a latency is the arrival
// minus the payload's time (the commit's time, stamped by the leader on the
// same machine's clock). A write whose event never arrives, a delivery that
// fails the checks, carries the wrong revision or names a path nobody wrote
// are errors; duplicates (at-least-once) are counted apart.

const (
	// trgTolerance is how far a signature's timestamp may be from the
	// receiver's clock: what the docs tell receivers to enforce.
	trgTolerance = 5 * time.Minute
	// trgMaxBody bounds a delivery's body (a document is at most 1 MiB).
	trgMaxBody = 2 << 20
	// trgProbeWait bounds the wait for the probe's event: the runner
	// noticing a new trigger.
	trgProbeWait = 30 * time.Second
	// trgPoll is how often the run looks at the receiver's progress.
	trgPoll = 10 * time.Millisecond
	// trgWebhooksTarget and trgP99Target are issue 22's targets.
	trgWebhooksTarget = 2000
	trgP99Target      = 50 * time.Millisecond
)

// trgPayload is what the receiver reads of a delivery's body (the documented
// payload; the bench speaks only the public API).
type trgPayload struct {
	ID       string          `json:"id"`
	Trigger  string          `json:"trigger"`
	Project  string          `json:"project"`
	Revision uint64          `json:"revision"`
	Path     string          `json:"path"`
	Type     string          `json:"type"`
	After    json.RawMessage `json:"after"`
	Time     string          `json:"time"`
}

// trgArrival is the first delivery of one path.
type trgArrival struct {
	rev     uint64
	typ     string
	at      time.Time     // arrival at the receiver
	latency time.Duration // at minus the payload's time
	count   int           // deliveries of this path and revision (1 + duplicates)
	// otherRevs: deliveries of this path with another revision.
	otherRevs int
}

// trgReceiver is one run's webhook receiver.
type trgReceiver struct {
	secret   []byte
	trigger  string
	now      func() time.Time
	endpoint string // the URL it serves (startTrgReceiver)

	mu       sync.Mutex
	arrivals map[string]*trgArrival // by path
	bad      map[string]int         // refused deliveries by reason
	received atomic.Int64           // distinct paths with a delivery
}

func newTrgReceiver(secret, trigger string, now func() time.Time) *trgReceiver {
	return &trgReceiver{secret: []byte(secret), trigger: trigger, now: now,
		arrivals: map[string]*trgArrival{}, bad: map[string]int{}}
}

func (rc *trgReceiver) refuse(w http.ResponseWriter, status int, reason string) {
	rc.mu.Lock()
	rc.bad["webhook "+reason]++
	rc.mu.Unlock()
	http.Error(w, reason, status)
}

// ServeHTTP checks and records one delivery. A refused delivery answers 4xx,
// which the runner does not retry: its event then goes missing as well.
func (rc *trgReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := rc.now()
	if r.Method != http.MethodPost {
		rc.refuse(w, http.StatusMethodNotAllowed, "method "+r.Method)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, trgMaxBody+1))
	if err != nil || len(body) > trgMaxBody {
		rc.refuse(w, http.StatusBadRequest, "body unreadable or too large")
		return
	}
	if err := verifyTrgSignature(rc.secret, r.Header.Get("Edgebase-Signature"), body, at, trgTolerance); err != nil {
		rc.refuse(w, http.StatusUnauthorized, "bad signature ("+err.Error()+")")
		return
	}
	var p trgPayload
	if err := json.Unmarshal(body, &p); err != nil {
		rc.refuse(w, http.StatusBadRequest, "payload is not JSON")
		return
	}
	committed, err := time.Parse(time.RFC3339Nano, p.Time)
	switch {
	case err != nil:
		rc.refuse(w, http.StatusBadRequest, "payload time is not RFC 3339")
		return
	case p.Trigger != rc.trigger || r.Header.Get("Edgebase-Trigger") != rc.trigger:
		rc.refuse(w, http.StatusBadRequest, "for another trigger")
		return
	case p.ID == "" || r.Header.Get("Idempotency-Key") != p.ID:
		rc.refuse(w, http.StatusBadRequest, "Idempotency-Key is not the payload's id")
		return
	case r.Header.Get("Edgebase-Revision") != strconv.FormatUint(p.Revision, 10):
		rc.refuse(w, http.StatusBadRequest, "Edgebase-Revision is not the payload's revision")
		return
	case p.Path == "" || p.Revision == 0:
		rc.refuse(w, http.StatusBadRequest, "payload without path or revision")
		return
	}
	rc.record(p.Path, p.Revision, p.Type, at, at.Sub(committed))
	w.WriteHeader(http.StatusNoContent)
}

// record notes a checked delivery.
func (rc *trgReceiver) record(path string, rev uint64, typ string, at time.Time, latency time.Duration) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	a := rc.arrivals[path]
	switch {
	case a == nil:
		rc.arrivals[path] = &trgArrival{rev: rev, typ: typ, at: at, latency: latency, count: 1}
		rc.received.Add(1)
	case a.rev == rev:
		a.count++
	default:
		a.otherRevs++
	}
}

// verifyTrgSignature checks an Edgebase-Signature header
// ("t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>", Stripe's
// scheme; more than one v1 may be given, e.g. during a secret's rotation) as
// a receiver should: one v1 must match and t must be within tolerance of now.
func verifyTrgSignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if ts != "" {
				return errors.New("t twice")
			}
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return errors.New("no t or v1")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("t is not a number")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp outside tolerance")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("no v1 matches")
}

// trgPhase is what one phase of a run saw (the JSON's
// triggers.runs[].live, .paced, .backlog).
type trgPhase struct {
	// Writes committed (answered with X-Revision) and their rate, from the
	// first write sent to the last answered; WriteP50Ms and WriteP99Ms are
	// their round trips (POST to answer): the commit's share of the
	// commit-to-webhook latency.
	Writes       int     `json:"writes"`
	WritesPerSec float64 `json:"writesPerSec"`
	WriteP50Ms   float64 `json:"writeP50Ms"`
	WriteP99Ms   float64 `json:"writeP99Ms"`
	// Delivered: writes whose event arrived; WebhooksPerSec = Delivered
	// over Seconds, from the first arrival to the last.
	Delivered      int     `json:"delivered"`
	Seconds        float64 `json:"seconds"`
	WebhooksPerSec float64 `json:"webhooksPerSec"`
	// TailMs: from the last write's answer to the last arrival (what the
	// runner still had to do when the writes stopped; 0: nothing).
	TailMs float64 `json:"tailMs"`
	// EnableToLastMs (backlog): from the enabling PUT to the last arrival.
	EnableToLastMs float64 `json:"enableToLastMs,omitempty"`
	// P50Ms, P99Ms, MaxMs: commit-to-webhook latency (meaningless in the
	// backlog phase, whose events wait for the enabling PUT).
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// Duplicates: deliveries beyond the first of one event. Missing: writes
	// whose event never arrived. WrongRevision: deliveries of a written path
	// with a revision other than the write's. Stray: deliveries of a path
	// the phase did not write. Refused: deliveries that failed the
	// receiver's checks (signature, headers, payload).
	Duplicates    int `json:"duplicates"`
	Missing       int `json:"missing"`
	WrongRevision int `json:"wrongRevision"`
	Stray         int `json:"stray"`
	Refused       int `json:"refused"`
}

// clean: every event of the phase arrived, and only those.
func (p *trgPhase) clean() bool {
	return p.Missing == 0 && p.Refused == 0 && p.WrongRevision == 0 && p.Stray == 0
}

// trgRunResult is one run: its three phases (see runTriggers).
type trgRunResult struct {
	Live    trgPhase `json:"live"`
	Paced   trgPhase `json:"paced"`
	Backlog trgPhase `json:"backlog"`
	// ProbeMs: from the trigger's creation to its probe event's arrival.
	ProbeMs float64 `json:"probeMs"`
	// OtherCPUSeconds: the machine's busy CPU time during the run not
	// spent by the nodes or the bench (other processes competing); -1:
	// unknown.
	OtherCPUSeconds float64 `json:"otherCpuSeconds"`
}

// trgCPU is a snapshot of the machine's busy CPU time and of the part the
// bench and the nodes spent.
type trgCPU struct{ machine, ours float64 }

func trgCPUNow(e *env) (trgCPU, bool) {
	m, err := systemCPU()
	if err != nil {
		return trgCPU{}, false
	}
	self, err := cpuSeconds(0)
	if err != nil {
		return trgCPU{}, false
	}
	c := trgCPU{machine: m, ours: self.total()}
	for _, n := range e.c.nodes {
		pid := n.pid()
		if pid <= 0 {
			return trgCPU{}, false
		}
		t, err := cpuSeconds(pid)
		if err != nil {
			return trgCPU{}, false
		}
		c.ours += t.total()
	}
	return c, true
}

// trgResult is TRG's own figures (the JSON's "triggers").
type trgResult struct {
	// WebhooksPerSec is the median run's live phase (the row's ops/s); the
	// row's latencies are the live phases'.
	WebhooksPerSec float64 `json:"webhooksPerSec"`
	P99Ms          float64 `json:"p99Ms"`
	// PacedRate is the paced phase's write rate (the target); its median
	// webhooks/s and its latencies over all runs.
	PacedRate           float64 `json:"pacedRate"`
	PacedWebhooksPerSec float64 `json:"pacedWebhooksPerSec"`
	PacedP50Ms          float64 `json:"pacedP50Ms"`
	PacedP99Ms          float64 `json:"pacedP99Ms"`
	// BacklogWebhooksPerSec is the median run's backlog phase.
	BacklogWebhooksPerSec float64 `json:"backlogWebhooksPerSec"`
	// TargetsMet: at the paced phase's trgWebhooksTarget writes a second the
	// webhooks kept pace (median) with a p99 under trgP99Target, and no
	// event of any phase went missing or was refused.
	TargetsMet bool           `json:"targetsMet"`
	Runs       []trgRunResult `json:"runs"`
}

// trgState is one cluster's TRG history.
type trgState struct {
	mu    sync.Mutex
	seq   int // runs started (names the trigger and its collection)
	runs  []trgRunResult
	paced []*histogram // each run's paced-phase latencies
}

// trgStateOf is e's TRG state, made on first use (scenarios run one at a
// time).
func trgStateOf(e *env) *trgState {
	if e.trg == nil {
		e.trg = &trgState{}
	}
	return e.trg
}

// tally compares what arrived with what was written: expected maps each
// committed write's path to its revision; attempted holds every path the
// run tried to write (a write whose answer was lost may still have
// committed, so its event is not stray). kinds gets the errors.
func (rc *trgReceiver) tally(expected map[string]uint64, attempted map[string]bool, kinds map[string]int) (trgPhase, *histogram, time.Time, time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var res trgPhase
	h := &histogram{samples: make([]time.Duration, 0, len(expected))}
	var first, last time.Time
	for path, rev := range expected {
		a := rc.arrivals[path]
		switch {
		case a == nil:
			res.Missing++
			continue
		case a.rev != rev:
			res.WrongRevision += a.count
			continue
		}
		res.Delivered++
		h.add(a.latency)
		if first.IsZero() || a.at.Before(first) {
			first = a.at
		}
		if a.at.After(last) {
			last = a.at
		}
	}
	for path, a := range rc.arrivals {
		res.Duplicates += a.count - 1
		res.WrongRevision += a.otherRevs
		if _, ok := expected[path]; !ok && !attempted[path] {
			res.Stray += a.count
		}
	}
	for k, v := range rc.bad {
		kinds[k] += v
		res.Refused += v
	}
	if res.Missing > 0 {
		kinds["webhook missing (a committed write's event never arrived)"] += res.Missing
	}
	if res.WrongRevision > 0 {
		kinds["webhook with another revision than the write's"] += res.WrongRevision
	}
	if res.Stray > 0 {
		kinds["webhook for a path the run did not write"] += res.Stray
	}
	res.Seconds = last.Sub(first).Seconds()
	res.WebhooksPerSec = round(throughput(res.Delivered, last.Sub(first)), 1)
	res.P50Ms, res.P99Ms, res.MaxMs = ms(h.percentile(50)), ms(h.percentile(99)), ms(h.max())
	return res, h, first, last
}

// has reports whether path's event arrived.
func (rc *trgReceiver) has(path string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.arrivals[path] != nil
}

// startTrgReceiver serves rc on a fresh loopback port (rc.endpoint); stop
// closes it.
func startTrgReceiver(rc *trgReceiver) (endpoint string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("receiver listen: %w", err)
	}
	rc.endpoint = "http://" + ln.Addr().String() + "/hook"
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return rc.endpoint, func() {
		_ = srv.Close()
		<-done
	}, nil
}

// trgDefinition is the PUT body of the run's trigger.
func trgDefinition(coll, endpoint, secret string, disabled bool) map[string]any {
	return map[string]any{
		"match":    coll + "/{id}",
		"on":       []string{"create"},
		"disabled": disabled,
		"action": map[string]any{"webhook": map[string]any{
			"url": endpoint, "secret": secret,
		}},
	}
}

// putTrigger declares the run's trigger; it answers the secret the
// deliveries are signed with (the bench's own, echoed once).
func putTrigger(ctx context.Context, e *env, name string, def map[string]any, secret string) (string, error) {
	r, err := call(ctx, e.hc, http.MethodPut, e.c.leader.url+"/api/triggers/"+url.PathEscape(name),
		trgHeaders(e), def)
	if err != nil {
		return "", fmt.Errorf("PUT trigger %s: %w", name, err)
	}
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		return "", fmt.Errorf("PUT trigger %s: %s", name, r)
	}
	var ans struct {
		Action struct {
			Webhook struct {
				Secret string `json:"secret"`
			} `json:"webhook"`
		} `json:"action"`
	}
	if err := json.Unmarshal(r.body, &ans); err != nil {
		return "", fmt.Errorf("PUT trigger %s: answer %s: %w", name, r, err)
	}
	if s := ans.Action.Webhook.Secret; s != "" && s != secret {
		return "", fmt.Errorf("PUT trigger %s: answered secret differs from the one sent", name)
	}
	return secret, nil
}

// trgHeaders are the owner API's headers: the project, its key, the owner.
func trgHeaders(e *env) map[string]string {
	return map[string]string{"X-Project-Id": e.pr.ID, "X-API-Key": e.pr.APIKey, "Authorization": "Bearer " + e.pr.Token}
}

func deleteTrigger(ctx context.Context, e *env, name string) error {
	r, err := call(ctx, e.hc, http.MethodDelete, e.c.leader.url+"/api/triggers/"+url.PathEscape(name),
		trgHeaders(e), nil)
	if err != nil {
		return fmt.Errorf("DELETE trigger %s: %w", name, err)
	}
	if r.status != http.StatusOK {
		return fmt.Errorf("DELETE trigger %s: %s", name, r)
	}
	return nil
}

// trgPhaseSetup starts a receiver for a phase and points the trigger at it
// (disabled or not); stop closes the receiver.
func trgPhaseSetup(ctx context.Context, e *env, name, coll, secret string, disabled bool) (rc *trgReceiver, stop func(), err error) {
	rc = newTrgReceiver(secret, name, time.Now)
	endpoint, stop, err := startTrgReceiver(rc)
	if err != nil {
		return nil, nil, err
	}
	if _, err := putTrigger(ctx, e, name, trgDefinition(coll, endpoint, secret, disabled), secret); err != nil {
		stop()
		return nil, nil, err
	}
	return rc, stop, nil
}

// trgProbe writes path and waits for its event at rc: the runner delivers
// to rc from then on.
func trgProbe(ctx context.Context, e *env, rc *trgReceiver, path string) error {
	if _, err := e.post(ctx, e.c.leader, path); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, trgProbeWait)
	defer cancel()
	if err := pollUntil(pctx, func() bool { return rc.has(path) }); err != nil {
		return fmt.Errorf("the probe's webhook did not arrive within %v", trgProbeWait)
	}
	return nil
}

// trgMeasure writes ops documents <prefix><i> (rate: writes a second, 0:
// as fast as they go), waits for their events at rc (or ctx's end), and
// tallies the phase. extra are paths of the phase not written here (its
// probe).
func trgMeasure(ctx context.Context, e *env, rc *trgReceiver, prefix string, ops int, rate float64, extra []string, kinds map[string]int) (trgPhase, *histogram, time.Time) {
	w := trgWrite(ctx, e, prefix, ops, rate, kinds)
	return trgAwait(ctx, rc, w, extra, kinds)
}

// trgAwait waits for every committed write's event at rc (or ctx's end)
// and tallies the phase; last is the last arrival.
func trgAwait(ctx context.Context, rc *trgReceiver, w *trgWrites, extra []string, kinds map[string]int) (trgPhase, *histogram, time.Time) {
	for _, p := range extra {
		w.attempted[p] = true
	}
	want := int64(len(w.expected) + len(extra))
	_ = pollUntil(ctx, func() bool { return rc.received.Load() >= want })
	res, h, _, last := rc.tally(w.expected, w.attempted, kinds)
	res.Writes = len(w.expected)
	res.WritesPerSec = round(throughput(len(w.expected), w.last.Sub(w.start)), 1)
	res.WriteP50Ms, res.WriteP99Ms = ms(w.latency.percentile(50)), ms(w.latency.percentile(99))
	if !last.IsZero() && last.After(w.last) {
		res.TailMs = ms(last.Sub(w.last))
	}
	return res, h, last
}

// runTriggers is one TRG run of three phases, each with a receiver of its
// own (the trigger re-pointed with a PUT), ops writes each:
//   - live: --clients clients write as fast as they go (the row);
//   - paced: the same clients write at trgWebhooksTarget a second, the
//     target's rate, so the latency is not the write path's queueing;
//   - backlog: the trigger is disabled, the documents written, the trigger
//     enabled: the runner reads the events from the change log and
//     delivers them with no writes competing, the rate one leader sustains.
func runTriggers(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	st := trgStateOf(e)
	st.mu.Lock()
	st.seq++
	k := st.seq
	st.mu.Unlock()
	name, coll := fmt.Sprintf("bench-trg-%d", k), fmt.Sprintf("trg%d", k)
	secret := "whsec_bench_" + randomHex(24)
	kinds := map[string]int{}
	fail := func(err error) (runResult, *histogram, map[string]int, map[string]int) {
		kinds["setup: "+err.Error()]++
		return runResult{Errors: 1}, &histogram{}, kinds, nil
	}
	rctx, cancel := context.WithTimeout(ctx, e.o.runTimeout)
	defer cancel()
	res := trgRunResult{OtherCPUSeconds: -1}
	cpu0, cpuOK := trgCPUNow(e)

	created := time.Now()
	rc, stop, err := trgPhaseSetup(rctx, e, name, coll, secret, false)
	if err != nil {
		return fail(err)
	}
	defer stop()
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		if err := deleteTrigger(dctx, e, name); err != nil && e.log != nil {
			e.log("bench: TRG: %v", err)
		}
	}()
	if err := trgProbe(rctx, e, rc, coll+"/probe"); err != nil {
		return fail(err)
	}
	res.ProbeMs = ms(time.Since(created))
	live, h, _ := trgMeasure(rctx, e, rc, coll+"/d", ops, 0, []string{coll + "/probe"}, kinds)
	res.Live = live
	rr := runResult{Ops: live.Delivered, WallSeconds: round(live.Seconds, 3), OpsPerSec: live.WebhooksPerSec,
		Writes: live.Writes, WritesPerSec: live.WritesPerSec}

	paced := &histogram{}
	if rctx.Err() == nil {
		var stopPaced func()
		res.Paced, paced, stopPaced = trgPaced(rctx, e, name, coll, secret, ops, kinds)
		// Its receiver outlives the phase, so that a late copy is not
		// retried into the next phase's receiver.
		defer stopPaced()
	}
	if rctx.Err() == nil {
		res.Backlog = trgBacklog(rctx, e, name, coll, secret, ops, kinds)
	}
	if cpu1, ok := trgCPUNow(e); ok && cpuOK {
		res.OtherCPUSeconds = round(max((cpu1.machine-cpu0.machine)-(cpu1.ours-cpu0.ours), 0), 2)
	}
	rr.TimedOut = rctx.Err() != nil && ctx.Err() == nil
	for _, v := range kinds {
		rr.Errors += v
	}
	st.mu.Lock()
	st.runs = append(st.runs, res)
	st.paced = append(st.paced, paced)
	st.mu.Unlock()
	if e.log != nil {
		e.log("bench: [%d nodes] %s: %s", len(e.c.nodes), s.Name, res.String())
	}
	return rr, h, kinds, nil
}

// trgPaced is a run's paced phase; its errors go to kinds. stop closes its
// receiver.
func trgPaced(ctx context.Context, e *env, name, coll, secret string, ops int, kinds map[string]int) (trgPhase, *histogram, func()) {
	rc, stop, err := trgPhaseSetup(ctx, e, name, coll, secret, false)
	if err != nil {
		kinds["paced: "+err.Error()]++
		return trgPhase{}, &histogram{}, func() {}
	}
	probe := coll + "/probe-paced"
	if err := trgProbe(ctx, e, rc, probe); err != nil {
		kinds["paced: "+err.Error()]++
		return trgPhase{}, &histogram{}, stop
	}
	p, h, _ := trgMeasure(ctx, e, rc, coll+"/p", ops, trgWebhooksTarget, []string{probe}, kinds)
	return p, h, stop
}

// trgBacklog is a run's backlog phase; its errors go to kinds.
func trgBacklog(ctx context.Context, e *env, name, coll, secret string, ops int, kinds map[string]int) trgPhase {
	rc, stop, err := trgPhaseSetup(ctx, e, name, coll, secret, true)
	if err != nil {
		kinds["backlog: disable: "+err.Error()]++
		return trgPhase{}
	}
	defer stop()
	w := trgWrite(ctx, e, coll+"/b", ops, 0, kinds)
	enabled := time.Now()
	if _, err := putTrigger(ctx, e, name, trgDefinition(coll, rc.endpoint, secret, false), secret); err != nil {
		kinds["backlog: enable: "+err.Error()]++
		return trgPhase{}
	}
	b, _, last := trgAwait(ctx, rc, w, nil, kinds)
	b.TailMs = 0 // the writes ended before the trigger was enabled
	if !last.IsZero() {
		b.EnableToLastMs = ms(last.Sub(enabled))
	}
	return b
}

// String is a run's progress line.
func (x trgRunResult) String() string {
	return fmt.Sprintf("live: %d writes at %.0f/s (p50 %s p99 %s), %d webhooks at %.0f/s, tail %s, p50 %s p99 %s max %s; "+
		"paced: %d writes at %.0f/s, %d webhooks at %.0f/s, p50 %s p99 %s max %s; "+
		"backlog: %d of %d at %.0f/s, last %s after enabling; probe %s; %d duplicates, %d missing, %d refused; other processes' CPU %.2f s",
		x.Live.Writes, x.Live.WritesPerSec, fmtMs(x.Live.WriteP50Ms), fmtMs(x.Live.WriteP99Ms), x.Live.Delivered, x.Live.WebhooksPerSec,
		fmtMs(x.Live.TailMs), fmtMs(x.Live.P50Ms), fmtMs(x.Live.P99Ms), fmtMs(x.Live.MaxMs),
		x.Paced.Writes, x.Paced.WritesPerSec, x.Paced.Delivered, x.Paced.WebhooksPerSec, fmtMs(x.Paced.P50Ms), fmtMs(x.Paced.P99Ms), fmtMs(x.Paced.MaxMs),
		x.Backlog.Delivered, x.Backlog.Writes, x.Backlog.WebhooksPerSec, fmtMs(x.Backlog.EnableToLastMs), fmtMs(x.ProbeMs),
		x.Live.Duplicates+x.Paced.Duplicates+x.Backlog.Duplicates, x.Live.Missing+x.Paced.Missing+x.Backlog.Missing,
		x.Live.Refused+x.Paced.Refused+x.Backlog.Refused, x.OtherCPUSeconds)
}

// trgWrites is what a phase's writes did.
type trgWrites struct {
	expected    map[string]uint64 // each committed write's revision, by path
	attempted   map[string]bool   // every path tried
	start, last time.Time         // the first write sent, the last answered
	latency     histogram         // each committed write's round trip
}

// trgWrite creates ops documents <prefix><i> through the leader with
// --clients clients, write i not before rate says (rate 0: as fast as they
// go); failed writes count in kinds.
func trgWrite(ctx context.Context, e *env, prefix string, ops int, rate float64, kinds map[string]int) *trgWrites {
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(time.Second) / rate)
	}
	clients := min(e.o.clients, max(ops, 1))
	type out struct {
		revs  map[string]uint64
		tried []string
		kinds map[string]int
		last  time.Time
		lat   histogram
	}
	outs := make([]out, clients)
	var next atomic.Int64
	var wg sync.WaitGroup
	w := &trgWrites{expected: map[string]uint64{}, attempted: map[string]bool{}, start: time.Now()}
	for c := range clients {
		outs[c] = out{revs: map[string]uint64{}, kinds: map[string]int{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[c]
			for {
				i := next.Add(1) - 1
				if i >= int64(ops) || ctx.Err() != nil {
					return
				}
				if every > 0 {
					if d := time.Until(w.start.Add(time.Duration(i) * every)); d > 0 {
						t := time.NewTimer(d)
						select {
						case <-ctx.Done():
							t.Stop()
							return
						case <-t.C:
						}
					}
				}
				path := prefix + strconv.FormatInt(i, 10)
				o.tried = append(o.tried, path)
				t0 := time.Now()
				rev, err := e.post(ctx, e.c.leader, path)
				switch {
				case err == nil:
					o.revs[path] = rev
					o.last = time.Now()
					o.lat.add(o.last.Sub(t0))
				case ctx.Err() != nil:
					// cut by the run's deadline: not a result
				default:
					o.kinds[err.Error()]++
				}
			}
		}()
	}
	wg.Wait()
	for i := range outs {
		o := &outs[i]
		for p, r := range o.revs {
			w.expected[p] = r
		}
		for _, p := range o.tried {
			w.attempted[p] = true
		}
		for k, v := range o.kinds {
			kinds[k] += v
		}
		if o.last.After(w.last) {
			w.last = o.last
		}
		w.latency.merge(&o.lat)
	}
	return w
}

// pollUntil calls done every trgPoll until it is true or ctx ends.
func pollUntil(ctx context.Context, done func() bool) error {
	t := time.NewTicker(trgPoll)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// summarizeTriggers adds TRG's own figures (the measured runs: the last
// len(r.Runs) of the cluster's) and the targets' verdict.
func summarizeTriggers(e *env, s *scenario, r *result) {
	st := trgStateOf(e)
	st.mu.Lock()
	from := max(len(st.runs)-len(r.Runs), 0)
	runs := slices.Clone(st.runs[from:])
	var paced histogram
	for _, h := range st.paced[min(from, len(st.paced)):] {
		paced.merge(h)
	}
	st.mu.Unlock()
	tr := summarizeTrgRuns(runs, r.P99Ms, &paced)
	var dups, missing, refused int
	for _, x := range runs {
		for _, p := range []trgPhase{x.Live, x.Paced, x.Backlog} {
			dups += p.Duplicates
			missing += p.Missing
			refused += p.Refused
		}
	}
	verdict := "missed"
	if tr.TargetsMet {
		verdict = "met"
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("targets (>= %d webhooks/s, p99 < %v) %s: at %.0f writes/s (paced) %.0f webhooks/s, p50 %s p99 %s; writing flat out %.0f webhooks/s, p99 %s; draining a backlog %.0f webhooks/s; %d duplicates, %d missing, %d refused by the receiver over %d runs (all phases)",
			trgWebhooksTarget, trgP99Target, verdict, tr.PacedRate, tr.PacedWebhooksPerSec, fmtMs(tr.PacedP50Ms), fmtMs(tr.PacedP99Ms),
			tr.WebhooksPerSec, fmtMs(tr.P99Ms), tr.BacklogWebhooksPerSec, dups, missing, refused, len(runs)))
	r.Triggers = tr
	for i, x := range runs {
		r.Notes = append(r.Notes, fmt.Sprintf("run %d: %s", i+1, x))
	}
}

// summarizeTrgRuns is TRG's result over runs: p99Ms is the live phases'
// over all runs, paced the paced phases' latencies.
func summarizeTrgRuns(runs []trgRunResult, p99Ms float64, paced *histogram) *trgResult {
	tr := &trgResult{Runs: runs, P99Ms: p99Ms, PacedRate: trgWebhooksTarget,
		PacedP50Ms: ms(paced.percentile(50)), PacedP99Ms: ms(paced.percentile(99))}
	var live, pacedRates, backlog []float64
	clean := len(runs) > 0
	for _, x := range runs {
		live = append(live, x.Live.WebhooksPerSec)
		pacedRates = append(pacedRates, x.Paced.WebhooksPerSec)
		backlog = append(backlog, x.Backlog.WebhooksPerSec)
		clean = clean && x.Live.clean() && x.Paced.clean() && x.Backlog.clean()
	}
	tr.WebhooksPerSec, tr.PacedWebhooksPerSec, tr.BacklogWebhooksPerSec = median(live), median(pacedRates), median(backlog)
	// Paced at the target, first-to-last arrival is a hair over the target
	// when the webhooks keep pace: 1% is left for the clock's grain.
	tr.TargetsMet = clean && tr.PacedWebhooksPerSec >= 0.99*trgWebhooksTarget &&
		paced.count() > 0 && paced.percentile(99) < trgP99Target
	return tr
}
