// Package hookcheck is a real HTTP webhook receiver for tests of triggers,
// and a checker of what it received.
//
// The Receiver listens on 127.0.0.1 and verifies every request the way an
// app's endpoint should, with its own code (crypto/hmac, not the sender's):
// the Edgebase-Signature header (t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">, a timestamp at most MaxSignatureAge away), the
// Idempotency-Key against the payload's id and the id against trigger,
// revision and path, and the other headers of the wire format. A request
// that breaks a rule is answered 400 and kept as a Rejection; tests assert
// there are none. Every other request is kept as a Delivery, with what the
// receiver answered: by default 200, or what a Rule scripts for its path
// (fail N times with 503 and Retry-After, answer a 4xx, answer late).
//
// Check judges the deliveries against the changes that should have been
// delivered: each at least once, first deliveries in revision order per
// path, duplicates only around a leadership change (check.go).
package hookcheck

import (
	"bytes"
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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The wire format's headers (docs/api.md, "Webhooks").
const (
	HeaderSignature   = "Edgebase-Signature"
	HeaderTrigger     = "Edgebase-Trigger"
	HeaderRevision    = "Edgebase-Revision"
	HeaderAttempt     = "Edgebase-Attempt"
	HeaderIdempotency = "Idempotency-Key"
	UserAgent         = "edgebase-webhooks/1"
)

// MaxSignatureAge is how far a signature's timestamp may be from the
// receiver's clock, either way, as the docs tell receivers to check.
const MaxSignatureAge = 5 * time.Minute

// maxBody bounds a request body the receiver reads.
const maxBody = 4 << 20

// Payload is a delivery's body, decoded by this package's own type so that
// the oracle does not share the sender's.
type Payload struct {
	ID       string            `json:"id"`
	Trigger  string            `json:"trigger"`
	Project  string            `json:"project"`
	Revision uint64            `json:"revision"`
	Path     string            `json:"path"`
	Type     string            `json:"type"`
	Before   json.RawMessage   `json:"before"`
	After    json.RawMessage   `json:"after"`
	Params   map[string]string `json:"params,omitempty"`
	Time     string            `json:"time"`
}

// EventID is what the payload's id must be: trigger:revision:escaped path.
func EventID(trigger string, revision uint64, path string) string {
	return trigger + ":" + strconv.FormatUint(revision, 10) + ":" + url.PathEscape(path)
}

// Delivery is one request that passed the checks, and what the receiver
// answered it.
type Delivery struct {
	Seq     int // arrival order, from 0, over deliveries and rejections alike
	Payload Payload
	Body    []byte
	Header  http.Header
	Attempt int // Edgebase-Attempt
	// Status is what the receiver answered (a Rule's, else 200).
	Status int
	// Canceled: the sender gave up (its context or connection ended)
	// before the answer, which it therefore never saw.
	Canceled bool
	// Received is when the request arrived; At when the answer was decided
	// (after a Rule's delay).
	Received, At time.Time
}

// Accepted reports whether the sender got a 2xx for this delivery: the
// event counts as delivered.
func (d Delivery) Accepted() bool { return d.Status/100 == 2 && !d.Canceled }

// Rejection is a request that broke the wire format, answered 400.
type Rejection struct {
	Seq    int
	At     time.Time
	Reason string
	Header http.Header
	Body   []byte
}

func (r Rejection) String() string {
	return fmt.Sprintf("#%d at %s: %s (body %.200s)", r.Seq, r.At.Format(time.RFC3339Nano), r.Reason, r.Body)
}

// Rule scripts the receiver's answer to the deliveries of a path.
type Rule struct {
	// Status is the answer (0: 200).
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Times is how many deliveries the rule answers before it is dropped
	// (0: every one until Clear).
	Times int
	// Delay is how long the receiver waits before answering (bounded by
	// the request: a sender that gives up ends the wait).
	Delay time.Duration
}

// SecretFunc gives the signing secret of a trigger (false: unknown).
type SecretFunc func(trigger string) (string, bool)

// Receiver is a webhook endpoint on 127.0.0.1 that records and checks
// every delivery.
type Receiver struct {
	srv     *http.Server
	ln      net.Listener
	url     string
	secrets SecretFunc
	now     func() time.Time
	logf    func(format string, args ...any)

	mu         sync.Mutex
	secretMap  map[string]string
	rules      map[string]*Rule // by path; "" is every path without a rule of its own
	deliveries []Delivery
	rejections []Rejection
	seq        int
	changed    chan struct{} // closed and replaced on every record
}

// Option configures New.
type Option func(*Receiver)

// WithClock makes the receiver judge signature timestamps by now.
func WithClock(now func() time.Time) Option { return func(r *Receiver) { r.now = now } }

// New starts a Receiver on a free port of 127.0.0.1, closed when tb's test
// ends. secrets (may be nil) gives each trigger's secret; SetSecret adds
// more, consulted first.
func New(tb testing.TB, secrets SecretFunc, opts ...Option) *Receiver {
	tb.Helper()
	r, err := Start(secrets, tb.Logf, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

// Start is New without a test: the caller closes the Receiver. logf may be
// nil.
func Start(secrets SecretFunc, logf func(format string, args ...any), opts ...Option) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hookcheck: listen: %w", err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &Receiver{ln: ln, url: "http://" + ln.Addr().String(), secrets: secrets, now: time.Now, logf: logf,
		secretMap: map[string]string{}, rules: map[string]*Rule{}, changed: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL is the receiver's base address, e.g. http://127.0.0.1:41234; any
// path under it is accepted (give each trigger its own to tell them apart).
func (r *Receiver) URL() string { return r.url }

// Close stops the server and its connections.
func (r *Receiver) Close() { _ = r.srv.Close() }

// SetSecret records trigger's signing secret.
func (r *Receiver) SetSecret(trigger, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secretMap[trigger] = secret
}

// Script sets the rule for path ("" for every path without its own).
func (r *Receiver) Script(path string, rule Rule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc := rule
	r.rules[path] = &rc
}

// Clear drops the rule of path ("" the global one).
func (r *Receiver) Clear(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rules, path)
}

// Deliveries returns a copy of every delivery so far, in arrival order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

// Rejections returns a copy of every rejected request so far.
func (r *Receiver) Rejections() []Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rejection(nil), r.rejections...)
}

