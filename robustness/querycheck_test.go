package robustness

import (
	"strings"
	"testing"
)

func TestCheckQueryRound(t *testing.T) {
	acked := []AckedCreate{
		{Path: "log/a", Value: "c1-1", Acked: 10},
		{Path: "log/b", Value: "c1-2", Acked: 20},
		{Path: "log/c", Value: "c2-1", Acked: 40}, // after the round's start
	}
	ok := []QueriedDoc{{"log/a", "c1-1"}, {"log/b", "c1-2"}}
	cases := []struct {
		name string
		got  []QueriedDoc
		want string // a substring of the first complaint; "" for none
	}{
		{"complete", ok, ""},
		{"a later create may be there", append(append([]QueriedDoc(nil), ok...), QueriedDoc{"log/c", "c2-1"}), ""},
		{"a create acknowledged before is missing", ok[:1], "missing: log/b"},
		{"a document twice", []QueriedDoc{{"log/a", "c1-1"}, {"log/a", "c1-1"}, {"log/b", "c1-2"}}, "log/a returned twice"},
		{"out of order", []QueriedDoc{{"log/b", "c1-2"}, {"log/a", "c1-1"}}, "out of order"},
		{"a wrong value", []QueriedDoc{{"log/a", "c1-1"}, {"log/b", "c9-9"}}, "has v"},
	}
	for _, tc := range cases {
		bad := CheckQueryRound(30, acked, tc.got, 5)
		switch {
		case tc.want == "" && len(bad) > 0:
			t.Errorf("%s: %v, want no complaint", tc.name, bad)
		case tc.want != "" && (len(bad) == 0 || !strings.Contains(bad[0], tc.want)):
			t.Errorf("%s: %v, want a complaint with %q", tc.name, bad, tc.want)
		}
	}
}
