package triggers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/hookcheck"
	"github.com/edgebase/edgebase/internal/storetest"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/triggers"
)

// wait bounds how long an expected delivery may take.
const wait = 20 * time.Second

const pid = "p1"

const testSecret = "whsec_test_secret_0123456789"

func checkFor(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mustOpenStore opens a single-voter store (service_test.go uses it too).
func mustOpenStore(t *testing.T) *raftstore.Store {
	t.Helper()
	return mustOpenStoreKeeping(t, 0)
}

// mustOpenStoreKeeping opens a store whose change log keeps retention (0:
// the default).
func mustOpenStoreKeeping(t *testing.T, retention time.Duration) *raftstore.Store {
	t.Helper()
	return storetest.Open(t, raftstore.Config{ChangeLogRetention: retention})
}

// ---- the receiver ----------------------------------------------------------

// delivery is one request the receiver took.
type delivery struct {
	p       triggers.Payload
	attempt int
	status  int // what the receiver answered
}

// receiver is a real HTTP server that checks every delivery's signature
// and headers with its own code (not the runner's) and answers as script
// says (nil: 200).
type receiver struct {
	t      *testing.T
	secret string
	srv    *httptest.Server

	mu     sync.Mutex
	got    []delivery
	bad    []string // deliveries that failed the checks
	script func(d delivery) (status int, retryAfter string)
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{t: t, secret: secret}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var d delivery
	err := func() error {
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" ||
			req.Header.Get("User-Agent") != "edgebase-webhooks/1" {
			return fmt.Errorf("method %s, headers %v", req.Method, req.Header)
		}
		if err := hookcheck.VerifySignature(req.Header.Get("Edgebase-Signature"), body, r.secret, time.Now(), 5*time.Minute); err != nil {
			return err
		}
		if err := json.Unmarshal(body, &d.p); err != nil {
			return err
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return err
		}
		for _, k := range []string{"id", "trigger", "revision", "path", "type", "before", "after", "time"} {
			if _, ok := raw[k]; !ok {
				return fmt.Errorf("payload lacks %q: %s", k, body)
			}
		}
		wantKey := d.p.Trigger + ":" + strconv.FormatUint(d.p.Revision, 10) + ":" + url.PathEscape(d.p.Path)
		if k := req.Header.Get("Idempotency-Key"); k != d.p.ID || k != wantKey {
			return fmt.Errorf("Idempotency-Key %q, id %q, want %q", k, d.p.ID, wantKey)
		}
		if req.Header.Get("Edgebase-Trigger") != d.p.Trigger || req.Header.Get("Edgebase-Revision") != strconv.FormatUint(d.p.Revision, 10) {
			return fmt.Errorf("trigger/revision headers %v", req.Header)
		}
		var err error
		if d.attempt, err = strconv.Atoi(req.Header.Get("Edgebase-Attempt")); err != nil || d.attempt < 1 {
			return fmt.Errorf("Edgebase-Attempt %q", req.Header.Get("Edgebase-Attempt"))
		}
		return nil
	}()
	if err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, err.Error())
		r.mu.Unlock()
		r.t.Errorf("receiver: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	script := r.script
	r.mu.Unlock()
	d.status = http.StatusOK
	retryAfter := ""
	if script != nil {
		d.status, retryAfter = script(d) // outside r.mu: a script may hang
	}
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(d.status)
}

func (r *receiver) setScript(f func(d delivery) (int, string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = f
}

// deliveries is a copy of what was received.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// accepted is, per path, the revisions answered 2xx, in arrival order.
func (r *receiver) accepted() map[string][]uint64 { return r.acceptedBy("") }

// acceptedBy is accepted for one trigger ("": all).
func (r *receiver) acceptedBy(trigger string) map[string][]uint64 {
	out := map[string][]uint64{}
	for _, d := range r.deliveries() {
		if d.status < 300 && (trigger == "" || d.p.Trigger == trigger) {
			out[d.p.Path] = append(out[d.p.Path], d.p.Revision)
		}
	}
	return out
}

func (r *receiver) checkClean() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Fatalf("%d deliveries failed the receiver's checks, first: %s", len(r.bad), r.bad[0])
	}
}

