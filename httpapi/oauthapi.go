package httpapi

import (
	"context"
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// Scaffolding: the OAuth helper replaces this file.

func (s *Server) handleOAuthProviders(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) handleOAuthProvider(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) handleOAuthStart(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) handleOAuthCallback(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) actOAuthExchange(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	return errNotBuilt
}
func (s *Server) actOAuthLink(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
