package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// rawExchange writes req (a raw HTTP/1.1 request) to the node and reads one
// response, within a few seconds: a server that waits for a body it will
// refuse fails the test.
func rawExchange(t *testing.T, base, req string) (*http.Response, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, b
}

func checkRawError(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		json.Unmarshal(body, &e) != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: %d %q %s, want %d JSON error %q", what, resp.StatusCode, resp.Header.Get("Content-Type"), body, status, code)
	}
}

// The transport's edges answer in the JSON error shape, and a refusal
// that needs no body does not wait for one.
func TestEdges_RefusalsAreJSON(t *testing.T) {
	e := newEnv(t)
	host := strings.TrimPrefix(e.base, "http://")

	// A declared body over the cap: 413 at once, before a byte of it.
	resp, body := rawExchange(t, e.base, "POST /api/db HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\n"+
		"Authorization: Bearer "+e.user.Token+"\r\nContent-Length: 20000000\r\n\r\n")
	checkRawError(t, "declared 20 MB body", resp, body, http.StatusRequestEntityTooLarge, "body_too_large")

	// Unclean paths are not redirected.
	for _, p := range []string{"/api//db", "/api/db/../db", "/internal//propose", "/./healthz"} {
		resp, body := rawExchange(t, e.base, "GET "+p+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		checkRawError(t, "GET "+p, resp, body, http.StatusNotFound, "not_found")
	}

	// Over-long target and header block.
	resp, body = rawExchange(t, e.base, "GET /api/db?collection="+strings.Repeat("a", 9000)+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	checkRawError(t, "9 KB target", resp, body, http.StatusRequestURITooLong, "uri_too_long")
	resp, body = rawExchange(t, e.base, "GET /healthz HTTP/1.1\r\nHost: "+host+"\r\nX-Big: "+strings.Repeat("b", 40<<10)+"\r\n\r\n")
	checkRawError(t, "40 KB header", resp, body, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large")

	// Node-to-node endpoints refuse in the same shape.
	// (They carry no request id: they are not the API.)
	resp, body = rawExchange(t, e.base, "POST "+raftstore.InternalPrefix+"propose HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 2\r\n\r\n{}")
	checkRawError(t, "internal call without the secret", resp, body, http.StatusForbidden, "forbidden")
	resp, body = rawExchange(t, e.base, "GET "+raftstore.InternalPrefix+"nothing HTTP/1.1\r\nHost: "+host+"\r\n"+raftstore.SecretHeader+": "+nodetest.Secret+"\r\n\r\n")
	checkRawError(t, "unknown internal endpoint", resp, body, http.StatusNotFound, "not_found")

	// Health endpoints: GET and HEAD only.
	for _, p := range []string{"/healthz", "/readyz"} {
		r := e.mustSend(t, http.MethodPost, p, nil, `{}`)
		checkError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
		if r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: Allow %q", p, r.Header.Get("Allow"))
		}
	}
}

// HEAD works on every GET route: the GET's status and headers, no body.
func TestEdges_HeadMirrorsGet(t *testing.T) {
	e := newEnv(t)
	own := "users/" + e.user.ID + "/h"
	e.mustPut(t, e.user.Token, own, `{"v":1}`)
	for _, tc := range []struct {
		target string
		hdr    map[string]string
	}{
		{"/healthz", nil},
		{"/readyz", nil},
		{docQuery(own), bearer(e.user.Token)},
		{docQuery(own + "-missing"), bearer(e.user.Token)},
		{docQuery("users/" + e.other.ID + "/x"), bearer(e.user.Token)},
		{"/api/db?collection=users&list=true", bearer(e.p.OwnerToken)},
		{"/api/db/rules", bearer(e.p.OwnerToken)},
		{"/nothing/here", nil},
	} {
		get := e.mustSend(t, http.MethodGet, tc.target, tc.hdr, "")
		head := e.mustSend(t, http.MethodHead, tc.target, tc.hdr, "")
		if head.Status != get.Status || len(head.Body) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q (%d body bytes); GET: %d %q", tc.target, head.Status, head.Header.Get("Content-Type"), len(head.Body), get.Status, get.Header.Get("Content-Type"))
		}
	}
}

// A body that repeats an envelope key is refused, not decided by "last
// wins", and stores nothing.
func TestEdges_RepeatedEnvelopeKeyIsRefused(t *testing.T) {
	e := newEnv(t)
	a, b := "users/"+e.user.ID+"/a", "users/"+e.user.ID+"/b"
	for _, body := range []string{
		fmt.Sprintf(`{"collection":%q,"collection":%q,"data":{"v":1}}`, a, b),
		fmt.Sprintf(`{"collection":%q,"data":{"v":1},"data":{"v":2}}`, a),
	} {
		checkError(t, e.mustSend(t, http.MethodPost, "/api/db", bearer(e.user.Token), body), http.StatusBadRequest, "invalid_argument", "")
	}
	checkError(t, e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey},
		`{"action":"login","action":"register","email":"x@example.com","password":"correct horse battery"}`), http.StatusBadRequest, "invalid_argument", "")
	for _, p := range []string{a, b} {
		if _, ok := e.get(t, p); ok {
			t.Errorf("%s was stored from a body with a repeated key", p)
		}
	}
}

// A bogus token is refused at once, before X-Min-Revision is waited on (it
// used to hold a request for the read timeout and answer 503).
func TestEdges_TokenCheckedBeforeMinRevision(t *testing.T) {
	e := newEnv(t)
	own := "users/" + e.user.ID + "/m"
	e.mustPut(t, e.user.Token, own, `{"v":1}`)
	far := map[string]string{"X-Min-Revision": "999999999"}
	for _, tok := range []string{"ebt_bogus", ""} {
		h := map[string]string{"X-Min-Revision": "999999999"}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		start := time.Now()
		r := e.mustSend(t, http.MethodGet, docQuery(own), h, "")
		if took := time.Since(start); r.Status != http.StatusUnauthorized || took > 2*time.Second {
			t.Errorf("token %q with an unreachable X-Min-Revision: %d after %v, want 401 at once: %s", tok, r.Status, took, r.Body)
		}
	}
	// A valid token still waits for the revision (and gives up with 503).
	far["Authorization"] = "Bearer " + e.user.Token
	checkError(t, e.mustSend(t, http.MethodGet, docQuery(own), far, ""), http.StatusServiceUnavailable, "unavailable", "")
	// And a revoked one is refused even on local reads of a fresh node.
	acc := e.mustRegister(t, e.p, "")
	e.mustLogout(t, e.p, acc.Token)
	checkError(t, e.mustSend(t, http.MethodGet, docQuery(own)+"&consistency=local", bearer(acc.Token), ""), http.StatusUnauthorized, "invalid_token", "")
}