// ---- the harness -----------------------------------------------------------

type harness struct {
	t     *testing.T
	store *raftstore.Store
	reg   *prometheus.Registry
	cfg   triggers.RunnerConfig
	stop  func()
}

func fastTuning() triggers.Tuning {
	return triggers.Tuning{InFlight: 8, Timeout: 2 * time.Second, MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, RetryFor: 10 * time.Second, Checkpoint: 20 * time.Millisecond, Poll: 200 * time.Millisecond}
}

func newHarness(t *testing.T, tu triggers.Tuning) *harness {
	t.Helper()
	return newHarnessOn(t, tu, mustOpenStore(t))
}

func newHarnessOn(t *testing.T, tu triggers.Tuning, store *raftstore.Store) *harness {
	t.Helper()
	h := &harness{t: t, store: store}
	var w io.Writer = io.Discard
	if os.Getenv("TRIGGERS_TEST_LOG") != "" {
		w = os.Stderr
	}
	h.cfg = triggers.RunnerConfig{Store: h.store, Feed: h.store.Feed(), Tuning: tu,
		Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	return h
}

// start runs a runner (a new one each time, as a new leader would).
func (h *harness) start() {
	h.t.Helper()
	h.reg = prometheus.NewRegistry()
	cfg := h.cfg
	cfg.Registerer = h.reg
	r, err := triggers.NewRunner(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	h.stop = func() { cancel(); <-done }
	h.t.Cleanup(func() { cancel(); <-done })
}

func (h *harness) txn(ops ...raftstore.Op) uint64 {
	h.t.Helper()
	res, err := h.store.Txn(context.Background(), &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil || !res.OK() {
		h.t.Fatalf("txn: %v %+v", err, res)
	}
	return res.Revision
}

// putDef stores a definition as the service does (with its index entry).
func (h *harness) putDef(name string, d triggers.Definition) uint64 {
	h.t.Helper()
	d.Name = name
	data, _ := json.Marshal(d)
	idx, _ := json.Marshal(map[string]string{"project": pid, "name": name})
	return h.txn(raftstore.Op{Kind: raftstore.OpPut, Path: keys.Trigger(pid, name), Data: data},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.TriggerIndex(pid, name), Data: idx})
}

func (h *harness) put(rel, data string) uint64 {
	h.t.Helper()
	return h.txn(raftstore.Op{Kind: raftstore.OpPut, Path: keys.Doc(pid, rel), Data: json.RawMessage(data)})
}

func (h *harness) del(rel string) uint64 {
	h.t.Helper()
	return h.txn(raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Doc(pid, rel)})
}

func (h *harness) list(dir string) []*raftstore.Document {
	h.t.Helper()
	docs, _, err := h.store.List(dir, "", 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return docs
}

func (h *harness) state(name string) triggers.State {
	h.t.Helper()
	var st triggers.State
	d, err := h.store.Get(keys.TriggerState(pid, name))
	if err != nil {
		h.t.Fatal(err)
	}
	if d != nil {
		if err := json.Unmarshal(d.Data, &st); err != nil {
			h.t.Fatal(err)
		}
	}
	return st
}

func (h *harness) counter(name, result string) float64 {
	h.t.Helper()
	return metricValue(h.t, h.reg, "edgebase_trigger_deliveries_total", map[string]string{"project": pid, "trigger": name, "result": result})
}

// metricValue is the value of the series of metric with labels (0: none).
func metricValue(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func webhookDef(match, url, secret string) triggers.Definition {
	return triggers.Definition{Match: match, Action: triggers.Action{Webhook: &triggers.Webhook{URL: url, Secret: secret}}}
}

// ---- tests -----------------------------------------------------------------

// TestWebhookDelivery: create, update and delete of a matching document
// each reach the receiver once, signed, with before and after, the type,
// the params and the commit time; other paths do not.
func TestWebhookDelivery(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	h.start()
	h.putDef("orders", webhookDef("orders/{id}", rcv.srv.URL+"/hook", testSecret))
	r1 := h.put("orders/o1", `{"n":1}`)
	h.put("users/u1", `{"n":1}`)
	r2 := h.put("orders/o1", `{"n":2}`)
	r3 := h.del("orders/o1")
	checkFor(t, wait, func() error {
		if n := len(rcv.deliveries()); n < 3 {
			return fmt.Errorf("%d deliveries, want 3", n)
		}
		return nil
	})
	rcv.checkClean()
	got := rcv.deliveries()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3: %+v", len(got), got)
	}
	want := []struct {
		rev           uint64
		typ           string
		before, after string
	}{{r1, "create", "null", `{"n":1}`}, {r2, "update", `{"n":1}`, `{"n":2}`}, {r3, "delete", `{"n":2}`, "null"}}
	for i, w := range want {
		p := got[i].p
		before, after := string(p.Before), string(p.After)
		if before == "" {
			before = "null"
		}
		if after == "" {
			after = "null"
		}
		if p.Revision != w.rev || p.Type != w.typ || before != w.before || after != w.after || p.Path != "orders/o1" ||
			p.Trigger != "orders" || p.Project != pid || p.Params["id"] != "o1" || got[i].attempt != 1 {
			t.Errorf("delivery %d: %+v (attempt %d), want rev %d %s %s -> %s", i, p, got[i].attempt, w.rev, w.typ, w.before, w.after)
		}
		if tm, err := time.Parse(time.RFC3339Nano, p.Time); err != nil || time.Since(tm) > time.Minute {
			t.Errorf("delivery %d: time %q", i, p.Time)
		}
	}
	checkFor(t, wait, func() error {
		if st := h.state("orders"); st.Cursor < r3 || st.Delivered != 3 {
			return fmt.Errorf("state %+v, want cursor >= %d and 3 delivered", st, r3)
		}
		return nil
	})
	if v := h.counter("orders", "ok"); v != 3 {
		t.Errorf("deliveries_total{ok} = %v, want 3", v)
	}
}

// TestOrderPerPath: many paths written at once, with a receiver that fails
// a share of first attempts: every change is delivered, and per path the
// accepted revisions are in order.
func TestOrderPerPath(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	var mu sync.Mutex
	calls := 0
	rcv.setScript(func(d delivery) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if d.attempt == 1 && calls%7 == 0 {
			// One second, capped at MaxBackoff (100 ms): later events of
			// the path queue (parked) behind it meanwhile.
			return http.StatusServiceUnavailable, "1"
		}
		return http.StatusOK, ""
	})
	h.start()
	h.putDef("all", webhookDef("items/{id}", rcv.srv.URL, testSecret))
	const paths, writes = 16, 25
	var wg sync.WaitGroup
	revs := make([][]uint64, paths)
	for p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				res, err := h.store.Txn(context.Background(), &raftstore.Txn{Time: time.Now().UnixNano(), Ops: []raftstore.Op{
					{Kind: raftstore.OpPut, Path: keys.Doc(pid, fmt.Sprintf("items/i%02d", p)), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}})
				if err != nil || !res.OK() {
					t.Errorf("write: %v", err)
					return
				}
				revs[p] = append(revs[p], res.Revision)
			}
		}()
	}
	wg.Wait()
	checkFor(t, wait, func() error {
		acc := rcv.accepted()
		for p := range paths {
			if got := len(acc[fmt.Sprintf("items/i%02d", p)]); got < writes {
				return fmt.Errorf("path %d: %d of %d accepted", p, got, writes)
			}
		}
		return nil
	})
	rcv.checkClean()
	acc := rcv.accepted()
	for p := range paths {
		path := fmt.Sprintf("items/i%02d", p)
		got := acc[path]
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("%s: accepted out of order: %v", path, got)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(revs[p]) {
			t.Fatalf("%s: accepted %v, committed %v", path, got, revs[p])
		}
	}
	if len(h.list(keys.TriggerDeadDir(pid, "all"))) != 0 {
		t.Fatal("dead letters")
	}
	checkFor(t, wait, func() error {
		if n := len(h.list(keys.TriggerQueueDir(pid, "all"))); n != 0 {
			return fmt.Errorf("%d parked events left", n)
		}
		return nil
	})
}

