package httpapi

import "net/http"

// Scaffolding: the email helper replaces this file.

func (s *Server) handleSMTP(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNotBuilt) }
func (s *Server) handleEmailTemplates(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
func (s *Server) handleEmailTemplate(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errNotBuilt)
}
