package process

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/internal/testpki"
)

// TestMailAcrossProcesses runs three edgebase processes whose operator SMTP
// server (--smtp-*, password through EDGEBASE_SMTP_PASSWORD) is a real SMTP
// server in the test speaking STARTTLS with AUTH; the processes trust its
// CA through SSL_CERT_FILE, as an operator's would. A project then sets its
// own server (implicit TLS, another password) and a template, and its
// emails go there, rendered from the template. Finally the project's
// server refuses (451) until the leader is killed with SIGKILL: every email
// it had attempted is delivered by the next leader, none lost.
func TestMailAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "smtp")
	caFile := ca.WriteCA(t, dir)
	operator := smtptest.Start(t, smtptest.WithSTARTTLS(ca), smtptest.WithAuth("relay", "relay-pass"))
	tenant := smtptest.Start(t, smtptest.WithImplicitTLS(ca), smtptest.WithAuth("tenant", "tenant-pass"))
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{
		"SSL_CERT_FILE=" + caFile,
		"EDGEBASE_SECRET_KEY_FILE=" + keyFile,
		"EDGEBASE_SMTP_HOST=127.0.0.1",
		"EDGEBASE_SMTP_PORT=" + strconv.Itoa(operator.Port()),
		"EDGEBASE_SMTP_USERNAME=relay",
		"EDGEBASE_SMTP_PASSWORD=relay-pass",
		"EDGEBASE_SMTP_SECURITY=starttls",
		"EDGEBASE_SMTP_FROM=noreply@example.com",
		"EDGEBASE_SMTP_FROM_NAME=Edgebase Ops",
		"EDGEBASE_ALLOW_PRIVATE_HOSTS=127.0.0.1",
	}})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	pr := c.mustCreateProject(n1)
	const auth = "/api/auth"
	const password = "a long process password"
	register := func(p *proc, email string) accountAnswer {
		t.Helper()
		return act(t, c, p, pr, auth, "", map[string]string{"action": "register", "email": email, "password": password}, http.StatusCreated, "")
	}

	// The operator's server: STARTTLS, AUTH, its From.
	ada := register(n1, "ada@example.com")
	act(t, c, n2, pr, auth, ada.Token, map[string]string{"action": "send-verification"}, http.StatusOK, "")
	m := operator.WaitFor(t, "ada@example.com", nil)
	if !m.TLS || m.User != "relay" || m.From != "noreply@example.com" || !strings.Contains(m.Header.Get("From"), "Edgebase Ops") {
		t.Fatalf("operator delivery: tls %v user %q from %q header %q", m.TLS, m.User, m.From, m.Header.Get("From"))
	}
	if v := act(t, c, n3, pr, auth, "", map[string]string{"action": "verify-email", "email": "ada@example.com", "code": smtptest.Code(m)}, http.StatusOK, ""); !v.User.EmailVerified {
		t.Fatalf("verify-email with the emailed code: %+v", v.User)
	}

	// The project's own server and template.
	owner := mustOwnerToken(t, c, n2, pr)
	oh := map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey, "Authorization": "Bearer " + owner}
	put := func(p *proc, path string, body any) {
		t.Helper()
		r, err := doJSON(c.ctx, httpClient, 30*time.Second, http.MethodPut, p.url()+path, oh, body)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("PUT %s on %s: %v %v", path, p.id, r, err)
		}
	}
	put(n2, "/api/auth/smtp", map[string]any{"host": "127.0.0.1", "port": tenant.Port(), "username": "tenant", "password": "tenant-pass",
		"from": "accounts@tenant.example", "fromName": "Tenant", "security": "tls"})
	put(n3, "/api/auth/email-templates/password-reset", map[string]string{"subject": "Tenant reset", "text": "Reset with {{.Code}} ({{.ExpiresMinutes}} min)."})
	act(t, c, n1, pr, auth, "", map[string]string{"action": "request-password-reset", "email": "ada@example.com"}, http.StatusOK, "")
	m = tenant.WaitFor(t, "ada@example.com", nil)
	if !m.TLS || m.User != "tenant" || m.From != "accounts@tenant.example" || m.Subject != "Tenant reset" ||
		!strings.HasPrefix(strings.TrimSpace(m.Text), "Reset with "+smtptest.Code(m)+" (10 min).") || m.HTML != "" {
		t.Fatalf("tenant delivery: tls %v user %q from %q subject %q text %q html %q", m.TLS, m.User, m.From, m.Subject, m.Text, m.HTML)
	}
	if len(operator.To("ada@example.com")) != 1 {
		t.Fatal("the project's email also went through the operator's server")
	}

	// The project's server refuses; every email is attempted (the attempt
	// committed in its record), then the leader dies.
	tenant.Reject(1_000_000, 451)
	const n = 6
	var emails []string
	for i := range n {
		e := fmt.Sprintf("user%d@example.com", i)
		register(c.nodes[i%3], e)
		act(t, c, c.nodes[(i+1)%3], pr, auth, "", map[string]string{"action": "request-password-reset", "email": e}, http.StatusOK, "")
		emails = append(emails, e)
	}
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if a := tenant.Attempts(); a < 1+n {
			return fmt.Errorf("%d attempts, want every one of %d emails attempted", a-1, n)
		}
		return nil
	})
	leader := c.mustLeader(n1, 30*time.Second)
	leader.mustKill9()
	tenant.AcceptAll()
	var survivor *proc
	for _, p := range c.nodes {
		if p != leader {
			survivor = p
			break
		}
	}
	var next *proc
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if next = c.mustLeader(survivor, 60*time.Second); next == leader {
			return fmt.Errorf("%s still names the killed %s as leader", survivor.id, leader.id)
		}
		return nil
	})
	delivered := map[string]int{}
	checkFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		missing := 0
		for _, e := range emails {
			delivered[e] = len(tenant.To(e))
			if delivered[e] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d emails not delivered after the failover", missing, n)
		}
		return nil
	})
	dups := 0
	for _, k := range delivered {
		dups += k - 1
	}
	t.Logf("after the failover: %d emails delivered, %d duplicates", n, dups)
	// The killed node comes back and the cluster is whole.
	leader.mustStart()
	c.mustReady(leader, 60*time.Second)
	if v := metricValue(t, c, next, "edgebase_mail_sent_total"); v < n {
		t.Fatalf("edgebase_mail_sent_total on the new leader = %v, want ≥ %d", v, n)
	}
}

// mustOwnerToken logs the project's owner in through p.
func mustOwnerToken(t *testing.T, c *cluster, p *proc, pr project) string {
	t.Helper()
	a := act(t, c, p, pr, "/api/auth", "", map[string]string{"action": "login", "email": ownerEmail, "password": ownerPassword}, http.StatusOK, "")
	if a.Token == "" {
		t.Fatalf("owner login: %+v", a)
	}
	return a.Token
}

// metricValue sums the samples of metric on p's /metrics.
func metricValue(t *testing.T, c *cluster, p *proc, metric string) float64 {
	t.Helper()
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodGet, p.url()+"/metrics", nil, nil)
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("GET /metrics on %s: %v %v", p.id, r, err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) || (len(line) > len(metric) && line[len(metric)] != ' ' && line[len(metric)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