// TestRetryThenSuccess: 503 with Retry-After: 0 twice, then 200: three
// attempts, counted, and nothing left parked or dead.
func TestRetryThenSuccess(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	rcv.setScript(func(d delivery) (int, string) {
		if d.attempt < 3 {
			return http.StatusServiceUnavailable, "0"
		}
		return http.StatusOK, ""
	})
	h.start()
	h.putDef("retry", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	rev := h.put("docs/d1", `{"x":1}`)
	checkFor(t, wait, func() error {
		if acc := rcv.accepted()["docs/d1"]; len(acc) != 1 || acc[0] != rev {
			return fmt.Errorf("accepted %v", acc)
		}
		return nil
	})
	rcv.checkClean()
	var attempts []int
	for _, d := range rcv.deliveries() {
		attempts = append(attempts, d.attempt)
	}
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Fatalf("attempts %v, want [1 2 3]", attempts)
	}
	checkFor(t, wait, func() error {
		if n := len(h.list(keys.TriggerQueueDir(pid, "retry"))); n != 0 {
			return fmt.Errorf("%d parked", n)
		}
		if st := h.state("retry"); st.Delivered != 1 || st.Failed != 2 || st.Cursor < rev || st.LastError == "" {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	if ok, retry := h.counter("retry", "ok"), h.counter("retry", "retry"); ok != 1 || retry != 2 {
		t.Fatalf("deliveries ok=%v retry=%v, want 1 and 2", ok, retry)
	}
}

// TestDeadLetters: a receiver failing with 500 past RetryFor dead-letters
// the event and the path goes on with its next one; a 404 and a URL the
// host policy refuses are dead at once (one attempt).
func TestDeadLetters(t *testing.T) {
	tu := fastTuning()
	tu.RetryFor = 300 * time.Millisecond
	h := newHarness(t, tu)
	d := &net.Dialer{}
	h.cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "refused.test:") {
			return nil, fmt.Errorf("dial %s: %w", addr, auth.ErrHostNotAllowed)
		}
		return d.DialContext(ctx, network, addr)
	}
	rcv := newReceiver(t, testSecret)
	var firstRev atomic.Uint64
	rcv.setScript(func(d delivery) (int, string) {
		switch {
		case d.p.Path == "docs/gone":
			return http.StatusNotFound, ""
		case d.p.Path == "docs/moved":
			return http.StatusFound, "" // a redirect is not followed
		case d.p.Revision == firstRev.Load():
			return http.StatusInternalServerError, ""
		}
		return http.StatusOK, ""
	})
	h.start()
	h.putDef("dead", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	h.putDef("refused", webhookDef("other/{id}", "http://refused.test/hook", testSecret))
	r1 := h.put("docs/d1", `{"v":1}`)
	firstRev.Store(r1)
	r2 := h.put("docs/d1", `{"v":2}`)
	r3 := h.put("docs/gone", `{}`)
	r4 := h.put("other/o1", `{}`)
	r5 := h.put("docs/moved", `{}`)
	checkFor(t, wait, func() error {
		if acc := rcv.accepted()["docs/d1"]; len(acc) != 1 || acc[0] != r2 {
			return fmt.Errorf("accepted %v, want [%d]", acc, r2)
		}
		if n := len(h.list(keys.TriggerDeadDir(pid, "dead"))); n != 3 {
			return fmt.Errorf("%d dead letters of dead, want 3", n)
		}
		if n := len(h.list(keys.TriggerDeadDir(pid, "refused"))); n != 1 {
			return fmt.Errorf("%d dead letters of refused, want 1", n)
		}
		return nil
	})
	rcv.checkClean()
	dead := map[uint64]triggers.Dead{}
	for _, name := range []string{"dead", "refused"} {
		for _, doc := range h.list(keys.TriggerDeadDir(pid, name)) {
			var dl triggers.Dead
			if err := json.Unmarshal(doc.Data, &dl); err != nil {
				t.Fatal(err)
			}
			if doc.Path != keys.Under(keys.TriggerDeadDir(pid, name))+keys.TriggerDeadKey(dl.Path, dl.Revision) {
				t.Errorf("dead letter at %s: %+v", doc.Path, dl)
			}
			dead[dl.Revision] = dl
		}
	}
	if dl := dead[r1]; dl.Attempts < 2 || dl.LastError == "" || dl.DeadAt == "" || string(dl.After) != `{"v":1}` {
		t.Errorf("dead letter of the 500s: %+v", dl)
	}
	if dl := dead[r3]; dl.Attempts != 1 || !strings.Contains(dl.LastError, "404") {
		t.Errorf("dead letter of the 404: %+v", dl)
	}
	if dl := dead[r4]; dl.Attempts != 1 || !strings.Contains(dl.LastError, "host not allowed") {
		t.Errorf("dead letter of the refused host: %+v", dl)
	}
	if dl := dead[r5]; dl.Attempts != 1 || !strings.Contains(dl.LastError, "302") {
		t.Errorf("dead letter of the redirect: %+v", dl)
	}
	checkFor(t, wait, func() error {
		if st := h.state("dead"); st.Dead != 3 || st.Delivered != 1 {
			return fmt.Errorf("state %+v", st)
		}
		if n := len(h.list(keys.TriggerQueueDir(pid, "dead"))); n != 0 {
			return fmt.Errorf("%d parked", n)
		}
		return nil
	})
	if v := h.counter("dead", "dead"); v != 3 {
		t.Errorf("deliveries_total{dead} = %v, want 3", v)
	}

	// A replay (what the service does): the dead letter goes back to the
	// queue with no attempts, and is delivered now that the receiver
	// takes it.
	firstRev.Store(0)
	p := dead[r1].Parked
	p.Attempts, p.FirstAttemptAt, p.NextAttemptAt, p.LastError = 0, 0, 0, ""
	data, _ := json.Marshal(p)
	h.txn(raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Under(keys.TriggerDeadDir(pid, "dead")) + keys.TriggerDeadKey(p.Path, p.Revision)},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, "dead")) + keys.TriggerQueueKey(p.Path, p.Revision), Data: data})
	checkFor(t, wait, func() error {
		if acc := rcv.accepted()["docs/d1"]; len(acc) != 2 || acc[1] != r1 {
			return fmt.Errorf("accepted %v, want [%d %d]", acc, r2, r1)
		}
		if n := len(h.list(keys.TriggerQueueDir(pid, "dead"))); n != 0 {
			return fmt.Errorf("%d parked after the replay", n)
		}
		return nil
	})
}

