package httpapi

import "net/http"

// Scaffolding: the users-and-keys helper replaces this file.

func (s *Server) handleKeys(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNotBuilt) }
func (s *Server) handleKey(w http.ResponseWriter, r *http.Request)  { s.writeError(w, r, errNotBuilt) }
