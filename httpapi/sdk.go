package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	edgebasejs "github.com/edgebase/edgebase/clients/js"
)

// sdkFile is one embedded SDK file with its validator, computed once.
type sdkFile struct {
	body        []byte
	contentType string
	etag        string
}

func newSDKFile(body []byte, contentType string) *sdkFile {
	sum := sha256.Sum256(body)
	return &sdkFile{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

var (
	sdkSource = newSDKFile(edgebasejs.Source, "text/javascript; charset=utf-8")
	sdkTypes  = newSDKFile(edgebasejs.Types, "application/typescript; charset=utf-8")
)

// sdkRoutes serves the JavaScript SDK embedded in the binary.
func (s *Server) sdkRoutes() {
	s.mux.HandleFunc("/_/sdk/edgebase.js", s.getOnly(serveSDK(sdkSource)))
	s.mux.HandleFunc("/_/sdk/edgebase.d.ts", s.getOnly(serveSDK(sdkTypes)))
}

// serveSDK answers GET (and HEAD, served as GET: see asGet) with the file. It is public and carries no
// credentials, so any origin may load it: a <script type="module"> on
// another origin is fetched in CORS mode and needs
// Access-Control-Allow-Origin, and "*" is right for a static file (unlike
// the API, which names the allowed origin).
func serveSDK(f *sdkFile) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Cross-Origin-Resource-Policy", "cross-origin")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "public, max-age=300, must-revalidate")
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

// etagMatches reports whether an If-None-Match list names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || part == etag || part == "W/"+etag {
			return true
		}
	}
	return false
}
