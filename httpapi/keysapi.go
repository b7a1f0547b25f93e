package httpapi

import "net/http"

// A project's API keys (owners only): GET and POST /api/keys, DELETE
// /api/keys/{id}. Rotation is create, deploy, delete; the project key the
// request itself carries is checked after a strong sync, so a deleted key
// fails on every node from the delete's answer on.

type keyBody struct {
	Name string `json:"name"`
}

// handleKeys serves GET /api/keys (the list) and POST /api/keys {name}
// (a new key, shown once).
func (s *Server) handleKeys(w http.ResponseWriter, r *http.Request) {
	if err := s.keysAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) keysAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return methodNotAllowed("GET", "POST")
	}
	if err := checkParams(r, ""); err != nil {
		return err
	}
	var body keyBody
	if r.Method == http.MethodPost {
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
		if err := required("name", body.Name); err != nil {
			return err
		}
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	p, err := s.ownerCall(ctx, r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		list, err := s.accounts.ListAPIKeys(p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"keys": list})
		return nil
	}
	k, err := s.accounts.CreateAPIKey(ctx, p, body.Name, s.clientAddr(r))
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusCreated, k.Revision, k)
}

// handleKey serves DELETE /api/keys/{id}.
func (s *Server) handleKey(w http.ResponseWriter, r *http.Request) {
	if err := s.deleteKey(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) error {
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
	rev, err := s.accounts.DeleteAPIKey(ctx, p, r.PathValue("id"), s.clientAddr(r))
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
}
