package auth_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// record decodes the one outbox record emailOps returned.
func outboxRecord(t *testing.T, ops []raftstore.Op) *mail.Record {
	t.Helper()
	if len(ops) != 1 || ops[0].Kind != raftstore.OpPut || !strings.HasPrefix(ops[0].Path, keys.Under(keys.MailOutboxDir())) {
		t.Fatalf("emailOps returned %+v, want one put in the outbox", ops)
	}
	var r mail.Record
	if err := json.Unmarshal(ops[0].Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Path() != ops[0].Path {
		t.Fatalf("record path %s, op path %s", r.Path(), ops[0].Path)
	}
	return &r
}

var link = "https://app.example.com/auth?mode=verify-email&token=t<1>&project=p"

func TestEmailOpsSealsAndEscapes(t *testing.T) {
	f := newFixture(t, nil)
	ops, err := f.svc.EmailOps(f.pid, auth.EmailVerification, "ada@example.com",
		auth.EmailVars{Code: "482913", Link: link, Email: "ada@example.com", ExpiresMinutes: 10})
	if err != nil {
		t.Fatal(err)
	}
	rec := outboxRecord(t, ops)
	if rec.Content != nil || rec.Sealed == "" || strings.Contains(string(ops[0].Data), "482913") {
		t.Fatalf("the code is stored in the clear: %s", ops[0].Data)
	}
	if rec.To != "ada@example.com" || rec.ProjectID != f.pid || rec.Kind != "verification" || rec.QueuedAt != epoch.UnixNano() {
		t.Fatalf("record %+v", rec)
	}
	c, err := f.svc.OpenMail(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Subject, "acme") || !strings.Contains(c.Text, "482913") || !strings.Contains(c.Text, link) ||
		!strings.Contains(c.Text, "10 minutes") {
		t.Fatalf("rendered %+v", c)
	}
	// The HTML body escapes values; the text body is plain text.
	if strings.Contains(c.HTML, "t<1>") || !strings.Contains(c.HTML, "t%3c1%3e") && !strings.Contains(c.HTML, "t&lt;1&gt;") {
		t.Fatalf("html does not escape the link: %s", c.HTML)
	}
	// A sealed body does not open in another record.
	other := *rec
	other.ID = "someoneelse"
	if _, err := f.svc.OpenMail(&other); !errors.Is(err, auth.ErrSealedCorrupt) {
		t.Fatalf("sealed body opened under another id: %v", err)
	}
}

func TestEmailOpsUsesTheProjectsTemplate(t *testing.T) {
	f := newFixture(t, nil)
	owner := f.authenticate(f.login(ownerEmail, testPassword))
	tpl := auth.EmailTemplate{Subject: "{{.Project}}:\n{{.Code}}", Text: "code={{.Code}} new={{.NewEmail}}", HTML: `<a href="{{.Link}}">{{.Email}}</a>`}
	if _, _, err := f.svc.SetEmailTemplate(bg, owner, auth.EmailChange, tpl); err != nil {
		t.Fatal(err)
	}
	ops, err := f.svc.EmailOps(f.pid, auth.EmailChange, "new@example.com",
		auth.EmailVars{Code: "111222", Link: "javascript:alert(1)", Email: `a"b@example.com`, NewEmail: "new@example.com", ExpiresMinutes: 10})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.OpenMail(outboxRecord(t, ops))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "acme: 111222" || c.Text != "code=111222 new=new@example.com" {
		t.Fatalf("rendered subject %q text %q", c.Subject, c.Text)
	}
	if strings.Contains(c.HTML, "javascript:") || !strings.Contains(c.HTML, "a&#34;b@example.com") {
		t.Fatalf("html not made safe: %s", c.HTML)
	}
	// The other kinds keep their defaults.
	tpls, err := f.svc.EmailTemplates(owner)
	if err != nil {
		t.Fatal(err)
	}
	if !tpls[auth.EmailChange].Custom || tpls[auth.EmailVerification].Custom {
		t.Fatalf("custom flags: %+v", tpls)
	}
}

func TestEmailOpsWithoutKeyStoresClearBody(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{NoSecretKey: true})
	p := c.CreateProject(0)
	svc := c.Nodes[0].Node.Accounts
	ops, err := svc.EmailOps(p.ID, auth.EmailSignInCode, "ada@example.com", auth.EmailVars{Code: "654321", ExpiresMinutes: 10})
	if err != nil {
		t.Fatal(err)
	}
	rec := outboxRecord(t, ops)
	if rec.Content == nil || rec.Sealed != "" || !strings.Contains(rec.Content.Text, "654321") {
		t.Fatalf("record %+v", rec)
	}
	if _, err := svc.EmailOps(p.ID, "welcome", "ada@example.com", auth.EmailVars{}); err == nil {
		t.Fatal("unknown kind queued")
	}
}
