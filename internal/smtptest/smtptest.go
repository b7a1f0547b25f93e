// Package smtptest runs a real SMTP server (github.com/emersion/go-smtp) on
// 127.0.0.1 for one test and keeps every message it accepts, parsed into
// the parts tests assert on (subject, text and HTML bodies, the code an
// email carries). It is an oracle independent of the sender: it parses the
// wire bytes with the standard library's MIME readers, not go-mail's.
//
// Options turn on STARTTLS or implicit TLS (with internal/testpki
// certificates), require AUTH PLAIN/LOGIN, and make the server refuse the
// next messages with a chosen SMTP status (4xx to test retries, 5xx to test
// giving up).
package smtptest

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/edgebase/edgebase/internal/testpki"
)

// Message is one email the server accepted.
type Message struct {
	// From is the envelope sender (MAIL FROM); To the envelope recipients.
	From string
	To   []string
	// Header is the parsed message header; Subject is decoded (RFC 2047).
	Header  mail.Header
	Subject string
	// Text and HTML are the decoded bodies of the text/plain and text/html
	// parts (a single-part message fills the one its type names).
	Text, HTML string
	// Raw is the DATA exactly as received.
	Raw []byte
	// TLS reports whether the message arrived over TLS (STARTTLS or
	// implicit); User is the name it authenticated as ("" when none).
	TLS  bool
	User string
	// Received is when DATA completed.
	Received time.Time
}

// Option configures Start.
type Option func(*config)

type config struct {
	ca          *testpki.CA
	implicitTLS bool
	user, pass  string
	mechs       []string
	delay       time.Duration
}

// WithSTARTTLS offers STARTTLS with a certificate for 127.0.0.1/localhost
// issued by ca (a client must trust ca.Pool).
func WithSTARTTLS(ca *testpki.CA) Option { return func(c *config) { c.ca = ca } }

// WithImplicitTLS makes the listener speak TLS from the first byte (the
// "smtps" of port 465), with a certificate issued by ca.
func WithImplicitTLS(ca *testpki.CA) Option {
	return func(c *config) { c.ca, c.implicitTLS = ca, true }
}

// WithAuth requires AUTH (PLAIN or LOGIN) as user/pass before MAIL.
func WithAuth(user, pass string) Option { return func(c *config) { c.user, c.pass = user, pass } }

// WithAuthMechanisms limits the AUTH mechanisms offered (sasl.Plain "PLAIN",
// sasl.Login "LOGIN"), to prove a client speaks the one a server insists on.
func WithAuthMechanisms(mechs ...string) Option { return func(c *config) { c.mechs = mechs } }

// WithDelay makes the server take d to answer each DATA, as a remote
// relay does: a sender killed during that time has sent a message whose
// acceptance it never learns.
func WithDelay(d time.Duration) Option { return func(c *config) { c.delay = d } }

// Server is a running test SMTP server.
type Server struct {
	srv  *smtp.Server
	addr *net.TCPAddr
	cfg  config

	mu       sync.Mutex
	msgs     []*Message
	rejects  []*smtp.SMTPError // answers for the next DATA commands, in order
	attempts int               // DATA commands seen, accepted or not
	closed   bool
}

// Start listens on 127.0.0.1 (a free port) and serves until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{}
	for _, o := range opts {
		o(&s.cfg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.addr = l.Addr().(*net.TCPAddr)
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.MaxRecipients = 100
	// Auth without TLS is allowed only when no TLS is configured at all, so
	// a TLS test proves the client did not send its password in the clear.
	srv.AllowInsecureAuth = s.cfg.ca == nil
	srv.ErrorLog = log.New(&testLog{t: t, s: s}, "smtptest: ", 0)
	if s.cfg.ca != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.cfg.ca.TLSCertificate(t, "smtp")}, MinVersion: tls.VersionTLS12}
		if s.cfg.implicitTLS {
			l = tls.NewListener(l, srv.TLSConfig)
		}
	}
	s.srv = srv
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // returns when Close closes the listener
	}()
	t.Cleanup(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		_ = srv.Close()
		<-done
	})
	return s
}

// Addr is "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr.String() }

// Host is "127.0.0.1".
func (s *Server) Host() string { return s.addr.IP.String() }

// Port is the listening port.
func (s *Server) Port() int { return s.addr.Port }

// Messages returns a copy of the list of accepted messages, in arrival order.
func (s *Server) Messages() []*Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Message(nil), s.msgs...)
}

// To returns the accepted messages with to among their recipients.
func (s *Server) To(to string) []*Message {
	var out []*Message
	for _, m := range s.Messages() {
		if m.HasRecipient(to) {
			out = append(out, m)
		}
	}
	return out
}

// Attempts counts the DATA commands the server saw, including refused ones.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Reject makes the server answer the next n messages' DATA with code (e.g.
// 451 for a temporary failure, 550 for a permanent one) instead of
// accepting them.
func (s *Server) Reject(n, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.rejects = append(s.rejects, &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCodeNotSet,
			Message: "smtptest: refused on request (" + strconv.Itoa(code) + ")"})
	}
}

