package query

import (
	"encoding/json"
	"testing"
)

var benchDoc = json.RawMessage(`{"status":"open","total":421.5,"createdAt":1712345678901,"owner":"u123","meta":{"by":"u1","tags":["a","b"]}}`)

func BenchmarkMatchSortKey(b *testing.B) {
	c, err := Parse([]byte(`{"collection":"orders","where":[{"field":"status","op":"==","value":"open"}],"orderBy":[{"field":"createdAt","direction":"desc"}],"limit":20}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !c.Match(benchDoc) {
			b.Fatal("no match")
		}
		_ = c.SortKey("p1/orders/o0000001", benchDoc)
	}
}

func BenchmarkEntry(b *testing.B) {
	ix := Index{Collection: "orders", Fields: []IndexField{{Field: "status"}, {Field: "createdAt", Direction: "desc"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ix.Entry("p1/orders/o0000001", benchDoc); !ok {
			b.Fatal("no entry")
		}
	}
}
