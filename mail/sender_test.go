package mail_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/internal/storetest"
	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/raftstore"
)

// These tests run the sender against a real one-node Raft store (Badger)
// and a real SMTP server (internal/smtptest) speaking the security each
// test names. The clock is the test's: retries become due when the test
// moves it, never by sleeping.

const wait = 15 * time.Second

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// source is the test's mail.Source: servers by project, bodies in the
// clear (auth's sealing is tested in auth).
type source struct {
	mu      sync.Mutex
	servers map[string]mail.Server
}

func (s *source) MailServer(_ context.Context, pid string) (mail.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.servers[pid]
	if !ok {
		return mail.Server{}, mail.ErrNoServer
	}
	return srv, nil
}

func (s *source) OpenMail(rec *mail.Record) (mail.Content, error) {
	if rec.Content == nil {
		return mail.Content{}, errors.New("sealed")
	}
	return *rec.Content, nil
}

func (s *source) set(pid string, srv mail.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[pid] = srv
}

type harness struct {
	t      *testing.T
	store  *raftstore.Store
	clk    *clock
	src    *source
	sender *mail.Sender
	reg    *prometheus.Registry
	seq    atomic.Int64
}

func mustOpenStore(t *testing.T) *raftstore.Store {
	t.Helper()
	return storetest.Open(t, raftstore.Config{})
}

