package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	gomail "github.com/wneessen/go-mail"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Security is how a connection to an SMTP server is protected.
const (
	// SecuritySTARTTLS upgrades the connection with STARTTLS, and refuses to
	// send when the server does not offer it (port 587).
	SecuritySTARTTLS = "starttls"
	// SecurityTLS speaks TLS from the first byte (port 465).
	SecurityTLS = "tls"
	// SecurityNone sends in the clear: only for a server the operator chose
	// or allowed (a relay on the same private network).
	SecurityNone = "none"
)

// Server is an SMTP server to send a project's email through.
type Server struct {
	Host     string
	Port     int
	Username string
	Password string
	From     string
	FromName string
	Security string
	// Operator marks the operator's own server (--smtp-*): it is dialled
	// directly, not through the policy that judges tenants' hosts.
	Operator bool
}

// ErrNoServer means neither the project nor the operator set an SMTP
// server; the email waits (with backoff) until one is set.
var ErrNoServer = errors.New("mail: no SMTP server is configured for the project or the cluster")

// Source gives the sender what only the auth service knows: a project's
// SMTP server (its sealed password opened) and a queued record's message
// (opened when sealed).
type Source interface {
	MailServer(ctx context.Context, pid string) (Server, error)
	OpenMail(rec *Record) (Content, error)
}

// Store is the part of raftstore.Store the sender uses.
type Store interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
}

// DialFunc opens a connection (for tenants' servers: through the host
// policy, so that a name resolving to an internal address is refused).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Clock tells the time; tests move it instead of sleeping.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Defaults of Config.
const (
	DefaultPoll        = 5 * time.Second
	DefaultMinBackoff  = 10 * time.Second
	DefaultMaxBackoff  = 30 * time.Minute
	DefaultMaxAge      = 24 * time.Hour
	DefaultSendTimeout = 30 * time.Second
	DefaultInFlight    = 4
	// DefaultFailedRetention is how long a failed email stays visible.
	DefaultFailedRetention = 7 * 24 * time.Hour
)

// Config wires a Sender. Store and Source are required.
type Config struct {
	Store  Store
	Source Source
	// Feed wakes the sender when an email is queued (nil: it only polls).
	Feed *raftstore.Feed
	// Dial connects to tenants' servers (nil: a plain net.Dialer, which
	// does not judge the address; node passes HostPolicy.DialContext).
	Dial DialFunc
	// RootCAs verifies servers' certificates (nil: the system's roots).
	RootCAs *x509.CertPool
	Clock   Clock
	Logger  *slog.Logger
	// Registerer receives the metrics (nil: none are kept).
	Registerer prometheus.Registerer
	// HELO is the name the sender gives servers (EHLO); empty: "localhost".
	// Some relays judge it: node passes the host of --public-url.
	HELO   string
	Tuning Tuning
}

// Tuning sets the sender's timings; zero fields take the defaults.
type Tuning struct {
	// Poll is how often the outbox is read besides the feed's wake-ups.
	Poll time.Duration
	// MinBackoff is the wait after the first failed attempt; each further
	// failure doubles it, up to MaxBackoff, with jitter.
	MinBackoff, MaxBackoff time.Duration
	// MaxAge bounds how long an email is retried after it was queued: then
	// it is marked failed (and kept).
	MaxAge time.Duration
	// SendTimeout bounds one attempt (connect, TLS, AUTH, DATA).
	SendTimeout time.Duration
	// InFlight bounds the emails being sent at once.
	InFlight int
	// FailedRetention is how long a failed email is kept after it was
	// given up, for operators to see, before the sender removes it.
	FailedRetention time.Duration
}

// Sender is the leader's delivery of the outbox.
type Sender struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	direct  DialFunc
	wake    chan struct{}
}

