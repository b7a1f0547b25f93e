package auth

import (
	"context"
	"errors"
	"fmt"
	netmail "net/mail"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/mail"
	"github.com/edgebase/edgebase/raftstore"
)

// SMTPSettings is an SMTP server as a project (PUT /api/auth/smtp) or the
// operator (--smtp-*) sets it. Password is the clear password in a request
// or in the operator's config; stored, it is sealed with the cluster key.
type SMTPSettings struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	From     string `json:"from"`
	FromName string `json:"fromName,omitempty"`
	// Security is "starttls" (required STARTTLS, port 587), "tls" (implicit
	// TLS, port 465) or "none" (plain; only for a host the operator allowed).
	Security string `json:"security"`
}

// SMTPView is a project's SMTP server as the API shows it: never the
// password, only whether one is set.
type SMTPView struct {
	Host        string `json:"host"`
	Port        int    `json:"port"`
	Username    string `json:"username"`
	From        string `json:"from"`
	FromName    string `json:"fromName"`
	Security    string `json:"security"`
	PasswordSet bool   `json:"passwordSet"`
}

// storedSMTP is the document at keys.SMTP: the settings with the password
// sealed (AAD smtpAAD(pid)).
type storedSMTP struct {
	SMTPView
	SealedPassword string `json:"sealedPassword,omitempty"`
	UpdatedAt      string `json:"updatedAt"`
}

func smtpAAD(pid string) []byte { return []byte("edgebase smtp password\x00" + pid) }

// Bounds of the SMTP settings.
const (
	maxSMTPHost     = 253
	maxSMTPUsername = 256
	maxSMTPPassword = 1024
	maxSMTPFromName = 100
)

// defaultPorts are the ports of each security when the request names none.
var defaultPorts = map[string]int{mail.SecuritySTARTTLS: 587, mail.SecurityTLS: 465, mail.SecurityNone: 25}

func invalidField(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))}
}

// checkSMTP validates and normalizes settings a tenant gave: the host is
// judged by the host policy (a private or loopback host only when the
// operator allowed it), and "none" is only for a host on a private network
// the operator allowed, never a public one across the internet.
func (s *Service) checkSMTP(ctx context.Context, in *SMTPSettings) error {
	in.Host = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(in.Host)), ".")
	if in.Security == "" {
		in.Security = mail.SecuritySTARTTLS
	}
	port, ok := defaultPorts[in.Security]
	if !ok {
		return invalidField("security", "security must be starttls, tls or none")
	}
	if in.Port == 0 {
		in.Port = port
	}
	if in.Port < 1 || in.Port > 65535 {
		return invalidField("port", "port must be 1..65535")
	}
	if in.Host == "" || len(in.Host) > maxSMTPHost || strings.ContainsAny(in.Host, " /:@[]\\\t\r\n") {
		return invalidField("host", "host must be a host name or an IPv4 address, without a port")
	}
	if err := s.hostPolicy.Check(ctx, in.Host); err != nil {
		if errors.Is(err, ErrHostNotAllowed) {
			return invalidField("host", "%v", err)
		}
		return fmt.Errorf("judge smtp host: %w", err)
	}
	if in.Security == mail.SecurityNone {
		if err := s.privateOnly(ctx, in.Host); err != nil {
			return err
		}
	}
	addr, err := netmail.ParseAddress(in.From)
	if err != nil || addr.Name != "" || strings.ContainsAny(in.From, "<>\r\n") {
		return invalidField("from", "from must be an email address like noreply@example.com")
	}
	in.From = addr.Address
	in.FromName = strings.TrimSpace(in.FromName)
	if utf8.RuneCountInString(in.FromName) > maxSMTPFromName || strings.ContainsAny(in.FromName, "\r\n") {
		return invalidField("fromName", "fromName must be one line of at most %d characters", maxSMTPFromName)
	}
	if len(in.Username) > maxSMTPUsername || strings.ContainsAny(in.Username, "\r\n") {
		return invalidField("username", "username must be one line of at most %d bytes", maxSMTPUsername)
	}
	if len(in.Password) > maxSMTPPassword {
		return invalidField("password", "password must be at most %d bytes", maxSMTPPassword)
	}
	if in.Password != "" && in.Username == "" {
		return invalidField("username", "a password needs a username")
	}
	return nil
}

