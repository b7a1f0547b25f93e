package httpapi

import (
	_ "embed"
	"net/http"
)

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
