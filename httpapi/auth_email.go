package httpapi

import (
	"context"
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// Scaffolding: the email-actions helper replaces this file.

func (s *Server) handleAuthSettings(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) actVerifyEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actRequestPasswordReset(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actRequestEmailCode(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actLoginEmailCode(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actSignInAnonymously(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actSendVerification(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
func (s *Server) actChangeEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
func (s *Server) actDeleteAccount(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
func (s *Server) actLinkEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