// AcceptAll drops the refusals Reject queued: the next messages are accepted.
func (s *Server) AcceptAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejects = nil
}

// WaitTimeout bounds WaitFor.
const WaitTimeout = 30 * time.Second

// WaitFor polls until a message to `to` that match accepts (nil: any) has
// arrived, and returns it; the test fails after WaitTimeout.
func (s *Server) WaitFor(t testing.TB, to string, match func(*Message) bool) *Message {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		for _, m := range s.To(to) {
			if match == nil || match(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("smtptest: no matching message to %s within %v (%d messages held, %d attempts)", to, WaitTimeout, len(s.Messages()), s.Attempts())
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HasRecipient reports whether addr is among the envelope recipients
// (case-insensitive, as mailbox domains are).
func (m *Message) HasRecipient(addr string) bool {
	for _, r := range m.To {
		if strings.EqualFold(r, addr) {
			return true
		}
	}
	return false
}

var codeRE = regexp.MustCompile(`\b[0-9]{6}\b`)

// Code extracts the 6-digit code the email carries (first in the text
// body, else in the HTML); "" when there is none.
func Code(m *Message) string {
	if c := codeRE.FindString(m.Text); c != "" {
		return c
	}
	return codeRE.FindString(m.HTML)
}

// session is one SMTP connection's state.
type session struct {
	s    *Server
	conn *smtp.Conn
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.cfg.user == "" {
		return nil
	}
	if ss.s.cfg.mechs != nil {
		return ss.s.cfg.mechs
	}
	return []string{sasl.Plain, sasl.Login}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		if user != ss.s.cfg.user || pass != ss.s.cfg.pass {
			return smtp.ErrAuthFailed
		}
		ss.user = user
		return nil
	}
	offered := false
	for _, m := range ss.AuthMechanisms() {
		offered = offered || m == mech
	}
	if !offered {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.cfg.user != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s := ss.s
	if s.cfg.delay > 0 {
		time.Sleep(s.cfg.delay)
	}
	s.mu.Lock()
	s.attempts++
	if len(s.rejects) > 0 {
		e := s.rejects[0]
		s.rejects = s.rejects[1:]
		s.mu.Unlock()
		return e
	}
	s.mu.Unlock()
	m, err := parse(raw)
	if err != nil {
		// Accepting a message the oracle cannot read would hide a sender bug.
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "smtptest: unparsable message: " + err.Error()}
	}
	m.From, m.To, m.User, m.Received = ss.from, append([]string(nil), ss.to...), ss.user, time.Now()
	_, m.TLS = ss.conn.TLSConnectionState()
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }

// loginServer is the server side of AUTH LOGIN (draft-murchison-sasl-login),
// which go-sasl no longer provides: it asks for the user name, then the
// password.
type loginServer struct {
	check func(user, pass string) error
	step  int
	user  string
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if resp != nil { // initial response carries the user name
			l.user = string(resp)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.step++
		l.user = string(resp)
		return []byte("Password:"), false, nil
	case 2:
		l.step++
		return nil, true, l.check(l.user, string(resp))
	}
	return nil, false, errors.New("smtptest: unexpected LOGIN response")
}

// parse reads a message into its header, subject and text/HTML bodies.
func parse(raw []byte) (*Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	m := &Message{Header: msg.Header, Raw: raw}
	dec := new(mime.WordDecoder)
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return nil, fmt.Errorf("subject: %w", err)
	}
	if err := m.walk(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body); err != nil {
		return nil, err
	}
	return m, nil
}

// walk fills Text and HTML from one MIME entity, descending into multiparts
// (go-mail sends multipart/alternative, possibly inside multipart/mixed).
func (m *Message) walk(ctype, cte string, body io.Reader) error {
	if ctype == "" {
		ctype = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return fmt.Errorf("content type %q: %w", ctype, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s part: %w", mt, err)
			}
			if err := m.walk(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err != nil {
				return err
			}
		}
	}
	var r io.Reader = body
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &stripNewlines{r: body})
	case "", "7bit", "8bit", "binary":
	default:
		return fmt.Errorf("unknown transfer encoding %q", cte)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s body: %w", mt, err)
	}
	switch mt {
	case "text/plain":
		m.Text += string(b)
	case "text/html":
		m.HTML += string(b)
	}
	return nil
}

// stripNewlines drops CR and LF so base64 wrapped at 76 columns decodes.
type stripNewlines struct{ r io.Reader }

func (s *stripNewlines) Read(p []byte) (int, error) {
	for {
		n, err := s.r.Read(p)
		j := 0
		for _, c := range p[:n] {
			if c != '\r' && c != '\n' {
				p[j] = c
				j++
			}
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}

// testLog sends the server's internal errors to the test log while the
// test runs (t.Logf after the test ends would panic).
type testLog struct {
	t testing.TB
	s *Server
}

func (l *testLog) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.s.closed {
		l.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
