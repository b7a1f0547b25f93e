package httpapi

import (
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/edgebase/edgebase/console"
)

// consoleCSP is the Content-Security-Policy of every console answer: scripts,
// styles and connections from the node itself only, no inline script or
// style (a style="" attribute included), no plugins, no framing, no form
// posted anywhere.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleFiles are the embedded console files by name under static/ (e.g.
// "app.js", "pages/data.js"), each with its validator, computed once.
type consoleFiles map[string]*sdkFile

func loadConsole() (consoleFiles, error) {
	files := consoleFiles{}
	err := fs.WalkDir(console.Static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(console.Static, p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "static/")] = newSDKFile(b, consoleType(p))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console files: %w", err)
	}
	if files["index.html"] == nil {
		return nil, fmt.Errorf("console files: no static/index.html")
	}
	return files, nil
}

func consoleType(p string) string {
	switch path.Ext(p) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return "application/octet-stream"
}

// consoleRoutes serves the admin console: /_/ is its page, /_/console/{file}
// and /_/console/pages/{file} its modules and styles. Every answer, errors
// included, carries the console's CSP and security headers. A name is
// looked up among the embedded files, never on a file system: no listing,
// no other file.
func (s *Server) consoleRoutes() {
	files, err := loadConsole()
	if err != nil {
		// The files are embedded at build time: only a broken build gets here.
		s.logger.Error("the admin console is unavailable", "err", err)
		files = consoleFiles{}
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such console file"})
	}
	// "/_/" is a subtree: the page itself at exactly /_/, a 404 below it
	// (the longer patterns of /_/live and /_/sdk/ win over it).
	s.mux.HandleFunc("/_/", s.consoleOnly(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_/" || files["index.html"] == nil {
			notFound(w, r)
			return
		}
		serveConsole(w, r, files["index.html"])
	}))
	file := func(dir string) http.HandlerFunc {
		return s.consoleOnly(func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue("file")
			f := files[dir+name]
			if f == nil || strings.ContainsAny(name, "/\\") || dir+name == "index.html" {
				notFound(w, r)
				return
			}
			serveConsole(w, r, f)
		})
	}
	s.mux.HandleFunc("/_/console/{file}", file(""))
	s.mux.HandleFunc("/_/console/pages/{file}", file("pages/"))
}

// consoleOnly sets the console's headers on every answer and allows GET
// (and HEAD, served as GET: see asGet).
func (s *Server) consoleOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", consoleCSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		if r.Method != http.MethodGet {
			s.writeError(w, r, methodNotAllowed("GET", "HEAD"))
			return
		}
		h(w, r)
	}
}

// serveConsole answers with f, or 304 when If-None-Match names it. The
// files change with the binary only: no-cache makes the browser revalidate.
func serveConsole(w http.ResponseWriter, r *http.Request, f *sdkFile) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Length", itoa(uint64(len(f.body))))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.body)
}
