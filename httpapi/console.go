package httpapi

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/edgebase/edgebase/console"
)

// consoleCSP is the Content-Security-Policy of every console answer: scripts,
// styles and connections from the node itself only, no inline script or
// style, no plugins, no framing.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleFiles are the embedded console files by name under static/, each
// with its validator, computed once.
type consoleFiles map[string]*sdkFile

func loadConsole() consoleFiles {
	files := consoleFiles{}
	_ = fs.WalkDir(console.Static, "static", func(p string, d fs.DirEntry, err error) error {
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
	return files
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

// consoleRoutes serves the admin console: /_/ is its page, /_/console/...
// its modules and styles.
func (s *Server) consoleRoutes() {
	files := loadConsole()
	s.mux.HandleFunc("/_/{$}", s.getOnly(serveConsole(files, "index.html")))
	s.mux.HandleFunc("/_/console/{file...}", s.getOnly(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" || files[name] == nil {
			s.writeError(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such console file"})
			return
		}
		serveConsole(files, name)(w, r)
	}))
}

func serveConsole(files consoleFiles, name string) http.HandlerFunc {
	f := files[name]
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
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
}