// TestCheckpointResume: a runner stopped after its cursor was committed
// and a new one started later deliver everything exactly once between
// them (the changes made while none ran included), and a parked event
// left by the first is retried by the second.
func TestCheckpointResume(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	rcv.setScript(func(d delivery) (int, string) {
		if d.p.Path == "docs/stuck" && d.attempt == 1 {
			return http.StatusServiceUnavailable, "3600" // capped at MaxBackoff
		}
		return http.StatusOK, ""
	})
	h.start()
	h.putDef("cp", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	var last uint64
	for i := range 10 {
		last = h.put(fmt.Sprintf("docs/a%d", i), `{}`)
	}
	checkFor(t, wait, func() error {
		if st := h.state("cp"); st.Cursor < last {
			return fmt.Errorf("cursor %d, want >= %d", st.Cursor, last)
		}
		return nil
	})
	h.stop()
	for i := range 10 {
		last = h.put(fmt.Sprintf("docs/b%d", i), `{}`)
	}
	stuck := h.put("docs/stuck", `{}`)
	h.start()
	checkFor(t, wait, func() error {
		acc := rcv.accepted()
		if len(acc) != 21 {
			return fmt.Errorf("%d paths accepted, want 21", len(acc))
		}
		return nil
	})
	rcv.checkClean()
	for path, revs := range rcv.accepted() {
		if len(revs) != 1 {
			t.Errorf("%s accepted %d times", path, len(revs))
		}
	}
	if n := len(rcv.deliveries()); n != 22 {
		t.Errorf("%d requests, want 22 (one retry)", n)
	}
	checkFor(t, wait, func() error {
		if st := h.state("cp"); st.Cursor < max(last, stuck) || st.Delivered != 21 {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
}

// TestDerivedWriteLoop: a write trigger that matches its own output stops
// at the loop limit: an app write (depth 0) and derived writes of depths
// 1, 2 and 3, the last of which fires nothing.
func TestDerivedWriteLoop(t *testing.T) {
	h := newHarness(t, fastTuning())
	h.start()
	h.putDef("loop", triggers.Definition{Match: "counters/{id}", Action: triggers.Action{
		Write: &triggers.WriteAction{Op: "increment", Collection: "counters/{{ params.id }}", Field: "n", By: json.RawMessage(`1`)}}})
	h.put("counters/c1", `{"n":0}`)
	checkFor(t, wait, func() error {
		if st := h.state("loop"); st.LoopStops != 1 || st.Delivered != 3 {
			return fmt.Errorf("state %+v, want 3 delivered and 1 loop stop", st)
		}
		return nil
	})
	doc, err := h.store.Get(keys.Doc(pid, "counters/c1"))
	if err != nil || doc == nil {
		t.Fatal(doc, err)
	}
	if string(doc.Data) != `{"n":3}` {
		t.Fatalf("counter %s, want n 3", doc.Data)
	}
	var o triggers.Origin
	od, err := h.store.Get(keys.TriggerOrigin(pid))
	if err != nil || od == nil || json.Unmarshal(od.Data, &o) != nil || o.Depth != 3 || o.Trigger != "loop" || o.Path != "counters/c1" {
		t.Fatalf("origin marker %v %v", od, err)
	}
	if v := metricValue(t, h.reg, "edgebase_trigger_loop_stops_total", map[string]string{"project": pid, "trigger": "loop"}); v != 1 {
		t.Fatalf("loop_stops_total %v", v)
	}
}

// flakyPush is the real push service behind a queue that fails each
// event's first call after it went through: the event is delivered twice.
type flakyPush struct {
	svc  *push.Service
	mu   sync.Mutex
	seen map[string]int // nid -> calls
}

func (f *flakyPush) QueueForTrigger(ctx context.Context, pid, nid, createdBy string, t push.Target, c push.Content) (bool, error) {
	queued, err := f.svc.QueueForTrigger(ctx, pid, nid, createdBy, t, c)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[nid]++
	if err == nil && f.seen[nid] == 1 {
		return queued, errors.New("connection reset (test)")
	}
	return queued, err
}

// TestPushAction: each event queues one notification, rendered from the
// change, however often it is delivered.
func TestPushAction(t *testing.T) {
	h := newHarness(t, fastTuning())
	svc, err := push.NewService(push.Config{Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	fp := &flakyPush{svc: svc, seen: map[string]int{}}
	h.cfg.Push = fp
	h.start()
	h.putDef("notify", triggers.Definition{Match: "orders/{id}", On: []string{"create"}, Action: triggers.Action{
		Push: &triggers.PushAction{To: "project", Title: "Order {{ params.id }}", Body: "{{ after.total }}",
			Data: map[string]string{"order": "{{ params.id }}"}}}})
	h.put("orders/o1", `{"total":5}`)
	h.put("orders/o2", `{"total":7}`)
	h.put("orders/o1", `{"total":6}`) // an update: not "on"
	checkFor(t, wait, func() error {
		if st := h.state("notify"); st.Delivered != 2 {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	fp.mu.Lock()
	calls := fmt.Sprint(len(fp.seen), fp.seen)
	fp.mu.Unlock()
	if !strings.HasPrefix(calls, "2 ") || strings.Contains(calls, ":1") {
		t.Fatalf("calls per notification id: %s, want 2 ids called twice each", calls)
	}
	notes := h.list(keys.NotificationsDir(pid))
	if len(notes) != 2 {
		t.Fatalf("%d notifications, want 2", len(notes))
	}
	titles := map[string]bool{}
	for _, d := range notes {
		var n push.Notification
		if err := json.Unmarshal(d.Data, &n); err != nil {
			t.Fatal(err)
		}
		if n.CreatedBy != "trigger:notify" || !n.Target.Project {
			t.Errorf("notification %+v", n)
		}
		titles[n.Content.Title+"|"+n.Content.Body+"|"+n.Content.Data["order"]] = true
	}
	if !titles["Order o1|5|o1"] || !titles["Order o2|7|o2"] {
		t.Fatalf("notifications %v", titles)
	}
}

// TestDisableEnable: changes committed while a trigger is disabled are
// delivered, in order, when it is enabled again.
func TestDisableEnable(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	h.start()
	def := webhookDef("docs/{id}", rcv.srv.URL, testSecret)
	h.putDef("onoff", def)
	// watch sees the same changes: once it delivered c, the runner has
	// read past c.
	h.putDef("watch", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	a := h.put("docs/d", `{"v":"a"}`)
	checkFor(t, wait, func() error {
		if st := h.state("onoff"); st.Cursor < a {
			return fmt.Errorf("cursor %d, want >= %d", st.Cursor, a)
		}
		return nil
	})
	def.Disabled = true
	h.putDef("onoff", def)
	b := h.put("docs/d", `{"v":"b"}`)
	c := h.put("docs/d", `{"v":"c"}`)
	checkFor(t, wait, func() error {
		if acc := rcv.acceptedBy("watch")["docs/d"]; len(acc) != 3 {
			return fmt.Errorf("watch accepted %v, want [%d %d %d]", acc, a, b, c)
		}
		return nil
	})
	if acc := rcv.acceptedBy("onoff")["docs/d"]; fmt.Sprint(acc) != fmt.Sprint([]uint64{a}) {
		t.Fatalf("the disabled trigger accepted %v, want [%d]", acc, a)
	}
	if st := h.state("onoff"); st.Cursor >= b {
		t.Fatalf("cursor %d moved past %d while disabled", st.Cursor, b)
	}
	def.Disabled = false
	h.putDef("onoff", def)
	d := h.put("docs/d", `{"v":"d"}`)
	checkFor(t, wait, func() error {
		if acc := rcv.acceptedBy("onoff")["docs/d"]; fmt.Sprint(acc) != fmt.Sprint([]uint64{a, b, c, d}) {
			return fmt.Errorf("accepted %v, want %v", acc, []uint64{a, b, c, d})
		}
		return nil
	})
	rcv.checkClean()
}

// TestDeleteTrigger: a deleted trigger delivers nothing more, its metric
// series go, and its state is not written again.
func TestDeleteTrigger(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	h.start()
	h.putDef("gone", webhookDef("docs/{id}", rcv.srv.URL+"/gone", testSecret))
	a := h.put("docs/d", `{}`)
	checkFor(t, wait, func() error {
		if h.counter("gone", "ok") != 1 || h.state("gone").Cursor < a {
			return errors.New("not delivered and checkpointed yet")
		}
		return nil
	})
	h.txn(raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Trigger(pid, "gone")},
		raftstore.Op{Kind: raftstore.OpDelete, Path: keys.TriggerIndex(pid, "gone")},
		raftstore.Op{Kind: raftstore.OpDelete, Path: keys.TriggerState(pid, "gone"), IfExists: true})
	h.putDef("other", webhookDef("docs/{id}", rcv.srv.URL+"/other", testSecret))
	b := h.put("docs/d", `{"v":2}`)
	checkFor(t, wait, func() error {
		for _, d := range rcv.deliveries() {
			if d.p.Trigger == "other" && d.p.Revision == b {
				return nil
			}
		}
		return errors.New("other has not delivered b yet")
	})
	checkFor(t, wait, func() error {
		mfs, err := h.reg.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "trigger" && lp.GetValue() == "gone" {
						return fmt.Errorf("series %s{trigger=gone} left", mf.GetName())
					}
				}
			}
		}
		return nil
	})
	for _, d := range rcv.deliveries() {
		if d.p.Trigger == "gone" && d.p.Revision != a {
			t.Fatalf("the deleted trigger delivered %+v", d.p)
		}
	}
	if sd, err := h.store.Get(keys.TriggerState(pid, "gone")); err != nil || sd != nil {
		t.Fatalf("state of the deleted trigger: %v %v", sd, err)
	}
	rcv.checkClean()
}

// TestTimeoutRetried: a receiver that does not answer within Timeout is
// tried again (a network failure, not a refusal).
func TestTimeoutRetried(t *testing.T) {
	tu := fastTuning()
	tu.Timeout = 200 * time.Millisecond
	h := newHarness(t, tu)
	rcv := newReceiver(t, testSecret)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rcv.setScript(func(d delivery) (int, string) {
		if d.attempt == 1 {
			select { // hang past the runner's timeout
			case <-release:
			case <-time.After(2 * time.Second):
			}
		}
		return http.StatusOK, ""
	})
	h.start()
	h.putDef("slow", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	rev := h.put("docs/d1", `{}`)
	checkFor(t, wait, func() error {
		for _, d := range rcv.deliveries() {
			if d.attempt == 2 && d.p.Revision == rev {
				return nil
			}
		}
		return errors.New("no second attempt yet")
	})
	checkFor(t, wait, func() error {
		if st := h.state("slow"); st.Delivered != 1 || st.Failed != 1 ||
			!(strings.Contains(st.LastError, "timeout") || strings.Contains(st.LastError, "deadline exceeded")) {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
}

// TestIdleCheckpoints: an idle runner does not keep committing its
// cursor (each checkpoint is itself a revision that moves the cursor).
func TestIdleCheckpoints(t *testing.T) {
	h := newHarness(t, fastTuning())
	rcv := newReceiver(t, testSecret)
	h.start()
	h.putDef("a", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	h.putDef("b", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	h.put("docs/d", `{}`)
	other := h.put("elsewhere/x", `{}`) // matches neither: the cursors still move past it
	checkFor(t, wait, func() error {
		for _, name := range []string{"a", "b"} {
			if st := h.state(name); st.Cursor < other || st.Delivered != 1 {
				return fmt.Errorf("%s: state %+v, want cursor >= %d", name, st, other)
			}
		}
		return nil
	})
	before := h.store.AppliedIndex()
	// Absence is what is checked: 25 checkpoint periods pass idle.
	time.Sleep(25 * fastTuning().Checkpoint)
	if after := h.store.AppliedIndex(); after > before+2 {
		t.Fatalf("idle: the applied index moved from %d to %d", before, after)
	}
}

// TestCompactedChanges: changes the change log dropped before a runner
// read them are named in lastError, the cursor moves past them, and what
// comes after is delivered.
func TestCompactedChanges(t *testing.T) {
	h := newHarnessOn(t, fastTuning(), mustOpenStoreKeeping(t, 200*time.Millisecond))
	rcv := newReceiver(t, testSecret)
	h.putDef("late", webhookDef("docs/{id}", rcv.srv.URL, testSecret))
	lost := h.put("docs/d", `{"v":1}`)
	checkFor(t, wait, func() error {
		floor, err := h.store.LogFloor()
		if err != nil || floor < lost {
			return fmt.Errorf("log floor %d (%v), want >= %d", floor, err, lost)
		}
		return nil
	})
	h.start()
	checkFor(t, wait, func() error {
		if st := h.state("late"); st.Cursor < lost || !strings.Contains(st.LastError, "compacted") {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	kept := h.put("docs/d", `{"v":2}`) // read from the feed: the log may drop it at once
	checkFor(t, wait, func() error {
		if acc := rcv.accepted()["docs/d"]; fmt.Sprint(acc) != fmt.Sprint([]uint64{kept}) {
			return fmt.Errorf("accepted %v, want [%d]", acc, kept)
		}
		return nil
	})
	rcv.checkClean()
}
