package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/raftstore"
)

// EmailKind names what an email is for; each kind has a template.
type EmailKind string

// The kinds of email the service sends.
const (
	EmailVerification  EmailKind = "verification"
	EmailPasswordReset EmailKind = "password-reset"
	EmailSignInCode    EmailKind = "sign-in-code"
	EmailChange        EmailKind = "change-email"
)

// EmailKinds lists every kind, in the order the API shows them.
var EmailKinds = []EmailKind{EmailVerification, EmailPasswordReset, EmailSignInCode, EmailChange}

// validKind reports whether k is one of EmailKinds.
func validKind(k EmailKind) bool {
	for _, x := range EmailKinds {
		if x == k {
			return true
		}
	}
	return false
}

// EmailVars are the values an email's template may use, besides the
// project's name ({{.Project}}).
type EmailVars struct {
	Code, Link, Email, NewEmail string
	ExpiresMinutes              int
}

// templateData is what a template executes against.
type templateData struct {
	Code, Link, Email, NewEmail, Project string
	ExpiresMinutes                       int
}

// EmailTemplate is one kind's template: Subject and Text are Go
// text/template, HTML is html/template (values are escaped).
type EmailTemplate struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
}

// defaultTemplates are the templates of kinds the owner did not customize.
// They say what the code is for and that ignoring the email is safe.
var defaultTemplates = map[EmailKind]EmailTemplate{
	EmailVerification: {
		Subject: "Verify your email for {{.Project}}",
		Text: "Your verification code for {{.Project}} is {{.Code}}.\n\n" +
			"{{if .Link}}Or open this link to verify {{.Email}}:\n{{.Link}}\n\n{{end}}" +
			"The code expires in {{.ExpiresMinutes}} minutes. If you did not ask for it, ignore this email.\n",
		HTML: `<p>Your verification code for {{.Project}} is <b>{{.Code}}</b>.</p>` +
			`{{if .Link}}<p><a href="{{.Link}}">Verify {{.Email}}</a></p>{{end}}` +
			`<p>The code expires in {{.ExpiresMinutes}} minutes. If you did not ask for it, ignore this email.</p>`,
	},
	EmailPasswordReset: {
		Subject: "Reset your {{.Project}} password",
		Text: "Your password reset code for {{.Project}} is {{.Code}}.\n\n" +
			"{{if .Link}}Or open this link to choose a new password:\n{{.Link}}\n\n{{end}}" +
			"The code expires in {{.ExpiresMinutes}} minutes. If you did not ask to reset your password, ignore this email: your password stays as it is.\n",
		HTML: `<p>Your password reset code for {{.Project}} is <b>{{.Code}}</b>.</p>` +
			`{{if .Link}}<p><a href="{{.Link}}">Choose a new password</a></p>{{end}}` +
			`<p>The code expires in {{.ExpiresMinutes}} minutes. If you did not ask to reset your password, ignore this email: your password stays as it is.</p>`,
	},
	EmailSignInCode: {
		Subject: "Your {{.Project}} sign-in code",
		Text: "Your sign-in code for {{.Project}} is {{.Code}}.\n\n" +
			"{{if .Link}}Or open this link to sign in:\n{{.Link}}\n\n{{end}}" +
			"The code expires in {{.ExpiresMinutes}} minutes. If you did not try to sign in, ignore this email.\n",
		HTML: `<p>Your sign-in code for {{.Project}} is <b>{{.Code}}</b>.</p>` +
			`{{if .Link}}<p><a href="{{.Link}}">Sign in</a></p>{{end}}` +
			`<p>The code expires in {{.ExpiresMinutes}} minutes. If you did not try to sign in, ignore this email.</p>`,
	},
	EmailChange: {
		Subject: "Confirm your new email for {{.Project}}",
		Text: "Your code to change your {{.Project}} email from {{.Email}} to {{.NewEmail}} is {{.Code}}.\n\n" +
			"{{if .Link}}Or open this link to confirm:\n{{.Link}}\n\n{{end}}" +
			"The code expires in {{.ExpiresMinutes}} minutes. If you did not ask for this change, ignore this email.\n",
		HTML: `<p>Your code to change your {{.Project}} email from {{.Email}} to {{.NewEmail}} is <b>{{.Code}}</b>.</p>` +
			`{{if .Link}}<p><a href="{{.Link}}">Confirm the change</a></p>{{end}}` +
			`<p>The code expires in {{.ExpiresMinutes}} minutes. If you did not ask for this change, ignore this email.</p>`,
	},
}

// sampleData fills every field, so that validating a template executes
// each of its branches that depend on a field being set.
var sampleData = templateData{Code: "123456", Link: "https://app.example.com/auth?mode=verify-email&token=t&project=p",
	Email: "ada@example.com", NewEmail: "ada.new@example.com", Project: "Example", ExpiresMinutes: 10}

