package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// Routes the admin console needs beyond the SDK's: an owner's view of one
// user's sessions, and the operator's leadership transfer and project list.
// (The push reads are in pushapi.go.)

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

type transferBody struct {
	ID *string `json:"id"`
}

// handleTransferLeader serves POST /admin/cluster/leader {"id"?}: hand
// leadership to that voter, or to any other voter without id; any node
// serves it (a follower forwards it to the leader). It answers once this
// node knows the new leader.
func (s *Server) handleTransferLeader(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		if r.Method != http.MethodPost {
			return methodNotAllowed("POST")
		}
		var b transferBody
		if err := s.decodeBody(w, r, &b); err != nil {
			return err
		}
		id := ""
		if b.ID != nil {
			id = *b.ID
			if id == "" {
				return badField("id", "invalid_argument", "id must name a voter; leave it out for any other voter")
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		leader, err := s.cluster.TransferLeadershipTo(ctx, id)
		switch {
		case errors.Is(err, raftstore.ErrUnknownNode):
			return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no member with id " + id, Field: "id"}
		case errors.Is(err, raftstore.ErrNotVoter):
			return &apiError{Status: http.StatusConflict, Code: "not_voter", Message: raftstore.ErrNotVoter.Error(), Field: "id"}
		case errors.Is(err, raftstore.ErrNoOtherVoter):
			return &apiError{Status: http.StatusConflict, Code: "no_other_voter", Message: raftstore.ErrNoOtherVoter.Error()}
		case err != nil:
			return err
		}
		writeJSON(w, http.StatusOK, map[string]string{"leader": leader})
		return nil
	}()
	if err != nil {
		s.writeError(w, r, err)
	}
}
