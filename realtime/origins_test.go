package realtime_test

import (
	"net/http"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

// TestOperatorOrigins: an origin the operator allows (--cors-origins) opens
// realtime connections to every project, with header or message auth, and
// another origin still cannot.
func TestOperatorOrigins(t *testing.T) {
	const app = "https://app.example.com"
	h := startHarness(t, nodetest.Options{CORSOrigins: []string{"HTTPS://App.Example.com:443"}})
	p := h.newProject(t)
	alice := h.register(t, p, "alice")
	withOrigin := func(hdr http.Header, origin string) http.Header {
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set("Origin", origin)
		return hdr
	}

	c, resp, err := h.dial(t, "", withOrigin(authHeaders(p, alice.Token), app))
	if err != nil {
		t.Fatalf("operator origin refused (header auth): %v (%s)", err, respText(resp))
	}
	c.expect("ready")
	c, resp, err = h.dial(t, "", withOrigin(nil, app))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, respText(resp))
	}
	c.send(map[string]string{"op": "auth", "token": alice.Token, "projectId": p.ID, "apiKey": p.APIKey})
	c.expect("ready")

	_, resp, err = h.dial(t, "", withOrigin(authHeaders(p, alice.Token), "https://other.example.com"))
	if err == nil {
		t.Fatalf("an origin neither the operator nor the project allows upgraded")
	}
	if st, code := errorCode(t, resp); st != http.StatusForbidden || code != "origin_not_allowed" {
		t.Fatalf("other origin: HTTP %d %s, want 403 origin_not_allowed", st, code)
	}
}
