package smtptest

import (
	"crypto/tls"
	"net/smtp"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/internal/testpki"
)

// A multipart/alternative message with a quoted-printable text part and a
// base64 HTML part, as mail clients send them.
const sample = "From: Edge <noreply@example.com>\r\n" +
	"To: a@example.com\r\n" +
	"Subject: =?UTF-8?q?Your_code_=E2=9C=93?=\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b1\"\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Your code is 493817 =E2=80=94 valid for 10 minutes.=\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+WW91ciBjb2RlIGlzIDxiPjQ5MzgxNzwvYj48L3A+\r\n" +
	"--b1--\r\n"

func send(t *testing.T, s *Server, pool *tlsPool, user, pass string) error {
	t.Helper()
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if pool != nil {
		if err := c.StartTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: pool.ca.Pool}); err != nil {
			return err
		}
	}
	if user != "" {
		if err := c.Auth(smtp.PlainAuth("", user, pass, "127.0.0.1")); err != nil {
			return err
		}
	}
	if err := c.Mail("noreply@example.com"); err != nil {
		return err
	}
	if err := c.Rcpt("a@example.com"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(sample)); err != nil {
		return err
	}
	return w.Close()
}

type tlsPool struct{ ca *testpki.CA }

func TestServerParsesMultipartOverSTARTTLSWithAuth(t *testing.T) {
	ca := testpki.NewCA(t, "smtptest")
	s := Start(t, WithSTARTTLS(ca), WithAuth("u", "p"))
	if err := send(t, s, &tlsPool{ca}, "u", "wrong"); err == nil || !strings.Contains(err.Error(), "535") {
		t.Fatalf("wrong password: err %v, want 535", err)
	}
	if err := send(t, s, &tlsPool{ca}, "u", "p"); err != nil {
		t.Fatal(err)
	}
	m := s.WaitFor(t, "A@example.com", nil)
	if !m.TLS || m.User != "u" || m.From != "noreply@example.com" {
		t.Fatalf("envelope: tls %v user %q from %q", m.TLS, m.User, m.From)
	}
	if m.Subject != "Your code ✓" {
		t.Fatalf("subject %q", m.Subject)
	}
	if m.Text != "Your code is 493817 — valid for 10 minutes." || m.HTML != "<p>Your code is <b>493817</b></p>" {
		t.Fatalf("bodies: text %q html %q", m.Text, m.HTML)
	}
	if Code(m) != "493817" {
		t.Fatalf("code %q", Code(m))
	}
}

func TestServerRejectsOnRequestAndRequiresAuth(t *testing.T) {
	s := Start(t, WithAuth("u", "p"))
	if err := send(t, s, nil, "", ""); err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("no auth: err %v, want 502 auth required", err)
	}
	s.Reject(1, 451)
	if err := send(t, s, nil, "u", "p"); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("rejected: err %v, want 451", err)
	}
	if err := send(t, s, nil, "u", "p"); err != nil {
		t.Fatal(err)
	}
	if n, a := len(s.Messages()), s.Attempts(); n != 1 || a != 2 {
		t.Fatalf("messages %d attempts %d, want 1 and 2", n, a)
	}
}
