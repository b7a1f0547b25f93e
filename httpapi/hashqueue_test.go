package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/httpapi"
)

// A password check that finds the node's hashing queue full is answered at
// once with 503 overloaded and a Retry-After of at least a second, and
// nothing is checked or stored: a shed registration creates no account and
// shed logins count no failed attempt.
func TestAuth_HashQueueFullSheds(t *testing.T) {
	e := newEnv(t)
	n := e.c.Nodes[0].Node
	// One slot and no queue: while the test holds the slot, every password
	// check is refused, without racing real hashes.
	h := auth.NewHasher(auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, 1, auth.WithHashQueue(0))
	svc, err := auth.NewService(auth.Config{Store: n.Store, Hasher: h})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Store: n.Store, Cluster: n.Store, Accounts: svc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	e.base = srv.URL
	keyed := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}

	release, err := h.Occupy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fresh := e.uniq() + "@example.com"
	register := fmt.Sprintf(`{"action":"register","email":%q,"password":%q,"name":"Ada"}`, fresh, userPassword)
	login := fmt.Sprintf(`{"action":"login","email":%q,"password":%q}`, e.user.Email, userPassword)
	wrong := fmt.Sprintf(`{"action":"login","email":%q,"password":"not the password"}`, e.user.Email)
	// More logins than the per-account limit allows failures (10 in 15
	// minutes): were a shed login counted as a failure, the last login
	// below would be refused 429.
	limits := auth.DefaultLimits()
	calls := []struct{ name, body string }{{"register", register}}
	for i := range limits.PasswordPerAccountAddr.Max + 2 {
		calls = append(calls, struct{ name, body string }{"login " + strconv.Itoa(i), login})
		calls = append(calls, struct{ name, body string }{"wrong login " + strconv.Itoa(i), wrong})
	}
	for _, c := range calls {
		r := e.mustSend(t, http.MethodPost, "/api/auth", keyed, c.body)
		checkError(t, r, http.StatusServiceUnavailable, "overloaded", "")
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("%s: Retry-After %q, want whole seconds >= 1", c.name, r.Header.Get("Retry-After"))
		}
	}
	release()

	// The shed registration stored nothing: the address is still free
	// (mustRegister wants 201, not 409 email_taken).
	acc := e.mustRegister(t, e.p, fresh)
	if acc.Email != fresh {
		t.Errorf("registered %q, want %q", acc.Email, fresh)
	}
	r := e.mustSend(t, http.MethodPost, "/api/auth", keyed, login)
	if r.Status != http.StatusOK {
		t.Errorf("login after the queue drained: status %d: %s", r.Status, r.Body)
	}
}