// New checks cfg and defaults its optional parts.
func New(cfg Config) (*Sender, error) {
	if cfg.Store == nil || cfg.Source == nil {
		return nil, errors.New("mail: Store and Source are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	tu := &cfg.Tuning
	def(&tu.Poll, DefaultPoll)
	def(&tu.MinBackoff, DefaultMinBackoff)
	def(&tu.MaxBackoff, DefaultMaxBackoff)
	def(&tu.MaxAge, DefaultMaxAge)
	def(&tu.SendTimeout, DefaultSendTimeout)
	def(&tu.FailedRetention, DefaultFailedRetention)
	if tu.InFlight <= 0 {
		tu.InFlight = DefaultInFlight
	}
	d := &net.Dialer{Timeout: tu.SendTimeout}
	if cfg.Dial == nil {
		cfg.Dial = d.DialContext
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Sender{cfg: cfg, logger: cfg.Logger.With("component", "mail"), metrics: m, direct: d.DialContext,
		wake: make(chan struct{}, 1)}, nil
}

func (s *Sender) now() time.Time { return s.cfg.Clock.Now() }

// Poke makes a running sender read the outbox now.
func (s *Sender) Poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers the outbox while ctx lasts (while this node leads). It
// resumes what an earlier leader left: every record's progress is in the
// tree. It returns after its sends in flight have returned.
func (s *Sender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.cfg.Feed != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchFeed(ctx)
		}()
	}
	defer wg.Wait()
	t := time.NewTicker(s.cfg.Tuning.Poll)
	defer t.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	s.logger.Info("mail sender started")
	for {
		next := s.pass(ctx)
		// Besides the poll, wake when the next retry is due.
		if !next.IsZero() {
			timer.Reset(max(next.Sub(s.now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			// Another node leads now: its sender reports the backlog.
			s.metrics.backlog(0, 0, 0, time.Time{})
			s.logger.Info("mail sender stopped")
			return
		case <-t.C:
		case <-timer.C:
		case <-s.wake:
		}
	}
}

// watchFeed wakes the loop when an email is queued (a record created in
// the outbox; not the sender's own progress writes).
func (s *Sender) watchFeed(ctx context.Context) {
	dir := keys.Under(keys.MailOutboxDir())
	s.cfg.Feed.Wake(ctx, 64, func(ev raftstore.Event) bool {
		return ev.Doc != nil && ev.Doc.CreateRevision == ev.Revision && strings.HasPrefix(ev.Path, dir)
	}, s.Poke)
}

// pass works through the outbox once: it sends every due record (at most
// InFlight at a time), marks expired ones failed, and returns when the
// earliest record not yet due is due (zero: none waits).
func (s *Sender) pass(ctx context.Context) time.Time {
	var next time.Time
	sem := make(chan struct{}, s.cfg.Tuning.InFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	// The backlog as this pass found it (before its sends), for operators.
	var pending, failed int
	var oldest int64
	defer func() {
		if ctx.Err() == nil {
			s.metrics.backlog(pending, failed, oldest, s.now())
		}
	}()
	after := ""
	for ctx.Err() == nil {
		docs, more, err := s.cfg.Store.List(keys.MailOutboxDir(), after, 256)
		if err != nil {
			s.logger.Warn("mail: list outbox", "err", err)
			return next
		}
		now := s.now()
		for _, doc := range docs {
			rec, err := DecodeRecord(doc)
			if err != nil {
				s.logger.Error("mail: bad outbox record", "path", doc.Path, "err", err)
				continue
			}
			if rec.Failed {
				if now.Sub(time.Unix(0, rec.QueuedAt)) > s.cfg.Tuning.MaxAge+s.cfg.Tuning.FailedRetention {
					s.forget(ctx, doc, rec)
					continue
				}
				failed++
				continue
			}
			pending++
			if oldest == 0 || rec.QueuedAt < oldest {
				oldest = rec.QueuedAt
			}
			if now.Sub(time.Unix(0, rec.QueuedAt)) > s.cfg.Tuning.MaxAge {
				// Given up once MaxAge has passed, even with a retry
				// still ahead (one scheduled by an attempt that began
				// before it passed).
				s.giveUp(ctx, doc, rec)
				continue
			}
			if rec.NextAttemptAt > now.UnixNano() {
				if at := time.Unix(0, rec.NextAttemptAt); next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return next
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.attempt(ctx, doc, rec)
			}()
		}
		if more == "" {
			return next
		}
		after = more
	}
	return next
}

// attempt sends one record and commits the outcome: deleted when the
// server accepted it; else its attempt, the next attempt's time and the
// error, or failed when it has been retried for MaxAge. Every commit is
// conditioned on the record as read, so a record another leader moved
// meanwhile is left to that leader.
func (s *Sender) attempt(ctx context.Context, doc *raftstore.Document, rec *Record) {
	if s.now().Sub(time.Unix(0, rec.QueuedAt)) > s.cfg.Tuning.MaxAge {
		s.giveUp(ctx, doc, rec)
		return
	}
	err := s.send(ctx, rec)
	if ctx.Err() != nil {
		return // leadership ended mid-send: the next leader tries again
	}
	cond := []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}}
	if err == nil {
		s.metrics.sent.Inc()
		res, cerr := s.cfg.Store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Conds: cond,
			Ops: []raftstore.Op{{Kind: raftstore.OpDelete, Path: doc.Path, IfExists: true}}})
		if cerr != nil || !res.OK() {
			// The email went out; the record stays and will go again
			// (at-least-once): log so operators can tell duplicates apart.
			s.logger.Warn("mail: sent but not removed from the outbox", "id", rec.ID, "err", errors.Join(cerr, resErr(res)))
		}
		return
	}
	reason := classify(err)
	s.metrics.failed.WithLabelValues(reason).Inc()
	rec.Attempts++
	rec.LastError = truncate(err.Error(), 500)
	rec.NextAttemptAt = s.now().Add(s.backoff(rec.Attempts)).UnixNano()
	s.logger.Warn("mail: send failed; will retry", "id", rec.ID, "project", rec.ProjectID, "attempt", rec.Attempts,
		"reason", reason, "retryAt", time.Unix(0, rec.NextAttemptAt).UTC(), "err", err)
	s.commit(ctx, rec, cond)
}

// giveUp marks a record that outlived MaxAge failed: it stays, visible.
func (s *Sender) giveUp(ctx context.Context, doc *raftstore.Document, rec *Record) {
	rec.Failed = true
	rec.NextAttemptAt = 0
	s.metrics.failed.WithLabelValues("expired").Inc()
	s.logger.Error("mail: giving up on an email", "id", rec.ID, "project", rec.ProjectID, "attempts", rec.Attempts, "lastError", rec.LastError)
	s.commit(ctx, rec, []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}})
}

