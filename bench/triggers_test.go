package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// sign is the sender's side of Edgebase-Signature, written from the
// documented scheme (not from the receiver's code).
func sign(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.%s", t, body)
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

func TestVerifyTrgSignature(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"a:1:x%2Fy","revision":1}`)
	good := sign("s3cret", now.Unix(), body)
	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"good", good, body, true},
		{"good among rotated", "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + hex.EncodeToString(make([]byte, 32)) + "," + good[len("t=1800000000,"):], body, true},
		{"spaces", "t=1800000000, " + good[len("t=1800000000,"):], body, true},
		{"four minutes old", sign("s3cret", now.Unix()-240, body), body, true},
		{"wrong secret", sign("other", now.Unix(), body), body, false},
		{"body changed", good, []byte(`{"id":"a:1:x%2Fy","revision":2}`), false},
		{"six minutes old", sign("s3cret", now.Unix()-360, body), body, false},
		{"six minutes ahead", sign("s3cret", now.Unix()+360, body), body, false},
		{"timestamp swapped", "t=1800000001," + good[len("t=1800000000,"):], body, false},
		{"no v1", "t=1800000000", body, false},
		{"no t", good[len("t=1800000000,"):], body, false},
		{"empty", "", body, false},
		{"t twice", "t=1,t=1800000000," + good[len("t=1800000000,"):], body, false},
	} {
		err := verifyTrgSignature([]byte("s3cret"), tc.header, tc.body, now, trgTolerance)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestTrgReceiver sends real HTTP deliveries to the receiver and checks what
// it accepts, refuses and counts.
func TestTrgReceiver(t *testing.T) {
	const secret, trigger = "whsec_test", "orders-hook"
	rc := newTrgReceiver(secret, trigger, time.Now)
	endpoint, stop, err := startTrgReceiver(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	commit := time.Now().Add(-30 * time.Millisecond)
	payload := func(rev uint64, path string) []byte {
		return fmt.Appendf(nil, `{"id":"%s:%d:%s","trigger":"%s","project":"p","revision":%d,"path":"%s","type":"create","before":null,"after":{"v":1},"time":"%s"}`,
			trigger, rev, path, trigger, rev, path, commit.UTC().Format(time.RFC3339Nano))
	}
	send := func(body []byte, sig string, mutate func(h http.Header)) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			ID       string
			Revision uint64
		}
		_ = json.Unmarshal(body, &p)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Edgebase-Signature", sig)
		req.Header.Set("Idempotency-Key", p.ID)
		req.Header.Set("Edgebase-Trigger", trigger)
		req.Header.Set("Edgebase-Revision", strconv.FormatUint(p.Revision, 10))
		req.Header.Set("Edgebase-Attempt", "1")
		if mutate != nil {
			mutate(req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now().Unix()
	b1, b2, b3 := payload(11, "trg1/d0"), payload(12, "trg1/d1"), payload(13, "trg1/d2")
	if got := send(b1, sign(secret, now, b1), nil); got != http.StatusNoContent {
		t.Fatalf("good delivery: %d", got)
	}
	if got := send(b1, sign(secret, now, b1), nil); got != http.StatusNoContent {
		t.Fatalf("duplicate: %d", got) // at-least-once: accepted, counted
	}
	if got := send(b2, sign("not the secret", now, b2), nil); got != http.StatusUnauthorized {
		t.Errorf("bad signature answered %d", got)
	}
	if got := send(b3, sign(secret, now, b3), func(h http.Header) { h.Set("Idempotency-Key", "other") }); got != http.StatusBadRequest {
		t.Errorf("wrong Idempotency-Key answered %d", got)
	}
	b4 := payload(14, "elsewhere/x")
	if got := send(b4, sign(secret, now, b4), nil); got != http.StatusNoContent {
		t.Errorf("stray path answered %d", got)
	}
	if got := send(b3, sign(secret, now-3600, b3), nil); got != http.StatusUnauthorized {
		t.Errorf("an hour-old signature answered %d", got)
	}

	kinds := map[string]int{}
	expected := map[string]uint64{"trg1/d0": 11, "trg1/d1": 12, "trg1/d2": 13}
	attempted := map[string]bool{"trg1/d0": true, "trg1/d1": true, "trg1/d2": true}
	res, h, _, _ := rc.tally(expected, attempted, kinds)
	if res.Delivered != 1 || res.Duplicates != 1 || res.Missing != 2 || res.Stray != 1 || res.Refused != 3 {
		t.Errorf("tally = %+v", res)
	}
	if kinds["webhook bad signature (no v1 matches)"] != 1 || kinds["webhook bad signature (timestamp outside tolerance)"] != 1 ||
		kinds["webhook Idempotency-Key is not the payload's id"] != 1 || kinds["webhook missing (a committed write's event never arrived)"] != 2 ||
		kinds["webhook for a path the run did not write"] != 1 {
		t.Errorf("kinds = %v", kinds)
	}
	if h.count() != 1 || h.percentile(50) < 30*time.Millisecond || h.percentile(50) > 10*time.Second {
		t.Errorf("latency samples %v, want one of at least 30ms", h.samples)
	}
}

// TestTrgTally checks the run's figures from known arrival times.
func TestTrgTally(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	rc := newTrgReceiver("s", "t", func() time.Time { return base })
	expected, attempted := map[string]uint64{}, map[string]bool{}
	for i := range 100 {
		p := "c/d" + strconv.Itoa(i)
		expected[p], attempted[p] = uint64(100+i), true
		// 100 arrivals over 50 ms; latencies 1..100 ms.
		rc.record(p, uint64(100+i), "create", base.Add(time.Duration(i)*time.Millisecond/2), time.Duration(i+1)*time.Millisecond)
	}
	rc.record("c/d5", 105, "create", base.Add(time.Second), time.Second) // a duplicate: not a new first delivery
	rc.record("c/d6", 999, "create", base.Add(time.Second), time.Second) // another revision of a written path
	attempted["c/lost"] = true
	rc.record("c/lost", 7, "create", base, time.Millisecond) // a write whose answer was lost: not stray
	kinds := map[string]int{}
	res, h, first, last := rc.tally(expected, attempted, kinds)
	if res.Delivered != 100 || res.Duplicates != 1 || res.WrongRevision != 1 || res.Stray != 0 || res.Missing != 0 {
		t.Fatalf("tally = %+v", res)
	}
	if !first.Equal(base) || last.Sub(first) != 49500*time.Microsecond {
		t.Errorf("first %v last %v", first, last)
	}
	if res.WebhooksPerSec < 2020 || res.WebhooksPerSec > 2021 { // 100 / 49.5 ms
		t.Errorf("webhooks/s = %v", res.WebhooksPerSec)
	}
	if h.percentile(50) != 50*time.Millisecond || h.percentile(99) != 99*time.Millisecond || res.P99Ms != 99 || res.MaxMs != 100 {
		t.Errorf("p50 %v p99 %v (%v ms) max %v ms", h.percentile(50), h.percentile(99), res.P99Ms, res.MaxMs)
	}
	if len(kinds) != 1 || kinds["webhook with another revision than the write's"] != 1 {
		t.Errorf("kinds = %v", kinds)
	}
}

func TestSummarizeTrgRuns(t *testing.T) {
	latencies := func(p99 time.Duration) *histogram {
		h := &histogram{}
		for range 99 {
			h.add(time.Millisecond)
		}
		h.add(p99) // two of 101 samples: the nearest-rank p99 is p99
		h.add(p99)
		return h
	}
	run := func(paced, backlog float64) trgRunResult {
		return trgRunResult{Live: trgPhase{WebhooksPerSec: 1500}, Paced: trgPhase{WebhooksPerSec: paced}, Backlog: trgPhase{WebhooksPerSec: backlog}}
	}
	ok, slow := run(2003, 8000), run(1700, 7000)
	if tr := summarizeTrgRuns([]trgRunResult{ok, slow, ok}, 90, latencies(20*time.Millisecond)); !tr.TargetsMet ||
		tr.PacedWebhooksPerSec != 2003 || tr.WebhooksPerSec != 1500 || tr.BacklogWebhooksPerSec != 8000 || tr.P99Ms != 90 {
		t.Errorf("2 of 3 keep pace, p99 20ms: %+v", tr)
	}
	if tr := summarizeTrgRuns([]trgRunResult{ok, slow, slow}, 20, latencies(20*time.Millisecond)); tr.TargetsMet {
		t.Errorf("median paced run behind the target met it: %+v", tr)
	}
	if tr := summarizeTrgRuns([]trgRunResult{ok}, 20, latencies(50*time.Millisecond)); tr.TargetsMet || tr.PacedP99Ms != 50 {
		t.Errorf("a paced p99 of exactly 50ms met the target (< 50ms): %+v", tr)
	}
	for i, broken := range []func(x *trgRunResult){
		func(x *trgRunResult) { x.Live.Missing = 1 },
		func(x *trgRunResult) { x.Paced.Refused = 1 },
		func(x *trgRunResult) { x.Backlog.Missing = 1 },
		func(x *trgRunResult) { x.Backlog.Stray = 1 },
		func(x *trgRunResult) { x.Live.WrongRevision = 1 },
	} {
		bad := ok
		broken(&bad)
		if tr := summarizeTrgRuns([]trgRunResult{ok, bad, ok}, 20, latencies(time.Millisecond)); tr.TargetsMet {
			t.Errorf("case %d: a lost or refused event met the targets", i)
		}
	}
	if tr := summarizeTrgRuns(nil, 0, &histogram{}); tr.TargetsMet {
		t.Error("no runs met the targets")
	}
}

// TestTrgWrite runs the writer against a stand-in node: the paths it
// writes, the revisions it keeps, the failures it counts, and its pacing.
func TestTrgWrite(t *testing.T) {
	var mu sync.Mutex
	var rev uint64
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Collection string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/api/db" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen[body.Collection] = true
		if body.Collection == "trg9/d7" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable"}}`))
			return
		}
		rev++
		w.Header().Set("X-Revision", strconv.FormatUint(rev, 10))
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	leader := &benchNode{id: "n1", url: srv.URL}
	o := &options{clients: 8, reqTimeout: 5 * time.Second, valueSize: 4}
	e := newEnv(srv.Client(), &cluster{nodes: []*benchNode{leader}, leader: leader}, project{Token: "tok"}, o)

	kinds := map[string]int{}
	w := trgWrite(context.Background(), e, "trg9/d", 50, 0, kinds)
	if len(w.expected) != 49 || len(w.attempted) != 50 || len(seen) != 50 || w.latency.count() != 49 {
		t.Fatalf("expected %d attempted %d seen %d latencies %d", len(w.expected), len(w.attempted), len(seen), w.latency.count())
	}
	for i := range 50 {
		p := "trg9/d" + strconv.Itoa(i)
		if !w.attempted[p] || (w.expected[p] == 0) != (i == 7) {
			t.Errorf("%s: attempted %v, revision %d", p, w.attempted[p], w.expected[p])
		}
	}
	if kinds["POST 503 unavailable (no Retry-After)"] != 1 || len(kinds) != 1 {
		t.Errorf("kinds = %v", kinds)
	}

	// Paced: 41 writes at 400/s are due over 100 ms.
	w = trgWrite(context.Background(), e, "trg9/p", 41, 400, map[string]int{})
	if d := w.last.Sub(w.start); d < 100*time.Millisecond || len(w.expected) != 41 {
		t.Errorf("41 writes at 400/s took %v (want at least 100ms), %d committed", d, len(w.expected))
	}
}
