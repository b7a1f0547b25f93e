package httpapi

import (
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// The project's email settings (owners only): its own SMTP server, and the
// templates of the emails the accounts send.

// smtpBody is PUT /api/auth/smtp's body. Port is a pointer so that a
// missing port (the security's default) differs from a bad 0.
type smtpBody struct {
	Host     string `json:"host"`
	Port     *int   `json:"port"`
	Username string `json:"username"`
	Password string `json:"password"`
	From     string `json:"from"`
	FromName string `json:"fromName"`
	Security string `json:"security"`
}

func (s *Server) handleSMTP(w http.ResponseWriter, r *http.Request) {
	if err := s.smtpAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) smtpAction(w http.ResponseWriter, r *http.Request) error {
	var body smtpBody
	switch r.Method {
	case http.MethodGet, http.MethodDelete:
	case http.MethodPut:
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
		if body.Port != nil && *body.Port == 0 {
			return badField("port", "invalid_argument", "port must be 1..65535 (or left out for the security's default)")
		}
	default:
		return methodNotAllowed("GET", "PUT", "DELETE")
	}
	p, err := s.projectCaller(r.Context(), r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		v, err := s.accounts.SMTP(p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	case http.MethodDelete:
		rev, err := s.accounts.DeleteSMTP(ctx, p)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}
	in := auth.SMTPSettings{Host: body.Host, Username: body.Username, Password: body.Password, From: body.From,
		FromName: body.FromName, Security: body.Security}
	if body.Port != nil {
		in.Port = *body.Port
	}
	v, rev, err := s.accounts.SetSMTP(ctx, p, in)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, v)
}

func (s *Server) handleEmailTemplates(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, methodNotAllowed("GET"))
		return
	}
	p, err := s.projectCaller(r.Context(), r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tpls, err := s.accounts.EmailTemplates(p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": tpls})
}

func (s *Server) handleEmailTemplate(w http.ResponseWriter, r *http.Request) {
	if err := s.emailTemplateAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) emailTemplateAction(w http.ResponseWriter, r *http.Request) error {
	var body auth.EmailTemplate
	switch r.Method {
	case http.MethodDelete:
	case http.MethodPut:
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
	default:
		return methodNotAllowed("PUT", "DELETE")
	}
	p, err := s.projectCaller(r.Context(), r)
	if err != nil {
		return err
	}
	kind := auth.EmailKind(r.PathValue("kind"))
	if r.Method == http.MethodDelete {
		rev, err := s.accounts.ResetEmailTemplate(r.Context(), p, kind)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}
	v, rev, err := s.accounts.SetEmailTemplate(r.Context(), p, kind, body)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, v)
}
