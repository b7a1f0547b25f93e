package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// authBody holds every field any /api/auth action reads.
type authBody struct {
	Action   *string `json:"action"`
	Email    string  `json:"email"`
	Password string  `json:"password"`
	Name     string  `json:"name"`
}

// actions the interface names that a later part of the authentication area
// implements; until then they answer 501 rather than pretend.
var pendingActions = map[string]bool{
	"login-verify": true, "change-password": true, "reset-password": true,
	"set-role": true, "disable-totp": true,
}

// authTimeout bounds one authentication request, hashing queue included.
const authTimeout = 15 * time.Second

// projectKey checks X-Project-Id and X-API-Key after a strong sync, so that a
// project created through any node is known here.
func (s *Server) projectKey(ctx context.Context, r *http.Request) (string, error) {
	pid, key := r.Header.Get("X-Project-Id"), r.Header.Get("X-API-Key")
	if pid == "" || key == "" {
		return "", auth.ErrMissingAPIKey
	}
	if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
		return "", err
	}
	return pid, s.accounts.CheckAPIKey(pid, key)
}

func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request) {
	if err := s.authAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) authAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	// Password hashing waits for a slot; under a flood a request gives up
	// with 503 instead of queueing for as long as its client waits.
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	var body authBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.Action == nil || *body.Action == "" {
		return badField("action", "unknown_action", "action is required")
	}
	action := *body.Action
	switch action {
	case "register", "login", "logout", "me":
	default:
		if pendingActions[action] {
			return newError(http.StatusNotImplemented, "not_implemented", "action "+action+" is not available yet")
		}
		return badField("action", "unknown_action", "unknown action "+action)
	}
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return err
	}
	switch action {
	case "register":
		if body.Email == "" {
			return badField("email", "invalid_argument", "email is required")
		}
		if body.Password == "" {
			return badField("password", "invalid_argument", "password is required")
		}
		res, err := s.accounts.Register(ctx, pid, body.Email, body.Password, body.Name)
		if err != nil {
			return err
		}
		w.Header().Set("X-Revision", itoa(res.Revision))
		writeJSON(w, http.StatusCreated, res)
	case "login":
		if body.Email == "" {
			return badField("email", "invalid_argument", "email is required")
		}
		if body.Password == "" {
			return badField("password", "invalid_argument", "password is required")
		}
		res, err := s.accounts.Login(ctx, pid, body.Email, body.Password)
		if err != nil {
			return err
		}
		if res.Revision > 0 {
			w.Header().Set("X-Revision", itoa(res.Revision))
		}
		writeJSON(w, http.StatusOK, res)
	case "logout":
		p, err := s.principal(ctx, r, raftstore.Strong, 0)
		if err != nil {
			return err
		}
		if p.ProjectID != pid {
			return newError(http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token")
		}
		rev, err := s.accounts.Logout(ctx, bearer(r))
		if err != nil {
			return err
		}
		w.Header().Set("X-Revision", itoa(rev))
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	case "me":
		p, err := s.principal(ctx, r, raftstore.Strong, 0)
		if err != nil {
			return err
		}
		u, err := s.accounts.Me(p.ProjectID, p.UserID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"user": u})
	}
	return nil
}

// handleAuthenticator answers the interface's authenticator routes with 501
// until TOTP lands, so clients see "not yet", not "no such route".
func (s *Server) handleAuthenticator(w http.ResponseWriter, r *http.Request) {
	switch r.PathValue("op") {
	case "enroll", "confirm", "verify":
		if r.Method != http.MethodPost {
			s.writeError(w, r, methodNotAllowed("POST"))
			return
		}
		s.writeError(w, r, newError(http.StatusNotImplemented, "not_implemented", "the authenticator is not available yet"))
	default:
		s.writeError(w, r, newError(http.StatusNotFound, "not_found", "no such route"))
	}
}

func (s *Server) handleRules(w http.ResponseWriter, r *http.Request) {
	if err := s.rulesAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

type rulesResponse struct {
	Rules    []auth.Rule `json:"rules"`
	Revision uint64      `json:"revision,omitempty"`
}

// rulesAction serves GET and PUT /api/db/rules, for owners only.
func (s *Server) rulesAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		return methodNotAllowed("GET", "PUT")
	}
	ctx := r.Context()
	var rs auth.RuleSet
	if r.Method == http.MethodPut {
		if err := s.decodeBody(w, r, &rs); err != nil {
			return err
		}
		if rs.Rules == nil {
			return badField("rules", "invalid_argument", "rules is required (an array of {match, read, write})")
		}
	}
	p, err := s.principal(ctx, r, raftstore.Strong, 0)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return newError(http.StatusForbidden, "forbidden", "only an owner may read or change the access rules")
	}
	if r.Method == http.MethodGet {
		rules, err := s.accounts.Rules(p.ProjectID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, rulesResponse{Rules: rules.Source().Rules})
		return nil
	}
	rev, err := s.accounts.SetRules(ctx, p.ProjectID, rs)
	if err != nil {
		return err
	}
	w.Header().Set("X-Revision", itoa(rev))
	writeJSON(w, http.StatusOK, rulesResponse{Rules: rs.Rules, Revision: rev})
	return nil
}