// forget removes a failed record once its retention has passed.
func (s *Sender) forget(ctx context.Context, doc *raftstore.Document, rec *Record) {
	res, err := s.cfg.Store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(),
		Conds: []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}},
		Ops:   []raftstore.Op{{Kind: raftstore.OpDelete, Path: doc.Path, IfExists: true}}})
	if (err != nil || !res.OK()) && ctx.Err() == nil {
		s.logger.Warn("mail: remove a failed email", "id", rec.ID, "err", errors.Join(err, resErr(res)))
	}
}

func (s *Sender) commit(ctx context.Context, rec *Record, cond []raftstore.Cond) {
	op, err := rec.PutOp()
	if err != nil {
		s.logger.Error("mail: record progress", "id", rec.ID, "err", err)
		return
	}
	res, err := s.cfg.Store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Conds: cond, Ops: []raftstore.Op{op}})
	if err != nil || !res.OK() {
		if ctx.Err() == nil {
			s.logger.Warn("mail: record progress", "id", rec.ID, "err", errors.Join(err, resErr(res)))
		}
	}
}

func resErr(res *raftstore.TxnResult) error {
	if res == nil || res.OK() {
		return nil
	}
	return fmt.Errorf("refused: %s", res.Err)
}

// backoff is the wait after the n-th failed attempt: MinBackoff doubled
// per earlier failure, at most MaxBackoff, and drawn from its upper half so
// that emails failing together do not retry together.
func (s *Sender) backoff(n int) time.Duration {
	d := s.cfg.Tuning.MinBackoff
	for i := 1; i < n && d < s.cfg.Tuning.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.Tuning.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// send delivers one record through its project's server.
func (s *Sender) send(ctx context.Context, rec *Record) error {
	srv, err := s.cfg.Source.MailServer(ctx, rec.ProjectID)
	if err != nil {
		return err
	}
	content, err := s.cfg.Source.OpenMail(rec)
	if err != nil {
		return &openError{err}
	}
	msg := gomail.NewMsg()
	if err := msg.FromFormat(srv.FromName, srv.From); err != nil {
		return &addressError{fmt.Errorf("from %q: %w", srv.From, err)}
	}
	if err := msg.To(rec.To); err != nil {
		return &addressError{fmt.Errorf("to: %w", err)}
	}
	msg.Subject(content.Subject)
	// One Message-ID for every attempt, so that a receiver can tell the
	// duplicates at-least-once delivery may make.
	msg.SetMessageIDWithValue(rec.ID + "." + strconv.FormatInt(rec.QueuedAt, 36) + "@edgebase")
	msg.SetDate()
	msg.SetBodyString(gomail.TypeTextPlain, content.Text)
	if content.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, content.HTML)
	}
	c, err := s.client(srv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Tuning.SendTimeout)
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("send through %s:%d: %w", srv.Host, srv.Port, err)
	}
	return nil
}