// newHarness starts a store and a running sender trusting ca (nil: none).
func newHarness(t *testing.T, ca *testpki.CA) *harness {
	t.Helper()
	h := &harness{t: t, store: mustOpenStore(t), clk: &clock{now: t0}, src: &source{servers: map[string]mail.Server{}},
		reg: prometheus.NewRegistry()}
	cfg := mail.Config{Store: h.store, Source: h.src, Feed: h.store.Feed(), Clock: h.clk, Registerer: h.reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tuning: mail.Tuning{MinBackoff: time.Minute, MaxBackoff: 8 * time.Minute,
			MaxAge: time.Hour, SendTimeout: 5 * time.Second, Poll: time.Hour}}
	if ca != nil {
		cfg.RootCAs = ca.Pool
	}
	var err error
	if h.sender, err = mail.New(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.sender.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// queue commits one email to `to` of project pid and returns its record.
func (h *harness) queue(pid, to string) *mail.Record {
	h.t.Helper()
	n := h.seq.Add(1)
	rec := &mail.Record{ID: fmt.Sprintf("m%03d", n), ProjectID: pid, Kind: "verification", To: to, QueuedAt: h.clk.Now().UnixNano(),
		Content: &mail.Content{Subject: fmt.Sprintf("Code %d", n), Text: fmt.Sprintf("Your code is %06d.", 100000+n),
			HTML: fmt.Sprintf("<p>Your code is <b>%06d</b>.</p>", 100000+n)}}
	op, err := rec.PutOp()
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := h.store.Txn(context.Background(), &raftstore.Txn{Time: h.clk.Now().UnixNano(), Ops: []raftstore.Op{op}})
	if err != nil || !res.OK() {
		h.t.Fatalf("queue: %v %v", res, err)
	}
	return rec
}

// record reads rec's outbox record (nil when removed).
func (h *harness) record(rec *mail.Record) *mail.Record {
	h.t.Helper()
	doc, err := h.store.Get(rec.Path())
	if err != nil {
		h.t.Fatal(err)
	}
	if doc == nil {
		return nil
	}
	r, err := mail.DecodeRecord(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// waitAttempts polls until rec's record shows n failed attempts.
func (h *harness) waitAttempts(rec *mail.Record, n int) *mail.Record {
	h.t.Helper()
	var got *mail.Record
	checkFor(h.t, func() error {
		got = h.record(rec)
		if got == nil || got.Attempts < n {
			return fmt.Errorf("record %s: %+v, want %d attempts", rec.ID, got, n)
		}
		return nil
	})
	return got
}

func (h *harness) waitRemoved(rec *mail.Record) {
	h.t.Helper()
	checkFor(h.t, func() error {
		if r := h.record(rec); r != nil {
			return fmt.Errorf("record %s still queued: %+v", rec.ID, r)
		}
		return nil
	})
}

func checkFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", wait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func server(s *smtptest.Server, security, user, pass string) mail.Server {
	return mail.Server{Host: s.Host(), Port: s.Port(), Username: user, Password: pass, From: "noreply@example.com",
		FromName: "Example App", Security: security}
}

func TestSenderSTARTTLSWithAuthPlain(t *testing.T) {
	ca := testpki.NewCA(t, "mail")
	s := smtptest.Start(t, smtptest.WithSTARTTLS(ca), smtptest.WithAuth("app", "s3cret"), smtptest.WithAuthMechanisms("PLAIN"))
	h := newHarness(t, ca)
	h.src.set("p1", server(s, mail.SecuritySTARTTLS, "app", "s3cret"))
	rec := h.queue("p1", "ada@example.com")
	m := s.WaitFor(t, "ada@example.com", nil)
	if !m.TLS || m.User != "app" || m.From != "noreply@example.com" {
		t.Fatalf("envelope: tls %v user %q from %q", m.TLS, m.User, m.From)
	}
	if m.Subject != rec.Content.Subject || strings.TrimSpace(m.Text) != rec.Content.Text || strings.TrimSpace(m.HTML) != rec.Content.HTML {
		t.Fatalf("message: subject %q text %q html %q", m.Subject, m.Text, m.HTML)
	}
	if got := m.Header.Get("From"); !strings.Contains(got, "Example App") || !strings.Contains(got, "<noreply@example.com>") {
		t.Fatalf("From header %q", got)
	}
	if id := m.Header.Get("Message-Id"); !strings.Contains(id, rec.ID+".") {
		t.Fatalf("Message-Id %q does not name the record %s", id, rec.ID)
	}
	if smtptest.Code(m) != "100001" {
		t.Fatalf("code %q", smtptest.Code(m))
	}
	h.waitRemoved(rec)
	if v := counter(t, h.reg, "edgebase_mail_sent_total", ""); v != 1 {
		t.Fatalf("edgebase_mail_sent_total = %v, want 1", v)
	}
}

func TestSenderImplicitTLSWithAuthLogin(t *testing.T) {
	ca := testpki.NewCA(t, "mail")
	s := smtptest.Start(t, smtptest.WithImplicitTLS(ca), smtptest.WithAuth("app", "s3cret"), smtptest.WithAuthMechanisms("LOGIN"))
	h := newHarness(t, ca)
	h.src.set("p1", server(s, mail.SecurityTLS, "app", "s3cret"))
	rec := h.queue("p1", "bob@example.com")
	m := s.WaitFor(t, "bob@example.com", nil)
	if !m.TLS || m.User != "app" {
		t.Fatalf("tls %v user %q", m.TLS, m.User)
	}
	h.waitRemoved(rec)
}

// STARTTLS is required: a server that does not offer it gets nothing, not
// even the password in the clear.
func TestSenderSTARTTLSRequired(t *testing.T) {
	s := smtptest.Start(t, smtptest.WithAuth("app", "s3cret"))
	h := newHarness(t, nil)
	h.src.set("p1", server(s, mail.SecuritySTARTTLS, "app", "s3cret"))
	rec := h.queue("p1", "ada@example.com")
	got := h.waitAttempts(rec, 1)
	if !strings.Contains(strings.ToLower(got.LastError), "tls") {
		t.Fatalf("lastError %q does not name TLS", got.LastError)
	}
	if len(s.Messages()) != 0 || s.Attempts() != 0 {
		t.Fatalf("server saw %d messages, %d DATA", len(s.Messages()), s.Attempts())
	}
}

// An untrusted certificate is refused the same way.
func TestSenderRefusesUntrustedCertificate(t *testing.T) {
	s := smtptest.Start(t, smtptest.WithImplicitTLS(testpki.NewCA(t, "other")))
	h := newHarness(t, testpki.NewCA(t, "mine"))
	h.src.set("p1", server(s, mail.SecurityTLS, "", ""))
	rec := h.queue("p1", "ada@example.com")
	got := h.waitAttempts(rec, 1)
	if !strings.Contains(got.LastError, "certificate") {
		t.Fatalf("lastError %q does not name the certificate", got.LastError)
	}
	if len(s.Messages()) != 0 {
		t.Fatal("delivered over an untrusted certificate")
	}
	if v := counter(t, h.reg, "edgebase_mail_failed_total", "tls"); v != 1 {
		t.Fatalf("failed{tls} = %v, want 1", v)
	}
}

// A plain relay the operator chose: security none, AUTH in the clear.
func TestSenderNoTLSWithAuth(t *testing.T) {
	s := smtptest.Start(t, smtptest.WithAuth("app", "s3cret"), smtptest.WithAuthMechanisms("LOGIN"))
	h := newHarness(t, nil)
	h.src.set("p1", server(s, mail.SecurityNone, "app", "s3cret"))
	rec := h.queue("p1", "ada@example.com")
	if m := s.WaitFor(t, "ada@example.com", nil); m.TLS || m.User != "app" {
		t.Fatalf("tls %v user %q", m.TLS, m.User)
	}
	h.waitRemoved(rec)
}

// A server answering 4xx twice then accepting: the email is retried with
// growing backoff recorded in the record, then delivered once and removed.
func TestSenderRetriesTemporaryFailure(t *testing.T) {
	s := smtptest.Start(t)
	s.Reject(2, 451)
	h := newHarness(t, nil)
	h.src.set("p1", server(s, mail.SecurityNone, "", ""))
	rec := h.queue("p1", "ada@example.com")
	r1 := h.waitAttempts(rec, 1)
	delay1 := time.Duration(r1.NextAttemptAt - h.clk.Now().UnixNano())
	if delay1 < 30*time.Second || delay1 > time.Minute {
		t.Fatalf("first backoff %v, want within [30s, 1m]", delay1)
	}
	if !strings.Contains(r1.LastError, "451") {
		t.Fatalf("lastError %q", r1.LastError)
	}
	// Not due yet: a wake-up sends nothing.
	h.sender.Poke()
	// A pass ran once p2's email (no server) shows an attempt; it listed
	// p1's first.
	h.waitAttempts(h.queue("p2", "other@example.com"), 1)
	if s.Attempts() != 1 {
		t.Fatalf("retried before due: %d attempts", s.Attempts())
	}
	h.clk.Advance(time.Minute)
	h.sender.Poke()
	r2 := h.waitAttempts(rec, 2)
	delay2 := time.Duration(r2.NextAttemptAt - h.clk.Now().UnixNano())
	if delay2 < time.Minute || delay2 > 2*time.Minute {
		t.Fatalf("second backoff %v, want within [1m, 2m]", delay2)
	}
	h.clk.Advance(2 * time.Minute)
	h.sender.Poke()
	s.WaitFor(t, "ada@example.com", nil)
	h.waitRemoved(rec)
	if n := len(s.To("ada@example.com")); n != 1 || s.Attempts() != 3 {
		t.Fatalf("delivered %d times in %d attempts, want 1 in 3", n, s.Attempts())
	}
	if v := counter(t, h.reg, "edgebase_mail_failed_total", "smtp_4xx"); v != 2 {
		t.Fatalf("failed{smtp_4xx} = %v, want 2", v)
	}
}

// A server answering 5xx: backoff grows to its cap, and after MaxAge the
// record is marked failed and kept, no longer retried.
func TestSenderPermanentFailureBacksOffThenGivesUp(t *testing.T) {
	s := smtptest.Start(t)
	s.Reject(1000, 550)
	h := newHarness(t, nil)
	h.src.set("p1", server(s, mail.SecurityNone, "", ""))
	rec := h.queue("p1", "ada@example.com")
	var last *mail.Record
	for i := 1; i <= 5; i++ {
		last = h.waitAttempts(rec, i)
		if !strings.Contains(last.LastError, "550") {
			t.Fatalf("attempt %d lastError %q", i, last.LastError)
		}
		h.clk.Advance(8 * time.Minute) // MaxBackoff: every retry is due
		h.sender.Poke()
	}
	delay := time.Duration(last.NextAttemptAt - (h.clk.Now().UnixNano() - int64(8*time.Minute)))
	if delay < 4*time.Minute || delay > 8*time.Minute {
		t.Fatalf("backoff after 5 failures %v, want capped within [4m, 8m]", delay)
	}
	h.clk.Advance(time.Hour)
	h.sender.Poke()
	checkFor(t, func() error {
		if r := h.record(rec); r == nil || !r.Failed {
			return fmt.Errorf("record %+v not failed", r)
		}
		return nil
	})
	attempts := s.Attempts()
	h.clk.Advance(time.Hour)
	h.sender.Poke()
	h.waitAttempts(h.queue("p2", "x@example.com"), 1) // another pass ran
	if r := h.record(rec); r == nil || !r.Failed || s.Attempts() != attempts {
		t.Fatalf("failed record retried or removed: %+v, attempts %d → %d", r, attempts, s.Attempts())
	}
	checkFor(t, func() error {
		if v := gauge(t, h.reg, "edgebase_mail_outbox", "failed"); v != 1 {
			return fmt.Errorf("edgebase_mail_outbox{state=failed} = %v, want 1", v)
		}
		return nil
	})
	if v := counter(t, h.reg, "edgebase_mail_failed_total", "expired"); v != 1 {
		t.Fatalf("failed{expired} = %v, want 1", v)
	}
	// Kept for FailedRetention after it was given up, then removed.
	h.clk.Advance(5 * 24 * time.Hour)
	h.sender.Poke()
	h.waitAttempts(h.queue("p2", "y@example.com"), 1)
	if r := h.record(rec); r == nil || !r.Failed {
		t.Fatalf("failed record removed before its retention: %+v", r)
	}
	h.clk.Advance(2*24*time.Hour + time.Minute)
	h.sender.Poke()
	h.waitRemoved(rec)
	if v := counter(t, h.reg, "edgebase_mail_failed_total", "smtp_5xx"); v < 5 {
		t.Fatalf("failed{smtp_5xx} = %v, want ≥ 5", v)
	}
}

// A project with no server keeps its email until one is set.
func TestSenderWaitsForAServer(t *testing.T) {
	s := smtptest.Start(t)
	h := newHarness(t, nil)
	rec := h.queue("p1", "ada@example.com")
	if r := h.waitAttempts(rec, 1); !strings.Contains(r.LastError, "no SMTP server") {
		t.Fatalf("lastError %q", r.LastError)
	}
	h.src.set("p1", server(s, mail.SecurityNone, "", ""))
	h.clk.Advance(time.Minute)
	h.sender.Poke()
	s.WaitFor(t, "ada@example.com", nil)
	h.waitRemoved(rec)
}

// gauge reads a gauge's value from the registry (of the sample labelled
// state).
func gauge(t *testing.T, reg *prometheus.Registry, name, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// counter reads a counter's value from the registry (reason "": the sum
// over labels).
func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := reason == ""
			for _, l := range m.GetLabel() {
				match = match || (l.GetName() == "reason" && l.GetValue() == reason)
			}
			if match {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// Two senders on one outbox (a deposed leader that has not noticed yet
// beside the new one): their commits are conditioned on the record as each
// read it, so neither removes an email the other failed to send; every
// email arrives at least once and the outbox ends empty.
func TestSenderTwoSendersOverlap(t *testing.T) {
	s := smtptest.Start(t, smtptest.WithDelay(5*time.Millisecond))
	s.Reject(3, 451)
	h := newHarness(t, nil)
	h.src.set("p1", server(s, mail.SecurityNone, "", ""))
	second, err := mail.New(mail.Config{Store: h.store, Source: h.src, Feed: h.store.Feed(), Clock: h.clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tuning: mail.Tuning{MinBackoff: time.Minute, Poll: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); second.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var recs []*mail.Record
	for i := range 20 {
		recs = append(recs, h.queue("p1", fmt.Sprintf("u%02d@example.com", i)))
	}
	// The refused ones wait a minute of the test's clock.
	checkFor(t, func() error {
		if a := s.Attempts(); a < 20 {
			return fmt.Errorf("%d attempts", a)
		}
		return nil
	})
	h.clk.Advance(2 * time.Minute)
	h.sender.Poke()
	second.Poke()
	for _, r := range recs {
		h.waitRemoved(r)
		if len(s.To(r.To)) == 0 {
			t.Errorf("%s: removed from the outbox, never delivered", r.To)
		}
	}
	t.Logf("20 emails, %d messages accepted, %d SMTP transactions", len(s.Messages()), s.Attempts())
}
