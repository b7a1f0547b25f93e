package docs_test

import (
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/edgebase/edgebase/docs"
)

// The document is valid OpenAPI 3.1 (checked against the specification's
// own schema), every reference resolves, and it keeps the conventions the
// API keeps: every operation has a unique id and a summary, and every
// response declares X-Request-Id, which every answer carries.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := libopenapi.NewDocument(docs.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", v)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("build model (unresolved references?): %v", err)
	}
	v, verrs := validator.NewValidator(doc)
	if len(verrs) > 0 {
		t.Fatalf("validator: %v", verrs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, f := range e.SchemaValidationErrors {
				t.Errorf("  %s: %s", f.FieldPath, f.Reason)
			}
		}
	}
	ids := map[string]string{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			where := strings.ToUpper(method) + " " + path
			if op.OperationId == "" || op.Summary == "" {
				t.Errorf("%s: operationId and summary are required", where)
			}
			if prev, dup := ids[op.OperationId]; dup {
				t.Errorf("%s: operationId %q is also %s's", where, op.OperationId, prev)
			}
			ids[op.OperationId] = where
			checkResponses(t, where, op)
		}
	}
}

func checkResponses(t *testing.T, where string, op *v3.Operation) {
	t.Helper()
	if op.Responses == nil {
		t.Errorf("%s: no responses", where)
		return
	}
	all := map[string]*v3.Response{}
	for code, r := range op.Responses.Codes.FromOldest() {
		all[code] = r
	}
	if op.Responses.Default == nil {
		t.Errorf("%s: no default response (every route may answer an edge refusal)", where)
	} else {
		all["default"] = op.Responses.Default
	}
	for code, r := range all {
		if code == "101" {
			continue // the upgrade: the WebSocket library answers it
		}
		var h *v3.Header
		if r.Headers != nil {
			h = r.Headers.GetOrZero("X-Request-Id")
		}
		if h == nil || !h.Required {
			t.Errorf("%s %s: X-Request-Id is not declared required", where, code)
		}
	}
}
