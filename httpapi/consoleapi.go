package httpapi

import (
	"context"
	"net/http"
)

// Routes the admin console needs beyond the SDK's: an owner's view of one
// user's sessions. (The operator routes are in admin.go and
// adminconsole.go; the push reads in pushapi.go.)

// userSessionRoutes registers them (called from accountsRoutes).
func (s *Server) userSessionRoutes() {
	s.mux.HandleFunc("/api/auth/users/{id}/sessions", s.handleUserSessions)
	s.mux.HandleFunc("/api/auth/users/{id}/sessions/{sessionId}", s.handleUserSession)
}

// handleUserSessions serves GET /api/auth/users/{id}/sessions (owner).
func (s *Server) handleUserSessions(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		if r.Method != http.MethodGet {
			return methodNotAllowed("GET")
		}
		if err := checkParams(r, ""); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
		defer cancel()
		p, err := s.ownerCall(ctx, r)
		if err != nil {
			return err
		}
		list, err := s.accounts.UserSessions(p, r.PathValue("id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
		return nil
	}()
	if err != nil {
		s.writeError(w, r, err)
	}
}

// handleUserSession serves DELETE /api/auth/users/{id}/sessions/{sessionId}
// (owner): the revoke commits only while the caller is still an owner with
// a live session (auth.RevokeUserSession).
func (s *Server) handleUserSession(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		if r.Method != http.MethodDelete {
			return methodNotAllowed("DELETE")
		}
		if err := checkParams(r, ""); err != nil {
			return err
		}
		ctx, cancel := s.writeCtx(r)
		defer cancel()
		p, err := s.ownerCall(ctx, r)
		if err != nil {
			return err
		}
		rev, err := s.accounts.RevokeUserSession(ctx, p, r.PathValue("id"), r.PathValue("sessionId"), s.clientAddr(r))
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}()
	if err != nil {
		s.writeError(w, r, err)
	}
}