// render executes t against d. The text/template and html/template
// packages keep a template from running away: missing fields are errors,
// and the HTML body escapes every value.
func (t EmailTemplate) render(d templateData) (mail.Content, error) {
	var c mail.Content
	var err error
	if c.Subject, err = execText("subject", t.Subject, d); err != nil {
		return c, err
	}
	// A header cannot hold a line break; a template's own new lines fold.
	c.Subject = strings.Join(strings.Fields(c.Subject), " ")
	if c.Text, err = execText("text", t.Text, d); err != nil {
		return c, err
	}
	if t.HTML != "" {
		h, err := htmltemplate.New("html").Option("missingkey=error").Parse(t.HTML)
		if err != nil {
			return c, &FieldError{Field: "html", Err: fmt.Errorf("%w: %v", ErrInvalidArgument, err)}
		}
		var b bytes.Buffer
		if err := h.Execute(&b, d); err != nil {
			return c, &FieldError{Field: "html", Err: fmt.Errorf("%w: %v", ErrInvalidArgument, err)}
		}
		c.HTML = b.String()
	}
	return c, nil
}

func execText(field, src string, d templateData) (string, error) {
	t, err := texttemplate.New(field).Option("missingkey=error").Parse(src)
	if err != nil {
		return "", &FieldError{Field: field, Err: fmt.Errorf("%w: %v", ErrInvalidArgument, err)}
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", &FieldError{Field: field, Err: fmt.Errorf("%w: %v", ErrInvalidArgument, err)}
	}
	return b.String(), nil
}

// templates returns project pid's templates: the owner's where set
// (keys.MailTemplate), the defaults elsewhere, with whether each is custom.
func (s *Service) templates(pid string) (map[EmailKind]EmailTemplate, map[EmailKind]bool, error) {
	out := make(map[EmailKind]EmailTemplate, len(EmailKinds))
	custom := make(map[EmailKind]bool, len(EmailKinds))
	for _, k := range EmailKinds {
		var t EmailTemplate
		ok, err := s.getJSON(keys.MailTemplate(pid, string(k)), &t)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			out[k], custom[k] = t, true
		} else {
			out[k] = defaultTemplates[k]
		}
	}
	return out, custom, nil
}

// emailOps returns the ops that queue one email (rendered from the
// project's template or the default) to address `to`; the caller commits
// them in its own txn, so the email is queued exactly when the code it
// carries is stored. The body is sealed with the cluster key when there is
// one: it carries a live code.
func (s *Service) emailOps(pid string, kind EmailKind, to string, vars EmailVars) ([]raftstore.Op, error) {
	if !validKind(kind) {
		return nil, fmt.Errorf("auth: unknown email kind %q", kind)
	}
	tpls, _, err := s.templates(pid)
	if err != nil {
		return nil, err
	}
	var p project
	if _, err := s.getJSON(keys.Project(pid), &p); err != nil {
		return nil, err
	}
	d := templateData{Code: vars.Code, Link: vars.Link, Email: vars.Email, NewEmail: vars.NewEmail,
		Project: p.Name, ExpiresMinutes: vars.ExpiresMinutes}
	content, err := tpls[kind].render(d)
	if err != nil {
		// A stored template was checked when it was set; one that fails now
		// (a value it never saw) falls back to the default, so the user
		// still gets the code.
		s.logger.Warn("email template failed; sending the default", "project", pid, "kind", kind, "err", err)
		if content, err = defaultTemplates[kind].render(d); err != nil {
			return nil, fmt.Errorf("render default %s email: %w", kind, err)
		}
	}
	id, err := NewID()
	if err != nil {
		return nil, err
	}
	now := s.now()
	rec := &mail.Record{ID: id, ProjectID: pid, Kind: string(kind), To: to, QueuedAt: now.UnixNano()}
	if s.sealer != nil {
		b, err := json.Marshal(content)
		if err != nil {
			return nil, fmt.Errorf("encode email: %w", err)
		}
		if rec.Sealed, err = s.sealer.Seal(b, mail.SealAAD(id)); err != nil {
			return nil, fmt.Errorf("seal email: %w", err)
		}
	} else {
		rec.Content = &content
	}
	op, err := rec.PutOp()
	if err != nil {
		return nil, err
	}
	return []raftstore.Op{op}, nil
}

// OpenMail returns a queued record's message, opening it when sealed (the
// sender's mail.Source).
func (s *Service) OpenMail(rec *mail.Record) (mail.Content, error) {
	if rec.Content != nil {
		return *rec.Content, nil
	}
	b, err := s.sealer.Open(rec.Sealed, mail.SealAAD(rec.ID))
	if err != nil {
		return mail.Content{}, fmt.Errorf("open queued email %s: %w", rec.ID, err)
	}
	var c mail.Content
	if err := json.Unmarshal(b, &c); err != nil {
		return mail.Content{}, fmt.Errorf("decode queued email %s: %w", rec.ID, err)
	}
	return c, nil
}