// Await calls cond with the deliveries now and after each new request
// until it returns nil, and returns its last error when ctx ends first.
func (r *Receiver) Await(ctx context.Context, cond func(ds []Delivery) error) error {
	for {
		r.mu.Lock()
		ds := append([]Delivery(nil), r.deliveries...)
		ch := r.changed
		r.mu.Unlock()
		err := cond(ds)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-ch:
		}
	}
}

// Check judges every delivery so far against expected (see Check).
func (r *Receiver) Check(expected []Expected, opts Options) (Report, []error) {
	return Check(expected, r.Deliveries(), opts)
}

// Secret is the secret the receiver checks trigger's signatures with.
func (r *Receiver) Secret(trigger string) (string, bool) { return r.secret(trigger) }

func (r *Receiver) secret(trigger string) (string, bool) {
	r.mu.Lock()
	s, ok := r.secretMap[trigger]
	r.mu.Unlock()
	if ok {
		return s, true
	}
	if r.secrets != nil {
		return r.secrets(trigger)
	}
	return "", false
}

// notifyLocked wakes Await; r.mu is held.
func (r *Receiver) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Receiver) reject(w http.ResponseWriter, req *http.Request, body []byte, format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	r.mu.Lock()
	rej := Rejection{Seq: r.seq, At: r.now(), Reason: reason, Header: req.Header.Clone(), Body: body}
	r.seq++
	r.rejections = append(r.rejections, rej)
	r.notifyLocked()
	r.mu.Unlock()
	r.logf("hookcheck: rejected %s", rej)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": reason})
}

// ServeHTTP checks one delivery, answers it as scripted, and records it.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	received := r.now()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		r.reject(w, req, body, "read body: %v", err)
		return
	}
	if len(body) > maxBody {
		r.reject(w, req, body[:1024], "body larger than %d bytes", maxBody)
		return
	}
	p, attempt, err := r.verify(req, body)
	if err != nil {
		r.reject(w, req, body, "%v", err)
		return
	}

	r.mu.Lock()
	rule, key := r.rules[p.Path], p.Path
	if rule == nil {
		rule, key = r.rules[""], ""
	}
	var act Rule
	if rule != nil {
		act = *rule
		if rule.Times > 0 {
			if rule.Times--; rule.Times == 0 {
				delete(r.rules, key)
			}
		}
	}
	r.mu.Unlock()

	canceled := false
	if act.Delay > 0 {
		t := time.NewTimer(act.Delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			canceled = true
		}
	}
	status := act.Status
	if status == 0 {
		status = http.StatusOK
	}
	// The record is made before the answer is written: the sender cannot
	// learn of the answer, and so cannot send the next event of the path,
	// before the receiver has kept this one.
	r.mu.Lock()
	d := Delivery{Seq: r.seq, Payload: p, Body: body, Header: req.Header.Clone(), Attempt: attempt,
		Status: status, Canceled: canceled || req.Context().Err() != nil, Received: received, At: r.now()}
	r.seq++
	r.deliveries = append(r.deliveries, d)
	r.notifyLocked()
	r.mu.Unlock()
	if act.RetryAfter != "" {
		w.Header().Set("Retry-After", act.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "{\"status\":%d}\n", status)
}

