package robustness

import (
	"encoding/json"
	"strings"
	"testing"
)

func hw(path, data string, out Outcome, rev uint64) HookWrite {
	w := HookWrite{Path: path, Outcome: out, Rev: rev, Node: "n1"}
	if data != "" {
		w.Data = json.RawMessage(data)
	}
	return w
}

func hc(rev uint64, path, data string) HookChange {
	c := HookChange{Revision: rev, Path: path, Delete: data == ""}
	if data != "" {
		c.Data = json.RawMessage(data)
	}
	return c
}

func TestHookExpected(t *testing.T) {
	cases := []struct {
		name      string
		writes    []HookWrite
		committed []HookChange
		types     string // the expected events' types, "c u d" initials
		unknown   int
		wantErr   string // "" for none
	}{
		{name: "acked sets and a delete",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5), hw("h/a", `{"k":2}`, OutOK, 7), hw("h/a", "", OutOK, 9), hw("h/a", `{"k":3}`, OutOK, 10)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`), hc(7, "h/a", `{"k":2}`), hc(9, "h/a", ""), hc(10, "h/a", `{"k":3}`)},
			types:     "cudc"},
		{name: "an acked delete of an absent path commits nothing",
			writes:    []HookWrite{hw("h/a", "", OutOK, 4), hw("h/a", `{"k":1}`, OutOK, 5)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`)},
			types:     "c"},
		{name: "unknown outcome committed is expected",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutUnknown, 0), hw("h/a", `{"k":2}`, OutUnknown, 0), hw("h/b", "", OutUnknown, 0)},
			committed: []HookChange{hc(6, "h/a", `{"k":1}`)},
			types:     "c", unknown: 1},
		{name: "lost acked set",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5), hw("h/a", `{"k":2}`, OutOK, 6)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`)},
			wantErr:   "lost: h/a = {\"k\":2}"},
		{name: "lost acked delete",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5), hw("h/a", "", OutOK, 6)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`)},
			wantErr:   "lost: the delete of h/a"},
		{name: "committed at another revision than acknowledged",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5)},
			committed: []HookChange{hc(8, "h/a", `{"k":1}`)},
			wantErr:   "acknowledged at 5"},
		{name: "a failed write committed",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutFailed, 0)},
			committed: []HookChange{hc(8, "h/a", `{"k":1}`)},
			wantErr:   "whose write failed"},
		{name: "a phantom change",
			writes:    nil,
			committed: []HookChange{hc(8, "h/a", `{"k":1}`)},
			wantErr:   "no write of the run made"},
		{name: "a delete nobody made",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`), hc(6, "h/a", "")},
			wantErr:   "no acknowledged or unknown delete"},
		{name: "the same data twice in the workload",
			writes:    []HookWrite{hw("h/a", `{"k":1}`, OutOK, 5), hw("h/b", `{"k":1}`, OutOK, 6)},
			committed: []HookChange{hc(5, "h/a", `{"k":1}`), hc(6, "h/b", `{"k":1}`)},
			wantErr:   "written twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, unknown, errs := HookExpected("t", tc.writes, tc.committed)
			if tc.wantErr == "" {
				for _, err := range errs {
					t.Error(err)
				}
				var types string
				for _, e := range exp {
					types += e.Type[:1]
				}
				if types != tc.types || unknown != tc.unknown {
					t.Fatalf("types %q, unknown %d; want %q, %d", types, unknown, tc.types, tc.unknown)
				}
				return
			}
			found := false
			for _, err := range errs {
				found = found || strings.Contains(err.Error(), tc.wantErr)
			}
			if !found {
				t.Fatalf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}
