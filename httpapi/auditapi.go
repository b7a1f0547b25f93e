package httpapi

import "net/http"

// Scaffolding: the audit helper replaces this file.

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNotBuilt) }