// verify applies the wire format's rules to one request.
func (r *Receiver) verify(req *http.Request, body []byte) (Payload, int, error) {
	var p Payload
	if req.Method != http.MethodPost {
		return p, 0, fmt.Errorf("method %s, want POST", req.Method)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		return p, 0, fmt.Errorf("Content-Type %q, want application/json", ct)
	}
	if ua := req.Header.Get("User-Agent"); ua != UserAgent {
		return p, 0, fmt.Errorf("User-Agent %q, want %q", ua, UserAgent)
	}
	trigger := req.Header.Get(HeaderTrigger)
	if trigger == "" {
		return p, 0, fmt.Errorf("no %s header", HeaderTrigger)
	}
	secret, ok := r.secret(trigger)
	if !ok {
		return p, 0, fmt.Errorf("no secret known for trigger %q", trigger)
	}
	if err := VerifySignature(req.Header.Get(HeaderSignature), body, secret, r.now(), MaxSignatureAge); err != nil {
		return p, 0, err
	}
	if !json.Valid(body) {
		return p, 0, errors.New("body is not JSON")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil || !bytes.Equal(compact.Bytes(), body) {
		return p, 0, errors.New("body is not compact JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, 0, fmt.Errorf("decode payload: %w", err)
	}
	if p.Trigger != trigger {
		return p, 0, fmt.Errorf("payload trigger %q, header %q", p.Trigger, trigger)
	}
	if h := req.Header.Get(HeaderRevision); h != strconv.FormatUint(p.Revision, 10) {
		return p, 0, fmt.Errorf("%s %q, payload revision %d", HeaderRevision, h, p.Revision)
	}
	if p.Revision == 0 || p.Path == "" || strings.HasPrefix(p.Path, "/") || p.Project == "" {
		return p, 0, fmt.Errorf("payload without revision, relative path or project: %+v", p)
	}
	if want := EventID(p.Trigger, p.Revision, p.Path); p.ID != want {
		return p, 0, fmt.Errorf("payload id %q, want %q", p.ID, want)
	}
	if k := req.Header.Get(HeaderIdempotency); k != p.ID {
		return p, 0, fmt.Errorf("%s %q, payload id %q", HeaderIdempotency, k, p.ID)
	}
	if err := checkShape(p); err != nil {
		return p, 0, err
	}
	attempt, err := strconv.Atoi(req.Header.Get(HeaderAttempt))
	if err != nil || attempt < 1 {
		return p, 0, fmt.Errorf("%s %q, want an integer from 1", HeaderAttempt, req.Header.Get(HeaderAttempt))
	}
	return p, attempt, nil
}

// checkShape: the type agrees with before/after, and the time is RFC 3339
// (UTC).
func checkShape(p Payload) error {
	absent := func(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }
	switch p.Type {
	case "create":
		if !absent(p.Before) || absent(p.After) {
			return fmt.Errorf("create with before %s, after %s", p.Before, p.After)
		}
	case "update":
		if absent(p.Before) || absent(p.After) {
			return fmt.Errorf("update with before %s, after %s", p.Before, p.After)
		}
	case "delete":
		if absent(p.Before) || !absent(p.After) {
			return fmt.Errorf("delete with before %s, after %s", p.Before, p.After)
		}
	default:
		return fmt.Errorf("type %q", p.Type)
	}
	t, err := time.Parse(time.RFC3339Nano, p.Time)
	if err != nil || t.Location() != time.UTC {
		return fmt.Errorf("time %q is not RFC 3339 in UTC", p.Time)
	}
	return nil
}

// VerifySignature checks header (t=<unix seconds>,v1=<hex>[,v1=...]) for
// body with secret: some v1 must be HMAC-SHA256(secret, "<t>.<body>"), and
// t within maxAge of now. It is the check the docs show receivers.
func VerifySignature(header string, body []byte, secret string, now time.Time, maxAge time.Duration) error {
	if header == "" {
		return fmt.Errorf("no %s header", HeaderSignature)
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%s %q: malformed part %q", HeaderSignature, header, part)
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%s %q: two timestamps", HeaderSignature, header)
			}
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return fmt.Errorf("%s %q: v1 is not a hex SHA-256", HeaderSignature, header)
			}
			sigs = append(sigs, b)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q: no timestamp", HeaderSignature, header)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%s %q: no v1 signature", HeaderSignature, header)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > maxAge || age < -maxAge {
		return fmt.Errorf("%s %q: timestamp %s away from now (max %s)", HeaderSignature, header, age.Round(time.Second), maxAge)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("%s %q: no v1 matches the body", HeaderSignature, header)
}

// Sign makes a header VerifySignature accepts: for tests of the receiver
// (the product signs its own way).
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
