package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"

	edgebasejs "github.com/edgebase/edgebase/clients/js"
)

func TestSDKFiles(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		path, contentType string
		body              []byte
	}{
		{"/_/sdk/edgebase.js", "text/javascript; charset=utf-8", edgebasejs.Source},
		{"/_/sdk/edgebase.d.ts", "application/typescript; charset=utf-8", edgebasejs.Types},
	} {
		t.Run(tc.path, func(t *testing.T) {
			// Any origin may import it: a public file without credentials.
			r := e.mustSend(t, http.MethodGet, tc.path, map[string]string{"Origin": "https://anyone.example"}, "")
			if r.Status != http.StatusOK || !bytes.Equal(r.Body, tc.body) {
				t.Fatalf("GET: status %d, %d bytes (want %d)", r.Status, len(r.Body), len(tc.body))
			}
			if got := r.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != "*" {
				t.Errorf("Access-Control-Allow-Origin %q, want *", got)
			}
			etag := r.Header.Get("ETag")
			if len(etag) < 10 || etag[0] != '"' {
				t.Fatalf("ETag %q", etag)
			}
			h := e.mustSend(t, http.MethodHead, tc.path, nil, "")
			if h.Status != http.StatusOK || len(h.Body) != 0 || h.Header.Get("ETag") != etag || h.Header.Get("Content-Type") != tc.contentType {
				t.Errorf("HEAD: status %d, %d bytes, ETag %q, Content-Type %q", h.Status, len(h.Body), h.Header.Get("ETag"), h.Header.Get("Content-Type"))
			}
			for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
				if nm := e.mustSend(t, http.MethodGet, tc.path, map[string]string{"If-None-Match": inm}, ""); nm.Status != http.StatusNotModified || len(nm.Body) != 0 {
					t.Errorf("If-None-Match %s: status %d, %d bytes", inm, nm.Status, len(nm.Body))
				}
			}
			if other := e.mustSend(t, http.MethodGet, tc.path, map[string]string{"If-None-Match": `"other"`}, ""); other.Status != http.StatusOK {
				t.Errorf("If-None-Match of another version: status %d", other.Status)
			}
			checkError(t, e.mustSend(t, http.MethodPost, tc.path, nil, ""), http.StatusMethodNotAllowed, "method_not_allowed", "")
		})
	}
}
