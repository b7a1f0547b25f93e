package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
)

// index_required names the index to declare as PUT /api/db/indexes takes
// it; index_building (the serving index is declared but not built on this
// node yet, which a test through a node cannot hold still) is a 503 with
// Retry-After.
func TestIndexRequiredAnswer(t *testing.T) {
	ix := query.Index{Collection: "orders", Fields: []query.IndexField{{Field: "status", Direction: "asc"}, {Field: "createdAt", Direction: "desc"}}}
	ae := errorFor(queryError(&raftstore.IndexRequiredError{Index: ix, ScanLimit: 10000}))
	want := `create the index {"collection":"orders","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]} with PUT /api/db/indexes`
	if ae.Status != http.StatusBadRequest || ae.Code != "index_required" || ae.Field != "" || !strings.Contains(ae.Message, want) || !strings.Contains(ae.Message, "10000") {
		t.Errorf("index_required: %+v; want 400 index_required naming %s", ae, want)
	}
	if ix.Fields[0].Direction != "asc" {
		t.Errorf("the message changed the error's index: %+v", ix)
	}
	group := query.Index{Collection: "notes", CollectionGroup: true, Fields: []query.IndexField{{Field: "at"}}}
	ae = errorFor(queryError(&raftstore.IndexRequiredError{Index: group, Building: true, ScanLimit: 5}))
	want = `{"collection":"notes","collectionGroup":true,"fields":[{"field":"at"}]}`
	if ae.Status != http.StatusServiceUnavailable || ae.Code != "index_building" || ae.RetryAfter < 1 || !strings.Contains(ae.Message, want) {
		t.Errorf("index_building: %+v; want 503 index_building with Retry-After naming %s", ae, want)
	}
	// A query no index can serve (no == filter, no order) names none.
	ae = errorFor(queryError(&raftstore.IndexRequiredError{Index: query.Index{Collection: "logs"}, ScanLimit: 7}))
	if ae.Status != http.StatusBadRequest || ae.Code != "index_required" || !strings.Contains(ae.Message, "no index can serve it") || strings.Contains(ae.Message, "create the index") {
		t.Errorf("index_required without an index: %+v", ae)
	}
	qe := &query.Error{Field: "where[2].op", Code: "invalid_argument", Message: "unknown operator"}
	if ae = errorFor(queryError(qe)); ae.Status != http.StatusBadRequest || ae.Field != "where[2].op" || ae.Code != "invalid_argument" {
		t.Errorf("query error: %+v", ae)
	}
}

// A list Apply refuses as content (only a node of another version could
// let one through ParseIndexes) is a 400 on indexes.
func TestInvalidIndexesRefusal(t *testing.T) {
	ae := errorFor(opError(&raftstore.TxnResult{Err: raftstore.ErrCodeInvalidIndexes}, "_indexes", ""))
	if ae.Status != http.StatusBadRequest || ae.Code != "invalid_argument" || ae.Field != "indexes" {
		t.Errorf("invalid_indexes: %+v, want 400 invalid_argument on indexes", ae)
	}
}
