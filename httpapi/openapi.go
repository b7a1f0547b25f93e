package httpapi

import (
	"net/http"
	"strconv"

	"github.com/edgebase/edgebase/docs"
)

// handleOpenAPI serves the OpenAPI document (docs/openapi.json), open like
// /healthz: it describes the API, not any project.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc := docs.OpenAPI()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}
