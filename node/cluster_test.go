package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

func TestSingleNodeSmoke(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 1})
	p := c.CreateProject(0)
	h := map[string]string{"Authorization": "Bearer " + p.OwnerToken}
	var doc struct {
		Collection string
		Revision   uint64
	}
	if st := c.Do(0, http.MethodPost, "/api/db", h, map[string]any{"collection": "a/b", "data": map[string]int{"x": 1}}, &doc); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	if doc.Collection != "a/b" || doc.Revision == 0 {
		t.Fatalf("unexpected document %+v", doc)
	}
	_ = time.Second
}
