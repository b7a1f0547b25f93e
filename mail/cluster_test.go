package mail_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/smtptest"
	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// On a real 3-node cluster: an email queued through a follower (the
// verification code of send-verification) reaches the operator's SMTP
// server over STARTTLS with AUTH, its code verifies the address, and
// emails whose attempts a leader recorded are delivered by the next leader
// after the first one is killed.
func TestClusterDeliversAndResumesAfterFailover(t *testing.T) {
	ca := testpki.NewCA(t, "smtp")
	s := smtptest.Start(t, smtptest.WithSTARTTLS(ca), smtptest.WithAuth("relay", "relay-secret"))
	c := nodetest.Start(t, nodetest.Options{Voters: 3,
		SMTPDefault: auth.SMTPSettings{Host: s.Host(), Port: s.Port(), Username: "relay", Password: "relay-secret",
			From: "noreply@example.com", FromName: "Edgebase", Security: mail.SecuritySTARTTLS},
		MailRootCAs: ca.Pool,
		MailTuning:  mail.Tuning{MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, Poll: 100 * time.Millisecond}})
	leader := c.Leader(15 * time.Second)
	f := c.Followers(leader)[0]
	p := c.CreateProject(f)
	hdr := func(tok string) map[string]string {
		h := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		return h
	}
	register := func(node int, email string) string {
		t.Helper()
		var out struct{ Token string }
		st := c.Do(node, http.MethodPost, "/api/auth", hdr(""), map[string]string{"action": "register", "email": email, "password": "correct horse battery"}, &out)
		if st != http.StatusCreated {
			t.Fatalf("register %s: %d", email, st)
		}
		return out.Token
	}
	sendVerification := func(node int, tok string) {
		t.Helper()
		if st := c.Do(node, http.MethodPost, "/api/auth", hdr(tok), map[string]string{"action": "send-verification"}, nil); st != http.StatusOK {
			t.Fatalf("send-verification: %d", st)
		}
	}

	tok := register(f, "ada@example.com")
	asked := time.Now()
	sendVerification(f, tok)
	m := s.WaitFor(t, "ada@example.com", nil)
	t.Logf("send-verification through a follower to the SMTP server's acceptance: %v", m.Received.Sub(asked))
	if !m.TLS || m.User != "relay" {
		t.Fatalf("tls %v user %q", m.TLS, m.User)
	}
	code := smtptest.Code(m)
	if code == "" {
		t.Fatalf("no code in %q", m.Text)
	}
	var verified struct{ User auth.User }
	if st := c.Do(f, http.MethodPost, "/api/auth", hdr(""), map[string]string{"action": "verify-email", "email": "ada@example.com", "code": code}, &verified); st != http.StatusOK || !verified.User.EmailVerified {
		t.Fatalf("verify-email with the emailed code: %d %+v", st, verified.User)
	}

	// The server refuses for now: the leader records attempts in the tree.
	s.Reject(1000, 451)
	const n = 3
	for i := range n {
		sendVerification(f, register(f, fmt.Sprintf("fail%d@example.com", i)))
	}
	outbox := func(node int) (attempted, total int) {
		docs, _, err := c.Nodes[node].Node.Store.List(keys.MailOutboxDir(), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			r, err := mail.DecodeRecord(d)
			if err != nil {
				t.Fatal(err)
			}
			if r.Attempts > 0 {
				attempted++
			}
		}
		return attempted, len(docs)
	}
	nodetest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if a, total := outbox(f); a != n || total != n {
			return fmt.Errorf("%d of %d records show an attempt, want %d of %d", a, total, n, n)
		}
		return nil
	})
	c.Kill(leader)
	s.AcceptAll()
	newLeader := c.Leader(15 * time.Second)
	for i := range n {
		s.WaitFor(t, fmt.Sprintf("fail%d@example.com", i), nil)
	}
	nodetest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if _, total := outbox(newLeader); total != 0 {
			return fmt.Errorf("%d records left in the outbox", total)
		}
		return nil
	})
}

// A tenant's server is judged again when the sender connects: a setting
// that names a loopback address (stored when its name resolved elsewhere,
// say) gets no connection from the cluster. (The operator's own server on
// loopback is used as configured: TestClusterDeliversAndResumesAfterFailover.)
func TestClusterJudgesTenantServerAtDial(t *testing.T) {
	s := smtptest.Start(t)
	c := nodetest.Start(t, nodetest.Options{Voters: 1,
		MailTuning: mail.Tuning{MinBackoff: time.Hour, Poll: 50 * time.Millisecond}})
	p := c.CreateProject(0)
	n := c.Nodes[0].Node
	// Written past the API's check, as a rebinding would leave it.
	raw := fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"from":"noreply@example.com","security":"none","updatedAt":"2026-11-27T00:00:00Z"}`, s.Port())
	res, err := n.Store.Txn(t.Context(), &raftstore.Txn{Time: time.Now().UnixNano(),
		Ops: []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.SMTP(p.ID), Data: []byte(raw)}}})
	if err != nil || !res.OK() {
		t.Fatalf("store settings: %v %v", res, err)
	}
	var reg struct{ Token string }
	hdr := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if st := c.Do(0, http.MethodPost, "/api/auth", hdr, map[string]string{"action": "register", "email": "ada@example.com", "password": "correct horse battery"}, &reg); st != http.StatusCreated {
		t.Fatalf("register: %d", st)
	}
	hdr["Authorization"] = "Bearer " + reg.Token
	if st := c.Do(0, http.MethodPost, "/api/auth", hdr, map[string]string{"action": "send-verification"}, nil); st != http.StatusOK {
		t.Fatalf("send-verification: %d", st)
	}
	nodetest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		docs, _, err := n.Store.List(keys.MailOutboxDir(), "", 10)
		if err != nil || len(docs) != 1 {
			return fmt.Errorf("outbox: %d records, %v", len(docs), err)
		}
		r, err := mail.DecodeRecord(docs[0])
		if err != nil {
			return err
		}
		if r.Attempts == 0 || !strings.Contains(r.LastError, "not allowed") {
			return fmt.Errorf("record: attempts %d lastError %q", r.Attempts, r.LastError)
		}
		return nil
	})
	if len(s.Messages()) != 0 || s.Attempts() != 0 {
		t.Fatalf("the sender reached a loopback server the operator did not allow: %d messages", len(s.Messages()))
	}
}
