package hookcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testSecret = "whsec_test-secret"

func payloadFor(trigger string, rev uint64, path, typ string) Payload {
	p := Payload{Trigger: trigger, Project: "p1", Revision: rev, Path: path, Type: typ,
		Before: json.RawMessage("null"), After: json.RawMessage("null"), Time: "2026-11-27T11:00:00.123456789Z"}
	switch typ {
	case "create":
		p.After = json.RawMessage(`{"n":1}`)
	case "update":
		p.Before, p.After = json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`)
	case "delete":
		p.Before = json.RawMessage(`{"n":2}`)
	}
	p.ID = EventID(trigger, rev, path)
	return p
}

// send posts p to r as the wire format says, with edit applied to the
// request first, and returns the status and Retry-After.
func send(t *testing.T, r *Receiver, p Payload, attempt int, edit func(req *http.Request, body *[]byte)) (int, string) {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, r.URL()+"/hooks/"+p.Trigger, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderIdempotency, p.ID)
	req.Header.Set(HeaderTrigger, p.Trigger)
	req.Header.Set(HeaderRevision, strconv.FormatUint(p.Revision, 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	req.Header.Set(HeaderSignature, Sign(testSecret, time.Now(), body))
	if edit != nil {
		edit(req, &body)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func TestReceiverAcceptsAndRejects(t *testing.T) {
	r := New(t, nil)
	r.SetSecret("t1", testSecret)
	good := payloadFor("t1", 7, "orders/a b", "create")
	if st, _ := send(t, r, good, 1, nil); st != http.StatusOK {
		t.Fatalf("a well-formed delivery: status %d, rejections %v", st, r.Rejections())
	}
	cases := []struct {
		name string
		p    Payload
		edit func(req *http.Request, body *[]byte)
		want string // in the rejection's reason
	}{
		{"no signature", good, func(req *http.Request, _ *[]byte) { req.Header.Del(HeaderSignature) }, "no Edgebase-Signature"},
		{"wrong secret", good, func(req *http.Request, b *[]byte) { req.Header.Set(HeaderSignature, Sign("other", time.Now(), *b)) }, "no v1 matches"},
		{"body changed after signing", good, func(_ *http.Request, b *[]byte) { *b = bytes.Replace(*b, []byte(`"n":1`), []byte(`"n":2`), 1) }, "no v1 matches"},
		{"old timestamp", good, func(req *http.Request, b *[]byte) {
			req.Header.Set(HeaderSignature, Sign(testSecret, time.Now().Add(-6*time.Minute), *b))
		}, "away from now"},
		{"future timestamp", good, func(req *http.Request, b *[]byte) {
			req.Header.Set(HeaderSignature, Sign(testSecret, time.Now().Add(6*time.Minute), *b))
		}, "away from now"},
		{"malformed signature", good, func(req *http.Request, _ *[]byte) { req.Header.Set(HeaderSignature, "v1=zz") }, "not a hex"},
		{"idempotency key", good, func(req *http.Request, _ *[]byte) { req.Header.Set(HeaderIdempotency, "t1:8:x") }, "Idempotency-Key"},
		{"revision header", good, func(req *http.Request, _ *[]byte) { req.Header.Set(HeaderRevision, "8") }, "Edgebase-Revision"},
		{"attempt", good, func(req *http.Request, _ *[]byte) { req.Header.Set(HeaderAttempt, "0") }, "Edgebase-Attempt"},
		{"unknown trigger", payloadFor("t2", 7, "x", "create"), nil, "no secret known"},
		{"id not from path", func() Payload { p := good; p.ID = "t1:7:orders/a b"; return p }(), nil, "payload id"},
		{"update without before", func() Payload { p := payloadFor("t1", 9, "x", "update"); p.Before = nil; return p }(), nil, "update with before"},
		{"local time", func() Payload { p := good; p.Time = "2026-11-27T12:00:00+01:00"; return p }(), nil, "UTC"},
		{"content type", good, func(req *http.Request, _ *[]byte) { req.Header.Set("Content-Type", "text/plain") }, "Content-Type"},
		{"unknown member", good, func(req *http.Request, b *[]byte) {
			*b = append(bytes.TrimSuffix(*b, []byte("}")), []byte(`,"extra":1}`)...)
			req.Header.Set(HeaderSignature, Sign(testSecret, time.Now(), *b))
		}, "unknown field"},
	}
	for i, tc := range cases {
		before := len(r.Rejections())
		if st, _ := send(t, r, tc.p, 1, tc.edit); st != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", tc.name, st)
			continue
		}
		rej := r.Rejections()
		if len(rej) != before+1 || !strings.Contains(rej[len(rej)-1].Reason, tc.want) {
			t.Errorf("%s (case %d): rejections %v, want one more naming %q", tc.name, i, rej[before:], tc.want)
		}
	}
	if ds := r.Deliveries(); len(ds) != 1 || ds[0].Payload.ID != good.ID || !ds[0].Accepted() || ds[0].Attempt != 1 {
		t.Fatalf("deliveries %+v, want only the good one", ds)
	}
}

func TestReceiverScripts(t *testing.T) {
	r := New(t, func(trigger string) (string, bool) { return testSecret, trigger == "t1" })
	r.Script("a", Rule{Status: http.StatusServiceUnavailable, RetryAfter: "2", Times: 2})
	r.Script("", Rule{Status: http.StatusGone})
	p := payloadFor("t1", 3, "a", "create")
	// Two scripted 503s, then the path's rule is used up and the global
	// one answers; a rule of its own (200) takes over again.
	for attempt, want := range []int{503, 503, 410, 200} {
		if attempt == 3 {
			r.Script("a", Rule{})
		}
		st, ra := send(t, r, p, attempt+1, nil)
		if st != want {
			t.Fatalf("attempt %d: status %d, want %d", attempt+1, st, want)
		}
		if (st == 503) != (ra == "2") {
			t.Fatalf("attempt %d: Retry-After %q", attempt+1, ra)
		}
	}
	if st, _ := send(t, r, payloadFor("t1", 4, "b", "create"), 1, nil); st != http.StatusGone {
		t.Fatalf("global rule: %d", st)
	}
	r.Clear("")
	if st, _ := send(t, r, payloadFor("t1", 5, "b", "update"), 1, nil); st != http.StatusOK {
		t.Fatalf("after Clear: %d", st)
	}
	ds := r.Deliveries()
	var acc []bool
	for _, d := range ds {
		acc = append(acc, d.Accepted())
	}
	if len(ds) != 6 || !slicesEqual(acc, []bool{false, false, false, true, false, true}) {
		t.Fatalf("deliveries accepted %v", acc)
	}

	// A delay longer than the sender waits: recorded as canceled, not
	// accepted.
	r.Script("slow", Rule{Delay: 5 * time.Second})
	body, _ := json.Marshal(payloadFor("t1", 6, "slow", "create"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL(), bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "User-Agent": UserAgent, HeaderIdempotency: "t1:6:slow",
		HeaderTrigger: "t1", HeaderRevision: "6", HeaderAttempt: "1", HeaderSignature: Sign(testSecret, time.Now(), body)} {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a 5s delay answered within 200ms: %d", resp.StatusCode)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	err := r.Await(wctx, func(ds []Delivery) error {
		if len(ds) < 7 {
			return io.ErrUnexpectedEOF
		}
		if d := ds[6]; !d.Canceled || d.Accepted() {
			t.Fatalf("slow delivery %+v: want canceled", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The signature check agrees with the header the docs describe, computed
// by hand for a fixed secret, time and body.
func TestVerifySignatureKnownAnswer(t *testing.T) {
	body := []byte(`{"id":"x"}`)
	at := time.Unix(1700000000, 0)
	// printf '1700000000.{"id":"x"}' | openssl dgst -sha256 -hmac 'whsec_k'
	want := "t=1700000000,v1=33791af768115adc5314793cf4743f0ddef1addda64ae649a0374aaa5204949a"
	if got := Sign("whsec_k", at, body); got != want {
		t.Fatalf("Sign = %s, openssl says %s", got, want)
	}
	if err := VerifySignature(want, body, "whsec_k", at, time.Minute); err != nil {
		t.Fatal(err)
	}
	bad := "t=1700000000,v1=" + strings.Repeat("ab", 32)
	if err := VerifySignature(bad, body, "whsec_k", at, time.Minute); err == nil {
		t.Fatal("a made-up v1 verified")
	}
	if err := VerifySignature(want, body, "whsec_k", at.Add(2*time.Minute), time.Minute); err == nil {
		t.Fatal("a signature older than maxAge verified")
	}
	// Two v1 values (a secret being rolled): one matching is enough.
	two := Sign("whsec_k", at, body) + ",v1=" + strings.Repeat("00", 32)
	if err := VerifySignature(two, body, "whsec_k", at, time.Minute); err != nil {
		t.Fatal(err)
	}
}