// privateOnly refuses security "none" for a host with a public address:
// the password and the codes would cross the internet in the clear. The
// host policy has already refused internal addresses the operator did not
// allow.
func (s *Service) privateOnly(ctx context.Context, host string) error {
	refuse := invalidField("security", "security none is only for a relay on a private network the operator allowed (--allow-private-hosts); use starttls or tls")
	if ip, err := netip.ParseAddr(host); err == nil {
		if !internal(ip) {
			return refuse
		}
		return nil
	}
	addrs, err := s.hostPolicy.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return invalidField("host", "%s does not resolve", host)
	}
	for _, ip := range addrs {
		if !internal(ip) {
			return refuse
		}
	}
	return nil
}

// SetSMTP stores the project's own SMTP server; owners only (judged again
// at the commit). A password is sealed with the cluster key; an empty one
// keeps the password stored for the same username.
func (s *Service) SetSMTP(ctx context.Context, p *Principal, in SMTPSettings) (*SMTPView, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if err := s.checkSMTP(ctx, &in); err != nil {
		return nil, 0, err
	}
	st := storedSMTP{SMTPView: SMTPView{Host: in.Host, Port: in.Port, Username: in.Username, From: in.From,
		FromName: in.FromName, Security: in.Security}, UpdatedAt: timestamp(s.now())}
	switch {
	case in.Password != "":
		if s.sealer == nil {
			return nil, 0, ErrSMTPNoSecretKey
		}
		sealed, err := s.sealer.Seal([]byte(in.Password), smtpAAD(p.ProjectID))
		if err != nil {
			return nil, 0, fmt.Errorf("seal smtp password: %w", err)
		}
		st.SealedPassword = sealed
	case in.Username != "":
		var old storedSMTP
		ok, err := s.getJSON(keys.SMTP(p.ProjectID), &old)
		if err != nil {
			return nil, 0, err
		}
		if !ok || old.SealedPassword == "" || old.Username != in.Username {
			return nil, 0, invalidField("password", "password is required with a new username")
		}
		st.SealedPassword = old.SealedPassword
	}
	st.PasswordSet = st.SealedPassword != ""
	res, err := s.commitAs(ctx, p,
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.SMTP(p.ProjectID), Data: mustJSON(st)},
		s.auditOp(p.ProjectID, AuditEvent{Type: AuditSMTPChanged, UserID: p.UserID, ActorID: p.UserID,
			Detail: map[string]string{"host": st.Host, "security": st.Security}}))
	if err != nil {
		return nil, 0, err
	}
	return &st.SMTPView, res.Revision, nil
}

// SMTP returns the project's own SMTP server (ErrSMTPNotSet when it uses
// the cluster's default); owners only.
func (s *Service) SMTP(p *Principal) (*SMTPView, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	var st storedSMTP
	ok, err := s.getJSON(keys.SMTP(p.ProjectID), &st)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrSMTPNotSet
	}
	return &st.SMTPView, nil
}

