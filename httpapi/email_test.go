package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// One address typed two ways is one account (NFC, case, IDNA domain), and
// look-alike or over-long addresses are refused.
func TestEmail_IdentityIsNormalised(t *testing.T) {
	e := newEnv(t)
	register := func(email string) reply {
		return e.mustSend(t, http.MethodPost, "/api/auth", projectHeaders(e.p, ""),
			fmt.Sprintf(`{"action":"register","email":%q,"password":%q}`, email, userPassword))
	}
	if r := register("José@Bücher.Example"); r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	// The same address decomposed (NFD), lower-cased, with its domain in
	// A-labels: taken, and it logs in.
	checkError(t, register("jose\u0301@xn--bcher-kva.example"), http.StatusConflict, "email_taken", "email")
	if r := e.login(t, e.p, "JOSE\u0301@BÜCHER.example", userPassword); r.Status != http.StatusOK {
		t.Fatalf("login with another spelling: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{
		"\u0430lice@example.com",          // Cyrillic а in a Latin name
		"p\u0430ypal@example.com",         // the same, inside
		strings.Repeat("a", 65) + "@x.io", // a local part over 64 bytes
		"ada\u200b@example.com",           // a zero-width space
		"ada@exa mple.com",
		"ada@-bad-.example",
	} {
		checkError(t, register(bad), http.StatusBadRequest, "invalid_argument", "email")
	}
	// One script is fine, whichever it is.
	for _, ok := range []string{"алиса@example.com", "ἀλίκη@example.com", strings.Repeat("b", 64) + "@x.io"} {
		if r := register(ok); r.Status != http.StatusCreated {
			t.Errorf("register %q: %d %s", ok, r.Status, r.Body)
		}
	}
}
