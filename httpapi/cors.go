package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/edgebase/edgebase/auth"
)

// CORS: which browser origins may read the API's answers. An origin is
// allowed by the operator (Config.CORSOrigins: every project, every route)
// or by a project's owners (PUT /api/origins: that project's requests only).
// A disallowed origin gets no Access-Control-* header; the request is still
// served (the browser refuses to read the answer), as for any client that
// sends no Origin. See docs/api.md, "CORS".
const (
	corsAllowMethods = "GET, HEAD, POST, PUT, DELETE"
	corsAllowHeaders = "Authorization, Content-Type, X-Project-Id, X-API-Key, If-Match, X-Min-Revision, X-Request-Id"
	corsExpose       = "X-Revision, X-Request-Id, Retry-After, ETag"
	// corsMaxAge is how long (seconds) a browser may reuse a preflight.
	corsMaxAge = "600"
)

var errOriginNotAllowed = newError(http.StatusForbidden, "origin_not_allowed", "this Origin is not allowed by the operator or by any project of the cluster")

// isPreflight: a browser's CORS preflight, not any OPTIONS request (those
// go to the routes, which answer 405 with Allow).
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// sameOrigin: Origin names the host the request was sent to; the browser
// needs no CORS header for it.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// preflight answers a CORS preflight. It names no project (browsers send
// no custom header in it), so an origin passes when the operator or any
// project of the cluster allows it; the real request is judged again.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	ok := sameOrigin(origin, r.Host)
	if !ok {
		canon, err := auth.CanonicalOrigin(origin)
		if err == nil {
			ok = slices.Contains(s.corsOrigins, canon)
			if !ok {
				if ok, err = s.accounts.AnyProjectAllows(canon); err != nil {
					s.writeError(w, r, err)
					return
				}
			}
		}
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if !ok {
		s.writeError(w, r, errOriginNotAllowed)
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// corsHeaders adds the CORS headers of a real request whose Origin is
// allowed for it, before the route runs, so that error answers carry them
// too. It reads only this node's memory and applied state.
func (s *Server) corsHeaders(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" || sameOrigin(origin, r.Host) {
		return
	}
	w.Header().Add("Vary", "Origin")
	if !s.originAllowedFor(r, origin) {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExpose)
}

// originAllowedFor: the operator's origins pass everywhere; a project's
// origins pass for that project's API requests (the project of
// X-Project-Id, else of the bearer session) and for the public assets
// under /_/ (the SDK a page of any project imports).
func (s *Server) originAllowedFor(r *http.Request, origin string) bool {
	canon, err := auth.CanonicalOrigin(origin)
	if err != nil {
		return false
	}
	if slices.Contains(s.corsOrigins, canon) {
		return true
	}
	p := r.URL.Path
	if strings.HasPrefix(p, "/_/") {
		ok, err := s.accounts.AnyProjectAllows(canon)
		return err == nil && ok
	}
	if !strings.HasPrefix(p, "/api/") || p == "/api/openapi.json" {
		return false
	}
	pid := r.Header.Get("X-Project-Id")
	if pid == "" {
		// Caller answers from memory when it can, else from this node's
		// applied state: never a round trip. A bad token is no project.
		if tok := bearer(r); tok != "" {
			if pr, err := s.accounts.Caller(tok); err == nil {
				pid = pr.ProjectID
			}
		}
	}
	if pid == "" {
		return false
	}
	ok, err := s.accounts.OriginAllowed(pid, canon)
	return err == nil && ok
}

type originsBody struct {
	Origins []string `json:"origins"`
}

// handleOrigins serves GET and PUT /api/origins (and its older name
// /api/realtime/origins): the browser origins, besides the node's own and
// the operator's, allowed to call the project's API and open realtime
// connections to it. Owners only.
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
