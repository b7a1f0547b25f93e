package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/edgebase/edgebase/auth"
)

// Owner administration of a project's users (GET /api/auth/users,
// /api/auth/users/{id}, POST /api/auth/users/{id}/{op}) and a user's own
// sessions (the list-sessions and revoke-session actions). Every route
// checks the project key after a strong sync (projectKey), so an owner's
// reads and checks see every write acknowledged anywhere before.

// handleUsers serves GET /api/auth/users?query=&cursor=&limit=.
func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) {
	if err := s.listUsers(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed("GET")
	}
	if err := checkParams(r, "", "query", "cursor", "limit"); err != nil {
		return err
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auth.MaxUserPage {
			return badField("limit", "invalid_argument", "limit must be an integer from 1 to "+strconv.Itoa(auth.MaxUserPage))
		}
		limit = n
	}
	p, err := s.ownerCall(r.Context(), r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	users, next, err := s.accounts.ListUsers(p, q.Get("query"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": users, "nextCursor": next})
	return nil
}

// handleUser serves GET and DELETE /api/auth/users/{id}.
func (s *Server) handleUser(w http.ResponseWriter, r *http.Request) {
	if err := s.userAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) userAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		return methodNotAllowed("GET", "DELETE")
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
	id := r.PathValue("id")
	if r.Method == http.MethodGet {
		u, err := s.accounts.GetUser(p, id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"user": u})
		return nil
	}
	rev, err := s.accounts.DeleteUser(ctx, p, id, s.clientAddr(r))
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true, "deleted": true})
}

// handleUserOp serves POST /api/auth/users/{id}/disable, /enable and
// /revoke-sessions.
func (s *Server) handleUserOp(w http.ResponseWriter, r *http.Request) {
	if err := s.userOp(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) userOp(w http.ResponseWriter, r *http.Request) error {
	op := r.PathValue("op")
	if op != "disable" && op != "enable" && op != "revoke-sessions" {
		return newError(http.StatusNotFound, "not_found", "no such operation on a user: use disable, enable or revoke-sessions")
	}
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
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
	id, addr := r.PathValue("id"), s.clientAddr(r)
	var u *auth.User
	var rev uint64
	switch op {
	case "disable":
		u, rev, err = s.accounts.DisableUser(ctx, p, id, addr)
	case "enable":
		u, rev, err = s.accounts.EnableUser(ctx, p, id, addr)
	default:
		rev, err = s.accounts.RevokeUserSessions(ctx, p, id, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]any{"user": u})
}

// ownerCall checks the project key (after a strong sync) and resolves the
// bearer token of that project, which must be an owner's.
func (s *Server) ownerCall(ctx context.Context, r *http.Request) (*auth.Principal, error) {
	p, err := s.projectCaller(ctx, r)
	if err != nil {
		return nil, err
	}
	if p.Role != auth.RoleOwner {
		return nil, auth.ErrForbidden
	}
	return p, nil
}

func (s *Server) actListSessions(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	list, err := s.accounts.ListSessions(p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
	return nil
}

func (s *Server) actRevokeSession(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	if err := required("sessionId", b.SessionID); err != nil {
		return err
	}
	rev, err := s.accounts.RevokeSession(ctx, p, b.SessionID, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
}