// client builds the go-mail client for srv.
func (s *Sender) client(srv Server) (*gomail.Client, error) {
	dial := s.cfg.Dial
	if srv.Operator {
		dial = s.direct
	}
	tlsConf := &tls.Config{ServerName: srv.Host, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}
	opts := []gomail.Option{gomail.WithPort(srv.Port), gomail.WithTimeout(s.cfg.Tuning.SendTimeout), gomail.WithTLSConfig(tlsConf)}
	if s.cfg.HELO != "" {
		opts = append(opts, gomail.WithHELO(s.cfg.HELO))
	}
	enc := true
	switch srv.Security {
	case SecuritySTARTTLS, "":
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case SecurityTLS:
		// go-mail does implicit TLS only with its own dialer; ours (the
		// host policy's) gets the handshake wrapped around it.
		opts = append(opts, gomail.WithSSL())
		dial = tlsDial(dial, tlsConf)
	case SecurityNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
		enc = false
	default:
		return nil, fmt.Errorf("mail: unknown security %q", srv.Security)
	}
	opts = append(opts, gomail.WithDialContextFunc(gomail.DialContextFunc(dial)))
	if srv.Username != "" {
		opts = append(opts, gomail.WithUsername(srv.Username), gomail.WithPassword(srv.Password))
		if enc {
			// PLAIN and LOGIN only over TLS (go-mail checks the connection).
			opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthSCRAMSHA256, gomail.SMTPAuthSCRAMSHA1,
				gomail.SMTPAuthPlain, gomail.SMTPAuthLogin))
		} else {
			// The operator chose a plain relay: PLAIN and LOGIN go in the
			// clear to it.
			opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthPlainNoEnc, gomail.SMTPAuthLoginNoEnc))
		}
	}
	c, err := gomail.NewClient(srv.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("mail: client for %s: %w", srv.Host, err)
	}
	return c, nil
}

// tlsDial wraps dial with a TLS client handshake (implicit TLS).
func tlsDial(dial DialFunc, conf *tls.Config) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

type openError struct{ err error }

func (e *openError) Error() string { return "open queued email: " + e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

type addressError struct{ err error }

func (e *addressError) Error() string { return "address: " + e.err.Error() }
func (e *addressError) Unwrap() error { return e.err }

// classify names a failed attempt's reason for the metric.
func classify(err error) string {
	var se *gomail.SendError
	var oe *openError
	var ae *addressError
	var te *textproto.Error
	var ne net.Error
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.Is(err, ErrNoServer):
		return "no_server"
	case errors.As(err, &oe):
		return "sealed"
	case errors.As(err, &ae):
		return "address"
	case errors.As(err, &se):
		return codeReason(se.ErrorCode(), se.IsTemp())
	case errors.As(err, &te):
		return codeReason(te.Code, te.Code < 500)
	case errors.As(err, &ce), errors.As(err, &ue), errors.As(err, &he):
		return "tls"
	case errors.As(err, &ne):
		return "connect"
	}
	return "other"
}

// codeReason names an SMTP reply code's class (a SendError without a
// code says only whether it was temporary).
func codeReason(code int, temp bool) string {
	switch {
	case code >= 500:
		return "smtp_5xx"
	case code >= 400:
		return "smtp_4xx"
	case temp:
		return "smtp_4xx"
	}
	return "smtp_5xx"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
