package httpapi

import (
	_ "embed"
	"net/http"
)

type originsBody struct {
	Origins []string `json:"origins"`
}

// handleOrigins serves GET and PUT /api/realtime/origins: the browser
// origins (besides the node's own) allowed to open realtime connections to
// the project. Owners only.
func (s *Server) handleOrigins(w http.ResponseWriter, r *http.Request) {
	if err := s.originsAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) originsAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		return methodNotAllowed("GET", "PUT")
	}
	var body originsBody
	if r.Method == http.MethodPut {
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
		if body.Origins == nil {
			return badField("origins", "invalid_argument", "origins is required (an array of origins such as https://app.example.com)")
		}
	}
	ctx := r.Context()
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return err
	}
	p, err := s.projectPrincipal(ctx, r, pid)
	if err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		if p.Role != "owner" {
			return newError(http.StatusForbidden, "forbidden", "only an owner may read or change the allowed origins")
		}
		list, err := s.accounts.Origins(pid)
		if err != nil {
			return err
		}
		if list == nil {
			list = []string{}
		}
		writeJSON(w, http.StatusOK, originsBody{Origins: list})
		return nil
	}
	list, rev, err := s.accounts.SetOrigins(ctx, p, body.Origins)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, originsBody{Origins: list})
}

//go:embed live.html
var livePage []byte

// handleLivePage serves the realtime demo page: HTML and a module script,
// built on the JavaScript SDK it imports from /_/sdk/edgebase.js, that log in
// and show a path's documents updating live.
func (s *Server) handleLivePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, methodNotAllowed("GET"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// script-src: the page's inline module and the SDK it imports (same
	// origin); connect-src 'self' covers its fetches and the ws:/wss:
	// realtime connection to this host (CSP Level 3).
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(livePage)
}