// DeleteSMTP removes the project's own SMTP server: its email goes through
// the cluster's default again. Owners only.
func (s *Service) DeleteSMTP(ctx context.Context, p *Principal) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	res, err := s.commitAs(ctx, p,
		raftstore.Op{Kind: raftstore.OpDelete, Path: keys.SMTP(p.ProjectID), IfExists: true},
		s.auditOp(p.ProjectID, AuditEvent{Type: AuditSMTPChanged, UserID: p.UserID, ActorID: p.UserID,
			Detail: map[string]string{"deleted": "true"}}))
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// MailServer is the SMTP server project pid's email goes through: its own
// (password opened), else the operator's default, else mail.ErrNoServer.
// It is the mail sender's mail.Source, with OpenMail.
func (s *Service) MailServer(_ context.Context, pid string) (mail.Server, error) {
	var st storedSMTP
	ok, err := s.getJSON(keys.SMTP(pid), &st)
	if err != nil {
		return mail.Server{}, err
	}
	if !ok {
		d := s.smtpDefault
		if d.Host == "" {
			return mail.Server{}, mail.ErrNoServer
		}
		port := d.Port
		if port == 0 {
			port = defaultPorts[d.Security]
		}
		return mail.Server{Host: d.Host, Port: port, Username: d.Username, Password: d.Password, From: d.From,
			FromName: d.FromName, Security: d.Security, Operator: true}, nil
	}
	srv := mail.Server{Host: st.Host, Port: st.Port, Username: st.Username, From: st.From, FromName: st.FromName, Security: st.Security}
	if st.SealedPassword != "" {
		pw, err := s.sealer.Open(st.SealedPassword, smtpAAD(pid))
		if err != nil {
			return mail.Server{}, fmt.Errorf("open smtp password of %s: %w", pid, err)
		}
		srv.Password = string(pw)
	}
	return srv, nil
}

// ---- templates ----

// TemplateView is one kind's template as the API shows it.
type TemplateView struct {
	EmailTemplate
	// Custom is set when the owner replaced the default.
	Custom bool `json:"custom"`
}

// Bounds of a template.
const (
	maxTemplateSubject = 500
	maxTemplateText    = 20000
	maxTemplateHTML    = 100000
)

// EmailTemplates returns every kind's template (the default where the
// owner set none); owners only.
func (s *Service) EmailTemplates(p *Principal) (map[EmailKind]TemplateView, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	tpls, custom, err := s.templates(p.ProjectID)
	if err != nil {
		return nil, err
	}
	out := make(map[EmailKind]TemplateView, len(tpls))
	for k, t := range tpls {
		out[k] = TemplateView{EmailTemplate: t, Custom: custom[k]}
	}
	return out, nil
}

// CheckTemplate parses and executes t with sample values: a template that
// does not parse, names a field that does not exist, or fails to run is
// refused naming its field (subject, text or html).
func CheckTemplate(t EmailTemplate) error {
	switch {
	case strings.TrimSpace(t.Subject) == "":
		return invalidField("subject", "subject is required")
	case len(t.Subject) > maxTemplateSubject:
		return invalidField("subject", "subject must be at most %d bytes", maxTemplateSubject)
	case strings.TrimSpace(t.Text) == "":
		return invalidField("text", "text is required: every email has a plain text body")
	case len(t.Text) > maxTemplateText:
		return invalidField("text", "text must be at most %d bytes", maxTemplateText)
	case len(t.HTML) > maxTemplateHTML:
		return invalidField("html", "html must be at most %d bytes", maxTemplateHTML)
	}
	// With every field set and with every optional one empty, so that both
	// sides of an {{if .Link}} run.
	for _, d := range []templateData{sampleData, {Code: sampleData.Code, Email: sampleData.Email, Project: sampleData.Project, ExpiresMinutes: 10}} {
		if _, err := t.render(d); err != nil {
			return err
		}
	}
	return nil
}

// SetEmailTemplate replaces kind's template; owners only.
func (s *Service) SetEmailTemplate(ctx context.Context, p *Principal, kind EmailKind, t EmailTemplate) (*TemplateView, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if !validKind(kind) {
		return nil, 0, ErrTemplateKindNotFound
	}
	if err := CheckTemplate(t); err != nil {
		return nil, 0, err
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpPut, Path: keys.MailTemplate(p.ProjectID, string(kind)), Data: mustJSON(t)})
	if err != nil {
		return nil, 0, err
	}
	return &TemplateView{EmailTemplate: t, Custom: true}, res.Revision, nil
}

// ResetEmailTemplate restores kind's default template; owners only.
func (s *Service) ResetEmailTemplate(ctx context.Context, p *Principal, kind EmailKind) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if !validKind(kind) {
		return 0, ErrTemplateKindNotFound
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.MailTemplate(p.ProjectID, string(kind)), IfExists: true})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}
