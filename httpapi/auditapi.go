package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/edgebase/edgebase/auth"
)

// handleAudit serves GET /api/auth/audit: a page of the project's security
// audit log, newest first, for its owners.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	if err := s.auditList(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) auditList(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed("GET")
	}
	q := r.URL.Query()
	limit := 0 // the service's default
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > auth.MaxAuditLimit {
			return badField("limit", "invalid_argument", "limit must be an integer from 1 to "+strconv.Itoa(auth.MaxAuditLimit))
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
	defer cancel()
	// projectKey reads strongly: every event committed before the request
	// (through any node) is on the page.
	p, err := s.projectCaller(ctx, r)
	if err != nil {
		return err
	}
	page, err := s.accounts.ListAudit(ctx, p, q.Get("cursor"), limit, q.Get("userId"), q.Get("type"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
