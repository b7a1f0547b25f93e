package httpapi

import (
	"context"
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// Scaffolding: the users-and-keys helper replaces this file.

func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNotBuilt) }
func (s *Server) handleUser(w http.ResponseWriter, r *http.Request)  { s.writeError(w, r, errNotBuilt) }
func (s *Server) handleUserOp(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) actListSessions(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
func (s *Server) actRevokeSession(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	return errNotBuilt
}
