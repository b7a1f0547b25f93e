package httpapi

import (
	"fmt"
	"net/http"
	"path"
)

// Transport limits checked before routing, so that every refusal is in the
// one JSON error shape (Go's server and mux would answer plain text or
// redirect).
const (
	// maxURLBytes bounds the request target (path and query).
	maxURLBytes = 8 << 10
	// maxHeaderBytes bounds the request's header fields, names and values.
	maxHeaderBytes = 32 << 10
)

// edgeRefusal answers what must be refused before any route runs: an
// unclean path (Go's mux would redirect it), an over-long target or header
// block, a declared body over the cap. It returns nil when the request may
// go on.
func (s *Server) edgeRefusal(r *http.Request) *apiError {
	// The path as sent (escaped): a segment with an encoded "/" is one
	// segment, which the routes judge. "/_/" (the console) is the one
	// route that ends in a slash.
	if p := r.URL.EscapedPath(); p == "" || p[0] != '/' || (p != "/" && p != "/_/" && path.Clean(p) != p) {
		return newError(http.StatusNotFound, "not_found", "no such route (the path is not in canonical form)")
	}
	if len(r.URL.RequestURI()) > maxURLBytes {
		return newError(http.StatusRequestURITooLong, "uri_too_long", fmt.Sprintf("the request target exceeds %d bytes", maxURLBytes))
	}
	n := 0
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	if n > maxHeaderBytes {
		return newError(http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", fmt.Sprintf("the request's header fields exceed %d bytes", maxHeaderBytes))
	}
	if r.ContentLength > s.limits.MaxBodyBytes {
		return newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body exceeds %d bytes", s.limits.MaxBodyBytes))
	}
	return nil
}

// headWriter answers a HEAD request as the GET would, without the body.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }

// Unwrap lets http.ResponseController reach the connection.
func (h headWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// asGet serves a HEAD request through the GET route: every GET route
// answers HEAD with the same status and headers and no body.
func asGet(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	if r.Method != http.MethodHead {
		return w, r
	}
	r2 := r.Clone(r.Context())
	r2.Method = http.MethodGet
	return headWriter{w}, r2
}

// getOnly refuses every method but GET (and HEAD, served as GET) with 405.
func (s *Server) getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			s.writeError(w, r, methodNotAllowed("GET", "HEAD"))
			return
		}
		h(w, r)
	}
}
