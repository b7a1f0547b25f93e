package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A write whose values in a declared index's fields are longer than an
// index entry may be (16 KiB) is refused with 400 on the data, and nothing
// is written; the same value in a field no index declares is stored.
func TestIndexEntryTooLarge(t *testing.T) {
	e := newEnv(t)
	own := e.p.OwnerToken
	r := e.mustSend(t, http.MethodPut, "/api/db/indexes", bearer(own), `{"indexes":[{"collection":"orders","fields":[{"field":"title"}]}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT indexes: %d %s", r.Status, r.Body)
	}
	long := strings.Repeat("t", 17<<10)
	r = e.mustSend(t, http.MethodPost, "/api/db", bearer(own), fmt.Sprintf(`{"collection":"orders/o1","data":{"title":%q}}`, long))
	checkError(t, r, http.StatusBadRequest, "invalid_argument", "data")
	if _, ok := e.get(t, "orders/o1"); ok {
		t.Fatal("the refused write stored orders/o1")
	}
	e.mustPut(t, own, "orders/o2", fmt.Sprintf(`{"body":%q,"title":"short"}`, long))
}
